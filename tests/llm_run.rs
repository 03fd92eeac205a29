//! End-to-end: `svc run` with real agent and prompt stages against the scripted provider
//! server. Keys are stored with `svc secrets set` into a temp state directory and the
//! endpoint comes from its `settings.toml`; nothing is taken from the environment.

mod llm_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use llm_common::{reply, text, tools, Recorded, ScriptedServer, Turn};
use serde_json::{json, Value};
use svc::llm::{Provider, Usage};

fn svc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_svc"))
        .args(args)
        // Keys must come from the vault only: a key in the environment must not be used.
        .env("ANTHROPIC_API_KEY", "env-key-must-not-be-used")
        .env("OPENAI_API_KEY", "env-key-must-not-be-used")
        .output()
        .expect("run svc")
}

struct Env {
    _tmp: tempfile::TempDir,
    state: PathBuf,
    work: PathBuf,
}

impl Env {
    /// A state dir whose settings point `provider` at the server (no key stored yet).
    fn new(provider: Provider, server: &ScriptedServer) -> Env {
        let tmp = tempfile::tempdir().expect("tempdir");
        let state = tmp.path().join("state");
        let work = tmp.path().join("work");
        std::fs::create_dir_all(&state).expect("mkdir");
        std::fs::create_dir_all(&work).expect("mkdir");
        std::fs::write(
            state.join("settings.toml"),
            format!(
                "[llm.providers.{}]\nbase_url = \"{}\"\n",
                provider.id(),
                server.base
            ),
        )
        .expect("write settings");
        Env {
            _tmp: tmp,
            state,
            work,
        }
    }

    fn state(&self) -> &str {
        self.state.to_str().unwrap_or("")
    }

    fn set_key(&self, name: &str, value: &str) {
        let o = svc(&["secrets", "set", name, value, "--state-dir", self.state()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }

    /// Runs `dot` (written to a file) and returns the exit code and the JSON report.
    fn run(&self, dot: &str) -> (i32, Value, String) {
        let file = self
            .work
            .parent()
            .unwrap_or(Path::new("."))
            .join("flow.dot");
        std::fs::write(&file, dot).expect("write flow");
        let o = svc(&[
            "run",
            file.to_str().unwrap_or(""),
            "--state-dir",
            self.state(),
            "--workdir",
            self.work.to_str().unwrap_or(""),
            "--format",
            "json",
        ]);
        let stdout = String::from_utf8_lossy(&o.stdout);
        let v = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
        (
            o.status.code().unwrap_or(-1),
            v,
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    fn events(&self, run_id: &str) -> Vec<Value> {
        let o = svc(&[
            "events",
            run_id,
            "--format",
            "jsonl",
            "--state-dir",
            self.state(),
        ]);
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

fn kind(e: &Value) -> &str {
    e["kind"]
        .as_str()
        .or_else(|| e["event"].as_str())
        .or_else(|| e["type"].as_str())
        .unwrap_or("")
}

fn props(e: &Value) -> &Value {
    if e.get("properties").is_some() {
        &e["properties"]
    } else {
        e
    }
}

/// A server answering with `turns` in order, in `provider`'s format (streamed when asked).
fn scripted(provider: Provider, turns: Vec<Turn>) -> ScriptedServer {
    let usage = Usage {
        input: 100,
        output: 20,
        ..Usage::default()
    };
    ScriptedServer::start_with(move |n, r: &Recorded| {
        let stream = r.body["stream"].as_bool().unwrap_or(false);
        match turns.get(n) {
            Some(t) => reply(provider, t, usage, stream),
            None => llm_common::Reply::error(
                500,
                json!({"error": {"message": "scripted server: script exhausted"}}),
            ),
        }
    })
}

const PROMPT_FLOW: &str = r#"digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  ask [shape=tab, prompt="Say hello"]
  start -> ask -> exit
}"#;

fn stage_completed<'a>(events: &'a [Value], node: &str) -> Option<&'a Value> {
    events.iter().find(|e| {
        kind(e) == "stage.completed"
            && (e["node_id"] == node || e["node"] == node || props(e)["node_id"] == node)
    })
}

#[test]
fn prompt_stage_answers_from_the_provider_with_the_vault_key() {
    let server = scripted(Provider::Anthropic, vec![text("Hello from the model")]);
    let env = Env::new(Provider::Anthropic, &server);
    env.set_key("ANTHROPIC_API_KEY", "test-key");
    let (code, out, err) = env.run(PROMPT_FLOW);
    assert_eq!(code, 0, "{err}\n{out}");
    assert_eq!(out["status"], "succeeded");
    assert_eq!(out["context"]["response.ask"], "Hello from the model");
    assert_eq!(out["context"]["last_response"], "Hello from the model");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].header("x-api-key"), Some("test-key"));
    assert_eq!(reqs[0].body["model"], "claude-sonnet-4-6");

    let run_id = out["run_id"].as_str().unwrap_or("");
    let events = env.events(run_id);
    let done = stage_completed(&events, "ask").unwrap_or(&Value::Null);
    let usage = &props(done)["usage"];
    assert_eq!(usage["tokens"]["input"], 100, "{done}");
    assert_eq!(usage["tokens"]["output"], 20, "{done}");
    assert_eq!(usage["provider"], "anthropic");
    assert_eq!(usage["model"], "claude-sonnet-4-6");
    assert_eq!(usage["cost"]["source"], "catalog");
    // claude-sonnet-4-6: $3/MTok input, $15/MTok output.
    assert_eq!(usage["cost"]["usd_micros"], 100 * 3 + 20 * 15, "{usage}");
}

#[test]
fn agent_stage_writes_files_and_records_tool_events() {
    let server = scripted(
        Provider::Anthropic,
        vec![
            tools(&[(
                "toolu_1",
                "write_file",
                json!({"file_path": "notes.txt", "content": "written by the agent\n"}),
            )]),
            text("I wrote notes.txt."),
        ],
    );
    let env = Env::new(Provider::Anthropic, &server);
    env.set_key("ANTHROPIC_API_KEY", "test-key");
    let (code, out, err) = env.run(
        r#"digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [prompt="Write notes.txt"]
  start -> work -> exit
}"#,
    );
    assert_eq!(code, 0, "{err}\n{out}");
    assert_eq!(
        std::fs::read_to_string(env.work.join("notes.txt")).unwrap_or_default(),
        "written by the agent\n"
    );
    assert_eq!(out["context"]["response.work"], "I wrote notes.txt.");
    let events = env.events(out["run_id"].as_str().unwrap_or(""));
    let kinds: Vec<&str> = events.iter().map(kind).collect();
    for k in [
        "agent.session.started",
        "agent.tool.started",
        "agent.tool.completed",
        "agent.message",
        "agent.session.ended",
    ] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    let started = events
        .iter()
        .find(|e| kind(e) == "agent.tool.started")
        .unwrap_or(&Value::Null);
    assert_eq!(props(started)["tool_name"], "write_file");
    assert_eq!(props(started)["visit"], 1, "{started}");
    assert!(started.to_string().contains("\"work\""), "{started}");
    let done = stage_completed(&events, "work").unwrap_or(&Value::Null);
    let p = props(done);
    assert_eq!(p["usage"]["tokens"]["input"], 200, "{done}");
    assert_eq!(p["usage"]["tokens"]["output"], 40, "{done}");
    assert_eq!(p["files_touched"], json!(["notes.txt"]), "{done}");
    // The second request carries the tool result.
    assert_eq!(server.count(), 2);
}

#[test]
fn a_routing_directive_in_the_reply_selects_the_edge() {
    let server = scripted(
        Provider::Anthropic,
        vec![text("Looks risky.\n{\"preferred_next_label\": \"reject\"}")],
    );
    let env = Env::new(Provider::Anthropic, &server);
    env.set_key("ANTHROPIC_API_KEY", "test-key");
    let (code, out, err) = env.run(
        r#"digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  review [shape=tab, prompt="Review"]
  ok [shape=parallelogram, script="true"]
  no [shape=parallelogram, script="true"]
  start -> review
  review -> ok [label="accept"]
  review -> no [label="reject"]
  ok -> exit; no -> exit
}"#,
    );
    assert_eq!(code, 0, "{err}\n{out}");
    assert_eq!(
        out["path"],
        json!(["start", "review", "no", "exit"]),
        "{out}"
    );
}

#[test]
fn a_provider_without_a_key_fails_the_stage_naming_it() {
    let server = scripted(Provider::Anthropic, vec![text("never sent")]);
    let env = Env::new(Provider::Anthropic, &server);
    let (code, out, err) = env.run(PROMPT_FLOW);
    assert_eq!(code, 1, "{err}\n{out}");
    assert_eq!(out["status"], "failed");
    let e = out["error"].as_str().unwrap_or("");
    assert!(e.contains("anthropic"), "{e}");
    assert!(e.contains("ANTHROPIC_API_KEY"), "{e}");
    assert_eq!(server.count(), 0, "no request without a key");
}

#[test]
fn openai_models_use_the_responses_api() {
    let server = scripted(Provider::OpenAi, vec![text("Hi from GPT")]);
    let env = Env::new(Provider::OpenAi, &server);
    env.set_key("OPENAI_API_KEY", "test-openai-key");
    let (code, out, err) = env.run(
        r#"digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  ask [shape=tab, model="gpt-5.4", prompt="Say hi"]
  start -> ask -> exit
}"#,
    );
    assert_eq!(code, 0, "{err}\n{out}");
    assert_eq!(out["context"]["response.ask"], "Hi from GPT");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert!(reqs[0].url.ends_with("/responses"), "{}", reqs[0].url);
    assert_eq!(
        reqs[0].header("authorization"),
        Some("Bearer test-openai-key")
    );
    assert_eq!(reqs[0].body["model"], "gpt-5.4");
    let events = env.events(out["run_id"].as_str().unwrap_or(""));
    let done = stage_completed(&events, "ask").unwrap_or(&Value::Null);
    assert_eq!(props(done)["usage"]["provider"], "openai", "{done}");
    assert_eq!(props(done)["usage"]["tokens"]["output"], 20, "{done}");
}

#[test]
fn an_invalid_structured_reply_gets_a_repair_turn_in_the_same_conversation() {
    let server = scripted(
        Provider::Anthropic,
        vec![
            text("I think we should reject it."),
            text("{\"preferred_next_label\": \"reject\"}"),
        ],
    );
    let env = Env::new(Provider::Anthropic, &server);
    env.set_key("ANTHROPIC_API_KEY", "test-key");
    let (code, out, err) = env.run(
        r#"digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  review [shape=tab, prompt="Review the change", output_schema="routing"]
  ok [shape=parallelogram, script="true"]
  no [shape=parallelogram, script="true"]
  start -> review
  review -> ok [label="accept"]
  review -> no [label="reject"]
  ok -> exit; no -> exit
}"#,
    );
    assert_eq!(code, 0, "{err}\n{out}");
    assert_eq!(
        out["path"],
        json!(["start", "review", "no", "exit"]),
        "{out}"
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    // The repair turn continues the conversation: the first prompt, the model's reply and
    // the correction are all in the second request.
    let users = llm_common::user_texts(Provider::Anthropic, &reqs[1].body);
    assert_eq!(users.len(), 2, "{users:?}");
    assert!(users[0].contains("Review the change"), "{users:?}");
    assert!(users[1].contains("did not satisfy"), "{users:?}");
    assert!(
        reqs[1]
            .body
            .to_string()
            .contains("I think we should reject it."),
        "{}",
        reqs[1].body
    );
    // Usage sums both calls.
    let events = env.events(out["run_id"].as_str().unwrap_or(""));
    let done = stage_completed(&events, "review").unwrap_or(&Value::Null);
    assert_eq!(props(done)["usage"]["tokens"]["input"], 200, "{done}");
}
