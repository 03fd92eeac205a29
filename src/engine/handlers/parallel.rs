//! The parallel handler (decisions.md "Parallel"): the fork finds the join node where its
//! branches converge, runs each branch (a walker on its own context copy, on its own thread,
//! at most `max_parallel` at once), waits for all, merges the keys each branch wrote in
//! fork-edge order, sets `parallel.results` and jumps to the join (`fan_in` turns the branch
//! statuses into the join's outcome).
//! Must not touch: the stage loop itself (branches reuse the walker).

use super::{HandlerResult, Interrupt, StageCtx};
use crate::base::event_kind;
use crate::engine::context::{self, Context, PARALLEL_RESULTS};
use crate::engine::failure::StageStatus;
use crate::engine::outcome::{Failure, Nested, StageOutcome};
use crate::engine::scope::{Scope, ScopeKind};
use crate::engine::timing::millis;
use crate::engine::walker::{Stop, WalkEnd};
use crate::store::StoreError;
use crate::workflow::{HandlerKind, Workflow};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

const DEFAULT_MAX_PARALLEL: i64 = 4;

/// One branch's result, in fork-edge order.
struct BranchResult {
    branch: String,
    status: StageStatus,
    error: Option<String>,
    outputs: Context,
    nested: Nested,
    store_error: Option<StoreError>,
}

pub(super) fn run(cx: &StageCtx<'_, '_>) -> HandlerResult {
    let wf = cx.wf();
    // (fork edge, branch start) per branch, in fork-edge order.
    let entries: Vec<(usize, usize)> = wf.out_edges[cx.node]
        .iter()
        .filter_map(|&e| Some((e, wf.edge_target(e)?)))
        .collect();
    let starts: Vec<usize> = entries.iter().map(|&(_, s)| s).collect();
    if starts.is_empty() {
        return deterministic(cx, "has no branches");
    }
    let Some(join) = find_join(wf, cx.node, &starts) else {
        return deterministic(cx, "has branches that never meet at a common node (add a parallel.fan_in node they all lead to)");
    };
    let max_parallel = cx
        .view()
        .int("max_parallel")
        .filter(|&n| n >= 1)
        .unwrap_or(DEFAULT_MAX_PARALLEL) as usize;
    let visit = cx.state().visits.get(cx.id()).copied().unwrap_or(1);
    let group = format!("{}#{visit}", cx.scoped_id());
    cx.emit(
        event_kind::PARALLEL_STARTED,
        json!({"visit": visit, "branch_count": starts.len(), "max_parallel": max_parallel,
               "join_node": cx.scoped_id_of(join), "join_policy": "wait_all"}),
    )?;
    let started = Instant::now();
    let results = run_branches(cx, &group, &entries, join, max_parallel);
    if cx.cancel.is_cancelled() {
        return Err(Interrupt::Cancelled);
    }
    let mut results = results;
    if let Some(e) = results.iter_mut().find_map(|r| r.store_error.take()) {
        return Err(Interrupt::Store(e));
    }
    let outcome = merge(cx, &results, join);
    let ok = results
        .iter()
        .filter(|r| counts_as_success(r.status))
        .count();
    let summary: Vec<Value> = results
        .iter()
        .map(|r| json!({"branch": r.branch, "status": r.status.as_str(), "error": r.error}))
        .collect();
    cx.emit(
        event_kind::PARALLEL_COMPLETED,
        json!({"visit": visit, "duration_ms": millis(started.elapsed()), "success_count": ok,
               "failure_count": results.len() - ok, "results": summary}),
    )?;
    Ok(outcome)
}

fn deterministic(cx: &StageCtx<'_, '_>, what: &str) -> HandlerResult {
    Ok(StageOutcome::failed(Failure::deterministic(format!(
        "parallel stage `{}` {what}",
        cx.scoped_id()
    ))))
}

pub(super) fn counts_as_success(s: StageStatus) -> bool {
    matches!(s, StageStatus::Succeeded | StageStatus::Skipped)
}

/// Runs every branch, at most `max_parallel` at a time, and waits for all of them.
fn run_branches(
    cx: &StageCtx<'_, '_>,
    group: &str,
    entries: &[(usize, usize)],
    join: usize,
    max_parallel: usize,
) -> Vec<BranchResult> {
    let slots: Vec<Mutex<Option<BranchResult>>> =
        entries.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..max_parallel.min(entries.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(&entry) = entries.get(i) else { break };
                let r = run_branch(cx, group, i, entry, join);
                *slots[i].lock() = Some(r);
            });
        }
    });
    slots
        .into_iter()
        .zip(entries)
        .map(|(slot, &(_, start))| {
            slot.into_inner().unwrap_or_else(|| BranchResult {
                branch: cx.wf().node(start).id.to_string(),
                status: StageStatus::Failed,
                error: Some("the branch did not run".into()),
                outputs: Context::new(),
                nested: Nested::default(),
                store_error: None,
            })
        })
        .collect()
}

fn run_branch(
    cx: &StageCtx<'_, '_>,
    group: &str,
    index: usize,
    (edge, start): (usize, usize),
    join: usize,
) -> BranchResult {
    let parent = cx.scope();
    let branch = cx.wf().node(start).id.to_string();
    let scope = Scope {
        kind: ScopeKind::Branch,
        prefix: parent.prefix.clone(),
        branch: Some((group.to_string(), branch.clone())),
        stop_at: Some(join),
        cancel: cx.cancel.clone(),
        files: parent.files.clone(),
        mirrors: parent.mirrors.clone(),
    };
    let mut walker = cx.sub_walk(cx.wf(), scope, cx.state().clone());
    let started = Instant::now();
    let mut store_error = walker
        .emit(
            event_kind::PARALLEL_BRANCH_STARTED,
            Some(cx.node),
            json!({"index": index, "branch": branch}),
        )
        .err();
    let (status, error) = match walker.walk_from(start, Some(edge)) {
        Ok(WalkEnd::Ended(s)) => (s, None),
        Ok(WalkEnd::Exited) => (StageStatus::Succeeded, None),
        Err(Stop::Failed(f)) => (StageStatus::Failed, Some(f.message)),
        Err(Stop::Cancelled(r)) => (StageStatus::Failed, Some(format!("cancelled: {r}"))),
    };
    let outputs: Context = walker
        .written
        .iter()
        .filter(|k| !context::is_engine_key(k))
        .filter_map(|k| walker.state.context.get(k).map(|v| (k.clone(), v.clone())))
        .collect();
    let done = walker.emit(
        event_kind::PARALLEL_BRANCH_COMPLETED,
        Some(cx.node),
        json!({"index": index, "branch": branch, "status": status.as_str(),
               "duration_ms": millis(started.elapsed()), "error": error}),
    );
    store_error = store_error.or(done.err());
    BranchResult {
        branch,
        status,
        error,
        outputs,
        nested: walker.nested_since(cx.state()),
        store_error,
    }
}

/// Branch outputs merged in fork-edge order (later wins), `parallel.results`, the branches'
/// stage visits, and the jump to the join.
fn merge(cx: &StageCtx<'_, '_>, results: &[BranchResult], join: usize) -> StageOutcome {
    let mut o = StageOutcome::succeeded();
    let mut nested = Nested::default();
    let mut listed = Vec::with_capacity(results.len());
    for r in results {
        o.context_updates.extend(r.outputs.clone());
        listed.push(json!({"branch": r.branch, "status": r.status.as_str(),
                           "outputs": Value::Object(r.outputs.clone())}));
        nested.path.extend(r.nested.path.iter().cloned());
        nested.completed.extend(r.nested.completed.iter().cloned());
        nested.outcomes.extend(r.nested.outcomes.iter().cloned());
        nested.retries.extend(r.nested.retries.iter().cloned());
        nested.notes.extend(r.nested.notes.iter().cloned());
        for (k, v) in &r.nested.visits {
            *nested.visits.entry(k.clone()).or_insert(0) += v;
        }
        for (k, v) in &r.nested.signatures {
            *nested.signatures.entry(k.clone()).or_insert(0) += v;
        }
    }
    o.write(PARALLEL_RESULTS, Value::Array(listed));
    o.nested = Some(Box::new(nested));
    o.jump_to = Some(cx.wf().node(join).id.to_string());
    o
}

/// Where the branches converge: the fan-in node reached by the most branches (then the
/// nearest, then the first declared); without a fan-in, the nearest node every branch
/// reaches. Searches do not pass through fan-in nodes or back through the fork.
pub(crate) fn find_join(wf: &Workflow, fork: usize, starts: &[usize]) -> Option<usize> {
    let n = wf.graph.nodes.len();
    let dists: Vec<Vec<Option<usize>>> = starts.iter().map(|&s| distances(wf, fork, s)).collect();
    let reached_by = |i: usize| dists.iter().filter(|d| d[i].is_some()).count();
    let total = |i: usize| dists.iter().filter_map(|d| d[i]).sum::<usize>();
    let farthest = |i: usize| dists.iter().filter_map(|d| d[i]).max().unwrap_or(0);
    let fan_in = (0..n)
        .filter(|&i| wf.handler(i) == Some(HandlerKind::FanIn) && reached_by(i) > 0)
        .min_by_key(|&i| (std::cmp::Reverse(reached_by(i)), total(i), i));
    fan_in.or_else(|| {
        (0..n)
            .filter(|&i| i != fork && reached_by(i) == starts.len())
            .min_by_key(|&i| (farthest(i), i))
    })
}

fn distances(wf: &Workflow, fork: usize, start: usize) -> Vec<Option<usize>> {
    let mut d = vec![None; wf.graph.nodes.len()];
    let mut queue = VecDeque::from([(start, 0usize)]);
    while let Some((i, k)) = queue.pop_front() {
        if i == fork || d[i].is_some() {
            continue;
        }
        d[i] = Some(k);
        if wf.handler(i) == Some(HandlerKind::FanIn) {
            continue;
        }
        for &e in &wf.out_edges[i] {
            if let Some(t) = wf.node_index(&wf.edge(e).to) {
                queue.push_back((t, k + 1));
            }
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::{load, NoFiles};

    #[test]
    fn join_is_the_fan_in_the_branches_reach() {
        let l = load(
            r#"digraph P { start [shape=Mdiamond]; exit [shape=Msquare]
               fork [shape=component]; join [shape=tripleoctagon]
               start -> fork; fork -> a; fork -> b; a -> a2 -> join; b -> join; join -> exit }"#,
            &NoFiles,
        );
        let w = match l {
            Ok(l) => l.workflow,
            Err(e) => panic!("{e:?}"),
        };
        let idx = |id: &str| w.node_index(id).unwrap_or(usize::MAX);
        let starts = [idx("a"), idx("b")];
        assert_eq!(find_join(&w, idx("fork"), &starts), Some(idx("join")));
    }
}
