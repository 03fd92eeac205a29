//! End-to-end: `svc run` with real agent and prompt stages against the scripted provider
//! server. Keys are stored with `svc secrets set` into a temp state directory and the
//! endpoint comes from its `settings.toml`; nothing is taken from the environment.
//! Covers prompt and agent stages, routing directives and repair turns, custom output
//! schemas for every provider, usage with tool time, fidelity and threads.

use crate::support;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::llm::{
    reply, streamed, text, tools, Recorded, ScriptedServer, Turn, PROVIDERS,
};
use serde_json::{json, Value};
use svc::internal::llm::{Provider, Usage};

fn svc(args: &[&str]) -> Output {
    // Keys must come from the vault only: a key in the environment must not be used.
    crate::support::cli::svc_with_env(
        args,
        &[
            ("ANTHROPIC_API_KEY", "env-key-must-not-be-used"),
            ("OPENAI_API_KEY", "env-key-must-not-be-used"),
        ],
    )
}

struct Env {
    _tmp: tempfile::TempDir,
    state: PathBuf,
    work: PathBuf,
}

impl Env {
    /// A state dir whose settings point `provider` at the server (no key stored yet).
    fn new(provider: Provider, server: &ScriptedServer) -> Env {
        Env::in_dir(tempfile::tempdir().expect("tempdir"), provider, server)
    }

    /// [`Env::new`] in a given temp directory (`state/` and `work/` inside it).
    fn in_dir(tmp: tempfile::TempDir, provider: Provider, server: &ScriptedServer) -> Env {
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

    /// [`Env::new`] with the provider's conventional key (`test-key`) in the vault.
    fn keyed(provider: Provider, server: &ScriptedServer) -> Env {
        let env = Env::new(provider, server);
        env.set_key(provider.key_names()[0], "test-key");
        env
    }

    fn state(&self) -> &str {
        self.state.to_str().unwrap_or("")
    }

    fn set_key(&self, name: &str, value: &str) {
        let o = svc(&["secrets", "set", name, value, "--state-dir", self.state()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }

    /// Runs `dot` (written to a file) and returns the exit code and the JSON report.
    /// [`Env::run`], asserting the run succeeded; its JSON summary.
    fn run_ok(&self, dot: &str) -> Value {
        let (code, out, err) = self.run(dot);
        assert_eq!(code, 0, "{err}\n{out}");
        out
    }

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
    ScriptedServer::turns(provider, turns, usage)
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
    let env = Env::keyed(Provider::Anthropic, &server);
    let out = env.run_ok(PROMPT_FLOW);
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
    let env = Env::keyed(Provider::Anthropic, &server);
    let out = env.run_ok(
        r#"digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [prompt="Write notes.txt"]
  start -> work -> exit
}"#,
    );
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
    let env = Env::keyed(Provider::Anthropic, &server);
    let out = env.run_ok(
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
    let out = env.run_ok(
        r#"digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  ask [shape=tab, model="gpt-5.4", prompt="Say hi"]
  start -> ask -> exit
}"#,
    );
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
    let env = Env::keyed(Provider::Anthropic, &server);
    let out = env.run_ok(
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
    assert_eq!(
        out["path"],
        json!(["start", "review", "no", "exit"]),
        "{out}"
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    // The repair turn continues the conversation: the first prompt, the model's reply and
    // the correction are all in the second request.
    let users = support::llm::user_texts(Provider::Anthropic, &reqs[1].body);
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

// Fidelity and threads (engine.md 5.3) and the default reasoning effort, against the
// providers' real wire formats.

/// Like [`scripted`], but a step may be an HTTP error status instead of a turn.
fn scripted_steps(provider: Provider, steps: Vec<Result<Turn, u16>>) -> ScriptedServer {
    let usage = Usage {
        input: 100,
        output: 20,
        ..Usage::default()
    };
    ScriptedServer::start_with(move |n, r: &Recorded| {
        let stream = r.body["stream"].as_bool().unwrap_or(false);
        match steps.get(n) {
            Some(Ok(t)) => reply(provider, t, usage, stream),
            Some(Err(status)) => support::llm::Reply::error(
                *status,
                json!({"error": {"type": "timeout_error", "message": "scripted failure"}}),
            ),
            None => support::llm::Reply::error(
                500,
                json!({"error": {"message": "scripted server: script exhausted"}}),
            ),
        }
    })
}

/// The roles of an Anthropic request's messages, in order.
fn roles(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["role"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn compact_fidelity_tells_the_next_stage_what_ran_before() {
    let server = scripted(
        Provider::Anthropic,
        vec![text("An old silent pond"), text("A frog jumps in.")],
    );
    let env = Env::keyed(Provider::Anthropic, &server);
    env.run_ok(
        r#"digraph t { goal="Write a haiku"
  start [shape=Mdiamond]; exit [shape=Msquare]
  draft [shape=tab, prompt="Draft the haiku"]
  polish [shape=tab, prompt="Polish the haiku"]
  start -> draft -> polish -> exit
}"#,
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    // The first stage only has the goal to go on.
    let first = support::llm::user_texts(Provider::Anthropic, &reqs[0].body);
    assert_eq!(first, ["Goal: Write a haiku\n\nDraft the haiku"]);
    // The second gets a fresh conversation whose only message is preamble + prompt: the
    // goal and the first stage with its outcome and model, then its own prompt.
    assert_eq!(roles(&reqs[1].body), ["user"]);
    let second = support::llm::user_texts(Provider::Anthropic, &reqs[1].body).join("\n");
    assert!(second.starts_with("Goal: Write a haiku\n"), "{second}");
    assert!(second.contains("- draft (prompt): succeeded"), "{second}");
    assert!(
        second.contains("claude-sonnet-4-6, tokens 100 in / 20 out"),
        "{second}"
    );
    assert!(second.ends_with("\n\nPolish the haiku"), "{second}");
    // Compact does not carry the earlier reply itself.
    assert!(!second.contains("An old silent pond"), "{second}");
}

const FULL_FLOW: &str = r#"digraph t { default_fidelity="full"
  start [shape=Mdiamond]; exit [shape=Msquare]
  write [prompt="Write notes.txt", thread_id="main"]
  check [prompt="Check your notes", thread_id="THREAD"]
  start -> write -> check -> exit
}"#;

fn write_then_check() -> Vec<Turn> {
    vec![
        tools(&[(
            "toolu_1",
            "write_file",
            json!({"file_path": "notes.txt", "content": "remember the milk\n"}),
        )]),
        text("I wrote notes.txt."),
        text("The notes look right."),
    ]
}

#[test]
fn full_fidelity_continues_the_conversation_of_the_thread() {
    let server = scripted(Provider::Anthropic, write_then_check());
    let env = Env::keyed(Provider::Anthropic, &server);
    let out = env.run_ok(&FULL_FLOW.replace("THREAD", "main"));
    assert_eq!(out["context"]["response.check"], "The notes look right.");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    // `check` continues `write`'s whole conversation: its prompt, the tool call and result,
    // the reply, then its own prompt without any preamble.
    let body = &reqs[2].body;
    assert_eq!(
        roles(body),
        ["user", "assistant", "user", "assistant", "user"],
        "{body}"
    );
    let users = support::llm::user_texts(Provider::Anthropic, body);
    assert!(users[0].ends_with("Write notes.txt"), "{users:?}");
    assert_eq!(users.last().map(String::as_str), Some("Check your notes"));
    let results = support::llm::tool_results(Provider::Anthropic, body);
    assert_eq!(results.len(), 1, "{body}");
    assert_eq!(results[0].0, "toolu_1");
    assert!(body.to_string().contains("I wrote notes.txt."), "{body}");
}

#[test]
fn a_different_thread_starts_a_fresh_conversation_with_a_summary() {
    let server = scripted(Provider::Anthropic, write_then_check());
    let env = Env::keyed(Provider::Anthropic, &server);
    env.run_ok(&FULL_FLOW.replace("THREAD", "review"));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let body = &reqs[2].body;
    assert_eq!(roles(body), ["user"], "{body}");
    assert!(support::llm::tool_results(Provider::Anthropic, body).is_empty());
    // Without a conversation to continue, the stage learns about the run from the
    // summary:high preamble instead.
    let users = support::llm::user_texts(Provider::Anthropic, body);
    let text = users.join("\n");
    assert!(text.contains("Progress: 1 stage completed"), "{text}");
    assert!(text.contains("- write (agent): succeeded"), "{text}");
    assert!(text.contains("files touched: notes.txt"), "{text}");
    assert!(text.contains("> I wrote notes.txt."), "{text}");
    assert!(text.ends_with("\n\nCheck your notes"), "{text}");
}

#[test]
fn a_failed_call_drops_the_thread_and_the_retry_starts_over() {
    let server = scripted_steps(
        Provider::Anthropic,
        vec![
            Ok(text("First answer")),
            Err(408),
            Ok(text("Second answer")),
        ],
    );
    let env = Env::keyed(Provider::Anthropic, &server);
    env.run_ok(
        r#"digraph t { default_fidelity="full"; default_thread="main"
  start [shape=Mdiamond]; exit [shape=Msquare]
  one [shape=tab, prompt="First question"]
  two [shape=tab, prompt="Second question", max_retries=1]
  start -> one -> two -> exit
}"#,
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    // The failed attempt still continued the thread...
    assert_eq!(roles(&reqs[1].body), ["user", "assistant", "user"]);
    // ...and the retry found no conversation: one message, with the summary preamble.
    assert_eq!(roles(&reqs[2].body), ["user"]);
    let text = support::llm::user_texts(Provider::Anthropic, &reqs[2].body).join("\n");
    assert!(text.contains("- one (prompt): succeeded"), "{text}");
    assert!(text.contains("> First answer"), "{text}");
    assert!(text.ends_with("Second question"), "{text}");
}

#[test]
fn reasoning_effort_defaults_to_high_on_the_wire() {
    // OpenAI Responses: `reasoning.effort`.
    let server = scripted(Provider::OpenAi, vec![text("one"), text("two")]);
    let env = Env::new(Provider::OpenAi, &server);
    env.set_key("OPENAI_API_KEY", "test-openai-key");
    env.run_ok(
        r#"digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  plain [shape=tab, model="gpt-5.4", prompt="Think"]
  light [shape=tab, model="gpt-5.4", prompt="Think a little", reasoning_effort="low"]
  start -> plain -> light -> exit
}"#,
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[0].body["reasoning"]["effort"], "high",
        "{}",
        reqs[0].body
    );
    assert_eq!(
        reqs[1].body["reasoning"]["effort"], "low",
        "{}",
        reqs[1].body
    );

    // Anthropic: high effort is a thinking budget of three quarters of max_tokens.
    let server = scripted(Provider::Anthropic, vec![text("Hello")]);
    let env = Env::keyed(Provider::Anthropic, &server);
    env.run_ok(PROMPT_FLOW);
    let body = &server.requests()[0].body;
    let max = body["max_tokens"].as_u64().unwrap_or(0);
    assert!(max > 0, "{body}");
    assert_eq!(body["thinking"]["type"], "enabled", "{body}");
    assert_eq!(body["thinking"]["budget_tokens"], max * 3 / 4, "{body}");
}

// Custom output schemas on LLM stages (SPEC 2.13): `@path` and inline JSON Schema, the
// repair turn through the engine, and the object stored at `output.<node_id>`.

const REPORT_SCHEMA: &str = r#"{"type": "object", "required": ["passed", "failed"],
  "properties": {"passed": {"type": "integer"}, "failed": {"type": "integer"}}}"#;

/// Like [`scripted`], but Gemini's streaming is told by its URL (it has no `stream` field).
fn scripted_any(provider: Provider, turns: Vec<Turn>) -> ScriptedServer {
    let usage = Usage {
        input: 100,
        output: 20,
        ..Usage::default()
    };
    ScriptedServer::start_with(move |n, r: &Recorded| {
        let stream = r.body["stream"].as_bool().unwrap_or(false) || r.url.contains("alt=sse");
        match turns.get(n) {
            Some(t) => reply(provider, t, usage, stream),
            None => support::llm::Reply::error(
                500,
                json!({"error": {"message": "scripted server: script exhausted"}}),
            ),
        }
    })
}

#[test]
fn custom_schemas_store_the_object_at_output_node_id_for_every_provider() {
    for p in PROVIDERS {
        let server = scripted_any(
            p,
            vec![
                text("Here it is: {\"passed\": \"many\", \"failed\": 0}"),
                text("Corrected: {\"passed\": 12, \"failed\": 0}"),
                text("All good.\n{\"ok\": true}"),
            ],
        );
        let env = Env::keyed(p, &server);
        let dir = env.work.parent().unwrap_or(Path::new(".")).join("schemas");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("report.json"), REPORT_SCHEMA).expect("schema");
        let model = support::llm::model_for(p);
        let dot = format!(
            r#"digraph t {{
  start [shape=Mdiamond]; exit [shape=Msquare]
  report [shape=tab, model="{model}", provider="{id}", prompt="Report the test results", output_schema="@schemas/report.json"]
  check [model="{model}", provider="{id}", prompt="Check", output_schema="{{\"type\": \"object\", \"required\": [\"ok\"]}}"]
  start -> report -> check -> exit
}}"#,
            id = p.id()
        );
        let (code, out, err) = env.run(&dot);
        assert_eq!(code, 0, "{p}: {err}\n{out}");
        assert_eq!(
            out["context"]["output.report"],
            json!({"passed": 12, "failed": 0}),
            "{p}: {out}"
        );
        assert_eq!(out["context"]["output.check"], json!({"ok": true}), "{p}");
        let reqs = server.requests();
        assert_eq!(reqs.len(), 3, "{p}");
        // The repair turn continues the conversation: prompt, reply, then the error.
        let users = support::llm::user_texts(p, &reqs[1].body);
        assert_eq!(users.len(), 2, "{p}: {users:?}");
        assert!(
            users[0].ends_with("Report the test results"),
            "{p}: {users:?}"
        );
        assert!(
            users[1].contains("did not satisfy") && users[1].contains("passed"),
            "{p}: {users:?}"
        );
        assert!(
            reqs[1].body.to_string().contains("Here it is"),
            "{p}: the first reply is in the repair request"
        );
        // A prompt stage offers no tools.
        assert!(reqs[0].body.get("tools").is_none(), "{p}");
    }
}

#[test]
fn a_routing_reply_routes_and_updates_the_context_for_every_provider() {
    for p in PROVIDERS {
        let answer = "I reviewed it.\n{\"outcome\": \"succeeded\", \"preferred_next_label\": \"Ship\", \"context_updates\": {\"review.score\": 9}}";
        let server = scripted_any(p, vec![text(answer)]);
        let env = Env::keyed(p, &server);
        let (code, out, err) = env.run(&format!(
            r#"digraph t {{
  start [shape=Mdiamond]; exit [shape=Msquare]
  review [shape=tab, model="{model}", provider="{id}", prompt="Review and route.", output_schema=routing]
  ship [shape=parallelogram, script="true"]
  hold [shape=parallelogram, script="true"]
  start -> review
  review -> hold [label="Hold"]
  review -> ship [label="Ship"]
  ship -> exit; hold -> exit
}}"#,
            model = support::llm::model_for(p),
            id = p.id()
        ));
        assert_eq!(code, 0, "{p}: {err}\n{out}");
        assert_eq!(
            out["path"],
            json!(["start", "review", "ship", "exit"]),
            "{p}"
        );
        assert_eq!(out["context"]["review.score"], 9, "{p}: {out}");
        assert_eq!(server.count(), 1, "{p}: no repair turn for a valid reply");
    }
}

#[test]
fn two_repair_turns_continue_one_conversation_and_bill_every_call() {
    let server = scripted(
        Provider::Anthropic,
        vec![
            text("{\"summary\": \"fine\", \"risk\": \"low\"}"),
            text("Sorry: {\"summary\": \"fine\"}"),
            text("{\"summary\": \"fine\", \"risk\": 2}"),
        ],
    );
    let env = Env::keyed(Provider::Anthropic, &server);
    let schema = r#"{\"type\": \"object\", \"required\": [\"summary\", \"risk\"], \"properties\": {\"summary\": {\"type\": \"string\"}, \"risk\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 5}}}"#;
    let out = env.run_ok(&format!(
        r#"digraph t {{
  start [shape=Mdiamond]; exit [shape=Msquare]
  assess [shape=tab, prompt="Assess.", output_schema="{schema}"]
  start -> assess -> exit
}}"#
    ));
    assert_eq!(out["context"]["output.assess"]["risk"], 2, "{out}");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let users = support::llm::user_texts(Provider::Anthropic, &reqs[1].body);
    assert_eq!(users[0], "Assess.");
    assert!(
        users[1].contains("did not satisfy") && users[1].contains("/risk"),
        "{users:?}"
    );
    assert_eq!(
        support::llm::user_texts(Provider::Anthropic, &reqs[2].body).len(),
        3
    );
    // The stage's usage sums the three calls.
    let events = env.events(out["run_id"].as_str().unwrap_or(""));
    let done = stage_completed(&events, "assess").unwrap_or(&Value::Null);
    assert_eq!(props(done)["usage"]["tokens"]["input"], 300, "{done}");
}

#[test]
fn output_retries_zero_fails_an_llm_stage_on_the_first_invalid_reply() {
    let server = scripted(Provider::Anthropic, vec![text("{\"ok\": \"yes\"}")]);
    let env = Env::keyed(Provider::Anthropic, &server);
    let (code, out, err) = env.run(
        r#"digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  check [shape=tab, prompt="Check", output_retries=0, output_schema="{\"type\": \"object\", \"properties\": {\"ok\": {\"type\": \"boolean\"}}, \"required\": [\"ok\"]}"]
  start -> check -> exit
}"#,
    );
    assert_eq!(code, 1, "{err}\n{out}");
    let e = out["error"].as_str().unwrap_or("");
    assert!(
        e.contains("does not match its output_schema after 0 repair turns"),
        "{e}"
    );
    assert_eq!(server.count(), 1, "no repair turn with output_retries=0");
    assert!(out["context"].get("output.check").is_none(), "{out}");
}

#[test]
fn agent_stage_usage_separates_tool_time_from_inference_time() {
    let server = scripted(
        Provider::Anthropic,
        vec![
            tools(&[("t1", "shell", json!({"command": "sleep 0.3"}))]),
            text("Slept."),
        ],
    );
    let env = Env::keyed(Provider::Anthropic, &server);
    let out = env.run_ok(
        r#"digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [prompt="Sleep a little"]
  start -> work -> exit
}"#,
    );
    let events = env.events(out["run_id"].as_str().unwrap_or(""));
    let done = stage_completed(&events, "work").unwrap_or(&Value::Null);
    let usage = &props(done)["usage"];
    let tool = usage["tool_time_ms"].as_u64().unwrap_or(0);
    assert!((300..5_000).contains(&tool), "{usage}");
    assert!(usage["inference_time_ms"].is_u64(), "{usage}");
}

const SECRET: &str = "sk-live-do-not-leak-0123456789";

/// Every event of the run as text, blob references resolved by `svc events`.
fn all_event_text(env: &Env, run_id: &str) -> String {
    env.events(run_id)
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_command_printing_a_stored_secret_records_the_marker_not_the_value() {
    let server = scripted(Provider::Anthropic, vec![]);
    let env = Env::new(Provider::Anthropic, &server);
    env.set_key("DEPLOY_TOKEN", SECRET);
    env.set_key("SHORT_PIN", "4321");
    let vault = env.state.join("secrets.json");
    let out = env.run_ok(&format!(
        r#"digraph t {{
  start [shape=Mdiamond]; exit [shape=Msquare]
  leak [shape=parallelogram, script="cat '{v}'; grep -o 'sk-live[^\"]*' '{v}' | sed 's/^/token=/' >&2; echo pin 4321"]
  start -> leak -> exit
}}"#,
        v = vault.display()
    ));
    let run_id = out["run_id"].as_str().unwrap_or("");
    let text = all_event_text(&env, run_id);
    assert!(!text.contains(SECRET), "the secret leaked into events");
    let events = env.events(run_id);
    let cmd = events
        .iter()
        .find(|e| kind(e) == "command.completed")
        .unwrap_or(&Value::Null);
    let stdout = props(cmd)["stdout"].as_str().unwrap_or("");
    let stderr = props(cmd)["stderr"].as_str().unwrap_or("");
    assert!(stdout.contains("[REDACTED]"), "{cmd}");
    assert!(stderr.contains("token=[REDACTED]"), "{cmd}");
    // Values shorter than 8 characters are ordinary text.
    assert!(stdout.contains("pin 4321"), "{cmd}");
    let done = stage_completed(&events, "leak").unwrap_or(&Value::Null);
    assert!(done.to_string().contains("[REDACTED]"), "{done}");
    // The report printed by `svc run` hides it too.
    assert!(!out.to_string().contains(SECRET), "{out}");
}

#[test]
fn an_agent_reading_the_vault_records_and_sends_the_marker_not_the_value() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let vault = tmp.path().join("state").join("secrets.json");
    let server = scripted(
        Provider::Anthropic,
        vec![
            tools(&[(
                "toolu_1",
                "shell",
                json!({"command": format!("grep -o 'sk-live[^\"]*' '{}' | sed 's/^/the token is /'", vault.display())}),
            )]),
            tools(&[(
                "toolu_2",
                "write_file",
                json!({"file_path": "token.txt", "content": "token: [REDACTED]\n"}),
            )]),
            text("done"),
        ],
    );
    let env = Env::in_dir(tmp, Provider::Anthropic, &server);
    env.set_key("ANTHROPIC_API_KEY", "test-key");
    env.set_key("DEPLOY_TOKEN", SECRET);
    let out = env.run_ok(
        r#"digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [prompt="Find the token"]
  start -> work -> exit
}"#,
    );
    let run_id = out["run_id"].as_str().unwrap_or("");
    let text = all_event_text(&env, run_id);
    assert!(!text.contains(SECRET), "the secret leaked into events");
    let events = env.events(run_id);
    let shell = events
        .iter()
        .find(|e| kind(e) == "agent.tool.completed")
        .unwrap_or(&Value::Null);
    assert!(
        props(shell)["output"]
            .as_str()
            .unwrap_or("")
            .contains("the token is [REDACTED]"),
        "{shell}"
    );
    // The model never receives the value either.
    let reqs = server.requests();
    for r in &reqs {
        assert!(!r.body.to_string().contains(SECRET), "sent to the model");
    }
    let results = support::llm::tool_results(Provider::Anthropic, &reqs[1].body);
    assert!(
        results[0].1.contains("the token is [REDACTED]"),
        "{results:?}"
    );
    // Writing the marker back would replace the secret in a file: refused.
    let results = support::llm::tool_results(Provider::Anthropic, &reqs[2].body);
    let write = results.iter().find(|r| r.0 == "toolu_2");
    assert!(
        write.is_some_and(|w| w.2 && w.1.contains("secret value")),
        "{results:?}"
    );
    assert!(!env.work.join("token.txt").exists());
}

/// The `agent.message.delta` texts recorded before each `agent.message`, joined, next to
/// that message's text.
fn deltas_per_message(events: &[Value]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut streamed = String::new();
    for e in events {
        match kind(e) {
            "agent.message.delta" => streamed.push_str(props(e)["text"].as_str().unwrap_or("")),
            "agent.message" => out.push((
                std::mem::take(&mut streamed),
                props(e)["text"].as_str().unwrap_or("").to_string(),
            )),
            _ => {}
        }
    }
    out
}

#[test]
fn streamed_text_is_recorded_as_deltas_that_add_up_to_each_message() {
    for provider in [Provider::Anthropic, Provider::OpenAi, Provider::Gemini] {
        let long = "A final answer streamed in pieces. ".repeat(200);
        let server = scripted(
            provider,
            vec![
                Turn::Tools(
                    "Let me write the notes first.".into(),
                    vec![(
                        "call_1".into(),
                        "write_file".into(),
                        json!({"file_path": "n.txt", "content": "x"}),
                    )],
                ),
                text(&long),
            ],
        );
        let env = Env::keyed(provider, &server);
        let (code, out, err) = env.run(&format!(
            r#"digraph t {{
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [model="{}", prompt="Write notes"]
  start -> work -> exit
}}"#,
            support::llm::model_for(provider)
        ));
        assert_eq!(code, 0, "{provider:?}: {err}\n{out}");
        assert!(streamed(&server.requests()[0]), "{provider:?}");
        let events = env.events(out["run_id"].as_str().unwrap_or(""));
        let pairs = deltas_per_message(&events);
        assert_eq!(pairs.len(), 2, "{provider:?}: {pairs:?}");
        for (streamed, message) in &pairs {
            assert_eq!(streamed, message, "{provider:?}");
        }
        assert_eq!(pairs[1].1, long, "{provider:?}");
        let deltas = events
            .iter()
            .filter(|e| kind(e) == "agent.message.delta")
            .count();
        assert!(deltas >= 2, "{provider:?}: {deltas}");
        let first = events
            .iter()
            .find(|e| kind(e) == "agent.message.delta")
            .unwrap_or(&Value::Null);
        assert!(first["node_id"] == "work" || first.to_string().contains("\"work\""));
        assert_eq!(props(first)["visit"], 1, "{first}");
    }
}

#[test]
fn a_streamed_prompt_reply_is_recorded_as_deltas() {
    let server = scripted(Provider::Anthropic, vec![text("Hello from the stream")]);
    let env = Env::keyed(Provider::Anthropic, &server);
    let out = env.run_ok(PROMPT_FLOW);
    let events = env.events(out["run_id"].as_str().unwrap_or(""));
    let streamed: String = events
        .iter()
        .filter(|e| kind(e) == "agent.message.delta")
        .filter_map(|e| props(e)["text"].as_str())
        .collect();
    assert_eq!(streamed, "Hello from the stream");
    // The deltas come before the stage ends.
    let last_delta = events
        .iter()
        .rposition(|e| kind(e) == "agent.message.delta");
    let done = events
        .iter()
        .position(|e| kind(e) == "stage.completed" && e.to_string().contains("\"ask\""));
    assert!(last_delta < done, "{last_delta:?} {done:?}");
}

#[test]
fn an_agent_that_calls_tools_forever_stops_at_max_turns_partially_succeeded() {
    // Every reply asks for another tool call (a different file each time).
    let server = ScriptedServer::start_with(|n, r: &Recorded| {
        let turn = tools(&[(
            &format!("toolu_{n}"),
            "write_file",
            json!({"file_path": format!("f{n}.txt"), "content": "x"}),
        )]);
        reply(Provider::Anthropic, &turn, Usage::default(), streamed(r))
    });
    let env = Env::keyed(Provider::Anthropic, &server);
    let out = env.run_ok(
        r#"digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [prompt="Keep going", max_turns=3]
  check [shape=parallelogram, script="echo limited"]
  start -> work
  work -> check [condition="outcome=partially_succeeded"]
  work -> exit
  check -> exit
}"#,
    );
    assert_eq!(server.count(), 3, "three model calls, then the limit");
    assert_eq!(out["reason"], "partial_success", "{out}");
    assert_eq!(out["path"], json!(["start", "work", "check", "exit"]));
    let events = env.events(out["run_id"].as_str().unwrap_or(""));
    let limit = events
        .iter()
        .find(|e| kind(e) == "agent.turn.limit")
        .unwrap_or(&Value::Null);
    assert_eq!(props(limit)["max_turns"], 3, "{limit}");
    let done = stage_completed(&events, "work").unwrap_or(&Value::Null);
    assert_eq!(props(done)["status"], "partially_succeeded", "{done}");
    assert!(
        props(done)["notes"]
            .as_str()
            .unwrap_or("")
            .contains("max_turns=3"),
        "{done}"
    );
    // The tools of the three turns ran.
    assert!(env.work.join("f2.txt").exists());
}

/// `tool_hooks` from the workflow file (graph default, node override) through `svc run`: the
/// pre hook sees the call in its environment and refuses writes to `secret.txt`; the model
/// is told why; the refusal is an `agent.tool_hook.failed` event.
#[test]
fn tool_hooks_from_the_workflow_run_around_agent_tool_calls() {
    let server = scripted(
        Provider::Anthropic,
        vec![
            tools(&[
                (
                    "toolu_1",
                    "write_file",
                    json!({"file_path": "notes.txt", "content": "ok\n"}),
                ),
                (
                    "toolu_2",
                    "write_file",
                    json!({"file_path": "secret.txt", "content": "no\n"}),
                ),
            ]),
            text("Done; secret.txt was refused."),
        ],
    );
    let env = Env::keyed(Provider::Anthropic, &server);
    let out = env.run_ok(
        r#"digraph t {
  graph [tool_hooks.post="echo post $SVC_TOOL_CALL_ID $SVC_TOOL_IS_ERROR >> ../hooks.log"]
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [prompt="Write the notes", tool_hooks.pre="echo pre $SVC_TOOL_NAME $SVC_TOOL_CALL_ID >> ../hooks.log; case \"$SVC_TOOL_ARGUMENTS\" in *secret.txt*) echo secrets stay unwritten >&2; exit 1;; esac"]
  start -> work -> exit
}"#,
    );
    let log = std::fs::read_to_string(env.work.join("../hooks.log")).unwrap_or_default();
    assert_eq!(
        log,
        "pre write_file toolu_1\npost toolu_1 false\npre write_file toolu_2\npost toolu_2 true\n"
    );
    assert!(env.work.join("notes.txt").exists());
    assert!(
        !env.work.join("secret.txt").exists(),
        "the refused call ran"
    );
    let reqs = server.requests();
    let results = support::llm::tool_results(Provider::Anthropic, &reqs[1].body);
    assert!(
        results[1].2 && results[1].1.contains("secrets stay unwritten"),
        "{results:?}"
    );
    let events = env.events(out["run_id"].as_str().unwrap_or(""));
    let failed: Vec<&Value> = events
        .iter()
        .filter(|e| kind(e) == "agent.tool_hook.failed")
        .collect();
    assert_eq!(failed.len(), 1, "{events:?}");
    assert_eq!(props(failed[0])["hook"], "pre");
    assert_eq!(props(failed[0])["tool_call_id"], "toolu_2");
    assert_eq!(props(failed[0])["exit_code"], 1);
}

/// `[run.agent] mcp_servers` in the state directory's settings gives `svc run` its MCP
/// servers: frozen into `run.created` (a view, no values), offered to every agent node or to
/// the subset its `mcp_servers` attribute names (`""`: none); the model's call reaches the
/// server with its arguments and the server's answer reaches the model.
#[test]
fn svc_run_takes_its_mcp_servers_from_the_settings_and_nodes_pick_a_subset() {
    let server = scripted(
        Provider::Anthropic,
        vec![
            tools(&[(
                "toolu_1",
                "mcp__echo__echo",
                json!({"text": "from the model"}),
            )]),
            text("The server echoed."),
            text("No tools here."),
        ],
    );
    let env = Env::keyed(Provider::Anthropic, &server);
    let log = env.state.join("echo.log");
    let settings = env.state.join("settings.toml");
    let mut toml = std::fs::read_to_string(&settings).unwrap_or_default();
    toml.push_str(&format!(
        "[run.agent]\nmcp_servers = [{{ id = \"echo\", transport = {{ type = \"stdio\", \
         command = [\"{}\", \"{}\", \"ok\", \"{}\"], env = {{ ECHO_TOKEN = \"plain\" }} }} }}]\n",
        support::mcp::python(),
        support::mcp::script("stdio_server.py"),
        log.display()
    ));
    std::fs::write(&settings, toml).expect("write settings");
    let out = env.run_ok(
        r#"digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [prompt="Echo something"]
  quiet [prompt="Say done", mcp_servers=""]
  start -> work -> quiet -> exit
}"#,
    );
    assert_eq!(out["context"]["response.work"], "The server echoed.");
    let calls: Vec<Value> = support::mcp::logged(&log)
        .into_iter()
        .filter(|m| m["method"] == "tools/call")
        .collect();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["params"]["name"], "echo");
    assert_eq!(calls[0]["params"]["arguments"]["text"], "from the model");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let names = |b: &Value| -> Vec<String> {
        b["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(String::from))
            .collect()
    };
    assert!(names(&reqs[0].body).contains(&"mcp__echo__echo".to_string()));
    assert!(
        !names(&reqs[2].body).iter().any(|n| n.starts_with("mcp__")),
        "a node with mcp_servers=\"\" was offered MCP tools"
    );
    let results = support::llm::tool_results(Provider::Anthropic, &reqs[1].body);
    assert_eq!(results[0].1, "echo: from the model", "{results:?}");
    let events = env.events(out["run_id"].as_str().unwrap_or(""));
    let created = events
        .iter()
        .find(|e| kind(e) == "run.created")
        .unwrap_or(&Value::Null);
    let frozen = &props(created)["mcp_servers"];
    assert_eq!(frozen[0]["id"], "echo", "{created}");
    assert_eq!(frozen[0]["transport"]["env_keys"], json!(["ECHO_TOKEN"]));
    assert!(!created.to_string().contains("plain"), "{created}");
    let ready: Vec<&Value> = events
        .iter()
        .filter(|e| kind(e) == "agent.mcp.ready")
        .collect();
    assert_eq!(ready.len(), 1, "only `work` starts the server: {ready:?}");
}
