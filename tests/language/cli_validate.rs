//! `svc validate` and `svc parse` as a user runs them: the real binary, its exit codes
//! (0 ok, 1 invalid, 2 unreadable input or usage error), its text and JSON output, and no
//! panic whatever the input.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::cli::svc;
use serde_json::Value as J;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn code(o: &Output) -> i32 {
    match o.status.code() {
        Some(c) => c,
        None => panic!("svc was killed by a signal (crash?): {}", stderr(o)),
    }
}

fn corpus(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/corpus")
        .join(rel)
        .display()
        .to_string()
}

const SIMPLE: &str = "fabro-sh__fabro/test__simple.fabro";
const EXIT_OUTGOING: &str =
    "wcraigjones__attractor/conformance__02-validation__07-exit-outgoing__pipeline.dot";
const ORPHAN: &str =
    "wcraigjones__attractor/conformance__02-validation__03-orphan-node__pipeline.dot";

/// Writes `src` to a file in a fresh temp dir (kept alive by the returned guard).
fn fixture(name: &str, src: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(name);
    std::fs::write(&path, src).expect("write fixture");
    (dir, path)
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

// ---------------------------------------------------------------------------------------
// Exit codes and the text format
// ---------------------------------------------------------------------------------------

#[test]
fn valid_file_exits_0_with_ok_summary() {
    let o = svc(&["validate", &corpus(SIMPLE)]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o), "ok: 1 file checked, 0 errors, 0 warnings\n");
    assert_eq!(stderr(&o), "");
}

#[test]
fn invalid_file_exits_1_with_rustc_style_lines() {
    let path = corpus(EXIT_OUTGOING);
    let o = svc(&["validate", &path]);
    assert_eq!(code(&o), 1);
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            format!(
                "{path}:4:5: error[exit_no_outgoing]: exit node `done` must not have outgoing edges"
            )
            .as_str(),
            "invalid: 1 file checked, 1 error, 0 warnings",
        ]
    );
}

#[test]
fn warnings_alone_exit_0_and_are_counted() {
    let path = corpus(ORPHAN);
    let o = svc(&["validate", &path]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    let out = stdout(&o);
    let warning = out
        .lines()
        .find(|l| l.contains("warning[reachability]"))
        .unwrap_or_else(|| panic!("no reachability warning in:\n{out}"));
    assert!(warning.starts_with(&format!("{path}:")), "{warning}");
    // path:line:col: warning[rule]: message
    let rest = &warning[path.len() + 1..];
    let mut parts = rest.splitn(3, ':');
    assert!(
        parts.next().is_some_and(|l| l.parse::<u32>().is_ok()),
        "{warning}"
    );
    assert!(
        parts.next().is_some_and(|c| c.parse::<u32>().is_ok()),
        "{warning}"
    );
    assert!(
        out.ends_with("ok: 1 file checked, 0 errors, 1 warning\n"),
        "{out}"
    );
}

#[test]
fn a_nodes_mcp_servers_subset_is_checked() {
    let (_d, path) = fixture(
        "mcp.dot",
        "digraph t {\n  start [shape=Mdiamond]; exit [shape=Msquare]\n  \
         a [prompt=\"x\", mcp_servers=\"time, Git_Hub\"]\n  \
         c [shape=parallelogram, script=\"true\", mcp_servers=\"time\"]\n  \
         start -> a -> c -> exit\n}\n",
    );
    let o = svc(&["validate", path_str(&path)]);
    assert_eq!(code(&o), 1, "{}", stdout(&o));
    let out = stdout(&o);
    assert!(
        out.contains(":3:3: error[mcp_servers_list]: node `a`: mcp_servers names `Git_Hub`"),
        "{out}"
    );
    assert!(
        out.contains(
            "warning[mcp_servers_list]: node `c`: mcp_servers is ignored because only agent \
             nodes use MCP servers"
        ),
        "{out}"
    );
}

#[test]
fn several_files_exit_1_when_any_is_invalid() {
    let o = svc(&["validate", &corpus(SIMPLE), &corpus(EXIT_OUTGOING)]);
    assert_eq!(code(&o), 1);
    assert!(
        stdout(&o).ends_with("invalid: 2 files checked, 1 error, 0 warnings\n"),
        "{}",
        stdout(&o)
    );
    let o = svc(&[
        "validate",
        &corpus(SIMPLE),
        &corpus("fabro-sh__fabro/test__branching.fabro"),
    ]);
    assert_eq!(code(&o), 0);
    assert!(
        stdout(&o).ends_with("ok: 2 files checked, 0 errors, 1 warning\n"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn unreadable_file_exits_2_and_is_not_reported_ok() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("missing.dot");
    let o = svc(&["validate", path_str(&missing)]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("cannot read") && stderr(&o).contains("missing.dot"),
        "{}",
        stderr(&o)
    );
    assert!(
        !stdout(&o).starts_with("ok"),
        "an unreadable file must not be summarised as ok: {}",
        stdout(&o)
    );
    // Mixed with a valid and an invalid file: still 2 (the input problem wins).
    let o = svc(&[
        "validate",
        &corpus(SIMPLE),
        path_str(&missing),
        &corpus(EXIT_OUTGOING),
    ]);
    assert_eq!(code(&o), 2);
    // A directory is not a readable workflow either; nor is `svc parse` of a missing file.
    assert_eq!(code(&svc(&["validate", path_str(dir.path())])), 2);
    let o = svc(&["parse", path_str(&missing)]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("cannot read"), "{}", stderr(&o));
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["validate"][..],
        &["validate", "--bogus", "x.dot"],
        &["validate", "--format", "yaml", "x.dot"],
        &["parse"],
        &["parse", "a.dot", "b.dot"],
        &["frobnicate"],
        &[],
    ] {
        let o = svc(args);
        assert_eq!(code(&o), 2, "svc {args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("Usage:") || stderr(&o).contains("--help"),
            "svc {args:?}: {}",
            stderr(&o)
        );
    }
    // `svc parse` prints JSON only.
    let o = svc(&["parse", "--format", "text", &corpus(SIMPLE)]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("JSON"), "{}", stderr(&o));
}

#[test]
fn help_on_each_command() {
    for (args, usage) in [
        (&["--help"][..], "Usage: svc <COMMAND>"),
        (&["validate", "--help"], "Usage: svc validate"),
        (&["parse", "--help"], "Usage: svc parse"),
        (&["help", "validate"], "Usage: svc validate"),
    ] {
        let o = svc(args);
        assert_eq!(code(&o), 0, "svc {args:?}");
        let out = stdout(&o);
        assert!(out.contains(usage), "svc {args:?}:\n{out}");
        assert!(
            out.contains("--format") || args == ["--help"],
            "svc {args:?}:\n{out}"
        );
    }
    let top = stdout(&svc(&["--help"]));
    assert!(top.contains("validate") && top.contains("parse"), "{top}");
}

// ---------------------------------------------------------------------------------------
// Syntax errors
// ---------------------------------------------------------------------------------------

#[test]
fn syntax_errors_show_line_col_caret_and_plain_words() {
    let (_dir, path) = fixture(
        "syn.dot",
        "digraph G {\n  start [shape=Mdiamond]\n  start -> exit [weight=]\n}\n",
    );
    let p = path_str(&path);
    let o = svc(&["validate", p]);
    assert_eq!(code(&o), 1);
    let out = stdout(&o);
    assert!(
        out.starts_with(&format!(
            "{p}:3:25: error[syntax]: expected a value after `=`, found `]`\n"
        )),
        "{out}"
    );
    assert!(
        out.contains("  |   start -> exit [weight=]\n  |                         ^\n"),
        "{out}"
    );
    assert!(
        out.ends_with("invalid: 1 file checked, 1 error, 0 warnings\n"),
        "{out}"
    );
    assert!(!out.contains("Rule::"), "{out}");
    // `svc parse` reports the same error on stderr, exit 1.
    let o = svc(&["parse", p]);
    assert_eq!(code(&o), 1);
    assert!(
        stderr(&o).starts_with(&format!("{p}:3:25: error[syntax]:")),
        "{}",
        stderr(&o)
    );
    assert_eq!(stdout(&o), "");
}

#[test]
fn common_mistakes_are_explained_in_words() {
    let cases = [
        ("digraph G {\n  a -- b\n}\n", "2:5", "undirected edges"),
        (
            "digraph G {\n  a [label=\"open]\n}\n",
            "2:12",
            "unterminated string",
        ),
        ("graph G { a }\n", "1:1", "use `digraph`"),
        (
            "digraph G {\n  a [label=<b>x</b>]\n}\n",
            "2:12",
            "HTML-like",
        ),
        ("digraph G {\n  a\n", "3:1", "end of file"),
        (
            "digraph G {\n  subgraph s {\n    a [model=gpt:5]\n  }\n}\n",
            "3:17",
            "cannot appear in an unquoted value",
        ),
    ];
    for (src, at, words) in cases {
        let (_dir, path) = fixture("bad.dot", src);
        let p = path_str(&path);
        let o = svc(&["validate", p]);
        assert_eq!(code(&o), 1, "{src}");
        let first = stdout(&o).lines().next().unwrap_or_default().to_string();
        assert!(
            first.starts_with(&format!("{p}:{at}: error[syntax]: ")),
            "{src:?}: {first}"
        );
        assert!(first.contains(words), "{src:?}: {first}");
        assert!(!first.contains("Rule::"), "{first}");
    }
}

// ---------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------

fn json(o: &Output) -> J {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(o)))
}

#[test]
fn validate_json_lists_each_file() {
    let (_dir, syn) = fixture("syn.dot", "digraph G {\n  a ->\n}\n");
    let o = svc(&[
        "validate",
        "--format",
        "json",
        &corpus(SIMPLE),
        &corpus(EXIT_OUTGOING),
        path_str(&syn),
    ]);
    assert_eq!(code(&o), 1);
    let v = json(&o);
    let files = v.as_array().expect("a JSON array");
    assert_eq!(files.len(), 3);
    for f in files {
        let keys: Vec<&str> = f
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            ["file", "graph", "node_count", "edge_count", "diagnostics"]
        );
    }
    assert_eq!(files[0]["file"], J::from(corpus(SIMPLE)));
    assert_eq!(files[0]["graph"], "Simple");
    assert_eq!(files[0]["node_count"], 4);
    assert_eq!(files[0]["edge_count"], 3);
    assert_eq!(files[0]["diagnostics"], serde_json::json!([]));

    let d = &files[1]["diagnostics"][0];
    assert_eq!(d["rule"], "exit_no_outgoing");
    assert_eq!(d["severity"], "error");
    assert_eq!(d["node_id"], "done");
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(4), Some(5))
    );
    assert!(
        d["message"]
            .as_str()
            .is_some_and(|m| m.contains("must not have outgoing edges")),
        "{d}"
    );

    assert_eq!(files[2]["graph"], J::Null);
    let s = &files[2]["diagnostics"][0];
    assert_eq!(s["rule"], "syntax");
    assert_eq!(s["severity"], "error");
    assert_eq!(s["line"], 3);
    assert!(
        s["message"].as_str().is_some_and(|m| m.contains("node id")),
        "{s}"
    );
}

#[test]
fn validate_json_is_an_array_even_when_all_ok() {
    let o = svc(&["validate", "--format", "json", &corpus(SIMPLE)]);
    assert_eq!(code(&o), 0);
    assert_eq!(json(&o).as_array().map(Vec::len), Some(1));
}

#[test]
fn parse_json_has_typed_values_classes_and_stylesheet() {
    let src = r#"digraph Typed {
  graph [goal="Ship it", default_max_retries=2, model_stylesheet="* { model: claude-sonnet-4-5; } .fast { model: gpt-5.2; reasoning_effort: low; } #pinned { model: other-model; }"]
  start [shape=Mdiamond]
  subgraph cluster_build {
    label="Fast Lane"
    work [timeout=900s, max_retries="3", goal_gate="true", label="5m", class="extra"]
    pinned [timeout="600s", max_retries=1, model="explicit-model"]
  }
  exit [shape=Msquare]
  start -> work [weight="2"]
  work -> pinned [condition="outcome=succeeded", loop_restart=true]
  pinned -> exit
}
"#;
    let (_dir, path) = fixture("typed.dot", src);
    let o = svc(&["parse", path_str(&path)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["name"], "Typed");
    assert_eq!(v["attrs"]["goal"], "Ship it");
    assert_eq!(v["attrs"]["default_max_retries"], 2);
    let node = |id: &str| -> J {
        v["nodes"]
            .as_array()
            .and_then(|ns| ns.iter().find(|n| n["id"] == id))
            .map(|n| n["attrs"].clone())
            .unwrap_or_else(|| panic!("no node {id} in {v}"))
    };
    let work = node("work");
    assert_eq!(work["timeout"], "900s", "durations stay as written");
    assert_eq!(work["max_retries"], 3, "quoted \"3\" becomes the number 3");
    assert_eq!(work["goal_gate"], true);
    assert_eq!(work["label"], "5m", "a label is text, not a duration");
    assert_eq!(work["class"], serde_json::json!(["extra", "fast-lane"]));
    assert_eq!(work["model"], "claude-sonnet-4-5", "stylesheet `*` applies");
    let pinned = node("pinned");
    assert_eq!(pinned["timeout"], "600s");
    assert_eq!(pinned["max_retries"], 1);
    assert_eq!(
        pinned["model"], "explicit-model",
        "an explicit attribute beats the stylesheet"
    );
    assert_eq!(pinned["class"], serde_json::json!(["fast-lane"]));
    assert_eq!(node("start")["model"], "claude-sonnet-4-5");

    let edges = v["edges"].as_array().expect("edges");
    assert_eq!(edges.len(), 3);
    assert_eq!(
        (edges[0]["from"].as_str(), edges[0]["to"].as_str()),
        (Some("start"), Some("work"))
    );
    assert_eq!(edges[0]["attrs"]["weight"], 2);
    assert_eq!(edges[1]["attrs"]["condition"], "outcome=succeeded");
    assert_eq!(edges[1]["attrs"]["loop_restart"], true);
}

#[test]
fn parse_json_applies_class_selectors_from_the_corpus() {
    let o = svc(&["parse", &corpus("fabro-sh__fabro/test__styled.fabro")]);
    assert_eq!(code(&o), 0);
    let v = json(&o);
    let attrs = |id: &str| {
        v["nodes"]
            .as_array()
            .and_then(|ns| ns.iter().find(|n| n["id"] == id))
            .map(|n| n["attrs"].clone())
            .unwrap_or(J::Null)
    };
    assert_eq!(attrs("implement")["model"], "claude-opus-4-6");
    assert_eq!(attrs("critical_review")["model"], "gpt-5.2");
    assert_eq!(attrs("critical_review")["reasoning_effort"], "high");
    assert_eq!(attrs("plan")["model"], "claude-sonnet-4-5");
    assert_eq!(attrs("plan")["class"], serde_json::json!(["planning"]));
}

// ---------------------------------------------------------------------------------------
// Garbage in: never a panic
// ---------------------------------------------------------------------------------------

/// The engine's SplitMix64, so the inputs are the same on every run.
struct Rng(svc::internal::engine::prng::Prng);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn assert_no_panic(o: &Output, what: &str) {
    let c = code(o);
    assert!(c == 1 || c == 2, "{what}: exit code {c}\n{}", stderr(o));
    assert!(!stderr(o).contains("panicked"), "{what}: {}", stderr(o));
}

#[test]
fn garbage_input_never_panics() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut rng = Rng(svc::internal::engine::prng::Prng::new(0xbad_f00d));
    let mut files = Vec::new();
    // Random bytes (mostly not UTF-8) and random text from DOT's alphabet.
    const ALPHABET: &[u8] = b"digraph{}[]=;,->\"\\/*\n\t abc_019.:<>#!&|()";
    for i in 0..40 {
        let len = rng.below(400);
        let bytes: Vec<u8> = if i % 2 == 0 {
            (0..len).map(|_| rng.next() as u8).collect()
        } else {
            let mut b = b"digraph G {".to_vec();
            b.extend((0..len).map(|_| ALPHABET[rng.below(ALPHABET.len())]));
            b
        };
        let p = dir.path().join(format!("garbage{i}.dot"));
        std::fs::write(&p, bytes).expect("write");
        files.push(p);
    }
    // Corpus files cut short before their closing brace, at random points.
    let corpus_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/corpus");
    let mut corpus_files: Vec<PathBuf> = Vec::new();
    for repo in std::fs::read_dir(&corpus_root)
        .expect("corpus dir")
        .flatten()
    {
        if repo.path().is_dir() {
            corpus_files.extend(
                repo.path()
                    .read_dir()
                    .expect("repo dir")
                    .flatten()
                    .map(|e| e.path()),
            );
        }
    }
    corpus_files.sort();
    for (i, f) in corpus_files.iter().enumerate() {
        let text = std::fs::read(f).expect("corpus file");
        let close = text.iter().rposition(|&b| b == b'}').unwrap_or(text.len());
        for j in 0..2 {
            let cut = rng.below(close);
            let p = dir.path().join(format!("cut{i}_{j}.dot"));
            std::fs::write(&p, &text[..cut]).expect("write");
            files.push(p);
        }
    }
    // A few hand-picked nasties: deep nesting, huge negation chains, NULs, a lone BOM.
    let nasties: Vec<Vec<u8>> = vec![
        format!("digraph G {{{}}}", "{".repeat(100_000)).into_bytes(),
        format!("digraph G {{ {} a }}", "subgraph { ".repeat(20_000)).into_bytes(),
        format!(
            "digraph G {{ a -> b [condition=\"{}x\"] }}",
            "!".repeat(100_000)
        )
        .into_bytes(),
        format!(
            "digraph G {{ model_stylesheet=\"{}\" a }}",
            "* { model: x; } ".repeat(10_000)
        )
        .into_bytes(),
        b"digraph G { a [label=\"\0\"] \0 }".to_vec(),
        b"\xEF\xBB\xBF".to_vec(),
        "digraph G {\n  a // see \u{a7}9x\n  -- b\n}\n"
            .as_bytes()
            .to_vec(),
        b"digraph G { a [timeout=99999999999999999999999s] }".to_vec(),
        b"digraph G { a [max_retries=99999999999999999999999] }".to_vec(),
        b"digraph G { a -> b [condition=\"context.x matches \\\"(((((\\\"\"] }".to_vec(),
    ];
    for (i, bytes) in nasties.iter().enumerate() {
        let p = dir.path().join(format!("nasty{i}.dot"));
        std::fs::write(&p, bytes).expect("write");
        files.push(p);
    }
    for p in &files {
        let ps = path_str(p);
        assert_no_panic(&svc(&["validate", ps]), ps);
        assert_no_panic(&svc(&["validate", "--format", "json", ps]), ps);
    }
    // `svc parse` too, on a sample.
    for p in files.iter().step_by(7) {
        let o = svc(&["parse", path_str(p)]);
        let c = code(&o);
        assert!(
            (0..=2).contains(&c),
            "{}: exit code {c}\n{}",
            p.display(),
            stderr(&o)
        );
        assert!(
            !stderr(&o).contains("panicked"),
            "{}: {}",
            p.display(),
            stderr(&o)
        );
    }
}
