//! The server's executor runs prompt stages against a real provider client: the key comes
//! from the state directory's vault (stored with `svc secrets set` while the server runs)
//! and the endpoint from `settings.toml`. Steering (`POST …/steer`) reaches a running agent
//! stage before its next model call; it is refused (409) without one, 404 for unknown runs
//! and 400 for bad bodies.

mod llm_common;
mod server_support;

use llm_common::{reply, text, tools, user_texts, Recorded, ScriptedServer};
use serde_json::{json, Value};
use server_support::*;
use svc::llm::{Provider, Usage};

#[test]
fn server_runs_prompt_stages_with_vault_keys() {
    let llm = ScriptedServer::start_with(|n, r: &Recorded| {
        let stream = r.body["stream"].as_bool().unwrap_or(false);
        let usage = Usage {
            input: 10,
            output: 5,
            ..Usage::default()
        };
        match n {
            0 => reply(Provider::Anthropic, &text("served answer"), usage, stream),
            _ => llm_common::Reply::error(500, json!({"error": {"message": "exhausted"}})),
        }
    });
    let s = served(&llm);

    let dot = r#"digraph p {
  start [shape=Mdiamond]; exit [shape=Msquare]
  ask [shape=tab, prompt="Answer"]
  start -> ask -> exit
}"#;
    let r = s.post(
        "/api/v1/runs",
        &json!({"workflow": package(dot)}).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap_or("").to_string();
    let started = s.post(&format!("/api/v1/runs/{id}/start"), "");
    assert_eq!(started.status, 200, "{}", started.text());
    wait_for(30, "the run to finish", || {
        let st = s.get(&format!("/api/v1/runs/{id}")).json()["lifecycle"]["status"]["kind"].clone();
        (st == "succeeded" || st == "failed").then_some(())
    });
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
    let settings = format!(
        "[server.auth]\nmethods = [\"dev-token\"]\n[llm.providers.anthropic]\nbase_url = \"{}\"\n",
        llm.base
    );
    let s = Server::with(Opts {
        settings: Some(&settings),
        ..Opts::default()
    });
    let o = std::process::Command::new(bin())
        .args([
            "secrets",
            "set",
            "ANTHROPIC_API_KEY",
            "served-key",
            "--state-dir",
        ])
        .arg(s.path())
        .output()
        .expect("svc secrets set");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    s
}

fn create(s: &Server, dot: &str) -> String {
    let r = s.post(
        "/api/v1/runs",
        &json!({"workflow": package(dot)}).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()["id"].as_str().unwrap_or("").to_string()
}

fn start(s: &Server, id: &str) {
    let r = s.post(&format!("/api/v1/runs/{id}/start"), "");
    assert_eq!(r.status, 200, "{}", r.text());
}

fn status_kind(s: &Server, id: &str) -> Value {
    s.get(&format!("/api/v1/runs/{id}")).json()["lifecycle"]["status"]["kind"].clone()
}

fn wait_kind(s: &Server, id: &str, kinds: &[&str]) -> Value {
    wait_for(60, &format!("run {id} to be one of {kinds:?}"), || {
        let k = status_kind(s, id);
        kinds.iter().any(|w| k == *w).then_some(k)
    })
}

fn events(s: &Server, id: &str) -> Vec<Value> {
    s.get(&format!("/api/v1/runs/{id}/events?limit=1000"))
        .json()["data"]
        .as_array()
        .cloned()
        .unwrap_or_default()
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
fn steering_reaches_the_running_agent_before_its_next_model_call() {
    // Turn 1 runs a shell command that waits for a flag file the test creates once it has
    // steered, so the agent is certainly running when the guidance arrives.
    let llm = ScriptedServer::start_with(|n, r: &Recorded| {
        let stream = r.body["stream"].as_bool().unwrap_or(false);
        let usage = Usage {
            input: 10,
            output: 5,
            ..Usage::default()
        };
        match n {
            0 => reply(
                Provider::Anthropic,
                &tools(&[(
                    "t1",
                    "shell",
                    json!({"command": "i=0; while [ ! -f go.flag ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; echo released",
                           "timeout_ms": 180000}),
                )]),
                usage,
                stream,
            ),
            1 => reply(
                Provider::Anthropic,
                &text("Fixed, as guided."),
                usage,
                stream,
            ),
            _ => llm_common::Reply::error(500, json!({"error": {"message": "exhausted"}})),
        }
    });
    let s = served(&llm);
    let id = create(&s, AGENT_FLOW);
    start(&s, &id);
    wait_for(60, "the agent's shell tool to start", || {
        events(&s, &id)
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

    std::fs::write(s.path().join("scratch").join(&id).join("go.flag"), "").expect("flag");
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

    let evs = events(&s, &id);
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
fn steering_needs_a_run_with_an_agent_stage_running_now() {
    let s = Server::start();
    // Submitted, not started.
    let id = create(&s, GATE);
    let guidance = json!({"guidance": "Prefer the small fix."});
    for path in [
        format!("/api/v1/runs/{id}/steer"),
        format!("/runs/{id}/steer"),
    ] {
        let b = assert_error(&steer(&s, &path, &guidance), 409);
        assert!(b.to_string().contains("submitted"), "{b}");
    }
    // Waiting for a human: the run is live, but no agent runs.
    start(&s, &id);
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
