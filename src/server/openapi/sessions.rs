//! The Ask sessions' part of the OpenAPI document (opgroups 4.1): the seven routes and their
//! schemas.
//!
//! Owns: describing `/api/v1/runs/{id}/sessions` and `/api/v1/sessions*`. Must not touch:
//! handlers.

use super::{err, ok, op, r, Op};
use serde_json::{json, Value};

fn session_id(op: Op) -> Op {
    op.param(
        "id",
        "path",
        json!({"type": "string"}),
        "Session ULID. Anything unknown is answered 404.",
    )
}

/// A stream of server-sent events; the schema describes one event (`id`, `event`, `data`
/// lines), which is how schemathesis checks each event it reads.
fn sse(desc: &str) -> (String, Value) {
    (
        "200".to_string(),
        json!({"description": desc, "content": {"text/event-stream": {"schema": {
            "type": "object",
            "properties": {"id": {"type": "string"}, "event": {"type": "string"}, "data": {"type": "string"}}
        }}}}),
    )
}

pub(super) fn operations() -> Vec<Op> {
    let nf = || err("404", "No such session (or its run was deleted).");
    vec![
        op("get", "/api/v1/runs/{id}/sessions", "Sessions", "Ask sessions on a run")
            .id()
            .paging()
            .param("order", "query", json!({"type": "string", "enum": ["updated_desc", "created_desc"]}), "Newest first by last event (default) or by creation.")
            .resp(vec![
                ok("200", "A page of sessions.", r("SessionPage")),
                err("400", "Malformed run id, paging or order."),
                err("404", "No such run."),
            ]),
        op("post", "/api/v1/runs/{id}/sessions", "Sessions", "Start an Ask session on a run")
            .id()
            .body(r("CreateSession"), false)
            .resp(vec![
                ok("201", "The session.", r("Session")),
                err("400", "Malformed body, or a model that is not configured (named)."),
                err("404", "No such run."),
                err("409", "Ask is unavailable on the run: code no_sandbox, sandbox_not_ready or llm_unconfigured."),
            ]),
        session_id(op("get", "/api/v1/sessions/{id}", "Sessions", "One session with its messages"))
            .resp(vec![ok("200", "The session.", r("SessionDetail")), nf()]),
        session_id(op("get", "/api/v1/sessions/{id}/events", "Sessions", "The session's events (in its run's log)"))
            .param("since_seq", "query", json!({"type": "integer"}), "First run seq (default 1).")
            .param("limit", "query", json!({"type": "integer", "default": 100}), "Clamped to 1-1000.")
            .resp(vec![ok("200", "Events.", r("EventPage")), err("400", "A non-integer parameter."), nf()]),
        session_id(op("get", "/api/v1/sessions/{id}/attach", "Sessions", "Follow the session (SSE): replay, then live"))
            .param("since_seq", "query", json!({"type": "integer"}), "First run seq to replay (default 1).")
            .resp(vec![sse("Frames `id: <run seq>`, `event: <kind>`, `data: <event>`; open until the client leaves."), err("400", "A non-integer parameter."), nf()]),
        session_id(op("post", "/api/v1/sessions/{id}/turns", "Sessions", "Ask a question: the response is the turn's SSE stream"))
            .body(r("TurnRequest"), true)
            .resp(vec![
                sse("The turn's events, ending with run.session.turn.succeeded, .failed or .interrupted. Header x-svc-turn-id."),
                err("400", "Malformed body, empty input or input over 16 KiB."),
                nf(),
                err("409", "A turn of this session is running (code session_active_turn, header x-svc-active-turn-id)."),
            ]),
        session_id(op("post", "/api/v1/sessions/{id}/turns/{turn}/interrupt", "Sessions", "Interrupt the running turn"))
            .param("turn", "path", json!({"type": "string"}), "Turn id.")
            .resp(vec![
                ok("202", "The recorded run.session.turn.interrupted event.", r("Event")),
                nf(),
                err("409", "The turn is not running."),
            ]),
    ]
}

pub(super) fn schemas() -> Value {
    let nullable = |t: &str| json!({"type": [t, "null"]});
    json!({
        "CreateSession": {
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "title": {"type": "string", "maxLength": 200},
                "model": {"type": "string", "description": "A catalog model (default: Run.ask_svc.default_model)."},
                "provider": {"type": "string"}
            }
        },
        "TurnRequest": {
            "type": "object",
            "required": ["input"],
            "additionalProperties": false,
            "properties": {
                "input": {"type": "string", "minLength": 1, "maxLength": 16384},
                "turn_id": {"type": "string", "description": "A ULID to name the turn (default: minted)."}
            }
        },
        "Session": {
            "type": "object",
            "required": ["id", "run_id", "title", "status", "model", "provider", "active_turn", "created_at", "updated_at"],
            "properties": {
                "id": {"type": "string"},
                "run_id": {"type": "string"},
                "title": nullable("string"),
                "status": {"enum": ["idle", "running", "failed"]},
                "model": nullable("string"),
                "provider": nullable("string"),
                "active_turn": {"type": ["object", "null"], "properties": {
                    "id": {"type": "string"}, "started_at": {"type": "string"}, "input": {"type": "string"}
                }},
                "created_at": {"type": "string"},
                "updated_at": {"type": "string"}
            }
        },
        "SessionDetail": {
            "allOf": [r("Session"), {"type": "object", "required": ["messages", "last_seq"], "properties": {
                "messages": {"type": "array", "items": {"type": "object", "required": ["kind", "timestamp"], "properties": {
                    "kind": {"enum": ["user", "assistant", "tool_results", "system"]},
                    "content": {"type": "string"},
                    "timestamp": {"type": "string"},
                    "turn_id": {"type": "string"},
                    "usage": {},
                    "tool_calls": {},
                    "results": {"type": "array"}
                }}},
                "last_seq": {"type": "integer", "minimum": 0}
            }}]
        },
        "SessionPage": {
            "type": "object",
            "required": ["data", "meta"],
            "properties": {
                "data": {"type": "array", "items": r("Session")},
                "meta": {"type": "object", "required": ["has_more", "total"], "properties": {
                    "has_more": {"type": "boolean"}, "total": {"type": "integer", "minimum": 0}
                }}
            }
        }
    })
}
