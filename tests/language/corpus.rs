//! The conformance corpus: every file listed in `testdata/corpus/SOURCES.md` (hidden
//! `.fabro__*` files included) parses with the listed node/edge counts, and its expectation
//! holds (`valid`: no error; `invalid`: at least one error or a parse error; `parse-only`:
//! parses). The table is read at test time, so adding a row adds a check.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use svc::internal::workflow::{self, DirFiles, Loaded, Severity};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/corpus")
}

#[derive(Debug, Clone, PartialEq)]
enum Counts {
    Exact(usize, usize),
    ParseError,
}

#[derive(Debug, Clone)]
struct Row {
    file: String,
    expect: String,
    counts: Counts,
    graphviz: String,
}

/// The rows of the SOURCES.md table (lines starting with "| `").
fn rows() -> Vec<Row> {
    let path = corpus_dir().join("SOURCES.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {} (testdata/corpus is part of the repository): {e}",
            path.display()
        )
    });
    let mut rows = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        // file | repository | original path | commit | license | expect | nodes/edges | graphviz | note
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        assert!(cells.len() >= 9, "malformed SOURCES.md row: {line}");
        let counts = match cells[6] {
            "parse error" => Counts::ParseError,
            c => {
                let (n, e) = c
                    .split_once('/')
                    .unwrap_or_else(|| panic!("bad nodes/edges `{c}` in: {line}"));
                Counts::Exact(
                    n.parse()
                        .unwrap_or_else(|_| panic!("bad node count in: {line}")),
                    e.parse()
                        .unwrap_or_else(|_| panic!("bad edge count in: {line}")),
                )
            }
        };
        rows.push(Row {
            file: cells[0].trim_matches('`').to_string(),
            expect: cells[5].to_string(),
            counts,
            graphviz: cells[7].to_string(),
        });
    }
    rows
}

/// Every regular file under the corpus directory except SOURCES.md, hidden files included,
/// as paths relative to the corpus directory.
fn files_on_disk() -> BTreeSet<String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeSet<String>) {
        let entries =
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                walk(&path, root, out);
            } else {
                let rel = path.strip_prefix(root).expect("under the corpus root");
                out.insert(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let root = corpus_dir();
    let mut out = BTreeSet::new();
    walk(&root, &root, &mut out);
    out.remove("SOURCES.md");
    out.remove("LICENSES.md");
    out
}

fn load(rel: &str) -> Result<Loaded, svc::internal::dot::ParseError> {
    let path = corpus_dir().join(rel);
    let src = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    workflow::load(&src, &DirFiles::for_file(&path))
}

fn errors(l: &Loaded) -> Vec<String> {
    l.diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| format!("[{}] {}", d.rule, d.message))
        .collect()
}

fn has(l: &Loaded, rule: &str, severity: Severity) -> bool {
    l.diagnostics
        .iter()
        .any(|d| d.rule == rule && d.severity == severity)
}

#[test]
fn table_and_directory_agree() {
    let rows = rows();
    let listed: BTreeSet<String> = rows.iter().map(|r| r.file.clone()).collect();
    assert_eq!(
        listed.len(),
        rows.len(),
        "a file is listed twice in SOURCES.md"
    );
    assert_eq!(rows.len(), 60, "SOURCES.md says the corpus has 60 files");
    let on_disk = files_on_disk();
    let missing: Vec<_> = listed.difference(&on_disk).collect();
    let unlisted: Vec<_> = on_disk.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "listed in SOURCES.md but not on disk: {missing:?}"
    );
    assert!(
        unlisted.is_empty(),
        "on disk but not listed in SOURCES.md: {unlisted:?}"
    );
    // The hidden Fabro project workflows are part of the table (a shell glob would skip them).
    assert_eq!(listed.iter().filter(|f| f.contains("/.fabro__")).count(), 4);
}

#[test]
fn every_file_parses_with_listed_counts_and_expectation() {
    let mut failures = Vec::new();
    for row in rows() {
        let result = load(&row.file);
        match (&row.counts, result) {
            (Counts::ParseError, Ok(l)) => failures.push(format!(
                "{}: listed as a parse error but parsed ({} nodes, {} edges)",
                row.file,
                l.workflow.graph.nodes.len(),
                l.workflow.graph.edges.len()
            )),
            (Counts::ParseError, Err(e)) => {
                if row.expect != "invalid" {
                    failures.push(format!("{}: parse error row must be `invalid`", row.file));
                }
                if e.message.contains("Rule::") || e.message.trim().is_empty() || e.pos.line == 0 {
                    failures.push(format!(
                        "{}: parse error is not in plain words: {e}",
                        row.file
                    ));
                }
            }
            (Counts::Exact(..), Err(e)) => {
                failures.push(format!("{}: does not parse: {e}", row.file))
            }
            (Counts::Exact(n, m), Ok(l)) => {
                let g = &l.workflow.graph;
                if (g.nodes.len(), g.edges.len()) != (*n, *m) {
                    failures.push(format!(
                        "{}: {} nodes / {} edges, SOURCES.md says {n}/{m}",
                        row.file,
                        g.nodes.len(),
                        g.edges.len()
                    ));
                }
                let errs = errors(&l);
                match row.expect.as_str() {
                    "valid" if !errs.is_empty() => {
                        failures.push(format!("{}: listed valid but refused: {errs:?}", row.file))
                    }
                    "invalid" if errs.is_empty() => {
                        failures.push(format!("{}: listed invalid but accepted", row.file))
                    }
                    "valid" | "invalid" | "parse-only" => {}
                    other => {
                        failures.push(format!("{}: undecided expectation `{other}`", row.file))
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} corpus failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

const DEFAULT_CHOICE: &str =
    "fabro-sh__fabro/test__docs__execution__interviews__default-choice.fabro";

/// SOURCES.md lists this Fabro docs example as `valid`. Its node `deploy` is reachable
/// (start -> approve -> deploy) and has no outgoing edge: decisions.md makes that a warning
/// (`dead_end`), as other engines accept it; a run that chooses "Deploy" fails with
/// "no route from deploy" (tests/language/compat.rs runs it).
#[test]
fn default_choice_validates_with_a_dead_end_warning() {
    let l = load(DEFAULT_CHOICE).expect("parses");
    assert!(!l.has_errors(), "{:?}", errors(&l));
    let dead: Vec<_> = l
        .diagnostics
        .iter()
        .filter(|d| d.rule == "dead_end")
        .collect();
    assert_eq!(dead.len(), 1, "{:?}", l.diagnostics);
    assert_eq!(dead[0].severity, Severity::Warning);
    assert_eq!(dead[0].node_id.as_deref(), Some("deploy"));
}

/// Decided in decisions.md: an unreachable node is a warning, so the orphan file is valid.
#[test]
fn orphan_node_is_valid_with_reachability_warning() {
    let l = load("wcraigjones__attractor/conformance__02-validation__03-orphan-node__pipeline.dot")
        .expect("parses");
    assert!(!l.has_errors(), "{:?}", errors(&l));
    assert!(
        has(&l, "reachability", Severity::Warning),
        "{:?}",
        l.diagnostics
    );
}

const DEAD_END: &str =
    "wcraigjones__attractor/conformance__02-validation__04-dead-end__pipeline.dot";

/// The fkyeah suite's dead-end file: its suite refuses it, and our table once did too.
/// decisions.md (issue 14) makes a dead end a warning, as Fabro and StrongDM do, so svc
/// accepts it (SOURCES.md lists it `valid`) and says what a run that gets there would do.
#[test]
fn dead_end_is_a_warning() {
    let l = load(DEAD_END).expect("parses");
    assert!(!l.has_errors(), "{:?}", errors(&l));
    assert!(
        has(&l, "dead_end", Severity::Warning),
        "{:?}",
        l.diagnostics
    );
}

/// Decided in decisions.md: a manager loop needs a child workflow.
#[test]
fn manager_loop_without_child_is_invalid() {
    let l = load("wcraigjones__attractor/conformance__03-execution__23-manager-loop__pipeline.dot")
        .expect("parses");
    assert!(
        has(&l, "manager_child_workflow", Severity::Error),
        "{:?}",
        l.diagnostics
    );
}

/// `!contains` is not an operator: `!` is only a prefix of a whole clause.
#[test]
fn not_contains_operator_is_a_condition_syntax_error() {
    let l =
        load("siarhei-belavus__attractor-kotlin/examples__contains-routing.dot").expect("parses");
    let bad: Vec<_> = l
        .diagnostics
        .iter()
        .filter(|d| d.rule == "condition_syntax")
        .collect();
    assert_eq!(bad.len(), 1, "{:?}", l.diagnostics);
    assert_eq!(bad[0].severity, Severity::Error);
    assert!(bad[0].message.contains("!contains"), "{}", bad[0].message);
    // The plain `contains` conditions on the other edges are fine.
    assert_eq!(errors(&l).len(), 1, "{:?}", errors(&l));
}

/// Each `invalid` file is refused for the reason its note gives.
#[test]
fn invalid_files_are_refused_for_the_noted_reason() {
    let cases: &[(&str, &str, &str)] = &[
        ("fabro-sh__fabro/test__invalid.fabro", "start_node", ""),
        (
            "fabro-sh__fabro/test__invalid.fabro",
            "exit_no_outgoing",
            "",
        ),
        (
            "danshapiro__kilroy/demo__tmux-agent-test__failure-routing.dot",
            "terminal_node",
            "found 2",
        ),
        (
            "danshapiro__kilroy/demo__tmux-agent-test__multi-node.dot",
            "terminal_node",
            "found 2",
        ),
        (
            "wcraigjones__attractor/conformance__02-validation__01-missing-start__pipeline.dot",
            "start_node",
            "Mdiamond",
        ),
        (
            "wcraigjones__attractor/conformance__02-validation__02-missing-exit__pipeline.dot",
            "terminal_node",
            "Msquare",
        ),
        (
            "wcraigjones__attractor/conformance__02-validation__06-start-incoming__pipeline.dot",
            "start_no_incoming",
            "",
        ),
        (
            "wcraigjones__attractor/conformance__02-validation__07-exit-outgoing__pipeline.dot",
            "exit_no_outgoing",
            "",
        ),
        (
            "wcraigjones__attractor/conformance__02-validation__12-multiple-exits__pipeline.dot",
            "terminal_node",
            "found 2",
        ),
    ];
    for (file, rule, words) in cases {
        let l = load(file).unwrap_or_else(|e| panic!("{file}: {e}"));
        let hit = l
            .diagnostics
            .iter()
            .any(|d| d.rule == *rule && d.severity == Severity::Error && d.message.contains(words));
        assert!(
            hit,
            "{file}: expected error [{rule}] mentioning `{words}`, got {:?}",
            l.diagnostics
        );
    }
}

/// The one Graphviz diagram outside our subset: refused with a plain-words message at the
/// first HTML-like label, with a line and column.
#[test]
fn html_label_diagram_is_a_plain_words_parse_error() {
    let e = match load("danshapiro__kilroy/demo__substack-spec-v01-ui.gv") {
        Ok(_) => panic!("an HTML-like label must not parse"),
        Err(e) => e,
    };
    assert!(e.message.contains("HTML-like"), "{}", e.message);
    assert!(e.pos.line > 1 && e.pos.col > 1, "{e}");
}

/// Sanity for the graphviz column (used by tests/language/graphviz_diff.rs).
#[test]
fn graphviz_column_is_well_formed() {
    for row in rows() {
        let g = row.graphviz.as_str();
        let ok = g == "yes" || g == "no" || (g.starts_with("yes (") && g.ends_with(')'));
        assert!(ok, "{}: unexpected graphviz column `{g}`", row.file);
    }
}
