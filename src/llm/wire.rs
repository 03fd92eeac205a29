//! The one call skeleton the four wire formats share ([`drive`]: build, post, a whole answer
//! or a stream read event by event with cancel checks, `Done` last), what each format adds to
//! it ([`WireFormat`], [`StreamDecoder`]), and the helpers they share: token limits, reasoning
//! effort, tool argument (de)serialisation, the per-call context.
//! Must not build any provider's JSON itself.

use serde_json::Value;

use super::catalog;
use super::error::LlmError;
use super::http::{Http, SseEvent};
use super::provider::{Provider, ProviderConfig};
use super::types::{Request, Response, StreamEvent};
use crate::base::cancel::CancelToken;

/// One provider request as a wire format builds it.
pub struct WireRequest {
    pub url: String,
    /// Header names and values; the API key travels here and nowhere else.
    pub headers: Vec<(&'static str, String)>,
    pub body: Value,
}

/// What a wire format adds to [`drive`]: its request, how it reads a whole answer, and its
/// stream decoder.
pub trait WireFormat {
    /// Reads the format's stream, one server-sent event at a time.
    type Decoder: StreamDecoder;
    /// The URL, headers and body of the call.
    fn request(c: &Call<'_>) -> WireRequest;
    /// A whole JSON answer (no stream asked for, or the server answered with plain JSON).
    fn whole(c: &Call<'_>, answer: &Value) -> Result<Response, LlmError>;
    /// A decoder for a new stream.
    fn decoder(c: &Call<'_>) -> Self::Decoder;
}

/// A wire format's stream state.
pub trait StreamDecoder {
    /// One event: text and tool calls go to `sink` as they complete; `Some` is the whole
    /// answer when the event ends the stream (Anthropic's `message_stop`, OpenAI's
    /// `response.completed`).
    fn event(
        &mut self,
        c: &Call<'_>,
        ev: &SseEvent,
        sink: Sink<'_>,
    ) -> Result<Option<Response>, LlmError>;
    /// The stream ended (end of body, or `data: [DONE]`) without an event that ended it:
    /// the answer gathered so far, or the error saying what never came.
    fn end(self, c: &Call<'_>) -> Result<Response, LlmError>;
}

/// The one call skeleton: builds the format's request, posts it, and reads the answer whole
/// or as a stream (checking `cancel` between events), reporting it through `sink` with
/// [`StreamEvent::Done`] last.
pub fn drive<F: WireFormat>(c: &Call<'_>, sink: Sink<'_>) -> Result<Response, LlmError> {
    let request = F::request(c);
    let headers: Vec<(&str, &str)> = request
        .headers
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    let resp = c.http.post_json(
        c.provider,
        &request.url,
        &headers,
        &request.body,
        &c.config.api_key,
    )?;
    if !c.stream || !resp.is_event_stream() {
        let r = F::whole(c, &resp.json()?)?;
        emit_whole(&r, c.stream, sink);
        return Ok(r);
    }
    let mut sse = resp.sse();
    let mut decoder = F::decoder(c);
    while let Some(ev) = sse.next_event()? {
        if c.cancel.is_cancelled() {
            return Err(LlmError::Cancelled);
        }
        // OpenAI-style streams end with a sentinel rather than an event of their own.
        if ev.data.trim() == "[DONE]" {
            break;
        }
        if let Some(r) = decoder.event(c, &ev, sink)? {
            sink(StreamEvent::Done(r.clone()));
            return Ok(r);
        }
    }
    let r = decoder.end(c)?;
    sink(StreamEvent::Done(r.clone()));
    Ok(r)
}

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
