//! The environments API: the catalog routes (through [`super::catalog`]; the list also says
//! which environment a run naming none gets, `meta.run_default`) and
//! `GET /api/v1/environments/{id}/preflight`.
//!
//! Owns: the HTTP side of `crate::environments`. Must not touch: the catalog's rules or how
//! limits are enforced (`sandbox::limits`).

use super::catalog::Served;
use super::error::ApiError;
use super::http::Reply;
use super::router::Ctx;
use super::App;
use crate::catalog::Catalog;
use crate::environments::Environments;

impl Served for Environments {
    fn catalog(app: &App) -> &Catalog<Environments> {
        &app.environments
    }
}

/// `GET /api/v1/environments`: the catalog's list, with `meta.run_default`, the `[run]
/// environment` a run naming neither `environment` nor `sandbox` gets (null: none, the run
/// takes `[run.sandbox]`), so a form can preselect what the server would choose.
pub fn list(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let mut list: serde_json::Value = serde_json::from_str(&app.environments.list_json())
        .map_err(|e| ApiError::internal(format!("the environments list does not parse: {e}")))?;
    let run_default = app.settings.get().run.environment.clone();
    if let Some(meta) = list
        .get_mut("meta")
        .and_then(serde_json::Value::as_object_mut)
    {
        meta.insert("run_default".into(), serde_json::json!(run_default));
    }
    Ok(Reply::json(200, &list))
}

/// `GET /api/v1/environments/{id}/preflight`: 200 with what each provider would honour.
pub fn preflight(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let item = app
        .environments
        .get(ctx.param("id"))
        .map_err(super::catalog::error)?;
    Ok(Reply::json(
        200,
        &crate::environments::preflight(&item.id, &item.definition),
    ))
}
