//! Cancellation and pause: one token per run, shared by the engine loop, handlers (command,
//! wait, human) and whoever controls the run (CLI signal handler, HTTP server).
//!
//! Handlers never sleep blindly: they wait on the token, which wakes them on cancel.

use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct State {
    cancelled: bool,
    paused: bool,
    reason: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct CancelToken {
    inner: Arc<(Mutex<State>, Condvar)>,
}

impl CancelToken {
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests cancellation; wakes every waiter.
    pub fn cancel(&self, reason: &str) {
        let (lock, cv) = &*self.inner;
        let mut s = lock.lock();
        if !s.cancelled {
            s.cancelled = true;
            s.reason = Some(reason.to_string());
        }
        cv.notify_all();
    }

    pub fn is_cancelled(&self) -> bool {
        self.inner.0.lock().cancelled
    }

    pub fn reason(&self) -> Option<String> {
        self.inner.0.lock().reason.clone()
    }

    pub fn pause(&self) {
        self.inner.0.lock().paused = true;
    }

    pub fn unpause(&self) {
        let (lock, cv) = &*self.inner;
        lock.lock().paused = false;
        cv.notify_all();
    }

    pub fn is_paused(&self) -> bool {
        self.inner.0.lock().paused
    }

    /// Sleeps up to `dur`; returns true if cancelled before or during the wait.
    pub fn sleep(&self, dur: Duration) -> bool {
        let deadline = Instant::now() + dur;
        let (lock, cv) = &*self.inner;
        let mut s = lock.lock();
        while !s.cancelled {
            if cv.wait_until(&mut s, deadline).timed_out() {
                break;
            }
        }
        s.cancelled
    }

    /// Blocks while paused (between stages); returns true if cancelled.
    pub fn wait_while_paused(&self) -> bool {
        let (lock, cv) = &*self.inner;
        let mut s = lock.lock();
        while s.paused && !s.cancelled {
            cv.wait(&mut s);
        }
        s.cancelled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_wakes_a_sleeper() {
        let t = CancelToken::new();
        let t2 = t.clone();
        let h = std::thread::spawn(move || t2.sleep(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(20));
        t.cancel("user");
        assert!(h.join().unwrap_or(false));
        assert_eq!(t.reason().as_deref(), Some("user"));
    }

    #[test]
    fn sleep_without_cancel_returns_false() {
        assert!(!CancelToken::new().sleep(Duration::from_millis(5)));
    }

    #[test]
    fn pause_blocks_until_unpause() {
        let t = CancelToken::new();
        t.pause();
        let t2 = t.clone();
        let h = std::thread::spawn(move || t2.wait_while_paused());
        std::thread::sleep(Duration::from_millis(20));
        assert!(!h.is_finished());
        t.unpause();
        assert!(!h.join().unwrap_or(true));
    }
}
