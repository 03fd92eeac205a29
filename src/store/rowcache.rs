//! Recently used run rows, shared by the SQLite store's writer and its readers.
//!
//! Owns: a bounded map from run id to the row as of some committed `last_seq`. A row read
//! from the database costs a parse of the run's `run.created` event (workflow source
//! included) and of its checkpoint; a cached row costs a clone. Every entry is a committed
//! state: the writer puts the row it just committed, a reader offers a row it loaded.
//! Readers use an entry only when its `last_seq` equals the one the database reports now;
//! the writer's own appends are guarded by `last_seq` in SQL, so a stale entry is detected
//! and never written on.
//! Must not touch: SQL (the store decides when to read and what is committed).

use super::model::RunRow;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// Rows kept (the engine appends to a handful of active runs; the API reads a few more).
const CAPACITY: usize = 256;

#[derive(Debug, Default)]
pub(crate) struct RowCache {
    rows: Mutex<HashMap<String, Arc<RunRow>>>,
}

impl RowCache {
    /// The writer takes a run's row to fold the next event onto it. Readers clone under the
    /// lock, so the entry is normally unshared and moves out without a copy.
    pub(crate) fn take(&self, run_id: &str) -> Option<RunRow> {
        let arc = self.rows.lock().remove(run_id)?;
        Some(Arc::try_unwrap(arc).unwrap_or_else(|shared| (*shared).clone()))
    }

    /// The writer records the row it has just committed.
    pub(crate) fn put(&self, row: RunRow) {
        let mut rows = self.rows.lock();
        if rows.len() >= CAPACITY && !rows.contains_key(&row.id) {
            rows.clear();
        }
        rows.insert(row.id.clone(), Arc::new(row));
    }

    /// A reader offers a row it loaded; kept unless the cache already has a newer one.
    pub(crate) fn offer(&self, row: &RunRow) {
        let mut rows = self.rows.lock();
        if rows
            .get(&row.id)
            .is_some_and(|r| r.last_seq >= row.last_seq)
        {
            return;
        }
        if rows.len() >= CAPACITY && !rows.contains_key(&row.id) {
            rows.clear();
        }
        rows.insert(row.id.clone(), Arc::new(row.clone()));
    }

    /// The row as of `last_seq`, if that is what the cache holds.
    pub(crate) fn get_at(&self, run_id: &str, last_seq: u64) -> Option<RunRow> {
        let rows = self.rows.lock();
        let r = rows.get(run_id)?;
        (r.last_seq == last_seq).then(|| (**r).clone())
    }

    pub(crate) fn forget(&self, run_id: &str) {
        self.rows.lock().remove(run_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{EventDraft, RunRow};
    use serde_json::json;

    fn row(id: &str, seq: u64) -> RunRow {
        let created = EventDraft::new("run.created", json!({"title": "x"})).into_event(
            id,
            1,
            String::new(),
            String::new(),
        );
        let mut r = RunRow::from_created(&created);
        r.last_seq = seq;
        r
    }

    #[test]
    fn readers_never_replace_a_newer_row_and_match_on_seq() {
        let c = RowCache::default();
        c.put(row("A", 5));
        c.offer(&row("A", 4));
        assert_eq!(c.get_at("A", 5).map(|r| r.last_seq), Some(5));
        assert!(c.get_at("A", 4).is_none());
        c.offer(&row("A", 6));
        assert_eq!(c.get_at("A", 6).map(|r| r.last_seq), Some(6));
        assert_eq!(c.take("A").map(|r| r.last_seq), Some(6));
        assert!(c.take("A").is_none());
        c.put(row("B", 1));
        c.forget("B");
        assert!(c.get_at("B", 1).is_none());
    }

    #[test]
    fn stays_bounded() {
        let c = RowCache::default();
        for i in 0..(CAPACITY * 3) {
            c.put(row(&format!("R{i}"), 1));
        }
        assert!(c.rows.lock().len() <= CAPACITY);
    }
}
