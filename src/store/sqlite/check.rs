//! Checks and bookkeeping on the whole database: SQLite's integrity checks, a run's row
//! against the fold of its events, the cheap startup check, the one-time legacy-import record
//! and counts.
//!
//! Owns: reading the database for soundness. Must not touch: rows' contents beyond
//! comparing them (`rows`).

use super::rows::{corrupt, load_row, missing, parse_event, run_keys_from};
use super::SqliteStore;
use crate::store::error::StoreError;
use rusqlite::{params, OptionalExtension};

impl SqliteStore {
    /// Runs `PRAGMA quick_check` (or the full `integrity_check` when `full`) on a read
    /// connection. Returns the problems found; empty means the database is sound. Reads the
    /// whole file: seconds on a large database.
    pub fn integrity_problems(&self, full: bool) -> Result<Vec<String>, StoreError> {
        let sql = if full {
            "PRAGMA integrity_check"
        } else {
            "PRAGMA quick_check"
        };
        self.read(|conn| {
            let mut st = conn
                .prepare(sql)
                .map_err(StoreError::db_global("checking integrity"))?;
            let rows = st
                .query_map([], |r| r.get::<_, String>(0))
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<String>>>())
                .map_err(StoreError::db_global("checking integrity"))?;
            Ok(rows.into_iter().filter(|r| r != "ok").collect())
        })
    }

    /// Checks that the stored row of `run_id` equals the fold of its stored events and that
    /// its seqs run 1..=last_seq without a gap. Reads the whole run.
    pub fn verify_run(&self, run_id: &str) -> Result<(), StoreError> {
        self.read(|conn| {
            let tx_row = load_row(conn, run_id)?.ok_or_else(|| missing(conn, run_id))?;
            let mut st = conn
                .prepare_cached(concat!(
                    "SELECT seq, payload FROM events WHERE ",
                    run_keys_from!("0"),
                    " ORDER BY key"
                ))
                .map_err(StoreError::db("verifying a run", run_id))?;
            let rows = st
                .query_map([run_id], |r| {
                    Ok((r.get::<_, u64>(0)?, r.get::<_, String>(1)?))
                })
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(StoreError::db("verifying a run", run_id))?;
            let mut events = Vec::with_capacity(rows.len());
            for (i, (seq, json)) in rows.iter().enumerate() {
                if *seq != i as u64 + 1 {
                    return Err(corrupt(
                        run_id,
                        format!("seq {seq} found where {} was due", i + 1),
                    ));
                }
                events.push(parse_event(run_id, *seq, json)?);
            }
            let folded = crate::store::replay(&events)
                .ok_or_else(|| corrupt(run_id, "the run has no events".into()))?;
            if folded != tx_row {
                return Err(corrupt(
                    run_id,
                    "the stored row differs from the fold of the stored events".into(),
                ));
            }
            Ok(())
        })
    }

    /// Cheap consistency checks that read a few pages whatever the database size: the newest
    /// run's row, its first and last events, and that nothing follows its last event.
    pub(crate) fn cheap_check(&self) -> Result<(), StoreError> {
        self.read(|conn| {
            let newest: Option<(String, u64)> = conn
                .query_row(
                    "SELECT id, last_seq FROM runs ORDER BY id DESC LIMIT 1",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(StoreError::db_global("reading the newest run"))?;
            let Some((run_id, last_seq)) = newest else {
                return Ok(());
            };
            let row = load_row(conn, &run_id)?
                .ok_or_else(|| corrupt(&run_id, "its run.created event is missing".into()))?;
            if row.last_seq != last_seq {
                return Err(corrupt(
                    &run_id,
                    "row state and last_seq column disagree".into(),
                ));
            }
            let tail: Vec<u64> = conn
                .prepare(concat!(
                    "SELECT seq FROM events WHERE ",
                    run_keys_from!("?2"),
                    " ORDER BY key"
                ))
                .and_then(|mut st| {
                    st.query_map(params![run_id, last_seq], |r| r.get(0))?
                        .collect::<rusqlite::Result<Vec<u64>>>()
                })
                .map_err(StoreError::db("reading the newest run", &run_id))?;
            if tail != [last_seq] {
                return Err(corrupt(
                    &run_id,
                    format!("events at or after last_seq {last_seq} are {tail:?}"),
                ));
            }
            Ok(())
        })
    }

    /// The recorded one-time legacy import, if any.
    pub(crate) fn legacy_record(&self) -> Result<Option<LegacyRecord>, StoreError> {
        self.read(|conn| {
            conn.query_row(
                "SELECT source, backup_file, backup_sha256, backup_size, runs, events, blobs, \
                 completed_at FROM legacy_import WHERE id = 1",
                [],
                |r| {
                    Ok(LegacyRecord {
                        source: r.get(0)?,
                        backup_file: r.get(1)?,
                        backup_sha256: r.get(2)?,
                        backup_size: r.get(3)?,
                        runs: r.get(4)?,
                        events: r.get(5)?,
                        blobs: r.get(6)?,
                        completed_at: r.get(7)?,
                    })
                },
            )
            .optional()
            .map_err(StoreError::db_global("reading the legacy import record"))
        })
    }

    pub(crate) fn record_legacy(&self, rec: &LegacyRecord) -> Result<(), StoreError> {
        let w = self.writer.lock();
        w.conn
            .execute(
                "INSERT INTO legacy_import (id, source, backup_file, backup_sha256, backup_size, \
                 runs, events, blobs, completed_at) VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    rec.source,
                    rec.backup_file,
                    rec.backup_sha256,
                    rec.backup_size,
                    rec.runs,
                    rec.events,
                    rec.blobs,
                    rec.completed_at
                ],
            )
            .map(|_| ())
            .map_err(StoreError::db_global("recording the legacy import"))
    }

    /// Number of runs and of events, counted through the indexes (a full scan: for tools).
    pub fn counts(&self) -> Result<(u64, u64), StoreError> {
        self.read(|conn| {
            conn.query_row(
                "SELECT (SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM events)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(StoreError::db_global("counting runs"))
        })
    }
}

/// The row of `legacy_import`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LegacyRecord {
    pub source: String,
    pub backup_file: String,
    pub backup_sha256: String,
    pub backup_size: u64,
    pub runs: u64,
    pub events: u64,
    pub blobs: u64,
    pub completed_at: String,
}
