//! The projection: how a run's events fold into its current row.
//!
//! Owns: [`RunRow::from_created`], [`fold`] (a pure reducer) and [`replay`], plus the shape of
//! the `run.created` properties the store writes. Both store implementations and the import
//! verifier use exactly these functions, so "the row equals the fold of the events" holds by
//! construction and can be checked at any time.
//! Must not touch: storage, clocks, ids; validation of transitions (the server decides which
//! events may be appended; the fold records what happened).
//!
//! Invariant relied on by the SQLite store: after `run.created`, `fold` never changes the
//! "spec" fields (title, goal, labels, workflow, working_dir, inputs, parent_id), and it
//! changes `checkpoint` only on `checkpoint.completed`.

use super::model::{
    Control, Event, NewRun, RunRow, RunStatus, SandboxKind, SandboxState, UsageTotals, WorkflowMeta,
};
use crate::base::event_kind;
use serde_json::{json, Map, Value};

/// Keys of `run.created` properties written by the store itself.
pub(crate) const CREATED_KEYS: [&str; 7] = [
    "title",
    "goal",
    "labels",
    "workflow",
    "working_dir",
    "inputs",
    "parent_id",
];

/// The `run.created` properties for `new` (without the caller's extra keys).
pub(crate) fn created_properties(new: &NewRun) -> Value {
    let inputs = if new.inputs.is_null() {
        Value::Object(Map::new())
    } else {
        new.inputs.clone()
    };
    json!({
        "title": new.title,
        "goal": new.goal,
        "labels": new.labels,
        "workflow": new.workflow,
        "working_dir": new.working_dir,
        "inputs": inputs,
        "parent_id": new.parent_id,
    })
}

fn str_prop(p: &Value, key: &str) -> Option<String> {
    p.get(key).and_then(Value::as_str).map(str::to_string)
}

impl RunRow {
    /// The row right after `run.created`. Tolerant of older shapes of the event: missing
    /// fields take defaults, and the legacy keys `workflow_source`, `workflow_slug` and
    /// `source_directory` fill `workflow.source`, `workflow.slug` and `working_dir`.
    pub fn from_created(event: &Event) -> RunRow {
        let p = &event.properties;
        let mut workflow: WorkflowMeta = p
            .get("workflow")
            .and_then(|w| serde_json::from_value(w.clone()).ok())
            .unwrap_or_default();
        if workflow.source.is_empty() {
            if let Some(src) = str_prop(p, "workflow_source") {
                workflow.source = src;
            }
        }
        if workflow.slug.is_none() {
            workflow.slug = str_prop(p, "workflow_slug");
        }
        let labels = p
            .get("labels")
            .and_then(|l| serde_json::from_value(l.clone()).ok())
            .unwrap_or_default();
        let inputs = match p.get("inputs") {
            Some(v) if !v.is_null() => v.clone(),
            _ => Value::Object(Map::new()),
        };
        RunRow {
            id: event.run_id.clone(),
            title: str_prop(p, "title").unwrap_or_default(),
            goal: str_prop(p, "goal").unwrap_or_default(),
            labels,
            workflow,
            status: RunStatus::Submitted,
            pending_control: None,
            archived: false,
            archived_at: None,
            approval: None,
            error: None,
            created_at: event.ts.clone(),
            updated_at: event.ts.clone(),
            started_at: None,
            completed_at: None,
            last_event_at: Some(event.ts.clone()),
            last_seq: event.seq,
            working_dir: str_prop(p, "working_dir").or_else(|| str_prop(p, "source_directory")),
            inputs,
            parent_id: str_prop(p, "parent_id"),
            checkpoint: None,
            current_question: None,
            questions: Vec::new(),
            superseded_by: None,
            created_meta: CREATED_META
                .iter()
                .filter_map(|k| Some((k.to_string(), p.get(*k)?.clone())))
                .collect(),
            usage: UsageTotals::default(),
            models_used: Vec::new(),
            sandbox: SandboxState::default(),
            diff: None,
            pull_request: None,
        }
    }
}

/// `run.created` properties the row keeps as they are, for views (see `RunRow::created_meta`).
const CREATED_META: [&str; 14] = [
    "artifacts",
    "automation",
    "budget",
    "created_by",
    "models",
    "sandbox",
    "retried_from",
    "repository",
    "workspace",
    "mcp_servers",
    "mcp_definitions",
    "pull_request_options",
    "notifications",
    "sandbox_env",
];

/// A blank row, only as a cheap placeholder while a row is moved through [`fold`].
pub(crate) fn empty_row() -> RunRow {
    RunRow {
        id: String::new(),
        title: String::new(),
        goal: String::new(),
        labels: Default::default(),
        workflow: WorkflowMeta::default(),
        status: RunStatus::Submitted,
        pending_control: None,
        archived: false,
        archived_at: None,
        approval: None,
        error: None,
        created_at: String::new(),
        updated_at: String::new(),
        started_at: None,
        completed_at: None,
        last_event_at: None,
        last_seq: 0,
        working_dir: None,
        inputs: Value::Null,
        parent_id: None,
        checkpoint: None,
        current_question: None,
        questions: Vec::new(),
        superseded_by: None,
        models_used: Vec::new(),
        created_meta: Map::new(),
        usage: UsageTotals::default(),
        sandbox: SandboxState::default(),
        diff: None,
        pull_request: None,
    }
}

/// Rebuilds a run's row from its whole event list (first event `run.created`).
/// `None` when the list is empty.
pub fn replay<'a>(events: impl IntoIterator<Item = &'a Event>) -> Option<RunRow> {
    let mut it = events.into_iter();
    let first = it.next()?;
    Some(it.fold(RunRow::from_created(first), fold))
}

/// True when a pending control is settled by the run entering `status`.
fn control_settled(control: Control, status: &RunStatus) -> bool {
    status.is_terminal()
        || match control {
            Control::Cancel => false,
            Control::Pause => matches!(status, RunStatus::Paused { .. }),
            Control::Unpause => matches!(status, RunStatus::Running | RunStatus::Blocked { .. }),
        }
}

fn set_status(row: &mut RunRow, status: RunStatus, ts: &str) {
    if let Some(control) = row.pending_control {
        if control_settled(control, &status) {
            row.pending_control = None;
        }
    }
    if status.is_terminal() {
        row.completed_at = Some(ts.to_string());
        row.questions.clear();
    } else if matches!(
        status,
        RunStatus::Submitted | RunStatus::Pending { .. } | RunStatus::Runnable
    ) && row.status.is_terminal()
    {
        // A finished run sent round again (retry/resume): its old outcome no longer applies.
        row.completed_at = None;
        row.error = None;
    }
    row.status = status;
}

fn error_message(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => match o.get("message") {
            Some(Value::String(m)) => Some(m.clone()),
            _ => Some(v.to_string()),
        },
        other => Some(other.to_string()),
    }
}

fn approval(state: &str, requested_at: Value, decided_at: Option<&str>, denial: Value) -> Value {
    json!({
        "state": state,
        "requested_at": requested_at,
        "decided_at": decided_at,
        "denial_reason": denial,
    })
}

fn requested_at(row: &RunRow, ts: &str) -> Value {
    row.approval
        .as_ref()
        .and_then(|a| a.get("requested_at"))
        .filter(|v| !v.is_null())
        .cloned()
        .unwrap_or_else(|| Value::String(ts.to_string()))
}

/// Adds the `usage` object of a `stage.completed` / `stage.failed` event (written by the
/// engine's LLM handler: `cost{usd_micros, source}`, `inference_time_ms`, `tool_time_ms`,
/// tokens, model). Every attempt ends with exactly one such event, so each is counted once.
fn add_usage(totals: &mut UsageTotals, usage: &Value) {
    let Some(u) = usage.as_object() else { return };
    let int = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let cost = u.get("cost");
    totals.records += 1;
    if cost.and_then(|c| c.get("source")).and_then(Value::as_str) != Some("unpriced") {
        totals.priced_records += 1;
    }
    totals.usd_micros += cost
        .and_then(|c| c.get("usd_micros"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    totals.inference_time_ms += int(u.get("inference_time_ms"));
    totals.tool_time_ms += int(u.get("tool_time_ms"));
}

/// Adds the model of a stage attempt's `usage` to the models the run used (once each).
fn note_model(models: &mut Vec<Value>, usage: &Value) {
    let Some(name) = usage.get("model").and_then(Value::as_str) else {
        return;
    };
    let provider = usage.get("provider").cloned().unwrap_or(Value::Null);
    let m = json!({"provider": provider, "name": name});
    if !models.contains(&m) {
        models.push(m);
    }
}

/// SPEC 2.5 `instance` from `sandbox.initialized` properties (api.md names the runtime id
/// `identifier`). The runtime also keeps the run `branch` and its `base_commit` (SPEC allows
/// further runtime fields): diffs and resumes need them.
fn sandbox_instance(p: &Value) -> Value {
    let field = |k: &str| p.get(k).cloned().unwrap_or(Value::Null);
    json!({
        "provider": field("provider"),
        "image": field("image"),
        "snapshot": field("snapshot"),
        "runtime": {
            "id": field("identifier"),
            "working_directory": field("working_directory"),
            "repo_cloned": p.get("repo_cloned").cloned().unwrap_or(json!(false)),
            "clone_origin_url": field("clone_origin_url"),
            "clone_branch": field("clone_branch"),
            "branch": field("branch"),
            "base_commit": field("base_commit"),
            "network": p.get("network").cloned().unwrap_or(json!(false)),
            // How the environment's resources are enforced: cgroup-v2, cgroup-v1, rlimits
            // (null: no limits).
            "limits": field("limits"),
            "resources": field("resources"),
        },
    })
}

/// Applies one event to a row. Pure: the result depends only on `row` and `event`.
/// Unknown kinds change only the bookkeeping fields (`last_seq`, `last_event_at`, `updated_at`).
pub fn fold(mut row: RunRow, event: &Event) -> RunRow {
    let p = &event.properties;
    let ts = event.ts.as_str();
    match event.event.as_str() {
        event_kind::RUN_SUBMITTED => set_status(&mut row, RunStatus::Submitted, ts),
        event_kind::RUN_PENDING => {
            let reason = str_prop(p, "reason").unwrap_or_else(|| "approval_required".into());
            if reason == "approval_required" {
                row.approval = Some(approval("pending", json!(ts), None, Value::Null));
            }
            set_status(&mut row, RunStatus::Pending { reason }, ts);
        }
        event_kind::RUN_QUEUED => set_status(&mut row, RunStatus::Runnable, ts),
        event_kind::RUN_STARTING => set_status(&mut row, RunStatus::Starting, ts),
        event_kind::RUN_RUNNING
        | event_kind::RUN_STARTED
        | event_kind::RUN_UNBLOCKED
        | event_kind::RUN_UNPAUSED => {
            if matches!(
                event.event.as_str(),
                event_kind::RUN_RUNNING | event_kind::RUN_STARTED
            ) && row.started_at.is_none()
            {
                row.started_at = Some(ts.to_string());
            }
            set_status(&mut row, RunStatus::Running, ts);
        }
        event_kind::RUN_BLOCKED => {
            let blocked_reason =
                str_prop(p, "blocked_reason").unwrap_or_else(|| "human_input_required".into());
            set_status(&mut row, RunStatus::Blocked { blocked_reason }, ts);
        }
        event_kind::RUN_PAUSED => {
            let prior_block = match p.get("prior_block") {
                Some(v) => v.as_str().map(str::to_string),
                None => match &row.status {
                    RunStatus::Blocked { blocked_reason } => Some(blocked_reason.clone()),
                    RunStatus::Paused { prior_block } => prior_block.clone(),
                    _ => None,
                },
            };
            set_status(&mut row, RunStatus::Paused { prior_block }, ts);
        }
        event_kind::RUN_REMOVING => set_status(&mut row, RunStatus::Removing, ts),
        event_kind::RUN_COMPLETED => {
            let reason = str_prop(p, "reason").unwrap_or_else(|| "completed".into());
            set_status(&mut row, RunStatus::Succeeded { reason }, ts);
        }
        event_kind::RUN_FAILED => {
            let reason = str_prop(p, "reason").unwrap_or_else(|| "workflow_error".into());
            set_status(&mut row, RunStatus::Failed { reason }, ts);
            row.error = p.get("error").and_then(error_message);
        }
        event_kind::RUN_DEAD => {
            set_status(&mut row, RunStatus::Dead, ts);
            row.error = p.get("error").and_then(error_message);
        }
        event_kind::RUN_CANCEL_REQUESTED => row.pending_control = Some(Control::Cancel),
        event_kind::RUN_PAUSE_REQUESTED => row.pending_control = Some(Control::Pause),
        event_kind::RUN_UNPAUSE_REQUESTED => row.pending_control = Some(Control::Unpause),
        event_kind::RUN_ARCHIVED => {
            row.archived = true;
            row.archived_at = Some(ts.to_string());
        }
        event_kind::RUN_UNARCHIVED => {
            row.archived = false;
            row.archived_at = None;
        }
        event_kind::RUN_APPROVED => {
            row.approval = Some(approval(
                "approved",
                requested_at(&row, ts),
                Some(ts),
                Value::Null,
            ));
        }
        event_kind::RUN_DENIED => {
            let reason = p
                .get("denial_reason")
                .or_else(|| p.get("reason"))
                .cloned()
                .unwrap_or(Value::Null);
            row.approval = Some(approval("denied", requested_at(&row, ts), Some(ts), reason));
        }
        event_kind::RUN_SUPERSEDED_BY => row.superseded_by = str_prop(p, "new_run_id"),
        event_kind::CHECKPOINT_COMPLETED => row.checkpoint = Some(p.clone()),
        event_kind::SANDBOX_INITIALIZING => {
            row.sandbox = SandboxState {
                kind: SandboxKind::Initializing,
                ..SandboxState::default()
            }
        }
        event_kind::SANDBOX_INITIALIZED => {
            row.sandbox = SandboxState {
                kind: SandboxKind::Ready,
                instance: Some(sandbox_instance(p)),
                failure: None,
                removed: None,
            }
        }
        event_kind::SANDBOX_CLEANUP_COMPLETED => {
            row.sandbox = SandboxState {
                kind: SandboxKind::Planned,
                instance: None,
                failure: None,
                removed: Some(json!({
                    "reason": p.get("reason").cloned().unwrap_or(json!("retention")),
                    "removed_at": ts,
                })),
            }
        }
        event_kind::SANDBOX_FAILED => {
            let field = |k: &str| p.get(k).cloned().unwrap_or(Value::Null);
            row.sandbox = SandboxState {
                kind: SandboxKind::Failed,
                removed: None,
                instance: None,
                failure: Some(json!({
                    "provider": field("provider"),
                    "error": field("error"),
                    "causes": p.get("causes").cloned().unwrap_or_else(|| json!([])),
                    "duration_ms": p.get("duration_ms").cloned().unwrap_or(json!(0)),
                })),
            }
        }
        event_kind::WORKSPACE_CHECKPOINT => {
            if let Some(d) = p.get("diff") {
                row.diff = Some(d.clone());
            }
        }
        // An Ask session's model calls count in the run's usage (not in the models its
        // stages used).
        "run.session.assistant_message" => {
            if let Some(u) = p.get("usage") {
                add_usage(&mut row.usage, u);
            }
        }
        event_kind::STAGE_COMPLETED | event_kind::STAGE_FAILED => {
            if let Some(u) = p.get("usage") {
                add_usage(&mut row.usage, u);
                note_model(&mut row.models_used, u);
            }
        }
        event_kind::PULL_REQUEST_CREATED | event_kind::PULL_REQUEST_LINKED => {
            let field = |k: &str| p.get(k).cloned().unwrap_or(Value::Null);
            row.pull_request = Some(json!({
                "owner": field("owner"),
                "repo": field("repo"),
                "number": field("pr_number"),
                "html_url": field("pr_url"),
            }));
        }
        event_kind::PULL_REQUEST_UNLINKED => row.pull_request = None,
        event_kind::INTERVIEW_STARTED => row.questions.push(p.clone()),
        event_kind::INTERVIEW_COMPLETED
        | event_kind::INTERVIEW_TIMEOUT
        | event_kind::INTERVIEW_INTERRUPTED => match p.get("question_id") {
            Some(qid) => row.questions.retain(|q| q.get("question_id") != Some(qid)),
            None if !row.questions.is_empty() => {
                row.questions.remove(0);
            }
            None => {}
        },
        _ => {}
    }
    row.current_question = row.questions.first().cloned();
    row.last_seq = event.seq;
    row.last_event_at = Some(ts.to_string());
    row.updated_at = ts.to_string();
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::model::EventDraft;

    fn ev(seq: u64, kind: &str, props: Value) -> Event {
        EventDraft::new(kind, props).into_event("R", seq, format!("E{seq}"), format!("t{seq}"))
    }

    fn created() -> RunRow {
        let new = NewRun {
            title: "T".into(),
            goal: "G".into(),
            ..NewRun::default()
        };
        RunRow::from_created(&ev(1, "run.created", created_properties(&new)))
    }

    fn apply(kinds: &[(&str, Value)]) -> RunRow {
        let mut row = created();
        for (i, (k, p)) in kinds.iter().enumerate() {
            row = fold(row, &ev(i as u64 + 2, k, p.clone()));
        }
        row
    }

    #[test]
    fn lifecycle_to_success() {
        let row = apply(&[
            ("run.queued", json!({})),
            ("run.starting", json!({})),
            ("run.started", json!({})),
            ("stage.started", json!({})),
            ("run.running", json!({})),
            ("run.completed", json!({})),
        ]);
        assert_eq!(
            row.status,
            RunStatus::Succeeded {
                reason: "completed".into()
            }
        );
        assert_eq!(row.started_at.as_deref(), Some("t4"));
        assert_eq!(row.completed_at.as_deref(), Some("t7"));
        assert_eq!(row.last_seq, 7);
        assert_eq!(row.updated_at, "t7");
        assert_eq!(row.title, "T");
    }

    #[test]
    fn failure_and_controls() {
        let row = apply(&[
            ("run.running", json!({})),
            ("run.cancel.requested", json!({"action":"cancel"})),
        ]);
        assert_eq!(row.pending_control, Some(Control::Cancel));
        let row = fold(
            row,
            &ev(
                4,
                "run.failed",
                json!({"reason":"cancelled","error":{"message":"stopped"}}),
            ),
        );
        assert_eq!(row.pending_control, None);
        assert_eq!(row.error.as_deref(), Some("stopped"));
        assert_eq!(
            row.status,
            RunStatus::Failed {
                reason: "cancelled".into()
            }
        );
        let row = apply(&[("run.failed", json!({"error":"boom"}))]);
        assert_eq!(
            row.status,
            RunStatus::Failed {
                reason: "workflow_error".into()
            }
        );
        assert_eq!(row.error.as_deref(), Some("boom"));
    }

    #[test]
    fn pause_keeps_prior_block_and_settles_control() {
        let row = apply(&[
            ("run.running", json!({})),
            ("run.blocked", json!({})),
            ("run.pause.requested", json!({})),
            ("run.paused", json!({})),
        ]);
        assert_eq!(
            row.status,
            RunStatus::Paused {
                prior_block: Some("human_input_required".into())
            }
        );
        assert_eq!(row.pending_control, None);
        let row = fold(row, &ev(6, "run.unpause.requested", json!({})));
        assert_eq!(row.pending_control, Some(Control::Unpause));
        let row = fold(row, &ev(7, "run.unpaused", json!({})));
        assert_eq!(row.status, RunStatus::Running);
        assert_eq!(row.pending_control, None);
    }

    #[test]
    fn archive_leaves_status() {
        let row = apply(&[("run.completed", json!({})), ("run.archived", json!({}))]);
        assert!(row.archived && row.archived_at.as_deref() == Some("t3"));
        assert!(row.status.is_terminal());
        let row = fold(row, &ev(4, "run.unarchived", json!({})));
        assert!(!row.archived && row.archived_at.is_none());
    }

    #[test]
    fn approval_flow() {
        let row = apply(&[
            ("run.pending", json!({"reason":"approval_required"})),
            ("run.denied", json!({"reason":"no"})),
        ]);
        let a = row.approval.unwrap_or_default();
        assert_eq!(a["state"], "denied");
        assert_eq!(a["requested_at"], "t2");
        assert_eq!(a["decided_at"], "t3");
        assert_eq!(a["denial_reason"], "no");
    }

    #[test]
    fn questions_and_checkpoint() {
        let row = apply(&[
            ("interview.started", json!({"question_id":"a"})),
            ("interview.started", json!({"question_id":"b"})),
            ("checkpoint.completed", json!({"current_node":"x"})),
        ]);
        assert_eq!(row.current_question, Some(json!({"question_id":"a"})));
        assert_eq!(row.checkpoint, Some(json!({"current_node":"x"})));
        let row = fold(
            row,
            &ev(5, "interview.completed", json!({"question_id":"a"})),
        );
        assert_eq!(row.current_question, Some(json!({"question_id":"b"})));
        let row = fold(row, &ev(6, "interview.timeout", json!({"question_id":"b"})));
        assert_eq!(row.current_question, None);
    }

    #[test]
    fn fold_never_changes_spec_fields() {
        let base = created();
        for kind in [
            "run.created",
            "run.submitted",
            "run.pending",
            "run.queued",
            "run.starting",
            "run.running",
            "run.started",
            "run.unblocked",
            "run.unpaused",
            "run.blocked",
            "run.paused",
            "run.removing",
            "run.completed",
            "run.failed",
            "run.dead",
            "run.cancel.requested",
            "run.pause.requested",
            "run.unpause.requested",
            "run.archived",
            "run.unarchived",
            "run.approved",
            "run.denied",
            "run.superseded_by",
            "checkpoint.completed",
            "interview.started",
            "interview.completed",
            "stage.started",
            "stage.completed",
            "stage.failed",
        ] {
            let p = json!({"title":"X","goal":"Y","labels":{"a":"b"},"inputs":{"x":1},
                "parent_id":"P","working_dir":"/w","workflow":{"source":"digraph{}"}});
            let row = fold(base.clone(), &ev(2, kind, p));
            assert_eq!(
                (
                    &row.title,
                    &row.goal,
                    &row.labels,
                    &row.workflow,
                    &row.working_dir,
                    &row.inputs,
                    &row.parent_id
                ),
                (
                    &base.title,
                    &base.goal,
                    &base.labels,
                    &base.workflow,
                    &base.working_dir,
                    &base.inputs,
                    &base.parent_id
                ),
                "{kind}"
            );
            if kind != "checkpoint.completed" {
                assert_eq!(row.checkpoint, base.checkpoint, "{kind}");
            }
        }
    }

    fn usage(usd_micros: i64, source: &str, inference: u64, tool: u64) -> Value {
        json!({"tokens": {"input": 100, "output": 10, "reasoning": 0, "cache_read": 0, "cache_write": 0},
               "cost": {"usd_micros": usd_micros, "source": source},
               "model": "claude-sonnet-4-6", "provider": "anthropic", "speed": "standard",
               "inference_time_ms": inference, "tool_time_ms": tool})
    }

    #[test]
    fn usage_sums_every_attempt_once() {
        let row = apply(&[
            ("stage.started", json!({"attempt": 1})),
            // A retried attempt that spent tokens before failing.
            (
                "stage.failed",
                json!({"will_retry": true, "usage": usage(1_500, "catalog", 40, 5)}),
            ),
            ("stage.retrying", json!({"attempt": 2})),
            ("stage.started", json!({"attempt": 2})),
            (
                "stage.completed",
                json!({"status": "succeeded", "usage": usage(2_500, "catalog", 60, 15)}),
            ),
            // A command stage: no usage object.
            ("stage.completed", json!({"status": "succeeded"})),
            // A final failure that still spent tokens.
            (
                "stage.failed",
                json!({"will_retry": false, "usage": usage(1_000, "catalog", 10, 0)}),
            ),
        ]);
        assert_eq!(
            row.usage,
            UsageTotals {
                records: 3,
                priced_records: 3,
                usd_micros: 5_000,
                inference_time_ms: 110,
                tool_time_ms: 20,
            }
        );
        // Replaying the same events gives the same totals (the row is a pure fold).
        let again = apply(&[(
            "stage.completed",
            json!({"status": "succeeded", "usage": usage(7, "catalog", 1, 1)}),
        )]);
        assert_eq!(again.usage.usd_micros, 7);
    }

    #[test]
    fn unpriced_usage_is_counted_but_not_priced() {
        let row = apply(&[
            (
                "stage.completed",
                json!({"status": "succeeded", "usage": usage(0, "unpriced", 5, 0)}),
            ),
            (
                "stage.completed",
                json!({"status": "succeeded", "usage": null}),
            ),
            (
                "stage.completed",
                json!({"status": "succeeded", "usage": "junk"}),
            ),
        ]);
        assert_eq!(row.usage.records, 1);
        assert_eq!(row.usage.priced_records, 0);
        assert_eq!(row.usage.usd_micros, 0);
        assert_eq!(row.usage.inference_time_ms, 5);
        assert_eq!(created().usage, UsageTotals::default());
    }

    #[test]
    fn legacy_created_shape() {
        let e = ev(
            1,
            "run.created",
            json!({"workflow_source":"digraph a {}","workflow_slug":"a","source_directory":"/src"}),
        );
        let row = RunRow::from_created(&e);
        assert_eq!(row.workflow.source, "digraph a {}");
        assert_eq!(row.workflow.slug.as_deref(), Some("a"));
        assert_eq!(row.working_dir.as_deref(), Some("/src"));
        assert_eq!(row.inputs, json!({}));
    }
}
