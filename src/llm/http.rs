//! The HTTP transport shared by every provider client: one blocking `ureq` agent, JSON
//! POSTs, provider error bodies turned into classified [`LlmError`]s (keys redacted,
//! `Retry-After` read), and a Server-Sent Events reader over the streaming body.
//! Must not know any provider's JSON shapes beyond the common error envelope.

use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

use serde_json::Value;

use super::error::{classify_status, redact, ErrorKind, LlmError};
use super::provider::Provider;

/// Largest non-streaming body accepted (a model answer is far smaller).
const MAX_BODY: u64 = 64 * 1024 * 1024;
/// Largest error body read.
const MAX_ERROR_BODY: u64 = 256 * 1024;

/// Timeouts for provider calls.
#[derive(Debug, Clone, Copy)]
pub struct HttpOptions {
    pub connect_timeout: Duration,
    /// Longest silence between two reads of a response (streams send pings).
    pub read_timeout: Duration,
    /// Whole-call limit, body included.
    pub call_timeout: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(30),
            read_timeout: Duration::from_secs(300),
            // Long generations stream for a long time; silence is caught by read_timeout.
            call_timeout: Duration::from_secs(2 * 3600),
        }
    }
}

/// A pooled blocking HTTP client.
#[derive(Clone)]
pub struct Http {
    agent: ureq::Agent,
}

impl Default for Http {
    fn default() -> Self {
        Self::new(HttpOptions::default())
    }
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Http")
    }
}

/// An open successful response whose body has not been read yet.
pub struct OpenResponse {
    provider: Provider,
    event_stream: bool,
    secret: String,
    body: BufReader<ureq::BodyReader<'static>>,
}

impl Http {
    pub fn new(opts: HttpOptions) -> Self {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(opts.connect_timeout))
            .timeout_per_read(Some(opts.read_timeout))
            .timeout_global(Some(opts.call_timeout))
            .user_agent(concat!("svc/", env!("CARGO_PKG_VERSION")))
            .build();
        Self {
            agent: ureq::Agent::new_with_config(config),
        }
    }

    /// POSTs `body` as JSON. A non-2xx status becomes a classified [`LlmError::Api`];
    /// `secret` is redacted from every error text.
    pub fn post_json(
        &self,
        provider: Provider,
        url: &str,
        headers: &[(&str, &str)],
        body: &Value,
        secret: &str,
    ) -> Result<OpenResponse, LlmError> {
        let payload = serde_json::to_vec(body).map_err(|e| LlmError::InvalidResponse {
            provider,
            message: format!("cannot encode the request: {e}"),
        })?;
        let mut req = self
            .agent
            .post(url)
            .header("content-type", "application/json");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send(&payload[..]).map_err(|e| LlmError::Network {
            provider,
            message: redact(&describe_transport(&e), secret),
        })?;
        let status = resp.status().as_u16();
        let retry_after = retry_after(resp.headers());
        let event_stream = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"));
        let (_, body) = resp.into_parts();
        if !(200..300).contains(&status) {
            let text = body
                .into_with_config()
                .limit(MAX_ERROR_BODY)
                .lossy_utf8(true)
                .read_to_string()
                .unwrap_or_default();
            let message = redact(&error_message(&text), secret);
            let kind = classify_status(status, &message);
            return Err(LlmError::Api {
                provider,
                kind,
                status: Some(status),
                message,
                retry_after,
            });
        }
        Ok(OpenResponse {
            provider,
            event_stream,
            secret: secret.to_string(),
            body: BufReader::new(body.into_with_config().limit(u64::MAX).reader()),
        })
    }
}

impl OpenResponse {
    /// True when the server answered with `text/event-stream`. A gateway that ignores
    /// `stream: true` and answers with plain JSON is read as a non-streaming reply.
    pub fn is_event_stream(&self) -> bool {
        self.event_stream
    }

    /// Reads the whole body as JSON.
    pub fn json(self) -> Result<Value, LlmError> {
        let provider = self.provider;
        let mut buf = Vec::new();
        self.body
            .take(MAX_BODY)
            .read_to_end(&mut buf)
            .map_err(|e| LlmError::Network {
                provider,
                message: redact(&e.to_string(), &self.secret),
            })?;
        serde_json::from_slice(&buf).map_err(|e| LlmError::InvalidResponse {
            provider,
            message: format!("the body is not JSON ({e}): {}", snippet(&buf)),
        })
    }

    /// Turns the body into a Server-Sent Events reader.
    pub fn sse(self) -> SseReader<BufReader<ureq::BodyReader<'static>>> {
        SseReader {
            provider: self.provider,
            secret: self.secret,
            inner: self.body,
            line: String::new(),
        }
    }
}

/// One SSE event: its `event:` name (if any) and its `data:` lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

/// Reads SSE events one at a time from a buffered body.
pub struct SseReader<R: BufRead> {
    provider: Provider,
    secret: String,
    inner: R,
    line: String,
}

impl<R: BufRead> SseReader<R> {
    pub fn new(provider: Provider, inner: R) -> Self {
        Self {
            provider,
            secret: String::new(),
            inner,
            line: String::new(),
        }
    }

    /// The next event, `Ok(None)` at the end of the body.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, LlmError> {
        let mut event: Option<String> = None;
        let mut data: Option<String> = None;
        loop {
            self.line.clear();
            let n = self
                .inner
                .read_line(&mut self.line)
                .map_err(|e| LlmError::Stream {
                    provider: self.provider,
                    message: redact(&e.to_string(), &self.secret),
                })?;
            if n == 0 {
                // End of body: flush a pending event without its blank line.
                return Ok(data.map(|data| SseEvent { event, data }));
            }
            let line = self.line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if let Some(d) = data.take() {
                    return Ok(Some(SseEvent {
                        event: event.take(),
                        data: d,
                    }));
                }
                event = None;
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line, ""),
            };
            match field {
                "event" => event = Some(value.to_string()),
                "data" => match &mut data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => data = Some(value.to_string()),
                },
                _ => {}
            }
        }
    }
}

/// Parses an SSE data payload as JSON, naming the provider on failure.
pub fn sse_json(provider: Provider, data: &str) -> Result<Value, LlmError> {
    serde_json::from_str(data).map_err(|e| LlmError::Stream {
        provider,
        message: format!("an event is not JSON ({e}): {}", snippet(data.as_bytes())),
    })
}

/// Makes an [`LlmError`] from an error object that arrived inside a 200 stream.
pub fn stream_error(provider: Provider, v: &Value) -> LlmError {
    let err = v.get("error").unwrap_or(v);
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("unknown error")
        .to_string();
    let typ = err
        .get("type")
        .or_else(|| err.get("code"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = match typ {
        "overloaded_error" | "api_error" | "server_error" | "internal_error" => ErrorKind::Server,
        "rate_limit_error" | "rate_limit_exceeded" => ErrorKind::RateLimit,
        "insufficient_quota" => ErrorKind::QuotaExceeded,
        "authentication_error" => ErrorKind::Authentication,
        "permission_error" => ErrorKind::AccessDenied,
        "invalid_request_error" => ErrorKind::InvalidRequest,
        "context_length_exceeded" => ErrorKind::ContextLength,
        _ => ErrorKind::Stream,
    };
    LlmError::Api {
        provider,
        kind,
        status: None,
        message: format!("{typ}{}{message}", if typ.is_empty() { "" } else { ": " }),
        retry_after: None,
    }
}

/// The human message inside a provider's error body (all four providers wrap it in
/// `{"error": {"message": …}}`; Gemini adds `status`), else the raw body.
fn error_message(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        let err = v
            .get("error")
            .or_else(|| v.get(0).and_then(|e| e.get("error")))
            .unwrap_or(&v);
        if let Some(m) = err.get("message").and_then(Value::as_str) {
            let typ = err
                .get("type")
                .or_else(|| err.get("status"))
                .or_else(|| err.get("code"))
                .and_then(Value::as_str);
            return match typ {
                Some(t) if !t.is_empty() => format!("{t}: {m}"),
                _ => m.to_string(),
            };
        }
        if let Some(m) = err.as_str() {
            return m.to_string();
        }
    }
    let t = body.trim();
    if t.is_empty() {
        "(empty error body)".to_string()
    } else {
        snippet(t.as_bytes())
    }
}

/// `retry-after-ms` (OpenAI) or `retry-after` in seconds. HTTP-date values are ignored.
fn retry_after(h: &ureq::http::HeaderMap) -> Option<Duration> {
    if let Some(ms) = h
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    h.get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map(Duration::from_secs_f64)
}

fn describe_transport(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(t) => format!("timed out ({t})"),
        ureq::Error::HostNotFound => "host not found".to_string(),
        ureq::Error::Io(io) => format!("I/O error: {io}"),
        other => other.to_string(),
    }
}

fn snippet(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let s = s.trim();
    if s.chars().count() > 500 {
        let cut: String = s.chars().take(500).collect();
        format!("{cut}…")
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_reader_joins_data_and_skips_comments() {
        let text =
            ": ping\n\nevent: a\ndata: {\"x\":1}\n\ndata: line1\r\ndata: line2\r\n\r\ndata: [DONE]";
        let mut r = SseReader::new(Provider::OpenAi, text.as_bytes());
        let e1 = r.next_event().ok().flatten();
        assert_eq!(
            e1,
            Some(SseEvent {
                event: Some("a".into()),
                data: "{\"x\":1}".into()
            })
        );
        let e2 = r.next_event().ok().flatten().map(|e| e.data);
        assert_eq!(e2.as_deref(), Some("line1\nline2"));
        let e3 = r.next_event().ok().flatten().map(|e| e.data);
        assert_eq!(e3.as_deref(), Some("[DONE]"));
        assert!(matches!(r.next_event(), Ok(None)));
    }

    #[test]
    fn error_messages_are_extracted() {
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#
            ),
            "authentication_error: invalid x-api-key"
        );
        assert_eq!(
            error_message(r#"{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}"#),
            "INVALID_ARGUMENT: bad"
        );
        assert_eq!(error_message("oops"), "oops");
    }
}
