//! Lifecycle controls: start, cancel, pause, unpause, archive, unarchive, approve, deny and
//! delete, each read-plan-append under the gate, then a signal to the live engine.
//!
//! Owns: applying [`super::lifecycle`]'s plans. Must not touch: the rules themselves (they
//! are `lifecycle`'s, pure).

use super::lifecycle::{self, Plan, Signal};
use super::{actor_of, bool_query, check_id, store_error, Runs};
use crate::base::event_kind;
use crate::server::error::ApiError;
use crate::server::http::Reply;
use crate::server::router::Ctx;
use crate::server::App;
use crate::store::{EventDraft, RunRow, RunStatus};
use serde::Deserialize;
use serde_json::{json, Map, Value};

impl Runs {
    /// Starts (queues) a created run, or resumes a stopped one (`resume`), as `actor`: the
    /// same rules and events as `POST /runs/{id}/start`.
    pub fn start(&self, id: &str, resume: bool, actor: &Value) -> Result<RunRow, ApiError> {
        self.control(id, actor, |r, a| lifecycle::start(r, resume, a))
    }

    /// Reads the row, plans a control and appends its events, all under the gate; then
    /// signals the live engine and wakes the scheduler.
    pub(super) fn control(
        &self,
        id: &str,
        actor: &Value,
        f: impl Fn(&RunRow, &Value) -> Result<Plan, ApiError>,
    ) -> Result<RunRow, ApiError> {
        check_id(id)?;
        let (plan, row) = {
            // The gate keeps the scheduler's promotions and the engine's appends out; the
            // store reads the row, lets the transition decide, and appends in one step.
            let _g = self.gate.lock();
            let mut decided: Option<Result<Plan, ApiError>> = None;
            let (row, _) = self
                .store
                .append_decided(id, &mut |row| {
                    let plan = f(row, actor);
                    let events = plan.as_ref().map(|p| p.events.clone()).unwrap_or_default();
                    decided = Some(plan);
                    events
                })
                .map_err(store_error)?;
            let plan =
                decided.unwrap_or_else(|| Err(ApiError::internal("no decision was made")))?;
            (plan, row)
        };
        if let (Some(sig), Some(h)) = (plan.signal, self.handle(id)) {
            match sig {
                Signal::Cancel => h.cancel.cancel("cancelled by request"),
                Signal::Pause => h.cancel.pause(),
                Signal::Unpause => h.cancel.unpause(),
            }
        }
        if plan.wake {
            self.wake_if_slot_free();
        }
        Ok(row)
    }
}

pub fn delete(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let id = ctx.param("id").to_string();
    check_id(&id)?;
    let force = bool_query(ctx, "force")?;
    let runs = &app.runs;
    {
        let _g = runs.gate.lock();
        match runs.store.get_run(&id).map_err(store_error)? {
            Some(row) if !row.status.is_terminal() && !force => {
                return Err(ApiError::conflict(format!(
                    "Run {id} is {}; cancel it first or delete with ?force=true.",
                    row.status.name()
                )))
            }
            Some(_) => {}
            None => {
                if runs.store.tombstone(&id).map_err(store_error)?.is_some() {
                    return Ok(Reply::empty(204));
                }
                return Err(ApiError::not_found(format!("No run with id {id}.")));
            }
        }
        runs.store.delete_run(&id).map_err(store_error)?;
    }
    if let Some(h) = runs.handle(&id) {
        h.cancel.cancel("run deleted");
    }
    runs.wake();
    runs.remove_sandbox_when_idle(&id);
    Ok(Reply::empty(204))
}

impl super::Runs {
    /// Deletes a finished run through the tombstone path (as `DELETE /runs/{id}` does) and
    /// removes its sandbox; false (nothing done) when the run is gone or no longer finished.
    /// Prune's only way to remove a run.
    pub fn delete_finished(&self, id: &str) -> Result<bool, ApiError> {
        {
            let _g = self.gate.lock();
            match self.store.get_run(id).map_err(store_error)? {
                Some(row) if row.status.is_terminal() => {}
                _ => return Ok(false),
            }
            self.store.delete_run(id).map_err(store_error)?;
        }
        self.wake();
        self.remove_sandbox_when_idle(id);
        Ok(true)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StartBody {
    #[serde(default)]
    resume: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DenyBody {
    #[serde(default)]
    reason: Option<String>,
}

/// A bodiless control route: apply one lifecycle transition to the run named in the path.
fn apply_control(
    app: &App,
    ctx: &mut Ctx<'_, '_>,
    transition: fn(&RunRow, &Value) -> Result<Plan, ApiError>,
) -> Result<Reply, ApiError> {
    let actor = actor_of(ctx);
    let row = app.runs.control(ctx.param("id"), &actor, transition)?;
    control_reply(app, row)
}

fn control_reply(app: &App, row: RunRow) -> Result<Reply, ApiError> {
    Ok(app.runs.run_reply(200, &row))
}

pub fn start(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let body: StartBody = ctx.inc.json_or_default()?;
    let actor = actor_of(ctx);
    let row = app.runs.start(ctx.param("id"), body.resume, &actor)?;
    control_reply(app, row)
}

pub fn cancel(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    apply_control(app, ctx, lifecycle::cancel)
}

pub fn pause(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    apply_control(app, ctx, lifecycle::pause)
}

pub fn unpause(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    apply_control(app, ctx, lifecycle::unpause)
}

pub fn archive(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    apply_control(app, ctx, lifecycle::archive)
}

pub fn unarchive(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    apply_control(app, ctx, lifecycle::unarchive)
}

pub fn approve(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    // No fields are defined, but a body must still be an object.
    let _: Map<String, Value> = ctx.inc.json_or_default()?;
    let actor = actor_of(ctx);
    let id = ctx.param("id").to_string();
    check_id(&id)?;
    if let Some(parent) = ended_parent(app, &id)? {
        // Nobody waits for this child any more: it can never run.
        let why = format!("its parent run {parent} ended while it waited for approval");
        let dead = EventDraft::new(
            event_kind::RUN_DEAD,
            json!({"reason": "parent_ended", "error": why}),
        )
        .actor(actor.clone());
        app.runs.control(&id, &actor, |r, _| match &r.status {
            RunStatus::Pending { .. } => Ok(lifecycle::Plan {
                events: vec![dead.clone()],
                ..lifecycle::Plan::default()
            }),
            _ => Ok(lifecycle::Plan::default()),
        })?;
        return Err(ApiError::conflict(format!(
            "Run {id} cannot be approved: {why}."
        )));
    }
    let row = app.runs.control(&id, &actor, lifecycle::approve)?;
    control_reply(app, row)
}

/// A manager's child (created by a worker) whose parent run has ended: its engine no longer
/// waits for the approval. Returns the parent's id.
fn ended_parent(app: &App, id: &str) -> Result<Option<String>, ApiError> {
    let row = app.runs.row(id)?;
    let by_worker = row
        .created_meta
        .get("created_by")
        .and_then(|c| c.get("kind"))
        .and_then(Value::as_str)
        == Some("worker");
    let Some(parent) = row.parent_id.filter(|_| by_worker) else {
        return Ok(None);
    };
    let ended = match app.runs.store.get_run(&parent).map_err(store_error)? {
        Some(p) => p.status.is_terminal(),
        None => true,
    };
    Ok(ended.then_some(parent))
}

pub fn deny(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let body: DenyBody = ctx.inc.json_or_default()?;
    let actor = actor_of(ctx);
    let row = app.runs.control(ctx.param("id"), &actor, |r, a| {
        lifecycle::deny(r, body.reason.as_deref(), a)
    })?;
    control_reply(app, row)
}
