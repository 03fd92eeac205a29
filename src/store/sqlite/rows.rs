//! A run's stored form and the SQL around it: the row's mutable part (`runs.state`), a
//! batch of events folded onto a row, assembling a row from its three stored parts, event
//! keys, and the statements that insert rows and events.
//!
//! Owns: the encoding of rows and events in the tables. Must not touch: connections or
//! transactions (the caller's).

use crate::base::event_kind;
use crate::store::error::StoreError;
use crate::store::fold::fold;
use crate::store::model::{Control, Event, RunQuery, RunRow, RunStatus, SandboxState, UsageTotals};
use crate::store::prep;
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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
    #[serde(skip_serializing_if = "Option::is_none")]
    pull_request: &'a Option<Value>,
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
    #[serde(default)]
    pull_request: Option<Value>,
}

/// Events about to be appended together, folded onto their run's row: what one append
/// transaction writes.
pub(super) struct Batch {
    /// The row after every event.
    pub(super) row: RunRow,
    /// `row`'s mutable part as stored (`runs.state`).
    pub(super) state: String,
    /// Each event's JSON text, in order.
    pub(super) payloads: Vec<String>,
    /// The seq of the last `checkpoint.completed` among them.
    pub(super) checkpoint_seq: Option<u64>,
}

impl Batch {
    /// Numbers `events` after `row.last_seq`, encodes them and folds them onto `row`. With
    /// `move_checkpoint` a checkpoint's properties move into the row instead of being copied
    /// (the caller puts them back if the event is still needed).
    pub(super) fn fold(
        mut row: RunRow,
        events: &mut [Event],
        move_checkpoint: bool,
    ) -> Result<Batch, StoreError> {
        let mut payloads = Vec::with_capacity(events.len());
        let mut checkpoint_seq = None;
        for event in events.iter_mut() {
            event.seq = row.last_seq + 1;
            payloads.push(prep::encode(event)?);
            if event.event != event_kind::CHECKPOINT_COMPLETED {
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

pub(super) fn encode_state(row: &RunRow) -> Result<String, StoreError> {
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
        pull_request: &row.pull_request,
    })
    .map_err(|source| StoreError::Encode {
        what: "row state",
        run_id: row.id.clone(),
        source,
    })
}

pub(super) fn corrupt(run_id: &str, reason: String) -> StoreError {
    StoreError::Corrupt {
        run_id: run_id.to_string(),
        reason,
    }
}

pub(super) fn parse_event(run_id: &str, seq: u64, json: &str) -> Result<Event, StoreError> {
    serde_json::from_str(json)
        .map_err(|e| corrupt(run_id, format!("event {seq} is not a valid event: {e}")))
}

/// Assembles a row from `runs.state`, the `run.created` payload and the checkpoint payload.
pub(super) fn assemble(
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
    row.pull_request = s.pull_request;
    if let Some(text) = checkpoint {
        row.checkpoint = Some(parse_event(run_id, 0, text)?.properties);
    }
    Ok(row)
}

pub(super) const ROW_SELECT: &str = "SELECT r.id, r.state, c.payload, k.payload FROM runs r \
     JOIN events c ON c.key = (r.num << 32) + 1 \
     LEFT JOIN events k ON k.key = (r.num << 32) + r.checkpoint_seq";

/// An event's key (`events.key`, its rowid): the run's number (`runs.num`) in the high 32
/// bits and the event's seq in the low ones, so a run's events are one key range, in seq
/// order, and a run's appends go to the end of its range (schema migration 2).
pub(super) fn event_key(run_num: i64, run_id: &str, seq: u64) -> Result<i64, StoreError> {
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
pub(super) use run_keys_from;

pub(super) fn row_from_sql(
    r: &rusqlite::Row<'_>,
) -> rusqlite::Result<(String, String, String, Option<String>)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
}

pub(super) fn load_row(conn: &Connection, run_id: &str) -> Result<Option<RunRow>, StoreError> {
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
pub(super) fn last_seq_on_file(conn: &Connection, run_id: &str) -> Result<Option<u64>, StoreError> {
    conn.prepare_cached("SELECT last_seq FROM runs WHERE id = ?1")
        .and_then(|mut st| st.query_row([run_id], |r| r.get(0)).optional())
        .map_err(StoreError::db("reading a run", run_id))
}

pub(super) fn tombstone_of(conn: &Connection, run_id: &str) -> Result<Option<String>, StoreError> {
    conn.prepare_cached("SELECT deleted_at FROM tombstones WHERE run_id = ?1")
        .and_then(|mut st| st.query_row([run_id], |r| r.get(0)).optional())
        .map_err(StoreError::db("reading tombstones", run_id))
}

/// A deleted id can never come back: creating or importing it is refused.
pub(super) fn refuse_tombstoned(conn: &Connection, run_id: &str) -> Result<(), StoreError> {
    match tombstone_of(conn, run_id)? {
        Some(deleted_at) => Err(StoreError::Tombstoned {
            run_id: run_id.to_string(),
            deleted_at,
        }),
        None => Ok(()),
    }
}

/// `NotFound` or `Tombstoned` for a run that has no row.
pub(super) fn missing(conn: &Connection, run_id: &str) -> StoreError {
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

pub(super) fn run_exists(conn: &Connection, run_id: &str) -> Result<bool, StoreError> {
    conn.prepare_cached("SELECT 1 FROM runs WHERE id = ?1")
        .and_then(|mut st| st.exists([run_id]))
        .map_err(StoreError::db("reading a run", run_id))
}

/// The WHERE clause (over `runs r`) and its arguments for a query's filter (paging aside).
pub(super) fn run_filter(query: &RunQuery) -> (String, Vec<rusqlite::types::Value>) {
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
    if !query.exclude_statuses.is_empty() {
        let marks = vec!["?"; query.exclude_statuses.len()].join(", ");
        sql.push_str(&format!(" AND r.status NOT IN ({marks})"));
        args.extend(query.exclude_statuses.iter().cloned().map(Into::into));
    }
    if let Some(parent) = &query.parent_id {
        sql.push_str(" AND r.parent_id = ?");
        args.push(parent.clone().into());
    }
    if let Some(automation) = &query.automation_id {
        sql.push_str(" AND r.automation_id = ?");
        args.push(automation.clone().into());
    }
    if let Some(workflow) = &query.workflow {
        sql.push_str(" AND r.workflow = ?");
        args.push(workflow.clone().into());
    }
    if let Some(below) = &query.id_below {
        sql.push_str(" AND r.id < ?");
        args.push(below.clone().into());
    }
    (sql, args)
}

pub(super) fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// How many events a write adds to a run and their bytes (the stored JSON text), kept on
/// the run's row (`runs.event_count`, `runs.event_bytes`) so what the runs weigh is read
/// from `runs` instead of from every event.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct EventWeight {
    pub(super) count: u64,
    pub(super) bytes: u64,
}

impl EventWeight {
    /// The weight of these stored event texts.
    pub(super) fn of<'a>(payloads: impl IntoIterator<Item = &'a str>) -> EventWeight {
        payloads
            .into_iter()
            .fold(EventWeight::default(), |w, p| EventWeight {
                count: w.count + 1,
                bytes: w.bytes + p.len() as u64,
            })
    }
}

/// Inserts the run's row with the next run number and the weight of its first events, and
/// returns that number.
pub(super) fn insert_run_row(
    tx: &Connection,
    row: &RunRow,
    state: &str,
    checkpoint_seq: Option<u64>,
    weight: EventWeight,
    op: &'static str,
) -> Result<i64, StoreError> {
    tx.prepare_cached(
        "INSERT INTO runs (id, status, archived, parent_id, created_at, updated_at, last_seq, \
         checkpoint_seq, state, automation_id, workflow, event_count, event_bytes, num) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, \
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
                state,
                row.automation_id(),
                row.workflow.catalog_name(),
                weight.count as i64,
                weight.bytes as i64
            ],
            |r| r.get(0),
        )
    })
    .map_err(StoreError::db(op, &row.id))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn insert_event(
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
pub(super) const INSERT_ROWS: usize = 8;

/// Inserts up to [`INSERT_ROWS`] events of one run with one (cached) statement: a
/// statement per event cost a sixth of a durable no-op stage.
pub(super) fn insert_events(
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
