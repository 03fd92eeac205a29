//! The HTTP side of every catalog (`crate::catalog`): five generic handlers, the `ETag` and
//! `If-Match` headers, and the statuses of [`CatalogError`].
//!
//! A catalog served by the app implements [`Served`] (where the app keeps it) and lists its
//! routes as `catalog::list::<Its>`, `create`, `get`, `replace`, `delete`:
//!
//! | route | success | errors |
//! |---|---|---|
//! | `GET /api/v1/<things>` | 200 `{data, meta: {total}}` sorted by id | |
//! | `POST /api/v1/<things>` | 201 + `ETag` | 400 malformed, 409 id taken, 422 invalid |
//! | `GET /api/v1/<things>/{id}` | 200 + `ETag` | 400 bad id, 404 |
//! | `PUT /api/v1/<things>/{id}` (`If-Match`) | 200 + `ETag` | 400, 404, 409 stale, 422, 428 |
//! | `DELETE /api/v1/<things>/{id}` (`If-Match`) | 204 | 400, 404, 409 stale, 428 |
//!
//! A 422 has one error entry per invalid field, each with `field` (e.g.
//! `triggers[1].expression`) and code `invalid_field`.
//!
//! Owns: the catalog routes' HTTP. Must not touch: catalog rules (`crate::catalog`).

use super::error::ApiError;
use super::http::Reply;
use super::router::Ctx;
use super::App;
use crate::catalog::{Catalog, CatalogError, Item, Kind};
use serde_json::json;

/// A catalog the app serves.
pub trait Served: Kind + Sized {
    fn catalog(app: &App) -> &Catalog<Self>;
}

/// The API error of a catalog failure.
pub fn error(e: CatalogError) -> ApiError {
    let detail = e.to_string();
    match e {
        CatalogError::Malformed(_) => ApiError::bad_request(detail).with_code("malformed_json"),
        CatalogError::BadId { .. } => ApiError::bad_request(detail).with_code("invalid_id"),
        CatalogError::NotFound { .. } => ApiError::not_found(detail),
        CatalogError::Exists { .. } => ApiError::conflict(detail).with_code("already_exists"),
        CatalogError::PreconditionRequired { .. } => {
            ApiError::new(428, detail).with_code("precondition_required")
        }
        CatalogError::BadPrecondition(_) => {
            ApiError::bad_request(detail).with_code("invalid_if_match")
        }
        CatalogError::Stale { current, .. } => ApiError::conflict(detail)
            .with_code("stale_revision")
            .with_extra(json!({"current_revision": current})),
        CatalogError::Invalid(errs) => {
            let mut it = errs.into_iter();
            let first = it
                .next()
                .unwrap_or_else(|| crate::catalog::Invalid::new("", "invalid"));
            let mut e = ApiError::new(422, first.to_string())
                .with_code("invalid_field")
                .with_extra(json!({"field": first.field}));
            for more in it {
                e = e.with_entry(more.to_string(), json!({"field": more.field}));
            }
            e
        }
        CatalogError::Store(_) => ApiError::internal(detail),
    }
}

/// A JSON response with the entry's `ETag`.
pub fn item_reply(status: u16, item: &Item) -> Reply {
    text_reply(status, item.view_json().to_string(), Some(item.etag()))
}

fn text_reply(status: u16, body: String, etag: Option<String>) -> Reply {
    let mut headers = vec![(
        "Content-Type".into(),
        "application/json; charset=utf-8".into(),
    )];
    if let Some(tag) = etag {
        headers.push(("ETag".into(), tag.into()));
    }
    Reply::Full(rouille::Response {
        status_code: status,
        headers,
        data: rouille::ResponseBody::from_string(body),
        upgrade: None,
    })
}

pub fn list<K: Served>(app: &App, _ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    Ok(text_reply(200, K::catalog(app).list_json(), None))
}

pub fn create<K: Served>(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let item = K::catalog(app).create(ctx.inc.body()?).map_err(error)?;
    Ok(item_reply(201, &item))
}

pub fn get<K: Served>(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let item = K::catalog(app).get(ctx.param("id")).map_err(error)?;
    Ok(item_reply(200, &item))
}

pub fn replace<K: Served>(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let id = ctx.param("id").to_string();
    let if_match = ctx.inc.header("if-match").map(str::to_string);
    let item = K::catalog(app)
        .replace(&id, if_match.as_deref(), ctx.inc.body()?)
        .map_err(error)?;
    Ok(item_reply(200, &item))
}

pub fn delete<K: Served>(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let if_match = ctx.inc.header("if-match").map(str::to_string);
    K::catalog(app)
        .delete(ctx.param("id"), if_match.as_deref())
        .map_err(error)?;
    Ok(Reply::empty(204))
}
