//! `GET /api/v1/runs/{id}/stages` and `GET /api/v1/runs/{id}/stages/{node}`: the run's stage
//! visits (exact text sent to the model, response, outcome, command output) from
//! [`crate::stages`].
//!
//! Owns: the HTTP shape of stage records. Must not touch: how events fold into them.

use super::store_error;
use crate::server::error::ApiError;
use crate::server::http::Reply;
use crate::server::router::Ctx;
use crate::server::App;
use serde_json::json;

/// Every stage visit of the run, in the order they started.
pub fn list(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.row(ctx.param("id"))?;
    let events =
        crate::stages::run_events(app.runs.store.as_ref(), &row.id).map_err(store_error)?;
    let visits = crate::stages::collect(&events);
    Ok(Reply::json(200, &json!({ "data": visits })))
}

/// The visits of one node (404 when it never ran). Child-workflow nodes are
/// `<manager>/<node>`; send the `/` as `%2F`.
pub fn node(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.row(ctx.param("id"))?;
    let node = ctx.param("node").replace("%2F", "/").replace("%2f", "/");
    let events =
        crate::stages::run_events(app.runs.store.as_ref(), &row.id).map_err(store_error)?;
    let visits: Vec<_> = crate::stages::collect(&events)
        .into_iter()
        .filter(|v| v.node_id == node)
        .collect();
    if visits.is_empty() {
        return Err(ApiError::not_found(format!(
            "Run {} has no stage `{node}` that ran.",
            row.id
        )));
    }
    Ok(Reply::json(
        200,
        &json!({ "node_id": node, "visits": visits }),
    ))
}
