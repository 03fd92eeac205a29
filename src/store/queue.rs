//! The ids of queued and slot-holding runs, in memory, for counting them.
//!
//! Owns: for each status in [`TRACKED`] (`runnable`, and the statuses that hold a scheduler
//! slot), the sorted ids of the runs the SQLite store has seen in it. The store's writer
//! notes every status change it commits (under its lock, so in commit order); the sets are
//! re-read from the database only when another connection (another process) has committed
//! since, checked at most every [`RECHECK_AFTER`]. SQLite counts an index range by visiting
//! every entry: with a thousand runs queued, a run's `queue_position` cost ~100 µs per
//! request. Here a position is a binary search and a count is a length, under a lock of its
//! own (counting used to take the writer's lock, and serialised with every commit).
//! Must not touch: SQL (the store hands it the rows it reads) or scheduling decisions.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// How often the store asks SQLite whether another connection changed the database.
pub(crate) const RECHECK_AFTER: Duration = Duration::from_secs(1);

/// The statuses counted in memory: the queue and the slot holders (few runs at any time,
/// unlike `submitted` or the terminal statuses).
pub(crate) const TRACKED: [&str; 6] = [
    "runnable", "starting", "running", "blocked", "paused", "removing",
];

#[derive(Debug, Default)]
pub(crate) struct Queue {
    /// Sorted ids per status. Runs join at the back (ULIDs grow) and leave at the front
    /// (the scheduler takes the oldest), both O(1) in a deque.
    ids: BTreeMap<&'static str, VecDeque<String>>,
    /// When the database's `data_version` was last compared, and its value at the last load.
    checked_at: Option<Instant>,
    version: Option<i64>,
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

    /// True when the database must be asked whether others changed it before a count.
    pub(crate) fn due(&self) -> bool {
        self.checked_at.is_none_or(|t| t.elapsed() >= RECHECK_AFTER)
    }

    /// True when the sets reflect the database at `data_version` `version`; records the check.
    pub(crate) fn current_at(&mut self, version: i64) -> bool {
        self.checked_at = Some(Instant::now());
        self.version == Some(version)
    }

    /// Replaces the sets with `(id, status)` rows read from the database at `version`.
    pub(crate) fn reload(
        &mut self,
        rows: impl IntoIterator<Item = (String, String)>,
        version: i64,
    ) {
        self.ids.clear();
        for (id, status) in rows {
            if let Some(t) = tracked(&status) {
                self.ids.entry(t).or_default().push_back(id);
            }
        }
        for set in self.ids.values_mut() {
            set.make_contiguous().sort_unstable();
        }
        self.checked_at = Some(Instant::now());
        self.version = Some(version);
    }

    /// Records a committed status change of `run_id` (`None`: the run is gone).
    pub(crate) fn note(&mut self, run_id: &str, status: Option<&str>) {
        let into = status.and_then(tracked);
        for (name, set) in self.ids.iter_mut() {
            if Some(*name) == into {
                continue;
            }
            if let Ok(i) = set.binary_search_by(|id| id.as_str().cmp(run_id)) {
                set.remove(i);
            }
        }
        if let Some(t) = into {
            let set = self.ids.entry(t).or_default();
            if let Err(i) = set.binary_search_by(|id| id.as_str().cmp(run_id)) {
                set.insert(i, run_id.to_string());
            }
        }
    }

    /// Runs in any of `statuses` whose id sorts before `below` (all of them for `None`).
    pub(crate) fn count(&self, statuses: &[String], below: Option<&str>) -> usize {
        statuses
            .iter()
            .filter_map(|s| self.ids.get(s.as_str()))
            .map(|set| match below {
                None => set.len(),
                Some(b) => set.partition_point(|id| id.as_str() < b),
            })
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
        assert!(q.due());
        assert!(!q.current_at(7), "never loaded");
        q.reload(
            [
                ("D".to_string(), "runnable".to_string()),
                ("B".to_string(), "runnable".to_string()),
                ("E".to_string(), "succeeded".to_string()),
            ],
            7,
        );
        assert!(!q.due());
        assert!(q.current_at(7));
        assert!(!q.current_at(8), "another connection committed");
        q.note("A", Some("runnable"));
        q.note("C", Some("runnable"));
        q.note("D", Some("starting"));
        q.note("C", Some("runnable"));
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
