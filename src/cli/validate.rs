//! `svc validate` and `svc parse`.
//! Must not: validate anything itself (`workflow::load` decides; this prints).

use super::Format;
use crate::dot::ParseError;
use crate::workflow::attrs::{self, Scope};
use crate::workflow::{self, Diagnostic, DirFiles, Loaded, Severity};
use serde_json::{json, Map, Value as J};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug, PartialEq)]
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

/// The arguments of `validate` when they are only file paths (none starting with `-`) and
/// at most one `--format text|json` / `--format=text|json`: exactly what clap would make of
/// them. `None` for anything else (help, `--`, other flags, a repeated or unknown format,
/// no files), which clap then parses and reports.
pub fn plain_args(mut args: impl Iterator<Item = std::ffi::OsString>) -> Option<ValidateArgs> {
    if args.next()? != "validate" {
        return None;
    }
    let mut files = Vec::new();
    let mut format = None;
    while let Some(arg) = args.next() {
        let text = arg.to_str()?;
        let value = match text.strip_prefix("--format") {
            Some("") => args.next()?.into_string().ok()?,
            Some(rest) => rest.strip_prefix('=')?.to_string(),
            None if text.starts_with('-') || text.is_empty() => return None,
            None => {
                files.push(PathBuf::from(arg));
                continue;
            }
        };
        let parsed = match value.as_str() {
            "text" => Format::Text,
            "json" => Format::Json,
            _ => return None,
        };
        if format.replace(parsed).is_some() {
            return None;
        }
    }
    if files.is_empty() {
        return None;
    }
    Some(ValidateArgs {
        files,
        format: format.unwrap_or_default(),
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The short path must take exactly what clap takes, the same way, and leave the rest.
    #[test]
    fn plain_args_agree_with_clap_or_defer_to_it() {
        let cases: &[&[&str]] = &[
            &["validate", "a.dot"],
            &["validate", "a.dot", "b.gv"],
            &["validate", "--format", "json", "a.dot"],
            &["validate", "a.dot", "--format=text"],
            &["validate", "--format=json", "a.dot", "b.dot"],
            &["validate"],
            &["validate", "--format", "json"],
            &["validate", "--format", "yaml", "a.dot"],
            &["validate", "--format=", "a.dot"],
            &["validate", "--format", "json", "--format", "text", "a.dot"],
            &["validate", "--formats", "a.dot"],
            &["validate", "--", "-a.dot"],
            &["validate", "-", "a.dot"],
            &["validate", "", "a.dot"],
            &["validate", "--help"],
            &["validate", "-h", "a.dot"],
            &["validate", "a.dot", "--bogus"],
            &["validate", "--format"],
            &["parse", "a.dot"],
            &["help", "validate"],
            &["--version"],
            &[],
        ];
        let mut taken = 0;
        for case in cases {
            let os = case.iter().map(std::ffi::OsString::from);
            let Some(ours) = plain_args(os) else {
                continue;
            };
            taken += 1;
            let argv = std::iter::once("svc").chain(case.iter().copied());
            match super::super::Cli::try_parse_from(argv) {
                Ok(super::super::Cli {
                    command: super::super::Command::Validate(theirs),
                }) => assert_eq!(ours, theirs, "{case:?}"),
                _ => panic!("clap refuses {case:?}, which the short path took"),
            }
        }
        assert_eq!(taken, 5, "the plain cases take the short path");
    }
}
