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
    /// Runs, events and blobs with their bytes, and the `largest` runs whose events weigh
    /// most, heaviest first (ties by run id).
    fn weigh(&self, largest: usize) -> Result<(StoreTotals, Vec<RunWeight>), StoreError>;
    /// The events of one run (none for an unknown run).
    fn run_weight(&self, run_id: &str) -> Result<RunWeight, StoreError>;
    /// The database file and its WAL.
    fn database_files(&self) -> (PathBuf, PathBuf);
}

/// Whether a run weighing `bytes` (id `id`) goes before `w` in heaviest-first order.
fn heavier(bytes: u64, id: &str, w: &RunWeight) -> bool {
    bytes > w.event_bytes || (bytes == w.event_bytes && id < w.run_id.as_str())
}

impl StoreSizes for SqliteStore {
    fn weigh(&self, largest: usize) -> Result<(StoreTotals, Vec<RunWeight>), StoreError> {
        self.read(|conn| {
            let err = StoreError::db_global("measuring the store");
            let (blobs, blob_bytes) = conn
                .query_row(
                    "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM blobs",
                    [],
                    |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64)),
                )
                .map_err(&err)?;
            let mut totals = StoreTotals {
                blobs,
                blob_bytes,
                ..StoreTotals::default()
            };
            // One pass over `runs` gives the totals and the heaviest runs (a second scan for
            // `ORDER BY event_bytes` cost as much again at 100,000 runs).
            let mut top: Vec<RunWeight> = Vec::with_capacity(largest + 1);
            let mut st = conn
                .prepare_cached("SELECT event_count, event_bytes, id FROM runs")
                .map_err(&err)?;
            let mut rows = st.query([]).map_err(&err)?;
            while let Some(r) = rows.next().map_err(&err)? {
                let events = r.get::<_, i64>(0).map_err(&err)? as u64;
                let bytes = r.get::<_, i64>(1).map_err(&err)? as u64;
                totals.runs += 1;
                totals.events += events;
                totals.event_bytes += bytes;
                if largest == 0
                    || top
                        .last()
                        .is_some_and(|w| top.len() == largest && w.event_bytes > bytes)
                {
                    continue;
                }
                let id: String = r.get(2).map_err(&err)?;
                let at = top.partition_point(|w| !heavier(bytes, &id, w));
                if at < largest {
                    top.insert(
                        at,
                        RunWeight {
                            run_id: id,
                            events,
                            event_bytes: bytes,
                        },
                    );
                    top.truncate(largest);
                }
            }
            Ok((totals, top))
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
