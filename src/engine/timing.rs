//! Stage timers and how durations read: the per-attempt timer that cancels a token with
//! [`TIMED_OUT`], durations as event milliseconds ([`millis`]), and the one way a duration is
//! written in a message ([`describe_duration`]: `250ms`, `1.5s`, `90s`, `2m`;
//! docs/decisions.md "Durations in messages").
//!
//! Must not touch: what a timeout means for the stage (the walker and handlers decide).

use crate::base::cancel::CancelToken;
use std::time::Duration;

/// Cancel reason of a per-attempt token whose node `timeout` expired.
pub(crate) const TIMED_OUT: &str = "node timeout";

/// Cancels `token` with [`TIMED_OUT`] after `after`, unless it is cancelled first.
pub(crate) fn start_timer(token: &CancelToken, after: Duration) -> std::thread::JoinHandle<()> {
    let t = token.clone();
    std::thread::spawn(move || {
        if !t.sleep(after) {
            t.cancel(TIMED_OUT);
        }
    })
}

/// `d` in whole milliseconds, as events carry durations.
pub(crate) fn millis(d: Duration) -> u64 {
    d.as_millis().min(u128::from(u64::MAX)) as u64
}

/// `1.5s`, `250ms`, `2m`.
pub(crate) fn describe_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_one_way() {
        let d = |ms| describe_duration(Duration::from_millis(ms));
        assert_eq!(d(250), "250ms");
        assert_eq!(d(1500), "1.5s");
        assert_eq!(d(90_000), "90s");
        assert_eq!(d(120_000), "2m");
    }
}
