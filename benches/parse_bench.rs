//! Parse + validate (`svc::internal::workflow::load`) on generated workflows of 1,000, 10,000 and
//! 100,000 nodes, generated at bench time by `benches/gen_big.py` (a copy of the shared generator) (python3).
//!
//!     cargo bench --bench parse_bench
//!
//! Prints, per size: the median, fastest and slowest of several runs, throughput, time per
//! node, and the peak resident memory of the process while loading that size (VmHWM from
//! /proc/self/status, reset between sizes through /proc/self/clear_refs). No harness, no
//! dependencies: the figures are for reading, not for gating CI.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::median;
use svc::internal::workflow::{self, NoFiles};

mod support;

const SIZES: &[(usize, usize)] = &[(1_000, 21), (10_000, 11), (100_000, 7)];

fn gen_big() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/gen_big.py")
}

fn generate(n: usize) -> Result<String, Box<dyn Error>> {
    let out = Command::new("python3")
        .arg(gen_big())
        .arg(n.to_string())
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "gen_big.py {n} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// A field of /proc/self/status in KiB (Linux only; None elsewhere).
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Resets the peak-RSS counter (VmHWM) to the current RSS. Returns false where unsupported.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() -> Result<(), Box<dyn Error>> {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs us with no such flag and
    // only wants to know that we build and start.
    if !std::env::args().any(|a| a == "--bench") {
        println!("parse_bench: run with `cargo bench --bench parse_bench`");
        return Ok(());
    }
    println!("parse + validate (svc::internal::workflow::load), gen_big.py workflows");
    println!(
        "{:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>10}",
        "nodes", "edges", "MiB", "median", "min", "max", "MiB/s", "us/node", "peak RSS"
    );
    let mut per_node = Vec::new();
    for &(n, runs) in SIZES {
        let src = generate(n)?;
        let can_reset = reset_peak();
        let rss_before = status_kib("VmRSS:");
        let mut times = Vec::with_capacity(runs);
        let mut edges = 0;
        for _ in 0..runs {
            let t = Instant::now();
            let loaded = workflow::load(&src, &NoFiles).map_err(|e| format!("{n} nodes: {e}"))?;
            times.push(t.elapsed());
            if loaded.has_errors() {
                return Err(format!(
                    "{n} nodes: generated workflow is invalid: {:?}",
                    loaded.diagnostics[0]
                )
                .into());
            }
            edges = loaded.workflow.graph.edges.len();
            drop(std::hint::black_box(loaded));
        }
        let (min, max) = (times.iter().min().copied(), times.iter().max().copied());
        let med = median(&mut times);
        let mib = src.len() as f64 / (1024.0 * 1024.0);
        let peak = match (can_reset, status_kib("VmHWM:"), rss_before) {
            (true, Some(hwm), Some(before)) => format!(
                "{:.1} MiB (+{:.1})",
                hwm as f64 / 1024.0,
                hwm.saturating_sub(before) as f64 / 1024.0
            ),
            (_, Some(hwm), _) => format!("{:.1} MiB", hwm as f64 / 1024.0),
            _ => "n/a".to_string(),
        };
        let us_node = med.as_secs_f64() * 1e6 / n as f64;
        per_node.push((n, us_node));
        println!(
            "{:>8} {:>8} {:>9.2} {:>7.1}ms {:>7.1}ms {:>7.1}ms {:>8.1} {:>9.2} {:>10}",
            n,
            edges,
            mib,
            ms(med),
            min.map_or(0.0, ms),
            max.map_or(0.0, ms),
            mib / med.as_secs_f64(),
            us_node,
            peak
        );
    }
    if let (Some(first), Some(last)) = (per_node.first(), per_node.last()) {
        println!(
            "time per node at {} nodes / at {} nodes: {:.2} (1.0 = linear)",
            last.0,
            first.0,
            last.1 / first.1
        );
    }
    println!("peak RSS: whole process high-water mark while loading that size (+ growth over the RSS before it)");
    lint_rules(100_000)
}

/// Each lint rule alone on the largest workflow (median of 3 runs on one workflow, so rules
/// after the first that needs reachability find it worked out), then `no_path_to_exit` on
/// fresh workflows, reachability included: on gen_big (every node reaches the exit) and on
/// the same graph turned into one 100,000-node loop with no way out (its worst case: every
/// node is a suspect and Tarjan walks them all).
fn lint_rules(n: usize) -> Result<(), Box<dyn Error>> {
    let src = generate(n)?;
    let trapped = src.replace(
        &format!("  n{} -> exit\n", n - 1),
        &format!(
            "  n{} -> n0\n  start -> exit [condition=\"outcome=failed\"]\n",
            n - 1
        ),
    );
    println!("\nlint rules at {n} nodes (median of 3 runs)");
    let graph = svc::internal::dot::parse(&src)?;
    let wf = workflow::Workflow::from_graph(graph.clone(), &NoFiles);
    let mut total = Duration::ZERO;
    let mut rows = Vec::new();
    for (name, rule) in workflow::lint::RULES {
        let mut times = Vec::with_capacity(3);
        let mut found = 0;
        for _ in 0..3 {
            let mut out = Vec::new();
            let t = Instant::now();
            rule(&wf, &NoFiles, &mut out);
            times.push(t.elapsed());
            found = out.len();
        }
        let med = median(&mut times);
        total += med;
        rows.push((*name, med, found));
    }
    println!("  all {} rules: {:.1} ms", rows.len(), ms(total));
    for (name, t, found) in &rows {
        println!("    {name:<32} {:>7.2} ms  ({found} diagnostics)", ms(*t));
    }
    let no_path = workflow::lint::RULES
        .iter()
        .find(|(name, _)| *name == "no_path_to_exit")
        .map(|(_, rule)| *rule)
        .ok_or("no_path_to_exit is not a rule")?;
    for (label, graph) in [
        ("gen_big", graph),
        ("trapped loop", svc::internal::dot::parse(&trapped)?),
    ] {
        let mut times = Vec::with_capacity(3);
        let mut found = 0;
        for _ in 0..3 {
            let fresh = workflow::Workflow::from_graph(graph.clone(), &NoFiles);
            let mut out = Vec::new();
            let t = Instant::now();
            no_path(&fresh, &NoFiles, &mut out);
            times.push(t.elapsed());
            found = out.len();
        }
        println!(
            "  no_path_to_exit with reachability, {label}: {:.2} ms ({found} diagnostics)",
            ms(median(&mut times))
        );
    }
    Ok(())
}
