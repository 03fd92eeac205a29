//! A run's human questions over HTTP: `GET /runs/{id}/questions` (optionally waiting for one
//! to be asked: `?wait=30s`) and `POST /runs/{id}/questions/{qid}/answer`.
//!
//! A script that starts a run and then asks for its questions would otherwise race the run
//! to its gate (an empty list, then an answer to question `null`), so the list can wait: with
//! `wait` it answers as soon as the run has an open question or has ended, else when the wait
//! is over (at most [`MAX_WAIT`]), with whatever is open then. An answer names its question
//! by id: a malformed id is 400 saying what an id looks like, an id the run never asked 404,
//! a question that was asked but is no longer open 409.
//!
//! Owns: the question routes' input checks and waiting. Must not touch: answer matching and
//! delivery (see [`super::interviewer`]), SQL (through `RunStore` only).

use super::super::error::ApiError;
use super::super::http::{parse_json, Reply};
use super::super::router::Ctx;
use super::super::App;
use super::{interviewer, store_error, view};
use crate::base::clock::is_canonical_ulid;
use crate::base::event_kind;
use crate::store::{RunRow, RunStatus, RunStore};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The longest `?wait=` honoured; longer waits are cut to it.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

pub fn questions(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let id = ctx.param("id").to_string();
    let wait = wait_param(ctx)?;
    let row = match wait {
        Some(w) if !w.is_zero() => wait_for_question(app, &id, w)?,
        _ => app.runs.row(&id)?,
    };
    let data: Vec<Value> = row.questions.iter().map(view::question_item).collect();
    Ok(Reply::json(
        200,
        &json!({"data": data, "meta": {"has_more": false}}),
    ))
}

/// `?wait=`: whole seconds (`30`) or a number with `ms`, `s` or `m` (`30s`); 400 otherwise.
fn wait_param(ctx: &Ctx<'_, '_>) -> Result<Option<Duration>, ApiError> {
    let Some(raw) = ctx.inc.query("wait") else {
        return Ok(None);
    };
    let t = raw.trim();
    let (digits, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let per_unit_ms: Option<u64> = match unit {
        "" | "s" => Some(1000),
        "ms" => Some(1),
        "m" => Some(60_000),
        _ => None,
    };
    // All digits: a number too large for u64 means "as long as you can", like any past the
    // limit.
    let parsed = per_unit_ms.filter(|_| !digits.is_empty()).map(|ms| {
        let n = digits.parse::<u64>().unwrap_or(u64::MAX);
        Duration::from_millis(n.saturating_mul(ms)).min(MAX_WAIT)
    });
    parsed.map(Some).ok_or_else(|| {
        ApiError::bad_request(format!(
            "Query parameter wait `{t}` is not a duration: use seconds (`30`) or a number with ms, s or m (`30s`)."
        ))
        .with_code("invalid_wait")
    })
}

/// The run's row once it has an open question or has ended, or when `wait` is over.
fn wait_for_question(app: &App, id: &str, wait: Duration) -> Result<RunRow, ApiError> {
    let deadline = Instant::now() + wait;
    // Subscribed before the first read: a question asked in between is not missed.
    let feed = app.runs.store.hub().subscribe(id);
    let mut row = app.runs.row(id)?;
    loop {
        if !row.questions.is_empty() || !may_ask_soon(&row.status) {
            return Ok(row);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(row);
        }
        match feed.recv_timeout(left) {
            Ok(ev) if ev.event.starts_with("interview.") || ev.event.starts_with("run.") => {
                row = app.runs.row(id)?;
            }
            Ok(_) => {}
            Err(_) => return app.runs.row(id),
        }
    }
}

/// Whether a run in this status can come to ask a question without anyone doing anything:
/// not when it has ended, and not before it is started or approved.
fn may_ask_soon(status: &RunStatus) -> bool {
    !status.is_terminal()
        && !matches!(
            status,
            RunStatus::Submitted | RunStatus::Pending { .. } | RunStatus::Removing
        )
}

pub fn answer(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let id = ctx.param("id").to_string();
    let qid = ctx.param("qid").to_string();
    check_question_id(&qid)?;
    let body: interviewer::SubmitAnswer = parse_json(ctx.inc.body()?)?;
    let row = app.runs.row(&id)?;
    let listed = row
        .questions
        .iter()
        .any(|q| q.get("question_id").and_then(Value::as_str) == Some(qid.as_str()));
    if !listed && !was_asked(app.runs.store.as_ref(), &id, &qid)? {
        return Err(ApiError::not_found(format!(
            "Run {id} has no question {qid}; GET /api/v1/runs/{id}/questions lists the open ones."
        ))
        .with_code("question_not_found"));
    }
    if row.archived {
        return Err(ApiError::conflict(format!("Run {id} is archived.")));
    }
    match &row.status {
        RunStatus::Running | RunStatus::Blocked { .. } => {}
        RunStatus::Paused { .. } => {
            return Err(ApiError::conflict(format!(
                "Run {id} is paused; unpause it before answering."
            )))
        }
        s => {
            return Err(ApiError::conflict(format!(
                "Run {id} is {}; only a running run can take answers.",
                s.name()
            )))
        }
    }
    let handle = app
        .runs
        .handle(&id)
        .ok_or_else(|| ApiError::conflict(format!("Run {id} has no live engine to answer.")))?;
    handle.answer(&qid, &body, listed)?;
    Ok(Reply::empty(204))
}

/// Question ids are ULIDs, as the engine mints them; anything else (`null` from a script that
/// read an empty list, a label, a node id) is refused before the run is looked at.
fn check_question_id(qid: &str) -> Result<(), ApiError> {
    if is_canonical_ulid(qid) {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "Invalid question ID `{qid}`: a question id is a ULID, 26 letters and digits such as \
         01JNDEM0000000000000000004, the `id` of an item of GET /api/v1/runs/{{id}}/questions."
    ))
    .with_code("invalid_question_id"))
}

/// Whether the run ever asked question `qid` (an `interview.started` naming it).
fn was_asked(store: &dyn RunStore, run_id: &str, qid: &str) -> Result<bool, ApiError> {
    const PAGE: usize = 1000;
    let mut since = 1;
    loop {
        let page = store.events(run_id, since, PAGE).map_err(store_error)?;
        let found = page.iter().any(|e| {
            e.event == event_kind::INTERVIEW_STARTED
                && e.properties.get("question_id").and_then(Value::as_str) == Some(qid)
        });
        if found {
            return Ok(true);
        }
        match page.last() {
            Some(last) if page.len() == PAGE => since = last.seq + 1,
            _ => return Ok(false),
        }
    }
}
