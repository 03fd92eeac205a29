//! `GET /api/v1/sandboxes` and `GET /api/v1/sandboxes/{id}`: the live sandboxes of every
//! configured provider, with their run's state. A provider that cannot answer (the
//! container provider without a working bubblewrap) is named in `meta.failures` while the
//! others still list; `hosted` is not configured, so it is not asked.
//!
//! Owns: the inventory item's wire shape. Must not touch: starting or removing sandboxes
//! (`sandbox::lifecycle`).

use super::error::ApiError;
use super::http::Reply;
use super::router::Ctx;
use super::App;
use crate::sandbox::inventory::Record;
use crate::sandbox::lifecycle::inventory;
use crate::sandbox::ProviderKind;
use serde_json::{json, Value};
use std::process::{Command, Stdio};

/// Providers this server has: the two that need nothing configured.
const CONFIGURED: [ProviderKind; 2] = [ProviderKind::Local, ProviderKind::Container];

/// The records one provider answers for, or why it cannot answer.
fn provider_list(app: &App, provider: ProviderKind) -> Result<Vec<Record>, String> {
    if provider == ProviderKind::Container {
        let bwrap = app
            .settings
            .get()
            .run
            .sandbox
            .as_ref()
            .and_then(|s| s.bwrap.clone())
            .unwrap_or_else(|| "bwrap".into());
        let works = Command::new(&bwrap)
            .arg("--version")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !works {
            return Err(format!("bubblewrap (`{bwrap}`) cannot be run on this host"));
        }
    }
    inventory(&app.state_dir)
        .list(provider)
        .map_err(|e| format!("cannot read the sandbox inventory: {e}"))
}

fn item(app: &App, rec: &Record) -> Value {
    let run = app.runs.store.get_run(&rec.run_id).ok().flatten();
    let state = match &run {
        Some(r) if r.status.is_active() && r.started_at.is_some() => "active",
        Some(_) => "idle",
        None => "orphaned",
    };
    json!({
        "id": rec.id,
        "provider": rec.provider,
        "run_id": rec.run_id,
        "state": state,
        "working_directory": rec.working_directory,
        "created_at": rec.created_at,
        "resources": run.as_ref().map_or_else(super::runs::view::host_resources, super::runs::view::run_resources),
    })
}

pub fn list(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let (limit, offset) = super::runs::page(ctx)?;
    let mut all = Vec::new();
    let mut failures = Vec::new();
    for p in CONFIGURED {
        match provider_list(app, p) {
            Ok(mut recs) => all.append(&mut recs),
            Err(error) => failures.push(json!({"provider": p, "error": error})),
        }
    }
    all.sort_by(|a, b| a.id.cmp(&b.id));
    let has_more = all.len() > offset + limit;
    let data: Vec<Value> = all
        .iter()
        .skip(offset)
        .take(limit)
        .map(|r| item(app, r))
        .collect();
    Ok(Reply::json(
        200,
        &json!({"data": data, "meta": {"has_more": has_more, "failures": failures}}),
    ))
}

pub fn get(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let id = ctx.param("id").to_string();
    let owners: Vec<Record> = CONFIGURED
        .iter()
        .filter_map(|p| provider_list(app, *p).ok())
        .flatten()
        .filter(|r| r.id == id)
        .collect();
    match owners.as_slice() {
        [one] => Ok(Reply::json(200, &item(app, one))),
        _ => Err(ApiError::not_found(format!("No sandbox with id `{id}`."))),
    }
}
