//! Helpers for tests of the store and of its callers: the one way a test makes a run it does
//! not care about the details of. Compiled only for this crate's unit tests and under the
//! `test-support` feature (which the integration tests enable through the crate's
//! dev-dependency on itself), so no build a user runs contains it.
//!
//! Must not: be reached by non-test code, or hide a store error from a test that checks for
//! one (such a test calls `create_run` itself).

use super::{NewRun, RunRow, RunStore};

/// Creates a run titled `title`, everything else default; its row.
///
/// # Panics
/// When the store refuses: a test's setup failed, and the test should stop there.
pub fn new_run<S: RunStore + ?Sized>(store: &S, title: &str) -> RunRow {
    store
        .create_run(NewRun {
            title: title.to_string(),
            ..NewRun::default()
        })
        .unwrap_or_else(|e| panic!("creating test run {title:?}: {e}"))
}
