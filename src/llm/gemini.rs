//! The Gemini generateContent wire format (`POST {base}/v1beta/models/{m}:generateContent`,
//! streaming `:streamGenerateContent?alt=sse`): `systemInstruction`, role `model`,
//! functionCall/functionResponse parts with synthetic call ids and echoed thought
//! signatures, thinking level, usage mapping. Must not retry, price, or know about agents.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Map, Value};

use super::error::LlmError;
use super::http::{sse_json, stream_error, SseEvent};
use super::provider::Provider;
use super::types::{
    Message, Part, Request, Response, Role, StopReason, StreamEvent, ToolCall, Usage,
};
use super::wire::{self, args_object, u, Call, Sink, StreamDecoder, WireFormat, WireRequest};

const FALLBACK_MAX_TOKENS: u64 = 65_536;

static CALL_SEQ: AtomicU64 = AtomicU64::new(1);

/// A synthetic tool-call id (Gemini has none), unique within the process and unlikely to
/// collide with ids of a conversation restored from an earlier process.
fn synthetic_id() -> String {
    let n = CALL_SEQ.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    format!("call_{:x}_{n}", t & 0xffff_ffff)
}

/// generateContent, for [`wire::drive`] (streaming is `streamGenerateContent`).
pub struct GenerateContent;

impl WireFormat for GenerateContent {
    type Decoder = Acc;

    fn request(c: &Call<'_>) -> WireRequest {
        let method = if c.stream {
            "streamGenerateContent?alt=sse"
        } else {
            "generateContent"
        };
        WireRequest {
            url: format!("{}/v1beta/models/{}:{method}", c.config.base_url, c.model),
            headers: vec![("x-goog-api-key", c.config.api_key.clone())],
            body: build_body(c.req),
        }
    }

    fn whole(c: &Call<'_>, answer: &Value) -> Result<Response, LlmError> {
        let mut acc = Acc::new(c.model);
        acc.chunk(answer, &mut |_| {})?;
        acc.finish()
    }

    fn decoder(c: &Call<'_>) -> Acc {
        Acc::new(c.model)
    }
}

/// A Gemini stream is a series of whole-shaped chunks, gathered until the body ends.
impl StreamDecoder for Acc {
    fn event(
        &mut self,
        _: &Call<'_>,
        ev: &SseEvent,
        sink: Sink<'_>,
    ) -> Result<Option<Response>, LlmError> {
        self.chunk(&sse_json(Provider::Gemini, &ev.data)?, sink)?;
        Ok(None)
    }

    fn end(self, _: &Call<'_>) -> Result<Response, LlmError> {
        self.finish()
    }
}

/// The request body (the model is in the URL).
pub fn build_body(req: &Request) -> Value {
    let model = req.model.as_str();
    let mut body = Map::new();
    body.insert(
        "contents".into(),
        Value::Array(convert_contents(&req.messages)),
    );
    if let Some(sys) = req.system.as_deref().filter(|s| !s.trim().is_empty()) {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": sys}]}),
        );
    }
    if !req.tools.is_empty() {
        let decls: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({"name": t.name, "description": t.description,
                       "parameters": sanitize_schema(&t.parameters)})
            })
            .collect();
        body.insert("tools".into(), json!([{ "functionDeclarations": decls }]));
    }
    let mut gen = Map::new();
    gen.insert(
        "maxOutputTokens".into(),
        json!(wire::max_tokens(
            req,
            &super::provider::wire_model_id(model),
            FALLBACK_MAX_TOKENS
        )),
    );
    if let Some(e) = wire::effort(req, &super::provider::wire_model_id(model)) {
        let level = if e == "low" || e == "minimal" {
            "low"
        } else {
            "high"
        };
        gen.insert("thinkingConfig".into(), json!({"thinkingLevel": level}));
    }
    body.insert("generationConfig".into(), Value::Object(gen));
    Value::Object(body)
}

/// Gemini accepts an OpenAPI subset: drop JSON-Schema keys it refuses.
fn sanitize_schema(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "additionalProperties" | "$schema"))
                .map(|(k, v)| (k.clone(), sanitize_schema(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(sanitize_schema).collect()),
        other => other.clone(),
    }
}

fn convert_contents(msgs: &[Message]) -> Vec<Value> {
    let mut out: Vec<(Role, Vec<Value>)> = Vec::new();
    for m in msgs {
        let mut parts = Vec::new();
        for p in &m.parts {
            match p {
                Part::Text { text } if !text.is_empty() => parts.push(json!({"text": text})),
                Part::Text { .. } => {}
                Part::ToolCall(c) => {
                    let mut part = json!({"functionCall": {"name": c.name, "args": args_object(&c.arguments)}});
                    if let Some(sig) = &c.signature {
                        part["thoughtSignature"] = json!(sig);
                    }
                    parts.push(part);
                }
                Part::ToolResult {
                    name,
                    content,
                    is_error,
                    ..
                } => {
                    let response = if *is_error {
                        json!({"error": content})
                    } else {
                        json!({"content": content})
                    };
                    parts.push(json!({"functionResponse": {"name": name, "response": response}}));
                }
                Part::Opaque { provider, value } if *provider == Provider::Gemini => {
                    parts.push(value.clone())
                }
                Part::Opaque { .. } => {}
            }
        }
        if parts.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((role, existing)) if *role == m.role => existing.extend(parts),
            _ => out.push((m.role, parts)),
        }
    }
    out.into_iter()
        .map(|(role, parts)| {
            let role = match role {
                Role::User => "user",
                Role::Assistant => "model",
            };
            json!({"role": role, "parts": parts})
        })
        .collect()
}

/// Accumulates chunks (a non-streaming body is one chunk).
pub struct Acc {
    model: String,
    parts: Vec<Part>,
    text: String,
    calls: Vec<ToolCall>,
    finish: Option<String>,
    usage: Value,
    blocked: Option<String>,
}

impl Acc {
    fn new(model: &str) -> Self {
        Self {
            model: model.to_string(),
            parts: Vec::new(),
            text: String::new(),
            calls: Vec::new(),
            finish: None,
            usage: Value::Null,
            blocked: None,
        }
    }

    fn chunk(&mut self, v: &Value, sink: Sink<'_>) -> Result<(), LlmError> {
        if v.get("error").is_some() {
            return Err(stream_error(Provider::Gemini, v));
        }
        if let Some(m) = v.get("modelVersion").and_then(Value::as_str) {
            self.model = m.to_string();
        }
        if let Some(us) = v.get("usageMetadata").filter(|u| u.is_object()) {
            self.usage = us.clone();
        }
        if let Some(b) = v
            .get("promptFeedback")
            .and_then(|f| f.get("blockReason"))
            .and_then(Value::as_str)
        {
            self.blocked = Some(b.to_string());
        }
        let Some(cand) = v
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(());
        };
        for p in cand
            .get("content")
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(fc) = p.get("functionCall") {
                let call = ToolCall {
                    id: fc
                        .get("id")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(synthetic_id),
                    name: fc
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    arguments: fc.get("args").cloned().unwrap_or_else(|| json!({})),
                    signature: p
                        .get("thoughtSignature")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                };
                sink(StreamEvent::ToolCall(call.clone()));
                self.calls.push(call.clone());
                self.parts.push(Part::ToolCall(call));
            } else if let Some(t) = p.get("text").and_then(Value::as_str) {
                if p.get("thought").and_then(Value::as_bool) == Some(true) {
                    continue;
                }
                if !t.is_empty() {
                    sink(StreamEvent::TextDelta(t.to_string()));
                }
                self.text.push_str(t);
                match self.parts.last_mut() {
                    Some(Part::Text { text }) => text.push_str(t),
                    _ => self.parts.push(Part::text(t)),
                }
            }
        }
        if let Some(f) = cand.get("finishReason").and_then(Value::as_str) {
            self.finish = Some(f.to_string());
        }
        Ok(())
    }

    fn finish(self) -> Result<Response, LlmError> {
        let stop = match (self.finish.as_deref(), &self.blocked) {
            (_, Some(_)) => StopReason::ContentFilter,
            (None, None) => {
                return Err(LlmError::Stream {
                    provider: Provider::Gemini,
                    message: "the response ended without a finishReason".into(),
                })
            }
            (Some("STOP"), _) if !self.calls.is_empty() => StopReason::ToolUse,
            (Some("STOP"), _) => StopReason::EndTurn,
            (Some("MAX_TOKENS"), _) => StopReason::MaxTokens,
            (
                Some(
                    "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII"
                    | "IMAGE_SAFETY",
                ),
                _,
            ) => StopReason::ContentFilter,
            (Some(_), _) if !self.calls.is_empty() => StopReason::ToolUse,
            (Some(_), _) => StopReason::Other,
        };
        let us = &self.usage;
        let cached = u(us, "cachedContentTokenCount");
        let usage = Usage {
            input: u(us, "promptTokenCount").saturating_sub(cached),
            output: u(us, "candidatesTokenCount"),
            reasoning: u(us, "thoughtsTokenCount"),
            cache_read: cached,
            cache_write: 0,
        };
        Ok(Response {
            text: self.text,
            tool_calls: self.calls,
            usage,
            stop_reason: stop,
            model: self.model,
            provider: Some(Provider::Gemini),
            message: Some(Message {
                role: Role::Assistant,
                parts: self.parts,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::types::ToolSpec;

    #[test]
    fn contents_roles_and_function_parts() {
        let req = Request {
            model: "gemini-pro".into(),
            system: Some("sys".into()),
            messages: vec![
                Message::user("hi"),
                Message {
                    role: Role::Assistant,
                    parts: vec![Part::ToolCall(ToolCall {
                        id: "call_1".into(),
                        name: "glob".into(),
                        arguments: json!({"pattern": "*.rs"}),
                        signature: Some("sig".into()),
                    })],
                },
                Message {
                    role: Role::User,
                    parts: vec![Part::ToolResult {
                        id: "call_1".into(),
                        name: "glob".into(),
                        content: "a.rs".into(),
                        is_error: false,
                    }],
                },
            ],
            tools: vec![ToolSpec {
                name: "glob".into(),
                description: "d".into(),
                parameters: json!({"type": "object", "additionalProperties": false}),
            }],
            reasoning_effort: Some("high".into()),
            ..Default::default()
        };
        let b = build_body(&req);
        assert_eq!(b["systemInstruction"]["parts"][0]["text"], "sys");
        assert_eq!(b["contents"][1]["role"], "model");
        assert_eq!(b["contents"][1]["parts"][0]["thoughtSignature"], "sig");
        assert_eq!(
            b["contents"][2]["parts"][0]["functionResponse"]["response"]["content"],
            "a.rs"
        );
        assert!(b["tools"][0]["functionDeclarations"][0]["parameters"]
            .get("additionalProperties")
            .is_none());
        assert_eq!(b["generationConfig"]["maxOutputTokens"], 65_536);
        assert_eq!(
            b["generationConfig"]["thinkingConfig"]["thinkingLevel"],
            "high"
        );
    }
}
