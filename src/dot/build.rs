//! Drives the pest grammar one statement at a time and builds the flat [`Graph`].
//! Must not: know attribute types or handler semantics (that is `workflow`'s).

use pest::iterators::Pair;
use pest::Parser;

use super::error::{describe_failure, LineIndex, ParseError};
use super::grammar::{DotParser, Rule};
use super::value::unescape;
use super::IdIndex;
use super::{split_classes, Attrs, Edge, Graph, Node, Pos, Value};

/// Node and edge defaults in effect, plus the classes of the enclosing labelled subgraphs.
#[derive(Clone, Default)]
pub(super) struct Scope {
    node_defaults: Attrs,
    edge_defaults: Attrs,
    classes: Vec<String>,
    /// 0 at the top level, +1 per enclosing subgraph.
    depth: u32,
}

/// What lasts from one piece of the input to the next: the graph so far, its id index and
/// the line count.
#[derive(Default)]
pub(super) struct State {
    lines: LineCursor,
    pub(super) graph: Graph,
    index: IdIndex,
    /// Source and target node of every edge, as positions in `graph.nodes`.
    ends: Vec<(u32, u32)>,
    /// The node found by the last id lookup: chains (`a -> b`, then `b -> c`) ask for the
    /// same node twice in a row, and one compare is cheaper than a hash probe.
    last: Option<usize>,
}

/// A parsed graph with what the parser already knows about it, so that
/// [`crate::workflow`] does not look every edge's ends up again.
pub(crate) struct Parsed {
    pub(crate) graph: Graph,
    pub(crate) index: IdIndex,
    /// Per edge, its source and target positions in `graph.nodes`.
    pub(crate) ends: Vec<(u32, u32)>,
}

/// Builds statements of `src` (the whole text, or in [`super::stream`] the part in memory)
/// into `st`.
pub(super) struct Builder<'a, 's> {
    pub(super) src: &'a str,
    pub(super) st: &'s mut State,
}

/// Deepest subgraph nesting accepted (real workflows use two or three levels).
pub(crate) const MAX_DEPTH: usize = 100;

/// Parses a whole DOT file into a flat graph.
pub fn parse(src: &str) -> Result<Graph, ParseError> {
    parse_indexed(src).map(|p| p.graph)
}

/// [`parse`], keeping the node index and edge ends.
pub(crate) fn parse_indexed(src: &str) -> Result<Parsed, ParseError> {
    let mut st = State::default();
    let mut b = Builder { src, st: &mut st };
    let offset = b.parse_header()?;
    b.run(offset, &mut Scope::default())?;
    Ok(st.finish())
}

impl State {
    /// The graph, without the spare capacity its vectors grew.
    pub(super) fn finish(mut self) -> Parsed {
        self.graph.nodes.shrink_to_fit();
        self.graph.edges.shrink_to_fit();
        Parsed {
            graph: self.graph,
            index: self.index,
            ends: self.ends,
        }
    }

    /// The text before `offset` is about to be dropped from the buffer: positions count
    /// from the new start.
    pub(super) fn forget(&mut self, src: &str, offset: usize) {
        self.lines.forget(src, offset);
    }
}

impl Builder<'_, '_> {
    /// Every statement from `offset` to the closing brace, and the check that nothing follows.
    pub(super) fn run(&mut self, mut offset: usize, scope: &mut Scope) -> Result<(), ParseError> {
        let src = self.src;
        // Where the last statement's item started, to word an error after it.
        let mut prev_stmt: Option<usize> = None;
        loop {
            // Fast path: a run of plain statements in one pest call.
            let (after, last) = self.chunk(offset, scope, true)?;
            if after > offset {
                offset = after;
                prev_stmt = last;
                continue;
            }
            // A subgraph, the closing brace or an error: one statement the careful way.
            if let Some(e) = super::error::nesting_error(src, offset, MAX_DEPTH) {
                return Err(e);
            }
            let rest = &src[offset..];
            let mut pairs = DotParser::parse(Rule::item, rest).map_err(|e| {
                let prev = prev_stmt.and_then(|at| describe_stmt(src, at));
                describe_failure(src, &LineIndex::new(src), offset, &e, prev.as_ref())
            })?;
            let item = pairs.next().ok_or_else(|| self.internal(offset))?;
            let end = offset + item.as_span().end();
            let Some(inner) = item.into_inner().next() else {
                return Err(self.internal(offset));
            };
            if inner.as_rule() == Rule::close {
                return self.check_tail(end);
            }
            prev_stmt = Some(offset);
            self.statement(inner, offset, scope)?;
            offset = end;
        }
    }

    /// For text that may continue past `src`: builds the statement item at `offset` if it
    /// is a subgraph (or a plain statement) provably complete, which it is when another
    /// item parses after it. `None` when more text is needed (or on an error, which the
    /// caller leaves to the whole-text path).
    pub(super) fn complete_item(&mut self, offset: usize, scope: &mut Scope) -> Option<usize> {
        let src = self.src;
        if super::error::nesting_error(src, offset, MAX_DEPTH).is_some() {
            return None;
        }
        let item = DotParser::parse(Rule::item, &src[offset..]).ok()?.next()?;
        let end = offset + item.as_span().end();
        let inner = item.into_inner().next()?;
        if inner.as_rule() == Rule::close
            || end >= src.len()
            || super::error::nesting_error(src, end, MAX_DEPTH).is_some()
            || DotParser::parse(Rule::item, &src[end..]).is_err()
        {
            return None;
        }
        self.statement(inner, offset, scope).ok()?;
        Some(end)
    }
}

/// The rule and last node id of the statement whose item starts at `at` (for error
/// wording; only called on the error path, so it parses the statement again).
fn describe_stmt(src: &str, at: usize) -> Option<(Rule, String, usize)> {
    let item = DotParser::parse(Rule::item, &src[at..]).ok()?.next()?;
    let inner = item.into_inner().next()?;
    Some((inner.as_rule(), last_ident(&inner), at))
}

/// The last identifier of a statement, used to word error messages ("after node id `a`").
fn last_ident(p: &Pair<Rule>) -> String {
    p.clone()
        .into_inner()
        .filter(|x| x.as_rule() == Rule::node_id)
        .last()
        .map(|x| x.as_str().to_string())
        .unwrap_or_default()
}

/// Line and column of builder positions, counted forward from the previous position: the
/// builder asks in source order, so the whole file is scanned once and no table of line
/// starts is kept. Asking for an earlier offset starts again from the top (still correct).
#[derive(Default)]
struct LineCursor {
    /// Offset already counted up to, the 0-based line it is on, and where that line starts.
    offset: usize,
    line: u32,
    line_start: usize,
    /// Characters of the current line that were before `line_start` in dropped text.
    carry: usize,
    /// Characters from `line_start` to `offset`: a column is counted from the previous
    /// position, not from the line's start (an edge chain asks once per node id).
    col: usize,
}

impl LineCursor {
    fn pos(&mut self, src: &str, offset: usize) -> Pos {
        let offset = offset.min(src.len());
        if offset < self.offset {
            *self = LineCursor::default();
        }
        let bytes = src.as_bytes();
        let mut from = self.offset;
        let seen = &bytes[from..offset];
        if let Some(last) = memchr::memrchr(b'\n', seen) {
            self.line += 1 + memchr::memchr_iter(b'\n', &seen[..last]).count() as u32;
            self.line_start = from + last + 1;
            self.carry = 0;
            self.col = 0;
            from = self.line_start;
        }
        self.col += char_count(&bytes[from..offset]);
        self.offset = offset;
        Pos {
            line: self.line + 1,
            col: (self.carry + self.col) as u32 + 1,
        }
    }

    /// Counts up to `offset`, then makes `offset` the new start of the text.
    fn forget(&mut self, src: &str, offset: usize) {
        let before = self.pos(src, offset);
        self.carry = before.col as usize - 1;
        self.offset = 0;
        self.line_start = 0;
        self.col = 0;
    }
}

/// Characters in `bytes`, UTF-8 text cut at character boundaries: the bytes that do not
/// continue a character.
fn char_count(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| (b as i8) >= -0x40).count()
}

impl<'a> Builder<'a, '_> {
    fn pos(&mut self, base: usize, p: &Pair<Rule>) -> Pos {
        self.st.lines.pos(self.src, base + p.as_span().start())
    }

    /// Parses and builds a run of plain statements at `offset`; returns the offset after
    /// the last one (`offset` itself when none) and where that statement's item started.
    ///
    /// With `all` false (text that may continue past `src`) the last statement is left
    /// unbuilt: it may be cut short by the end of `src`. Every earlier one is final: another
    /// statement parsed after it, so nothing past `src` could have changed where it ends.
    pub(super) fn chunk(
        &mut self,
        offset: usize,
        scope: &mut Scope,
        all: bool,
    ) -> Result<(usize, Option<usize>), ParseError> {
        let Ok(mut pairs) = DotParser::parse(Rule::chunk, &self.src[offset..]) else {
            return Ok((offset, None));
        };
        let Some(chunk) = pairs.next() else {
            return Ok((offset, None));
        };
        let (mut at, mut last) = (offset, None);
        let pieces = chunk.into_inner();
        let take = if all {
            pieces.len()
        } else {
            pieces.len().saturating_sub(1)
        };
        for piece in pieces.take(take) {
            let end = offset + piece.as_span().end();
            let Some(stmt) = piece.into_inner().next() else {
                return Err(self.internal(at));
            };
            last = Some(at);
            self.statement(stmt, offset, scope)?;
            at = end;
        }
        Ok((at, last))
    }

    fn internal(&self, offset: usize) -> ParseError {
        ParseError::new(
            LineIndex::new(self.src).pos(self.src, offset),
            "internal parser error".into(),
            self.src,
            offset,
        )
    }

    pub(super) fn parse_header(&mut self) -> Result<usize, ParseError> {
        let mut pairs = DotParser::parse(Rule::header, self.src)
            .map_err(|_| super::error::header_error(self.src, &LineIndex::new(self.src)))?;
        let header = pairs.next().ok_or_else(|| self.internal(0))?;
        let end = header.as_span().end();
        for p in header.into_inner() {
            match p.as_rule() {
                Rule::ident => self.st.graph.name = p.as_str().to_string(),
                Rule::string => self.st.graph.name = string_value(p),
                _ => {}
            }
        }
        Ok(end)
    }

    fn check_tail(&self, end: usize) -> Result<(), ParseError> {
        if DotParser::parse(Rule::tail, &self.src[end..]).is_ok() {
            return Ok(());
        }
        Err(super::error::trailing_error(
            self.src,
            &LineIndex::new(self.src),
            end,
        ))
    }

    fn statement(
        &mut self,
        p: Pair<'a, Rule>,
        base: usize,
        scope: &mut Scope,
    ) -> Result<(), ParseError> {
        match p.as_rule() {
            Rule::attr_stmt => self.attr_stmt(p, base, scope),
            Rule::kv_stmt => {
                let at = self.pos(base, &p);
                let (k, v) = key_value(p);
                self.graph_attr(k.to_string(), v, at, scope);
            }
            Rule::node_stmt => self.node_stmt(p, base, scope)?,
            Rule::edge_stmt => self.edge_stmt(p, base, scope)?,
            Rule::node_or_edge => {
                // An edge chain has an `edge_op` right after its first id.
                let second = p.clone().into_inner().nth(1).map(|x| x.as_rule());
                if second == Some(Rule::edge_op) {
                    self.edge_stmt(p, base, scope)?
                } else {
                    self.node_stmt(p, base, scope)?
                }
            }
            Rule::subgraph => self.subgraph(p, base, scope)?,
            _ => return Err(self.internal(base + p.as_span().start())),
        }
        Ok(())
    }

    /// Graph attributes set at the top level go to the graph; inside a subgraph they belong
    /// to the subgraph (only its `label` matters, as a class) and never overwrite the graph's.
    fn graph_attr(&mut self, key: String, value: Value, at: Pos, scope: &Scope) {
        if scope.depth == 0 {
            self.st.graph.attrs.set(&key, value);
            self.st.graph.attr_pos.push((key, at));
        }
    }

    fn attr_stmt(&mut self, p: Pair<Rule>, base: usize, scope: &mut Scope) {
        let at = self.pos(base, &p);
        let mut inner = p.into_inner();
        let target = inner
            .next()
            .map(|t| t.as_str().to_string())
            .unwrap_or_default();
        let attrs = inner.next().map(attr_list).unwrap_or_default();
        match target.as_str() {
            "node" => scope.node_defaults.merge(&attrs),
            "edge" => scope.edge_defaults.merge(&attrs),
            _ => {
                for (k, v) in attrs.iter() {
                    self.graph_attr(k.to_string(), v.clone(), at, scope);
                }
            }
        }
    }

    /// Keywords cannot be node ids (as in Graphviz), so a printed graph reads back the same.
    fn check_id(&self, id: &Pair<Rule>, base: usize) -> Result<(), ParseError> {
        let text = id.as_str();
        if matches!(
            text,
            "node" | "edge" | "graph" | "digraph" | "subgraph" | "strict"
        ) {
            let offset = base + id.as_span().start();
            return Err(ParseError::new(
                LineIndex::new(self.src).pos(self.src, offset),
                format!("`{text}` is a keyword and cannot be used as a node id"),
                self.src,
                offset,
            ));
        }
        Ok(())
    }

    fn node_stmt(
        &mut self,
        p: Pair<'a, Rule>,
        base: usize,
        scope: &Scope,
    ) -> Result<(), ParseError> {
        let at = self.pos(base, &p);
        let mut inner = p.into_inner();
        let Some(id) = inner.next() else {
            return Ok(());
        };
        self.check_id(&id, base)?;
        let attrs = inner.next().map(attr_list).unwrap_or_default();
        // An explicit `class` must not drop the classes of enclosing subgraphs.
        let reclass = attrs.contains("class") && !scope.classes.is_empty();
        let i = self.touch_node(id.as_str(), at, scope);
        let node = &mut self.st.graph.nodes[i];
        if !node.defaulted.is_empty() {
            node.defaulted.retain(|k| !attrs.contains(k));
        }
        node.attrs.merge_from(attrs);
        if reclass {
            add_classes(&mut node.attrs, &scope.classes);
        }
        Ok(())
    }

    fn edge_stmt(
        &mut self,
        p: Pair<'a, Rule>,
        base: usize,
        scope: &Scope,
    ) -> Result<(), ParseError> {
        let mut ids: Vec<(&'a str, Pos)> = Vec::with_capacity(2);
        let mut attrs = Attrs::new();
        for x in p.into_inner() {
            match x.as_rule() {
                Rule::node_id => {
                    self.check_id(&x, base)?;
                    let at = self.pos(base, &x);
                    ids.push((x.as_str(), at));
                }
                Rule::attr_list => attrs = attr_list(x),
                _ => {}
            }
        }
        let mut at_node = Vec::with_capacity(ids.len());
        for &(id, at) in &ids {
            at_node.push(self.touch_node(id, at, scope) as u32);
        }
        let mut edge_attrs = scope.edge_defaults.clone();
        edge_attrs.merge_from(attrs);
        let last = ids.len().saturating_sub(2);
        for (k, pair) in ids.windows(2).enumerate() {
            // The last edge of the chain takes the attributes; the others get copies.
            let attrs = if k == last {
                std::mem::take(&mut edge_attrs)
            } else {
                edge_attrs.clone()
            };
            self.st.ends.push((at_node[k], at_node[k + 1]));
            let nodes = &self.st.graph.nodes;
            self.st.graph.edges.push(Edge {
                from: nodes[at_node[k] as usize].id.clone(),
                to: nodes[at_node[k + 1] as usize].id.clone(),
                attrs,
                pos: pair[0].1,
            });
        }
        Ok(())
    }

    /// Creates a node on first mention (with the defaults in scope) and adds the classes of
    /// the enclosing labelled subgraphs to it on every mention.
    fn touch_node(&mut self, id: &str, at: Pos, scope: &Scope) -> usize {
        let nodes = &self.st.graph.nodes;
        // The node just mentioned and the one declared after it come first: chains like
        // `a -> b -> c` name nodes in declaration order, and a hash lookup misses the
        // cache on large graphs.
        let near = |i: usize| nodes.get(i).is_some_and(|n| n.id == id).then_some(i);
        let found = match self.st.last {
            Some(l) => near(l)
                .or_else(|| near(l + 1))
                .or_else(|| self.st.index.get(nodes, id)),
            None => self.st.index.get(nodes, id),
        };
        let i = match found {
            Some(i) => i,
            None => {
                let i = self.st.graph.nodes.len();
                self.st.graph.nodes.push(Node {
                    id: id.into(),
                    attrs: scope.node_defaults.clone(),
                    pos: at,
                    defaulted: scope
                        .node_defaults
                        .iter()
                        .map(|(k, _)| k.to_string())
                        .collect(),
                });
                self.st.index.insert(&self.st.graph.nodes, i);
                i
            }
        };
        self.st.last = Some(i);
        if !scope.classes.is_empty() {
            add_classes(&mut self.st.graph.nodes[i].attrs, &scope.classes);
        }
        i
    }

    fn subgraph(
        &mut self,
        p: Pair<'a, Rule>,
        base: usize,
        outer: &Scope,
    ) -> Result<(), ParseError> {
        let body: Vec<Pair<'a, Rule>> = p
            .into_inner()
            .filter(|x| !matches!(x.as_rule(), Rule::kw_subgraph | Rule::ident))
            .collect();
        let mut scope = outer.clone();
        // Subgraph names carry no meaning; the first direct `label` becomes a class of
        // every node mentioned inside, wherever the label is written.
        if let Some(label) = body.iter().find_map(subgraph_label) {
            let class = class_from_label(&label);
            if !class.is_empty() && !scope.classes.contains(&class) {
                scope.classes.push(class);
            }
        }
        scope.depth = outer.depth + 1;
        for stmt in body {
            self.statement(stmt, base, &mut scope)?;
        }
        Ok(())
    }
}

fn subgraph_label(p: &Pair<Rule>) -> Option<String> {
    match p.as_rule() {
        Rule::kv_stmt => {
            let (k, v) = key_value(p.clone());
            (k == "label").then(|| v.to_text())
        }
        Rule::attr_stmt => {
            let mut inner = p.clone().into_inner();
            let target = inner.next()?;
            if target.as_str() != "graph" {
                return None;
            }
            attr_list(inner.next()?).get("label").map(Value::to_text)
        }
        _ => None,
    }
}

/// engine.md 1.4: lowercase, spaces to hyphens, drop anything but ASCII letters, digits, `-`.
pub fn class_from_label(label: &str) -> String {
    label
        .to_lowercase()
        .replace(' ', "-")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect()
}

fn add_classes(attrs: &mut Attrs, classes: &[String]) {
    let mut current = split_classes(attrs.text("class").unwrap_or(""));
    let before = current.len();
    for c in classes {
        if !current.contains(c) {
            current.push(c.clone());
        }
    }
    if current.len() != before {
        attrs.set("class", Value::Str(current.join(",").into()));
    }
}

fn attr_list(p: Pair<Rule>) -> Attrs {
    Attrs::from_pairs(p.into_inner().map(key_value))
}

fn key_value(p: Pair<'_, Rule>) -> (&str, Value) {
    let mut inner = p.into_inner();
    let key = inner.next().map_or("", |k| k.as_str());
    let value = inner.next().map(value_of).unwrap_or(Value::Str("".into()));
    (key, value)
}

fn string_value(p: Pair<Rule>) -> String {
    let body = p.into_inner().next().map(|b| b.as_str()).unwrap_or("");
    unescape(body)
}

fn value_of(p: Pair<Rule>) -> Value {
    let text = p.as_str();
    match p.as_rule() {
        Rule::string => Value::Str(string_value(p).into()),
        Rule::duration => Value::Duration(text.into()),
        Rule::float => text
            .parse()
            .map(Value::Float)
            .unwrap_or_else(|_| Value::Bare(text.into())),
        Rule::integer => text
            .trim_start_matches('+')
            .parse()
            .map(Value::Int)
            .unwrap_or_else(|_| Value::Bare(text.into())),
        Rule::boolean => Value::Bool(text == "true"),
        _ => Value::Bare(text.into()),
    }
}
