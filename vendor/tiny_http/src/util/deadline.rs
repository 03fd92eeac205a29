//! The read deadline of one connection (svc patch, see PATCHES.md).
//!
//! The connection's reader sets the phase (waiting for a request, reading its head, reading
//! its body); the socket's read half asks before every `read` how long it may block, and
//! fails with `TimedOut` once the phase's time is up.

use std::io::{Error, ErrorKind, Result};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// No deadline.
    Off,
    /// Waiting for the first byte of a request until `until`; once it arrives the head has
    /// `head` more (or no limit).
    Idle {
        until: Option<Instant>,
        head: Option<Duration>,
    },
    /// Reading until this instant.
    Until(Instant),
    /// svc patch (upgraded connections): each read may block at most this long.
    Each(Duration),
}

#[derive(Debug)]
pub(crate) struct Deadline {
    phase: Mutex<Phase>,
}

impl Deadline {
    pub(crate) fn new() -> Deadline {
        Deadline {
            phase: Mutex::new(Phase::Off),
        }
    }

    fn set(&self, p: Phase) {
        if let Ok(mut g) = self.phase.lock() {
            *g = p;
        }
    }

    /// Waiting for a request: `idle` for its first byte, then `head` for the rest of its head.
    pub(crate) fn idle(&self, idle: Option<Duration>, head: Option<Duration>) {
        if idle.is_none() && head.is_none() {
            return self.set(Phase::Off);
        }
        self.set(Phase::Idle {
            until: idle.map(|d| Instant::now() + d),
            head,
        });
    }

    /// Reading for at most `d` from now (no limit for `None`).
    pub(crate) fn within(&self, d: Option<Duration>) {
        self.set(match d {
            Some(d) => Phase::Until(Instant::now() + d),
            None => Phase::Off,
        });
    }

    /// An upgraded connection: each read may block at most `d` (no limit for `None`), with
    /// no deadline for the connection as a whole.
    pub(crate) fn each(&self, d: Option<Duration>) {
        self.set(match d {
            Some(d) => Phase::Each(d),
            None => Phase::Off,
        });
    }

    /// True while no byte of the awaited request has arrived.
    pub(crate) fn is_idle(&self) -> bool {
        matches!(self.phase.lock().map(|g| *g), Ok(Phase::Idle { .. }))
    }

    /// How long the next read may block: `Ok(None)` without limit, `TimedOut` when the time
    /// is up.
    pub(crate) fn before_read(&self) -> Result<Option<Duration>> {
        let until = match self.phase.lock().map(|g| *g) {
            Ok(Phase::Until(t)) => Some(t),
            Ok(Phase::Idle { until, .. }) => until,
            Ok(Phase::Each(d)) => Some(Instant::now() + d),
            _ => None,
        };
        match until {
            None => Ok(None),
            Some(t) => {
                let now = Instant::now();
                if now >= t {
                    Err(Error::new(ErrorKind::TimedOut, "read deadline passed"))
                } else {
                    // SO_RCVTIMEO of zero means "no timeout".
                    Ok(Some((t - now).max(Duration::from_millis(1))))
                }
            }
        }
    }

    /// Bytes arrived: a request that was awaited has started.
    pub(crate) fn after_read(&self, n: usize) {
        if n == 0 {
            return;
        }
        if let Ok(mut g) = self.phase.lock() {
            if let Phase::Idle { head, .. } = *g {
                *g = match head {
                    Some(d) => Phase::Until(Instant::now() + d),
                    None => Phase::Off,
                };
            }
        }
    }
}
