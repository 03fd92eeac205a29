//! Discovery and system routes (`/`, which browsers get as the runs board when the web UI is
//! on, `/health`, `/api/v1/openapi.json`, `/api/v1/user`),
//! and the workflow-version routes' HTTP side.
//!
//! Owns: these handlers' request/response shapes. Must not touch: version validation rules
//! (see [`super::versions`]) or runs.

use super::error::ApiError;
use super::http::{parse_json, Reply};
use super::router::Ctx;
use super::versions::Package;
use super::{openapi, App};
use serde_json::json;

/// The public base for absolute URLs: `server.api.url` when set, else `http://<Host>/api/v1`,
/// else a root-relative path.
fn api_base(app: &App, ctx: &Ctx<'_, '_>) -> String {
    if let Some(u) = &app.settings.get().server.api.url {
        return u.trim_end_matches('/').to_string();
    }
    match ctx.inc.header("host") {
        Some(h) if !h.is_empty() && !h.contains(['/', ' ']) => format!("http://{h}/api/v1"),
        _ => "/api/v1".to_string(),
    }
}

pub fn root(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    if super::pages::wants_board(app, ctx) {
        return super::pages::board(app, ctx);
    }
    let api = api_base(app, ctx);
    let origin = api.strip_suffix("/api/v1").unwrap_or("");
    Ok(Reply::json(
        200,
        &json!({
            "urls": {
                "openapi_url": format!("{api}/openapi.json"),
                "current_user_url": format!("{api}/user"),
                "health_url": format!("{origin}/health"),
            }
        }),
    ))
}

pub fn health(_: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    Ok(Reply::json(200, &json!({"status": "ok"})))
}

pub fn openapi_doc(_: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    Ok(Reply::json(200, openapi::document()))
}

pub fn user(_: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let p = ctx
        .principal
        .clone()
        .unwrap_or_else(|| crate::auth::Principal::dev().to_json());
    let mut me = json!({"login": p["login"], "auth_method": p["auth_method"]});
    if let Some(a) = p.get("avatar_url") {
        me["avatar_url"] = a.clone();
    }
    Ok(Reply::json(200, &me))
}

pub fn create_version(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let package: Package = parse_json(ctx.inc.body()?)?;
    let (v, created) = app.versions.register(package)?;
    Ok(Reply::json(if created { 201 } else { 200 }, &v.to_json()))
}

pub fn get_version(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let id = ctx.param("id");
    match app.versions.get(id)? {
        Some(v) => {
            // The stored package is what runs; what a user reads hides secret values.
            let mut body = v.to_json();
            crate::base::redact::redact_json(app.runs.redactor.as_ref(), &mut body);
            Ok(Reply::json(200, &body))
        }
        None => Err(ApiError::not_found(format!(
            "No workflow version with id `{id}`."
        ))),
    }
}

/// `GET /api/v1/system/backups`: the object store's snapshots (newest first) and the
/// schedule; `object_store: null` when none is configured.
pub fn backups(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let settings = app.settings.get();
    let b = &settings.server.backup;
    let schedule = json!({"every": b.every, "keep": b.keep});
    if settings.server.object_store.is_none() {
        return Ok(Reply::json(
            200,
            &json!({"object_store": null, "schedule": schedule, "backups": []}),
        ));
    }
    let unavailable = |e: crate::backup::BackupError| {
        ApiError::new(503, e.to_string()).with_code("object_store_unavailable")
    };
    let store = crate::backup::store_of(&settings, &app.state_dir).map_err(unavailable)?;
    let mut all = crate::backup::list(&store).map_err(unavailable)?;
    all.reverse();
    Ok(Reply::json(
        200,
        &json!({"object_store": store.describe(), "schedule": schedule, "backups": all}),
    ))
}
