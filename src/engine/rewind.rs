//! Rewinding a finished run to a node: the one rule the HTTP route
//! (`POST /api/v1/runs/{id}/rewind`) and the CLI (`svc rewind RUN --to NODE`) share. The new
//! run runs node `to` and everything after it again. It starts from the old run's checkpoint
//! taken just before `to`'s latest visit (that checkpoint's context and state, and its
//! workspace commit), with the same workflow version, inputs, goal, labels, model, sandbox,
//! pull request options and notifications; stages before it do not run again. The new run's log opens with `run.rewound
//! {from_run_id, to_node, checkpoint_seq, git_commit_sha}` and that checkpoint (as a full
//! one); the old run gets `run.superseded_by {new_run_id}` and keeps its status and history.
//! Rewinding to the start node is a fresh run of the same inputs (no checkpoint is seeded).
//!
//! Refused ([`RewindError`]): an active (not finished) run; a run whose workspace was
//! removed; an empty node; a node that is not in the workflow, or that no checkpoint leads
//! to (the run never reached it).
//!
//! Owns: choosing the checkpoint, what the new run copies, the events of both runs. Must not
//! touch: starting the new run (the caller queues it, or resumes it in-process) or the
//! engine's walk (the new run resumes from the seeded checkpoint like any other).

use crate::base::event_kind;
use crate::store::{EventDraft, NewRun, RunRow, RunStore, StoreError};
use serde_json::{json, Value};
use std::path::Path;

/// Where a rewind starts: the checkpoint event before the node's latest visit.
#[derive(Debug, Clone, PartialEq)]
pub struct RewindPoint {
    pub seq: u64,
    pub commit: Option<String>,
}

/// A rewind done: the new run (created, not started) and the checkpoint it starts from
/// (`None`: rewound to the start node, a fresh run).
#[derive(Debug, Clone)]
pub struct Rewound {
    pub run: RunRow,
    pub point: Option<RewindPoint>,
}

/// Why a run cannot be rewound to a node.
#[derive(Debug, thiserror::Error)]
pub enum RewindError {
    #[error("Run {run} is {status}: only a finished run can be rewound (cancel it first).")]
    Active { run: String, status: String },
    #[error("`to` must name a node.")]
    NoNode,
    #[error("Node `{node}` is not in run {run}'s workflow.")]
    UnknownNode { run: String, node: String },
    #[error("Run {run} has no checkpoint before node `{node}`: the node never ran in it.")]
    NeverReached { run: String, node: String },
    #[error("Run {run}'s checkpoint at event {seq} cannot be read: {why}")]
    Unreadable { run: String, seq: u64, why: String },
    #[error("Run {run}'s workspace was removed: there is no commit to rewind to.")]
    WorkspaceRemoved { run: String },
    #[error("{0}")]
    Store(#[from] StoreError),
}

impl RewindError {
    /// The machine-readable code of the error (SPEC 2.7 `code`).
    pub fn code(&self) -> &'static str {
        match self {
            RewindError::Active { .. } => "run_active",
            RewindError::NoNode => "invalid_body",
            RewindError::UnknownNode { .. } => "unknown_node",
            RewindError::NeverReached { .. } | RewindError::Unreadable { .. } => {
                "unknown_checkpoint"
            }
            RewindError::WorkspaceRemoved { .. } => "workspace_removed",
            RewindError::Store(_) => "store_error",
        }
    }
}

/// Rewinds the finished run `old` to node `to` for `actor`: creates the new run (not
/// started), seeds its log, and marks `old` superseded.
pub fn rewind(
    store: &dyn RunStore,
    state_dir: &Path,
    old: &RunRow,
    to: &str,
    actor: &Value,
) -> Result<Rewound, RewindError> {
    if !old.status.is_terminal() {
        return Err(RewindError::Active {
            run: old.id.clone(),
            status: old.status.name().to_string(),
        });
    }
    let to = to.trim();
    let point = if is_start_node(old, to)? {
        None
    } else {
        Some(
            rewind_point(store, &old.id, to)?.ok_or_else(|| RewindError::NeverReached {
                run: old.id.clone(),
                node: to.to_string(),
            })?,
        )
    };
    let workspace = match &point {
        Some(p) => Some(rewound_workspace(old, state_dir, p)?),
        None => None,
    };
    let seeded = match &point {
        Some(p) => Some(seeded_checkpoint(store, &old.id, p)?),
        None => None,
    };
    let new = store.create_run(copy_of(old, actor, to, workspace))?;
    let mut drafts = vec![EventDraft::new(
        "run.rewound",
        json!({"from_run_id": old.id, "to_node": to,
               "checkpoint_seq": point.as_ref().map(|p| p.seq),
               "git_commit_sha": point.as_ref().and_then(|p| p.commit.clone())}),
    )];
    if let Some(checkpoint) = seeded {
        drafts.push(EventDraft::new(
            event_kind::CHECKPOINT_COMPLETED,
            checkpoint,
        ));
    }
    store.append_all(&new.id, drafts)?;
    let mut superseded =
        EventDraft::new(event_kind::RUN_SUPERSEDED_BY, json!({"new_run_id": new.id}));
    superseded.actor = Some(actor.clone());
    store.append(&old.id, superseded)?;
    Ok(Rewound {
        run: store.get_run(&new.id)?.unwrap_or(new),
        point,
    })
}

/// Whether `to` is the workflow's start node (`Ok(false)`: another node of it); an error
/// when it is empty or not a node of the run's workflow.
fn is_start_node(old: &RunRow, to: &str) -> Result<bool, RewindError> {
    let unknown = || RewindError::UnknownNode {
        run: old.id.clone(),
        node: to.to_string(),
    };
    if to.is_empty() {
        return Err(RewindError::NoNode);
    }
    let loaded = crate::workflow::load(&old.workflow.source, &crate::workflow::NoFiles)
        .map_err(|_| unknown())?;
    let wf = loaded.workflow;
    let i = wf.node_index(to).ok_or_else(unknown)?;
    Ok(wf.start == Some(i))
}

/// The last `checkpoint.completed` of the run's own walk whose next node is `to`: the
/// checkpoint taken just before `to`'s latest visit.
pub fn rewind_point(
    store: &dyn RunStore,
    run_id: &str,
    to: &str,
) -> Result<Option<RewindPoint>, StoreError> {
    let mut found = None;
    let mut since = 1;
    loop {
        let page = store.events(run_id, since, 1000)?;
        let n = page.len();
        for e in page {
            since = e.seq + 1;
            let p = &e.properties;
            if e.event == event_kind::CHECKPOINT_COMPLETED
                && p.get("next_node_id").and_then(Value::as_str) == Some(to)
            {
                found = Some(RewindPoint {
                    seq: e.seq,
                    commit: p
                        .get("git_commit_sha")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                });
            }
        }
        if n < 1000 {
            return Ok(found);
        }
    }
}

/// The new run's workspace: the old one's history at the checkpoint's commit.
fn rewound_workspace(
    old: &RunRow,
    state_dir: &Path,
    p: &RewindPoint,
) -> Result<Value, RewindError> {
    let gone = || RewindError::WorkspaceRemoved {
        run: old.id.clone(),
    };
    if old.sandbox.removed.is_some() {
        return Err(gone());
    }
    let Some(commit) = &p.commit else {
        // No workspace commit recorded (nothing was versioned): start from the base.
        return Ok(old
            .created_meta
            .get("workspace")
            .cloned()
            .unwrap_or(Value::Null));
    };
    let (git, base) = crate::sandbox::lifecycle::workspace_git(old, state_dir).ok_or_else(gone)?;
    let from = git.git_dir.clone().unwrap_or_else(|| git.work_tree.clone());
    Ok(
        json!({"kind": "rewind", "from": from.display().to_string(), "commit": commit,
              "base": base, "from_run_id": old.id}),
    )
}

/// The checkpoint at `p`, as one full checkpoint for the new run (with its commit).
fn seeded_checkpoint(
    store: &dyn RunStore,
    run_id: &str,
    p: &RewindPoint,
) -> Result<Value, RewindError> {
    let unreadable = |why: String| RewindError::Unreadable {
        run: run_id.to_string(),
        seq: p.seq,
        why,
    };
    let r = super::checkpoint::restore_at(store, run_id, p.seq).map_err(unreadable)?;
    let (mut payload, _) = r
        .state
        .checkpoint_payload(&r.current_node, r.next_node_id.as_deref(), r.stage_index)
        .map_err(|e| unreadable(e.to_string()))?;
    if let Some(c) = &p.commit {
        payload["git_commit_sha"] = json!(c);
    }
    payload["rewound_from"] = json!({"run_id": run_id, "checkpoint_seq": p.seq});
    Ok(payload)
}

/// The new run: the old one's workflow, inputs and settings; a new creator and history.
fn copy_of(old: &RunRow, actor: &Value, to: &str, workspace: Option<Value>) -> NewRun {
    let meta = |k: &str| old.created_meta.get(k).cloned().unwrap_or(Value::Null);
    let workspace = workspace.unwrap_or_else(|| meta("workspace"));
    NewRun {
        id: None,
        title: old.title.clone(),
        goal: old.goal.clone(),
        labels: old.labels.clone(),
        workflow: old.workflow.clone(),
        // A run in a directory (no workspace of its own, `svc run` without `--repo`) goes on
        // in that directory; a workspace run gets its own from `workspace`.
        working_dir: old
            .created_meta
            .get("workspace")
            .is_none_or(Value::is_null)
            .then(|| old.working_dir.clone())
            .flatten(),
        inputs: old.inputs.clone(),
        parent_id: old.parent_id.clone(),
        extra: json!({
            "created_by": actor,
            "origin": {"kind": "api"},
            "models": meta("models"),
            "sandbox": meta("sandbox"),
            "repository": meta("repository"),
            "workspace": workspace,
            "mcp_servers": meta("mcp_servers"),
            "mcp_definitions": meta("mcp_definitions"),
            // The environment's variables (unexpanded references), as a retry copies them.
            "sandbox_env": meta("sandbox_env"),
            "rewound_from": {"run_id": old.id, "to_node": to},
            // As a retry copies them: the same pull request and chat notification choices.
            "pull_request_options": meta("pull_request_options"),
            "notifications": meta("notifications"),
        }),
    }
}
