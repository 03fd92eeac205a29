//! The MCP client (`svc::internal::mcp`) against real servers from PyPI and npm (stdio, Streamable
//! HTTP, legacy SSE) and against scripted servers that misbehave in every way the issue
//! names. Every test ends by checking that the client left no process and no thread.
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::mcp::*;
use serde_json::{json, Value};
use svc::internal::base::cancel::CancelToken;
use svc::internal::mcp::{self, Client, McpError};
use svc::internal::test_tools::{require, Tool};

const T: Duration = Duration::from_secs(20);

fn stdio(argv: &[&str]) -> Client {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..]);
    svc::internal::procs::isolate(&mut cmd);
    mcp::spawn_stdio(cmd).expect("spawn")
}

/// Closes the client and checks that its process group and reader threads are gone.
fn close_clean(c: Client) {
    let pid = c.pid();
    c.close(Duration::from_secs(2));
    if let Some(pid) = pid {
        assert!(
            eventually(5, || !group_alive(pid as i32)),
            "the server's process group {pid} is still running"
        );
    }
    assert!(
        eventually(5, || mcp_threads() == 0),
        "{} mcp- threads left",
        mcp_threads()
    );
}

fn names(tools: &[mcp::Tool]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

// ---------------------------------------------------------------------------------------
// Real servers

#[test]
#[cfg_attr(
    not(has_mcp_servers),
    ignore = "needs the MCP servers of .ci/mcp-servers.sh and Node.js: apt-get install nodejs npm python3-venv && .ci/mcp-servers.sh"
)]
fn mcp_server_time_over_stdio() {
    require(Tool::McpServers);
    let bin = installed("mcp-server-time");
    let _g = serial();
    let cancel = CancelToken::new();
    let mut c = stdio(&[&bin, "--local-timezone", "Etc/UTC"]);
    let info = c.initialize(T, &cancel).expect("initialize").clone();
    assert_eq!(info.name, "mcp-time");
    assert_eq!(info.protocol_version, "2025-06-18");
    let tools = c.list_tools(T, &cancel).expect("tools/list");
    assert!(names(&tools).contains(&"get_current_time"), "{tools:?}");
    assert_eq!(
        tools[0].input_schema["type"], "object",
        "schemas are passed on: {tools:?}"
    );
    let r = c
        .call_tool(
            "get_current_time",
            &json!({"timezone": "Asia/Tokyo"}),
            T,
            &cancel,
        )
        .expect("tools/call");
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.structured.as_ref().unwrap()["timezone"], "Asia/Tokyo");
    let text = mcp::content::render(&r);
    assert!(text.contains("Asia/Tokyo"), "{text}");
    // A bad time zone is the tool's error, reported as such.
    let r = c
        .call_tool(
            "get_current_time",
            &json!({"timezone": "Mars/Olympus"}),
            T,
            &cancel,
        )
        .expect("tools/call");
    assert!(r.is_error, "{r:?}");
    close_clean(c);
}

#[test]
#[cfg_attr(
    not(all(has_mcp_servers, has_git)),
    ignore = "needs the MCP servers of .ci/mcp-servers.sh and Node.js and git: apt-get install nodejs npm python3-venv && .ci/mcp-servers.sh; apt-get install git"
)]
fn mcp_server_git_over_stdio() {
    require(Tool::McpServers);
    require(Tool::Git);
    let bin = installed("mcp-server-git");
    let _g = serial();
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        assert!(Command::new("git")
            .args(args)
            .current_dir(repo.path())
            .output()
            .unwrap()
            .status
            .success())
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(repo.path().join("notes.txt"), "hello\n").unwrap();
    let cancel = CancelToken::new();
    let mut c = stdio(&[&bin, "--repository", &repo.path().display().to_string()]);
    c.initialize(T, &cancel).expect("initialize");
    let tools = c.list_tools(T, &cancel).expect("tools/list");
    assert!(names(&tools).contains(&"git_status"), "{tools:?}");
    let r = c
        .call_tool(
            "git_status",
            &json!({"repo_path": repo.path().display().to_string()}),
            T,
            &cancel,
        )
        .expect("tools/call");
    let text = mcp::content::render(&r);
    assert!(text.contains("notes.txt"), "{text}");
    close_clean(c);
}

#[test]
#[cfg_attr(
    not(has_mcp_servers),
    ignore = "needs the MCP servers of .ci/mcp-servers.sh and Node.js: apt-get install nodejs npm python3-venv && .ci/mcp-servers.sh"
)]
fn mcp_server_fetch_without_network_is_a_clean_tool_error() {
    require(Tool::McpServers);
    let bin = installed("mcp-server-fetch");
    let _g = serial();
    let cancel = CancelToken::new();
    let mut c = stdio(&[&bin]);
    c.initialize(T, &cancel).expect("initialize");
    let tools = c.list_tools(T, &cancel).expect("tools/list");
    assert!(names(&tools).contains(&"fetch"), "{tools:?}");
    // Nothing listens there: the server must say so as a tool error, not hang or crash.
    let url = format!("http://127.0.0.1:{}/page", free_port());
    let r = c
        .call_tool("fetch", &json!({"url": url}), T, &cancel)
        .expect("tools/call");
    assert!(r.is_error, "{r:?}");
    assert!(!mcp::content::render(&r).is_empty());
    close_clean(c);
}

fn everything_js() -> String {
    let p = servers_dir()
        .join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if p.is_file() {
        p.display().to_string()
    } else {
        installed("mcp-server-everything")
    }
}

fn check_everything(c: &mut Client) {
    let cancel = CancelToken::new();
    let info = c.initialize(T, &cancel).expect("initialize").clone();
    assert!(info.name.contains("everything"), "{info:?}");
    let tools = c.list_tools(T, &cancel).expect("tools/list");
    for t in ["echo", "get-sum", "get-tiny-image"] {
        assert!(
            names(&tools).contains(&t),
            "{t} missing: {:?}",
            names(&tools)
        );
    }
    let r = c
        .call_tool("echo", &json!({"message": "hi there"}), T, &cancel)
        .expect("echo");
    assert!(mcp::content::render(&r).contains("hi there"), "{r:?}");
    let r = c
        .call_tool("get-sum", &json!({"a": 2, "b": 40}), T, &cancel)
        .expect("get-sum");
    assert!(mcp::content::render(&r).contains("42"), "{r:?}");
    let r = c
        .call_tool("get-tiny-image", &json!({}), T, &cancel)
        .expect("image");
    let text = mcp::content::render(&r);
    assert!(text.contains("[image: image/png, "), "{text}");
    c.ping(T, &cancel).expect("ping");
}

#[test]
#[cfg_attr(
    not(has_mcp_servers),
    ignore = "needs the MCP servers of .ci/mcp-servers.sh and Node.js: apt-get install nodejs npm python3-venv && .ci/mcp-servers.sh"
)]
fn server_everything_over_stdio() {
    require(Tool::McpServers);
    let js = everything_js();
    let _g = serial();
    let mut c = stdio(&["node", &js, "stdio"]);
    check_everything(&mut c);
    close_clean(c);
}

#[test]
#[cfg_attr(
    not(has_mcp_servers),
    ignore = "needs the MCP servers of .ci/mcp-servers.sh and Node.js: apt-get install nodejs npm python3-venv && .ci/mcp-servers.sh"
)]
fn server_everything_over_streamable_http() {
    require(Tool::McpServers);
    let js = everything_js();
    let _g = serial();
    let port = free_port();
    let mut cmd = Command::new("node");
    cmd.arg(&js)
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    let _server = start_http(cmd, port);
    let mut c = mcp::streamable(&format!("http://127.0.0.1:{port}/mcp"), vec![]);
    check_everything(&mut c);
    close_clean(c);
}

#[test]
#[cfg_attr(
    not(has_mcp_servers),
    ignore = "needs the MCP servers of .ci/mcp-servers.sh and Node.js: apt-get install nodejs npm python3-venv && .ci/mcp-servers.sh"
)]
fn sdk_server_over_streamable_http_and_legacy_sse() {
    require(Tool::McpServers);
    let py = sdk_python();
    let _g = serial();
    for (transport, path) in [("streamable-http", "/mcp"), ("sse", "/sse")] {
        let port = free_port();
        let mut cmd = Command::new(&py);
        cmd.arg(script("sdk_http_server.py"))
            .arg(transport)
            .arg(port.to_string());
        let _server = start_http(cmd, port);
        let url = format!("http://127.0.0.1:{port}{path}");
        let headers = vec![("X-Team".to_string(), "platform".to_string())];
        let mut c = if transport == "sse" {
            mcp::legacy_sse(&url, headers)
        } else {
            mcp::streamable(&url, headers)
        };
        let cancel = CancelToken::new();
        let info = c.initialize(T, &cancel).expect("initialize").clone();
        assert_eq!(info.name, "svc-test-sdk", "{transport}");
        let tools = c.list_tools(T, &cancel).expect("tools/list");
        assert_eq!(names(&tools), ["add", "shout", "whoami"], "{transport}");
        let r = c
            .call_tool("add", &json!({"a": 20, "b": 22}), T, &cancel)
            .expect("add");
        assert!(
            mcp::content::render(&r).contains("42"),
            "{transport}: {r:?}"
        );
        let r = c
            .call_tool("whoami", &json!({}), T, &cancel)
            .expect("whoami");
        assert!(
            mcp::content::render(&r).contains("team=platform"),
            "{transport}: the header did not arrive: {r:?}"
        );
        // Arguments the schema refuses come back as the tool's error.
        let r = c
            .call_tool("add", &json!({"a": "x"}), T, &cancel)
            .expect("add");
        assert!(r.is_error, "{transport}: {r:?}");
        close_clean(c);
    }
}

// ---------------------------------------------------------------------------------------
// Scripted stdio servers that misbehave

fn scripted(py: &str, mode: &str, log: &std::path::Path) -> Client {
    stdio(&[
        py,
        &script("stdio_server.py"),
        mode,
        &log.display().to_string(),
    ])
}

const SHORT: Duration = Duration::from_secs(1);

#[test]
fn a_server_that_exits_at_start_reports_its_status_and_stderr() {
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut c = scripted(&py, "exit", &dir.path().join("log"));
    let t0 = Instant::now();
    let e = c.initialize(T, &CancelToken::new()).unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    match &e {
        McpError::Exited { status, stderr } => {
            assert!(status.as_deref().unwrap_or("").contains('3'), "{e}");
            assert!(stderr.contains("cannot open the database"), "{e}");
        }
        other => panic!("not an exit: {other:?}"),
    }
    close_clean(c);
}

#[test]
fn a_missing_program_is_a_spawn_error() {
    let e = mcp::spawn_stdio(Command::new("/nonexistent/mcp-server")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cannot start `/nonexistent/mcp-server`"),
        "{e}"
    );
}

#[test]
fn hanging_garbage_and_wrong_ids_time_out_with_what_the_server_did() {
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    for (mode, expect) in [
        ("hang", ""),
        ("garbage", "Server starting... (line 2)"),
        ("wrong-id", "an id svc did not send"),
    ] {
        let mut c = scripted(&py, mode, &dir.path().join(mode));
        let t0 = Instant::now();
        let e = c.initialize(SHORT, &CancelToken::new()).unwrap_err();
        let took = t0.elapsed();
        assert!(took >= SHORT && took < SHORT * 10, "{mode}: {took:?}");
        let text = e.to_string();
        assert!(
            text.starts_with("the server did not answer `initialize` within 1"),
            "{mode}: {text}"
        );
        assert!(text.contains(expect), "{mode}: {text}");
        close_clean(c);
    }
}

#[test]
fn an_oversized_line_closes_the_connection() {
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut c = scripted(&py, "oversize", &dir.path().join("log"));
    let e = c.initialize(T, &CancelToken::new()).unwrap_err();
    assert!(e.to_string().contains("more than 16 MiB"), "{e}");
    // The connection stays failed.
    let e2 = c.list_tools(SHORT, &CancelToken::new()).unwrap_err();
    assert!(e2.to_string().contains("more than 16 MiB"), "{e2}");
    close_clean(c);
}

#[test]
fn an_unsupported_protocol_version_is_refused() {
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut c = scripted(&py, "version", &dir.path().join("log"));
    let e = c.initialize(T, &CancelToken::new()).unwrap_err();
    assert_eq!(e, McpError::Version("1999-01-01".into()));
    assert!(e.to_string().contains("2025-06-18, 2025-03-26"), "{e}");
    close_clean(c);
}

#[test]
fn a_call_that_never_answers_times_out_and_is_cancelled_on_the_server() {
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let mut c = scripted(&py, "silent-call", &log);
    let cancel = CancelToken::new();
    c.initialize(T, &cancel).expect("initialize");
    let t0 = Instant::now();
    let e = c
        .call_tool("echo", &json!({"text": "x"}), SHORT, &cancel)
        .unwrap_err();
    assert!(t0.elapsed() < SHORT * 10);
    assert!(
        e.to_string()
            .starts_with("the server did not answer `tools/call` within 1"),
        "{e}"
    );
    // Cancelling the stage wakes the wait at once.
    let stage = CancelToken::new();
    let s2 = stage.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        s2.cancel("stage cancelled");
    });
    let t0 = Instant::now();
    let e = c
        .call_tool("echo", &json!({"text": "y"}), T, &stage)
        .unwrap_err();
    t.join().unwrap();
    assert_eq!(e, McpError::Cancelled);
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    // Both requests were cancelled on the server, naming their ids.
    assert!(
        eventually(5, || {
            let cancelled: Vec<Value> = logged(&log)
                .into_iter()
                .filter(|m| m["method"] == "notifications/cancelled")
                .map(|m| m["params"]["requestId"].clone())
                .collect();
            cancelled == vec![json!(2), json!(3)]
        }),
        "{:?}",
        logged(&log)
    );
    close_clean(c);
}

#[test]
fn server_requests_are_answered_pings_and_refusals() {
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let mut c = scripted(&py, "server-requests", &log);
    let cancel = CancelToken::new();
    c.initialize(T, &cancel).expect("initialize");
    assert!(
        eventually(5, || logged(&log).len() >= 4),
        "{:?}",
        logged(&log)
    );
    let msgs = logged(&log);
    let answer = |id: &str| {
        msgs.iter()
            .find(|m| m["id"] == id && m.get("method").is_none())
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(answer("srv-1")["result"], json!({}));
    assert_eq!(answer("srv-2")["error"]["code"], -32601);
    assert!(
        c.stderr_tail().contains("[warning] low disk"),
        "{}",
        c.stderr_tail()
    );
    // The initialize request offered our version and named us.
    assert_eq!(msgs[0]["params"]["protocolVersion"], "2025-06-18");
    assert_eq!(msgs[0]["params"]["clientInfo"]["name"], "svc");
    assert_eq!(msgs[1]["method"], "notifications/initialized");
    close_clean(c);
}

#[test]
fn pages_tool_errors_and_list_changed() {
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let mut c = scripted(&py, "pages", &log);
    let cancel = CancelToken::new();
    c.initialize(T, &cancel).expect("initialize");
    let tools = c.list_tools(T, &cancel).expect("tools/list");
    assert_eq!(names(&tools), ["echo", "fail", "sleep"]);
    assert!(!c.take_tools_changed());
    let r = c
        .call_tool("echo", &json!({"text": "a"}), T, &cancel)
        .expect("echo");
    assert_eq!(mcp::content::render(&r), "echo: a");
    assert!(eventually(5, || c.take_tools_changed()));
    let tools = c.list_tools(T, &cancel).expect("tools/list again");
    assert_eq!(names(&tools), ["echo", "fail", "sleep", "added"]);
    let r = c.call_tool("fail", &json!({}), T, &cancel).expect("fail");
    assert!(r.is_error);
    assert_eq!(mcp::content::render(&r), "the thing is broken");
    let e = c.call_tool("nope", &json!({}), T, &cancel).unwrap_err();
    assert!(e.to_string().contains("Unknown tool: nope"), "{e}");
    // The cursor went back to the server as given.
    let cursors: Vec<Value> = logged(&log)
        .into_iter()
        .filter(|m| m["method"] == "tools/list")
        .map(|m| m["params"]["cursor"].clone())
        .collect();
    assert_eq!(
        cursors,
        [Value::Null, json!("page-2"), Value::Null, json!("page-2")]
    );
    close_clean(c);
}

#[test]
fn a_server_that_ignores_stdin_closing_is_killed() {
    let _g = serial();
    // `sh -c 'trap "" TERM; sleep 300 & wait'`-like: ignores EOF and SIGTERM, has a child.
    let mut c = stdio(&["sh", "-c", "trap '' TERM; sleep 300 & sleep 300; wait"]);
    let pid = c.pid().unwrap();
    let e = c.initialize(Duration::from_millis(300), &CancelToken::new());
    assert!(e.is_err());
    let t0 = Instant::now();
    close_clean(c);
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(!group_alive(pid as i32));
}

// ---------------------------------------------------------------------------------------
// Scripted HTTP servers

#[test]
fn streamable_http_headers_sessions_server_pings_and_delete() {
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let server = scripted_http(&py, "ok", &log);
    let mut c = mcp::streamable(
        &format!("http://127.0.0.1:{}/mcp", server.port),
        vec![("Authorization".into(), "Bearer abc".into())],
    );
    let cancel = CancelToken::new();
    c.initialize(T, &cancel).expect("initialize");
    c.list_tools(T, &cancel).expect("tools/list");
    let r = c
        .call_tool("echo", &json!({"text": "over sse"}), T, &cancel)
        .expect("call");
    assert_eq!(mcp::content::render(&r), "echo: over sse");
    close_clean(c);
    let reqs = logged(&log);
    let init = &reqs[0];
    assert_eq!(init["body"]["method"], "initialize");
    assert_eq!(
        init["headers"]["accept"],
        "application/json, text/event-stream"
    );
    assert_eq!(init["headers"]["authorization"], "Bearer abc");
    assert!(init["headers"].get("mcp-session-id").is_none());
    let later: Vec<&Value> = reqs.iter().skip(1).collect();
    assert!(
        later
            .iter()
            .all(|r| r["headers"]["mcp-session-id"].is_string()),
        "{reqs:?}"
    );
    assert!(
        later
            .iter()
            .filter(|r| r["method"] == "POST")
            .all(|r| r["headers"]["mcp-protocol-version"] == "2025-06-18"),
        "{reqs:?}"
    );
    // The server's ping inside the call's stream was answered with a POST.
    assert!(
        reqs.iter()
            .any(|r| r["body"]["id"] == "srv-ping" && r["body"]["result"] == json!({})),
        "{reqs:?}"
    );
    assert_eq!(reqs.last().unwrap()["method"], "DELETE");
}

/// A server that answers the older version svc offers second (2025-03-26) is spoken to in
/// it: the version is kept and every later POST carries it in `MCP-Protocol-Version`.
#[test]
fn an_older_protocol_version_is_negotiated_and_sent_on() {
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let server = scripted_http(&py, "older", &log);
    let mut c = mcp::streamable(&format!("http://127.0.0.1:{}/mcp", server.port), vec![]);
    let cancel = CancelToken::new();
    let info = c.initialize(T, &cancel).expect("initialize").clone();
    assert_eq!(info.protocol_version, "2025-03-26");
    let r = c
        .call_tool("echo", &json!({"text": "old"}), T, &cancel)
        .expect("call");
    assert_eq!(mcp::content::render(&r), "echo: old");
    close_clean(c);
    let reqs = logged(&log);
    assert_eq!(reqs[0]["body"]["params"]["protocolVersion"], "2025-06-18");
    let posts: Vec<&Value> = reqs
        .iter()
        .skip(1)
        .filter(|r| r["method"] == "POST")
        .collect();
    assert!(posts.len() >= 2, "{reqs:?}");
    assert!(
        posts
            .iter()
            .all(|r| r["headers"]["mcp-protocol-version"] == "2025-03-26"),
        "{reqs:?}"
    );
}

#[test]
fn http_500_and_malformed_streams_are_clear_errors() {
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let server = scripted_http(&py, "500", &dir.path().join("a"));
    let mut c = mcp::streamable(&format!("http://127.0.0.1:{}/mcp", server.port), vec![]);
    let e = c.initialize(T, &CancelToken::new()).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("HTTP 500") && text.contains("the database is down"),
        "{text}"
    );
    close_clean(c);

    let server = scripted_http(&py, "bad-sse", &dir.path().join("b"));
    let mut c = mcp::streamable(&format!("http://127.0.0.1:{}/mcp", server.port), vec![]);
    let cancel = CancelToken::new();
    c.initialize(T, &cancel).expect("initialize");
    let e = c.call_tool("echo", &json!({}), T, &cancel).unwrap_err();
    assert!(e.to_string().contains("not JSON"), "{e}");
    // The connection is still usable after one bad answer.
    c.list_tools(T, &cancel).expect("tools/list");
    close_clean(c);

    // Nothing listening at all.
    let mut c = mcp::streamable(&format!("http://127.0.0.1:{}/mcp", free_port()), vec![]);
    let e = c.initialize(T, &CancelToken::new()).unwrap_err();
    assert!(
        e.to_string().starts_with("cannot reach http://127.0.0.1:"),
        "{e}"
    );
    close_clean(c);
}

#[test]
fn an_expired_session_is_initialized_again() {
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let server = scripted_http(&py, "expire", &log);
    let mut c = mcp::streamable(&format!("http://127.0.0.1:{}/mcp", server.port), vec![]);
    let cancel = CancelToken::new();
    c.initialize(T, &cancel).expect("initialize");
    let tools = c
        .list_tools(T, &cancel)
        .expect("tools/list after re-initialize");
    assert_eq!(names(&tools), ["echo"]);
    close_clean(c);
    let inits = logged(&log)
        .into_iter()
        .filter(|r| r["body"]["method"] == "initialize")
        .count();
    assert_eq!(inits, 2);
}

#[test]
fn a_silent_http_call_times_out_and_is_cancelled() {
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let server = scripted_http(&py, "silent", &log);
    let mut c = mcp::streamable(&format!("http://127.0.0.1:{}/mcp", server.port), vec![]);
    let cancel = CancelToken::new();
    c.initialize(T, &cancel).expect("initialize");
    let t0 = Instant::now();
    let e = c.call_tool("echo", &json!({}), SHORT, &cancel).unwrap_err();
    assert!(t0.elapsed() < SHORT * 10);
    assert!(e.to_string().contains("did not answer `tools/call`"), "{e}");
    assert!(eventually(5, || logged(&log)
        .iter()
        .any(|r| r["body"]["method"] == "notifications/cancelled"
            && r["body"]["params"]["requestId"] == 2)));
    // The reader still blocked on the silent stream is interrupted by the close.
    close_clean(c);
}

#[test]
fn legacy_sse_transport_with_a_scripted_server() {
    let py = python();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let server = scripted_http(&py, "legacy", &log);
    let mut c = mcp::legacy_sse(&format!("http://127.0.0.1:{}/sse", server.port), vec![]);
    let cancel = CancelToken::new();
    c.initialize(T, &cancel).expect("initialize");
    let r = c
        .call_tool("echo", &json!({"text": "legacy"}), T, &cancel)
        .expect("call");
    assert_eq!(mcp::content::render(&r), "echo: legacy");
    close_clean(c);
    assert!(logged(&log).iter().any(
        |r| r["method"] == "POST" && r["path"].as_str().unwrap_or("").starts_with("/messages/")
    ));
}
