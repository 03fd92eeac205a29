//! The ACP backend against a tiny scripted ACP agent (a Python script speaking JSON-RPC
//! over stdio): initialize → session/new{cwd} → session/prompt, session/update → events,
//! permission and fs requests answered through the sandbox, session/cancel on cancel, a
//! killed agent that ignores cancel, an agent that dies, steering as a follow-up prompt, and
//! a refusal. End to end: `backend=acp` nodes in `svc run` (events, files, `--dry-run`,
//! validation refusing `output_schema`, an `acp.config` file's args and env reaching the
//! agent, `max_turn_requests` ending the stage partially succeeded) and in the server
//! (success, cancel stops the agent).

use std::path::Path;
use std::time::{Duration, Instant};
use svc::internal::test_tools::{require, Tool};

use serde_json::Value;
use svc::internal::agent::acp::{run_acp, run_stage, AcpClient, AcpConfig, AcpError};
use svc::internal::agent::{AgentEvent, SteerLocation, Steering};
use svc::internal::base::cancel::CancelToken;
use svc::internal::sandbox::Sandbox;

const AGENT: &str = r#"
import sys, json, os
LOG = sys.argv[1]
with open(os.path.join(os.path.dirname(LOG), "agent.pid"), "w") as f:
    f.write(str(os.getpid()))
with open(os.path.join(os.path.dirname(LOG), "agent.launch.json"), "w") as f:
    json.dump({"argv": sys.argv[1:], "mode": os.environ.get("ACP_TEST_MODE"),
               "anthropic_key": os.environ.get("ANTHROPIC_API_KEY")}, f)
def log(m):
    with open(LOG, "a") as f:
        f.write(json.dumps(m) + "\n")
def send(m):
    sys.stdout.write(json.dumps(m) + "\n")
    sys.stdout.flush()
def read():
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    m = json.loads(line)
    log(m)
    return m
def update(sid, u):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": u}})
def call(i, method, params):
    send({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
    return read()
print("not json: a stray line", flush=True)
while True:
    m = read()
    meth = m.get("method")
    if meth == "initialize":
        caps = json.loads(os.environ.get("ACP_TEST_CAPS", "{}"))
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": 1, "agentCapabilities": caps, "authMethods": []}})
    elif meth == "session/new":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"sessionId": "sess-1"}})
    elif meth == "session/prompt":
        sid = m["params"]["sessionId"]
        text = m["params"]["prompt"][0]["text"]
        if "stubborn" in text:
            update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "ignoring you"}})
            while True:
                read()
        if "quick" in text:
            update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "first answer"}})
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"stopReason": "end_turn"}})
            continue
        if "limit" in text:
            update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "partial work"}})
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"stopReason": "max_turn_requests"}})
            continue
        if "refuse" in text:
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"stopReason": "refusal"}})
            continue
        if "wait" in text:
            update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "working"}})
            while True:
                c = read()
                if c.get("method") == "session/cancel":
                    send({"jsonrpc": "2.0", "id": m["id"], "result": {"stopReason": "cancelled"}})
                    break
            continue
        with open("direct.txt", "w") as f:
            f.write(os.getcwd())
        update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Writing "}})
        update(sid, {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}})
        update(sid, {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Write notes", "kind": "edit", "status": "pending", "rawInput": {"path": "notes.txt"}})
        call(1000, "session/request_permission", {"sessionId": sid, "toolCall": {"toolCallId": "t1"},
             "options": [{"optionId": "no", "name": "Reject", "kind": "reject_once"}, {"optionId": "yes", "name": "Allow", "kind": "allow_once"}]})
        call(1001, "fs/write_text_file", {"sessionId": sid, "path": "notes.txt", "content": "from acp\nline 2\n"})
        call(1002, "fs/read_text_file", {"sessionId": sid, "path": "notes.txt", "line": 2, "limit": 1})
        call(1003, "fs/read_text_file", {"sessionId": sid, "path": "../outside.txt"})
        call(1004, "terminal/create", {"sessionId": sid, "command": "ls"})
        update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
                     "content": [{"type": "content", "content": {"type": "text", "text": "wrote notes.txt"}}]})
        update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "done."}})
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"stopReason": "end_turn"}})
"#;

fn setup() -> (tempfile::TempDir, std::path::PathBuf, String) {
    let outer = tempfile::tempdir().expect("tempdir");
    let work = outer.path().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    let script = outer.path().join("agent.py");
    std::fs::write(&script, AGENT).expect("write");
    let log = outer.path().join("log.jsonl");
    let cmd = format!("python3 {} {}", script.display(), log.display());
    (outer, work, cmd)
}

/// True while the agent process runs (any process whose command line names this test's
/// `agent.py`: the pid the agent writes is its own namespace's inside a run's holder, so it
/// is not looked up); waits generously for it to go.
fn agent_alive(outer: &Path) -> bool {
    if !outer.join("agent.pid").exists() {
        return false;
    }
    let script = outer.join("agent.py").display().to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let alive = !crate::support::server::processes_with(&script).is_empty();
        if !alive || Instant::now() > deadline {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn log_lines(outer: &Path) -> Vec<Value> {
    std::fs::read_to_string(outer.join("log.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn a_prompt_round_trip_with_updates_permissions_and_fs() {
    let (outer, work, cmd) = setup();
    let mut events = Vec::new();
    let out = run_acp(
        AcpConfig::new(&cmd),
        Sandbox::new(&work).expect("sb"),
        "Write the notes.",
        &CancelToken::new(),
        &mut |e| events.push(e),
    )
    .expect("acp run");
    assert_eq!(out.text, "Writing done.");
    assert_eq!(out.stop_reason, "end_turn");
    assert_eq!(out.tool_calls, 1);
    assert_eq!(out.files_touched, vec!["notes.txt"]);
    assert_eq!(
        std::fs::read_to_string(work.join("notes.txt")).expect("r"),
        "from acp\nline 2\n"
    );
    // The agent runs in the working directory.
    let root = work.canonicalize().expect("canon");
    assert_eq!(
        std::fs::read_to_string(work.join("direct.txt")).expect("r"),
        root.display().to_string()
    );
    assert!(
        !agent_alive(outer.path()),
        "the agent is stopped afterwards"
    );

    let kinds: Vec<&str> = events.iter().map(|e| e.kind()).collect();
    assert_eq!(
        kinds,
        vec![
            "agent.session.started",
            "agent.message.delta",
            "agent.tool.started",
            "agent.tool.completed",
            "agent.message.delta",
            "agent.message",
            "agent.session.ended"
        ]
    );
    assert_eq!(events[0].properties()["backend"], "acp");
    assert_eq!(events[2].properties()["tool_name"], "Write notes");
    assert_eq!(events[2].properties()["arguments"]["path"], "notes.txt");
    assert!(
        matches!(&events[3], AgentEvent::ToolCompleted { output, is_error: false, .. } if output == "wrote notes.txt")
    );

    let log = log_lines(outer.path());
    assert_eq!(log[0]["method"], "initialize");
    assert_eq!(log[0]["jsonrpc"], "2.0");
    assert_eq!(log[0]["params"]["protocolVersion"], 1);
    assert_eq!(
        log[0]["params"]["clientCapabilities"]["fs"]["writeTextFile"],
        true
    );
    assert_eq!(log[1]["method"], "session/new");
    let root = work.canonicalize().expect("canon");
    assert_eq!(log[1]["params"]["cwd"], root.display().to_string());
    assert_eq!(log[1]["params"]["mcpServers"], serde_json::json!([]));
    assert_eq!(log[2]["method"], "session/prompt");
    assert_eq!(log[2]["params"]["sessionId"], "sess-1");
    assert_eq!(log[2]["params"]["prompt"][0]["text"], "Write the notes.");
    // Replies to the agent's requests, in order.
    assert_eq!(log[3]["id"], 1000);
    assert_eq!(log[3]["result"]["outcome"]["optionId"], "yes");
    assert_eq!(log[4]["id"], 1001);
    assert!(log[4].get("error").is_none());
    assert_eq!(log[5]["result"]["content"], "line 2\n");
    assert!(log[6]["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("outside"));
    assert_eq!(log[7]["error"]["code"], -32601);
}

#[test]
fn cancel_sends_session_cancel() {
    let (outer, work, cmd) = setup();
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        c2.cancel("user");
    });
    let mut client =
        AcpClient::start(AcpConfig::new(&cmd), Sandbox::new(&work).expect("sb")).expect("start");
    client.new_session().expect("session");
    let r = client.prompt("please wait", &cancel, &mut |_| {});
    assert!(matches!(r, Err(AcpError::Cancelled)), "{r:?}");
    client.shutdown();
    let log = log_lines(outer.path());
    let cancel_msg = log
        .iter()
        .find(|m| m["method"] == "session/cancel")
        .expect("session/cancel sent");
    assert_eq!(cancel_msg["params"]["sessionId"], "sess-1");
    assert!(
        cancel_msg.get("id").is_none(),
        "session/cancel is a notification"
    );
}

#[test]
fn an_agent_that_ignores_cancel_is_killed_after_the_grace() {
    let (outer, work, cmd) = setup();
    let cancel = CancelToken::new();
    let cfg = AcpConfig {
        cancel_grace: Duration::from_millis(300),
        ..AcpConfig::new(&cmd)
    };
    let c2 = cancel.clone();
    let r = run_acp(
        cfg,
        Sandbox::new(&work).expect("sb"),
        "stubborn",
        &cancel,
        // Cancel once the agent is busy with the prompt.
        &mut |e| {
            if matches!(e, AgentEvent::TextDelta { .. }) {
                c2.cancel("user");
            }
        },
    );
    assert!(matches!(r, Err(AcpError::Cancelled)), "{r:?}");
    let log = log_lines(outer.path());
    assert!(log.iter().any(|m| m["method"] == "session/cancel"));
    assert!(!agent_alive(outer.path()), "the agent is still running");
}

#[test]
fn a_cancel_before_the_session_exists_starts_nothing() {
    let (outer, work, cmd) = setup();
    let cancel = CancelToken::new();
    cancel.cancel("now");
    let r = run_acp(
        AcpConfig::new(&cmd),
        Sandbox::new(&work).expect("sb"),
        "hello",
        &cancel,
        &mut |_| {},
    );
    assert!(matches!(r, Err(AcpError::Cancelled)), "{r:?}");
    assert!(log_lines(outer.path()).is_empty());
}

#[test]
fn an_agent_that_dies_reports_its_stderr() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = AcpClient::start(
        AcpConfig::new("echo 'missing API key' >&2; exit 3"),
        Sandbox::new(dir.path()).expect("sb"),
    );
    let e = r.expect_err("must fail");
    let msg = e.to_string();
    assert!(
        msg.contains("exited") && msg.contains("missing API key"),
        "{msg}"
    );
    assert_eq!(e.failure_class(), "transient_infra");
}

#[test]
fn guidance_during_a_turn_becomes_a_follow_up_prompt() {
    let (outer, work, cmd) = setup();
    let steering = Steering::new();
    let offered = steering.clone();
    let mut accepted = None;
    let mut events = Vec::new();
    let out = run_stage(
        AcpConfig::new(&cmd),
        Sandbox::new(&work).expect("sb"),
        "quick question",
        &steering,
        &CancelToken::new(),
        &mut |e| {
            if matches!(e, AgentEvent::TextDelta { .. }) && accepted.is_none() {
                let loc = SteerLocation {
                    file: "notes.txt".into(),
                    line: None,
                };
                accepted = Some(offered.offer("Also write the notes.", Some(loc)).is_ok());
            }
            events.push(e);
        },
    )
    .expect("acp stage");
    assert_eq!(accepted, Some(true));
    let log = log_lines(outer.path());
    let prompts: Vec<&Value> = log
        .iter()
        .filter(|m| m["method"] == "session/prompt")
        .collect();
    assert_eq!(prompts.len(), 2);
    let follow_up = prompts[1]["params"]["prompt"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(
        follow_up.contains("notes.txt") && follow_up.contains("Also write the notes."),
        "{follow_up}"
    );
    assert_eq!(prompts[1]["params"]["sessionId"], "sess-1");
    // The follow-up's answer is the stage's text; the file it wrote counts.
    assert_eq!(out.text, "Writing done.");
    assert_eq!(out.files_touched, vec!["notes.txt"]);
    let injected: Vec<&AgentEvent> = events
        .iter()
        .filter(|e| e.kind() == "agent.steering.injected")
        .collect();
    assert_eq!(injected.len(), 1);
    assert_eq!(injected[0].properties()["text"], follow_up);
    assert_eq!(injected[0].properties()["location"]["file"], "notes.txt");
    assert!(!steering.is_active());
}

#[test]
fn a_refusal_fails_the_stage() {
    let (_outer, work, cmd) = setup();
    let r = run_acp(
        AcpConfig::new(&cmd),
        Sandbox::new(&work).expect("sb"),
        "please refuse",
        &CancelToken::new(),
        &mut |_| {},
    );
    let e = r.expect_err("refused");
    assert!(matches!(e, AcpError::Refused), "{e:?}");
    assert_eq!(e.failure_class(), "deterministic");
}

// ---- End to end: `backend=acp` agent nodes in `svc run` and the server. ----

use crate::support::cli::svc;

fn acp_flow(cmd: &str, prompt: &str, extra: &str) -> String {
    format!(
        r#"digraph acp {{
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [shape=box, backend=acp, acp.command={}, prompt={}{extra}]
  start -> work -> exit
}}"#,
        serde_json::to_string(cmd).unwrap_or_default(),
        serde_json::to_string(prompt).unwrap_or_default(),
    )
}

fn kinds_of(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn svc_run_runs_an_acp_agent_stage_in_the_working_directory() {
    let (outer, work, cmd) = setup();
    // No provider and no key anywhere: an ACP stage needs none.
    let state = outer.path().join("state");
    let flow = outer.path().join("flow.dot");
    std::fs::write(&flow, acp_flow(&cmd, "Write the notes.", "")).expect("flow");
    let path = |p: &Path| p.to_str().unwrap_or("").to_string();
    let o = svc(&[
        "run",
        &path(&flow),
        "--state-dir",
        &path(&state),
        "--workdir",
        &path(&work),
        "--format",
        "json",
    ]);
    let out: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| Value::String("not JSON".into()));
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(out["status"], "succeeded");
    assert_eq!(out["context"]["response.work"], "Writing done.");
    // The agent wrote through the client (fs/write_text_file) and by itself, in the workdir.
    assert_eq!(
        std::fs::read_to_string(work.join("notes.txt")).expect("notes.txt"),
        "from acp\nline 2\n"
    );
    let root = work.canonicalize().expect("canon");
    assert_eq!(
        std::fs::read_to_string(work.join("direct.txt")).expect("direct.txt"),
        root.display().to_string()
    );
    assert_eq!(
        log_lines(outer.path())[1]["params"]["cwd"],
        root.display().to_string()
    );
    assert!(
        !agent_alive(outer.path()),
        "the agent is stopped afterwards"
    );

    let run_id = out["run_id"].as_str().unwrap_or("");
    let o = svc(&[
        "events",
        run_id,
        "--format",
        "jsonl",
        "--state-dir",
        &path(&state),
    ]);
    let events: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let on_work: Vec<&Value> = events.iter().filter(|e| e["node_id"] == "work").collect();
    let agent: Vec<&str> = on_work
        .iter()
        .filter_map(|e| e["event"].as_str())
        .filter(|k| k.starts_with("agent.") && *k != "agent.message.delta")
        .collect();
    assert_eq!(
        agent,
        vec![
            "agent.session.started",
            "agent.tool.started",
            "agent.tool.completed",
            "agent.message",
            "agent.session.ended"
        ],
        "{:?}",
        kinds_of(&events)
    );
    let find = |k: &str| {
        on_work
            .iter()
            .find(|e| e["event"] == k)
            .map(|e| e["properties"].clone())
            .unwrap_or(Value::Null)
    };
    assert_eq!(find("agent.session.started")["backend"], "acp");
    assert_eq!(find("agent.tool.started")["tool_name"], "Write notes");
    assert_eq!(find("agent.tool.completed")["output"], "wrote notes.txt");
    assert_eq!(find("agent.message")["text"], "Writing done.");
    // The agent's message chunks are recorded as deltas that add up to the message.
    let streamed: String = on_work
        .iter()
        .filter(|e| e["event"] == "agent.message.delta")
        .filter_map(|e| e["properties"]["text"].as_str())
        .collect();
    assert_eq!(streamed, "Writing done.");
    let done = find("stage.completed");
    assert_eq!(done["response"], "Writing done.");
    assert_eq!(done["files_touched"], serde_json::json!(["notes.txt"]));
    assert_eq!(done["usage"]["provider"], "acp");
}

/// Runs `flow` (written next to the agent script) with `svc run --format json`.
fn svc_run(outer: &Path, work: &Path, flow: &str) -> (bool, Value, String) {
    let file = outer.join("flow.dot");
    std::fs::write(&file, flow).expect("flow");
    let path = |p: &Path| p.to_str().unwrap_or("").to_string();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_svc"))
        .args([
            "run",
            &path(&file),
            "--state-dir",
            &path(&outer.join("state")),
            "--workdir",
            &path(work),
            "--format",
            "json",
        ])
        // Provider keys in svc's environment never reach an agent.
        .env("ANTHROPIC_API_KEY", "must-not-reach-the-agent")
        .output()
        .expect("run svc");
    let out = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (
        o.status.success(),
        out,
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn svc_run_launches_the_agent_described_by_acp_config() {
    let (outer, work, _) = setup();
    let script = outer.path().join("agent.py");
    let log = outer.path().join("log.jsonl");
    std::fs::create_dir(outer.path().join("agents")).expect("mkdir");
    let config = serde_json::json!({
        "command": "python3",
        "args": [script, log, "--flag", "two words", "it's"],
        "env": {"ACP_TEST_MODE": "from acp.config"},
    });
    std::fs::write(outer.path().join("agents/writer.json"), config.to_string()).expect("config");
    let (ok, out, err) = svc_run(
        outer.path(),
        &work,
        r#"digraph acp {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [backend=acp, acp.config="@agents/writer.json", prompt="Write the notes."]
  start -> work -> exit
}"#,
    );
    assert!(ok, "{out}\n{err}");
    assert_eq!(out["context"]["response.work"], "Writing done.");
    let launch: Value = serde_json::from_str(
        &std::fs::read_to_string(outer.path().join("agent.launch.json")).expect("launch"),
    )
    .expect("json");
    // Every argument arrived as one word, quotes and spaces intact; the env was added.
    assert_eq!(
        launch["argv"],
        serde_json::json!([log, "--flag", "two words", "it's"])
    );
    assert_eq!(launch["mode"], "from acp.config");
    assert_eq!(launch["anthropic_key"], Value::Null);
    assert_eq!(log_lines(outer.path())[2]["method"], "session/prompt");
    assert_eq!(
        std::fs::read_to_string(work.join("notes.txt")).expect("notes.txt"),
        "from acp\nline 2\n"
    );
}

#[test]
fn an_acp_agent_out_of_turn_requests_ends_the_stage_partially_succeeded() {
    let (outer, work, cmd) = setup();
    let (ok, out, err) = svc_run(
        outer.path(),
        &work,
        &acp_flow(&cmd, "Work until the limit.", ""),
    );
    assert!(ok, "{out}\n{err}");
    assert_eq!(out["reason"], "partial_success", "{out}");
    assert_eq!(out["context"]["response.work"], "partial work");
}

#[test]
fn dry_run_simulates_acp_stages() {
    let (outer, work, cmd) = setup();
    let flow = outer.path().join("flow.dot");
    std::fs::write(&flow, acp_flow(&cmd, "Write the notes.", "")).expect("flow");
    let path = |p: &Path| p.to_str().unwrap_or("").to_string();
    let o = svc(&[
        "run",
        &path(&flow),
        "--dry-run",
        "--state-dir",
        &path(&outer.path().join("state")),
        "--workdir",
        &path(&work),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(log_lines(outer.path()).is_empty(), "the agent was started");
    assert!(!work.join("notes.txt").exists());
}

#[test]
fn acp_with_output_schema_is_refused_before_running() {
    let (outer, work, cmd) = setup();
    let flow = outer.path().join("flow.dot");
    std::fs::write(
        &flow,
        acp_flow(&cmd, "Write the notes.", ", output_schema=routing"),
    )
    .expect("flow");
    let path = |p: &Path| p.to_str().unwrap_or("").to_string();
    let o = svc(&["validate", &path(&flow)]);
    assert_eq!(o.status.code(), Some(1), "validation errors exit 1");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        all.contains("node `work`: backend=acp does not support output_schema"),
        "{all}"
    );
    let o = svc(&[
        "run",
        &path(&flow),
        "--state-dir",
        &path(&outer.path().join("state")),
        "--workdir",
        &path(&work),
    ]);
    assert_eq!(o.status.code(), Some(2), "a refused workflow exits 2");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("backend=acp does not support output_schema"),
        "{err}"
    );
    assert!(log_lines(outer.path()).is_empty(), "the agent was started");
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn the_server_runs_acp_stages_and_cancel_stops_the_agent() {
    require(Tool::Git);
    use crate::support::server::{assert_error, package, wait_for, Server};
    let s = Server::start();
    let create = |dot: &str| -> String {
        let r = s.post(
            "/api/v1/runs",
            &serde_json::json!({ "workflow": package(dot) }).to_string(),
        );
        assert_eq!(r.status, 201, "{}", r.text());
        let id = r.json()["id"].as_str().unwrap_or("").to_string();
        let st = s.post(&format!("/api/v1/runs/{id}/start"), "");
        assert_eq!(st.status, 200, "{}", st.text());
        id
    };
    let status = |id: &str| -> Value {
        s.get(&format!("/api/v1/runs/{id}")).json()["lifecycle"]["status"].clone()
    };
    let events = |id: &str| -> Vec<Value> {
        s.get(&format!("/api/v1/runs/{id}/events?limit=1000"))
            .json()["data"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };

    // A run that succeeds: the agent works in the run's workspace.
    let (outer, _work, cmd) = setup();
    let id = create(&acp_flow(&cmd, "Write the notes.", ""));
    let st = wait_for(60, "the ACP run to finish", || {
        let st = status(&id);
        (st["kind"] == "succeeded" || st["kind"] == "failed").then_some(st)
    });
    assert_eq!(st["kind"], "succeeded", "{:?}", events(&id));
    let scratch = s.path().join("workspaces").join(&id);
    assert_eq!(
        std::fs::read_to_string(scratch.join("notes.txt")).expect("notes.txt"),
        "from acp\nline 2\n"
    );
    let kinds = kinds_of(&events(&id));
    assert!(
        kinds.iter().any(|k| k == "agent.tool.completed"),
        "{kinds:?}"
    );
    assert!(!agent_alive(outer.path()));

    // A run cancelled while its agent works: session/cancel, and no agent left behind.
    let (outer, _work, cmd) = setup();
    let id = create(&acp_flow(&cmd, "please wait for me", ""));
    wait_for(60, "the ACP session to start", || {
        events(&id)
            .iter()
            .any(|e| e["event"] == "agent.session.started")
            .then_some(())
    });
    // Steering an ACP stage is accepted (delivered as a follow-up prompt after the turn).
    let r = s.post(
        &format!("/api/v1/runs/{id}/steer"),
        r#"{"guidance": "hurry up"}"#,
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let r = s.post(&format!("/api/v1/runs/{id}/cancel"), "");
    assert_eq!(r.status, 200, "{}", r.text());
    let st = wait_for(60, "the cancelled run to fail", || {
        let st = status(&id);
        (st["kind"] == "failed").then_some(st)
    });
    assert_eq!(st["reason"], "cancelled", "{st}");
    let log = log_lines(outer.path());
    let cancel = log
        .iter()
        .find(|m| m["method"] == "session/cancel")
        .unwrap_or_else(|| panic!("no session/cancel in {log:?}"));
    assert_eq!(cancel["params"]["sessionId"], "sess-1");
    assert!(!agent_alive(outer.path()), "the agent outlived the run");
    assert_error(
        &s.post(&format!("/api/v1/runs/{id}/steer"), r#"{"guidance": "x"}"#),
        409,
    );
}

fn mcp_server(
    id: &str,
    transport: Value,
    required: bool,
    values: &[(&str, &str)],
) -> svc::internal::agent::acp::AcpMcpServer {
    let mut def: svc::internal::mcp::ServerDef =
        serde_json::from_value(serde_json::json!({"id": id, "transport": transport})).expect("def");
    def.required = required;
    svc::internal::agent::acp::AcpMcpServer {
        def,
        values: values
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

#[test]
fn mcp_servers_reach_the_agent_in_session_new_in_the_forms_it_supports() {
    let (outer, work, cmd) = setup();
    let mut config = AcpConfig::new(&cmd);
    config.env = vec![(
        "ACP_TEST_CAPS".into(),
        r#"{"mcpCapabilities": {"http": true}}"#.into(),
    )];
    config.mcp_servers = vec![
        mcp_server(
            "git",
            serde_json::json!({"type": "stdio", "command": ["mcp-server-git", "--repository", "."]}),
            false,
            &[("GIT_TOKEN", "expanded-value")],
        ),
        mcp_server(
            "tracker",
            serde_json::json!({"type": "http", "url": "https://tracker.example/mcp"}),
            false,
            &[("Authorization", "Bearer t")],
        ),
        mcp_server(
            "legacy",
            serde_json::json!({"type": "http", "url": "https://old.example/sse", "protocol": "sse"}),
            false,
            &[],
        ),
    ];
    let mut events = Vec::new();
    run_stage(
        config,
        Sandbox::new(&work).expect("sb"),
        "quick",
        &Steering::new(),
        &CancelToken::new(),
        &mut |e| events.push(e),
    )
    .expect("acp stage");
    let log = log_lines(outer.path());
    assert_eq!(log[1]["method"], "session/new");
    assert_eq!(
        log[1]["params"]["mcpServers"],
        serde_json::json!([
            {"name": "git", "command": "mcp-server-git", "args": ["--repository", "."],
             "env": [{"name": "GIT_TOKEN", "value": "expanded-value"}]},
            {"type": "http", "name": "tracker", "url": "https://tracker.example/mcp",
             "headers": [{"name": "Authorization", "value": "Bearer t"}]}
        ])
    );
    // The SSE server the agent cannot take is never silent.
    let failed: Vec<Value> = events
        .iter()
        .filter(|e| e.kind() == "agent.mcp.failed")
        .map(|e| e.properties())
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["server"], "legacy");
    assert!(
        failed[0]["error"].as_str().unwrap().contains("over SSE"),
        "{failed:?}"
    );

    // A required server the agent cannot take fails the stage before any prompt.
    let (outer, work, cmd) = setup();
    let mut config = AcpConfig::new(&cmd);
    config.mcp_servers = vec![mcp_server(
        "tracker",
        serde_json::json!({"type": "http", "url": "https://tracker.example/mcp"}),
        true,
        &[],
    )];
    let e = run_stage(
        config,
        Sandbox::new(&work).expect("sb"),
        "quick",
        &Steering::new(),
        &CancelToken::new(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(e, AcpError::McpRequired { .. }), "{e}");
    let log = log_lines(outer.path());
    assert!(
        log.iter().all(|m| m["method"] != "session/prompt"),
        "{log:?}"
    );
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_server_runs_mcp_servers_reach_its_acp_agent_with_secrets_expanded() {
    require(Tool::Git);
    use crate::support::server::{run_body, run_to_end, store_key, Server};
    let s = Server::start();
    store_key(&s, "GIT_TOKEN", "tok-acp-91e0");
    let (outer, _work, cmd) = setup();
    let mut body = run_body(&acp_flow(&cmd, "quick", ", mcp_servers=\"git\""));
    body["mcp_servers"] = serde_json::json!([
        {"id": "git", "transport": {"type": "stdio", "command": ["mcp-server-git"],
                                    "env": {"GIT_TOKEN": "{{ secrets.GIT_TOKEN }}"}}},
        {"id": "other", "transport": {"type": "stdio", "command": ["unused"]}}
    ]);
    let id = run_to_end(&s, &body);
    let run = s.get(&format!("/api/v1/runs/{id}")).json();
    assert_eq!(run["lifecycle"]["status"]["kind"], "succeeded", "{run}");
    let log = log_lines(outer.path());
    let new = log
        .iter()
        .find(|m| m["method"] == "session/new")
        .expect("session/new");
    // Only the node's subset, with the vault value in its environment.
    assert_eq!(
        new["params"]["mcpServers"],
        serde_json::json!([{"name": "git", "command": "mcp-server-git", "args": [],
                            "env": [{"name": "GIT_TOKEN", "value": "tok-acp-91e0"}]}])
    );
}
