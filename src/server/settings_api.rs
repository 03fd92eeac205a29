//! Settings and secrets over HTTP, for admins only (`Access::Admin`):
//!
//! | route | success | errors |
//! |---|---|---|
//! | `GET /api/v1/settings` | 200 the resolved settings + `ETag` (the file's revision) | |
//! | `PATCH /api/v1/settings` (`If-Match`) | 200 the same, after the change | 400 malformed, 409 stale, 422 unknown / not live / restart-only / invalid, 428 no If-Match |
//! | `GET /api/v1/secrets` | 200 `{data: [{name, purpose, set, type, updated_at}]}` | |
//! | `PUT /api/v1/secrets/{name}` `{value}` | 200 the entry (never the value) | 400, 422 a name svc does not use |
//! | `DELETE /api/v1/secrets/{name}` | 204 | 404 not set, 422 |
//!
//! Secrets are write-only: no route returns a value. A patch is applied to the file (see
//! [`crate::settings::patch`]) and swapped in at once; the live reload then sees no change.
//!
//! Owns: these routes' shapes. Must not touch: the file format (`settings`), the vault's
//! file (`settings::vault`), or who is an admin (`server::auth::require_admin`).

use super::error::ApiError;
use super::http::{parse_json, Reply};
use super::router::Ctx;
use super::App;
use crate::settings::patch::{self, PatchError};
use crate::settings::vault::{SecretType, Vault, VaultError};
use serde_json::{json, Value};

fn patch_error(e: PatchError) -> ApiError {
    let detail = e.to_string();
    match e {
        PatchError::NotObject => ApiError::bad_request(detail).with_code("malformed_json"),
        PatchError::Unknown { key } => ApiError::unprocessable(detail)
            .with_code("unknown_key")
            .with_extra(json!({"field": key})),
        PatchError::RestartOnly { key } => ApiError::unprocessable(detail)
            .with_code("restart_required")
            .with_extra(json!({"field": key})),
        PatchError::NotLive { key } => ApiError::unprocessable(detail)
            .with_code("not_live")
            .with_extra(json!({"field": key})),
        PatchError::Invalid(_) => ApiError::unprocessable(detail).with_code("invalid_settings"),
        PatchError::PreconditionRequired => {
            ApiError::new(428, detail).with_code("precondition_required")
        }
        PatchError::Stale { current, .. } => ApiError::conflict(detail)
            .with_code("stale_revision")
            .with_extra(json!({"current_revision": current})),
        PatchError::Io { .. } => ApiError::internal(detail),
    }
}

fn vault_error(e: VaultError) -> ApiError {
    match e {
        VaultError::NotFound(_) => ApiError::not_found(e.to_string()),
        VaultError::BadName(..) => ApiError::unprocessable(e.to_string()).with_code("invalid_name"),
        _ => ApiError::internal(e.to_string()),
    }
}

/// The settings view: what the server runs with now, the file's revision, which keys may
/// change live, and every known secret by name (set or not; never a value).
fn view(app: &App, revision: &str) -> Result<Value, ApiError> {
    let s = app.settings.get();
    let settings = serde_json::to_value(&*s).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(json!({
        "revision": revision,
        "file": app.settings_path.display().to_string(),
        "file_exists": app.settings_path.exists(),
        "settings": settings,
        "live_keys": patch::LIVE_KEYS,
        "restart_keys": patch::RESTART_KEYS,
        "secrets": secrets(app)?,
    }))
}

fn with_etag(body: &Value, revision: &str) -> Reply {
    let mut r = Reply::json(200, body);
    if let Reply::Full(resp) = &mut r {
        resp.headers
            .push(("ETag".into(), format!("\"{revision}\"").into()));
    }
    r
}

pub fn get(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let (_, rev) = patch::read(&app.settings_path).map_err(patch_error)?;
    Ok(with_etag(&view(app, &rev)?, &rev))
}

pub fn patch(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let if_match = ctx.inc.header("if-match").map(str::to_string);
    let body: Value = parse_json(ctx.inc.body()?)?;
    let (settings, rev) =
        patch::patch_file(&app.settings_path, if_match.as_deref(), &body).map_err(patch_error)?;
    app.settings.replace(settings);
    log::info!("settings changed over HTTP (revision {rev})");
    Ok(with_etag(&view(app, &rev)?, &rev))
}

/// Every secret svc knows, set or not, then any other stored entry.
fn secrets(app: &App) -> Result<Vec<Value>, ApiError> {
    let stored = Vault::in_state_dir(&app.state_dir)
        .list()
        .map_err(vault_error)?;
    let known = app.settings.get().known_secrets();
    let mut out: Vec<Value> = known
        .iter()
        .map(|k| {
            let m = stored.iter().find(|m| m.name == k.name);
            json!({
                "name": k.name, "purpose": k.purpose, "set": m.is_some(),
                "type": m.map(|m| m.kind), "updated_at": m.map(|m| m.updated_at.clone()),
            })
        })
        .collect();
    for m in stored
        .iter()
        .filter(|m| !known.iter().any(|k| k.name == m.name))
    {
        out.push(json!({
            "name": m.name, "purpose": null, "set": true, "type": m.kind, "updated_at": m.updated_at,
        }));
    }
    Ok(out)
}

pub fn list_secrets(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    Ok(Reply::json(200, &json!({"data": secrets(app)?})))
}

/// The name in the path, if svc uses it.
fn known_name(app: &App, ctx: &Ctx<'_, '_>) -> Result<String, ApiError> {
    let name = ctx.param("name");
    if app
        .settings
        .get()
        .known_secrets()
        .iter()
        .any(|k| k.name == name)
    {
        return Ok(name.to_string());
    }
    Err(ApiError::unprocessable(format!(
        "svc does not use a secret named `{name}`: see GET /api/v1/secrets for the names it reads (add a name to [run] secrets to give it to runs)."
    ))
    .with_code("unknown_secret")
    .with_extra(json!({"field": "name"})))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PutSecret {
    value: String,
}

pub fn put_secret(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let name = known_name(app, ctx)?;
    let body: PutSecret = parse_json(ctx.inc.body()?)?;
    if body.value.is_empty() || body.value.len() > 64 * 1024 {
        return Err(ApiError::unprocessable(
            "`value` must be 1 to 65536 bytes (DELETE removes a secret).",
        )
        .with_code("invalid_field")
        .with_extra(json!({"field": "value"})));
    }
    let vault = Vault::in_state_dir(&app.state_dir);
    vault
        .set(&name, &body.value, SecretType::Environment)
        .map_err(vault_error)?;
    log::info!("secret {name} set over HTTP");
    let entry = secrets(app)?
        .into_iter()
        .find(|s| s["name"] == name.as_str())
        .unwrap_or(Value::Null);
    Ok(Reply::json(200, &entry))
}

pub fn delete_secret(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let name = known_name(app, ctx)?;
    Vault::in_state_dir(&app.state_dir)
        .remove(&name)
        .map_err(vault_error)?;
    log::info!("secret {name} removed over HTTP");
    Ok(Reply::empty(204))
}
