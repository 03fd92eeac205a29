//! The layered layout of a workflow graph, with edges routed so that they never pass through a
//! node.
//!
//! Steps (the classic Sugiyama scheme):
//! 1. Edges that close a cycle (a depth-first walk from the start node) are laid out
//!    reversed, so the graph to place is acyclic. Self-loops are drawn beside their node.
//! 2. Layers: each node's longest path from a source, an edge with a label counting 2.
//! 3. An edge spanning several layers gets one placeholder per layer it crosses (its own lane
//!    through that layer); a labelled edge's label is one of them, so the label has a slot of
//!    its own, on its edge, that nothing else is drawn in.
//! 4. Order within each layer: barycentre sweeps down and up, keeping the order with the
//!    fewest crossings (counted exactly, in O(E log V) per pair of layers).
//! 5. Positions across the layers: every layer is packed with its minimum gaps, then moved
//!    towards its neighbours' positions by weighted isotonic regression (pool adjacent
//!    violators), down and up a few times, so long edges run straight.
//! 6. Routing: within a gap between two layers an edge is a cubic whose control points lie in
//!    that gap, so it stays in it; within a layer it is a straight line in its own lane. No
//!    node lies in a gap or in another item's lane, so no edge crosses a node. Several edges
//!    at one side of a node get separate ports, ordered like their other ends.
//!
//! The layout is computed in (across, along) coordinates (along = the direction layers run)
//! and turned into x/y at the end: top to bottom, along is y; left to right, along is x.
//!
//! Owns: geometry. Must not touch: SVG text (see the parent module) or workflows.

use super::Direction;

/// Gap between two layers (along).
const GAP_LAYER: f64 = 36.0;
/// Gap between two nodes of one layer (across).
const GAP_NODE: f64 = 28.0;
/// Gap next to an edge's lane (across).
const GAP_LANE: f64 = 12.0;
/// A plain edge lane's width (across).
const LANE: f64 = 6.0;
/// Margin around the drawing.
pub const MARGIN: f64 = 24.0;
/// Font size of edge labels and the width of one of their characters (an estimate: the
/// layout cannot measure text).
pub const LABEL_FONT: f64 = 11.0;
pub const LABEL_CHAR: f64 = 6.6;
/// How far a self-loop reaches out from its node.
const LOOP_REACH: f64 = 24.0;

/// The outline a node is drawn with (its ports sit on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outline {
    Rect,
    /// Rounded ends (radius = half the height): start and exit.
    Pill,
    Diamond,
    /// Top and bottom cut 12 px in at each side: human gates.
    Hexagon,
}

/// What the layout needs of a node.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    pub w: f64,
    pub h: f64,
    pub outline: Outline,
}

/// What the layout needs of an edge: its ends (node indexes) and its label's text width.
#[derive(Debug, Clone)]
pub struct EdgeSpec {
    pub from: usize,
    pub to: usize,
    pub label_w: Option<f64>,
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

pub type Point = (f64, f64);

/// One piece of an edge's path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Piece {
    Line(Point, Point),
    Cubic(Point, Point, Point, Point),
}

impl Piece {
    fn reversed(self) -> Piece {
        match self {
            Piece::Line(a, b) => Piece::Line(b, a),
            Piece::Cubic(a, b, c, d) => Piece::Cubic(d, c, b, a),
        }
    }

    pub fn start(&self) -> Point {
        match *self {
            Piece::Line(a, _) | Piece::Cubic(a, _, _, _) => a,
        }
    }

    pub fn end(&self) -> Point {
        match *self {
            Piece::Line(_, b) | Piece::Cubic(_, _, _, b) => b,
        }
    }

    /// The point at `t` in 0..=1.
    pub fn at(&self, t: f64) -> Point {
        match *self {
            Piece::Line(a, b) => (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t),
            Piece::Cubic(a, b, c, d) => {
                let s = 1.0 - t;
                let (k0, k1, k2, k3) = (s * s * s, 3.0 * s * s * t, 3.0 * s * t * t, t * t * t);
                (
                    k0 * a.0 + k1 * b.0 + k2 * c.0 + k3 * d.0,
                    k0 * a.1 + k1 * b.1 + k2 * c.1 + k3 * d.1,
                )
            }
        }
    }
}

/// Where an edge's label goes: the text's anchor point, how it is anchored, and the box it
/// takes (x0, y0, x1, y1).
#[derive(Debug, Clone, PartialEq)]
pub struct LabelAt {
    pub x: f64,
    pub y: f64,
    /// `start` (text begins at x) or `middle`.
    pub anchor: &'static str,
    /// `central` (y is the text's middle) or `auto` (y is its baseline).
    pub baseline: &'static str,
    pub bbox: (f64, f64, f64, f64),
}

/// An edge as drawn: its path from its source to its target, and its label's place.
#[derive(Debug, Clone)]
pub struct Route {
    pub from: usize,
    pub to: usize,
    /// Closes a cycle (drawn against the direction of the layers).
    pub back: bool,
    pub pieces: Vec<Piece>,
    pub label: Option<LabelAt>,
}

/// The layout: one box per node and one route per edge (index-aligned with the specs), and
/// the canvas size.
#[derive(Debug, Clone)]
pub struct Layout {
    pub nodes: Vec<Placed>,
    pub edges: Vec<Route>,
    pub width: f64,
    pub height: f64,
    pub direction: Direction,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Node(usize),
    /// A lane of a long edge through a layer.
    Lane,
    /// A lane carrying the label of edge `.0`.
    Label(usize),
}

/// Something placed in a layer: a node, a lane, or a label.
#[derive(Debug, Clone)]
struct Item {
    kind: Kind,
    layer: usize,
    /// Size across the layers' direction (the width of its slot in its layer).
    across: f64,
    /// Size along it.
    along: f64,
    /// Extra room after it across (a self-loop and its label).
    pad: f64,
    u: f64,
}

impl Item {
    fn weight(&self) -> f64 {
        match self.kind {
            Kind::Node(_) => 1.0,
            Kind::Lane | Kind::Label(_) => 2.0,
        }
    }
}

/// Edges closing a cycle, by a depth-first walk from the start node then from every node
/// not yet seen (declaration order), iteratively so deep graphs cannot overflow the stack.
fn back_edges(n: usize, out: &[Vec<(usize, usize)>], start: Option<usize>, m: usize) -> Vec<bool> {
    let mut back = vec![false; m];
    // 0 unseen, 1 on the stack, 2 done.
    let mut state = vec![0u8; n];
    let roots = start.into_iter().filter(|&s| s < n).chain(0..n);
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

/// Longest-path layers over the acyclic orientation `(top, bottom, minlen)`.
fn layers(n: usize, dag: &[(usize, usize, usize)]) -> Vec<usize> {
    let mut out: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    let mut indeg = vec![0usize; n];
    for &(a, b, len) in dag {
        out[a].push((b, len));
        indeg[b] += 1;
    }
    let mut layer = vec![0usize; n];
    let mut queue: Vec<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
    let mut head = 0;
    while head < queue.len() {
        let u = queue[head];
        head += 1;
        for &(v, len) in &out[u] {
            layer[v] = layer[v].max(layer[u] + len);
            indeg[v] -= 1;
            if indeg[v] == 0 {
                queue.push(v);
            }
        }
    }
    layer
}

/// Lays the graph out.
pub fn layout(
    nodes: &[NodeSpec],
    edges: &[EdgeSpec],
    start: Option<usize>,
    direction: Direction,
) -> Layout {
    let n = nodes.len();
    let mut out: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for (e, s) in edges.iter().enumerate() {
        if s.from != s.to && s.from < n && s.to < n {
            out[s.from].push((s.to, e));
        }
    }
    let back = back_edges(n, &out, start, edges.len());
    let is_loop = |s: &EdgeSpec| s.from == s.to || s.from >= n || s.to >= n;
    // (top, bottom) of every edge that is not a self-loop, in layer order.
    let ends: Vec<Option<(usize, usize)>> = edges
        .iter()
        .enumerate()
        .map(|(e, s)| {
            (!is_loop(s)).then(|| {
                if back[e] {
                    (s.to, s.from)
                } else {
                    (s.from, s.to)
                }
            })
        })
        .collect();
    let dag: Vec<(usize, usize, usize)> = ends
        .iter()
        .zip(edges)
        .filter_map(|(t, s)| t.map(|(a, b)| (a, b, if s.label_w.is_some() { 2 } else { 1 })))
        .collect();
    let layer = layers(n, &dag);
    let depth = layer.iter().copied().max().map_or(0, |m| m + 1);

    let lr = direction == Direction::LeftRight;
    // Self-loops: how many per node, and the widest label among them.
    let mut loops = vec![(0usize, 0f64); n];
    for s in edges.iter().filter(|s| s.from == s.to && s.from < n) {
        loops[s.from].0 += 1;
        loops[s.from].1 = loops[s.from].1.max(s.label_w.unwrap_or(0.0));
    }
    let mut items: Vec<Item> = (0..n)
        .map(|i| {
            let NodeSpec { w, h, .. } = nodes[i];
            let (count, label) = loops[i];
            let pad = if count == 0 {
                0.0
            } else if lr {
                LOOP_REACH + 6.0 + 10.0 * (count - 1) as f64 + if label > 0.0 { 16.0 } else { 0.0 }
            } else {
                LOOP_REACH + 6.0 + 10.0 * (count - 1) as f64 + label
            };
            let (across, along) = if lr { (h, w.max(label)) } else { (w, h) };
            Item {
                kind: Kind::Node(i),
                layer: layer[i],
                across,
                along,
                pad,
                u: 0.0,
            }
        })
        .collect();
    // Chains: each edge's items from its top node to its bottom node.
    let mut chains: Vec<Vec<usize>> = vec![Vec::new(); edges.len()];
    for (e, t) in ends.iter().enumerate() {
        let Some((a, b)) = *t else { continue };
        let mut chain = vec![a];
        let (la, lb) = (layer[a], layer[b]);
        let label_layer = edges[e].label_w.map(|_| la + ((lb - la) / 2).max(1));
        for l in la + 1..lb {
            let (kind, across, along) = match (label_layer == Some(l), edges[e].label_w) {
                (true, Some(w)) if lr => (Kind::Label(e), 20.0, w + 8.0),
                (true, Some(w)) => (Kind::Label(e), w + 12.0, LABEL_FONT + 5.0),
                _ => (Kind::Lane, LANE, 0.0),
            };
            chain.push(items.len());
            items.push(Item {
                kind,
                layer: l,
                across,
                along,
                pad: 0.0,
                u: 0.0,
            });
        }
        chain.push(b);
        chains[e] = chain;
    }
    let mut up: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    let mut down: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    for chain in &chains {
        for w in chain.windows(2) {
            down[w[0]].push(w[1]);
            up[w[1]].push(w[0]);
        }
    }

    let rows = order(&items, &up, &down, depth, start);
    place_across(&mut items, &rows, &up, &down);

    // Along: each layer as thick as its thickest item; the gaps between layers in between.
    let thick: Vec<f64> = rows
        .iter()
        .map(|r| r.iter().map(|&i| items[i].along).fold(0.0, f64::max))
        .collect();
    let mut top = vec![MARGIN; depth];
    for l in 1..depth {
        top[l] = top[l - 1] + thick[l - 1] + GAP_LAYER;
    }
    let centre = |l: usize| top[l] + thick[l] / 2.0;
    let bottom = |l: usize| top[l] + thick[l];
    let end_along = if depth == 0 {
        MARGIN
    } else {
        bottom(depth - 1)
    };
    let end_across = items
        .iter()
        .map(|it| it.u + it.across / 2.0 + it.pad)
        .fold(0.0, f64::max);
    let xy = |u: f64, v: f64| if lr { (v, u) } else { (u, v) };

    // Ports: the edges leaving a node downwards (and arriving from above) are spread along
    // its side in the order of their other ends.
    let mut port_down = vec![0f64; edges.len()];
    let mut port_up = vec![0f64; edges.len()];
    let mut downs: Vec<Vec<(f64, usize)>> = vec![Vec::new(); n];
    let mut ups: Vec<Vec<(f64, usize)>> = vec![Vec::new(); n];
    for (e, chain) in chains.iter().enumerate() {
        let k = chain.len();
        if k >= 2 {
            downs[chain[0]].push((items[chain[1]].u, e));
            ups[chain[k - 1]].push((items[chain[k - 2]].u, e));
        }
    }
    for i in 0..n {
        let half = items[i].across / 2.0;
        for (list, ports) in [(&mut downs[i], &mut port_down), (&mut ups[i], &mut port_up)] {
            list.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let k = list.len();
            if k < 2 {
                continue;
            }
            let spread = (half * 0.5).min(7.0 * (k - 1) as f64);
            for (j, &(_, e)) in list.iter().enumerate() {
                ports[e] = -spread + 2.0 * spread * j as f64 / (k - 1) as f64;
            }
        }
    }

    let placed: Vec<Placed> = (0..n)
        .map(|i| {
            let (x, y) = xy(items[i].u, centre(layer[i]));
            Placed {
                x,
                y,
                w: nodes[i].w,
                h: nodes[i].h,
                layer: layer[i],
            }
        })
        .collect();
    // How far from a node's centre (along) its outline is, `du` across from its centre.
    let reach = |i: usize, du: f64| -> f64 {
        let NodeSpec { w, h, outline } = nodes[i];
        let (half_across, half_along) = if lr {
            (h / 2.0, w / 2.0)
        } else {
            (w / 2.0, h / 2.0)
        };
        let d = du.abs().min(half_across);
        match (outline, lr) {
            (Outline::Rect, _) => half_along,
            (Outline::Diamond, _) => half_along * (1.0 - d / half_across),
            (Outline::Pill, false) => {
                let flat = (half_across - half_along).max(0.0);
                if d <= flat {
                    half_along
                } else {
                    (half_along * half_along - (d - flat).powi(2))
                        .max(0.0)
                        .sqrt()
                }
            }
            (Outline::Pill, true) => {
                let r = half_across;
                (half_along - r) + (r * r - d * d).max(0.0).sqrt()
            }
            (Outline::Hexagon, false) => {
                if d <= half_across - 12.0 {
                    half_along
                } else {
                    half_along * (half_across - d) / 12.0
                }
            }
            (Outline::Hexagon, true) => (half_along - 12.0) + 12.0 * (1.0 - d / half_across),
        }
    };

    let mut routes: Vec<Route> = Vec::with_capacity(edges.len());
    for (e, s) in edges.iter().enumerate() {
        let chain = &chains[e];
        if chain.len() < 2 {
            routes.push(self_loop(s, &placed, nodes, lr, &loops, e, edges));
            continue;
        }
        let mut pieces = Vec::new();
        let mut label = None;
        let a = chain[0];
        let b = chain[chain.len() - 1];
        let ua = items[a].u + port_down[e];
        let start_v = centre(layer[a]) + reach(a, port_down[e]);
        let mut prev = (ua, bottom(layer[a]));
        if start_v < prev.1 - 0.01 {
            pieces.push(Piece::Line(xy(ua, start_v), xy(prev.0, prev.1)));
        }
        for &it in &chain[1..] {
            let l = items[it].layer;
            let (u, last) = match items[it].kind {
                Kind::Node(_) => (items[it].u + port_up[e], true),
                Kind::Lane => (items[it].u, false),
                Kind::Label(_) if lr => (items[it].u + 5.0, false),
                Kind::Label(_) => (items[it].u - items[it].across / 2.0 + 4.0, false),
            };
            let (v0, v1) = (prev.1, top[l]);
            let mid = (v0 + v1) / 2.0;
            pieces.push(Piece::Cubic(
                xy(prev.0, v0),
                xy(prev.0, mid),
                xy(u, mid),
                xy(u, v1),
            ));
            if last {
                let face = centre(l) - reach(b, port_up[e]);
                if face > v1 + 0.01 {
                    pieces.push(Piece::Line(xy(u, v1), xy(u, face)));
                }
                break;
            }
            if thick[l] > 0.0 {
                pieces.push(Piece::Line(xy(u, top[l]), xy(u, bottom(l))));
            }
            if let (Kind::Label(_), Some(w)) = (items[it].kind, s.label_w) {
                label = Some(label_beside(u, centre(l), w, lr));
            }
            prev = (u, bottom(l));
        }
        if back[e] {
            pieces = pieces.into_iter().rev().map(Piece::reversed).collect();
        }
        routes.push(Route {
            from: s.from,
            to: s.to,
            back: back[e],
            pieces,
            label,
        });
    }
    let (width, height) = xy(end_across + MARGIN, end_along + MARGIN);
    Layout {
        nodes: placed,
        edges: routes,
        width: width.max(2.0 * MARGIN),
        height: height.max(2.0 * MARGIN),
        direction,
    }
}

/// A label next to its edge's lane at across `u`, along `v`: to the right of the line (top
/// to bottom), above it (left to right).
fn label_beside(u: f64, v: f64, w: f64, lr: bool) -> LabelAt {
    if lr {
        let (x, y) = (v, u - 4.0);
        LabelAt {
            x,
            y,
            anchor: "middle",
            baseline: "auto",
            bbox: (x - w / 2.0, y - LABEL_FONT, x + w / 2.0, y + 2.0),
        }
    } else {
        let (x, y) = (u + 5.0, v);
        LabelAt {
            x,
            y,
            anchor: "start",
            baseline: "central",
            bbox: (
                x,
                y - LABEL_FONT / 2.0 - 1.0,
                x + w,
                y + LABEL_FONT / 2.0 + 1.0,
            ),
        }
    }
}

/// A self-loop: out of the node's far side (right, top to bottom; below, left to right) and
/// back, in the room its layer keeps there.
fn self_loop(
    s: &EdgeSpec,
    placed: &[Placed],
    nodes: &[NodeSpec],
    lr: bool,
    loops: &[(usize, f64)],
    e: usize,
    edges: &[EdgeSpec],
) -> Route {
    let Some(p) = placed.get(s.from) else {
        return Route {
            from: s.from,
            to: s.to,
            back: false,
            pieces: Vec::new(),
            label: None,
        };
    };
    // The k-th loop of this node reaches a little further than the one before.
    let k = edges[..e]
        .iter()
        .filter(|o| o.from == s.from && o.to == s.from)
        .count();
    let reach = LOOP_REACH + 10.0 * k.min(loops[s.from].0) as f64;
    let inset = loop_inset(nodes[s.from].outline, p.w, p.h, lr);
    let (pieces, label) = if lr {
        let y0 = p.y + p.h / 2.0 - inset;
        let far = p.y + p.h / 2.0 + reach;
        let piece = Piece::Cubic(
            (p.x - 8.0, y0),
            (p.x - 20.0, far),
            (p.x + 20.0, far),
            (p.x + 8.0, y0),
        );
        let label = s.label_w.map(|w| {
            let y = far + 8.0;
            LabelAt {
                x: p.x,
                y,
                anchor: "middle",
                baseline: "auto",
                bbox: (p.x - w / 2.0, y - LABEL_FONT, p.x + w / 2.0, y + 2.0),
            }
        });
        (vec![piece], label)
    } else {
        let x0 = p.x + p.w / 2.0 - inset;
        let far = p.x + p.w / 2.0 + reach;
        let piece = Piece::Cubic(
            (x0, p.y - 8.0),
            (far, p.y - 20.0),
            (far, p.y + 20.0),
            (x0, p.y + 8.0),
        );
        let label = s.label_w.map(|w| {
            let x = p.x + p.w / 2.0 + reach * 0.75 + 4.0;
            LabelAt {
                x,
                y: p.y,
                anchor: "start",
                baseline: "central",
                bbox: (
                    x,
                    p.y - LABEL_FONT / 2.0 - 1.0,
                    x + w,
                    p.y + LABEL_FONT / 2.0 + 1.0,
                ),
            }
        });
        (vec![piece], label)
    };
    Route {
        from: s.from,
        to: s.to,
        back: false,
        pieces,
        label,
    }
}

/// How far inside its box a node's outline is where a self-loop leaves and enters it (8 px
/// either side of its middle, on its right side top to bottom, its bottom left to right).
fn loop_inset(outline: Outline, w: f64, h: f64, lr: bool) -> f64 {
    let (half_w, half_h) = (w / 2.0, h / 2.0);
    match (outline, lr) {
        (Outline::Rect, _) => 0.0,
        (Outline::Diamond, false) => half_w * 8.0 / half_h,
        (Outline::Diamond, true) => half_h * 8.0 / half_w,
        (Outline::Hexagon, false) => 12.0 * 8.0 / half_h,
        (Outline::Pill, false) => half_h - (half_h * half_h - 64.0).max(0.0).sqrt(),
        // Their bottoms are flat 8 px either side of the middle.
        (Outline::Hexagon | Outline::Pill, true) => 0.0,
    }
}

/// The items of each layer in order: a first order from a depth-first walk (children in
/// declaration order), then barycentre sweeps, keeping the order with the fewest crossings.
fn order(
    items: &[Item],
    up: &[Vec<usize>],
    down: &[Vec<usize>],
    depth: usize,
    start: Option<usize>,
) -> Vec<Vec<usize>> {
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); depth];
    let mut seen = vec![false; items.len()];
    let nodes = items
        .iter()
        .take_while(|it| matches!(it.kind, Kind::Node(_)))
        .count();
    let roots = start
        .into_iter()
        .filter(|&s| s < nodes)
        .chain(0..items.len());
    for root in roots {
        if seen[root] {
            continue;
        }
        seen[root] = true;
        let mut stack = vec![root];
        while let Some(i) = stack.pop() {
            rows[items[i].layer].push(i);
            for &j in down[i].iter().rev() {
                if !seen[j] {
                    seen[j] = true;
                    stack.push(j);
                }
            }
        }
    }
    let mut pos = vec![0f64; items.len()];
    let index = |rows: &[Vec<usize>], pos: &mut [f64]| {
        for row in rows {
            for (k, &i) in row.iter().enumerate() {
                pos[i] = k as f64;
            }
        }
    };
    index(&rows, &mut pos);
    let mut best = rows.clone();
    let mut best_crossings = crossings(&rows, down, &pos);
    for sweep in 0..12 {
        let downward = sweep % 2 == 0;
        let layers: Vec<usize> = if downward {
            (1..depth).collect()
        } else {
            (0..depth.saturating_sub(1)).rev().collect()
        };
        for l in layers {
            let near = if downward { up } else { down };
            let mut keyed: Vec<(f64, f64, usize)> = rows[l]
                .iter()
                .map(|&i| {
                    let ns = &near[i];
                    let key = if ns.is_empty() {
                        pos[i]
                    } else {
                        ns.iter().map(|&j| pos[j]).sum::<f64>() / ns.len() as f64
                    };
                    (key, pos[i], i)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
            rows[l] = keyed.into_iter().map(|(_, _, i)| i).collect();
            for (k, &i) in rows[l].iter().enumerate() {
                pos[i] = k as f64;
            }
        }
        let c = crossings(&rows, down, &pos);
        if c < best_crossings {
            best_crossings = c;
            best = rows.clone();
        }
        if best_crossings == 0 {
            break;
        }
    }
    best
}

/// Edge crossings between consecutive layers: inversions of the lower ends when the
/// segments are sorted by their upper ends (a Fenwick tree per pair of layers).
fn crossings(rows: &[Vec<usize>], down: &[Vec<usize>], pos: &[f64]) -> usize {
    let mut total = 0;
    for l in 0..rows.len().saturating_sub(1) {
        let mut segs: Vec<(usize, usize)> = rows[l]
            .iter()
            .flat_map(|&i| {
                down[i]
                    .iter()
                    .map(move |&j| (pos[i] as usize, pos[j] as usize))
            })
            .collect();
        if segs.len() < 2 {
            continue;
        }
        segs.sort_unstable();
        let size = rows[l + 1].len() + 1;
        let mut tree = vec![0usize; size + 1];
        for (seen, &(_, low)) in segs.iter().enumerate() {
            // Segments seen so far ending strictly right of `low` cross this one.
            let mut k = low + 1;
            let mut at_or_left = 0;
            while k > 0 {
                at_or_left += tree[k];
                k &= k - 1;
            }
            total += seen - at_or_left;
            let mut k = low + 1;
            while k <= size {
                tree[k] += 1;
                k += k & k.wrapping_neg();
            }
        }
    }
    total
}

/// Across positions: each layer packed with its minimum gaps, then pulled towards its
/// neighbours (above, then below, a few rounds, then both at once).
fn place_across(items: &mut [Item], rows: &[Vec<usize>], up: &[Vec<usize>], down: &[Vec<usize>]) {
    let gap = |a: &Item, b: &Item| match (a.kind, b.kind) {
        (Kind::Node(_), Kind::Node(_)) => GAP_NODE,
        _ => GAP_LANE,
    };
    let seps: Vec<Vec<f64>> = rows
        .iter()
        .map(|row| {
            row.windows(2)
                .map(|w| {
                    let (a, b) = (&items[w[0]], &items[w[1]]);
                    a.across / 2.0 + a.pad + gap(a, b) + b.across / 2.0
                })
                .collect()
        })
        .collect();
    let spans: Vec<f64> = seps.iter().map(|s| s.iter().sum()).collect();
    let widest = spans.iter().copied().fold(0.0, f64::max);
    for (l, row) in rows.iter().enumerate() {
        let mut u = (widest - spans[l]) / 2.0;
        for (k, &i) in row.iter().enumerate() {
            items[i].u = u;
            if let Some(s) = seps[l].get(k) {
                u += s;
            }
        }
    }
    let pass =
        |items: &mut [Item], layers: &mut dyn Iterator<Item = usize>, up_w: f64, down_w: f64| {
            for l in layers {
                let row = &rows[l];
                let targets: Vec<(f64, f64)> = row
                    .iter()
                    .map(|&i| {
                        let (mut sum, mut count) = (0.0, 0.0);
                        for &j in &up[i] {
                            sum += up_w * items[j].u;
                            count += up_w;
                        }
                        for &j in &down[i] {
                            sum += down_w * items[j].u;
                            count += down_w;
                        }
                        if count > 0.0 {
                            (sum / count, items[i].weight())
                        } else {
                            (items[i].u, 0.1)
                        }
                    })
                    .collect();
                let placed = isotonic(&targets, &seps[l]);
                for (k, &i) in row.iter().enumerate() {
                    items[i].u = placed[k];
                }
            }
        };
    let depth = rows.len();
    for _ in 0..4 {
        pass(items, &mut (1..depth), 1.0, 0.0);
        pass(items, &mut (0..depth.saturating_sub(1)).rev(), 0.0, 1.0);
    }
    pass(items, &mut (0..depth), 1.0, 1.0);
    // Shift everything so the leftmost slot starts at the margin.
    let min = items
        .iter()
        .map(|it| it.u - it.across / 2.0)
        .fold(f64::INFINITY, f64::min);
    if min.is_finite() {
        for it in items.iter_mut() {
            it.u += MARGIN - min;
        }
    }
}

/// Positions closest (weighted least squares) to `targets` keeping the order and at least
/// `seps[k]` between item k and k+1: with offsets c, `u - c` must not decrease, which is
/// isotonic regression (pool adjacent violators).
fn isotonic(targets: &[(f64, f64)], seps: &[f64]) -> Vec<f64> {
    let mut offset = Vec::with_capacity(targets.len());
    let mut c = 0.0;
    for k in 0..targets.len() {
        offset.push(c);
        if let Some(s) = seps.get(k) {
            c += s;
        }
    }
    // Blocks: (weighted mean, total weight, count).
    let mut blocks: Vec<(f64, f64, usize)> = Vec::new();
    for (k, &(t, w)) in targets.iter().enumerate() {
        blocks.push((t - offset[k], w, 1));
        while blocks.len() > 1 {
            let (m2, w2, n2) = blocks[blocks.len() - 1];
            let (m1, w1, n1) = blocks[blocks.len() - 2];
            if m1 <= m2 {
                break;
            }
            blocks.pop();
            let merged = ((m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, n1 + n2);
            if let Some(last) = blocks.last_mut() {
                *last = merged;
            }
        }
    }
    let mut out = Vec::with_capacity(targets.len());
    for (m, _, count) in blocks {
        for _ in 0..count {
            out.push(m + offset[out.len()]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isotonic_keeps_order_and_gaps() {
        // Everyone wants 0: they spread around it, 10 apart.
        let u = isotonic(&[(0.0, 1.0), (0.0, 1.0), (0.0, 1.0)], &[10.0, 10.0]);
        assert_eq!(u, vec![-10.0, 0.0, 10.0]);
        // Far apart already: nobody moves.
        let u = isotonic(&[(0.0, 1.0), (50.0, 1.0)], &[10.0]);
        assert_eq!(u, vec![0.0, 50.0]);
        // A heavy item stays closer to its target.
        let u = isotonic(&[(0.0, 3.0), (0.0, 1.0)], &[8.0]);
        assert!(
            (u[0] + 2.0).abs() < 1e-9 && (u[1] - 6.0).abs() < 1e-9,
            "{u:?}"
        );
    }

    #[test]
    fn crossings_are_counted_exactly() {
        // Two layers of two: a->d and b->c cross once.
        let rows = vec![vec![0, 1], vec![2, 3]];
        let down = vec![vec![3], vec![2], vec![], vec![]];
        let pos = vec![0.0, 1.0, 0.0, 1.0];
        assert_eq!(crossings(&rows, &down, &pos), 1);
        let down = vec![vec![2], vec![3], vec![], vec![]];
        assert_eq!(crossings(&rows, &down, &pos), 0);
    }
}
