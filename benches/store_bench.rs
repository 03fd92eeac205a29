//! Store benchmark (not a test): durable append throughput and latency through the store API
//! against the raw single-row insert rate of SQLite with the same pragmas, and startup time
//! with 10,000 runs / 1,000,000 events.
//!
//! Run: `cargo bench --bench store_bench`. Sizes via environment variables:
//! `STORE_BENCH_APPENDS` (default 20000), `STORE_BENCH_RUNS` (10000),
//! `STORE_BENCH_EVENTS_PER_RUN` (100), `STORE_BENCH_DIR` (where the databases go; default a
//! temporary directory; the startup database is reused when it already exists there).
//!
//! Durability: WAL with `synchronous=NORMAL` for both the store and the raw baseline. A
//! commit is in the WAL (OS page cache) when it returns: durable against a process crash
//! (what `tests/store/crash.rs` checks with SIGKILL), not against power loss.

use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{env_or, median};
type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

use svc::internal::store::{
    ActivationOptions, EventDraft, IntegrityMode, NewRun, RunStore, SqliteStore, DB_FILE,
};

mod support;

fn props(i: usize) -> serde_json::Value {
    json!({
        "index": i,
        "handler_type": "agent",
        "attempt": 1,
        "max_attempts": 3,
        "text": "Implement step of the plan. Read plan.md, change only the files it names, run the tests.",
        "usage": {"input": 1200, "output": 340, "reasoning": 0, "cache_read": 800, "cache_write": 0}
    })
}

fn payload_of_typical_size(seq: usize) -> String {
    let e = EventDraft::new("stage.started", props(seq)).node("n1");
    format!(
        r#"{{"seq":{seq},"id":"01JD00000000000000000000{:02}","ts":"2026-11-21T20:05:46.123Z","run_id":"01JD0000000000000000000000","event":"{}","properties":{},"node_id":"n1"}}"#,
        seq % 100,
        e.event,
        e.properties
    )
}

struct Stats {
    count: usize,
    elapsed: Duration,
    lat: Vec<Duration>,
}

impl Stats {
    fn rate(&self) -> f64 {
        self.count as f64 / self.elapsed.as_secs_f64()
    }
    fn pct(&self, p: f64) -> Duration {
        let mut l = self.lat.clone();
        l.sort();
        let i = ((l.len() as f64 - 1.0) * p).round() as usize;
        l.get(i).copied().unwrap_or_default()
    }
    fn line(&self, name: &str) -> String {
        format!(
            "{name:<32} {:>7.0} /s  p50 {:>6.1} us  p99 {:>7.1} us  p99.9 {:>8.1} us  max {:>8.1} us  ({} ops in {:.2} s)",
            self.rate(),
            self.pct(0.50).as_secs_f64() * 1e6,
            self.pct(0.99).as_secs_f64() * 1e6,
            self.pct(0.999).as_secs_f64() * 1e6,
            self.pct(1.0).as_secs_f64() * 1e6,
            self.count,
            self.elapsed.as_secs_f64()
        )
    }
}

/// Raw baseline. With `bg_checkpoint`, set up like the store: the inserting connection's
/// autocheckpoint is raised and a second connection checkpoints (PASSIVE) every 100 ms.
fn raw_inserts(dir: &Path, n: usize, bg_checkpoint: bool) -> Res<Stats> {
    let path = dir.join(format!("raw-{bg_checkpoint}.db"));
    let conn = rusqlite::Connection::open(&path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    assert_eq!(mode, "wal");
    conn.execute_batch(
        "PRAGMA synchronous=NORMAL; PRAGMA cache_size=-16384;
         CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,
            ts TEXT NOT NULL, payload TEXT NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID;",
    )?;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let checkpointer = if bg_checkpoint {
        conn.execute_batch("PRAGMA wal_autocheckpoint=16384;")?;
        let c = rusqlite::Connection::open(&path)?;
        c.busy_timeout(Duration::from_millis(100))?;
        let stop = Arc::clone(&stop);
        Some(std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let _ = c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            }
        }))
    } else {
        None
    };
    let payloads: Vec<String> = (1..=n).map(payload_of_typical_size).collect();
    let mut st = conn.prepare(
        "INSERT INTO events (run_id, seq, kind, ts, payload) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    let mut lat = Vec::with_capacity(n);
    let start = Instant::now();
    for (i, p) in payloads.iter().enumerate() {
        let t = Instant::now();
        st.execute(rusqlite::params![
            "01JD0000000000000000000000",
            i as i64 + 1,
            "stage.started",
            "2026-11-21T20:05:46.123Z",
            p
        ])?;
        lat.push(t.elapsed());
    }
    let elapsed = start.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(h) = checkpointer {
        h.join().map_err(|_| "the checkpointer thread panicked")?;
    }
    Ok(Stats {
        count: n,
        elapsed,
        lat,
    })
}

fn store_appends(dir: &Path, writers: usize, n: usize) -> Res<Stats> {
    let store = Arc::new(SqliteStore::open(&dir.join(format!("store-{writers}.db")))?);
    let runs = (0..writers)
        .map(|i| {
            store
                .create_run(NewRun {
                    title: format!("bench {i}"),
                    ..NewRun::default()
                })
                .map(|r| r.id)
        })
        .collect::<Result<Vec<String>, _>>()?;
    let per = n / writers;
    let start = Instant::now();
    let handles: Vec<_> = runs
        .into_iter()
        .map(|run_id| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || -> Res<Vec<Duration>> {
                let mut lat = Vec::with_capacity(per);
                for i in 0..per {
                    let draft = EventDraft::new("stage.started", props(i)).node("n1");
                    let t = Instant::now();
                    store.append(&run_id, draft)?;
                    lat.push(t.elapsed());
                }
                Ok(lat)
            })
        })
        .collect();
    let mut lat = Vec::with_capacity(n);
    for h in handles {
        lat.extend(h.join().map_err(|_| "a writer thread panicked")??);
    }
    Ok(Stats {
        count: per * writers,
        elapsed: start.elapsed(),
        lat,
    })
}

fn build_startup_db(state_dir: &Path, runs: usize, per_run: usize, max_bytes: u64) -> Res<()> {
    let db = state_dir.join(DB_FILE);
    if db.exists() {
        println!("startup db: reusing {}", db.display());
        return Ok(());
    }
    std::fs::create_dir_all(state_dir)?;
    let store = SqliteStore::open(&db)?;
    let t = Instant::now();
    for r in 0..runs {
        let run_id = svc::internal::base::clock::new_ulid();
        let mut lines = Vec::with_capacity(per_run);
        lines.push(format!(
            r#"{{"seq":1,"id":"{}","ts":"2026-11-21T20:05:46.123Z","run_id":"{run_id}","event":"run.created","properties":{{"title":"run {r}","goal":"bench","labels":{{}},"workflow":{{"name":"w","source":"digraph w {{ start -> exit }}","node_count":2,"edge_count":1}},"inputs":{{}}}}}}"#,
            svc::internal::base::clock::new_ulid()
        ));
        for seq in 2..=per_run {
            let kind = match seq {
                2 => "run.queued",
                3 => "run.running",
                s if s == per_run => "run.completed",
                s if s % 10 == 0 => "checkpoint.completed",
                _ => "stage.started",
            };
            let p = props(seq);
            lines.push(format!(
                r#"{{"seq":{seq},"id":"{}","ts":"2026-11-21T20:05:46.123Z","run_id":"{run_id}","event":"{kind}","properties":{p},"node_id":"n1"}}"#,
                svc::internal::base::clock::new_ulid()
            ));
        }
        store.import_run(&run_id, &lines)?;
        if max_bytes < u64::MAX && r % 10 == 9 {
            let size = |p: PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
            if size(db.clone()) >= max_bytes {
                break;
            }
        }
        if (r + 1) % 1000 == 0 && max_bytes == u64::MAX {
            println!(
                "  built {} runs ({} events) in {:.1} s",
                r + 1,
                (r + 1) * per_run,
                t.elapsed().as_secs_f64()
            );
        }
    }

    Ok(())
}

fn main() -> Res<()> {
    let n = env_or("STORE_BENCH_APPENDS", 20_000);
    let runs = env_or("STORE_BENCH_RUNS", 10_000);
    let per_run = env_or("STORE_BENCH_EVENTS_PER_RUN", 100);
    let _tmp;
    let base: PathBuf = match std::env::var_os("STORE_BENCH_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            _tmp = tempfile::tempdir()?;
            _tmp.path().to_path_buf()
        }
    };
    let appends = base.join("appends");
    let _ = std::fs::remove_dir_all(&appends);
    std::fs::create_dir_all(&appends)?;
    println!(
        "store_bench: WAL, synchronous=NORMAL, dir {}",
        base.display()
    );
    println!(
        "typical event payload: {} bytes",
        payload_of_typical_size(1).len()
    );

    let rounds = env_or("STORE_BENCH_ROUNDS", 3).max(1);
    let (mut inline, mut bg, mut one, mut four) = (vec![], vec![], vec![], vec![]);
    for round in 1..=rounds {
        println!("round {round}/{rounds}");
        let dir = appends.join(format!("round-{round}"));
        std::fs::create_dir_all(&dir)?;
        let s = raw_inserts(&dir, n, false)?;
        println!("  {}", s.line("raw INSERT, inline checkpoints"));
        inline.push(s.rate());
        let s = raw_inserts(&dir, n, true)?;
        println!("  {}", s.line("raw INSERT, bg checkpoints"));
        bg.push(s.rate());
        let s = store_appends(&dir, 1, n)?;
        println!("  {}", s.line("store.append, 1 writer"));
        one.push(s.rate());
        let s = store_appends(&dir, 4, n)?;
        println!("  {}", s.line("store.append, 4 writers"));
        four.push(s.rate());
        let _ = std::fs::remove_dir_all(&dir);
    }
    let (inline, bg, one, four) = (
        median(&mut inline),
        median(&mut bg),
        median(&mut one),
        median(&mut four),
    );
    println!(
        "median rates: raw inline {inline:.0}/s, raw bg {bg:.0}/s, store 1 writer {one:.0}/s, store 4 writers {four:.0}/s"
    );
    println!(
        "store/raw (raw set up like the store, bg checkpoints): 1 writer {:.2}, 4 writers {:.2} (target >= 0.50)",
        one / bg,
        four / bg
    );
    println!(
        "store/raw (raw with SQLite's default inline checkpoints): 1 writer {:.2}, 4 writers {:.2}",
        one / inline,
        four / inline
    );

    let state_dir = base.join("startup");
    build_startup_db(&state_dir, runs, per_run, u64::MAX)?;
    let db = state_dir.join(DB_FILE);
    let size = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0);
    println!(
        "startup db: {runs} runs x {per_run} events = {} events, {:.0} MiB",
        runs * per_run,
        size as f64 / (1024.0 * 1024.0)
    );
    let mut times = Vec::new();
    let mut check = "";
    for _ in 0..7 {
        let t = Instant::now();
        let store = SqliteStore::activate(&state_dir)?;
        let ready = t.elapsed();
        if let Some(r) = store.activation_report() {
            check = r.integrity_check;
        }
        let first = store.list_runs(0, 20)?;
        assert_eq!(first.len(), 20.min(runs));
        times.push(ready);
        drop(store);
    }
    times.sort();
    println!(
        "activate (default: Auto integrity, ran {check:?}) to ready: min {:.1} ms, median {:.1} ms, max {:.1} ms (target < 100 ms)",
        times[0].as_secs_f64() * 1e3,
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3
    );
    for mode in [IntegrityMode::Quick, IntegrityMode::Full] {
        let t = Instant::now();
        let store = SqliteStore::activate_with(
            &state_dir,
            &ActivationOptions {
                integrity: mode,
                ..ActivationOptions::default()
            },
        )?;
        println!(
            "activate with {:?} check: {:.0} ms",
            mode,
            t.elapsed().as_secs_f64() * 1e3
        );
        drop(store);
    }

    // The largest database that still gets quick_check at a normal start.
    let small = base.join("startup-small");
    let _ = std::fs::remove_dir_all(&small);
    build_startup_db(
        &small,
        usize::MAX,
        per_run,
        svc::internal::store::QUICK_CHECK_MAX_BYTES * 80 / 100,
    )?;
    drop(SqliteStore::open(&small.join(DB_FILE))?); // fold the WAL into the file
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let store = SqliteStore::activate(&small)?;
        times.push(t.elapsed());
        if let Some(r) = store.activation_report() {
            check = r.integrity_check;
        }
    }
    times.sort();
    println!(
        "activate on a {:.1} MiB database (ran {check:?}): median {:.1} ms, max {:.1} ms",
        std::fs::metadata(small.join(DB_FILE))
            .map(|m| m.len())
            .unwrap_or(0) as f64
            / 1048576.0,
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3
    );
    let _ = std::fs::remove_dir_all(&small);
    Ok(())
}
