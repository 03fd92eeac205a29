//! `apply_patch`: the v4a patch format (`*** Begin Patch` … `*** End Patch` with Add,
//! Update (optionally `*** Move to:`) and Delete File sections and `@@` hunks). The whole
//! patch is parsed and applied in memory first; files are written only if every hunk
//! applies. Every path goes through [`Sandbox::resolve`]. Must not run processes.

use std::path::PathBuf;

use super::ToolError;
use crate::sandbox::Sandbox;

#[derive(Debug, Clone, PartialEq)]
struct Chunk {
    /// `@@ <anchor>` lines that position the chunk (may be empty).
    anchors: Vec<String>,
    old: Vec<String>,
    new: Vec<String>,
    /// `*** End of File`: the old lines sit at the end of the file.
    eof: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Add {
        path: String,
        content: String,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        chunks: Vec<Chunk>,
    },
}

fn parse(patch: &str) -> Result<Vec<Op>, String> {
    let lines: Vec<&str> = patch.lines().collect();
    let mut i = lines
        .iter()
        .position(|l| l.trim() == "*** Begin Patch")
        .ok_or("the patch must start with `*** Begin Patch`")?
        + 1;
    let mut ops = Vec::new();
    let mut ended = false;
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim_end();
        if t.trim() == "*** End Patch" {
            ended = true;
            break;
        }
        if let Some(path) = t.strip_prefix("*** Add File: ") {
            i += 1;
            let mut content = String::new();
            while i < lines.len() && !lines[i].starts_with("*** ") {
                let l = lines[i];
                let body = l.strip_prefix('+').ok_or_else(|| {
                    format!(
                        "line {}: every line of an added file must start with `+`",
                        i + 1
                    )
                })?;
                content.push_str(body);
                content.push('\n');
                i += 1;
            }
            ops.push(Op::Add {
                path: path.trim().to_string(),
                content,
            });
        } else if let Some(path) = t.strip_prefix("*** Delete File: ") {
            ops.push(Op::Delete {
                path: path.trim().to_string(),
            });
            i += 1;
        } else if let Some(path) = t.strip_prefix("*** Update File: ") {
            i += 1;
            let mut move_to = None;
            if let Some(to) = lines.get(i).and_then(|l| l.strip_prefix("*** Move to: ")) {
                move_to = Some(to.trim().to_string());
                i += 1;
            }
            let mut chunks: Vec<Chunk> = Vec::new();
            let mut cur = Chunk {
                anchors: Vec::new(),
                old: Vec::new(),
                new: Vec::new(),
                eof: false,
            };
            while i < lines.len() {
                let l = lines[i];
                if l.trim_end() == "*** End of File" {
                    cur.eof = true;
                    i += 1;
                    continue;
                }
                if l.starts_with("*** ") {
                    break;
                }
                if let Some(anchor) = l.strip_prefix("@@") {
                    if !cur.old.is_empty() || !cur.new.is_empty() {
                        chunks.push(std::mem::replace(
                            &mut cur,
                            Chunk {
                                anchors: Vec::new(),
                                old: Vec::new(),
                                new: Vec::new(),
                                eof: false,
                            },
                        ));
                    }
                    let a = anchor.trim();
                    if !a.is_empty() {
                        cur.anchors.push(a.to_string());
                    }
                } else if let Some(x) = l.strip_prefix('+') {
                    cur.new.push(x.to_string());
                } else if let Some(x) = l.strip_prefix('-') {
                    cur.old.push(x.to_string());
                } else if let Some(x) = l.strip_prefix(' ') {
                    cur.old.push(x.to_string());
                    cur.new.push(x.to_string());
                } else if l.is_empty() {
                    // A context line whose leading space was lost.
                    cur.old.push(String::new());
                    cur.new.push(String::new());
                } else {
                    return Err(format!(
                        "line {}: a hunk line must start with ' ', '+', '-' or '@@': {l:?}",
                        i + 1
                    ));
                }
                i += 1;
            }
            if !cur.old.is_empty() || !cur.new.is_empty() {
                chunks.push(cur);
            }
            if chunks.is_empty() && move_to.is_none() {
                return Err(format!("`*** Update File: {}` has no hunks", path.trim()));
            }
            ops.push(Op::Update {
                path: path.trim().to_string(),
                move_to,
                chunks,
            });
        } else if t.trim().is_empty() {
            i += 1;
        } else {
            return Err(format!(
                "line {}: expected `*** Add File:`, `*** Update File:`, `*** Delete File:` or \
                 `*** End Patch`, found {line:?}",
                i + 1
            ));
        }
    }
    if !ended {
        return Err("the patch must end with `*** End Patch`".into());
    }
    if ops.is_empty() {
        return Err("the patch changes no file".into());
    }
    Ok(ops)
}

/// Finds `needle` in `hay` at or after `start`: exact, then ignoring trailing whitespace,
/// then ignoring surrounding whitespace. With `eof`, a match at the very end is preferred.
fn seek(hay: &[String], needle: &[String], start: usize, eof: bool) -> Option<usize> {
    if needle.is_empty() {
        return Some(if eof { hay.len() } else { start.min(hay.len()) });
    }
    if needle.len() > hay.len() {
        return None;
    }
    let cmps: [fn(&str, &str) -> bool; 3] = [
        |a, b| a == b,
        |a, b| a.trim_end() == b.trim_end(),
        |a, b| a.trim() == b.trim(),
    ];
    let last = hay.len() - needle.len();
    for cmp in cmps {
        if eof && last >= start && (0..needle.len()).all(|k| cmp(&hay[last + k], &needle[k])) {
            return Some(last);
        }
        for s in start..=last {
            if (0..needle.len()).all(|k| cmp(&hay[s + k], &needle[k])) {
                return Some(s);
            }
        }
    }
    None
}

fn apply_chunks(path: &str, text: &str, chunks: &[Chunk]) -> Result<String, String> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut cursor = 0usize;
    let mut edits: Vec<(usize, usize, Vec<String>)> = Vec::new();
    for c in chunks {
        for a in &c.anchors {
            let found = (cursor..lines.len())
                .find(|&k| lines[k].trim() == a.trim())
                .or_else(|| (cursor..lines.len()).find(|&k| lines[k].contains(a.trim())));
            match found {
                Some(k) => cursor = k + 1,
                None => return Err(format!("in {path}: the hunk anchor `@@ {a}` was not found")),
            }
        }
        let at = seek(&lines, &c.old, cursor, c.eof)
            .or_else(|| seek(&lines, &c.old, 0, c.eof))
            .ok_or_else(|| {
                format!(
                    "in {path}: could not find these lines to replace:\n{}",
                    c.old.join("\n")
                )
            })?;
        edits.push((at, c.old.len(), c.new.clone()));
        cursor = at + c.old.len();
    }
    edits.sort_by_key(|e| e.0);
    for w in edits.windows(2) {
        if w[0].0 + w[0].1 > w[1].0 {
            return Err(format!("in {path}: two hunks overlap"));
        }
    }
    for (at, len, new) in edits.into_iter().rev() {
        lines.splice(at..at + len, new);
    }
    let mut out = lines.join("\n");
    out.push('\n');
    Ok(out)
}

/// What applying a patch did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PatchResult {
    pub summary: String,
    /// Paths (relative to the root) added, changed, moved or deleted.
    pub touched: Vec<String>,
}

enum Write {
    Put(PathBuf, String),
    Remove(PathBuf),
}

/// Applies a v4a patch inside the sandbox.
pub fn apply_patch(sb: &Sandbox, patch: &str) -> Result<PatchResult, ToolError> {
    let ops = parse(patch).map_err(ToolError::BadArgs)?;
    let mut writes: Vec<Write> = Vec::new();
    let mut summary = Vec::new();
    let mut touched = Vec::new();
    for op in &ops {
        match op {
            Op::Add { path, content } => {
                let p = sb.resolve(path)?;
                if p.is_dir() {
                    return Err(ToolError::Failed(format!("{path} is a directory")));
                }
                summary.push(format!("A {}", sb.display(&p)));
                touched.push(sb.display(&p));
                writes.push(Write::Put(p, content.clone()));
            }
            Op::Delete { path } => {
                let p = sb.resolve(path)?;
                if !p.is_file() {
                    return Err(ToolError::Failed(format!(
                        "cannot delete {path}: no such file"
                    )));
                }
                summary.push(format!("D {}", sb.display(&p)));
                touched.push(sb.display(&p));
                writes.push(Write::Remove(p));
            }
            Op::Update {
                path,
                move_to,
                chunks,
            } => {
                let p = sb.resolve(path)?;
                // An earlier op of this patch may have produced the file.
                let pending = writes.iter().rev().find_map(|w| match w {
                    Write::Put(q, c) if *q == p => Some(c.clone()),
                    _ => None,
                });
                let text = match pending {
                    Some(t) => t,
                    None => std::fs::read_to_string(&p)
                        .map_err(|e| ToolError::Failed(format!("cannot update {path}: {e}")))?,
                };
                let updated = apply_chunks(path, &text, chunks).map_err(ToolError::Failed)?;
                match move_to {
                    Some(to) => {
                        let q = sb.resolve(to)?;
                        summary.push(format!("M {} -> {}", sb.display(&p), sb.display(&q)));
                        touched.push(sb.display(&p));
                        touched.push(sb.display(&q));
                        writes.push(Write::Put(q, updated));
                        writes.push(Write::Remove(p));
                    }
                    None => {
                        summary.push(format!("M {}", sb.display(&p)));
                        touched.push(sb.display(&p));
                        writes.push(Write::Put(p, updated));
                    }
                }
            }
        }
    }
    for w in writes {
        match w {
            Write::Put(p, content) => {
                if let Some(parent) = p.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| {
                        ToolError::Failed(format!("cannot create {}: {e}", sb.display(parent)))
                    })?;
                }
                std::fs::write(&p, content).map_err(|e| {
                    ToolError::Failed(format!("cannot write {}: {e}", sb.display(&p)))
                })?;
            }
            Write::Remove(p) => {
                std::fs::remove_file(&p).map_err(|e| {
                    ToolError::Failed(format!("cannot delete {}: {e}", sb.display(&p)))
                })?;
            }
        }
    }
    touched.dedup();
    Ok(PatchResult {
        summary: format!("Applied patch:\n{}", summary.join("\n")),
        touched,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sections() {
        let p = "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** Update File: b.txt\n@@ fn main\n ctx\n-old\n+new\n*** Delete File: c.txt\n*** End Patch";
        let ops = parse(p).unwrap_or_default();
        assert_eq!(ops.len(), 3);
        assert!(
            matches!(&ops[1], Op::Update { chunks, .. } if chunks[0].anchors == vec!["fn main"] && chunks[0].old == vec!["ctx", "old"])
        );
        assert!(parse("*** Begin Patch\n*** Add File: x\nno plus\n*** End Patch").is_err());
        assert!(parse("*** Begin Patch\n*** Add File: x\n+a\n").is_err());
    }

    #[test]
    fn chunks_apply_with_fuzz_and_anchor() {
        let text = "fn a() {\n    1\n}\nfn b() {\n    1\n}\n";
        let c = Chunk {
            anchors: vec!["fn b() {".into()],
            old: vec!["    1  ".into()],
            new: vec!["    2".into()],
            eof: false,
        };
        let out = apply_chunks("f", text, &[c]);
        assert_eq!(
            out.ok().as_deref(),
            Some("fn a() {\n    1\n}\nfn b() {\n    2\n}\n")
        );
    }
}
