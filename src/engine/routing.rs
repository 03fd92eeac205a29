//! Edge selection (decisions.md "Routing"): the four tiers after a success, tiers 1-3 then
//! the retry-target chain after a failure, weighted random selection, and the retry-target
//! chain used by goal gates.
//! Must not touch: context, events or handlers; it only reads the workflow.

use super::failure::StageStatus;
use super::handlers::human::question::normalize_label;
use super::prng::Prng;
use crate::workflow::condition::ConditionEnv;
use crate::workflow::{HandlerKind, Workflow};

/// Why an edge (or a jump) was chosen; reported in `edge.selected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteReason {
    Condition,
    PreferredLabel,
    SuggestedNextId,
    Unconditional,
    RetryTarget,
    FallbackRetryTarget,
    GraphRetryTarget,
    GraphFallbackRetryTarget,
    ParallelJoin,
}

impl RouteReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RouteReason::Condition => "condition",
            RouteReason::PreferredLabel => "preferred_label",
            RouteReason::SuggestedNextId => "suggested_next_id",
            RouteReason::Unconditional => "unconditional",
            RouteReason::RetryTarget => "retry_target",
            RouteReason::FallbackRetryTarget => "fallback_retry_target",
            RouteReason::GraphRetryTarget => "graph_retry_target",
            RouteReason::GraphFallbackRetryTarget => "graph_fallback_retry_target",
            RouteReason::ParallelJoin => "parallel_join",
        }
    }
}

/// The chosen next node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The edge followed; `None` for a jump (retry target, parallel join).
    pub edge: Option<usize>,
    pub to: usize,
    pub reason: RouteReason,
    /// Chosen by a weighted draw (`selection=random`).
    pub random: bool,
}

impl Route {
    pub fn is_jump(&self) -> bool {
        self.edge.is_none()
    }

    pub fn jump(to: usize, reason: RouteReason) -> Route {
        Route {
            edge: None,
            to,
            reason,
            random: false,
        }
    }
}

/// What routing needs from a stage's outcome.
#[derive(Debug, Clone, Copy)]
pub struct RoutingInput<'a> {
    pub status: StageStatus,
    pub preferred_label: Option<&'a str>,
    pub suggested_next_ids: &'a [String],
}

/// The next node after `node`, or `None` when nothing routes (the caller decides whether that
/// ends a branch, fails with "no route", or fails with the stage's error).
pub fn select_route(
    wf: &Workflow,
    node: usize,
    input: RoutingInput<'_>,
    env: &dyn ConditionEnv,
    rng: &mut Prng,
) -> Option<Route> {
    let random = wf.node_view(node).text("selection") == Some("random");
    let edges = &wf.out_edges[node];
    let passing: Vec<usize> = edges
        .iter()
        .copied()
        .filter(|&e| condition_holds(wf, e, env))
        .collect();
    if !passing.is_empty() {
        return Some(pick(wf, &passing, random, rng, RouteReason::Condition));
    }
    let unconditional: Vec<usize> = edges
        .iter()
        .copied()
        .filter(|&e| is_unconditional(wf, e))
        .collect();
    if let Some(route) = by_preferred_label(wf, &unconditional, input.preferred_label) {
        return Some(route);
    }
    if let Some(route) = by_suggested_ids(wf, &unconditional, input.suggested_next_ids) {
        return Some(route);
    }
    if input.status == StageStatus::Failed {
        return retry_target(wf, node, false);
    }
    if unconditional.is_empty() {
        return None;
    }
    Some(pick(
        wf,
        &unconditional,
        random,
        rng,
        RouteReason::Unconditional,
    ))
}

fn condition_holds(wf: &Workflow, edge: usize, env: &dyn ConditionEnv) -> bool {
    match &wf.conditions[edge] {
        Some(Ok(c)) => !c.is_empty() && c.eval(env),
        _ => false,
    }
}

fn is_unconditional(wf: &Workflow, edge: usize) -> bool {
    match &wf.conditions[edge] {
        None => true,
        Some(Ok(c)) => c.is_empty(),
        Some(Err(_)) => false,
    }
}

fn by_preferred_label(wf: &Workflow, edges: &[usize], label: Option<&str>) -> Option<Route> {
    let wanted = normalize_label(label.filter(|l| !l.trim().is_empty())?);
    edges
        .iter()
        .copied()
        .find(|&e| {
            let edge_label = wf.edge_view(e).text("label").unwrap_or("");
            !edge_label.trim().is_empty() && normalize_label(edge_label) == wanted
        })
        .map(|e| edge_route(wf, e, RouteReason::PreferredLabel, false))
}

fn by_suggested_ids(wf: &Workflow, edges: &[usize], ids: &[String]) -> Option<Route> {
    ids.iter().find_map(|id| {
        edges
            .iter()
            .copied()
            .find(|&e| wf.edge(e).to == *id)
            .map(|e| edge_route(wf, e, RouteReason::SuggestedNextId, false))
    })
}

fn edge_route(wf: &Workflow, edge: usize, reason: RouteReason, random: bool) -> Route {
    Route {
        edge: Some(edge),
        to: wf.node_index(&wf.edge(edge).to).unwrap_or(0),
        reason,
        random,
    }
}

fn weight(wf: &Workflow, edge: usize) -> i64 {
    wf.edge_view(edge).int("weight").unwrap_or(0)
}

/// Highest weight, then smallest target id; or a weighted draw (weights <= 0 count as 1).
fn pick(
    wf: &Workflow,
    edges: &[usize],
    random: bool,
    rng: &mut Prng,
    reason: RouteReason,
) -> Route {
    if random && edges.len() > 1 {
        let weights: Vec<u64> = edges.iter().map(|&e| weight(wf, e).max(1) as u64).collect();
        return edge_route(wf, edges[rng.weighted(&weights)], reason, true);
    }
    let best = edges
        .iter()
        .copied()
        .min_by(|&a, &b| {
            weight(wf, b)
                .cmp(&weight(wf, a))
                .then_with(|| wf.edge(a).to.cmp(&wf.edge(b).to))
        })
        .unwrap_or(edges[0]);
    edge_route(wf, best, reason, false)
}

/// The first of the node's `retry_target`, its `fallback_retry_target`, the graph's
/// `retry_target` and the graph's `fallback_retry_target` that names a node. With
/// `skip_exit`, targets that are the exit node are passed over (goal gates).
pub fn retry_target(wf: &Workflow, node: usize, skip_exit: bool) -> Option<Route> {
    let nv = wf.node_view(node);
    let gv = wf.graph_view();
    let chain = [
        (nv.nonempty("retry_target"), RouteReason::RetryTarget),
        (
            nv.nonempty("fallback_retry_target"),
            RouteReason::FallbackRetryTarget,
        ),
        (gv.nonempty("retry_target"), RouteReason::GraphRetryTarget),
        (
            gv.nonempty("fallback_retry_target"),
            RouteReason::GraphFallbackRetryTarget,
        ),
    ];
    chain.into_iter().find_map(|(id, reason)| {
        let to = wf.node_index(id?)?;
        let is_exit = wf.handler(to) == Some(HandlerKind::Exit);
        (!(skip_exit && is_exit)).then(|| Route::jump(to, reason))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::condition::MapEnv;
    use serde_json::Map;

    use crate::engine::tests::workflow as wf;

    fn route(
        w: &Workflow,
        node: &str,
        status: StageStatus,
        label: Option<&str>,
        ids: &[&str],
        ctx: &Map<String, serde_json::Value>,
    ) -> Option<String> {
        let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
        let env = MapEnv {
            outcome: status.as_str(),
            preferred_label: label.unwrap_or(""),
            context: ctx,
        };
        let input = RoutingInput {
            status,
            preferred_label: label,
            suggested_next_ids: &ids,
        };
        let n = w.node_index(node)?;
        select_route(w, n, input, &env, &mut Prng::new(1)).map(|r| w.node(r.to).id.to_string())
    }

    const TIERS: &str = r#"digraph T {
        start [shape=Mdiamond]; exit [shape=Msquare]
        a -> c1 [condition="context.go=yes", weight=1]
        a -> c2 [condition="context.go=yes", weight=5]
        a -> l1 [label="[A] Approve"]
        a -> zz
        a -> yy
        a -> s1 [weight=-1]
        start -> a
        c1 -> exit; c2 -> exit; l1 -> exit; zz -> exit; yy -> exit; s1 -> exit
    }"#;

    #[test]
    fn tier_one_conditions_best_weight() {
        let w = wf(TIERS);
        let ctx: Map<_, _> = serde_json::json!({"go": "yes"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            route(&w, "a", StageStatus::Succeeded, Some("approve"), &[], &ctx).as_deref(),
            Some("c2")
        );
    }

    #[test]
    fn tier_two_label_then_three_ids_then_four_weight_and_id() {
        let w = wf(TIERS);
        let ctx = Map::new();
        assert_eq!(
            route(
                &w,
                "a",
                StageStatus::Succeeded,
                Some("Approve"),
                &["zz"],
                &ctx
            )
            .as_deref(),
            Some("l1")
        );
        assert_eq!(
            route(
                &w,
                "a",
                StageStatus::Succeeded,
                Some("nope"),
                &["nothere", "zz"],
                &ctx
            )
            .as_deref(),
            Some("zz")
        );
        // all weight 0 except s1 (-1): smallest target id among the best weight
        assert_eq!(
            route(&w, "a", StageStatus::Succeeded, None, &[], &ctx).as_deref(),
            Some("l1")
        );
    }

    #[test]
    fn failure_skips_unconditional_edges_and_uses_retry_chain() {
        let w = wf(TIERS);
        assert_eq!(
            route(&w, "a", StageStatus::Failed, None, &[], &Map::new()),
            None
        );
        let w2 = wf(r#"digraph T { graph [fallback_retry_target=b]
            start [shape=Mdiamond]; exit [shape=Msquare]
            start -> a -> exit; b -> exit
            a [retry_target=nowhere] }"#);
        assert_eq!(
            route(&w2, "a", StageStatus::Failed, None, &[], &Map::new()).as_deref(),
            Some("b")
        );
        assert_eq!(
            route(&w2, "a", StageStatus::Succeeded, None, &[], &Map::new()).as_deref(),
            Some("exit")
        );
    }

    #[test]
    fn failure_still_takes_conditions_labels_and_ids() {
        let w = wf(TIERS);
        assert_eq!(
            route(
                &w,
                "a",
                StageStatus::Failed,
                Some("[A] approve"),
                &[],
                &Map::new()
            )
            .as_deref(),
            Some("l1")
        );
        assert_eq!(
            route(&w, "a", StageStatus::Failed, None, &["yy"], &Map::new()).as_deref(),
            Some("yy")
        );
    }

    #[test]
    fn random_selection_draws_by_weight() {
        let w = wf(r#"digraph R { start [shape=Mdiamond]; exit [shape=Msquare]
            start -> a; a [selection=random]
            a -> b [weight=0]; a -> c [weight=9]; b -> exit; c -> exit }"#);
        let a = w.node_index("a").unwrap_or(0);
        let ctx = Map::new();
        let env = MapEnv {
            outcome: "succeeded",
            preferred_label: "",
            context: &ctx,
        };
        let mut rng = Prng::new(3);
        let mut to_c = 0;
        for _ in 0..1000 {
            let input = RoutingInput {
                status: StageStatus::Succeeded,
                preferred_label: None,
                suggested_next_ids: &[],
            };
            let r = select_route(&w, a, input, &env, &mut rng);
            if r.map(|r| w.node(r.to).id.as_str() == "c").unwrap_or(false) {
                to_c += 1;
            }
        }
        assert!((850..=950).contains(&to_c), "{to_c}");
    }

    #[test]
    fn goal_gate_chain_skips_exit() {
        let w = wf(
            r#"digraph G { graph [retry_target=exit, fallback_retry_target=a]
            start [shape=Mdiamond]; exit [shape=Msquare]; start -> a -> exit }"#,
        );
        let a = w.node_index("a").unwrap_or(0);
        assert_eq!(
            retry_target(&w, a, true)
                .map(|r| w.node(r.to).id.clone())
                .as_deref(),
            Some("a")
        );
    }
}
