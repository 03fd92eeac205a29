//! The single-node capacity table (issue 32; harness = false; `cargo bench --bench
//! capacity_bench`): how much one svc server holds on this machine. Prints one line per
//! figure, then the table in Markdown; with `SVC_CAPACITY_README=1` it also writes the table
//! into README.md between `<!-- capacity:start -->` and `<!-- capacity:end -->`.
//!
//! Figures (sections picked with `SVC_CAPACITY=create,events,sse,wait,blocked,cold,trivial`):
//! - create+start: runs/s, each a `POST /api/v1/runs` then `POST …/start` on 4 keep-alive
//!   connections, runs waiting on a human (so the figure is the request path);
//! - events appended/s through the store API (one writer, durable commits);
//! - SSE commit-to-client latency p50/p99 with 1,000 and 10,000 subscribers on one run, read
//!   by one epoll thread (`SVC_CAPACITY_SSE_BIG`, default 10000);
//! - runs held at once in a `wait` stage and blocked on a human question
//!   (`SVC_CAPACITY_HELD`, default 1000, with `max_concurrent_runs` raised to it): time until
//!   all are in, and the process's RSS and threads per held run;
//! - cold start of the real binary with 100,000 finished runs in the store
//!   (`SVC_CAPACITY_RUNS`), and `GET /api/v1/runs` (the board's first page) p50/p99 there;
//! - a trivial run (start → exit) alone on a quiet server: its sandbox set-up and its whole
//!   run, from its events; and `SVC_CAPACITY_TRIVIAL` (default 1,000) trivial runs through
//!   the scheduler at the default `max_concurrent_runs`, runs/s from the first start to the
//!   last completion.
//!
//! Every figure is printed with its target (the issue's, where it names one). Smaller sizes
//! for a smoke run: `SVC_CAPACITY_HELD=100 SVC_CAPACITY_RUNS=10000 SVC_CAPACITY_SSE_BIG=2000
//! SVC_CAPACITY_CREATES=500 SVC_CAPACITY_EVENTS=2000 SVC_CAPACITY_TRIVIAL=100`.
//!
//! Must not: assert timings (the machine is shared); it reports them.

use serde_json::json;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::seed;
use support::server::{boot_with, create_then_start, latencies, sse_epoll};
use support::{env_or, percentile, Client};
use svc::internal::store::{EventDraft, RunQuery, RunStore, SqliteStore, DB_FILE};

mod support;

const GATED: &str = "digraph gated { start [shape=Mdiamond]; exit [shape=Msquare]; ask [shape=hexagon, label=\"Go?\"]; start -> ask; ask -> exit [label=\"Yes\"] }";
const WAITING: &str = "digraph waiting { start [shape=Mdiamond]; exit [shape=Msquare]; nap [shape=box, type=\"wait\", duration=\"30m\"]; start -> nap -> exit }";
const HELLO: &str = "digraph hello { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }";

/// One line of the table.
struct Row {
    figure: String,
    measured: String,
    /// The issue's target, or `—` where it names none.
    target: String,
    conditions: String,
}

type Table = Vec<Row>;

/// Adds a row and prints it as it is measured.
fn push(table: &mut Table, figure: String, measured: String, target: &str, conditions: String) {
    println!("  → {figure}: {measured} (target: {target}; {conditions})");
    table.push(Row {
        figure,
        measured,
        target: target.to_string(),
        conditions,
    });
}

fn main() {
    let _ = env_logger::Builder::from_env(
        env_logger::Env::default().default_filter_or("error,tiny_http=off"),
    )
    .try_init();
    raise_nofile(65_536);
    let only = std::env::var("SVC_CAPACITY").unwrap_or_default();
    let want = |s: &str| only.is_empty() || only.split(',').any(|o| o == s);
    let mut table: Table = Vec::new();
    let load = loadavg();
    println!("capacity: {}, load average {load}", machine());
    // Held runs first: their RSS and thread deltas need a process no earlier section has
    // grown (the SSE sections' thousands of threads and buffers are freed only later).
    if want("wait") {
        held(&mut table, "wait", WAITING, "running");
    }
    if want("blocked") {
        held(&mut table, "blocked", GATED, "blocked");
    }
    if want("create") {
        create_start(&mut table);
    }
    if want("events") {
        events(&mut table);
    }
    if want("sse") {
        sse(&mut table);
    }
    if want("cold") {
        cold(&mut table);
    }
    if want("trivial") {
        trivial(&mut table);
    }
    let md = markdown(&table, &load, &loadavg());
    println!("\n{md}");
    if std::env::var("SVC_CAPACITY_README").as_deref() == Ok("1") {
        write_readme(&md);
    }
}

/// Lifts this process's descriptor limit (soft and hard, as far as the kernel allows): the
/// 10,000-subscriber figure holds both ends of every stream here.
fn raise_nofile(n: u64) {
    let lim = libc::rlimit {
        rlim_cur: n,
        rlim_max: n,
    };
    // SAFETY: setrlimit with a valid struct; failure leaves the limit as it was.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        let mut cur = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: as above.
        unsafe {
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut cur);
            cur.rlim_cur = cur.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &cur);
        }
    }
}

fn create_start(table: &mut Table) {
    let (_dir, running, addr, token) = boot_with("");
    let n = env_or("SVC_CAPACITY_CREATES", 4000);
    let secs = create_then_start(&addr, &token, GATED, n, 4);
    let per_sec = n as f64 / secs;
    println!("create+start: {n} runs in {secs:.2} s = {per_sec:.0} runs/s (4 connections; runs wait on a human, 5 hold the slots, the rest queue)");
    push(
        table,
        "create+start (POST /runs + POST /start)".into(),
        format!("{per_sec:.0} runs/s"),
        "—",
        format!("{n} runs on 4 keep-alive connections; each waits on a human (5 hold slots, the rest queue)"),
    );
    std::mem::forget(running);
}

fn events(table: &mut Table) {
    let (_dir, running, _addr, _token) = boot_with("");
    let store = Arc::clone(&running.app.runs.store);
    let row = store
        .create_run(svc::internal::store::NewRun {
            title: "events".into(),
            ..Default::default()
        })
        .expect("create");
    let n = env_or("SVC_CAPACITY_EVENTS", 20_000);
    let t0 = Instant::now();
    for i in 0..n {
        store
            .append(
                &row.id,
                EventDraft::new(
                    "stage.started",
                    json!({"index": i, "handler_type": "command"}),
                )
                .node("n1"),
            )
            .expect("append");
    }
    let secs = t0.elapsed().as_secs_f64();
    let rate = n as f64 / secs;
    println!("events: {n} appends (one writer, each its own durable commit) in {secs:.2} s = {rate:.0} events/s");
    push(
        table,
        "events appended (one writer, a commit each)".into(),
        format!("{rate:.0} events/s"),
        "—",
        format!("{n} appends through the store API, WAL, synchronous=NORMAL"),
    );
    std::mem::forget(running);
}

fn sse(table: &mut Table) {
    for subs in [1000, env_or("SVC_CAPACITY_SSE_BIG", 10_000)] {
        let (_dir, running, addr, token) = boot_with("");
        let store = Arc::clone(&running.app.runs.store);
        let events = if subs > 1000 { 20 } else { 40 };
        let t0 = Instant::now();
        let lat = sse_epoll(&addr, &token, &*store, subs, events);
        let (p50, p99) = (percentile(&lat, 0.5), percentile(&lat, 0.99));
        println!(
            "sse: {subs} subscribers × {events} events: {} deliveries, commit-to-client p50 {p50:.2} ms, p99 {p99:.2} ms, max {:.2} ms ({:.1} s)",
            lat.len(),
            lat.last().copied().unwrap_or(0.0),
            t0.elapsed().as_secs_f64()
        );
        push(
            table,
            format!("SSE, {subs} subscribers on one run: commit-to-client"),
            format!("p50 {p50:.1} ms, p99 {p99:.1} ms"),
            if subs == 1000 {
                "p99 ≤ 10 ms"
            } else {
                "— (reported)"
            },
            format!(
                "{} of {} deliveries received; {events} events, one epoll reader",
                lat.len(),
                subs * events as usize
            ),
        );
        std::mem::forget(running);
    }
    let _ = latencies;
}

/// VmRSS and Threads of this process.
fn self_stats() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("Threads:"))
}

fn count(store: &dyn RunStore, status: &str) -> usize {
    store
        .count_runs(&RunQuery {
            statuses: vec![status.into()],
            ..Default::default()
        })
        .unwrap_or(0)
}

/// `n` runs of `dot` held at once in `status` (`running` in a wait stage, `blocked` on a
/// question): how long until all are, and RSS and threads per held run.
fn held(table: &mut Table, name: &str, dot: &str, status: &str) {
    let n = env_or("SVC_CAPACITY_HELD", 1000);
    let (_dir, running, addr, token) =
        boot_with(&format!("[server.scheduler]\nmax_concurrent_runs = {n}\n"));
    let store = Arc::clone(&running.app.runs.store);
    std::thread::sleep(Duration::from_millis(500));
    let (rss0, threads0) = self_stats();
    let t0 = Instant::now();
    create_then_start(&addr, &token, dot, n, 4);
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut got = 0;
    while Instant::now() < deadline {
        got = count(&*store, status);
        if got >= n {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let secs = t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(1));
    let (rss1, threads1) = self_stats();
    let per_run_kb = rss1.saturating_sub(rss0) as f64 / got.max(1) as f64;
    let per_run_threads = threads1.saturating_sub(threads0) as f64 / got.max(1) as f64;
    println!(
        "{name}: {got} of {n} runs {status} at once after {secs:.1} s; RSS {} → {} MiB ({per_run_kb:.0} KiB per run), threads {threads0} → {threads1} ({per_run_threads:.2} per run)",
        rss0 / 1024,
        rss1 / 1024
    );
    let what = if status == "blocked" {
        "runs blocked on a human question, at once"
    } else {
        "runs waiting in a `wait` stage, at once"
    };
    push(
        table,
        what.into(),
        format!("{got} of {n} in {secs:.1} s"),
        "—",
        format!("max_concurrent_runs = {n}; the server process grew {per_run_kb:.0} KiB RSS and {per_run_threads:.2} threads per run"),
    );
    if status == "blocked" {
        push(
            table,
            "memory per idle blocked run".into(),
            format!("{per_run_kb:.0} KiB"),
            "—",
            format!("server RSS growth over {got} runs blocked on a human, {per_run_threads:.2} threads each; no process outside it (the holder starts with a run's first process)"),
        );
    }
    // Left as they are (idle until the bench exits); the next section measures its own delta.
    std::mem::forget(running);
}

/// Fills `state_dir` with `runs` finished runs of 8 events each.
fn fill(state_dir: &Path, runs: usize) {
    let store = SqliteStore::open(&state_dir.join(DB_FILE)).expect("store");
    let ts = "2026-11-21T20:05:46.123Z";
    seed::import(&store, runs, |r| {
        let run_id = svc::internal::base::clock::new_ulid();
        let mut lines = vec![seed::event_line(
            &run_id,
            1,
            &svc::internal::base::clock::new_ulid(),
            ts,
            "run.created",
            &format!(
                r#"{{"title":"run {r}","goal":"bench","labels":{{}},"workflow":{{"name":"w","source":"digraph w {{ start -> exit }}","node_count":2,"edge_count":1}},"inputs":{{}}}}"#
            ),
            None,
        )];
        for (seq, kind) in [
            "run.queued",
            "run.starting",
            "run.running",
            "stage.started",
            "stage.completed",
            "checkpoint.completed",
            "run.completed",
        ]
        .iter()
        .enumerate()
        {
            lines.push(seed::event_line(
                &run_id,
                seq + 2,
                &svc::internal::base::clock::new_ulid(),
                ts,
                kind,
                r#"{"index":0}"#,
                Some("n1"),
            ));
        }
        (run_id, lines)
    });
}

/// Starts the real binary on `state_dir`; (the child, its address, seconds to "listening").
fn start_binary(state_dir: &Path) -> (std::process::Child, String, f64) {
    let t0 = Instant::now();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_svc"))
        .args([
            "server",
            "start",
            "--dev",
            "--listen",
            "127.0.0.1:0",
            "--state-dir",
        ])
        .arg(state_dir)
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let mut addr = String::new();
    while out.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
        if let Some(a) = line.trim().strip_prefix("svc: listening on http://") {
            addr = a.to_string();
            break;
        }
        line.clear();
    }
    let secs = t0.elapsed().as_secs_f64();
    // Keep draining stdout so the server never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = String::new();
        while out.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
            sink.clear();
        }
    });
    (child, addr, secs)
}

fn stop(mut child: std::process::Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
}

fn cold(table: &mut Table) {
    let runs = env_or("SVC_CAPACITY_RUNS", 100_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let t = Instant::now();
    fill(dir.path(), runs);
    println!(
        "cold: {runs} runs filled in {:.1} s ({:.0} MiB database)",
        t.elapsed().as_secs_f64(),
        std::fs::metadata(dir.path().join(DB_FILE))
            .map(|m| m.len())
            .unwrap_or(0) as f64
            / 1048576.0
    );
    // The first start creates the dev token and settings; the next ones are what an
    // operator's restart costs.
    let (child, _, first) = start_binary(dir.path());
    stop(child);
    let mut times = Vec::new();
    for _ in 0..3 {
        let (child, _, secs) = start_binary(dir.path());
        times.push(secs);
        stop(child);
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let median = times[times.len() / 2];
    println!(
        "cold: start to listening with {runs} runs: first {first:.3} s, then median {median:.3} s, max {:.3} s",
        times[times.len() - 1]
    );
    push(
        table,
        format!("cold start with {runs} runs in the store"),
        format!("{:.0} ms", median * 1e3),
        "≤ 1 s",
        format!(
            "the real binary, spawn to `listening`, median of 3 restarts (first start {:.0} ms)",
            first * 1e3
        ),
    );
    let (child, addr, _) = start_binary(dir.path());
    let token = std::fs::read_to_string(dir.path().join("dev-token"))
        .unwrap_or_default()
        .trim()
        .to_string();
    for (what, path) in [
        ("GET /api/v1/runs (first page, 20)", "/api/v1/runs"),
        (
            "GET /api/v1/runs?page[limit]=100 (the board's first page)",
            "/api/v1/runs?page[limit]=100&page[offset]=0",
        ),
        (
            "GET /api/v1/runs, page at offset 50,000",
            "/api/v1/runs?page[offset]=50000",
        ),
    ] {
        let mut c = Client::new(&addr, &format!("Authorization: Bearer {token}"));
        let mut lat = Vec::new();
        for _ in 0..300 {
            let t = Instant::now();
            let st = c.call("GET", path, "").status;
            lat.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(st, 200);
        }
        lat.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        let (p50, p99) = (percentile(&lat, 0.5), percentile(&lat, 0.99));
        println!("cold: {what} with {runs} runs: p50 {p50:.2} ms, p99 {p99:.2} ms (300 requests, one connection)");
        push(
            table,
            format!("{what} at {runs} runs"),
            format!("p50 {p50:.1} ms, p99 {p99:.1} ms"),
            if path.contains("50000") {
                "— (reported)"
            } else {
                "p99 ≤ 50 ms"
            },
            "300 requests, one keep-alive connection".into(),
        );
    }
    stop(child);
}

fn trivial(table: &mut Table) {
    let (_dir, running, addr, token) = boot_with("");
    let store = Arc::clone(&running.app.runs.store);
    let mut init = Vec::new();
    let mut whole = Vec::new();
    for _ in 0..20 {
        create_then_start(&addr, &token, HELLO, 1, 1);
        let deadline = Instant::now() + Duration::from_secs(30);
        while count(&*store, "succeeded") < init.len() + 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        let rows = store
            .query_runs(&RunQuery {
                statuses: vec!["succeeded".into()],
                limit: 1,
                ..Default::default()
            })
            .unwrap_or_default();
        let Some(row) = rows.first() else { continue };
        let evs = store.events(&row.id, 0, 100).unwrap_or_default();
        let at = |kind: &str| {
            evs.iter()
                .find(|e| e.event == kind)
                .and_then(|e| svc::internal::base::clock::parse_ts(&e.ts))
        };
        if let (Some(a), Some(b)) = (at("sandbox.initializing"), at("sandbox.initialized")) {
            init.push((b - a) as f64);
        }
        if let (Some(a), Some(b)) = (at("run.starting"), at("run.completed")) {
            whole.push((b - a) as f64);
        }
    }
    init.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    whole.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let (i50, w50) = (percentile(&init, 0.5), percentile(&whole, 0.5));
    println!("trivial: sandbox set-up median {i50:.0} ms, run.starting → run.completed median {w50:.0} ms (20 runs one after another)");
    push(
        table,
        "a trivial run (start → exit), alone".into(),
        format!("{w50:.1} ms, of which {i50:.1} ms sandbox set-up"),
        "a few ms",
        "run.starting → run.completed from its events, median of 20 one after another".into(),
    );
    std::mem::forget(running);
    through_scheduler(table);
}

/// `SVC_CAPACITY_TRIVIAL` trivial runs created and started at once on a fresh server with
/// the default `max_concurrent_runs`: runs/s from the first start to the last completion.
fn through_scheduler(table: &mut Table) {
    let (_dir, running, addr, token) = boot_with("");
    let store = Arc::clone(&running.app.runs.store);
    let n = env_or("SVC_CAPACITY_TRIVIAL", 1000);
    let limit = svc::internal::settings::DEFAULT_MAX_CONCURRENT_RUNS;
    let t0 = Instant::now();
    create_then_start(&addr, &token, HELLO, n, 4);
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut done = 0;
    while Instant::now() < deadline {
        done = count(&*store, "succeeded");
        if done >= n {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let secs = t0.elapsed().as_secs_f64();
    let rate = done as f64 / secs;
    println!("scheduler: {done} of {n} trivial runs from the first create to the last completion in {secs:.2} s = {rate:.0} runs/s (max_concurrent_runs {limit})");
    push(
        table,
        "trivial runs (start → exit) through the scheduler".into(),
        format!("{rate:.0} runs/s"),
        "—",
        format!("{done} of {n} runs created and started on 4 connections, default max_concurrent_runs = {limit}, first create to last completion"),
    );
    std::mem::forget(running);
}

fn markdown(table: &Table, load_before: &str, load_after: &str) -> String {
    let mut s = String::from("| figure | measured | target | conditions |\n|---|---|---|---|\n");
    for r in table {
        s.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.figure, r.measured, r.target, r.conditions
        ));
    }
    s.push_str(&format!(
        "\nMeasured by `cargo bench --bench capacity_bench` on {}, at commit {}; load average \
         {load_before} when it started and {load_after} when it ended (other builds and tests \
         shared the machine: figures from a quiet machine may be better; re-run it there to \
         replace this table).\n",
        machine(),
        commit()
    ));
    s
}

/// The 1, 5 and 15 minute load averages.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// CPU model, cores and memory of this machine.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpu
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|m| m.trim_start_matches([' ', '\t', ':']).trim().to_string())
        .unwrap_or_else(|| "an unknown CPU".into());
    let mem_kib: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    format!(
        "{} cores of {model}, {:.0} GiB RAM",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        mem_kib as f64 / 1048576.0
    )
}

/// The short commit the bench was built from (`unknown` outside a git checkout).
fn commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

fn write_readme(md: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let text = std::fs::read_to_string(&path).expect("README");
    let (start, end) = ("<!-- capacity:start -->", "<!-- capacity:end -->");
    let (Some(a), Some(b)) = (text.find(start), text.find(end)) else {
        eprintln!("README.md has no {start} … {end} markers");
        return;
    };
    let new = format!("{}{start}\n{md}{}", &text[..a], &text[b..]);
    std::fs::write(&path, new).expect("write README");
    println!("README.md: capacity table written");
}
