//! A scripted LLM provider for tests: a `tiny_http` server on a loopback port that answers
//! with canned replies in each provider's real wire format (JSON bodies and SSE streams)
//! and records every request (method, URL, headers, JSON body, arrival time), so the real
//! client code runs end to end.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use serde_json::{json, Value};
use svc::internal::llm::{Provider, Usage};

/// One canned HTTP reply.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn json(v: Value) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: v.to_string(),
        }
    }

    /// An SSE body: `(event name, data)` pairs.
    pub fn sse(events: &[(Option<&str>, String)]) -> Self {
        let mut body = String::new();
        for (ev, data) in events {
            if let Some(e) = ev {
                body.push_str(&format!("event: {e}\n"));
            }
            body.push_str(&format!("data: {data}\n\n"));
        }
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body,
        }
    }

    pub fn error(status: u16, body: Value) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string(),
        }
    }

    pub fn header(mut self, k: &str, v: &str) -> Self {
        self.headers.push((k.into(), v.into()));
        self
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    pub at: Instant,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

type Handler = Box<dyn Fn(usize, &Recorded) -> Reply + Send + Sync>;

pub struct ScriptedServer {
    pub base: String,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
}

impl ScriptedServer {
    /// Answers the n-th request with `replies[n]`; extra requests get a 500 naming the
    /// exhausted script.
    pub fn start(replies: Vec<Reply>) -> Self {
        Self::start_with(move |n, _| {
            replies.get(n).cloned().unwrap_or_else(|| {
                Reply::error(
                    500,
                    json!({"error": {"message": "scripted server: script exhausted"}}),
                )
            })
        })
    }

    /// Answers with a handler of (request index, request).
    pub fn start_with(handler: impl Fn(usize, &Recorded) -> Reply + Send + Sync + 'static) -> Self {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind loopback"));
        let port = server
            .server_addr()
            .to_ip()
            .map(|a| a.port())
            .expect("ip listener");
        let recorded: Arc<Mutex<Vec<Recorded>>> = Arc::default();
        let handler: Handler = Box::new(handler);
        let (srv, rec) = (server.clone(), recorded.clone());
        let thread = std::thread::spawn(move || {
            while let Ok(mut req) = srv.recv() {
                let mut body = String::new();
                let _ = req.as_reader().read_to_string(&mut body);
                let r = Recorded {
                    method: req.method().to_string(),
                    url: req.url().to_string(),
                    headers: req
                        .headers()
                        .iter()
                        .map(|h| {
                            (
                                h.field.as_str().as_str().to_ascii_lowercase(),
                                h.value.as_str().to_string(),
                            )
                        })
                        .collect(),
                    body: serde_json::from_str(&body).unwrap_or(Value::String(body)),
                    at: Instant::now(),
                };
                let n = {
                    let mut g = rec.lock().expect("lock");
                    g.push(r.clone());
                    g.len() - 1
                };
                let reply = handler(n, &r);
                let mut resp =
                    tiny_http::Response::from_string(reply.body).with_status_code(reply.status);
                for (k, v) in &reply.headers {
                    if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
                        resp.add_header(h);
                    }
                }
                let _ = req.respond(resp);
            }
        });
        Self {
            base: format!("http://127.0.0.1:{port}"),
            recorded,
            server,
            thread: Some(thread),
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.recorded.lock().expect("lock").clone()
    }

    pub fn count(&self) -> usize {
        self.recorded.lock().expect("lock").len()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the scripted model does in one turn.
#[derive(Debug, Clone)]
pub enum Turn {
    Text(String),
    /// Optional text, then tool calls `(id, name, arguments)`.
    Tools(String, Vec<(String, String, Value)>),
}

/// Every provider the LLM client speaks.
pub const PROVIDERS: [Provider; 5] = [
    Provider::Anthropic,
    Provider::OpenAi,
    Provider::Gemini,
    Provider::Kimi,
    Provider::OpenAiCompatible,
];

/// The usage a scripted turn reports when a test needs no particular figures.
pub const SMALL_USAGE: Usage = Usage {
    input: 10,
    output: 5,
    reasoning: 0,
    cache_read: 0,
    cache_write: 0,
};

pub fn text(t: &str) -> Turn {
    Turn::Text(t.to_string())
}

pub fn tools(calls: &[(&str, &str, Value)]) -> Turn {
    Turn::Tools(
        String::new(),
        calls
            .iter()
            .map(|(i, n, a)| (i.to_string(), n.to_string(), a.clone()))
            .collect(),
    )
}

/// Builds a reply in `provider`'s real wire format. `usage` is expressed in the provider's
/// raw terms: `input` = all prompt tokens (including cached), `output` = all output tokens
/// (including reasoning).
pub fn reply(provider: Provider, turn: &Turn, usage: Usage, stream: bool) -> Reply {
    match provider {
        Provider::Anthropic => anthropic(turn, usage, stream),
        Provider::OpenAi => openai(turn, usage, stream),
        Provider::Gemini => gemini(turn, usage, stream),
        _ => chat(turn, usage, stream),
    }
}

fn parts(turn: &Turn) -> (String, Vec<(String, String, Value)>) {
    match turn {
        Turn::Text(t) => (t.clone(), vec![]),
        Turn::Tools(t, c) => (t.clone(), c.clone()),
    }
}

/// Splits text into three pieces so streams carry several deltas.
fn pieces(t: &str) -> Vec<String> {
    let chars: Vec<char> = t.chars().collect();
    if chars.len() < 3 {
        return vec![t.to_string()];
    }
    let a = chars.len() / 3;
    let b = 2 * chars.len() / 3;
    vec![
        chars[..a].iter().collect(),
        chars[a..b].iter().collect(),
        chars[b..].iter().collect(),
    ]
}

fn anthropic(turn: &Turn, u: Usage, stream: bool) -> Reply {
    let (text, calls) = parts(turn);
    let stop = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    let usage = json!({"input_tokens": u.input, "cache_creation_input_tokens": u.cache_write,
                       "cache_read_input_tokens": u.cache_read, "output_tokens": u.output});
    if !stream {
        let mut content = Vec::new();
        if !text.is_empty() {
            content.push(json!({"type": "text", "text": text}));
        }
        for (id, name, args) in &calls {
            content.push(json!({"type": "tool_use", "id": id, "name": name, "input": args}));
        }
        return Reply::json(
            json!({"id": "msg_01", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-6", "content": content, "stop_reason": stop,
            "stop_sequence": null, "usage": usage}),
        );
    }
    let mut ev: Vec<(Option<&str>, String)> = Vec::new();
    ev.push((Some("message_start"), json!({"type": "message_start", "message": {"id": "msg_01", "type": "message",
        "role": "assistant", "model": "claude-sonnet-4-6", "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": u.input, "cache_creation_input_tokens": u.cache_write,
                  "cache_read_input_tokens": u.cache_read, "output_tokens": 1}}}).to_string()));
    ev.push((Some("ping"), json!({"type": "ping"}).to_string()));
    let mut idx = 0;
    if !text.is_empty() {
        ev.push((
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": idx,
            "content_block": {"type": "text", "text": ""}})
            .to_string(),
        ));
        for p in pieces(&text) {
            ev.push((
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": idx,
                "delta": {"type": "text_delta", "text": p}})
                .to_string(),
            ));
        }
        ev.push((
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": idx}).to_string(),
        ));
        idx += 1;
    }
    for (id, name, args) in &calls {
        ev.push((
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": idx,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})
            .to_string(),
        ));
        for p in pieces(&args.to_string()) {
            ev.push((
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": idx,
                "delta": {"type": "input_json_delta", "partial_json": p}})
                .to_string(),
            ));
        }
        ev.push((
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": idx}).to_string(),
        ));
        idx += 1;
    }
    ev.push((
        Some("message_delta"),
        json!({"type": "message_delta", "delta": {"stop_reason": stop,
        "stop_sequence": null}, "usage": {"output_tokens": u.output}})
        .to_string(),
    ));
    ev.push((
        Some("message_stop"),
        json!({"type": "message_stop"}).to_string(),
    ));
    Reply::sse(&ev)
}

fn openai_response(text: &str, calls: &[(String, String, Value)], u: Usage) -> Value {
    let mut output = vec![json!({"type": "reasoning", "id": "rs_1", "summary": []})];
    if !text.is_empty() {
        output.push(
            json!({"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}),
        );
    }
    for (id, name, args) in calls {
        output.push(
            json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": id,
            "name": name, "arguments": args.to_string(), "status": "completed"}),
        );
    }
    json!({"id": "resp_1", "object": "response", "created_at": 1_700_000_000, "status": "completed",
        "model": "gpt-5.2-2025-12-11", "output": output,
        "usage": {"input_tokens": u.input, "input_tokens_details": {"cached_tokens": u.cache_read},
                  "output_tokens": u.output, "output_tokens_details": {"reasoning_tokens": u.reasoning},
                  "total_tokens": u.input + u.output}})
}

fn openai(turn: &Turn, u: Usage, stream: bool) -> Reply {
    let (text, calls) = parts(turn);
    let full = openai_response(&text, &calls, u);
    if !stream {
        return Reply::json(full);
    }
    let mut ev: Vec<(Option<&str>, String)> = Vec::new();
    let mut seq = 0;
    let mut push = |name: &'static str, mut v: Value| {
        v["type"] = json!(name);
        v["sequence_number"] = json!(seq);
        seq += 1;
        ev.push((Some(name), v.to_string()));
    };
    push(
        "response.created",
        json!({"response": {"id": "resp_1", "status": "in_progress", "output": []}}),
    );
    let mut oi = 1;
    if !text.is_empty() {
        push(
            "response.output_item.added",
            json!({"output_index": oi, "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}}),
        );
        for p in pieces(&text) {
            push(
                "response.output_text.delta",
                json!({"item_id": "msg_1", "output_index": oi, "content_index": 0, "delta": p}),
            );
        }
        push(
            "response.output_text.done",
            json!({"item_id": "msg_1", "output_index": oi, "content_index": 0, "text": text}),
        );
        oi += 1;
    }
    for (id, name, args) in &calls {
        let item = json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": id, "name": name,
                          "arguments": args.to_string(), "status": "completed"});
        push(
            "response.output_item.added",
            json!({"output_index": oi, "item": {"type": "function_call", "id": format!("fc_{id}"), "call_id": id, "name": name, "arguments": ""}}),
        );
        push(
            "response.function_call_arguments.delta",
            json!({"item_id": format!("fc_{id}"), "output_index": oi, "delta": args.to_string()}),
        );
        push(
            "response.output_item.done",
            json!({"output_index": oi, "item": item}),
        );
        oi += 1;
    }
    push("response.completed", json!({"response": full}));
    Reply::sse(&ev)
}

fn gemini_chunk(parts: Vec<Value>, finish: Option<&str>, u: Option<Usage>) -> Value {
    let mut cand = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
    if let Some(f) = finish {
        cand["finishReason"] = json!(f);
    }
    let mut v =
        json!({"candidates": [cand], "modelVersion": "gemini-3.1-pro-preview", "responseId": "r1"});
    if let Some(u) = u {
        v["usageMetadata"] = json!({"promptTokenCount": u.input, "candidatesTokenCount": u.output,
            "thoughtsTokenCount": u.reasoning, "cachedContentTokenCount": u.cache_read,
            "totalTokenCount": u.input + u.output + u.reasoning});
    }
    v
}

fn gemini(turn: &Turn, u: Usage, stream: bool) -> Reply {
    let (text, calls) = parts(turn);
    let call_parts: Vec<Value> = calls
        .iter()
        .map(|(_, name, args)| json!({"functionCall": {"name": name, "args": args}, "thoughtSignature": format!("sig-{name}")}))
        .collect();
    if !stream {
        let mut ps = Vec::new();
        if !text.is_empty() {
            ps.push(json!({"text": text}));
        }
        ps.extend(call_parts);
        return Reply::json(gemini_chunk(ps, Some("STOP"), Some(u)));
    }
    let mut ev: Vec<(Option<&str>, String)> = Vec::new();
    for p in pieces(&text).into_iter().filter(|p| !p.is_empty()) {
        ev.push((
            None,
            gemini_chunk(vec![json!({"text": p})], None, None).to_string(),
        ));
    }
    if !call_parts.is_empty() {
        ev.push((None, gemini_chunk(call_parts, None, None).to_string()));
    }
    ev.push((
        None,
        gemini_chunk(vec![json!({"text": ""})], Some("STOP"), Some(u)).to_string(),
    ));
    Reply::sse(&ev)
}

fn chat(turn: &Turn, u: Usage, stream: bool) -> Reply {
    let (text, calls) = parts(turn);
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    let usage = json!({"prompt_tokens": u.input, "completion_tokens": u.output, "total_tokens": u.input + u.output,
                       "prompt_tokens_details": {"cached_tokens": u.cache_read}});
    if !stream {
        let tcs: Vec<Value> = calls
            .iter()
            .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}))
            .collect();
        let mut msg = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
        if !tcs.is_empty() {
            msg["tool_calls"] = json!(tcs);
        }
        return Reply::json(
            json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": "kimi-k2.5", "choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": usage}),
        );
    }
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "kimi-k2.5",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
    };
    let mut ev: Vec<(Option<&str>, String)> = vec![(
        None,
        chunk(json!({"role": "assistant", "content": ""}), None),
    )];
    for p in pieces(&text).into_iter().filter(|p| !p.is_empty()) {
        ev.push((None, chunk(json!({"content": p}), None)));
    }
    for (i, (id, name, args)) in calls.iter().enumerate() {
        ev.push((
            None,
            chunk(
                json!({"tool_calls": [{"index": i, "id": id, "type": "function",
            "function": {"name": name, "arguments": ""}}]}),
                None,
            ),
        ));
        for p in pieces(&args.to_string()) {
            ev.push((
                None,
                chunk(
                    json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}),
                    None,
                ),
            ));
        }
    }
    ev.push((None, chunk(json!({}), Some(finish))));
    ev.push((
        None,
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "kimi-k2.5", "choices": [], "usage": usage})
        .to_string(),
    ));
    ev.push((None, "[DONE]".to_string()));
    Reply::sse(&ev)
}

/// A client for `provider` pointed at the scripted server, with fast retries.
/// Whether the client asked for a stream (Gemini says so in the URL, the others in the body).
pub fn streamed(r: &Recorded) -> bool {
    r.body["stream"].as_bool().unwrap_or(false) || r.url.contains(":streamGenerateContent")
}

impl ScriptedServer {
    /// A server answering with `turns` in order, each reporting `usage`, in `provider`'s
    /// format (streamed when asked); a request past the script gets a 500.
    pub fn turns(provider: Provider, turns: Vec<Turn>, usage: Usage) -> ScriptedServer {
        ScriptedServer::start_with(move |n, r: &Recorded| match turns.get(n) {
            Some(t) => reply(provider, t, usage, streamed(r)),
            None => Reply::error(
                500,
                serde_json::json!({"error": {"message": "scripted server: script exhausted"}}),
            ),
        })
    }
}

pub fn client(provider: Provider, server: &ScriptedServer) -> svc::internal::llm::LlmClient {
    let creds = svc::internal::llm::StaticCredentials::new()
        .with(provider.key_names()[0], &test_key(provider));
    let base = match provider.wire() {
        svc::internal::llm::provider::Wire::ChatCompletions => format!("{}/v1", server.base),
        _ => server.base.clone(),
    };
    svc::internal::llm::LlmClient::new(Arc::new(creds))
        .with_base_url(provider, &base)
        .with_retry(svc::internal::llm::RetryPolicy {
            base_delay: std::time::Duration::from_millis(20),
            ..Default::default()
        })
}

pub fn test_key(provider: Provider) -> String {
    format!("test-key-{}-0123456789abcdef", provider.id())
}

/// A model id of the provider's (catalog default; any id for openai_compatible).
pub fn model_for(provider: Provider) -> String {
    provider
        .default_model()
        .map(str::to_string)
        .unwrap_or_else(|| "local-model".to_string())
}

/// Tool results `(call id or function name, content, is_error)` in a recorded request body.
pub fn tool_results(provider: Provider, body: &Value) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    match provider {
        Provider::Anthropic => {
            for m in body["messages"].as_array().into_iter().flatten() {
                for b in m["content"].as_array().into_iter().flatten() {
                    if b["type"] == "tool_result" {
                        out.push((
                            s(&b["tool_use_id"]),
                            s(&b["content"]),
                            b["is_error"] == true,
                        ));
                    }
                }
            }
        }
        Provider::OpenAi => {
            for it in body["input"].as_array().into_iter().flatten() {
                if it["type"] == "function_call_output" {
                    let o = s(&it["output"]);
                    out.push((s(&it["call_id"]), o.clone(), o.starts_with("ERROR: ")));
                }
            }
        }
        Provider::Gemini => {
            for c in body["contents"].as_array().into_iter().flatten() {
                for p in c["parts"].as_array().into_iter().flatten() {
                    if let Some(fr) = p.get("functionResponse") {
                        let (content, err) = match fr["response"].get("error") {
                            Some(e) => (s(e), true),
                            None => (s(&fr["response"]["content"]), false),
                        };
                        out.push((s(&fr["name"]), content, err));
                    }
                }
            }
        }
        _ => {
            for m in body["messages"].as_array().into_iter().flatten() {
                if m["role"] == "tool" {
                    let o = s(&m["content"]);
                    out.push((s(&m["tool_call_id"]), o.clone(), o.starts_with("ERROR: ")));
                }
            }
        }
    }
    out
}

/// Every user-visible text a request sends as user input (for steering checks).
pub fn user_texts(provider: Provider, body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    match provider {
        Provider::Anthropic => {
            for m in body["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["role"] == "user")
            {
                for b in m["content"].as_array().into_iter().flatten() {
                    if b["type"] == "text" {
                        out.push(s(&b["text"]));
                    }
                }
            }
        }
        Provider::OpenAi => {
            for it in body["input"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["role"] == "user")
            {
                for c in it["content"].as_array().into_iter().flatten() {
                    out.push(s(&c["text"]));
                }
            }
        }
        Provider::Gemini => {
            for c in body["contents"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["role"] == "user")
            {
                for p in c["parts"].as_array().into_iter().flatten() {
                    if p.get("text").is_some() {
                        out.push(s(&p["text"]));
                    }
                }
            }
        }
        _ => {
            for m in body["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["role"] == "user")
            {
                out.push(s(&m["content"]));
            }
        }
    }
    out
}
