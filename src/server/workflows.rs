//! The workflow catalog over HTTP (issue 29, opgroups 11): `GET /api/v1/workflows`,
//! `GET /api/v1/workflows/{name}`, `GET /api/v1/workflows/{name}/runs`.
//!
//! A workflow is a name across registered versions: the entry graph's name, else the entry
//! file's stem ([`super::versions::Version::catalog_name`]). The list answers each name's
//! newest version, its version count, its last run and the automations whose target is one
//! of its versions; one workflow answers its versions newest first and one version's source
//! with its diagnostics (the newest, or `?version=`); its runs are the runs filed under the
//! name (`RunQuery::workflow`, an index), newest first, paged like the board.
//!
//! Owns: these routes' shapes. Must not touch: SQL (`store::versions`, the runs table's
//! `workflow` column), the package format (`server::versions`).

use super::error::ApiError;
use super::http::Reply;
use super::router::Ctx;
use super::runs::{page, store_error};
use super::App;
use crate::store::{RunQuery, RunRow, RunStatus, WorkflowEntry};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The statuses a listing shows (a run being removed is already gone for readers).
fn listed_statuses() -> Vec<String> {
    RunStatus::NAMES
        .iter()
        .filter(|s| **s != "removing")
        .map(|s| s.to_string())
        .collect()
}

/// The newest run filed under `name`, if any.
fn last_run(app: &App, name: &str) -> Result<Option<RunRow>, ApiError> {
    // Without a status filter the (workflow, id) index answers in one step; a run being
    // removed is skipped here instead.
    let rows = app
        .runs
        .store
        .query_runs(&RunQuery {
            workflow: Some(name.to_string()),
            limit: 4,
            ..RunQuery::default()
        })
        .map_err(store_error)?;
    Ok(rows.into_iter().find(|r| r.status.name() != "removing"))
}

fn last_run_json(row: Option<RunRow>) -> Value {
    row.map_or(Value::Null, |r| {
        json!({
            "id": r.id,
            "status": r.status.name(),
            "created_at": r.created_at,
            "updated_at": r.updated_at,
        })
    })
}

/// Automation ids by the workflow name their target version belongs to. Automations whose
/// target is a repository file are named at fire time, so they are not counted here.
fn automations_by_workflow(app: &App) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for item in app.automations.list() {
        let Some(version) = item
            .definition
            .get("target")
            .and_then(|t| t.get("workflow_version_id"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        if let Ok(Some(v)) = app.versions.get(version) {
            out.entry(v.catalog_name())
                .or_default()
                .push(item.id.clone());
        }
    }
    out
}

fn entry_json(
    app: &App,
    e: &WorkflowEntry,
    automations: &BTreeMap<String, Vec<String>>,
) -> Result<Value, ApiError> {
    Ok(json!({
        "name": e.name,
        "latest_version_id": e.latest_version_id,
        "latest_version_created_at": e.latest_created_at,
        "version_count": e.version_count,
        "last_run": last_run_json(last_run(app, &e.name)?),
        "automations": automations.get(&e.name).cloned().unwrap_or_default(),
    }))
}

/// `GET /api/v1/workflows`: one entry per workflow name, sorted by name, paged.
pub fn list(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let (limit, offset) = page(ctx)?;
    let all = app.versions.workflows()?;
    let automations = automations_by_workflow(app);
    let data = all
        .iter()
        .skip(offset)
        .take(limit)
        .map(|e| entry_json(app, e, &automations))
        .collect::<Result<Vec<_>, _>>()?;
    let has_more = all.len() > offset.saturating_add(limit);
    Ok(Reply::json(
        200,
        &json!({"data": data, "meta": {"has_more": has_more, "total": all.len()}}),
    ))
}

fn unknown(name: &str) -> ApiError {
    ApiError::not_found(format!(
        "No workflow named `{name}` (GET /api/v1/workflows lists them)."
    ))
    .with_code("unknown_workflow")
}

/// `GET /api/v1/workflows/{name}`: its versions newest first, and one version (the newest,
/// or `?version=`) with its entry source and diagnostics.
pub fn get(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let name = ctx.param("name").to_string();
    let versions = app.versions.versions_named(&name)?;
    let Some(newest) = versions.first() else {
        return Err(unknown(&name));
    };
    let chosen = match ctx.inc.query("version") {
        None => newest.id.clone(),
        Some(id) if versions.iter().any(|v| v.id == id) => id,
        Some(id) => {
            return Err(
                ApiError::not_found(format!("Workflow `{name}` has no version `{id}`."))
                    .with_code("unknown_version"),
            )
        }
    };
    let version = app
        .versions
        .get(&chosen)?
        .ok_or_else(|| ApiError::internal(format!("workflow version {chosen} vanished")))?;
    let deps = version
        .package
        .dependencies
        .iter()
        .filter_map(|d| app.versions.get(d).ok().flatten())
        .collect();
    let files = super::runs::exec::VersionFiles {
        version: std::sync::Arc::clone(&version),
        deps,
    };
    let diagnostics = match crate::workflow::load(version.source(), &files) {
        Ok(l) => serde_json::to_value(&l.diagnostics).unwrap_or(Value::Null),
        Err(e) => json!([{"rule": "parse", "severity": "error", "message": e.message}]),
    };
    let automations = automations_by_workflow(app);
    let data = json!({
        "name": name,
        "latest_version_id": newest.id,
        "version_count": versions.len(),
        "versions": versions
            .iter()
            .map(|v| json!({"id": v.id, "created_at": v.created_at}))
            .collect::<Vec<_>>(),
        "version": {
            "id": version.id,
            "created_at": version.created_at,
            "entrypoint": version.package.entrypoint,
            "files": version.package.files.keys().collect::<Vec<_>>(),
            "dependencies": version.package.dependencies,
            "source": version.source(),
            "diagnostics": diagnostics,
        },
        "last_run": last_run_json(last_run(app, &name)?),
        "automations": automations.get(&name).cloned().unwrap_or_default(),
    });
    Ok(Reply::json(200, &data))
}

/// `GET /api/v1/workflows/{name}/runs`: the runs filed under the name, newest first.
pub fn runs(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let name = ctx.param("name").to_string();
    if app.versions.versions_named(&name)?.is_empty() {
        return Err(unknown(&name));
    }
    let (limit, offset) = page(ctx)?;
    let rows = app
        .runs
        .store
        .query_runs(&RunQuery {
            workflow: Some(name),
            statuses: listed_statuses(),
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
