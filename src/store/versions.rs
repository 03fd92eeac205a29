//! The `workflow_versions` table: immutable workflow packages by content id, kept as opaque
//! JSON text (schema migration 3).
//!
//! Owns: the table's SQL, and [`MemoryVersions`], its in-memory twin for tests and
//! embedding. Must not touch: the package format, ids or validation (`server::versions`).

use super::error::StoreError;
use super::SqliteStore;
use parking_lot::Mutex;
use rusqlite::OptionalExtension;
use std::collections::HashMap;

/// One stored version: its id, its package as JSON text, and when it was registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRecord {
    pub id: String,
    pub package: String,
    pub created_at: String,
}

/// Where workflow versions are kept. A version is written once and never changes.
pub trait VersionTable: Send + Sync {
    /// The version `id`, if stored.
    fn get_version(&self, id: &str) -> Result<Option<VersionRecord>, StoreError>;
    /// Stores `v` unless its id is already stored; true when it was stored now.
    fn insert_version(&self, v: &VersionRecord) -> Result<bool, StoreError>;
}

impl VersionTable for SqliteStore {
    fn get_version(&self, id: &str) -> Result<Option<VersionRecord>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached("SELECT package, created_at FROM workflow_versions WHERE id = ?1")
                .and_then(|mut st| {
                    st.query_row([id], |r| {
                        Ok(VersionRecord {
                            id: id.to_string(),
                            package: r.get(0)?,
                            created_at: r.get(1)?,
                        })
                    })
                    .optional()
                })
                .map_err(StoreError::db_global("reading a workflow version"))
        })
    }

    fn insert_version(&self, v: &VersionRecord) -> Result<bool, StoreError> {
        self.write("storing a workflow version", |conn| {
            conn.prepare_cached(
                "INSERT OR IGNORE INTO workflow_versions (id, package, created_at) \
                 VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut st| st.execute([&v.id, &v.package, &v.created_at]))
            .map(|inserted| inserted == 1)
            .map_err(StoreError::db_global("storing a workflow version"))
        })
    }
}

/// Versions kept in memory (tests, embedding without a database file).
#[derive(Debug, Default)]
pub struct MemoryVersions {
    rows: Mutex<HashMap<String, VersionRecord>>,
}

impl VersionTable for MemoryVersions {
    fn get_version(&self, id: &str) -> Result<Option<VersionRecord>, StoreError> {
        Ok(self.rows.lock().get(id).cloned())
    }

    fn insert_version(&self, v: &VersionRecord) -> Result<bool, StoreError> {
        let mut rows = self.rows.lock();
        if rows.contains_key(&v.id) {
            return Ok(false);
        }
        rows.insert(v.id.clone(), v.clone());
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, package: &str) -> VersionRecord {
        VersionRecord {
            id: id.into(),
            package: package.into(),
            created_at: "2026-01-01T00:00:00.000Z".into(),
        }
    }

    #[test]
    fn a_version_is_stored_once_and_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("svc.db");
        {
            let s = SqliteStore::open(&path).unwrap();
            assert_eq!(s.get_version("a").unwrap(), None);
            assert!(s.insert_version(&record("a", "{}")).unwrap());
            assert!(!s.insert_version(&record("a", "{\"other\":1}")).unwrap());
        }
        let s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.get_version("a").unwrap(), Some(record("a", "{}")));
        let m = MemoryVersions::default();
        assert!(m.insert_version(&record("a", "{}")).unwrap());
        assert!(!m.insert_version(&record("a", "[]")).unwrap());
        assert_eq!(m.get_version("a").unwrap(), Some(record("a", "{}")));
    }
}
