//! A run's sandbox lifecycle: making its workspace and starting its provider before the
//! engine runs (`sandbox.initializing` → `sandbox.initialized` | `sandbox.failed`), reopening
//! both on resume, and removing them when the run is deleted or its retention ends. The
//! server and `svc run` both start their runs' sandboxes here.
//!
//! Owns: the glue between a run (its `run.created` workspace/sandbox requests, its events)
//! and the `workspace` module and the providers; where workspaces live
//! (`<state-dir>/workspaces/<run-id>`) and the inventory (`<state-dir>/sandboxes`).
//! The one part of `sandbox` that knows runs and the store.
//! Must not touch: git or bwrap details (their modules), scheduling, HTTP, settings (callers
//! hand it [`Defaults`]).

use super::inventory::{Inventory, Record};
use super::{Isolation, ProviderKind, SandboxPlan};
use crate::base::event_kind;
use crate::store::{EventDraft, RunRow, RunStore, StoreError};
use crate::workspace::{self, Git, Source};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `[run.sandbox]` as the lifecycle needs it (`settings::Settings::sandbox_defaults`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Defaults {
    /// Container processes may use the network, when the run does not say.
    pub network: bool,
    /// The bubblewrap binary (`bwrap` on PATH when `None`).
    pub bwrap: Option<String>,
    /// Hours a finished run's sandbox and workspace are kept.
    pub retention_hours: u64,
}

/// A run's ready sandbox, as the engine needs it.
pub struct Ready {
    pub workdir: PathBuf,
    pub isolation: Isolation,
    pub git: Git,
    pub base: String,
}

/// Where workspaces live.
pub fn workspaces_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("workspaces")
}

pub fn inventory(state_dir: &Path) -> Inventory {
    Inventory::new(state_dir.join("sandboxes"))
}

/// The workspace source a run asked for (`run.created` property `workspace`).
pub fn source_of(row: &RunRow) -> Source {
    let Some(w) = row.created_meta.get("workspace") else {
        return Source::Scratch;
    };
    let s = |k: &str| w.get(k).and_then(Value::as_str).map(str::to_string);
    match w.get("kind").and_then(Value::as_str) {
        Some("repository") => Source::Repository {
            origin_url: s("origin_url").unwrap_or_default(),
            branch: s("branch"),
        },
        Some("rewind") => Source::Rewind {
            from: PathBuf::from(s("from").unwrap_or_default()),
            commit: s("commit").unwrap_or_default(),
            base: s("base").unwrap_or_default(),
        },
        Some("directory") => Source::Directory {
            path: PathBuf::from(s("path").unwrap_or_default()),
            in_place: w.get("in_place").and_then(Value::as_bool).unwrap_or(false),
        },
        _ => Source::Scratch,
    }
}

/// The sandbox plan of a run (`run.created` property `sandbox`, else `[run.sandbox]`).
pub fn plan_of(row: &RunRow, defaults: &Defaults) -> SandboxPlan {
    let requested = row.created_meta.get("sandbox");
    let s = |k: &str| {
        requested
            .and_then(|r| r.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    SandboxPlan {
        provider: s("provider")
            .and_then(|p| ProviderKind::parse(&p))
            .unwrap_or(ProviderKind::Local),
        image: s("image"),
        snapshot: s("snapshot"),
        network: requested
            .and_then(|r| r.get("network"))
            .and_then(Value::as_bool)
            .unwrap_or(defaults.network),
        bwrap: PathBuf::from(defaults.bwrap.as_deref().unwrap_or("bwrap")),
        // Frozen into the run from its environment when it was created.
        resources: requested
            .and_then(|r| r.get("resources"))
            .and_then(|r| serde_json::from_value(r.clone()).ok())
            .unwrap_or_default(),
    }
}

fn append(store: &dyn RunStore, run_id: &str, kind: &str, props: Value) -> Result<(), StoreError> {
    store
        .append(run_id, EventDraft::new(kind, props))
        .map(|_| ())
}

/// Prepares (or, on resume, reopens) the run's workspace and starts its sandbox, recording
/// each step. On failure the run has `sandbox.failed` and `run.failed{sandbox_init_failed}`
/// and `None` is returned; nothing of the user's is touched and a half-made workspace is
/// removed.
pub fn start(
    store: &dyn RunStore,
    row: &RunRow,
    state_dir: &Path,
    defaults: &Defaults,
) -> Option<Ready> {
    start_with(store, row, state_dir, defaults, &[])
}

/// [`start`], cloning with `clone_env` in the `git clone`'s environment (the code host's
/// credential for a repository on it).
pub fn start_with(
    store: &dyn RunStore,
    row: &RunRow,
    state_dir: &Path,
    defaults: &Defaults,
    clone_env: &[(String, String)],
) -> Option<Ready> {
    let plan = plan_of(row, defaults);
    let began = Instant::now();
    let provider = plan.provider.as_str();
    let initializing =
        json!({"provider": provider, "image": plan.image, "snapshot": plan.snapshot});
    if append(
        store,
        &row.id,
        event_kind::SANDBOX_INITIALIZING,
        initializing,
    )
    .is_err()
    {
        return None;
    }
    match make(row, &plan, state_dir, clone_env) {
        Ok((ready, ws)) => {
            let id = Inventory::id_for(&row.id);
            let record = Record {
                id: id.clone(),
                provider: plan.provider,
                run_id: row.id.clone(),
                working_directory: ready.workdir.display().to_string(),
                created_at: crate::base::clock::now(),
                owns_workspace: ws.owned,
            };
            if let Err(e) = inventory(state_dir).put(&record) {
                log::warn!("run {}: cannot record sandbox {id}: {e}", row.id);
            }
            let props = json!({
                "provider": provider,
                "image": plan.image,
                "snapshot": plan.snapshot,
                "identifier": id,
                "working_directory": ready.workdir.display().to_string(),
                "repo_cloned": ws.repo_cloned,
                "clone_origin_url": ws.clone_origin_url,
                "clone_branch": ws.clone_branch,
                "branch": ws.branch,
                "base_commit": ws.base,
                "network": plan.network,
                "resources": plan.resources,
                "limits": ready.isolation.limits().map(|l| l.runtime().name()),
                "duration_ms": began.elapsed().as_millis() as u64,
            });
            append(store, &row.id, event_kind::SANDBOX_INITIALIZED, props).ok()?;
            Some(ready)
        }
        Err((error, causes)) => {
            let duration_ms = began.elapsed().as_millis() as u64;
            let _ = append(
                store,
                &row.id,
                event_kind::SANDBOX_FAILED,
                json!({"provider": provider, "error": error, "causes": causes, "duration_ms": duration_ms}),
            );
            let _ = append(
                store,
                &row.id,
                event_kind::RUN_FAILED,
                json!({"reason": "sandbox_init_failed", "error": format!("the sandbox could not start: {error}"),
                       "causes": causes, "duration_ms": duration_ms}),
            );
            None
        }
    }
}

type Failure = (String, Vec<String>);

fn make(
    row: &RunRow,
    plan: &SandboxPlan,
    state_dir: &Path,
    clone_env: &[(String, String)],
) -> Result<(Ready, workspace::Workspace), Failure> {
    let dest = workspaces_dir(state_dir).join(&row.id);
    let source = source_of(row);
    let ws = match reopened(row, &dest, &source) {
        Some(ws) => ws,
        None => {
            std::fs::create_dir_all(workspaces_dir(state_dir)).map_err(|e| {
                (
                    "cannot create the workspaces folder".to_string(),
                    vec![e.to_string()],
                )
            })?;
            // A leftover from an attempt that never became ready.
            let _ = super::inventory::remove_dir(&dest);
            workspace::prepare_with(&source, &row.id, &dest, clone_env).map_err(|e| {
                let _ = super::inventory::remove_dir(&dest);
                (e.error, e.causes)
            })?
        }
    };
    let workdir = ws
        .git
        .work_tree
        .canonicalize()
        .unwrap_or_else(|_| ws.git.work_tree.clone());
    let started = super::isolation::start(plan, &workdir).map_err(|e| {
        if ws.owned && row.sandbox.instance.is_none() {
            let _ = super::inventory::remove_dir(&dest);
        }
        (e.error, e.causes)
    })?;
    Ok((
        Ready {
            workdir,
            isolation: started.isolation,
            git: ws.git.clone(),
            base: ws.base.clone(),
        },
        ws,
    ))
}

/// The workspace of an earlier start of this run (a resume), when it is still there. A run
/// resumed without a workspace checkpoint goes back to its base (the engine restores later
/// checkpoints itself).
fn reopened(row: &RunRow, dest: &Path, source: &Source) -> Option<workspace::Workspace> {
    row.sandbox.instance.as_ref()?;
    let git = workspace::reopen(dest, source, &row.id)?;
    let base = row_base(row)?;
    let has_checkpoint = row
        .checkpoint
        .as_ref()
        .and_then(|c| c.get("git_commit_sha"))
        .is_some();
    if !has_checkpoint {
        workspace::restore(&git, &base).ok()?;
    }
    Some(workspace::Workspace {
        owned: !matches!(source, Source::Directory { in_place: true, .. }),
        git,
        base,
        branch: workspace::run_branch(&row.id),
        repo_cloned: runtime_flag(row, "repo_cloned"),
        clone_origin_url: runtime_str(row, "clone_origin_url"),
        clone_branch: runtime_str(row, "clone_branch"),
    })
}

fn runtime_str(row: &RunRow, key: &str) -> Option<String> {
    row.sandbox
        .instance
        .as_ref()?
        .get("runtime")?
        .get(key)?
        .as_str()
        .map(str::to_string)
}

fn runtime_flag(row: &RunRow, key: &str) -> bool {
    row.sandbox
        .instance
        .as_ref()
        .and_then(|i| i.get("runtime"))
        .and_then(|r| r.get(key))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// The run's base commit (recorded in the runtime as `base_commit`).
pub fn row_base(row: &RunRow) -> Option<String> {
    runtime_str(row, "base_commit")
}

/// The git view of a run's workspace for diffs, when it still exists.
pub fn workspace_git(row: &RunRow, state_dir: &Path) -> Option<(Git, String)> {
    let dest = workspaces_dir(state_dir).join(&row.id);
    let git = workspace::reopen(&dest, &source_of(row), &row.id)?;
    Some((git, row_base(row)?))
}

/// Removes a run's sandbox record and the workspace it owns (and an in-place run's
/// separate git directory). Missing pieces are fine.
pub fn remove(state_dir: &Path, run_id: &str) -> std::io::Result<()> {
    inventory(state_dir).remove(&Inventory::id_for(run_id))?;
    let dest = workspaces_dir(state_dir).join(run_id);
    super::inventory::remove_dir(&dest)?;
    super::inventory::remove_dir(&dest.with_file_name(format!("{run_id}.git")))
}

/// How long a finished run's sandbox is kept (`[run.sandbox] retention_hours`).
pub fn retention_ms(defaults: &Defaults) -> i64 {
    hours_ms(defaults.retention_hours)
}

fn hours_ms(hours: u64) -> i64 {
    i64::try_from(hours)
        .unwrap_or(i64::MAX / 3_600_000)
        .saturating_mul(3_600_000)
}

/// The `lifecycle` frozen into a run from its environment (`run.created` `sandbox.lifecycle`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lifecycle {
    /// Hours the sandbox is kept once the run ended (`None`: `[run.sandbox] retention_hours`).
    pub retention_hours: Option<u64>,
    /// Stop and remove the sandbox as soon as the run ends.
    pub stop_on_terminal: bool,
}

/// The run's [`Lifecycle`] (an environment's; none: the defaults alone).
pub fn lifecycle_of(row: &RunRow) -> Lifecycle {
    let l = row
        .created_meta
        .get("sandbox")
        .and_then(|s| s.get("lifecycle"));
    Lifecycle {
        retention_hours: l
            .and_then(|l| l.get("retention_hours"))
            .and_then(Value::as_u64),
        stop_on_terminal: l
            .and_then(|l| l.get("stop_on_terminal"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
    }
}

/// How long this run's sandbox is kept once the run ended: none with `stop_on_terminal`,
/// else its environment's `retention_hours`, else `[run.sandbox] retention_hours`.
pub fn run_retention_ms(row: &RunRow, defaults: &Defaults) -> i64 {
    let l = lifecycle_of(row);
    if l.stop_on_terminal {
        return 0;
    }
    l.retention_hours
        .map_or_else(|| retention_ms(defaults), hours_ms)
}

/// What the engine's end means for the run's sandbox: with `stop_on_terminal` and a
/// terminal run, every process still in the sandbox is killed (`isolation`'s groups, where
/// it has them) and the sandbox removed, recorded as `sandbox.cleanup.completed{reason:
/// "stop_on_terminal"}`. A removal that fails is logged and left to [`sweep`], which retries
/// it (the run's retention is then zero). Returns whether it was removed.
pub fn after_run(
    store: &dyn RunStore,
    row: &RunRow,
    state_dir: &Path,
    isolation: &Isolation,
) -> bool {
    if !row.status.is_terminal() || !lifecycle_of(row).stop_on_terminal {
        return false;
    }
    if row.sandbox.removed.is_some() {
        return false;
    }
    let began = Instant::now();
    let killed = isolation.limits().map_or(0, |l| {
        let n = l.count();
        l.kill_all();
        n
    });
    match remove(state_dir, &row.id) {
        Ok(()) => {
            let _ = append(
                store,
                &row.id,
                event_kind::SANDBOX_CLEANUP_COMPLETED,
                json!({"provider": plan_provider(row), "identifier": Inventory::id_for(&row.id),
                       "reason": "stop_on_terminal", "processes_killed": killed,
                       "duration_ms": began.elapsed().as_millis() as u64}),
            );
            true
        }
        Err(e) => {
            log::warn!(
                "run {}: its environment stops the sandbox when the run ends, but it cannot be removed: {e}; the sweep retries",
                row.id
            );
            false
        }
    }
}

fn plan_provider(row: &RunRow) -> &str {
    row.created_meta
        .get("sandbox")
        .and_then(|s| s.get("provider"))
        .and_then(Value::as_str)
        .unwrap_or("local")
}

/// Removes the sandboxes whose run is gone, or ended longer than its retention ago
/// ([`run_retention_ms`])
/// (recording `sandbox.cleanup.completed` on the run). Returns how many were removed.
pub fn sweep(store: &dyn RunStore, state_dir: &Path, defaults: &Defaults, now_ms: i64) -> usize {
    let inv = inventory(state_dir);
    let mut removed = 0;
    for provider in ProviderKind::ALL {
        let Ok(records) = inv.list(provider) else {
            continue;
        };
        for rec in records {
            let row = match store.get_run(&rec.run_id) {
                Ok(r) => r,
                Err(_) => continue,
            };
            let expired = match &row {
                None => true,
                Some(r) => {
                    let keep = run_retention_ms(r, defaults);
                    r.status.is_terminal()
                        && r.completed_at
                            .as_deref()
                            .and_then(crate::base::clock::parse_ts)
                            .is_some_and(|done| now_ms.saturating_sub(done) >= keep)
                }
            };
            if !expired {
                continue;
            }
            let began = Instant::now();
            match remove(state_dir, &rec.run_id) {
                Ok(()) => {
                    removed += 1;
                    if row.is_some() {
                        let _ = append(
                            store,
                            &rec.run_id,
                            event_kind::SANDBOX_CLEANUP_COMPLETED,
                            json!({"provider": rec.provider, "identifier": rec.id,
                                   "reason": "retention",
                                   "duration_ms": began.elapsed().as_millis() as u64}),
                        );
                    }
                }
                Err(e) => log::warn!("sandbox {}: cannot remove it: {e}", rec.id),
            }
        }
    }
    removed
}
