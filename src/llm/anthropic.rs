//! The Anthropic Messages wire format (`POST {base}/v1/messages`): request building (system,
//! strict role alternation, tool_use/tool_result blocks, thinking budget, cache breakpoints),
//! response parsing, SSE streaming and usage mapping (engine.md §13.1-13.2).
//! Must not retry, price, or know about agents.

use serde_json::{json, Map, Value};

use super::error::LlmError;
use super::http::{sse_json, stream_error, SseEvent};
use super::provider::Provider;
use super::types::{
    Message, Part, Request, Response, Role, StopReason, StreamEvent, ToolCall, Usage,
};
use super::wire::{
    self, args_object, parse_args, u, Call, Sink, StreamDecoder, WireFormat, WireRequest,
};

const VERSION: &str = "2023-06-01";
const FALLBACK_MAX_TOKENS: u64 = 65_536;

/// The Messages API, for [`wire::drive`].
pub struct Messages;

impl WireFormat for Messages {
    type Decoder = StreamState;

    fn request(c: &Call<'_>) -> WireRequest {
        WireRequest {
            url: format!("{}/v1/messages", c.config.base_url),
            headers: vec![
                ("x-api-key", c.config.api_key.clone()),
                ("anthropic-version", VERSION.to_string()),
            ],
            body: build_body(c.req, c.model, c.stream),
        }
    }

    fn whole(c: &Call<'_>, answer: &Value) -> Result<Response, LlmError> {
        parse_response(answer, c.model)
    }

    fn decoder(c: &Call<'_>) -> StreamState {
        StreamState::new(c.model)
    }
}

impl StreamDecoder for StreamState {
    fn event(
        &mut self,
        _: &Call<'_>,
        ev: &SseEvent,
        sink: Sink<'_>,
    ) -> Result<Option<Response>, LlmError> {
        self.on_event(&ev.data, sink)
    }

    fn end(self, _: &Call<'_>) -> Result<Response, LlmError> {
        Err(LlmError::Stream {
            provider: Provider::Anthropic,
            message: "the stream ended before message_stop".into(),
        })
    }
}

/// The request body.
pub fn build_body(req: &Request, model: &str, stream: bool) -> Value {
    let max_tokens = wire::max_tokens(req, model, FALLBACK_MAX_TOKENS);
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(max_tokens));
    if let Some(sys) = req.system.as_deref().filter(|s| !s.trim().is_empty()) {
        body.insert(
            "system".into(),
            json!([{"type": "text", "text": sys, "cache_control": {"type": "ephemeral"}}]),
        );
    }
    let mut messages = convert_messages(&req.messages);
    // Cache the conversation prefix: a breakpoint on the last block of the last message.
    if let Some(last) = messages
        .last_mut()
        .and_then(|m| m.get_mut("content"))
        .and_then(Value::as_array_mut)
        .and_then(|c| c.last_mut())
        .and_then(Value::as_object_mut)
    {
        let t = last.get("type").and_then(Value::as_str).unwrap_or("");
        if t != "thinking" && t != "redacted_thinking" {
            last.insert("cache_control".into(), json!({"type": "ephemeral"}));
        }
    }
    body.insert("messages".into(), Value::Array(messages));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(effort) = wire::effort(req, model) {
        let frac = match effort.as_str() {
            "low" => 0.25,
            "medium" => 0.5,
            "xhigh" => 0.875,
            "max" => 1.0,
            _ => 0.75,
        };
        // The budget must stay below max_tokens and be at least 1,024.
        let budget = ((max_tokens as f64 * frac) as u64)
            .max(1024)
            .min(max_tokens.saturating_sub(1));
        if budget >= 1024 {
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

/// Converts messages with strict alternation: consecutive same-role messages merge; in a
/// user turn tool results come first; empty turns are dropped.
fn convert_messages(msgs: &[Message]) -> Vec<Value> {
    let mut out: Vec<(Role, Vec<Value>)> = Vec::new();
    for m in msgs {
        let mut blocks = Vec::new();
        for p in &m.parts {
            match p {
                // The API refuses whitespace-only text blocks.
                Part::Text { text } if !text.trim().is_empty() => {
                    blocks.push(json!({"type": "text", "text": text}))
                }
                Part::Text { .. } => {}
                Part::ToolCall(c) => blocks.push(json!({
                    "type": "tool_use", "id": c.id, "name": c.name, "input": args_object(&c.arguments)
                })),
                Part::ToolResult {
                    id,
                    content,
                    is_error,
                    ..
                } => {
                    let mut b = json!({"type": "tool_result", "tool_use_id": id, "content": content});
                    if *is_error {
                        b["is_error"] = json!(true);
                    }
                    blocks.push(b)
                }
                Part::Opaque { provider, value } if *provider == Provider::Anthropic => {
                    blocks.push(value.clone())
                }
                Part::Opaque { .. } => {}
            }
        }
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((role, existing)) if *role == m.role => existing.extend(blocks),
            _ => out.push((m.role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, mut blocks)| {
            if role == Role::User {
                // Stable: tool results first, then the rest in order.
                blocks
                    .sort_by_key(|b| b.get("type").and_then(Value::as_str) != Some("tool_result"));
            }
            let role = match role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            json!({"role": role, "content": blocks})
        })
        .collect()
}

fn stop_reason(s: &str) -> StopReason {
    match s {
        "end_turn" | "stop_sequence" | "pause_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
        "refusal" => StopReason::ContentFilter,
        _ => StopReason::Other,
    }
}

/// Usage from Anthropic's fields; reasoning is estimated from thinking text (chars ÷ 4,
/// at least 1 when there was any) and taken out of the output count.
fn usage(u_: &Value, thinking_chars: usize, had_thinking: bool) -> Usage {
    let reasoning = if had_thinking {
        ((thinking_chars / 4) as u64).max(1)
    } else {
        0
    };
    let out = u(u_, "output_tokens");
    let reasoning = reasoning.min(out);
    Usage {
        input: u(u_, "input_tokens"),
        output: out.saturating_sub(reasoning),
        reasoning,
        cache_read: u(u_, "cache_read_input_tokens"),
        cache_write: u(u_, "cache_creation_input_tokens"),
    }
}

/// Parses a non-streaming Messages response.
pub fn parse_response(v: &Value, requested: &str) -> Result<Response, LlmError> {
    let content =
        v.get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| LlmError::InvalidResponse {
                provider: Provider::Anthropic,
                message: "no content array".into(),
            })?;
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut thinking_chars = 0;
    let mut had_thinking = false;
    for b in content {
        match b.get("type").and_then(Value::as_str).unwrap_or("") {
            "text" => {
                let t = b.get("text").and_then(Value::as_str).unwrap_or("");
                text.push_str(t);
                parts.push(Part::text(t));
            }
            "tool_use" => {
                let c = ToolCall {
                    id: str_of(b, "id"),
                    name: str_of(b, "name"),
                    arguments: b.get("input").cloned().unwrap_or_else(|| json!({})),
                    signature: None,
                };
                calls.push(c.clone());
                parts.push(Part::ToolCall(c));
            }
            "thinking" | "redacted_thinking" => {
                had_thinking = true;
                thinking_chars += b
                    .get("thinking")
                    .and_then(Value::as_str)
                    .map_or(0, str::len);
                parts.push(Part::Opaque {
                    provider: Provider::Anthropic,
                    value: b.clone(),
                });
            }
            _ => {}
        }
    }
    let usage = usage(
        v.get("usage").unwrap_or(&Value::Null),
        thinking_chars,
        had_thinking,
    );
    let stop = stop_reason(v.get("stop_reason").and_then(Value::as_str).unwrap_or(""));
    Ok(Response {
        text,
        tool_calls: calls,
        usage,
        stop_reason: stop,
        model: v
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(requested)
            .to_string(),
        provider: Some(Provider::Anthropic),
        message: Some(Message {
            role: Role::Assistant,
            parts,
        }),
    })
}

fn str_of(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}

enum Block {
    Text(String),
    Tool {
        id: String,
        name: String,
        json: String,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted(Value),
}

/// Accumulates a streamed message.
pub struct StreamState {
    model: String,
    blocks: Vec<(usize, Block)>,
    usage: Value,
    stop: String,
}

impl StreamState {
    fn new(model: &str) -> Self {
        Self {
            model: model.to_string(),
            blocks: Vec::new(),
            usage: json!({}),
            stop: String::new(),
        }
    }

    fn block(&mut self, index: usize) -> Option<&mut Block> {
        self.blocks
            .iter_mut()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| b)
    }

    fn on_event(&mut self, data: &str, sink: Sink<'_>) -> Result<Option<Response>, LlmError> {
        let v = sse_json(Provider::Anthropic, data)?;
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
        match v.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" => {
                let m = v.get("message").unwrap_or(&Value::Null);
                if let Some(model) = m.get("model").and_then(Value::as_str) {
                    self.model = model.to_string();
                }
                if let Some(us) = m.get("usage").and_then(Value::as_object) {
                    merge(&mut self.usage, us);
                }
            }
            "content_block_start" => {
                let b = v.get("content_block").unwrap_or(&Value::Null);
                let block = match b.get("type").and_then(Value::as_str).unwrap_or("") {
                    "tool_use" => Block::Tool {
                        id: str_of(b, "id"),
                        name: str_of(b, "name"),
                        json: String::new(),
                    },
                    "thinking" => Block::Thinking {
                        thinking: str_of(b, "thinking"),
                        signature: str_of(b, "signature"),
                    },
                    "redacted_thinking" => Block::Redacted(b.clone()),
                    _ => {
                        let t = str_of(b, "text");
                        if !t.is_empty() {
                            sink(StreamEvent::TextDelta(t.clone()));
                        }
                        Block::Text(t)
                    }
                };
                self.blocks.push((index, block));
            }
            "content_block_delta" => {
                let d = v.get("delta").unwrap_or(&Value::Null);
                let dt = d.get("type").and_then(Value::as_str).unwrap_or("");
                match (dt, self.block(index)) {
                    ("text_delta", Some(Block::Text(t))) => {
                        let piece = d.get("text").and_then(Value::as_str).unwrap_or("");
                        t.push_str(piece);
                        if !piece.is_empty() {
                            sink(StreamEvent::TextDelta(piece.to_string()));
                        }
                    }
                    ("input_json_delta", Some(Block::Tool { json, .. })) => {
                        json.push_str(d.get("partial_json").and_then(Value::as_str).unwrap_or(""))
                    }
                    ("thinking_delta", Some(Block::Thinking { thinking, .. })) => {
                        thinking.push_str(d.get("thinking").and_then(Value::as_str).unwrap_or(""))
                    }
                    ("signature_delta", Some(Block::Thinking { signature, .. })) => {
                        signature.push_str(d.get("signature").and_then(Value::as_str).unwrap_or(""))
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(Block::Tool { id, name, json }) = self.block(index) {
                    sink(StreamEvent::ToolCall(ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        arguments: parse_args(json),
                        signature: None,
                    }));
                }
            }
            "message_delta" => {
                if let Some(s) = v
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop = s.to_string();
                }
                if let Some(us) = v.get("usage").and_then(Value::as_object) {
                    merge(&mut self.usage, us);
                }
            }
            "message_stop" => return Ok(Some(self.finish())),
            "error" => return Err(stream_error(Provider::Anthropic, &v)),
            _ => {}
        }
        Ok(None)
    }

    fn finish(&mut self) -> Response {
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut calls = Vec::new();
        let mut thinking_chars = 0;
        let mut had_thinking = false;
        self.blocks.sort_by_key(|(i, _)| *i);
        for (_, b) in self.blocks.drain(..) {
            match b {
                Block::Text(t) => {
                    text.push_str(&t);
                    parts.push(Part::Text { text: t });
                }
                Block::Tool { id, name, json } => {
                    let c = ToolCall {
                        id,
                        name,
                        arguments: parse_args(&json),
                        signature: None,
                    };
                    calls.push(c.clone());
                    parts.push(Part::ToolCall(c));
                }
                Block::Thinking {
                    thinking,
                    signature,
                } => {
                    had_thinking = true;
                    thinking_chars += thinking.len();
                    parts.push(Part::Opaque {
                        provider: Provider::Anthropic,
                        value: json!({"type": "thinking", "thinking": thinking, "signature": signature}),
                    });
                }
                Block::Redacted(v) => {
                    had_thinking = true;
                    parts.push(Part::Opaque {
                        provider: Provider::Anthropic,
                        value: v,
                    });
                }
            }
        }
        Response {
            text,
            tool_calls: calls,
            usage: usage(&self.usage, thinking_chars, had_thinking),
            stop_reason: stop_reason(&self.stop),
            model: self.model.clone(),
            provider: Some(Provider::Anthropic),
            message: Some(Message {
                role: Role::Assistant,
                parts,
            }),
        }
    }
}

/// Later usage fields (message_delta) overwrite earlier ones (message_start).
fn merge(into: &mut Value, from: &Map<String, Value>) {
    if let Some(o) = into.as_object_mut() {
        for (k, v) in from {
            if !v.is_null() {
                o.insert(k.clone(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::types::ToolSpec;

    #[test]
    fn alternation_merges_and_orders_tool_results_first() {
        let req = Request {
            model: "claude-sonnet-4-6".into(),
            messages: vec![
                Message::user("a"),
                Message::user("b"),
                Message {
                    role: Role::Assistant,
                    parts: vec![Part::ToolCall(ToolCall {
                        id: "t1".into(),
                        name: "read_file".into(),
                        arguments: json!({"file_path": "x"}),
                        signature: None,
                    })],
                },
                Message {
                    role: Role::User,
                    parts: vec![
                        Part::text("steer"),
                        Part::ToolResult {
                            id: "t1".into(),
                            name: "read_file".into(),
                            content: "data".into(),
                            is_error: false,
                        },
                    ],
                },
            ],
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            }],
            ..Default::default()
        };
        let b = build_body(&req, "claude-sonnet-4-6", false);
        let msgs = b["messages"].as_array().cloned().unwrap_or_default();
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[0]["content"].as_array().map(Vec::len), Some(2));
        assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
        assert_eq!(msgs[2]["content"][1]["text"], "steer");
        assert_eq!(b["max_tokens"], 64_000);
        assert_eq!(b["tools"][0]["input_schema"]["type"], "object");
    }

    #[test]
    fn whitespace_only_text_is_dropped() {
        let req = Request {
            model: "sonnet".into(),
            messages: vec![
                Message::user("a"),
                Message::assistant("\n\n"),
                Message::user("b"),
            ],
            ..Default::default()
        };
        let b = build_body(&req, "claude-sonnet-4-6", false);
        assert_eq!(b["messages"].as_array().map(Vec::len), Some(1));
        assert_eq!(b["messages"][0]["content"][1]["text"], "b");
    }

    #[test]
    fn thinking_budget_from_effort() {
        let req = Request {
            model: "claude-sonnet-4-6".into(),
            messages: vec![Message::user("a")],
            max_tokens: Some(8000),
            reasoning_effort: Some("medium".into()),
            ..Default::default()
        };
        let b = build_body(&req, "claude-sonnet-4-6", true);
        assert_eq!(b["thinking"]["budget_tokens"], 4000);
        assert_eq!(b["stream"], true);
        // haiku does not reason: no thinking block.
        let b = build_body(&req, "claude-haiku-4-5", false);
        assert!(b.get("thinking").is_none());
    }
}
