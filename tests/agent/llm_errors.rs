//! Error classification and retries against the scripted server: 429 with Retry-After
//! (retried after exactly that delay), 500 retried with backoff, 401 never retried, quota
//! and oversized Retry-After not retried, broken streams, keys redacted, missing
//! credentials, cancellation during backoff, and the agent's `agent.llm.retry` event; and
//! for every provider, plain and streamed: 429 with `retry-after-ms`, 500, and 401.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::llm::*;
use serde_json::json;
use svc::internal::agent::{AgentConfig, Session};
use svc::internal::base::cancel::CancelToken;
use svc::internal::llm::{
    ErrorKind, LlmClient, LlmError, Message, Provider, Request, StaticCredentials, StreamEvent,
    Usage,
};
use svc::internal::sandbox::Sandbox;

fn req(p: Provider) -> Request {
    Request {
        model: model_for(p),
        provider: Some(p),
        messages: vec![Message::user("hi")],
        ..Default::default()
    }
}

fn ok(p: Provider) -> Reply {
    reply(
        p,
        &text("fine"),
        Usage {
            input: 5,
            output: 2,
            ..Default::default()
        },
        false,
    )
}

#[test]
fn rate_limit_retry_after_is_honoured() {
    let p = Provider::OpenAi;
    let server = ScriptedServer::start(vec![
        Reply::error(429, json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}))
            .header("retry-after", "1"),
        ok(p),
    ]);
    let mut retries = Vec::new();
    let r = client(p, &server)
        .call(&req(p), false, &CancelToken::new(), &mut |e| {
            if let StreamEvent::Retry {
                attempt,
                delay_ms,
                error,
            } = e
            {
                retries.push((attempt, delay_ms, error));
            }
        })
        .expect("retried");
    assert_eq!(r.text, "fine");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let gap = reqs[1].at - reqs[0].at;
    assert!(
        gap >= Duration::from_millis(990) && gap < Duration::from_millis(1800),
        "{gap:?}"
    );
    assert_eq!(retries.len(), 1);
    assert_eq!(retries[0].0, 1);
    assert_eq!(retries[0].1, 1000);
    assert!(retries[0].2.contains("rate_limit"), "{}", retries[0].2);
}

#[test]
fn retry_after_beyond_the_cap_is_not_retried() {
    let p = Provider::Anthropic;
    let server = ScriptedServer::start(vec![
        Reply::error(
            429,
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
        )
        .header("retry-after", "120"),
        ok(p),
    ]);
    let e = client(p, &server)
        .complete(&req(p), &CancelToken::new())
        .expect_err("error");
    assert_eq!(e.kind(), ErrorKind::RateLimit);
    assert_eq!(e.retry_after(), Some(Duration::from_secs(120)));
    assert_eq!(server.count(), 1);
}

#[test]
fn server_errors_are_retried_twice_with_backoff() {
    let p = Provider::Gemini;
    let err = || {
        Reply::error(
            500,
            json!({"error": {"code": 500, "message": "Internal error", "status": "INTERNAL"}}),
        )
    };
    // Two failures then success: 3 requests.
    let server = ScriptedServer::start(vec![err(), err(), ok(p)]);
    let t = Instant::now();
    let r = client(p, &server)
        .complete(&req(p), &CancelToken::new())
        .expect("third try");
    assert_eq!(r.text, "fine");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    // Backoff 20 ms then 40 ms, jittered ×[0.5, 1.5).
    assert!(reqs[1].at - reqs[0].at >= Duration::from_millis(10));
    assert!(reqs[2].at - reqs[1].at >= Duration::from_millis(20));
    assert!(t.elapsed() < Duration::from_secs(2));
    // Three failures: the error after 2 retries.
    let server = ScriptedServer::start(vec![err(), err(), err(), ok(p)]);
    let e = client(p, &server)
        .complete(&req(p), &CancelToken::new())
        .expect_err("error");
    assert_eq!(e.kind(), ErrorKind::Server);
    assert_eq!(e.status(), Some(500));
    assert!(e.retryable());
    assert_eq!(e.failure_class(), "transient_infra");
    assert!(e.to_string().contains("INTERNAL: Internal error"), "{e}");
    assert_eq!(server.count(), 3);
}

#[test]
fn unauthorized_is_not_retried_and_the_key_is_redacted() {
    for p in [
        Provider::Anthropic,
        Provider::OpenAi,
        Provider::Gemini,
        Provider::Kimi,
    ] {
        let key = test_key(p);
        let server = ScriptedServer::start(vec![
            Reply::error(
                401,
                json!({"error": {"message": format!("Incorrect API key provided: {key}"), "type": "invalid_request_error"}}),
            ),
            ok(p),
        ]);
        let e = client(p, &server)
            .complete(&req(p), &CancelToken::new())
            .expect_err("error");
        assert_eq!(e.kind(), ErrorKind::Authentication, "{p}");
        assert!(!e.retryable());
        assert_eq!(e.failure_class(), "deterministic");
        assert_eq!(server.count(), 1, "{p}: 401 must not be retried");
        let msg = e.to_string();
        assert!(
            !msg.contains(&key) && !msg.contains("0123456789abcdef"),
            "{msg}"
        );
        assert!(msg.contains(p.id()), "{msg}");
    }
}

#[test]
fn bad_request_and_quota_are_not_retried() {
    let p = Provider::OpenAi;
    let server = ScriptedServer::start(vec![
        Reply::error(
            400,
            json!({"error": {"message": "Invalid value for 'input'", "type": "invalid_request_error"}}),
        ),
        ok(p),
    ]);
    let e = client(p, &server)
        .complete(&req(p), &CancelToken::new())
        .expect_err("error");
    assert_eq!(e.kind(), ErrorKind::InvalidRequest);
    assert_eq!(server.count(), 1);
    let server = ScriptedServer::start(vec![
        Reply::error(
            429,
            json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota"}}),
        ),
        ok(p),
    ]);
    let e = client(p, &server)
        .complete(&req(p), &CancelToken::new())
        .expect_err("error");
    assert_eq!(e.kind(), ErrorKind::QuotaExceeded);
    assert_eq!(e.failure_class(), "budget_exhausted");
    assert_eq!(server.count(), 1);
}

#[test]
fn a_stream_that_produced_data_is_not_retried() {
    let p = Provider::Anthropic;
    let full = reply(p, &text("partial answer here"), Usage::default(), true);
    // Cut the stream before message_stop.
    let cut = full.body.find("event: message_delta").expect("delta");
    let mut broken = full.clone();
    broken.body.truncate(cut);
    let server = ScriptedServer::start(vec![broken, full]);
    let mut deltas = 0;
    let e = client(p, &server)
        .stream(&req(p), &CancelToken::new(), &mut |e| {
            if matches!(e, StreamEvent::TextDelta(_)) {
                deltas += 1
            }
        })
        .expect_err("error");
    assert!(deltas > 0);
    assert_eq!(e.kind(), ErrorKind::Stream);
    assert_eq!(server.count(), 1);
}

#[test]
fn an_error_event_before_any_data_is_retried() {
    let p = Provider::Anthropic;
    let overloaded = Reply::sse(&[(
        Some("error"),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            .to_string(),
    )]);
    let server = ScriptedServer::start(vec![
        overloaded,
        reply(p, &text("ok now"), Usage::default(), true),
    ]);
    let r = client(p, &server)
        .stream(&req(p), &CancelToken::new(), &mut |_| {})
        .expect("retried");
    assert_eq!(r.text, "ok now");
    assert_eq!(server.count(), 2);
}

#[test]
fn missing_credentials_name_the_provider() {
    let c = LlmClient::new(Arc::new(
        StaticCredentials::new().with("OPENAI_API_KEY", "x-key-123"),
    ));
    for (model, provider) in [
        ("sonnet", "anthropic"),
        ("gemini-flash", "gemini"),
        ("kimi", "kimi"),
    ] {
        let r = Request {
            model: model.into(),
            messages: vec![Message::user("hi")],
            ..Default::default()
        };
        let e = c.complete(&r, &CancelToken::new()).expect_err("error");
        assert!(matches!(e, LlmError::ProviderNotConfigured { .. }));
        assert!(e.to_string().contains(provider), "{e}");
        assert!(!e.retryable());
    }
    // An unknown model without a provider is a configuration error too.
    let r = Request {
        model: "mystery-9".into(),
        ..Default::default()
    };
    let e = c.complete(&r, &CancelToken::new()).expect_err("error");
    assert!(matches!(e, LlmError::UnknownModel { .. }), "{e}");
    // openai_compatible needs a base URL as well as a key.
    let c = LlmClient::new(Arc::new(
        StaticCredentials::new().with("OPENAI_COMPATIBLE_API_KEY", "k-123456"),
    ));
    let r = Request {
        model: "llama".into(),
        provider: Some(Provider::OpenAiCompatible),
        ..Default::default()
    };
    let e = c.complete(&r, &CancelToken::new()).expect_err("error");
    assert!(e.to_string().contains("base URL"), "{e}");
}

#[test]
fn cancellation_interrupts_the_backoff_wait() {
    let p = Provider::OpenAi;
    let server = ScriptedServer::start(vec![
        Reply::error(503, json!({"error": {"message": "busy"}})).header("retry-after", "30"),
        ok(p),
    ]);
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        c2.cancel("user");
    });
    let t = Instant::now();
    let e = client(p, &server)
        .complete(&req(p), &cancel)
        .expect_err("error");
    assert!(matches!(e, LlmError::Cancelled));
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(server.count(), 1);
}

#[test]
fn the_agent_reports_llm_retries() {
    let p = Provider::Kimi;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = ScriptedServer::start(vec![
        Reply::error(502, json!({"error": {"message": "bad gateway"}})),
        reply(p, &text("done"), Usage::default(), true),
    ]);
    let c = client(p, &server);
    let mut s = Session::new(
        AgentConfig::new("kimi"),
        Sandbox::new(dir.path()).expect("sb"),
    )
    .expect("session");
    let mut retry = None;
    let out = s
        .run(&c, "go", &CancelToken::new(), &mut |e| {
            if e.kind() == "agent.llm.retry" {
                retry = Some(e.properties());
            }
        })
        .expect("run");
    assert_eq!(out.text, "done");
    let r = retry.expect("retry event");
    assert_eq!(r["provider"], "kimi");
    assert_eq!(r["attempt"], 1);
    assert!(r["error"].as_str().unwrap_or("").contains("bad gateway"));
    // A non-retryable failure fails the run with a classified error.
    let server = ScriptedServer::start(vec![Reply::error(
        403,
        json!({"error": {"message": "forbidden"}}),
    )]);
    let c = client(p, &server);
    let e = s
        .run(&c, "again", &CancelToken::new(), &mut |_| {})
        .expect_err("error");
    assert_eq!(e.failure_class(), "deterministic");
}

#[test]
fn every_provider_retries_429_and_500_but_never_401() {
    for p in PROVIDERS {
        for stream in [false, true] {
            // 429 with `retry-after-ms` (waited exactly), then 500 (backoff), then success.
            let server = ScriptedServer::start(vec![
                Reply::error(429, json!({"error": {"message": "Too many requests"}}))
                    .header("retry-after-ms", "150"),
                Reply::error(500, json!({"error": {"message": "boom"}})),
                reply(p, &text("fine"), Usage::default(), stream),
            ]);
            let mut retries = Vec::new();
            let r = client(p, &server)
                .call(&req(p), stream, &CancelToken::new(), &mut |e| {
                    if let StreamEvent::Retry {
                        attempt, delay_ms, ..
                    } = e
                    {
                        retries.push((attempt, delay_ms));
                    }
                })
                .unwrap_or_else(|e| panic!("{p} stream={stream}: {e}"));
            assert_eq!(r.text, "fine", "{p} stream={stream}");
            let reqs = server.requests();
            assert_eq!(reqs.len(), 3, "{p} stream={stream}");
            assert_eq!(retries.len(), 2, "{p} stream={stream}: {retries:?}");
            assert_eq!(retries[0], (1, 150), "{p} stream={stream}");
            assert_eq!(retries[1].0, 2);
            assert!(
                reqs[1].at - reqs[0].at >= Duration::from_millis(150),
                "{p} stream={stream}"
            );

            // 401: classified, not retried, the key kept out of the message.
            let server = ScriptedServer::start(vec![
                Reply::error(
                    401,
                    json!({"error": {"message": format!("bad key {}", test_key(p))}}),
                ),
                reply(p, &text("never"), Usage::default(), stream),
            ]);
            let e = client(p, &server)
                .call(&req(p), stream, &CancelToken::new(), &mut |_| {})
                .expect_err("401");
            assert_eq!(e.kind(), ErrorKind::Authentication, "{p} stream={stream}");
            assert_eq!(server.count(), 1, "{p} stream={stream}");
            assert!(!e.to_string().contains(&test_key(p)), "{e}");
        }
    }
}
