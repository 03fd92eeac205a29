//! Automations: runs that start by themselves, on a schedule, an API call, a signed webhook
//! delivery or a code-host event, with every fire on record.
//!
//! - [`model`]: the definition (a catalog [`crate::catalog::Kind`]) and its typed form.
//! - [`schedule`]: five-field cron in an IANA time zone.
//! - [`mapping`]: run inputs from a delivery's JSON payload (`$.a.b[0]` paths).
//! - [`codehost`]: GitHub's push / pull request / issue deliveries, event names and filters.
//! - [`fires`]: the [`fires::Dispatcher`]: the fire protocol, the policies, deliveries, and
//!   the scheduler thread.
//!
//! Owns: what an automation is and when it fires. Must not touch: HTTP, SQL (the store's),
//! or how a run is created (the server hands that in).

pub mod codehost;
pub mod fires;
pub mod mapping;
pub mod model;
pub mod schedule;

pub use fires::{Dispatcher, LaunchRequest, Launcher};
pub use model::{
    Automation, Automations, Misfire, Overlap, Target, Trigger, TriggerKind, TriggerSpec,
};
