//! The catalogs' tables: one SQLite table per server-managed catalog (automations, MCP
//! servers, environments, ...), all of one generic shape, with CHECK constraints that mirror
//! the domain rules the `catalog` module enforces first.
//!
//! A catalog row is `(id, revision, definition, salt, created_at, updated_at)`: `id` a slug
//! (`^[a-z0-9][a-z0-9-]{0,62}$`), `revision` 64 lowercase hex digits, `definition` the JSON
//! object as the catalog validated it (write-only secret values included), `salt` 32 hex
//! digits the catalog mixes into the revision of secret values. A catalog's table is created
//! by a migration in `schema.rs` (copy the automations one: the generic columns and CHECKs,
//! then the catalog's own CHECKs over `definition`) and named here by a [`CatalogTable`].
//!
//! Writes are conditional: an insert refuses an existing id, a replace or delete happens only
//! while the stored revision is the expected one (optimistic concurrency), each in one
//! statement, so two writers never both win.
//!
//! Owns: the catalog tables' SQL ([`CatalogTables`] on [`SqliteStore`]). Must not touch what
//! a definition means, revisions' computation, HTTP.

use super::error::StoreError;
use super::SqliteStore;
use rusqlite::{params, Connection, OptionalExtension};

/// One catalog's table (its name: a fixed identifier, never user input).
#[derive(Debug)]
pub struct CatalogTable {
    pub name: &'static str,
}

/// Automations (`automations` module; migration 4).
pub const AUTOMATIONS: CatalogTable = CatalogTable {
    name: "automations",
};

/// MCP servers (`mcp::catalog`; migration 6).
pub const MCP_SERVERS: CatalogTable = CatalogTable {
    name: "mcp_servers",
};

/// Environments (`environments`; migration 10).
pub const ENVIRONMENTS: CatalogTable = CatalogTable {
    name: "environments",
};

/// Insights' saved queries (`insights`; migration 12).
pub const INSIGHT_QUERIES: CatalogTable = CatalogTable {
    name: "insight_queries",
};

/// One stored catalog entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogRow {
    pub id: String,
    pub revision: String,
    /// The definition's JSON text.
    pub definition: String,
    pub salt: String,
    pub created_at: String,
    pub updated_at: String,
}

/// What a conditional write found when it did not write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteConflict {
    /// Insert: the id is taken.
    Exists,
    /// Replace/delete: no such id.
    NotFound,
    /// Replace/delete: the stored revision is this one, not the expected one.
    Stale { current: String },
}

/// Where catalogs keep their entries.
pub trait CatalogTables: Send + Sync {
    /// Every row of `table`, sorted by id.
    fn catalog_list(&self, table: &CatalogTable) -> Result<Vec<CatalogRow>, StoreError>;

    /// Inserts `row` unless its id is taken.
    fn catalog_insert(
        &self,
        table: &CatalogTable,
        row: &CatalogRow,
    ) -> Result<Result<(), WriteConflict>, StoreError>;

    /// Replaces the row `row.id` (revision, definition, salt, updated_at) if its stored
    /// revision is `expected`.
    fn catalog_replace(
        &self,
        table: &CatalogTable,
        row: &CatalogRow,
        expected: &str,
    ) -> Result<Result<(), WriteConflict>, StoreError>;

    /// Deletes the row `id` if its stored revision is `expected`.
    fn catalog_delete(
        &self,
        table: &CatalogTable,
        id: &str,
        expected: &str,
    ) -> Result<Result<(), WriteConflict>, StoreError>;
}

fn err(op: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    StoreError::db_global(op)
}

impl CatalogTables for SqliteStore {
    fn catalog_list(&self, table: &CatalogTable) -> Result<Vec<CatalogRow>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(&format!(
                "SELECT id, revision, definition, salt, created_at, updated_at FROM {} ORDER BY id",
                table.name
            ))
            .and_then(|mut st| {
                st.query_map([], row_of)
                    .and_then(|r| r.collect::<rusqlite::Result<Vec<_>>>())
            })
            .map_err(err("listing a catalog"))
        })
    }

    fn catalog_insert(
        &self,
        table: &CatalogTable,
        row: &CatalogRow,
    ) -> Result<Result<(), WriteConflict>, StoreError> {
        self.write("creating a catalog entry", |conn| {
            let n = conn
                .prepare_cached(&format!(
                    "INSERT INTO {} (id, revision, definition, salt, created_at, updated_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (id) DO NOTHING",
                    table.name
                ))
                .and_then(|mut st| {
                    st.execute(params![
                        row.id,
                        row.revision,
                        row.definition,
                        row.salt,
                        row.created_at,
                        row.updated_at
                    ])
                })
                .map_err(err("creating a catalog entry"))?;
            Ok(if n == 1 {
                Ok(())
            } else {
                Err(WriteConflict::Exists)
            })
        })
    }

    fn catalog_replace(
        &self,
        table: &CatalogTable,
        row: &CatalogRow,
        expected: &str,
    ) -> Result<Result<(), WriteConflict>, StoreError> {
        self.write("replacing a catalog entry", |conn| {
            let n = conn
                .prepare_cached(&format!(
                    "UPDATE {} SET revision = ?2, definition = ?3, salt = ?4, updated_at = ?5 \
                     WHERE id = ?1 AND revision = ?6",
                    table.name
                ))
                .and_then(|mut st| {
                    st.execute(params![
                        row.id,
                        row.revision,
                        row.definition,
                        row.salt,
                        row.updated_at,
                        expected
                    ])
                })
                .map_err(err("replacing a catalog entry"))?;
            if n == 1 {
                return Ok(Ok(()));
            }
            Ok(Err(conflict_of(conn, table, &row.id)?))
        })
    }

    fn catalog_delete(
        &self,
        table: &CatalogTable,
        id: &str,
        expected: &str,
    ) -> Result<Result<(), WriteConflict>, StoreError> {
        self.write("deleting a catalog entry", |conn| {
            let n = conn
                .prepare_cached(&format!(
                    "DELETE FROM {} WHERE id = ?1 AND revision = ?2",
                    table.name
                ))
                .and_then(|mut st| st.execute(params![id, expected]))
                .map_err(err("deleting a catalog entry"))?;
            if n == 1 {
                return Ok(Ok(()));
            }
            Ok(Err(conflict_of(conn, table, id)?))
        })
    }
}

/// Catalog tables kept in memory (tests, and catalogs' unit tests whose entries no real
/// table's CHECKs would take). No CHECKs: the catalog's own rules are what is tested.
#[derive(Debug, Default)]
pub struct MemoryCatalogs {
    tables: parking_lot::Mutex<
        std::collections::HashMap<&'static str, std::collections::BTreeMap<String, CatalogRow>>,
    >,
}

impl CatalogTables for MemoryCatalogs {
    fn catalog_list(&self, table: &CatalogTable) -> Result<Vec<CatalogRow>, StoreError> {
        Ok(self
            .tables
            .lock()
            .get(table.name)
            .map(|t| t.values().cloned().collect())
            .unwrap_or_default())
    }

    fn catalog_insert(
        &self,
        table: &CatalogTable,
        row: &CatalogRow,
    ) -> Result<Result<(), WriteConflict>, StoreError> {
        let mut tables = self.tables.lock();
        let t = tables.entry(table.name).or_default();
        if t.contains_key(&row.id) {
            return Ok(Err(WriteConflict::Exists));
        }
        t.insert(row.id.clone(), row.clone());
        Ok(Ok(()))
    }

    fn catalog_replace(
        &self,
        table: &CatalogTable,
        row: &CatalogRow,
        expected: &str,
    ) -> Result<Result<(), WriteConflict>, StoreError> {
        let mut tables = self.tables.lock();
        let t = tables.entry(table.name).or_default();
        match t.get_mut(&row.id) {
            None => Ok(Err(WriteConflict::NotFound)),
            Some(old) if old.revision != expected => Ok(Err(WriteConflict::Stale {
                current: old.revision.clone(),
            })),
            Some(old) => {
                let created_at = std::mem::take(&mut old.created_at);
                *old = CatalogRow {
                    created_at,
                    ..row.clone()
                };
                Ok(Ok(()))
            }
        }
    }

    fn catalog_delete(
        &self,
        table: &CatalogTable,
        id: &str,
        expected: &str,
    ) -> Result<Result<(), WriteConflict>, StoreError> {
        let mut tables = self.tables.lock();
        let t = tables.entry(table.name).or_default();
        match t.get(id) {
            None => Ok(Err(WriteConflict::NotFound)),
            Some(old) if old.revision != expected => Ok(Err(WriteConflict::Stale {
                current: old.revision.clone(),
            })),
            Some(_) => {
                t.remove(id);
                Ok(Ok(()))
            }
        }
    }
}

/// Why a conditional replace/delete of `id` changed nothing.
fn conflict_of(
    conn: &Connection,
    table: &CatalogTable,
    id: &str,
) -> Result<WriteConflict, StoreError> {
    let current: Option<String> = conn
        .prepare_cached(&format!(
            "SELECT revision FROM {} WHERE id = ?1",
            table.name
        ))
        .and_then(|mut st| st.query_row([id], |r| r.get(0)).optional())
        .map_err(err("reading a catalog entry"))?;
    Ok(match current {
        Some(current) => WriteConflict::Stale { current },
        None => WriteConflict::NotFound,
    })
}

fn row_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<CatalogRow> {
    Ok(CatalogRow {
        id: r.get(0)?,
        revision: r.get(1)?,
        definition: r.get(2)?,
        salt: r.get(3)?,
        created_at: r.get(4)?,
        updated_at: r.get(5)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, rev: char) -> CatalogRow {
        CatalogRow {
            id: id.into(),
            revision: rev.to_string().repeat(64),
            definition: r#"{"name":"x","target":{},"triggers":[],"policies":{"misfire":"skip","overlap":"allow"}}"#.into(),
            salt: "0".repeat(32),
            created_at: "2026-01-01T00:00:00.000Z".into(),
            updated_at: "2026-01-01T00:00:00.000Z".into(),
        }
    }

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("svc.db")).unwrap();
        (dir, s)
    }

    #[test]
    fn conditional_writes() {
        let (_d, db) = store();
        let t = &AUTOMATIONS;
        assert_eq!(db.catalog_insert(t, &row("a", 'a')).unwrap(), Ok(()));
        assert_eq!(
            db.catalog_insert(t, &row("a", 'b')).unwrap(),
            Err(WriteConflict::Exists)
        );
        assert_eq!(
            db.catalog_replace(t, &row("a", 'c'), &"b".repeat(64))
                .unwrap(),
            Err(WriteConflict::Stale {
                current: "a".repeat(64)
            })
        );
        assert_eq!(
            db.catalog_replace(t, &row("a", 'c'), &"a".repeat(64))
                .unwrap(),
            Ok(())
        );
        assert_eq!(
            db.catalog_replace(t, &row("zz", 'c'), &"a".repeat(64))
                .unwrap(),
            Err(WriteConflict::NotFound)
        );
        db.catalog_insert(t, &row("0b", 'a')).unwrap().unwrap();
        let rows = db.catalog_list(t).unwrap();
        let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["0b", "a"]);
        assert_eq!(rows[1].revision, "c".repeat(64));
        assert_eq!(
            db.catalog_delete(t, "a", &"a".repeat(64)).unwrap(),
            Err(WriteConflict::Stale {
                current: "c".repeat(64)
            })
        );
        assert_eq!(db.catalog_delete(t, "a", &"c".repeat(64)).unwrap(), Ok(()));
        assert_eq!(db.catalog_list(t).unwrap().len(), 1);
    }

    #[test]
    fn checks_refuse_what_the_domain_refuses() {
        let (_d, db) = store();
        let t = &AUTOMATIONS;
        for bad in ["-a", "A", "a_b", "", &"a".repeat(64)] {
            assert!(db.catalog_insert(t, &row(bad, 'a')).is_err(), "id {bad:?}");
        }
        let mut r = row("ok", 'a');
        r.revision = "G".repeat(64);
        assert!(db.catalog_insert(t, &r).is_err());
        let mut r = row("ok", 'a');
        r.definition = "[1]".into();
        assert!(db.catalog_insert(t, &r).is_err());
        let mut r = row("ok", 'a');
        r.definition = r#"{"name": 5}"#.into();
        assert!(db.catalog_insert(t, &r).is_err(), "the catalog's own check");
        let mut r = row("ok", 'a');
        r.definition = r.definition.replace("\"skip\"", "\"sometimes\"");
        assert!(db.catalog_insert(t, &r).is_err(), "an enum check");
        assert!(db
            .catalog_insert(t, &row(&"a".repeat(63), 'a'))
            .unwrap()
            .is_ok());
    }
}
