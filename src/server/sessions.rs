//! The HTTP side of Ask sessions (opgroups 4.1): list and create sessions on a run, read one,
//! its events, attach to it over SSE, post a turn (the response is the turn's SSE stream) and
//! interrupt it. The sessions themselves are `crate::ask`'s.
//!
//! SSE frames are `id: <run seq>`, `event: <kind>`, `data: <event JSON>`; every frame is an
//! event already committed to the run's log (replayed from the store, then followed live
//! through the hub, gaps filled from the store). A turn's stream ends after the event that
//! ends the turn; if the run is deleted mid-turn it ends with a `run.session.turn.failed`
//! frame that could not be recorded (the log is gone).
//!
//! Owns: request and response shapes, status codes, the stream. Must not touch: running
//! turns or the store's SQL.

use super::error::ApiError;
use super::http::{ChunkWriter, Reply, StreamReply};
use super::router::Ctx;
use super::runs::{actor_of, int_query, page};
use super::App;
use crate::ask::events::{self as ev};
use crate::ask::AskError;
use crate::store::{Event, RunStore, Subscription};
use crossbeam_channel::RecvTimeoutError;
use serde::Deserialize;
use serde_json::{json, Value};
use std::io;
use std::sync::Arc;
use std::time::Instant;

/// The response header naming a turn (`x-fabro-turn-id` in opgroups 0.2).
pub const TURN_HEADER: &str = "x-svc-turn-id";
/// The 409 header naming the turn still running.
pub const ACTIVE_TURN_HEADER: &str = "x-svc-active-turn-id";

fn api_error(e: AskError) -> ApiError {
    match e {
        AskError::NotFound(m) => ApiError::not_found(m),
        AskError::BadRequest(m) => ApiError::bad_request(m).with_code("invalid_body"),
        AskError::BadModel(m) => ApiError::bad_request(m).with_code("model_unavailable"),
        AskError::Unavailable(u) => {
            ApiError::conflict(AskError::Unavailable(u).to_string()).with_code(u.code())
        }
        AskError::Busy { active_turn } => ApiError::conflict(
            AskError::Busy {
                active_turn: active_turn.clone(),
            }
            .to_string(),
        )
        .with_code("session_active_turn")
        .with_header(ACTIVE_TURN_HEADER, active_turn),
        AskError::TurnNotActive(t) => {
            ApiError::conflict(format!("Turn {t} is not running.")).with_code("turn_not_active")
        }
        AskError::Store(e) => super::runs::store_error(e),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    provider: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnBody {
    input: String,
    #[serde(default)]
    turn_id: Option<String>,
}

/// `GET /api/v1/runs/{id}/sessions`.
pub fn list(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.get_row(ctx.param("id"))?;
    let (limit, offset) = page(ctx)?;
    let by_update = match ctx.inc.query("order").as_deref() {
        None | Some("updated_desc") => true,
        Some("created_desc") => false,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "order must be updated_desc or created_desc, not `{other}`."
            )))
        }
    };
    let all = app.sessions.list(&row.id, by_update).map_err(api_error)?;
    let total = all.len();
    let data: Vec<Value> = all.into_iter().skip(offset).take(limit).collect();
    Ok(Reply::json(
        200,
        &json!({"data": data, "meta": {"total": total, "has_more": offset + data.len() < total}}),
    ))
}

/// `POST /api/v1/runs/{id}/sessions`: 201 with the session record.
pub fn create(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.get_row(ctx.param("id"))?;
    let body: CreateBody = ctx.inc.json_or_default()?;
    let actor = actor_of(ctx);
    let record = app
        .sessions
        .create(
            &row.id,
            body.title.as_deref().filter(|t| !t.trim().is_empty()),
            body.model.as_deref().filter(|m| !m.trim().is_empty()),
            body.provider.as_deref().filter(|p| !p.trim().is_empty()),
            actor,
        )
        .map_err(api_error)?;
    Ok(Reply::json(201, &record))
}

/// `GET /api/v1/sessions/{id}`: SessionDetail.
pub fn get(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let detail = app.sessions.detail(ctx.param("id")).map_err(api_error)?;
    Ok(Reply::json(200, &detail))
}

/// `GET /api/v1/sessions/{id}/events?since_seq&limit`.
pub fn events(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let since = int_query(ctx, "since_seq")?.unwrap_or(1).max(1) as u64;
    let limit = int_query(ctx, "limit")?.unwrap_or(100).clamp(1, 1000) as usize;
    let (data, has_more) = app
        .sessions
        .events(ctx.param("id"), since, limit)
        .map_err(api_error)?;
    Ok(Reply::json(
        200,
        &json!({"data": data, "meta": {"has_more": has_more}}),
    ))
}

/// `GET /api/v1/sessions/{id}/attach?since_seq`: the session's events from `since_seq`
/// (default: all), then live, until the client goes away.
pub fn attach(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let sid = ctx.param("id").to_string();
    let since = match ctx.inc.header("last-event-id") {
        Some(v) => {
            v.trim()
                .parse::<u64>()
                .map_err(|_| ApiError::bad_request("Last-Event-ID must be an integer."))?
                + 1
        }
        None => int_query(ctx, "since_seq")?.unwrap_or(1).max(1) as u64,
    };
    let session = app.sessions.find(&sid).map_err(api_error)?;
    let store = Arc::clone(&app.runs.store);
    let sub = store.hub().subscribe(&session.run_id);
    let run_id = session.run_id;
    Ok(Reply::Stream(StreamReply {
        status: 200,
        headers: super::runs::sse::sse_headers(),
        body: Box::new(move |w| {
            w.send(b": attached\n\n")?;
            let keep = |e: &Event| ev::session_of(e) == Some(sid.as_str());
            follow(&*store, &run_id, &sub, since, &keep, &|_| false, w).map(|_| ())
        }),
    }))
}

/// `POST /api/v1/sessions/{id}/turns`: starts a turn; the response is its SSE stream.
pub fn turn(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let sid = ctx.param("id").to_string();
    let body: TurnBody = ctx.inc.json()?;
    let started = app
        .sessions
        .start_turn(&sid, &body.input, body.turn_id.as_deref())
        .map_err(api_error)?;
    let store = Arc::clone(&app.runs.store);
    let mut headers = super::runs::sse::sse_headers();
    headers.push((TURN_HEADER.into(), started.turn_id.clone()));
    let crate::ask::StartedTurn {
        run_id,
        turn_id,
        first_seq,
        subscription,
    } = started;
    Ok(Reply::Stream(StreamReply {
        status: 200,
        headers,
        body: Box::new(move |w| {
            let keep = |e: &Event| {
                ev::session_of(e) == Some(sid.as_str()) && ev::turn_of(e) == Some(turn_id.as_str())
            };
            let ended = follow(
                &*store,
                &run_id,
                &subscription,
                first_seq,
                &keep,
                &|e| ev::ends_turn(&e.event),
                w,
            )?;
            if !ended {
                // The run's log closed under the turn (the run was deleted).
                let data = json!({"run_id": run_id, "event": ev::TURN_FAILED, "properties": {
                    "session_id": sid, "turn_id": turn_id, "code": "agent_error",
                    "retryable": false,
                    "error": "the run was deleted during the turn; its record is gone"}});
                w.send(&frame(None, ev::TURN_FAILED, &data.to_string()))?;
            }
            Ok(())
        }),
    }))
}

/// `POST /api/v1/sessions/{id}/turns/{turn}/interrupt`: 202 with the recorded
/// `run.session.turn.interrupted` event.
pub fn interrupt(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let sid = ctx.param("id").to_string();
    let turn = ctx.param("turn").to_string();
    let e = app.sessions.interrupt(&sid, &turn).map_err(api_error)?;
    Ok(Reply::json_of(202, &e))
}

fn frame(seq: Option<u64>, kind: &str, json: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() + kind.len() + 40);
    if let Some(seq) = seq {
        out.extend_from_slice(format!("id: {seq}\n").as_bytes());
    }
    out.extend_from_slice(format!("event: {kind}\ndata: ").as_bytes());
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(b"\n\n");
    out
}

/// Sends the events `next..` that `keep` selects: from the store, then live. Returns true
/// when an event `end` accepts was sent, false when the run's feed closed first.
fn follow(
    store: &dyn RunStore,
    run_id: &str,
    sub: &Subscription,
    mut next: u64,
    keep: &dyn Fn(&Event) -> bool,
    end: &dyn Fn(&Event) -> bool,
    w: &mut ChunkWriter<'_>,
) -> io::Result<bool> {
    // Replays `next..=upto` from the store; true when the end was sent.
    let replay = |next: &mut u64, upto: Option<u64>, w: &mut ChunkWriter<'_>| -> io::Result<bool> {
        loop {
            let batch = store
                .events(run_id, *next, 256)
                .map_err(|e| io::Error::other(e.to_string()))?;
            let n = batch.len();
            for e in batch {
                if upto.is_some_and(|u| e.seq > u) {
                    return Ok(false);
                }
                *next = e.seq + 1;
                if keep(&e) {
                    let json = serde_json::to_string(&e).unwrap_or_default();
                    w.send(&frame(Some(e.seq), &e.event, &json))?;
                    if end(&e) {
                        return Ok(true);
                    }
                }
            }
            if n < 256 {
                return Ok(false);
            }
        }
    };
    if replay(&mut next, None, w)? {
        return Ok(true);
    }
    let mut last_sent = Instant::now();
    loop {
        let wait = super::runs::sse::KEEP_ALIVE.saturating_sub(last_sent.elapsed());
        match sub.recv_timeout(wait) {
            Ok(e) => {
                if e.seq < next {
                    continue;
                }
                if e.seq > next && replay(&mut next, Some(e.seq - 1), w)? {
                    return Ok(true);
                }
                next = e.seq + 1;
                if keep(&e) {
                    w.send(&frame(Some(e.seq), &e.event, e.json()))?;
                    last_sent = Instant::now();
                    if end(&e) {
                        return Ok(true);
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                w.send(b": keep-alive\n\n")?;
                last_sent = Instant::now();
            }
            Err(RecvTimeoutError::Disconnected) => return Ok(false),
        }
    }
}
