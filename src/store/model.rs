//! The store's data types: the event envelope, drafts, new-run requests, run status and the
//! projected run row.
//!
//! Owns: the wire shape of [`Event`] (api.md 3.1: one flat JSON object) and of [`RunStatus`]
//! (SPEC 3: tagged by `kind`), and the fields of [`RunRow`].
//! Must not touch: persistence or folding logic (see `fold.rs`, `sqlite.rs`, `memory.rs`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One committed run event, exactly as it goes on the wire: a flat JSON object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Event {
    /// Per-run sequence number: 1 for `run.created`, +1 per append, no gaps.
    pub seq: u64,
    /// ULID minted by the store (imported events keep whatever id they had).
    pub id: String,
    /// RFC 3339 UTC with milliseconds, e.g. `2026-11-21T20:05:46.123Z`.
    pub ts: String,
    /// The run it belongs to.
    pub run_id: String,
    /// Dotted kind, e.g. `stage.started`.
    pub event: String,
    /// Always an object; `{}` when the event carries nothing.
    #[serde(default = "empty_object")]
    pub properties: Value,
    /// The node a stage event is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// That node's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_label: Option<String>,
    /// The stage visit it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_id: Option<String>,
    /// The parallel fan-out the event happened in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_group_id: Option<String>,
    /// The branch of that fan-out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_branch_id: Option<String>,
    /// The Principal that caused the event (SPEC 2.6), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<Value>,
}

pub(crate) fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// An event's stored JSON text, byte for byte as it was committed or imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEvent {
    pub seq: u64,
    pub json: String,
}

/// What a caller asks to append; the store fills in `seq`, `id`, `ts` and `run_id`.
#[derive(Debug, Clone, PartialEq)]
pub struct EventDraft {
    pub event: String,
    pub properties: Value,
    pub node_id: Option<String>,
    pub node_label: Option<String>,
    pub stage_id: Option<String>,
    pub parallel_group_id: Option<String>,
    pub parallel_branch_id: Option<String>,
    pub actor: Option<Value>,
}

impl EventDraft {
    /// A draft of kind `kind`; `Value::Null` properties become `{}`.
    pub fn new(kind: &str, properties: Value) -> Self {
        EventDraft {
            event: kind.to_string(),
            properties: if properties.is_null() {
                empty_object()
            } else {
                properties
            },
            node_id: None,
            node_label: None,
            stage_id: None,
            parallel_group_id: None,
            parallel_branch_id: None,
            actor: None,
        }
    }

    pub fn node(mut self, id: &str) -> Self {
        self.node_id = Some(id.to_string());
        self
    }

    pub fn node_label(mut self, label: &str) -> Self {
        self.node_label = Some(label.to_string());
        self
    }

    pub fn stage(mut self, stage_id: &str) -> Self {
        self.stage_id = Some(stage_id.to_string());
        self
    }

    pub fn parallel(mut self, group_id: &str, branch_id: &str) -> Self {
        self.parallel_group_id = Some(group_id.to_string());
        self.parallel_branch_id = Some(branch_id.to_string());
        self
    }

    pub fn actor(mut self, actor: Value) -> Self {
        self.actor = Some(actor);
        self
    }

    /// The committed event this draft becomes at `seq`.
    pub(crate) fn into_event(self, run_id: &str, seq: u64, id: String, ts: String) -> Event {
        Event {
            seq,
            id,
            ts,
            run_id: run_id.to_string(),
            event: self.event,
            properties: self.properties,
            node_id: self.node_id,
            node_label: self.node_label,
            stage_id: self.stage_id,
            parallel_group_id: self.parallel_group_id,
            parallel_branch_id: self.parallel_branch_id,
            actor: self.actor,
        }
    }
}

/// What the run was made from (SPEC 2.3 WorkflowRef plus the source itself).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkflowMeta {
    pub name: Option<String>,
    pub slug: Option<String>,
    pub graph_name: Option<String>,
    pub node_count: i64,
    pub edge_count: i64,
    /// The DOT text.
    pub source: String,
    pub path: Option<String>,
    pub version_id: Option<String>,
}

impl WorkflowMeta {
    /// The name the workflow catalog files the run under: the graph's name, else its entry
    /// file's stem (an anonymous `digraph { }`), else none.
    pub fn catalog_name(&self) -> Option<&str> {
        [&self.name, &self.graph_name, &self.slug]
            .into_iter()
            .filter_map(|n| n.as_deref())
            .find(|n| !n.is_empty())
    }
}

/// A request to create a run; see [`crate::store::RunStore::create_run`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewRun {
    /// Caller-chosen ULID (canonical form), else one is generated.
    pub id: Option<String>,
    pub title: String,
    pub goal: String,
    pub labels: BTreeMap<String, String>,
    pub workflow: WorkflowMeta,
    pub working_dir: Option<String>,
    /// Run inputs; `Null` is stored as `{}`.
    pub inputs: Value,
    pub parent_id: Option<String>,
    /// Extra keys merged into the `run.created` properties (object or `Null`); a key that
    /// collides with one the store writes itself is rejected.
    pub extra: Value,
}

/// Run status (SPEC 3), serialized tagged by `kind`, e.g. `{"kind":"failed","reason":"cancelled"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunStatus {
    Submitted,
    Pending { reason: String },
    Runnable,
    Starting,
    Running,
    Blocked { blocked_reason: String },
    Paused { prior_block: Option<String> },
    Removing,
    Succeeded { reason: String },
    Failed { reason: String },
    Dead,
}

impl RunStatus {
    /// Succeeded, failed or dead.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            RunStatus::Succeeded { .. } | RunStatus::Failed { .. } | RunStatus::Dead
        )
    }

    /// Every non-terminal status (submitted through removing).
    pub fn is_active(&self) -> bool {
        !self.is_terminal()
    }

    /// The `kind` tag, e.g. `"paused"`.
    pub fn name(&self) -> &'static str {
        match self {
            RunStatus::Submitted => "submitted",
            RunStatus::Pending { .. } => "pending",
            RunStatus::Runnable => "runnable",
            RunStatus::Starting => "starting",
            RunStatus::Running => "running",
            RunStatus::Blocked { .. } => "blocked",
            RunStatus::Paused { .. } => "paused",
            RunStatus::Removing => "removing",
            RunStatus::Succeeded { .. } => "succeeded",
            RunStatus::Failed { .. } => "failed",
            RunStatus::Dead => "dead",
        }
    }

    /// The one resume rule (`svc resume` and `POST start {resume:true}`): why a run in this
    /// status cannot continue from its last checkpoint, or `None` when it can. A failed run
    /// can, whatever the failure (cancelled, interrupted by a signal or a server stop, a
    /// stage failure), except one denied approval (it never ran). `orphaned` says that an
    /// active status was left by a process that is gone (the CLI cannot tell otherwise; the
    /// server marks its own interrupted runs failed at startup): such a run can continue.
    /// Succeeded and dead runs cannot (retry makes a new run).
    pub fn resume_refusal(&self, orphaned: bool) -> Option<String> {
        match self {
            RunStatus::Failed { reason } if reason == "approval_denied" => {
                Some("its approval was denied, so it never ran".into())
            }
            RunStatus::Failed { .. } => None,
            RunStatus::Starting
            | RunStatus::Running
            | RunStatus::Blocked { .. }
            | RunStatus::Paused { .. }
                if orphaned =>
            {
                None
            }
            RunStatus::Succeeded { .. } => Some("it already finished (succeeded)".into()),
            RunStatus::Dead => {
                Some("it is dead: it cannot make progress (retry creates a new run)".into())
            }
            other => Some(format!("it is {}, not failed or interrupted", other.name())),
        }
    }

    /// Every `kind` tag, in lifecycle order.
    pub const NAMES: [&'static str; 11] = [
        "submitted",
        "pending",
        "runnable",
        "starting",
        "running",
        "blocked",
        "paused",
        "removing",
        "succeeded",
        "failed",
        "dead",
    ];
}

/// A control request waiting for the engine (`lifecycle.pending_control`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Control {
    Cancel,
    Pause,
    Unpause,
}

/// A run's current projected row: a pure fold of its events (see `store::fold`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    pub id: String,
    pub title: String,
    pub goal: String,
    pub labels: BTreeMap<String, String>,
    pub workflow: WorkflowMeta,
    pub status: RunStatus,
    pub pending_control: Option<Control>,
    pub archived: bool,
    pub archived_at: Option<String>,
    /// RunApproval (SPEC 2.4): `{state, requested_at, decided_at, denial_reason}`.
    pub approval: Option<Value>,
    /// Message of the run's failure (`run.failed` property `error`).
    pub error: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub started_at: Option<String>,
    pub completed_at: Option<String>,
    pub last_event_at: Option<String>,
    pub last_seq: u64,
    pub working_dir: Option<String>,
    pub inputs: Value,
    pub parent_id: Option<String>,
    /// Properties of the latest `checkpoint.completed`.
    pub checkpoint: Option<Value>,
    /// Properties of the oldest pending `interview.started` (the first of `questions`).
    pub current_question: Option<Value>,
    /// Properties of every pending `interview.started`, oldest first (parallel branches can
    /// each have a question open).
    #[serde(default)]
    pub questions: Vec<Value>,
    /// `run.superseded_by` property `new_run_id`.
    #[serde(default)]
    pub superseded_by: Option<String>,
    /// `run.created` properties shown as they are (`created_by`, `models`, `sandbox`,
    /// `retried_from`, when present), so a view never re-reads the created event.
    #[serde(default)]
    pub created_meta: serde_json::Map<String, Value>,
    /// LLM usage summed over every stage attempt that reported one.
    #[serde(default)]
    pub usage: UsageTotals,
    /// The models LLM stage attempts reported using (`{provider, name}`), distinct, in
    /// order of first use.
    #[serde(default)]
    pub models_used: Vec<Value>,
    /// The sandbox's lifecycle, folded from `sandbox.*` events.
    #[serde(default)]
    pub sandbox: SandboxState,
    /// DiffSummary of the latest `workspace.checkpoint` (`{files_changed, additions,
    /// deletions}` against the run's base).
    #[serde(default)]
    pub diff: Option<Value>,
    /// PullRequestLink (SPEC 2.3) of the latest `pull_request.created` or `.linked`, until a
    /// `pull_request.unlinked`.
    #[serde(default)]
    pub pull_request: Option<Value>,
}

/// SPEC 2.5 sandbox kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxKind {
    #[default]
    Planned,
    Initializing,
    Ready,
    Failed,
}

/// Where the run's sandbox is: the kind and, when ready, the instance (provider, image,
/// snapshot, runtime), when failed, the failure (provider, error, causes, duration_ms).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SandboxState {
    pub kind: SandboxKind,
    pub instance: Option<Value>,
    pub failure: Option<Value>,
    /// Set when retention removed the sandbox (`sandbox.cleanup.completed`): `{reason,
    /// removed_at}`. The kind is then `planned` again (nothing runs; a resume makes a new
    /// one) and there is no instance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed: Option<Value>,
}

/// Run-level sums of the `usage` objects on `stage.completed` / `stage.failed` events
/// (the Run's `timing`, `billing` and `size`). The per-stage detail stays in the events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UsageTotals {
    /// Stage attempts that reported LLM usage.
    pub records: u64,
    /// Of those, the attempts whose cost could be priced (cost source not `unpriced`).
    pub priced_records: u64,
    /// Sum of the recorded costs, in micro-USD.
    pub usd_micros: i64,
    pub inference_time_ms: u64,
    pub tool_time_ms: u64,
}

/// Filter and page for [`crate::store::RunStore::query_runs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunQuery {
    /// Leave out archived runs.
    pub exclude_archived: bool,
    /// Only runs whose status `kind` is one of these; empty means any.
    pub statuses: Vec<String>,
    /// Leave out runs whose status `kind` is one of these. A page of "everything but a few"
    /// asks this way: the store then walks runs in id order and stops at the page's end,
    /// where the same filter as a long `statuses` list sorted every matching run (the
    /// board's first page at 100,000 runs).
    pub exclude_statuses: Vec<String>,
    /// Only children of this run.
    pub parent_id: Option<String>,
    /// Only runs an automation created (`run.created` property `automation.id`).
    pub automation_id: Option<String>,
    /// Only runs of this workflow ([`WorkflowMeta::catalog_name`]).
    pub workflow: Option<String>,
    /// Only runs whose id sorts before this one (ids are ULIDs, so: created earlier; the
    /// scheduler's order). Used to count a run's place in the queue.
    pub id_below: Option<String>,
    /// Oldest first (FIFO, e.g. for the scheduler) instead of newest first.
    pub oldest_first: bool,
    pub offset: usize,
    pub limit: usize,
}

impl Default for RunQuery {
    fn default() -> Self {
        RunQuery {
            exclude_archived: false,
            statuses: Vec::new(),
            exclude_statuses: Vec::new(),
            parent_id: None,
            automation_id: None,
            workflow: None,
            id_below: None,
            oldest_first: false,
            offset: 0,
            limit: 100,
        }
    }
}

impl RunRow {
    /// The automation that created the run (`run.created` property `automation.id`).
    pub fn automation_id(&self) -> Option<&str> {
        self.created_meta
            .get("automation")
            .and_then(|a| a.get("id"))
            .and_then(Value::as_str)
    }
}

impl RunQuery {
    /// True when `row` passes the filter (ignores paging).
    pub fn matches(&self, row: &RunRow) -> bool {
        (!self.exclude_archived || !row.archived)
            && (self.statuses.is_empty() || self.statuses.iter().any(|s| s == row.status.name()))
            && !self.exclude_statuses.iter().any(|s| s == row.status.name())
            && (self.parent_id.is_none() || self.parent_id == row.parent_id)
            && self
                .automation_id
                .as_deref()
                .is_none_or(|a| row.automation_id() == Some(a))
            && self
                .workflow
                .as_deref()
                .is_none_or(|w| row.workflow.catalog_name() == Some(w))
            && self.id_below.as_ref().is_none_or(|b| row.id < *b)
    }
}

/// What [`crate::store::RunStore::import_run`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportOutcome {
    /// The run was written.
    Imported,
    /// The store already held exactly these events for the run; nothing was written.
    AlreadyPresent,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_wire_shape() {
        let s = RunStatus::Failed {
            reason: "cancelled".into(),
        };
        assert_eq!(
            serde_json::to_value(&s).ok(),
            Some(json!({"kind":"failed","reason":"cancelled"}))
        );
        let p = RunStatus::Paused { prior_block: None };
        assert_eq!(
            serde_json::to_value(&p).ok(),
            Some(json!({"kind":"paused","prior_block":null}))
        );
        assert_eq!(
            serde_json::to_value(RunStatus::Runnable).ok(),
            Some(json!({"kind":"runnable"}))
        );
        for name in RunStatus::NAMES {
            let v: Result<RunStatus, _> = serde_json::from_value(json!({
                "kind": name, "reason": "r", "blocked_reason": "b", "prior_block": null
            }));
            assert_eq!(v.map(|s| s.name()).ok(), Some(name));
        }
        assert_eq!(
            serde_json::to_value(Control::Unpause).ok(),
            Some(json!("unpause"))
        );
    }

    #[test]
    fn event_omits_absent_optionals() {
        let e = EventDraft::new("stage.started", Value::Null)
            .node("plan")
            .into_event("R", 2, "I".into(), "T".into());
        let text = serde_json::to_string(&e).unwrap_or_default();
        assert_eq!(
            text,
            r#"{"seq":2,"id":"I","ts":"T","run_id":"R","event":"stage.started","properties":{},"node_id":"plan"}"#
        );
    }
}
