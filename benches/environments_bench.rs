//! Environments benchmark (not a test): the issue's target is "sandbox start with limits
//! applied ≤ 20 ms above the same sandbox without". For each provider (`local`, and
//! `container` where bubblewrap can run), a sandbox is started on a scratch directory and its
//! first process (`true`) run to its end, then dropped (its cgroups removed), once without
//! resources and once with an environment's `{cpu: 1, memory: 512MB, pids: 256, disk: 1GB}`
//! (without `pids` where this host cannot hold a process limit: root without a cgroup).
//! Prints, for each provider, `<provider>: without X ms, with Y ms, difference Z ms (target
//! <= 20)` (medians of interleaved rounds), the spread of each (10th-90th percentile) and the
//! load average before and after (the figures are only as quiet as the machine).
//!
//! Where the time goes with limits (cgroup v1 here): making and configuring the groups is
//! ~0.3 ms; the cost is the kernel's: a process joining a cgroup (`cgroup.procs`) after a quiet
//! spell waits for an RCU grace period (`cgroup_threadgroup_rwsem`), 5-20 ms depending on
//! load. The container's start probe used to join too, so start + first process paid two
//! grace periods; the probe now runs outside the limits and only the first process pays one.
//!
//! Run: `cargo bench --bench environments_bench` (the time is the kernel's, bubblewrap's and
//! the cgroup file system's, so `--profile dev` gives similar figures). `ENV_BENCH_ROUNDS`
//! (default 30).

use std::time::{Duration, Instant};
use support::{env_or, median, percentile};
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

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`).
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
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
        "environments bench: {rounds} rounds, limits runtime {}, limits {:?}, load average {}",
        runtime.name(),
        limited,
        load_average()
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
            "{}: without {ma:.2} ms, with {mb:.2} ms, difference {over:.2} ms (target <= {TARGET_MS}): {}",
            provider.as_str(),
            if over <= TARGET_MS { "met" } else { "MISSED" }
        );
        println!(
            "  spread (p10-p90): without {:.2}-{:.2} ms, with {:.2}-{:.2} ms",
            percentile(&a, 0.1),
            percentile(&a, 0.9),
            percentile(&b, 0.1),
            percentile(&b, 0.9),
        );
    }
    println!("load average after: {}", load_average());
    Ok(())
}
