//! The `workflow_versions` table: immutable workflow packages by content id, kept as opaque
//! JSON text (schema migration 3), each with its workflow's name (migration 11), and the
//! workflow catalog read from it (names, version counts, latest versions).
//!
//! Owns: the table's SQL, and [`MemoryVersions`], its in-memory twin for tests and
//! embedding. Must not touch: the package format, ids, names or validation
//! (`server::versions`), or runs (runs by workflow are `RunQuery::workflow`).

use super::error::StoreError;
use super::SqliteStore;
use parking_lot::Mutex;
use rusqlite::OptionalExtension;
use std::collections::HashMap;

/// One stored version: its id, its package as JSON text, when it was registered and its
/// workflow's name (`None`: stored before names were kept, not named yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRecord {
    pub id: String,
    pub package: String,
    pub created_at: String,
    pub name: Option<String>,
}

/// One workflow of the catalog: its name, its newest version and how many it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowEntry {
    pub name: String,
    pub latest_version_id: String,
    pub latest_created_at: String,
    pub version_count: u64,
}

/// A version as the catalog lists it (no package).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionHead {
    pub id: String,
    pub created_at: String,
}

/// Where workflow versions are kept. A version is written once and never changes.
pub trait VersionTable: Send + Sync {
    /// The version `id`, if stored.
    fn get_version(&self, id: &str) -> Result<Option<VersionRecord>, StoreError>;
    /// Stores `v` unless its id is already stored; true when it was stored now.
    fn insert_version(&self, v: &VersionRecord) -> Result<bool, StoreError>;
    /// Versions stored without a name (before migration 11), oldest first.
    fn unnamed_versions(&self) -> Result<Vec<VersionRecord>, StoreError>;
    /// Names the version `id` (a version's name never changes once set).
    fn name_version(&self, id: &str, name: &str) -> Result<(), StoreError>;
    /// Every named workflow, by name: newest version (ties: the greater id) and count.
    fn workflows(&self) -> Result<Vec<WorkflowEntry>, StoreError>;
    /// The versions of workflow `name`, newest first (empty: no such workflow).
    fn versions_named(&self, name: &str) -> Result<Vec<VersionHead>, StoreError>;
}

impl VersionTable for SqliteStore {
    fn get_version(&self, id: &str) -> Result<Option<VersionRecord>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT package, created_at, name FROM workflow_versions WHERE id = ?1",
            )
            .and_then(|mut st| {
                st.query_row([id], |r| {
                    Ok(VersionRecord {
                        id: id.to_string(),
                        package: r.get(0)?,
                        created_at: r.get(1)?,
                        name: r.get(2)?,
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
                "INSERT OR IGNORE INTO workflow_versions (id, package, created_at, name) \
                 VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut st| st.execute(rusqlite::params![v.id, v.package, v.created_at, v.name]))
            .map(|inserted| inserted == 1)
            .map_err(StoreError::db_global("storing a workflow version"))
        })
    }

    fn unnamed_versions(&self) -> Result<Vec<VersionRecord>, StoreError> {
        self.read(|conn| {
            conn.prepare(
                "SELECT id, package, created_at FROM workflow_versions WHERE name IS NULL \
                 ORDER BY created_at, id",
            )
            .and_then(|mut st| {
                st.query_map([], |r| {
                    Ok(VersionRecord {
                        id: r.get(0)?,
                        package: r.get(1)?,
                        created_at: r.get(2)?,
                        name: None,
                    })
                })?
                .collect()
            })
            .map_err(StoreError::db_global("reading unnamed workflow versions"))
        })
    }

    fn name_version(&self, id: &str, name: &str) -> Result<(), StoreError> {
        self.write("naming a workflow version", |conn| {
            conn.prepare_cached(
                "UPDATE workflow_versions SET name = ?2 WHERE id = ?1 AND name IS NULL",
            )
            .and_then(|mut st| st.execute([id, name]))
            .map(|_| ())
            .map_err(StoreError::db_global("naming a workflow version"))
        })
    }

    fn workflows(&self) -> Result<Vec<WorkflowEntry>, StoreError> {
        self.read(|conn| {
            // SQLite's bare columns with MAX(): id comes from the row holding the maximum.
            conn.prepare_cached(
                "SELECT name, id, MAX(created_at || id), COUNT(*) FROM workflow_versions \
                 WHERE name IS NOT NULL GROUP BY name ORDER BY name",
            )
            .and_then(|mut st| {
                st.query_map([], |r| {
                    let id: String = r.get(1)?;
                    let stamp: String = r.get(2)?;
                    Ok(WorkflowEntry {
                        name: r.get(0)?,
                        latest_created_at: stamp
                            .strip_suffix(id.as_str())
                            .unwrap_or(&stamp)
                            .to_string(),
                        latest_version_id: id,
                        version_count: r.get::<_, i64>(3)? as u64,
                    })
                })?
                .collect()
            })
            .map_err(StoreError::db_global("listing workflows"))
        })
    }

    fn versions_named(&self, name: &str) -> Result<Vec<VersionHead>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT id, created_at FROM workflow_versions WHERE name = ?1 \
                 ORDER BY created_at DESC, id DESC",
            )
            .and_then(|mut st| {
                st.query_map([name], |r| {
                    Ok(VersionHead {
                        id: r.get(0)?,
                        created_at: r.get(1)?,
                    })
                })?
                .collect()
            })
            .map_err(StoreError::db_global("listing a workflow's versions"))
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

    fn unnamed_versions(&self) -> Result<Vec<VersionRecord>, StoreError> {
        let mut out: Vec<_> = (self.rows.lock().values())
            .filter(|v| v.name.is_none())
            .cloned()
            .collect();
        out.sort_by(|a, b| (&a.created_at, &a.id).cmp(&(&b.created_at, &b.id)));
        Ok(out)
    }

    fn name_version(&self, id: &str, name: &str) -> Result<(), StoreError> {
        if let Some(v) = self.rows.lock().get_mut(id) {
            v.name.get_or_insert_with(|| name.to_string());
        }
        Ok(())
    }

    fn workflows(&self) -> Result<Vec<WorkflowEntry>, StoreError> {
        let mut by_name: std::collections::BTreeMap<String, WorkflowEntry> = Default::default();
        for v in self.rows.lock().values() {
            let Some(name) = &v.name else { continue };
            let e = by_name
                .entry(name.clone())
                .or_insert_with(|| WorkflowEntry {
                    name: name.clone(),
                    latest_version_id: v.id.clone(),
                    latest_created_at: v.created_at.clone(),
                    version_count: 0,
                });
            e.version_count += 1;
            if (&v.created_at, &v.id) > (&e.latest_created_at, &e.latest_version_id) {
                e.latest_version_id = v.id.clone();
                e.latest_created_at = v.created_at.clone();
            }
        }
        Ok(by_name.into_values().collect())
    }

    fn versions_named(&self, name: &str) -> Result<Vec<VersionHead>, StoreError> {
        let mut out: Vec<_> = (self.rows.lock().values())
            .filter(|v| v.name.as_deref() == Some(name))
            .map(|v| VersionHead {
                id: v.id.clone(),
                created_at: v.created_at.clone(),
            })
            .collect();
        out.sort_by(|a, b| (&b.created_at, &b.id).cmp(&(&a.created_at, &a.id)));
        Ok(out)
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
            name: None,
        }
    }

    fn named(id: &str, at: &str, name: &str) -> VersionRecord {
        VersionRecord {
            id: id.into(),
            package: "{}".into(),
            created_at: at.into(),
            name: Some(name.into()),
        }
    }

    /// Both tables answer the catalog alike: names sorted, newest version per name, counts,
    /// versions newest first, unnamed versions named once.
    fn catalog_answers(t: &dyn VersionTable) {
        t.insert_version(&named("a1", "2026-01-01T00:00:00.000Z", "alpha"))
            .unwrap();
        t.insert_version(&named("a2", "2026-01-02T00:00:00.000Z", "alpha"))
            .unwrap();
        t.insert_version(&named("b1", "2026-01-01T12:00:00.000Z", "beta"))
            .unwrap();
        t.insert_version(&record("old", "{}")).unwrap();
        let unnamed = t.unnamed_versions().unwrap();
        assert_eq!(unnamed.len(), 1);
        assert_eq!(unnamed[0].id, "old");
        t.name_version("old", "beta").unwrap();
        t.name_version("old", "gamma").unwrap();
        assert!(t.unnamed_versions().unwrap().is_empty());
        let w = t.workflows().unwrap();
        let summary: Vec<_> = w
            .iter()
            .map(|e| {
                (
                    e.name.as_str(),
                    e.latest_version_id.as_str(),
                    e.version_count,
                )
            })
            .collect();
        assert_eq!(summary, [("alpha", "a2", 2), ("beta", "b1", 2)]);
        assert_eq!(w[0].latest_created_at, "2026-01-02T00:00:00.000Z");
        let ids: Vec<_> = t
            .versions_named("beta")
            .unwrap()
            .into_iter()
            .map(|v| v.id)
            .collect();
        assert_eq!(ids, ["b1", "old"]);
        assert!(t.versions_named("nope").unwrap().is_empty());
    }

    #[test]
    fn the_catalog_lists_names_with_their_newest_version() {
        let dir = tempfile::tempdir().unwrap();
        catalog_answers(&SqliteStore::open(&dir.path().join("svc.db")).unwrap());
        catalog_answers(&MemoryVersions::default());
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
