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
    let by = super::actor_of(ctx);
    answer_as(&app.runs, &id, &qid, &body, by)?;
    Ok(Reply::empty(204))
}

/// Answers question `qid` of run `id` as `by` (a principal as JSON), by the rules of the
/// answer route; the chosen option's label.
pub fn answer_as(
    runs: &super::Runs,
    id: &str,
    qid: &str,
    body: &interviewer::SubmitAnswer,
    by: Value,
) -> Result<String, ApiError> {
    check_question_id(qid)?;
    let row = runs.row(id)?;
    let listed = row
        .questions
        .iter()
        .any(|q| q.get("question_id").and_then(Value::as_str) == Some(qid));
    if !listed {
        let rec = question_record(runs.store.as_ref(), id, qid)?;
        if let Some(done) = &rec.answered {
            return Err(already_answered(qid, done));
        }
        if !rec.asked {
            return Err(ApiError::not_found(format!(
                "Run {id} has no question {qid}; GET /api/v1/runs/{id}/questions lists the open ones."
            ))
            .with_code("question_not_found"));
        }
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
    let handle = runs
        .handle(id)
        .ok_or_else(|| ApiError::conflict(format!("Run {id} has no live engine to answer.")))?;
    handle
        .answer(qid, body, listed, Some(by))
        .map_err(|e| lost_race(runs.store.as_ref(), id, qid, e))
}

/// A 409 from the live question (another answer took it a moment ago): once the engine has
/// recorded the winning answer, says who gave it (`question_already_answered`).
fn lost_race(store: &dyn RunStore, run_id: &str, qid: &str, e: ApiError) -> ApiError {
    if e.status != 409 {
        return e;
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        if let Ok(Record {
            answered: Some(done),
            ..
        }) = question_record(store, run_id, qid)
        {
            return already_answered(qid, &done);
        }
        if Instant::now() >= deadline {
            return e;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Answers from chat (`integrations::chat`): the answer route's rules; its 409
/// `question_already_answered` (the first answer won) told as "already answered".
pub struct ChatAnswers(pub std::sync::Arc<super::Runs>);

impl crate::integrations::chat::Answerer for ChatAnswers {
    fn answer(
        &self,
        run_id: &str,
        question_id: &str,
        key: &str,
        by: &Value,
    ) -> crate::integrations::chat::AnswerOutcome {
        use crate::integrations::chat::AnswerOutcome;
        let body = interviewer::SubmitAnswer {
            selected_option_key: Some(key.to_string()),
            ..Default::default()
        };
        match answer_as(&self.0, run_id, question_id, &body, by.clone()) {
            Ok(label) => AnswerOutcome::Answered { label },
            Err(e) if e.code == Some("question_already_answered") => {
                AnswerOutcome::AlreadyAnswered(e.detail.clone())
            }
            Err(e) => AnswerOutcome::Refused(e.detail.clone()),
        }
    }
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

/// What the run's events say of question `qid`: whether it was asked, and the accepted
/// `interview.completed` that closed it, if any (who answered what).
struct Record {
    asked: bool,
    answered: Option<Value>,
}

fn question_record(store: &dyn RunStore, run_id: &str, qid: &str) -> Result<Record, ApiError> {
    const PAGE: usize = 1000;
    let mut rec = Record {
        asked: false,
        answered: None,
    };
    let mut since = 1;
    loop {
        let page = store.events(run_id, since, PAGE).map_err(store_error)?;
        for e in &page {
            if e.properties.get("question_id").and_then(Value::as_str) != Some(qid) {
                continue;
            }
            match e.event.as_str() {
                event_kind::INTERVIEW_STARTED => rec.asked = true,
                event_kind::INTERVIEW_COMPLETED
                    if e.properties.get("accepted").and_then(Value::as_bool) != Some(false) =>
                {
                    rec.answered = Some(e.properties.clone());
                }
                _ => {}
            }
        }
        match page.last() {
            Some(last) if page.len() == PAGE => since = last.seq + 1,
            _ => return Ok(rec),
        }
    }
}

/// 409 `question_already_answered`: the first answer won; says what it was and who gave it.
fn already_answered(qid: &str, completed: &Value) -> ApiError {
    let answer = completed
        .get("answer")
        .and_then(Value::as_str)
        .unwrap_or("");
    let who = completed
        .get("answered_by")
        .filter(|v| v.is_object())
        .map(|by| {
            let place = if by.get("kind").and_then(Value::as_str) == Some("chat") {
                " in chat"
            } else {
                ""
            };
            format!(
                " by {}{place}",
                crate::integrations::chat::message::principal_name(by)
            )
        })
        .unwrap_or_default();
    ApiError::conflict(format!(
        "Question {qid} was already answered{who}: \"{answer}\". The first answer wins."
    ))
    .with_code("question_already_answered")
}
