//! Engine benchmark (not a test): per-stage overhead of the stage loop on a linear chain of
//! no-op (conditional) stages with the in-memory store and with the SQLite store (every
//! event and checkpoint durably committed: WAL, synchronous=NORMAL), and the cost of a
//! command stage (process spawn) on a chain of `true` commands.
//!
//! Run: `cargo bench --bench engine_bench`. Sizes via `ENGINE_BENCH_STAGES` (default 1000)
//! and `ENGINE_BENCH_COMMANDS` (default 200). Target: <= 200 µs per no-op stage with SQLite.
//! Wall time is what a run takes; CPU time (this process, all threads; not the commands'
//! own processes) is what it costs and is steadier on a busy machine.

use std::sync::Arc;
use std::time::{Duration, Instant};
use svc::engine::{Engine, RunOptions, RunResult, Services};
use svc::store::{MemoryStore, NewRun, RunStore, SqliteStore};
use svc::workflow::{self, NoFiles, Workflow};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// start -> n0 -> ... -> n(count-1) -> exit, every middle node of the given attributes.
fn chain(count: usize, node_attrs: &str) -> Res<Workflow> {
    let mut src = String::from(
        "digraph bench {\n graph [stall_timeout=0]\n start [shape=Mdiamond]\n exit [shape=Msquare]\n",
    );
    for i in 0..count {
        src.push_str(&format!(" n{i} [{node_attrs}]\n"));
    }
    src.push_str(" start -> n0\n");
    for i in 1..count {
        src.push_str(&format!(" n{} -> n{i}\n", i - 1));
    }
    src.push_str(&format!(" n{} -> exit\n}}\n", count - 1));
    let loaded = workflow::load(&src, &NoFiles)?;
    if loaded.has_errors() {
        return Err(format!("{:?}", loaded.diagnostics).into());
    }
    Ok(loaded.workflow)
}

/// CPU time (user + system) of this process so far, all threads.
fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(u.ru_utime) + tv(u.ru_stime)
}

struct Measured {
    wall: Duration,
    cpu: Duration,
    stages: usize,
}

/// Runs `wf` once on `store`.
fn run_once(wf: &Workflow, store: Arc<dyn RunStore>, workdir: &std::path::Path) -> Res<Measured> {
    let row = store.create_run(NewRun::default())?;
    let options = RunOptions::new(&row.id, workdir.to_path_buf());
    let services = Services::new(store);
    let (started, cpu0) = (Instant::now(), cpu_time());
    let outcome = Engine::run(wf, &options, &services);
    let (wall, cpu) = (started.elapsed(), cpu_time().saturating_sub(cpu0));
    if outcome.status != RunResult::Succeeded {
        return Err(format!("bench run failed: {:?}", outcome.error).into());
    }
    Ok(Measured {
        wall,
        cpu,
        stages: outcome.path.len(),
    })
}

fn report(label: &str, m: Measured) {
    let per = |d: Duration| d.as_secs_f64() * 1e6 / m.stages as f64;
    println!(
        "{label:<36} {:>5} stages  wall {:>8.1} ms = {:>7.1} µs/stage  cpu {:>7.1} µs/stage",
        m.stages,
        m.wall.as_secs_f64() * 1e3,
        per(m.wall),
        per(m.cpu)
    );
}

fn main() -> Res<()> {
    let stages = env_usize("ENGINE_BENCH_STAGES", 1000);
    let commands = env_usize("ENGINE_BENCH_COMMANDS", 200);
    let dir = tempfile::tempdir()?;
    let noop = chain(stages, "shape=diamond")?;

    let memory: Arc<dyn RunStore> = Arc::new(MemoryStore::new());
    run_once(&noop, memory.clone(), dir.path())?; // warm-up
    report(
        "no-op chain, MemoryStore",
        run_once(&noop, memory, dir.path())?,
    );

    let sqlite: Arc<dyn RunStore> = Arc::new(SqliteStore::activate(&dir.path().join("state"))?);
    run_once(&noop, sqlite.clone(), dir.path())?; // warm-up
    report(
        "no-op chain, SqliteStore (durable)",
        run_once(&noop, sqlite.clone(), dir.path())?,
    );

    let cmds = chain(commands, "shape=parallelogram, script=\"true\"")?;
    let mem2: Arc<dyn RunStore> = Arc::new(MemoryStore::new());
    report(
        "`true` commands, MemoryStore",
        run_once(&cmds, mem2, dir.path())?,
    );
    report(
        "`true` commands, SqliteStore",
        run_once(&cmds, sqlite, dir.path())?,
    );
    Ok(())
}
