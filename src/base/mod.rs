//! Shared primitives below every other module: the cancel token a run, a stage and a process
//! share ([`cancel`]), the secret redactor every recorded event passes through
//! ([`redact`]), timestamps and ULIDs ([`clock`]), private files and directories ([`perms`]),
//! random bytes from the kernel ([`random`]), path globs ([`glob`]), [`hex`], per-thread reusable byte buffers
//! for the command path ([`scratch`]), and the vault names the server keeps for itself
//! ([`SERVER_OWNED_SECRETS`]); under the `test-support` feature, the hooks an
//! end-to-end test sets through the binary's environment (`test_hooks`: a pause point, a
//! shifted clock).
//! Owns only these small, dependency-light types. Must not touch: anything else in the crate
//! (this module imports nothing from it), so that the language, the engine, the LLM clients
//! and the server can all use it without importing each other.

pub mod cancel;
pub mod clock;
pub mod event_kind;
pub mod glob;
pub mod perms;
pub mod random;
pub mod redact;
pub mod scratch;
#[cfg(any(test, feature = "test-support"))]
pub mod test_hooks;

use std::fmt::Write as _;

/// Vault entries the server keeps for itself: never given to a run (neither by `[run]
/// secrets` nor by a `{{ secrets.NAME }}` in an environment's `env`).
pub const SERVER_OWNED_SECRETS: [&str; 9] = [
    "SESSION_SECRET",
    "CODEHOST_CLIENT_SECRET",
    "OBJECT_STORE_ACCESS_KEY_ID",
    "OBJECT_STORE_SECRET_ACCESS_KEY",
    // The code-host integration's: svc pushes and opens pull requests itself.
    "CODEHOST_TOKEN",
    "CODEHOST_APP_PRIVATE_KEY",
    "CODEHOST_WEBHOOK_SECRET",
    // Chat's: svc posts and verifies callbacks itself.
    "CHAT_BOT_TOKEN",
    "CHAT_SIGNING_SECRET",
];

/// Lowercase hex of `bytes`: the one hex encoder of the crate (ids, digests, tokens).
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}
