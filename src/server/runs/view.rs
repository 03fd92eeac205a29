//! Wire shapes of runs: the full Run (SPEC 2.2-2.6), the board item (SPEC 2.12) and the
//! question list item (api.md 2), built from a store [`RunRow`].
//!
//! Owns: field mapping only. Must not touch: the store or status rules (it reads
//! [`super::lifecycle::holds_slot`] like everyone else).

use crate::settings::Settings;
use crate::store::{Control, RunRow, RunStatus};
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Above this elapsed time a board item gets `elapsed_warning: true`.
pub const ELAPSED_WARNING_SECS: u64 = 3600;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Wall time from start to completion (or now), in ms.
fn wall_ms(row: &RunRow) -> Option<u64> {
    let start = crate::base::clock::parse_ts(row.started_at.as_deref()?)?;
    let end = row
        .completed_at
        .as_deref()
        .and_then(crate::base::clock::parse_ts)
        .unwrap_or_else(now_ms);
    Some(end.saturating_sub(start).max(0) as u64)
}

fn question_text(q: &Value) -> Value {
    json!({"text": q.get("question").cloned().unwrap_or(Value::Null)})
}

/// The full Run resource (SPEC 2.2), serialised straight from the row: a borrowed view, so
/// answering a request builds no intermediate `Value` tree. Field order is the wire order.
#[derive(Serialize)]
pub struct RunView<'a> {
    id: &'a str,
    parent_id: &'a Option<String>,
    children_count: usize,
    title: &'a str,
    goal: &'a str,
    workflow: WorkflowView<'a>,
    automation: Cow<'a, Value>,
    repository: Cow<'a, Value>,
    created_by: Cow<'a, Value>,
    origin: Kind,
    labels: &'a BTreeMap<String, String>,
    lifecycle: LifecycleView<'a>,
    sandbox: Value,
    models: Cow<'a, Value>,
    source_directory: &'a Option<String>,
    timestamps: TimestampsView<'a>,
    timing: Option<Value>,
    billing: Option<Value>,
    size: &'static str,
    ask_svc: crate::ask::Readiness,
    diff: &'a Option<Value>,
    pull_request: &'a Option<Value>,
    current_question: Option<Value>,
    superseded_by: &'a Option<String>,
    retried_from: Cow<'a, Value>,
    links: Links,
}

#[derive(Serialize)]
struct WorkflowView<'a> {
    /// The registered version the run runs (svc's addition to WorkflowRef).
    version_id: &'a Option<String>,
    slug: &'a Option<String>,
    name: &'a Option<String>,
    graph_name: &'a Option<String>,
    node_count: i64,
    edge_count: i64,
}

#[derive(Serialize)]
struct Kind {
    kind: &'static str,
}

#[derive(Serialize)]
struct LifecycleView<'a> {
    status: &'a RunStatus,
    approval: &'a Option<Value>,
    pending_control: &'a Option<Control>,
    queue_position: Option<usize>,
    error: Option<Message<'a>>,
    archived: bool,
    archived_at: &'a Option<String>,
}

#[derive(Serialize)]
struct Message<'a> {
    message: &'a str,
}

#[derive(Serialize)]
struct TimestampsView<'a> {
    created_at: &'a str,
    started_at: &'a Option<String>,
    last_event_at: &'a Option<String>,
    completed_at: &'a Option<String>,
}

#[derive(Serialize)]
struct Links {
    web: Option<String>,
}

/// `models`: before the run starts, the model it asked for (create body or `[run] model`);
/// once started, the models its LLM stages actually used (none if none ran).
fn models_of<'a>(row: &'a RunRow, created: &'a Map<String, Value>) -> Cow<'a, Value> {
    if row.started_at.is_some() || !row.models_used.is_empty() {
        return Cow::Owned(Value::Array(row.models_used.clone()));
    }
    created
        .get("models")
        .map_or_else(|| Cow::Owned(json!([])), Cow::Borrowed)
}

/// The full Run resource. `created` holds the `run.created` properties (created_by, origin,
/// models, sandbox), `queue_position` is 1-based among runnable runs and `ask` is the run's
/// Ask readiness (`crate::ask::readiness`).
pub fn run_view<'a>(
    row: &'a RunRow,
    created: &'a Map<String, Value>,
    queue_position: Option<usize>,
    children_count: usize,
    settings: &Settings,
    ask: crate::ask::Readiness,
) -> RunView<'a> {
    let w = &row.workflow;
    let u = &row.usage;
    let timing = wall_ms(row).map(|wall| {
        json!({"wall_time_ms": wall, "active_time_ms": u.inference_time_ms + u.tool_time_ms,
               "inference_time_ms": u.inference_time_ms, "tool_time_ms": u.tool_time_ms})
    });
    // No LLM usage yet: nothing billed. Usage that no price covers: total unknown.
    // A budget shows even before anything was spent.
    let budget = created
        .get("budget")
        .and_then(|b| b.get("usd_micros"))
        .cloned();
    let billing = match (u.records > 0, budget) {
        (false, None) => None,
        (spent, budget) => {
            let mut b = json!({"total_usd_micros": (spent && u.priced_records > 0).then_some(u.usd_micros)});
            if let Some(limit) = budget {
                b["budget_usd_micros"] = limit;
            }
            Some(b)
        }
    };
    let sandbox = match created.get("sandbox") {
        Some(s) if s.is_object() => json!({
            "kind": row.sandbox.kind,
            "plan": {
                "provider": s.get("provider").cloned().unwrap_or(json!("local")),
                "image": s.get("image").cloned().unwrap_or(Value::Null),
                "snapshot": s.get("snapshot").cloned().unwrap_or(Value::Null),
                // The environment the plan was resolved from (null: none, `[run.sandbox]`).
                "environment": s.get("environment").cloned().unwrap_or(Value::Null),
            },
            "instance": row.sandbox.instance,
            "failure": row.sandbox.failure,
            "removed": row.sandbox.removed,
        }),
        _ => Value::Null,
    };
    let or = |key: &str, default: fn() -> Value| {
        created
            .get(key)
            .map_or_else(|| Cow::Owned(default()), Cow::Borrowed)
    };
    RunView {
        id: &row.id,
        parent_id: &row.parent_id,
        children_count,
        title: &row.title,
        goal: &row.goal,
        workflow: WorkflowView {
            version_id: &w.version_id,
            slug: &w.slug,
            name: &w.name,
            graph_name: &w.graph_name,
            node_count: w.node_count,
            edge_count: w.edge_count,
        },
        automation: or("automation", || Value::Null),
        repository: or("repository", || Value::Null),
        created_by: or(
            "created_by",
            || json!({"kind": "system", "system_kind": "engine"}),
        ),
        origin: Kind { kind: "api" },
        labels: &row.labels,
        lifecycle: LifecycleView {
            status: &row.status,
            approval: &row.approval,
            pending_control: &row.pending_control,
            queue_position,
            error: row.error.as_deref().map(|message| Message { message }),
            archived: row.archived,
            archived_at: &row.archived_at,
        },
        sandbox,
        models: models_of(row, created),
        source_directory: &row.working_dir,
        timestamps: TimestampsView {
            created_at: &row.created_at,
            started_at: &row.started_at,
            last_event_at: &row.last_event_at,
            completed_at: &row.completed_at,
        },
        timing,
        billing,
        size: crate::llm::size_bucket(u.usd_micros),
        ask_svc: ask,
        diff: &row.diff,
        pull_request: &row.pull_request,
        current_question: row.current_question.as_ref().map(question_text),
        superseded_by: &row.superseded_by,
        retried_from: or("retried_from", || Value::Null),
        links: Links {
            web: settings.run_web_url(&row.id),
        },
    }
}

/// [`run_view`] as a JSON value.
pub fn run_json(
    row: &RunRow,
    created: &Map<String, Value>,
    queue_position: Option<usize>,
    children_count: usize,
    settings: &Settings,
    ask: crate::ask::Readiness,
) -> Value {
    serde_json::to_value(run_view(
        row,
        created,
        queue_position,
        children_count,
        settings,
        ask,
    ))
    .unwrap_or(Value::Null)
}

/// The board column of a status (api.md 1.6); `None` for runs the board leaves out.
pub fn board_status(s: &RunStatus) -> Option<&'static str> {
    Some(match s {
        RunStatus::Submitted | RunStatus::Pending { .. } | RunStatus::Runnable => "queued",
        RunStatus::Starting => "initializing",
        RunStatus::Running | RunStatus::Paused { .. } => "running",
        RunStatus::Blocked { .. } => "blocked",
        RunStatus::Succeeded { .. } => "succeeded",
        RunStatus::Failed { .. } | RunStatus::Dead => "failed",
        RunStatus::Removing => return None,
    })
}

/// A board list item (SPEC 2.12); `pull_request` is what svc keeps of the run's pull
/// request (number, state, counts, checks), never fetched for the board.
pub fn board_item(row: &RunRow, pull_request: Option<Value>) -> Option<Value> {
    let status = board_status(&row.status)?;
    let elapsed = wall_ms(row).unwrap_or(0) / 1000;
    let repo = row
        .created_meta
        .get("repository")
        .and_then(|r| r.get("name"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| "unknown".into());
    let sandbox = row
        .sandbox
        .instance
        .as_ref()
        .and_then(|i| i.pointer("/runtime/id"))
        .filter(|id| !id.is_null())
        .map(|id| json!({"id": id, "resources": run_resources(row)}));
    Some(json!({
        "id": row.id,
        "repository": {"name": repo},
        "title": row.title,
        "workflow": {"slug": row.workflow.slug},
        "status": status,
        "created_at": row.created_at,
        "pull_request": pull_request.unwrap_or(Value::Null),
        "timings": {"elapsed_secs": elapsed, "elapsed_warning": elapsed > ELAPSED_WARNING_SECS},
        "sandbox": sandbox,
        "question": row.current_question.as_ref().map(question_text),
        "automation": row.created_meta.get("automation").cloned().unwrap_or(Value::Null),
    }))
}

/// What the run's sandbox may use: its environment's limits as frozen into the run
/// (memory and disk in bytes, null where unlimited), else the host's CPUs.
pub fn run_resources(row: &RunRow) -> Value {
    match row
        .created_meta
        .get("sandbox")
        .and_then(|s| s.get("resources"))
    {
        Some(r) if r.is_object() => json!({
            "cpu": r.get("cpu"), "memory": r.get("memory"), "pids": r.get("pids"), "disk": r.get("disk"),
        }),
        _ => host_resources(),
    }
}

/// What a sandbox on this host may use: the host's CPUs (memory is not limited, so null).
pub fn host_resources() -> Value {
    let cpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    json!({"cpu": cpu, "memory": null})
}

/// A question list item from `interview.started` properties.
pub fn question_item(p: &Value) -> Value {
    json!({
        "id": p.get("question_id"),
        "text": p.get("question"),
        "stage": p.get("stage"),
        "question_type": p.get("question_type"),
        "options": p.get("options").cloned().unwrap_or_else(|| json!([])),
        "allow_freeform": p.get("allow_freeform").cloned().unwrap_or(json!(false)),
        "timeout_seconds": p.get("timeout_seconds").cloned().unwrap_or(Value::Null),
        "context_display": p.get("context_display").cloned().unwrap_or(Value::Null),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask() -> crate::ask::Readiness {
        crate::ask::Readiness {
            available: false,
            unavailable_reason: Some(crate::ask::Unavailable::NoSandbox),
            default_model: None,
        }
    }

    fn row_with(usage: crate::store::UsageTotals, started: bool) -> RunRow {
        let ev: crate::store::Event = serde_json::from_value(json!({
            "seq": 1, "id": "E", "ts": "2026-01-01T00:00:00.000Z", "run_id": "R",
            "event": "run.created", "properties": {}
        }))
        .unwrap();
        let mut row = RunRow::from_created(&ev);
        if started {
            row.started_at = Some("2026-01-01T00:00:01.000Z".into());
            row.completed_at = Some("2026-01-01T00:00:04.500Z".into());
        }
        row.usage = usage;
        row
    }

    #[test]
    fn timing_billing_and_size_come_from_usage_totals() {
        let settings = Settings::default();
        let usage = crate::store::UsageTotals {
            records: 2,
            priced_records: 2,
            usd_micros: 1_250_000,
            inference_time_ms: 900,
            tool_time_ms: 300,
        };
        let v = run_json(
            &row_with(usage, true),
            &Map::new(),
            None,
            0,
            &settings,
            ask(),
        );
        assert_eq!(
            v["timing"],
            json!({"wall_time_ms": 3500, "active_time_ms": 1200, "inference_time_ms": 900, "tool_time_ms": 300})
        );
        assert_eq!(v["billing"], json!({"total_usd_micros": 1_250_000}));
        assert_eq!(v["size"], "M");

        // Not started, nothing spent: no timing, no billing, smallest size.
        let none = run_json(
            &row_with(Default::default(), false),
            &Map::new(),
            None,
            0,
            &settings,
            ask(),
        );
        assert_eq!(none["timing"], Value::Null);
        assert_eq!(none["billing"], Value::Null);
        assert_eq!(none["size"], "XS");

        // Usage no price covers: billed, total unknown.
        let unpriced = crate::store::UsageTotals {
            records: 1,
            ..Default::default()
        };
        let u = run_json(
            &row_with(unpriced, true),
            &Map::new(),
            None,
            0,
            &settings,
            ask(),
        );
        assert_eq!(u["billing"], json!({"total_usd_micros": null}));
        assert_eq!(u["size"], "XS");
    }
}
