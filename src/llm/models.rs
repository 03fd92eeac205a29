//! The model list of `GET /models` (api.md §5.3 shape, built from the catalog plus which
//! providers have credentials) and the probes behind `POST /models/{id}/test` and
//! `POST /providers/test`. Must not serve HTTP or store results.

use std::time::Instant;

use serde::Serialize;
use serde_json::{json, Value};

use super::catalog::{self, Model};
use super::client::LlmClient;
use super::provider::{Credentials, Provider, ProviderConfig};
use super::types::{Message, Request, ToolSpec};
use crate::base::cancel::CancelToken;

/// A readable name from a catalog id (`claude-sonnet-4-6` → `Claude Sonnet 4.6`,
/// `gpt-5.4-mini` → `GPT-5.4 Mini`, `glm-4.7` → `GLM-4.7`).
pub fn display_name(id: &str) -> String {
    let parts: Vec<&str> = id.split('-').collect();
    let cap = |w: &str| {
        let mut c = w.chars();
        match c.next() {
            Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
            None => String::new(),
        }
    };
    match parts.first().copied() {
        Some("claude") => {
            // claude-<family>-<major>-<minor>
            let mut words: Vec<String> = Vec::new();
            let mut nums: Vec<&str> = Vec::new();
            for p in &parts[1..] {
                if p.chars().all(|c| c.is_ascii_digit()) {
                    nums.push(p);
                } else {
                    words.push(cap(p));
                }
            }
            let mut s = format!("Claude {}", words.join(" "));
            if !nums.is_empty() {
                s.push(' ');
                s.push_str(&nums.join("."));
            }
            s
        }
        Some("gpt") | Some("glm") => {
            let head = format!(
                "{}-{}",
                parts[0].to_uppercase(),
                parts.get(1).unwrap_or(&"")
            );
            let rest: Vec<String> = parts.iter().skip(2).map(|p| cap(p)).collect();
            if rest.is_empty() {
                head
            } else {
                format!("{head} {}", rest.join(" "))
            }
        }
        Some("minimax") => {
            let rest: Vec<String> = parts.iter().skip(1).map(|p| cap(p)).collect();
            format!("MiniMax {}", rest.join(" "))
        }
        _ => parts.iter().map(|p| cap(p)).collect::<Vec<_>>().join(" "),
    }
}

/// The model family: the id without its version and variant (`claude-sonnet`, `gpt-5`,
/// `gemini-3.1`, `kimi`).
pub fn family(m: &Model) -> String {
    let parts: Vec<&str> = m.id.split('-').collect();
    match parts.as_slice() {
        ["claude", fam, ..] => format!("claude-{fam}"),
        ["gpt", v, ..] => format!("gpt-{}", v.split('.').next().unwrap_or(v)),
        ["gemini", v, ..] => format!("gemini-{v}"),
        [first, ..] => first.to_string(),
        [] => m.id.to_string(),
    }
}

/// One model in the api.md §5.3 shape.
pub fn model_json(m: &Model, creds: &dyn Credentials) -> Value {
    let provider = Provider::parse(m.provider);
    let effort = m.reasoning && matches!(m.provider, "anthropic" | "openai" | "gemini");
    let vision = matches!(m.provider, "anthropic" | "openai" | "gemini");
    json!({
        "id": m.id,
        "provider": m.provider,
        "family": family(m),
        "display_name": display_name(m.id),
        "limits": {"context_window": m.context_window, "max_output": m.max_output},
        "training": null,
        "knowledge_cutoff": null,
        "features": {"tools": true, "vision": vision, "reasoning": m.reasoning, "effort": effort},
        "costs": {
            "input_cost_per_mtok": m.price.map(|p| p.input),
            "output_cost_per_mtok": m.price.map(|p| p.output),
            "cache_input_cost_per_mtok": m.price.and_then(|p| p.cached_input),
        },
        "estimated_output_tps": null,
        "aliases": m.aliases,
        "default": m.default,
        "configured": provider.is_some_and(|p| ProviderConfig::is_configured(p, creds)),
    })
}

/// The catalog filtered by `provider` (an unknown provider is an error naming it) and a
/// case-insensitive `query` over id, display name and aliases.
pub fn list_models(
    provider: Option<&str>,
    query: Option<&str>,
    creds: &dyn Credentials,
) -> Result<Vec<Value>, String> {
    let want = match provider.filter(|p| !p.is_empty()) {
        Some(p) => Some(
            Provider::parse(p)
                .ok_or_else(|| format!("unknown provider {p:?}"))?
                .id(),
        ),
        None => None,
    };
    let q = query.map(str::to_ascii_lowercase).filter(|q| !q.is_empty());
    Ok(catalog::MODELS
        .iter()
        .filter(|m| want.is_none_or(|w| m.provider == w))
        .filter(|m| match &q {
            None => true,
            Some(q) => {
                m.id.to_ascii_lowercase().contains(q)
                    || display_name(m.id).to_ascii_lowercase().contains(q)
                    || m.aliases.iter().any(|a| a.to_ascii_lowercase().contains(q))
            }
        })
        .map(|m| model_json(m, creds))
        .collect())
}

/// The cheap model used to probe a provider (api.md §5.3).
pub fn probe_model(p: Provider) -> Option<&'static str> {
    match p {
        Provider::Anthropic => Some("claude-haiku-4-5"),
        Provider::OpenAi => Some("gpt-5.4-mini"),
        other => other.default_model(),
    }
}

/// The status of one probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeStatus {
    Ok,
    Error,
    /// The provider has no credentials.
    Skip,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeResult {
    pub provider: String,
    pub model_id: String,
    pub status: ProbeStatus,
    pub error_message: Option<String>,
    pub latency_ms: u64,
}

/// How thorough a model test is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestMode {
    /// One short text call.
    Basic,
    /// A call that must come back with a tool call.
    Deep,
}

/// Tests one model (`POST /models/{id}/test`): `skip` when its provider is unconfigured.
pub fn test_model(
    client: &LlmClient,
    model: &str,
    provider: Option<Provider>,
    mode: TestMode,
    cancel: &CancelToken,
) -> ProbeResult {
    let provider = match super::provider::infer_provider(model, provider) {
        Ok(p) => p,
        Err(e) => {
            return ProbeResult {
                provider: String::new(),
                model_id: model.to_string(),
                status: ProbeStatus::Error,
                error_message: Some(e.to_string()),
                latency_ms: 0,
            }
        }
    };
    let model_id = super::provider::wire_model_id(model);
    if !client.is_configured(provider) {
        return ProbeResult {
            provider: provider.id().into(),
            model_id,
            status: ProbeStatus::Skip,
            error_message: None,
            latency_ms: 0,
        };
    }
    let mut req = Request {
        model: model.to_string(),
        provider: Some(provider),
        messages: vec![Message::user("Reply with the single word OK.")],
        max_tokens: Some(256),
        ..Default::default()
    };
    if mode == TestMode::Deep {
        req.messages = vec![Message::user(
            "Call the echo tool with text \"ping\". Do not reply with text.",
        )];
        req.tools = vec![ToolSpec {
            name: "echo".into(),
            description: "Echo a text back.".into(),
            parameters: json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        }];
    }
    let start = Instant::now();
    let r = client.complete(&req, cancel);
    let latency_ms = start.elapsed().as_millis() as u64;
    let error = match r {
        Ok(resp) if mode == TestMode::Deep && resp.tool_calls.is_empty() => {
            Some("the model did not call the test tool".to_string())
        }
        Ok(_) => None,
        Err(e) => Some(e.to_string()),
    };
    ProbeResult {
        provider: provider.id().into(),
        model_id,
        status: if error.is_none() {
            ProbeStatus::Ok
        } else {
            ProbeStatus::Error
        },
        error_message: error,
        latency_ms,
    }
}

/// Tests every provider with its probe model, concurrently (`POST /providers/test`).
/// Never fails as a whole; unconfigured providers are `skip`.
pub fn test_providers(client: &LlmClient, cancel: &CancelToken) -> Vec<ProbeResult> {
    let providers: Vec<Provider> = Provider::ALL
        .into_iter()
        .filter(|p| *p != Provider::OpenAiCompatible || client.is_configured(*p))
        .collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = providers
            .iter()
            .map(|p| {
                let p = *p;
                s.spawn(move || match probe_model(p) {
                    Some(m) => test_model(client, m, Some(p), TestMode::Basic, cancel),
                    None => ProbeResult {
                        provider: p.id().into(),
                        model_id: String::new(),
                        status: if client.is_configured(p) {
                            ProbeStatus::Error
                        } else {
                            ProbeStatus::Skip
                        },
                        error_message: client
                            .is_configured(p)
                            .then(|| "no model to probe this provider with".to_string()),
                        latency_ms: 0,
                    },
                })
            })
            .collect();
        handles
            .into_iter()
            .zip(&providers)
            .map(|(h, p)| {
                h.join().unwrap_or_else(|_| ProbeResult {
                    provider: p.id().into(),
                    model_id: String::new(),
                    status: ProbeStatus::Error,
                    error_message: Some("the probe panicked".into()),
                    latency_ms: 0,
                })
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::provider::StaticCredentials;

    #[test]
    fn names_and_families() {
        assert_eq!(display_name("claude-sonnet-4-6"), "Claude Sonnet 4.6");
        assert_eq!(display_name("gpt-5.4-mini"), "GPT-5.4 Mini");
        assert_eq!(display_name("gpt-5.2"), "GPT-5.2");
        assert_eq!(
            display_name("gemini-3.1-pro-preview"),
            "Gemini 3.1 Pro Preview"
        );
        assert_eq!(display_name("glm-4.7"), "GLM-4.7");
        assert_eq!(display_name("minimax-m2.5"), "MiniMax M2.5");
        assert_eq!(display_name("kimi-k2.5"), "Kimi K2.5");
        let m = catalog::lookup("gpt-5.4-mini").map(family);
        assert_eq!(m.as_deref(), Some("gpt-5"));
    }

    #[test]
    fn listing_filters_and_flags_configured() {
        let creds = StaticCredentials::new().with("ANTHROPIC_API_KEY", "k");
        let all = list_models(None, None, &creds).unwrap_or_default();
        assert_eq!(all.len(), catalog::MODELS.len());
        let a = list_models(Some("anthropic"), Some("SONNET"), &creds).unwrap_or_default();
        assert_eq!(a.len(), 2);
        assert_eq!(a[0]["configured"], true);
        assert_eq!(a[0]["costs"]["input_cost_per_mtok"], 3.0);
        let g = list_models(Some("gemini"), None, &creds).unwrap_or_default();
        assert_eq!(g[0]["configured"], false);
        assert!(list_models(Some("nope"), None, &creds).is_err());
        let spark = list_models(None, Some("spark"), &creds).unwrap_or_default();
        assert!(spark[0]["costs"]["input_cost_per_mtok"].is_null());
    }
}
