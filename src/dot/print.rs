//! Prints a flat [`Graph`] back to DOT. Parsing the output gives the same graph (the fuzz
//! target `parse_dot` checks this); it is also the base of a future `svc fmt`.
//! Must not: print a graph that parses back to a different one.

use super::value::{escape, format_float};
use super::{Attrs, Graph, Value};
use std::fmt::Write;

pub fn to_dot(g: &Graph) -> String {
    let mut out = String::with_capacity(64 * (g.nodes.len() + g.edges.len()) + 64);
    let _ = writeln!(out, "digraph {} {{", name(&g.name));
    if !g.attrs.is_empty() {
        let _ = writeln!(out, "  graph {}", attr_list(&g.attrs));
    }
    for n in &g.nodes {
        if n.attrs.is_empty() {
            let _ = writeln!(out, "  {}", n.id);
        } else {
            let _ = writeln!(out, "  {} {}", n.id, attr_list(&n.attrs));
        }
    }
    for e in &g.edges {
        if e.attrs.is_empty() {
            let _ = writeln!(out, "  {} -> {}", e.from, e.to);
        } else {
            let _ = writeln!(out, "  {} -> {} {}", e.from, e.to, attr_list(&e.attrs));
        }
    }
    out.push_str("}\n");
    out
}

fn name(n: &str) -> String {
    let ident = n.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ident {
        n.to_string()
    } else {
        format!("\"{}\"", escape(n))
    }
}

fn attr_list(a: &Attrs) -> String {
    let parts: Vec<String> = a.iter().map(|(k, v)| format!("{k}={}", value(v))).collect();
    format!("[{}]", parts.join(", "))
}

/// Values keep their lexical kind, so the printed file parses to the same model.
pub(crate) fn value(v: &Value) -> String {
    match v {
        Value::Str(s) => format!("\"{}\"", escape(s)),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => format_float(*f),
        Value::Bool(b) => b.to_string(),
        Value::Duration(d) => d.to_string(),
        Value::Bare(b) => b.to_string(),
    }
}
