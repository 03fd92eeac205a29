//! Helpers shared by the four wire-format modules: token limits, reasoning effort, tool
//! argument (de)serialisation, and the per-call context each module receives.
//! Must not build any provider's JSON itself.

use serde_json::Value;

use super::catalog;
use super::http::Http;
use super::provider::{Provider, ProviderConfig};
use super::types::{Request, StreamEvent};
use crate::base::cancel::CancelToken;

/// Everything one provider call needs.
pub struct Call<'a> {
    pub http: &'a Http,
    pub provider: Provider,
    pub config: &'a ProviderConfig,
    pub req: &'a Request,
    /// The id sent on the wire (aliases resolved).
    pub model: &'a str,
    pub stream: bool,
    pub cancel: &'a CancelToken,
}

/// The output-token cap: the request's, else the catalog's max output, else `fallback`.
pub fn max_tokens(req: &Request, model: &str, fallback: u64) -> u64 {
    req.max_tokens
        .filter(|n| *n > 0)
        .or_else(|| catalog::lookup(model).map(|m| m.max_output))
        .unwrap_or(fallback)
}

/// The effort to send: `low`/`medium`/`high` (other words pass through lowercased), only
/// for models that reason (unknown models get it too: the user asked for it).
pub fn effort(req: &Request, model: &str) -> Option<String> {
    let e = req.reasoning_effort.as_deref()?.trim().to_ascii_lowercase();
    if e.is_empty() || e == "none" {
        return None;
    }
    match catalog::lookup(model) {
        Some(m) if !m.reasoning => None,
        _ => Some(e),
    }
}

/// Tool-call arguments as the JSON text OpenAI-style APIs expect.
pub fn args_to_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "{}".to_string(),
        other => other.to_string(),
    }
}

/// Parses argument text; empty text is `{}`, unparsable text is kept as a string (the tool
/// then reports bad arguments to the model).
pub fn parse_args(s: &str) -> Value {
    let t = s.trim();
    if t.is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(t).unwrap_or_else(|_| Value::String(s.to_string()))
}

/// Arguments as a JSON object for APIs that take objects (Anthropic `input`, Gemini `args`).
pub fn args_object(v: &Value) -> Value {
    match v {
        Value::Object(_) => v.clone(),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(o @ Value::Object(_)) => o,
            _ => serde_json::json!({ "_raw": s }),
        },
        _ => Value::Object(Default::default()),
    }
}

/// Reports a whole (non-streamed) response through the sink: when a stream was asked for
/// but the server answered with plain JSON, the text and tool calls still arrive as
/// events, then `Done`.
pub fn emit_whole(r: &super::types::Response, streamed: bool, sink: Sink<'_>) {
    if streamed {
        if !r.text.is_empty() {
            sink(StreamEvent::TextDelta(r.text.clone()));
        }
        for c in &r.tool_calls {
            sink(StreamEvent::ToolCall(c.clone()));
        }
    }
    sink(StreamEvent::Done(r.clone()));
}

/// Forwards stream events to the caller.
pub type Sink<'a> = &'a mut dyn FnMut(StreamEvent);

/// A `u64` field of a JSON object (0 when absent).
pub fn u(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}
