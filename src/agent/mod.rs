//! The agent loop (engine.md §12): a multi-turn conversation with a [`ChatModel`] whose tool
//! calls run inside a [`Sandbox`]. Owns the session state (conversation, usage, files
//! touched), steering injection, loop detection, the turn limit, cancellation between turns,
//! hiding secret values from the model (input, tool results, steering: [`Redact`]) and the
//! `agent.*` events. Must not know about stages, the store, or any provider's wire
//! format; it talks to models only through [`ChatModel`].

pub mod acp;
pub mod backend;
pub mod hooks;
pub mod loops;
pub mod mcp;
pub mod stage;
pub mod threads;
pub mod tools;
pub mod truncate;

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::base::cancel::CancelToken;
use crate::base::event_kind;
use crate::base::redact::{NoRedaction, Redact, REDACTED};
use crate::engine::services::ToolHooks;
use crate::llm::memory::project_memory;
use crate::llm::provider::infer_provider;
use crate::llm::{
    cost_of, ChatModel, Cost, LlmError, Message, Part, Provider, Request, Role, Speed, StopReason,
    StreamEvent, ToolProfile, ToolSpec, Usage,
};
use crate::sandbox::Sandbox;
use tools::ShellLimits;

/// Session settings.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub model: String,
    /// Pinned provider; inferred from the catalog when `None`.
    pub provider: Option<Provider>,
    pub max_tokens: Option<u64>,
    pub reasoning_effort: Option<String>,
    /// Model calls allowed per [`Session::run`]; 0 = unlimited.
    pub max_turns: u32,
    /// Tool-using turns a repeating pattern must cover to count as a loop (see [`loops`]);
    /// 0 disables detection.
    pub loop_threshold: u32,
    pub shell: ShellLimits,
    /// Put project memory (AGENTS.md + the provider's file) in the system prompt.
    pub project_memory: bool,
    /// Extra instructions appended to the system prompt.
    pub instructions: Option<String>,
    /// Overrides the tool set chosen from the provider.
    pub profile: Option<ToolProfile>,
    /// Shell commands run before and after every tool call ([`hooks`]).
    pub hooks: ToolHooks,
}

impl AgentConfig {
    pub fn new(model: &str) -> Self {
        Self {
            model: model.to_string(),
            provider: None,
            max_tokens: None,
            reasoning_effort: None,
            max_turns: 0,
            loop_threshold: 3,
            shell: ShellLimits::default(),
            project_memory: true,
            instructions: None,
            profile: None,
            hooks: ToolHooks::default(),
        }
    }
}

/// Guidance pushed from outside (the server's `/steer`) while a session runs, plus whether
/// an agent session is running now. Cheap to clone; all clones share one queue.
///
/// Sessions mark themselves running with [`Steering::enter`]; [`Steering::offer`] queues
/// guidance only while one is, so a caller can refuse guidance nobody would read. Guidance
/// that arrives while the model gives its final answer is not lost: the session takes it
/// with [`ActiveSession::end_or_take`] and makes one more model call. Guidance still queued
/// when the last session ends (cancelled or failed) is dropped.
#[derive(Debug, Clone, Default)]
pub struct Steering {
    inner: Arc<Mutex<SteerState>>,
}

#[derive(Debug, Default)]
struct SteerState {
    queue: VecDeque<Steered>,
    /// Agent sessions running now (parallel branches may run several).
    active: usize,
}

/// Where guidance points (SPEC §2.11 `location`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SteerLocation {
    pub file: String,
    /// 1-based; `None` = the whole file.
    pub line: Option<u64>,
}

impl SteerLocation {
    /// `file:line` (or `file`), the form compilers and editors use.
    pub fn render(&self) -> String {
        match self.line {
            Some(l) => format!("{}:{l}", self.file),
            None => self.file.clone(),
        }
    }

    pub fn to_json(&self) -> Value {
        match self.line {
            Some(l) => json!({"file": self.file, "line": l}),
            None => json!({ "file": self.file }),
        }
    }
}

/// One queued steering message: the text the model will see, and the location it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steered {
    pub text: String,
    pub location: Option<SteerLocation>,
}

/// [`Steering::offer`] found no agent session running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no agent session is running")]
pub struct NoActiveSession;

impl Steering {
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues `text` verbatim, whether or not a session runs (loop warnings, tests).
    pub fn push(&self, text: impl Into<String>) {
        self.inner.lock().queue.push_back(Steered {
            text: text.into(),
            location: None,
        });
    }

    /// The message a model gets for a steering request (SPEC §2.11).
    pub fn render(guidance: &str, location: Option<&SteerLocation>) -> String {
        let guidance = guidance.trim();
        match location {
            Some(loc) => format!("Guidance from the user about {}:\n{guidance}", loc.render()),
            None => format!("Guidance from the user:\n{guidance}"),
        }
    }

    /// Queues a steering request whether or not a session runs.
    pub fn push_guidance(&self, guidance: &str, location: Option<SteerLocation>) {
        let text = Self::render(guidance, location.as_ref());
        self.inner
            .lock()
            .queue
            .push_back(Steered { text, location });
    }

    /// Queues a steering request if an agent session is running now; the check and the
    /// push are atomic with a session's end ([`ActiveSession::end_or_take`]), so accepted
    /// guidance always reaches a model.
    pub fn offer(
        &self,
        guidance: &str,
        location: Option<SteerLocation>,
    ) -> Result<(), NoActiveSession> {
        let text = Self::render(guidance, location.as_ref());
        let mut s = self.inner.lock();
        if s.active == 0 {
            return Err(NoActiveSession);
        }
        s.queue.push_back(Steered { text, location });
        Ok(())
    }

    /// Takes everything queued.
    pub fn drain(&self) -> Vec<Steered> {
        self.inner.lock().queue.drain(..).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.lock().queue.is_empty()
    }

    /// True while at least one agent session runs.
    pub fn is_active(&self) -> bool {
        self.inner.lock().active > 0
    }

    /// Marks an agent session as running until the returned guard ends or is dropped.
    pub fn enter(&self) -> ActiveSession {
        self.inner.lock().active += 1;
        ActiveSession {
            steering: self.clone(),
            ended: false,
        }
    }

    fn leave(&self, s: &mut SteerState) {
        s.active = s.active.saturating_sub(1);
        if s.active == 0 {
            s.queue.clear();
        }
    }
}

/// A running agent session, as [`Steering`] counts them (see [`Steering::enter`]).
#[derive(Debug)]
pub struct ActiveSession {
    steering: Steering,
    ended: bool,
}

impl ActiveSession {
    /// Called when the session would end: returns the guidance queued meanwhile (the
    /// session goes on), or nothing, in which case the session no longer counts as running.
    pub fn end_or_take(&mut self) -> Vec<Steered> {
        if self.ended {
            return Vec::new();
        }
        let mut s = self.steering.inner.lock();
        if s.queue.is_empty() {
            self.ended = true;
            self.steering.leave(&mut s);
            Vec::new()
        } else {
            s.queue.drain(..).collect()
        }
    }
}

impl Drop for ActiveSession {
    fn drop(&mut self) {
        if !self.ended {
            let mut s = self.steering.inner.lock();
            self.steering.leave(&mut s);
        }
    }
}

/// An `agent.*` event.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// The exact text of the user message a stage call sends (preamble + expanded prompt,
    /// or the repair message of a continued conversation), after redaction.
    Prompt {
        text: String,
        provider: Provider,
        model: String,
        /// The call continues an earlier conversation (a `full` thread or a repair turn),
        /// whose messages the model also sees.
        continued: bool,
    },
    SessionStarted {
        provider: Provider,
        model: String,
    },
    /// An ACP agent session started (same kind as [`AgentEvent::SessionStarted`]).
    AcpSessionStarted {
        command: String,
        session_id: String,
    },
    /// A piece of streamed assistant text.
    TextDelta {
        text: String,
    },
    Message {
        text: String,
        model: String,
        tool_call_count: usize,
        usage: Usage,
        cost: Cost,
    },
    ToolStarted {
        tool_name: String,
        tool_call_id: String,
        arguments: Value,
    },
    ToolCompleted {
        tool_name: String,
        tool_call_id: String,
        /// The full output (the model may have seen a truncated copy).
        output: String,
        is_error: bool,
    },
    /// A `tool_hooks` command failed (a failing pre hook refused the call).
    ToolHookFailed {
        /// `pre` or `post`.
        hook: &'static str,
        tool_name: String,
        tool_call_id: String,
        /// The hook's exit code (`None`: killed, timed out or could not start).
        exit_code: Option<i32>,
        /// The end of the hook's output (stderr, else stdout) or why it did not run.
        output: String,
    },
    LoopDetected {
        /// Turns in the repeating pattern (1 to 3).
        pattern_length: usize,
        /// Back-to-back repetitions seen.
        repeats: usize,
    },
    TurnLimit {
        max_turns: u32,
    },
    SteeringInjected {
        text: String,
        location: Option<SteerLocation>,
    },
    LlmRetry {
        provider: Provider,
        model: String,
        attempt: u32,
        delay_secs: f64,
        error: String,
    },
    SessionEnded {
        stop: AgentStop,
    },
    /// An MCP server of the stage started (or connected) and listed its tools.
    McpReady {
        server: String,
        tool_count: usize,
        duration_ms: u64,
        /// `(offered name, the server's name)`: `mcp__<server>__<tool>` and `<tool>`.
        tools: Vec<(String, String)>,
    },
    /// An MCP server of the stage could not be started, connected or listed.
    McpFailed {
        server: String,
        error: String,
        required: bool,
        /// A retry might succeed (a timeout, a lost connection).
        transient: bool,
    },
    /// After each call of a stage with MCP servers: each server's state, the tools it
    /// offered and the agent used, and its stderr tail ([`mcp::McpTools::summary`]).
    McpSummary {
        summary: Value,
    },
}

impl AgentEvent {
    /// The event kind (api.md §3.3 names).
    pub fn kind(&self) -> &'static str {
        match self {
            AgentEvent::Prompt { .. } => event_kind::STAGE_PROMPT,
            AgentEvent::SessionStarted { .. } | AgentEvent::AcpSessionStarted { .. } => {
                event_kind::AGENT_SESSION_STARTED
            }
            AgentEvent::TextDelta { .. } => event_kind::AGENT_MESSAGE_DELTA,
            AgentEvent::Message { .. } => event_kind::AGENT_MESSAGE,
            AgentEvent::ToolStarted { .. } => event_kind::AGENT_TOOL_STARTED,
            AgentEvent::ToolCompleted { .. } => event_kind::AGENT_TOOL_COMPLETED,
            AgentEvent::ToolHookFailed { .. } => event_kind::AGENT_TOOL_HOOK_FAILED,
            AgentEvent::LoopDetected { .. } => event_kind::AGENT_LOOP_DETECTED,
            AgentEvent::TurnLimit { .. } => event_kind::AGENT_TURN_LIMIT,
            AgentEvent::SteeringInjected { .. } => event_kind::AGENT_STEERING_INJECTED,
            AgentEvent::LlmRetry { .. } => event_kind::AGENT_LLM_RETRY,
            AgentEvent::SessionEnded { .. } => event_kind::AGENT_SESSION_ENDED,
            AgentEvent::McpReady { .. } => event_kind::AGENT_MCP_READY,
            AgentEvent::McpFailed { .. } => event_kind::AGENT_MCP_FAILED,
            AgentEvent::McpSummary { .. } => event_kind::AGENT_MCP_SUMMARY,
        }
    }

    /// The event's properties object.
    pub fn properties(&self) -> Value {
        match self {
            AgentEvent::Prompt {
                text,
                provider,
                model,
                continued,
            } => json!({"text": text, "provider": provider.id(), "model": model,
                        "continued": continued}),
            AgentEvent::SessionStarted { provider, model } => {
                json!({"provider": provider.id(), "model": model})
            }
            AgentEvent::AcpSessionStarted {
                command,
                session_id,
            } => json!({"backend": "acp", "command": command, "session_id": session_id}),
            AgentEvent::TextDelta { text } => json!({ "text": text }),
            AgentEvent::Message {
                text,
                model,
                tool_call_count,
                usage,
                cost,
            } => json!({
                "text": text, "model": model, "tool_call_count": tool_call_count,
                "usage": {
                    "tokens": {"input": usage.input, "output": usage.output, "reasoning": usage.reasoning,
                               "cache_read": usage.cache_read, "cache_write": usage.cache_write},
                    "cost": cost.to_json(),
                },
            }),
            AgentEvent::ToolStarted {
                tool_name,
                tool_call_id,
                arguments,
            } => {
                json!({"tool_name": tool_name, "tool_call_id": tool_call_id, "arguments": arguments})
            }
            AgentEvent::ToolCompleted {
                tool_name,
                tool_call_id,
                output,
                is_error,
            } => {
                json!({"tool_name": tool_name, "tool_call_id": tool_call_id, "output": output, "is_error": is_error})
            }
            AgentEvent::ToolHookFailed {
                hook,
                tool_name,
                tool_call_id,
                exit_code,
                output,
            } => json!({"hook": hook, "tool_name": tool_name, "tool_call_id": tool_call_id,
                "exit_code": exit_code, "output": output}),
            AgentEvent::LoopDetected {
                pattern_length,
                repeats,
            } => json!({"pattern_length": pattern_length, "repeats": repeats}),
            AgentEvent::TurnLimit { max_turns } => json!({ "max_turns": max_turns }),
            AgentEvent::SteeringInjected { text, location } => match location {
                Some(l) => json!({"text": text, "location": l.to_json()}),
                None => json!({ "text": text }),
            },
            AgentEvent::LlmRetry {
                provider,
                model,
                attempt,
                delay_secs,
                error,
            } => json!({"provider": provider.id(), "model": model, "attempt": attempt,
                        "delay_secs": delay_secs, "error": error}),
            AgentEvent::SessionEnded { stop } => json!({ "stop": stop.as_str() }),
            AgentEvent::McpReady {
                server,
                tool_count,
                duration_ms,
                tools,
            } => json!({"server": server, "tool_count": tool_count, "duration_ms": duration_ms,
                        "tools": tools.iter().map(|(name, original)| json!({
                            "name": name, "original_name": original})).collect::<Vec<_>>()}),
            AgentEvent::McpFailed {
                server,
                error,
                required,
                transient: _,
            } => json!({"server": server, "error": error, "required": required}),
            AgentEvent::McpSummary { summary } => summary.clone(),
        }
    }
}

/// Why a run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentStop {
    /// The model answered without tool calls.
    Completed,
    /// `max_turns` model calls were made while the model still wanted tools.
    TurnLimit,
    /// The model hit its output limit without asking for tools.
    MaxTokens,
    /// The run spent its token budget ([`Session::with_token_budget`]).
    TokenBudget,
    /// The run's cost reached its USD budget ([`Session::set_usd_budget`]) between turns.
    UsdBudget,
}

impl AgentStop {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentStop::Completed => "completed",
            AgentStop::TurnLimit => "turn_limit",
            AgentStop::MaxTokens => "max_tokens",
            AgentStop::TokenBudget => "token_budget",
            AgentStop::UsdBudget => "usd_budget",
        }
    }
}

/// The result of one [`Session::run`].
#[derive(Debug, Clone, PartialEq)]
pub struct AgentOutcome {
    /// The last non-empty assistant text of this run.
    pub text: String,
    /// Usage of this run's model calls.
    pub usage: Usage,
    pub cost: Cost,
    /// Model calls made in this run.
    pub turns: u32,
    pub tool_calls: u32,
    /// Files touched in this run (relative to the sandbox root, first-touch order).
    pub files_touched: Vec<String>,
    pub stop: AgentStop,
    /// The provider and model id used.
    pub provider: Provider,
    pub model: String,
    /// Time spent waiting for the model (all calls, retries included).
    pub inference_time: std::time::Duration,
    /// Time spent running tools.
    pub tool_time: std::time::Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Llm(#[from] LlmError),
    #[error("the agent session was cancelled{}", .reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default())]
    Cancelled { reason: Option<String> },
}

impl AgentError {
    /// The engine's failure class (see [`crate::llm::ErrorKind::failure_class`]).
    pub fn failure_class(&self) -> &'static str {
        match self {
            AgentError::Llm(e) => e.failure_class(),
            AgentError::Cancelled { .. } => "canceled",
        }
    }
}

/// The warning injected when a loop is detected.
pub const LOOP_WARNING: &str = "You keep making the same tool calls with the same arguments (the same turn, or \
the same few turns, over and over) without progress. Stop repeating them: try a different approach, or if you \
are done, reply with your final answer.";

/// One agent session: a conversation that can take several inputs.
pub struct Session {
    config: AgentConfig,
    provider: Provider,
    profile: ToolProfile,
    sandbox: Sandbox,
    system: String,
    tools: Vec<ToolSpec>,
    messages: Vec<Message>,
    usage: Usage,
    files_touched: Vec<String>,
    started: bool,
    steering: Steering,
    redactor: Arc<dyn Redact>,
    /// A secret value was hidden from the model in this session.
    hid_secret: bool,
    /// The stage's MCP servers and their tools.
    mcp: Option<mcp::McpTools>,
    /// Replaces the coding tools (`with_toolset`).
    toolset: Option<Box<dyn tools::ToolSet>>,
    /// Input + output tokens one [`Session::run`] may spend before it stops (`None`: no cap).
    token_budget: Option<u64>,
    usd_budget: Option<i64>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("model", &self.config.model)
            .field("provider", &self.provider)
            .field("messages", &self.messages.len())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A new session. Fails only when the provider cannot be inferred from the model.
    pub fn new(config: AgentConfig, sandbox: Sandbox) -> Result<Self, AgentError> {
        let provider = infer_provider(&config.model, config.provider)?;
        let profile = config.profile.unwrap_or(provider.tool_profile());
        let system = system_prompt(&config, provider, profile, &sandbox);
        Ok(Self {
            tools: tools::specs(profile),
            config,
            provider,
            profile,
            sandbox,
            system,
            messages: Vec::new(),
            usage: Usage::default(),
            files_touched: Vec::new(),
            started: false,
            steering: Steering::new(),
            redactor: Arc::new(NoRedaction),
            hid_secret: false,
            mcp: None,
            toolset: None,
            token_budget: None,
            usd_budget: None,
        })
    }

    /// Offers `set`'s tools instead of the coding tools; every call goes to it.
    pub fn with_toolset(mut self, set: Box<dyn tools::ToolSet>) -> Self {
        self.tools = set.specs();
        self.toolset = Some(set);
        self
    }

    /// Replaces the system prompt (a session that is not a coding agent).
    pub fn with_system_prompt(mut self, system: String) -> Self {
        self.system = system;
        self
    }

    /// Stops a run before a model call after the first once its priced cost reaches
    /// `micros` ([`AgentStop::UsdBudget`]); `None` lifts the limit. Set per run: the stage
    /// backend passes what the run's LLM budget leaves for each call.
    pub fn set_usd_budget(&mut self, micros: Option<i64>) {
        self.usd_budget = micros;
    }

    /// Stops a run before a model call once its input + output tokens reach `tokens`
    /// ([`AgentStop::TokenBudget`]).
    pub fn with_token_budget(mut self, tokens: u64) -> Self {
        self.token_budget = Some(tokens);
        self
    }

    /// Offers the tools of the stage's MCP servers and tells the model about the servers
    /// (failed ones named) in the system prompt.
    pub fn with_mcp(mut self, tools: mcp::McpTools) -> Self {
        if let Some(section) = tools.prompt_section() {
            let section = self.redactor.redact(&section).into_owned();
            self.system.push_str("\n\n");
            self.system.push_str(&section);
        }
        self.tools.extend(tools.specs());
        self.mcp = Some(tools);
        self
    }

    /// The MCP servers' state for the stage details (`agent.mcp.summary`), when the session
    /// has any.
    pub fn mcp_summary(&self) -> Option<AgentEvent> {
        self.mcp.as_ref().map(|m| AgentEvent::McpSummary {
            summary: m.summary(),
        })
    }

    /// Lists MCP tools again where a server said they changed, before a model call.
    fn refresh_mcp_tools(&mut self, cancel: &CancelToken) {
        let Some(m) = self.mcp.as_mut() else { return };
        if m.refresh(cancel) {
            let mut tools = tools::specs(self.profile);
            tools.extend(m.specs());
            self.tools = tools;
        }
    }

    /// Continues an earlier conversation (fidelity `full` thread reuse).
    pub fn with_history(mut self, messages: Vec<Message>) -> Self {
        self.messages = messages;
        self
    }

    /// Uses a shared steering queue (the server keeps a clone to push guidance into).
    pub fn with_steering(mut self, steering: Steering) -> Self {
        self.steering = steering;
        self
    }

    /// Hides secret values in everything sent to the model: the input, tool results and
    /// steering. Once something was hidden, a file write containing [`REDACTED`] is refused
    /// (it would put the marker where the secret was).
    pub fn with_redactor(mut self, redactor: Arc<dyn Redact>) -> Self {
        self.redactor = redactor;
        self
    }

    /// `text` as the model may see it.
    fn for_model(&mut self, text: String) -> String {
        match self.redactor.redact(&text) {
            std::borrow::Cow::Borrowed(_) => text,
            std::borrow::Cow::Owned(hidden) => {
                self.hid_secret = true;
                hidden
            }
        }
    }

    /// The session's steering queue.
    pub fn steering(&self) -> &Steering {
        &self.steering
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    pub fn into_messages(self) -> Vec<Message> {
        self.messages
    }

    pub fn system_prompt(&self) -> &str {
        &self.system
    }

    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// Usage summed over every run of this session.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// Files touched over every run of this session.
    pub fn files_touched(&self) -> &[String] {
        &self.files_touched
    }

    pub fn provider(&self) -> Provider {
        self.provider
    }

    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// Processes one input: model call, tools, steering, repeat until the model answers
    /// without tools, the turn limit is reached, or the session is cancelled.
    pub fn run(
        &mut self,
        model: &dyn ChatModel,
        input: &str,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(AgentEvent),
    ) -> Result<AgentOutcome, AgentError> {
        let steering = self.steering.clone();
        let steering = &steering;
        // Counts as a running agent for `/steer` until the final answer (or an error).
        let mut active = steering.enter();
        let model_id = crate::llm::provider::wire_model_id(&self.config.model);
        if !self.started {
            self.started = true;
            on_event(AgentEvent::SessionStarted {
                provider: self.provider,
                model: model_id.clone(),
            });
        }
        let input = self.for_model(input.to_string());
        self.messages.push(Message::user(input));
        let first = steering.drain();
        self.inject_steering(first, on_event);

        let mut usage = Usage::default();
        let mut text = String::new();
        let mut turns = 0u32;
        let mut tool_calls = 0u32;
        let mut touched: Vec<String> = Vec::new();
        let mut loops = loops::LoopDetector::new(self.config.loop_threshold);
        let mut reported_model = model_id.clone();
        let mut inference_time = std::time::Duration::ZERO;
        let mut tool_time = std::time::Duration::ZERO;
        let stop = loop {
            if cancel.is_cancelled() {
                return Err(AgentError::Cancelled {
                    reason: cancel.reason(),
                });
            }
            if self.config.max_turns > 0 && turns >= self.config.max_turns {
                on_event(AgentEvent::TurnLimit {
                    max_turns: self.config.max_turns,
                });
                break AgentStop::TurnLimit;
            }
            if self
                .token_budget
                .is_some_and(|b| usage.input + usage.output >= b)
            {
                break AgentStop::TokenBudget;
            }
            // The first turn was allowed by the caller's own check; later ones stop once this
            // run's priced cost has reached what it may spend.
            if turns > 0
                && self
                    .usd_budget
                    .is_some_and(|b| cost_of(&model_id, &usage, Speed::Standard).usd_micros >= b)
            {
                break AgentStop::UsdBudget;
            }
            self.refresh_mcp_tools(cancel);
            // Lend the conversation to the request instead of cloning it.
            let req = Request {
                model: self.config.model.clone(),
                provider: Some(self.provider),
                system: Some(std::mem::take(&mut self.system)),
                messages: std::mem::take(&mut self.messages),
                tools: std::mem::take(&mut self.tools),
                max_tokens: self.config.max_tokens,
                reasoning_effort: self.config.reasoning_effort.clone(),
            };
            let provider = self.provider;
            let t0 = std::time::Instant::now();
            let result = model.chat(&req, cancel, &mut |ev| match ev {
                StreamEvent::TextDelta(t) => on_event(AgentEvent::TextDelta { text: t }),
                StreamEvent::Retry {
                    attempt,
                    delay_ms,
                    error,
                } => on_event(AgentEvent::LlmRetry {
                    provider,
                    model: model_id.clone(),
                    attempt,
                    delay_secs: delay_ms as f64 / 1000.0,
                    error,
                }),
                StreamEvent::ToolCall(_) | StreamEvent::Done(_) => {}
            });
            inference_time += t0.elapsed();
            self.system = req.system.unwrap_or_default();
            self.messages = req.messages;
            self.tools = req.tools;
            let resp = match result {
                Ok(r) => r,
                Err(LlmError::Cancelled) => {
                    return Err(AgentError::Cancelled {
                        reason: cancel.reason(),
                    })
                }
                Err(e) => return Err(e.into()),
            };
            turns += 1;
            usage.add(&resp.usage);
            self.usage.add(&resp.usage);
            if !resp.model.is_empty() {
                reported_model = resp.model.clone();
            }
            let msg = resp.to_message();
            let calls: Vec<_> = msg.tool_calls().cloned().collect();
            self.messages.push(msg);
            on_event(AgentEvent::Message {
                text: resp.text.clone(),
                model: reported_model.clone(),
                tool_call_count: calls.len(),
                usage: resp.usage,
                cost: cost_of(&model_id, &resp.usage, Speed::Standard),
            });
            if !resp.text.trim().is_empty() {
                text = resp.text.clone();
            }
            if calls.is_empty() {
                // Guidance that arrived during the final answer gets one more model call.
                let late = active.end_or_take();
                if !late.is_empty() {
                    self.inject_steering(late, on_event);
                    continue;
                }
                break if resp.stop_reason == StopReason::MaxTokens {
                    AgentStop::MaxTokens
                } else {
                    AgentStop::Completed
                };
            }
            let mut results = Vec::with_capacity(calls.len());
            for c in &calls {
                if cancel.is_cancelled() {
                    // Answer every call so the conversation stays well-formed, run nothing.
                    results.push(Part::ToolResult {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        content: "Error: not run: the session was cancelled".into(),
                        is_error: true,
                    });
                    continue;
                }
                tool_calls += 1;
                on_event(AgentEvent::ToolStarted {
                    tool_name: c.name.clone(),
                    tool_call_id: c.id.clone(),
                    arguments: c.arguments.clone(),
                });
                let t1 = std::time::Instant::now();
                let call = hooks::Call {
                    tool_name: &c.name,
                    tool_call_id: &c.id,
                    arguments: &c.arguments,
                };
                let hooks = &self.config.hooks;
                let refusal = hooks::pre(hooks, &call, &self.sandbox, cancel);
                let out = if let Some(why) = refusal {
                    on_event(why.event(&call));
                    tools::refused(&why.for_model())
                } else if self.hid_secret && writes_marker(&c.name, &c.arguments) {
                    tools::refused(WRITES_MARKER)
                } else if let Some(m) = self.mcp.as_mut().filter(|m| m.owns(&c.name)) {
                    m.call(&c.name, &c.arguments, cancel)
                } else if let Some(set) = self.toolset.as_mut() {
                    set.call(&c.name, &c.arguments, cancel)
                } else {
                    tools::execute(
                        &c.name,
                        &c.arguments,
                        &self.sandbox,
                        &self.config.shell,
                        self.profile,
                        cancel,
                    )
                };
                if let Some(failed) = hooks::post(hooks, &call, out.is_error, &self.sandbox, cancel)
                {
                    on_event(failed.event(&call));
                }
                tool_time += t1.elapsed();
                for t in &out.touched {
                    if !touched.contains(t) {
                        touched.push(t.clone());
                    }
                    if !self.files_touched.contains(t) {
                        self.files_touched.push(t.clone());
                    }
                }
                on_event(AgentEvent::ToolCompleted {
                    tool_name: c.name.clone(),
                    tool_call_id: c.id.clone(),
                    output: out.output,
                    is_error: out.is_error,
                });
                results.push(Part::ToolResult {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    content: self.for_model(out.for_model),
                    is_error: out.is_error,
                });
            }
            self.messages.push(Message {
                role: Role::User,
                parts: results,
            });
            if let Some(found) = loops.push(loops::signature(&calls)) {
                on_event(AgentEvent::LoopDetected {
                    pattern_length: found.pattern_length,
                    repeats: found.repeats,
                });
                steering.push(LOOP_WARNING);
            }
            let queued = steering.drain();
            self.inject_steering(queued, on_event);
        };
        on_event(AgentEvent::SessionEnded { stop });
        Ok(AgentOutcome {
            text,
            cost: cost_of(&model_id, &usage, Speed::Standard),
            usage,
            turns,
            tool_calls,
            files_touched: touched,
            stop,
            provider: self.provider,
            model: reported_model,
            inference_time,
            tool_time,
        })
    }

    fn inject_steering(&mut self, queued: Vec<Steered>, on_event: &mut dyn FnMut(AgentEvent)) {
        for Steered { text, location } in queued {
            if text.trim().is_empty() {
                continue;
            }
            let text = self.for_model(text);
            on_event(AgentEvent::SteeringInjected {
                text: text.clone(),
                location,
            });
            // Merge into a trailing user turn (tool results, or the input) so providers
            // with strict alternation see one user message.
            match self.messages.last_mut() {
                Some(m) if m.role == Role::User => m.parts.push(Part::text(text)),
                _ => self.messages.push(Message::user(text)),
            }
        }
    }
}

/// Why a file write is refused after a secret was hidden from the model.
const WRITES_MARKER: &str =
    "refused: the content contains [REDACTED], which stands for a secret value \
hidden from you; writing it would replace the secret in the file. Leave the lines holding it \
unchanged and edit around them.";

/// A file-writing tool call whose arguments contain the redaction marker.
fn writes_marker(tool: &str, args: &Value) -> bool {
    matches!(tool, "write_file" | "edit_file" | "apply_patch")
        && args.to_string().contains(REDACTED)
}

fn system_prompt(
    config: &AgentConfig,
    provider: Provider,
    profile: ToolProfile,
    sb: &Sandbox,
) -> String {
    let edit = match profile {
        ToolProfile::OpenAi => "apply_patch",
        _ => "edit_file",
    };
    let mut s = format!(
        "You are a coding agent working in the directory {root}. Use the tools to inspect and \
         change files and to run commands there.\n\
         - File paths are relative to the working directory; absolute paths must stay inside it.\n\
         - Read a file before changing it; change existing files with {edit}, create new ones \
         with write_file.\n\
         - Run the project's checks with shell when they exist.\n\
         - When the task is complete, reply with a short summary of what you did and do not \
         call any more tools.\n\
         Platform: {os}.",
        root = sb.root().display(),
        os = std::env::consts::OS,
    );
    if config.project_memory {
        let mem = project_memory(sb.root(), provider);
        if !mem.is_empty() {
            s.push_str("\n\nProject instructions:\n\n");
            s.push_str(&mem);
        }
    }
    if let Some(extra) = config
        .instructions
        .as_deref()
        .filter(|t| !t.trim().is_empty())
    {
        s.push_str("\n\n");
        s.push_str(extra);
    }
    s
}
