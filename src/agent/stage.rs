//! The stage-level LLM backend: turns one agent or prompt stage request (node id, mode,
//! expanded prompt, model/provider attributes, work directory, and the validation errors of
//! earlier replies) into an agent session or prompt call, and continues the same
//! conversation when the engine asks again with more feedback (structured-output repair
//! turns). Shaped after the engine's `LlmBackend` so wiring is a field mapping. Must not
//! validate structured output, route, or record events itself (events go to the caller).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::{AgentConfig, AgentError, AgentEvent, Session, Steering};
use crate::engine::cancel::CancelToken;
use crate::llm::prompt::{PromptCall, PromptSession};
use crate::llm::provider::{default_provider, infer_provider, wire_model_id};
use crate::llm::structured::repair_message;
use crate::llm::{
    catalog, cost_of, ChatModel, Cost, Credentials, LlmError, Message, Provider, Speed,
    StreamEvent, Usage,
};
use crate::sandbox::Sandbox;

/// Agent session (tools) or prompt (one call, no tools).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageMode {
    Agent,
    Prompt,
}

/// One LLM stage call.
#[derive(Debug, Clone)]
pub struct StageRequest {
    /// Identifies the stage's conversation across repair calls.
    pub node_id: String,
    pub mode: StageMode,
    pub prompt: String,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub reasoning_effort: Option<String>,
    pub max_tokens: Option<i64>,
    pub workdir: PathBuf,
    /// Validation errors of earlier replies in this stage, oldest first; empty on the
    /// first call. A call with one more entry than the last continues that conversation.
    pub feedback: Vec<String>,
    /// Project memory in a prompt's system message (agents always get it).
    pub project_memory: bool,
}

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
}

impl StageBackend {
    pub fn new(model: Arc<dyn ChatModel>, creds: Arc<dyn Credentials>) -> Self {
        Self {
            model,
            creds,
            defaults: StageDefaults::default(),
            steering: Steering::new(),
            kept: Mutex::new(Vec::new()),
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

    pub fn steering(&self) -> &Steering {
        &self.steering
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
        req: &StageRequest,
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
        let input = match (&previous, req.feedback.last()) {
            (Some(_), Some(f)) => repair_message(f),
            (None, Some(f)) => format!("{}\n\n{}", req.prompt, repair_message(f)),
            _ => req.prompt.clone(),
        };

        match req.mode {
            StageMode::Agent => {
                let mut session = match previous.map(|k| k.conv) {
                    Some(Conversation::Agent(s)) => *s,
                    _ => {
                        let sandbox = Sandbox::new(&req.workdir).map_err(|e| StageError {
                            message: format!("stage `{}`: {e}", req.node_id),
                            retryable: false,
                            failure_class: "deterministic",
                            not_configured: None,
                        })?;
                        let cfg = AgentConfig {
                            provider: Some(provider),
                            max_tokens,
                            reasoning_effort: req.reasoning_effort.clone(),
                            max_turns: self.defaults.max_turns,
                            loop_threshold: self.defaults.loop_threshold,
                            shell: self.defaults.shell,
                            ..AgentConfig::new(&model_name)
                        };
                        Session::new(cfg, sandbox)?.with_steering(self.steering.clone())
                    }
                };
                let out = session.run(self.model.as_ref(), &input, cancel, on_event)?;
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
                    inference_time: out.inference_time,
                    tool_time: out.tool_time,
                })
            }
            StageMode::Prompt => {
                let call = PromptCall {
                    model: model_name.clone(),
                    provider: Some(provider),
                    system: None,
                    prompt: input.clone(),
                    max_tokens,
                    reasoning_effort: req.reasoning_effort.clone(),
                    project_memory: req.project_memory,
                    cwd: Some(req.workdir.clone()),
                };
                let mut s = PromptSession::new(self.model.as_ref(), &call)?;
                if let Some(Conversation::Prompt(msgs)) = previous.map(|k| k.conv) {
                    s = s.with_messages(msgs);
                }
                let t = std::time::Instant::now();
                let r = s.send(&input, cancel, &mut |ev| {
                    if let StreamEvent::TextDelta(text) = ev {
                        on_event(AgentEvent::TextDelta { text })
                    }
                })?;
                let inference_time = t.elapsed();
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
                    inference_time,
                    tool_time: Duration::ZERO,
                })
            }
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
