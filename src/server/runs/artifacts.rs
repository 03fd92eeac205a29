//! `GET /api/v1/runs/{id}/artifacts` (the files a run kept, from its `artifact.captured`
//! events, one page at a time) and `GET /api/v1/runs/{id}/artifacts/{artifact_id}` (one
//! file's bytes, always as a download: `application/octet-stream`, `attachment`, `nosniff`,
//! so a kept HTML file never runs in the UI's origin).
//!
//! Owns: the wire shape of artifact items and the download's headers. Must not touch: the
//! object store's details (`artifacts`, `objects`) or SQL (through `RunStore` only).

use super::store_error;
use crate::artifacts::{self, Artifact};
use crate::server::error::ApiError;
use crate::server::http::Reply;
use crate::server::router::Ctx;
use crate::server::App;
use crate::store::RunStore;
use serde_json::json;

/// Events read per store call.
const PAGE: usize = 1024;

/// Every artifact run `run_id` kept, in the order they were kept.
pub fn kept(store: &dyn RunStore, run_id: &str) -> Result<Vec<Artifact>, ApiError> {
    let mut out = Vec::new();
    let mut since = 0;
    loop {
        let page = store.events(run_id, since, PAGE).map_err(store_error)?;
        let Some(last) = page.last() else { break };
        since = last.seq;
        out.extend(page.iter().filter_map(artifacts::from_event));
        if page.len() < PAGE {
            break;
        }
    }
    Ok(out)
}

pub fn list(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.row(ctx.param("id"))?;
    let (limit, offset) = super::page(ctx)?;
    let all = kept(app.runs.store.as_ref(), &row.id)?;
    let has_more = all.len() > offset + limit;
    let data: Vec<serde_json::Value> = all
        .iter()
        .skip(offset)
        .take(limit)
        .map(|a| {
            let mut v = json!(a);
            v["download_url"] = json!(format!("/api/v1/runs/{}/artifacts/{}", row.id, a.id));
            v
        })
        .collect();
    Ok(Reply::json(
        200,
        &json!({"data": data, "meta": {"has_more": has_more, "total": all.len()}}),
    ))
}

pub fn download(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.row(ctx.param("id"))?;
    let wanted = ctx.param("artifact_id").to_string();
    let a = kept(app.runs.store.as_ref(), &row.id)?
        .into_iter()
        .find(|a| a.id == wanted)
        .ok_or_else(|| {
            ApiError::not_found(format!("Run {} has no artifact `{wanted}`.", row.id))
        })?;
    let store = artifacts::store_for(&app.runs.settings.get(), &app.runs.state_dir)
        .map_err(|e| ApiError::new(503, e.0).with_code("object_store_unavailable"))?;
    let (reader, len) = artifacts::open(&store, &a).map_err(|e| {
        ApiError::new(503, format!("Cannot read artifact {}: {e}", a.id))
            .with_code("object_store_unavailable")
    })?;
    let name: String = a
        .path
        .rsplit('/')
        .next()
        .unwrap_or("artifact")
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Ok(Reply::Full(rouille::Response {
        status_code: 200,
        headers: vec![
            ("Content-Type".into(), "application/octet-stream".into()),
            (
                "Content-Disposition".into(),
                format!("attachment; filename=\"{name}\"").into(),
            ),
            ("X-Content-Type-Options".into(), "nosniff".into()),
            ("X-Content-SHA256".into(), a.content_sha256.clone().into()),
        ],
        data: rouille::ResponseBody::from_reader_and_size(reader, len as usize),
        upgrade: None,
    }))
}
