//! Validation: every rule of decisions.md as a small named function returning diagnostics.
//! Any error means the workflow is refused; warnings are advice.
//! Must not: change the workflow it checks, or execute anything.

use super::attrs::{self, Scope};
use super::{file_ref, FileSource, HandlerKind, Workflow};
use crate::dot::Pos;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Severity {
    /// The workflow is refused.
    Error,
    /// Advice: the workflow runs.
    Warning,
}

/// One finding of validation, with where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Diagnostic {
    /// The rule's name (docs/decisions.md lists them), e.g. `start_node`.
    pub rule: &'static str,
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong and what to do, in words.
    pub message: String,
    /// The node it is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// `from -> to` for edge diagnostics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edge: Option<String>,
    /// 1-based line in the DOT text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// 1-based column in the DOT text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
}

impl Diagnostic {
    fn new(rule: &'static str, severity: Severity, message: String) -> Self {
        Diagnostic {
            rule,
            severity,
            message,
            node_id: None,
            edge: None,
            line: None,
            column: None,
        }
    }
    fn at(mut self, pos: Option<Pos>) -> Self {
        if let Some(p) = pos {
            self.line = Some(p.line);
            self.column = Some(p.col);
        }
        self
    }
    fn node(mut self, wf: &Workflow, i: usize) -> Self {
        let n = wf.node(i);
        self.node_id = Some(n.id.to_string());
        self.at(Some(n.pos))
    }
    fn edge(mut self, wf: &Workflow, i: usize) -> Self {
        let e = wf.edge(i);
        self.edge = Some(format!("{} -> {}", e.from, e.to));
        self.at(Some(e.pos))
    }
}

fn error(rule: &'static str, message: String) -> Diagnostic {
    Diagnostic::new(rule, Severity::Error, message)
}

fn warning(rule: &'static str, message: String) -> Diagnostic {
    Diagnostic::new(rule, Severity::Warning, message)
}

type Rule = fn(&Workflow, &dyn FileSource, &mut Vec<Diagnostic>);

/// Every rule, in the order diagnostics are reported.
pub const RULES: &[(&str, Rule)] = &[
    ("start_node", start_node),
    ("terminal_node", terminal_node),
    ("start_no_incoming", start_no_incoming),
    ("exit_no_outgoing", exit_no_outgoing),
    ("dead_end", dead_end),
    ("no_path_to_exit", no_path_to_exit),
    ("command_script", command_script),
    ("type_known", type_known),
    ("attribute_type", attribute_type),
    ("condition_syntax", condition_syntax),
    ("stylesheet_syntax", stylesheet_syntax),
    (
        "random_selection_no_conditions",
        random_selection_no_conditions,
    ),
    ("wait_duration", wait_duration),
    ("freeform_edge_count", freeform_edge_count),
    ("retry_target_exists", retry_target_exists),
    ("unresolved_file_ref", unresolved_file_ref),
    ("output_schema_valid", output_schema_valid),
    ("acp_output_schema", acp_output_schema),
    ("acp_command_or_config", acp_command_or_config),
    ("acp_config_valid", acp_config_valid),
    ("acp_without_backend", acp_without_backend),
    ("max_turns_ignored", max_turns_ignored),
    ("tool_hooks_ignored", tool_hooks_ignored),
    ("mcp_servers_list", mcp_servers_list),
    ("prompt_backend_api", prompt_backend_api),
    ("manager_child_workflow", manager_child_workflow),
    ("reachability", reachability),
    ("model_known", model_known),
    ("legacy_outcome_names", legacy_outcome_names),
    ("thread_id_requires_full", thread_id_requires_full),
    ("rankdir_valid", rankdir_valid),
    ("goal_gate_has_retry", goal_gate_has_retry),
    ("prompt_variables", prompt_variables),
    ("unknown_attribute", unknown_attribute),
    ("stylesheet_property", stylesheet_property),
    ("alias_attribute", alias_attribute),
    ("alias_context_key", alias_context_key),
];

pub fn validate(wf: &Workflow, files: &dyn FileSource) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (_, rule) in RULES {
        rule(wf, files, &mut out);
    }
    out
}

fn count_msg(kind: &str, shape: &str, ids: &str, found: &[usize], wf: &Workflow) -> String {
    let names: Vec<&str> = found.iter().map(|&i| wf.node(i).id.as_str()).collect();
    if found.is_empty() {
        format!(
            "the workflow needs exactly one {kind} node (shape={shape} or id {ids}); found none"
        )
    } else {
        format!(
            "the workflow needs exactly one {kind} node (shape={shape} or id {ids}); found {}: {}",
            found.len(),
            names.join(", ")
        )
    }
}

fn start_node(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    let found = wf.nodes_of(HandlerKind::Start);
    if found.len() != 1 {
        let d = error(
            "start_node",
            count_msg("start", "Mdiamond", "`start`", &found, wf),
        );
        out.push(match found.get(1) {
            Some(&i) => d.node(wf, i),
            None => d,
        });
    }
}

fn terminal_node(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    let found = wf.nodes_of(HandlerKind::Exit);
    if found.len() != 1 {
        let d = error(
            "terminal_node",
            count_msg("exit", "Msquare", "`exit` or `end`", &found, wf),
        );
        out.push(match found.get(1) {
            Some(&i) => d.node(wf, i),
            None => d,
        });
    }
}

fn start_no_incoming(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in wf.nodes_of(HandlerKind::Start) {
        if wf.in_degree[i] > 0 {
            let msg = format!(
                "start node `{}` must not have incoming edges",
                wf.node(i).id
            );
            out.push(error("start_no_incoming", msg).node(wf, i));
        }
    }
}

fn exit_no_outgoing(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in wf.nodes_of(HandlerKind::Exit) {
        if !wf.out_edges[i].is_empty() {
            let msg = format!("exit node `{}` must not have outgoing edges", wf.node(i).id);
            out.push(error("exit_no_outgoing", msg).node(wf, i));
        }
    }
}

/// Nodes inside parallel branches: reachable from a parallel node's fork edges without
/// passing through a fan-in. A branch may end at a node with no outgoing edges.
fn branch_nodes(wf: &Workflow) -> Vec<bool> {
    let mut inside = vec![false; wf.graph.nodes.len()];
    let mut queue = VecDeque::new();
    for p in wf.nodes_of(HandlerKind::Parallel) {
        for &e in &wf.out_edges[p] {
            if let Some(t) = wf.edge_target(e) {
                queue.push_back(t);
            }
        }
    }
    while let Some(i) = queue.pop_front() {
        if inside[i] || wf.handler(i) == Some(HandlerKind::FanIn) {
            continue;
        }
        inside[i] = true;
        for &e in &wf.out_edges[i] {
            if let Some(t) = wf.edge_target(e) {
                queue.push_back(t);
            }
        }
    }
    inside
}

/// A reachable non-exit node with no way out fails every run that gets there ("no route
/// from `<node>`"), but other engines accept such workflows, so it is a warning. Unreachable
/// nodes get the reachability warning alone, so an orphan with no edges is not also a dead
/// end; the last node of a parallel branch is not one either.
fn dead_end(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    let mut in_branch: Option<Vec<bool>> = None;
    for i in 0..wf.graph.nodes.len() {
        if !wf.out_edges[i].is_empty() || wf.handler(i) == Some(HandlerKind::Exit) {
            continue;
        }
        if wf.start.is_some() && !reachable_from_start(wf)[i] {
            continue;
        }
        let branches = in_branch.get_or_insert_with(|| branch_nodes(wf));
        if branches[i] {
            continue;
        }
        let id = &wf.node(i).id;
        let msg = format!(
            "node `{id}` has no outgoing edges: a run that reaches it fails with \"no route from `{id}`\" (add an edge to where it should go next)"
        );
        out.push(warning("dead_end", msg).node(wf, i));
    }
}

/// Nodes reachable from the start that lie on a cycle from which the exit cannot be
/// reached through any edge: a run that enters the cycle loops until a limit stops it.
/// Linear in nodes + edges: one forward search, one backward search from the exit, and
/// strongly connected components only among the nodes both searches leave suspect.
fn no_path_to_exit(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    let (Some(_), Some(exit)) = (wf.start, wf.exit) else {
        return; // start_node / terminal_node report it
    };
    let reachable = reachable_from_start(wf);
    let reaches_exit = reaching(wf, exit);
    if reachable.iter().zip(&reaches_exit).all(|(r, e)| !r || *e) {
        return;
    }
    let trapped: Vec<bool> = (0..wf.graph.nodes.len())
        .map(|i| reachable[i] && !reaches_exit[i])
        .collect();
    for comp in cycles_among(wf, &trapped) {
        let ids: Vec<&str> = comp.iter().map(|&i| wf.node(i).id.as_str()).collect();
        let shown = if ids.len() > 10 {
            format!("{} and {} more", ids[..10].join(", "), ids.len() - 10)
        } else {
            ids.join(", ")
        };
        let msg = format!(
            "nodes {shown} form a loop with no path to the exit `{}`: a run that gets there never finishes; add an edge out of the loop",
            wf.node(exit).id
        );
        out.push(error("no_path_to_exit", msg).node(wf, comp[0]));
    }
}

/// Nodes from which `target` can be reached, following edges backwards. The reverse
/// adjacency is built flat (offsets from `in_degree`, one array of sources, 4-byte
/// entries), so a large graph costs three allocations, not one per node; it runs last in
/// `svc validate`, when the whole model is in memory, so its size is peak memory.
fn reaching(wf: &Workflow, target: usize) -> Vec<bool> {
    let n = wf.graph.nodes.len();
    let mut start: Vec<u32> = Vec::with_capacity(n + 1);
    let mut total = 0u32;
    start.push(0);
    for &d in &wf.in_degree {
        total += d as u32;
        start.push(total);
    }
    let mut fill = start.clone();
    let mut sources = vec![0u32; total as usize];
    for (from, edges) in wf.out_edges.iter().enumerate() {
        for &e in edges {
            if let Some(t) = wf.edge_target(e) {
                sources[fill[t] as usize] = from as u32;
                fill[t] += 1;
            }
        }
    }
    drop(fill);
    let mut seen = vec![false; n];
    seen[target] = true;
    let mut stack = vec![target];
    while let Some(i) = stack.pop() {
        for &f in &sources[start[i] as usize..start[i + 1] as usize] {
            if !std::mem::replace(&mut seen[f as usize], true) {
                stack.push(f as usize);
            }
        }
    }
    seen
}

/// Strongly connected components of the subgraph of `inside` nodes that contain a cycle
/// (more than one node, or a self-loop), each sorted by declaration order, in order of their
/// first node. Iterative Tarjan, so deep graphs cannot overflow the stack.
fn cycles_among(wf: &Workflow, inside: &[bool]) -> Vec<Vec<usize>> {
    const NONE: usize = usize::MAX;
    let n = inside.len();
    let succ = |i: usize| {
        wf.out_edges[i]
            .iter()
            .filter_map(|&e| wf.edge_target(e))
            .filter(|&t| inside[t])
    };
    let (mut index, mut low) = (vec![NONE; n], vec![0; n]);
    let mut on_stack = vec![false; n];
    let (mut stack, mut comps, mut next) = (Vec::new(), Vec::new(), 0);
    for root in (0..n).filter(|&i| inside[i]) {
        if index[root] != NONE {
            continue;
        }
        // (node, position in its out_edges)
        let mut work = vec![(root, 0usize)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut pos)) = work.last_mut() {
            let edges = &wf.out_edges[v];
            if *pos < edges.len() {
                let e = edges[*pos];
                *pos += 1;
                let Some(w) = wf.edge_target(e).filter(|&w| inside[w]) else {
                    continue;
                };
                if index[w] == NONE {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut comp = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                let cyclic = comp.len() > 1 || succ(v).any(|t| t == v);
                if cyclic {
                    comp.sort_unstable();
                    comps.push(comp);
                }
            }
        }
    }
    comps.sort_by_key(|c| c[0]);
    comps
}

/// A command node runs its `script` (or another engine's `tool_command`); without one it
/// could only fail.
fn command_script(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in wf.nodes_of(HandlerKind::Command) {
        if wf.node_view(i).nonempty("script").is_none() {
            let msg = format!(
                "command node `{}` has no script: set script=\"...\" to the shell command it runs",
                wf.node(i).id
            );
            out.push(error("command_script", msg).node(wf, i));
        }
    }
}

fn type_known(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in 0..wf.graph.nodes.len() {
        if wf.handler(i).is_none() {
            let t = wf.node(i).attrs.text("type").unwrap_or("");
            let msg = format!(
                "node `{}` has unknown type `{t}`; known types: start, exit, agent, prompt, command, human, conditional, parallel, parallel.fan_in, wait, stack.manager_loop",
                wf.node(i).id
            );
            out.push(error("type_known", msg).node(wf, i));
        }
    }
}

fn attribute_type(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for e in attrs::type_errors(Scope::Graph, &wf.graph.attrs) {
        let pos = wf.graph.attr_pos(&e.key);
        out.push(error("attribute_type", format!("graph {e}")).at(pos));
    }
    for i in 0..wf.graph.nodes.len() {
        for e in attrs::type_errors(Scope::Node, &wf.node(i).attrs) {
            let msg = format!("node `{}`: {e}", wf.node(i).id);
            out.push(error("attribute_type", msg).node(wf, i));
        }
    }
    for i in 0..wf.graph.edges.len() {
        for e in attrs::type_errors(Scope::Edge, &wf.edge(i).attrs) {
            let ed = wf.edge(i);
            let msg = format!("edge `{} -> {}`: {e}", ed.from, ed.to);
            out.push(error("attribute_type", msg).edge(wf, i));
        }
    }
}

fn condition_syntax(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for (i, c) in wf.conditions.iter().enumerate() {
        if let Some(Err(e)) = c {
            let ed = wf.edge(i);
            let msg = format!(
                "edge `{} -> {}`: bad condition `{}`: {} (at offset {})",
                ed.from,
                ed.to,
                ed.attrs.text("condition").unwrap_or(""),
                e.message,
                e.offset
            );
            out.push(error("condition_syntax", msg).edge(wf, i));
        }
    }
    for i in 0..wf.graph.nodes.len() {
        if let Some(text) = wf.node_view(i).nonempty("manager.stop_condition") {
            if let Err(e) = super::condition::Condition::parse(text) {
                let msg = format!(
                    "node `{}`: bad manager.stop_condition `{text}`: {}",
                    wf.node(i).id,
                    e.message
                );
                out.push(error("condition_syntax", msg).node(wf, i));
            }
        }
    }
}

fn stylesheet_syntax(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    if let Some(e) = &wf.stylesheet_error {
        let pos = wf.graph.attr_pos("model_stylesheet");
        let msg = format!(
            "bad model_stylesheet: {} (at offset {})",
            e.message, e.offset
        );
        out.push(error("stylesheet_syntax", msg).at(pos));
    }
}

fn random_selection_no_conditions(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in 0..wf.graph.nodes.len() {
        if wf.node_view(i).text("selection") != Some("random") {
            continue;
        }
        if wf.out_edges[i].iter().any(|&e| wf.conditions[e].is_some()) {
            let msg = format!(
                "node `{}` uses selection=random, which cannot be combined with conditional edges",
                wf.node(i).id
            );
            out.push(error("random_selection_no_conditions", msg).node(wf, i));
        }
    }
}

fn wait_duration(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in wf.nodes_of(HandlerKind::Wait) {
        if wf.node_view(i).duration("duration").is_none() {
            let msg = format!(
                "wait node `{}` needs a `duration` like 30s, 5m or 1h",
                wf.node(i).id
            );
            out.push(error("wait_duration", msg).node(wf, i));
        }
    }
}

fn freeform_edge_count(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in wf.nodes_of(HandlerKind::Human) {
        let n = wf.out_edges[i]
            .iter()
            .filter(|&&e| wf.edge_view(e).flag("freeform"))
            .count();
        if n > 1 {
            let msg = format!(
                "human node `{}` has {n} freeform edges; at most one is allowed",
                wf.node(i).id
            );
            out.push(error("freeform_edge_count", msg).node(wf, i));
        }
    }
}

fn retry_target_exists(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for key in ["retry_target", "fallback_retry_target"] {
        if let Some(t) = wf.graph_view().nonempty(key) {
            if wf.node_index(t).is_none() {
                let msg = format!("graph {key} `{t}` names no node");
                out.push(error("retry_target_exists", msg).at(wf.graph.attr_pos(key)));
            }
        }
        for i in 0..wf.graph.nodes.len() {
            if let Some(t) = wf.node_view(i).nonempty(key) {
                if wf.node_index(t).is_none() {
                    let msg = format!("node `{}`: {key} `{t}` names no node", wf.node(i).id);
                    out.push(error("retry_target_exists", msg).node(wf, i));
                }
            }
        }
    }
}

fn unresolved_file_ref(wf: &Workflow, files: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for (node, key, path) in &wf.unresolved {
        let msg = format!(
            "{key} refers to `{path}`, which cannot be read ({})",
            files.describe(path)
        );
        let d = error("unresolved_file_ref", msg);
        out.push(match wf.node_index(node) {
            Some(i) => d.node(wf, i),
            None => d.at(wf.graph.attr_pos(key)),
        });
    }
}

fn output_schema_valid(wf: &Workflow, files: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in 0..wf.graph.nodes.len() {
        let Some(schema) = wf.node_view(i).nonempty("output_schema") else {
            continue;
        };
        let kind = wf.handler(i);
        if !matches!(
            kind,
            Some(HandlerKind::Agent | HandlerKind::Prompt | HandlerKind::Command)
        ) {
            let msg = format!(
                "node `{}`: output_schema is supported on agent, prompt and command nodes only",
                wf.node(i).id
            );
            out.push(error("output_schema_valid", msg).node(wf, i));
            continue;
        }
        if schema == "routing" {
            continue;
        }
        let text = match file_ref(&wf.node(i).attrs, "output_schema") {
            Some(path) => match files.read(&path) {
                Some(t) => t,
                None => continue, // reported by unresolved_file_ref
            },
            None => schema.to_string(),
        };
        if let Err(why) = compile_schema(&text) {
            let msg = format!(
                "node `{}`: output_schema is not a valid JSON Schema: {why}",
                wf.node(i).id
            );
            out.push(error("output_schema_valid", msg).node(wf, i));
        }
    }
}

/// Parses and compiles a JSON Schema document.
pub fn compile_schema(text: &str) -> Result<super::schema::Schema, String> {
    super::schema::compile_text(text)
}

fn acp_output_schema(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in 0..wf.graph.nodes.len() {
        let v = wf.node_view(i);
        if super::acp::is_acp(&v) && v.nonempty("output_schema").is_some() {
            let msg = format!(
                "node `{}`: backend=acp does not support output_schema (an ACP agent's reply cannot be checked or repaired); remove output_schema or use backend=api",
                wf.node(i).id
            );
            out.push(error("acp_output_schema", msg).node(wf, i));
        }
    }
}

fn acp_command_or_config(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in 0..wf.graph.nodes.len() {
        let v = wf.node_view(i);
        let (command, config) = (v.nonempty("acp.command"), v.nonempty("acp.config"));
        let msg = match (command, config) {
            (Some(_), Some(_)) => "set either acp.command or acp.config, not both",
            (None, None) if super::acp::is_acp(&v) && wf.handler(i) == Some(HandlerKind::Agent) => {
                "backend=acp needs acp.command or acp.config to say which agent to run"
            }
            _ => continue,
        };
        let msg = format!("node `{}`: {msg}", wf.node(i).id);
        out.push(error("acp_command_or_config", msg).node(wf, i));
    }
}

/// `acp.config` must name a readable ACP agent description (or be one, inline).
fn acp_config_valid(wf: &Workflow, files: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in 0..wf.graph.nodes.len() {
        let v = wf.node_view(i);
        if v.nonempty("acp.command").is_some() {
            continue; // both set: reported by acp_command_or_config
        }
        if let Some(cfg) = v.nonempty("acp.config") {
            if let Err(why) = super::acp::config(cfg, files) {
                let msg = format!("node `{}`: {why}", wf.node(i).id);
                out.push(error("acp_config_valid", msg).node(wf, i));
            }
        }
    }
}

/// `acp.*` on an agent that keeps the default API backend would be silently ignored.
fn acp_without_backend(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in wf.nodes_of(HandlerKind::Agent) {
        let v = wf.node_view(i);
        let set = ["acp.command", "acp.config"]
            .into_iter()
            .find(|k| v.nonempty(k).is_some());
        if let (Some(key), false) = (set, super::acp::is_acp(&v)) {
            let msg = format!(
                "node `{}`: {key} is ignored because backend is not acp; add backend=acp to run the ACP agent",
                wf.node(i).id
            );
            out.push(warning("acp_without_backend", msg).node(wf, i));
        }
    }
}

/// `max_turns` limits API agent sessions only; elsewhere it would be silently ignored.
fn max_turns_ignored(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in 0..wf.graph.nodes.len() {
        let v = wf.node_view(i);
        if v.attrs.get("max_turns").is_none() {
            continue;
        }
        let why = match wf.handler(i) {
            Some(HandlerKind::Agent) if super::acp::is_acp(&v) => {
                "an ACP agent keeps its own turn limit"
            }
            Some(HandlerKind::Agent) => continue,
            Some(HandlerKind::Prompt) => "a prompt node makes one model call",
            _ => "only agent nodes make model calls in turns",
        };
        let msg = format!(
            "node `{}`: max_turns is ignored because {why}",
            wf.node(i).id
        );
        out.push(warning("max_turns_ignored", msg).node(wf, i));
    }
}

/// `tool_hooks.*` on a node runs around the tool calls of an API agent session; anywhere
/// else it would be silently ignored (a graph-level hook applies to agent nodes only).
fn tool_hooks_ignored(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in 0..wf.graph.nodes.len() {
        let v = wf.node_view(i);
        let Some(key) = ["tool_hooks.pre", "tool_hooks.post"]
            .into_iter()
            .find(|k| v.nonempty(k).is_some())
        else {
            continue;
        };
        let why = match wf.handler(i) {
            Some(HandlerKind::Agent) if super::acp::is_acp(&v) => "an ACP agent runs its own tools",
            Some(HandlerKind::Agent) => continue,
            _ => "only agent nodes call tools",
        };
        let msg = format!("node `{}`: {key} is ignored because {why}", wf.node(i).id);
        out.push(warning("tool_hooks_ignored", msg).node(wf, i));
    }
}

/// `mcp_servers` on a node names server ids (checked against the run's servers when the
/// stage starts); on a node that runs no agent it would be silently ignored.
fn mcp_servers_list(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in 0..wf.graph.nodes.len() {
        let v = wf.node_view(i);
        let Some(text) = v.text("mcp_servers") else {
            continue;
        };
        let id = &wf.node(i).id;
        if let Err(word) = crate::mcp::spec::parse_server_list(text) {
            let msg = format!(
                "node `{id}`: mcp_servers names `{word}`, which is not an MCP server id \
                 (lowercase letters, digits and `-`); separate ids with commas"
            );
            out.push(error("mcp_servers_list", msg).node(wf, i));
            continue;
        }
        if wf.handler(i) != Some(HandlerKind::Agent) {
            let msg = format!(
                "node `{id}`: mcp_servers is ignored because only agent nodes use MCP servers"
            );
            out.push(warning("mcp_servers_list", msg).node(wf, i));
        }
    }
}

fn prompt_backend_api(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in wf.nodes_of(HandlerKind::Prompt) {
        if super::acp::is_acp(&wf.node_view(i)) {
            let msg = format!(
                "prompt node `{}` is API-only: backend=acp is for agent nodes",
                wf.node(i).id
            );
            out.push(error("prompt_backend_api", msg).node(wf, i));
        }
    }
}

fn manager_child_workflow(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in wf.nodes_of(HandlerKind::ManagerLoop) {
        let v = wf.node_view(i);
        if v.nonempty("stack.child_workflow").is_none()
            && v.nonempty("stack.child_dot_source").is_none()
        {
            let msg = format!(
                "manager loop node `{}` needs a child workflow: set stack.child_workflow or stack.child_dot_source",
                wf.node(i).id
            );
            out.push(error("manager_child_workflow", msg).node(wf, i));
        }
    }
}

/// Nodes reachable from the start node (all false when there is no single start), worked
/// out once per workflow.
fn reachable_from_start(wf: &Workflow) -> &[bool] {
    wf.reachable.get_or_init(|| search_from_start(wf))
}

fn search_from_start(wf: &Workflow) -> Vec<bool> {
    let mut seen = vec![false; wf.graph.nodes.len()];
    let Some(start) = wf.start else { return seen };
    let mut queue = VecDeque::from([start]);
    while let Some(i) = queue.pop_front() {
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        for &e in &wf.out_edges[i] {
            if let Some(t) = wf.edge_target(e) {
                queue.push_back(t);
            }
        }
    }
    seen
}

fn reachability(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    if wf.start.is_none() {
        return;
    }
    let seen = reachable_from_start(wf);
    for (i, reached) in seen.iter().enumerate() {
        if !reached {
            let msg = format!(
                "node `{}` cannot be reached from the start node",
                wf.node(i).id
            );
            out.push(warning("reachability", msg).node(wf, i));
        }
    }
}

fn model_known(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in 0..wf.graph.nodes.len() {
        if let Some(model) = wf.node_view(i).nonempty("model") {
            if crate::llm::catalog::lookup(model).is_none() {
                let msg = format!(
                    "node `{}`: model `{model}` is not in the model catalog",
                    wf.node(i).id
                );
                out.push(warning("model_known", msg).node(wf, i));
            }
        }
    }
}

fn legacy_outcome_names(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for (i, c) in wf.conditions.iter().enumerate() {
        let Some(Ok(c)) = c else { continue };
        for name in c.legacy_outcome_names() {
            let new = match name.as_str() {
                "success" => "succeeded",
                "fail" => "failed",
                _ => "partially_succeeded",
            };
            let msg = format!("outcome `{name}` is a legacy name: write `{new}`");
            out.push(warning("legacy_outcome_names", msg).edge(wf, i));
        }
    }
}

fn thread_id_requires_full(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    let default_full = wf.graph_view().text("default_fidelity") == Some("full");
    for i in 0..wf.graph.nodes.len() {
        let v = wf.node_view(i);
        let full = v.text("fidelity").map_or(default_full, |f| f == "full");
        if v.nonempty("thread_id").is_some() && !full {
            let msg = format!(
                "node `{}` sets thread_id, which has no effect without fidelity=\"full\"",
                wf.node(i).id
            );
            out.push(warning("thread_id_requires_full", msg).node(wf, i));
        }
    }
    if wf.graph_view().nonempty("default_thread").is_some() && !default_full {
        let msg = "default_thread has no effect without default_fidelity=\"full\"".to_string();
        out.push(warning("thread_id_requires_full", msg).at(wf.graph.attr_pos("default_thread")));
    }
}

fn rankdir_valid(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    if let Some(r) = wf.graph_view().text("rankdir") {
        if !["LR", "TB", "BT", "RL"].contains(&r) {
            let msg = format!("rankdir `{r}` should be one of LR, TB, BT, RL");
            out.push(warning("rankdir_valid", msg).at(wf.graph.attr_pos("rankdir")));
        }
    }
}

fn goal_gate_has_retry(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    let graph_target = ["retry_target", "fallback_retry_target"]
        .iter()
        .any(|k| wf.graph_view().nonempty(k).is_some());
    for i in 0..wf.graph.nodes.len() {
        let v = wf.node_view(i);
        if !v.flag("goal_gate") || graph_target {
            continue;
        }
        if v.nonempty("retry_target").is_none() && v.nonempty("fallback_retry_target").is_none() {
            let msg = format!(
                "goal gate `{}` has no retry target: if it is unsatisfied at the exit the run fails",
                wf.node(i).id
            );
            out.push(warning("goal_gate_has_retry", msg).node(wf, i));
        }
    }
}

/// Keys that mean nothing to svc (nor to Graphviz) are ignored at run time, so each is
/// reported once per scope, at its first use, with a did-you-mean.
fn unknown_attribute(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for (k, _) in wf.graph.attrs.iter() {
        if attrs::key_kind(Scope::Graph, k, false) == attrs::KeyKind::Unknown {
            let msg = unknown_msg("graph", k, Scope::Graph);
            out.push(warning("unknown_attribute", msg).at(wf.graph.attr_pos(k)));
        }
    }
    let mut kinds = KindCache::default();
    let mut reported: Vec<(Scope, &str)> = Vec::new();
    for i in 0..wf.graph.nodes.len() {
        let manager = wf.handler(i) == Some(HandlerKind::ManagerLoop);
        for (k, _) in wf.node(i).attrs.iter() {
            if kinds.get(Scope::Node, k, manager) != attrs::KeyKind::Unknown
                || reported.contains(&(Scope::Node, k))
            {
                continue;
            }
            reported.push((Scope::Node, k));
            let msg = unknown_msg(&format!("node `{}`", wf.node(i).id), k, Scope::Node);
            out.push(warning("unknown_attribute", msg).node(wf, i));
        }
    }
    for i in 0..wf.graph.edges.len() {
        for (k, _) in wf.edge(i).attrs.iter() {
            if kinds.get(Scope::Edge, k, false) != attrs::KeyKind::Unknown
                || reported.contains(&(Scope::Edge, k))
            {
                continue;
            }
            reported.push((Scope::Edge, k));
            let e = wf.edge(i);
            let msg = unknown_msg(&format!("edge `{} -> {}`", e.from, e.to), k, Scope::Edge);
            out.push(warning("unknown_attribute", msg).edge(wf, i));
        }
    }
}

/// What each attribute key is, remembered by the key's address: the parser shares one
/// static string for every common key, so a 100,000-node graph asks for a handful of
/// distinct addresses and each lookup is a short scan of integers, not a hash of text.
/// Keys the parser did not share (each its own string) are remembered by their text.
#[derive(Default)]
struct KindCache<'a> {
    by_address: Vec<(usize, usize, Scope, bool, attrs::KeyKind)>,
    by_text: HashMap<(&'a str, Scope, bool), attrs::KeyKind>,
}

impl<'a> KindCache<'a> {
    fn get(&mut self, scope: Scope, key: &'a str, manager: bool) -> attrs::KeyKind {
        let id = (key.as_ptr() as usize, key.len());
        let hit = self
            .by_address
            .iter()
            .find(|c| (c.0, c.1) == id && c.2 == scope && c.3 == manager);
        if let Some(c) = hit {
            return c.4;
        }
        if self.by_address.len() < 32 {
            let kind = attrs::key_kind(scope, key, manager);
            self.by_address.push((id.0, id.1, scope, manager, kind));
            return kind;
        }
        *self
            .by_text
            .entry((key, scope, manager))
            .or_insert_with(|| attrs::key_kind(scope, key, manager))
    }
}

fn unknown_msg(what: &str, key: &str, scope: Scope) -> String {
    let elsewhere = [Scope::Graph, Scope::Node, Scope::Edge]
        .into_iter()
        .find(|&s| s != scope && attrs::our_names(s).any(|k| k == key));
    let hint = match (elsewhere, did_you_mean(key, attrs::our_names(scope))) {
        (_, Some(s)) => format!("; did you mean `{s}`?"),
        (Some(s), None) => format!(" (`{key}` is {} attribute)", scope_name(s)),
        (None, None) => String::new(),
    };
    format!("{what}: unknown attribute `{key}` is ignored{hint}")
}

fn scope_name(scope: Scope) -> &'static str {
    match scope {
        Scope::Graph => "a graph",
        Scope::Node => "a node",
        Scope::Edge => "an edge",
    }
}

/// The closest of `names` to `word` (edit distance at most 2, and less than half the
/// word), first best in order.
pub fn did_you_mean<'a>(word: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let limit = 2.min(word.chars().count().saturating_sub(1) / 2).max(1);
    names
        .map(|n| (edit_distance(word, n), n))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

/// Damerau-Levenshtein distance with adjacent transpositions (optimal string alignment), so
/// `scirpt` is one edit from `script`.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        for j in 0..=b.len() {
            d[i * w + j] = if i == 0 || j == 0 {
                i + j
            } else {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut best = (d[(i - 1) * w + j] + 1)
                    .min(d[i * w + j - 1] + 1)
                    .min(d[(i - 1) * w + j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    best = best.min(d[(i - 2) * w + j - 2] + 1);
                }
                best
            };
        }
    }
    d[a.len() * w + b.len()]
}

/// Stylesheet properties svc does not apply are ignored: a warning with a did-you-mean;
/// another engine's names for ours are applied, with a warning naming ours.
fn stylesheet_property(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    let Some(text) = wf.graph.attrs.text("model_stylesheet") else {
        return;
    };
    let Ok(sheet) = super::stylesheet::Stylesheet::parse(text) else {
        return; // stylesheet_syntax reports it
    };
    let pos = wf.graph.attr_pos("model_stylesheet");
    let mut seen: Vec<&str> = Vec::new();
    for decl in sheet.unknown_declarations() {
        let p = decl.property.as_str();
        if seen.contains(&p) {
            continue;
        }
        seen.push(p);
        let alias = super::stylesheet::ALIASES.iter().find(|(t, _)| *t == p);
        let d = match alias {
            Some((_, ours)) => warning(
                "alias_attribute",
                format!("model_stylesheet property `{p}` is read as `{ours}`: write `{ours}`"),
            ),
            None => {
                let hint = did_you_mean(p, super::stylesheet::KNOWN_PROPERTIES.iter().copied())
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                let msg = format!(
                    "unknown model_stylesheet property `{p}` is ignored (known: {}){hint}",
                    super::stylesheet::KNOWN_PROPERTIES.join(", ")
                );
                warning("stylesheet_property", msg)
            }
        };
        out.push(d.at(pos));
    }
}

/// Another engine's attribute names are read as ours; the warning names ours so the file
/// can be moved to them.
fn alias_attribute(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for (k, _) in wf.graph.attrs.iter() {
        if let Some(ours) = attrs::alias_of(Scope::Graph, k, false) {
            let msg = alias_msg(
                "graph",
                k,
                ours,
                wf.graph.attrs.get(ours) != wf.graph.attrs.get(k),
            );
            out.push(warning("alias_attribute", msg).at(wf.graph.attr_pos(k)));
        }
    }
    for i in 0..wf.graph.nodes.len() {
        let node = wf.node(i);
        if !node
            .attrs
            .iter()
            .any(|(k, _)| attrs::ALIASES.iter().any(|(_, t, _, _)| *t == k))
        {
            continue;
        }
        let manager = wf.handler(i) == Some(HandlerKind::ManagerLoop);
        for (k, _) in node.attrs.iter() {
            let Some(ours) = attrs::alias_of(Scope::Node, k, manager) else {
                continue;
            };
            let both = node.attrs.get(ours) != node.attrs.get(k);
            let msg = alias_msg(&format!("node `{}`", node.id), k, ours, both);
            out.push(warning("alias_attribute", msg).node(wf, i));
        }
    }
}

fn alias_msg(what: &str, theirs: &str, ours: &str, both: bool) -> String {
    if both {
        format!("{what}: `{theirs}` is another engine's name for `{ours}`, which is also set and wins; remove `{theirs}`")
    } else {
        format!("{what}: `{theirs}` is read as `{ours}`: write `{ours}`")
    }
}

/// A condition reading another engine's context key (`context.tool.output`) reads ours
/// when theirs is not set; the warning names ours. Edge conditions and manager stop
/// conditions alike.
fn alias_context_key(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for (i, c) in wf.conditions.iter().enumerate() {
        if let Some(Ok(c)) = c {
            for msg in alias_key_msgs(c) {
                out.push(warning("alias_context_key", msg).edge(wf, i));
            }
        }
    }
    for i in wf.nodes_of(HandlerKind::ManagerLoop) {
        let text = wf.node_view(i).nonempty("manager.stop_condition");
        if let Some(Ok(c)) = text.map(super::condition::Condition::parse) {
            for msg in alias_key_msgs(&c) {
                let msg = format!("node `{}`: manager.stop_condition: {msg}", wf.node(i).id);
                out.push(warning("alias_context_key", msg).node(wf, i));
            }
        }
    }
}

fn alias_key_msgs(c: &super::condition::Condition) -> Vec<String> {
    let mut seen: Vec<&str> = Vec::new();
    let mut msgs = Vec::new();
    for (key, ours) in c.alias_keys() {
        if !seen.contains(&key) {
            seen.push(key);
            msgs.push(format!(
                "condition key `{key}` is another engine's name: svc reads it as `context.{ours}` when it is not set; write `context.{ours}`"
            ));
        }
    }
    msgs
}

/// Variables a prompt or script may use: `$goal`, `$context.<key>`, `$inputs.<key>`, also
/// inside `${...}`. Anything else that looks like a variable is probably a typo.
fn prompt_variables(wf: &Workflow, _: &dyn FileSource, out: &mut Vec<Diagnostic>) {
    for i in 0..wf.graph.nodes.len() {
        for key in ["prompt"] {
            let Some(text) = wf.node_view(i).text(key) else {
                continue;
            };
            for var in unknown_variables(text) {
                let msg = format!(
                    "node `{}`: unknown variable `${var}` in {key} is left as written",
                    wf.node(i).id
                );
                out.push(warning("prompt_variables", msg).node(wf, i));
            }
        }
    }
}

/// Variable names after `$` (or inside `${}`) that are not goal/context/inputs references.
/// Shell-looking names (all caps, digits, `$?`) are not variables of ours and are skipped.
pub fn unknown_variables(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'$' {
            i += 1;
            continue;
        }
        let braced = b.get(i + 1) == Some(&b'{');
        let start = if braced { i + 2 } else { i + 1 };
        let end = text[start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .map_or(text.len(), |n| start + n);
        let name = text[start..end].trim_end_matches('.');
        i = end.max(i + 1);
        let first_lower = name.starts_with(|c: char| c.is_ascii_lowercase());
        if !first_lower {
            continue;
        }
        let known = name == "goal"
            || name.strip_prefix("context.").is_some_and(|k| !k.is_empty())
            || name.strip_prefix("inputs.").is_some_and(|k| !k.is_empty());
        if !known && !found.iter().any(|f| f == name) {
            found.push(name.to_string());
        }
    }
    found
}

#[cfg(test)]
mod tests;
