//! `POST /api/v1/runs/{id}/retry`: a new run from a failed or dead run's workflow version
//! and inputs (goal, title, labels, model and sandbox too), with `retried_from` set, started
//! at once.
//!
//! Owns: what a retry copies and when it is allowed. Must not touch: the old run.

use super::{actor_of, check_id, store_error, App};
use crate::server::error::ApiError;
use crate::server::http::Reply;
use crate::server::router::Ctx;
use crate::store::{NewRun, RunRow, RunStatus};
use serde_json::{json, Value};

pub fn retry(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let id = ctx.param("id").to_string();
    check_id(&id)?;
    let old = app.runs.row(&id)?;
    if !matches!(old.status, RunStatus::Failed { .. } | RunStatus::Dead) {
        return Err(ApiError::conflict(format!(
            "Run {id} cannot be retried: it is {}; only failed and dead runs can.",
            old.status.name()
        )));
    }
    if let Some(v) = &old.workflow.version_id {
        if app.versions.get(v)?.is_none() {
            return Err(ApiError::conflict(format!(
                "Run {id} cannot be retried: its workflow version {v} no longer exists."
            )));
        }
    }
    let actor = actor_of(ctx);
    let new = app
        .runs
        .store
        .create_run(copy_of(&old, &actor))
        .map_err(store_error)?;
    let row = app.runs.start(&new.id, false, &actor)?;
    Ok(app.runs.run_reply(201, &row))
}

/// The new run: the old one's workflow, inputs and settings; a new creator and history.
fn copy_of(old: &RunRow, actor: &Value) -> NewRun {
    let meta = |k: &str| old.created_meta.get(k).cloned().unwrap_or(Value::Null);
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
            "mcp_servers": meta("mcp_servers"),
            "mcp_definitions": meta("mcp_definitions"),
            "sandbox_env": meta("sandbox_env"),
            "retried_from": old.id,
            "pull_request_options": meta("pull_request_options"),
            "notifications": meta("notifications"),
        }),
    }
}
