//! Stage records: a per-visit view of a run's events (what each stage was sent, answered,
//! printed and concluded), for `GET /api/v1/runs/{id}/stages/{node}`, `svc run --logs DIR`
//! and `svc export --stages DIR RUN_ID`, and the on-disk folder layout those two write
//! (`DIR/<node_id>/{prompt.md, response.md, status.json, stdout, stderr}`,
//! `DIR/checkpoint.json`).
//!
//! Owns: folding stored events into [`StageVisit`]s and writing the log folder.
//! Must not touch: running anything or appending events (it only reads the store).

use crate::base::event_kind;
use crate::engine::checkpoint::restore;
use crate::engine::events::resolve_blobs;
use crate::store::{Event, RunStore, StoreError};
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::path::Path;

/// One visit of one node, as its events tell it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StageVisit {
    /// The node id as events show it (`<manager>/<node>` inside a child workflow).
    pub node_id: String,
    /// 1 for the node's first visit in this run, 2 for the next...
    pub visit: u32,
    pub handler_type: Option<String>,
    /// Attempts made (retries + 1).
    pub attempts: u32,
    /// `succeeded`, `partially_succeeded`, `skipped`, `failed`, or `running` while open.
    pub outcome: String,
    pub notes: Option<String>,
    /// The failure message of a failed stage.
    pub failure_reason: Option<String>,
    pub preferred_label: Option<String>,
    pub context_updates: Map<String, Value>,
    /// Every `stage.prompt` of the visit (one per model call, retries and repair turns
    /// included), in order: the exact text sent, how it was built, and to which model.
    pub prompts: Vec<Value>,
    /// The stage's response (LLM stages).
    pub response: Option<String>,
    /// The last command run by the visit (command stages): stdout, stderr, exit code.
    pub command: Option<Value>,
    pub duration_ms: Option<u64>,
    /// The stage's MCP servers (agent stages): each with its `state` (`ready`/`failed`),
    /// `error`, `tools` offered (`{name, original_name}`), `used` (original names) and,
    /// once a model call ended, `stderr` (its tail) and `server_info`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<Value>,
    /// The question a human stage asked (`interview.started`'s properties), last one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<Value>,
}

impl StageVisit {
    /// `status.json`: the outcome fields other engines' logs carry, plus ours.
    pub fn status_json(&self) -> Value {
        json!({
            "node_id": self.node_id,
            "visit": self.visit,
            "handler_type": self.handler_type,
            "outcome": self.outcome,
            "notes": self.notes,
            "failure_reason": self.failure_reason,
            "preferred_label": self.preferred_label,
            "context_updates": self.context_updates,
            "attempts": self.attempts,
            "duration_ms": self.duration_ms,
        })
    }

    /// `prompt.md`: the text of the visit's model call; with several calls (retries,
    /// repair turns), each under a heading.
    pub fn prompt_md(&self) -> Option<String> {
        let texts: Vec<&str> = self
            .prompts
            .iter()
            .map(|p| p.get("text").and_then(Value::as_str).unwrap_or(""))
            .collect();
        match texts.as_slice() {
            [] => self.question.as_ref().map(question_md),
            [one] => Some(one.to_string()),
            many => Some(
                many.iter()
                    .enumerate()
                    .map(|(i, t)| format!("<!-- svc: model call {} -->\n\n{t}\n", i + 1))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
        }
    }
}

/// A human stage's `prompt.md`: the question as asked, its options and whether free text
/// was allowed.
fn question_md(q: &Value) -> String {
    let mut md = q
        .get("question")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    md.push('\n');
    if let Some(d) = q.get("context_display").and_then(Value::as_str) {
        md.push_str(&format!("\n{d}\n"));
    }
    let options = q
        .get("options")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !options.is_empty() {
        md.push_str("\nOptions:\n");
        for o in &options {
            let key = o.get("key").and_then(Value::as_str).unwrap_or("");
            let label = o.get("label").and_then(Value::as_str).unwrap_or("");
            // Labels usually carry their accelerator already (`[Y] Yes`).
            if label.starts_with('[') || key.is_empty() {
                md.push_str(&format!("- {label}\n"));
            } else {
                md.push_str(&format!("- [{key}] {label}\n"));
            }
        }
    }
    if q.get("allow_freeform").and_then(Value::as_bool) == Some(true) {
        md.push_str("\nA free-text answer is accepted.\n");
    }
    md
}

/// How a visit still open when its run ended is shown: `cancelled` when the run was
/// cancelled (SIGTERM or Ctrl-C to `svc run`, a cancel request), `interrupted` when a
/// server stop interrupted it (a resume opens a new visit), else `failed`.
fn close_open_visits(
    visits: &mut [StageVisit],
    open: &HashMap<String, usize>,
    kind: &str,
    p: &Value,
) {
    let reason = p.get("reason").and_then(Value::as_str).unwrap_or("");
    let (outcome, why) = match kind {
        event_kind::RUN_INTERRUPTED => (
            "interrupted",
            "the run was interrupted before the stage finished".to_string(),
        ),
        _ if reason == "cancelled" => (
            "cancelled",
            "the run was cancelled before the stage finished".to_string(),
        ),
        _ => (
            "failed",
            format!("the run ended ({kind}) before the stage finished"),
        ),
    };
    for i in open.values() {
        if let Some(v) = visits.get_mut(*i).filter(|v| v.outcome == "running") {
            v.outcome = outcome.into();
            v.failure_reason.get_or_insert(why.clone());
        }
    }
}

/// Folds a run's events (in seq order, blob references resolved) into its stage visits,
/// in the order they started. Parallel branches interleave; each node's events are
/// sequential, so a `stage.started` with attempt 1 opens that node's next visit.
pub fn collect(events: &[Event]) -> Vec<StageVisit> {
    let mut visits: Vec<StageVisit> = Vec::new();
    let mut open: HashMap<String, usize> = HashMap::new();
    let mut counts: HashMap<String, u32> = HashMap::new();
    for e in events {
        let p = &e.properties;
        let Some(node) = e.node_id.as_deref() else {
            if matches!(
                e.event.as_str(),
                event_kind::RUN_COMPLETED
                    | event_kind::RUN_FAILED
                    | event_kind::RUN_DEAD
                    | event_kind::RUN_INTERRUPTED
            ) {
                close_open_visits(&mut visits, &open, &e.event, p);
            }
            continue;
        };
        if e.event == event_kind::STAGE_STARTED {
            let attempt = p.get("attempt").and_then(Value::as_u64).unwrap_or(1);
            if attempt <= 1 || !open.contains_key(node) {
                let n = counts.entry(node.to_string()).or_insert(0);
                *n += 1;
                open.insert(node.to_string(), visits.len());
                visits.push(StageVisit {
                    node_id: node.to_string(),
                    visit: *n,
                    outcome: "running".into(),
                    ..StageVisit::default()
                });
            }
            if let Some(v) = open.get(node).and_then(|i| visits.get_mut(*i)) {
                v.attempts = attempt as u32;
                v.handler_type = text(p, "handler_type").or(v.handler_type.take());
            }
            continue;
        }
        let Some(v) = open.get(node).and_then(|i| visits.get_mut(*i)) else {
            continue;
        };
        apply(v, &e.event, p);
    }
    visits
}

fn text(p: &Value, key: &str) -> Option<String> {
    p.get(key).and_then(Value::as_str).map(String::from)
}

fn apply(v: &mut StageVisit, kind: &str, p: &Value) {
    match kind {
        event_kind::STAGE_PROMPT => v.prompts.push(p.clone()),
        event_kind::COMMAND_COMPLETED => v.command = Some(p.clone()),
        event_kind::STAGE_COMPLETED => {
            v.outcome = text(p, "status").unwrap_or_else(|| "succeeded".into());
            v.notes = text(p, "notes");
            v.preferred_label = text(p, "preferred_label");
            v.response = text(p, "response").or(v.response.take());
            v.context_updates = p
                .get("context_updates")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            v.duration_ms = p.get("duration_ms").and_then(Value::as_u64);
            v.failure_reason = None;
        }
        event_kind::STAGE_FAILED => {
            let will_retry = p.get("will_retry").and_then(Value::as_bool) == Some(true);
            v.failure_reason = p
                .get("failure")
                .and_then(|f| f.get("message"))
                .and_then(Value::as_str)
                .map(String::from)
                .or_else(|| text(p, "error"));
            v.response = text(p, "response").or(v.response.take());
            if !will_retry {
                v.outcome = "failed".into();
                v.duration_ms = p.get("duration_ms").and_then(Value::as_u64);
            }
        }
        event_kind::AGENT_MCP_READY | event_kind::AGENT_MCP_FAILED => mcp_server(v, kind, p),
        event_kind::AGENT_MCP_SUMMARY => {
            if let Some(all) = p.get("servers").and_then(Value::as_array) {
                v.mcp_servers = all.clone();
            }
        }
        event_kind::AGENT_TOOL_STARTED => mcp_used(v, p),
        // A human stage: the question is its prompt, the answer its response.
        event_kind::INTERVIEW_STARTED => v.question = Some(p.clone()),
        event_kind::INTERVIEW_COMPLETED => {
            let answer = text(p, "answer").unwrap_or_default();
            v.response = Some(
                if p.get("accepted").and_then(Value::as_bool) == Some(false) {
                    format!("{answer}\n\n(refused: not one of the options)\n")
                } else {
                    format!("{answer}\n")
                },
            );
        }
        event_kind::INTERVIEW_TIMEOUT => {
            v.response = Some(format!(
                "(no answer: timed out after {} ms)\n",
                p.get("duration_ms").and_then(Value::as_u64).unwrap_or(0)
            ))
        }
        event_kind::INTERVIEW_INTERRUPTED => {
            v.response = Some(format!(
                "(no answer: {})\n",
                text(p, "reason").unwrap_or_else(|| "interrupted".into())
            ))
        }
        // A failed LLM stage has no `response`: its last message is the closest thing.
        event_kind::AGENT_MESSAGE if v.response.is_none() || v.outcome == "running" => {
            v.response = text(p, "text")
                .filter(|t| !t.is_empty())
                .or(v.response.take());
        }
        _ => {}
    }
}

/// A server's start-up event: its entry in the visit, made or replaced.
fn mcp_server(v: &mut StageVisit, kind: &str, p: &Value) {
    let Some(name) = text(p, "server") else {
        return;
    };
    let entry = if kind == event_kind::AGENT_MCP_READY {
        json!({"server": name, "state": "ready", "error": null,
               "tool_count": p.get("tool_count"), "duration_ms": p.get("duration_ms"),
               "tools": p.get("tools").cloned().unwrap_or(json!([])), "used": []})
    } else {
        json!({"server": name, "state": "failed", "error": p.get("error"),
               "required": p.get("required"), "tools": [], "used": []})
    };
    match v.mcp_servers.iter_mut().find(|s| s["server"] == name) {
        Some(s) => *s = entry,
        None => v.mcp_servers.push(entry),
    }
}

/// A tool call of the agent: noted as used by the server that offered the tool.
fn mcp_used(v: &mut StageVisit, p: &Value) {
    let Some(tool) = p.get("tool_name").and_then(Value::as_str) else {
        return;
    };
    for s in &mut v.mcp_servers {
        let original = s["tools"].as_array().and_then(|ts| {
            ts.iter()
                .find(|t| t["name"] == tool)
                .and_then(|t| t["original_name"].as_str())
                .map(String::from)
        });
        if let (Some(o), Some(used)) = (original, s["used"].as_array_mut()) {
            if !used.iter().any(|u| u == &o) {
                used.push(Value::String(o));
            }
        }
    }
}

/// Every event of a run, blob references resolved.
pub fn run_events(store: &dyn RunStore, run_id: &str) -> Result<Vec<Event>, StoreError> {
    const PAGE: usize = 1000;
    let mut all = Vec::new();
    let mut since = 1;
    loop {
        let page = store.events(run_id, since, PAGE)?;
        let n = page.len();
        for mut e in page {
            since = e.seq + 1;
            if e.event.starts_with("stage.")
                || e.event.starts_with("command.")
                || e.event == event_kind::AGENT_MESSAGE
            {
                resolve_blobs(store, &mut e.properties)?;
            }
            all.push(e);
        }
        if n < PAGE {
            return Ok(all);
        }
    }
}

/// `checkpoint.json`: the latest checkpoint's completed nodes (in order, with repeats),
/// context, current and next node; `null` fields before the first checkpoint.
pub fn checkpoint_json(store: &dyn RunStore, run_id: &str) -> Result<Value, String> {
    Ok(match restore(store, run_id)? {
        Some(c) => json!({
            "run_id": run_id,
            "current_node": c.current_node,
            "next_node_id": c.next_node_id,
            "completed_nodes": c.state.completed,
            "node_retries": c.state.retries,
            "context": c.state.context,
        }),
        None => json!({"run_id": run_id, "current_node": null, "next_node_id": null,
                       "completed_nodes": [], "node_retries": {}, "context": {}}),
    })
}

/// Writes the log folder of a run into `dir`: per node `DIR/<node_id>/` for its latest
/// visit (earlier visits of a revisited node under `DIR/<node_id>/visit-<n>/`), and
/// `DIR/checkpoint.json`. Existing files of the same names are overwritten.
pub fn write_logs(store: &dyn RunStore, run_id: &str, dir: &Path) -> Result<(), String> {
    let events = run_events(store, run_id).map_err(|e| e.to_string())?;
    let visits = collect(&events);
    let io = |what: &Path, e: std::io::Error| format!("cannot write {}: {e}", what.display());
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let mut latest: HashMap<&str, u32> = HashMap::new();
    for v in &visits {
        latest.insert(&v.node_id, v.visit);
    }
    for v in &visits {
        let node_dir = dir.join(safe_rel(&v.node_id));
        let target = if latest.get(v.node_id.as_str()) == Some(&v.visit) {
            node_dir
        } else {
            node_dir.join(format!("visit-{}", v.visit))
        };
        write_visit(v, &target).map_err(|e| io(&target, e))?;
    }
    let cp = checkpoint_json(store, run_id)?;
    let path = dir.join("checkpoint.json");
    std::fs::write(&path, pretty(&cp)).map_err(|e| io(&path, e))
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()) + "\n"
}

/// A node id as a relative path: `/` separates child-workflow levels; anything that could
/// climb out (`..`, empty parts) is replaced.
fn safe_rel(id: &str) -> std::path::PathBuf {
    id.split('/')
        .map(|part| match part {
            "" | "." | ".." => "_",
            p => p,
        })
        .collect()
}

fn write_visit(v: &StageVisit, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("status.json"), pretty(&v.status_json()))?;
    if let Some(p) = v.prompt_md() {
        std::fs::write(dir.join("prompt.md"), p)?;
    }
    if let Some(r) = &v.response {
        std::fs::write(dir.join("response.md"), r)?;
    }
    if let Some(c) = &v.command {
        for stream in ["stdout", "stderr"] {
            if let Some(t) = c.get(stream).and_then(Value::as_str) {
                std::fs::write(dir.join(stream), t)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::EventDraft;

    fn ev(seq: u64, kind: &str, node: &str, props: Value) -> Event {
        EventDraft::new(kind, props).node(node).into_event(
            "R",
            seq,
            format!("E{seq}"),
            format!("t{seq}"),
        )
    }

    fn run_ev(seq: u64, kind: &str, props: Value) -> Event {
        EventDraft::new(kind, props).into_event("R", seq, format!("E{seq}"), format!("t{seq}"))
    }

    #[test]
    fn a_visit_open_when_its_run_ended_is_closed_with_the_runs_reason() {
        let start = |seq, node| ev(seq, "stage.started", node, json!({"attempt": 1}));
        let ended = |kind: &str, reason: &str| {
            collect(&[start(1, "a"), run_ev(2, kind, json!({"reason": reason}))])[0].clone()
        };
        assert_eq!(ended("run.failed", "cancelled").outcome, "cancelled");
        assert_eq!(ended("run.interrupted", "").outcome, "interrupted");
        let failed = ended("run.dead", "unresumable");
        assert_eq!(failed.outcome, "failed");
        assert!(failed
            .failure_reason
            .unwrap_or_default()
            .contains("run.dead"));
        // A finished visit keeps its outcome.
        let v = collect(&[
            start(1, "a"),
            ev(2, "stage.completed", "a", json!({"status": "succeeded"})),
            run_ev(3, "run.failed", json!({"reason": "cancelled"})),
        ]);
        assert_eq!(v[0].outcome, "succeeded");
    }

    #[test]
    fn visits_split_on_first_attempts_and_keep_retries_together() {
        let events = vec![
            ev(
                1,
                "stage.started",
                "a",
                json!({"attempt": 1, "handler_type": "prompt"}),
            ),
            ev(2, "stage.prompt", "a", json!({"text": "one"})),
            ev(
                3,
                "stage.failed",
                "a",
                json!({"will_retry": true, "failure": {"message": "boom"}}),
            ),
            ev(4, "stage.started", "a", json!({"attempt": 2})),
            ev(5, "stage.prompt", "a", json!({"text": "two"})),
            ev(
                6,
                "stage.completed",
                "a",
                json!({"status": "succeeded", "response": "ok",
                                                 "context_updates": {"k": 1}}),
            ),
            ev(7, "stage.started", "a", json!({"attempt": 1})),
            ev(
                8,
                "stage.failed",
                "a",
                json!({"will_retry": false, "failure": {"message": "bad"}}),
            ),
        ];
        let v = collect(&events);
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].visit, v[0].attempts), (1, 2));
        assert_eq!(v[0].outcome, "succeeded");
        assert_eq!(v[0].failure_reason, None);
        assert_eq!(v[0].response.as_deref(), Some("ok"));
        assert_eq!(v[0].context_updates["k"], 1);
        let md = v[0].prompt_md().unwrap_or_default();
        assert!(md.contains("model call 2 -->\n\ntwo"), "{md}");
        assert_eq!((v[1].visit, v[1].outcome.as_str()), (2, "failed"));
        assert_eq!(v[1].failure_reason.as_deref(), Some("bad"));
    }

    #[test]
    fn node_ids_never_climb_out_of_the_log_folder() {
        assert_eq!(safe_rel("m/child"), Path::new("m/child"));
        assert_eq!(safe_rel("../x"), Path::new("_/x"));
        assert_eq!(safe_rel("/abs"), Path::new("_/abs"));
    }
}
