//! Backups vs run progress (issue 32: "a backup of a 1 GB database does not stall run
//! progress by more than 50 ms at a time"; harness = false, `cargo bench --bench
//! backup_bench`).
//!
//! Builds a state database of `SVC_BENCH_BACKUP_MIB` MiB (default 1,024: big blobs, so it is
//! quick to make), starts the real server on it with a local-directory object store, keeps
//! runs progressing (client threads that each create and start a run of two command stages
//! and wait for its end, over and over), then takes `svc backup` while they go on. Prints,
//! before the backup and during it: the longest gap between two consecutive committed
//! events (their store timestamps), the 99th percentile gap, and the slowest create or start
//! request; plus the backup's own time and the load average (the machine may be shared).
//!
//! Must not: assert timings (it prints them; the target is read by a person).

use serde_json::json;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::binary::{bin, state_dir, Svc};
use support::server::run_id;
use support::{env_or, percentile};
use svc::internal::store::{RunStore, SqliteStore};

mod support;

const FLOW: &str = "digraph progress { start [shape=Mdiamond]; exit [shape=Msquare]; \
    a [shape=parallelogram, script=\"true\"]; b [shape=parallelogram, script=\"true\"]; \
    start -> a -> b -> exit }";

/// Milliseconds since the Unix epoch, now.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Random bytes (xorshift: SQLite stores them as they are, nothing to compress).
fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The longest and the 99th percentile gap (ms) between consecutive times in `[from, to)`.
fn gaps(sorted_ms: &[i64], from: i64, to: i64) -> (i64, f64, usize) {
    let inside: Vec<i64> = sorted_ms
        .iter()
        .copied()
        .filter(|t| (from..to).contains(t))
        .collect();
    let mut g: Vec<f64> = inside.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
    g.sort_by(f64::total_cmp);
    let max = g.last().copied().unwrap_or(0.0) as i64;
    (max, percentile(&g, 0.99), inside.len())
}

/// The slowest request (ms) that started in `[from, to)`.
fn slowest(requests: &[(i64, i64)], from: i64, to: i64) -> i64 {
    requests
        .iter()
        .filter(|(at, _)| (from..to).contains(at))
        .map(|(_, ms)| *ms)
        .max()
        .unwrap_or(0)
}

fn main() {
    let mib: usize = env_or("SVC_BENCH_BACKUP_MIB", 1024);
    let drivers: usize = env_or("SVC_BENCH_BACKUP_DRIVERS", 3);
    let objects = tempfile::tempdir().expect("tempdir");
    let settings = format!(
        "[server.object_store]\nprovider = \"local\"\nroot = \"{}\"\n[server.backup]\nkeep = 1\n",
        objects.path().display()
    );
    let dir = state_dir(&settings, &[]);
    let state = dir.path().to_path_buf();

    let t = Instant::now();
    {
        let store = SqliteStore::activate(&state).expect("activate");
        for i in 0..mib.div_ceil(8) {
            store
                .put_blob(&noise(8 << 20, 0x9e37_79b9_7f4a_7c15 ^ i as u64))
                .expect("blob");
        }
    }
    let db_bytes = std::fs::metadata(state.join("svc.db"))
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "database: {:.0} MiB built in {:.1} s",
        db_bytes as f64 / (1 << 20) as f64,
        t.elapsed().as_secs_f64()
    );

    let server = Svc::start(Command::new(bin()), dir);
    let stop = Arc::new(AtomicBool::new(false));
    // (request start in Unix ms, its duration in ms) of every create and start.
    let requests = Arc::new(Mutex::new(Vec::<(i64, i64)>::new()));
    let body = json!({"workflow": {"entrypoint": "p.dot", "files": {"p.dot": FLOW}}}).to_string();
    let handles: Vec<_> = (0..drivers)
        .map(|_| {
            let (mut c, stop, requests, body) = (
                server.client(),
                stop.clone(),
                requests.clone(),
                body.clone(),
            );
            std::thread::spawn(move || {
                let timed = |c: &mut support::Client, method: &str, path: &str, b: &str| {
                    let at = now_ms();
                    let t = Instant::now();
                    let r = c.call(method, path, b);
                    let ms = t.elapsed().as_millis() as i64;
                    if let Ok(mut v) = requests.lock() {
                        v.push((at, ms));
                    }
                    r
                };
                while !stop.load(Ordering::Relaxed) {
                    let created = timed(&mut c, "POST", "/api/v1/runs", &body);
                    assert_eq!(created.status, 201, "create");
                    let id = run_id(&created.body);
                    let started = timed(&mut c, "POST", &format!("/api/v1/runs/{id}/start"), "");
                    assert_eq!(started.status, 200, "start");
                    // Wait for its end, so a bounded number of runs is in flight.
                    let deadline = Instant::now() + Duration::from_secs(60);
                    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
                        let r = c.call("GET", &format!("/api/v1/runs/{id}"), "");
                        let v: serde_json::Value =
                            serde_json::from_slice(&r.body).unwrap_or_default();
                        let status = v["lifecycle"]["status"]["kind"].as_str().unwrap_or("");
                        if ["succeeded", "failed", "cancelled"].contains(&status) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
            })
        })
        .collect();

    let settle = Duration::from_secs(env_or("SVC_BENCH_BACKUP_BEFORE_SECS", 8));
    std::thread::sleep(Duration::from_secs(2));
    let before_from = now_ms();
    std::thread::sleep(settle);
    let backup_from = now_ms();
    // When the backup's phases begin (Unix ms), seen from its files: the snapshot growing in
    // `<state>/tmp`, then checked (a snapshot and no partial object yet), then copied into
    // the object store (a `.partial-` file there).
    let watching = Arc::new(AtomicBool::new(true));
    let phases = {
        let (watching, state, objects) = (
            watching.clone(),
            state.clone(),
            objects.path().join("backups"),
        );
        std::thread::spawn(move || {
            let has = |dir: &std::path::Path, what: &str| {
                std::fs::read_dir(dir)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .any(|e| e.file_name().to_string_lossy().contains(what))
            };
            let (mut check_from, mut copy_from) = (None, None);
            let mut last_size = 0u64;
            while watching.load(Ordering::Relaxed) {
                let size = std::fs::read_dir(state.join("tmp"))
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with("backup-"))
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .max()
                    .unwrap_or(0);
                if copy_from.is_none() && has(&objects, ".partial-") {
                    copy_from = Some(now_ms());
                } else if check_from.is_none() && size > 0 && size == last_size && size >= 1 << 30 {
                    check_from = Some(now_ms());
                }
                last_size = size;
                std::thread::sleep(Duration::from_millis(20));
            }
            (check_from, copy_from)
        })
    };
    let t = Instant::now();
    let out = Command::new(bin())
        .args(["backup", "--state-dir"])
        .arg(&state)
        .output()
        .expect("svc backup");
    let backup_secs = t.elapsed().as_secs_f64();
    let backup_to = now_ms();
    watching.store(false, Ordering::Relaxed);
    let (check_from, copy_from) = phases.join().unwrap_or((None, None));
    assert!(
        out.status.success(),
        "svc backup: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }
    // Stopped, not dropped: the state directory goes with `server`.
    let mut server = server;
    let _ = server.child.kill();
    let _ = server.child.wait();
    let store = SqliteStore::activate(&state).expect("reopen");
    let mut times = Vec::new();
    let runs = store.list_runs(0, 1_000_000).expect("runs");
    for r in &runs {
        for e in store.events(&r.id, 0, 100_000).expect("events") {
            if let Ok(t) = chrono::DateTime::parse_from_rfc3339(&e.ts) {
                times.push(t.timestamp_millis());
            }
        }
    }
    times.sort_unstable();
    let requests = requests.lock().map(|v| v.clone()).unwrap_or_default();
    let (b_max, b_p99, b_n) = gaps(&times, before_from, backup_from);
    let (d_max, d_p99, d_n) = gaps(&times, backup_from, backup_to);
    println!(
        "backup of {:.0} MiB: {backup_secs:.1} s ({} runs, {} events in the store)",
        db_bytes as f64 / (1 << 20) as f64,
        runs.len(),
        times.len()
    );
    println!(
        "before the backup ({:.1} s): {b_n} events, longest gap between commits {b_max} ms, p99 gap {b_p99:.0} ms, slowest create/start {} ms",
        (backup_from - before_from) as f64 / 1000.0,
        slowest(&requests, before_from, backup_from)
    );
    println!(
        "during the backup ({backup_secs:.1} s): {d_n} events, longest gap between commits {d_max} ms, p99 gap {d_p99:.0} ms, slowest create/start {} ms (target: longest gap <= 50 ms)",
        slowest(&requests, backup_from, backup_to)
    );
    // Where the longest gap of the backup fell, and the phases' own longest gaps.
    let inside: Vec<i64> = times
        .iter()
        .copied()
        .filter(|t| (backup_from..backup_to).contains(t))
        .collect();
    if let Some(w) = inside.windows(2).max_by_key(|w| w[1] - w[0]) {
        println!(
            "longest gap during the backup: {} ms, from {:.2} s into it",
            w[1] - w[0],
            (w[0] - backup_from) as f64 / 1000.0
        );
    }
    let at = |t: Option<i64>| t.map_or(f64::NAN, |t| (t - backup_from) as f64 / 1000.0);
    let (c, p) = (
        check_from.unwrap_or(backup_to),
        copy_from.unwrap_or(backup_to),
    );
    println!(
        "phases (s into the backup): snapshot 0-{:.2}, check -{:.2}, copy to the store -{:.2}; longest gap in each: {} / {} / {} ms",
        at(check_from),
        at(copy_from),
        (backup_to - backup_from) as f64 / 1000.0,
        gaps(&times, backup_from, c).0,
        gaps(&times, c, p).0,
        gaps(&times, p, backup_to).0
    );
    println!(
        "load average at the end: {} ({} drivers, 2-core machine shared)",
        load_average(),
        drivers
    );
}
