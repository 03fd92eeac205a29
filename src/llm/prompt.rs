//! Prompt calls (the `prompt` handler's LLM part, engine.md §6): one model call with no
//! tools, project memory in the system message when enabled, and a conversation that can
//! continue for structured-output repair turns (the engine decides when; see
//! [`crate::engine::output`]). Must not know about stages or context.

use std::path::PathBuf;

use super::client::ChatModel;
use super::error::LlmError;
use super::memory::project_memory;
use super::provider::{infer_provider, Provider};
use super::types::{Message, Request, Response, StreamEvent, Usage};
use crate::base::cancel::CancelToken;

/// What to ask.
#[derive(Debug, Clone, Default)]
pub struct PromptCall {
    pub model: String,
    pub provider: Option<Provider>,
    /// Extra system text, placed after project memory.
    pub system: Option<String>,
    /// The user message (the engine puts the preamble in front).
    pub prompt: String,
    pub max_tokens: Option<u64>,
    pub reasoning_effort: Option<String>,
    /// Include `AGENTS.md` and the provider's memory file from `cwd` (default true).
    pub project_memory: bool,
    pub cwd: Option<PathBuf>,
}

/// A prompt conversation: the first call plus any corrective turns.
pub struct PromptSession<'a> {
    model: &'a dyn ChatModel,
    req: Request,
    usage: Usage,
    calls: u32,
    last: Option<Response>,
}

impl<'a> PromptSession<'a> {
    /// Builds the request (system message with project memory) without calling yet.
    pub fn new(model: &'a dyn ChatModel, call: &PromptCall) -> Result<Self, LlmError> {
        let provider = infer_provider(&call.model, call.provider)?;
        let mut system = String::new();
        if call.project_memory {
            if let Some(cwd) = &call.cwd {
                let mem = project_memory(cwd, provider);
                if !mem.is_empty() {
                    system.push_str("Project instructions:\n\n");
                    system.push_str(&mem);
                }
            }
        }
        if let Some(extra) = call.system.as_deref().filter(|s| !s.trim().is_empty()) {
            if !system.is_empty() {
                system.push_str("\n\n");
            }
            system.push_str(extra);
        }
        Ok(Self {
            model,
            req: Request {
                model: call.model.clone(),
                provider: Some(provider),
                system: (!system.is_empty()).then_some(system),
                messages: Vec::new(),
                tools: Vec::new(),
                max_tokens: call.max_tokens,
                reasoning_effort: call.reasoning_effort.clone(),
            },
            usage: Usage::default(),
            calls: 0,
            last: None,
        })
    }

    /// Sends a user message and appends the reply to the conversation.
    pub fn send(
        &mut self,
        text: &str,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<Response, LlmError> {
        self.req.messages.push(Message::user(text));
        let r = match self.model.chat(&self.req, cancel, on_event) {
            Ok(r) => r,
            Err(e) => {
                self.req.messages.pop();
                return Err(e);
            }
        };
        self.calls += 1;
        self.usage.add(&r.usage);
        self.req.messages.push(r.to_message());
        self.last = Some(r.clone());
        Ok(r)
    }

    pub fn request(&self) -> &Request {
        &self.req
    }

    /// Continues an earlier conversation (e.g. for a repair turn in a later call).
    pub fn with_messages(mut self, messages: Vec<Message>) -> Self {
        self.req.messages = messages;
        self
    }

    /// The conversation, for keeping.
    pub fn into_messages(self) -> Vec<Message> {
        self.req.messages
    }

    pub fn messages(&self) -> &[Message] {
        &self.req.messages
    }

    /// Usage summed over every call of this session.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    pub fn calls(&self) -> u32 {
        self.calls
    }

    pub fn last(&self) -> Option<&Response> {
        self.last.as_ref()
    }
}

/// One prompt call.
pub fn run_prompt(
    model: &dyn ChatModel,
    call: &PromptCall,
    cancel: &CancelToken,
    on_event: &mut dyn FnMut(StreamEvent),
) -> Result<Response, LlmError> {
    let mut s = PromptSession::new(model, call)?;
    s.send(&call.prompt, cancel, on_event)
}
