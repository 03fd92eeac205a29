//! Ask sessions as events in their run's log (opgroups 4.2): the `run.session.*` kinds, and
//! the projection of a run's session events into session records and transcripts. Every
//! session event carries `session_id`; turn events also `turn_id`.
//!
//! Owns: the event names and their folding. Must not touch: the store (callers hand in the
//! events) or HTTP.

use crate::store::Event;
use serde_json::{json, Value};

pub const CREATED: &str = "run.session.created";
pub const TURN_STARTED: &str = "run.session.turn.started";
pub const USER_MESSAGE: &str = "run.session.user_message";
pub const ASSISTANT_DELTA: &str = "run.session.assistant_delta";
pub const ASSISTANT_MESSAGE: &str = "run.session.assistant_message";
pub const TOOL_STARTED: &str = "run.session.tool_call.started";
pub const TOOL_COMPLETED: &str = "run.session.tool_call.completed";
pub const TURN_SUCCEEDED: &str = "run.session.turn.succeeded";
pub const TURN_FAILED: &str = "run.session.turn.failed";
pub const TURN_INTERRUPTED: &str = "run.session.turn.interrupted";

/// The prefix every session event kind starts with.
pub const PREFIX: &str = "run.session.";

/// True for the events that end a turn.
pub fn ends_turn(kind: &str) -> bool {
    matches!(kind, TURN_SUCCEEDED | TURN_FAILED | TURN_INTERRUPTED)
}

/// The session an event belongs to, if it is a session event.
pub fn session_of(e: &Event) -> Option<&str> {
    if !e.event.starts_with(PREFIX) {
        return None;
    }
    e.properties.get("session_id").and_then(Value::as_str)
}

/// The turn an event belongs to.
pub fn turn_of(e: &Event) -> Option<&str> {
    e.properties.get("turn_id").and_then(Value::as_str)
}

/// Why a turn failed (`run.session.turn.failed` `code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailCode {
    NoSandbox,
    SandboxUnavailable,
    LlmUnconfigured,
    ModelUnavailable,
    AgentError,
}

impl FailCode {
    pub fn as_str(self) -> &'static str {
        match self {
            FailCode::NoSandbox => "no_sandbox",
            FailCode::SandboxUnavailable => "sandbox_unavailable",
            FailCode::LlmUnconfigured => "llm_unconfigured",
            FailCode::ModelUnavailable => "model_unavailable",
            FailCode::AgentError => "agent_error",
        }
    }

    pub fn retryable(self) -> bool {
        matches!(self, FailCode::SandboxUnavailable | FailCode::AgentError)
    }
}

/// A session's status (`SessionRecord.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Idle,
    Running,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Idle => "idle",
            Status::Running => "running",
            Status::Failed => "failed",
        }
    }
}

/// One turn as the log tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub id: String,
    pub input: String,
    pub started_at: String,
    /// The answer of a turn that ended (succeeded, or the text so far).
    pub answer: Option<String>,
    /// The kind of the event that ended it (`None`: no end recorded).
    pub ended: Option<String>,
}

/// A session folded from its run's events.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub id: String,
    pub run_id: String,
    pub title: Option<String>,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub last_seq: u64,
    pub turns: Vec<Turn>,
    /// `messages` of SessionDetail, in order.
    pub messages: Vec<Value>,
}

impl Session {
    /// The turn with no recorded end, if any.
    pub fn open_turn(&self) -> Option<&Turn> {
        self.turns.last().filter(|t| t.ended.is_none())
    }

    /// `live_turn`: the id of the turn running in this process now, if any. A turn with no
    /// end that is not running was cut short by a restart: the session is idle again.
    pub fn status(&self, live_turn: Option<&str>) -> Status {
        match self.turns.last() {
            Some(t) if t.ended.is_none() && live_turn == Some(t.id.as_str()) => Status::Running,
            Some(t) if t.ended.as_deref() == Some(TURN_FAILED) => Status::Failed,
            _ => Status::Idle,
        }
    }

    /// SessionRecord (opgroups 4.2).
    pub fn record(&self, live_turn: Option<&str>) -> Value {
        let status = self.status(live_turn);
        let active = (status == Status::Running)
            .then(|| self.open_turn())
            .flatten()
            .map(|t| json!({"id": t.id, "started_at": t.started_at, "input": t.input}));
        json!({
            "id": self.id,
            "run_id": self.run_id,
            "title": self.title,
            "status": status.as_str(),
            "model": self.model,
            "provider": self.provider,
            "active_turn": active,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        })
    }

    /// SessionDetail: the record, its messages and the seq of its last event.
    pub fn detail(&self, live_turn: Option<&str>) -> Value {
        let mut v = self.record(live_turn);
        v["messages"] = Value::Array(self.messages.clone());
        v["last_seq"] = json!(self.last_seq);
        v
    }
}

/// Folds every session of a run from its events (in seq order), in creation order.
pub fn sessions(run_id: &str, events: &[Event]) -> Vec<Session> {
    let mut out: Vec<Session> = Vec::new();
    for e in events {
        let Some(sid) = session_of(e) else { continue };
        if e.event == CREATED {
            let p = &e.properties;
            let s = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
            out.push(Session {
                id: sid.to_string(),
                run_id: run_id.to_string(),
                title: s("title"),
                model: s("model"),
                provider: s("provider"),
                created_at: e.ts.clone(),
                updated_at: e.ts.clone(),
                last_seq: e.seq,
                turns: Vec::new(),
                messages: Vec::new(),
            });
            continue;
        }
        if let Some(s) = out.iter_mut().find(|s| s.id == sid) {
            apply(s, e);
        }
    }
    out
}

fn text(p: &Value, key: &str) -> String {
    p.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

fn apply(s: &mut Session, e: &Event) {
    s.updated_at = e.ts.clone();
    s.last_seq = e.seq;
    let p = &e.properties;
    let turn_id = turn_of(e).unwrap_or("").to_string();
    match e.event.as_str() {
        TURN_STARTED => s.turns.push(Turn {
            id: turn_id,
            input: text(p, "input"),
            started_at: e.ts.clone(),
            answer: None,
            ended: None,
        }),
        USER_MESSAGE => s.messages.push(json!({
            "kind": "user", "content": text(p, "text"), "timestamp": e.ts, "turn_id": turn_id,
        })),
        ASSISTANT_MESSAGE => {
            s.messages.push(json!({
                "kind": "assistant", "content": text(p, "text"), "timestamp": e.ts,
                "turn_id": turn_id, "usage": p.get("usage").cloned().unwrap_or(Value::Null),
                "tool_calls": p.get("tool_calls").cloned().unwrap_or_else(|| json!([])),
            }));
            let t = text(p, "text");
            if let Some(turn) = s.turns.iter_mut().rev().find(|t| t.id == turn_id) {
                if !t.trim().is_empty() {
                    turn.answer = Some(t);
                }
            }
        }
        TOOL_COMPLETED => s.messages.push(json!({
            "kind": "tool_results", "timestamp": e.ts, "turn_id": turn_id,
            "results": [{"tool_call_id": p.get("tool_call_id"), "tool_name": p.get("tool_name"),
                         "output": p.get("output"), "is_error": p.get("is_error")}],
        })),
        kind if ends_turn(kind) => {
            if let Some(turn) = s.turns.iter_mut().rev().find(|t| t.id == turn_id) {
                turn.ended = Some(kind.to_string());
            }
            if kind != TURN_SUCCEEDED {
                s.messages.push(json!({
                    "kind": "system", "timestamp": e.ts, "turn_id": turn_id,
                    "content": p.get("error").and_then(Value::as_str)
                        .unwrap_or(if kind == TURN_FAILED { "the turn failed" } else { "the turn was interrupted" }),
                }));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: u64, kind: &str, p: Value) -> Event {
        serde_json::from_value(json!({
            "seq": seq, "id": format!("E{seq}"), "ts": format!("2026-01-01T00:00:{seq:02}.000Z"),
            "run_id": "R", "event": kind, "properties": p,
        }))
        .unwrap()
    }

    #[test]
    fn sessions_fold_from_the_run_log_and_a_dangling_turn_is_not_running() {
        let evs = vec![
            ev(1, "run.created", json!({})),
            ev(
                2,
                CREATED,
                json!({"session_id": "S", "title": "why", "model": "m"}),
            ),
            ev(3, "stage.started", json!({})),
            ev(
                4,
                TURN_STARTED,
                json!({"session_id": "S", "turn_id": "T1", "input": "q1"}),
            ),
            ev(
                5,
                USER_MESSAGE,
                json!({"session_id": "S", "turn_id": "T1", "text": "q1"}),
            ),
            ev(
                6,
                ASSISTANT_MESSAGE,
                json!({"session_id": "S", "turn_id": "T1", "text": "a1"}),
            ),
            ev(
                7,
                TURN_SUCCEEDED,
                json!({"session_id": "S", "turn_id": "T1"}),
            ),
            ev(8, CREATED, json!({"session_id": "S2"})),
            ev(
                9,
                TURN_STARTED,
                json!({"session_id": "S", "turn_id": "T2", "input": "q2"}),
            ),
        ];
        let all = sessions("R", &evs);
        assert_eq!(all.len(), 2);
        let s = &all[0];
        assert_eq!(s.turns.len(), 2);
        assert_eq!(s.turns[0].answer.as_deref(), Some("a1"));
        assert_eq!(s.last_seq, 9);
        // T2 has no end: running only while this process runs it.
        assert_eq!(s.status(Some("T2")), Status::Running);
        assert_eq!(s.record(Some("T2"))["active_turn"]["id"], "T2");
        assert_eq!(s.status(None), Status::Idle);
        assert_eq!(s.record(None)["active_turn"], Value::Null);
        assert_eq!(s.detail(None)["messages"].as_array().unwrap().len(), 2);
        assert_eq!(all[1].turns.len(), 0);
    }
}
