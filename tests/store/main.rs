//! Integration tests of the store (`svc::internal::store`) through its public API, in every feature
//! set: both `RunStore` implementations, startup activation and legacy import, and crash
//! safety under SIGKILL. One test binary; one module per area; helpers only in
//! `tests/support/`.

#[path = "../support/mod.rs"]
mod support;

// Atomicity under concurrent writers, tombstones, blobs, the hub, typed errors.
mod api;
// Startup activation: legacy import byte for byte, its backup, idempotence, failures.
mod activation;
// A child process appending events, killed with SIGKILL at seeded moments: nothing lost.
mod crash;
