//! Fidelity and threads (engine.md 5.3, SPEC 2.13): which fidelity a stage runs with, which
//! thread it belongs to, and the conversation key a `full` stage continues. The preamble
//! itself (the run's history as text) is `preamble`'s.
//!
//! The engine decides everything here and hands it to the LLM backend on the request
//! (`LlmRequest::preamble`, `LlmRequest::thread`); the agent layer only applies it.
//! Must not touch: providers, sessions, the store or routing.

use crate::workflow::attrs::Fidelity;
use crate::workflow::Workflow;

/// The fidelity when neither the edge, the node nor the graph sets one.
pub const DEFAULT_FIDELITY: Fidelity = Fidelity::Compact;
pub const FIDELITY_KEY: &str = "internal.fidelity";
pub const THREAD_KEY: &str = "internal.thread_id";

/// The fidelity of a stage entered through `via` (an edge index; `None` for the start, a
/// jump or a loop restart): the edge's, then the node's, then the graph's
/// `default_fidelity`, then `compact`. The first node of a parallel branch never continues
/// a conversation: `full` becomes `summary:high` there (SPEC 2.13), whichever level set it.
pub fn resolve_fidelity(
    wf: &Workflow,
    via: Option<usize>,
    node: usize,
    branch_start: bool,
) -> Fidelity {
    let resolved = via
        .and_then(|e| wf.edge_view(e).fidelity("fidelity"))
        .or_else(|| wf.node_view(node).fidelity("fidelity"))
        .or_else(|| wf.graph_view().fidelity("default_fidelity"))
        .unwrap_or(DEFAULT_FIDELITY);
    if branch_start && resolved == Fidelity::Full {
        Fidelity::SummaryHigh
    } else {
        resolved
    }
}

/// The thread of a stage: the entering edge's `thread_id`, the node's, the graph's
/// `default_thread`, the node's first class, then the thread of the stage before it
/// (`inherited`), else the previous node's id, else the node's own id. The first node of a
/// parallel branch ignores edge and node `thread_id` (SPEC: inert there).
///
/// Inheriting the previous stage's thread (instead of F's "the previous node's id") keeps a
/// chain of `full` stages without explicit threads in one conversation (engine.md 5.3 ⚠).
pub fn resolve_thread(
    wf: &Workflow,
    via: Option<usize>,
    node: usize,
    branch_start: bool,
    inherited: Option<&str>,
    previous: Option<usize>,
) -> String {
    let explicit = (!branch_start)
        .then(|| {
            via.and_then(|e| wf.edge_view(e).nonempty("thread_id"))
                .or_else(|| wf.node_view(node).nonempty("thread_id"))
        })
        .flatten();
    explicit
        .or_else(|| wf.graph_view().nonempty("default_thread"))
        .map(str::to_string)
        .or_else(|| wf.node(node).classes().into_iter().next())
        .or_else(|| {
            inherited
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(String::from)
        })
        .or_else(|| previous.map(|p| wf.node(p).id.to_string()))
        .unwrap_or_else(|| wf.node(node).id.to_string())
}

/// The key a `full` stage's conversation is kept under in the LLM backend: unique per run,
/// per loop-restart generation (a restart clears history, so conversations start over)
/// and per scope (`scope` names a parallel branch or a child workflow; branches never
/// share a conversation with each other or with the run).
pub fn conversation_key(run_id: &str, restarts: u32, scope: &str, thread: &str) -> String {
    format!("{run_id}/{restarts}/{scope}/{thread}")
}

/// What the walker resolved for the stage about to run.
#[derive(Debug, Clone, PartialEq)]
pub struct StagePlan {
    pub fidelity: Fidelity,
    pub thread: String,
    /// Under `full` only: the conversation to continue (see [`conversation_key`]).
    pub conversation: Option<String>,
    /// For LLM and manager stages: the preamble of the stage's fidelity. Under `full` it is
    /// the `summary:high` text, used only when the thread has no conversation yet (first
    /// stage of the thread, after a failed session, after a resume).
    pub preamble: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::engine::tests::workflow as wf;

    fn idx(w: &Workflow, id: &str) -> usize {
        w.node_index(id).unwrap_or(usize::MAX)
    }

    /// The edge `from -> to`.
    fn edge(w: &Workflow, from: &str, to: &str) -> Option<usize> {
        (0..w.graph.edges.len()).find(|&e| w.edge(e).from == from && w.edge(e).to == to)
    }

    #[test]
    fn fidelity_comes_from_edge_then_node_then_graph_then_compact() {
        let w = wf(r#"digraph f {
            default_fidelity="summary:low"
            start [shape=Mdiamond]; exit [shape=Msquare]
            a [fidelity="truncate"]; b; c [fidelity="summary:medium"]
            start -> a -> b
            b -> c [fidelity="full"]
            c -> exit
        }"#);
        let at =
            |from: &str, to: &str| resolve_fidelity(&w, edge(&w, from, to), idx(&w, to), false);
        assert_eq!(at("b", "c"), Fidelity::Full, "the edge wins over the node");
        assert_eq!(at("start", "a"), Fidelity::Truncate, "then the node");
        assert_eq!(at("a", "b"), Fidelity::SummaryLow, "then the graph default");
        // A jump (no edge) uses the node's own.
        assert_eq!(
            resolve_fidelity(&w, None, idx(&w, "c"), false),
            Fidelity::SummaryMedium
        );

        let plain = wf(
            r#"digraph f { start [shape=Mdiamond]; exit [shape=Msquare]; a
                          start -> a -> exit }"#,
        );
        let a = idx(&plain, "a");
        assert_eq!(
            resolve_fidelity(&plain, edge(&plain, "start", "a"), a, false),
            Fidelity::Compact
        );
    }

    #[test]
    fn an_unknown_fidelity_value_is_skipped() {
        // The validator refuses such a workflow; resolution still never trusts the value.
        let w = wf(r#"digraph f { default_fidelity="full"
            start [shape=Mdiamond]; exit [shape=Msquare]; a [fidelity="everything"]
            start -> a [fidelity="most"]; a -> exit }"#);
        let a = idx(&w, "a");
        assert_eq!(
            resolve_fidelity(&w, edge(&w, "start", "a"), a, false),
            Fidelity::Full
        );
    }

    #[test]
    fn a_branch_start_never_continues_a_conversation() {
        let w = wf(r#"digraph f { default_fidelity="full"
            start [shape=Mdiamond]; exit [shape=Msquare]
            fork [shape=component]; join [shape=tripleoctagon]
            a; b [fidelity="full"]; c [fidelity="truncate"]; d
            start -> fork
            fork -> a; fork -> b; fork -> c [fidelity="summary:low"]; fork -> d [fidelity="full"]
            a -> join; b -> join; c -> join; d -> join; join -> exit }"#);
        let first = |n: &str| resolve_fidelity(&w, edge(&w, "fork", n), idx(&w, n), true);
        assert_eq!(first("a"), Fidelity::SummaryHigh, "graph default full");
        assert_eq!(first("b"), Fidelity::SummaryHigh, "node full");
        assert_eq!(first("c"), Fidelity::SummaryLow, "the fork edge wins");
        assert_eq!(first("d"), Fidelity::SummaryHigh, "edge full");
        // Later stages of a branch resolve as usual.
        let a = idx(&w, "a");
        assert_eq!(
            resolve_fidelity(&w, edge(&w, "fork", "a"), a, false),
            Fidelity::Full
        );
    }

    #[test]
    fn thread_comes_from_edge_node_default_class_then_the_stage_before() {
        let w = wf(r#"digraph f {
            start [shape=Mdiamond]; exit [shape=Msquare]
            a [thread_id="node-thread"]; b; d
            subgraph cluster_r { label="Review Loop"; c }
            start -> a
            a -> b [thread_id="edge-thread"]
            b -> c; c -> d; d -> exit
        }"#);
        let t = |from: &str, to: &str, inherited: Option<&str>| {
            resolve_thread(
                &w,
                edge(&w, from, to),
                idx(&w, to),
                false,
                inherited,
                Some(idx(&w, from)),
            )
        };
        assert_eq!(t("a", "b", Some("x")), "edge-thread");
        assert_eq!(t("start", "a", Some("x")), "node-thread");
        assert_eq!(
            t("b", "c", Some("x")),
            "review-loop",
            "the node's first class"
        );
        assert_eq!(t("c", "d", Some("review-loop")), "review-loop", "inherited");
        assert_eq!(t("c", "d", None), "c", "else the previous node");
        let start = idx(&w, "start");
        assert_eq!(resolve_thread(&w, None, start, false, None, None), "start");

        let g = wf(r#"digraph f { default_thread="main"
            start [shape=Mdiamond]; exit [shape=Msquare]
            a [class="x"]; b [thread_id="own"]
            start -> a -> b -> exit }"#);
        let a = idx(&g, "a");
        assert_eq!(
            resolve_thread(&g, edge(&g, "start", "a"), a, false, Some("y"), None),
            "main"
        );
        let b = idx(&g, "b");
        assert_eq!(
            resolve_thread(&g, edge(&g, "a", "b"), b, false, Some("main"), None),
            "own"
        );
    }

    #[test]
    fn branch_thread_ids_are_inert_on_the_first_stage() {
        let w = wf(r#"digraph f {
            start [shape=Mdiamond]; exit [shape=Msquare]
            fork [shape=component]; join [shape=tripleoctagon]
            a [thread_id="mine"]
            start -> fork; fork -> a [thread_id="edge"]; a -> join; join -> exit }"#);
        let (e, a) = (edge(&w, "fork", "a"), idx(&w, "a"));
        let fork = Some(idx(&w, "fork"));
        assert_eq!(resolve_thread(&w, e, a, true, Some("run"), fork), "run");
        assert_eq!(resolve_thread(&w, e, a, false, Some("run"), fork), "edge");
    }

    #[test]
    fn conversation_keys_separate_runs_restarts_and_scopes() {
        let k = conversation_key("r1", 0, "", "main");
        assert_ne!(k, conversation_key("r2", 0, "", "main"));
        assert_ne!(k, conversation_key("r1", 1, "", "main"));
        assert_ne!(k, conversation_key("r1", 0, "fork#1:a", "main"));
        assert_ne!(k, conversation_key("r1", 0, "", "other"));
        assert_eq!(k, conversation_key("r1", 0, "", "main"));
    }
}
