//! `svc run`, `svc resume` and `svc rewind`: load the workflow, create (or reopen) the run in the state
//! directory's store, run the engine on this thread, show progress (text) or print one JSON
//! object (json), and map the outcome to the exit code (0 succeeded, 1 failed, 2 invalid
//! workflow or usage).
//! Must not touch: engine semantics (everything runs through `engine::Engine`).

use super::interview::CliInterviewer;
use super::progress;
use super::validate::render;
use super::Format;
use crate::agent::backend::ProviderBackend;
use crate::base::event_kind;
use crate::base::redact::redact_json;
use crate::base::redact::Redact;
use crate::engine::{
    ChildApproval, DryRunBackend, Engine, LlmBackend, ModelChoice, RunOptions, RunOutcome,
    RunResult, Services,
};
use crate::settings::vault::Vault;
use crate::store::{self, NewRun, RunStore, WorkflowMeta};
use crate::workflow::{self, DirFiles, Severity, Workflow};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(clap::Args, Debug, Clone)]
pub struct Shared {
    /// State directory holding the run store (default: the user state directory).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Simulate agent and prompt stages instead of calling an LLM provider.
    #[arg(long)]
    dry_run: bool,
    /// Answer a human stage: NODE=CHOICE (an option key or label, or free text). Repeat for
    /// several answers; answers for one node are used in order.
    #[arg(long = "answer", value_name = "NODE=CHOICE")]
    answers: Vec<String>,
    /// Answer every human question without a scripted answer with its first option.
    #[arg(long)]
    auto_approve: bool,
    /// A run input, readable as $inputs.KEY and SVC_INPUT_KEY. Repeatable.
    #[arg(long = "input", value_name = "KEY=VALUE")]
    inputs: Vec<String>,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    /// When the run ends, write its stage logs here: DIR/<node_id>/{prompt.md, response.md,
    /// status.json, stdout, stderr} and DIR/checkpoint.json (see the README).
    #[arg(long, value_name = "DIR")]
    logs: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The workflow file.
    file: PathBuf,
    /// Working directory of commands and agents (default: the current directory).
    #[arg(long, value_name = "DIR", conflicts_with = "repo")]
    workdir: Option<PathBuf>,
    /// Work on a clone of this repository (any URL or path `git clone` accepts) on the run
    /// branch `svc/run/<id>`, checkpointed after every stage; the origin is never changed.
    #[arg(long, value_name = "URL|PATH")]
    repo: Option<String>,
    /// The branch of `--repo` to start from (default: its default branch).
    #[arg(long, value_name = "BRANCH", requires = "repo")]
    branch: Option<String>,
    /// Run in the sandbox of this environment of the state directory's catalog (provider,
    /// network, resources, env), resolved as the server resolves a run's (default: the
    /// settings' `[run] environment`). Without `--repo` the sandbox works on the working
    /// directory in place.
    #[arg(long, value_name = "ID")]
    environment: Option<String>,
    #[command(flatten)]
    shared: Shared,
}

#[derive(clap::Args, Debug)]
pub struct ResumeArgs {
    /// The id of the interrupted run.
    run_id: String,
    #[command(flatten)]
    shared: Shared,
}

/// `svc rewind RUN_ID --to NODE`.
#[derive(clap::Args, Debug)]
pub struct RewindArgs {
    /// The id of the finished run to rewind.
    run_id: String,
    /// The node to run again: it and everything after it run in a new run, from the
    /// checkpoint taken just before its latest visit (the stages before it do not run).
    #[arg(long, value_name = "NODE")]
    to: String,
    #[command(flatten)]
    shared: Shared,
}

/// A usage or input problem: printed, exit code 2.
struct Usage(String);

pub fn run(args: RunArgs) -> i32 {
    match start_run(&args) {
        Ok(code) => code,
        Err(Usage(msg)) => {
            if !msg.is_empty() {
                eprintln!("error: {msg}");
            }
            2
        }
    }
}

pub fn resume(args: ResumeArgs) -> i32 {
    match resume_run(&args) {
        Ok(code) => code,
        Err(Usage(msg)) => {
            eprintln!("error: {msg}");
            2
        }
    }
}

pub fn rewind(args: RewindArgs) -> i32 {
    match rewind_run(&args) {
        Ok(code) => code,
        Err(Usage(msg)) => {
            if !msg.is_empty() {
                eprintln!("error: {msg}");
            }
            2
        }
    }
}

fn start_run(args: &RunArgs) -> Result<i32, Usage> {
    let path = &args.file;
    let source = std::fs::read_to_string(path)
        .map_err(|e| Usage(format!("cannot read {}: {e}", path.display())))?;
    let shown = path.display().to_string();
    let wf = load_valid(&source, path, &shown)?;
    let workdir = match &args.repo {
        Some(_) => PathBuf::new(),
        None => resolve_workdir(args.workdir.as_deref())?,
    };
    let inputs = parse_pairs(&args.shared.inputs, "--input")?;
    let (store, _lock) = open_store(args.shared.state_dir.as_deref(), "svc run")?;
    let abs_path = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
    // `[run] goal` and `[run.model]` of the settings, as on the server.
    let defaults = load_settings(&state_dir(args.shared.state_dir.as_deref())).run;
    let goal = defaults.goal.clone().filter(|g| !g.trim().is_empty());
    let model = defaults.model.as_ref().map(|m| ModelChoice {
        provider: m.provider.clone(),
        name: m.name.clone(),
    });
    let mcp_servers = mcp_servers_of(&defaults.agent, &store)?;
    let mut extra = run_extra(args, model.as_ref());
    // `--environment`, else `[run] environment`: frozen into the run as the server does.
    let environment = args.environment.clone().or(defaults.environment.clone());
    if let Some(id) = &environment {
        let frozen = environment_of(id, &store)?;
        extra["sandbox"] = frozen.plan;
        if let Some(blob) = frozen.env_blob {
            extra["sandbox_env"] = Value::String(blob);
        }
        if args.repo.is_none() {
            extra["workspace"] = json!({"kind": "directory", "path": workdir.display().to_string(), "in_place": true});
        }
    }
    if !mcp_servers.is_empty() {
        let (views, blob) =
            crate::mcp::catalog::freeze(&mcp_servers, store.as_ref()).map_err(Usage)?;
        extra["mcp_servers"] = views;
        extra["mcp_definitions"] = Value::String(blob);
    }
    // `[run] max_usd`, frozen into `run.created` as the server does (a resume reads it there).
    let budget_usd_micros = defaults
        .max_usd
        .filter(|u| u.is_finite() && *u > 0.0)
        .map(|u| (u * 1e6).round() as i64);
    if let Some(micros) = budget_usd_micros {
        extra["budget"] = json!({"usd_micros": micros, "source": "settings"});
    }
    let new = NewRun {
        title: title_of(&wf),
        goal: goal.clone().unwrap_or_else(|| wf.goal().to_string()),
        workflow: WorkflowMeta {
            name: Some(wf.name().to_string()),
            graph_name: Some(wf.name().to_string()),
            node_count: wf.graph.nodes.len() as i64,
            edge_count: wf.graph.edges.len() as i64,
            source,
            path: Some(abs_path.display().to_string()),
            ..WorkflowMeta::default()
        },
        working_dir: args.repo.is_none().then(|| workdir.display().to_string()),
        inputs: Value::Object(inputs.clone()),
        extra,
        ..NewRun::default()
    };
    let row = store
        .create_run(new)
        .map_err(|e| Usage(format!("cannot create the run: {e}")))?;
    let sandbox = match args.repo.is_some() || environment.is_some() {
        true => Some(start_sandbox(store.as_ref(), &row.id, &args.shared)?),
        false => None,
    };
    let workdir = sandbox.as_ref().map_or(workdir, |s| s.workdir.clone());
    let options = RunOptions {
        inputs,
        files: Arc::new(DirFiles::for_file(&abs_path)),
        goal,
        model,
        mcp_servers,
        budget_usd_micros,
        ..RunOptions::new(&row.id, workdir)
    };
    execute(&wf, &options, store, &args.shared, &row, false, sandbox)
}

/// Environment `id` of the state directory's catalog, frozen for a new run
/// (`environments::freeze`, as the server's `POST /api/v1/runs`).
fn environment_of(
    id: &str,
    store: &Arc<store::SqliteStore>,
) -> Result<crate::environments::Frozen, Usage> {
    let catalog = crate::catalog::Catalog::open(
        crate::environments::Environments,
        Arc::clone(store) as Arc<dyn store::CatalogTables>,
    )
    .map_err(|e| Usage(format!("cannot read the environments catalog: {e}")))?;
    let lookup = |id: &str| Some(catalog.get(id).ok()?.definition.clone());
    crate::environments::freeze(&Value::String(id.to_string()), &lookup, store.as_ref())
        .map_err(|e| Usage(format!("environment `{id}`: {e}")))
}

fn resume_run(args: &ResumeArgs) -> Result<i32, Usage> {
    let (store, _lock) = open_store(args.shared.state_dir.as_deref(), "svc resume")?;
    let row = store
        .get_run(&args.run_id)
        .map_err(|e| Usage(format!("cannot read run {}: {e}", args.run_id)))?
        .ok_or_else(|| Usage(format!("run {} not found", args.run_id)))?;
    // The one resume rule; an active status here was left by a process that is gone.
    if let Some(why) = row.status.resume_refusal(true) {
        return Err(Usage(format!("run {} cannot be resumed: {why}", row.id)));
    }
    if row.status.is_terminal() {
        // Back into the queue (as the server does): its old outcome no longer applies.
        store
            .append(
                &row.id,
                store::EventDraft::new(event_kind::RUN_QUEUED, json!({"resume": true})),
            )
            .map_err(|e| Usage(format!("cannot resume run {}: {e}", row.id)))?;
    }
    continue_run(store, &row, &args.shared, true)
}

/// The HTTP route's rewind (`engine::rewind`) on the state directory, then the new run on
/// this thread as `svc resume` runs one: from the seeded checkpoint, or from the start when
/// `--to` is the start node.
fn rewind_run(args: &RewindArgs) -> Result<i32, Usage> {
    let (store, _lock) = open_store(args.shared.state_dir.as_deref(), "svc rewind")?;
    let old = store
        .get_run(&args.run_id)
        .map_err(|e| Usage(format!("cannot read run {}: {e}", args.run_id)))?
        .ok_or_else(|| Usage(format!("run {} not found", args.run_id)))?;
    let dir = state_dir(args.shared.state_dir.as_deref());
    // CLI runs have no principal; their views show the engine (`created_by` default).
    let actor = json!({"kind": "system", "system_kind": "engine"});
    let new = crate::engine::rewind::rewind(store.as_ref(), &dir, &old, &args.to, &actor)
        .map_err(|e| Usage(format!("cannot rewind: {e}")))?;
    eprintln!(
        "run {} rewound to {}: new run {}",
        old.id,
        args.to.trim(),
        new.run.id
    );
    continue_run(store, &new.run, &args.shared, new.point.is_some())
}

/// Runs `row` (new, or being resumed) on this thread with its own workflow, inputs, model,
/// MCP servers and workspace; `--input` adds inputs.
fn continue_run(
    store: Arc<store::SqliteStore>,
    row: &store::RunRow,
    shared: &Shared,
    resuming: bool,
) -> Result<i32, Usage> {
    let path = PathBuf::from(row.workflow.path.clone().unwrap_or_default());
    let shown = row
        .workflow
        .path
        .clone()
        .unwrap_or_else(|| format!("run {}", row.id));
    let wf = load_valid(&row.workflow.source, &path, &shown)?;
    let sandbox = match row.created_meta.get("workspace").filter(|w| !w.is_null()) {
        Some(_) => Some(start_sandbox(store.as_ref(), &row.id, shared)?),
        None => None,
    };
    let workdir = match &sandbox {
        Some(s) => s.workdir.clone(),
        None => PathBuf::from(row.working_dir.clone().unwrap_or_else(|| ".".into())),
    };
    let mut inputs = row.inputs.as_object().cloned().unwrap_or_default();
    inputs.extend(parse_pairs(&shared.inputs, "--input")?);
    let model = row
        .created_meta
        .get("models")
        .and_then(|m| m.get(0))
        .and_then(|m| {
            Some(ModelChoice {
                provider: m.get("provider").and_then(Value::as_str).map(String::from),
                name: m.get("name")?.as_str()?.to_string(),
            })
        });
    let mcp_servers = crate::mcp::catalog::thaw(&row.created_meta, store.as_ref())
        .map_err(|e| Usage(format!("run {} cannot be resumed: {e}", row.id)))?;
    let options = RunOptions {
        inputs,
        files: Arc::new(DirFiles::for_file(&path)),
        goal: Some(row.goal.clone()).filter(|g| !g.is_empty()),
        model,
        mcp_servers,
        budget_usd_micros: row
            .created_meta
            .get("budget")
            .and_then(|b| b.get("usd_micros"))
            .and_then(Value::as_i64),
        ..RunOptions::new(&row.id, workdir)
    };
    execute(&wf, &options, store, shared, row, resuming, sandbox)
}

/// Clones (or, resuming, reopens) the run's repository workspace as the server does, with
/// the same `sandbox.*` events; a failure is recorded on the run and printed (exit 2).
fn start_sandbox(
    store: &dyn RunStore,
    run_id: &str,
    flags: &Shared,
) -> Result<crate::sandbox::lifecycle::Ready, Usage> {
    let dir = state_dir(flags.state_dir.as_deref());
    let settings = crate::settings::Settings::load(&dir.join("settings.toml")).unwrap_or_default();
    let row = store
        .get_run(run_id)
        .map_err(|e| Usage(format!("cannot read run {run_id}: {e}")))?
        .ok_or_else(|| Usage(format!("run {run_id} not found")))?;
    crate::sandbox::lifecycle::start(store, &row, &dir, &settings.sandbox_defaults()).ok_or_else(
        || {
            let why = store
                .get_run(run_id)
                .ok()
                .flatten()
                .and_then(|r| r.error)
                .unwrap_or_else(|| "the workspace could not be prepared".into());
            Usage(format!("run {run_id}: {why}"))
        },
    )
}

/// Parses and validates; diagnostics print like `svc validate`, errors refuse the run.
/// What `run.created` carries beyond the common fields: the requested model, and with
/// `--repo` the workspace to clone, the repository and the local sandbox plan.
fn run_extra(args: &RunArgs, model: Option<&ModelChoice>) -> Value {
    let mut extra = json!({
        "models": model.map(|m| vec![json!({"provider": m.provider, "name": m.name})]).unwrap_or_default(),
    });
    if let (Some(origin), Some(map)) = (args.repo.as_ref(), extra.as_object_mut()) {
        let (name, provider) = crate::workspace::repository_name(origin);
        map.insert(
            "workspace".into(),
            json!({"kind": "repository", "origin_url": origin, "branch": args.branch}),
        );
        map.insert(
            "repository".into(),
            json!({"name": name, "origin_url": origin, "provider": provider}),
        );
        map.insert(
            "sandbox".into(),
            json!({"provider": "local", "image": null, "snapshot": null}),
        );
    }
    extra
}

fn load_valid(source: &str, path: &Path, shown: &str) -> Result<Workflow, Usage> {
    let loaded = match workflow::load(source, &DirFiles::for_file(path)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{}", e.render(shown));
            return Err(Usage(String::new()));
        }
    };
    for d in &loaded.diagnostics {
        eprintln!("{}", render(shown, d));
    }
    if loaded
        .diagnostics
        .iter()
        .any(|d| d.severity == Severity::Error)
    {
        return Err(Usage(format!("{shown} is not a valid workflow")));
    }
    Ok(loaded.workflow)
}

fn resolve_workdir(dir: Option<&Path>) -> Result<PathBuf, Usage> {
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir()
            .map_err(|e| Usage(format!("cannot read the current directory: {e}")))?,
    };
    if !dir.is_dir() {
        return Err(Usage(format!(
            "--workdir {} is not a directory",
            dir.display()
        )));
    }
    std::fs::canonicalize(&dir).map_err(|e| Usage(format!("--workdir {}: {e}", dir.display())))
}

/// `KEY=VALUE` pairs as a JSON object of strings.
fn parse_pairs(pairs: &[String], flag: &str) -> Result<Map<String, Value>, Usage> {
    let mut map = Map::new();
    for p in pairs {
        let (k, v) =
            split_pair(p).ok_or_else(|| Usage(format!("{flag} `{p}` must look like KEY=VALUE")))?;
        map.insert(k.to_string(), Value::String(v.to_string()));
    }
    Ok(map)
}

pub(super) fn split_pair(p: &str) -> Option<(&str, &str)> {
    let (k, v) = p.split_once('=')?;
    let k = k.trim();
    (!k.is_empty()).then_some((k, v))
}

fn title_of(wf: &Workflow) -> String {
    wf.graph_view()
        .nonempty("label")
        .unwrap_or_else(|| wf.name())
        .to_string()
}

/// `[run.agent] mcp_servers` resolved as the server resolves a run's (catalog ids through the
/// state directory's catalog, inline definitions as they are).
fn mcp_servers_of(
    defaults: &crate::settings::AgentDefaults,
    store: &Arc<store::SqliteStore>,
) -> Result<Vec<crate::mcp::ServerDef>, Usage> {
    let refs = defaults.mcp_refs();
    if refs.is_empty() {
        return Ok(Vec::new());
    }
    let catalog = crate::catalog::Catalog::open(
        crate::mcp::catalog::McpServers,
        Arc::clone(store) as Arc<dyn store::CatalogTables>,
    )
    .map_err(|e| Usage(format!("cannot read the MCP servers catalog: {e}")))?;
    let lookup = |id: &str| {
        let item = catalog.get(id).ok()?;
        crate::mcp::catalog::server_of(id, &item.definition).ok()
    };
    crate::mcp::catalog::resolve(&refs, "settings: run.agent.mcp_servers", &lookup).map_err(|e| {
        Usage(
            e.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        )
    })
}

/// The state directory's store (`<state-dir>/svc.db`), activated (created if needed), with
/// the directory's shared lock held for `command`: refused beside a running server, whose
/// scheduler and startup sweep assume they are the store's only writer (`store::lock`).
fn open_store(
    dir: Option<&Path>,
    command: &'static str,
) -> Result<(Arc<store::SqliteStore>, store::StateLock), Usage> {
    let dir = state_dir(dir);
    crate::base::perms::private_dir(&dir)
        .map_err(|e| Usage(format!("cannot create {}: {e}", dir.display())))?;
    let lock = store::StateLock::take(&dir, store::lock::Role::Command(command))
        .map_err(|e| Usage(e.to_string()))?;
    let store = store::SqliteStore::activate(&dir).map_err(|e| {
        Usage(format!(
            "cannot open the run store in {}: {e}",
            dir.display()
        ))
    })?;
    Ok((Arc::new(store), lock))
}

/// `--state-dir`, else the user state directory.
fn state_dir(dir: Option<&Path>) -> PathBuf {
    dir.map(Path::to_path_buf)
        .unwrap_or_else(store::default_state_dir)
}

/// Runs (or resumes) with progress and signals, then reports.
fn execute(
    wf: &Workflow,
    options: &RunOptions,
    store: Arc<dyn RunStore>,
    flags: &Shared,
    row: &store::RunRow,
    resuming: bool,
    sandbox: Option<crate::sandbox::lifecycle::Ready>,
) -> Result<i32, Usage> {
    let answers = parse_answers(&flags.answers)?;
    let dir = state_dir(flags.state_dir.as_deref());
    let redactor: Arc<dyn Redact> = Arc::new(crate::auth::redactor(&dir));
    let llm: Arc<dyn LlmBackend> = if flags.dry_run {
        Arc::new(DryRunBackend)
    } else {
        Arc::new(
            ProviderBackend::from_state_dir(&dir)
                .map_err(|e| Usage(format!("{}: {e}", dir.display())))?
                .with_redactor(Arc::clone(&redactor)),
        )
    };
    let options = &RunOptions {
        child_approval: child_approval(&dir, flags.auto_approve),
        ..options.clone()
    };
    eprintln!("run {}", options.run_id);
    let mut services = Services::new(store.clone());
    // The same clean environment as the server's runs (`procs::env`), with the settings'
    // `[run] pass_env` and `secrets`.
    // and the run's environment's `env`, its secrets expanded only now (never recorded).
    let vault = Vault::in_state_dir(&dir);
    let lookup = |n: &str| vault.get(n).ok().flatten();
    let env_vars =
        match crate::environments::run_variables(&row.created_meta, store.as_ref(), &lookup) {
            Ok(v) => v,
            // As the server fails a launch: recorded on the run, nothing started.
            Err(error) => {
                let failed = json!({"reason": "launch_failed", "error": error, "causes": [],
                                    "duration_ms": 0});
                let _ = store.append(
                    &row.id,
                    store::EventDraft::new(event_kind::RUN_FAILED, failed),
                );
                if let Some(s) = &sandbox {
                    s.isolation.end();
                }
                return Err(Usage(format!("run {}: {error}", row.id)));
            }
        };
    let stage_env = load_settings(&dir)
        .run
        .stage_env_with(&vault, env_vars)
        .map_err(Usage)?;
    services.stage_env = Some(Arc::new(stage_env));
    services.interviewer = Arc::new(CliInterviewer::new(answers, flags.auto_approve));
    services.llm = llm;
    services.redactor = Arc::clone(&redactor);
    let work = sandbox.as_ref().map(|r| (r.git.clone(), r.base.clone()));
    // The run's processes live in its holder until the run ends, whatever the ending.
    let processes = sandbox.as_ref().map(|r| r.isolation.clone());
    if let Some(ready) = sandbox {
        services.isolation = ready.isolation;
        services.workspace = Arc::new(crate::workspace::EngineWorkspace::new(
            ready.git, ready.base,
        ));
    }
    super::signals::cancel_on_signals(&services.cancel);
    let printer = (flags.format == Format::Text)
        .then(|| progress::Printer::start(store.as_ref(), &options.run_id));
    let outcome = if resuming {
        Engine::resume(wf, options, &services)
    } else {
        Engine::run(wf, options, &services)
    };
    if let Some(p) = processes {
        p.end();
    }
    if let Some(p) = printer {
        p.finish();
    }
    if let Some(dir) = &flags.logs {
        if let Err(e) = crate::stages::write_logs(store.as_ref(), &options.run_id, dir) {
            eprintln!("warning: the stage logs were not written: {e}");
        }
    }
    let work = work.and_then(|(git, base)| work_report(&git, &base, &options.run_id));
    report(&outcome, work.as_ref(), flags.format, redactor.as_ref());
    Ok(match outcome.status {
        RunResult::Succeeded => 0,
        RunResult::Failed => 1,
    })
}

/// `[run] child_approval` of the state directory's settings: `svc run` cannot take an
/// approval over HTTP, so `required` needs `--auto-approve` (which approves every child).
fn child_approval(dir: &Path, auto_approve: bool) -> ChildApproval {
    let policy = load_settings(dir).run.child_approval;
    match (policy, auto_approve) {
        (crate::settings::ChildApprovalPolicy::None, _) | (_, true) => ChildApproval::Automatic,
        (crate::settings::ChildApprovalPolicy::Required, false) => ChildApproval::Unavailable,
    }
}

/// The state directory's `settings.toml`; defaults when it is missing or invalid (the
/// provider setup reports an invalid file itself).
fn load_settings(dir: &Path) -> crate::settings::Settings {
    crate::settings::Settings::load(&dir.join(crate::settings::SETTINGS_FILE)).unwrap_or_default()
}

fn parse_answers(raw: &[String]) -> Result<Vec<(String, String)>, Usage> {
    raw.iter()
        .map(|a| {
            split_pair(a)
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| Usage(format!("--answer `{a}` must look like NODE=CHOICE")))
        })
        .collect()
}

/// Where a `--repo` run's work went: its workspace (a clone), the run branch, and what
/// changed there since the base it started from.
struct WorkReport {
    path: PathBuf,
    branch: String,
    base: String,
    head: String,
    commits: u64,
    changes: Vec<crate::workspace::diff::FileChange>,
}

/// Files listed one by one in text mode; the rest are counted.
const LISTED_FILES: usize = 20;

impl WorkReport {
    fn summary(&self) -> crate::workspace::diff::DiffSummary {
        crate::workspace::diff::DiffSummary::of(&self.changes)
    }

    /// The command that shows the run's commits and what each changed.
    fn look(&self) -> String {
        format!(
            "git -C {} log --stat {}..{}",
            shell_word(&self.path.display().to_string()),
            short(&self.base),
            self.branch
        )
    }

    fn json(&self) -> Value {
        let files: Vec<Value> = self
            .changes
            .iter()
            .map(|c| json!({"path": c.path, "kind": c.kind, "additions": c.additions, "deletions": c.deletions, "binary": c.binary}))
            .collect();
        json!({
            "path": self.path,
            "branch": self.branch,
            "base": self.base,
            "head": self.head,
            "commits": self.commits,
            "diff": self.summary(),
            "files": files,
            "look": self.look(),
        })
    }

    fn print(&self) {
        let s = self.summary();
        eprintln!("workspace: {}", self.path.display());
        eprintln!(
            "branch:    {} ({} commit{} on top of {})",
            self.branch,
            self.commits,
            if self.commits == 1 { "" } else { "s" },
            short(&self.base)
        );
        eprintln!(
            "changes:   {} file{} changed, +{} -{}",
            s.files_changed,
            if s.files_changed == 1 { "" } else { "s" },
            s.additions,
            s.deletions
        );
        for c in self.changes.iter().take(LISTED_FILES) {
            if c.binary {
                eprintln!("  {} (binary)", c.path);
            } else {
                eprintln!("  {} +{} -{}", c.path, c.additions, c.deletions);
            }
        }
        if self.changes.len() > LISTED_FILES {
            eprintln!("  ... and {} more", self.changes.len() - LISTED_FILES);
        }
        eprintln!("look at it: {}", self.look());
    }
}

/// The report of a `--repo` run's workspace; `None` (with a warning) when git cannot say.
fn work_report(git: &crate::workspace::Git, base: &str, run_id: &str) -> Option<WorkReport> {
    let read = || -> Result<WorkReport, crate::workspace::git::GitError> {
        let head = git.head()?;
        let range = format!("{base}..{head}");
        let commits = git
            .text(&["rev-list", "--count", &range])?
            .parse()
            .unwrap_or(0);
        Ok(WorkReport {
            path: std::fs::canonicalize(&git.work_tree).unwrap_or_else(|_| git.work_tree.clone()),
            branch: crate::workspace::run_branch(run_id),
            base: base.to_string(),
            changes: crate::workspace::diff::changes(git, base, &head)?,
            head,
            commits,
        })
    };
    read()
        .map_err(|e| eprintln!("warning: cannot read the run's workspace: {e}"))
        .ok()
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// `s` as one shell word: as is when it is plain, else single-quoted.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:@%".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Prints the outcome with secret values hidden, as in the run's events; with `--repo`,
/// where the work went.
fn report(outcome: &RunOutcome, work: Option<&WorkReport>, format: Format, redactor: &dyn Redact) {
    match format {
        Format::Json => {
            let mut out = json!({
                "run_id": outcome.run_id,
                "status": outcome.status.as_str(),
                "reason": outcome.reason.as_str(),
                "path": outcome.path,
                "context": Value::Object(outcome.context.clone()),
                "error": outcome.error,
            });
            if let (Some(w), Value::Object(map)) = (work, &mut out) {
                map.insert("workspace".into(), w.json());
            }
            redact_json(redactor, &mut out);
            println!("{out}");
        }
        Format::Text => {
            let path = outcome.path.join(" → ");
            match &outcome.error {
                None => eprintln!("run {} {}: {path}", outcome.run_id, outcome.status.as_str()),
                Some(e) => eprintln!(
                    "run {} failed: {}\n  path: {path}",
                    outcome.run_id,
                    redactor.redact(e)
                ),
            }
            if let Some(w) = work {
                w.print();
            }
        }
    }
}
