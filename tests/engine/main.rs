//! Integration tests of the engine: the embedding front door (`svc::Engine`, in every
//! feature set) and `svc run` / `svc resume` end to end on `testdata/engine/` (with `cli`).
//! One test binary; one module per area; helpers only in `tests/support/`.

#[path = "../support/mod.rs"]
mod support;

// The embedding API as another program uses it: store file, commands, gates, cancel, resume.
mod embed;
// Routing, failures, retries, goal gates, timeouts, structured output, exit codes.
#[cfg(feature = "cli")]
mod run;
// Human gates through `svc run`: scripted answers, auto-approve, timeouts.
#[cfg(feature = "cli")]
mod human;
// Parallel fan-out and fan-in: isolation, merge order, `max_parallel`, fan-in outcomes.
#[cfg(feature = "cli")]
mod parallel;
// Manager loops: stop conditions, max cycles, child runs and their events.
#[cfg(feature = "cli")]
mod manager;
// `svc run` killed or cancelled mid-stage, then `svc resume` from the last checkpoint.
#[cfg(feature = "cli")]
mod resume;
// `svc rewind RUN --to NODE`: a new run from the checkpoint before a node, run to its end.
#[cfg(feature = "cli")]
mod rewind;
