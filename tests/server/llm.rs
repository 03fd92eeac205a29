//! The server's executor runs prompt stages against a real provider client: the key comes
//! from the state directory's vault (stored with `svc secrets set` while the server runs)
//! and the endpoint from `settings.toml`. Steering (`POST …/steer`) reaches a running agent
//! stage before its next model call; it is refused (409) without one, 404 for unknown runs
//! and 400 for bad bodies.

use crate::support;
use crate::support::llm::{reply, text, tools, user_texts, Recorded, ScriptedServer};
use crate::support::server::*;
use serde_json::{json, Value};
use svc::internal::llm::{Provider, Usage};
use svc::internal::test_tools::{require, Tool};

const SMALL: Usage = support::llm::SMALL_USAGE;

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn server_runs_prompt_stages_with_vault_keys() {
    require(Tool::Git);
    let llm = ScriptedServer::turns(Provider::Anthropic, vec![text("served answer")], SMALL);
    let s = served(&llm);

    let dot = r#"digraph p {
  start [shape=Mdiamond]; exit [shape=Msquare]
  ask [shape=tab, prompt="Answer"]
  start -> ask -> exit
}"#;
    let id = run_to_end(&s, &run_body(dot));
    let evs = s
        .get(&format!("/api/v1/runs/{id}/events?limit=1000"))
        .json();
    let done = evs["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["event"] == "stage.completed" && e["node_id"] == "ask")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(done["properties"]["response"], "served answer", "{evs}");
    assert_eq!(done["properties"]["usage"]["tokens"]["input"], 10, "{done}");
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].header("x-api-key"), Some("served-key"));
}

/// A dev server whose Anthropic endpoint is `llm`, with a key in its vault.
fn served(llm: &ScriptedServer) -> Server {
    served_anthropic(&llm.base, "")
}

fn steer(s: &Server, path: &str, body: &Value) -> Resp {
    s.post(path, &body.to_string())
}

const AGENT_FLOW: &str = r#"digraph steer {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [shape=box, prompt="Fix the failing test"]
  start -> work -> exit
}"#;

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn steering_reaches_the_running_agent_before_its_next_model_call() {
    require(Tool::Git);
    // Turn 1 runs a shell command that waits for a flag file the test creates once it has
    // steered, so the agent is certainly running when the guidance arrives.
    let llm = ScriptedServer::turns(
        Provider::Anthropic,
        vec![
            tools(&[(
                "t1",
                "shell",
                json!({"command": "i=0; while [ ! -f go.flag ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; echo released",
                       "timeout_ms": 180000}),
            )]),
            text("Fixed, as guided."),
        ],
        SMALL,
    );
    let s = served(&llm);
    let id = create_run(&s, &run_body(AGENT_FLOW));
    start_run(&s, &id);
    wait_for(60, "the agent's shell tool to start", || {
        run_events(&s, &id)
            .iter()
            .any(|e| e["event"] == "agent.tool.started")
            .then_some(())
    });

    let r = steer(
        &s,
        &format!("/api/v1/runs/{id}/steer"),
        &json!({"guidance": "Keep the public API unchanged.", "location": {"file": "src/lib.rs", "line": 12}}),
    );
    assert_eq!(r.status, 202, "{}", r.text());
    assert_eq!(r.json(), json!({"accepted": true}));
    // The unprefixed alias does the same.
    let r = steer(
        &s,
        &format!("/runs/{id}/steer"),
        &json!({"guidance": "Add a regression test."}),
    );
    assert_eq!(r.status, 202, "{}", r.text());

    std::fs::write(s.path().join("workspaces").join(&id).join("go.flag"), "").expect("flag");
    assert_eq!(wait_kind(&s, &id, &["succeeded", "failed"]), "succeeded");

    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2);
    let before = user_texts(Provider::Anthropic, &reqs[0].body);
    assert!(
        !before.iter().any(|t| t.contains("public API")),
        "{before:?}"
    );
    let after = user_texts(Provider::Anthropic, &reqs[1].body);
    let located = after
        .iter()
        .find(|t| t.contains("Keep the public API unchanged."))
        .unwrap_or_else(|| panic!("no steering in the next request: {after:?}"));
    assert!(located.contains("src/lib.rs:12"), "{located}");
    assert!(
        after.iter().any(|t| t.contains("Add a regression test.")),
        "{after:?}"
    );

    let evs = run_events(&s, &id);
    let injected: Vec<&Value> = evs
        .iter()
        .filter(|e| e["event"] == "agent.steering.injected")
        .collect();
    assert_eq!(injected.len(), 2, "{evs:?}");
    assert!(injected.iter().all(|e| e["node_id"] == "work"));
    assert_eq!(injected[0]["properties"]["text"], located.as_str());
    assert_eq!(
        injected[0]["properties"]["location"],
        json!({"file": "src/lib.rs", "line": 12})
    );
    assert!(injected[1]["properties"]["text"]
        .as_str()
        .is_some_and(|t| t.contains("Add a regression test.")));
    let done = evs
        .iter()
        .find(|e| e["event"] == "stage.completed" && e["node_id"] == "work")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(done["properties"]["response"], "Fixed, as guided.");

    // Finished now: nothing to steer.
    let late = steer(
        &s,
        &format!("/api/v1/runs/{id}/steer"),
        &json!({"guidance": "too late"}),
    );
    assert!(assert_error(&late, 409).to_string().contains("succeeded"));
}

const GATE: &str = r#"digraph gate {
  start [shape=Mdiamond]; exit [shape=Msquare]
  ask [shape=hexagon, label="Ship it?"]
  start -> ask
  ask -> exit [label="[Y] Yes"]
}"#;

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn steering_needs_a_run_with_an_agent_stage_running_now() {
    require(Tool::Git);
    let s = Server::start();
    // Submitted, not started.
    let id = create_run(&s, &run_body(GATE));
    let guidance = json!({"guidance": "Prefer the small fix."});
    for path in [
        format!("/api/v1/runs/{id}/steer"),
        format!("/runs/{id}/steer"),
    ] {
        let b = assert_error(&steer(&s, &path, &guidance), 409);
        assert!(b.to_string().contains("submitted"), "{b}");
    }
    // Waiting for a human: the run is live, but no agent runs.
    start_run(&s, &id);
    wait_kind(&s, &id, &["blocked"]);
    let b = assert_error(
        &steer(&s, &format!("/api/v1/runs/{id}/steer"), &guidance),
        409,
    );
    assert!(b.to_string().contains("no agent stage running"), "{b}");
    // Bad bodies are 400 whatever the run's state.
    for body in [
        "",
        "{not json",
        "{}",
        r#"{"guidance": ""}"#,
        r#"{"guidance": "   "}"#,
        r#"{"guidance": 42}"#,
        r#"{"guidance": "x", "location": {"line": 3}}"#,
        r#"{"guidance": "x", "location": {"file": "a.rs", "line": 0}}"#,
        r#"{"guidance": "x", "location": {"file": "a.rs", "line": "3"}}"#,
        r#"{"guidance": "x", "unknown": true}"#,
    ] {
        let r = s.post(&format!("/api/v1/runs/{id}/steer"), body);
        assert_error(&r, 400);
        let r = s.post(&format!("/runs/{id}/steer"), body);
        assert_error(&r, 400);
    }
    let cancel = s.post(&format!("/api/v1/runs/{id}/cancel"), "");
    assert_eq!(cancel.status, 200, "{}", cancel.text());
    wait_kind(&s, &id, &["failed"]);
    assert_error(
        &steer(&s, &format!("/api/v1/runs/{id}/steer"), &guidance),
        409,
    );

    // Unknown and malformed ids.
    let unknown = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
    assert_error(
        &steer(&s, &format!("/api/v1/runs/{unknown}/steer"), &guidance),
        404,
    );
    assert_error(
        &steer(&s, &format!("/runs/{unknown}/steer"), &guidance),
        404,
    );
    assert_error(&steer(&s, "/api/v1/runs/nope/steer", &guidance), 400);
}

/// Micro-USD of `tokens` at `usd_per_mtok` (token counts here make every part exact).
fn micros(tokens: u64, usd_per_mtok: f64) -> i64 {
    (tokens as f64 * usd_per_mtok).round() as i64
}

/// What the catalog says `u` costs on `model`: non-cached input, output, cache reads at the
/// cached-input price, cache writes at 1.25× input.
fn catalog_cost(model: &str, u: &Usage) -> i64 {
    let p = svc::internal::llm::catalog::lookup(model)
        .and_then(|m| m.price)
        .unwrap_or_else(|| panic!("{model} has a catalog price"));
    micros(u.input, p.input)
        + micros(u.output + u.reasoning, p.output)
        + micros(u.cache_read, p.cached_input.unwrap_or(p.input))
        + micros(u.cache_write, p.input * 1.25)
}

fn tokens_json(u: &Usage) -> Value {
    json!({"input": u.input, "output": u.output, "reasoning": u.reasoning,
           "cache_read": u.cache_read, "cache_write": u.cache_write})
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn usage_billing_and_size_come_from_the_stages_token_usage() {
    require(Tool::Git);
    const SONNET: &str = "claude-sonnet-4-6";
    const HAIKU: &str = "claude-haiku-4-5";
    let plan_usage = Usage {
        input: 100_000,
        output: 20_000,
        reasoning: 0,
        cache_read: 50_000,
        cache_write: 10_000,
    };
    let review_usage = Usage {
        input: 8_000,
        output: 2_000,
        ..Usage::default()
    };
    let llm = ScriptedServer::start_with(move |_, r: &Recorded| {
        let stream = r.body["stream"].as_bool().unwrap_or(false);
        match r.body["model"].as_str() {
            Some(SONNET) => reply(Provider::Anthropic, &text("the plan"), plan_usage, stream),
            Some(HAIKU) => reply(
                Provider::Anthropic,
                &text("looks good"),
                review_usage,
                stream,
            ),
            other => support::llm::Reply::error(
                400,
                json!({"error": {"message": format!("unexpected model {other:?}")}}),
            ),
        }
    });
    let settings = settings_with(&[("anthropic", &llm.base)]);
    let s = Server::with(Opts {
        settings: Some(&settings),
        ..Opts::default()
    });
    store_key(&s, "ANTHROPIC_API_KEY", "usage-key");

    // A prompt stage on the default model, a command stage (no LLM) and an agent stage on
    // another model.
    let dot = r#"digraph p {
  start [shape=Mdiamond]; exit [shape=Msquare]
  plan [shape=tab, label="Plan the work", prompt="Plan it"]
  check [shape=parallelogram, script="echo checked"]
  review [model="claude-haiku-4-5", prompt="Review it"]
  start -> plan -> check -> review -> exit
}"#;
    let id = run_to_end(&s, &run_body(dot));
    let run = s.get(&format!("/api/v1/runs/{id}")).json();
    assert_eq!(run["lifecycle"]["status"]["kind"], "succeeded", "{run}");

    let plan_cost = catalog_cost(SONNET, &plan_usage);
    let review_cost = catalog_cost(HAIKU, &review_usage);
    let total = plan_cost + review_cost;

    let usage = s.get(&format!("/api/v1/runs/{id}/usage"));
    assert_eq!(usage.status, 200, "{}", usage.text());
    let u = usage.json();

    // One row per LLM stage, in order; the command stage reported no usage.
    let stages = u["stages"].as_array().cloned().unwrap_or_default();
    let ids: Vec<&str> = stages
        .iter()
        .filter_map(|st| st["stage"]["id"].as_str())
        .collect();
    assert_eq!(ids, ["plan", "review"], "{u}");
    let plan = &stages[0];
    assert_eq!(plan["stage"]["name"], "Plan the work");
    assert_eq!(
        plan["model"],
        json!({"provider": "anthropic", "model_id": SONNET, "speed": "standard"})
    );
    assert_eq!(plan["usage"]["tokens"], tokens_json(&plan_usage));
    assert_eq!(
        plan["usage"]["cost"],
        json!({"usd_micros": plan_cost, "source": "catalog"})
    );
    assert_eq!(plan["state"], "succeeded");
    assert!(plan["started_at"].as_str().is_some_and(|t| t.contains('T')));
    let review = &stages[1];
    assert_eq!(review["stage"]["name"], "review");
    assert_eq!(review["model"]["model_id"], HAIKU);
    assert_eq!(review["usage"]["tokens"], tokens_json(&review_usage));
    assert_eq!(review["usage"]["cost"]["usd_micros"], review_cost);
    for st in &stages {
        let t = &st["timing"];
        assert_eq!(
            t["active_time_ms"].as_u64(),
            Some(
                t["inference_time_ms"].as_u64().unwrap_or(0)
                    + t["tool_time_ms"].as_u64().unwrap_or(0)
            ),
            "{st}"
        );
    }

    // Totals and the per-model split.
    let mut sum = plan_usage;
    sum.add(&review_usage);
    assert_eq!(u["totals"]["usage"]["tokens"], tokens_json(&sum));
    assert_eq!(
        u["totals"]["usage"]["cost"],
        json!({"usd_micros": total, "source": "catalog"})
    );
    let by_model = u["by_model"].as_array().cloned().unwrap_or_default();
    assert_eq!(by_model.len(), 2, "{u}");
    for (model, used, cost) in [
        (SONNET, &plan_usage, plan_cost),
        (HAIKU, &review_usage, review_cost),
    ] {
        let m = by_model
            .iter()
            .find(|m| m["model"]["model_id"] == model)
            .unwrap_or_else(|| panic!("{model} in by_model: {u}"));
        assert_eq!(m["model"]["provider"], "anthropic");
        assert_eq!(m["stages"], 1);
        assert_eq!(m["usage"]["tokens"], tokens_json(used));
        assert_eq!(m["usage"]["cost"]["usd_micros"], cost);
    }

    // The Run carries the same figures: billed total, its size bucket and the timing rollup.
    assert_eq!(run["billing"], json!({"total_usd_micros": total}), "{run}");
    assert!(
        (100_000..1_000_000).contains(&total),
        "the workflow is sized to cost $0.10-$1"
    );
    assert_eq!(run["size"], "S");
    let timing = &run["timing"];
    assert!(timing["wall_time_ms"].is_u64(), "{run}");
    for k in ["inference_time_ms", "tool_time_ms", "active_time_ms"] {
        assert_eq!(timing[k], u["totals"]["timing"][k], "{k}: {run} vs {u}");
    }

    // Unknown and malformed ids.
    assert_error(&s.get("/api/v1/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/usage"), 404);
    assert_error(&s.get("/api/v1/runs/not-a-run/usage"), 400);
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn runs_without_llm_stages_have_no_billing() {
    require(Tool::Git);
    let s = Server::start();
    let dot = r#"digraph c {
  start [shape=Mdiamond]; exit [shape=Msquare]
  check [shape=parallelogram, script="echo checked"]
  start -> check -> exit
}"#;
    let id = run_to_end(&s, &run_body(dot));
    let run = s.get(&format!("/api/v1/runs/{id}")).json();
    assert_eq!(run["lifecycle"]["status"]["kind"], "succeeded", "{run}");
    assert_eq!(run["billing"], Value::Null);
    assert_eq!(run["size"], "XS");
    assert_eq!(run["timing"]["active_time_ms"], 0);
    let u = s.get(&format!("/api/v1/runs/{id}/usage")).json();
    assert_eq!(u["stages"], json!([]));
    assert_eq!(u["by_model"], json!([]));
    assert_eq!(u["totals"]["usage"]["cost"]["usd_micros"], 0);
}

#[test]
fn models_lists_the_catalog_with_providers_and_keys() {
    let s = Server::start();
    let catalog = svc::internal::llm::catalog::MODELS;
    let all = s.get("/api/v1/models?page[limit]=100");
    assert_eq!(all.status, 200, "{}", all.text());
    let all = all.json();
    let data = all["data"].as_array().cloned().unwrap_or_default();
    assert_eq!(data.len(), catalog.len(), "{all}");
    assert_eq!(all["meta"]["has_more"], false);
    for m in catalog {
        let got = data
            .iter()
            .find(|d| d["id"] == m.id)
            .unwrap_or_else(|| panic!("{} listed", m.id));
        assert_eq!(got["provider"], m.provider, "{got}");
        assert_eq!(got["configured"], false, "no key stored yet: {got}");
        assert_eq!(
            got["costs"]["input_cost_per_mtok"].as_f64(),
            m.price.map(|p| p.input),
            "{got}"
        );
    }

    // Default page size, then the next page.
    let first = s.get("/api/v1/models").json();
    let n = first["data"].as_array().map_or(0, Vec::len);
    assert_eq!(n, catalog.len().min(20));
    assert_eq!(first["meta"]["has_more"], catalog.len() > 20);
    let rest = s.get("/api/v1/models?page[offset]=20").json();
    assert_eq!(
        rest["data"].as_array().map_or(0, Vec::len),
        catalog.len().saturating_sub(20)
    );

    // A stored key marks the provider's models configured.
    store_key(&s, "OPENAI_API_KEY", "k");
    let openai = s
        .get("/api/v1/models?provider=openai&page[limit]=100")
        .json();
    let listed = openai["data"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        listed.len(),
        catalog.iter().filter(|m| m.provider == "openai").count()
    );
    assert!(listed
        .iter()
        .all(|m| m["provider"] == "openai" && m["configured"] == true));
    let q = s.get("/api/v1/models?query=SONNET").json();
    assert!(q["data"].as_array().is_some_and(|d| !d.is_empty()
        && d.iter()
            .all(|m| m["id"].as_str().is_some_and(|id| id.contains("sonnet")))));
    assert_error(&s.get("/api/v1/models?provider=nope"), 400);

    // Credentials are required, except in demo mode.
    assert_error(&s.raw("GET", "/api/v1/models", &[], None), 401);
    let demo = s.raw("GET", "/api/v1/models", &[("X-Svc-Demo", "1")], None);
    assert_eq!(demo.status, 200, "{}", demo.text());
    assert!(demo.json()["data"]
        .as_array()
        .is_some_and(|d| !d.is_empty()));
}

#[test]
fn provider_test_reports_ok_error_and_skip_in_one_answer() {
    let good = ScriptedServer::start_with(|_, r: &Recorded| {
        let stream = r.body["stream"].as_bool().unwrap_or(false);
        let usage = Usage {
            input: 5,
            output: 1,
            ..Usage::default()
        };
        reply(Provider::Anthropic, &text("OK"), usage, stream)
    });
    let bad = ScriptedServer::start_with(|_, _| {
        support::llm::Reply::error(
            401,
            json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}),
        )
    });
    let down = ScriptedServer::start_with(|_, _| {
        support::llm::Reply::error(503, json!({"error": {"message": "overloaded"}}))
    });
    let settings = settings_with(&[
        ("anthropic", &good.base),
        ("openai", &bad.base),
        ("gemini", &down.base),
    ]);
    let s = Server::with(Opts {
        settings: Some(&settings),
        ..Opts::default()
    });

    // Nothing stored yet: every provider is skipped, and the answer is still 200.
    let none = s.post("/api/v1/providers/test", "");
    assert_eq!(none.status, 200, "{}", none.text());
    let none = none.json();
    assert!(
        none["data"]
            .as_array()
            .is_some_and(|d| !d.is_empty() && d.iter().all(|r| r["status"] == "skip")),
        "{none}"
    );

    store_key(&s, "ANTHROPIC_API_KEY", "good-key");
    store_key(&s, "OPENAI_API_KEY", "revoked-key");
    store_key(&s, "GEMINI_API_KEY", "gemini-key");
    let r = s.post("/api/v1/providers/test", "");
    assert_eq!(r.status, 200, "{}", r.text());
    let body = r.json();
    let results = body["data"].as_array().cloned().unwrap_or_default();
    let of = |p: &str| {
        results
            .iter()
            .find(|x| x["provider"] == p)
            .cloned()
            .unwrap_or_else(|| panic!("a result for {p}: {body}"))
    };
    let a = of("anthropic");
    assert_eq!(a["status"], "ok", "{a}");
    assert_eq!(a["error_message"], Value::Null);
    assert!(a["latency_ms"].is_u64());
    assert!(a["model_id"].as_str().is_some_and(|m| !m.is_empty()));
    let o = of("openai");
    assert_eq!(o["status"], "error", "{o}");
    assert!(
        o["error_message"].as_str().is_some_and(|m| !m.is_empty()),
        "{o}"
    );
    // An outage is reported at once: a probe is not retried.
    let g = of("gemini");
    assert_eq!(g["status"], "error", "{g}");
    assert_eq!(down.count(), 1);
    for p in ["kimi", "zai", "minimax", "inception"] {
        assert_eq!(of(p)["status"], "skip", "{body}");
    }
    // A provider without a catalog model to probe is listed only when it has a key.
    assert!(
        results.iter().all(|x| x["provider"] != "openai_compatible"),
        "{body}"
    );
    // Each provider once; the key came from the vault and reached the provider.
    let mut names: Vec<&str> = results
        .iter()
        .filter_map(|x| x["provider"].as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), results.len(), "{body}");
    assert_eq!(good.requests()[0].header("x-api-key"), Some("good-key"));
    assert!(bad.count() >= 1);
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn tokens_of_a_failed_attempt_that_was_retried_are_billed() {
    require(Tool::Git);
    // Attempt 1: a reply that is not a routing directive (tokens spent), then the repair
    // turn hits a provider outage. Attempt 2: a valid directive.
    let first = Usage {
        input: 30_000,
        output: 3_000,
        ..Usage::default()
    };
    let second = Usage {
        input: 40_000,
        output: 1_000,
        ..Usage::default()
    };
    let llm = ScriptedServer::start_with(move |n, r: &Recorded| {
        let stream = r.body["stream"].as_bool().unwrap_or(false);
        let turns = r.body["messages"].as_array().map_or(0, Vec::len);
        if turns > 1 {
            support::llm::Reply::error(503, json!({"error": {"message": "overloaded"}}))
                .header("retry-after", "0")
        } else if n == 0 {
            reply(
                Provider::Anthropic,
                &text("no directive here"),
                first,
                stream,
            )
        } else {
            reply(
                Provider::Anthropic,
                &text(r#"{"outcome": "succeeded"}"#),
                second,
                stream,
            )
        }
    });
    let settings = settings_with(&[("anthropic", &llm.base)]);
    let s = Server::with(Opts {
        settings: Some(&settings),
        ..Opts::default()
    });
    store_key(&s, "ANTHROPIC_API_KEY", "retry-key");
    let dot = r#"digraph r {
  start [shape=Mdiamond]; exit [shape=Msquare]
  decide [shape=tab, prompt="Decide", output_schema="routing", max_retries=1]
  start -> decide -> exit
}"#;
    let id = run_to_end(&s, &run_body(dot));
    let run = s.get(&format!("/api/v1/runs/{id}")).json();
    assert_eq!(run["lifecycle"]["status"]["kind"], "succeeded", "{run}");
    let evs = s
        .get(&format!("/api/v1/runs/{id}/events?limit=1000"))
        .json();
    let retried = evs["data"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|e| e["event"] == "stage.failed" && e["properties"]["will_retry"] == true);
    assert!(retried, "the first attempt failed and was retried: {evs}");

    let model = "claude-sonnet-4-6";
    let expected = catalog_cost(model, &first) + catalog_cost(model, &second);
    let u = s.get(&format!("/api/v1/runs/{id}/usage")).json();
    let stage = &u["stages"][0];
    assert_eq!(stage["stage"]["id"], "decide", "{u}");
    assert_eq!(stage["state"], "succeeded");
    let mut both = first;
    both.add(&second);
    assert_eq!(stage["usage"]["tokens"], tokens_json(&both), "{u}");
    assert_eq!(stage["usage"]["cost"]["usd_micros"], expected);
    // One visit, however many attempts.
    assert_eq!(u["by_model"][0]["stages"], 1);
    assert_eq!(run["billing"]["total_usd_micros"], expected, "{run}");
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn server_run_events_hide_values_stored_in_the_vault() {
    require(Tool::Git);
    let llm = ScriptedServer::start(vec![]);
    let s = served(&llm);
    let secret = "ghp_server-side-secret-0123456789";
    store_key(&s, "GITHUB_TOKEN", secret);
    let vault = s.path().join("secrets.json");
    let dot = format!(
        r#"digraph p {{
  start [shape=Mdiamond]; exit [shape=Msquare]
  leak [shape=parallelogram, script="cat '{}'"]
  start -> leak -> exit
}}"#,
        vault.display()
    );
    let id = run_to_end(&s, &run_body(&dot));
    let evs = run_events(&s, &id);
    let all = Value::Array(evs.clone()).to_string();
    assert!(!all.contains(secret), "the secret leaked into events");
    let cmd = evs
        .iter()
        .find(|e| e["event"] == "command.completed")
        .cloned()
        .unwrap_or(Value::Null);
    assert!(
        cmd["properties"]["stdout"]
            .as_str()
            .unwrap_or("")
            .contains("[REDACTED]"),
        "{cmd}"
    );
}
