//! `POST /api/v1/runs/{id}/rewind {to: <node id>}`: a new run that runs node `to` and
//! everything after it again. It starts from the old run's checkpoint taken just before
//! `to`'s latest visit (that checkpoint's context and state, and its workspace commit), with
//! the same workflow version, inputs, goal, labels, model and sandbox; stages before it do
//! not run again. The new run's log opens with `run.rewound {from_run_id, to_node,
//! checkpoint_seq, git_commit_sha}` and that checkpoint (as a full one); the old run gets
//! `run.superseded_by {new_run_id}` and keeps its status and history. Rewinding to the start
//! node is a fresh run of the same inputs.
//!
//! Refused: an active (not finished) run 409; a run whose workspace was removed 409; a node
//! that is not in the workflow, or that no checkpoint leads to, 422.
//!
//! Owns: choosing the checkpoint and what the new run copies. Must not touch: the engine's
//! walk (the new run is resumed from the seeded checkpoint like any other).

use super::{actor_of, check_id, store_error, App};
use crate::base::event_kind;
use crate::server::error::ApiError;
use crate::server::http::Reply;
use crate::server::router::Ctx;
use crate::store::{EventDraft, NewRun, RunRow, RunStore};
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RewindBody {
    to: String,
}

/// Where a rewind starts: the checkpoint event before the node's latest visit.
#[derive(Debug, Clone, PartialEq)]
pub struct RewindPoint {
    pub seq: u64,
    pub commit: Option<String>,
}

pub fn rewind(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let id = ctx.param("id").to_string();
    check_id(&id)?;
    let body: RewindBody = ctx.inc.json()?;
    let old = app.runs.row(&id)?;
    if !old.status.is_terminal() {
        return Err(ApiError::conflict(format!(
            "Run {id} is {}: only a finished run can be rewound (cancel it first).",
            old.status.name()
        ))
        .with_code("run_active"));
    }
    let to = body.to.trim();
    let is_start = node_of(&old, to)?;
    let point = if is_start {
        None
    } else {
        Some(rewind_point(&*app.runs.store, &id, to)?.ok_or_else(|| {
            ApiError::unprocessable(format!(
                "Run {id} has no checkpoint before node `{to}`: the node never ran in it."
            ))
            .with_code("unknown_checkpoint")
        })?)
    };
    let workspace = match &point {
        Some(p) => Some(rewound_workspace(app, &old, p)?),
        None => None,
    };
    let actor = actor_of(ctx);
    let store = &app.runs.store;
    let new = store
        .create_run(copy_of(&old, &actor, to, workspace))
        .map_err(store_error)?;
    let mut drafts = vec![EventDraft::new(
        "run.rewound",
        json!({"from_run_id": old.id, "to_node": to,
               "checkpoint_seq": point.as_ref().map(|p| p.seq),
               "git_commit_sha": point.as_ref().and_then(|p| p.commit.clone())}),
    )];
    if let Some(p) = &point {
        drafts.push(EventDraft::new(
            event_kind::CHECKPOINT_COMPLETED,
            seeded_checkpoint(&**store, &old.id, p)?,
        ));
    }
    store.append_all(&new.id, drafts).map_err(store_error)?;
    let mut superseded =
        EventDraft::new(event_kind::RUN_SUPERSEDED_BY, json!({"new_run_id": new.id}));
    superseded.actor = Some(actor.clone());
    store.append(&old.id, superseded).map_err(store_error)?;
    let row = app.runs.start(&new.id, false, &actor)?;
    Ok(app.runs.run_reply(201, &row))
}

/// Whether `to` is the workflow's start node (`Ok(false)`: another node of it); 422 when it
/// is not a node of the run's workflow.
fn node_of(old: &RunRow, to: &str) -> Result<bool, ApiError> {
    let unknown = || {
        ApiError::unprocessable(format!("Node `{to}` is not in run {}'s workflow.", old.id))
            .with_code("unknown_node")
    };
    if to.is_empty() {
        return Err(ApiError::bad_request("`to` must name a node.").with_code("invalid_body"));
    }
    let graph = crate::dot::parse(&old.workflow.source).map_err(|_| unknown())?;
    let wf = crate::workflow::Workflow::from_graph(graph, &crate::workflow::NoFiles);
    let i = wf.node_index(to).ok_or_else(unknown)?;
    Ok(wf.start == Some(i))
}

/// The last `checkpoint.completed` of the run's own walk whose next node is `to`: the
/// checkpoint taken just before `to`'s latest visit.
pub fn rewind_point(
    store: &dyn RunStore,
    run_id: &str,
    to: &str,
) -> Result<Option<RewindPoint>, ApiError> {
    let mut found = None;
    let mut since = 1;
    loop {
        let page = store.events(run_id, since, 1000).map_err(store_error)?;
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
fn rewound_workspace(app: &App, old: &RunRow, p: &RewindPoint) -> Result<Value, ApiError> {
    let gone = || {
        ApiError::conflict(format!(
            "Run {}'s workspace was removed: there is no commit to rewind to.",
            old.id
        ))
        .with_code("workspace_removed")
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
    let (git, base) =
        crate::sandbox::lifecycle::workspace_git(old, &app.runs.state_dir).ok_or_else(gone)?;
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
) -> Result<Value, ApiError> {
    let unreadable = |why: String| {
        ApiError::unprocessable(format!(
            "Run {run_id}'s checkpoint at event {} cannot be read: {why}",
            p.seq
        ))
        .with_code("unknown_checkpoint")
    };
    let r = crate::engine::checkpoint::restore_at(store, run_id, p.seq).map_err(unreadable)?;
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
        working_dir: None,
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
            "rewound_from": {"run_id": old.id, "to_node": to},
        }),
    }
}
