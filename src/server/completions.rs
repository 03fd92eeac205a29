//! `POST /api/v1/completions` (issue 29, opgroups 7): one model call through the server's
//! configured providers and vault keys, so tools use the team's providers without holding
//! the keys. The answer is JSON, or SSE (`event: stream_event`) with `stream: true`; the
//! usage and its cost go to the usage ledger (origin `completion`), so they count in
//! `GET /api/v1/usage` and the daily cap, which refuses a completion once reached.
//!
//! Owns: the route's request and response shapes. Must not touch: provider wire formats
//! (`llm`), SQL (`store::usage`).

use super::error::ApiError;
use super::http::{Reply, StreamReply};
use super::router::Ctx;
use super::runs::store_error;
use super::App;
use crate::base::cancel::CancelToken;
use crate::llm::{Message, Provider, Request, Response, StreamEvent};
use crate::settings::vault::Vault;
use crate::store::CompletionUsage;
use serde_json::{json, Value};
use std::sync::Arc;

/// The output tokens a completion may ask for at most (a per-request ceiling: it spends
/// the team's money), and the default.
pub const MAX_TOKENS_CEILING: u64 = 32_768;
pub const DEFAULT_MAX_TOKENS: u64 = 4_096;

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    messages: Vec<InMessage>,
    model: Option<String>,
    provider: Option<String>,
    system: Option<String>,
    max_tokens: Option<u64>,
    #[serde(default)]
    stream: bool,
    schema: Option<Value>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct InMessage {
    role: String,
    content: String,
}

fn invalid(detail: impl Into<String>) -> ApiError {
    ApiError::bad_request(detail).with_code("invalid_completion")
}

/// The model request of a body, and its JSON Schema when structured output is asked for.
fn request_of(
    b: Body,
    default: Option<(String, Provider)>,
) -> Result<
    (
        Request,
        Option<crate::workflow::schema::Schema>,
        Option<Value>,
    ),
    ApiError,
> {
    if b.messages.is_empty() {
        return Err(invalid("`messages` must hold at least one message."));
    }
    let mut messages = Vec::with_capacity(b.messages.len());
    for (i, m) in b.messages.into_iter().enumerate() {
        messages.push(match m.role.as_str() {
            "user" => Message::user(m.content),
            "assistant" => Message::assistant(m.content),
            other => {
                return Err(invalid(format!(
                    "messages[{i}].role must be `user` or `assistant`, not `{other}` (system text goes in `system`)."
                )))
            }
        });
    }
    let max_tokens = b.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    if !(1..=MAX_TOKENS_CEILING).contains(&max_tokens) {
        return Err(invalid(format!(
            "`max_tokens` must be from 1 to {MAX_TOKENS_CEILING}."
        )));
    }
    let provider = match b.provider.as_deref() {
        None => None,
        Some(p) => {
            Some(Provider::parse(p).ok_or_else(|| invalid(format!("unknown provider `{p}`.")))?)
        }
    };
    let (model, provider) = match (b.model, provider) {
        (Some(m), p) => (m, p),
        (None, Some(p)) => (
            p.default_model()
                .ok_or_else(|| invalid(format!("provider `{p}` has no default model: name one.")))?
                .to_string(),
            Some(p),
        ),
        (None, None) => {
            let (m, p) = default.ok_or_else(|| {
                ApiError::bad_request(
                    "No LLM provider is configured: store a provider key (PUT /api/v1/secrets/{name}) or name a model.",
                )
                .with_code("provider_not_configured")
            })?;
            (m, Some(p))
        }
    };
    let mut system = b.system;
    let mut compiled = None;
    if let Some(schema) = &b.schema {
        compiled = Some(
            crate::workflow::schema::compile(schema)
                .map_err(|e| invalid(format!("`schema` is not a usable JSON Schema: {e}")))?,
        );
        let rule = format!(
            "Answer with one JSON value and nothing else (no prose, no code fence), valid against this JSON Schema:\n{schema}"
        );
        system = Some(match system {
            Some(s) => format!("{s}\n\n{rule}"),
            None => rule,
        });
    }
    Ok((
        Request {
            model,
            provider,
            system,
            messages,
            tools: Vec::new(),
            max_tokens: Some(max_tokens),
            reasoning_effort: None,
        },
        compiled,
        b.schema,
    ))
}

/// The structured output of an answer: its text as JSON, checked against the schema.
fn output_of(text: &str, schema: &crate::workflow::schema::Schema) -> Result<Value, String> {
    let t = text.trim();
    let t = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .and_then(|r| r.strip_suffix("```"))
        .map_or(t, str::trim);
    let v: Value = serde_json::from_str(t).map_err(|e| format!("the answer is not JSON: {e}"))?;
    let errors = schema.errors(&v);
    if errors.is_empty() {
        Ok(v)
    } else {
        Err(format!(
            "the answer does not match the schema: {}",
            errors.join("; ")
        ))
    }
}

/// The response body of a finished call, and the ledger record of its usage.
fn answer(resp: &Response, req: &Request, output: Option<Value>) -> (Value, CompletionUsage) {
    let provider = resp
        .provider
        .or(req.provider)
        .map(|p| p.to_string())
        .unwrap_or_default();
    let model = if resp.model.is_empty() {
        req.model.clone()
    } else {
        resp.model.clone()
    };
    let cost = crate::llm::cost::cost_of(&model, &resp.usage, crate::llm::cost::Speed::Standard);
    let u = &resp.usage;
    let body = json!({
        "id": crate::base::clock::new_ulid(),
        "model": model,
        "provider": provider,
        "message": {"role": "assistant", "content": resp.text},
        "stop_reason": resp.stop_reason,
        "usage": {"input_tokens": u.input, "output_tokens": u.output, "reasoning_tokens": u.reasoning,
                  "cache_read_tokens": u.cache_read, "cache_write_tokens": u.cache_write},
        "cost_usd": cost.usd_micros as f64 / 1e6,
        "cost_usd_micros": cost.usd_micros,
        "cost_source": cost.source.as_str(),
        "output": output,
    });
    let record = CompletionUsage {
        ts: crate::base::clock::now(),
        provider,
        model,
        input_tokens: u.input + u.cache_read + u.cache_write,
        output_tokens: u.output + u.reasoning,
        usd_micros: cost.usd_micros,
        priced: cost.source != crate::llm::cost::CostSource::Unpriced,
    };
    (body, record)
}

fn upstream(e: crate::llm::LlmError) -> ApiError {
    ApiError::new(502, format!("The provider failed: {e}")).with_code("upstream_error")
}

/// `POST /api/v1/completions`.
pub fn create(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let body: Body = ctx.inc.json()?;
    if let Some(cap) = app.runs.daily_cap().map_err(store_error)? {
        if cap.reached() {
            return Err(ApiError::new(429, cap.message())
                .with_code("daily_cap_reached")
                .with_extra(json!({"daily_cap": cap.to_json()})));
        }
    }
    let settings = app.settings.get();
    let vault = Arc::new(Vault::in_state_dir(&app.state_dir));
    let stream = body.stream;
    let (req, schema, _) = request_of(
        body,
        crate::ask::readiness::default_choice(&settings, &*vault),
    )?;
    if stream && schema.is_some() {
        return Err(invalid(
            "`schema` answers are not streamed: leave `stream` false.",
        ));
    }
    let client = crate::agent::backend::client_from_settings(&settings, vault)
        .map_err(|e| ApiError::internal(format!("Cannot build the provider client: {e}")))?;
    // The provider and its key are checked before any answer starts, so a stream never
    // begins for a call that cannot be made.
    crate::llm::provider::infer_provider(&req.model, req.provider)
        .and_then(|p| client.config(p))
        .map_err(|e| {
            ApiError::bad_request(format!("Cannot call model `{}`: {e}", req.model))
                .with_code("provider_not_configured")
        })?;
    let ledger = Arc::clone(&app.ledger);
    if !stream {
        let resp = client
            .complete(&req, &CancelToken::new())
            .map_err(upstream)?;
        let output = match &schema {
            Some(s) => Some(output_of(&resp.text, s)),
            None => None,
        };
        let (mut body, record) = answer(&resp, &req, None);
        // Spent whatever the answer: recorded before any refusal of its content.
        ledger.record_completion(&record).map_err(store_error)?;
        match output {
            Some(Err(why)) => {
                return Err(
                    ApiError::new(502, format!("The model's answer was refused: {why}"))
                        .with_code("invalid_output")
                        .with_extra(json!({"completion": body})),
                )
            }
            Some(Ok(v)) => body["output"] = v,
            None => {}
        }
        return Ok(Reply::json(200, &body));
    }
    Ok(Reply::Stream(StreamReply {
        status: 200,
        headers: super::runs::sse::sse_headers(),
        body: Box::new(move |w| {
            let frame = |v: Value| format!("event: stream_event\ndata: {v}\n\n").into_bytes();
            w.send(&frame(json!({"type": "stream_start", "model": req.model})))?;
            let cancel = CancelToken::new();
            let mut broken = None;
            let result = client.stream(&req, &cancel, &mut |ev| {
                if broken.is_some() {
                    return;
                }
                if let StreamEvent::TextDelta(t) = ev {
                    if let Err(e) = w.send(&frame(json!({"type": "text_delta", "delta": t}))) {
                        // The caller left: stop paying for an answer nobody reads.
                        cancel.cancel("the caller closed the stream");
                        broken = Some(e);
                    }
                }
            });
            match result {
                Ok(resp) => {
                    let (body, record) = answer(&resp, &req, None);
                    if let Err(e) = ledger.record_completion(&record) {
                        log::error!("recording a completion's usage: {e}");
                    }
                    if let Some(e) = broken {
                        return Err(e);
                    }
                    w.send(&frame(json!({"type": "finish", "completion": body})))
                }
                Err(e) => {
                    if let Some(e) = broken {
                        return Err(e);
                    }
                    w.send(&frame(
                        json!({"type": "error", "error": format!("The provider failed: {e}")}),
                    ))
                }
            }
        }),
    }))
}
