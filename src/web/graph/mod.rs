//! The workflow drawn as SVG: the layered layout of `layout` (no Graphviz, no external
//! service) written as SVG text, served by `GET /api/v1/runs/{id}/graph`.
//!
//! `rankdir=LR` lays layers left to right, anything else top to bottom. Edges never pass
//! through a node: long edges get lanes of their own through the layers they cross, and an
//! edge's label sits in its own slot beside its edge. Edges closing a cycle are dashed.
//!
//! Each node is `<g class="node h-<handler>" data-node="<id>">` with a `<title>` (its label)
//! and a `<desc>` (its prompt or script as written), so the page can colour nodes by state
//! and show what a stage was asked to do. Each edge is `<g class="edge" data-from data-to
//! [data-label] [data-condition]>`, so the page can mark the edges a run took (an
//! `edge.selected` event names them the same way).
//!
//! Owns: node sizes and shapes, and the SVG text. Must not touch: run state (the page
//! colours nodes and edges) or HTTP.

pub mod layout;

use crate::workflow::{HandlerKind, Workflow};
use std::collections::HashMap;
use std::fmt::Write;

pub use layout::{Layout, Piece, Placed};

const NODE_H: f64 = 40.0;
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

fn outline(h: Option<HandlerKind>) -> layout::Outline {
    match h {
        Some(HandlerKind::Conditional) => layout::Outline::Diamond,
        Some(HandlerKind::Human) => layout::Outline::Hexagon,
        Some(HandlerKind::Start | HandlerKind::Exit) => layout::Outline::Pill,
        _ => layout::Outline::Rect,
    }
}

/// An edge's label as drawn: its `label`, else its `condition`.
fn edge_label(wf: &Workflow, e: usize) -> Option<&str> {
    let attrs = &wf.graph.edges[e].attrs;
    attrs
        .text("label")
        .or_else(|| attrs.text("condition"))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// Lays the workflow out.
pub fn layout(wf: &Workflow, direction: Direction) -> Layout {
    let g = &wf.graph;
    let index: HashMap<&str, usize> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(i, nd)| (nd.id.as_str(), i))
        .collect();
    let nodes: Vec<layout::NodeSpec> = (0..g.nodes.len())
        .map(|i| layout::NodeSpec {
            w: node_width(&node_label(wf, i)),
            h: NODE_H,
            outline: outline(wf.handlers.get(i).copied().flatten()),
        })
        .collect();
    let edges: Vec<layout::EdgeSpec> = g
        .edges
        .iter()
        .enumerate()
        .map(|(e, edge)| layout::EdgeSpec {
            from: index.get(edge.from.as_str()).copied().unwrap_or(0),
            to: index.get(edge.to.as_str()).copied().unwrap_or(0),
            label_w: edge_label(wf, e)
                .map(|t| short_label(t).chars().count() as f64 * layout::LABEL_CHAR),
        })
        .collect();
    layout::layout(&nodes, &edges, wf.start, direction)
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

/// SVG path data of an edge's pieces.
fn path_data(pieces: &[Piece]) -> String {
    let mut d = String::with_capacity(pieces.len() * 48);
    let mut at: Option<layout::Point> = None;
    for p in pieces {
        if at != Some(p.start()) {
            let (x, y) = p.start();
            let _ = write!(d, "M{x:.1},{y:.1}");
        }
        match *p {
            Piece::Line(_, (x, y)) => {
                let _ = write!(d, " L{x:.1},{y:.1}");
            }
            Piece::Cubic(_, (ax, ay), (bx, by), (x, y)) => {
                let _ = write!(d, " C{ax:.1},{ay:.1} {bx:.1},{by:.1} {x:.1},{y:.1}");
            }
        }
        at = Some(p.end());
    }
    d
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
    s.push_str("<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0L10,5L0,10z\"/></marker><marker id=\"arrow-taken\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0L10,5L0,10z\"/></marker></defs><g class=\"edges\">");
    for (e, route) in l.edges.iter().enumerate() {
        let edge = &wf.graph.edges[e];
        let _ = write!(
            s,
            "<g class=\"edge{}\" data-from=\"{}\" data-to=\"{}\"",
            if route.back { " back" } else { "" },
            xml_escape(&edge.from),
            xml_escape(&edge.to)
        );
        for key in ["label", "condition"] {
            if let Some(v) = edge.attrs.text(key).filter(|v| !v.trim().is_empty()) {
                let _ = write!(s, " data-{key}=\"{}\"", xml_escape(v));
            }
        }
        let _ = write!(
            s,
            "><path d=\"{}\" marker-end=\"url(#arrow)\"/>",
            path_data(&route.pieces)
        );
        if let (Some(t), Some(at)) = (edge_label(wf, e), &route.label) {
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"{}\" dominant-baseline=\"{}\">{}</text>",
                at.x,
                at.y,
                at.anchor,
                at.baseline,
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
mod tests;

/// Reads our own SVG back as geometry (node boxes, edge paths, label boxes) and checks it:
/// the graph test's measuring tape, kept apart from the code it measures.
#[cfg(test)]
mod geometry {
    pub type Pt = (f64, f64);

    #[derive(Debug)]
    pub struct Edge {
        pub from: String,
        pub to: String,
        /// The path flattened to points (cubics sampled).
        pub points: Vec<Pt>,
        pub label: Option<(Pt, String, String)>,
    }

    #[derive(Debug, Default)]
    pub struct Drawn {
        /// id -> (x0, y0, x1, y1)
        pub nodes: Vec<(String, (f64, f64, f64, f64))>,
        pub edges: Vec<Edge>,
    }

    fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
        let key = format!(" {name}=\"");
        let at = tag.find(&key)? + key.len();
        let end = tag[at..].find('"')?;
        Some(&tag[at..at + end])
    }

    fn num(s: Option<&str>) -> f64 {
        s.and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
    }

    fn flatten(d: &str) -> Vec<Pt> {
        let mut nums = Vec::new();
        let mut ops = Vec::new();
        for tok in d.split([' ', ',']).filter(|t| !t.is_empty()) {
            let (op, rest) = match tok.chars().next() {
                Some(c @ ('M' | 'L' | 'C')) => (Some(c), &tok[1..]),
                _ => (None, tok),
            };
            if let Some(op) = op {
                ops.push((op, nums.len()));
            }
            if !rest.is_empty() {
                nums.push(rest.parse::<f64>().expect("a number in path data"));
            }
        }
        let mut pts: Vec<Pt> = Vec::new();
        for (k, &(op, at)) in ops.iter().enumerate() {
            let end = ops.get(k + 1).map_or(nums.len(), |o| o.1);
            let v = &nums[at..end];
            match op {
                'M' | 'L' => pts.push((v[0], v[1])),
                _ => {
                    let p0 = *pts.last().expect("a cubic after a point");
                    for i in 1..=24 {
                        let t = i as f64 / 24.0;
                        let s = 1.0 - t;
                        let k = [s * s * s, 3.0 * s * s * t, 3.0 * s * t * t, t * t * t];
                        pts.push((
                            k[0] * p0.0 + k[1] * v[0] + k[2] * v[2] + k[3] * v[4],
                            k[0] * p0.1 + k[1] * v[1] + k[2] * v[3] + k[3] * v[5],
                        ));
                    }
                }
            }
        }
        pts
    }

    pub fn parse(svg: &str) -> Drawn {
        let mut out = Drawn::default();
        for part in svg.split("<g class=\"").skip(1) {
            let tag = &part[..part.find('>').unwrap_or(part.len())];
            if part.starts_with("node ") {
                let id = attr(tag, "data-node").unwrap_or_default().to_string();
                let shape = &part[part
                    .find("<rect")
                    .or_else(|| part.find("<polygon"))
                    .expect("a shape")..];
                let bbox = if shape.starts_with("<rect") {
                    let (x, y) = (num(attr(shape, "x")), num(attr(shape, "y")));
                    (
                        x,
                        y,
                        x + num(attr(shape, "width")),
                        y + num(attr(shape, "height")),
                    )
                } else {
                    let pts: Vec<f64> = attr(shape, "points")
                        .unwrap_or_default()
                        .split([' ', ','])
                        .filter_map(|v| v.parse().ok())
                        .collect();
                    let xs = pts.iter().step_by(2);
                    let ys = pts.iter().skip(1).step_by(2);
                    (
                        xs.clone().copied().fold(f64::INFINITY, f64::min),
                        ys.clone().copied().fold(f64::INFINITY, f64::min),
                        xs.copied().fold(f64::NEG_INFINITY, f64::max),
                        ys.copied().fold(f64::NEG_INFINITY, f64::max),
                    )
                };
                out.nodes.push((id, bbox));
            } else if part.starts_with("edge\"") || part.starts_with("edge ") {
                let path = &part[part.find("<path").expect("a path")..];
                let label = part.find("<text").map(|at| {
                    let t = &part[at..];
                    let text = t
                        [t.find('>').unwrap_or(0) + 1..t.find("</text>").unwrap_or(t.len())]
                        .to_string();
                    (
                        (num(attr(t, "x")), num(attr(t, "y"))),
                        attr(t, "text-anchor").unwrap_or_default().to_string()
                            + "/"
                            + attr(t, "dominant-baseline").unwrap_or_default(),
                        text,
                    )
                });
                out.edges.push(Edge {
                    from: attr(tag, "data-from").unwrap_or_default().to_string(),
                    to: attr(tag, "data-to").unwrap_or_default().to_string(),
                    points: flatten(attr(path, "d").unwrap_or_default()),
                    label,
                });
            }
        }
        out
    }

    /// Whether segment p-q passes through the inside of box b (shrunk by half a pixel, so
    /// touching an edge of it is not crossing).
    fn crosses(p: Pt, q: Pt, b: (f64, f64, f64, f64)) -> bool {
        let (x0, y0, x1, y1) = (b.0 + 0.5, b.1 + 0.5, b.2 - 0.5, b.3 - 0.5);
        // Liang-Barsky clipping.
        let (dx, dy) = (q.0 - p.0, q.1 - p.1);
        let (mut t0, mut t1) = (0.0f64, 1.0f64);
        for (pk, qk) in [
            (-dx, p.0 - x0),
            (dx, x1 - p.0),
            (-dy, p.1 - y0),
            (dy, y1 - p.1),
        ] {
            if pk == 0.0 {
                if qk < 0.0 {
                    return false;
                }
            } else {
                let r = qk / pk;
                if pk < 0.0 {
                    t0 = t0.max(r);
                } else {
                    t1 = t1.min(r);
                }
            }
        }
        t0 < t1
    }

    /// A label's box from its anchor (the same estimate of text width as the layout).
    fn label_box(at: Pt, how: &str, text: &str) -> (f64, f64, f64, f64) {
        let plain = text
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&");
        let w = plain.chars().count() as f64 * super::layout::LABEL_CHAR;
        let h = super::layout::LABEL_FONT;
        match how {
            "start/central" => (at.0, at.1 - h / 2.0, at.0 + w, at.1 + h / 2.0),
            _ => (at.0 - w / 2.0, at.1 - h, at.0 + w / 2.0, at.1),
        }
    }

    fn distance_to_path(at: Pt, pts: &[Pt]) -> f64 {
        pts.windows(2)
            .map(|s| {
                let (p, q) = (s[0], s[1]);
                let (dx, dy) = (q.0 - p.0, q.1 - p.1);
                let len2 = dx * dx + dy * dy;
                let t = if len2 == 0.0 {
                    0.0
                } else {
                    (((at.0 - p.0) * dx + (at.1 - p.1) * dy) / len2).clamp(0.0, 1.0)
                };
                ((p.0 + t * dx - at.0).powi(2) + (p.1 + t * dy - at.1).powi(2)).sqrt()
            })
            .fold(f64::INFINITY, f64::min)
    }

    pub fn problems(d: &Drawn) -> Vec<String> {
        let mut out = Vec::new();
        let mut labels = Vec::new();
        for e in &d.edges {
            for (id, b) in &d.nodes {
                if *id == e.from || *id == e.to {
                    continue;
                }
                if e.points.windows(2).any(|s| crosses(s[0], s[1], *b)) {
                    out.push(format!("edge {} -> {} crosses node {id}", e.from, e.to));
                }
            }
            if let Some((at, how, text)) = &e.label {
                let b = label_box(*at, how, text);
                // On its own edge: the edge passes within a few pixels of the text's box.
                let near = distance_to_path(((b.0 + b.2) / 2.0, (b.1 + b.3) / 2.0), &e.points);
                let reach = (b.2 - b.0).max(b.3 - b.1) / 2.0 + 8.0;
                if near > reach {
                    out.push(format!(
                        "label `{text}` of {} -> {} is {near:.0} px from its edge",
                        e.from, e.to
                    ));
                }
                for (id, nb) in &d.nodes {
                    if b.0 < nb.2 && nb.0 < b.2 && b.1 < nb.3 && nb.1 < b.3 {
                        out.push(format!(
                            "label `{text}` of {} -> {} overlaps node {id}",
                            e.from, e.to
                        ));
                    }
                }
                labels.push((b, text.clone()));
            }
        }
        for (i, (a, ta)) in labels.iter().enumerate() {
            for (b, tb) in &labels[i + 1..] {
                if a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3 {
                    out.push(format!("labels `{ta}` and `{tb}` overlap"));
                }
            }
        }
        out
    }
}
