//! The OpenAI Responses wire format (`POST {base}/v1/responses`): `instructions`, `input`
//! items (messages, function_call, function_call_output, echoed reasoning items),
//! `reasoning.effort`, `max_output_tokens`, streaming events and usage mapping.
//! Must not retry, price, or know about agents.

use serde_json::{json, Map, Value};

use super::error::LlmError;
use super::http::{sse_json, stream_error, SseEvent};
use super::provider::Provider;
use super::types::{
    Message, Part, Request, Response, Role, StopReason, StreamEvent, ToolCall, Usage,
};
use super::wire::{
    self, args_to_string, parse_args, u, Call, Sink, StreamDecoder, WireFormat, WireRequest,
};

const FALLBACK_MAX_TOKENS: u64 = 32_768;

/// The Responses API, for [`wire::drive`].
pub struct Responses;

impl WireFormat for Responses {
    type Decoder = ResponsesStream;

    fn request(c: &Call<'_>) -> WireRequest {
        WireRequest {
            url: format!("{}/v1/responses", c.config.base_url),
            headers: vec![("authorization", format!("Bearer {}", c.config.api_key))],
            body: build_body(c.req, c.model, c.stream),
        }
    }

    fn whole(c: &Call<'_>, answer: &Value) -> Result<Response, LlmError> {
        parse_response(answer, c.model)
    }

    fn decoder(_: &Call<'_>) -> ResponsesStream {
        ResponsesStream
    }
}

/// The Responses stream carries the whole answer in its last event: nothing to gather.
pub struct ResponsesStream;

impl StreamDecoder for ResponsesStream {
    fn event(
        &mut self,
        c: &Call<'_>,
        ev: &SseEvent,
        sink: Sink<'_>,
    ) -> Result<Option<Response>, LlmError> {
        let v = sse_json(Provider::OpenAi, &ev.data)?;
        let typ = v
            .get("type")
            .and_then(Value::as_str)
            .or(ev.event.as_deref())
            .unwrap_or("");
        match typ {
            "response.output_text.delta" => {
                if let Some(d) = v.get("delta").and_then(Value::as_str) {
                    if !d.is_empty() {
                        sink(StreamEvent::TextDelta(d.to_string()));
                    }
                }
            }
            "response.output_item.done" => {
                if let Some(item) = v.get("item") {
                    if item.get("type").and_then(Value::as_str) == Some("function_call") {
                        sink(StreamEvent::ToolCall(function_call(item)));
                    }
                }
            }
            "response.completed" | "response.incomplete" => {
                let r = parse_response(v.get("response").unwrap_or(&Value::Null), c.model)?;
                return Ok(Some(r));
            }
            "response.failed" => {
                let r = v.get("response").unwrap_or(&Value::Null);
                return Err(stream_error(
                    Provider::OpenAi,
                    r.get("error")
                        .map(|e| json!({"error": e}))
                        .as_ref()
                        .unwrap_or(r),
                ));
            }
            "error" => return Err(stream_error(Provider::OpenAi, &v)),
            _ => {}
        }
        Ok(None)
    }

    fn end(self, _: &Call<'_>) -> Result<Response, LlmError> {
        Err(LlmError::Stream {
            provider: Provider::OpenAi,
            message: "the stream ended before response.completed".into(),
        })
    }
}

/// The request body.
pub fn build_body(req: &Request, model: &str, stream: bool) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    if let Some(sys) = req.system.as_deref().filter(|s| !s.trim().is_empty()) {
        body.insert("instructions".into(), json!(sys));
    }
    body.insert("input".into(), Value::Array(convert_input(&req.messages)));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "name": t.name, "description": t.description,
                       "parameters": t.parameters, "strict": false})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert(
        "max_output_tokens".into(),
        json!(wire::max_tokens(req, model, FALLBACK_MAX_TOKENS)),
    );
    if let Some(e) = wire::effort(req, model) {
        body.insert("reasoning".into(), json!({"effort": e}));
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

fn convert_input(msgs: &[Message]) -> Vec<Value> {
    let mut out = Vec::new();
    for m in msgs {
        // Consecutive text parts of one message become one message item.
        let mut texts: Vec<Value> = Vec::new();
        let (role, text_type) = match m.role {
            Role::User => ("user", "input_text"),
            Role::Assistant => ("assistant", "output_text"),
        };
        let flush = |texts: &mut Vec<Value>, out: &mut Vec<Value>| {
            if !texts.is_empty() {
                let content = std::mem::take(texts);
                if role == "assistant" {
                    out.push(json!({"type": "message", "role": role, "content": content}));
                } else {
                    out.push(json!({"role": role, "content": content}));
                }
            }
        };
        for p in &m.parts {
            match p {
                Part::Text { text } => {
                    if !text.is_empty() {
                        texts.push(json!({"type": text_type, "text": text}));
                    }
                }
                Part::ToolCall(c) => {
                    flush(&mut texts, &mut out);
                    out.push(
                        json!({"type": "function_call", "call_id": c.id, "name": c.name,
                                    "arguments": args_to_string(&c.arguments)}),
                    );
                }
                Part::ToolResult {
                    id,
                    content,
                    is_error,
                    ..
                } => {
                    flush(&mut texts, &mut out);
                    let output = if *is_error {
                        format!("ERROR: {content}")
                    } else {
                        content.clone()
                    };
                    out.push(
                        json!({"type": "function_call_output", "call_id": id, "output": output}),
                    );
                }
                Part::Opaque { provider, value } if *provider == Provider::OpenAi => {
                    flush(&mut texts, &mut out);
                    out.push(value.clone());
                }
                Part::Opaque { .. } => {}
            }
        }
        flush(&mut texts, &mut out);
    }
    out
}

fn function_call(item: &Value) -> ToolCall {
    let id = item
        .get("call_id")
        .or_else(|| item.get("id"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    ToolCall {
        id,
        name: item
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        arguments: parse_args(item.get("arguments").and_then(Value::as_str).unwrap_or("")),
        signature: None,
    }
}

/// Parses a Responses object (non-streaming body, or the `response` of a final event).
pub fn parse_response(v: &Value, requested: &str) -> Result<Response, LlmError> {
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(stream_error(Provider::OpenAi, &json!({ "error": err })));
    }
    let output =
        v.get("output")
            .and_then(Value::as_array)
            .ok_or_else(|| LlmError::InvalidResponse {
                provider: Provider::OpenAi,
                message: "no output array".into(),
            })?;
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut refused = false;
    for item in output {
        match item.get("type").and_then(Value::as_str).unwrap_or("") {
            "message" => {
                for c in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    match c.get("type").and_then(Value::as_str).unwrap_or("") {
                        "output_text" => {
                            let t = c.get("text").and_then(Value::as_str).unwrap_or("");
                            text.push_str(t);
                            parts.push(Part::text(t));
                        }
                        "refusal" => {
                            refused = true;
                            let t = c.get("refusal").and_then(Value::as_str).unwrap_or("");
                            text.push_str(t);
                            parts.push(Part::text(t));
                        }
                        _ => {}
                    }
                }
            }
            "function_call" => {
                let c = function_call(item);
                calls.push(c.clone());
                parts.push(Part::ToolCall(c));
            }
            "reasoning" => {
                let mut item = item.clone();
                if let Some(o) = item.as_object_mut() {
                    o.remove("status");
                }
                parts.push(Part::Opaque {
                    provider: Provider::OpenAi,
                    value: item,
                });
            }
            _ => {}
        }
    }
    let us = v.get("usage").unwrap_or(&Value::Null);
    let cached = us
        .get("input_tokens_details")
        .map(|d| u(d, "cached_tokens"))
        .unwrap_or(0);
    let reasoning = us
        .get("output_tokens_details")
        .map(|d| u(d, "reasoning_tokens"))
        .unwrap_or(0);
    let usage = Usage {
        input: u(us, "input_tokens").saturating_sub(cached),
        output: u(us, "output_tokens").saturating_sub(reasoning),
        reasoning,
        cache_read: cached,
        cache_write: 0,
    };
    let incomplete = v
        .get("incomplete_details")
        .and_then(|d| d.get("reason"))
        .and_then(Value::as_str);
    let stop = if refused || incomplete == Some("content_filter") {
        StopReason::ContentFilter
    } else if incomplete == Some("max_output_tokens") {
        StopReason::MaxTokens
    } else if !calls.is_empty() {
        StopReason::ToolUse
    } else if v.get("status").and_then(Value::as_str) == Some("incomplete") {
        StopReason::Other
    } else {
        StopReason::EndTurn
    };
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
        provider: Some(Provider::OpenAi),
        message: Some(Message {
            role: Role::Assistant,
            parts,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_items() {
        let req = Request {
            model: "gpt-5.2".into(),
            system: Some("sys".into()),
            messages: vec![
                Message::user("hi"),
                Message {
                    role: Role::Assistant,
                    parts: vec![
                        Part::text("let me look"),
                        Part::ToolCall(ToolCall {
                            id: "call_1".into(),
                            name: "shell".into(),
                            arguments: json!({"command": "ls"}),
                            signature: None,
                        }),
                    ],
                },
                Message {
                    role: Role::User,
                    parts: vec![Part::ToolResult {
                        id: "call_1".into(),
                        name: "shell".into(),
                        content: "boom".into(),
                        is_error: true,
                    }],
                },
            ],
            reasoning_effort: Some("high".into()),
            ..Default::default()
        };
        let b = build_body(&req, "gpt-5.2", false);
        assert_eq!(b["instructions"], "sys");
        let input = b["input"].as_array().cloned().unwrap_or_default();
        assert_eq!(input.len(), 4);
        assert_eq!(input[0]["content"][0]["type"], "input_text");
        assert_eq!(input[1]["content"][0]["type"], "output_text");
        assert_eq!(input[2]["type"], "function_call");
        assert_eq!(input[2]["arguments"], "{\"command\":\"ls\"}");
        assert_eq!(input[3]["type"], "function_call_output");
        assert_eq!(input[3]["output"], "ERROR: boom");
        assert_eq!(b["reasoning"]["effort"], "high");
        assert_eq!(b["max_output_tokens"], 128_000);
    }
}
