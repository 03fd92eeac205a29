//! The workflow drawn as SVG: a layered layout of the graph's nodes and edges, computed here
//! (no Graphviz, no external service) and served by `GET /api/v1/runs/{id}/graph`.
//!
//! Layout: edges that close a cycle (found by a depth-first walk from the start node) are
//! set aside; every other node's layer is its longest path from a source; nodes within a
//! layer are ordered by the mean position of their predecessors (two sweeps); layers are
//! centred. `rankdir=LR` lays layers left to right, anything else top to bottom. Back edges
//! are drawn as arcs beside the nodes.
//!
//! Each node is `<g class="node h-<handler>" data-node="<id>">` with a `<title>` (its label)
//! and a `<desc>` (its prompt or script as written), so the page can colour nodes by state
//! and show what a stage was asked to do.
//!
//! Owns: layout and SVG text. Must not touch: run state (the page colours nodes) or HTTP.

use crate::workflow::{HandlerKind, Workflow};
use std::collections::HashMap;
use std::fmt::Write;

const NODE_H: f64 = 40.0;
const GAP_LAYER: f64 = 56.0;
const GAP_NODE: f64 = 28.0;
const MARGIN: f64 = 24.0;
const MAX_LABEL: usize = 28;

/// Which way layers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    TopBottom,
    LeftRight,
}

impl Direction {
    /// `lr`/`LR`/`rl` → left to right; anything else top to bottom.
    pub fn parse(s: &str) -> Direction {
        if s.eq_ignore_ascii_case("lr") || s.eq_ignore_ascii_case("rl") {
            Direction::LeftRight
        } else {
            Direction::TopBottom
        }
    }
}

/// A placed node: centre and size.
#[derive(Debug, Clone, PartialEq)]
pub struct Placed {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
    pub layer: usize,
}

/// The layout of a graph: one box per node (index-aligned with `graph.nodes`), which edges
/// are back edges, and the canvas size.
#[derive(Debug, Clone)]
pub struct Layout {
    pub nodes: Vec<Placed>,
    /// `(from, to, is_back_edge)` per edge, index-aligned with `graph.edges`.
    pub edges: Vec<(usize, usize, bool)>,
    pub width: f64,
    pub height: f64,
    pub direction: Direction,
}

fn short_label(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() <= MAX_LABEL {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(MAX_LABEL - 1).collect::<String>())
    }
}

/// The text drawn in a node: its label, else its id.
pub fn node_label(wf: &Workflow, i: usize) -> String {
    let n = &wf.graph.nodes[i];
    match n.attrs.text("label").map(str::trim) {
        Some(l) if !l.is_empty() => l.to_string(),
        _ => n.id.to_string(),
    }
}

fn node_width(label: &str) -> f64 {
    (short_label(label).chars().count() as f64 * 7.5 + 28.0).clamp(72.0, 240.0)
}

/// Edges closing a cycle, by a depth-first walk from the start node then from every node
/// not yet seen (declaration order), iteratively so deep graphs cannot overflow the stack.
fn back_edges(n: usize, out: &[Vec<(usize, usize)>], start: Option<usize>) -> Vec<bool> {
    let m: usize = out.iter().map(Vec::len).sum();
    let mut back = vec![false; m];
    // 0 unseen, 1 on the stack, 2 done.
    let mut state = vec![0u8; n];
    let roots = start.into_iter().chain(0..n);
    for root in roots {
        if state[root] != 0 {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        state[root] = 1;
        while let Some(top) = stack.last_mut() {
            let (u, k) = *top;
            if k < out[u].len() {
                top.1 += 1;
                let (v, e) = out[u][k];
                match state[v] {
                    0 => {
                        state[v] = 1;
                        stack.push((v, 0));
                    }
                    1 => back[e] = true,
                    _ => {}
                }
            } else {
                state[u] = 2;
                stack.pop();
            }
        }
    }
    back
}

/// Lays the workflow out.
pub fn layout(wf: &Workflow, direction: Direction) -> Layout {
    let g = &wf.graph;
    let n = g.nodes.len();
    let index: HashMap<&str, usize> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(i, nd)| (nd.id.as_str(), i))
        .collect();
    let ends: Vec<(usize, usize)> = g
        .edges
        .iter()
        .map(|e| {
            (
                index.get(e.from.as_str()).copied().unwrap_or(0),
                index.get(e.to.as_str()).copied().unwrap_or(0),
            )
        })
        .collect();
    let mut out: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for (e, &(a, b)) in ends.iter().enumerate() {
        out[a].push((b, e));
    }
    let back = back_edges(n, &out, wf.start);

    // Longest path over forward edges (Kahn's order).
    let mut indeg = vec![0usize; n];
    for (e, &(_, b)) in ends.iter().enumerate() {
        if !back[e] {
            indeg[b] += 1;
        }
    }
    let mut layer = vec![0usize; n];
    let mut queue: Vec<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
    let mut head = 0;
    while head < queue.len() {
        let u = queue[head];
        head += 1;
        for &(v, e) in &out[u] {
            if back[e] {
                continue;
            }
            layer[v] = layer[v].max(layer[u] + 1);
            indeg[v] -= 1;
            if indeg[v] == 0 {
                queue.push(v);
            }
        }
    }
    let layers = layer.iter().copied().max().map_or(0, |m| m + 1);
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); layers];
    for i in 0..n {
        rows[layer[i]].push(i);
    }
    // Order each layer by the mean position of its forward predecessors (two sweeps).
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (e, &(a, b)) in ends.iter().enumerate() {
        if !back[e] && a != b {
            preds[b].push(a);
        }
    }
    let mut pos = vec![0f64; n];
    for _ in 0..2 {
        for row in rows.iter_mut() {
            let key = |i: &usize| {
                let p = &preds[*i];
                if p.is_empty() {
                    pos[*i]
                } else {
                    p.iter().map(|&q| pos[q]).sum::<f64>() / p.len() as f64
                }
            };
            let mut keyed: Vec<(f64, usize)> = row.iter().map(|i| (key(i), *i)).collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            *row = keyed.into_iter().map(|(_, i)| i).collect();
            for (k, &i) in row.iter().enumerate() {
                pos[i] = k as f64;
            }
        }
    }

    let widths: Vec<f64> = (0..n).map(|i| node_width(&node_label(wf, i))).collect();
    let mut nodes = vec![
        Placed {
            x: 0.0,
            y: 0.0,
            w: 0.0,
            h: NODE_H,
            layer: 0
        };
        n
    ];
    let (width, height);
    match direction {
        Direction::TopBottom => {
            let spans: Vec<f64> = rows
                .iter()
                .map(|r| {
                    r.iter().map(|&i| widths[i]).sum::<f64>()
                        + GAP_NODE * r.len().saturating_sub(1) as f64
                })
                .collect();
            let widest = spans.iter().copied().fold(0.0, f64::max);
            for (l, row) in rows.iter().enumerate() {
                let mut x = MARGIN + (widest - spans[l]) / 2.0;
                let y = MARGIN + l as f64 * (NODE_H + GAP_LAYER) + NODE_H / 2.0;
                for &i in row {
                    nodes[i] = Placed {
                        x: x + widths[i] / 2.0,
                        y,
                        w: widths[i],
                        h: NODE_H,
                        layer: l,
                    };
                    x += widths[i] + GAP_NODE;
                }
            }
            width = widest + 2.0 * MARGIN + 80.0;
            height = layers as f64 * (NODE_H + GAP_LAYER) - GAP_LAYER + 2.0 * MARGIN;
        }
        Direction::LeftRight => {
            let col_w: Vec<f64> = rows
                .iter()
                .map(|r| r.iter().map(|&i| widths[i]).fold(0.0, f64::max))
                .collect();
            let tallest = rows.iter().map(Vec::len).max().unwrap_or(0) as f64;
            let span_h = tallest * NODE_H + (tallest - 1.0).max(0.0) * GAP_NODE;
            let mut x = MARGIN;
            for (l, row) in rows.iter().enumerate() {
                let own = row.len() as f64 * NODE_H + (row.len() as f64 - 1.0).max(0.0) * GAP_NODE;
                let mut y = MARGIN + (span_h - own) / 2.0 + NODE_H / 2.0;
                for &i in row {
                    nodes[i] = Placed {
                        x: x + col_w[l] / 2.0,
                        y,
                        w: widths[i],
                        h: NODE_H,
                        layer: l,
                    };
                    y += NODE_H + GAP_NODE;
                }
                x += col_w[l] + GAP_LAYER;
            }
            width = x - GAP_LAYER + MARGIN;
            height = span_h + 2.0 * MARGIN + 80.0;
        }
    }
    Layout {
        nodes,
        edges: ends
            .iter()
            .zip(&back)
            .map(|(&(a, b), &bk)| (a, b, bk))
            .collect(),
        width: width.max(2.0 * MARGIN),
        height: height.max(2.0 * MARGIN),
        direction,
    }
}

/// Text escaped for SVG/XML content and attribute values.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters other than tab/newline are not allowed in XML 1.0.
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' && c != '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

fn handler_class(h: Option<HandlerKind>) -> &'static str {
    match h {
        Some(k) => k.name(),
        None => "unknown",
    }
}

fn edge_path(l: &Layout, a: usize, b: usize, back: bool) -> (String, f64, f64) {
    let (p, q) = (&l.nodes[a], &l.nodes[b]);
    if a == b || back {
        // An arc beside both nodes (right in TB, below in LR).
        return match l.direction {
            Direction::TopBottom => {
                let (x1, y1) = (p.x + p.w / 2.0, p.y);
                let (x2, y2) = (q.x + q.w / 2.0, q.y);
                let bulge = x1.max(x2) + 40.0 + (p.layer.abs_diff(q.layer) as f64) * 6.0;
                (
                    format!(
                        "M{x1:.1},{y1:.1} C{bulge:.1},{y1:.1} {bulge:.1},{y2:.1} {x2:.1},{y2:.1}"
                    ),
                    bulge - 8.0,
                    (y1 + y2) / 2.0,
                )
            }
            Direction::LeftRight => {
                let (x1, y1) = (p.x, p.y + p.h / 2.0);
                let (x2, y2) = (q.x, q.y + q.h / 2.0);
                let bulge = y1.max(y2) + 40.0 + (p.layer.abs_diff(q.layer) as f64) * 6.0;
                (
                    format!(
                        "M{x1:.1},{y1:.1} C{x1:.1},{bulge:.1} {x2:.1},{bulge:.1} {x2:.1},{y2:.1}"
                    ),
                    (x1 + x2) / 2.0,
                    bulge - 8.0,
                )
            }
        };
    }
    match l.direction {
        Direction::TopBottom => {
            let (x1, y1) = (p.x, p.y + p.h / 2.0);
            let (x2, y2) = (q.x, q.y - q.h / 2.0);
            let my = (y1 + y2) / 2.0;
            (
                format!("M{x1:.1},{y1:.1} C{x1:.1},{my:.1} {x2:.1},{my:.1} {x2:.1},{y2:.1}"),
                (x1 + x2) / 2.0,
                my,
            )
        }
        Direction::LeftRight => {
            let (x1, y1) = (p.x + p.w / 2.0, p.y);
            let (x2, y2) = (q.x - q.w / 2.0, q.y);
            let mx = (x1 + x2) / 2.0;
            (
                format!("M{x1:.1},{y1:.1} C{mx:.1},{y1:.1} {mx:.1},{y2:.1} {x2:.1},{y2:.1}"),
                mx,
                (y1 + y2) / 2.0,
            )
        }
    }
}

fn node_shape(p: &Placed, h: Option<HandlerKind>) -> String {
    let (l, r, t, b) = (
        p.x - p.w / 2.0,
        p.x + p.w / 2.0,
        p.y - p.h / 2.0,
        p.y + p.h / 2.0,
    );
    match h {
        Some(HandlerKind::Conditional) => format!(
            "<polygon points=\"{:.1},{t:.1} {r:.1},{:.1} {:.1},{b:.1} {l:.1},{:.1}\"/>",
            p.x, p.y, p.x, p.y
        ),
        Some(HandlerKind::Human) => format!(
            "<polygon points=\"{:.1},{t:.1} {:.1},{t:.1} {r:.1},{:.1} {:.1},{b:.1} {:.1},{b:.1} {l:.1},{:.1}\"/>",
            l + 12.0, r - 12.0, p.y, r - 12.0, l + 12.0, p.y
        ),
        Some(HandlerKind::Start | HandlerKind::Exit) => format!(
            "<rect x=\"{l:.1}\" y=\"{t:.1}\" width=\"{:.1}\" height=\"{:.1}\" rx=\"{:.1}\"/>",
            p.w, p.h, p.h / 2.0
        ),
        _ => format!(
            "<rect x=\"{l:.1}\" y=\"{t:.1}\" width=\"{:.1}\" height=\"{:.1}\" rx=\"6\"/>",
            p.w, p.h
        ),
    }
}

/// What a node was asked to do, as written: its prompt (agent, prompt), script (command)
/// or question label (human).
fn node_detail(wf: &Workflow, i: usize) -> Option<String> {
    let a = &wf.graph.nodes[i].attrs;
    a.text("prompt")
        .or_else(|| a.text("script"))
        .map(str::to_string)
}

/// The whole SVG document for `wf`.
pub fn svg(wf: &Workflow, direction: Direction) -> String {
    let l = layout(wf, direction);
    let mut s = String::with_capacity(512 + wf.graph.nodes.len() * 400);
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"graph\" viewBox=\"0 0 {w:.0} {h:.0}\" width=\"{w:.0}\" height=\"{h:.0}\" role=\"img\" aria-label=\"Workflow {}\">",
        xml_escape(wf.name()),
        w = l.width,
        h = l.height
    );
    s.push_str("<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0L10,5L0,10z\"/></marker></defs><g class=\"edges\">");
    for (e, &(a, b, back)) in l.edges.iter().enumerate() {
        let edge = &wf.graph.edges[e];
        let (d, lx, ly) = edge_path(&l, a, b, back);
        let _ = write!(
            s,
            "<g class=\"edge{}\" data-from=\"{}\" data-to=\"{}\"><path d=\"{d}\" marker-end=\"url(#arrow)\"/>",
            if back { " back" } else { "" },
            xml_escape(&edge.from),
            xml_escape(&edge.to)
        );
        let label = edge
            .attrs
            .text("label")
            .or_else(|| edge.attrs.text("condition"))
            .map(str::trim)
            .filter(|t| !t.is_empty());
        if let Some(t) = label {
            let _ = write!(
                s,
                "<text x=\"{lx:.1}\" y=\"{ly:.1}\" text-anchor=\"middle\">{}</text>",
                xml_escape(&short_label(t))
            );
        }
        s.push_str("</g>");
    }
    s.push_str("</g><g class=\"nodes\">");
    for (i, p) in l.nodes.iter().enumerate() {
        let node = &wf.graph.nodes[i];
        let h = wf.handlers.get(i).copied().flatten();
        let label = node_label(wf, i);
        let _ = write!(
            s,
            "<g class=\"node h-{}\" data-node=\"{}\" tabindex=\"0\" role=\"button\" aria-label=\"{}\"><title>{}</title>",
            handler_class(h),
            xml_escape(&node.id),
            xml_escape(&format!("{label}: pending")),
            xml_escape(&label)
        );
        if let Some(d) = node_detail(wf, i) {
            let _ = write!(s, "<desc>{}</desc>", xml_escape(&d));
        }
        s.push_str(&node_shape(p, h));
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" dominant-baseline=\"central\">{}</text></g>",
            p.x,
            p.y,
            xml_escape(&short_label(&label))
        );
    }
    s.push_str("</g></svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::{load, NoFiles};

    fn wf(src: &str) -> Workflow {
        load(src, &NoFiles).unwrap().workflow
    }

    const GATE: &str = "digraph g { start [shape=Mdiamond]; build [shape=parallelogram, script=\"make\"]; review [shape=hexagon]; exit [shape=Msquare]; start -> build -> review; review -> exit [label=\"[Y] Yes\"]; review -> build [label=\"[N] No\"] }";

    #[test]
    fn layers_follow_the_flow_and_loops_are_back_edges() {
        let w = wf(GATE);
        let l = layout(&w, Direction::TopBottom);
        let layer =
            |id: &str| l.nodes[w.graph.nodes.iter().position(|n| n.id == id).unwrap()].layer;
        assert_eq!(
            [
                layer("start"),
                layer("build"),
                layer("review"),
                layer("exit")
            ],
            [0, 1, 2, 3]
        );
        let backs: Vec<_> = l.edges.iter().filter(|e| e.2).collect();
        assert_eq!(backs.len(), 1, "only review -> build closes a cycle");
        // Nodes of one layer never overlap.
        for a in &l.nodes {
            for b in &l.nodes {
                if !std::ptr::eq(a, b) && a.layer == b.layer {
                    assert!((a.x - b.x).abs() >= (a.w + b.w) / 2.0);
                }
            }
            assert!(a.x - a.w / 2.0 >= 0.0 && a.x + a.w / 2.0 <= l.width);
            assert!(a.y + a.h / 2.0 <= l.height);
        }
    }

    #[test]
    fn left_right_puts_layers_in_columns() {
        let w = wf(GATE);
        let l = layout(&w, Direction::LeftRight);
        let xs: Vec<f64> = l.nodes.iter().map(|p| p.x).collect();
        assert!(xs[0] < xs[1] && xs[1] < xs[2] && xs[2] < xs[3], "{xs:?}");
    }

    #[test]
    fn svg_names_nodes_escapes_text_and_carries_scripts() {
        let w = wf("digraph x { start [shape=Mdiamond]; a [label=\"<b>&\", prompt=\"Do \\\"it\\\"\"]; exit [shape=Msquare]; start -> a -> exit [label=\"ok\"] }");
        let s = svg(&w, Direction::TopBottom);
        assert!(s.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(s.contains("data-node=\"a\""));
        assert!(s.contains("class=\"node h-agent\""));
        assert!(s.contains("<title>&lt;b&gt;&amp;</title>"));
        assert!(s.contains("<desc>Do &quot;it&quot;</desc>"));
        assert!(s.contains(">ok</text>"));
        assert!(!s.contains("<b>"));
    }

    #[test]
    fn deep_chains_lay_out_without_recursion() {
        let mut src =
            String::from("digraph d { start [shape=Mdiamond]; exit [shape=Msquare]; start");
        for i in 0..5000 {
            src.push_str(&format!(" -> n{i}"));
        }
        src.push_str(" -> exit }");
        let l = layout(&wf(&src), Direction::TopBottom);
        assert_eq!(l.nodes.iter().map(|p| p.layer).max(), Some(5001));
    }
}
