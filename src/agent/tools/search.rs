//! Read-only tree tools: `grep` (regex over file contents), `glob` (path patterns with `*`,
//! `**`, `?`, `[…]` and `{a,b}`) and `list_dir`, plus the tree walk they share (skips
//! `.git`, never follows directory symlinks; `grep` reads a file symlink only when it
//! resolves inside the working directory). Must not write files.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{arg_bool, arg_str, arg_u64, ToolError};
use crate::base::glob::Glob;
use crate::sandbox::Sandbox;

/// Files visited at most per walk (a guard against huge trees).
const MAX_WALK: usize = 200_000;
/// Files larger than this are not searched by grep.
const MAX_GREP_FILE: u64 = 8 * 1024 * 1024;

/// Every file under `dir` (sorted, depth first), relative paths with `/` separators.
fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut entries: Vec<(PathBuf, bool)> = rd
            .filter_map(Result::ok)
            .filter(|e| e.file_name() != ".git")
            .map(|e| {
                let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
                (e.path(), is_dir)
            })
            .collect();
        entries.sort();
        // Directories pushed in reverse so they pop in order.
        for (p, is_dir) in entries.iter().rev() {
            if *is_dir {
                stack.push(p.clone());
            }
        }
        for (p, is_dir) in entries {
            if !is_dir {
                out.push(p);
                if out.len() >= MAX_WALK {
                    return out;
                }
            }
        }
    }
    out.sort();
    out
}

fn rel(base: &Path, p: &Path) -> String {
    p.strip_prefix(base)
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

fn base_dir(sb: &Sandbox, args: &Value) -> Result<PathBuf, ToolError> {
    let path = arg_str(args, "path")?.unwrap_or(".");
    let p = sb.resolve(if path.is_empty() { "." } else { path })?;
    if !p.exists() {
        return Err(ToolError::Failed(format!(
            "path {} does not exist",
            sb.display(&p)
        )));
    }
    Ok(p)
}

/// `glob(pattern, path)`: files under `path` whose path relative to `path` matches.
pub fn glob(sb: &Sandbox, args: &Value) -> Result<String, ToolError> {
    let pattern = arg_str(args, "pattern")?.ok_or(ToolError::Missing("pattern"))?;
    let base = base_dir(sb, args)?;
    let g = Glob::new(pattern).map_err(|e| ToolError::BadArgs(e.0))?;
    let name_only = g.is_name_only() && !pattern.contains("**");
    let mut hits = Vec::new();
    for f in walk_files(&base) {
        let r = rel(&base, &f);
        let ok = if name_only {
            // `*.rs` matches at the top level only, like a shell glob.
            !r.contains('/') && g.matches(&r)
        } else {
            g.matches(&r)
        };
        if ok {
            hits.push(sb.display(&f));
        }
    }
    if hits.is_empty() {
        return Ok(format!("No files match {pattern:?}."));
    }
    Ok(hits.join("\n"))
}

/// `grep(pattern, path, glob_filter, case_insensitive, max_results)`: `file:line:text`.
pub fn grep(sb: &Sandbox, args: &Value) -> Result<String, ToolError> {
    let pattern = arg_str(args, "pattern")?.ok_or(ToolError::Missing("pattern"))?;
    let ci = arg_bool(args, "case_insensitive")?.unwrap_or(false);
    let max = arg_u64(args, "max_results")?
        .unwrap_or(100)
        .clamp(1, 10_000) as usize;
    let filter = arg_str(args, "glob_filter")?
        .filter(|s| !s.is_empty())
        .map(Glob::new)
        .transpose()
        .map_err(|e| ToolError::BadArgs(e.0))?;
    let re = regex::RegexBuilder::new(pattern)
        .case_insensitive(ci)
        .size_limit(10 * 1024 * 1024)
        .build()
        .map_err(|e| ToolError::BadArgs(format!("invalid regex: {e}")))?;
    let base = base_dir(sb, args)?;
    let files = if base.is_file() {
        vec![base.clone()]
    } else {
        walk_files(&base)
    };
    let mut out = Vec::new();
    let mut truncated = false;
    'files: for f in files {
        if let Some(g) = &filter {
            let r = rel(&base, &f);
            let name = f
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            if !(g.matches(&r) || g.matches(&name)) {
                continue;
            }
        }
        // The walk lists symlinks as files; reading one follows it, so only links that
        // resolve inside the working directory are searched.
        let Ok(real) = f.canonicalize() else {
            continue;
        };
        if !real.starts_with(sb.root()) {
            continue;
        }
        if std::fs::metadata(&real)
            .map(|m| m.len() > MAX_GREP_FILE)
            .unwrap_or(true)
        {
            continue;
        }
        let Ok(bytes) = std::fs::read(&real) else {
            continue;
        };
        if bytes.iter().take(8192).any(|b| *b == 0) {
            continue; // binary
        }
        let text = String::from_utf8_lossy(&bytes);
        let shown = sb.display(&f);
        for (n, line) in text.lines().enumerate() {
            if re.is_match(line) {
                if out.len() >= max {
                    truncated = true;
                    break 'files;
                }
                let line = if line.chars().count() > 500 {
                    let cut: String = line.chars().take(500).collect();
                    format!("{cut}…")
                } else {
                    line.to_string()
                };
                out.push(format!("{shown}:{}:{line}", n + 1));
            }
        }
    }
    if out.is_empty() {
        return Ok("No matches found.".to_string());
    }
    let mut s = out.join("\n");
    if truncated {
        s.push_str(&format!("\n[stopped at max_results={max}]"));
    }
    Ok(s)
}

/// `list_dir(path, depth)`: an indented tree, directories with a trailing `/`.
pub fn list_dir(sb: &Sandbox, args: &Value) -> Result<String, ToolError> {
    let base = base_dir(sb, args)?;
    if !base.is_dir() {
        return Err(ToolError::Failed(format!(
            "{} is not a directory",
            sb.display(&base)
        )));
    }
    let depth = arg_u64(args, "depth")?.unwrap_or(1).clamp(1, 10) as usize;
    let mut out = Vec::new();
    list_into(&base, 0, depth, &mut out);
    if out.is_empty() {
        return Ok(format!("{} is empty.", sb.display(&base)));
    }
    Ok(out.join("\n"))
}

fn list_into(dir: &Path, level: usize, depth: usize, out: &mut Vec<String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<(String, bool)> = rd
        .filter_map(Result::ok)
        .map(|e| {
            let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
            (e.file_name().to_string_lossy().to_string(), is_dir)
        })
        .collect();
    entries.sort();
    for (name, is_dir) in entries {
        if out.len() >= 5_000 {
            return;
        }
        let indent = "  ".repeat(level);
        if is_dir {
            out.push(format!("{indent}{name}/"));
            if level + 1 < depth && name != ".git" {
                list_into(&dir.join(&name), level + 1, depth, out);
            }
        } else {
            out.push(format!("{indent}{name}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exploding_glob_is_an_error_result_for_the_model() {
        let dir = tempfile::tempdir().unwrap();
        let sb = Sandbox::new(dir.path()).unwrap();
        let args = serde_json::json!({"pattern": "{a,b}".repeat(30)});
        let out = super::super::execute(
            "glob",
            &args,
            &sb,
            &super::super::ShellLimits::default(),
            crate::llm::ToolProfile::Anthropic,
            &crate::base::cancel::CancelToken::new(),
        );
        assert!(out.is_error);
        assert!(
            out.for_model.contains("more than 1024"),
            "{}",
            out.for_model
        );
        let grep = serde_json::json!({"pattern": "x", "glob_filter": "{a,b}".repeat(30)});
        let out = super::super::execute(
            "grep",
            &grep,
            &sb,
            &super::super::ShellLimits::default(),
            crate::llm::ToolProfile::Anthropic,
            &crate::base::cancel::CancelToken::new(),
        );
        assert!(out.is_error, "{}", out.for_model);
    }
}
