//! The OpenAI-compatible Chat Completions wire format (`POST {base}/chat/completions`), used
//! by `openai_compatible` gateways and by Kimi, Zai, Minimax and Inception: system message,
//! assistant `tool_calls`, `tool` messages, streaming deltas with tool-call fragments and a
//! final usage chunk. Must not retry, price, or know about agents.

use serde_json::{json, Map, Value};

use super::error::LlmError;
use super::http::{sse_json, stream_error, SseEvent};
use super::types::{
    Message, Part, Request, Response, Role, StopReason, StreamEvent, ToolCall, Usage,
};
use super::wire::{
    self, args_to_string, parse_args, u, Call, Sink, StreamDecoder, WireFormat, WireRequest,
};

const FALLBACK_MAX_TOKENS: u64 = 16_384;

/// Chat Completions, for [`wire::drive`].
pub struct ChatCompletions;

impl WireFormat for ChatCompletions {
    type Decoder = Stream;

    fn request(c: &Call<'_>) -> WireRequest {
        WireRequest {
            url: format!("{}/chat/completions", c.config.base_url),
            headers: vec![("authorization", format!("Bearer {}", c.config.api_key))],
            body: build_body(c.req, c.model, c.stream),
        }
    }

    fn whole(c: &Call<'_>, answer: &Value) -> Result<Response, LlmError> {
        parse_response(c, answer)
    }

    fn decoder(c: &Call<'_>) -> Stream {
        Stream {
            model: c.model.to_string(),
            text: String::new(),
            calls: Vec::new(),
            finish: None,
            usage: Value::Null,
        }
    }
}

/// Deltas gathered until `[DONE]`; the answer is whole once a `finish_reason` came.
impl StreamDecoder for Stream {
    fn event(
        &mut self,
        c: &Call<'_>,
        ev: &SseEvent,
        sink: Sink<'_>,
    ) -> Result<Option<Response>, LlmError> {
        let v = sse_json(c.provider, &ev.data)?;
        if v.get("error").is_some() {
            return Err(stream_error(c.provider, &v));
        }
        self.chunk(&v, sink);
        Ok(None)
    }

    fn end(self, c: &Call<'_>) -> Result<Response, LlmError> {
        let Some(finish) = self.finish.clone() else {
            return Err(LlmError::Stream {
                provider: c.provider,
                message: "the stream ended without a finish_reason".into(),
            });
        };
        let calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .map(|(_, id, name, args)| ToolCall {
                id,
                name,
                arguments: parse_args(&args),
                signature: None,
            })
            .collect();
        Ok(finish_response(
            c,
            self.model,
            self.text,
            calls,
            &finish,
            &self.usage,
        ))
    }
}

/// The request body.
pub fn build_body(req: &Request, model: &str, stream: bool) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    let mut messages = Vec::new();
    if let Some(sys) = req.system.as_deref().filter(|s| !s.trim().is_empty()) {
        messages.push(json!({"role": "system", "content": sys}));
    }
    for m in &req.messages {
        convert(m, &mut messages);
    }
    body.insert("messages".into(), Value::Array(messages));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function":
                    {"name": t.name, "description": t.description, "parameters": t.parameters}})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert(
        "max_tokens".into(),
        json!(wire::max_tokens(req, model, FALLBACK_MAX_TOKENS)),
    );
    if stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Value::Object(body)
}

fn convert(m: &Message, out: &mut Vec<Value>) {
    match m.role {
        Role::User => {
            // Tool messages must directly follow the assistant turn that asked for them.
            let mut text = String::new();
            for p in &m.parts {
                match p {
                    Part::ToolResult {
                        id,
                        content,
                        is_error,
                        ..
                    } => {
                        let content = if *is_error {
                            format!("ERROR: {content}")
                        } else {
                            content.clone()
                        };
                        out.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
                    }
                    Part::Text { text: t } => {
                        if !text.is_empty() && !t.is_empty() {
                            text.push_str("\n\n");
                        }
                        text.push_str(t);
                    }
                    _ => {}
                }
            }
            if !text.is_empty() {
                out.push(json!({"role": "user", "content": text}));
            }
        }
        Role::Assistant => {
            let text = m.text();
            let calls: Vec<Value> = m
                .tool_calls()
                .map(|c| {
                    json!({"id": c.id, "type": "function",
                           "function": {"name": c.name, "arguments": args_to_string(&c.arguments)}})
                })
                .collect();
            if text.is_empty() && calls.is_empty() {
                return;
            }
            let mut msg = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
            if !calls.is_empty() {
                msg["tool_calls"] = Value::Array(calls);
            }
            out.push(msg);
        }
    }
}

/// A streamed answer gathered from its deltas.
pub struct Stream {
    model: String,
    text: String,
    /// (index, id, name, argument text), by first appearance.
    calls: Vec<(u64, String, String, String)>,
    finish: Option<String>,
    usage: Value,
}

impl Stream {
    fn chunk(&mut self, v: &Value, sink: Sink<'_>) {
        if let Some(m) = v.get("model").and_then(Value::as_str) {
            self.model = m.to_string();
        }
        if let Some(us) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = us.clone();
        }
        let Some(choice) = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return;
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        if let Some(t) = delta.get("content").and_then(Value::as_str) {
            if !t.is_empty() {
                self.text.push_str(t);
                sink(StreamEvent::TextDelta(t.to_string()));
            }
        }
        for tc in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = tc.get("index").and_then(Value::as_u64).unwrap_or(0);
            let f = tc.get("function").unwrap_or(&Value::Null);
            let pos = match self.calls.iter().position(|c| c.0 == index) {
                Some(p) => p,
                None => {
                    self.calls
                        .push((index, String::new(), String::new(), String::new()));
                    self.calls.len() - 1
                }
            };
            let entry = &mut self.calls[pos];
            if let Some(id) = tc.get("id").and_then(Value::as_str) {
                entry.1.push_str(id);
            }
            if let Some(n) = f.get("name").and_then(Value::as_str) {
                entry.2.push_str(n);
            }
            if let Some(a) = f.get("arguments").and_then(Value::as_str) {
                entry.3.push_str(a);
            }
        }
        if let Some(fr) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(fr.to_string());
            for (_, id, name, args) in &self.calls {
                sink(StreamEvent::ToolCall(ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: parse_args(args),
                    signature: None,
                }));
            }
        }
    }
}

fn parse_response(c: &Call<'_>, v: &Value) -> Result<Response, LlmError> {
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| LlmError::InvalidResponse {
            provider: c.provider,
            message: "no choices".into(),
        })?;
    let msg = choice.get("message").unwrap_or(&Value::Null);
    let text = msg
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let calls: Vec<ToolCall> = msg
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|tc| {
            let f = tc.get("function").unwrap_or(&Value::Null);
            ToolCall {
                id: tc
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                name: f
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                arguments: match f.get("arguments") {
                    Some(Value::String(s)) => parse_args(s),
                    Some(o @ Value::Object(_)) => o.clone(),
                    _ => json!({}),
                },
                signature: None,
            }
        })
        .collect();
    let finish = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .unwrap_or("stop");
    let model = v
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(c.model)
        .to_string();
    Ok(finish_response(
        c,
        model,
        text,
        calls,
        finish,
        v.get("usage").unwrap_or(&Value::Null),
    ))
}

fn finish_response(
    c: &Call<'_>,
    model: String,
    text: String,
    calls: Vec<ToolCall>,
    finish: &str,
    us: &Value,
) -> Response {
    let cached = us
        .get("prompt_tokens_details")
        .map(|d| u(d, "cached_tokens"))
        .unwrap_or(0);
    let reasoning = us
        .get("completion_tokens_details")
        .map(|d| u(d, "reasoning_tokens"))
        .unwrap_or(0);
    let usage = Usage {
        input: u(us, "prompt_tokens").saturating_sub(cached),
        output: u(us, "completion_tokens").saturating_sub(reasoning),
        reasoning,
        cache_read: cached,
        cache_write: 0,
    };
    let stop = match finish {
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::ContentFilter,
        _ if !calls.is_empty() => StopReason::ToolUse,
        "stop" => StopReason::EndTurn,
        _ => StopReason::Other,
    };
    let mut parts = Vec::new();
    if !text.is_empty() {
        parts.push(Part::text(text.clone()));
    }
    parts.extend(calls.iter().cloned().map(Part::ToolCall));
    Response {
        text,
        tool_calls: calls,
        usage,
        stop_reason: stop,
        model,
        provider: Some(c.provider),
        message: Some(Message {
            role: Role::Assistant,
            parts,
        }),
    }
}
