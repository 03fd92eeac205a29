//! LLM call errors and their classification (engine.md §13.4): which are retryable, which
//! failure class the engine should record, and redaction of key values from any text.
//! Must not perform I/O.

use std::time::Duration;

use super::provider::Provider;

/// The class of a provider error (engine.md §13.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Authentication,
    AccessDenied,
    NotFound,
    InvalidRequest,
    RequestTimeout,
    ContextLength,
    QuotaExceeded,
    RateLimit,
    Server,
    Network,
    Stream,
    ContentFilter,
    Configuration,
    InvalidResponse,
    Cancelled,
}

impl ErrorKind {
    /// Whether the call may be tried again as is.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            ErrorKind::RateLimit | ErrorKind::Server | ErrorKind::Network | ErrorKind::Stream
        )
    }

    /// Whether another provider/model might succeed (engine failover).
    pub fn failover(self) -> bool {
        self.retryable() || matches!(self, ErrorKind::RequestTimeout | ErrorKind::QuotaExceeded)
    }

    /// The engine's failure class: `deterministic`, `transient_infra`, `budget_exhausted`
    /// or `canceled`.
    pub fn failure_class(self) -> &'static str {
        match self {
            ErrorKind::RequestTimeout
            | ErrorKind::RateLimit
            | ErrorKind::Server
            | ErrorKind::Network
            | ErrorKind::Stream => "transient_infra",
            ErrorKind::ContextLength | ErrorKind::QuotaExceeded => "budget_exhausted",
            ErrorKind::Cancelled => "canceled",
            _ => "deterministic",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Authentication => "authentication",
            ErrorKind::AccessDenied => "access_denied",
            ErrorKind::NotFound => "not_found",
            ErrorKind::InvalidRequest => "invalid_request",
            ErrorKind::RequestTimeout => "request_timeout",
            ErrorKind::ContextLength => "context_length",
            ErrorKind::QuotaExceeded => "quota_exceeded",
            ErrorKind::RateLimit => "rate_limit",
            ErrorKind::Server => "server",
            ErrorKind::Network => "network",
            ErrorKind::Stream => "stream",
            ErrorKind::ContentFilter => "content_filter",
            ErrorKind::Configuration => "configuration",
            ErrorKind::InvalidResponse => "invalid_response",
            ErrorKind::Cancelled => "cancelled",
        }
    }
}

/// Classifies an HTTP error status plus the provider's message.
pub fn classify_status(status: u16, message: &str) -> ErrorKind {
    let m = message.to_ascii_lowercase();
    match status {
        401 => ErrorKind::Authentication,
        403 => ErrorKind::AccessDenied,
        404 => ErrorKind::NotFound,
        408 => ErrorKind::RequestTimeout,
        413 => ErrorKind::ContextLength,
        429 if m.contains("insufficient_quota")
            || m.contains("quota exceeded")
            || m.contains("exceeded your current quota")
            || m.contains("billing") =>
        {
            ErrorKind::QuotaExceeded
        }
        429 => ErrorKind::RateLimit,
        // Anthropic's "overloaded_error".
        529 => ErrorKind::Server,
        500..=599 => ErrorKind::Server,
        400 | 422 => classify_message(&m).unwrap_or(ErrorKind::InvalidRequest),
        _ => classify_message(&m).unwrap_or(ErrorKind::InvalidRequest),
    }
}

fn classify_message(m: &str) -> Option<ErrorKind> {
    if m.contains("context length")
        || m.contains("context_length")
        || m.contains("prompt is too long")
        || m.contains("maximum context")
    {
        Some(ErrorKind::ContextLength)
    } else if m.contains("content filter") || m.contains("content_filter") || m.contains("safety") {
        Some(ErrorKind::ContentFilter)
    } else if m.contains("unauthorized") || m.contains("invalid api key") {
        Some(ErrorKind::Authentication)
    } else if m.contains("not found") {
        Some(ErrorKind::NotFound)
    } else {
        None
    }
}

/// An error from an LLM call. Every message has key values redacted.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LlmError {
    #[error("LLM provider {provider} is not configured: {reason}")]
    ProviderNotConfigured { provider: Provider, reason: String },

    #[error("unknown model {model:?}: it is not in the catalog, so its provider must be given")]
    UnknownModel { model: String },

    #[error("{provider} API error ({kind}{status}): {message}", kind = kind.as_str(), status = status.map(|s| format!(", HTTP {s}")).unwrap_or_default())]
    Api {
        provider: Provider,
        kind: ErrorKind,
        status: Option<u16>,
        message: String,
        /// The provider's `Retry-After`, if it sent one.
        retry_after: Option<Duration>,
    },

    #[error("network error talking to {provider}: {message}")]
    Network { provider: Provider, message: String },

    #[error("the response stream from {provider} broke: {message}")]
    Stream { provider: Provider, message: String },

    #[error("cannot understand {provider}'s response: {message}")]
    InvalidResponse { provider: Provider, message: String },

    #[error("the LLM call was cancelled")]
    Cancelled,
}

impl LlmError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            LlmError::ProviderNotConfigured { .. } | LlmError::UnknownModel { .. } => {
                ErrorKind::Configuration
            }
            LlmError::Api { kind, .. } => *kind,
            LlmError::Network { .. } => ErrorKind::Network,
            LlmError::Stream { .. } => ErrorKind::Stream,
            LlmError::InvalidResponse { .. } => ErrorKind::InvalidResponse,
            LlmError::Cancelled => ErrorKind::Cancelled,
        }
    }

    pub fn retryable(&self) -> bool {
        self.kind().retryable()
    }

    pub fn failure_class(&self) -> &'static str {
        self.kind().failure_class()
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            LlmError::Api { status, .. } => *status,
            _ => None,
        }
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    pub fn provider(&self) -> Option<Provider> {
        match self {
            LlmError::ProviderNotConfigured { provider, .. }
            | LlmError::Api { provider, .. }
            | LlmError::Network { provider, .. }
            | LlmError::Stream { provider, .. }
            | LlmError::InvalidResponse { provider, .. } => Some(*provider),
            _ => None,
        }
    }
}

/// Replaces every occurrence of `secret` (and of any 8+ character chunk of it that looks
/// like a key being echoed, e.g. `sk-abc…xyz`) in `text`.
pub fn redact(text: &str, secret: &str) -> String {
    if secret.len() < 4 {
        return text.to_string();
    }
    let mut out = text.replace(secret, "[redacted]");
    // Providers echo keys partially ("Incorrect API key provided: sk-proj-ab***xyz").
    // Redact any long prefix or suffix of the key that still appears.
    if secret.len() >= 12 {
        let prefix = &secret[..secret.len().min(12)];
        let suffix_start = secret.len().saturating_sub(8);
        if secret.is_char_boundary(suffix_start) {
            let suffix = &secret[suffix_start..];
            out = out.replace(suffix, "[redacted]");
        }
        if secret.is_char_boundary(prefix.len()) {
            out = out.replace(prefix, "[redacted]");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_classes() {
        assert_eq!(classify_status(401, ""), ErrorKind::Authentication);
        assert_eq!(classify_status(429, "slow down"), ErrorKind::RateLimit);
        assert_eq!(
            classify_status(429, "You exceeded your current quota"),
            ErrorKind::QuotaExceeded
        );
        assert_eq!(classify_status(503, ""), ErrorKind::Server);
        assert_eq!(classify_status(529, "overloaded"), ErrorKind::Server);
        assert_eq!(
            classify_status(400, "prompt is too long: 300000 tokens"),
            ErrorKind::ContextLength
        );
        assert_eq!(classify_status(418, "teapot"), ErrorKind::InvalidRequest);
        assert!(ErrorKind::Server.retryable());
        assert!(!ErrorKind::Authentication.retryable());
        assert_eq!(ErrorKind::RateLimit.failure_class(), "transient_infra");
    }

    #[test]
    fn redaction() {
        let key = "sk-proj-abcdefghijklmnopqrstuvwxyz";
        let t = format!("bad key {key} and sk-proj-abcd****stuvwxyz");
        let r = redact(&t, key);
        assert!(!r.contains(key));
        assert!(!r.contains("stuvwxyz"));
    }

    #[test]
    fn not_configured_names_provider() {
        let e = LlmError::ProviderNotConfigured {
            provider: Provider::Gemini,
            reason: "no GEMINI_API_KEY credential is stored".into(),
        };
        assert!(e.to_string().contains("gemini"));
        assert_eq!(e.kind(), ErrorKind::Configuration);
    }
}
