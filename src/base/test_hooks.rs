//! Hooks an end-to-end test sets through the environment of the real binary: a pause point
//! where the test can `kill -9` the server between two writes it wants to separate, and a
//! wall clock shifted to a chosen start time so a schedule comes due in seconds.
//!
//! Owns: the `SVC_TEST_*` variables below and what they do. Must not: exist in a user's build
//! (the module is compiled only for this crate's tests and under the `test-support` feature),
//! or do anything when its variables are unset.

use super::clock::{parse_ts, Clock, SystemClock};
use std::sync::Arc;
use std::time::Duration;

/// The pause point to stop at (e.g. `fire_recorded`).
pub const PAUSE_AT_VAR: &str = "SVC_TEST_PAUSE_AT";
/// The file written (with the point's detail) when the process reaches the pause point.
pub const PAUSE_MARK_VAR: &str = "SVC_TEST_PAUSE_MARK";
/// An RFC 3339 time: the scheduler's clock reads that time when the server starts, and runs
/// on in real time from there.
pub const CLOCK_START_VAR: &str = "SVC_TEST_CLOCK_START";

/// When `SVC_TEST_PAUSE_AT` names `point`: writes `detail` to the file `SVC_TEST_PAUSE_MARK`
/// names and parks this thread for good (the test kills the process). Otherwise returns.
#[cfg(any(test, feature = "test-support"))]
pub fn pause_point_for_tests(point: &str, detail: &str) {
    if std::env::var(PAUSE_AT_VAR).as_deref() != Ok(point) {
        return;
    }
    if let Some(mark) = std::env::var_os(PAUSE_MARK_VAR) {
        // Written under another name and renamed, so the test never reads half a file.
        let tmp = std::path::PathBuf::from(format!("{}.tmp", mark.to_string_lossy()));
        if std::fs::write(&tmp, detail).is_ok() {
            let _ = std::fs::rename(&tmp, &mark);
        }
    }
    log::warn!("paused at test pause point `{point}` ({detail})");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// The wall clock moved by a fixed offset: it reads `start` when made and runs in real time.
#[derive(Debug)]
pub struct ShiftedClock {
    offset_ms: i64,
}

impl ShiftedClock {
    pub fn starting_at(start_ms: i64) -> ShiftedClock {
        ShiftedClock {
            offset_ms: start_ms - SystemClock.now_ms(),
        }
    }
}

impl Clock for ShiftedClock {
    fn now_ms(&self) -> i64 {
        SystemClock.now_ms() + self.offset_ms
    }
}

/// The clock `SVC_TEST_CLOCK_START` asks for, if it is set (and reads as a timestamp).
#[cfg(any(test, feature = "test-support"))]
pub fn clock_for_tests() -> Option<Arc<dyn Clock>> {
    let start = std::env::var(CLOCK_START_VAR).ok()?;
    let Some(ms) = parse_ts(&start) else {
        log::error!("{CLOCK_START_VAR}={start:?} is not an RFC 3339 UTC timestamp: ignored");
        return None;
    };
    Some(Arc::new(ShiftedClock::starting_at(ms)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shifted_clock_starts_where_told_and_runs_on() {
        let start = parse_ts("2026-05-01T10:59:58.000Z").unwrap();
        let c = ShiftedClock::starting_at(start);
        let first = c.now_ms();
        assert!(
            (start..start + 1_000).contains(&first),
            "{first} vs {start}"
        );
        std::thread::sleep(Duration::from_millis(20));
        assert!(c.now_ms() >= first + 20);
    }

    #[test]
    fn an_unset_pause_point_returns() {
        // The variable is never set in this crate's unit tests.
        pause_point_for_tests("never_set_in_unit_tests", "");
    }
}
