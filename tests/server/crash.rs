//! The real server killed with SIGKILL under load, many times, on one state directory.
//!
//! Each trial starts `svc server start --dev` on loopback, has client threads create and
//! start runs of a chain of command stages while earlier runs execute, and kills the server
//! at a seeded random moment. Between trials the database is opened directly: every run the
//! API acknowledged (201) exists, every run's seqs are contiguous and its row is the fold of
//! its events, and `integrity_check` passes. After the last trial the server is started once
//! more and nobody touches the runs: every started run must finish `succeeded` by itself,
//! including each one the kills interrupted. Every stage takes a non-blocking `flock` on a
//! lock file in the run's directory for its whole life (a background child inherits it; it
//! dies with the killed server's run namespace, or without bubblewrap at the next start's
//! sweep): a stage that finds the lock
//! taken records an overlap, so "no stage ran twice concurrently" is checked by the stages
//! themselves.

use crate::support;
use crate::support::server::{package, Opts, Server};
use crate::support::store::Rng;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use svc::internal::store::{RunStore, SqliteStore, DB_FILE};
use svc::internal::test_tools::{require, Tool};

/// Trials by default; `SVC_CRASH_TRIALS=N` runs more (for a measurement, not for CI).
const TRIALS: usize = 6;
const STAGES: usize = 4;
/// Runs the clients create per trial (bounds the work left to drain at the end).
const RUNS_PER_TRIAL: usize = 8;
const CLIENTS: usize = 3;
const SETTINGS: &str = "[server.scheduler]\nmax_concurrent_runs = 4\n";

fn stage_script(node: &str) -> String {
    format!(
        "exec 9>>stage.lock\n\
         flock -n 9 || echo \"overlap {node} $$ $(date +%s.%N)\" >> overlaps\n\
         echo \"start {node} $$ $(date +%s.%N)\" >> markers\n\
         sleep 0.2 & wait\n\
         echo \"end {node} $$ $(date +%s.%N)\" >> markers\n"
    )
}

fn workflow() -> String {
    let mut dot =
        String::from("digraph crash {\n  start [shape=Mdiamond]\n  exit [shape=Msquare]\n");
    let mut prev = "start".to_string();
    for i in 1..=STAGES {
        let node = format!("s{i}");
        dot.push_str(&format!(
            "  {node} [shape=parallelogram, script={}]\n  {prev} -> {node}\n",
            serde_json::to_string(&stage_script(&node)).unwrap()
        ));
        prev = node;
    }
    dot.push_str(&format!("  {prev} -> exit\n}}\n"));
    dot
}

/// One request that never panics: `None` when the server is gone mid-way.
fn try_call(addr: &str, token: &str, method: &str, path: &str, body: &str) -> Option<(u16, Value)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, serde_json::from_str(body).unwrap_or(Value::Null)))
}

fn tcp_addr(s: &Server) -> String {
    match &s.addr {
        support::server::Addr::Tcp(a) => a.clone(),
        support::server::Addr::Unix(_) => unreachable!("the crash test listens on TCP"),
    }
}

#[derive(Default)]
struct Acks {
    /// Runs whose creation was acknowledged (201).
    created: BTreeSet<String>,
    /// Runs whose start was acknowledged (200).
    started: BTreeSet<String>,
}

#[derive(Default, Debug)]
struct Figures {
    trials: usize,
    acknowledged: usize,
    lost: usize,
    gaps: usize,
    integrity_failures: usize,
    interrupted: usize,
    resumed_by_themselves: usize,
    overlaps: usize,
}

fn flock_available() -> bool {
    std::process::Command::new("flock")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// One trial's load: clients create and start runs until `RUNS_PER_TRIAL` or the kill.
fn load(addr: &str, token: &str, body: &str, acks: &Mutex<Acks>, stop: &AtomicBool) {
    let budget = AtomicUsize::new(RUNS_PER_TRIAL);
    std::thread::scope(|scope| {
        for _ in 0..CLIENTS {
            scope.spawn(|| {
                while !stop.load(Ordering::SeqCst)
                    && budget
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                        .is_ok()
                {
                    let Some((201, run)) = try_call(addr, token, "POST", "/api/v1/runs", body)
                    else {
                        return;
                    };
                    let id = run["id"].as_str().unwrap_or_default().to_string();
                    acks.lock().unwrap().created.insert(id.clone());
                    let path = format!("/api/v1/runs/{id}/start");
                    if let Some((200, _)) = try_call(addr, token, "POST", &path, "{}") {
                        acks.lock().unwrap().started.insert(id);
                    }
                }
            });
        }
    });
}

/// With the server dead: every acknowledged run is there, with contiguous seqs, its row the
/// fold of its events, and the database passes `integrity_check`.
fn check_store(dir: &std::path::Path, acks: &Acks, figures: &mut Figures, trial: usize) {
    let store = SqliteStore::open(&dir.join(DB_FILE)).unwrap();
    for id in &acks.created {
        match store.get_run(id).unwrap() {
            None => {
                figures.lost += 1;
                eprintln!("trial {trial}: acknowledged run {id} lost");
            }
            Some(_) => {
                if let Err(e) = store.verify_run(id) {
                    figures.gaps += 1;
                    eprintln!("trial {trial}: run {id}: {e}");
                }
            }
        }
    }
    let problems = store.integrity_problems(true).unwrap();
    if !problems.is_empty() {
        figures.integrity_failures += 1;
        eprintln!("trial {trial}: integrity_check: {problems:?}");
    }
}

fn events(s: &Server, id: &str) -> Vec<Value> {
    let mut all = Vec::new();
    loop {
        let since = all.len() + 1;
        let page = s
            .get(&format!(
                "/api/v1/runs/{id}/events?since_seq={since}&limit=1000"
            ))
            .json();
        let data = page["data"].as_array().cloned().unwrap_or_default();
        all.extend(data);
        if page["meta"]["has_more"] != true {
            return all;
        }
    }
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn sigkill_under_load_loses_nothing_and_interrupted_runs_finish_by_themselves() {
    require(Tool::Git);
    let locks = flock_available();
    if !locks {
        eprintln!("note: `flock` is not installed; the no-concurrent-stage check is skipped");
    }
    let body = json!({"workflow": package(&workflow())}).to_string();
    let mut rng = Rng::new(0xC4A5_11ED);
    let acks = Mutex::new(Acks::default());
    let mut figures = Figures::default();
    let mut dir = Some(tempfile::tempdir().unwrap());
    let trials = std::env::var("SVC_CRASH_TRIALS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(TRIALS);
    for trial in 0..trials {
        let s = Server::with(Opts {
            dir: dir.take(),
            settings: Some(SETTINGS),
            ..Opts::default()
        });
        let addr = tcp_addr(&s);
        let token = s.token.clone();
        let stop = AtomicBool::new(false);
        let kill_after = Duration::from_millis(rng.range(300, 1500));
        let s = std::thread::scope(|scope| {
            scope.spawn(|| load(&addr, &token, &body, &acks, &stop));
            std::thread::sleep(kill_after);
            let d = s.kill();
            stop.store(true, Ordering::SeqCst);
            d
        });
        check_store(s.path(), &acks.lock().unwrap(), &mut figures, trial);
        figures.trials += 1;
        dir = Some(s);
    }

    // The last start: nobody touches the runs; each must finish by itself.
    let s = Server::with(Opts {
        dir: dir.take(),
        settings: Some(SETTINGS),
        ..Opts::default()
    });
    let acks = acks.into_inner().unwrap();
    figures.acknowledged = acks.created.len();
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut statuses: HashMap<String, Value> = HashMap::new();
    for id in &acks.created {
        loop {
            let st = s.get(&format!("/api/v1/runs/{id}")).json()["lifecycle"]["status"].clone();
            let kind = st["kind"].as_str().unwrap_or_default().to_string();
            let settled = match kind.as_str() {
                "succeeded" | "failed" | "dead" => true,
                // Created but never started (its start was not acknowledged, or not sent).
                "submitted" => !acks.started.contains(id),
                _ => false,
            };
            if settled || Instant::now() > deadline {
                statuses.insert(id.clone(), st);
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let mut unfinished = Vec::new();
    for id in &acks.created {
        let st = &statuses[id];
        let evs = events(&s, id);
        let interrupted = evs
            .iter()
            .filter(|e| e["event"] == "run.interrupted")
            .count();
        if interrupted > 0 {
            figures.interrupted += 1;
            if st["kind"] == "succeeded" {
                figures.resumed_by_themselves += 1;
            }
        }
        let never_started = st["kind"] == "submitted" && !acks.started.contains(id);
        if st["kind"] != "succeeded" && !never_started {
            unfinished.push(format!("{id}: {st}"));
        }
        let workdir = s.path().join("workspaces").join(id);
        if let Ok(text) = std::fs::read_to_string(workdir.join("overlaps")) {
            figures.overlaps += text.lines().count();
            let markers = std::fs::read_to_string(workdir.join("markers")).unwrap_or_default();
            let kinds: Vec<String> = evs
                .iter()
                .map(|e| format!("{} {} {}", e["event"], e["node_id"], e["ts"]))
                .collect();
            eprintln!(
                "run {id}: stages overlapped: {text}\nmarkers:\n{markers}\nevents:\n{}",
                kinds.join("\n")
            );
        }
        if st["kind"] == "succeeded" {
            let markers = std::fs::read_to_string(workdir.join("markers")).unwrap_or_default();
            assert!(
                markers
                    .lines()
                    .last()
                    .is_some_and(|l| l.starts_with(&format!("end s{STAGES} "))),
                "run {id} succeeded without its last stage: {markers}"
            );
        }
    }
    println!(
        "server crash figures: trials {}, acknowledged runs {}, lost {}, event gaps {}, integrity failures {}, interrupted runs {}, resumed by themselves {}, concurrent stage runs {}",
        figures.trials,
        figures.acknowledged,
        figures.lost,
        figures.gaps,
        figures.integrity_failures,
        figures.interrupted,
        figures.resumed_by_themselves,
        figures.overlaps
    );
    assert_eq!(figures.lost, 0, "{figures:?}");
    assert_eq!(figures.gaps, 0, "{figures:?}");
    assert_eq!(figures.integrity_failures, 0, "{figures:?}");
    assert!(
        unfinished.is_empty(),
        "runs that did not finish: {unfinished:#?}"
    );
    assert_eq!(
        figures.interrupted, figures.resumed_by_themselves,
        "{figures:?}"
    );
    if locks {
        assert_eq!(figures.overlaps, 0, "{figures:?}");
    }
    assert!(
        figures.interrupted > 0,
        "no kill interrupted a run: {figures:?}"
    );
    assert!(
        figures.acknowledged >= trials,
        "the clients barely ran: {figures:?}"
    );
}
