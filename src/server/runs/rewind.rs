//! `POST /api/v1/runs/{id}/rewind {to: <node id>}`: a new run that runs node `to` and
//! everything after it again, from the old run's checkpoint before `to`'s latest visit
//! (the rule is [`crate::engine::rewind`], shared with `svc rewind`); the new run is queued
//! and started like any other. Refused: an active (not finished) run 409 `run_active`; a run
//! whose workspace was removed 409 `workspace_removed`; a node that is not in the workflow
//! 422 `unknown_node`, or that the run never reached 422 `unknown_checkpoint`.
//!
//! Owns: the route's body, status codes and reply. Must not touch: choosing the checkpoint
//! or what the new run copies (`engine::rewind`).

use super::{actor_of, check_id, store_error, App};
use crate::engine::rewind::RewindError;
use crate::server::error::ApiError;
use crate::server::http::Reply;
use crate::server::router::Ctx;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RewindBody {
    to: String,
}

pub fn rewind(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let id = ctx.param("id").to_string();
    check_id(&id)?;
    let body: RewindBody = ctx.inc.json()?;
    let old = app.runs.row(&id)?;
    let actor = actor_of(ctx);
    let new = crate::engine::rewind::rewind(
        &*app.runs.store,
        &app.runs.state_dir,
        &old,
        &body.to,
        &actor,
    )
    .map_err(api_error)?;
    let row = app.runs.start(&new.run.id, false, &actor)?;
    Ok(app.runs.run_reply(201, &row))
}

fn api_error(e: RewindError) -> ApiError {
    let code = e.code();
    match e {
        RewindError::Store(e) => store_error(e),
        RewindError::Active { .. } | RewindError::WorkspaceRemoved { .. } => {
            ApiError::conflict(e.to_string()).with_code(code)
        }
        RewindError::NoNode => ApiError::bad_request(e.to_string()).with_code(code),
        RewindError::UnknownNode { .. }
        | RewindError::NeverReached { .. }
        | RewindError::Unreadable { .. } => ApiError::unprocessable(e.to_string()).with_code(code),
    }
}
