//! The DOT parser: accepted syntax, the flat graph it builds, and its errors in plain words.
//! Must not: know about workflows (typed attributes and validation are `workflow`'s).

use super::*;

fn ok(src: &str) -> Graph {
    match parse(src) {
        Ok(g) => g,
        Err(e) => panic!("parse failed: {e}\n{src}"),
    }
}

fn err(src: &str) -> ParseError {
    match parse(src) {
        Ok(g) => panic!("expected an error, got {g:?}"),
        Err(e) => e,
    }
}

#[test]
fn minimal_graph() {
    let g = ok("digraph G { a -> b }");
    assert_eq!(g.name, "G");
    assert_eq!(g.nodes.len(), 2);
    assert_eq!(g.edges.len(), 1);
}

#[test]
fn quoted_graph_name() {
    assert_eq!(ok("digraph \"My flow\" { a }").name, "My flow");
}

#[test]
fn rejects_undirected_strict_and_nameless() {
    assert!(err("graph G { a -- b }")
        .message
        .contains("undirected graphs are not supported: use `digraph`"));
    assert!(err("strict digraph G { a }").message.contains("strict"));
    assert!(err("digraph { a }").message.contains("needs a name"));
    assert!(err("").message.contains("empty"));
}

#[test]
fn rejects_second_graph_and_trailing_content() {
    assert!(err("digraph A { a }\ndigraph B { b }")
        .message
        .contains("only one graph"));
    let e = err("digraph A { a } junk");
    assert!(e.message.contains("after the closing"), "{}", e.message);
    // Comments and whitespace after the graph are fine.
    ok("digraph A { a } // done\n/* end */\n");
}

#[test]
fn semicolons_optional() {
    let g = ok("digraph G { a; b -> c; d [label=\"x\"]; e }");
    assert_eq!(g.nodes.len(), 5);
    let g2 = ok("digraph G { a b -> c d [label=\"x\"] e }");
    assert_eq!(g2.nodes.len(), 5);
}

#[test]
fn comments_removed_but_kept_in_strings() {
    let g = ok("digraph G {\n // line\n /* block\n over lines */ a [prompt=\"keep // this /* and */ that\"] # \n}"
        .replace(" # ", " ")
        .as_str());
    assert_eq!(
        g.node("a").unwrap().attrs.text("prompt"),
        Some("keep // this /* and */ that")
    );
}

#[test]
fn unterminated_string_and_comment() {
    let e = err("digraph G {\n  a [label=\"oops]\n}\n");
    assert_eq!(e.message, "unterminated string starting at 2:12");
    assert_eq!(e.pos, Pos { line: 2, col: 12 });
    let e = err("digraph G {\n  a /* never closed\n}\n");
    assert!(
        e.message
            .starts_with("unterminated block comment starting at 2:5"),
        "{}",
        e.message
    );
}

#[test]
fn escapes_in_strings() {
    let g = ok(r#"digraph G { a [label="say \"hi\"\\ now\nnext\tTab \x"] }"#);
    assert_eq!(
        g.node("a").unwrap().attrs.text("label"),
        Some("say \"hi\"\\ now\nnext\tTab \\x")
    );
    let g = ok("digraph G { a [prompt=\"one \\\ntwo\"] }");
    assert_eq!(g.node("a").unwrap().attrs.text("prompt"), Some("one two"));
}

#[test]
fn value_types() {
    let g = ok("digraph G { a [s=\"q\", i=-3, p=+4, f=0.5, g=.25, t=true, u=false, d=900s, m=250ms, h=2h, dd=1d, b=gpt-5.2, id=LR, dot=a.b] }");
    let a = &g.node("a").unwrap().attrs;
    assert_eq!(a.get("s"), Some(&Value::Str("q".into())));
    assert_eq!(a.get("i"), Some(&Value::Int(-3)));
    assert_eq!(a.get("p"), Some(&Value::Int(4)));
    assert_eq!(a.get("f"), Some(&Value::Float(0.5)));
    assert_eq!(a.get("g"), Some(&Value::Float(0.25)));
    assert_eq!(a.get("t"), Some(&Value::Bool(true)));
    assert_eq!(a.get("u"), Some(&Value::Bool(false)));
    assert_eq!(a.get("d"), Some(&Value::Duration("900s".into())));
    assert_eq!(a.get("m"), Some(&Value::Duration("250ms".into())));
    assert_eq!(a.get("h"), Some(&Value::Duration("2h".into())));
    assert_eq!(a.get("dd"), Some(&Value::Duration("1d".into())));
    assert_eq!(a.get("b"), Some(&Value::Bare("gpt-5.2".into())));
    assert_eq!(a.get("id"), Some(&Value::Bare("LR".into())));
    assert_eq!(a.get("dot"), Some(&Value::Bare("a.b".into())));
}

#[test]
fn units_booleans_and_ids_that_start_like_keywords() {
    // The grammar matches units, booleans and `graph`/`node`/`edge` a character at a time;
    // these are the neighbours that must still read as before.
    let g = ok("digraph G { no [m=5m, ms=5ms, tr=trueish, fa=falsey, t=true]\n nodes -> edges\n ed -> gr\n graphs -> Node_2\n _x -> n9 }");
    let a = &g.node("no").unwrap().attrs;
    assert_eq!(a.get("m"), Some(&Value::Duration("5m".into())));
    assert_eq!(a.get("ms"), Some(&Value::Duration("5ms".into())));
    assert_eq!(a.get("tr"), Some(&Value::Bare("trueish".into())));
    assert_eq!(a.get("fa"), Some(&Value::Bare("falsey".into())));
    assert_eq!(a.get("t"), Some(&Value::Bool(true)));
    for id in ["nodes", "edges", "ed", "gr", "graphs", "Node_2", "_x", "n9"] {
        assert!(g.node(id).is_some(), "{id}");
    }
    assert_eq!(g.edges.len(), 4);
    assert!(parse("digraph G { a [t=5mx] }").is_err());
    assert!(parse("digraph G { a [t=5msx] }").is_err());
}

#[test]
fn edges_find_their_nodes_in_any_order() {
    // Lookups try the last node and the one declared after it before the index: chains in
    // declaration order, backwards, skipping, and past the last node must all land right.
    let g = ok("digraph G { a; b; c; d\n a -> b -> c -> d\n d -> c -> a\n b -> d -> e\n e -> a }");
    let ids: Vec<&str> = g.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c", "d", "e"]);
    let ends: Vec<(&str, &str)> = g
        .edges
        .iter()
        .map(|e| (e.from.as_str(), e.to.as_str()))
        .collect();
    assert_eq!(
        ends,
        [
            ("a", "b"),
            ("b", "c"),
            ("c", "d"),
            ("d", "c"),
            ("c", "a"),
            ("b", "d"),
            ("d", "e"),
            ("e", "a")
        ]
    );
}

#[test]
fn bad_values_are_errors() {
    assert!(parse("digraph G { a [t=1h30m] }").is_err());
    let e = err("digraph G { a [fidelity=summary:high] }");
    assert!(
        e.message.contains("`:` cannot appear in an unquoted value"),
        "{}",
        e.message
    );
    let e = err("digraph G { a [label=<b>x</b>] }");
    assert!(e.message.contains("HTML-like"), "{}", e.message);
}

#[test]
fn dotted_keys_everywhere() {
    let g = ok("digraph G { graph [stack.child_workflow=\"c.dot\"]\n manager.max_cycles=3\n node [acp.command=\"x\"]\n a [human.default_choice=b]\n a -> b [x.y=1] }");
    assert_eq!(g.attrs.text("stack.child_workflow"), Some("c.dot"));
    assert_eq!(g.attrs.get("manager.max_cycles"), Some(&Value::Int(3)));
    assert_eq!(g.node("a").unwrap().attrs.text("acp.command"), Some("x"));
    assert_eq!(
        g.node("a").unwrap().attrs.text("human.default_choice"),
        Some("b")
    );
    assert_eq!(g.edges[0].attrs.get("x.y"), Some(&Value::Int(1)));
}

#[test]
fn graph_attrs_block_and_declaration() {
    let g = ok("digraph G { graph [goal=\"g1\", rankdir=LR]\n goal=\"g2\" }");
    assert_eq!(g.attrs.text("goal"), Some("g2"));
    assert_eq!(g.attrs.text("rankdir"), Some("LR"));
}

#[test]
fn defaults_apply_to_later_nodes_and_explicit_wins() {
    let g = ok("digraph G { a\n node [shape=box, timeout=5s]\n b\n c [shape=tab]\n edge [weight=2]\n b -> c\n b -> d [weight=5] }");
    assert_eq!(g.node("a").unwrap().attrs.get("shape"), None);
    assert_eq!(g.node("b").unwrap().attrs.text("shape"), Some("box"));
    assert_eq!(g.node("c").unwrap().attrs.text("shape"), Some("tab"));
    assert_eq!(g.node("c").unwrap().attrs.text("timeout"), Some("5s"));
    // implicit node gets the defaults in scope
    assert_eq!(g.node("d").unwrap().attrs.text("shape"), Some("box"));
    assert_eq!(g.edges[0].attrs.get("weight"), Some(&Value::Int(2)));
    assert_eq!(g.edges[1].attrs.get("weight"), Some(&Value::Int(5)));
}

#[test]
fn defaults_scoped_to_subgraph() {
    let g = ok("digraph G { subgraph s { node [shape=hexagon] x } y }");
    assert_eq!(g.node("x").unwrap().attrs.text("shape"), Some("hexagon"));
    assert_eq!(g.node("y").unwrap().attrs.get("shape"), None);
}

#[test]
fn redeclaring_merges_later_wins() {
    let g = ok("digraph G { a [label=\"one\", shape=box] a [label=\"two\"] }");
    let a = &g.node("a").unwrap().attrs;
    assert_eq!(a.text("label"), Some("two"));
    assert_eq!(a.text("shape"), Some("box"));
}

#[test]
fn edge_chains_expand_pairwise_sharing_attrs() {
    let g = ok("digraph G { a -> b -> c -> d [label=\"x\"] }");
    assert_eq!(g.edges.len(), 3);
    let pairs: Vec<(&str, &str)> = g
        .edges
        .iter()
        .map(|e| (e.from.as_str(), e.to.as_str()))
        .collect();
    assert_eq!(pairs, vec![("a", "b"), ("b", "c"), ("c", "d")]);
    assert!(g.edges.iter().all(|e| e.attrs.text("label") == Some("x")));
}

#[test]
fn subgraph_label_becomes_class() {
    let g = ok("digraph G { a\n subgraph cluster_1 { label=\"Review & QA\"; b; a -> c } subgraph { graph [label=\"Loop A\"] d [class=\"x, y\"] } }");
    assert_eq!(g.node("b").unwrap().classes(), vec!["review--qa"]);
    assert_eq!(g.node("a").unwrap().classes(), vec!["review--qa"]);
    assert_eq!(g.node("c").unwrap().classes(), vec!["review--qa"]);
    assert_eq!(g.node("d").unwrap().classes(), vec!["x", "y", "loop-a"]);
    // The subgraph label does not overwrite the graph's attributes.
    assert_eq!(g.attrs.get("label"), None);
}

#[test]
fn nested_subgraphs_inherit_outer_class() {
    let g = ok("digraph G { subgraph outer { label=\"Phase_1\" subgraph { x } } }");
    assert_eq!(g.node("x").unwrap().classes(), vec!["phase1"]);
}

#[test]
fn class_from_label_rule() {
    use super::build::class_from_label;
    assert_eq!(class_from_label("Loop A"), "loop-a");
    assert_eq!(class_from_label("Review & QA"), "review--qa");
    assert_eq!(class_from_label("Phase_1"), "phase1");
}

#[test]
fn missing_arrow_is_explained() {
    let e = err("digraph G {\n  a - b\n}");
    assert_eq!(
        e.message,
        "expected `->` or `[` after node id `a`, found `-`"
    );
    assert_eq!(e.pos, Pos { line: 2, col: 5 });
    let e = err("digraph G { a -- b }");
    assert!(e.message.contains("undirected edges"), "{}", e.message);
    let e = err("digraph G { a -> }");
    assert!(e.message.contains("a node id"), "{}", e.message);
    let e = err("digraph G { a [label] }");
    assert!(!e.message.contains("Rule"), "{}", e.message);
    let e = err("digraph G { a [label=] }");
    assert!(e.message.contains("a value"), "{}", e.message);
    let e = err("digraph G { \"quoted\" -> b }");
    assert!(
        e.message.contains("quoted ids are not supported"),
        "{}",
        e.message
    );
    let e = err("digraph G { a -> b ");
    assert!(e.message.contains("end of file"), "{}", e.message);
}

#[test]
fn keywords_are_not_node_ids() {
    assert!(parse("digraph G { a -> node }").is_err());
}

#[test]
fn positions_are_recorded() {
    let g = ok("digraph G {\n  start\n  start -> b\n}");
    assert_eq!(g.node("start").unwrap().pos, Pos { line: 2, col: 3 });
    assert_eq!(g.node("b").unwrap().pos, Pos { line: 3, col: 12 });
    assert_eq!(g.edges[0].pos, Pos { line: 3, col: 3 });
}

#[test]
fn columns_count_characters_across_statements_comments_and_spacing() {
    // Columns are characters, not bytes, counted on from the previous position of the same
    // line; spacing, comments and `;` between statements (read by the statement before
    // them) move the next statement's position as they should.
    let src = "digraph G {\n  a [label=\"héllo ✓\"]; b -> c /* ✓ */ -> d ;e\n  f\t[x=1] // é\ng\n}";
    let g = ok(src);
    let col = |id: &str| g.node(id).map(|n| (n.pos.line, n.pos.col));
    assert_eq!(col("a"), Some((2, 3)));
    assert_eq!(col("b"), Some((2, 24)));
    assert_eq!(col("c"), Some((2, 29)));
    assert_eq!(col("d"), Some((2, 42)));
    assert_eq!(col("e"), Some((2, 45)));
    assert_eq!(col("f"), Some((3, 3)));
    assert_eq!(col("g"), Some((4, 1)));
    assert_eq!(g.edges[1].pos, Pos { line: 2, col: 29 });
}

#[test]
fn printer_round_trips() {
    let src = r#"digraph "Flow x" {
        graph [goal="Ship \"it\"", default_max_retries=2, f=1.0, stall_timeout=0s]
        node [shape=box]
        subgraph c { label="Loop A"; a [prompt="line1\nline2\ttab \\ back", model=gpt-5.2, w=-3] }
        a -> b -> c [condition="outcome=succeeded", weight=2, loop_restart=true]
    }"#;
    let g = ok(src);
    let printed = to_dot(&g);
    let again = ok(&printed);
    assert!(g.same_model(&again), "{printed}");
    let mut changed = again.clone();
    changed.nodes[0].attrs.set("x", Value::Int(1));
    assert!(!g.same_model(&changed));
}

#[test]
fn defaulted_keys_are_tracked() {
    let g = ok("digraph G { node [model=m, shape=box] a [model=x] b }");
    assert_eq!(g.node("a").unwrap().defaulted, vec!["shape"]);
    assert_eq!(g.node("b").unwrap().defaulted, vec!["model", "shape"]);
}

#[test]
fn render_shows_line_and_caret() {
    let e = err("digraph G {\n  a - b\n}");
    let r = e.render("f.dot");
    assert!(r.starts_with("f.dot:2:5: error[syntax]: expected"), "{r}");
    assert!(r.contains("  | a - b") || r.contains("|   a - b"), "{r}");
}

/// Regression: a syntax error inside a subgraph body used to be reported as "`subgraph` is
/// a keyword and cannot be used as a node id" (the subgraph backtracked into a node
/// statement). The error must point at the real mistake inside the body.
#[test]
fn errors_inside_subgraphs_point_at_the_mistake() {
    let e = err("digraph G {\n  subgraph cluster_a {\n    label=<<B>x</B>>;\n    a\n  }\n}");
    assert!(e.message.contains("HTML-like"), "{}", e.message);
    assert_eq!(e.pos, Pos { line: 3, col: 11 });
    let e = err("digraph G {\n  subgraph {\n    a -> \n  }\n}");
    assert!(e.message.contains("a node id"), "{}", e.message);
    assert_eq!(e.pos.line, 4, "{e}");
    let e = err("digraph G {\n  subgraph outer {\n    subgraph inner { a [label=x:y] }\n  }\n}");
    assert!(e.message.contains("`:` cannot appear"), "{}", e.message);
    assert_eq!(e.pos.line, 3, "{e}");
    let e = err("digraph G {\n  {\n    a [label=<b>]\n  }\n}");
    assert!(e.message.contains("HTML-like"), "{}", e.message);
    assert_eq!(e.pos, Pos { line: 3, col: 14 });
    let e = err("digraph G {\n  subgraph s { a [label=\"never closed] }\n}\n");
    assert!(
        e.message
            .starts_with("unterminated string starting at 2:25"),
        "{}",
        e.message
    );
    // The keyword used as an id is still explained as such.
    let e = err("digraph G { subgraph -> a }");
    assert!(e.message.contains("keyword"), "{}", e.message);
}

/// Regression (found while fuzzing/QA): deeply nested subgraphs overflowed the stack and
/// aborted the process (pest and the builder recurse once per level). Nesting is now limited
/// to `MAX_DEPTH` levels with a plain error; the limit itself still parses, even on a test
/// thread's small stack in a debug build.
#[test]
fn deep_subgraph_nesting_is_an_error_not_a_crash() {
    use super::build::MAX_DEPTH;
    let nested = |open: &str, depth: usize| {
        format!(
            "digraph G {{\n{} a {}\n}}",
            open.repeat(depth),
            "}".repeat(depth)
        )
    };
    let g = ok(&nested("subgraph s { ", MAX_DEPTH));
    assert_eq!(g.nodes.len(), 1);
    ok(&nested("{ ", MAX_DEPTH));
    for open in ["{", "subgraph {", "subgraph x {"] {
        for depth in [MAX_DEPTH + 1, 100_000] {
            let e = err(&nested(open, depth));
            assert!(
                e.message.contains("nested more than 100 levels"),
                "{}",
                e.message
            );
            assert_eq!(e.pos.line, 2);
        }
    }
    // Node ids that merely start with `subgraph` are not scanned as subgraphs (that scan
    // would run to the end of the file for every such statement).
    let many: String = (0..2000)
        .map(|i| format!("subgraph_{i} -> subgraph_{}\n", i + 1))
        .collect();
    assert_eq!(ok(&format!("digraph G {{\n{many}}}")).edges.len(), 2000);
    // Braces inside strings and comments do not count.
    let src = format!(
        "digraph G {{ subgraph {{ a [label=\"{}\"] /* {} */ }} }}",
        "{".repeat(500),
        "{".repeat(500)
    );
    assert_eq!(ok(&src).nodes.len(), 1);
}

/// Regression (fuzz crash, parse_dot): a syntax error right after a word preceded by a
/// multi-byte character (here in a comment) sliced the source inside that character and
/// panicked while wording the message.
#[test]
fn multibyte_text_before_an_error_does_not_panic() {
    let e = err("digraph G {\n  a // see \u{a7}9x\n  -- b\n}\n");
    assert!(e.message.contains("undirected edges"), "{}", e.message);
    assert_eq!(e.pos, Pos { line: 3, col: 3 });
    let e = err("digraph G {\n  a [x=1 // \u{a7}y\n  : ]\n}\n");
    assert_eq!(e.pos.line, 3, "{e}");
    let e = err("digraph G {\n  a [\u{e9}t\u{e9}=1]\n}\n");
    assert_eq!(e.pos.line, 2, "{e}");
    let e = err("digraph G {\n  a [b // r\u{e9}sum\u{e9}\n  c=1]\n}\n");
    assert!(!e.message.is_empty());
}

/// Regression (fuzz slow unit, parse_dot): a typo inside nested subgraphs made pest re-parse
/// each body twice per level (`subgraph` read back as a node id, the `{` after the name as
/// an anonymous subgraph), so 25 levels took minutes. 40 levels must answer at once with the
/// error at the typo (exponential time would never finish).
#[test]
fn typo_in_nested_subgraphs_is_reported_without_backtracking_blowup() {
    let depth = 40;
    let open: String = (0..depth)
        .map(|i| format!("subgraph s{i} {{ a{i} -> b{i} [label=\"x\"]\n"))
        .collect();
    let src = format!("digraph G {{\n{open}c . d\n{}}}\n", "}".repeat(depth));
    let e = err(&src);
    assert_eq!(
        e.pos,
        Pos {
            line: depth as u32 + 2,
            col: 3
        },
        "{e}"
    );
    let anon: String = (0..depth).map(|i| format!("{{ a{i}\n")).collect();
    let e = err(&format!(
        "digraph G {{\n{anon}c . d\n{}}}\n",
        "}".repeat(depth)
    ));
    assert_eq!(e.pos.line, depth as u32 + 2, "{e}");
    // `subgraph` is still not a node id.
    let e = err("digraph G { subgraph -> a }");
    assert!(e.message.contains("keyword"), "{}", e.message);
    let e = err("digraph G { a -> subgraph }");
    assert!(!e.message.is_empty());
}

/// The sizes the memory figures of `svc validate` rely on (README "Benchmarks").
#[test]
fn model_entries_stay_small() {
    assert_eq!(std::mem::size_of::<Key>(), 16);
    // Text up to 22 bytes lives inside the value (no allocation): 32 bytes in all.
    assert_eq!(std::mem::size_of::<Value>(), 32);
    assert_eq!(std::mem::size_of::<(Key, Value)>(), 48);
    assert_eq!(std::mem::size_of::<Attrs>(), 16);
    assert_eq!(std::mem::size_of::<Edge>(), 56);
}

#[test]
fn attribute_lists_keep_first_place_and_last_value() {
    let mut a: Attrs = [("label", "x"), ("zz_custom", "1"), ("label", "y")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), Value::Str(v.into())))
        .collect();
    assert_eq!(
        a.iter().map(|(k, _)| k).collect::<Vec<_>>(),
        ["label", "zz_custom"]
    );
    assert_eq!(a.text("label"), Some("y"));
    a.set("zz_other", Value::Int(2));
    a.merge(
        &[("label".to_string(), Value::Bool(true))]
            .into_iter()
            .collect(),
    );
    assert_eq!(a.get("label"), Some(&Value::Bool(true)));
    assert_eq!(a.remove("zz_custom"), Some(Value::Str("1".into())));
    assert_eq!(
        a.iter().map(|(k, _)| k).collect::<Vec<_>>(),
        ["label", "zz_other"]
    );
    assert_eq!(
        format!("{a:?}"),
        "Attrs([(\"label\", Bool(true)), (\"zz_other\", Int(2))])"
    );
}
