//! Runs: the runs service ([`Runs`]: live runs, the gate, the scheduler and its workers) and
//! the runs API's read routes; creation, controls, scheduling and recovery have a file each.
//!
//! - [`lifecycle`] decides (pure), this module appends: every control reads the row, plans,
//!   and appends under one gate shared with the engine's appends (`store::HookedStore` with a gate) and
//!   the scheduler's promotions, so no check-then-append ever races (`control`).
//! - `create`: [`Runs::create`] makes a run from a workflow version and a [`RunSpec`] (the
//!   API, and any other caller: automations, pull requests); [`Runs::start`] queues it.
//! - `scheduler`: the scheduler thread promotes `runnable` runs to `starting`, oldest first (ULID order =
//!   creation order), while fewer than `server.scheduler.max_concurrent_runs` (read live)
//!   hold a slot ([`lifecycle::holds_slot`]). It wakes on every start, approval, cancel,
//!   run end and settings change (a channel), with a 1 s fallback tick.
//!   Promoted runs go over a crossbeam channel to a pool of engine worker threads (grown to
//!   the concurrency limit, never shrunk). Each live run has a [`RunHandle`]: its cancel
//!   token (cancel/pause/unpause reach running stages), its open human questions and its
//!   agent steering queue ([`mod@steer`]). [`turns`]: each promotion takes a ticket, so
//!   `run.running` (and `started_at`) are recorded in promotion order.
//! - `recovery`: at startup, runs found holding a slot were orphaned by the previous process (crash,
//!   kill -9): each gets `run.interrupted`, then, unless `[server.recovery]
//!   resume_interrupted = false`, `run.starting` and a worker that resumes it from its last
//!   checkpoint (the stage in flight runs again from its start; a paused run resumes paused),
//!   before the scheduler promotes any queued run. Otherwise, or with a cancel pending, it is
//!   failed with reason `terminated` (`cancelled`) and can be resumed with
//!   `start {"resume": true}`. Runnable runs stay queued, in order, across restarts. The
//!   server sweeps the previous process's stage processes (`procs::sweep`) before this.
//!
//! - [`usage`] serves `GET /runs/{id}/usage` from the run's stage events; [`answers`] the
//!   questions routes (`?wait=` long-polling, question id checks).
//!
//! Owns: the runs API and run scheduling. Must not touch: SQL (through `RunStore` only),
//! workflow parsing beyond `workflow::load`, engine internals.

pub mod answers;
pub mod artifacts;
mod control;
mod create;
pub mod exec;
pub mod files;
pub mod interviewer;
pub mod lifecycle;
mod recovery;
pub mod retry;
pub mod rewind;
mod scheduler;
pub mod sse;
pub mod stages;
pub mod steer;
pub mod turns;
pub mod usage;
pub mod view;

pub use control::{approve, archive, cancel, delete, deny, pause, start, unarchive, unpause};
pub use create::{create, ModelReq, RepositoryReq, RunSpec, SandboxReq};
pub use interviewer::RunHandle;
pub use recovery::Recovered;

use super::error::ApiError;
use super::http::Reply;
use super::router::Ctx;
use super::versions::VersionStore;
use super::App;
use crate::base::clock::is_canonical_ulid;
use crate::settings::SettingsHandle;
use crate::store::{RunQuery, RunRow, RunStatus, RunStore, StoreError};
pub use answers::{answer, questions, ChatAnswers};
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use exec::{Executor, Job};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

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
    /// Hides the vault's values, the dev token and the session secret in what users read
    /// of a run that did not pass through the engine's redaction (the `run.created`
    /// workflow source, `/files`).
    pub redactor: Arc<crate::settings::vault::VaultRedactor>,
    /// The MCP servers catalog, for the ids a run names (set once at start).
    mcp_catalog: std::sync::OnceLock<Arc<crate::catalog::Catalog<crate::mcp::catalog::McpServers>>>,
    /// Promotion tickets: `run.running` is recorded in promotion order (`turns`).
    turns: Arc<turns::Turns>,
    /// The usage ledger, for `[server] max_usd_per_day` (set once at start).
    ledger: std::sync::OnceLock<Arc<dyn crate::store::UsageLedger>>,
    /// The environments catalog runs choose their sandbox from (set at start).
    environments:
        std::sync::OnceLock<Arc<crate::catalog::Catalog<crate::environments::Environments>>>,
    /// Told of every event committed through the gated store (set once at start: chat).
    tap: Arc<std::sync::OnceLock<crate::store::Observer>>,
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
        let tap: Arc<std::sync::OnceLock<crate::store::Observer>> = Arc::default();
        let told = Arc::clone(&tap);
        let gated: Arc<dyn RunStore> = Arc::new(crate::store::HookedStore {
            inner: Arc::clone(&store),
            gate: Some(Arc::clone(&gate)),
            observer: Some(Arc::new(move |e: &crate::store::Event| {
                if let Some(f) = told.get() {
                    f(e);
                }
            })),
            appended: None,
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
            redactor: Arc::new(crate::auth::redactor(&state_dir)),
            state_dir,
            versions,
            stop: AtomicBool::new(false),
            mcp_catalog: std::sync::OnceLock::new(),
            turns: Arc::default(),
            ledger: std::sync::OnceLock::new(),
            environments: std::sync::OnceLock::new(),
            tap,
        });
        let weak = Arc::downgrade(&runs);
        settings.on_change(move |_, _| {
            if let Some(r) = weak.upgrade() {
                r.wake();
            }
        });
        runs
    }

    /// Tells `observer` of every event the engine and the control routes commit from now
    /// on, on the committing thread (it must only queue). Set once; later calls are ignored.
    pub fn set_event_tap(&self, observer: crate::store::Observer) {
        let _ = self.tap.set(observer);
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

    /// `Run.ask_svc` of `row`, computed now (keys read from the vault in one go).
    pub fn ask_readiness(
        &self,
        row: &RunRow,
        settings: &crate::settings::Settings,
    ) -> crate::ask::Readiness {
        let creds = crate::settings::vault::Vault::in_state_dir(&self.state_dir)
            .snapshot()
            .unwrap_or_else(|e| {
                log::warn!("cannot read the vault: {e}");
                crate::llm::StaticCredentials::new()
            });
        crate::ask::readiness(row, settings, &creds)
    }

    /// The full Run JSON of `row`.
    pub fn run_json(&self, row: &RunRow) -> Value {
        let (queue, children) = self.view_counts(row);
        let settings = self.settings.get();
        let ask = self.ask_readiness(row, &settings);
        view::run_json(row, &row.created_meta, queue, children, &settings, ask)
    }

    /// A response carrying the full Run of `row`, serialised straight from the row.
    pub fn run_reply(&self, status: u16, row: &RunRow) -> Reply {
        let (queue, children) = self.view_counts(row);
        let settings = self.settings.get();
        let ask = self.ask_readiness(row, &settings);
        Reply::json_of(
            status,
            &view::run_view(row, &row.created_meta, queue, children, &settings, ask),
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

pub fn actor_of(ctx: &Ctx<'_, '_>) -> Value {
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

pub fn list(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let (limit, offset) = page(ctx)?;
    let include_archived = bool_query(ctx, "include_archived")?;
    // Runs an automation created: any string is a filter (an unknown id matches nothing).
    let automation_id = ctx.inc.query("automation");
    let rows = app
        .runs
        .store
        .query_runs(&RunQuery {
            exclude_archived: !include_archived,
            automation_id,
            // Not `statuses` = every other name: that made SQLite sort every run per page.
            exclude_statuses: vec!["removing".to_string()],
            offset,
            limit: limit + 1,
            ..RunQuery::default()
        })
        .map_err(store_error)?;
    let has_more = rows.len() > limit;
    let rows = &rows[..rows.len().min(limit)];
    // The page's pull requests as kept (one query; the board never asks the code host).
    let linked: Vec<&str> = rows
        .iter()
        .filter(|r| r.pull_request.is_some())
        .map(|r| r.id.as_str())
        .collect();
    let mut kept = app.integrations.board_pull_requests(&linked);
    let data: Vec<Value> = rows
        .iter()
        .filter_map(|r| view::board_item(r, kept.remove(&r.id)))
        .collect();
    let mut meta = json!({"has_more": has_more});
    if let Some(cap) = app.runs.daily_cap().map_err(store_error)? {
        meta["daily_cap"] = cap.to_json();
    }
    Ok(Reply::json(200, &json!({"data": data, "meta": meta})))
}

/// `[server] max_usd_per_day` against what the ledger recorded today (UTC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DailyCap {
    pub max_usd_micros: i64,
    pub spent_usd_micros: i64,
    pub day: String,
}

impl DailyCap {
    pub fn reached(&self) -> bool {
        self.spent_usd_micros >= self.max_usd_micros
    }

    /// Why runs with LLM stages wait, in words.
    pub fn message(&self) -> String {
        let usd = |m: i64| format!("${:.2}", m as f64 / 1e6);
        format!(
            "The daily LLM spending cap ([server] max_usd_per_day = {}) is reached: {} spent on {} (UTC). Runs with LLM stages stay queued until the next UTC day or a higher cap.",
            usd(self.max_usd_micros),
            usd(self.spent_usd_micros),
            self.day
        )
    }

    pub fn to_json(&self) -> Value {
        json!({
            "max_usd_micros": self.max_usd_micros,
            "spent_usd_micros": self.spent_usd_micros,
            "day": self.day,
            "reached": self.reached(),
            "message": self.reached().then(|| self.message()),
        })
    }
}

impl Runs {
    /// The usage ledger the daily cap reads (the server sets it at start).
    pub fn set_ledger(&self, ledger: Arc<dyn crate::store::UsageLedger>) {
        let _ = self.ledger.set(ledger);
    }

    /// The daily cap and today's spend; `None` without a cap (or a ledger).
    pub fn daily_cap(&self) -> Result<Option<DailyCap>, StoreError> {
        let Some(max) = self.settings.get().server.max_usd_per_day else {
            return Ok(None);
        };
        let Some(ledger) = self.ledger.get() else {
            return Ok(None);
        };
        let now = crate::base::clock::now();
        let day = now.get(..10).unwrap_or("").to_string();
        Ok(Some(DailyCap {
            max_usd_micros: (max * 1e6).round() as i64,
            spent_usd_micros: ledger.spent_on_day(&day)?,
            day,
        }))
    }
}

/// Whether a run's workflow has an agent or prompt stage (what the daily cap holds back).
pub fn has_llm_stages(row: &RunRow) -> bool {
    use crate::workflow::HandlerKind;
    match crate::workflow::load(&row.workflow.source, &crate::workflow::NoFiles) {
        Ok(l) => [HandlerKind::Agent, HandlerKind::Prompt]
            .into_iter()
            .any(|k| !l.workflow.nodes_of(k).is_empty()),
        // Unreadable here means it cannot run anyway; let the executor say why.
        Err(_) => false,
    }
}

pub fn get(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.row(ctx.param("id"))?;
    Ok(app.runs.run_reply(200, &row))
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
    use crate::store::test_support::new_run;
    use crate::store::{EventDraft, MemoryStore};

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
            Arc::new(VersionStore::in_memory()),
        );
        let mut ids = Vec::new();
        for i in 0..37 {
            let row = new_run(&*store, &format!("r{i}"));
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
        let submitted = new_run(&*store, "");
        assert_eq!(
            runs.run_json(&submitted)["lifecycle"]["queue_position"],
            Value::Null
        );
    }
}
