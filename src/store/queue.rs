//! The ids of queued and slot-holding runs, in memory, for counting them.
//!
//! Owns: for each status in [`TRACKED`] (`runnable`, and the statuses that hold a scheduler
//! slot), the sorted set of run ids the SQLite store's writer has seen in it. The writer keeps
//! it current under its lock (it knows every status change it commits) and re-reads it from
//! the database at most every [`RELOAD_AFTER`], so a change another process made shows within
//! that time. SQLite counts an index range by visiting every entry: with a thousand runs
//! queued, a run's `queue_position` cost ~100 µs per request and the scheduler counted its
//! slot holders with a read transaction on every wake; here both are a walk in memory.
//! Must not touch: SQL (the store hands it the rows it reads) or scheduling decisions.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::time::{Duration, Instant};

/// How stale the sets may get before the store re-reads them from the database.
pub(crate) const RELOAD_AFTER: Duration = Duration::from_secs(1);

/// The statuses counted in memory: the queue and the slot holders (few runs at any time,
/// unlike `submitted` or the terminal statuses).
pub(crate) const TRACKED: [&str; 6] = [
    "runnable", "starting", "running", "blocked", "paused", "removing",
];

#[derive(Debug, Default)]
pub(crate) struct Queue {
    ids: BTreeMap<&'static str, BTreeSet<String>>,
    loaded_at: Option<Instant>,
}

/// The tracked name equal to `status`, if it is tracked.
fn tracked(status: &str) -> Option<&'static str> {
    TRACKED.iter().copied().find(|t| *t == status)
}

impl Queue {
    /// True when `statuses` can be counted here.
    pub(crate) fn answers(statuses: &[String]) -> bool {
        !statuses.is_empty() && statuses.iter().all(|s| tracked(s).is_some())
    }

    /// True when the sets must be (re)read from the database before use.
    pub(crate) fn stale(&self) -> bool {
        self.loaded_at.is_none_or(|t| t.elapsed() >= RELOAD_AFTER)
    }

    /// Replaces the sets with `(id, status)` rows read from the database.
    pub(crate) fn reload(&mut self, rows: impl IntoIterator<Item = (String, String)>) {
        self.ids.clear();
        for (id, status) in rows {
            if let Some(t) = tracked(&status) {
                self.ids.entry(t).or_default().insert(id);
            }
        }
        self.loaded_at = Some(Instant::now());
    }

    /// Records a committed status change of `run_id` (`None`: the run is gone).
    pub(crate) fn note(&mut self, run_id: &str, status: Option<&str>) {
        for set in self.ids.values_mut() {
            set.remove(run_id);
        }
        if let Some(t) = status.and_then(tracked) {
            self.ids.entry(t).or_default().insert(run_id.to_string());
        }
    }

    /// Runs in any of `statuses` whose id sorts before `below` (all of them for `None`).
    pub(crate) fn count(&self, statuses: &[String], below: Option<&str>) -> usize {
        let upper = below.map_or(Bound::Unbounded, Bound::Excluded);
        statuses
            .iter()
            .filter_map(|s| self.ids.get(s.as_str()))
            .map(|set| set.range::<str, _>((Bound::Unbounded, upper)).count())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn counts_by_status_and_id_and_follows_notes() {
        let mut q = Queue::default();
        assert!(q.stale());
        q.reload([
            ("B".to_string(), "runnable".to_string()),
            ("D".to_string(), "runnable".to_string()),
            ("E".to_string(), "succeeded".to_string()),
        ]);
        assert!(!q.stale());
        q.note("A", Some("runnable"));
        q.note("C", Some("runnable"));
        q.note("D", Some("starting"));
        let runnable = names(&["runnable"]);
        assert_eq!(q.count(&runnable, None), 3);
        assert_eq!(q.count(&runnable, Some("C")), 2);
        assert_eq!(q.count(&runnable, Some("A")), 0);
        assert_eq!(q.count(&names(&["starting", "running"]), None), 1);
        q.note("D", None);
        q.note("A", Some("succeeded"));
        assert_eq!(q.count(&names(&TRACKED), None), 2);
        assert!(Queue::answers(&runnable));
        assert!(!Queue::answers(&names(&["runnable", "submitted"])));
        assert!(!Queue::answers(&[]));
    }
}
