//! FIFO made observable: runs promoted together record `run.running` (and so `started_at`)
//! in the order the scheduler promoted them.
//!
//! The scheduler promotes in creation order, but each promoted run then prepares its
//! sandbox on its own worker thread, and those take different times: without turns, the
//! second of six runs started together recorded `run.started` 7 ms before the first. Each
//! promotion takes a ticket ([`Turns::issue`]); a worker whose sandbox is ready waits
//! ([`Turns::wait`]) until every earlier ticket is released, which happens when that run's
//! `run.running` is committed (the job's store tells [`Turns::release`]) or its worker
//! ends for any reason. A run waits at most [`MAX_WAIT`] for the runs before it (a slow
//! clone delays the runs after it by that much at most; beyond it order is given up for
//! progress and logged).
//!
//! Owns: tickets and the wait. Must not touch: promotion (the scheduler) or the store.

use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// The longest a ready run waits for the runs promoted before it.
pub const MAX_WAIT: Duration = Duration::from_secs(10);

#[derive(Default)]
pub struct Turns {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    next: u64,
    tickets: HashMap<String, u64>,
    open: BTreeSet<u64>,
}

impl Turns {
    /// Takes the next ticket for `run_id` (called in promotion order).
    pub fn issue(&self, run_id: &str) {
        let mut s = self.state.lock();
        let t = s.next;
        s.next += 1;
        if let Some(old) = s.tickets.insert(run_id.to_string(), t) {
            s.open.remove(&old);
        }
        s.open.insert(t);
        drop(s);
        self.changed.notify_all();
    }

    /// Lets the runs after `run_id` go (idempotent; unknown ids are ignored).
    pub fn release(&self, run_id: &str) {
        let mut s = self.state.lock();
        if let Some(t) = s.tickets.remove(run_id) {
            s.open.remove(&t);
            drop(s);
            self.changed.notify_all();
        }
    }

    /// Waits until every run promoted before `run_id` has released its ticket, at most
    /// `max`. Returns whether the order held (false: waited `max` and went on).
    pub fn wait(&self, run_id: &str, max: Duration) -> bool {
        let deadline = Instant::now() + max;
        let mut s = self.state.lock();
        let Some(&mine) = s.tickets.get(run_id) else {
            return true;
        };
        while s.open.first().is_some_and(|&first| first < mine) {
            if self.changed.wait_until(&mut s, deadline).timed_out() {
                return s.open.first().is_none_or(|&first| first >= mine);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_ready_run_waits_for_those_promoted_before_it() {
        let turns = Arc::new(Turns::default());
        for id in ["a", "b", "c"] {
            turns.issue(id);
        }
        assert!(turns.wait("a", Duration::ZERO));
        assert!(!turns.wait("c", Duration::from_millis(20)), "a and b hold");
        let t = Arc::clone(&turns);
        let waiter = std::thread::spawn(move || t.wait("c", Duration::from_secs(10)));
        turns.release("b");
        turns.release("a");
        assert!(waiter.join().unwrap());
        turns.release("a");
        turns.release("zzz");
        assert!(turns.wait("unknown", Duration::ZERO));
    }
}
