//! Provider identities, their wire protocol, default endpoints, credential names, and the
//! [`Credentials`] trait through which API keys arrive. Owns key resolution; must not read
//! the process environment, log keys, or speak HTTP.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;

use super::error::LlmError;

/// An LLM provider (api.md §4 "LLM provider").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    Anthropic,
    #[serde(rename = "openai")]
    OpenAi,
    Gemini,
    Kimi,
    Zai,
    Minimax,
    Inception,
    #[serde(rename = "openai_compatible")]
    OpenAiCompatible,
}

/// The wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    AnthropicMessages,
    OpenAiResponses,
    GeminiGenerateContent,
    ChatCompletions,
}

/// Which coding-tool set an agent gets for a provider (engine.md §12.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolProfile {
    /// `edit_file` for edits.
    Anthropic,
    /// `apply_patch` (v4a) for edits; also Kimi, Zai, Minimax, Inception, compatible.
    OpenAi,
    /// `edit_file` for edits.
    Gemini,
}

impl Provider {
    pub const ALL: [Provider; 8] = [
        Provider::Anthropic,
        Provider::OpenAi,
        Provider::Gemini,
        Provider::Kimi,
        Provider::Zai,
        Provider::Minimax,
        Provider::Inception,
        Provider::OpenAiCompatible,
    ];

    /// The id used in the catalog, settings and the API.
    pub fn id(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
            Provider::Gemini => "gemini",
            Provider::Kimi => "kimi",
            Provider::Zai => "zai",
            Provider::Minimax => "minimax",
            Provider::Inception => "inception",
            Provider::OpenAiCompatible => "openai_compatible",
        }
    }

    /// Parses a provider id (case-insensitive; `google` and `openai-compatible` accepted).
    pub fn parse(s: &str) -> Option<Provider> {
        let l = s.trim().to_ascii_lowercase();
        match l.as_str() {
            "google" => Some(Provider::Gemini),
            "openai-compatible" => Some(Provider::OpenAiCompatible),
            _ => Provider::ALL.into_iter().find(|p| p.id() == l),
        }
    }

    pub fn wire(self) -> Wire {
        match self {
            Provider::Anthropic => Wire::AnthropicMessages,
            Provider::OpenAi => Wire::OpenAiResponses,
            Provider::Gemini => Wire::GeminiGenerateContent,
            _ => Wire::ChatCompletions,
        }
    }

    pub fn tool_profile(self) -> ToolProfile {
        match self {
            Provider::Anthropic => ToolProfile::Anthropic,
            Provider::Gemini => ToolProfile::Gemini,
            _ => ToolProfile::OpenAi,
        }
    }

    /// Credential names, in lookup order.
    pub fn key_names(self) -> &'static [&'static str] {
        match self {
            Provider::Anthropic => &["ANTHROPIC_API_KEY"],
            Provider::OpenAi => &["OPENAI_API_KEY"],
            Provider::Gemini => &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
            Provider::Kimi => &["KIMI_API_KEY"],
            Provider::Zai => &["ZAI_API_KEY"],
            Provider::Minimax => &["MINIMAX_API_KEY"],
            Provider::Inception => &["INCEPTION_API_KEY"],
            Provider::OpenAiCompatible => &["OPENAI_COMPATIBLE_API_KEY"],
        }
    }

    /// Every provider's credential names: what the processes a run starts (the shell tool's
    /// commands, ACP agents) never inherit.
    pub fn all_key_names() -> impl Iterator<Item = &'static str> {
        Provider::ALL
            .into_iter()
            .flat_map(|p| p.key_names().iter().copied())
    }

    /// The credential name that may carry a base URL override (e.g. a gateway), consulted
    /// when no [`ProviderConfig::base_url`] is set.
    pub fn base_url_name(self) -> &'static str {
        match self {
            Provider::Anthropic => "ANTHROPIC_BASE_URL",
            Provider::OpenAi => "OPENAI_BASE_URL",
            Provider::Gemini => "GEMINI_BASE_URL",
            Provider::Kimi => "KIMI_BASE_URL",
            Provider::Zai => "ZAI_BASE_URL",
            Provider::Minimax => "MINIMAX_BASE_URL",
            Provider::Inception => "INCEPTION_BASE_URL",
            Provider::OpenAiCompatible => "OPENAI_COMPATIBLE_BASE_URL",
        }
    }

    /// The public endpoint. For Chat Completions providers the base already ends in the
    /// version segment (`…/v1`); `/chat/completions` is appended. `openai_compatible` has
    /// none: a base URL must be configured.
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            Provider::Anthropic => Some("https://api.anthropic.com"),
            Provider::OpenAi => Some("https://api.openai.com"),
            Provider::Gemini => Some("https://generativelanguage.googleapis.com"),
            Provider::Kimi => Some("https://api.moonshot.ai/v1"),
            Provider::Zai => Some("https://api.z.ai/api/paas/v4"),
            Provider::Minimax => Some("https://api.minimax.io/v1"),
            Provider::Inception => Some("https://api.inceptionlabs.ai/v1"),
            Provider::OpenAiCompatible => None,
        }
    }

    /// The provider's own project-memory file, read after `AGENTS.md` (engine.md §5.4).
    pub fn memory_file(self) -> &'static str {
        match self {
            Provider::Anthropic => "CLAUDE.md",
            Provider::Gemini => "GEMINI.md",
            _ => ".codex/instructions.md",
        }
    }

    /// The catalog's default model for this provider, if any.
    pub fn default_model(self) -> Option<&'static str> {
        super::catalog::MODELS
            .iter()
            .find(|m| m.provider == self.id() && m.default)
            .map(|m| m.id)
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// Where secrets come from (the server's vault). Names are the conventional ones
/// (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, `GEMINI_API_KEY`, `OPENAI_COMPATIBLE_API_KEY`,
/// …, see [`Provider::key_names`]). Implementations must not fall back to the process
/// environment.
pub trait Credentials: Send + Sync {
    fn get(&self, name: &str) -> Option<String>;
}

/// A fixed map of credentials (tests, embedding).
#[derive(Default, Clone)]
pub struct StaticCredentials(pub HashMap<String, String>);

impl StaticCredentials {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with(mut self, name: &str, value: &str) -> Self {
        self.0.insert(name.to_string(), value.to_string());
        self
    }
}

impl fmt::Debug for StaticCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print values.
        let mut names: Vec<&String> = self.0.keys().collect();
        names.sort();
        f.debug_tuple("StaticCredentials").field(&names).finish()
    }
}

impl Credentials for StaticCredentials {
    fn get(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
}

/// A resolved endpoint for one provider: where to send and which key to send.
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    pub base_url: String,
    pub api_key: String,
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &"[redacted]")
            .finish()
    }
}

impl ProviderConfig {
    /// Resolves a provider's endpoint: `base_url` override, else the `…_BASE_URL`
    /// credential, else the public default; the key from [`Provider::key_names`].
    pub fn resolve(
        provider: Provider,
        base_url: Option<&str>,
        creds: &dyn Credentials,
    ) -> Result<ProviderConfig, LlmError> {
        let api_key = provider
            .key_names()
            .iter()
            .find_map(|n| creds.get(n).filter(|v| !v.trim().is_empty()))
            .ok_or_else(|| LlmError::ProviderNotConfigured {
                provider,
                reason: format!(
                    "no {} credential is stored",
                    provider.key_names().join(" or ")
                ),
            })?;
        let base = base_url
            .map(str::to_string)
            .or_else(|| creds.get(provider.base_url_name()))
            .or_else(|| provider.default_base_url().map(str::to_string))
            .ok_or_else(|| LlmError::ProviderNotConfigured {
                provider,
                reason: format!("no base URL is set ({})", provider.base_url_name()),
            })?;
        Ok(ProviderConfig {
            base_url: base.trim_end_matches('/').to_string(),
            api_key: api_key.trim().to_string(),
        })
    }

    /// True when a key is stored for the provider (the `configured` flag of `/models`).
    pub fn is_configured(provider: Provider, creds: &dyn Credentials) -> bool {
        provider
            .key_names()
            .iter()
            .any(|n| creds.get(n).is_some_and(|v| !v.trim().is_empty()))
    }
}

/// Picks the provider for a model: `explicit` wins; otherwise an exact catalog lookup by
/// id or alias (no prefix guessing, engine.md §13.3).
pub fn infer_provider(model: &str, explicit: Option<Provider>) -> Result<Provider, LlmError> {
    if let Some(p) = explicit {
        return Ok(p);
    }
    super::catalog::lookup(model)
        .and_then(|m| Provider::parse(m.provider))
        .ok_or_else(|| LlmError::UnknownModel {
            model: model.to_string(),
        })
}

/// The id to send on the wire: a catalog alias becomes its id; anything else is sent as is.
pub fn wire_model_id(model: &str) -> String {
    super::catalog::lookup(model)
        .map(|m| m.id.to_string())
        .unwrap_or_else(|| model.to_string())
}

/// The default provider: the first of Anthropic, OpenAI, Gemini with a key, else Anthropic.
pub fn default_provider(creds: &dyn Credentials) -> Provider {
    [Provider::Anthropic, Provider::OpenAi, Provider::Gemini]
        .into_iter()
        .find(|p| ProviderConfig::is_configured(*p, creds))
        .unwrap_or(Provider::Anthropic)
}
