//! Code-host integration benchmarks (harness = false; `cargo bench --bench
//! integrations_bench`), against the real `svc` binary and the tests' scripted code host
//! (GitHub's REST wire format in front of real bare repositories over smart HTTP). Prints:
//!
//! - **publish**: from the last stage's end (`stage.completed`) to `pull_request.created`,
//!   minus the time the host itself spent answering svc's requests in between (push, ref
//!   check, pull request lookup and creation), for host latencies of 0 and 50 ms per REST
//!   call; median and worst of `INTEGRATIONS_BENCH_RUNS` runs (default 8). Target: at most
//!   300 ms above the host's own time.
//! - **webhooks**: signed `check_run` deliveries applied to a run's pull request (each one
//!   changes a check, so each writes the kept record and appends `pull_request.updated`),
//!   one keep-alive client, the server pinned to one CPU (`taskset -c 0`, when present);
//!   deliveries/s of wall time and per CPU-second of the server. Target: at least 500/s.
//! - **board**: 100 runs with pull requests (checks kept), `GET /api/v1/runs?page[limit]=100`
//!   50 times: REST calls the host received meanwhile (target: none) and the median page time.

use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};
use support::binary::{bin, state_dir, Svc};
use support::codehost::{signed_headers, CodeHost};
use support::{env_or, median, Client};

mod support;

const PAT: &str = "ghp_benchToken0123456789";
const SECRET: &str = "bench-webhook-secret";

/// The server with the code host configured, pinned to CPU 0 when `taskset` exists.
fn start(host: &CodeHost, extra: &str) -> (Svc, bool) {
    let settings = format!(
        "[server.auth]\nmethods = [\"dev-token\"]\n[server.integrations.codehost]\nenabled = true\n\
         api_url = \"{}\"\nweb_url = \"{}\"\n{extra}",
        host.api_url, host.url
    );
    let dir = state_dir(
        &settings,
        &[("CODEHOST_TOKEN", PAT), ("CODEHOST_WEBHOOK_SECRET", SECRET)],
    );
    let pinned = Command::new("taskset")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let cmd = if pinned {
        let mut c = Command::new("taskset");
        c.args(["-c", "0", bin()]);
        c
    } else {
        Command::new(bin())
    };
    (Svc::start(cmd, dir), pinned)
}

impl Svc {
    /// CPU time the server process used so far (user + system, from /proc).
    fn cpu(&self) -> Duration {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<u64> = rest
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        // Fields 14 and 15 (utime, stime) are the 12th and 13th after the command name.
        let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
        // SAFETY: sysconf only reads a configuration value.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Duration::from_millis(ticks * 1000 / hz)
    }
}

fn events(s: &Svc, id: &str) -> Vec<Value> {
    let (_, v) = s.json("GET", &format!("/api/v1/runs/{id}/events?limit=1000"), "");
    v["data"].as_array().cloned().unwrap_or_default()
}

fn run_to_end(s: &Svc, body: &Value) -> String {
    let (st, run) = s.json("POST", "/api/v1/runs", &body.to_string());
    assert_eq!(st, 201, "{run}");
    let id = run["id"].as_str().expect("id").to_string();
    let (st, _) = s.json("POST", &format!("/api/v1/runs/{id}/start"), "{}");
    assert_eq!(st, 200);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (_, r) = s.json("GET", &format!("/api/v1/runs/{id}"), "");
        let k = r["lifecycle"]["status"]["kind"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if k == "succeeded" || k == "failed" {
            assert_eq!(k, "succeeded", "{r}");
            return id;
        }
        assert!(Instant::now() < deadline, "run {id} did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ts_of(events: &[Value], pred: impl Fn(&Value) -> bool) -> i64 {
    let e = events.iter().find(|e| pred(e)).expect("event");
    svc::internal::base::clock::parse_ts(e["ts"].as_str().unwrap_or("")).expect("ts")
}

fn publish(runs: usize) {
    for latency_ms in [0u64, 50] {
        let host = CodeHost::start(PAT, "acme", "app", &[("app.txt", "old\n")]);
        host.set_latency(Duration::from_millis(latency_ms));
        let (s, _) = start(&host, "[run.pull_request]\nenabled = true\n");
        let dot = "digraph p { start [shape=Mdiamond]; exit [shape=Msquare]; \
                   change [shape=parallelogram, script=\"echo new > app.txt\"]; start -> change -> exit }";
        let body = json!({"workflow": {"entrypoint": "p.dot", "files": {"p.dot": dot}},
                          "repository": {"origin_url": host.origin("acme", "app")}});
        let mut over = Vec::new();
        let mut total = Vec::new();
        for _ in 0..runs {
            let id = run_to_end(&s, &body);
            let evs = events(&s, &id);
            let end = ts_of(&evs, |e| {
                e["event"] == "stage.completed" && e["node_id"] == "change"
            });
            let opened = ts_of(&evs, |e| e["event"] == "pull_request.created");
            let host_ms: i64 = host
                .requests()
                .iter()
                .filter(|r| r.at_ms >= end && r.at_ms <= opened)
                .map(|r| r.took.as_millis() as i64)
                .sum();
            total.push(opened - end);
            over.push(opened - end - host_ms);
        }
        let worst = *over.iter().max().unwrap_or(&0);
        println!(
            "publish (host latency {latency_ms} ms/call): stage end -> PR opened median {} ms, of which svc {} ms (worst {worst} ms; target <= 300 ms above the host)",
            median(&mut total),
            median(&mut over)
        );
    }
}

fn check_run(repo: &Value, sha: &str, conclusion: &str, n: u64) -> Value {
    json!({"action": "completed", "repository": repo, "check_run": {
        "id": n, "name": format!("job-{}", n % 4), "head_sha": sha, "status": "completed",
        "conclusion": conclusion, "started_at": "2026-01-01T00:00:00Z", "completed_at": "2026-01-01T00:01:00Z",
        "output": {"title": conclusion, "summary": "bench"}, "pull_requests": [{"number": 1}]}})
}

fn send(c: &mut Client, event: &str, id: &str, payload: &Value) -> u16 {
    let body = payload.to_string();
    let extra: String = signed_headers(SECRET, event, id, body.as_bytes())
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    c.call_with("POST", "/api/v1/webhooks/codehost", &extra, &body)
        .status
}

fn webhooks(secs: f64) {
    let host = CodeHost::start(PAT, "acme", "app", &[("app.txt", "old\n")]);
    let (s, pinned) = start(&host, "");
    let hello = "digraph h { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }";
    let id = run_to_end(
        &s,
        &json!({"workflow": {"entrypoint": "h.dot", "files": {"h.dot": hello}}}),
    );
    let url = format!("{}/acme/app/pull/1", host.url);
    let (st, _) = s.json(
        "PUT",
        &format!("/api/v1/runs/{id}/pull_request"),
        &json!({"html_url": url}).to_string(),
    );
    assert_eq!(st, 200);
    let repo = json!({"name": "app", "full_name": "acme/app", "owner": {"login": "acme"}});
    let mut c = s.client();
    let pr = json!({"action": "opened", "repository": repo, "pull_request": {"number": 1, "state": "open",
        "head": {"sha": "benchsha", "ref": "b"}, "base": {"ref": "main"}, "additions": 1, "deletions": 0}});
    assert_eq!(send(&mut c, "pull_request", "setup", &pr), 200);
    // Warm up, then measure.
    for n in 0..200u64 {
        send(
            &mut c,
            "check_run",
            &format!("w{n}"),
            &check_run(
                &repo,
                "benchsha",
                if n.is_multiple_of(2) {
                    "success"
                } else {
                    "failure"
                },
                n,
            ),
        );
    }
    let cpu0 = s.cpu();
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed().as_secs_f64() < secs {
        let conclusion = if (n / 4).is_multiple_of(2) {
            "failure"
        } else {
            "success"
        };
        let st = send(
            &mut c,
            "check_run",
            &format!("d{n}"),
            &check_run(&repo, "benchsha", conclusion, n),
        );
        assert_eq!(st, 200);
        n += 1;
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = (s.cpu() - cpu0).as_secs_f64();
    let (_, list) = s.json(
        "GET",
        "/api/v1/webhooks/codehost/deliveries?page[limit]=1",
        "",
    );
    assert_eq!(list["data"][0]["outcome"], "applied", "{list}");
    println!(
        "webhooks: {n} signed check_run deliveries applied in {wall:.1} s = {:.0}/s wall, {:.0}/s per server CPU-second ({}; target >= 500/s on one core)",
        n as f64 / wall,
        n as f64 / cpu.max(1e-9),
        if pinned { "server pinned to CPU 0" } else { "taskset missing: not pinned" }
    );
}

fn board(loads: usize) {
    let host = CodeHost::start(PAT, "acme", "app", &[("app.txt", "old\n")]);
    let (s, _) = start(&host, "");
    let hello = "digraph h { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }";
    let repo = json!({"name": "app", "full_name": "acme/app", "owner": {"login": "acme"}});
    let mut c = s.client();
    for i in 1..=100u64 {
        let id = run_to_end(
            &s,
            &json!({"workflow": {"entrypoint": "h.dot", "files": {"h.dot": hello}}}),
        );
        let url = format!("{}/acme/app/pull/{i}", host.url);
        let (st, _) = s.json(
            "PUT",
            &format!("/api/v1/runs/{id}/pull_request"),
            &json!({"html_url": url}).to_string(),
        );
        assert_eq!(st, 200);
        let sha = format!("sha{i}");
        let pr = json!({"action": "opened", "repository": repo, "pull_request": {"number": i, "state": "open",
            "head": {"sha": sha, "ref": "b"}, "base": {"ref": "main"}, "additions": i, "deletions": 1, "comments": 2}});
        send(&mut c, "pull_request", &format!("p{i}"), &pr);
        for k in 0..3 {
            let mut cr = check_run(&repo, &sha, "success", k);
            cr["check_run"]["pull_requests"] = json!([{"number": i}]);
            send(&mut c, "check_run", &format!("c{i}-{k}"), &cr);
        }
    }
    let calls0 = host.api_calls();
    let mut times = Vec::new();
    for _ in 0..loads {
        let t = Instant::now();
        let r = c.call("GET", "/api/v1/runs?page[limit]=100", "");
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(r.status, 200);
        let v: Value = serde_json::from_slice(&r.body).expect("json");
        let with_pr = v["data"].as_array().map_or(0, |a| {
            a.iter().filter(|i| !i["pull_request"].is_null()).count()
        });
        assert_eq!(with_pr, 100);
        assert_eq!(
            v["data"][0]["pull_request"]["checks"]
                .as_array()
                .map_or(0, Vec::len),
            3
        );
    }
    let calls = host.api_calls() - calls0;
    println!(
        "board: 100 runs with pull requests, {loads} page loads: {calls} call(s) to the code host (target 0); median page {:.1} ms",
        median(&mut times)
    );
    drop(s);
}

fn main() {
    if Command::new("git").arg("--version").output().is_err() {
        println!("integrations_bench: git is not installed; nothing measured");
        return;
    }
    publish(env_or("INTEGRATIONS_BENCH_RUNS", 8));
    webhooks(env_or("INTEGRATIONS_BENCH_SECS", 3.0));
    board(env_or("INTEGRATIONS_BENCH_LOADS", 50));
}
