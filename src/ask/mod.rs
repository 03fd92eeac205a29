//! Ask: a read-only analyst bound to one run (SPEC 2.3 `AskSvc`, opgroups 4). Owns whether
//! Ask is available on a run ([`mod@readiness`]).
//!
//! Must not: write a run's workspace or change a run (its tools only read), restart a removed
//! sandbox, write SQL (the run's event log, through `RunStore`), or speak HTTP (the routes are
//! `server::sessions`).

pub mod readiness;

pub use readiness::{readiness, Readiness, Unavailable};
