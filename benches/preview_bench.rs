//! Preview proxy benchmark (harness = false; `cargo bench --bench preview_bench`): what one
//! proxied request costs over asking the sandbox's port directly, on loopback.
//!
//! A tiny HTTP/1.0 server in this process stands in for a dev server in a `local` run's
//! sandbox (it answers `200 ok` and closes). A run holds a ready sandbox (a command stage
//! that sleeps), and a signed preview URL points at that port. Each request opens a new
//! connection and reads the answer to its end, directly or through the proxy (on the UI's
//! origin, sandboxed; and on a preview listener of its own), in alternating rounds so a
//! noisy machine hurts them alike. Prints the median, p90 and p99 per request and the
//! proxy's overhead (proxied minus direct, at the median and at p90). `SVC_BENCH_REQUESTS`
//! (default 400) sets the requests per round, `SVC_BENCH_ROUNDS` (default 8) the rounds.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};
use svc::internal::server::{self, http::Listen, ServerOptions};

mod support;

/// The stand-in dev server: answers every request with `200 ok` and closes.
fn upstream() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut r = BufReader::new(conn);
                let mut line = String::new();
                while r.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                    line.clear();
                }
                let _ = r.get_mut().write_all(
                    b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok",
                );
            });
        }
    });
    port
}

/// One GET on a new connection, read to its end; the time it took.
fn get(addr: &str, path: &str) -> Duration {
    let began = Instant::now();
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).ok();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read");
    assert!(
        out.starts_with(b"HTTP/1."),
        "{}",
        String::from_utf8_lossy(&out)
    );
    assert!(
        out.windows(2).any(|w| w == b"ok"),
        "{}",
        String::from_utf8_lossy(&out)
    );
    began.elapsed()
}

/// A JSON call with the dev token on a new connection; the parsed answer.
fn api(addr: &str, token: &str, method: &str, path: &str, body: &Value) -> Value {
    let mut c = support::Client::new(addr, &format!("Authorization: Bearer {token}"));
    let r = c.call(method, path, &body.to_string());
    assert!(
        r.status < 300,
        "{method} {path}: {}",
        String::from_utf8_lossy(&r.body)
    );
    serde_json::from_slice(&r.body).unwrap_or(Value::Null)
}

/// A started server (settings `extra`) with a run whose sandbox is ready, and the path of a
/// signed preview of `port`: (server, address the preview is served at, path).
fn server_with_preview(
    extra: &str,
    port: u16,
) -> (server::RunningServer, tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("settings.toml"),
        format!("[server.auth]\nmethods = [\"dev-token\"]\n{extra}"),
    )
    .expect("settings");
    let running = server::start(ServerOptions {
        state_dir: dir.path().to_path_buf(),
        settings_path: None,
        listen: Some(Listen::Tcp("127.0.0.1:0".into())),
        dev: true,
    })
    .expect("server");
    let addr = running.http.local_addr().to_string();
    let token = running.dev_token.clone().map(|t| t.0).unwrap_or_default();
    let flow = "digraph p { start [shape=Mdiamond]; exit [shape=Msquare]; hold [shape=parallelogram, script=\"sleep 600\"]; start -> hold -> exit }";
    let run = api(
        &addr,
        &token,
        "POST",
        "/api/v1/runs",
        &json!({"workflow": {"entrypoint": "p.dot", "files": {"p.dot": flow}}}),
    );
    let id = run["id"].as_str().expect("id").to_string();
    api(
        &addr,
        &token,
        "POST",
        &format!("/api/v1/runs/{id}/start"),
        &json!({}),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while api(
        &addr,
        &token,
        "GET",
        &format!("/api/v1/runs/{id}"),
        &json!({}),
    )["sandbox"]["kind"]
        != "ready"
    {
        assert!(Instant::now() < deadline, "the sandbox never got ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    let made = api(
        &addr,
        &token,
        "POST",
        &format!("/api/v1/runs/{id}/preview"),
        &json!({"port": port, "expires_in_secs": 3600, "signed": true}),
    );
    let url = made["url"].as_str().expect("url");
    let at = url.find("/preview/").expect("a preview path");
    let served = url[..at].trim_start_matches("http://").to_string();
    let served = if served.is_empty() { addr } else { served };
    (running, dir, served, url[at..].to_string())
}

/// Prints one path's figures; its (median, p90).
fn summary(name: &str, mut us: Vec<f64>) -> (f64, f64) {
    let med = support::median(&mut us);
    let p90 = support::percentile(&us, 0.90);
    let p99 = support::percentile(&us, 0.99);
    println!(
        "{name:<34} median {med:>7.1} µs   p90 {p90:>7.1} µs   p99 {p99:>7.1} µs   ({} requests)",
        us.len()
    );
    (med, p90)
}

fn main() {
    let per_round = support::env_or("SVC_BENCH_REQUESTS", 400.0) as usize;
    let rounds = support::env_or("SVC_BENCH_ROUNDS", 8.0) as usize;
    let port = upstream();
    let direct_addr = format!("127.0.0.1:{port}");
    let (_ui, _d1, ui_addr, ui_path) = server_with_preview("", port);
    let (_own, _d2, own_addr, own_path) =
        server_with_preview("[server.preview]\nlisten = \"127.0.0.1:0\"\n", port);
    let mut direct = Vec::new();
    let mut on_ui = Vec::new();
    let mut on_own = Vec::new();
    for _ in 0..rounds {
        for _ in 0..per_round {
            direct.push(get(&direct_addr, "/x").as_secs_f64() * 1e6);
        }
        for _ in 0..per_round {
            on_ui.push(get(&ui_addr, &format!("{ui_path}x")).as_secs_f64() * 1e6);
        }
        for _ in 0..per_round {
            on_own.push(get(&own_addr, &format!("{own_path}x")).as_secs_f64() * 1e6);
        }
    }
    let d = summary("direct to the sandbox's port", direct);
    let u = summary("proxied, on the UI's origin", on_ui);
    let o = summary("proxied, on a preview listener", on_own);
    println!(
        "proxy overhead (median): UI origin {:.1} µs, preview listener {:.1} µs",
        u.0 - d.0,
        o.0 - d.0
    );
    println!(
        "proxy overhead (p90):    UI origin {:.1} µs, preview listener {:.1} µs",
        u.1 - d.1,
        o.1 - d.1
    );
}
