//! What the engine needs from the outside world, as trait objects: the run store, the
//! interviewer (human answers), the LLM backend, the clock, the secret redactor, and the
//! run's cancel token.
//! Owns the traits, their error types and the small built-in implementations
//! ([`DryRunBackend`], [`UnconfiguredBackend`], [`NoInterviewer`], [`SystemClock`]).
//! Must not touch: the engine loop, terminals or HTTP (the CLI and server bring their own
//! interviewers).

use super::handlers::human::question::{Answer, Question};
use crate::base::cancel::CancelToken;
use crate::base::event_kind;
use crate::base::redact::{NoRedaction, Redact};
use crate::store::RunStore;
pub use crate::workspace::versioned::{NoWorkspace, Workspace, WorkspaceCheckpoint};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything a run uses besides the workflow and its options.
#[derive(Clone)]
pub struct Services {
    pub store: Arc<dyn RunStore>,
    pub interviewer: Arc<dyn Interviewer>,
    pub llm: Arc<dyn LlmBackend>,
    pub clock: Arc<dyn Clock>,
    /// Hides secret values in every event the run records ([`NoRedaction`] by default; the
    /// CLI and the server feed it from the vault).
    pub redactor: Arc<dyn Redact>,
    /// The run's token: cancelling it stops the run; pausing it holds the run between stages.
    pub cancel: CancelToken,
    /// How the run's processes start (command stages, agent tools, ACP agents): on the
    /// host or inside the run's container.
    pub isolation: crate::sandbox::Isolation,
    /// The run's files as checkpoints ([`NoWorkspace`] by default: nothing is versioned).
    pub workspace: Arc<dyn Workspace>,
    /// The environment the run's processes start from (`procs::EnvSnapshot::for_stages`:
    /// an allowlist of this process's variables plus what the run is given, never the
    /// server's secrets). `None`: the allowlist alone, read at the run's first command.
    pub stage_env: Option<Arc<crate::procs::EnvSnapshot>>,
    /// Where the run publishes its work: its pull request ([`NoPublisher`] by default).
    pub publisher: Arc<dyn Publisher>,
    /// Where the files a stage leaves behind are kept (`[run] artifacts`; [`NoArtifacts`]
    /// by default: none are).
    pub artifacts: Arc<dyn ArtifactSink>,
}

impl Services {
    /// A store with the defaults: no interviewer, no LLM provider, the system clock, no
    /// redaction and a fresh cancel token.
    pub fn new(store: Arc<dyn RunStore>) -> Services {
        Services {
            store,
            interviewer: Arc::new(NoInterviewer),
            llm: Arc::new(UnconfiguredBackend),
            clock: Arc::new(SystemClock),
            redactor: Arc::new(NoRedaction),
            cancel: CancelToken::new(),
            isolation: crate::sandbox::Isolation::Local,
            workspace: Arc::new(NoWorkspace),
            stage_env: None,
            publisher: Arc::new(NoPublisher),
            artifacts: Arc::new(NoArtifacts),
        }
    }
}

/// A `pull_request` stage's request (node attributes `pull_request.*`).
#[derive(Debug, Clone, PartialEq)]
pub struct PullRequestStage {
    pub node_id: String,
    /// The workspace commit to publish (the latest checkpoint).
    pub head: Option<String>,
    /// Open it as a draft (`pull_request.draft`; `None`: the run's setting).
    pub draft: Option<bool>,
    /// Wait for the head's checks (`pull_request.wait_checks`, default true).
    pub wait_checks: bool,
    /// Give up waiting after this long (`pull_request.checks_timeout`, default 30m).
    pub checks_timeout: Duration,
    /// With no check reported this long after the push, there are none
    /// (`pull_request.checks_grace`, default 2m).
    pub checks_grace: Duration,
}

/// What the head's checks said together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksVerdict {
    /// Every check passed.
    Passed,
    /// At least one check failed (and none is still running).
    Failed,
    /// No check was reported within the grace time.
    None,
    /// Some were still running when the wait timed out.
    Pending,
    /// The stage did not wait.
    Skipped,
}

impl ChecksVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            ChecksVerdict::Passed => "passed",
            ChecksVerdict::Failed => "failed",
            ChecksVerdict::None => "none",
            ChecksVerdict::Pending => "pending",
            ChecksVerdict::Skipped => "skipped",
        }
    }
}

/// One check as a `pull_request` stage reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    pub name: String,
    pub status: String,
    pub passed: bool,
    /// The check's own words (title and summary of its output, or a status description).
    pub summary: Option<String>,
}

/// What a `pull_request` stage found.
#[derive(Debug, Clone, PartialEq)]
pub struct PullRequestReport {
    pub number: u64,
    pub html_url: String,
    pub head: String,
    pub verdict: ChecksVerdict,
    pub checks: Vec<CheckReport>,
}

/// Publishes a run's work on the code host (the server's `integrations::publish::
/// RunPublisher`): at the end of a successful run, and from `pull_request` stages.
pub trait Publisher: Send + Sync {
    /// The graph succeeded; called before `run.completed` with the workspace's head.
    /// `Err(message)` fails the run with reason `publish_failed` instead.
    fn finish(&self, head: Option<&str>) -> Result<(), String>;
    /// A `pull_request` stage: push the head, open (or update) the run's pull request and,
    /// when asked, wait for the head's checks. Must return promptly once `cancel` fires.
    fn pull_request(
        &self,
        stage: &PullRequestStage,
        cancel: &CancelToken,
    ) -> Result<PullRequestReport, String>;
}

/// Nowhere to publish: runs end as they are; a `pull_request` stage fails saying so.
pub struct NoPublisher;

impl Publisher for NoPublisher {
    fn finish(&self, _: Option<&str>) -> Result<(), String> {
        Ok(())
    }

    fn pull_request(
        &self,
        stage: &PullRequestStage,
        _: &CancelToken,
    ) -> Result<PullRequestReport, String> {
        Err(format!(
            "pull_request stage `{}` needs the code-host integration, and this run has none \
             (run it on a server with [server.integrations.codehost] configured)",
            stage.node_id
        ))
    }
}

/// A file a stage left in the workspace that the run kept (an `artifact.captured` event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedArtifact {
    /// The artifact's id (a ULID), unique in the run.
    pub id: String,
    /// Its path relative to the workspace, `/`-separated.
    pub path: String,
    /// Where the object store keeps it.
    pub key: String,
    pub bytes: u64,
    pub sha256: String,
}

/// What keeping one matching file came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Capture {
    Kept(CapturedArtifact),
    /// The file matched but was not kept (too large, unreadable, the store refused it).
    Failed {
        path: String,
        error: String,
    },
}

/// Keeps the files matching a run's artifact patterns at the end of each stage (the
/// server's `artifacts::RunArtifacts`). A failure to keep one never fails the stage.
pub trait ArtifactSink: Send + Sync {
    /// Whether there is anything to do (false: the engine skips the call).
    fn wanted(&self) -> bool;
    /// Copies the files under `workdir` matching the patterns (and changed since they were
    /// last kept) after a visit of `node_id`; what was kept or refused, in path order.
    fn capture(&self, node_id: &str, workdir: &std::path::Path) -> Vec<Capture>;
}

/// No artifacts are kept.
pub struct NoArtifacts;

impl ArtifactSink for NoArtifacts {
    fn wanted(&self) -> bool {
        false
    }

    fn capture(&self, _: &str, _: &std::path::Path) -> Vec<Capture> {
        Vec::new()
    }
}

/// An answer from a human: raw text the engine matches against the options, or an answer
/// the interviewer already matched (the HTTP server validates before accepting).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Reply {
    /// What the human typed: an option's key (`Y`), its label, or freeform text where the
    /// question allows it. The engine matches it; text that matches nothing fails the stage.
    Text(String),
    /// An answer already matched against the question's options.
    Answer(Answer),
    /// A matched answer and who gave it (a principal as JSON), recorded on
    /// `interview.completed` as `answered_by`.
    AnswerBy(Answer, serde_json::Value),
}

/// Why no answer came.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InterviewError {
    /// The question's `timeout_seconds` passed (its default choice, if any, is taken).
    #[error("the question timed out")]
    Timeout,
    /// The run was cancelled while it waited.
    #[error("the question was cancelled")]
    Cancelled,
    /// The answer given is not one the question accepts.
    #[error("the answer was refused: {0}")]
    Refused(String),
    /// Nobody can be asked (the message says why).
    #[error("{0}")]
    Unavailable(String),
}

/// Asks humans. `ask` blocks until an answer, the question's timeout
/// (`Question::timeout_seconds`), or `cancel` (which the engine also fires at the timeout).
pub trait Interviewer: Send + Sync {
    /// Asks `question` and waits for the answer, giving up when `cancel` fires.
    fn ask(&self, question: &Question, cancel: &CancelToken) -> Result<Reply, InterviewError>;
}

/// Nobody to ask: every question fails with `Unavailable`.
pub struct NoInterviewer;

impl Interviewer for NoInterviewer {
    fn ask(&self, q: &Question, _: &CancelToken) -> Result<Reply, InterviewError> {
        Err(InterviewError::Unavailable(format!(
            "human stage `{}` needs an answer and no one can be asked",
            q.stage
        )))
    }
}

/// Shell commands an agent session runs around every tool call (node or graph
/// `tool_hooks.pre` / `tool_hooks.post`). A failing pre hook refuses the call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolHooks {
    pub pre: Option<String>,
    pub post: Option<String>,
}

impl ToolHooks {
    pub fn is_empty(&self) -> bool {
        self.pre.is_none() && self.post.is_none()
    }
}

/// Agent (tool-using session) or prompt (one call, no tools).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LlmMode {
    Agent,
    #[default]
    Prompt,
}

/// One LLM stage's request: what the engine asks its `LlmBackend`, and what the agent's
/// `StageBackend` runs (one type from the engine to the provider call).
#[derive(Debug, Clone, Default)]
pub struct LlmRequest {
    /// The stage's node id; it also identifies the stage's conversation across repair calls.
    pub node_id: String,
    pub mode: LlmMode,
    /// The prompt after variable expansion.
    pub prompt: String,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub reasoning_effort: Option<String>,
    pub max_tokens: Option<i64>,
    /// Model calls an agent session may make (node `max_turns`); `Some(0)` = unlimited,
    /// `None` = the backend's default.
    pub max_turns: Option<u32>,
    pub workdir: std::path::PathBuf,
    /// How the agent's shell tool and an ACP agent start processes.
    pub isolation: crate::sandbox::Isolation,
    /// The environment they start from ([`Services::stage_env`]).
    pub env: Option<Arc<crate::procs::EnvSnapshot>>,
    /// Validation errors of earlier replies in this stage (structured-output repair turns),
    /// oldest first; empty on the first call.
    pub feedback: Vec<String>,
    /// `routing`, or the JSON Schema text, when the node has an `output_schema`.
    pub output_schema: Option<String>,
    /// Put project memory (AGENTS.md and the provider's file) in the prompt (node
    /// `project_memory`, default true).
    pub project_memory: bool,
    /// An agent node with `backend=acp`: the external agent to run instead of a provider.
    pub acp: Option<crate::workflow::acp::AcpLaunch>,
    /// The run's history for this stage's fidelity (engine.md 5.3), to put before the
    /// prompt with a blank line between. With `thread` set it is used only when the thread
    /// has no conversation yet.
    pub preamble: Option<String>,
    /// Fidelity `full`: the conversation to continue and to keep after a successful call
    /// (an opaque key, unique per run). A failed call drops it.
    pub thread: Option<String>,
    /// Run around every tool call of an API agent session (not ACP, not prompt stages).
    pub tool_hooks: ToolHooks,
    /// The MCP servers this agent stage uses (the run's, or the subset the node names);
    /// empty for prompt stages.
    pub mcp_servers: Vec<crate::mcp::ServerDef>,
    /// What this call may still spend of the run's LLM budget (micro-USD), `None` without
    /// a budget: an agent session stops before a turn once its cost has reached it
    /// ([`LlmStop::BudgetSpent`]).
    pub budget_left_usd_micros: Option<i64>,
}

/// What one backend call consumed, for `stage.completed` and the usage rollup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmUsage {
    pub provider: String,
    /// The catalog id (aliases resolved).
    pub model: String,
    pub tokens: crate::llm::Usage,
    pub cost: crate::llm::Cost,
    /// Files the agent wrote or edited, relative to the work directory.
    pub files_touched: Vec<String>,
    pub inference_time: Duration,
    pub tool_time: Duration,
}

/// Why a backend call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LlmStop {
    /// The model (or agent) gave its answer.
    #[default]
    Completed,
    /// The agent used its turns (`max_turns`, or an ACP agent's `max_turn_requests`) while
    /// it still wanted tools: its work may be unfinished.
    TurnLimit,
    /// The model hit its output limit.
    MaxTokens,
    /// An agent session stopped between turns because this call's share of the run's LLM
    /// budget ([`LlmRequest::budget_left_usd_micros`]) was spent.
    BudgetSpent,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmResponse {
    pub text: String,
    pub stop: LlmStop,
    /// True for simulated replies: structured-output validation is skipped for them.
    pub simulated: bool,
    /// Usage of this call, when a real provider answered.
    pub usage: Option<LlmUsage>,
}

/// Where a backend sends live events (`agent.*`, `kind` and properties); the engine records
/// them as events of the stage's node.
pub type LlmEvents<'a> = &'a mut dyn FnMut(&str, serde_json::Value);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LlmError {
    pub message: String,
    /// Rate limits, timeouts, overloaded providers; auth and bad requests are not.
    pub retryable: bool,
}

/// Runs agent and prompt stages. Implementations must return promptly once `cancel` fires.
/// A call whose `feedback` has one more entry than the previous call of the same node
/// continues that conversation (structured-output repair turn).
pub trait LlmBackend: Send + Sync {
    fn complete(
        &self,
        req: &LlmRequest,
        cancel: &CancelToken,
        events: LlmEvents<'_>,
    ) -> Result<LlmResponse, LlmError>;

    /// The stage is done with its conversation (no more repair turns will follow).
    fn finish(&self, _node_id: &str) {}
}

/// `--dry-run`: every LLM stage succeeds at once with a simulated reply.
pub struct DryRunBackend;

impl LlmBackend for DryRunBackend {
    fn complete(
        &self,
        req: &LlmRequest,
        _: &CancelToken,
        events: LlmEvents<'_>,
    ) -> Result<LlmResponse, LlmError> {
        // What a provider would have been sent on a fresh conversation.
        let text = match req.preamble.as_deref().filter(|p| !p.trim().is_empty()) {
            Some(p) => format!("{p}\n\n{}", req.prompt),
            None => req.prompt.clone(),
        };
        events(
            event_kind::STAGE_PROMPT,
            serde_json::json!({"text": text, "provider": null, "model": req.model,
                               "continued": false, "simulated": true}),
        );
        let first_line = req.prompt.lines().next().unwrap_or("").trim();
        let shown: String = first_line.chars().take(80).collect();
        Ok(LlmResponse {
            text: format!("[dry run] stage `{}` completed: {shown}", req.node_id),
            stop: LlmStop::Completed,
            simulated: true,
            usage: None,
        })
    }
}

/// No provider configured: every LLM stage fails (deterministically) saying so.
pub struct UnconfiguredBackend;

impl LlmBackend for UnconfiguredBackend {
    fn complete(
        &self,
        req: &LlmRequest,
        _: &CancelToken,
        _: LlmEvents<'_>,
    ) -> Result<LlmResponse, LlmError> {
        let model = req.model.as_deref().unwrap_or("the default model");
        Err(LlmError {
            message: format!(
                "no LLM provider is configured for stage `{}` ({model}); configure a provider or use --dry-run to simulate LLM stages",
                req.node_id
            ),
            retryable: false,
        })
    }
}

/// Time as the engine sees it, so tests and benches can control it.
pub trait Clock: Send + Sync {
    fn now(&self) -> Instant;
    /// Sleeps up to `dur`; true if `cancel` fired first.
    fn sleep(&self, dur: Duration, cancel: &CancelToken) -> bool;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn sleep(&self, dur: Duration, cancel: &CancelToken) -> bool {
        cancel.sleep(dur)
    }
}
