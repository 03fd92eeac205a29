//! Ask: a read-only analyst bound to one run (SPEC 2.3 `AskSvc`, opgroups 4). Owns whether
//! Ask is available on a run ([`mod@readiness`]), sessions as `run.session.*` events in the
//! run's own log ([`events`]), the read-only tools scoped to that run ([`tools`]), what the
//! model is told ([`snapshot`]) and running turns ([`service`]).
//!
//! Must not: write a run's workspace or change a run (its tools only read), restart a removed
//! sandbox, write SQL (the run's event log, through `RunStore`), or speak HTTP (the routes are
//! `server::sessions`).

pub mod events;
pub mod readiness;
pub mod service;
pub mod snapshot;
pub mod tools;

pub use readiness::{readiness, Readiness, Unavailable};
pub use service::{AskError, Sessions, StartedTurn};
