//! [`RunStore`] on one SQLite file (bundled SQLite, WAL): the service's only store.
//!
//! Owns: the database file given to it, its writer connection (behind one lock: every write
//! is one short `BEGIN IMMEDIATE` transaction) and a small pool of read-only connections,
//! a bounded in-memory cache of recent rows shared by the writer and the readers
//! (`rowcache.rs`: validated by `last_seq` on every write, so a stale entry can never be
//! committed, and on every read, so a read never returns one), and the hub.
//! Must not touch: files other than the database (activation, in `activation.rs`, handles the
//! state directory, legacy data and the backup).
//!
//! Layout (see `schema.rs`): `runs` holds the typed columns and the mutable part of the row,
//! `events` the log (payload = the event's JSON text, byte for byte), `blobs`, `tombstones`.
//! The immutable part of the row is the fold of the run's `run.created` event and the
//! checkpoint is the properties of the event at `runs.checkpoint_seq`, both read by join.

use super::error::{ActivationError, StoreError};
use super::fold::fold;
use super::hub::{Hub, Published};
use super::model::{
    Control, Event, EventDraft, ImportOutcome, NewRun, RawEvent, RunQuery, RunRow, RunStatus,
    SandboxState, UsageTotals,
};
use super::prep::{self, sha256_hex};
use super::queue::Queue;
use super::rowcache::RowCache;
use super::schema::{self, SchemaError};
use super::{clock, ActivationReport, RunStore};
use crossbeam_channel::{bounded, RecvTimeoutError, Sender};
use parking_lot::Mutex;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Idle read connections kept open.
const READER_POOL: usize = 8;

/// How often the background checkpointer copies committed WAL pages into the database.
const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(100);

/// The SQLite-backed store. Create it with [`SqliteStore::activate`] (the server) or
/// [`SqliteStore::open`] (tools and tests).
pub struct SqliteStore {
    path: PathBuf,
    writer: Mutex<Writer>,
    readers: Mutex<Vec<Connection>>,
    rows: Arc<RowCache>,
    /// Queued and slot-holding run ids, noted by the writer under its lock (see `queue.rs`).
    queue: Mutex<Queue>,
    hub: Hub,
    _checkpointer: Option<Checkpointer>,
    pub(crate) report: Option<ActivationReport>,
}

/// A thread that runs `PRAGMA wal_checkpoint(PASSIVE)` every [`CHECKPOINT_INTERVAL`], so the
/// fsyncs of checkpointing never stall a commit. Passive checkpoints never block writers or
/// readers; they skip what they cannot do now and catch up next time.
struct Checkpointer {
    stop: Option<Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl Checkpointer {
    fn spawn(path: &Path) -> Result<Checkpointer, ActivationError> {
        let conn = schema::open_checkpointer(path).map_err(|source| ActivationError::Database {
            what: "opening the checkpointer connection".into(),
            path: path.to_path_buf(),
            source,
        })?;
        let (stop, stopped) = bounded::<()>(1);
        let handle = std::thread::Builder::new()
            .name("svc-store-checkpoint".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(CHECKPOINT_INTERVAL)
                {
                    // A failure here (busy, I/O) is retried next tick; the writer's inline
                    // autocheckpoint is the safety net if it keeps failing.
                    let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                }
            })
            .map_err(|source| ActivationError::Io {
                what: "start the checkpointer thread for",
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Checkpointer {
            stop: Some(stop),
            handle: Some(handle),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

struct Writer {
    conn: Connection,
    /// The same cache as the store's: the writer takes a row out while it folds an event
    /// onto it and puts the committed result back.
    cache: Arc<RowCache>,
    /// Run numbers (`runs.num`, fixed for a run's life) of runs this writer wrote, so an
    /// append keys its events without asking the database (an `UPDATE ... RETURNING num`
    /// cost 5-9 µs per append). A deleted run's id never comes back, so an entry is never
    /// wrong, only forgotten.
    nums: HashMap<String, i64>,
}

/// Run numbers the writer remembers before it starts over.
const MAX_NUMS: usize = 65_536;

/// The mutable part of a row, as stored in `runs.state`.
#[derive(Serialize)]
struct StateRef<'a> {
    status: &'a RunStatus,
    pending_control: &'a Option<Control>,
    archived: bool,
    archived_at: &'a Option<String>,
    approval: &'a Option<Value>,
    error: &'a Option<String>,
    created_at: &'a str,
    updated_at: &'a str,
    started_at: &'a Option<String>,
    completed_at: &'a Option<String>,
    last_event_at: &'a Option<String>,
    last_seq: u64,
    questions: &'a [Value],
    superseded_by: &'a Option<String>,
    usage: &'a UsageTotals,
    models_used: &'a [Value],
    sandbox: &'a SandboxState,
    diff: &'a Option<Value>,
}

#[derive(Deserialize)]
struct StateOwned {
    status: RunStatus,
    pending_control: Option<Control>,
    archived: bool,
    archived_at: Option<String>,
    approval: Option<Value>,
    error: Option<String>,
    created_at: String,
    updated_at: String,
    started_at: Option<String>,
    completed_at: Option<String>,
    last_event_at: Option<String>,
    last_seq: u64,
    #[serde(default)]
    questions: Vec<Value>,
    #[serde(default)]
    superseded_by: Option<String>,
    #[serde(default)]
    usage: UsageTotals,
    #[serde(default)]
    models_used: Vec<Value>,
    sandbox: SandboxState,
    #[serde(default)]
    diff: Option<Value>,
}

/// Events about to be appended together, folded onto their run's row: what one append
/// transaction writes.
struct Batch {
    /// The row after every event.
    row: RunRow,
    /// `row`'s mutable part as stored (`runs.state`).
    state: String,
    /// Each event's JSON text, in order.
    payloads: Vec<String>,
    /// The seq of the last `checkpoint.completed` among them.
    checkpoint_seq: Option<u64>,
}

impl Batch {
    /// Numbers `events` after `row.last_seq`, encodes them and folds them onto `row`. With
    /// `move_checkpoint` a checkpoint's properties move into the row instead of being copied
    /// (the caller puts them back if the event is still needed).
    fn fold(
        mut row: RunRow,
        events: &mut [Event],
        move_checkpoint: bool,
    ) -> Result<Batch, StoreError> {
        let mut payloads = Vec::with_capacity(events.len());
        let mut checkpoint_seq = None;
        for event in events.iter_mut() {
            event.seq = row.last_seq + 1;
            payloads.push(prep::encode(event)?);
            if event.event != "checkpoint.completed" {
                row = fold(row, event);
                continue;
            }
            checkpoint_seq = Some(event.seq);
            if !move_checkpoint {
                row = fold(row, event);
                continue;
            }
            let properties = std::mem::take(&mut event.properties);
            row = fold(row, event);
            row.checkpoint = Some(properties);
        }
        let state = encode_state(&row)?;
        Ok(Batch {
            row,
            state,
            payloads,
            checkpoint_seq,
        })
    }
}

fn encode_state(row: &RunRow) -> Result<String, StoreError> {
    prep::json_text(&StateRef {
        status: &row.status,
        pending_control: &row.pending_control,
        archived: row.archived,
        archived_at: &row.archived_at,
        approval: &row.approval,
        error: &row.error,
        created_at: &row.created_at,
        updated_at: &row.updated_at,
        started_at: &row.started_at,
        completed_at: &row.completed_at,
        last_event_at: &row.last_event_at,
        last_seq: row.last_seq,
        questions: &row.questions,
        superseded_by: &row.superseded_by,
        usage: &row.usage,
        models_used: &row.models_used,
        sandbox: &row.sandbox,
        diff: &row.diff,
    })
    .map_err(|source| StoreError::Encode {
        what: "row state",
        run_id: row.id.clone(),
        source,
    })
}

fn corrupt(run_id: &str, reason: String) -> StoreError {
    StoreError::Corrupt {
        run_id: run_id.to_string(),
        reason,
    }
}

fn parse_event(run_id: &str, seq: u64, json: &str) -> Result<Event, StoreError> {
    serde_json::from_str(json)
        .map_err(|e| corrupt(run_id, format!("event {seq} is not a valid event: {e}")))
}

/// Assembles a row from `runs.state`, the `run.created` payload and the checkpoint payload.
fn assemble(
    run_id: &str,
    state: &str,
    created: &str,
    checkpoint: Option<&str>,
) -> Result<RunRow, StoreError> {
    let s: StateOwned = serde_json::from_str(state)
        .map_err(|e| corrupt(run_id, format!("row state is not valid: {e}")))?;
    let created = parse_event(run_id, 1, created)?;
    let mut row = RunRow::from_created(&created);
    row.status = s.status;
    row.pending_control = s.pending_control;
    row.archived = s.archived;
    row.archived_at = s.archived_at;
    row.approval = s.approval;
    row.error = s.error;
    row.created_at = s.created_at;
    row.updated_at = s.updated_at;
    row.started_at = s.started_at;
    row.completed_at = s.completed_at;
    row.last_event_at = s.last_event_at;
    row.last_seq = s.last_seq;
    row.current_question = s.questions.first().cloned();
    row.questions = s.questions;
    row.superseded_by = s.superseded_by;
    row.usage = s.usage;
    row.models_used = s.models_used;
    row.sandbox = s.sandbox;
    row.diff = s.diff;
    if let Some(text) = checkpoint {
        row.checkpoint = Some(parse_event(run_id, 0, text)?.properties);
    }
    Ok(row)
}

const ROW_SELECT: &str = "SELECT r.id, r.state, c.payload, k.payload FROM runs r \
     JOIN events c ON c.key = (r.num << 32) + 1 \
     LEFT JOIN events k ON k.key = (r.num << 32) + r.checkpoint_seq";

/// An event's key (`events.key`, its rowid): the run's number (`runs.num`) in the high 32
/// bits and the event's seq in the low ones, so a run's events are one key range, in seq
/// order, and a run's appends go to the end of its range (schema migration 2).
fn event_key(run_num: i64, run_id: &str, seq: u64) -> Result<i64, StoreError> {
    if !(1..=i64::from(i32::MAX)).contains(&run_num) || seq >= 1 << 32 {
        return Err(corrupt(
            run_id,
            format!("its number {run_num} and seq {seq} make no event key"),
        ));
    }
    Ok((run_num << 32) | seq as i64)
}

/// `key BETWEEN` the keys of seq `$from` (SQL) and of the last possible seq of run `?1`.
macro_rules! run_keys_from {
    ($from:literal) => {
        concat!(
            "key BETWEEN ((SELECT num FROM runs WHERE id = ?1) << 32) + ",
            $from,
            " AND ((SELECT num FROM runs WHERE id = ?1) << 32) + 4294967295"
        )
    };
}

fn row_from_sql(
    r: &rusqlite::Row<'_>,
) -> rusqlite::Result<(String, String, String, Option<String>)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
}

fn load_row(conn: &Connection, run_id: &str) -> Result<Option<RunRow>, StoreError> {
    let found = conn
        .prepare_cached(&format!("{ROW_SELECT} WHERE r.id = ?1"))
        .and_then(|mut st| st.query_row([run_id], row_from_sql).optional())
        .map_err(StoreError::db("reading a run", run_id))?;
    match found {
        Some((id, state, created, checkpoint)) => {
            assemble(&id, &state, &created, checkpoint.as_deref()).map(Some)
        }
        None => Ok(None),
    }
}

/// The run's committed `last_seq`, `None` when it has no row: what a cached row is checked
/// against.
fn last_seq_on_file(conn: &Connection, run_id: &str) -> Result<Option<u64>, StoreError> {
    conn.prepare_cached("SELECT last_seq FROM runs WHERE id = ?1")
        .and_then(|mut st| st.query_row([run_id], |r| r.get(0)).optional())
        .map_err(StoreError::db("reading a run", run_id))
}

fn tombstone_of(conn: &Connection, run_id: &str) -> Result<Option<String>, StoreError> {
    conn.prepare_cached("SELECT deleted_at FROM tombstones WHERE run_id = ?1")
        .and_then(|mut st| st.query_row([run_id], |r| r.get(0)).optional())
        .map_err(StoreError::db("reading tombstones", run_id))
}

/// A deleted id can never come back: creating or importing it is refused.
fn refuse_tombstoned(conn: &Connection, run_id: &str) -> Result<(), StoreError> {
    match tombstone_of(conn, run_id)? {
        Some(deleted_at) => Err(StoreError::Tombstoned {
            run_id: run_id.to_string(),
            deleted_at,
        }),
        None => Ok(()),
    }
}

/// `NotFound` or `Tombstoned` for a run that has no row.
fn missing(conn: &Connection, run_id: &str) -> StoreError {
    match tombstone_of(conn, run_id) {
        Ok(Some(deleted_at)) => StoreError::Tombstoned {
            run_id: run_id.to_string(),
            deleted_at,
        },
        Ok(None) => StoreError::NotFound {
            run_id: run_id.to_string(),
        },
        Err(e) => e,
    }
}

fn run_exists(conn: &Connection, run_id: &str) -> Result<bool, StoreError> {
    conn.prepare_cached("SELECT 1 FROM runs WHERE id = ?1")
        .and_then(|mut st| st.exists([run_id]))
        .map_err(StoreError::db("reading a run", run_id))
}

/// The WHERE clause (over `runs r`) and its arguments for a query's filter (paging aside).
fn run_filter(query: &RunQuery) -> (String, Vec<rusqlite::types::Value>) {
    let mut sql = String::from("1 = 1");
    let mut args: Vec<rusqlite::types::Value> = Vec::new();
    if query.exclude_archived {
        sql.push_str(" AND r.archived = 0");
    }
    if !query.statuses.is_empty() {
        let marks = vec!["?"; query.statuses.len()].join(", ");
        sql.push_str(&format!(" AND r.status IN ({marks})"));
        args.extend(query.statuses.iter().cloned().map(Into::into));
    }
    if let Some(parent) = &query.parent_id {
        sql.push_str(" AND r.parent_id = ?");
        args.push(parent.clone().into());
    }
    if let Some(below) = &query.id_below {
        sql.push_str(" AND r.id < ?");
        args.push(below.clone().into());
    }
    (sql, args)
}

fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// Inserts the run's row with the next run number, and returns that number.
fn insert_run_row(
    tx: &Connection,
    row: &RunRow,
    state: &str,
    checkpoint_seq: Option<u64>,
    op: &'static str,
) -> Result<i64, StoreError> {
    tx.prepare_cached(
        "INSERT INTO runs (id, status, archived, parent_id, created_at, updated_at, last_seq, \
         checkpoint_seq, state, num) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, \
         (SELECT COALESCE(MAX(num), 0) + 1 FROM runs)) RETURNING num",
    )
    .and_then(|mut st| {
        st.query_row(
            params![
                row.id,
                row.status.name(),
                row.archived,
                row.parent_id,
                row.created_at,
                row.updated_at,
                row.last_seq,
                checkpoint_seq,
                state
            ],
            |r| r.get(0),
        )
    })
    .map_err(StoreError::db(op, &row.id))
}

#[allow(clippy::too_many_arguments)]
fn insert_event(
    tx: &Connection,
    run_num: i64,
    run_id: &str,
    seq: u64,
    kind: &str,
    ts: &str,
    payload: &str,
    op: &'static str,
) -> Result<(), StoreError> {
    let key = event_key(run_num, run_id, seq)?;
    tx.prepare_cached(
        "INSERT INTO events (key, run_id, seq, kind, ts, payload) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut st| st.execute(params![key, run_id, seq, kind, ts, payload]))
    .map(|_| ())
    .map_err(StoreError::db(op, run_id))
}

/// Events inserted by one statement (a stage's closing events fit in one).
const INSERT_ROWS: usize = 8;

/// Inserts up to [`INSERT_ROWS`] events of one run with one (cached) statement: a
/// statement per event cost a sixth of a durable no-op stage.
fn insert_events(
    conn: &Connection,
    run_num: i64,
    run_id: &str,
    rows: &[(&Event, &String)],
) -> Result<(), StoreError> {
    let mut sql = String::from("INSERT INTO events (key, run_id, seq, kind, ts, payload) VALUES ");
    for i in 0..rows.len() {
        sql.push_str(if i == 0 {
            "(?,?,?,?,?,?)"
        } else {
            ",(?,?,?,?,?,?)"
        });
    }
    let err = StoreError::db("appending an event", run_id);
    let mut st = conn.prepare_cached(&sql).map_err(&err)?;
    let mut at = 1;
    for (event, payload) in rows {
        let key = event_key(run_num, run_id, event.seq)?;
        st.raw_bind_parameter(at, key).map_err(&err)?;
        st.raw_bind_parameter(at + 1, run_id).map_err(&err)?;
        st.raw_bind_parameter(at + 2, event.seq).map_err(&err)?;
        st.raw_bind_parameter(at + 3, &event.event).map_err(&err)?;
        st.raw_bind_parameter(at + 4, &event.ts).map_err(&err)?;
        st.raw_bind_parameter(at + 5, payload.as_str())
            .map_err(&err)?;
        at += 6;
    }
    st.raw_execute().map(|_| ()).map_err(&err)
}

/// The database file is created 0600 before SQLite opens it, so the WAL and shared-memory
/// files SQLite creates next to it take the same mode (SQLite copies the database's mode,
/// not the umask's); files found with a looser mode are tightened.
fn make_private(db_path: &Path) -> Result<(), ActivationError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ActivationError::Io {
            what: "make the database private",
            path,
            source,
        }
    };
    crate::perms::private_file(db_path).map_err(io(db_path))?;
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut side = db_path.as_os_str().to_owned();
        side.push(suffix);
        let side = std::path::PathBuf::from(side);
        crate::perms::tighten_file(&side).map_err(io(&side))?;
    }
    Ok(())
}

impl SqliteStore {
    /// Opens (creating if needed) the database file at `db_path` and migrates it; no checks,
    /// no legacy import. For tools and tests; the server uses [`SqliteStore::activate`].
    pub fn open(db_path: &Path) -> Result<SqliteStore, ActivationError> {
        let dberr = |what: &str, source| ActivationError::Database {
            what: what.to_string(),
            path: db_path.to_path_buf(),
            source,
        };
        let schema_err = |e: SchemaError| match e {
            SchemaError::Sql(what, source) => dberr(what, source),
            SchemaError::NotOurs(found) => ActivationError::NotOurs {
                path: db_path.to_path_buf(),
                found,
            },
            SchemaError::Newer(found) => ActivationError::NewerSchema {
                path: db_path.to_path_buf(),
                found,
                supported: schema::SCHEMA_VERSION,
            },
        };
        make_private(db_path)?;
        let mut conn = schema::open_writer(db_path).map_err(schema_err)?;
        schema::migrate(&mut conn).map_err(schema_err)?;
        schema::defer_checkpoints(&conn).map_err(|e| dberr("setting wal_autocheckpoint", e))?;
        let checkpointer = Some(Checkpointer::spawn(db_path)?);
        let rows = Arc::new(RowCache::default());
        Ok(SqliteStore {
            path: db_path.to_path_buf(),
            writer: Mutex::new(Writer {
                nums: HashMap::new(),
                conn,
                cache: Arc::clone(&rows),
            }),
            queue: Mutex::new(Queue::default()),
            readers: Mutex::new(Vec::new()),
            rows,
            hub: Hub::new(),
            _checkpointer: checkpointer,
            report: None,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What activation did, when the store came from [`SqliteStore::activate`].
    pub fn activation_report(&self) -> Option<&ActivationReport> {
        self.report.as_ref()
    }

    /// Appends `drafts` (checked, at least one) with the writer lock held, in one
    /// transaction (see [`RunStore::append`] and [`RunStore::append_all`]). With
    /// `seqs_only` the caller uses only the events' seqs: a checkpoint's properties move
    /// into the cached row instead of being copied (subscribers still get them whole).
    fn append_locked(
        &self,
        w: &mut Writer,
        run_id: &str,
        drafts: Vec<EventDraft>,
        seqs_only: bool,
    ) -> Result<Vec<Event>, StoreError> {
        // Minted under the lock, so timestamps follow seq order (as far as the clock does).
        let mut events: Vec<Event> = drafts
            .into_iter()
            .map(|d| prep::mint(run_id, 0, d))
            .collect();
        for _attempt in 0..2 {
            let row = w.take_row(run_id)?;
            let prev_seq = row.last_seq;
            let before = (row.status.name(), row.archived);
            let batch = Batch::fold(row, &mut events, seqs_only)?;
            let status_changed = before != (batch.row.status.name(), batch.row.archived);
            // The row update is guarded by the previous `last_seq`: `false` when the cached
            // row was stale (nothing written), and the next attempt reloads it.
            let written = w.write_tx(
                "appending an event",
                run_id,
                |w| {
                    let run_num = w.run_num(run_id)?;
                    Self::append_statements(
                        &w.conn,
                        run_num,
                        run_id,
                        &events,
                        &batch,
                        prev_seq,
                        status_changed,
                    )
                },
                |written| *written,
            )?;
            if written {
                if status_changed {
                    self.queue
                        .lock()
                        .note(run_id, Some(batch.row.status.name()));
                }
                w.keep_row(batch.row);
                return Ok(events
                    .into_iter()
                    .zip(batch.payloads)
                    .map(|(event, payload)| self.publish(event, payload))
                    .collect());
            }
        }
        Err(corrupt(
            run_id,
            "its row changed under the writer twice in a row (another process writing?)".into(),
        ))
    }

    /// Queued or slot-holding runs in `statuses` (created before `below`), from the in-memory
    /// sets (`queue.rs`); they are re-read when another connection has changed the database.
    fn count_tracked(&self, statuses: &[String], below: Option<&str>) -> Result<usize, StoreError> {
        if self.queue.lock().due() {
            // Under the writer's lock no note can land between the read and the reload.
            let w = self.writer.lock();
            let version: i64 = w
                .conn
                .query_row("PRAGMA data_version", [], |r| r.get(0))
                .map_err(StoreError::db_global("reading the data version"))?;
            let mut q = self.queue.lock();
            if q.due() && !q.current_at(version) {
                let marks = vec!["?"; super::queue::TRACKED.len()].join(", ");
                let rows = w
                    .conn
                    .prepare_cached(&format!(
                        "SELECT id, status FROM runs WHERE status IN ({marks})"
                    ))
                    .and_then(|mut st| {
                        st.query_map(rusqlite::params_from_iter(super::queue::TRACKED), |r| {
                            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                        })
                        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                    })
                    .map_err(StoreError::db_global("reading the queue"))?;
                q.reload(rows, version);
            }
        }
        Ok(self.queue.lock().count(statuses, below))
    }

    fn with_reader<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let pooled = self.readers.lock().pop();
        let conn = match pooled {
            Some(c) => c,
            None => schema::open_reader(&self.path)
                .map_err(StoreError::db_global("opening a read connection"))?,
        };
        let result = f(&conn);
        let mut pool = self.readers.lock();
        if pool.len() < READER_POOL {
            pool.push(conn);
        }
        result
    }

    /// Runs `PRAGMA quick_check` (or the full `integrity_check` when `full`) on a read
    /// connection. Returns the problems found; empty means the database is sound. Reads the
    /// whole file: seconds on a large database.
    pub fn integrity_problems(&self, full: bool) -> Result<Vec<String>, StoreError> {
        let sql = if full {
            "PRAGMA integrity_check"
        } else {
            "PRAGMA quick_check"
        };
        self.with_reader(|conn| {
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
        self.with_reader(|conn| {
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
            let folded = super::replay(&events)
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
        self.with_reader(|conn| {
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
        self.with_reader(|conn| {
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
        self.with_reader(|conn| {
            conn.query_row(
                "SELECT (SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM events)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(StoreError::db_global("counting runs"))
        })
    }

    /// Test hook: caps the database size (`PRAGMA max_page_count`) to provoke "disk full".
    #[doc(hidden)]
    pub fn limit_pages_for_tests(&self, max_pages: u64) -> Result<u64, StoreError> {
        let w = self.writer.lock();
        w.conn
            .query_row(&format!("PRAGMA max_page_count = {max_pages}"), [], |r| {
                r.get(0)
            })
            .map_err(StoreError::db_global("setting max_page_count"))
    }

    /// The statements of one append transaction: the row updated once (guarded by
    /// `prev_seq`: `false` when it moved, nothing written) and every event inserted.
    fn append_statements(
        conn: &Connection,
        run_num: i64,
        run_id: &str,
        events: &[Event],
        batch: &Batch,
        prev_seq: u64,
        status_changed: bool,
    ) -> Result<bool, StoreError> {
        let err = StoreError::db("appending an event", run_id);
        let row = &batch.row;
        let updated = if status_changed {
            conn.prepare_cached(
                "UPDATE runs SET status = ?2, archived = ?3, updated_at = ?4, last_seq = ?5, \
                 checkpoint_seq = COALESCE(?6, checkpoint_seq), state = ?7 \
                 WHERE id = ?1 AND last_seq = ?8",
            )
            .and_then(|mut st| {
                st.execute(params![
                    run_id,
                    row.status.name(),
                    row.archived,
                    row.updated_at,
                    row.last_seq,
                    batch.checkpoint_seq,
                    batch.state,
                    prev_seq
                ])
            })
        } else {
            // Indexed columns unchanged: leave them out so no index is touched.
            conn.prepare_cached(
                "UPDATE runs SET updated_at = ?2, last_seq = ?3, \
                 checkpoint_seq = COALESCE(?4, checkpoint_seq), state = ?5 \
                 WHERE id = ?1 AND last_seq = ?6",
            )
            .and_then(|mut st| {
                st.execute(params![
                    run_id,
                    row.updated_at,
                    row.last_seq,
                    batch.checkpoint_seq,
                    batch.state,
                    prev_seq
                ])
            })
        }
        .map_err(&err)?;
        if updated != 1 {
            return Ok(false);
        }
        let rows: Vec<_> = events.iter().zip(&batch.payloads).collect();
        for chunk in rows.chunks(INSERT_ROWS) {
            insert_events(conn, run_num, run_id, chunk)?;
        }
        Ok(true)
    }

    /// `append_decided` inside its transaction: the row as the file has it, the decision,
    /// and its events written. Returns the folded row, the events with their stored JSON, and
    /// whether the status (or archive flag) changed.
    #[allow(clippy::type_complexity)]
    fn decide_and_write(
        w: &mut Writer,
        run_id: &str,
        decide: &mut dyn FnMut(&RunRow) -> Vec<EventDraft>,
    ) -> Result<(RunRow, Vec<(Event, String)>, bool), StoreError> {
        // The cached row unless another process moved the run on.
        let cached = w.take_row(run_id)?;
        let row = match last_seq_on_file(&w.conn, run_id)? {
            None => return Err(missing(&w.conn, run_id)),
            Some(seq) if seq == cached.last_seq => cached,
            Some(_) => load_row(&w.conn, run_id)?.ok_or_else(|| missing(&w.conn, run_id))?,
        };
        let drafts = decide(&row);
        for d in &drafts {
            prep::check_draft(run_id, d)?;
        }
        if drafts.is_empty() {
            return Ok((row, Vec::new(), false));
        }
        let prev_seq = row.last_seq;
        let first = (row.status.name(), row.archived);
        let mut events: Vec<Event> = drafts
            .into_iter()
            .map(|d| prep::mint(run_id, 0, d))
            .collect();
        let batch = Batch::fold(row, &mut events, false)?;
        let changed = first != (batch.row.status.name(), batch.row.archived);
        // The write lock is held since the read above, so the row cannot have moved.
        let run_num = w.run_num(run_id)?;
        if !Self::append_statements(&w.conn, run_num, run_id, &events, &batch, prev_seq, changed)? {
            return Err(corrupt(
                run_id,
                "its row changed inside a write transaction".into(),
            ));
        }
        let minted = events.into_iter().zip(batch.payloads).collect();
        Ok((batch.row, minted, changed))
    }

    /// Hands a committed event (and its stored JSON text) to the hub's subscribers. An
    /// event whose properties moved into the row (`Null`, see [`Batch::fold`]; a stored
    /// event's are never `Null`) gets them back from its stored text first.
    fn publish(&self, mut event: Event, payload: String) -> Event {
        if !self.hub.has_listeners(&event.run_id) {
            return event;
        }
        if event.properties.is_null() {
            event.properties = serde_json::from_str::<Value>(&payload)
                .ok()
                .and_then(|mut v| v.get_mut("properties").map(Value::take))
                .unwrap_or_else(|| Value::Object(Default::default()));
        }
        let shared = Arc::new(Published::with_json(event, payload));
        self.hub.publish(Arc::clone(&shared));
        Published::into_event(shared)
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

impl Writer {
    fn take_row(&mut self, run_id: &str) -> Result<RunRow, StoreError> {
        if let Some(row) = self.cache.take(run_id) {
            return Ok(row);
        }
        load_row(&self.conn, run_id)?.ok_or_else(|| missing(&self.conn, run_id))
    }

    fn keep_row(&mut self, row: RunRow) {
        self.cache.put(row);
    }

    /// The run's number, remembered or read from its row.
    fn run_num(&mut self, run_id: &str) -> Result<i64, StoreError> {
        if let Some(num) = self.nums.get(run_id) {
            return Ok(*num);
        }
        let num: Option<i64> = self
            .conn
            .prepare_cached("SELECT num FROM runs WHERE id = ?1")
            .and_then(|mut st| st.query_row([run_id], |r| r.get(0)).optional())
            .map_err(StoreError::db("reading a run", run_id))?;
        let num = num.ok_or_else(|| missing(&self.conn, run_id))?;
        self.remember_num(run_id, num);
        Ok(num)
    }

    fn remember_num(&mut self, run_id: &str, num: i64) {
        if self.nums.len() >= MAX_NUMS {
            self.nums.clear();
        }
        self.nums.insert(run_id.to_string(), num);
    }

    /// Runs `body` in one `BEGIN IMMEDIATE` transaction and commits when `keep` accepts its
    /// result; after an error or a refusal nothing of it remains. BEGIN and COMMIT are cached
    /// statements: this is the hot path of every append.
    fn write_tx<T>(
        &mut self,
        op: &'static str,
        run_id: &str,
        body: impl FnOnce(&mut Writer) -> Result<T, StoreError>,
        keep: impl FnOnce(&T) -> bool,
    ) -> Result<T, StoreError> {
        let err = StoreError::db(op, run_id);
        let run = |conn: &Connection, sql: &str| {
            conn.prepare_cached(sql)
                .and_then(|mut st| st.execute([]))
                .map_err(&err)
        };
        run(&self.conn, "BEGIN IMMEDIATE")?;
        let result = match body(self) {
            Ok(v) if keep(&v) => run(&self.conn, "COMMIT").map(|_| v),
            other => other,
        };
        if !self.conn.is_autocommit() {
            // Nothing of it may remain; a failed ROLLBACK leaves SQLite to roll back.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        result
    }
}

impl RunStore for SqliteStore {
    fn create_run(&self, new: NewRun) -> Result<RunRow, StoreError> {
        let (event, payload, row) = prep::prepare_created(new)?;
        let state = encode_state(&row)?;
        let run_id_owned = row.id.clone();
        let run_id = run_id_owned.as_str();
        let err = StoreError::db("creating a run", run_id);
        // Cloned before the lock: the writer's lock is the store's one serial section.
        let kept = row.clone();
        let mut guard = self.writer.lock();
        let w = &mut *guard;
        let tx = w
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        refuse_tombstoned(&tx, run_id)?;
        if run_exists(&tx, run_id)? {
            return Err(StoreError::AlreadyExists {
                run_id: run_id.to_string(),
            });
        }
        let run_num = insert_run_row(&tx, &row, &state, None, "creating a run")?;
        insert_event(
            &tx,
            run_num,
            run_id,
            1,
            &event.event,
            &event.ts,
            &payload,
            "creating a run",
        )?;
        tx.commit().map_err(&err)?;
        w.keep_row(kept);
        w.remember_num(run_id, run_num);
        self.publish(event, payload);
        Ok(row)
    }

    fn append(&self, run_id: &str, draft: EventDraft) -> Result<Event, StoreError> {
        prep::check_draft(run_id, &draft)?;
        let mut guard = self.writer.lock();
        self.append_locked(&mut guard, run_id, vec![draft], false)?
            .pop()
            .ok_or_else(|| corrupt(run_id, "an append wrote no event".into()))
    }

    fn append_all(&self, run_id: &str, drafts: Vec<EventDraft>) -> Result<Option<u64>, StoreError> {
        for d in &drafts {
            prep::check_draft(run_id, d)?;
        }
        if drafts.is_empty() {
            return Ok(None);
        }
        let mut guard = self.writer.lock();
        let events = self.append_locked(&mut guard, run_id, drafts, true)?;
        Ok(events.last().map(|e| e.seq))
    }

    fn append_decided(
        &self,
        run_id: &str,
        decide: &mut dyn FnMut(&RunRow) -> Vec<EventDraft>,
    ) -> Result<(RunRow, Vec<Event>), StoreError> {
        let mut guard = self.writer.lock();
        let w = &mut *guard;
        // One write transaction: the row is read, the decision made and its events written
        // atomically (a crash never keeps half of a plan), with one lock round.
        let (row, minted, status_changed) = w.write_tx(
            "appending an event",
            run_id,
            |w| Self::decide_and_write(w, run_id, decide),
            |_| true,
        )?;
        if status_changed {
            self.queue.lock().note(run_id, Some(row.status.name()));
        }
        w.keep_row(row.clone());
        let events = minted
            .into_iter()
            .map(|(event, payload)| self.publish(event, payload))
            .collect();
        Ok((row, events))
    }

    fn get_run(&self, run_id: &str) -> Result<Option<RunRow>, StoreError> {
        self.with_reader(|conn| {
            let Some(last_seq) = last_seq_on_file(conn, run_id)? else {
                return Ok(None);
            };
            if let Some(row) = self.rows.get_at(run_id, last_seq) {
                return Ok(Some(row));
            }
            let row = load_row(conn, run_id)?;
            if let Some(r) = &row {
                self.rows.offer(r);
            }
            Ok(row)
        })
    }

    fn query_runs(&self, query: &RunQuery) -> Result<Vec<RunRow>, StoreError> {
        let (filter, mut args) = run_filter(query);
        let mut sql = format!("{ROW_SELECT} WHERE {filter}");
        sql.push_str(if query.oldest_first {
            " ORDER BY r.id ASC"
        } else {
            " ORDER BY r.id DESC"
        });
        sql.push_str(" LIMIT ? OFFSET ?");
        args.push(sql_limit(query.limit).into());
        args.push(sql_limit(query.offset).into());
        self.with_reader(|conn| {
            let err = StoreError::db_global("listing runs");
            let mut st = conn.prepare_cached(&sql).map_err(&err)?;
            let rows = st
                .query_map(rusqlite::params_from_iter(args.iter()), row_from_sql)
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(&err)?;
            rows.iter()
                .map(|(id, state, created, cp)| assemble(id, state, created, cp.as_deref()))
                .collect()
        })
    }

    fn count_runs(&self, query: &RunQuery) -> Result<usize, StoreError> {
        if Queue::answers(&query.statuses) && query.parent_id.is_none() {
            // Only terminal runs can be archived, so `exclude_archived` changes nothing.
            return self.count_tracked(&query.statuses, query.id_below.as_deref());
        }
        let (filter, args) = run_filter(query);
        let sql = format!("SELECT COUNT(*) FROM runs r WHERE {filter}");
        self.with_reader(|conn| {
            let err = StoreError::db_global("counting runs");
            let mut st = conn.prepare_cached(&sql).map_err(&err)?;
            let n: i64 = st
                .query_row(rusqlite::params_from_iter(args.iter()), |r| r.get(0))
                .map_err(&err)?;
            Ok(usize::try_from(n).unwrap_or(0))
        })
    }

    fn events(&self, run_id: &str, since_seq: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        self.events_raw(run_id, since_seq, limit)?
            .into_iter()
            .map(|raw| parse_event(run_id, raw.seq, &raw.json))
            .collect()
    }

    fn events_raw(
        &self,
        run_id: &str,
        since_seq: u64,
        limit: usize,
    ) -> Result<Vec<RawEvent>, StoreError> {
        self.with_reader(|conn| {
            let err = StoreError::db("reading events", run_id);
            let mut st = conn
                .prepare_cached(concat!(
                    "SELECT seq, payload FROM events WHERE ",
                    run_keys_from!("?2"),
                    " ORDER BY key LIMIT ?3"
                ))
                .map_err(&err)?;
            let rows = st
                .query_map(params![run_id, since_seq, sql_limit(limit)], |r| {
                    Ok(RawEvent {
                        seq: r.get(0)?,
                        json: r.get(1)?,
                    })
                })
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(&err)?;
            if rows.is_empty() && !run_exists(conn, run_id)? {
                return Err(missing(conn, run_id));
            }
            Ok(rows)
        })
    }

    fn delete_run(&self, run_id: &str) -> Result<(), StoreError> {
        let err = StoreError::db("deleting a run", run_id);
        let mut guard = self.writer.lock();
        let w = &mut *guard;
        w.cache.forget(run_id);
        w.nums.remove(run_id);
        let tx = w
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        if tombstone_of(&tx, run_id)?.is_some() {
            return Ok(());
        }
        // The events first: their keys come from the run's row.
        tx.execute(
            concat!("DELETE FROM events WHERE ", run_keys_from!("0")),
            [run_id],
        )
        .map_err(&err)?;
        let removed = tx
            .execute("DELETE FROM runs WHERE id = ?1", [run_id])
            .map_err(&err)?;
        if removed == 0 {
            return Err(StoreError::NotFound {
                run_id: run_id.to_string(),
            });
        }
        tx.execute(
            "INSERT INTO tombstones (run_id, deleted_at) VALUES (?1, ?2)",
            params![run_id, clock::now()],
        )
        .map_err(&err)?;
        tx.commit().map_err(&err)?;
        self.queue.lock().note(run_id, None);
        self.hub.close_run(run_id);
        Ok(())
    }

    fn tombstone(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        self.with_reader(|conn| tombstone_of(conn, run_id))
    }

    fn import_run(&self, run_id: &str, lines: &[String]) -> Result<ImportOutcome, StoreError> {
        let (events, row) = prep::parse_import(run_id, lines)?;
        let state = encode_state(&row)?;
        let checkpoint_seq = events
            .iter()
            .rev()
            .find(|e| e.event == "checkpoint.completed")
            .map(|e| e.seq);
        let err = StoreError::db("importing a run", run_id);
        let mut guard = self.writer.lock();
        let w = &mut *guard;
        w.cache.forget(run_id);
        let tx = w
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        refuse_tombstoned(&tx, run_id)?;
        if run_exists(&tx, run_id)? {
            let stored: Vec<String> = tx
                .prepare_cached(concat!(
                    "SELECT payload FROM events WHERE ",
                    run_keys_from!("0"),
                    " ORDER BY key"
                ))
                .and_then(|mut st| {
                    st.query_map([run_id], |r| r.get(0))?
                        .collect::<rusqlite::Result<Vec<String>>>()
                })
                .map_err(&err)?;
            return if stored == lines {
                Ok(ImportOutcome::AlreadyPresent)
            } else {
                Err(StoreError::ImportConflict {
                    run_id: run_id.to_string(),
                    reason: format!(
                        "the store holds {} different event(s) for this run",
                        stored.len()
                    ),
                })
            };
        }
        let run_num = insert_run_row(&tx, &row, &state, checkpoint_seq, "importing a run")?;
        for (event, text) in events.iter().zip(lines) {
            insert_event(
                &tx,
                run_num,
                run_id,
                event.seq,
                &event.event,
                &event.ts,
                text,
                "importing a run",
            )?;
        }
        tx.commit().map_err(&err)?;
        w.remember_num(run_id, run_num);
        self.queue.lock().note(run_id, Some(row.status.name()));
        Ok(ImportOutcome::Imported)
    }

    fn put_blob(&self, bytes: &[u8]) -> Result<String, StoreError> {
        let id = sha256_hex(bytes);
        let w = self.writer.lock();
        w.conn
            .prepare_cached("INSERT OR IGNORE INTO blobs (id, size, bytes) VALUES (?1, ?2, ?3)")
            .and_then(|mut st| st.execute(params![id, bytes.len(), bytes]))
            .map_err(StoreError::db_global("storing a blob"))?;
        Ok(id)
    }

    fn get_blob(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        if !prep::is_blob_id(id) {
            return Err(StoreError::InvalidBlobId { id: id.to_string() });
        }
        let found: Option<(i64, Vec<u8>)> = self.with_reader(|conn| {
            conn.prepare_cached("SELECT size, bytes FROM blobs WHERE id = ?1")
                .and_then(|mut st| {
                    st.query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()
                })
                .map_err(StoreError::db_global("reading a blob"))
        })?;
        let Some((size, bytes)) = found else {
            return Ok(None);
        };
        let actual = sha256_hex(&bytes);
        if actual != id || usize::try_from(size).ok() != Some(bytes.len()) {
            return Err(StoreError::CorruptBlob {
                id: id.to_string(),
                actual,
                size: bytes.len(),
            });
        }
        Ok(Some(bytes))
    }

    fn has_blob(&self, id: &str) -> Result<bool, StoreError> {
        self.with_reader(|conn| {
            conn.prepare_cached("SELECT 1 FROM blobs WHERE id = ?1")
                .and_then(|mut st| st.exists([id]))
                .map_err(StoreError::db_global("reading a blob"))
        })
    }

    fn hub(&self) -> &Hub {
        &self.hub
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("svc.db")).unwrap();
        (dir, s)
    }

    /// Turns a current database back into schema 1 (events keyed by run id and seq, WITHOUT
    /// ROWID; runs without a number), as an older svc left it.
    fn downgrade_to_v1(path: &Path) {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(
            "BEGIN;
             CREATE TABLE events_v1 (run_id TEXT NOT NULL, seq INTEGER NOT NULL,
                 kind TEXT NOT NULL, ts TEXT NOT NULL, payload TEXT NOT NULL,
                 PRIMARY KEY (run_id, seq)) WITHOUT ROWID;
             INSERT INTO events_v1 SELECT run_id, seq, kind, ts, payload FROM events;
             DROP TABLE events;
             ALTER TABLE events_v1 RENAME TO events;
             DROP INDEX runs_by_num;
             ALTER TABLE runs DROP COLUMN num;
             DELETE FROM schema_version WHERE version = 2;
             COMMIT;",
        )
        .unwrap();
    }

    #[test]
    fn a_schema_1_database_is_migrated_with_every_run_and_event_and_keeps_working() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("svc.db");
        let mut before = Vec::new();
        {
            let s = SqliteStore::open(&path).unwrap();
            for title in ["first", "second", "third"] {
                let row = s
                    .create_run(NewRun {
                        title: title.into(),
                        ..NewRun::default()
                    })
                    .unwrap();
                s.append(&row.id, EventDraft::new("run.queued", json!({})))
                    .unwrap();
                s.append(
                    &row.id,
                    EventDraft::new("checkpoint.completed", json!({"current_node": title})),
                )
                .unwrap();
                before.push(row.id);
            }
            // Deleted before the migration: nothing of it may come back.
            s.delete_run(&before[1]).unwrap();
        }
        // A deleted run reads as an error (tombstoned) and no events.
        let read = |s: &SqliteStore, id: &str| {
            let events: Vec<(u64, String)> = s
                .events(id, 0, 100)
                .unwrap_or_default()
                .into_iter()
                .map(|e| (e.seq, e.event))
                .collect();
            (s.get_run(id).ok().flatten(), events)
        };
        let expected: Vec<_> = {
            let s = SqliteStore::open(&path).unwrap();
            before.iter().map(|id| read(&s, id)).collect()
        };
        downgrade_to_v1(&path);
        let s = SqliteStore::open(&path).unwrap();
        let after: Vec<_> = before.iter().map(|id| read(&s, id)).collect();
        assert_eq!(after, expected);
        assert!(after[1].0.is_none() && after[1].1.is_empty());
        assert_eq!(after[2].1.len(), 3);
        assert_eq!(
            after[2].0.as_ref().and_then(|r| r.checkpoint.clone()),
            Some(json!({"current_node": "third"}))
        );
        // Appends go on after the migrated events, and a new run gets a number of its own.
        let e = s
            .append(&before[0], EventDraft::new("run.started", json!({})))
            .unwrap();
        assert_eq!(e.seq, 4);
        let fresh = s.create_run(NewRun::default()).unwrap();
        assert_eq!(s.events(&fresh.id, 0, 100).unwrap().len(), 1);
        assert_eq!(s.events(&before[0], 0, 100).unwrap().len(), 4);
        s.verify_run(&before[0]).unwrap();
        s.verify_run(&fresh.id).unwrap();
    }

    #[test]
    fn a_run_number_freed_by_a_delete_elsewhere_never_mixes_two_runs_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("svc.db");
        let (here, elsewhere) = (
            SqliteStore::open(&path).unwrap(),
            SqliteStore::open(&path).unwrap(),
        );
        let kept = here.create_run(NewRun::default()).unwrap().id;
        let gone = here.create_run(NewRun::default()).unwrap().id;
        here.append(&gone, EventDraft::new("run.queued", json!({})))
            .unwrap();
        // Another connection deletes the newest run and creates one, which takes its number.
        elsewhere.delete_run(&gone).unwrap();
        let fresh = elsewhere.create_run(NewRun::default()).unwrap().id;
        // This writer still remembers the deleted run's number: its append must fail, and
        // the new run's events stay the new run's.
        assert!(here
            .append(&gone, EventDraft::new("run.started", json!({})))
            .is_err());
        here.append(&fresh, EventDraft::new("run.queued", json!({})))
            .unwrap();
        let kinds = |id: &str| -> Vec<String> {
            here.events(id, 0, 100)
                .unwrap()
                .into_iter()
                .map(|e| e.event)
                .collect()
        };
        assert_eq!(kinds(&fresh), ["run.created", "run.queued"]);
        assert_eq!(kinds(&kept), ["run.created"]);
        here.verify_run(&fresh).unwrap();
        here.verify_run(&kept).unwrap();
    }

    #[test]
    fn a_runs_events_are_read_as_a_key_range_not_a_scan() {
        let (_d, s) = store();
        let row = s.create_run(NewRun::default()).unwrap();
        let plan: Vec<String> = s
            .with_reader(|conn| {
                let mut st = conn
                    .prepare(concat!(
                        "EXPLAIN QUERY PLAN SELECT seq, payload FROM events WHERE ",
                        run_keys_from!("?2"),
                        " ORDER BY key LIMIT ?3"
                    ))
                    .map_err(StoreError::db("planning", &row.id))?;
                let rows = st
                    .query_map(params![row.id, 1, 10], |r| r.get::<_, String>(3))
                    .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                    .map_err(StoreError::db("planning", &row.id))?;
                Ok(rows)
            })
            .unwrap();
        let events_plan: Vec<&String> = plan.iter().filter(|p| p.contains("events")).collect();
        assert!(
            events_plan
                .iter()
                .all(|p| p.starts_with("SEARCH events USING INTEGER PRIMARY KEY")),
            "{plan:?}"
        );
        assert!(!events_plan.is_empty(), "{plan:?}");
    }

    #[test]
    fn create_append_read_back() {
        let (_d, s) = store();
        let row = s
            .create_run(NewRun {
                title: "t".into(),
                ..NewRun::default()
            })
            .unwrap();
        let e = s
            .append(&row.id, EventDraft::new("run.queued", json!({})))
            .unwrap();
        assert_eq!(e.seq, 2);
        s.append(
            &row.id,
            EventDraft::new("checkpoint.completed", json!({"current_node":"a"})),
        )
        .unwrap();
        let got = s.get_run(&row.id).unwrap().unwrap();
        assert_eq!(got.status, RunStatus::Runnable);
        assert_eq!(got.checkpoint, Some(json!({"current_node":"a"})));
        assert_eq!(got.last_seq, 3);
        s.verify_run(&row.id).unwrap();
        let raw = s.events_raw(&row.id, 2, 10).unwrap();
        assert_eq!(raw.len(), 2);
        assert_eq!(raw[0].json, serde_json::to_string(&e).unwrap());
        assert!(s.cheap_check().is_ok());
    }

    #[test]
    fn append_all_commits_every_event_or_none() {
        let (_d, s) = store();
        let row = s.create_run(NewRun::default()).unwrap();
        let batch = vec![
            EventDraft::new("run.queued", json!({})),
            EventDraft::new("stage.started", json!({"index": 0})),
            EventDraft::new("checkpoint.completed", json!({"current_node": "a"})),
            EventDraft::new("stage.completed", json!({"index": 0})),
        ];
        let sub = s.hub().subscribe(&row.id);
        assert_eq!(s.append_all(&row.id, batch).unwrap(), Some(5));
        // A subscriber gets every event whole, the checkpoint's properties included.
        let live: Vec<(u64, Value)> = std::iter::from_fn(|| sub.try_recv().ok())
            .map(|e| (e.seq, e.properties.clone()))
            .collect();
        assert_eq!(live.len(), 4);
        assert_eq!(live[2], (4, json!({"current_node": "a"})));
        // A bad draft anywhere appends nothing of the batch.
        let bad = vec![
            EventDraft::new("stage.started", json!({})),
            EventDraft::new(" ", json!({})),
        ];
        assert!(s.append_all(&row.id, bad).is_err());
        assert_eq!(s.append_all(&row.id, Vec::new()).unwrap(), None);
        let reopened = SqliteStore::open(s.path()).unwrap();
        let got = reopened.get_run(&row.id).unwrap().unwrap();
        assert_eq!(got.status, RunStatus::Runnable);
        assert_eq!(got.last_seq, 5);
        assert_eq!(got.checkpoint, Some(json!({"current_node": "a"})));
        let kinds: Vec<String> = reopened
            .events(&row.id, 1, 10)
            .unwrap()
            .into_iter()
            .map(|e| e.event)
            .collect();
        assert_eq!(
            kinds,
            [
                "run.created",
                "run.queued",
                "stage.started",
                "checkpoint.completed",
                "stage.completed"
            ]
        );
        reopened.verify_run(&row.id).unwrap();
        assert_eq!(
            reopened.get_run(&row.id).unwrap(),
            s.get_run(&row.id).unwrap()
        );
    }

    #[test]
    fn usage_totals_survive_a_reopen() {
        let (_d, s) = store();
        let row = s.create_run(NewRun::default()).unwrap();
        s.append(
            &row.id,
            EventDraft::new(
                "stage.completed",
                json!({"status": "succeeded", "usage": {"cost": {"usd_micros": 42, "source": "catalog"},
                       "inference_time_ms": 7, "tool_time_ms": 3}}),
            ),
        )
        .unwrap();
        let reopened = SqliteStore::open(s.path()).unwrap();
        let got = reopened.get_run(&row.id).unwrap().unwrap();
        assert_eq!(got.usage.usd_micros, 42);
        assert_eq!(got.usage.inference_time_ms, 7);
        assert_eq!(got.usage.tool_time_ms, 3);
        reopened.verify_run(&row.id).unwrap();
    }

    #[test]
    fn cached_rows_equal_rows_read_from_the_file() {
        let (_d, s) = store();
        let row = s
            .create_run(NewRun {
                title: "cache".into(),
                ..NewRun::default()
            })
            .unwrap();
        let steps = [
            ("run.queued", json!({})),
            ("run.starting", json!({})),
            ("run.running", json!({})),
            (
                "interview.started",
                json!({"question_id": "q1", "question": "Go?"}),
            ),
            (
                "checkpoint.completed",
                json!({"current_node": "a", "context": {"k": [1, 2]}}),
            ),
            ("interview.completed", json!({"question_id": "q1"})),
            (
                "stage.completed",
                json!({"node_id": "a", "usage": {"tokens": {"input": 5, "output": 1}, "cost": {"usd_micros": 7, "source": "catalog"}}}),
            ),
            ("run.completed", json!({"duration_ms": 5})),
            ("run.archived", json!({})),
        ];
        for (kind, props) in steps {
            s.append(&row.id, EventDraft::new(kind, props)).unwrap();
            let cached = s.get_run(&row.id).unwrap();
            let fresh = SqliteStore::open(s.path())
                .unwrap()
                .get_run(&row.id)
                .unwrap();
            assert_eq!(cached, fresh, "after {kind}");
        }
        // A reader fills the cache too, and a deleted run is never served from it.
        let other = SqliteStore::open(s.path()).unwrap();
        assert!(other.get_run(&row.id).unwrap().is_some());
        s.delete_run(&row.id).unwrap();
        assert_eq!(other.get_run(&row.id).unwrap(), None);
    }

    #[test]
    fn queue_counts_follow_status_changes() {
        let (_d, s) = store();
        let ids: Vec<String> = (0..4)
            .map(|_| s.create_run(NewRun::default()).unwrap().id)
            .collect();
        let runnable = |below: Option<&String>| {
            s.count_runs(&RunQuery {
                statuses: vec!["runnable".into()],
                id_below: below.cloned(),
                ..RunQuery::default()
            })
            .unwrap()
        };
        assert_eq!(runnable(None), 0);
        for id in &ids {
            s.append(id, EventDraft::new("run.queued", json!({})))
                .unwrap();
        }
        assert_eq!(runnable(None), 4);
        assert_eq!(runnable(Some(&ids[2])), 2);
        s.append(&ids[0], EventDraft::new("run.starting", json!({})))
            .unwrap();
        s.delete_run(&ids[3]).unwrap();
        assert_eq!(runnable(None), 2);
        assert_eq!(runnable(Some(&ids[2])), 1);
        // The same answers a fresh store reads from the file.
        let fresh = SqliteStore::open(s.path()).unwrap();
        let listed = fresh
            .query_runs(&RunQuery {
                statuses: vec!["runnable".into()],
                ..RunQuery::default()
            })
            .unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(
            fresh
                .count_runs(&RunQuery {
                    statuses: vec!["runnable".into()],
                    id_below: Some(ids[2].clone()),
                    ..RunQuery::default()
                })
                .unwrap(),
            1
        );
        // A change another connection commits shows here within the recheck interval.
        fresh
            .append(&ids[1], EventDraft::new("run.starting", json!({})))
            .unwrap();
        std::thread::sleep(super::super::queue::RECHECK_AFTER + Duration::from_millis(100));
        assert_eq!(runnable(None), 1);
        assert_eq!(runnable(Some(&ids[2])), 0);
    }

    #[test]
    fn stale_cache_is_detected() {
        let (_d, s) = store();
        let row = s.create_run(NewRun::default()).unwrap();
        // Another writer moves the row on behind the cache's back.
        let other = SqliteStore::open(s.path()).unwrap();
        other
            .append(&row.id, EventDraft::new("run.queued", json!({})))
            .unwrap();
        let e = s
            .append(&row.id, EventDraft::new("run.starting", json!({})))
            .unwrap();
        assert_eq!(e.seq, 3);
        s.verify_run(&row.id).unwrap();
        other.delete_run(&row.id).unwrap();
        let err = s
            .append(&row.id, EventDraft::new("x", json!({})))
            .unwrap_err();
        assert!(matches!(err, StoreError::Tombstoned { .. }), "{err}");
    }
}
