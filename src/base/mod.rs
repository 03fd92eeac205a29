//! Shared primitives below every other module: the cancel token a run, a stage and a process
//! share ([`cancel`]), and the secret redactor every recorded event passes through
//! ([`redact`]), random bytes from the kernel ([`random`]), and per-thread reusable byte
//! buffers for the command path ([`scratch`]).
//! Owns only these small, dependency-light types. Must not touch: anything else in the crate
//! (this module imports nothing from it), so that the language, the engine, the LLM clients
//! and the server can all use it without importing each other.

pub mod cancel;
pub mod random;
pub mod redact;
pub mod scratch;
