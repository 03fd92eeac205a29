//! The `ask_sessions` table: which run an Ask session belongs to (schema migration 7). The
//! session's content is in its run's event log (`run.session.*` events); this table only
//! finds the run from a session id.
//!
//! Owns: the table's SQL, and [`MemorySessions`], its in-memory twin. Must not touch: session
//! events or their meaning (`crate::ask`).

use super::error::StoreError;
use super::SqliteStore;
use parking_lot::Mutex;
use rusqlite::OptionalExtension;
use std::collections::HashMap;

/// Where the session → run index is kept. An entry is written once and never changes.
pub trait SessionIndex: Send + Sync {
    /// Records that session `id` belongs to run `run_id`.
    fn put_session(&self, id: &str, run_id: &str, created_at: &str) -> Result<(), StoreError>;
    /// The run of session `id`, if known.
    fn session_run(&self, id: &str) -> Result<Option<String>, StoreError>;
}

impl SessionIndex for SqliteStore {
    fn put_session(&self, id: &str, run_id: &str, created_at: &str) -> Result<(), StoreError> {
        self.write("recording an Ask session", |conn| {
            conn.prepare_cached(
                "INSERT OR IGNORE INTO ask_sessions (id, run_id, created_at) VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut st| st.execute([id, run_id, created_at]))
            .map(|_| ())
            .map_err(StoreError::db_global("recording an Ask session"))
        })
    }

    fn session_run(&self, id: &str) -> Result<Option<String>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached("SELECT run_id FROM ask_sessions WHERE id = ?1")
                .and_then(|mut st| st.query_row([id], |r| r.get(0)).optional())
                .map_err(StoreError::db_global("reading an Ask session"))
        })
    }
}

/// The index kept in memory (tests, embedding without a database file).
#[derive(Debug, Default)]
pub struct MemorySessions {
    rows: Mutex<HashMap<String, String>>,
}

impl SessionIndex for MemorySessions {
    fn put_session(&self, id: &str, run_id: &str, _: &str) -> Result<(), StoreError> {
        self.rows
            .lock()
            .entry(id.to_string())
            .or_insert_with(|| run_id.to_string());
        Ok(())
    }

    fn session_run(&self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self.rows.lock().get(id).cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_finds_its_run_after_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("svc.db");
        {
            let s = SqliteStore::open(&path).unwrap();
            assert_eq!(s.session_run("S1").unwrap(), None);
            s.put_session("S1", "R1", "2026-01-01T00:00:00.000Z")
                .unwrap();
            // Written once: a second put for another run changes nothing.
            s.put_session("S1", "R2", "2026-01-01T00:00:00.000Z")
                .unwrap();
        }
        let s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.session_run("S1").unwrap().as_deref(), Some("R1"));
        let m = MemorySessions::default();
        m.put_session("S", "R", "t").unwrap();
        assert_eq!(m.session_run("S").unwrap().as_deref(), Some("R"));
    }
}
