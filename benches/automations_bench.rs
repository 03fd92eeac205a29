//! Automations at scale (harness = false; `cargo bench --bench automations_bench`). Boots the
//! server in-process on loopback with 10,000 automations that each have a schedule, then
//! prints:
//!
//! - the time to create them through the catalog (and the scheduler's reconcile of each);
//! - idle CPU: the whole process's user + system time over 10 s while nothing is due, as a
//!   percentage of one core (target: at most 1 %);
//! - `GET /api/v1/automations` (all 10,000, about 5 MB) latency over loopback, median and
//!   worst of 20 (target: under 50 ms);
//! - fire-to-run-start: 200 more automations due every minute, all at the next minute
//!   boundary; for each, due time -> its run's `run.queued` (created and started), p50/p99
//!   (target p99 at most 1 s), and due time -> the fire's `fired_at`.
//!
//! `SVC_BENCH_AUTOMATIONS=N` changes the 10,000; `SVC_BENCH_IDLE_SECS` the 10 s.

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::{env_or, percentile, rusage, Client};
use svc::internal::server::{self, http::Listen, ServerOptions};

mod support;

const HELLO: &str = "digraph hello { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }";
const EVERY_MINUTE: usize = 200;

fn ms(ts: &str) -> i64 {
    svc::internal::base::clock::parse_ts(ts).unwrap_or(0)
}

fn main() {
    let _ = env_logger::Builder::from_env(
        env_logger::Env::default().default_filter_or("error,tiny_http=off"),
    )
    .try_init();
    let n: usize = env_or("SVC_BENCH_AUTOMATIONS", 10_000);
    let dir = tempfile::tempdir().expect("tempdir");
    // Room for every fire's run to start at once: what is measured is the automations'
    // part (fire -> run made and queued), not the concurrency limit.
    std::fs::write(
        dir.path().join("settings.toml"),
        "[server.scheduler]\nmax_concurrent_runs = 16\n",
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
    let mut c = Client::new(&addr, &format!("Authorization: Bearer {token}"));
    let v = c.call(
        "POST",
        "/api/v1/workflow-versions",
        &json!({"entrypoint": "h.dot", "files": {"h.dot": HELLO}}).to_string(),
    );
    let version: Value = serde_json::from_slice(&v.body).expect("version");
    let version = version["id"].as_str().expect("id").to_string();
    let catalog = &running.app.automations;

    // 10,000 daily schedules, none due in the next hours: spread over the minutes of 03:xx
    // in a dozen zones, so the scheduler's queue holds many distinct due times.
    let zones = [
        "UTC",
        "Europe/Berlin",
        "America/New_York",
        "Asia/Tokyo",
        "Australia/Sydney",
        "America/Sao_Paulo",
    ];
    let now_hour = chrono_hour();
    let t0 = Instant::now();
    for i in 0..n {
        let hour = (now_hour + 6 + (i % 12)) % 24;
        let body = json!({
            "id": format!("auto-{i:05}"),
            "name": format!("Automation {i}"),
            "target": {"workflow_version_id": version},
            "triggers": [
                {"id": "manual", "kind": "api"},
                {"id": "daily", "kind": "schedule", "expression": format!("{} {hour} * * *", i % 60), "timezone": "UTC"},
                {"id": "weekly", "kind": "schedule", "expression": format!("{} 3 * * {}", i % 60, i % 7), "timezone": zones[i % zones.len()]}
            ]
        });
        catalog
            .create(body.to_string().as_bytes())
            .expect("create automation");
    }
    let created = t0.elapsed();
    println!(
        "create: {n} automations with 2 schedules each in {:.2} s ({:.0} µs each, catalog write + schedule reconcile)",
        created.as_secs_f64(),
        created.as_secs_f64() * 1e6 / n as f64
    );

    // Idle CPU.
    std::thread::sleep(Duration::from_secs(2));
    let secs: f64 = env_or("SVC_BENCH_IDLE_SECS", 10.0);
    let cpu0 = rusage(libc::RUSAGE_SELF);
    let w0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let cpu = rusage(libc::RUSAGE_SELF) - cpu0;
    let wall = w0.elapsed();
    println!(
        "idle: {:.3} % of one core over {:.0} s with {n} automations scheduled ({:.1} ms CPU; target <= 1 %)",
        cpu.as_secs_f64() * 100.0 / wall.as_secs_f64(),
        wall.as_secs_f64(),
        cpu.as_secs_f64() * 1e3
    );

    // Listing: a fresh connection per request, read to its end (a body this large is sent
    // chunked).
    let mut lat = Vec::new();
    let mut bytes = 0;
    for _ in 0..20 {
        let t = Instant::now();
        let (status, body) = get_all(&addr, &token, "/api/v1/automations");
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(status.contains(" 200 "), "{status}");
        bytes = body;
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    println!(
        "list: GET /api/v1/automations ({n} entries, {:.1} MB) median {:.1} ms, max {:.1} ms of 20, connect to last byte (target < 50 ms)",
        bytes as f64 / 1e6,
        percentile(&lat, 0.5),
        lat[lat.len() - 1]
    );

    // Fire-to-run-start at the next minute boundary.
    for i in 0..EVERY_MINUTE {
        let body = json!({
            "id": format!("minutely-{i:03}"),
            "name": format!("Every minute {i}"),
            "target": {"workflow_version_id": version},
            "triggers": [{"id": "tick", "kind": "schedule", "expression": "* * * * *"}]
        });
        catalog
            .create(body.to_string().as_bytes())
            .expect("create automation");
    }
    let now = svc::internal::base::clock::SystemClock;
    let boundary = {
        use svc::internal::base::clock::Clock;
        (now.now_ms() / 60_000 + 1) * 60_000
    };
    let wait = boundary - {
        use svc::internal::base::clock::Clock;
        now.now_ms()
    };
    println!(
        "fire: waiting {:.1} s for the minute boundary",
        wait as f64 / 1e3
    );
    std::thread::sleep(Duration::from_millis(wait.max(0) as u64 + 3_000));
    // A fresh connection: the server closed the idle one meanwhile.
    let mut c = Client::new(&addr, &format!("Authorization: Bearer {token}"));
    let mut to_start = Vec::new();
    let mut to_fire = Vec::new();
    for i in 0..EVERY_MINUTE {
        let f = c.call(
            "GET",
            &format!("/api/v1/automations/minutely-{i:03}/fires?page[limit]=1"),
            "",
        );
        let f: Value = serde_json::from_slice(&f.body).expect("fires");
        let fire = &f["data"][0];
        if fire.is_null() {
            continue;
        }
        let due = ms(fire["due_at"].as_str().unwrap_or(""));
        to_fire.push((ms(fire["fired_at"].as_str().unwrap_or("")) - due) as f64);
        let run = fire["run_id"].as_str().unwrap_or("");
        let ev = c.call("GET", &format!("/api/v1/runs/{run}/events?limit=5"), "");
        let ev: Value = serde_json::from_slice(&ev.body).unwrap_or(Value::Null);
        if let Some(q) = ev["data"]
            .as_array()
            .and_then(|a| a.iter().find(|e| e["event"] == "run.queued"))
        {
            to_start.push((ms(q["ts"].as_str().unwrap_or("")) - due) as f64);
        }
    }
    to_start.sort_by(|a, b| a.total_cmp(b));
    to_fire.sort_by(|a, b| a.total_cmp(b));
    println!(
        "fire: {} of {EVERY_MINUTE} due at once fired; due -> fire recorded p50 {:.0} ms p99 {:.0} ms; due -> run created and queued p50 {:.0} ms p99 {:.0} ms (target p99 <= 1000 ms)",
        to_fire.len(),
        percentile(&to_fire, 0.5),
        percentile(&to_fire, 0.99),
        percentile(&to_start, 0.5),
        percentile(&to_start, 0.99),
    );
    drop(running);
}

/// `GET path` on a new connection with `Connection: close`: the status line and the number
/// of bytes after the head (chunk framing included: close enough for a size).
fn get_all(addr: &str, token: &str, path: &str) -> (String, usize) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read");
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0);
    let status = String::from_utf8_lossy(&raw[..raw.len().min(40)])
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    (status, raw.len().saturating_sub(head_end + 4))
}

/// The current UTC hour.
fn chrono_hour() -> usize {
    use svc::internal::base::clock::Clock;
    ((svc::internal::base::clock::SystemClock.now_ms() / 3_600_000) % 24) as usize
}
