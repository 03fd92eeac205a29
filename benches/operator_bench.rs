//! The operator routes at scale (issue 29, Speed; harness = false; `cargo bench --bench
//! operator_bench`): with 100,000 finished runs and 1,000,000 events in a real SQLite state
//! directory, the real `svc` server answers over HTTP
//! - `GET /api/v1/usage` (the default range, the last 30 days)        target ≤ 200 ms
//! - `GET /api/v1/system/df`                                           target ≤ 500 ms
//! - `POST /api/v1/insights/query` with the documented sample query
//!   "runs per day by status" (the sample `runs-per-day-by-status` as
//!   `GET /api/v1/insights/schema` serves it; docs/insights.md, "Samples")  target ≤ 200 ms
//! - `GET /api/v1/workflows`                                           target ≤ 50 ms
//!
//! and prints one line per route: `name  median X ms  p90 Y ms  max Z ms  (target <= T ms)`,
//! after the machine's load average (the figures are only as quiet as the machine).
//!
//! The store: runs spread over the last 60 days, 6 workflows (3 registered versions each),
//! 4 models of 3 providers, a third of the runs fired by one of 4 automations, 85% succeeded
//! and 15% failed; each run 1 to 3 LLM stages (started, completed with usage, checkpoint),
//! 10 events on average with payloads of realistic size (the workflow source in
//! `run.created`, a response summary, a checkpoint context). It is imported through the
//! store API 5,000 runs to a transaction (`support::seed`), then the server is started on it.
//!
//! Knobs: `SVC_OPBENCH_RUNS` (default 100000; events are 10 per run) shrinks the store for a
//! quick smoke run, e.g. `SVC_OPBENCH_RUNS=5000`; `SVC_OPBENCH_ITERS` (default 50) is the
//! number of timed requests per route, after 3 untimed ones; `SVC_OPBENCH_DIR=<dir>` fills
//! that state directory once and keeps it, so later runs skip the seeding (and its
//! `svc.db` can be inspected, e.g. with `EXPLAIN QUERY PLAN`).
//!
//! Must not: assert timings (the machine is shared); it reports them.

use serde_json::json;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;
use support::binary::{self, Svc};
use support::seed::{self, Dice};
use support::{env_or, percentile, Client};
use svc::internal::store::{SqliteStore, DB_FILE};

mod support;

/// The documented sample insight query measured (docs/insights.md, "Samples"), as the
/// schema route serves it.
const SAMPLE: &str = "runs-per-day-by-status";

const DAY_MS: i64 = 86_400_000;
const DAYS: i64 = 60;

const WORKFLOWS: [&str; 6] = [
    "fix_issue",
    "review_pr",
    "triage",
    "nightly_report",
    "refactor",
    "write_docs",
];
const MODELS: [(&str, &str, i64); 4] = [
    ("anthropic", "claude-sonnet-4-5", 3),
    ("openai", "gpt-5", 2),
    ("openai", "gpt-5-mini", 1),
    ("gemini", "gemini-2.5-pro", 2),
];
const AUTOMATIONS: [&str; 4] = ["nightly-report", "triage-issues", "review-prs", "docs-sync"];

/// A workflow's DOT source, version `v` (the versions differ in a prompt).
fn dot(name: &str, v: usize) -> String {
    format!(
        "digraph {name} {{\n  graph [goal=\"{name}: do the task described in the run's goal\"];\n  \
         start [shape=Mdiamond];\n  exit [shape=Msquare];\n  \
         plan [shape=box, prompt=\"Read the repository and write a plan for the goal. Version {v}.\"];\n  \
         implement [shape=box, prompt=\"Carry out the plan; keep changes small and tested.\"];\n  \
         check [shape=box, prompt=\"Run the tests and review the diff; summarise what changed.\"];\n  \
         start -> plan -> implement -> check -> exit;\n}}\n"
    )
}

/// Filler text of `n` bytes (a model's prose, a checkpoint's notes).
fn prose(n: usize) -> String {
    const WORDS: &str = "the change keeps the public interface and adds a test for the case the \
        issue describes while the old behaviour stays available behind the flag ";
    WORDS.chars().cycle().take(n).collect()
}

/// One run's event lines being written, each event a few seconds after the one before.
struct Log {
    run_id: String,
    /// Makes event ids unique across runs.
    r: u64,
    ms: i64,
    lines: Vec<String>,
}

impl Log {
    fn push(&mut self, dice: &mut Dice, kind: &str, props: &str, node: Option<&str>) {
        self.ms += 1_000 + dice.below(20_000) as i64;
        let seq = self.lines.len() + 1;
        let id = seed::ulid_at(self.ms, (self.r << 8) | seq as u64);
        let ts = svc::internal::base::clock::format_millis(self.ms);
        let line = seed::event_line(&self.run_id, seq, &id, &ts, kind, props, node);
        self.lines.push(line);
    }
}

/// Run `r`'s id and event lines.
fn run_lines(r: usize, runs: usize, now_ms: i64, dice: &mut Dice) -> (String, Vec<String>) {
    // Oldest first, evenly over the last DAYS days, so ids follow time as real ones do.
    let created = now_ms - DAYS * DAY_MS + (DAYS * DAY_MS) * r as i64 / runs.max(1) as i64;
    let wf = WORKFLOWS[dice.below(WORKFLOWS.len() as u64) as usize];
    let automation =
        (dice.below(3) == 0).then(|| AUTOMATIONS[dice.below(AUTOMATIONS.len() as u64) as usize]);
    let (provider, model, price) = MODELS[dice.below(MODELS.len() as u64) as usize];
    let stages = 1 + dice.below(3) as usize;
    let failed = dice.below(100) < 15;
    let mut log = Log {
        run_id: seed::ulid_at(created, r as u64),
        r: r as u64,
        ms: created,
        lines: Vec::with_capacity(4 + 3 * stages),
    };
    let team = ["platform", "web", "data"][r % 3];
    let mut props = json!({
        "title": format!("{wf} #{r}"),
        "goal": format!("Handle item {r} for {wf}: {}", prose(160)),
        "labels": {"team": team, "env": "prod"},
        "workflow": {"name": wf, "graph_name": wf, "source": dot(wf, r % 3),
                     "node_count": 5, "edge_count": 4},
        "inputs": {"ticket": format!("T-{r}")},
        "created_by": {"kind": "user", "login": "bench"},
        "models": [model],
    });
    if let Some(a) = automation {
        props["automation"] = json!({"id": a, "trigger_id": "schedule", "kind": "schedule"});
    }
    log.push(dice, "run.created", &props.to_string(), None);
    log.push(dice, "run.queued", r#"{"position":1}"#, None);
    let running = r#"{"worker":"w1","sandbox":{"provider":"local"}}"#;
    log.push(dice, "run.running", running, None);
    for (i, node) in ["plan", "implement", "check"]
        .iter()
        .take(stages)
        .enumerate()
    {
        let started =
            json!({"index": i, "handler_type": "prompt", "attempt": 1, "max_attempts": 3});
        log.push(dice, "stage.started", &started.to_string(), Some(node));
        let input = 2_000 + dice.below(30_000) as i64;
        let output = 200 + dice.below(4_000) as i64;
        let cache_read = dice.below(20_000) as i64;
        let completed = json!({
            "index": i, "status": "succeeded", "attempt": 1, "duration_ms": 5_000 + output * 10,
            "response": prose(300 + dice.below(400) as usize),
            "usage": {
                "provider": provider, "model": model, "speed": "standard",
                "tokens": {"input": input, "output": output, "reasoning": 0,
                           "cache_read": cache_read, "cache_write": 0},
                "cost": {"usd_micros": (input + 5 * output) * price, "source": "catalog"},
                "inference_time_ms": 1_000 + output, "tool_time_ms": 0,
            },
        });
        log.push(dice, "stage.completed", &completed.to_string(), Some(node));
        let checkpoint = json!({
            "current_node": node, "completed_nodes": ["start", node],
            "context": {"outcome": "success", "notes": prose(400 + dice.below(600) as usize)},
        });
        log.push(dice, "checkpoint.completed", &checkpoint.to_string(), None);
    }
    if failed {
        let e = json!({"reason": "stage_failed", "error": "check: tests failed (3 of 120)"});
        log.push(dice, "run.failed", &e.to_string(), None);
    } else {
        let done = json!({"status": "succeeded", "outcome": "success"});
        log.push(dice, "run.completed", &done.to_string(), None);
    }
    (log.run_id, log.lines)
}

/// `iters` timed calls of one request on one keep-alive connection (after 3 untimed):
/// sorted latencies in ms.
fn time(c: &mut Client, method: &str, path: &str, body: &str, iters: usize) -> Vec<f64> {
    for _ in 0..3 {
        let r = c.call(method, path, body);
        assert_eq!(
            r.status,
            200,
            "{method} {path}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    let mut lat: Vec<f64> = (0..iters)
        .map(|_| {
            let t = Instant::now();
            let r = c.call(method, path, body);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            assert_eq!(r.status, 200, "{method} {path}");
            ms
        })
        .collect();
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    lat
}

fn report(name: &str, lat: &[f64], target_ms: f64) {
    let (median, p90) = (percentile(lat, 0.5), percentile(lat, 0.9));
    let max = lat.last().copied().unwrap_or(0.0);
    let verdict = if p90 <= target_ms { "ok" } else { "MISSED" };
    println!(
        "{name:<28} median {median:8.2} ms  p90 {p90:8.2} ms  max {max:8.2} ms  (target <= {target_ms} ms) {verdict}"
    );
}

fn main() {
    let runs = env_or("SVC_OPBENCH_RUNS", 100_000usize);
    let iters = env_or("SVC_OPBENCH_ITERS", 50usize);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    println!(
        "operator_bench: {} cores, load average {} at start",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.join(" ")
    );

    let kept = std::env::var_os("SVC_OPBENCH_DIR").map(PathBuf::from);
    let temp = kept.is_none().then(|| binary::state_dir("", &[]));
    let dir = kept
        .clone()
        .or_else(|| temp.as_ref().map(|t| t.path().to_path_buf()))
        .expect("a state directory");
    let db = dir.join(DB_FILE);
    if db.exists() {
        println!("reusing the store in {}", dir.display());
    } else {
        std::fs::create_dir_all(&dir).expect("state dir");
        let now_ms =
            svc::internal::base::clock::parse_ts(&svc::internal::base::clock::now()).unwrap_or(0);
        let t = Instant::now();
        let events = {
            let store = SqliteStore::open(&db).expect("store");
            let mut dice = Dice::new(29);
            seed::import(&store, runs, |r| run_lines(r, runs, now_ms, &mut dice))
        };
        println!(
            "seeded {runs} runs, {events} events in {:.1} s ({:.0} MiB database) in {}",
            t.elapsed().as_secs_f64(),
            std::fs::metadata(&db).map_or(0, |m| m.len()) as f64 / 1_048_576.0,
            dir.display()
        );
    }

    let svc = match temp {
        Some(t) => Svc::start(Command::new(binary::bin()), t),
        None => Svc::start_in(Command::new(binary::bin()), &dir),
    };
    let mut versions = Vec::new();
    for wf in WORKFLOWS {
        for v in 0..3 {
            let package = json!({"entrypoint": "main.dot", "files": {"main.dot": dot(wf, v)}});
            let (st, body) = svc.json("POST", "/api/v1/workflow-versions", &package.to_string());
            assert!(st == 200 || st == 201, "register {wf}: {st} {body}");
            versions.push(body["id"].as_str().unwrap_or_default().to_string());
        }
    }
    for (i, a) in AUTOMATIONS.iter().enumerate() {
        let body = json!({"id": a, "name": a, "target": {"workflow_version_id": versions[i * 3]}, "triggers": []});
        let (st, answer) = svc.json("POST", "/api/v1/automations", &body.to_string());
        // 409: made by an earlier run on a kept directory.
        assert!(st == 201 || st == 409, "automation {a}: {st} {answer}");
    }

    let mut c = svc.client();
    // What each answer holds, once, so a wrong store shows before the figures.
    let (_, usage) = svc.json("GET", "/api/v1/usage", "");
    let (_, df) = svc.json("GET", "/api/v1/system/df", "");
    let (runs, events) = (df["runs"].clone(), df["events"]["count"].clone());
    let (_, wfs) = svc.json("GET", "/api/v1/workflows", "");
    let (_, schema) = svc.json("GET", "/api/v1/insights/schema", "");
    let sample = schema["samples"]
        .as_array()
        .and_then(|s| s.iter().find(|q| q["id"] == SAMPLE))
        .and_then(|q| q["sql"].as_str())
        .unwrap_or_else(|| panic!("no sample {SAMPLE} in {schema}"));
    let query = json!({ "sql": sample }).to_string();
    let (_, rows) = svc.json("POST", "/api/v1/insights/query", &query);
    println!(
        "store as served: usage 30 days {} stage records, df {} runs / {} events / {} MiB of events, {} workflows, sample query {} rows",
        usage["totals"]["records"],
        df["runs"],
        df["events"]["count"],
        df["events"]["bytes"].as_u64().unwrap_or(0) / 1_048_576,
        wfs["meta"]["total"],
        rows["rows"].as_array().map_or(0, Vec::len),
    );

    let usage = time(&mut c, "GET", "/api/v1/usage", "", iters);
    let df = time(&mut c, "GET", "/api/v1/system/df", "", iters);
    let insight = time(&mut c, "POST", "/api/v1/insights/query", &query, iters);
    let workflows = time(&mut c, "GET", "/api/v1/workflows", "", iters);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "\n{runs} runs, {events} events; {iters} requests per route on one keep-alive connection; load average {} at end",
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    report("GET /api/v1/usage (30 days)", &usage, 200.0);
    report("GET /api/v1/system/df", &df, 500.0);
    report("insights runs/day by status", &insight, 200.0);
    report("GET /api/v1/workflows", &workflows, 50.0);
}
