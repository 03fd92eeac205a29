//! Agent stages with MCP servers, driven by the scripted LLM provider: the model is offered
//! `mcp__<server>__<tool>` with the server's schema, its calls reach the real server with
//! their arguments and the results reach the model (read from the recorded requests), a
//! failed server is named in the system prompt and in `agent.mcp.failed`, a `required` one
//! fails the stage before any model call, tool errors and `tools/list_changed` are honoured,
//! and every server is gone when the stage finishes.

use std::sync::Arc;
use std::time::Duration;

use crate::support::llm::*;
use crate::support::mcp::*;
use serde_json::{json, Value};
use svc::internal::agent::stage::StageBackend;
use svc::internal::base::cancel::CancelToken;
use svc::internal::engine::{LlmMode, LlmRequest};
use svc::internal::llm::{Provider, StaticCredentials};
use svc::internal::mcp::{ServerDef, Transport};
use svc::internal::test_tools::{require, Tool};

const P: Provider = Provider::Anthropic;

fn stdio_def(id: &str, argv: &[&str]) -> ServerDef {
    ServerDef {
        id: id.into(),
        display_name: None,
        description: None,
        transport: Transport::Stdio {
            command: argv.iter().map(|s| s.to_string()).collect(),
            env: Default::default(),
        },
        startup_timeout_secs: 20,
        tool_timeout_secs: 20,
        required: false,
    }
}

fn request(dir: &std::path::Path, servers: Vec<ServerDef>) -> LlmRequest {
    LlmRequest {
        node_id: "work".into(),
        mode: LlmMode::Agent,
        prompt: "Use the tools.".into(),
        workdir: dir.to_path_buf(),
        project_memory: false,
        mcp_servers: servers,
        ..LlmRequest::default()
    }
}

fn backend(server: &ScriptedServer, creds: StaticCredentials) -> StageBackend {
    let creds = creds.with(P.key_names()[0], &test_key(P));
    StageBackend::new(Arc::new(client(P, server)), Arc::new(creds))
}

/// Runs the stage, collecting `(kind, properties)` of its events.
fn run(
    b: &StageBackend,
    req: &LlmRequest,
) -> (
    Result<svc::internal::agent::stage::StageReply, svc::internal::agent::stage::StageError>,
    Vec<(String, Value)>,
) {
    let mut events = Vec::new();
    let r = b.complete(req, &CancelToken::new(), &mut |e| {
        events.push((e.kind().to_string(), e.properties()))
    });
    (r, events)
}

fn of<'a>(events: &'a [(String, Value)], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|(k, _)| k == kind)
        .map(|(_, p)| p)
        .collect()
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(String::from))
        .collect()
}

fn system(body: &Value) -> String {
    body["system"][0]["text"].as_str().unwrap_or("").to_string()
}

/// The stage finished: its servers' groups and the client's threads are gone.
fn assert_all_stopped(pids: &[i32]) {
    for pid in pids {
        assert!(
            eventually(5, || !group_alive(*pid)),
            "MCP server group {pid} survived the stage"
        );
    }
    assert!(
        eventually(5, || mcp_threads() == 0),
        "{} mcp- threads",
        mcp_threads()
    );
}

/// Process groups of the children of this process running `needle`.
fn children_running(needle: &str) -> Vec<i32> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let ppid = stat.rsplit(')').next()?.split_whitespace().nth(1)?;
            let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).ok()?;
            (ppid == me && cmd.contains(needle)).then_some(pid)
        })
        .collect()
}

#[test]
#[cfg_attr(
    not(has_mcp_servers),
    ignore = "needs the MCP servers of .ci/mcp-servers.sh and Node.js: apt-get install nodejs npm python3-venv && .ci/mcp-servers.sh"
)]
fn an_agent_calls_a_real_mcp_server_and_a_failed_one_is_never_silent() {
    require(Tool::McpServers);
    let time = installed("mcp-server-time");
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("broken.log");
    let server = ScriptedServer::turns(
        P,
        vec![
            tools(&[(
                "c1",
                "mcp__time__get_current_time",
                json!({"timezone": "Asia/Tokyo"}),
            )]),
            text("It is evening in Tokyo."),
        ],
        SMALL_USAGE,
    );
    let b = backend(&server, StaticCredentials::new());
    let script = script("stdio_server.py");
    let log_s = log.display().to_string();
    let req = request(
        dir.path(),
        vec![
            stdio_def("time", &[&time, "--local-timezone", "Etc/UTC"]),
            stdio_def("broken", &[&py, &script, "exit", &log_s]),
        ],
    );
    let (r, events) = run(&b, &req);
    let reply = r.expect("the stage runs without the broken server");
    assert_eq!(reply.text, "It is evening in Tokyo.");

    let ready = of(&events, "agent.mcp.ready");
    assert_eq!(ready.len(), 1, "{events:?}");
    assert_eq!(ready[0]["server"], "time");
    assert!(ready[0]["tool_count"].as_u64().unwrap() >= 2);
    assert!(ready[0]["duration_ms"].is_u64());
    let failed = of(&events, "agent.mcp.failed");
    assert_eq!(failed.len(), 1, "{events:?}");
    assert_eq!(failed[0]["server"], "broken");
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("cannot open the database"),
        "{failed:?}"
    );

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    // The model was offered the server's tools with their schemas...
    let first = &reqs[0].body;
    let names = tool_names(first);
    assert!(
        names.contains(&"mcp__time__get_current_time".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"read_file".to_string()),
        "built-ins stay: {names:?}"
    );
    let spec = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__time__get_current_time")
        .unwrap();
    assert_eq!(spec["input_schema"]["required"], json!(["timezone"]));
    // ...and told which configured server failed and why.
    let sys = system(first);
    assert!(sys.contains("- time: ready"), "{sys}");
    assert!(
        sys.contains("- broken: FAILED to start") && sys.contains("cannot open the database"),
        "{sys}"
    );
    // The call's arguments reached the server: its answer names the zone it was asked for,
    // and that answer reached the model.
    let results = tool_results(P, &reqs[1].body);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].0, "c1");
    assert!(!results[0].2, "{results:?}");
    assert!(
        results[0].1.contains("\"timezone\": \"Asia/Tokyo\""),
        "{results:?}"
    );
    let started = of(&events, "agent.tool.started");
    assert_eq!(started[0]["arguments"], json!({"timezone": "Asia/Tokyo"}));

    // The summary lists each server with its state, offered and used tools.
    let summary = of(&events, "agent.mcp.summary");
    let s = &summary.last().unwrap()["servers"];
    assert_eq!(s[0]["server"], "time");
    assert_eq!(s[0]["state"], "ready");
    assert_eq!(s[0]["used"], json!(["get_current_time"]));
    assert_eq!(s[0]["server_info"]["protocol_version"], "2025-06-18");
    assert_eq!(s[1]["state"], "failed");
    assert_eq!(s[1]["used"], json!([]));

    // The servers run until the stage finishes, then nothing of them is left.
    let pids = children_running("mcp-server-time");
    assert_eq!(pids.len(), 1, "the time server runs for the stage");
    b.finish("work");
    assert_all_stopped(&pids);
}

#[test]
fn a_required_server_that_fails_fails_the_stage_before_any_model_call() {
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::turns(P, vec![text("never")], SMALL_USAGE);
    let b = backend(&server, StaticCredentials::new());
    let script = script("stdio_server.py");
    let mut hang = stdio_def("tracker", &[&py, &script, "hang"]);
    hang.required = true;
    hang.startup_timeout_secs = 1;
    let (r, events) = run(&b, &request(dir.path(), vec![hang]));
    let e = r.expect_err("the stage fails");
    assert!(
        e.message.starts_with(
            "stage `work`: the required MCP server `tracker` failed: the server did not answer \
             `initialize` within 1 s"
        ),
        "{}",
        e.message
    );
    assert!(e.retryable, "a start-up timeout may pass on a retry");
    assert_eq!(server.count(), 0, "no model call was made");
    let failed = of(&events, "agent.mcp.failed");
    assert_eq!(failed[0]["required"], true);
    assert!(eventually(5, || mcp_threads() == 0));
    assert!(children_running("stdio_server.py").is_empty());
}

#[test]
fn tool_errors_reach_the_model_and_changed_tool_lists_are_offered() {
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("s.log");
    let server = ScriptedServer::turns(
        P,
        vec![
            tools(&[("c1", "mcp__s__echo", json!({"text": "hello"}))]),
            tools(&[
                ("c2", "mcp__s__fail", json!({})),
                ("c3", "mcp__s__added", json!({})),
            ]),
            text("done"),
        ],
        SMALL_USAGE,
    );
    let b = backend(&server, StaticCredentials::new());
    let script = script("stdio_server.py");
    let log_s = log.display().to_string();
    let req = request(
        dir.path(),
        vec![stdio_def("s", &[&py, &script, "pages", &log_s])],
    );
    let (r, _events) = run(&b, &req);
    r.expect("stage");
    let reqs = server.requests();
    assert_eq!(
        tool_names(&reqs[0].body)
            .into_iter()
            .filter(|n| n.starts_with("mcp__"))
            .collect::<Vec<_>>(),
        ["mcp__s__echo", "mcp__s__fail", "mcp__s__sleep"]
    );
    // After the server said its list changed, the next call offers the new tool.
    assert!(tool_names(&reqs[1].body).contains(&"mcp__s__added".to_string()));
    let r1 = tool_results(P, &reqs[1].body);
    assert_eq!(r1[0].1, "echo: hello");
    let r2 = tool_results(P, &reqs[2].body);
    let fail = r2.iter().find(|r| r.0 == "c2").unwrap();
    assert!(fail.2, "isError is a tool error: {r2:?}");
    assert!(fail.1.contains("the thing is broken"), "{r2:?}");
    // The arguments reached the server as the model gave them.
    let calls: Vec<Value> = logged(&log)
        .into_iter()
        .filter(|m| m["method"] == "tools/call")
        .map(|m| m["params"].clone())
        .collect();
    assert_eq!(
        calls[0],
        json!({"name": "echo", "arguments": {"text": "hello"}})
    );
    b.finish("work");
    assert!(eventually(5, || mcp_threads() == 0));
}

#[test]
fn a_call_that_times_out_is_a_tool_error_and_secrets_reach_only_the_server() {
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::turns(
        P,
        vec![
            tools(&[("c1", "mcp__slow__echo", json!({"text": "x"}))]),
            text("gave up"),
        ],
        SMALL_USAGE,
    );
    let creds = StaticCredentials::new().with("SLOW_TOKEN", "tok-5f2a9c");
    let b = backend(&server, creds);
    let script = script("stdio_server.py");
    // The server reads its token from the environment and logs what it received.
    let probe = dir.path().join("env.txt");
    let argv = [
        "sh".to_string(),
        "-c".to_string(),
        format!(
            "printf '%s' \"$SLOW_TOKEN\" > '{}'; exec '{py}' '{script}' silent-call",
            probe.display()
        ),
    ];
    let mut def = stdio_def("slow", &[]);
    def.transport = Transport::Stdio {
        command: argv.to_vec(),
        env: [(
            "SLOW_TOKEN".to_string(),
            "{{ secrets.SLOW_TOKEN }}".to_string(),
        )]
        .into(),
    };
    def.tool_timeout_secs = 1;
    let t0 = std::time::Instant::now();
    let (r, events) = run(&b, &request(dir.path(), vec![def]));
    r.expect("stage");
    assert!(t0.elapsed() < Duration::from_secs(10));
    let results = tool_results(P, &server.requests()[1].body);
    assert!(results[0].2);
    assert!(
        results[0]
            .1
            .contains("did not answer `tools/call` within 1 s"),
        "{results:?}"
    );
    assert_eq!(std::fs::read_to_string(&probe).unwrap(), "tok-5f2a9c");
    let all = serde_json::to_string(&events).unwrap();
    assert!(!all.contains("tok-5f2a9c"), "a secret reached an event");
    b.finish("work");
    assert!(eventually(5, || mcp_threads() == 0));
}

#[test]
fn five_servers_start_concurrently() {
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::turns(P, vec![text("ok")], SMALL_USAGE);
    let b = backend(&server, StaticCredentials::new());
    let script = script("stdio_server.py");
    // Each server answers `initialize` only once all five have received theirs: handshakes
    // made one after another would time out.
    let barrier = dir.path().join("barrier").display().to_string();
    let defs: Vec<ServerDef> = (0..5)
        .map(|i| {
            let mut d = stdio_def(
                &format!("s{i}"),
                &[&py, &script, "barrier", "/dev/null", &barrier, "5"],
            );
            d.startup_timeout_secs = 15;
            d
        })
        .collect();
    let (r, events) = run(&b, &request(dir.path(), defs));
    r.expect("stage");
    assert_eq!(of(&events, "agent.mcp.ready").len(), 5, "{events:?}");
    b.finish("work");
    assert!(eventually(5, || mcp_threads() == 0));
}

fn http_def(
    id: &str,
    url: String,
    protocol: svc::internal::mcp::HttpProtocol,
    headers: &[(&str, &str)],
) -> ServerDef {
    let mut d = stdio_def(id, &[]);
    d.transport = Transport::Http {
        url,
        protocol,
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    d
}

/// One agent stage with the other real servers over every transport: `mcp-server-git` and
/// `mcp-server-fetch` (no network: a clean tool error) over stdio, the `mcp` SDK's server
/// over Streamable HTTP and over the legacy HTTP+SSE transport (a vault secret in a header),
/// and `server-everything` over Streamable HTTP (an image becomes a placeholder). The model's
/// arguments reach each server and each result reaches the model.
#[test]
#[cfg_attr(
    not(all(has_mcp_servers, has_git)),
    ignore = "needs the MCP servers of .ci/mcp-servers.sh and Node.js and git: apt-get install nodejs npm python3-venv && .ci/mcp-servers.sh; apt-get install git"
)]
fn an_agent_uses_the_real_servers_over_every_transport() {
    use std::process::Command;
    use svc::internal::mcp::HttpProtocol;
    require(Tool::McpServers);
    require(Tool::Git);
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let git_ok = Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .current_dir(&repo)
        .status()
        .is_ok_and(|s| s.success());
    assert!(git_ok, "git init");
    std::fs::write(repo.join("notes-4c1f.txt"), "hello\n").unwrap();
    let repo_s = repo.display().to_string();

    let sdk = sdk_python();
    let (sdk_port, sse_port, every_port) = (free_port(), free_port(), free_port());
    let sdk_server = |transport: &str, port: u16| {
        let mut cmd = Command::new(&sdk);
        cmd.arg(script("sdk_http_server.py"))
            .arg(transport)
            .arg(port.to_string());
        start_http(cmd, port)
    };
    let _sdk_http = sdk_server("streamable-http", sdk_port);
    let _sdk_sse = sdk_server("sse", sse_port);
    let everything = servers_dir()
        .join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let mut cmd = Command::new("node");
    cmd.arg(&everything)
        .arg("streamableHttp")
        .env("PORT", every_port.to_string());
    let _everything = start_http(cmd, every_port);

    let closed = format!("http://127.0.0.1:{}/page", free_port());
    let server = ScriptedServer::turns(
        P,
        vec![
            tools(&[
                ("g", "mcp__git__git_status", json!({"repo_path": repo_s})),
                ("f", "mcp__fetch__fetch", json!({"url": closed})),
                ("a", "mcp__sdk__add", json!({"a": 20, "b": 22})),
                ("w", "mcp__legacy__whoami", json!({})),
                ("i", "mcp__everything__get-tiny-image", json!({})),
            ]),
            text("All five answered."),
        ],
        SMALL_USAGE,
    );
    let secret = "team-7d41e0";
    let b = backend(&server, StaticCredentials::new().with("TEAM_NAME", secret));
    let defs = vec![
        stdio_def(
            "git",
            &[&installed("mcp-server-git"), "--repository", &repo_s],
        ),
        stdio_def("fetch", &[&installed("mcp-server-fetch")]),
        http_def(
            "sdk",
            format!("http://127.0.0.1:{sdk_port}/mcp"),
            HttpProtocol::StreamableHttp,
            &[],
        ),
        http_def(
            "legacy",
            format!("http://127.0.0.1:{sse_port}/sse"),
            HttpProtocol::Sse,
            &[("X-Team", "{{ secrets.TEAM_NAME }}")],
        ),
        http_def(
            "everything",
            format!("http://127.0.0.1:{every_port}/mcp"),
            HttpProtocol::StreamableHttp,
            &[],
        ),
    ];
    // Python servers take seconds to import on a loaded 2-core machine: the test is about
    // the transports, not the start-up timeout.
    let defs: Vec<ServerDef> = defs
        .into_iter()
        .map(|mut d| {
            d.startup_timeout_secs = 120;
            d.tool_timeout_secs = 120;
            d
        })
        .collect();
    let (r, events) = run(&b, &request(dir.path(), defs));
    assert_eq!(r.expect("stage").text, "All five answered.");
    let ready: Vec<&str> = of(&events, "agent.mcp.ready")
        .iter()
        .filter_map(|e| e["server"].as_str())
        .collect();
    assert_eq!(
        ready,
        ["git", "fetch", "sdk", "legacy", "everything"],
        "{events:?}"
    );
    assert!(of(&events, "agent.mcp.failed").is_empty(), "{events:?}");

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let results = tool_results(P, &reqs[1].body);
    let result = |id: &str| {
        results
            .iter()
            .find(|r| r.0 == id)
            .cloned()
            .unwrap_or_else(|| panic!("no result for {id}: {results:?}"))
    };
    let g = result("g");
    assert!(!g.2 && g.1.contains("notes-4c1f.txt"), "{g:?}");
    let f = result("f");
    assert!(
        f.2 && !f.1.is_empty(),
        "fetch without a listener is a tool error: {f:?}"
    );
    let a = result("a");
    assert!(!a.2 && a.1.contains("42"), "{a:?}");
    // The header's secret reached the server (it says so).
    let w = result("w");
    assert!(!w.2 && w.1.contains(&format!("team={secret}")), "{w:?}");
    let i = result("i");
    assert!(!i.2 && i.1.contains("[image: image/png, "), "{i:?}");
    // svc itself puts it in no event (the server's own output, which names it, is the tool's
    // result: the server's event recorder redacts vault values there, tests/server/mcp.rs).
    let svc_events: Vec<&(String, Value)> = events
        .iter()
        .filter(|(k, _)| k != "agent.tool.completed")
        .collect();
    assert!(!serde_json::to_string(&svc_events).unwrap().contains(secret));
    b.finish("work");
    assert!(eventually(5, || mcp_threads() == 0));
}
