//! System routes (issue 29): `GET /api/v1/system/info`, `GET /api/v1/system/df`,
//! `POST /api/v1/system/prune`.
//!
//! Prune reads finished runs page by page, keeps those the filter matches
//! ([`crate::system::PruneFilter`]) and, unless it is a dry run, deletes each through the runs
//! service's tombstone path ([`super::runs::Runs::delete_finished`], which re-checks that the
//! run is still finished under the runs gate). Its answer lists what it would remove or
//! removed, with the bytes (events and workspace) freed.
//!
//! `svc prune` runs the same walk ([`prune_runs`]) on the state directory.
//!
//! Owns: these routes' shapes. Must not touch: SQL (`store::housekeeping`), prune's rules
//! (`crate::system`).

use super::error::ApiError;
use super::http::{parse_json, Reply};
use super::router::Ctx;
use super::runs::store_error;
use super::App;
use crate::store::{RunQuery, RunStore, StoreSizes};
use crate::system::{self, PruneFilter, PruneRequest};
use serde_json::{json, Value};
use std::path::Path;

/// Status kinds waiting for a slot, and those holding one or waiting on someone.
const QUEUED: [&str; 2] = ["submitted", "runnable"];
const ACTIVE: [&str; 6] = [
    "starting", "running", "blocked", "paused", "pending", "removing",
];

fn count(app: &App, statuses: &[&str]) -> Result<usize, ApiError> {
    app.runs
        .store
        .count_runs(&RunQuery {
            statuses: statuses.iter().map(|s| s.to_string()).collect(),
            limit: usize::MAX,
            ..RunQuery::default()
        })
        .map_err(store_error)
}

/// Which sandbox providers this machine can run: `local` always, `container` when
/// bubblewrap is on PATH (or configured).
fn sandbox_providers(app: &App) -> Vec<&'static str> {
    let mut out = vec!["local"];
    let configured = app
        .settings
        .get()
        .run
        .sandbox
        .as_ref()
        .and_then(|s| s.bwrap.clone());
    let found = configured.map_or_else(
        || {
            std::env::var_os("PATH")
                .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("bwrap").is_file()))
        },
        |b| std::path::Path::new(&b).is_file(),
    );
    if found {
        out.push("container");
    }
    out
}

fn features() -> Vec<&'static str> {
    let mut f = Vec::new();
    for (on, name) in [
        (cfg!(feature = "schema"), "schema"),
        (cfg!(feature = "watch"), "watch"),
        (cfg!(feature = "llm"), "llm"),
        (cfg!(feature = "agent"), "agent"),
        (cfg!(feature = "server"), "server"),
        (cfg!(feature = "cli"), "cli"),
    ] {
        if on {
            f.push(name);
        }
    }
    f
}

pub fn info(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let (db, wal) = app.sizes.database_files();
    let total = app.runs.store.count_runs(&RunQuery {
        limit: usize::MAX,
        ..RunQuery::default()
    });
    Ok(Reply::json(
        200,
        &json!({
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_secs": app.started.elapsed().as_secs(),
            "state_dir": app.state_dir.display().to_string(),
            "database": {
                "path": db.display().to_string(),
                "bytes": system::file_bytes(&db),
                "wal_bytes": system::file_bytes(&wal),
                "schema_version": crate::store::SCHEMA_VERSION,
            },
            "runs": {
                "total": total.map_err(store_error)?,
                "active": count(app, &ACTIVE)?,
                "queued": count(app, &QUEUED)?,
            },
            "sandbox_providers": sandbox_providers(app),
            "features": features(),
        }),
    ))
}

/// A run's workspace directory.
fn workspace_of(app: &App, run_id: &str) -> std::path::PathBuf {
    crate::sandbox::lifecycle::workspaces_dir(&app.state_dir).join(run_id)
}

pub fn df(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let (t, heaviest) = app.sizes.weigh(10).map_err(store_error)?;
    let (db, wal) = app.sizes.database_files();
    let workspaces = system::dir_bytes(&crate::sandbox::lifecycle::workspaces_dir(&app.state_dir));
    let sandboxes = system::dir_bytes(&app.state_dir.join("sandboxes"));
    let backups = system::file_bytes(&app.state_dir.join(crate::store::BACKUP_FILE));
    let mut largest = Vec::new();
    for w in heaviest {
        let row = app.runs.store.get_run(&w.run_id).map_err(store_error)?;
        largest.push(json!({
            "run_id": w.run_id,
            "status": row.as_ref().map(|r| r.status.name()),
            "workflow": row.as_ref().map(|r| r.workflow.name.clone()),
            "events": w.events,
            "event_bytes": w.event_bytes,
            "workspace_bytes": system::dir_bytes(&workspace_of(app, &w.run_id)),
        }));
    }
    let db_bytes = system::file_bytes(&db);
    let wal_bytes = system::file_bytes(&wal);
    Ok(Reply::json(
        200,
        &json!({
            "runs": t.runs,
            "events": {"count": t.events, "bytes": t.event_bytes},
            "blobs": {"count": t.blobs, "bytes": t.blob_bytes},
            "database": {"bytes": db_bytes, "wal_bytes": wal_bytes},
            "workspaces": {"bytes": workspaces},
            "sandboxes": {"bytes": sandboxes},
            "backups": {"bytes": backups},
            "total_bytes": db_bytes + wal_bytes + workspaces + sandboxes + backups,
            "largest_runs": largest,
        }),
    ))
}

/// Finished runs fetched per page while pruning.
const PAGE: usize = 500;

/// A prune request's filter, or the 422 naming the field (`svc prune` prints its detail).
pub fn prune_filter(req: PruneRequest) -> Result<PruneFilter, ApiError> {
    let now = crate::base::clock::parse_ts(&crate::base::clock::now()).unwrap_or(0);
    req.validate(now).map_err(|e| {
        ApiError::unprocessable(e.to_string())
            .with_code("invalid_filter")
            .with_extra(json!({"field": e.field}))
    })
}

pub fn prune(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let body = ctx.inc.body()?;
    let req: PruneRequest = if body.iter().all(u8::is_ascii_whitespace) {
        PruneRequest::default()
    } else {
        parse_json(body)?
    };
    let filter = prune_filter(req)?;
    let answer = prune_runs(
        app.runs.store.as_ref(),
        app.sizes.as_ref(),
        &app.state_dir,
        &filter,
        &mut |id| app.runs.delete_finished(id),
    )?;
    Ok(Reply::json(200, &answer))
}

/// One prune, shared by the route and `svc prune`: finished runs read page by page, those
/// `filter` matches measured (events and workspace) and, unless it is a dry run, handed to
/// `delete` (true: removed; false: no longer finished, kept). Answers the route's body.
pub fn prune_runs(
    store: &dyn RunStore,
    sizes: &dyn StoreSizes,
    state_dir: &Path,
    filter: &PruneFilter,
    delete: &mut dyn FnMut(&str) -> Result<bool, ApiError>,
) -> Result<Value, ApiError> {
    let mut matched = Vec::new();
    let mut offset = 0;
    loop {
        let page = store
            .query_runs(&RunQuery {
                statuses: filter.statuses.clone(),
                automation_id: filter.automation.clone(),
                oldest_first: true,
                offset,
                limit: PAGE,
                ..RunQuery::default()
            })
            .map_err(store_error)?;
        let n = page.len();
        matched.extend(page.into_iter().filter(|r| filter.matches(r)));
        if n < PAGE {
            break;
        }
        offset += n;
    }
    let workspaces = crate::sandbox::lifecycle::workspaces_dir(state_dir);
    let mut runs = Vec::with_capacity(matched.len());
    let (mut total_bytes, mut freed, mut deleted) = (0u64, 0u64, 0usize);
    for row in &matched {
        let events = sizes.run_weight(&row.id).map_err(store_error)?;
        let bytes = events.event_bytes + system::dir_bytes(&workspaces.join(&row.id));
        total_bytes += bytes;
        let removed = !filter.dry_run && delete(&row.id)?;
        if removed {
            deleted += 1;
            freed += bytes;
        }
        runs.push(json!({
            "run_id": row.id,
            "status": row.status.name(),
            "workflow": row.workflow.name,
            "ended_at": row.completed_at.as_deref().unwrap_or(&row.updated_at),
            "size_bytes": bytes,
            "removed": removed,
        }));
    }
    let advice: Value = if deleted > 0 {
        json!("Deleted runs' pages are reused by new ones; the database file does not shrink until a VACUUM (with the server stopped).")
    } else {
        Value::Null
    };
    Ok(json!({
        "dry_run": filter.dry_run,
        "runs": runs,
        "total_count": matched.len(),
        "total_size_bytes": total_bytes,
        "deleted_count": deleted,
        "freed_bytes": freed,
        "advice": advice,
    }))
}
