//! The stage-level LLM backend: turns one agent or prompt stage request (node id, mode,
//! expanded prompt, preamble, model/provider attributes, work directory, and the validation
//! errors of earlier replies) into an agent session or prompt call, and continues the same
//! conversation when the engine asks again with more feedback (structured-output repair
//! turns). For fidelity `full` it continues the conversation kept under the request's
//! thread key ([`Threads`]) and keeps the new one after success (dropped on failure).
//! Shaped after the engine's `LlmBackend` so wiring is a field mapping. Must not decide
//! fidelity or thread keys (the engine does), validate structured output, route, or record
//! events itself (events go to the caller).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::threads::{Thread, Threads};
use super::{AgentConfig, AgentError, AgentEvent, Session, Steering};
use crate::base::cancel::CancelToken;
use crate::base::redact::{NoRedaction, Redact};
use crate::engine::{LlmMode, LlmRequest};
use crate::llm::prompt::{PromptCall, PromptSession};
use crate::llm::provider::{default_provider, infer_provider, wire_model_id};
use crate::llm::structured::repair_message;
use crate::llm::{
    catalog, cost_of, ChatModel, Cost, Credentials, LlmError, Message, Provider, Speed,
    StreamEvent, Usage,
};
use crate::sandbox::Sandbox;

/// The reply to one stage call.
#[derive(Debug, Clone, PartialEq)]
pub struct StageReply {
    pub text: String,
    pub provider: Provider,
    /// The catalog id (aliases resolved).
    pub model: String,
    /// Usage of this call only (a repair call reports its own turns).
    pub usage: Usage,
    pub cost: Cost,
    pub files_touched: Vec<String>,
    pub turns: u32,
    /// Why the agent stopped (prompt calls: `Completed`).
    pub stop: super::AgentStop,
    pub inference_time: Duration,
    pub tool_time: Duration,
}

/// A failed stage call, classified for the engine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct StageError {
    pub message: String,
    pub retryable: bool,
    /// `deterministic`, `transient_infra`, `budget_exhausted` or `canceled`.
    pub failure_class: &'static str,
    /// The provider the stage needs has no credentials (or no endpoint).
    pub not_configured: Option<Provider>,
}

impl From<LlmError> for StageError {
    fn from(e: LlmError) -> Self {
        Self {
            retryable: e.retryable() || matches!(e.kind(), crate::llm::ErrorKind::RequestTimeout),
            failure_class: e.failure_class(),
            not_configured: match &e {
                LlmError::ProviderNotConfigured { provider, .. } => Some(*provider),
                _ => None,
            },
            message: e.to_string(),
        }
    }
}

impl From<AgentError> for StageError {
    fn from(e: AgentError) -> Self {
        match e {
            AgentError::Llm(l) => l.into(),
            AgentError::Cancelled { .. } => Self {
                message: e.to_string(),
                retryable: false,
                failure_class: "canceled",
                not_configured: None,
            },
        }
    }
}

enum Conversation {
    Agent(Box<Session>),
    Prompt(Vec<Message>),
}

struct Kept {
    node_id: String,
    feedback_len: usize,
    conv: Conversation,
}

/// Where a call's conversation comes from.
enum Origin {
    /// A repair turn continues the stage's previous call.
    Repair(Conversation),
    /// Fidelity `full` continues the thread's kept conversation.
    Thread(Thread),
    Fresh,
}

/// One resolved stage call.
struct Call {
    provider: Provider,
    model_name: String,
    model_id: String,
    max_tokens: Option<u64>,
    from: Origin,
    /// The user message: prompt (with preamble) or repair feedback.
    input: String,
}

/// Agent-session defaults for stages.
#[derive(Debug, Clone)]
pub struct StageDefaults {
    pub max_turns: u32,
    pub loop_threshold: u32,
    pub shell: super::tools::ShellLimits,
}

impl Default for StageDefaults {
    fn default() -> Self {
        let c = AgentConfig::new("");
        Self {
            max_turns: c.max_turns,
            loop_threshold: c.loop_threshold,
            shell: c.shell,
        }
    }
}

/// Conversations kept for repair calls (most recent stages).
const KEEP: usize = 16;

/// Runs LLM stages for one engine (shared by its runs; thread-safe).
pub struct StageBackend {
    model: Arc<dyn ChatModel>,
    creds: Arc<dyn Credentials>,
    defaults: StageDefaults,
    steering: Steering,
    kept: Mutex<Vec<Kept>>,
    threads: Threads,
    redactor: Arc<dyn Redact>,
}

impl StageBackend {
    pub fn new(model: Arc<dyn ChatModel>, creds: Arc<dyn Credentials>) -> Self {
        Self {
            model,
            creds,
            defaults: StageDefaults::default(),
            steering: Steering::new(),
            kept: Mutex::new(Vec::new()),
            threads: Threads::new(),
            redactor: Arc::new(NoRedaction),
        }
    }

    pub fn with_defaults(mut self, d: StageDefaults) -> Self {
        self.defaults = d;
        self
    }

    /// Uses a steering queue the server pushes `/steer` guidance into.
    pub fn with_steering(mut self, s: Steering) -> Self {
        self.steering = s;
        self
    }

    /// Hides secret values in everything sent to models (prompts, preambles, repair
    /// feedback, tool results, steering).
    pub fn with_redactor(mut self, r: Arc<dyn Redact>) -> Self {
        self.redactor = r;
        self
    }

    pub fn redactor(&self) -> &Arc<dyn Redact> {
        &self.redactor
    }

    pub fn steering(&self) -> &Steering {
        &self.steering
    }

    /// A vault value, for `{{ secrets.NAME }}` in an MCP server's `env` or `headers`.
    pub fn secret(&self, name: &str) -> Option<String> {
        self.creds.get(name)
    }

    /// The conversations kept for fidelity `full`.
    pub fn threads(&self) -> &Threads {
        &self.threads
    }

    /// The model a stage without `model` uses: the default model of the first configured
    /// provider among Anthropic, OpenAI, Gemini, else the global default.
    pub fn default_model(&self) -> String {
        default_provider(self.creds.as_ref())
            .default_model()
            .unwrap_or(catalog::DEFAULT_MODEL)
            .to_string()
    }

    /// Runs (or continues) a stage's conversation.
    pub fn complete(
        &self,
        req: &LlmRequest,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(AgentEvent),
    ) -> Result<StageReply, StageError> {
        let model_name = req.model.clone().unwrap_or_else(|| self.default_model());
        let pinned = match req.provider.as_deref().filter(|p| !p.trim().is_empty()) {
            Some(p) => Some(Provider::parse(p).ok_or_else(|| StageError {
                message: format!("unknown provider {p:?} for stage `{}`", req.node_id),
                retryable: false,
                failure_class: "deterministic",
                not_configured: None,
            })?),
            None => None,
        };
        let provider = infer_provider(&model_name, pinned)?;
        let model_id = wire_model_id(&model_name);
        let max_tokens = req.max_tokens.filter(|n| *n > 0).map(|n| n as u64);

        // Continue the conversation of the previous call of this stage, if this call
        // carries exactly one more piece of feedback.
        let previous = if req.feedback.is_empty() {
            self.take(&req.node_id);
            None
        } else {
            self.take(&req.node_id)
                .filter(|k| k.feedback_len + 1 == req.feedback.len())
        };
        // Fidelity `full`: the thread's conversation, on the first call of the stage.
        let continued = match (&req.thread, req.feedback.is_empty()) {
            (Some(key), true) => self.threads.get(key, provider),
            _ => None,
        };
        let first = match (&continued, req.preamble.as_deref()) {
            (None, Some(p)) if !p.trim().is_empty() => format!("{p}\n\n{}", req.prompt),
            _ => req.prompt.clone(),
        };
        let input = match (&previous, req.feedback.last()) {
            (Some(_), Some(f)) => repair_message(f),
            (None, Some(f)) => format!("{first}\n\n{}", repair_message(f)),
            _ => first,
        };
        let input = self.redactor.redact(&input).into_owned();
        on_event(AgentEvent::Prompt {
            text: input.clone(),
            provider,
            model: model_id.clone(),
            continued: previous.is_some() || continued.is_some(),
        });
        let from = match (previous, continued) {
            (Some(k), _) => Origin::Repair(k.conv),
            (None, Some(t)) => Origin::Thread(t),
            (None, None) => Origin::Fresh,
        };
        let call = Call {
            provider,
            model_name,
            model_id,
            max_tokens,
            from,
            input,
        };
        let result = self.converse(req, call, cancel, on_event);
        if result.is_err() {
            if let Some(key) = &req.thread {
                self.threads.remove(key);
            }
        }
        result
    }

    /// One call of a stage: a new or continued agent session or prompt conversation.
    fn converse(
        &self,
        req: &LlmRequest,
        call: Call,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(AgentEvent),
    ) -> Result<StageReply, StageError> {
        let Call {
            provider,
            model_name,
            model_id,
            max_tokens,
            from,
            input,
        } = call;
        let (model_name, input) = (model_name.as_str(), input.as_str());

        match req.mode {
            LlmMode::Agent => {
                let (repair, continued) = match from {
                    Origin::Repair(c) => (Some(c), None),
                    Origin::Thread(t) => (None, Some(t)),
                    Origin::Fresh => (None, None),
                };
                let mut session = match repair {
                    Some(Conversation::Agent(s)) => *s,
                    _ => {
                        let sandbox = Sandbox::new(&req.workdir)
                            .map_err(|e| StageError {
                                message: format!("stage `{}`: {e}", req.node_id),
                                retryable: false,
                                failure_class: "deterministic",
                                not_configured: None,
                            })?
                            .with_isolation(req.isolation.clone())
                            .with_env(req.env.clone());
                        let cfg = AgentConfig {
                            provider: Some(provider),
                            max_tokens,
                            reasoning_effort: req.reasoning_effort.clone(),
                            max_turns: req.max_turns.unwrap_or(self.defaults.max_turns),
                            loop_threshold: self.defaults.loop_threshold,
                            shell: self.defaults.shell,
                            hooks: req.tool_hooks.clone(),
                            ..AgentConfig::new(model_name)
                        };
                        let mcp = self.start_mcp(req, sandbox.root(), cancel, on_event)?;
                        let s = Session::new(cfg, sandbox)?
                            .with_steering(self.steering.clone())
                            .with_redactor(Arc::clone(&self.redactor));
                        let s = match mcp {
                            Some(m) => s.with_mcp(m),
                            None => s,
                        };
                        match continued {
                            Some(t) => s.with_history(t.messages),
                            None => s,
                        }
                    }
                };
                session.set_usd_budget(req.budget_left_usd_micros);
                let out = session.run(self.model.as_ref(), input, cancel, on_event);
                if let Some(summary) = session.mcp_summary() {
                    on_event(summary);
                }
                let out = out?;
                self.keep_thread(req, provider, &model_id, session.messages());
                self.keep(Kept {
                    node_id: req.node_id.clone(),
                    feedback_len: req.feedback.len(),
                    conv: Conversation::Agent(Box::new(session)),
                });
                Ok(StageReply {
                    text: out.text,
                    provider,
                    model: model_id,
                    usage: out.usage,
                    cost: out.cost,
                    files_touched: out.files_touched,
                    turns: out.turns,
                    stop: out.stop,
                    inference_time: out.inference_time,
                    tool_time: out.tool_time,
                })
            }
            LlmMode::Prompt => {
                let call = PromptCall {
                    model: model_name.to_string(),
                    provider: Some(provider),
                    system: None,
                    prompt: input.to_string(),
                    max_tokens,
                    reasoning_effort: req.reasoning_effort.clone(),
                    project_memory: req.project_memory,
                    cwd: Some(req.workdir.clone()),
                };
                let mut s = PromptSession::new(self.model.as_ref(), &call)?;
                match from {
                    Origin::Repair(Conversation::Prompt(msgs)) => s = s.with_messages(msgs),
                    // A prompt call has no tools: it continues a thread's text only.
                    Origin::Thread(t) => s = s.with_messages(super::threads::text_only(t.messages)),
                    _ => {}
                }
                let t = std::time::Instant::now();
                let r = s.send(input, cancel, &mut |ev| {
                    if let StreamEvent::TextDelta(text) = ev {
                        on_event(AgentEvent::TextDelta { text })
                    }
                })?;
                let inference_time = t.elapsed();
                self.keep_thread(req, provider, &model_id, s.messages());
                self.keep(Kept {
                    node_id: req.node_id.clone(),
                    feedback_len: req.feedback.len(),
                    conv: Conversation::Prompt(s.into_messages()),
                });
                Ok(StageReply {
                    text: r.text,
                    provider,
                    cost: cost_of(&model_id, &r.usage, Speed::Standard),
                    model: model_id,
                    usage: r.usage,
                    files_touched: Vec::new(),
                    turns: 1,
                    stop: super::AgentStop::Completed,
                    inference_time,
                    tool_time: Duration::ZERO,
                })
            }
        }
    }

    /// Starts the stage's MCP servers (none: `None`); a `required` one that fails fails the
    /// stage before any model call.
    fn start_mcp(
        &self,
        req: &LlmRequest,
        workdir: &std::path::Path,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(AgentEvent),
    ) -> Result<Option<super::mcp::McpTools>, StageError> {
        if req.mcp_servers.is_empty() {
            return Ok(None);
        }
        let creds = &self.creds;
        let lookup = |name: &str| creds.get(name);
        let cx = super::mcp::StartContext {
            isolation: &req.isolation,
            workdir,
            env: req.env.as_deref(),
            secrets: &lookup,
        };
        let tools = super::mcp::McpTools::start(&req.mcp_servers, &cx, cancel, on_event);
        if cancel.is_cancelled() {
            return Err(AgentError::Cancelled {
                reason: cancel.reason(),
            }
            .into());
        }
        if let Some(f) = tools.required_failure() {
            return Err(StageError {
                message: format!(
                    "stage `{}`: the required MCP server `{}` failed: {}",
                    req.node_id, f.server, f.error
                ),
                retryable: f.transient,
                failure_class: if f.transient {
                    "transient_infra"
                } else {
                    "deterministic"
                },
                not_configured: None,
            });
        }
        Ok(Some(tools))
    }

    /// After a successful call: the conversation becomes the thread's (fidelity `full`).
    fn keep_thread(
        &self,
        req: &LlmRequest,
        provider: Provider,
        model: &str,
        messages: &[crate::llm::Message],
    ) {
        if let Some(key) = &req.thread {
            self.threads.store(
                key,
                Thread {
                    provider,
                    model: model.to_string(),
                    messages: messages.to_vec(),
                },
            );
        }
    }

    /// Forgets a stage's conversation (call when the stage is done).
    pub fn finish(&self, node_id: &str) {
        self.take(node_id);
    }

    fn take(&self, node_id: &str) -> Option<Kept> {
        let mut k = self.kept.lock();
        let i = k.iter().position(|x| x.node_id == node_id)?;
        Some(k.remove(i))
    }

    fn keep(&self, kept: Kept) {
        let mut k = self.kept.lock();
        k.retain(|x| x.node_id != kept.node_id);
        k.push(kept);
        if k.len() > KEEP {
            let excess = k.len() - KEEP;
            k.drain(..excess);
        }
    }
}
