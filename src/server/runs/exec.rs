//! Running one promoted run: the [`Executor`] the worker threads call (the engine writes
//! through the gated `store::HookedStore` that `Runs` builds).
//!
//! Owns: the glue between a scheduled run and the engine (workflow, files, work directory,
//! services). Must not touch: scheduling decisions or HTTP.

use super::super::versions::{PackageFiles, Version};
use super::interviewer::{AskEnd, RunHandle};
use crate::base::cancel::CancelToken;
use crate::base::event_kind;
use crate::engine::handlers::human::question::Question;
use crate::engine::{
    ChildApproval, Engine, InterviewError, Interviewer, ModelChoice, Reply, RunOptions, Services,
};
use crate::sandbox::lifecycle;
use crate::settings::ChildApprovalPolicy;
use crate::store::{EventDraft, RunRow, RunStore};
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::sync::Arc;

/// One promoted run, handed to a worker thread.
pub struct Job {
    pub row: RunRow,
    pub version: Option<Arc<Version>>,
    /// The version's registered dependencies (child workflows by id or entry path).
    pub deps: Vec<Arc<Version>>,
    pub handle: Arc<RunHandle>,
    /// Where the run's workspace is made (`<state-dir>/workspaces/<run-id>`).
    pub workdir: PathBuf,
    pub store: Arc<dyn RunStore>,
    /// The run was interrupted by the last stop and is being resumed by startup recovery.
    pub recovery: bool,
    /// Promotion tickets: the engine starts only when the runs promoted before are running.
    pub turns: Arc<super::turns::Turns>,
}

/// Runs a job to its end. Must append the run's terminal event (`run.completed` or
/// `run.failed`); the worker appends `run.failed` itself if it did not.
pub trait Executor: Send + Sync + 'static {
    fn execute(&self, job: &Job);
}

/// Files of a registered version, owned (the engine keeps them for the whole run).
pub struct VersionFiles {
    pub version: Arc<Version>,
    pub deps: Vec<Arc<Version>>,
}

impl crate::workflow::FileSource for VersionFiles {
    fn read(&self, rel: &str) -> Option<String> {
        PackageFiles {
            from: self.version.package.entrypoint.clone(),
            files: &self.version.package.files,
            deps: &self.deps,
        }
        .read(rel)
    }
}

/// Human questions of a live run go through its [`RunHandle`], answered over HTTP.
pub struct HttpInterviewer(pub Arc<RunHandle>);

impl Interviewer for HttpInterviewer {
    fn ask(&self, question: &Question, cancel: &CancelToken) -> Result<Reply, InterviewError> {
        match self.0.ask(question, cancel) {
            Ok((a, None)) => Ok(Reply::Answer(a)),
            Ok((a, Some(by))) => Ok(Reply::AnswerBy(a, by)),
            Err(AskEnd::Cancelled) => Err(InterviewError::Cancelled),
            Err(AskEnd::Timeout) => Err(InterviewError::Timeout),
        }
    }
}

/// Runs jobs with the engine: resumes from the run's checkpoint when it has one (a run
/// queued with `resume`), else starts from the beginning. LLM stages use the providers of
/// the state directory (vault keys, `settings.toml` endpoints) and read `/steer` guidance
/// from the job's [`RunHandle`].
pub struct EngineExecutor {
    /// The state directory: its vault holds the provider keys.
    pub state_dir: PathBuf,
    /// Live settings: `[llm.providers.*] base_url` and `[run] model` are read per run.
    pub settings: crate::settings::SettingsHandle,
    /// Where runs publish (their pull requests); `None`: nowhere.
    pub integrations: Option<Arc<crate::integrations::Integrations>>,
}

/// The model the run was created with (create body `model`, else `[run] model` then).
fn requested_model(row: &RunRow) -> Option<ModelChoice> {
    let m = row.created_meta.get("models")?.as_array()?.first()?;
    Some(ModelChoice {
        provider: m.get("provider").and_then(Value::as_str).map(String::from),
        name: m.get("name")?.as_str()?.to_string(),
    })
}

/// The run cannot start. After an interruption (a server stop) it fails with
/// `resume_failed` and an error saying why the resume was impossible (the user may still
/// retry or resume it by hand); a resume asked for by a user of a run that already has a
/// checkpoint can then never continue: it is `dead`; a fresh run fails with `launch_failed`.
fn fail_launch(job: &Job, error: String) {
    let draft = if job.recovery {
        EventDraft::new(
            event_kind::RUN_FAILED,
            json!({
                "reason": "resume_failed",
                "error": format!("the run was interrupted by a server stop and cannot be resumed: {error}"),
                "causes": [],
                "duration_ms": 0,
            }),
        )
    } else if job.row.checkpoint.is_some() {
        EventDraft::new(
            event_kind::RUN_DEAD,
            json!({"reason": "unresumable", "error": format!("cannot resume: {error}")}),
        )
    } else {
        EventDraft::new(
            event_kind::RUN_FAILED,
            json!({"reason": "launch_failed", "error": error, "causes": [], "duration_ms": 0}),
        )
    };
    let _ = job.store.append(&job.row.id, draft);
}

impl EngineExecutor {
    /// The run's artifact sink when its `run.created` names patterns (those of the create
    /// body or `[run] artifacts`, frozen then); files it already kept are known, so a
    /// resumed run does not keep them again.
    fn artifact_sink(
        &self,
        job: &Job,
        settings: &crate::settings::Settings,
    ) -> Option<Arc<dyn crate::engine::ArtifactSink>> {
        let patterns: Vec<String> = job
            .row
            .created_meta
            .get("artifacts")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .filter(|p: &Vec<String>| !p.is_empty())?;
        let store = match crate::artifacts::store_for(settings, &self.state_dir) {
            Ok(s) => s,
            Err(e) => {
                log::warn!("run {}: artifacts are not kept: {e}", job.row.id);
                return None;
            }
        };
        let kept = super::artifacts::kept(job.store.as_ref(), &job.row.id).unwrap_or_default();
        Some(Arc::new(crate::artifacts::RunArtifacts::new(
            &job.row.id,
            &patterns,
            store,
            &self.state_dir,
            &kept,
        )))
    }
}

impl Executor for EngineExecutor {
    fn execute(&self, job: &Job) {
        let files: Arc<dyn crate::workflow::FileSource + Send + Sync> = match &job.version {
            Some(v) => Arc::new(VersionFiles {
                version: Arc::clone(v),
                deps: job.deps.clone(),
            }),
            None => Arc::new(crate::workflow::NoFiles),
        };
        if let (Some(id), None) = (&job.row.workflow.version_id, &job.version) {
            return fail_launch(job, format!("its workflow version {id} no longer exists"));
        }
        let source = match &job.version {
            Some(v) => v.source().to_string(),
            None => job.row.workflow.source.clone(),
        };
        let loaded = match crate::workflow::load(&source, &*files) {
            Ok(l) => l,
            Err(e) => {
                return fail_launch(job, format!("the workflow does not parse: {}", e.message))
            }
        };
        if loaded.has_errors() {
            return fail_launch(job, "the workflow has validation errors".into());
        }
        let inputs = match &job.row.inputs {
            Value::Object(m) => m.clone(),
            _ => Map::new(),
        };
        let mcp_servers = match crate::mcp::catalog::thaw(&job.row.created_meta, job.store.as_ref())
        {
            Ok(s) => s,
            Err(e) => return fail_launch(job, e),
        };
        let settings = self.settings.get();
        let vault = crate::settings::vault::Vault::in_state_dir(&self.state_dir);
        // The environment's variables, their secrets expanded only now (never recorded).
        let lookup = |n: &str| crate::settings::vault::Vault::get(&vault, n).ok().flatten();
        let env_vars = match crate::environments::run_variables(
            &job.row.created_meta,
            job.store.as_ref(),
            &lookup,
        ) {
            Ok(v) => v,
            Err(e) => return fail_launch(job, e),
        };
        let stage_env = match settings.run.stage_env_with(&vault, env_vars) {
            Ok(env) => Arc::new(env),
            Err(e) => return fail_launch(job, e),
        };
        let defaults = settings.sandbox_defaults();
        // A repository on the code host is cloned with its credential.
        let clone_env = match (&self.integrations, lifecycle::source_of(&job.row)) {
            (Some(i), crate::workspace::Source::Repository { origin_url, .. })
                if job.row.sandbox.instance.is_none() =>
            {
                i.clone_env(&origin_url)
            }
            _ => Vec::new(),
        };
        let Some(ready) = lifecycle::start_with(
            job.store.as_ref(),
            &job.row,
            &self.state_dir,
            &defaults,
            &clone_env,
        ) else {
            return;
        };
        let options = RunOptions {
            inputs,
            files,
            goal: Some(job.row.goal.clone()).filter(|g| !g.is_empty()),
            model: requested_model(&job.row),
            mcp_servers,
            budget_usd_micros: job
                .row
                .created_meta
                .get("budget")
                .and_then(|b| b.get("usd_micros"))
                .and_then(Value::as_i64),
            child_approval: match self.settings.get().run.child_approval {
                ChildApprovalPolicy::None => ChildApproval::Automatic,
                ChildApprovalPolicy::Required => ChildApproval::Required,
            },
            ..RunOptions::new(&job.row.id, ready.workdir.clone())
        };
        let redactor: Arc<dyn crate::base::redact::Redact> =
            Arc::new(crate::auth::redactor(&self.state_dir));
        let llm = match crate::agent::backend::ProviderBackend::new(
            &self.settings.get(),
            Arc::new(vault),
        ) {
            Ok(b) => b
                .with_steering(job.handle.steering.clone())
                .with_redactor(Arc::clone(&redactor)),
            Err(e) => return fail_launch(job, e.to_string()),
        };
        // FIFO made observable: `run.running` (and `started_at`) in promotion order, the
        // ticket released when this run's own `run.running` is committed (`turns`).
        if !job.turns.wait(&job.row.id, super::turns::MAX_WAIT) {
            log::warn!(
                "run {}: the runs promoted before it are still preparing after {:?}; starting it anyway",
                job.row.id,
                super::turns::MAX_WAIT
            );
        }
        let turns = Arc::clone(&job.turns);
        let store: Arc<dyn crate::store::RunStore> = Arc::new(crate::store::HookedStore {
            inner: Arc::clone(&job.store),
            gate: None,
            observer: None,
            appended: Some(Arc::new(move |e: &crate::store::Event| {
                if e.event == event_kind::RUN_RUNNING {
                    turns.release(&e.run_id);
                }
            })),
        });
        let mut services = Services::new(store);
        services.llm = Arc::new(llm);
        services.redactor = redactor;
        services.interviewer = Arc::new(HttpInterviewer(Arc::clone(&job.handle)));
        services.cancel = job.handle.cancel.clone();
        // The run's processes live in its holder until the run ends, whatever the ending.
        let processes = ready.isolation.clone();
        services.isolation = ready.isolation;
        services.stage_env = Some(stage_env);
        if let Some(i) = &self.integrations {
            services.publisher = Arc::new(crate::integrations::publish::RunPublisher {
                integrations: Arc::clone(i),
                run_id: job.row.id.clone(),
                git: ready.git.clone(),
            });
        }
        if let Some(sink) = self.artifact_sink(job, &settings) {
            services.artifacts = sink;
        }
        services.workspace = Arc::new(crate::workspace::EngineWorkspace::new(
            ready.git, ready.base,
        ));
        let outcome = Engine::resume(&loaded.workflow, &options, &services);
        processes.end();
        log::info!(
            "run {} ended: {} ({})",
            outcome.run_id,
            outcome.status.as_str(),
            outcome.reason
        );
        // The environment's lifecycle: a sandbox stopped when its run ends.
        if let Ok(Some(row)) = job.store.get_run(&job.row.id) {
            lifecycle::after_run(
                job.store.as_ref(),
                &row,
                &self.state_dir,
                &services.isolation,
            );
        }
    }
}
