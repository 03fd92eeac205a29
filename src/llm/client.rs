//! The provider router: resolves a request's provider and endpoint from the catalog, the
//! configured base URLs and the [`Credentials`], dispatches to the wire module, and retries
//! retryable failures with backoff (engine.md §13.4). Also defines [`ChatModel`], the seam
//! the agent loop, prompt calls and tests use. Must not know about workflows or tools.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::error::LlmError;
use super::http::{Http, HttpOptions};
use super::provider::{infer_provider, wire_model_id, Credentials, Provider, ProviderConfig, Wire};
use super::types::{Request, Response, StreamEvent};
use super::wire::{drive, Call};
use super::{anthropic, chat, gemini, openai};
use crate::base::cancel::CancelToken;

/// Something that answers model requests: the real [`LlmClient`], or a test double.
pub trait ChatModel: Send + Sync {
    /// Runs one model call (with the implementation's retries), reporting text deltas,
    /// complete tool calls and retries to `on_event` as they happen.
    fn chat(
        &self,
        req: &Request,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<Response, LlmError>;
}

/// Retry schedule for retryable errors: `max_retries` more attempts, delays
/// `base × factor^n` capped at `max_delay`, then jittered by ×[0.5, 1.5) (capped again).
/// A `Retry-After` ≤ `max_delay` is used as the delay exactly; a larger one stops retrying.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub base_delay: Duration,
    pub factor: f64,
    pub max_delay: Duration,
    pub jitter: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 2,
            base_delay: Duration::from_secs(1),
            factor: 2.0,
            max_delay: Duration::from_secs(60),
            jitter: true,
        }
    }
}

impl RetryPolicy {
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// The delay before retry number `attempt` (1-based), or `None` when the error says
    /// not to retry (a `Retry-After` beyond the cap).
    pub fn delay(&self, attempt: u32, err: &LlmError) -> Option<Duration> {
        if let Some(ra) = err.retry_after() {
            return (ra <= self.max_delay).then_some(ra);
        }
        let exp = self.factor.powi(attempt.saturating_sub(1) as i32);
        let mut d = self.base_delay.as_secs_f64() * exp;
        d = d.min(self.max_delay.as_secs_f64());
        if self.jitter {
            d *= 0.5 + rand_unit();
            d = d.min(self.max_delay.as_secs_f64());
        }
        Some(Duration::from_secs_f64(d.max(0.0)))
    }
}

/// A uniform number in [0, 1) from a process-wide xorshift (no `rand` dependency).
fn rand_unit() -> f64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut x = STATE.load(Ordering::Relaxed);
    if x == 0 {
        x = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9E37_79B9_7F4A_7C15)
            | 1;
    }
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    STATE.store(x, Ordering::Relaxed);
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// The client for every provider.
#[derive(Clone)]
pub struct LlmClient {
    creds: Arc<dyn Credentials>,
    base_urls: HashMap<Provider, String>,
    http: Http,
    retry: RetryPolicy,
    streaming: bool,
}

impl std::fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmClient")
            .field("base_urls", &self.base_urls)
            .field("retry", &self.retry)
            .field("streaming", &self.streaming)
            .finish_non_exhaustive()
    }
}

impl LlmClient {
    pub fn new(creds: Arc<dyn Credentials>) -> Self {
        Self {
            creds,
            base_urls: HashMap::new(),
            http: Http::default(),
            retry: RetryPolicy::default(),
            streaming: true,
        }
    }

    /// Points a provider at another endpoint (a gateway, or a test server).
    pub fn with_base_url(mut self, provider: Provider, url: &str) -> Self {
        self.base_urls.insert(provider, url.to_string());
        self
    }

    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    pub fn with_http(mut self, opts: HttpOptions) -> Self {
        self.http = Http::new(opts);
        self
    }

    /// Whether [`ChatModel::chat`] streams (default) or makes plain calls.
    pub fn with_streaming(mut self, streaming: bool) -> Self {
        self.streaming = streaming;
        self
    }

    pub fn credentials(&self) -> &Arc<dyn Credentials> {
        &self.creds
    }

    /// True when the provider has a key.
    pub fn is_configured(&self, provider: Provider) -> bool {
        ProviderConfig::is_configured(provider, self.creds.as_ref())
    }

    /// The endpoint and key for a provider, or `ProviderNotConfigured`.
    pub fn config(&self, provider: Provider) -> Result<ProviderConfig, LlmError> {
        ProviderConfig::resolve(
            provider,
            self.base_urls.get(&provider).map(String::as_str),
            self.creds.as_ref(),
        )
    }

    /// One call, no retries (the "low-level" call).
    pub fn call_once(
        &self,
        req: &Request,
        stream: bool,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<Response, LlmError> {
        let provider = infer_provider(&req.model, req.provider)?;
        let config = self.config(provider)?;
        let model = wire_model_id(&req.model);
        let c = Call {
            http: &self.http,
            provider,
            config: &config,
            req,
            model: &model,
            stream,
            cancel,
        };
        match provider.wire() {
            Wire::AnthropicMessages => drive::<anthropic::Messages>(&c, on_event),
            Wire::OpenAiResponses => drive::<openai::Responses>(&c, on_event),
            Wire::GeminiGenerateContent => drive::<gemini::GenerateContent>(&c, on_event),
            Wire::ChatCompletions => drive::<chat::ChatCompletions>(&c, on_event),
        }
    }

    /// A call with retries. Retryable errors are retried per the [`RetryPolicy`] unless the
    /// stream had already delivered text or tool calls; each retry is reported as
    /// [`StreamEvent::Retry`] first. Cancellation interrupts the backoff wait.
    pub fn call(
        &self,
        req: &Request,
        stream: bool,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<Response, LlmError> {
        let mut attempt = 0u32;
        loop {
            if cancel.is_cancelled() {
                return Err(LlmError::Cancelled);
            }
            let mut produced = false;
            let result = self.call_once(req, stream, cancel, &mut |ev| {
                if matches!(ev, StreamEvent::TextDelta(_) | StreamEvent::ToolCall(_)) {
                    produced = true;
                }
                on_event(ev)
            });
            let err = match result {
                Ok(r) => return Ok(r),
                Err(e) => e,
            };
            if !err.retryable() || produced || attempt >= self.retry.max_retries {
                return Err(err);
            }
            attempt += 1;
            let Some(delay) = self.retry.delay(attempt, &err) else {
                return Err(err);
            };
            on_event(StreamEvent::Retry {
                attempt,
                delay_ms: delay.as_millis() as u64,
                error: err.to_string(),
            });
            if cancel.sleep(delay) {
                return Err(LlmError::Cancelled);
            }
        }
    }

    /// A non-streaming call with retries.
    pub fn complete(&self, req: &Request, cancel: &CancelToken) -> Result<Response, LlmError> {
        self.call(req, false, cancel, &mut |_| {})
    }

    /// A streaming call with retries.
    pub fn stream(
        &self,
        req: &Request,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<Response, LlmError> {
        self.call(req, true, cancel, on_event)
    }
}

impl ChatModel for LlmClient {
    fn chat(
        &self,
        req: &Request,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<Response, LlmError> {
        self.call(req, self.streaming, cancel, on_event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::error::ErrorKind;
    use crate::llm::provider::StaticCredentials;

    fn api(status: u16, retry_after: Option<Duration>) -> LlmError {
        LlmError::Api {
            provider: Provider::OpenAi,
            kind: ErrorKind::RateLimit,
            status: Some(status),
            message: String::new(),
            retry_after,
        }
    }

    #[test]
    fn backoff_schedule() {
        let p = RetryPolicy {
            jitter: false,
            ..RetryPolicy::default()
        };
        assert_eq!(p.delay(1, &api(500, None)), Some(Duration::from_secs(1)));
        assert_eq!(p.delay(2, &api(500, None)), Some(Duration::from_secs(2)));
        assert_eq!(p.delay(10, &api(500, None)), Some(Duration::from_secs(60)));
        assert_eq!(
            p.delay(1, &api(429, Some(Duration::from_secs(7)))),
            Some(Duration::from_secs(7))
        );
        assert_eq!(p.delay(1, &api(429, Some(Duration::from_secs(61)))), None);
        let j = RetryPolicy::default();
        for _ in 0..50 {
            let d = j.delay(1, &api(500, None)).unwrap_or_default();
            assert!(d >= Duration::from_millis(500) && d < Duration::from_millis(1500));
        }
    }

    #[test]
    fn missing_key_is_provider_not_configured() {
        let c = LlmClient::new(Arc::new(StaticCredentials::new()));
        let req = Request {
            model: "gemini-pro".into(),
            ..Default::default()
        };
        let e = c.complete(&req, &CancelToken::new()).err();
        let msg = e.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            msg.contains("gemini") && msg.contains("GEMINI_API_KEY"),
            "{msg}"
        );
    }
}
