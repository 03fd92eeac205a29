//! What the store's data weighs, for the operator's system routes (`GET /api/v1/system/df`,
//! `system/info`, `POST /api/v1/system/prune`): event bytes in total and per run, blob bytes,
//! the database and WAL files.
//!
//! Event counts and bytes (the stored JSON text's UTF-8 bytes) are read from each run's row
//! (`runs.event_count`, `runs.event_bytes`, kept by every write that adds events, schema
//! migration 13), not from the events: at a million events, summing them took seconds.
//!
//! Owns: these read-only queries. Must not touch: deleting runs (that is the store's
//! `delete_run`, the tombstone path) or what the figures mean.

use super::error::StoreError;
use super::SqliteStore;
use rusqlite::OptionalExtension;
use std::path::PathBuf;

/// The store's totals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreTotals {
    pub runs: u64,
    pub events: u64,
    pub event_bytes: u64,
    pub blobs: u64,
    pub blob_bytes: u64,
}

/// One run's events: how many and their bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunWeight {
    pub run_id: String,
    pub events: u64,
    pub event_bytes: u64,
}

/// Read-only size queries over the run store.
pub trait StoreSizes: Send + Sync {
    /// Runs, events and blobs with their bytes.
    fn totals(&self) -> Result<StoreTotals, StoreError>;
    /// The `n` runs whose events weigh most, heaviest first.
    fn heaviest_runs(&self, n: usize) -> Result<Vec<RunWeight>, StoreError>;
    /// The events of one run (none for an unknown run).
    fn run_weight(&self, run_id: &str) -> Result<RunWeight, StoreError>;
    /// The database file and its WAL.
    fn database_files(&self) -> (PathBuf, PathBuf);
}

impl StoreSizes for SqliteStore {
    fn totals(&self) -> Result<StoreTotals, StoreError> {
        self.read(|conn| {
            let one = |sql: &str| -> Result<(u64, u64), StoreError> {
                conn.query_row(sql, [], |r| {
                    Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
                })
                .map_err(StoreError::db_global("measuring the store"))
            };
            let (events, event_bytes) = one(
                "SELECT COALESCE(SUM(event_count), 0), COALESCE(SUM(event_bytes), 0) FROM runs",
            )?;
            let (blobs, blob_bytes) = one("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM blobs")?;
            let (runs, _) = one("SELECT COUNT(*), 0 FROM runs")?;
            Ok(StoreTotals {
                runs,
                events,
                event_bytes,
                blobs,
                blob_bytes,
            })
        })
    }

    fn heaviest_runs(&self, n: usize) -> Result<Vec<RunWeight>, StoreError> {
        self.read(|conn| {
            let mut st = conn
                .prepare_cached(
                    "SELECT id, event_count, event_bytes FROM runs \
                     ORDER BY event_bytes DESC, id LIMIT ?1",
                )
                .map_err(StoreError::db_global("measuring runs"))?;
            let rows = st
                .query_map([n as i64], |r| {
                    Ok(RunWeight {
                        run_id: r.get(0)?,
                        events: r.get::<_, i64>(1)? as u64,
                        event_bytes: r.get::<_, i64>(2)? as u64,
                    })
                })
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(StoreError::db_global("measuring runs"))?;
            Ok(rows)
        })
    }

    fn run_weight(&self, run_id: &str) -> Result<RunWeight, StoreError> {
        self.read(|conn| {
            let found = conn
                .prepare_cached("SELECT event_count, event_bytes FROM runs WHERE id = ?1")
                .and_then(|mut st| {
                    st.query_row([run_id], |r| {
                        Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
                    })
                    .optional()
                })
                .map_err(StoreError::db_global("measuring a run"))?;
            let (events, event_bytes) = found.unwrap_or((0, 0));
            Ok(RunWeight {
                run_id: run_id.to_string(),
                events,
                event_bytes,
            })
        })
    }

    fn database_files(&self) -> (PathBuf, PathBuf) {
        let db = self.path().to_path_buf();
        let mut wal = db.clone().into_os_string();
        wal.push("-wal");
        (db, PathBuf::from(wal))
    }
}
