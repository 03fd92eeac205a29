//! The completions' part of the OpenAPI document (issue 29): `POST /api/v1/completions`
//! and its schemas.
//!
//! Owns: describing `/api/v1/completions`. Must not touch: handlers.

use super::{err, ok, op, r, Op};
use serde_json::{json, Value};

pub(super) fn operations() -> Vec<Op> {
    vec![op(
        "post",
        "/api/v1/completions",
        "Completions",
        "One model call through the server's configured providers and vault keys; recorded in the usage ledger",
    )
    .body(r("CompletionRequest"), true)
    .resp(vec![
        ok(
            "200",
            "The completion (JSON), or with `stream: true` an SSE stream: every frame `event: stream_event`, data `{type: stream_start | text_delta {delta} | finish {completion} | error {error}}`.",
            r("Completion"),
        ),
        err("400", "Malformed body, no messages, a role other than user/assistant, max_tokens outside 1-32768, an unknown provider, an unusable schema, schema with stream, or no provider configured (code provider_not_configured)."),
        err("429", "The daily LLM spending cap ([server] max_usd_per_day) is reached (code daily_cap_reached)."),
        err("502", "The provider failed (upstream_error), or its answer did not match `schema` (invalid_output; the usage is recorded)."),
    ])]
}

pub(super) fn schemas() -> Value {
    json!({
        "CompletionRequest": {
            "type": "object",
            "required": ["messages"],
            "additionalProperties": false,
            "examples": [{"messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 100}],
            "properties": {
                "messages": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "required": ["role", "content"], "additionalProperties": false,
                    "properties": {"role": {"enum": ["user", "assistant"]}, "content": {"type": "string"}}
                }},
                "model": {"type": "string", "description": "A catalog id or alias; default: [run] model, else the first configured provider's default."},
                "provider": {"type": "string", "description": "Pins the provider."},
                "system": {"type": "string"},
                "max_tokens": {"type": "integer", "minimum": 1, "maximum": 32768, "default": 4096},
                "stream": {"type": "boolean", "default": false},
                "schema": {"type": "object", "description": "A JSON Schema the answer must match; the parsed answer is `output`. Not streamed."}
            }
        },
        "Completion": {
            "type": "object",
            "required": ["id", "model", "provider", "message", "stop_reason", "usage", "cost_usd", "cost_usd_micros", "cost_source"],
            "properties": {
                "id": {"type": "string"},
                "model": {"type": "string"},
                "provider": {"type": "string"},
                "message": {"type": "object", "properties": {"role": {"type": "string"}, "content": {"type": "string"}}},
                "stop_reason": {"type": "string"},
                "usage": {"type": "object", "properties": {
                    "input_tokens": {"type": "integer"}, "output_tokens": {"type": "integer"},
                    "reasoning_tokens": {"type": "integer"}, "cache_read_tokens": {"type": "integer"},
                    "cache_write_tokens": {"type": "integer"}
                }},
                "cost_usd": {"type": "number"},
                "cost_usd_micros": {"type": "integer"},
                "cost_source": {"enum": ["catalog", "unpriced", "partial"]},
                "output": {"description": "The structured answer when `schema` was given, else null."}
            }
        }
    })
}
