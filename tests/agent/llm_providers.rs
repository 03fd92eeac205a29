//! Provider wire formats end to end against the scripted server: plain and streamed text,
//! auth headers, endpoints, request shapes, usage mapping and cost, multi-turn tool use
//! through the agent, routing JSON and schema repair turns.

use crate::support::llm::*;
use serde_json::{json, Value};
use svc::internal::agent::{AgentConfig, AgentEvent, Session};
use svc::internal::base::cancel::CancelToken;
use svc::internal::llm::prompt::PromptCall;
use svc::internal::llm::{cost_of, Message, Provider, Request, Speed, StreamEvent, Usage};
use svc::internal::sandbox::Sandbox;

fn raw_usage() -> Usage {
    // Raw provider terms: 1000 prompt tokens of which 200 cached; 300 output of which 100
    // reasoning (Gemini reports thoughts separately).
    Usage {
        input: 1000,
        output: 300,
        reasoning: 100,
        cache_read: 200,
        cache_write: 50,
    }
}

/// The neutral usage each provider's raw numbers must map to.
fn expected_usage(p: Provider) -> Usage {
    match p {
        // Anthropic input excludes cache reads already; no thinking text → no reasoning.
        Provider::Anthropic => Usage {
            input: 1000,
            output: 300,
            reasoning: 0,
            cache_read: 200,
            cache_write: 50,
        },
        Provider::OpenAi => Usage {
            input: 800,
            output: 200,
            reasoning: 100,
            cache_read: 200,
            cache_write: 0,
        },
        Provider::Gemini => Usage {
            input: 800,
            output: 300,
            reasoning: 100,
            cache_read: 200,
            cache_write: 0,
        },
        _ => Usage {
            input: 800,
            output: 300,
            reasoning: 0,
            cache_read: 200,
            cache_write: 0,
        },
    }
}

fn request(p: Provider, text: &str) -> Request {
    Request {
        model: model_for(p),
        provider: Some(p),
        system: Some("Be brief.".into()),
        messages: vec![Message::user(text)],
        ..Default::default()
    }
}

fn check_auth_and_endpoint(p: Provider, r: &Recorded, stream: bool) {
    let key = test_key(p);
    assert_eq!(r.method, "POST");
    match p {
        Provider::Anthropic => {
            assert_eq!(r.url, "/v1/messages");
            assert_eq!(r.header("x-api-key"), Some(key.as_str()));
            assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
            assert_eq!(r.body["system"][0]["text"], "Be brief.");
            assert_eq!(r.body["messages"][0]["role"], "user");
        }
        Provider::OpenAi => {
            assert_eq!(r.url, "/v1/responses");
            assert_eq!(
                r.header("authorization"),
                Some(format!("Bearer {key}").as_str())
            );
            assert_eq!(r.body["instructions"], "Be brief.");
            assert_eq!(r.body["input"][0]["content"][0]["type"], "input_text");
        }
        Provider::Gemini => {
            let m = model_for(p);
            let want = if stream {
                format!("/v1beta/models/{m}:streamGenerateContent?alt=sse")
            } else {
                format!("/v1beta/models/{m}:generateContent")
            };
            assert_eq!(r.url, want);
            assert_eq!(r.header("x-goog-api-key"), Some(key.as_str()));
            assert!(!r.url.contains(&key), "the key must not be in the URL");
            assert_eq!(r.body["systemInstruction"]["parts"][0]["text"], "Be brief.");
        }
        _ => {
            assert_eq!(r.url, "/v1/chat/completions");
            assert_eq!(
                r.header("authorization"),
                Some(format!("Bearer {key}").as_str())
            );
            assert_eq!(r.body["messages"][0]["role"], "system");
            if stream {
                assert_eq!(r.body["stream_options"]["include_usage"], true);
            }
        }
    }
    if p != Provider::Gemini {
        assert_eq!(r.body["model"], model_for(p));
        assert_eq!(
            r.body
                .get("stream")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            stream
        );
    }
}

#[test]
fn plain_text_usage_and_cost_for_every_provider() {
    for p in PROVIDERS {
        let server =
            ScriptedServer::start(vec![reply(p, &text("Hello there!"), raw_usage(), false)]);
        let c = client(p, &server);
        let r = c
            .complete(&request(p, "hi"), &CancelToken::new())
            .expect("call");
        assert_eq!(r.text, "Hello there!", "{p}");
        assert_eq!(r.usage, expected_usage(p), "{p}");
        assert_eq!(r.provider, Some(p));
        let reqs = server.requests();
        assert_eq!(reqs.len(), 1);
        check_auth_and_endpoint(p, &reqs[0], false);
        let cost = cost_of(&model_for(p), &r.usage, Speed::Standard);
        if p == Provider::OpenAiCompatible {
            assert_eq!(cost.source.as_str(), "unpriced");
            assert_eq!(cost.usd_micros, 0);
        } else {
            assert_eq!(cost.source.as_str(), "catalog");
            assert!(cost.usd_micros > 0);
        }
    }
}

#[test]
fn cost_from_scripted_usage_matches_catalog_math() {
    // gpt-5.4: 2.5 / 15 / 0.25 per MTok. Scripted: 1000 in (200 cached), 300 out (100 reasoning).
    let p = Provider::OpenAi;
    let server = ScriptedServer::start(vec![reply(p, &text("ok"), raw_usage(), false)]);
    let r = client(p, &server)
        .complete(&request(p, "hi"), &CancelToken::new())
        .expect("call");
    let c = cost_of("gpt-5.4", &r.usage, Speed::Standard);
    // 800 × 2.5 + 300 × 15 + 200 × 0.25 = 2000 + 4500 + 50 micros
    assert_eq!(c.usd_micros, 2000 + 4500 + 50);
    // Anthropic cache writes at 1.25× input: sonnet 3/15/0.3.
    let p = Provider::Anthropic;
    let server = ScriptedServer::start(vec![reply(p, &text("ok"), raw_usage(), false)]);
    let r = client(p, &server)
        .complete(&request(p, "hi"), &CancelToken::new())
        .expect("call");
    let c = cost_of("claude-sonnet-4-6", &r.usage, Speed::Standard);
    // 1000×3 + 300×15 + 200×0.3 + 50×3.75 = 3000 + 4500 + 60 + 187
    assert_eq!(c.usd_micros, 3000 + 4500 + 60 + 187);
}

#[test]
fn streaming_delivers_text_deltas_in_order() {
    for p in PROVIDERS {
        let said = "The quick brown fox jumps over the lazy dog.";
        let server = ScriptedServer::start(vec![reply(p, &text(said), raw_usage(), true)]);
        let c = client(p, &server);
        let mut deltas = Vec::new();
        let mut done = 0;
        let r = c
            .stream(&request(p, "hi"), &CancelToken::new(), &mut |e| match e {
                StreamEvent::TextDelta(t) => {
                    assert_eq!(done, 0, "no delta after Done");
                    deltas.push(t)
                }
                StreamEvent::Done(_) => done += 1,
                _ => {}
            })
            .expect("stream");
        assert!(deltas.len() >= 3, "{p}: {deltas:?}");
        assert_eq!(deltas.concat(), said, "{p}");
        assert_eq!(r.text, said);
        assert_eq!(done, 1);
        assert_eq!(r.usage, expected_usage(p), "{p} streamed usage");
        check_auth_and_endpoint(p, &server.requests()[0], true);
    }
}

#[test]
fn streamed_tool_calls_are_assembled() {
    for p in PROVIDERS {
        let turn = Turn::Tools(
            "Looking.".into(),
            vec![
                (
                    "call_a".into(),
                    "read_file".into(),
                    json!({"file_path": "src/main.rs", "limit": 5}),
                ),
                (
                    "call_b".into(),
                    "glob".into(),
                    json!({"pattern": "**/*.toml"}),
                ),
            ],
        );
        let server = ScriptedServer::start(vec![reply(p, &turn, raw_usage(), true)]);
        let mut streamed = Vec::new();
        let r = client(p, &server)
            .stream(&request(p, "hi"), &CancelToken::new(), &mut |e| {
                if let StreamEvent::ToolCall(c) = e {
                    streamed.push(c)
                }
            })
            .expect("stream");
        assert_eq!(r.tool_calls.len(), 2, "{p}");
        assert_eq!(r.tool_calls[0].name, "read_file");
        assert_eq!(
            r.tool_calls[0].arguments,
            json!({"file_path": "src/main.rs", "limit": 5})
        );
        assert_eq!(r.tool_calls[1].arguments, json!({"pattern": "**/*.toml"}));
        assert_eq!(streamed, r.tool_calls, "{p}");
        assert_eq!(r.text, "Looking.");
        if p == Provider::Gemini {
            assert_eq!(r.tool_calls[0].signature.as_deref(), Some("sig-read_file"));
        } else {
            assert_eq!(r.tool_calls[0].id, "call_a");
        }
    }
}

#[test]
fn agent_tool_use_over_several_turns_for_every_provider() {
    for p in PROVIDERS {
        for stream in [false, true] {
            let dir = tempfile::tempdir().expect("tempdir");
            std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\n").expect("write");
            let edit = if p.tool_profile() == svc::internal::llm::ToolProfile::OpenAi {
                (
                    "c3",
                    "apply_patch",
                    json!({"patch": "*** Begin Patch\n*** Update File: notes.txt\n alpha\n-beta\n+gamma\n*** End Patch"}),
                )
            } else {
                (
                    "c3",
                    "edit_file",
                    json!({"file_path": "notes.txt", "old_string": "beta", "new_string": "gamma"}),
                )
            };
            let script = [
                tools(&[("c1", "read_file", json!({"file_path": "notes.txt"}))]),
                tools(&[
                    (
                        "c2",
                        "write_file",
                        json!({"file_path": "out/new.txt", "content": "hello"}),
                    ),
                    edit.clone(),
                ]),
                tools(&[("c4", "no_such_tool", json!({}))]),
                text("All done."),
            ];
            let replies = script
                .iter()
                .map(|t| reply(p, t, raw_usage(), stream))
                .collect();
            let server = ScriptedServer::start(replies);
            let c = client(p, &server).with_streaming(stream);
            let mut s = Session::new(
                AgentConfig {
                    provider: Some(p),
                    ..AgentConfig::new(&model_for(p))
                },
                Sandbox::new(dir.path()).expect("sandbox"),
            )
            .expect("session");
            let mut events = Vec::new();
            let out = s
                .run(&c, "Change beta to gamma.", &CancelToken::new(), &mut |e| {
                    events.push(e)
                })
                .expect("run");
            assert_eq!(out.text, "All done.", "{p}");
            assert_eq!(out.turns, 4);
            assert_eq!(out.tool_calls, 4);
            assert_eq!(
                out.files_touched,
                vec!["out/new.txt".to_string(), "notes.txt".to_string()]
            );
            let mut want = expected_usage(p);
            for f in [
                &mut want.input,
                &mut want.output,
                &mut want.reasoning,
                &mut want.cache_read,
                &mut want.cache_write,
            ] {
                *f *= 4;
            }
            assert_eq!(out.usage, want, "{p}");
            assert_eq!(
                std::fs::read_to_string(dir.path().join("notes.txt")).expect("r"),
                "alpha\ngamma\n"
            );
            assert_eq!(
                std::fs::read_to_string(dir.path().join("out/new.txt")).expect("r"),
                "hello"
            );

            let reqs = server.requests();
            assert_eq!(reqs.len(), 4);
            // Request 2 carries the read_file result; request 3 both edit results; request 4
            // the unknown-tool error.
            let r2 = tool_results(p, &reqs[1].body);
            assert_eq!(r2.len(), 1, "{p}: {r2:?}");
            assert!(
                r2[0].1.contains("alpha") && r2[0].1.contains("     2\tbeta"),
                "{p}: {r2:?}"
            );
            let key = |id: &str, name: &str| {
                if p == Provider::Gemini {
                    name.to_string()
                } else {
                    id.to_string()
                }
            };
            assert_eq!(r2[0].0, key("c1", "read_file"));
            let r3 = tool_results(p, &reqs[2].body);
            assert_eq!(r3.len(), 3, "{p}: history keeps earlier results");
            assert_eq!(r3[1].0, key("c2", "write_file"));
            assert!(r3[1].1.contains("Wrote 5 bytes"));
            assert!(!r3[2].2, "{p}: edit succeeded: {:?}", r3[2]);
            let r4 = tool_results(p, &reqs[3].body);
            assert!(
                r4[3].2 && r4[3].1.contains("unknown tool"),
                "{p}: {:?}",
                r4[3]
            );
            // Tools offered match the profile.
            let names = tool_names(p, &reqs[0].body);
            assert!(names.contains(&edit.1.to_string()), "{p}: {names:?}");

            let kinds: Vec<&str> = events.iter().map(|e| e.kind()).collect();
            assert_eq!(kinds.first(), Some(&"agent.session.started"));
            assert_eq!(
                kinds.iter().filter(|k| **k == "agent.tool.started").count(),
                4
            );
            assert_eq!(kinds.iter().filter(|k| **k == "agent.message").count(), 4);
            assert_eq!(kinds.last(), Some(&"agent.session.ended"));
            if stream {
                assert!(kinds.contains(&"agent.message.delta"), "{p}");
            }
            let completed: Vec<&AgentEvent> = events
                .iter()
                .filter(|e| e.kind() == "agent.tool.completed")
                .collect();
            assert_eq!(completed[0].properties()["tool_name"], "read_file");
            assert_eq!(completed[3].properties()["is_error"], true);
        }
    }
}

fn tool_names(p: Provider, body: &Value) -> Vec<String> {
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    match p {
        Provider::Anthropic | Provider::OpenAi => tools
            .iter()
            .map(|t| t["name"].as_str().unwrap_or("").to_string())
            .collect(),
        Provider::Gemini => tools[0]["functionDeclarations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t["name"].as_str().unwrap_or("").to_string())
            .collect(),
        _ => tools
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap_or("").to_string())
            .collect(),
    }
}

#[test]
fn project_memory_goes_into_the_system_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join(".git")).expect("git");
    std::fs::write(dir.path().join("AGENTS.md"), "Always use tabs.").expect("w");
    std::fs::write(dir.path().join("GEMINI.md"), "Gemini specific.").expect("w");
    std::fs::write(dir.path().join("CLAUDE.md"), "Claude specific.").expect("w");
    let p = Provider::Gemini;
    let server = ScriptedServer::start(vec![
        reply(p, &text("ok"), raw_usage(), false),
        reply(p, &text("ok"), raw_usage(), false),
    ]);
    let c = client(p, &server).with_streaming(false);
    let mut call = PromptCall {
        model: "gemini-pro".into(),
        prompt: "hi".into(),
        project_memory: true,
        cwd: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    svc::internal::llm::prompt::run_prompt(&c, &call, &CancelToken::new(), &mut |_| {})
        .expect("call");
    call.project_memory = false;
    svc::internal::llm::prompt::run_prompt(&c, &call, &CancelToken::new(), &mut |_| {})
        .expect("call");
    let reqs = server.requests();
    let sys = reqs[0].body["systemInstruction"]["parts"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        sys.contains("Always use tabs.") && sys.contains("Gemini specific."),
        "{sys}"
    );
    assert!(!sys.contains("Claude specific."));
    assert!(reqs[1].body.get("systemInstruction").is_none());
}

#[test]
fn provider_and_model_probes() {
    use svc::internal::llm::models::{test_model, test_providers, ProbeStatus, TestMode};
    let server = ScriptedServer::start_with(|_, r| {
        if r.url.starts_with("/v1/messages") {
            if r.body["tools"].is_array() {
                reply(
                    Provider::Anthropic,
                    &tools(&[("t", "echo", json!({"text": "ping"}))]),
                    Usage::default(),
                    false,
                )
            } else {
                reply(Provider::Anthropic, &text("OK"), Usage::default(), false)
            }
        } else {
            Reply::error(
                401,
                json!({"error": {"code": 401, "message": "API key not valid", "status": "UNAUTHENTICATED"}}),
            )
        }
    });
    let creds = svc::internal::llm::StaticCredentials::new()
        .with("ANTHROPIC_API_KEY", "ak-123456789")
        .with("GEMINI_API_KEY", "gk-123456789");
    let c = svc::internal::llm::LlmClient::new(std::sync::Arc::new(creds))
        .with_base_url(Provider::Anthropic, &server.base)
        .with_base_url(Provider::Gemini, &server.base);
    let results = test_providers(&c, &CancelToken::new());
    let by = |p: &str| {
        results
            .iter()
            .find(|r| r.provider == p)
            .cloned()
            .expect("result")
    };
    assert_eq!(by("anthropic").status, ProbeStatus::Ok);
    assert_eq!(by("anthropic").model_id, "claude-haiku-4-5");
    assert_eq!(by("gemini").status, ProbeStatus::Error);
    assert!(by("gemini")
        .error_message
        .unwrap_or_default()
        .contains("API key not valid"));
    assert_eq!(by("openai").status, ProbeStatus::Skip);
    assert!(results.iter().all(|r| r.provider != "openai_compatible"));
    let j = serde_json::to_value(by("openai")).expect("json");
    assert_eq!(j["status"], "skip");
    assert!(j["error_message"].is_null());
    let deep = test_model(&c, "sonnet", None, TestMode::Deep, &CancelToken::new());
    assert_eq!(deep.status, ProbeStatus::Ok, "{deep:?}");
    assert_eq!(deep.model_id, "claude-sonnet-4-6");
}
