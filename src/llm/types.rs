//! The provider-neutral request/response model every provider client converts to and from.
//! Owns only plain data (messages, parts, tool specs, usage, stream events); must not know
//! any provider's wire format, HTTP, or the agent loop.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::provider::Provider;

/// Who said a message. System text lives in [`Request::system`], never in the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id (Gemini has none: a synthetic `call_…` id is made up).
    pub id: String,
    pub name: String,
    /// The parsed arguments (a JSON object; unparsable argument text is kept as a string).
    pub arguments: Value,
    /// Gemini's `thoughtSignature` for this call, which must be echoed back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    Text {
        text: String,
    },
    ToolCall(ToolCall),
    ToolResult {
        /// The id of the [`ToolCall`] this answers.
        id: String,
        /// The tool's name (Gemini matches results by name).
        name: String,
        content: String,
        is_error: bool,
    },
    /// A provider-specific block that must round-trip unchanged to the same provider
    /// (Anthropic thinking blocks with signatures, OpenAI reasoning items). Other providers
    /// drop it.
    Opaque {
        provider: Provider,
        value: Value,
    },
}

impl Part {
    pub fn text(t: impl Into<String>) -> Self {
        Part::Text { text: t.into() }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
}

impl Message {
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            parts: vec![Part::text(text)],
        }
    }

    pub fn assistant(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            parts: vec![Part::text(text)],
        }
    }

    /// The concatenated text parts.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for p in &self.parts {
            if let Part::Text { text } = p {
                out.push_str(text);
            }
        }
        out
    }

    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall(c) => Some(c),
            _ => None,
        })
    }
}

/// A tool the model may call: a name, a description and a JSON Schema for its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// One model call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Request {
    /// A catalog id or alias, or any id the provider accepts when `provider` is given.
    pub model: String,
    /// Pins the provider; when `None` it is inferred from the catalog (exact id or alias).
    pub provider: Option<Provider>,
    pub system: Option<String>,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    /// Output token cap; `None` uses the catalog's max output (or a provider default).
    pub max_tokens: Option<u64>,
    /// `low`, `medium` or `high`; `None` leaves the provider's default.
    pub reasoning_effort: Option<String>,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    #[default]
    EndTurn,
    ToolUse,
    MaxTokens,
    ContentFilter,
    Other,
}

/// Token counts of one call (or a sum of calls). `input` counts only input tokens that
/// were not read from the prompt cache, so each field is priced once (see `cost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub reasoning: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Usage {
    pub fn add(&mut self, o: &Usage) {
        self.input += o.input;
        self.output += o.output;
        self.reasoning += o.reasoning;
        self.cache_read += o.cache_read;
        self.cache_write += o.cache_write;
    }

    pub fn total(&self) -> u64 {
        self.input + self.output + self.reasoning + self.cache_read + self.cache_write
    }

    pub fn is_zero(&self) -> bool {
        self.total() == 0
    }
}

/// The answer to one call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Response {
    /// The concatenated assistant text.
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub stop_reason: StopReason,
    /// The model id the provider reports (falls back to the requested id).
    pub model: String,
    pub provider: Option<Provider>,
    /// The assistant message to append to the conversation (text, tool calls and any
    /// opaque blocks, in the provider's order).
    pub message: Option<Message>,
}

impl Response {
    /// The assistant message for the conversation: the provider's own if it gave one,
    /// otherwise text followed by tool calls.
    pub fn to_message(&self) -> Message {
        if let Some(m) = &self.message {
            return m.clone();
        }
        let mut parts = Vec::new();
        if !self.text.is_empty() {
            parts.push(Part::text(self.text.clone()));
        }
        parts.extend(self.tool_calls.iter().cloned().map(Part::ToolCall));
        Message {
            role: Role::Assistant,
            parts,
        }
    }
}

/// What a streaming call reports while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A piece of assistant text, in order.
    TextDelta(String),
    /// A complete tool call (arguments fully received).
    ToolCall(ToolCall),
    /// The call failed with a retryable error and will be tried again after `delay_ms`.
    /// Only sent before any data was streamed.
    Retry {
        attempt: u32,
        delay_ms: u64,
        error: String,
    },
    /// The call finished; the same value is returned by the call.
    Done(Response),
}
