//! Environments benchmark (not a test): the issue's target is "sandbox start with limits
//! applied ≤ 20 ms above the same sandbox without". For each provider (`local`, and
//! `container` where bubblewrap can run), a sandbox is started on a scratch directory and its
//! first process (`true`) run to its end, then dropped (its cgroups removed), once without
//! resources and once with an environment's `{cpu: 1, memory: 512MB, pids: 256, disk: 1GB}`
//! (without `pids` where this host cannot hold a process limit: root without a cgroup).
//! Prints the median of each and the difference against the 20 ms target.
//!
//! Run: `cargo bench --bench environments_bench` (the time is the kernel's, bubblewrap's and
//! the cgroup file system's, so `--profile dev` gives the same figures). `ENV_BENCH_ROUNDS`
//! (default 30).

use std::time::{Duration, Instant};
use support::{env_or, median};
use svc::internal::sandbox::limits::{Resources, Runtime};
use svc::internal::sandbox::{isolation, ProviderKind, SandboxPlan};

mod support;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const TARGET_MS: f64 = 20.0;

/// Start + first process + drop, once.
fn one(plan: &SandboxPlan, dir: &std::path::Path) -> Res<Duration> {
    let began = Instant::now();
    let started =
        isolation::start(plan, dir).map_err(|e| format!("{}: {:?}", e.error, e.causes))?;
    let status = started.isolation.command("true", dir).status()?;
    if !status.success() {
        return Err(format!("`true` in the sandbox exited with {status}").into());
    }
    drop(started);
    Ok(began.elapsed())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() -> Res<()> {
    let rounds: usize = env_or("ENV_BENCH_ROUNDS", 30);
    let dir = tempfile::tempdir()?;
    let runtime = Runtime::host();
    let mut limited = Resources {
        cpu: Some(1),
        memory: Some(512 << 20),
        pids: Some(256),
        disk: Some(1 << 30),
    };
    if runtime.refuses(&limited).is_some() {
        limited.pids = None;
    }
    println!(
        "environments bench: {rounds} rounds, limits runtime {}, limits {:?}",
        runtime.name(),
        limited
    );
    for provider in [ProviderKind::Local, ProviderKind::Container] {
        let plan = |resources: Resources| SandboxPlan {
            provider,
            image: None,
            snapshot: None,
            network: true,
            bwrap: "bwrap".into(),
            resources,
        };
        let bare = plan(Resources::default());
        let with = plan(limited);
        if let Err(e) = one(&bare, dir.path()) {
            println!("{}: skipped ({e})", provider.as_str());
            continue;
        }
        let mut a = Vec::with_capacity(rounds);
        let mut b = Vec::with_capacity(rounds);
        // Interleaved, so drift in the machine's load hits both alike.
        for _ in 0..rounds {
            a.push(ms(one(&bare, dir.path())?));
            b.push(ms(one(&with, dir.path())?));
        }
        let (ma, mb) = (median(&mut a), median(&mut b));
        let over = mb - ma;
        println!(
            "{:<9} start + first process: without limits {ma:.2} ms, with limits {mb:.2} ms \
             (median): +{over:.2} ms, target ≤ {TARGET_MS} ms: {}",
            provider.as_str(),
            if over <= TARGET_MS { "met" } else { "MISSED" }
        );
    }
    Ok(())
}
