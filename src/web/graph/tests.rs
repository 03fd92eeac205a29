//! The workflow drawing's tests: the SVG's nodes and edges with their data attributes, and the
//! layout's guarantees (no edge crosses a node, labels in their lanes).
//! Must not: compare whole SVG documents byte for byte (positions may improve).

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
    let layer = |id: &str| l.nodes[w.graph.nodes.iter().position(|n| n.id == id).unwrap()].layer;
    let layers = [
        layer("start"),
        layer("build"),
        layer("review"),
        layer("exit"),
    ];
    assert!(layers.windows(2).all(|p| p[0] < p[1]), "{layers:?}");
    let backs: Vec<_> = l.edges.iter().filter(|e| e.back).collect();
    assert_eq!(backs.len(), 1, "only review -> build closes a cycle");
    // The back edge is drawn from review to build: it starts at review's box.
    let back = backs[0];
    let review = &l.nodes[w.graph.nodes.iter().position(|n| n.id == "review").unwrap()];
    let (x, y) = back.pieces[0].start();
    assert!(
        (x - review.x).abs() <= review.w / 2.0 && (y - review.y).abs() <= review.h / 2.0 + 0.1,
        "back edge starts at ({x}, {y}), review is at ({}, {})",
        review.x,
        review.y
    );
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
    let mut src = String::from("digraph d { start [shape=Mdiamond]; exit [shape=Msquare]; start");
    for i in 0..5000 {
        src.push_str(&format!(" -> n{i}"));
    }
    src.push_str(" -> exit }");
    let l = layout(&wf(&src), Direction::TopBottom);
    assert_eq!(l.nodes.iter().map(|p| p.layer).max(), Some(5001));
}

/// The example: `gate -> exit` skips the layer of `fix`; it must go around it,
/// with its label beside it, not under `fix`.
#[test]
fn an_edge_skipping_a_layer_goes_around_the_node_in_between() {
    let w = wf("digraph review { start [shape=Mdiamond]; exit [shape=Msquare]; fix [shape=parallelogram, script=\"echo fixing\"]; gate [shape=hexagon, label=\"Ship it?\"]; start -> gate; gate -> exit [label=\"[Y] Yes\"]; gate -> fix [label=\"[N] No\"]; fix -> exit }");
    for dir in [Direction::TopBottom, Direction::LeftRight] {
        let text = svg(&w, dir);
        let drawn = geometry::parse(&text);
        assert_eq!(drawn.edges.len(), 4);
        let problems = geometry::problems(&drawn);
        assert!(problems.is_empty(), "{dir:?}: {problems:#?}\n{text}");
    }
}

/// Every workflow of the conformance corpora (this repository's, and the shared one when
/// it is there) drawn both ways: no edge crosses a node other than its own ends, every
/// label sits on its own edge and clear of every node, no two labels overlap.
#[test]
fn corpus_graphs_have_no_edge_through_a_node() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    // The shared corpus is optional (a CI machine has only this repository's copy).
    let shared = std::env::var_os("SVC_SHARED_CORPUS").unwrap_or("/work/shared/corpus".into());
    for dir in [root.join("testdata"), std::path::PathBuf::from(shared)] {
        collect(&dir, &mut files);
    }
    // The same workflow in both corpora is drawn once.
    let mut seen = std::collections::HashSet::new();
    files.retain(|f| std::fs::read(f).is_ok_and(|bytes| seen.insert(bytes)));
    let mut drawn_count = 0;
    let mut failures = Vec::new();
    for f in &files {
        let Ok(src) = std::fs::read_to_string(f) else {
            continue;
        };
        let Ok(loaded) = load(&src, &crate::workflow::DirFiles::for_file(f)) else {
            continue;
        };
        for dir in [Direction::TopBottom, Direction::LeftRight] {
            let text = svg(&loaded.workflow, dir);
            let problems = geometry::problems(&geometry::parse(&text));
            if !problems.is_empty() {
                failures.push(format!("{} {dir:?}: {problems:?}", f.display()));
            }
            drawn_count += 1;
        }
    }
    assert!(
        drawn_count >= 80,
        "only {drawn_count} drawings: is testdata/ there?"
    );
    assert!(
        failures.is_empty(),
        "{} of {drawn_count} drawings are wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn collect(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p
            .extension()
            .is_some_and(|x| x == "dot" || x == "gv" || x == "fabro")
        {
            out.push(p);
        }
    }
}
