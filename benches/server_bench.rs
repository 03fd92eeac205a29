//! Server benchmarks (harness = false; `cargo bench --bench server_bench`). Loopback only,
//! bounded in count and time. Prints one line per figure:
//!
//! - `GET /health` requests/s over keep-alive loopback connections (std-socket client);
//! - create+start requests/s (one `POST /api/v1/runs` + one `POST …/start` per run) and its
//!   ratio to `/health`;
//! - 1,000 trivial runs through the scheduler (start → exit), runs/s at the default limit;
//! - SSE commit-to-client latency p50/p99 with 1,000 subscribers on one run (events
//!   appended in-process; latency = client receipt − return of the committing `append`);
//! - idle RSS of the real binary after start.

use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};
use support::server::{
    append_ticks, boot, create_start, create_then_start, health_rps, latencies, sse_epoll,
};
use support::{env_or, percentile};
use svc::internal::store::{EventDraft, NewRun};

mod support;

const GATED: &str = "digraph gated { start [shape=Mdiamond]; exit [shape=Msquare]; ask [shape=hexagon, label=\"Go?\"]; start -> ask; ask -> exit [label=\"Yes\"] }";
const HELLO: &str = "digraph hello { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }";

/// Client connections for /health and the create-then-start pairs (`SVC_BENCH_CONNS`,
/// default 4), so both are measured at the same concurrency.
fn bench_conns() -> usize {
    env_or("SVC_BENCH_CONNS", 4)
}

/// Runs created by the `pairs` section (`SVC_BENCH_RUNS`, default 8,000: about two seconds,
/// so the figure is the steady state rather than the first half second of a fresh server).
fn bench_runs() -> usize {
    env_or("SVC_BENCH_RUNS", 8000)
}

fn main() {
    let _ = env_logger::Builder::from_env(
        env_logger::Env::default().default_filter_or("error,tiny_http=off"),
    )
    .try_init();
    let (_dir, running, addr, token) = boot();

    // `SVC_BENCH=health,start,sse,rss` picks sections (default: all), for profiling one.
    let only = std::env::var("SVC_BENCH").unwrap_or_default();
    let want = |s: &str| only.is_empty() || only.split(',').any(|o| o == s);

    // 1. /health
    let rps = if want("health") || want("start") || want("api") {
        // `SVC_BENCH_HEALTH_SECS=0` skips it (for syscall counts of the other sections).
        let secs = env_or("SVC_BENCH_HEALTH_SECS", 3.0);
        if secs > 0.0 {
            health_rps(&addr, &token, bench_conns(), secs)
        } else {
            f64::NAN
        }
    } else {
        0.0
    };
    if want("health") {
        println!(
            "health: {rps:.0} requests/s ({} keep-alive connections, 3 s)",
            bench_conns()
        );
    }

    let store = Arc::clone(&running.app.runs.store);
    if want("start") {
        // 2 + 3. create+start with trivial runs executing meanwhile, then 1,000 runs
        // through the scheduler.
        let n_runs = 1000;
        let t1 = Instant::now();
        let (create_secs, start_secs) = create_start(&addr, &token, HELLO, n_runs);
        let requests = 2.0 * n_runs as f64;
        let cs_rps = requests / (create_secs + start_secs);
        println!(
        "create+start, trivial runs executing meanwhile: {:.0} creates/s, {:.0} starts/s, {cs_rps:.0} requests/s overall = {:.1}% of /health (4 connections)",
        n_runs as f64 / create_secs,
        n_runs as f64 / start_secs,
        100.0 * cs_rps / rps
    );
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let done = store
                .query_runs(&svc::internal::store::RunQuery {
                    statuses: vec!["succeeded".into()],
                    limit: 1_000_000,
                    ..Default::default()
                })
                .map(|v| v.len())
                .unwrap_or(0);
            if done >= n_runs || Instant::now() > deadline {
                let secs = t1.elapsed().as_secs_f64();
                println!(
                "scheduler: {done} trivial runs from the first start to the last completion in {secs:.2} s = {:.0} runs/s (max_concurrent_runs 5)",
                done as f64 / secs
            );
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    if want("sse") {
        // 4a. SSE latency with 1,000 subscribers read by one epoll thread (as if they were
        // on other machines: the clients do not compete with the server for the 2 cores).
        let lat = sse_epoll(&addr, &token, &*store, 1000, 40);
        println!(
            "sse (1 client thread, epoll): 1000 subscribers × 40 events: {} deliveries, latency from the append call (commit included) p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            lat.len(),
            percentile(&lat, 0.5),
            percentile(&lat, 0.99),
            lat.last().copied().unwrap_or(0.0)
        );
    }
    if want("sse-threads") {
        // 4b. SSE latency with 1,000 subscribers, one client thread each.
        let row = store
            .create_run(NewRun {
                title: "sse".into(),
                ..NewRun::default()
            })
            .expect("create");
        let subs = 1000;
        let events = 40u64;
        let first_seq = row.last_seq + 1;
        let received: Arc<Mutex<Vec<(u64, Instant)>>> = Arc::new(Mutex::new(Vec::new()));
        let ready = Arc::new(Barrier::new(subs + 1));
        let mut readers = Vec::new();
        for _ in 0..subs {
            let (addr, token, id) = (addr.clone(), token.clone(), row.id.clone());
            let received = Arc::clone(&received);
            let ready = Arc::clone(&ready);
            readers.push(
            std::thread::Builder::new()
                .stack_size(128 * 1024)
                .spawn(move || {
                    let mut s = TcpStream::connect(&addr).expect("connect");
                    s.set_read_timeout(Some(Duration::from_secs(60))).ok();
                    write!(s, "GET /api/v1/runs/{id}/attach HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer {token}\r\n\r\n").expect("write");
                    let mut r = BufReader::new(s);
                    let mut line = String::new();
                    let _ = r.read_line(&mut line);
                    let status = line.get(9..12).unwrap_or("???").to_string();
                    line.clear();
                    while r.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
                        if line == "\r\n" {
                            break;
                        }
                        line.clear();
                    }
                    ready.wait();
                    let mut local = Vec::new();
                    let mut got = 0;
                    while got < events {
                        line.clear();
                        if r.read_line(&mut line).map(|n| n == 0).unwrap_or(true) {
                            break;
                        }
                        if let Some(seq) = line.strip_prefix("id: ") {
                            if let Ok(seq) = seq.trim().parse::<u64>() {
                                local.push((seq, Instant::now()));
                                got += 1;
                            }
                        }
                    }
                    if got < events {
                        eprintln!("subscriber: status {status}, {got} events, last line {line:?}");
                    }
                    received.lock().map(|mut v| v.extend(local)).ok();
                })
                .expect("spawn"),
        );
        }
        ready.wait();
        std::thread::sleep(Duration::from_millis(500));
        let (committed, _) = append_ticks(&*store, &row.id, events);
        store
            .append(
                &row.id,
                EventDraft::new("run.failed", json!({"reason": "cancelled"})),
            )
            .ok();
        for r in readers {
            let _ = r.join();
        }
        let got = received.lock().map(|v| v.clone()).unwrap_or_default();
        let lat = latencies(&got, &committed);
        println!(
        "sse (a client thread per subscriber): {subs} subscribers × {events} events (from seq {first_seq}): {} deliveries, latency from the append call (commit included) p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        lat.len(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        lat.last().copied().unwrap_or(0.0)
    );
    }
    drop(running);

    if want("pairs") {
        // 2c. The same, as a client does it: each connection creates a run and starts it at
        // once. The ratio is to /health measured on this server just before (paired in
        // time: the machine's speed drifts between sections).
        let (_dir3, api, addr, token) = boot();
        let n = bench_runs();
        let conns = bench_conns();
        let health = health_rps(&addr, &token, conns, 3.0);
        println!(
            "health (pairs server): {health:.0} requests/s ({conns} keep-alive connections, 3 s)"
        );
        let secs = create_then_start(&addr, &token, GATED, n, conns);
        let rps = 2.0 * n as f64 / secs;
        println!(
            "create-then-start pairs, runs waiting on a human: {:.0} pairs/s, {rps:.0} requests/s = {:.1}% of /health ({conns} connections, {n} runs)",
            n as f64 / secs,
            100.0 * rps / health
        );
        std::mem::forget(api);
    }
    if want("api") {
        // 2b. create+start as an API workload: each run's first stage waits for a human (as
        // real runs wait on LLMs), so five runs hold the slots and the rest queue; the
        // figure is the request path alone. A fresh server, left running at exit.
        let (_dir2, api, addr, token) = boot();
        let n = 2000;
        let (create_secs, start_secs) = create_start(&addr, &token, GATED, n);
        let cs_rps = 2.0 * n as f64 / (create_secs + start_secs);
        println!(
            "create+start, runs waiting on a human: {:.0} creates/s, {:.0} starts/s, {cs_rps:.0} requests/s overall = {:.1}% of /health (4 connections, {n} runs)",
            n as f64 / create_secs,
            n as f64 / start_secs,
            100.0 * cs_rps / rps
        );
        std::mem::forget(api);
    }
    if want("rss") {
        // 5. Idle RSS of the real binary.
        let dir2 = tempfile::tempdir().expect("tempdir");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_svc"))
            .args([
                "server",
                "start",
                "--dev",
                "--listen",
                "127.0.0.1:0",
                "--state-dir",
            ])
            .arg(dir2.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        let _ = out.read_line(&mut line);
        std::thread::sleep(Duration::from_secs(2));
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        let rss = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .unwrap_or("VmRSS: ?")
            .to_string();
        println!("idle: {rss} (server started, no requests)");
        let _ = child.kill();
        let _ = child.wait();
    }
}
