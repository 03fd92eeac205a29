//! The environments API: the catalog routes (through [`super::catalog`]) and
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
