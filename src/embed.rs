//! The embedding front door: the small, stable API for running workflows from another
//! program ([`Workflow`], [`Engine`] and its [`EngineBuilder`], [`Store`], the [`Interviewer`]
//! trait for human answers, and an event callback). Everything here is re-exported at the
//! crate root; the crate's modules are the service's internals and are unstable.
//! Owns: turning those calls into the engine's own types (a created run, [`RunOptions`],
//! [`Services`]). Must not touch: engine semantics (it calls [`crate::engine::Engine`]
//! exactly as the CLI does), HTTP, settings files, or the process (no signal handlers, no
//! environment, no global logger).
//!
//! # What the engine starts behind the call
//! [`Engine::run`] executes the workflow on the caller's thread and returns when the run
//! ends. On the way it starts only short-lived threads, all joined before it returns: one
//! watchdog per run (stall detection), one per parallel branch, one per manager stage's
//! child run, and a timer per attempt with a timeout. Command stages start child processes,
//! each in its own process group, killed with their stage; the stage's thread waits on their
//! pipes itself (a drain thread only when a process the command left behind keeps them).
//! A thread that ran a command stage keeps its read buffer and the child's stack (80 KiB)
//! for the next one, freed when the thread ends. A SQLite [`Store`] keeps one background
//! thread (WAL checkpoints) until it is
//! dropped, and registers its write-gathering VFS with SQLite once per process. Nothing
//! installs signal handlers, reads settings files or the environment, or starts a logger
//! (the engine logs through the `log` facade, silent unless the host installs a logger).

use crate::engine::{self, RunOptions, Services};
use crate::store::{self, Event, NewRun, RunStore, StoreError, WorkflowMeta};
use crate::workflow::{self, DirFiles, FileSource, NoFiles};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::base::cancel::CancelToken;
pub use crate::engine::handlers::human::question::{Answer, Question, QuestionOption};
pub use crate::engine::{
    EndReason, FailureReason, InterviewError, Interviewer, Reply, RunOutcome, RunResult,
};
pub use crate::workflow::{Diagnostic, Severity};

/// Why a front-door call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The workflow file could not be read.
    #[error("cannot read the workflow file {path}: {source}")]
    Read {
        /// The file asked for.
        path: PathBuf,
        /// Why reading it failed.
        source: std::io::Error,
    },
    /// The text is not DOT (the message names the line and column).
    #[error("the workflow is not valid DOT: {0}")]
    Parse(#[from] crate::dot::ParseError),
    /// The workflow parsed but has error-severity diagnostics (all diagnostics are listed).
    #[error("the workflow has errors: {}", first_error(.0))]
    Invalid(Vec<Diagnostic>),
    /// The store file could not be opened or brought to this version's schema.
    #[error("cannot open the run store: {0}")]
    Open(#[from] store::ActivationError),
    /// The store refused a read or a write (an unknown run id, a full disk...).
    #[error("the run store failed: {0}")]
    Store(#[from] StoreError),
    /// No working directory was given and the current one cannot be read.
    #[error("cannot find the working directory: {0}")]
    Workdir(std::io::Error),
}

fn first_error(diagnostics: &[Diagnostic]) -> String {
    let errors: Vec<&str> = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| d.message.as_str())
        .collect();
    match errors.as_slice() {
        [] => "none".to_string(),
        [one] => (*one).to_string(),
        [first, rest @ ..] => format!("{first} (and {} more)", rest.len()),
    }
}

/// A parsed and validated workflow, ready to run any number of times.
///
/// ```
/// let wf = svc::Workflow::parse(r#"digraph hello {
///     start [shape=Mdiamond]
///     greet [shape=parallelogram, script="echo hello"]
///     exit  [shape=Msquare]
///     start -> greet -> exit
/// }"#)?;
/// assert_eq!(wf.name(), "hello");
/// assert!(svc::Workflow::parse("digraph { start -> }").is_err());
/// # Ok::<(), svc::Error>(())
/// ```
#[derive(Clone)]
pub struct Workflow {
    inner: Arc<workflow::Workflow>,
    source: Arc<str>,
    path: Option<PathBuf>,
    files: Arc<dyn FileSource + Send + Sync>,
    diagnostics: Vec<Diagnostic>,
}

impl std::fmt::Debug for Workflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workflow")
            .field("name", &self.name())
            .field("path", &self.path)
            .field("diagnostics", &self.diagnostics)
            .finish_non_exhaustive()
    }
}

impl Workflow {
    /// Reads, parses and validates a DOT file. Files it references (`@path` prompts and
    /// schemas, child workflows) resolve relative to the file's folder.
    pub fn load(path: impl AsRef<Path>) -> Result<Workflow, Error> {
        let path = path.as_ref();
        let source = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let files = Arc::new(DirFiles::for_file(&absolute));
        Workflow::build(source, Some(absolute), files)
    }

    /// Parses and validates DOT text. `@path` references cannot be resolved (there is no
    /// folder to resolve them in) and are reported as errors.
    pub fn parse(source: &str) -> Result<Workflow, Error> {
        Workflow::build(source.to_string(), None, Arc::new(NoFiles))
    }

    fn build(
        source: String,
        path: Option<PathBuf>,
        files: Arc<dyn FileSource + Send + Sync>,
    ) -> Result<Workflow, Error> {
        let loaded = workflow::load(&source, files.as_ref())?;
        if loaded.has_errors() {
            return Err(Error::Invalid(loaded.diagnostics));
        }
        Ok(Workflow {
            inner: Arc::new(loaded.workflow),
            source: source.into(),
            path,
            files,
            diagnostics: loaded.diagnostics,
        })
    }

    /// The graph's name (`digraph NAME`).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The warnings and notes validation found (errors refuse the workflow).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// The node ids, in declaration order.
    pub fn node_ids(&self) -> impl Iterator<Item = &str> {
        self.inner.graph.nodes.iter().map(|n| n.id.as_str())
    }
}

/// Where runs and their events are kept.
#[derive(Clone)]
pub struct Store {
    inner: Arc<dyn RunStore>,
}

impl Store {
    /// In memory, gone when the last clone is dropped: the same events, folds and ordering
    /// guarantees as the file, without durability.
    pub fn memory() -> Store {
        Store {
            inner: Arc::new(store::MemoryStore::new()),
        }
    }

    /// The SQLite database file at `path`, created (with its schema) when missing. Every
    /// event is committed before the engine moves on, so a crashed process loses nothing
    /// and [`Engine::resume`] continues the run.
    pub fn open(path: impl AsRef<Path>) -> Result<Store, Error> {
        Ok(Store {
            inner: Arc::new(store::SqliteStore::open(path.as_ref())?),
        })
    }

    /// Every event of a run, in order.
    pub fn events(&self, run_id: &str) -> Result<Vec<Event>, Error> {
        Ok(self.inner.events(run_id, 1, usize::MAX)?)
    }
}

/// Runs workflows with one set of services. Cheap to clone; safe to share between threads
/// (each [`Engine::run`] is independent).
///
/// ```
/// use svc::{Engine, Store, Workflow};
/// use std::sync::{Arc, Mutex};
///
/// let wf = Workflow::parse(r#"digraph hello {
///     start [shape=Mdiamond]
///     greet [shape=parallelogram, script="echo hello"]
///     exit  [shape=Msquare]
///     start -> greet -> exit
/// }"#)?;
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = Arc::clone(&seen);
/// let engine = Engine::builder()
///     .store(Store::memory())
///     .on_event(move |e| log.lock().unwrap().push(e.event.clone()))
///     .build()?;
/// let run = engine.run(&wf, serde_json::Map::new())?;
/// assert_eq!(run.status, svc::RunResult::Succeeded);
/// assert_eq!(run.path, ["start", "greet", "exit"]);
/// assert!(seen.lock().unwrap().iter().any(|kind| kind == "stage.completed"));
/// # Ok::<(), svc::Error>(())
/// ```
#[derive(Clone)]
pub struct Engine {
    store: Arc<dyn RunStore>,
    interviewer: Arc<dyn Interviewer>,
    workdir: PathBuf,
}

/// Builds an [`Engine`]; every part has a default.
#[derive(Default)]
pub struct EngineBuilder {
    store: Option<Store>,
    interviewer: Option<Arc<dyn Interviewer>>,
    on_event: Option<store::Observer>,
    workdir: Option<PathBuf>,
}

impl EngineBuilder {
    /// Where runs are recorded (default: [`Store::memory`]).
    pub fn store(mut self, store: Store) -> Self {
        self.store = Some(store);
        self
    }

    /// Who answers human gates (default: nobody, and a human stage fails saying so).
    pub fn interviewer(mut self, interviewer: impl Interviewer + 'static) -> Self {
        self.interviewer = Some(Arc::new(interviewer));
        self
    }

    /// Called with every event right after it is committed, on the thread that committed it
    /// (the caller's, or a parallel branch's), for the run and its child runs. Keep it short:
    /// the run waits for it.
    pub fn on_event(mut self, callback: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        self.on_event = Some(Arc::new(callback));
        self
    }

    /// Where command stages run (default: the current directory when [`Self::build`] is
    /// called).
    pub fn workdir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workdir = Some(dir.into());
        self
    }

    /// The engine, with a default for every part not given.
    pub fn build(self) -> Result<Engine, Error> {
        let workdir = match self.workdir {
            Some(dir) => dir,
            None => std::env::current_dir().map_err(Error::Workdir)?,
        };
        let store = self.store.unwrap_or_else(Store::memory).inner;
        let store: Arc<dyn RunStore> = match self.on_event {
            Some(observer) => Arc::new(store::HookedStore {
                inner: store,
                gate: None,
                observer: Some(observer),
                appended: None,
            }),
            None => store,
        };
        Ok(Engine {
            store,
            interviewer: self
                .interviewer
                .unwrap_or_else(|| Arc::new(engine::NoInterviewer)),
            workdir,
        })
    }
}

impl Engine {
    /// Starts building an engine.
    pub fn builder() -> EngineBuilder {
        EngineBuilder::default()
    }

    /// Creates a run of `workflow` with `inputs` (`$inputs.KEY` and `SVC_INPUT_KEY`) and
    /// executes it on this thread until it ends. A failed run is `Ok` with
    /// [`RunResult::Failed`]; `Err` means the run could not be created.
    pub fn run(
        &self,
        workflow: &Workflow,
        inputs: Map<String, Value>,
    ) -> Result<RunOutcome, Error> {
        self.run_with_cancel(workflow, inputs, CancelToken::new())
    }

    /// [`Engine::run`] with a token another thread may cancel (the run ends `cancelled`) or
    /// pause (the run holds between stages).
    pub fn run_with_cancel(
        &self,
        workflow: &Workflow,
        inputs: Map<String, Value>,
        cancel: CancelToken,
    ) -> Result<RunOutcome, Error> {
        let row = self
            .store
            .create_run(new_run(workflow, &inputs, &self.workdir))?;
        let options = RunOptions {
            inputs,
            files: Arc::clone(&workflow.files),
            ..RunOptions::new(&row.id, self.workdir.clone())
        };
        Ok(engine::Engine::run(
            &workflow.inner,
            &options,
            &self.services(cancel),
        ))
    }

    /// Continues run `run_id` (e.g. after a crash, from a [`Store::open`] file) from its
    /// last checkpoint without re-running finished stages.
    pub fn resume(&self, workflow: &Workflow, run_id: &str) -> Result<RunOutcome, Error> {
        self.resume_with_cancel(workflow, run_id, CancelToken::new())
    }

    /// [`Engine::resume`] with a token another thread may cancel or pause, as
    /// [`Engine::run_with_cancel`].
    pub fn resume_with_cancel(
        &self,
        workflow: &Workflow,
        run_id: &str,
        cancel: CancelToken,
    ) -> Result<RunOutcome, Error> {
        let row = self
            .store
            .get_run(run_id)?
            .ok_or_else(|| StoreError::NotFound {
                run_id: run_id.to_string(),
            })?;
        let inputs = match row.inputs {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        let options = RunOptions {
            inputs,
            files: Arc::clone(&workflow.files),
            ..RunOptions::new(run_id, self.workdir.clone())
        };
        Ok(engine::Engine::resume(
            &workflow.inner,
            &options,
            &self.services(cancel),
        ))
    }

    /// Every event of a run, in order.
    pub fn events(&self, run_id: &str) -> Result<Vec<Event>, Error> {
        Ok(self.store.events(run_id, 1, usize::MAX)?)
    }

    fn services(&self, cancel: CancelToken) -> Services {
        Services {
            interviewer: Arc::clone(&self.interviewer),
            cancel,
            ..Services::new(Arc::clone(&self.store))
        }
    }
}

fn new_run(workflow: &Workflow, inputs: &Map<String, Value>, workdir: &Path) -> NewRun {
    let wf = &workflow.inner;
    NewRun {
        title: wf
            .graph_view()
            .nonempty("label")
            .unwrap_or_else(|| wf.name())
            .to_string(),
        goal: wf.goal().to_string(),
        workflow: WorkflowMeta {
            name: Some(wf.name().to_string()),
            graph_name: Some(wf.name().to_string()),
            node_count: wf.graph.nodes.len() as i64,
            edge_count: wf.graph.edges.len() as i64,
            source: workflow.source.to_string(),
            path: workflow.path.as_ref().map(|p| p.display().to_string()),
            ..WorkflowMeta::default()
        },
        working_dir: Some(workdir.display().to_string()),
        inputs: Value::Object(inputs.clone()),
        ..NewRun::default()
    }
}
