//! The automations API beside the catalog routes (which are [`super::catalog`]'s): firing the
//! `api` trigger, hook deliveries, an automation's fires and runs; and [`RunLauncher`], how
//! a fire makes its run through the runs service.
//!
//! | route | success | errors |
//! |---|---|---|
//! | `POST /api/v1/automations/{id}/runs` | 201 Run (`automation` set); 202 the fire when queued (overlap `queue_one`) | 404; 409 `automation_api_trigger_disabled`; 409 `automation_overlap` (skipped); 422 `automation_fire_failed` (the fire, failed, is on record) |
//! | `GET /api/v1/automations/{id}/runs` | 200 a page of runs, newest first | 400, 404 |
//! | `GET /api/v1/automations/{id}/fires` | 200 a page of fires, newest first; `meta.schedules` the next due times | 400, 404 |
//! | `POST /api/v1/automations/{id}/hooks/{trigger_id}` (no bearer token) | 202 the fire; 200 a replay (`replayed: true`, nothing started) or an ignored code-host event | 400, 401, 404, 409 disabled |
//!
//! Owns: the HTTP side of `crate::automations` and the launcher. Must not touch: when things
//! fire (the dispatcher decides) or SQL.

use super::catalog::{self, Served};
use super::error::ApiError;
use super::http::Reply;
use super::router::Ctx;
use super::runs::{page, store_error, Runs};
use super::runs::{RepositoryReq, RunSpec, SandboxReq};
use super::versions::{Package, Version, VersionStore};
use super::App;
use crate::automations::fires::{fire_json, ApiFireError, Delivered, DeliveryHeaders, HookError};
use crate::automations::{Automations, LaunchRequest, Launcher, Target};
use crate::catalog::{Catalog, CatalogError};
use crate::store::{FireRow, RunQuery, RunStatus};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

impl Served for Automations {
    fn catalog(app: &App) -> &Catalog<Automations> {
        &app.automations
    }
}

/// Makes a fire's run: resolves the automation's target to a workflow version (a
/// registered one, or the workflow file read from the repository now), creates the run
/// with the fire's id and starts it.
pub struct RunLauncher {
    pub runs: Arc<Runs>,
    pub versions: Arc<VersionStore>,
    /// Where repositories are fetched to read a workflow (emptied after each read).
    pub scratch: PathBuf,
}

impl Launcher for RunLauncher {
    fn launch(&self, req: &LaunchRequest<'_>) -> Result<(), String> {
        let actor = req.created_by;
        if let Ok(Some(row)) = self.runs.store.get_run(req.run_id) {
            // Made before a crash: start it unless that happened too.
            if row.status == RunStatus::Submitted {
                self.runs
                    .start(req.run_id, false, actor)
                    .map_err(|e| format!("cannot start run {}: {}", req.run_id, e.detail))?;
            }
            return Ok(());
        }
        if matches!(self.runs.store.tombstone(req.run_id), Ok(Some(_))) {
            return Ok(());
        }
        let a = req.automation;
        let (version, repository) = match &a.target {
            Target::Version { id } => (
                self.versions
                    .get(id)
                    .map_err(|e| e.detail)?
                    .ok_or_else(|| format!("workflow missing: version {id} is not registered"))?,
                None,
            ),
            Target::Repository {
                origin_url,
                reference,
                workflow,
            } => (
                self.read_from_repository(origin_url, reference, workflow)?,
                Some(RepositoryReq {
                    origin_url: origin_url.clone(),
                    branch: Some(reference.clone()),
                }),
            ),
        };
        let mut inputs = a.inputs.clone();
        inputs.extend(req.inputs.clone());
        let sandbox = a.sandbox.as_ref().and_then(|s| {
            Some(SandboxReq {
                provider: s.get("provider")?.as_str()?.to_string(),
                image: s.get("image").and_then(Value::as_str).map(str::to_string),
                snapshot: s
                    .get("snapshot")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                network: s.get("network").and_then(Value::as_bool),
            })
        });
        let spec = RunSpec {
            goal: a.goal.clone(),
            title: a.title.clone(),
            labels: a.labels.clone(),
            inputs,
            model: None,
            sandbox,
            repository,
            source_directory: None,
            in_place: false,
            pull_request_options: None,
            notifications: None,
            created_by: actor.clone(),
            origin: json!({"kind": "api"}),
            id: Some(req.run_id.to_string()),
            automation: Some(json!({"id": a.id, "name": a.name, "trigger_id": req.trigger_id})),
            // The `[run.agent]` servers, as for any run that names none.
            mcp_servers: None,
            // `[run] max_usd`, as for any run that names no budget.
            budget_usd: None,
            // The automation's environment, else `[run] environment` as for any run that
            // names none (unless `sandbox` is set).
            environment: a.environment.clone(),
            // `[run] artifacts`, as for any run that names none.
            artifacts: None,
        };
        if let Err(e) = self.runs.create(&version, spec) {
            // Another launch of the same fire got there first: fine, start it below.
            if !matches!(self.runs.store.get_run(req.run_id), Ok(Some(_))) {
                return Err(match &a.environment {
                    Some(_) if e.detail.contains("environment") => {
                        format!("environment refused: {}", e.detail)
                    }
                    _ => format!("invalid workflow: {}", e.detail),
                });
            }
        }
        self.runs
            .start(req.run_id, false, actor)
            .map(|_| ())
            .map_err(|e| format!("cannot start run {}: {}", req.run_id, e.detail))
    }

    fn is_active(&self, run_id: &str) -> bool {
        matches!(self.runs.store.get_run(run_id), Ok(Some(r)) if !r.status.is_terminal())
    }
}

impl RunLauncher {
    /// Fetches `reference` of `origin` (depth 1) and registers the workflow at `path` with
    /// the files it reads (`@file` references, child workflows) as a version.
    fn read_from_repository(
        &self,
        origin: &str,
        reference: &str,
        path: &str,
    ) -> Result<Arc<Version>, String> {
        use crate::workspace::git;
        crate::base::perms::private_dir(&self.scratch).map_err(|e| format!("clone failed: {e}"))?;
        let dir = Scratch(self.scratch.join(crate::base::clock::new_ulid()));
        let g = crate::workspace::Git::new(&dir.0);
        let mut init = git::bare_command();
        init.arg("init").arg("-q").arg(&dir.0);
        git::run(init, "init").map_err(|e| format!("clone failed: {e}"))?;
        g.run(&["fetch", "-q", "--depth", "1", "--", origin, reference])
            .map_err(|e| format!("clone failed: {} at {reference}: {}", origin, e.detail))?;
        let read =
            |p: &str| -> Option<String> { g.text(&["show", &format!("FETCH_HEAD:{p}")]).ok() };
        let entry = read(path)
            .ok_or_else(|| format!("workflow missing: {path} is not in {origin} at {reference}"))?;
        let files = RepoFiles {
            from: path.to_string(),
            read: &read,
            seen: Default::default(),
        };
        // Loading once tells which files the workflow reads; the package holds those.
        let _ = crate::workflow::load(&entry, &files);
        let mut package_files: BTreeMap<String, String> = files.seen.into_inner();
        package_files.insert(path.to_string(), entry);
        let package = Package {
            entrypoint: path.to_string(),
            files: package_files,
            dependencies: Vec::new(),
        };
        self.versions
            .register(package)
            .map(|(v, _)| v)
            .map_err(|e| format!("invalid workflow: {}", e.detail))
    }
}

/// A fetch directory, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A repository's files at the fetched commit, as the workflow loader reads them.
struct RepoFiles<'a> {
    from: String,
    read: &'a dyn Fn(&str) -> Option<String>,
    seen: std::cell::RefCell<BTreeMap<String, String>>,
}

impl crate::workflow::FileSource for RepoFiles<'_> {
    fn read(&self, rel: &str) -> Option<String> {
        let p = super::versions::resolve(&self.from, rel)?;
        let text = (self.read)(&p)?;
        self.seen.borrow_mut().insert(p, text.clone());
        Some(text)
    }
    fn describe(&self, rel: &str) -> String {
        super::versions::resolve(&self.from, rel).unwrap_or_else(|| rel.to_string())
    }
}

fn automation_exists(app: &App, id: &str) -> Result<(), ApiError> {
    app.automations.get(id).map(|_| ()).map_err(catalog::error)
}

/// `POST /api/v1/automations/{id}/runs`.
pub fn fire(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let id = ctx.param("id").to_string();
    automation_exists(app, &id)?;
    let principal = super::runs::actor_of(ctx);
    let fire = app
        .dispatcher
        .fire_api(&id, &principal)
        .map_err(|e| match e {
            ApiFireError::NotFound(_) => ApiError::not_found(e.to_string()),
            ApiFireError::Disabled(_) => {
                ApiError::conflict(e.to_string()).with_code("automation_api_trigger_disabled")
            }
            ApiFireError::Store(e) => ApiError::internal(e.to_string()),
        })?;
    match fire.outcome.as_str() {
        "created" => {
            let run_id = fire.run_id.clone().unwrap_or_default();
            let row = app.runs.get_row(&run_id)?;
            Ok(app.runs.run_reply(201, &row))
        }
        "queued" => Ok(Reply::json(202, &fire_json(&fire))),
        "skipped" => Err(ApiError::conflict(format!(
            "The fire was skipped ({} policy): {}",
            fire.policy.as_deref().unwrap_or(""),
            fire.detail.as_deref().unwrap_or("")
        ))
        .with_code("automation_overlap")
        .with_extra(json!({"fire": fire_json(&fire)}))),
        _ => Err(ApiError::new(
            422,
            format!(
                "The automation's run could not be made: {}",
                fire.error.as_deref().unwrap_or("unknown error")
            ),
        )
        .with_code("automation_fire_failed")
        .with_extra(json!({"fire": fire_json(&fire)}))),
    }
}

/// `GET /api/v1/automations/{id}/runs`: the runs it made, newest first.
pub fn runs(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let id = ctx.param("id").to_string();
    automation_exists(app, &id)?;
    let (limit, offset) = page(ctx)?;
    let rows = app
        .runs
        .store
        .query_runs(&RunQuery {
            automation_id: Some(id),
            statuses: RunStatus::NAMES
                .iter()
                .filter(|s| **s != "removing")
                .map(|s| s.to_string())
                .collect(),
            offset,
            limit: limit + 1,
            ..RunQuery::default()
        })
        .map_err(store_error)?;
    let has_more = rows.len() > limit;
    let data: Vec<Value> = rows
        .iter()
        .take(limit)
        .map(|r| app.runs.run_json(r))
        .collect();
    Ok(Reply::json(
        200,
        &json!({"data": data, "meta": {"has_more": has_more}}),
    ))
}

/// `GET /api/v1/automations/{id}/fires`: its fires, newest first, and its schedules.
pub fn fires(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let id = ctx.param("id").to_string();
    automation_exists(app, &id)?;
    let (limit, offset) = page(ctx)?;
    let rows: Vec<FireRow> = app
        .dispatcher
        .fires_of(&id, offset, limit + 1)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let has_more = rows.len() > limit;
    let data: Vec<Value> = rows.iter().take(limit).map(fire_json).collect();
    let schedules: Vec<Value> = app
        .dispatcher
        .schedules_of(&id)
        .into_iter()
        .map(|s| {
            json!({
                "trigger_id": s.trigger_id,
                "next_due_at": (s.next_due_ms < i64::MAX).then(|| crate::base::clock::format_millis(s.next_due_ms)),
                "last_due_at": s.last_due_ms.map(crate::base::clock::format_millis),
                "last_fired_at": s.last_fired_at,
            })
        })
        .collect();
    Ok(Reply::json(
        200,
        &json!({"data": data, "meta": {"has_more": has_more, "schedules": schedules}}),
    ))
}

/// `POST /api/v1/automations/{id}/hooks/{trigger_id}`: no bearer token; the signature is the
/// credential.
pub fn hook(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let id = ctx.param("id").to_string();
    let trigger = ctx.param("trigger_id").to_string();
    let header = |a: &str, b: &str| {
        ctx.inc
            .header(a)
            .or_else(|| ctx.inc.header(b))
            .map(str::to_string)
    };
    let headers = DeliveryHeaders {
        signature: header("x-svc-signature-256", "x-hub-signature-256"),
        delivery_id: header("x-svc-delivery", "x-github-delivery"),
        event: header("x-github-event", "x-svc-event"),
    };
    if !crate::catalog::is_slug(&id) {
        return Err(catalog::error(CatalogError::BadId {
            noun: "automation",
            id,
        }));
    }
    let body = ctx.inc.body()?.to_vec();
    let delivered = app
        .dispatcher
        .deliver(&id, &trigger, &headers, &body)
        .map_err(|e| match e {
            HookError::NotFound(m) => ApiError::not_found(m),
            HookError::Unauthorized(m) => ApiError::unauthorized(m).with_code("invalid_signature"),
            HookError::Disabled(m) => {
                ApiError::conflict(m).with_code("automation_trigger_disabled")
            }
            HookError::BadRequest(m) => ApiError::bad_request(m),
            HookError::Store(m) => ApiError::internal(m),
        })?;
    Ok(match delivered {
        Delivered::Fired(f) => Reply::json(202, &json!({"replayed": false, "fire": fire_json(&f)})),
        Delivered::Replayed(f) => {
            Reply::json(200, &json!({"replayed": true, "fire": fire_json(&f)}))
        }
        Delivered::Ignored(why) => Reply::json(200, &json!({"ignored": why, "fire": null})),
    })
}
