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
//! checkpoint is the properties of the event at `runs.checkpoint_seq`, both read by join.//!
//! Files: this one (the store, its connections and the `RunStore` methods), `rows` (a row's
//! stored form and the SQL that reads and writes rows and events), `check` (integrity checks,
//! the legacy-import record, counts). Tables of other modules live beside it (`store/versions.rs`),
//! through `SqliteStore::read` and `SqliteStore::write`.

mod check;
mod rows;
#[cfg(test)]
mod tests;

pub(crate) use check::LegacyRecord;
use rows::{
    assemble, corrupt, encode_state, insert_event, insert_events, insert_run_row, last_seq_on_file,
    load_row, missing, parse_event, refuse_tombstoned, row_from_sql, run_exists, run_filter,
    run_keys_from, sql_limit, tombstone_of, Batch, EventWeight, INSERT_ROWS, ROW_SELECT,
};

use super::error::{ActivationError, StoreError};
use super::hub::{Hub, Published};
use super::model::{Event, EventDraft, ImportOutcome, NewRun, RawEvent, RunQuery, RunRow};
use super::prep::{self, sha256_hex};
use super::queue::Queue;
use super::rowcache::RowCache;
use super::schema::{self, SchemaError};
use super::{ActivationReport, RunStore};
use crate::base::clock;
use crate::base::event_kind;
use crossbeam_channel::{bounded, RecvTimeoutError, Sender};
use parking_lot::Mutex;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
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
    crate::base::perms::private_file(db_path).map_err(io(db_path))?;
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut side = db_path.as_os_str().to_owned();
        side.push(suffix);
        let side = std::path::PathBuf::from(side);
        crate::base::perms::tighten_file(&side).map_err(io(&side))?;
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

    /// `f` on a pooled read-only connection: how this store and the table modules beside
    /// it (`store/versions.rs`) read.
    pub(in crate::internal::store) fn read<T>(
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

    /// `f` on the writer connection in one `BEGIN IMMEDIATE` transaction, committed when
    /// `f` succeeds (nothing of it remains otherwise): how table modules write. `op` names
    /// the write in errors.
    pub(in crate::internal::store) fn write<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let w = self.writer.lock();
        let sql = |sql: &str| w.conn.execute_batch(sql).map_err(StoreError::db_global(op));
        sql("BEGIN IMMEDIATE")?;
        let result = f(&w.conn).and_then(|v| sql("COMMIT").map(|_| v));
        if !w.conn.is_autocommit() {
            let _ = w.conn.execute_batch("ROLLBACK");
        }
        result
    }

    /// Test hook: caps the database size (`PRAGMA max_page_count`) to provoke "disk full".
    #[cfg(any(test, feature = "test-support"))]
    pub fn limit_pages_for_tests(&self, max_pages: u64) -> Result<u64, StoreError> {
        let w = self.writer.lock();
        w.conn
            .query_row(&format!("PRAGMA max_page_count = {max_pages}"), [], |r| {
                r.get(0)
            })
            .map_err(StoreError::db_global("setting max_page_count"))
    }

    /// The statements of one append transaction: the row updated once (guarded by
    /// `prev_seq`: `false` when it moved, nothing written; its event count and bytes grown by
    /// the batch's) and every event inserted.
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
        let weight = EventWeight::of(batch.payloads.iter().map(String::as_str));
        let (count, bytes) = (weight.count as i64, weight.bytes as i64);
        let updated = if status_changed {
            conn.prepare_cached(
                "UPDATE runs SET status = ?2, archived = ?3, updated_at = ?4, last_seq = ?5, \
                 checkpoint_seq = COALESCE(?6, checkpoint_seq), state = ?7, \
                 event_count = event_count + ?9, event_bytes = event_bytes + ?10 \
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
                    prev_seq,
                    count,
                    bytes
                ])
            })
        } else {
            // Indexed columns unchanged: leave them out so no index is touched.
            conn.prepare_cached(
                "UPDATE runs SET updated_at = ?2, last_seq = ?3, \
                 checkpoint_seq = COALESCE(?4, checkpoint_seq), state = ?5, \
                 event_count = event_count + ?7, event_bytes = event_bytes + ?8 \
                 WHERE id = ?1 AND last_seq = ?6",
            )
            .and_then(|mut st| {
                st.execute(params![
                    run_id,
                    row.updated_at,
                    row.last_seq,
                    batch.checkpoint_seq,
                    batch.state,
                    prev_seq,
                    count,
                    bytes
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
        let weight = EventWeight::of([payload.as_str()]);
        let run_num = insert_run_row(&tx, &row, &state, None, weight, "creating a run")?;
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
        self.read(|conn| {
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
        self.read(|conn| {
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
        if Queue::answers(&query.statuses)
            && query.exclude_statuses.is_empty()
            && query.parent_id.is_none()
            && query.automation_id.is_none()
            && query.workflow.is_none()
        {
            // Only terminal runs can be archived, so `exclude_archived` changes nothing.
            return self.count_tracked(&query.statuses, query.id_below.as_deref());
        }
        let (filter, args) = run_filter(query);
        let sql = format!("SELECT COUNT(*) FROM runs r WHERE {filter}");
        self.read(|conn| {
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
        self.read(|conn| {
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
        self.read(|conn| tombstone_of(conn, run_id))
    }

    fn import_run(&self, run_id: &str, lines: &[String]) -> Result<ImportOutcome, StoreError> {
        let err = StoreError::db("importing a run", run_id);
        let mut guard = self.writer.lock();
        let w = &mut *guard;
        let tx = w
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        let imported = import_in(&tx, run_id, lines)?;
        tx.commit().map_err(&err)?;
        Ok(self.note_imported(w, run_id, imported))
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
        let found: Option<(i64, Vec<u8>)> = self.read(|conn| {
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
        self.read(|conn| {
            conn.prepare_cached("SELECT 1 FROM blobs WHERE id = ?1")
                .and_then(|mut st| st.exists([id]))
                .map_err(StoreError::db_global("reading a blob"))
        })
    }

    fn hub(&self) -> &Hub {
        &self.hub
    }
}

impl SqliteStore {
    /// Imports many runs (each as [`RunStore::import_run`] would) in one transaction: all or
    /// none. For tools and benchmarks that fill a store with thousands of runs, where a
    /// commit per run would dominate.
    pub fn import_runs(
        &self,
        runs: &[(String, Vec<String>)],
    ) -> Result<Vec<ImportOutcome>, StoreError> {
        let err = StoreError::db_global("importing runs");
        let mut guard = self.writer.lock();
        let w = &mut *guard;
        let tx = w
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        let imported = runs
            .iter()
            .map(|(run_id, lines)| import_in(&tx, run_id, lines))
            .collect::<Result<Vec<_>, _>>()?;
        tx.commit().map_err(&err)?;
        Ok(runs
            .iter()
            .zip(imported)
            .map(|((run_id, _), i)| self.note_imported(w, run_id, i))
            .collect())
    }

    /// After an import's commit: the writer's and the queue's notes of a run it inserted.
    fn note_imported(&self, w: &mut Writer, run_id: &str, imported: Imported) -> ImportOutcome {
        w.cache.forget(run_id);
        match imported {
            Imported::Inserted { num, status } => {
                w.remember_num(run_id, num);
                self.queue.lock().note(run_id, Some(status));
                ImportOutcome::Imported
            }
            Imported::AlreadyPresent => ImportOutcome::AlreadyPresent,
        }
    }
}

/// What [`import_in`] did with one run.
enum Imported {
    /// Its row (number `num`, in `status`) and events were inserted.
    Inserted { num: i64, status: &'static str },
    /// The store already holds exactly these events.
    AlreadyPresent,
}

/// One run's import inside the caller's transaction: refused when tombstoned or when the
/// store holds different events for it; nothing written when it holds the same ones.
fn import_in(tx: &Connection, run_id: &str, lines: &[String]) -> Result<Imported, StoreError> {
    let (events, row) = prep::parse_import(run_id, lines)?;
    let state = encode_state(&row)?;
    let checkpoint_seq = events
        .iter()
        .rev()
        .find(|e| e.event == event_kind::CHECKPOINT_COMPLETED)
        .map(|e| e.seq);
    let err = StoreError::db("importing a run", run_id);
    refuse_tombstoned(tx, run_id)?;
    if run_exists(tx, run_id)? {
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
            Ok(Imported::AlreadyPresent)
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
    let weight = EventWeight::of(lines.iter().map(String::as_str));
    let run_num = insert_run_row(tx, &row, &state, checkpoint_seq, weight, "importing a run")?;
    for (event, text) in events.iter().zip(lines) {
        insert_event(
            tx,
            run_num,
            run_id,
            event.seq,
            &event.event,
            &event.ts,
            text,
            "importing a run",
        )?;
    }
    Ok(Imported::Inserted {
        num: run_num,
        status: row.status.name(),
    })
}
