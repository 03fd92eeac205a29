//! MCP client benchmarks (harness = false), each beside its floor, the same exchange done by
//! a bare client (pipes or one HTTP request, no threads, no channels):
//! - handshake + tool listing of a stdio server through `svc::internal::mcp` vs the server's own
//!   start-up time (bare: spawn, write initialize/initialized/tools/list at once, read the
//!   listing): target at most 20 ms above;
//! - a `tools/call` round trip through svc vs the bare exchange: target at most 1 ms above
//!   over stdio, 2 ms over loopback Streamable HTTP;
//! - a stage's 5 servers (each taking ~300 ms to start) started by `agent::mcp::McpTools`:
//!   total vs the slowest (concurrent) and the sum (one by one).
//!
//! Servers: `@modelcontextprotocol/server-everything` (node) when `.ci/mcp-servers.sh`
//! installed it, and the scripted Python server of the tests (`tests/mcp/stdio_server.py`).
//! Run: `cargo bench --bench mcp_bench` (MCP_BENCH_CALLS=500 for more calls).

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{env_or, median};
use svc::internal::base::cancel::CancelToken;
use svc::internal::mcp::{self, Client};

const LONG: Duration = Duration::from_secs(60);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn everything() -> Option<PathBuf> {
    let p = svc::internal::test_tools::mcp_servers_dir()
        .join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    p.is_file().then_some(p)
}

fn scripted() -> Vec<String> {
    vec![
        "python3".into(),
        root()
            .join("tests/mcp/stdio_server.py")
            .display()
            .to_string(),
        "ok".into(),
    ]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn line(v: Value) -> String {
    let mut s = v.to_string();
    s.push('\n');
    s
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bare","version":"0"}}}"#;

/// Bare: spawn, write the handshake and the listing at once, read until the listing.
fn bare_startup(argv: &[String]) -> Duration {
    let t0 = Instant::now();
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let msgs = format!(
        "{INIT}\n{}{}",
        line(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
        line(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}))
    );
    stdin.write_all(msgs.as_bytes()).expect("write");
    stdin.flush().expect("flush");
    let mut l = String::new();
    loop {
        l.clear();
        if out.read_line(&mut l).expect("read") == 0 {
            panic!("the server ended before listing its tools");
        }
        let v: Value = serde_json::from_str(&l).unwrap_or(Value::Null);
        if v["id"] == 2 && v["result"]["tools"].is_array() {
            break;
        }
    }
    let took = t0.elapsed();
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    took
}

fn svc_stdio(argv: &[String]) -> Client {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    svc::internal::procs::isolate(&mut cmd);
    mcp::spawn_stdio(cmd).expect("spawn")
}

/// Through svc: spawn, `initialize`, `notifications/initialized`, `tools/list`.
fn svc_startup(argv: &[String]) -> Duration {
    let cancel = CancelToken::new();
    let t0 = Instant::now();
    let mut c = svc_stdio(argv);
    c.initialize(LONG, &cancel).expect("initialize");
    c.list_tools(LONG, &cancel).expect("tools/list");
    let took = t0.elapsed();
    c.close(Duration::from_secs(2));
    took
}

fn bench_startup(name: &str, argv: &[String], runs: usize) {
    let mut bare = Vec::new();
    let mut ours = Vec::new();
    // Alternating, so drift in the machine's load hits both alike.
    for _ in 0..runs {
        bare.push(ms(bare_startup(argv)));
        ours.push(ms(svc_startup(argv)));
    }
    let (b, o) = (median(&mut bare), median(&mut ours));
    println!(
        "startup  {name:<28} bare {b:8.2} ms   svc {o:8.2} ms   svc - bare {:+7.2} ms (target <= 20)",
        o - b
    );
}

/// Bare round trips of `tools/call` over a server's pipes (after a bare handshake).
fn bare_calls(argv: &[String], tool: &str, args: &Value, n: usize) -> Vec<f64> {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut l = String::new();
    let mut send = |v: String| {
        stdin.write_all(v.as_bytes()).expect("write");
        stdin.flush().expect("flush");
    };
    send(format!("{INIT}\n"));
    out.read_line(&mut l).expect("init answer");
    send(line(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ));
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let id = 10 + i;
        let msg = line(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                              "params": {"name": tool, "arguments": args}}));
        let t0 = Instant::now();
        send(msg);
        loop {
            l.clear();
            out.read_line(&mut l).expect("answer");
            // Parsed, as any client must to find its id.
            let v: Value = serde_json::from_str(&l).unwrap_or(Value::Null);
            if v["id"] == id {
                break;
            }
        }
        times.push(ms(t0.elapsed()));
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    times
}

fn svc_calls(c: &mut Client, tool: &str, args: &Value, n: usize) -> Vec<f64> {
    let cancel = CancelToken::new();
    (0..n)
        .map(|_| {
            let t0 = Instant::now();
            let r = c.call_tool(tool, args, LONG, &cancel).expect("call");
            let _ = mcp::content::render(&r);
            ms(t0.elapsed())
        })
        .collect()
}

fn report_calls(label: &str, mut bare: Vec<f64>, mut ours: Vec<f64>, target: f64) {
    let (b, o) = (median(&mut bare), median(&mut ours));
    println!(
        "call     {label:<28} bare {b:8.3} ms   svc {o:8.3} ms   svc - bare {:+7.3} ms (target <= {target})",
        o - b
    );
}

fn bench_stdio_calls(name: &str, argv: &[String], tool: &str, args: &Value, n: usize) {
    // Warm both (imports, JIT), then measure.
    let bare = bare_calls(argv, tool, args, n + 20).split_off(20);
    let mut c = svc_stdio(argv);
    let cancel = CancelToken::new();
    c.initialize(LONG, &cancel).expect("initialize");
    let _ = svc_calls(&mut c, tool, args, 20);
    let ours = svc_calls(&mut c, tool, args, n);
    c.close(Duration::from_secs(2));
    report_calls(&format!("{name} (stdio)"), bare, ours, 1.0);
}

/// Bare Streamable HTTP: one ureq agent, `initialize`, then a POST per call with the
/// session id, the answer read as the server sends it (JSON or one event).
fn bare_http_calls(url: &str, tool: &str, args: &Value, n: usize) -> Vec<f64> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let post = |body: &str, session: Option<&str>| {
        let mut r = agent
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(s) = session {
            r = r
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", "2025-06-18");
        }
        r.send(body).expect("post")
    };
    let resp = post(INIT, None);
    let session = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let _ = resp.into_body().read_to_vec();
    let _ = post(
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        session.as_deref(),
    )
    .into_body()
    .read_to_vec();
    (0..n)
        .map(|i| {
            let body = json!({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                              "params": {"name": tool, "arguments": args}})
            .to_string();
            let t0 = Instant::now();
            let resp = post(&body, session.as_deref());
            // The whole answer (the server ends a request's event stream after its
            // response), so the connection goes back to the pool as a bare client's would.
            let mut text = String::new();
            let _ = resp.into_body().into_reader().read_to_string(&mut text);
            let data = text
                .lines()
                .find_map(|l| l.strip_prefix("data:"))
                .unwrap_or(&text);
            let _: Value = serde_json::from_str(data.trim()).unwrap_or(Value::Null);
            ms(t0.elapsed())
        })
        .collect()
}

fn bench_http_calls(name: &str, url: &str, tool: &str, args: &Value, n: usize) {
    let bare = bare_http_calls(url, tool, args, n + 20).split_off(20);
    let mut c = mcp::streamable(url, vec![]);
    let cancel = CancelToken::new();
    c.initialize(LONG, &cancel).expect("initialize");
    let _ = svc_calls(&mut c, tool, args, 20);
    let ours = svc_calls(&mut c, tool, args, n);
    c.close(Duration::from_secs(2));
    report_calls(&format!("{name} (loopback HTTP)"), bare, ours, 2.0);
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port")
}

fn wait_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "no listener on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn bench_concurrent_start(runs: usize) {
    use svc::internal::agent::mcp::{McpTools, StartContext};
    let script = root()
        .join("tests/mcp/stdio_server.py")
        .display()
        .to_string();
    let defs: Vec<svc::internal::mcp::ServerDef> = (0..5)
        .map(|i| {
            serde_json::from_value(json!({
                "id": format!("s{i}"),
                "transport": {"type": "stdio",
                              "command": ["python3", script, "slow-start", "/dev/null", "0.3"]}
            }))
            .expect("def")
        })
        .collect();
    let dir = std::env::temp_dir();
    let isolation = svc::internal::sandbox::Isolation::Local;
    let lookup = |_: &str| None;
    let cx = StartContext {
        isolation: &isolation,
        workdir: Path::new(&dir),
        env: None,
        secrets: &lookup,
    };
    let mut totals = Vec::new();
    let mut slowest = Vec::new();
    let mut sums = Vec::new();
    for _ in 0..runs {
        let mut each = Vec::new();
        let t0 = Instant::now();
        let tools = McpTools::start(&defs, &cx, &CancelToken::new(), &mut |e| {
            if e.kind() == "agent.mcp.ready" {
                each.push(e.properties()["duration_ms"].as_f64().unwrap_or(0.0));
            }
        });
        totals.push(ms(t0.elapsed()));
        assert_eq!(each.len(), 5, "every server started");
        slowest.push(each.iter().cloned().fold(0.0, f64::max));
        drop(tools);
        // One by one, for comparison: the same five, each started alone.
        let mut sum = 0.0;
        for d in &defs {
            let t1 = Instant::now();
            drop(McpTools::start(
                std::slice::from_ref(d),
                &cx,
                &CancelToken::new(),
                &mut |_| {},
            ));
            sum += ms(t1.elapsed());
        }
        sums.push(sum);
    }
    println!(
        "5 servers (each ~300 ms to start): concurrent total {:8.1} ms, slowest {:8.1} ms, one by one {:8.1} ms",
        median(&mut totals),
        median(&mut slowest),
        median(&mut sums)
    );
}

fn main() {
    let runs: usize = env_or("MCP_BENCH_STARTS", 10);
    let calls: usize = env_or("MCP_BENCH_CALLS", 300);
    let args = json!({"text": "hello"});
    bench_startup("scripted python", &scripted(), runs);
    bench_stdio_calls("scripted python echo", &scripted(), "echo", &args, calls);
    if let Some(js) = everything() {
        let argv = vec!["node".to_string(), js.display().to_string(), "stdio".into()];
        bench_startup("server-everything (node)", &argv, runs);
        let echo = json!({"message": "hello"});
        bench_stdio_calls("server-everything echo", &argv, "echo", &echo, calls);
        let port = free_port();
        let mut server = Command::new("node")
            .arg(&js)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("node");
        wait_port(port);
        let url = format!("http://127.0.0.1:{port}/mcp");
        bench_http_calls("server-everything echo", &url, "echo", &echo, calls);
        let _ = server.kill();
        let _ = server.wait();
    } else {
        println!("server-everything is not installed (.ci/mcp-servers.sh): its lines are skipped");
    }
    bench_concurrent_start(runs.min(5));
}
