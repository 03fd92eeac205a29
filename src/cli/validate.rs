//! `svc validate` and `svc parse`.

use super::Format;
use crate::dot::ParseError;
use crate::workflow::attrs::{self, Scope};
use crate::workflow::{self, Diagnostic, DirFiles, Loaded, Severity};
use serde_json::{json, Map, Value as J};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct ValidateArgs {
    /// Workflow files (.dot, .gv, .fabro).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

#[derive(clap::Args)]
pub struct ParseArgs {
    /// The workflow file.
    file: PathBuf,
    /// Only JSON is supported.
    #[arg(long, value_enum, default_value = "json")]
    format: Format,
}

/// One file's outcome.
enum Checked {
    Unreadable(String),
    Syntax(ParseError),
    Loaded(Box<Loaded>),
}

/// The file is read in blocks as it is parsed, never held whole (see `dot::parse_file`).
fn check(path: &Path) -> Checked {
    match workflow::load_file(path, &DirFiles::for_file(path)) {
        Err(e) => Checked::Unreadable(e.to_string()),
        Ok(Ok(l)) => Checked::Loaded(Box::new(l)),
        Ok(Err(e)) => Checked::Syntax(e),
    }
}

pub fn validate(args: ValidateArgs) -> i32 {
    let mut any_error = false;
    let mut unreadable = false;
    let mut json_out = Vec::new();
    let (mut errors, mut warnings) = (0usize, 0usize);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for path in &args.files {
        let shown = path.display().to_string();
        match check(path) {
            Checked::Unreadable(why) => {
                eprintln!("error: cannot read {shown}: {why}");
                unreadable = true;
                errors += 1;
            }
            Checked::Syntax(e) => {
                any_error = true;
                errors += 1;
                match args.format {
                    Format::Text => {
                        let _ = writeln!(out, "{}", e.render(&shown));
                    }
                    Format::Json => json_out.push(json!({
                        "file": shown, "graph": null, "node_count": 0, "edge_count": 0,
                        "diagnostics": [{"rule": "syntax", "severity": "error", "message": e.message,
                                          "line": e.pos.line, "column": e.pos.col}],
                    })),
                }
            }
            Checked::Loaded(l) => {
                any_error |= l.has_errors();
                for d in &l.diagnostics {
                    match d.severity {
                        Severity::Error => errors += 1,
                        Severity::Warning => warnings += 1,
                    }
                }
                match args.format {
                    Format::Text => {
                        for d in &l.diagnostics {
                            let _ = writeln!(out, "{}", render(&shown, d));
                        }
                    }
                    Format::Json => json_out.push(json!({
                        "file": shown,
                        "graph": l.workflow.name(),
                        "node_count": l.workflow.graph.nodes.len(),
                        "edge_count": l.workflow.graph.edges.len(),
                        "diagnostics": l.diagnostics,
                    })),
                }
                // The process is about to exit: freeing a 100k-node graph piece by piece
                // costs more than the OS reclaiming it at once.
                std::mem::forget(l);
            }
        }
    }
    match args.format {
        Format::Text => {
            let files = args.files.len();
            let verdict = if any_error || unreadable {
                "invalid"
            } else {
                "ok"
            };
            let _ = writeln!(
                out,
                "{verdict}: {files} file{} checked, {errors} error{}, {warnings} warning{}",
                plural(files),
                plural(errors),
                plural(warnings)
            );
        }
        Format::Json => {
            let _ = writeln!(out, "{}", J::Array(json_out));
        }
    }
    if unreadable {
        2
    } else {
        i32::from(any_error)
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// rustc-like: `path:line:col: severity[rule]: message`.
pub fn render(path: &str, d: &Diagnostic) -> String {
    let sev = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    match (d.line, d.column) {
        (Some(l), Some(c)) => format!("{path}:{l}:{c}: {sev}[{}]: {}", d.rule, d.message),
        _ => format!("{path}: {sev}[{}]: {}", d.rule, d.message),
    }
}

pub fn parse(args: ParseArgs) -> i32 {
    if args.format != Format::Json {
        eprintln!("error: `svc parse` prints JSON only (use --format json)");
        return 2;
    }
    let src = match std::fs::read_to_string(&args.file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", args.file.display());
            return 2;
        }
    };
    match workflow::load(&src, &DirFiles::for_file(&args.file)) {
        Ok(l) => {
            println!("{}", graph_json(&l.workflow));
            0
        }
        Err(e) => {
            eprintln!("{}", e.render(&args.file.display().to_string()));
            1
        }
    }
}

/// The graph after transforms with typed JSON values.
pub fn graph_json(wf: &workflow::Workflow) -> J {
    let attrs_json = |scope: Scope, a: &crate::dot::Attrs| {
        let mut m = Map::new();
        for (k, v) in a.iter() {
            m.insert(k.to_string(), attrs::to_json(scope, k, v));
        }
        J::Object(m)
    };
    let g = &wf.graph;
    json!({
        "name": g.name,
        "attrs": attrs_json(Scope::Graph, &g.attrs),
        "nodes": g.nodes.iter().map(|n| json!({"id": n.id, "attrs": attrs_json(Scope::Node, &n.attrs)})).collect::<Vec<_>>(),
        "edges": g.edges.iter().map(|e| json!({"from": e.from, "to": e.to, "attrs": attrs_json(Scope::Edge, &e.attrs)})).collect::<Vec<_>>(),
    })
}
