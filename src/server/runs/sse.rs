//! Server-Sent Events (decisions.md): `GET /api/v1/runs/{id}/attach` and `GET /api/v1/attach`.
//!
//! Per-run stream: every frame is `id: <seq>` + one `data:` line with the event JSON. With
//! `Last-Event-ID: n` (meaning `n+1`; it wins over the query) or `since_seq` the stream replays from the store in
//! batches of 256 and then follows live; without, it follows live from after the current
//! last event. To miss nothing between replay and live it subscribes to the hub first and
//! skips live events already replayed (a gap is filled from the store). A `: keep-alive`
//! comment goes out every 15 s. The stream closes right after `run.completed`, `run.dead` /
//! `run.failed`, or after replay when the run is terminal. Attaching to a terminal run with
//! nothing left to send answers 410 with the error body.
//!
//! All-runs stream: live only, optional `run_id=A,B` filter (400 for a malformed id), frames
//! without `id:` (sequence numbers are per run).
//!
//! Owns: the SSE wire format. Must not touch: appending events.

use super::super::error::ApiError;
use super::super::http::{ChunkWriter, Reply, StreamReply};
use super::super::router::Ctx;
use super::super::App;
use super::store_error;
use crate::base::clock::is_canonical_ulid;
use crate::base::event_kind;
use crate::store::{Event, RunStore, Subscription};
use crossbeam_channel::RecvTimeoutError;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
const BATCH: usize = 256;

pub fn sse_headers() -> Vec<(String, String)> {
    vec![
        ("Content-Type".into(), "text/event-stream".into()),
        ("Cache-Control".into(), "no-cache".into()),
        ("X-Accel-Buffering".into(), "no".into()),
    ]
}

/// One SSE frame: `id: <seq>` (per-run streams only) and the event's JSON on one `data:` line.
fn frame(seq: Option<u64>, json: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() + 32);
    if let Some(seq) = seq {
        out.extend_from_slice(format!("id: {seq}\n").as_bytes());
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(b"\n\n");
    out
}

fn is_end(e: &Event) -> bool {
    matches!(
        e.event.as_str(),
        event_kind::RUN_COMPLETED | event_kind::RUN_FAILED | event_kind::RUN_DEAD
    )
}

fn int_param(ctx: &Ctx<'_, '_>, name: &str) -> Result<Option<i64>, ApiError> {
    match ctx.inc.query(name) {
        None => Ok(None),
        Some(v) => v.trim().parse::<i64>().map(Some).map_err(|_| {
            ApiError::bad_request(format!("Query parameter {name} must be an integer."))
        }),
    }
}

pub fn attach(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let id = ctx.param("id").to_string();
    app.runs.row(&id)?;
    // `Last-Event-ID` wins over `since_seq`: a browser's EventSource reconnects to the URL
    // it started with (say `?since_seq=1`) and adds the last id it saw.
    let since = match ctx.inc.header("last-event-id") {
        Some(v) => Some(
            v.trim()
                .parse::<u64>()
                .map_err(|_| ApiError::bad_request("Last-Event-ID must be an integer."))?
                + 1,
        ),
        None => int_param(ctx, "since_seq")?.map(|s| s.max(1) as u64),
    };
    let store = Arc::clone(&app.runs.store);
    let sub = store.hub().subscribe(&id);
    let row = app.runs.row(&id)?;
    let next = since.unwrap_or(row.last_seq + 1);
    if row.status.is_terminal() && next > row.last_seq {
        return Err(ApiError::gone(format!(
            "The event stream of run {id} has closed: the run is {} and has no events after seq {}.",
            row.status.name(),
            row.last_seq
        )));
    }
    Ok(Reply::Stream(StreamReply {
        status: 200,
        headers: sse_headers(),
        body: Box::new(move |w| follow_run(&*store, &id, &sub, next, w)),
    }))
}

/// Sends events `next..` from the store; returns the next seq to send.
fn replay(
    store: &dyn RunStore,
    id: &str,
    mut next: u64,
    upto: Option<u64>,
    w: &mut ChunkWriter<'_>,
) -> io::Result<(u64, bool)> {
    loop {
        // The stored JSON text goes out as it is: no parse, no re-serialisation.
        let batch = store
            .events_raw(id, next, BATCH)
            .map_err(|e| io::Error::other(e.to_string()))?;
        let n = batch.len();
        for e in batch {
            if upto.is_some_and(|u| e.seq > u) {
                return Ok((next, false));
            }
            w.send(&frame(Some(e.seq), &e.json))?;
            next = e.seq + 1;
        }
        if n < BATCH {
            return Ok((next, false));
        }
    }
}

fn follow_run(
    store: &dyn RunStore,
    id: &str,
    sub: &Subscription,
    next: u64,
    w: &mut ChunkWriter<'_>,
) -> io::Result<()> {
    let (mut next, _) = replay(store, id, next, None, w)?;
    match store.get_run(id) {
        Ok(Some(row)) if row.status.is_terminal() && next > row.last_seq => return Ok(()),
        Ok(Some(_)) => {}
        _ => return Ok(()),
    }
    let mut last_sent = Instant::now();
    loop {
        let wait = KEEP_ALIVE.saturating_sub(last_sent.elapsed());
        match sub.recv_timeout(wait) {
            Ok(e) => {
                if e.seq < next {
                    continue;
                }
                if e.seq > next {
                    replay(store, id, next, Some(e.seq - 1), w)?;
                }
                w.send(&frame(Some(e.seq), e.json()))?;
                next = e.seq + 1;
                last_sent = Instant::now();
                if is_end(&e) {
                    return Ok(());
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                w.send(b": keep-alive\n\n")?;
                last_sent = Instant::now();
            }
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        }
    }
}

pub fn attach_all(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let filter: Option<Vec<String>> = match ctx.inc.query("run_id") {
        None => None,
        Some(list) => {
            let ids: Vec<String> = list
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            if let Some(bad) = ids.iter().find(|i| !is_canonical_ulid(i)) {
                return Err(ApiError::bad_request(format!(
                    "Invalid run ID `{bad}` in run_id."
                )));
            }
            Some(ids)
        }
    };
    let store = Arc::clone(&app.runs.store);
    let sub = store.hub().subscribe_all();
    let _ = store_error;
    Ok(Reply::Stream(StreamReply {
        status: 200,
        headers: sse_headers(),
        body: Box::new(move |w| {
            w.send(b": attached\n\n")?;
            loop {
                match sub.recv_timeout(KEEP_ALIVE) {
                    Ok(e) => {
                        if filter.as_ref().is_some_and(|f| !f.contains(&e.run_id)) {
                            continue;
                        }
                        w.send(&frame(None, e.json()))?;
                    }
                    Err(RecvTimeoutError::Timeout) => w.send(b": keep-alive\n\n")?,
                    Err(RecvTimeoutError::Disconnected) => return Ok(()),
                }
            }
        }),
    }))
}
