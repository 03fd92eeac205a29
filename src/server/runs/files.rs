//! `GET /runs/{id}/files`: the run's file changes against its base, or one checkpoint's
//! (`?checkpoint=<id>`), one page at a time (SPEC 2.10, 4).
//!
//! File names and contents are redacted (vault values, the dev token, the session secret)
//! when served.
//!
//! Owns: the wire shape of file diff items and the checkpoint filter. Must not touch: git
//! itself (`workspace::diff`), the store beyond reading the run.

use super::super::error::ApiError;
use super::super::http::Reply;
use super::super::router::Ctx;
use super::super::App;
use crate::base::redact::Redact;
use crate::workspace::{self, diff};
use serde_json::{json, Value};

pub fn list(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.row(ctx.param("id"))?;
    let (limit, offset) = super::page(ctx)?;
    let checkpoint = ctx.inc.query("checkpoint").filter(|c| !c.trim().is_empty());
    if row.sandbox.removed.is_some() {
        return Err(ApiError::not_found(format!(
            "The workspace of run {} was removed; its file changes are gone.",
            row.id
        )));
    }
    if row.sandbox.instance.is_none() {
        // No workspace was ever made: nothing changed.
        if let Some(cp) = checkpoint {
            return Err(unknown_checkpoint(&row.id, &cp));
        }
        return Ok(page_reply(Vec::new(), false));
    }
    let Some((git, base)) = crate::sandbox::lifecycle::workspace_git(&row, &app.runs.state_dir)
    else {
        return Err(ApiError::not_found(format!(
            "The workspace of run {} was removed; its file changes are gone.",
            row.id
        )));
    };
    let (from, to) = match &checkpoint {
        Some(cp) => {
            if !workspace::is_checkpoint(&git, &base, cp) {
                return Err(unknown_checkpoint(&row.id, cp));
            }
            (format!("{cp}^"), cp.clone())
        }
        None => (base, "HEAD".to_string()),
    };
    let failed = |e: workspace::GitError| {
        ApiError::internal(format!("Cannot read the changes of run {}: {e}", row.id))
    };
    let changes = diff::changes(&git, &from, &to).map_err(failed)?;
    let has_more = changes.len() > offset + limit;
    let page: Vec<&diff::FileChange> = changes.iter().skip(offset).take(limit).collect();
    // Binary sides are not read: they are listed with empty contents.
    let owned: Vec<Option<String>> = page
        .iter()
        .flat_map(|c| {
            let keep = |b: &Option<String>| if c.binary { None } else { b.clone() };
            [keep(&c.old_blob), keep(&c.new_blob)]
        })
        .collect();
    let blobs: Vec<Option<&str>> = owned.iter().map(|b| b.as_deref()).collect();
    let texts = diff::contents(&git, &blobs).map_err(failed)?;
    let data: Vec<Value> = page
        .iter()
        .zip(texts.chunks(2))
        .map(|(c, t)| item(app.runs.redactor.as_ref(), c, &t[0], &t[1]))
        .collect();
    Ok(page_reply(data, has_more))
}

/// One diff item, with secret values hidden: a stage may have written one into a file, and
/// the workspace is read here, not through the engine's recorded (redacted) events.
fn item(r: &dyn Redact, c: &diff::FileChange, old: &str, new: &str) -> Value {
    let name = r.redact(&c.path);
    json!({
        "old_file": {"name": name, "contents": r.redact(old)},
        "new_file": {"name": name, "contents": r.redact(new)},
    })
}

fn page_reply(data: Vec<Value>, has_more: bool) -> Reply {
    Reply::json(200, &json!({"data": data, "meta": {"has_more": has_more}}))
}

fn unknown_checkpoint(run: &str, cp: &str) -> ApiError {
    ApiError::not_found(format!("Run {run} has no checkpoint `{cp}`."))
}
