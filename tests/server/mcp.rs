//! MCP servers through the real server: the catalog (`/api/v1/mcp-servers`: write-only
//! `env`/`headers`, ETags, 422 naming the field), its `test` route, and runs whose agent
//! stages use catalog and inline servers frozen at creation: events, stage details, a
//! `required` server failing the run before any model call, and a vault secret that reaches
//! the server but never an event, the server's log or a process's command line.

use crate::support::llm::{text, tool_results, tools, ScriptedServer, SMALL_USAGE};
use crate::support::mcp;
use crate::support::server::*;
use serde_json::{json, Value};
use svc::internal::llm::Provider;
use svc::internal::test_tools::{require, Tool};

const P: Provider = Provider::Anthropic;

fn put(s: &Server, path: &str, if_match: Option<&str>, body: &Value) -> Resp {
    let auth = s.auth();
    let mut h = vec![("Authorization", auth.as_str())];
    if let Some(m) = if_match {
        h.push(("If-Match", m));
    }
    s.raw("PUT", path, &h, Some(body.to_string().as_bytes()))
}

fn delete(s: &Server, path: &str, if_match: &str) -> Resp {
    let auth = s.auth();
    s.raw(
        "DELETE",
        path,
        &[("Authorization", auth.as_str()), ("If-Match", if_match)],
        None,
    )
}

fn scripted_def(py: &str, mode: &str) -> Value {
    json!({"type": "stdio", "command": [py, mcp::script("stdio_server.py"), mode]})
}

#[test]
fn the_catalog_hides_values_checks_revisions_and_names_fields() {
    let s = Server::start();
    let body = json!({
        "id": "tracker",
        "description": "Issue tracker",
        "transport": {"type": "http", "url": "https://tracker.example/mcp",
                      "headers": {"Authorization": "Bearer {{ secrets.TRACKER_TOKEN }}",
                                  "X-Team": "platform"}},
        "required": true
    });
    let r = s.post("/api/v1/mcp-servers", &body.to_string());
    assert_eq!(r.status, 201, "{}", r.text());
    let etag = r.header("etag").unwrap().to_string();
    let v = r.json();
    assert_eq!(v["display_name"], "tracker");
    assert_eq!(
        v["transport"]["header_keys"],
        json!(["Authorization", "X-Team"])
    );
    assert_eq!(v["transport"]["protocol"], "streamable_http");
    assert_eq!(v["startup_timeout_secs"], 10);
    assert_eq!(v["tool_timeout_secs"], 60);
    assert_eq!(v["required"], true);
    assert!(
        !r.text().contains("platform") && !r.text().contains("secrets."),
        "{}",
        r.text()
    );
    assert_eq!(format!("\"{}\"", v["revision"].as_str().unwrap()), etag);

    assert_eq!(s.post("/api/v1/mcp-servers", &body.to_string()).status, 409);
    let bad = s.post(
        "/api/v1/mcp-servers",
        &json!({"id": "x", "transport": {"type": "stdio", "command": []}}).to_string(),
    );
    let e = assert_error(&bad, 422);
    assert_eq!(e["errors"][0]["field"], "transport.command", "{e}");
    let bad = s.post(
        "/api/v1/mcp-servers",
        &json!({"id": "x", "transport": {"type": "stdio", "command": ["a"],
                "env": {"T": "{{ env.HOME }}"}}})
        .to_string(),
    );
    assert_eq!(
        assert_error(&bad, 422)["errors"][0]["field"],
        "transport.env.T"
    );
    assert_error(&s.post("/api/v1/mcp-servers", "{not json"), 400);
    assert_error(&s.get("/api/v1/mcp-servers/Not_A_Slug"), 400);
    assert_error(&s.get("/api/v1/mcp-servers/nope"), 404);

    // Replace without the header values: they are kept, and the view still hides them.
    let mut edit = v.clone();
    edit["tool_timeout_secs"] = json!(5);
    let path = "/api/v1/mcp-servers/tracker";
    assert_error(&put(&s, path, None, &edit), 428);
    let r = put(&s, path, Some(&etag), &edit);
    assert_eq!(r.status, 200, "{}", r.text());
    let v2 = r.json();
    assert_eq!(v2["tool_timeout_secs"], 5);
    assert_eq!(
        v2["transport"]["header_keys"],
        json!(["Authorization", "X-Team"])
    );
    assert_error(&put(&s, path, Some(&etag), &edit), 409);
    let list = s.get("/api/v1/mcp-servers").json();
    assert_eq!(list["meta"]["total"], 1);
    assert_error(&delete(&s, path, &etag), 409);
    let r = delete(
        &s,
        path,
        &format!("\"{}\"", v2["revision"].as_str().unwrap()),
    );
    assert_eq!(r.status, 204);
    assert_eq!(s.get("/api/v1/mcp-servers").json()["meta"]["total"], 0);
}

#[test]
#[cfg_attr(
    not(has_mcp_servers),
    ignore = "needs the MCP servers of .ci/mcp-servers.sh and Node.js: apt-get install nodejs npm python3-venv && .ci/mcp-servers.sh"
)]
fn the_test_route_reports_tools_and_timings_or_the_failed_step() {
    require(Tool::McpServers);
    let time = mcp::installed("mcp-server-time");
    let py = mcp::python();
    let s = Server::start();
    let r = s.post(
        "/api/v1/mcp-servers",
        // A Python server takes more than the default 10 s to import on a loaded machine.
        &json!({"id": "time", "transport": {"type": "stdio", "command": [time]},
                "startup_timeout_secs": 120})
        .to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let t = s.post("/api/v1/mcp-servers/time/test", "");
    assert_eq!(t.status, 200, "{}", t.text());
    let t = t.json();
    assert_eq!(t["ok"], true, "{t}");
    assert_eq!(t["server"]["name"], "mcp-time");
    assert_eq!(t["protocol_version"], "2025-06-18");
    assert!(
        t["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("get_current_time")),
        "{t}"
    );
    for step in ["start", "initialize", "list_tools", "total"] {
        assert!(t["timings_ms"][step].is_u64(), "{t}");
    }

    let r = s.post(
        "/api/v1/mcp-servers",
        &json!({"id": "broken", "transport": scripted_def(&py, "exit")}).to_string(),
    );
    assert_eq!(r.status, 201);
    let t = s.post("/api/v1/mcp-servers/broken/test", "").json();
    assert_eq!(t["ok"], false, "{t}");
    assert_eq!(t["step"], "initialize");
    assert!(
        t["stderr"]
            .as_str()
            .unwrap()
            .contains("cannot open the database"),
        "{t}"
    );
    assert!(t["error"].as_str().unwrap().contains("exited"), "{t}");
    assert_error(&s.post("/api/v1/mcp-servers/missing/test", ""), 404);
}

const AGENT: &str = r#"digraph mcp {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [shape=box, prompt="Look at the environment"]
  start -> work -> exit
}"#;

fn with_servers(dot: &str, servers: Value) -> Value {
    let mut b = run_body(dot);
    b["mcp_servers"] = servers;
    b
}

#[test]
#[cfg_attr(
    not(all(has_git, has_mcp_servers)),
    ignore = "needs git and the MCP servers of .ci/mcp-servers.sh and Node.js: apt-get install git; apt-get install nodejs npm python3-venv && .ci/mcp-servers.sh"
)]
fn a_run_uses_servers_frozen_at_creation_and_no_secret_reaches_an_event() {
    require(Tool::Git);
    require(Tool::McpServers);
    let node_js = mcp::installed("mcp-server-everything");
    let py = mcp::python();
    let llm = ScriptedServer::turns(
        P,
        vec![
            tools(&[("c1", "mcp__everything__get-env", json!({}))]),
            // A second of work keeps the server up while the process list is read.
            tools(&[(
                "c2",
                "mcp__everything__trigger-long-running-operation",
                json!({"duration": 1, "steps": 2}),
            )]),
            text("The environment has the token."),
        ],
        SMALL_USAGE,
    );
    let s = served_anthropic(&llm.base, "");
    let secret = "tok-mcp-7f3e19c2d4";
    store_key(&s, "EVERYTHING_TOKEN", secret);
    let r = s
        .post(
            "/api/v1/mcp-servers",
            &json!({"id": "everything",
                "transport": {"type": "stdio", "command": [node_js, "stdio"],
                              "env": {"EVERYTHING_TOKEN": "{{ secrets.EVERYTHING_TOKEN }}"}}})
            .to_string(),
        )
        .json();
    let body = with_servers(
        AGENT,
        json!(["everything", {"id": "flaky", "transport": scripted_def(&py, "exit")}]),
    );
    let id = create_run(&s, &body);
    // A later edit of the catalog does not change the run: its servers are frozen.
    let mut broken = r.clone();
    broken["transport"] = json!({"type": "stdio", "command": ["/nonexistent/server"]});
    let etag = format!("\"{}\"", r["revision"].as_str().unwrap());
    assert_eq!(
        put(&s, "/api/v1/mcp-servers/everything", Some(&etag), &broken).status,
        200
    );
    // Every command line on the machine while the run goes: the server's is there (it
    // runs) and the secret is in none (it goes to the server's environment only).
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (done, needle) = (done.clone(), node_js.clone());
        std::thread::spawn(move || {
            let (mut seen, mut leaked) = (false, Vec::new());
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                for (pid, cmd) in command_lines() {
                    seen |= cmd.contains(&needle);
                    if cmd.contains(secret) {
                        leaked.push(format!("{pid}: {cmd}"));
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            (seen, leaked)
        })
    };
    start_run(&s, &id);
    let end = wait_run_end(&s, &id);
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let (seen, leaked) = watcher.join().expect("the process watcher");
    assert!(seen, "the MCP server's process was never seen");
    assert!(leaked.is_empty(), "a secret in a process list: {leaked:?}");
    assert_eq!(end["lifecycle"]["status"]["kind"], "succeeded", "{end}");
    assert!(
        !s.stderr().contains(secret),
        "a vault secret reached the log"
    );

    let evs = run_events(&s, &id);
    let all = Value::Array(evs.clone()).to_string();
    assert!(!all.contains(secret), "a vault secret reached an event");
    let created = evs.iter().find(|e| e["event"] == "run.created").unwrap();
    let frozen = &created["properties"]["mcp_servers"];
    assert_eq!(frozen[0]["id"], "everything");
    assert_eq!(
        frozen[0]["transport"]["env_keys"],
        json!(["EVERYTHING_TOKEN"])
    );
    assert!(!frozen.to_string().contains("secrets."), "{frozen}");
    let kind = |k: &str| -> Vec<&Value> {
        evs.iter()
            .filter(|e| e["event"] == k)
            .map(|e| &e["properties"])
            .collect()
    };
    assert_eq!(kind("agent.mcp.ready")[0]["server"], "everything");
    let failed = kind("agent.mcp.failed");
    assert_eq!(failed[0]["server"], "flaky");
    // The server got the secret (its environment, printed by the tool, shows the
    // redaction marker where the value was); the model got the tool's result.
    let done = kind("agent.tool.completed");
    let out = done[0]["output"].as_str().unwrap();
    assert!(
        out.contains("\"EVERYTHING_TOKEN\": \"[REDACTED]\""),
        "{out}"
    );
    let results = tool_results(P, &llm.requests()[1].body);
    assert!(results[0].1.contains("EVERYTHING_TOKEN"), "{results:?}");
    assert!(!results[0].1.contains(secret));

    // The stage details list each server with its state and the tools offered and used.
    let st = s.get(&format!("/api/v1/runs/{id}/stages/work")).json();
    let servers = &st["visits"][0]["mcp_servers"];
    assert_eq!(servers[0]["server"], "everything", "{st}");
    assert_eq!(servers[0]["state"], "ready");
    assert_eq!(
        servers[0]["used"],
        json!(["get-env", "trigger-long-running-operation"])
    );
    assert!(servers[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "mcp__everything__echo" && t["original_name"] == "echo"));
    assert_eq!(servers[1]["server"], "flaky");
    assert_eq!(servers[1]["state"], "failed");
    assert!(servers[1]["stderr"]
        .as_str()
        .unwrap()
        .contains("cannot open the database"));
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_required_server_that_fails_fails_the_run_before_any_model_call() {
    require(Tool::Git);
    let py = mcp::python();
    let llm = ScriptedServer::turns(P, vec![text("never")], SMALL_USAGE);
    let s = served_anthropic(&llm.base, "");
    let body = with_servers(
        AGENT,
        json!([{"id": "db", "transport": scripted_def(&py, "exit"), "required": true}]),
    );
    let id = run_to_end(&s, &body);
    let end = run_json(&s, &id);
    assert_eq!(end["lifecycle"]["status"]["kind"], "failed", "{end}");
    let evs = run_events(&s, &id);
    let failed = evs
        .iter()
        .find(|e| e["event"] == "stage.failed")
        .expect("stage.failed");
    let text = failed.to_string();
    assert!(
        text.contains("the required MCP server `db` failed"),
        "{text}"
    );
    assert_eq!(llm.count(), 0, "a model was called");
}

#[test]
fn settings_give_runs_servers_and_bodies_are_checked() {
    let py = mcp::python();
    let llm = ScriptedServer::turns(P, vec![], SMALL_USAGE);
    let script = mcp::script("stdio_server.py");
    let extra = format!(
        "[run.agent]\nmcp_servers = [{{ id = \"echo\", transport = {{ type = \"stdio\", command = [\"{py}\", \"{script}\", \"ok\"] }} }}]\n"
    );
    let s = served_anthropic(&llm.base, &extra);
    let created = |body: &Value| {
        let id = create_run(&s, body);
        run_events(&s, &id)
            .into_iter()
            .find(|e| e["event"] == "run.created")
            .map(|e| e["properties"]["mcp_servers"].clone())
            .unwrap_or(Value::Null)
    };
    assert_eq!(created(&run_body(AGENT))[0]["id"], "echo");
    assert_eq!(created(&with_servers(AGENT, json!([]))), Value::Null);
    let r = s.post(
        "/api/v1/runs",
        &with_servers(AGENT, json!(["echo", "missing"])).to_string(),
    );
    let e = assert_error(&r, 422);
    assert_eq!(e["errors"][0]["field"], "mcp_servers[0]", "{e}");
    let r = s.post(
        "/api/v1/runs",
        &with_servers(AGENT, json!([{"id": "x", "transport": {"type": "ftp"}}])).to_string(),
    );
    assert_eq!(
        assert_error(&r, 422)["errors"][0]["field"],
        "mcp_servers[0].transport.type"
    );
}

/// The stdio server of one container run, found by the marker in its log file's name: the
/// Python process itself (not the `nsenter` or `bwrap` that started it), as `(pid, cmdline)`.
fn server_process(marker: &str) -> Option<(String, String)> {
    processes_with(marker).into_iter().find_map(|p| {
        let (pid, cmd) = p.split_once(": ")?;
        cmd.starts_with("python3 ")
            .then(|| (pid.to_string(), cmd.to_string()))
    })
}

/// Starts a container run whose agent calls `mcp__slow__echo` on a stdio server that never
/// answers calls, and waits until the call is in flight. Returns the run id, the server's log
/// (in the run's workspace) and its pid.
fn container_run_in_a_call(
    s: &Server,
    src: &std::path::Path,
    marker: &str,
) -> (String, std::path::PathBuf, String) {
    let log = format!("{marker}.log");
    let body = json!({
        "workflow": package(AGENT),
        "sandbox": {"provider": "container"},
        "source_directory": src.display().to_string(),
        "mcp_servers": [{"id": "slow", "tool_timeout_secs": 600, "required": true,
                         "transport": {"type": "stdio",
                                       "command": ["python3", "stdio_server.py", "silent-call", log]}}],
    });
    let id = create_run(s, &body);
    start_run(s, &id);
    let log = s
        .path()
        .join("workspaces")
        .join(&id)
        .join(format!("{marker}.log"));
    wait_for(60, "the MCP call in flight", || {
        mcp::logged(&log)
            .iter()
            .any(|m| m["method"] == "tools/call")
            .then_some(())
    });
    let (pid, _) = server_process(marker).expect("the MCP server's process");
    (id, log, pid)
}

/// A container run's stdio server runs inside the run's container (its pid namespace, the
/// container's `HOME`, the workspace as its directory) and ends with the run: cancelling the
/// run while a call is in flight cancels the call on the server (`notifications/cancelled`
/// naming the call's id) and stops the server; a kill -9 of svc stops it too.
#[test]
#[cfg_attr(
    not(all(has_git, has_bwrap)),
    ignore = "needs git and bubblewrap able to create namespaces: apt-get install git; apt-get install bubblewrap"
)]
fn a_container_runs_stdio_server_runs_inside_it_and_ends_with_the_run() {
    require(Tool::Git);
    require(Tool::Bwrap);
    // The script reaches the container the way host files do: copied into the workspace.
    let src = outside_tmp();
    std::fs::copy(
        mcp::script("stdio_server.py"),
        src.path().join("stdio_server.py"),
    )
    .unwrap();
    let llm = ScriptedServer::turns(
        P,
        vec![
            tools(&[("c1", "mcp__slow__echo", json!({"text": "one"}))]),
            tools(&[("c2", "mcp__slow__echo", json!({"text": "two"}))]),
        ],
        SMALL_USAGE,
    );
    let s = served_anthropic(&llm.base, "");
    let tag = format!("svc-mcp-ct-{}", std::process::id());

    let cancelled = format!("{tag}-cancel");
    let (id, log, pid) = container_run_in_a_call(&s, src.path(), &cancelled);
    let ns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok();
    assert!(ns(&pid).is_some());
    assert_ne!(
        ns(&pid),
        ns("self"),
        "the server runs in the host's pid namespace"
    );
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let environ = String::from_utf8_lossy(&environ);
    assert!(
        environ.split('\0').any(|v| v == "HOME=/tmp"),
        "not the container's HOME: {environ}"
    );
    assert_eq!(s.post(&format!("/api/v1/runs/{id}/cancel"), "").status, 200);
    let call_id = mcp::logged(&log)
        .into_iter()
        .find(|m| m["method"] == "tools/call")
        .map(|m| m["id"].clone())
        .expect("the call");
    wait_for(10, "notifications/cancelled for the call", || {
        mcp::logged(&log)
            .iter()
            .any(|m| {
                m["method"] == "notifications/cancelled" && m["params"]["requestId"] == call_id
            })
            .then_some(())
    });
    wait_for(10, "the server to end with the cancelled run", || {
        processes_with(&cancelled).is_empty().then_some(())
    });
    let end = wait_run_end(&s, &id);
    assert_eq!(
        end["lifecycle"]["status"],
        json!({"kind": "failed", "reason": "cancelled"})
    );

    let killed = format!("{tag}-kill");
    let (_id, _log, _pid) = container_run_in_a_call(&s, src.path(), &killed);
    let _state = s.kill();
    wait_for(10, "the server to end with svc (kill -9)", || {
        processes_with(&killed).is_empty().then_some(())
    });
}

/// A node's `mcp_servers` subset: the stage gets only the servers it names; a name the run
/// does not have fails the stage, naming the run's servers, before any model call.
#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_nodes_subset_picks_its_servers_and_an_unknown_one_fails_the_stage() {
    require(Tool::Git);
    let py = mcp::python();
    let llm = ScriptedServer::turns(P, vec![text("done")], SMALL_USAGE);
    let s = served_anthropic(&llm.base, "");
    let servers = json!([
        {"id": "one", "transport": scripted_def(&py, "ok")},
        {"id": "two", "transport": scripted_def(&py, "ok")},
    ]);
    let only_two = AGENT.replace("prompt=", "mcp_servers=\"two\", prompt=");
    let id = run_to_end(&s, &with_servers(&only_two, servers.clone()));
    assert_eq!(
        run_json(&s, &id)["lifecycle"]["status"]["kind"],
        "succeeded"
    );
    let names: Vec<String> = llm.requests()[0].body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(String::from))
        .filter(|n| n.starts_with("mcp__"))
        .collect();
    assert_eq!(
        names,
        ["mcp__two__echo", "mcp__two__fail", "mcp__two__sleep"]
    );

    let typo = AGENT.replace("prompt=", "mcp_servers=\"one, tree\", prompt=");
    let id = run_to_end(&s, &with_servers(&typo, servers));
    assert_eq!(run_json(&s, &id)["lifecycle"]["status"]["kind"], "failed");
    let failed = run_events(&s, &id)
        .into_iter()
        .find(|e| e["event"] == "stage.failed")
        .expect("stage.failed")
        .to_string();
    assert!(
        failed.contains(
            "names the MCP server `tree`, which this run does not have (its servers: one, two)"
        ),
        "{failed}"
    );
    assert_eq!(llm.count(), 1, "only the first run called the model");
}
