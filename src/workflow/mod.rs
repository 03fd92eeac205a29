//! Typed workflow model: handler kinds, typed attribute access, conditions, the model
//! stylesheet, `@path` references and validation. Owns `grammar/condition.pest` and
//! `grammar/stylesheet.pest`.
//!
//! [`load`] is the front door: parse ([`crate::dot`]) -> transform (stylesheet, `@path`
//! inlining) -> index (handlers, adjacency, compiled conditions) -> validate ([`lint`]).
//! This module must not execute anything; it reads files only through a [`FileSource`].

pub mod acp;
pub mod attrs;
pub mod condition;
pub mod lint;
pub mod schema;
pub mod stylesheet;

use crate::dot::{self, Attrs, Edge, Graph, Node, ParseError, Value};
use attrs::{Scope, View};
use condition::{Condition, ConditionError};
use std::collections::HashMap;
use std::ops::Index;
use std::path::{Path, PathBuf};

pub use lint::{Diagnostic, Severity};

/// What runs a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HandlerKind {
    Start,
    Exit,
    Agent,
    Prompt,
    Command,
    Human,
    Conditional,
    Parallel,
    FanIn,
    Wait,
    ManagerLoop,
    /// Ours: push the run branch, open or update the run's pull request and wait for its
    /// checks (`type="pull_request"`; no shape maps to it).
    PullRequest,
}

impl HandlerKind {
    pub fn name(self) -> &'static str {
        match self {
            HandlerKind::Start => "start",
            HandlerKind::Exit => "exit",
            HandlerKind::Agent => "agent",
            HandlerKind::Prompt => "prompt",
            HandlerKind::Command => "command",
            HandlerKind::Human => "human",
            HandlerKind::Conditional => "conditional",
            HandlerKind::Parallel => "parallel",
            HandlerKind::FanIn => "parallel.fan_in",
            HandlerKind::Wait => "wait",
            HandlerKind::ManagerLoop => "stack.manager_loop",
            HandlerKind::PullRequest => "pull_request",
        }
    }

    /// Our handler names and the older aliases (decisions.md).
    pub fn from_type(t: &str) -> Option<HandlerKind> {
        Some(match t {
            "start" => HandlerKind::Start,
            "exit" => HandlerKind::Exit,
            "agent" | "codergen" | "agent_loop" => HandlerKind::Agent,
            "prompt" | "one_shot" => HandlerKind::Prompt,
            "command" | "tool" => HandlerKind::Command,
            "human" | "wait.human" => HandlerKind::Human,
            "conditional" => HandlerKind::Conditional,
            "parallel" => HandlerKind::Parallel,
            "parallel.fan_in" => HandlerKind::FanIn,
            "wait" => HandlerKind::Wait,
            "stack.manager_loop" => HandlerKind::ManagerLoop,
            "pull_request" => HandlerKind::PullRequest,
            _ => return None,
        })
    }

    /// SPEC shape mapping; any other shape is an agent.
    pub fn from_shape(shape: &str) -> HandlerKind {
        match shape {
            "Mdiamond" => HandlerKind::Start,
            "Msquare" => HandlerKind::Exit,
            "tab" => HandlerKind::Prompt,
            "parallelogram" => HandlerKind::Command,
            "hexagon" => HandlerKind::Human,
            "diamond" => HandlerKind::Conditional,
            "component" => HandlerKind::Parallel,
            "tripleoctagon" => HandlerKind::FanIn,
            "insulator" => HandlerKind::Wait,
            "house" => HandlerKind::ManagerLoop,
            _ => HandlerKind::Agent,
        }
    }

    pub fn is_llm(self) -> bool {
        matches!(self, HandlerKind::Agent | HandlerKind::Prompt)
    }
}

pub const START_IDS: &[&str] = &["start", "Start"];
pub const EXIT_IDS: &[&str] = &["exit", "Exit", "end", "End"];

/// Reads files referenced by a workflow (`@path` prompts, schemas, child workflows),
/// relative to the workflow file. The CLI reads the disk; the server reads a package.
pub trait FileSource {
    fn read(&self, rel: &str) -> Option<String>;
    /// A display path for messages.
    fn describe(&self, rel: &str) -> String {
        rel.to_string()
    }
}

/// Files relative to a directory on disk.
pub struct DirFiles(pub PathBuf);

impl DirFiles {
    pub fn for_file(path: &Path) -> Self {
        DirFiles(path.parent().map(Path::to_path_buf).unwrap_or_default())
    }
}

impl FileSource for DirFiles {
    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.0.join(expand_home(rel))).ok()
    }
    fn describe(&self, rel: &str) -> String {
        self.0.join(rel).display().to_string()
    }
}

fn expand_home(rel: &str) -> PathBuf {
    match (rel.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(rel),
    }
}

/// No files at all (inline sources).
pub struct NoFiles;

impl FileSource for NoFiles {
    fn read(&self, _rel: &str) -> Option<String> {
        None
    }
}

/// A validated-or-not workflow with everything the engine needs precomputed.
#[derive(Debug, Clone)]
pub struct Workflow {
    pub graph: Graph,
    /// Handler per node (index-aligned with `graph.nodes`); `None` for an unknown `type`.
    pub handlers: Vec<Option<HandlerKind>>,
    /// Outgoing edge indexes per node, in declaration order (`out_edges[node]` is a slice).
    pub out_edges: OutEdges,
    pub in_degree: Vec<usize>,
    /// Compiled condition per edge (`conditions[edge]` is `None` when the edge has none).
    pub conditions: Conditions,
    /// Target node index per edge (`u32::MAX` never happens for parsed graphs: edges
    /// create their nodes).
    edge_targets: Vec<u32>,
    pub start: Option<usize>,
    pub exit: Option<usize>,
    index: dot::IdIndex,
    /// `@path` references that could not be read: (node id or "" for the graph, key, path).
    pub unresolved: Vec<(String, String, String)>,
    pub stylesheet_error: Option<stylesheet::StylesheetError>,
    /// Nodes reachable from the start, worked out once for the lint rules that need it.
    reachable: std::sync::OnceLock<Vec<bool>>,
}

/// The result of loading: the model plus every diagnostic. Any error-severity diagnostic
/// means the workflow must be refused.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub workflow: Workflow,
    pub diagnostics: Vec<Diagnostic>,
}

impl Loaded {
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }
}

/// Parse, transform, index and validate.
pub fn load(src: &str, files: &dyn FileSource) -> Result<Loaded, ParseError> {
    let parsed = dot::parse_indexed(src)?;
    let workflow = Workflow::from_parsed(parsed, files);
    let diagnostics = lint::validate(&workflow, files);
    Ok(Loaded {
        workflow,
        diagnostics,
    })
}

/// [`load`] for a source the caller no longer needs: the text is freed as soon as it is
/// parsed, so it does not count toward peak memory while the model is built and validated.
pub fn load_owned(src: String, files: &dyn FileSource) -> Result<Loaded, ParseError> {
    let parsed = dot::parse_indexed(&src)?;
    drop(src);
    let workflow = Workflow::from_parsed(parsed, files);
    let diagnostics = lint::validate(&workflow, files);
    Ok(Loaded {
        workflow,
        diagnostics,
    })
}

/// [`load`] straight from a file, which is read in blocks and never held whole
/// ([`dot::parse_file`]). The outer error is the file's (cannot read it, not UTF-8).
pub fn load_file(
    path: &Path,
    files: &dyn FileSource,
) -> std::io::Result<Result<Loaded, ParseError>> {
    let parsed = match dot::parse_file_indexed(path)? {
        Ok(p) => p,
        Err(e) => return Ok(Err(e)),
    };
    let workflow = Workflow::from_parsed(parsed, files);
    let diagnostics = lint::validate(&workflow, files);
    Ok(Ok(Loaded {
        workflow,
        diagnostics,
    }))
}

impl Workflow {
    /// Applies the transforms and builds the indexes. Never fails: problems are recorded
    /// for the validator.
    pub fn from_graph(graph: Graph, files: &dyn FileSource) -> Workflow {
        let index = dot::IdIndex::build(&graph.nodes);
        let find = |id: &str| index.get(&graph.nodes, id).map_or(u32::MAX, |i| i as u32);
        let ends = graph
            .edges
            .iter()
            .map(|e| (find(&e.from), find(&e.to)))
            .collect();
        Workflow::from_parsed(dot::Parsed { graph, index, ends }, files)
    }

    /// [`Workflow::from_graph`] with the index and edge ends the parser worked out.
    fn from_parsed(parsed: dot::Parsed, files: &dyn FileSource) -> Workflow {
        let dot::Parsed {
            mut graph,
            index,
            ends,
        } = parsed;
        apply_aliases(&mut graph);
        let stylesheet_error = apply_stylesheet(&mut graph);
        let unresolved = inline_file_refs(&mut graph, files);
        let n = graph.nodes.len();
        let mut in_degree = vec![0; n];
        // An edge only counts (outgoing, incoming) when both of its ends exist.
        for &(from, to) in &ends {
            if from != u32::MAX && to != u32::MAX {
                in_degree[to as usize] += 1;
            }
        }
        let out_edges = OutEdges::build(n, &ends);
        let edge_targets = ends.iter().map(|&(_, to)| to).collect();
        drop(ends);
        let handlers = graph.nodes.iter().map(resolve_handler).collect::<Vec<_>>();
        let conditions = compile_conditions(&graph);
        let start = find_single(&graph, &handlers, HandlerKind::Start, START_IDS);
        let exit = find_single(&graph, &handlers, HandlerKind::Exit, EXIT_IDS);
        Workflow {
            graph,
            handlers,
            out_edges,
            in_degree,
            conditions,
            edge_targets,
            start,
            exit,
            index,
            unresolved,
            stylesheet_error,
            reachable: std::sync::OnceLock::new(),
        }
    }

    pub fn name(&self) -> &str {
        &self.graph.name
    }
    pub fn node_index(&self, id: &str) -> Option<usize> {
        self.index.get(&self.graph.nodes, id)
    }
    /// The target node of an edge.
    pub fn edge_target(&self, e: usize) -> Option<usize> {
        self.edge_targets
            .get(e)
            .filter(|&&t| t != u32::MAX)
            .map(|&t| t as usize)
    }
    pub fn node(&self, i: usize) -> &Node {
        &self.graph.nodes[i]
    }
    pub fn edge(&self, i: usize) -> &Edge {
        &self.graph.edges[i]
    }
    pub fn handler(&self, i: usize) -> Option<HandlerKind> {
        self.handlers[i]
    }
    pub fn graph_view(&self) -> View<'_> {
        View {
            scope: Scope::Graph,
            attrs: &self.graph.attrs,
        }
    }
    pub fn node_view(&self, i: usize) -> View<'_> {
        View {
            scope: Scope::Node,
            attrs: &self.graph.nodes[i].attrs,
        }
    }
    pub fn edge_view(&self, i: usize) -> View<'_> {
        View {
            scope: Scope::Edge,
            attrs: &self.graph.edges[i].attrs,
        }
    }
    /// Every node id whose handler kind matches (start/exit by shape, type or reserved id).
    pub fn nodes_of(&self, kind: HandlerKind) -> Vec<usize> {
        (0..self.graph.nodes.len())
            .filter(|&i| self.handlers[i] == Some(kind))
            .collect()
    }
    pub fn goal(&self) -> &str {
        self.graph.attrs.text("goal").unwrap_or("")
    }
    pub fn label(&self, i: usize) -> &str {
        let n = &self.graph.nodes[i];
        n.attrs
            .text("label")
            .filter(|l| !l.is_empty())
            .unwrap_or(&n.id)
    }
}

/// Outgoing edges of every node in one allocation (compressed rows): `out_edges[node]` is
/// the slice of that node's edge indexes in declaration order. One `Vec` per node cost an
/// allocation each (100,000 of them on a 100,000-node graph).
#[derive(Debug, Clone, Default)]
pub struct OutEdges {
    /// `edges[starts[i]..starts[i + 1]]` are node `i`'s edges.
    starts: Vec<u32>,
    edges: Vec<usize>,
}

impl OutEdges {
    /// `ends[e]` is edge `e`'s (source, target); an edge with an end that is `u32::MAX`
    /// (a node that does not exist) is left out.
    fn build(nodes: usize, ends: &[(u32, u32)]) -> OutEdges {
        let source = |&(from, to): &(u32, u32)| {
            (from != u32::MAX && to != u32::MAX).then_some(from as usize)
        };
        let mut starts = vec![0u32; nodes + 1];
        for s in ends.iter().filter_map(source) {
            starts[s + 1] += 1;
        }
        for i in 0..nodes {
            starts[i + 1] += starts[i];
        }
        let mut next = starts.clone();
        let mut edges = vec![0; starts[nodes] as usize];
        for (e, s) in ends
            .iter()
            .enumerate()
            .filter_map(|(e, x)| Some((e, source(x)?)))
        {
            edges[next[s] as usize] = e;
            next[s] += 1;
        }
        OutEdges { starts, edges }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Each node's outgoing edges, in node order.
    pub fn iter(&self) -> impl Iterator<Item = &[usize]> + '_ {
        (0..self.len()).map(move |i| &self[i])
    }
}

impl Index<usize> for OutEdges {
    type Output = [usize];
    fn index(&self, node: usize) -> &[usize] {
        &self.edges[self.starts[node] as usize..self.starts[node + 1] as usize]
    }
}

type Compiled = Option<Result<Condition, ConditionError>>;

/// The compiled condition of every edge. Identical texts (common in generated and
/// copy-pasted workflows) are compiled and stored once; each edge keeps a 4-byte slot.
#[derive(Debug, Clone, Default)]
pub struct Conditions {
    /// Per edge, a position in `compiled` (0 is "no condition").
    slots: Vec<u32>,
    compiled: Vec<Compiled>,
}

impl Conditions {
    pub fn len(&self) -> usize {
        self.slots.len()
    }
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
    /// Each edge's condition, in edge order.
    pub fn iter(&self) -> impl Iterator<Item = &Compiled> + '_ {
        self.slots.iter().map(|&s| &self.compiled[s as usize])
    }
}

impl Index<usize> for Conditions {
    type Output = Compiled;
    fn index(&self, edge: usize) -> &Compiled {
        &self.compiled[self.slots[edge] as usize]
    }
}

/// Compiles each distinct edge condition text once.
fn compile_conditions(graph: &Graph) -> Conditions {
    let mut seen: HashMap<&str, u32> = HashMap::new();
    let mut compiled = vec![None];
    let slots = graph
        .edges
        .iter()
        .map(|e| {
            let Some(text) = e.attrs.text("condition").filter(|c| !c.trim().is_empty()) else {
                return 0;
            };
            *seen.entry(text).or_insert_with(|| {
                compiled.push(Some(Condition::parse(text)));
                (compiled.len() - 1) as u32
            })
        })
        .collect();
    Conditions { slots, compiled }
}

/// `type` wins over the shape; the reserved ids make start and exit nodes without a shape.
fn resolve_handler(node: &Node) -> Option<HandlerKind> {
    if let Some(t) = node
        .attrs
        .text("type")
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        return HandlerKind::from_type(t);
    }
    match node.attrs.text("shape") {
        Some(shape) => {
            let by_shape = HandlerKind::from_shape(shape);
            // A reserved id with an unrelated default shape (box) still starts/ends the flow.
            if by_shape == HandlerKind::Agent {
                Some(reserved_kind(&node.id).unwrap_or(by_shape))
            } else {
                Some(by_shape)
            }
        }
        None => Some(reserved_kind(&node.id).unwrap_or(HandlerKind::Agent)),
    }
}

fn reserved_kind(id: &str) -> Option<HandlerKind> {
    if START_IDS.contains(&id) {
        Some(HandlerKind::Start)
    } else if EXIT_IDS.contains(&id) {
        Some(HandlerKind::Exit)
    } else {
        None
    }
}

fn find_single(
    graph: &Graph,
    handlers: &[Option<HandlerKind>],
    kind: HandlerKind,
    _ids: &[&str],
) -> Option<usize> {
    let mut found = (0..graph.nodes.len()).filter(|&i| handlers[i] == Some(kind));
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// Other engines' attribute names ([`attrs::ALIASES`]) give their value to ours when the
/// node does not set ours itself, so the engine only ever reads our names. The alias key is
/// kept, for the lint's warning. A value from `node [...]` defaults stays a default.
fn apply_aliases(graph: &mut Graph) {
    for &(scope, theirs, ours, _) in attrs::ALIASES {
        if scope == Scope::Graph && !graph.attrs.contains(ours) {
            if let Some(v) = graph.attrs.get(theirs).cloned() {
                graph.attrs.set(ours, v);
            }
        }
    }
    for node in &mut graph.nodes {
        if !node.attrs.iter().any(|(k, _)| is_alias_key(k)) {
            continue;
        }
        let manager = resolve_handler(node) == Some(HandlerKind::ManagerLoop);
        for &(scope, theirs, ours, _) in attrs::ALIASES {
            if scope != Scope::Node
                || attrs::alias_of(scope, theirs, manager) != Some(ours)
                || node.attrs.contains(ours)
            {
                continue;
            }
            if let Some(v) = node.attrs.get(theirs).cloned() {
                node.attrs.set(ours, v);
                if node.defaulted.iter().any(|d| d == theirs) {
                    node.defaulted.push(ours.to_string());
                }
            }
        }
    }
}

fn is_alias_key(key: &str) -> bool {
    attrs::ALIASES.iter().any(|(_, k, _, _)| *k == key)
}

/// The stylesheet fills `model`, `provider` and `reasoning_effort` where the node does not
/// set them itself; it beats values that only came from `node [...]` defaults.
fn apply_stylesheet(graph: &mut Graph) -> Option<stylesheet::StylesheetError> {
    let text = graph.attrs.text("model_stylesheet")?.to_string();
    let sheet = match stylesheet::Stylesheet::parse(&text) {
        Ok(s) => s,
        Err(e) => return Some(e),
    };
    for node in &mut graph.nodes {
        let shape = node.attrs.text("shape").unwrap_or("box").to_string();
        let mut props = sheet.resolve(&node.id, &shape, &node.classes());
        for (theirs, ours) in stylesheet::ALIASES {
            if let Some(v) = props.remove(*theirs) {
                props.entry(ours.to_string()).or_insert(v);
            }
        }
        for (k, v) in props {
            if !stylesheet::KNOWN_PROPERTIES.contains(&k.as_str()) {
                continue;
            }
            let explicit = node.attrs.contains(&k) && !node.defaulted.contains(&k);
            if !explicit {
                node.attrs.set(&k, Value::Str(v.into()));
                node.defaulted.retain(|d| d != &k);
            }
        }
    }
    None
}

/// Replaces `@path` values of the graph `goal` and node `prompt`s with the file contents.
/// `output_schema` references are checked here but resolved when the node runs.
fn inline_file_refs(graph: &mut Graph, files: &dyn FileSource) -> Vec<(String, String, String)> {
    let mut unresolved = Vec::new();
    if let Some(path) = file_ref(&graph.attrs, "goal") {
        match files.read(&path) {
            Some(text) => graph.attrs.set("goal", Value::Str(text.into())),
            None => unresolved.push((String::new(), "goal".into(), path)),
        }
    }
    for node in &mut graph.nodes {
        if let Some(path) = file_ref(&node.attrs, "prompt") {
            match files.read(&path) {
                Some(text) => node.attrs.set("prompt", Value::Str(text.into())),
                None => unresolved.push((node.id.to_string(), "prompt".into(), path)),
            }
        }
        if let Some(path) = file_ref(&node.attrs, "output_schema") {
            if files.read(&path).is_none() {
                unresolved.push((node.id.to_string(), "output_schema".into(), path));
            }
        }
        if let Some(path) = node.attrs.text("stack.child_workflow").map(str::trim) {
            if !path.is_empty() && files.read(path).is_none() {
                unresolved.push((
                    node.id.to_string(),
                    "stack.child_workflow".into(),
                    path.to_string(),
                ));
            }
        }
    }
    unresolved
}

/// The path of an `@path` value, if the attribute is one.
pub fn file_ref(attrs: &Attrs, key: &str) -> Option<String> {
    let text = attrs.text(key)?.trim();
    let path = text.strip_prefix('@')?.trim();
    (!path.is_empty() && !path.contains(char::is_whitespace)).then(|| path.to_string())
}
