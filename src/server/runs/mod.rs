//! Runs: creation, listing, lifecycle controls, human answers, events and SSE, plus the
//! scheduler and the engine worker pool.
//!
//! - [`lifecycle`] decides (pure), this module appends: every control reads the row, plans,
//!   and appends under one gate shared with the engine's appends (`store::HookedStore` with a gate) and
//!   the scheduler's promotions, so no check-then-append ever races.
//! - The scheduler thread promotes `runnable` runs to `starting`, oldest first (ULID order =
//!   creation order), while fewer than `server.scheduler.max_concurrent_runs` (read live)
//!   hold a slot ([`lifecycle::holds_slot`]). It wakes on every start, approval, cancel,
//!   run end and settings change (a channel), with a 1 s fallback tick.
//! - Promoted runs go over a crossbeam channel to a pool of engine worker threads (grown to
//!   the concurrency limit, never shrunk). Each live run has a [`RunHandle`]: its cancel
//!   token (cancel/pause/unpause reach running stages), its open human questions and its
//!   agent steering queue ([`mod@steer`]).
//! - At startup, runs found holding a slot were orphaned by the previous process (crash,
//!   kill -9): each gets `run.interrupted`, then, unless `[server.recovery]
//!   resume_interrupted = false`, `run.starting` and a worker that resumes it from its last
//!   checkpoint (the stage in flight runs again from its start; a paused run resumes paused),
//!   before the scheduler promotes any queued run. Otherwise, or with a cancel pending, it is
//!   failed with reason `terminated` (`cancelled`) and can be resumed with
//!   `start {"resume": true}`. Runnable runs stay queued, in order, across restarts. The
//!   server sweeps the previous process's stage processes (`procs::sweep`) before this.
//!
//! - [`usage`] serves `GET /runs/{id}/usage` from the run's stage events.
//!
//! Owns: the runs API and run scheduling. Must not touch: SQL (through `RunStore` only),
//! workflow parsing beyond `workflow::load`, engine internals.

pub mod exec;
pub mod files;
pub mod interviewer;
pub mod lifecycle;
pub mod retry;
pub mod sandbox;
pub mod sse;
pub mod stages;
pub mod steer;
pub mod usage;
pub mod view;

use super::error::ApiError;
use super::http::{parse_json, Reply};
use super::router::Ctx;
use super::versions::{GraphSummary, Package, Version, VersionStore};
use super::App;
use crate::settings::SettingsHandle;
use crate::store::{
    is_canonical_ulid, EventDraft, NewRun, RunQuery, RunRow, RunStatus, RunStore, StoreError,
    WorkflowMeta,
};
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use exec::{Executor, Job};
pub use interviewer::RunHandle;
use lifecycle::{Plan, Signal};
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What [`Runs::recover`] did with the runs the previous process left active.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    pub resumed: usize,
    pub failed: usize,
}
/// How often the scheduler removes sandboxes past their retention.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// The runs service: store, live runs, scheduler and workers.
pub struct Runs {
    pub store: Arc<dyn RunStore>,
    gated: Arc<dyn RunStore>,
    gate: Arc<Mutex<()>>,
    active: Mutex<HashMap<String, Arc<RunHandle>>>,
    wake_tx: Sender<()>,
    wake_rx: Receiver<()>,
    jobs_tx: Sender<Job>,
    jobs_rx: Receiver<Job>,
    workers: AtomicUsize,
    executor: Arc<dyn Executor>,
    settings: SettingsHandle,
    state_dir: PathBuf,
    versions: Arc<VersionStore>,
    stop: AtomicBool,
    me: std::sync::Weak<Runs>,
}

pub fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::NotFound { run_id } => ApiError::not_found(format!("No run with id {run_id}.")),
        StoreError::Tombstoned { run_id, .. } => {
            ApiError::not_found(format!("Run {run_id} was deleted."))
        }
        StoreError::InvalidRunId { run_id } => {
            ApiError::bad_request(format!("Invalid run ID `{run_id}`."))
        }
        other => ApiError::internal(format!("Run store failure: {other}")),
    }
}

fn system_actor() -> Value {
    json!({"kind": "system", "system_kind": "engine"})
}

impl Runs {
    pub fn new(
        store: Arc<dyn RunStore>,
        executor: Arc<dyn Executor>,
        settings: SettingsHandle,
        state_dir: PathBuf,
        versions: Arc<VersionStore>,
    ) -> Arc<Runs> {
        let gate = Arc::new(Mutex::new(()));
        let gated: Arc<dyn RunStore> = Arc::new(crate::store::HookedStore {
            inner: Arc::clone(&store),
            gate: Some(Arc::clone(&gate)),
            observer: None,
        });
        let (wake_tx, wake_rx) = bounded(1);
        let (jobs_tx, jobs_rx) = unbounded();
        let runs = Arc::new_cyclic(|me| Runs {
            me: me.clone(),
            store,
            gated,
            gate,
            active: Mutex::new(HashMap::new()),
            wake_tx,
            wake_rx,
            jobs_tx,
            jobs_rx,
            workers: AtomicUsize::new(0),
            executor,
            settings: settings.clone(),
            state_dir,
            versions,
            stop: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&runs);
        settings.on_change(move |_, _| {
            if let Some(r) = weak.upgrade() {
                r.wake();
            }
        });
        runs
    }

    /// Deals with runs left holding a slot by a previous process (see the module docs):
    /// with `resume` they are resumed from their last checkpoint (oldest first, before the
    /// scheduler promotes anything queued), else failed with reason `terminated`. A run with a
    /// pending cancel, or one being removed, is failed either way.
    pub fn recover(&self, resume: bool) -> Result<Recovered, StoreError> {
        let rows = self.store.query_runs(&RunQuery {
            statuses: lifecycle::SLOT_STATUSES
                .iter()
                .map(|s| s.to_string())
                .collect(),
            oldest_first: true,
            limit: 1_000_000,
            ..RunQuery::default()
        })?;
        let mut done = Recovered::default();
        let mut launches = Vec::new();
        for row in &rows {
            let plan = lifecycle::interrupted(row, resume);
            for draft in plan.events {
                self.store.append(&row.id, draft)?;
            }
            self.orphan_waiting_children(&row.id)?;
            if !plan.resume {
                log::warn!(
                    "run {} was {} when the server stopped: failed",
                    row.id,
                    row.status.name()
                );
                done.failed += 1;
                continue;
            }
            log::warn!(
                "run {} was {} when the server stopped: resuming it from its last checkpoint",
                row.id,
                row.status.name()
            );
            if let Some(fresh) = self.store.get_run(&row.id)? {
                launches.push((fresh, plan.paused));
            }
        }
        let max = self.settings.get().server.scheduler.max_concurrent_runs;
        let workers = max.max(launches.len());
        for (row, paused) in launches {
            done.resumed += 1;
            self.launch_with(row, workers, true, paused);
        }
        Ok(done)
    }

    /// The children of an interrupted run that wait for approval can never run: the engine
    /// that waited for them is gone, and a resumed manager stage runs again from its start,
    /// creating (and asking approval for) a new child. They become `dead`, saying so.
    fn orphan_waiting_children(&self, parent: &str) -> Result<(), StoreError> {
        let children = self.store.query_runs(&RunQuery {
            statuses: vec!["pending".to_string()],
            parent_id: Some(parent.to_string()),
            limit: 1_000_000,
            ..RunQuery::default()
        })?;
        for child in children {
            let why = format!(
                "its parent run {parent} was interrupted by a server stop while it waited for \
                 approval (a resumed manager stage asks again with a new child run)"
            );
            self.store.append(
                &child.id,
                EventDraft::new("run.dead", json!({"reason": "parent_ended", "error": why})),
            )?;
        }
        Ok(())
    }

    /// Starts the scheduler thread.
    pub fn start_scheduler(self: &Arc<Self>) -> std::io::Result<()> {
        let me = Arc::clone(self);
        std::thread::Builder::new()
            .name("scheduler".into())
            .spawn(move || me.scheduler_loop())?;
        self.wake();
        Ok(())
    }

    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Asks the scheduler to look again (coalesced).
    pub fn wake(&self) {
        let _ = self.wake_tx.try_send(());
    }

    /// Wakes the scheduler unless every slot is held. Why that is enough: a promotion needs
    /// a free slot, and whatever frees one (a run ending, a delete, a cancel before the run
    /// started, a higher limit) wakes the scheduler itself after its commit. Skipping the wake
    /// spares a thread switch and a gate acquisition on every start while the slots are full.
    fn wake_if_slot_free(&self) {
        let max = self.settings.get().server.scheduler.max_concurrent_runs;
        if self.slot_holders().map_or(true, |held| held < max) {
            self.wake();
        }
    }

    fn scheduler_loop(self: Arc<Self>) {
        let mut last_sweep: Option<std::time::Instant> = None;
        loop {
            crossbeam_channel::select! {
                recv(self.wake_rx) -> _ => {}
                default(Duration::from_secs(1)) => {}
            }
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.promote())) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => log::error!("scheduler: {e}"),
                Err(_) => log::error!("scheduler: promotion panicked; retrying on the next wake"),
            }
            if last_sweep.is_none_or(|t| t.elapsed() >= SWEEP_EVERY) {
                last_sweep = Some(std::time::Instant::now());
                let settings = self.settings.get();
                let now = view::parse_ts(&crate::store::now()).unwrap_or(0);
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    sandbox::sweep(self.gated.as_ref(), &self.state_dir, &settings, now)
                }));
            }
        }
    }

    /// Number of runs holding a slot: an indexed count over [`lifecycle::SLOT_STATUSES`],
    /// the status names [`lifecycle::holds_slot`] accepts (a unit test keeps them equal).
    pub fn slot_holders(&self) -> Result<usize, StoreError> {
        self.store.count_runs(&RunQuery {
            statuses: lifecycle::SLOT_STATUSES
                .iter()
                .map(|s| s.to_string())
                .collect(),
            ..RunQuery::default()
        })
    }

    fn promote(&self) -> Result<(), StoreError> {
        let max = self.settings.get().server.scheduler.max_concurrent_runs;
        let _g = self.gate.lock();
        let holders = self.slot_holders()?;
        if holders >= max {
            return Ok(());
        }
        let rows = self.store.query_runs(&RunQuery {
            statuses: vec!["runnable".into()],
            oldest_first: true,
            limit: max - holders,
            ..RunQuery::default()
        })?;
        for row in rows {
            let row = self
                .store
                .append(
                    &row.id,
                    EventDraft::new("run.starting", json!({})).actor(system_actor()),
                )
                .and_then(|_| self.store.get_run(&row.id))?;
            let Some(row) = row else { continue };
            self.launch(row, max);
        }
        Ok(())
    }

    fn launch(&self, row: RunRow, max: usize) {
        self.launch_with(row, max, false, false)
    }

    /// Hands a `starting` run to a worker (growing the pool to `max`). `recovery`: it was
    /// interrupted by the last stop; `paused`: it was paused then, and resumes paused.
    fn launch_with(&self, row: RunRow, max: usize, recovery: bool, paused: bool) {
        let handle = Arc::new(RunHandle::new());
        if paused {
            handle.cancel.pause();
        }
        self.active
            .lock()
            .insert(row.id.clone(), Arc::clone(&handle));
        let version = row
            .workflow
            .version_id
            .as_deref()
            .and_then(|id| self.versions.get(id).ok().flatten());
        let workdir = sandbox::workspaces_dir(&self.state_dir).join(&row.id);
        // Run data: private to the owner (the workspaces directory 0700; each run's
        // workspace is made inside it when its sandbox starts).
        if let Err(e) = crate::perms::private_dir(&sandbox::workspaces_dir(&self.state_dir)) {
            log::warn!(
                "run {}: cannot create the workspaces directory: {e}",
                row.id
            );
        }
        while self.workers.load(Ordering::SeqCst) < max {
            let rx = self.jobs_rx.clone();
            let me = self.me.clone();
            self.workers.fetch_add(1, Ordering::SeqCst);
            let spawned = std::thread::Builder::new()
                .name("engine-worker".into())
                .spawn(move || {
                    for job in rx.iter() {
                        match me.upgrade() {
                            Some(runs) => runs.run_job(job),
                            None => return,
                        }
                    }
                });
            if let Err(e) = spawned {
                self.workers.fetch_sub(1, Ordering::SeqCst);
                log::error!("cannot start an engine worker: {e}");
                break;
            }
        }
        // Registered dependencies: child workflows named by their id or entry path.
        let deps = version
            .as_ref()
            .map(|v| {
                v.package
                    .dependencies
                    .iter()
                    .filter_map(|d| self.versions.get(d).ok().flatten())
                    .collect()
            })
            .unwrap_or_default();
        let job = Job {
            row,
            version,
            deps,
            handle,
            workdir,
            store: Arc::clone(&self.gated),
            recovery,
        };
        if let Err(e) = self.jobs_tx.send(job) {
            log::error!("cannot dispatch a run: {e}");
        }
    }

    fn run_job(&self, job: Job) {
        let id = job.row.id.clone();
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.executor.execute(&job)));
        let problem = match &result {
            Ok(()) => "the engine stopped without finishing the run".to_string(),
            Err(p) => format!(
                "the engine panicked: {}",
                p.downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default()
            ),
        };
        {
            let _g = self.gate.lock();
            if let Ok(Some(row)) = self.store.get_run(&id) {
                if !row.status.is_terminal() {
                    let _ = self.store.append(
                        &id,
                        EventDraft::new(
                            "run.failed",
                            json!({"reason": "workflow_error", "error": problem, "causes": [], "duration_ms": 0}),
                        )
                        .actor(system_actor()),
                    );
                }
            }
        }
        self.active.lock().remove(&id);
        self.wake();
    }

    /// Removes a deleted run's sandbox and workspace: at once when no engine runs it, else
    /// once its worker lets go of it (a cancelled stage is killed within seconds).
    fn remove_sandbox_when_idle(&self, run_id: &str) {
        let Some(me) = self.me.upgrade() else { return };
        let id = run_id.to_string();
        let spawned = std::thread::Builder::new()
            .name("sandbox-remove".into())
            .spawn(move || {
                for _ in 0..600 {
                    if me.handle(&id).is_none() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                if let Err(e) = sandbox::remove(&me.state_dir, &id) {
                    log::warn!("run {id}: cannot remove its sandbox: {e}");
                }
            });
        if let Err(e) = spawned {
            log::warn!("run {run_id}: cannot start the sandbox removal: {e}");
        }
    }

    pub fn handle(&self, run_id: &str) -> Option<Arc<RunHandle>> {
        self.active.lock().get(run_id).cloned()
    }

    /// The run `id`, or the API error a request about it gets (400, 404).
    pub fn get_row(&self, id: &str) -> Result<RunRow, ApiError> {
        self.row(id)
    }

    fn row(&self, id: &str) -> Result<RunRow, ApiError> {
        check_id(id)?;
        match self.store.get_run(id).map_err(store_error)? {
            Some(r) => Ok(r),
            None => Err(match self.store.tombstone(id) {
                Ok(Some(_)) => ApiError::not_found(format!("Run {id} was deleted.")),
                _ => ApiError::not_found(format!("No run with id {id}.")),
            }),
        }
    }

    /// Reads the row, plans a control and appends its events, all under the gate; then
    /// signals the live engine and wakes the scheduler.
    fn control(
        &self,
        id: &str,
        actor: &Value,
        f: impl Fn(&RunRow, &Value) -> Result<Plan, ApiError>,
    ) -> Result<RunRow, ApiError> {
        check_id(id)?;
        let (plan, row) = {
            // The gate keeps the scheduler's promotions and the engine's appends out; the
            // store reads the row, lets the transition decide, and appends in one step.
            let _g = self.gate.lock();
            let mut decided: Option<Result<Plan, ApiError>> = None;
            let (row, _) = self
                .store
                .append_decided(id, &mut |row| {
                    let plan = f(row, actor);
                    let events = plan.as_ref().map(|p| p.events.clone()).unwrap_or_default();
                    decided = Some(plan);
                    events
                })
                .map_err(store_error)?;
            let plan =
                decided.unwrap_or_else(|| Err(ApiError::internal("no decision was made")))?;
            (plan, row)
        };
        if let (Some(sig), Some(h)) = (plan.signal, self.handle(id)) {
            match sig {
                Signal::Cancel => h.cancel.cancel("cancelled by request"),
                Signal::Pause => h.cancel.pause(),
                Signal::Unpause => h.cancel.unpause(),
            }
        }
        if plan.wake {
            self.wake_if_slot_free();
        }
        Ok(row)
    }

    /// 1-based position among runnable runs (scheduler order = ULID order), for runnable
    /// runs: one indexed count of the runnable runs created before it.
    fn queue_position(&self, row: &RunRow) -> Option<usize> {
        if row.status != RunStatus::Runnable {
            return None;
        }
        let ahead = self
            .store
            .count_runs(&RunQuery {
                statuses: vec!["runnable".into()],
                id_below: Some(row.id.clone()),
                ..RunQuery::default()
            })
            .ok()?;
        Some(ahead + 1)
    }

    /// The queue position and children count a Run view shows.
    fn view_counts(&self, row: &RunRow) -> (Option<usize>, usize) {
        // Children are made by a run's own stages: one that never started has none.
        let children = if row.started_at.is_none() {
            0
        } else {
            self.store
                .count_runs(&RunQuery {
                    parent_id: Some(row.id.clone()),
                    ..RunQuery::default()
                })
                .unwrap_or(0)
        };
        (self.queue_position(row), children)
    }

    /// The full Run JSON of `row`.
    pub fn run_json(&self, row: &RunRow) -> Value {
        let (queue, children) = self.view_counts(row);
        view::run_json(
            row,
            &row.created_meta,
            queue,
            children,
            &self.settings.get(),
        )
    }

    /// A response carrying the full Run of `row`, serialised straight from the row.
    pub fn run_reply(&self, status: u16, row: &RunRow) -> Reply {
        let (queue, children) = self.view_counts(row);
        let settings = self.settings.get();
        Reply::json_of(
            status,
            &view::run_view(row, &row.created_meta, queue, children, &settings),
        )
    }
}

fn check_id(id: &str) -> Result<(), ApiError> {
    if is_canonical_ulid(id) {
        Ok(())
    } else {
        Err(
            ApiError::bad_request(format!("Invalid run ID `{id}`: expected a ULID."))
                .with_code("invalid_run_id"),
        )
    }
}

fn actor_of(ctx: &Ctx<'_, '_>) -> Value {
    ctx.principal
        .clone()
        .unwrap_or_else(|| crate::auth::Principal::dev().to_json())
}

/// `page[limit]` (default 20, clamped 1-100) and `page[offset]` (default 0, min 0, max 1e6).
pub fn page(ctx: &Ctx<'_, '_>) -> Result<(usize, usize), ApiError> {
    let int = |name: &str| int_query(ctx, name);
    let limit = int("page[limit]")?.unwrap_or(20).clamp(1, 100) as usize;
    let offset = int("page[offset]")?.unwrap_or(0).clamp(0, 1_000_000) as usize;
    Ok((limit, offset))
}

/// An integer query parameter; integers beyond i64 saturate (every integer parameter is
/// clamped to a small range anyway), anything else is 400.
pub fn int_query(ctx: &Ctx<'_, '_>, name: &str) -> Result<Option<i64>, ApiError> {
    let Some(v) = ctx.inc.query(name) else {
        return Ok(None);
    };
    let v = v.trim();
    if let Ok(n) = v.parse::<i64>() {
        return Ok(Some(n));
    }
    let digits = v.strip_prefix(['-', '+']).unwrap_or(v);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(Some(if v.starts_with('-') {
            i64::MIN
        } else {
            i64::MAX
        }));
    }
    Err(ApiError::bad_request(format!(
        "Query parameter {name} must be an integer."
    )))
}

/// A boolean query parameter: `true` or `false` (absent means false); anything else is 400.
fn bool_query(ctx: &Ctx<'_, '_>, name: &str) -> Result<bool, ApiError> {
    match ctx.inc.query(name).as_deref() {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "Query parameter {name} must be true or false, not `{other}`."
        ))),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelReq {
    #[serde(default)]
    provider: Option<String>,
    name: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SandboxReq {
    provider: String,
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    snapshot: Option<String>,
    /// Container processes may use the network (default `[run.sandbox] network`).
    #[serde(default)]
    network: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RepositoryReq {
    origin_url: String,
    #[serde(default)]
    branch: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateRun {
    #[serde(default)]
    workflow: Option<Package>,
    #[serde(default)]
    workflow_version_id: Option<String>,
    #[serde(default)]
    goal: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    inputs: Option<Map<String, Value>>,
    #[serde(default)]
    model: Option<ModelReq>,
    #[serde(default)]
    sandbox: Option<SandboxReq>,
    #[serde(default)]
    repository: Option<RepositoryReq>,
    #[serde(default)]
    source_directory: Option<String>,
    /// Work in `source_directory` itself instead of a copy (explicit opt-in).
    #[serde(default)]
    in_place: bool,
}

/// The `run.created` keys `workspace` (where the files come from), `repository`
/// (RepositoryRef) and the source directory, from the request or `[run] repository`.
fn workspace_request(
    repository: Option<RepositoryReq>,
    source_directory: Option<String>,
    in_place: bool,
    defaults: &crate::settings::RunDefaults,
) -> Result<(Value, Value, Option<String>), ApiError> {
    if in_place && source_directory.is_none() {
        return Err(ApiError::bad_request(
            "`in_place` needs a `source_directory` to work in.",
        ));
    }
    let repository = repository.or_else(|| {
        if source_directory.is_some() {
            return None;
        }
        defaults.repository.as_ref().map(|r| RepositoryReq {
            origin_url: r.origin_url.clone(),
            branch: r.branch.clone(),
        })
    });
    match (repository, source_directory) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "Send at most one of `repository` and `source_directory`.",
        )),
        (Some(r), None) => {
            let origin = r.origin_url.trim().to_string();
            if origin.is_empty() || origin.starts_with('-') {
                return Err(ApiError::bad_request(
                    "repository.origin_url is empty or invalid.",
                ));
            }
            if r.branch
                .as_deref()
                .is_some_and(|b| b.trim().is_empty() || b.starts_with('-'))
            {
                return Err(ApiError::bad_request(
                    "repository.branch is empty or invalid.",
                ));
            }
            let (name, provider) = crate::workspace::repository_name(&origin);
            Ok((
                json!({"kind": "repository", "origin_url": origin, "branch": r.branch}),
                json!({"name": name, "origin_url": origin, "provider": provider}),
                None,
            ))
        }
        (None, Some(dir)) => {
            let path = std::path::Path::new(&dir);
            if !path.is_absolute() {
                return Err(ApiError::bad_request(format!(
                    "source_directory `{dir}` is not an absolute path."
                )));
            }
            if !path.is_dir() {
                return Err(ApiError::bad_request(format!(
                    "source_directory `{dir}` is not a directory on the server host."
                )));
            }
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "unknown".into());
            let provider = if crate::workspace::Git::is_repository(path) {
                "git"
            } else {
                "unknown"
            };
            Ok((
                json!({"kind": "directory", "path": dir, "in_place": in_place}),
                json!({"name": name, "origin_url": null, "provider": provider}),
                Some(dir),
            ))
        }
        (None, None) => Ok((json!({"kind": "scratch"}), Value::Null, None)),
    }
}

/// Title from a goal: first line, decoration stripped, at most 100 chars (97 + `...`).
fn title_from(goal: &str) -> String {
    let line = goal
        .lines()
        .map(|l| {
            l.trim()
                .trim_start_matches(['#', '*', '-', '>', ' '])
                .trim()
        })
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if line.chars().count() <= 100 {
        line.to_string()
    } else {
        format!("{}...", line.chars().take(97).collect::<String>())
    }
}

fn workflow_meta(v: &Arc<Version>) -> Result<(WorkflowMeta, String), ApiError> {
    let summary = match v.summary.get() {
        Some(s) => s.clone(),
        None => {
            let s = summarize(v)?;
            let _ = v.summary.set(s.clone());
            s
        }
    };
    let entry = &v.package.entrypoint;
    let slug = std::path::Path::new(entry)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned());
    Ok((
        WorkflowMeta {
            name: Some(summary.name.clone()),
            slug,
            graph_name: Some(summary.name),
            node_count: summary.node_count,
            edge_count: summary.edge_count,
            source: v.source().to_string(),
            path: Some(entry.clone()),
            version_id: Some(v.id.clone()),
        },
        summary.goal,
    ))
}

/// Parses a version's entry graph for its name, goal and size.
fn summarize(v: &Arc<Version>) -> Result<GraphSummary, ApiError> {
    let files = exec::VersionFiles {
        version: Arc::clone(v),
        deps: Vec::new(),
    };
    let loaded = crate::workflow::load(v.source(), &files).map_err(|e| {
        ApiError::unprocessable(format!("The workflow does not parse: {}", e.message))
    })?;
    let wf = &loaded.workflow;
    Ok(GraphSummary {
        name: wf.name().to_string(),
        goal: wf.goal().to_string(),
        node_count: wf.graph.nodes.len() as i64,
        edge_count: wf.graph.edges.len() as i64,
    })
}

pub fn create(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let body: CreateRun = parse_json(ctx.inc.body()?)?;
    let version = match (body.workflow, body.workflow_version_id) {
        (Some(pkg), None) => app.versions.register(pkg)?.0,
        (None, Some(id)) => app
            .versions
            .get(&id)?
            .ok_or_else(|| ApiError::not_found(format!("No workflow version with id `{id}`.")))?,
        _ => {
            return Err(ApiError::bad_request(
                "Send exactly one of `workflow` (a package) or `workflow_version_id`.",
            ))
        }
    };
    if let Some(sb) = &body.sandbox {
        if !matches!(sb.provider.as_str(), "local" | "container" | "hosted") {
            return Err(ApiError::bad_request(format!(
                "sandbox.provider `{}` is not local, container or hosted.",
                sb.provider
            )));
        }
    }
    if body
        .model
        .as_ref()
        .is_some_and(|m| m.name.trim().is_empty())
    {
        return Err(ApiError::bad_request("model.name is empty."));
    }
    let settings = app.settings.get();
    let defaults = &settings.run;
    let (workflow, graph_goal) = workflow_meta(&version)?;
    let goal = body
        .goal
        .or_else(|| defaults.goal.clone())
        .unwrap_or(graph_goal);
    let title = body
        .title
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| {
            let t = title_from(&goal);
            if t.is_empty() {
                workflow.name.clone().unwrap_or_else(|| "unnamed".into())
            } else {
                t
            }
        });
    let mut labels = defaults.metadata.clone();
    labels.extend(body.labels.unwrap_or_default());
    let mut inputs: Map<String, Value> = defaults
        .inputs
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), serde_json::to_value(v).ok()?)))
        .collect();
    inputs.extend(body.inputs.unwrap_or_default());
    let model = body
        .model
        .map(|m| json!({"provider": m.provider, "name": m.name}))
        .or_else(|| {
            defaults
                .model
                .as_ref()
                .map(|m| json!({"provider": m.provider, "name": m.name}))
        });
    let (workspace, repository, source_directory) = workspace_request(
        body.repository,
        body.source_directory,
        body.in_place,
        defaults,
    )?;
    let sandbox_defaults = defaults
        .sandbox
        .clone()
        .unwrap_or_else(crate::settings::SandboxDefault::defaults);
    // Every server run has a sandbox: the request's, else `[run.sandbox]`, else local.
    let sandbox = Some(match body.sandbox {
        Some(s) => json!({"provider": s.provider, "image": s.image, "snapshot": s.snapshot,
                          "network": s.network.unwrap_or(sandbox_defaults.network)}),
        None => json!({"provider": sandbox_defaults.provider, "image": sandbox_defaults.image,
                       "snapshot": sandbox_defaults.snapshot, "network": sandbox_defaults.network}),
    });
    let new = NewRun {
        id: None,
        title,
        goal,
        labels,
        workflow,
        working_dir: source_directory,
        inputs: Value::Object(inputs),
        parent_id: None,
        extra: json!({
            "created_by": actor_of(ctx),
            "origin": {"kind": "api"},
            "models": model.map(|m| vec![m]).unwrap_or_default(),
            "sandbox": sandbox,
            "workspace": workspace,
            "repository": repository,
        }),
    };
    let row = app.runs.store.create_run(new).map_err(store_error)?;
    Ok(app.runs.run_reply(201, &row))
}

pub fn list(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let (limit, offset) = page(ctx)?;
    let include_archived = bool_query(ctx, "include_archived")?;
    let rows = app
        .runs
        .store
        .query_runs(&RunQuery {
            exclude_archived: !include_archived,
            statuses: RunStatus::NAMES
                .iter()
                .filter(|s| **s != "removing")
                .map(|s| s.to_string())
                .collect(),
            offset,
            limit: limit + 1,
            ..RunQuery::default()
        })
        .map_err(store_error)?;
    let has_more = rows.len() > limit;
    let data: Vec<Value> = rows
        .iter()
        .take(limit)
        .filter_map(view::board_item)
        .collect();
    Ok(Reply::json(
        200,
        &json!({"data": data, "meta": {"has_more": has_more}}),
    ))
}

pub fn get(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.row(ctx.param("id"))?;
    Ok(app.runs.run_reply(200, &row))
}

pub fn delete(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let id = ctx.param("id").to_string();
    check_id(&id)?;
    let force = bool_query(ctx, "force")?;
    let runs = &app.runs;
    {
        let _g = runs.gate.lock();
        match runs.store.get_run(&id).map_err(store_error)? {
            Some(row) if !row.status.is_terminal() && !force => {
                return Err(ApiError::conflict(format!(
                    "Run {id} is {}; cancel it first or delete with ?force=true.",
                    row.status.name()
                )))
            }
            Some(_) => {}
            None => {
                if runs.store.tombstone(&id).map_err(store_error)?.is_some() {
                    return Ok(Reply::empty(204));
                }
                return Err(ApiError::not_found(format!("No run with id {id}.")));
            }
        }
        runs.store.delete_run(&id).map_err(store_error)?;
    }
    if let Some(h) = runs.handle(&id) {
        h.cancel.cancel("run deleted");
    }
    runs.wake();
    runs.remove_sandbox_when_idle(&id);
    Ok(Reply::empty(204))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StartBody {
    #[serde(default)]
    resume: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DenyBody {
    #[serde(default)]
    reason: Option<String>,
}

/// A bodiless control route: apply one lifecycle transition to the run named in the path.
fn apply_control(
    app: &App,
    ctx: &mut Ctx<'_, '_>,
    transition: fn(&RunRow, &Value) -> Result<Plan, ApiError>,
) -> Result<Reply, ApiError> {
    let actor = actor_of(ctx);
    let row = app.runs.control(ctx.param("id"), &actor, transition)?;
    control_reply(app, row)
}

fn control_reply(app: &App, row: RunRow) -> Result<Reply, ApiError> {
    Ok(app.runs.run_reply(200, &row))
}

pub fn start(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let body: StartBody = ctx.inc.json_or_default()?;
    let actor = actor_of(ctx);
    let row = app.runs.control(ctx.param("id"), &actor, |r, a| {
        lifecycle::start(r, body.resume, a)
    })?;
    control_reply(app, row)
}

pub fn cancel(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    apply_control(app, ctx, lifecycle::cancel)
}

pub fn pause(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    apply_control(app, ctx, lifecycle::pause)
}

pub fn unpause(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    apply_control(app, ctx, lifecycle::unpause)
}

pub fn archive(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    apply_control(app, ctx, lifecycle::archive)
}

pub fn unarchive(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    apply_control(app, ctx, lifecycle::unarchive)
}

pub fn approve(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    // No fields are defined, but a body must still be an object.
    let _: Map<String, Value> = ctx.inc.json_or_default()?;
    let actor = actor_of(ctx);
    let id = ctx.param("id").to_string();
    check_id(&id)?;
    if let Some(parent) = ended_parent(app, &id)? {
        // Nobody waits for this child any more: it can never run.
        let why = format!("its parent run {parent} ended while it waited for approval");
        let dead = EventDraft::new("run.dead", json!({"reason": "parent_ended", "error": why}))
            .actor(actor.clone());
        app.runs.control(&id, &actor, |r, _| match &r.status {
            RunStatus::Pending { .. } => Ok(lifecycle::Plan {
                events: vec![dead.clone()],
                ..lifecycle::Plan::default()
            }),
            _ => Ok(lifecycle::Plan::default()),
        })?;
        return Err(ApiError::conflict(format!(
            "Run {id} cannot be approved: {why}."
        )));
    }
    let row = app.runs.control(&id, &actor, lifecycle::approve)?;
    control_reply(app, row)
}

/// A manager's child (created by a worker) whose parent run has ended: its engine no longer
/// waits for the approval. Returns the parent's id.
fn ended_parent(app: &App, id: &str) -> Result<Option<String>, ApiError> {
    let row = app.runs.row(id)?;
    let by_worker = row
        .created_meta
        .get("created_by")
        .and_then(|c| c.get("kind"))
        .and_then(Value::as_str)
        == Some("worker");
    let Some(parent) = row.parent_id.filter(|_| by_worker) else {
        return Ok(None);
    };
    let ended = match app.runs.store.get_run(&parent).map_err(store_error)? {
        Some(p) => p.status.is_terminal(),
        None => true,
    };
    Ok(ended.then_some(parent))
}

pub fn deny(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let body: DenyBody = ctx.inc.json_or_default()?;
    let actor = actor_of(ctx);
    let row = app.runs.control(ctx.param("id"), &actor, |r, a| {
        lifecycle::deny(r, body.reason.as_deref(), a)
    })?;
    control_reply(app, row)
}

pub fn questions(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.row(ctx.param("id"))?;
    let data: Vec<Value> = row.questions.iter().map(view::question_item).collect();
    Ok(Reply::json(
        200,
        &json!({"data": data, "meta": {"has_more": false}}),
    ))
}

pub fn answer(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let body: interviewer::SubmitAnswer = parse_json(ctx.inc.body()?)?;
    let id = ctx.param("id").to_string();
    let qid = ctx.param("qid").to_string();
    let row = app.runs.row(&id)?;
    if row.archived {
        return Err(ApiError::conflict(format!("Run {id} is archived.")));
    }
    let listed = row
        .questions
        .iter()
        .any(|q| q.get("question_id").and_then(Value::as_str) == Some(qid.as_str()));
    match &row.status {
        RunStatus::Running | RunStatus::Blocked { .. } => {}
        RunStatus::Paused { .. } => {
            return Err(ApiError::conflict(format!(
                "Run {id} is paused; unpause it before answering."
            )))
        }
        s => {
            return Err(ApiError::conflict(format!(
                "Run {id} is {}; only a running run can take answers.",
                s.name()
            )))
        }
    }
    let handle = app
        .runs
        .handle(&id)
        .ok_or_else(|| ApiError::conflict(format!("Run {id} has no live engine to answer.")))?;
    handle.answer(&qid, &body, listed)?;
    Ok(Reply::empty(204))
}

pub fn events(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let id = ctx.param("id").to_string();
    app.runs.row(&id)?;
    let int = |name: &str| int_query(ctx, name);
    let since = int("since_seq")?.unwrap_or(1).max(1) as u64;
    let limit = int("limit")?.unwrap_or(100).clamp(1, 1000) as usize;
    let mut evs = app
        .runs
        .store
        .events(&id, since, limit + 1)
        .map_err(store_error)?;
    let has_more = evs.len() > limit;
    evs.truncate(limit);
    Ok(Reply::json(
        200,
        &json!({"data": evs, "meta": {"has_more": has_more}}),
    ))
}

pub fn checkpoint(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.row(ctx.param("id"))?;
    Ok(Reply::json(200, &row.checkpoint.unwrap_or(Value::Null)))
}

pub fn graph_source(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.row(ctx.param("id"))?;
    Ok(Reply::Full(rouille::Response {
        status_code: 200,
        headers: vec![(
            "Content-Type".into(),
            "text/vnd.graphviz; charset=utf-8".into(),
        )],
        data: rouille::ResponseBody::from_string(row.workflow.source),
        upgrade: None,
    }))
}

/// `GET /runs/{id}/graph?direction=lr|tb`: the workflow drawn as SVG (`crate::web::graph`);
/// the direction defaults to the graph's `rankdir`.
pub fn graph_svg(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.row(ctx.param("id"))?;
    let direction = ctx.inc.query("direction");
    graph_reply(&row.workflow.source, direction.as_deref())
}

/// The SVG response for a workflow's source (also used by demo mode).
pub fn graph_reply(source: &str, direction: Option<&str>) -> Result<Reply, ApiError> {
    use crate::web::graph;
    let parsed = crate::dot::parse(source).map_err(|e| {
        ApiError::unprocessable(format!(
            "The run's workflow does not parse: {} (line {}, column {})",
            e.message, e.pos.line, e.pos.col
        ))
    })?;
    let wf = crate::workflow::Workflow::from_graph(parsed, &crate::workflow::NoFiles);
    let dir = match direction {
        Some(d) if d.eq_ignore_ascii_case("lr") || d.eq_ignore_ascii_case("tb") => {
            graph::Direction::parse(d)
        }
        Some(d) => {
            return Err(ApiError::bad_request(format!(
                "direction must be lr or tb, not `{d}`."
            )))
        }
        None => graph::Direction::parse(wf.graph.attrs.text("rankdir").unwrap_or("TB")),
    };
    Ok(Reply::Full(rouille::Response {
        status_code: 200,
        headers: vec![("Content-Type".into(), "image/svg+xml; charset=utf-8".into())],
        data: rouille::ResponseBody::from_string(graph::svg(&wf, dir)),
        upgrade: None,
    }))
}

pub fn attach(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    sse::attach(app, ctx)
}

pub fn attach_all(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    sse::attach_all(app, ctx)
}

pub fn steer(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    steer::steer(app, ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;
    use crate::store::MemoryStore;

    struct Idle;
    impl Executor for Idle {
        fn execute(&self, _: &Job) {}
    }

    #[test]
    fn queue_positions_follow_scheduler_order() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn RunStore> = Arc::new(MemoryStore::new());
        let runs = Runs::new(
            Arc::clone(&store),
            Arc::new(Idle),
            SettingsHandle::new(Settings::default()),
            dir.path().to_path_buf(),
            Arc::new(VersionStore::in_memory().unwrap()),
        );
        let mut ids = Vec::new();
        for i in 0..37 {
            let row = store
                .create_run(NewRun {
                    title: format!("r{i}"),
                    ..NewRun::default()
                })
                .unwrap();
            if i % 3 != 0 {
                store
                    .append(&row.id, EventDraft::new("run.queued", json!({})))
                    .unwrap();
                ids.push(row.id);
            }
        }
        for (i, id) in ids.iter().enumerate() {
            let row = store.get_run(id).unwrap().unwrap();
            let v = runs.run_json(&row);
            assert_eq!(v["lifecycle"]["queue_position"], json!(i + 1), "{id}");
        }
        let submitted = store.create_run(NewRun::default()).unwrap();
        assert_eq!(
            runs.run_json(&submitted)["lifecycle"]["queue_position"],
            Value::Null
        );
    }

    #[test]
    fn an_interrupted_run_that_cannot_resume_fails_saying_why() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn RunStore> = Arc::new(MemoryStore::new());
        let settings = SettingsHandle::new(Settings::default());
        let runs = Runs::new(
            Arc::clone(&store),
            crate::server::executor(dir.path(), settings.clone()),
            settings,
            dir.path().to_path_buf(),
            Arc::new(VersionStore::in_memory().unwrap()),
        );
        let row = store
            .create_run(NewRun {
                title: "broken".into(),
                workflow: WorkflowMeta {
                    source: "digraph { start -> ".into(),
                    ..WorkflowMeta::default()
                },
                ..NewRun::default()
            })
            .unwrap();
        for kind in ["run.queued", "run.starting", "run.running"] {
            store
                .append(&row.id, EventDraft::new(kind, json!({})))
                .unwrap();
        }
        let done = runs.recover(true).unwrap();
        assert_eq!(
            done,
            Recovered {
                resumed: 1,
                failed: 0
            }
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let row = loop {
            let r = store.get_run(&row.id).unwrap().unwrap();
            if r.status.is_terminal() || std::time::Instant::now() > deadline {
                break r;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(
            row.status,
            RunStatus::Failed {
                reason: "resume_failed".into()
            }
        );
        let error = row.error.unwrap_or_default();
        assert!(
            error.contains("cannot be resumed") && error.contains("does not parse"),
            "{error}"
        );
    }
}
