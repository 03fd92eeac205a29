//! The engine: walks a validated [`crate::workflow::Workflow`], runs each stage's handler,
//! picks the next edge, and records events and checkpoints through the run store.
//! Must not parse DOT or know about HTTP.

pub mod cancel;
pub mod command;
pub mod failure;
pub mod human;
pub mod output;
