//! The chat Web API calls svc makes, in Slack's wire format: `POST <api_url>/<method>` with
//! `Authorization: Bearer <bot token>` and a JSON body; every answer is HTTP 200 with
//! `{"ok": true, ...}` or `{"ok": false, "error": "<code>"}`, and 429 with `Retry-After`
//! when rate limited. Used methods: `chat.postMessage`, `chat.update`, `chat.postEphemeral`.
//!
//! Every call has a 5 s connect and 10 s overall timeout and is made once: a failure becomes
//! a [`ChatError`] with the service's own words (never a panic or a hung thread), and
//! [`ChatError::retry_after`] says whether and when the caller may try again (the chat
//! worker schedules it, so one slow call never holds the others back).
//!
//! Owns: the request and answer shapes. Must not touch: runs, the store, the bot token
//! beyond the `Authorization` header (it never reaches an error or a log line).

use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Why a chat call did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChatError {
    /// The service answered `{"ok": false, "error": code}` (e.g. `channel_not_found`,
    /// `invalid_auth`, `not_in_channel`).
    #[error("the chat service refused {method}: {code}")]
    Refused { method: String, code: String },
    /// An HTTP status other than 200 (`retry_after`: a 429's `Retry-After`).
    #[error("the chat service answered {method} with HTTP {status}: {message}")]
    Status {
        method: String,
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// Not reached, timed out, or an unreadable answer.
    #[error("the chat service could not be reached for {method}: {message}")]
    Unreachable { method: String, message: String },
}

impl ChatError {
    /// Whether the failure is the service's or the network's and may pass (5xx, 429, a
    /// timeout, a refused connection), and the wait the service asked for, if any. A
    /// refusal (`ok: false`) or another 4xx is not retried: it would be refused again.
    pub fn retry_after(&self) -> Option<Option<Duration>> {
        match self {
            ChatError::Refused { code, .. } if code == "ratelimited" => Some(None),
            ChatError::Refused { .. } => None,
            ChatError::Status {
                status,
                retry_after,
                ..
            } if *status == 429 || *status >= 500 => Some(*retry_after),
            ChatError::Status { .. } => None,
            ChatError::Unreachable { .. } => Some(None),
        }
    }
}

/// A blocking client for the chat Web API.
#[derive(Clone)]
pub struct Http {
    agent: ureq::Agent,
    calls: Arc<AtomicU64>,
}

impl Default for Http {
    fn default() -> Self {
        Http::with_timeouts(Duration::from_secs(5), Duration::from_secs(10))
    }
}

impl Http {
    /// A client giving up on connecting after `connect` and on a whole call after `total`.
    pub fn with_timeouts(connect: Duration, total: Duration) -> Http {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(connect))
            .timeout_global(Some(total))
            .user_agent(concat!("svc/", env!("CARGO_PKG_VERSION")))
            .build();
        Http {
            agent: ureq::Agent::new_with_config(config),
            calls: Arc::default(),
        }
    }
}

/// Answers longer than this are cut (a message answer is a few KiB).
const MAX_ANSWER_BYTES: u64 = 1024 * 1024;

impl Http {
    /// Requests sent so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// `POST <api_url>/<method>` with `body`; the answer's JSON when it says `ok`.
    pub fn call(
        &self,
        api_url: &str,
        method: &str,
        token: &str,
        body: &Value,
    ) -> Result<Value, ChatError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let url = format!("{}/{method}", api_url.trim_end_matches('/'));
        let unreachable = |message: String| ChatError::Unreachable {
            method: method.to_string(),
            message,
        };
        let req = ureq::http::Request::builder()
            .method("POST")
            .uri(&url)
            .header("Authorization", format!("Bearer {token}"))
            .header("Content-Type", "application/json; charset=utf-8")
            .body(body.to_string())
            .map_err(|e| unreachable(e.to_string()))?;
        let resp = self
            .agent
            .run(req)
            .map_err(|e| unreachable(e.to_string()))?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let (_, body) = resp.into_parts();
        let text = body
            .into_with_config()
            .limit(MAX_ANSWER_BYTES)
            .lossy_utf8(true)
            .read_to_string()
            .map_err(|e| unreachable(e.to_string()))?;
        if status != 200 {
            return Err(ChatError::Status {
                method: method.to_string(),
                status,
                message: snippet(&text),
                retry_after,
            });
        }
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| unreachable(format!("the answer is not JSON: {e}")))?;
        if v.get("ok").and_then(Value::as_bool) == Some(true) {
            return Ok(v);
        }
        let code = v
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("unknown_error")
            .to_string();
        Err(ChatError::Refused {
            method: method.to_string(),
            code,
        })
    }
}

/// The first line of an error body, cut to 200 characters.
fn snippet(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    let cut: String = line.chars().take(200).collect();
    if cut.is_empty() {
        "(empty answer)".into()
    } else {
        cut
    }
}

/// Where a posted message is: its channel id and timestamp (`ts`), which `chat.update` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posted {
    pub channel: String,
    pub ts: String,
}

impl Posted {
    /// From a `chat.postMessage` answer (`channel`, `ts`).
    pub fn of(answer: &Value) -> Option<Posted> {
        Some(Posted {
            channel: answer.get("channel")?.as_str()?.to_string(),
            ts: answer.get("ts")?.as_str()?.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outages_are_retried_and_refusals_are_not() {
        let status = |status: u16, retry_after: Option<Duration>| ChatError::Status {
            method: "chat.postMessage".into(),
            status,
            message: String::new(),
            retry_after,
        };
        let refused = |code: &str| ChatError::Refused {
            method: "chat.postMessage".into(),
            code: code.into(),
        };
        assert_eq!(status(503, None).retry_after(), Some(None));
        let asked = Some(Duration::from_secs(7));
        assert_eq!(status(429, asked).retry_after(), Some(asked));
        assert_eq!(status(404, None).retry_after(), None);
        assert_eq!(refused("channel_not_found").retry_after(), None);
        assert_eq!(refused("invalid_auth").retry_after(), None);
        assert_eq!(refused("ratelimited").retry_after(), Some(None));
    }

    #[test]
    fn a_service_that_never_answers_times_out_and_one_that_is_gone_is_refused() {
        // Accepts the connection and never answers.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let held = std::thread::spawn(move || silent.accept().map(|(s, _)| s));
        let http = Http::with_timeouts(Duration::from_secs(1), Duration::from_millis(300));
        let token = "xoxb-never-shown";
        let e = http
            .call(
                &format!("http://127.0.0.1:{port}/api"),
                "chat.postMessage",
                token,
                &json!({}),
            )
            .unwrap_err();
        assert!(matches!(e, ChatError::Unreachable { .. }), "{e:?}");
        assert_eq!(e.retry_after(), Some(None));
        assert!(!e.to_string().contains(token), "{e}");
        drop(held.join());
        // Nothing listens there any more: the connection is refused at once.
        let e = http
            .call(
                &format!("http://127.0.0.1:{port}/api"),
                "chat.update",
                token,
                &json!({}),
            )
            .unwrap_err();
        assert!(matches!(e, ChatError::Unreachable { .. }), "{e:?}");
        assert_eq!(e.retry_after(), Some(None));
        assert_eq!(http.calls(), 2);
    }
}
