//! Read-only tree tools: `grep` (regex over file contents), `glob` (path patterns with `*`,
//! `**`, `?`, `[…]` and `{a,b}`) and `list_dir`, plus the tree walk they share (skips
//! `.git`, never follows directory symlinks; `grep` reads a file symlink only when it
//! resolves inside the working directory). Must not write files.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{arg_bool, arg_str, arg_u64, ToolError};
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

/// Patterns one glob may expand to through `{a,b}` alternatives (`{a,b}` ten times over is
/// already 1,024); beyond it the call is an error result, not minutes of expansion.
pub const MAX_BRACE_EXPANSIONS: usize = 1024;
/// The longest glob pattern accepted, in bytes.
pub const MAX_GLOB_PATTERN: usize = 4096;

/// The first `{…}` group with at least one top-level comma: (open, commas, close).
fn first_group(chars: &[char]) -> Option<(usize, Vec<usize>, usize)> {
    let open = chars.iter().position(|c| *c == '{')?;
    let mut depth = 0;
    let mut commas = Vec::new();
    for (i, c) in chars.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some((open, commas, i));
                }
            }
            ',' if depth == 1 => commas.push(i),
            _ => {}
        }
    }
    None
}

/// Expands `{a,b}` alternatives (nested allowed) into plain patterns, in order; an
/// unbalanced `{` is literal. More than [`MAX_BRACE_EXPANSIONS`] patterns is an error.
fn expand_braces(p: &str) -> Result<Vec<String>, ToolError> {
    let too_many = || {
        ToolError::BadArgs(format!(
            "the pattern's {{a,b}} alternatives expand to more than {MAX_BRACE_EXPANSIONS} patterns; use fewer alternatives or several calls"
        ))
    };
    let mut out = Vec::new();
    // Depth first, alternatives pushed in reverse so they come out in order. Every pattern
    // on the stack yields at least one result, so stack + out bounds the final count.
    let mut stack = vec![p.to_string()];
    while let Some(cur) = stack.pop() {
        let chars: Vec<char> = cur.chars().collect();
        let Some((open, commas, close)) = first_group(&chars) else {
            out.push(cur);
            continue;
        };
        let prefix: String = chars[..open].iter().collect();
        let suffix: String = chars[close + 1..].iter().collect();
        let mut bounds = vec![open];
        bounds.extend(&commas);
        bounds.push(close);
        if out.len() + stack.len() + bounds.len() - 1 > MAX_BRACE_EXPANSIONS {
            return Err(too_many());
        }
        for w in bounds.windows(2).rev() {
            let alt: String = chars[w[0] + 1..w[1]].iter().collect();
            stack.push(format!("{prefix}{alt}{suffix}"));
        }
    }
    Ok(out)
}

/// Matches one path segment against a segment pattern (`*`, `?`, `[…]`).
fn match_segment(pat: &[char], s: &[char]) -> bool {
    let (mut p, mut i) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pat.len() {
            match pat[p] {
                '*' => {
                    star = Some((p, i));
                    p += 1;
                    continue;
                }
                '?' => {
                    p += 1;
                    i += 1;
                    continue;
                }
                '[' => {
                    if let Some((matched, next)) = match_class(pat, p, s[i]) {
                        if matched {
                            p = next;
                            i += 1;
                            continue;
                        }
                    } else if s[i] == '[' {
                        p += 1;
                        i += 1;
                        continue;
                    }
                }
                c if c == s[i] => {
                    p += 1;
                    i += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, si)) => {
                p = sp + 1;
                i = si + 1;
                star = Some((sp, si + 1));
            }
            None => return false,
        }
    }
    pat[p..].iter().all(|c| *c == '*')
}

/// `[abc]`, `[a-z]`, `[!x]`/`[^x]` at `pat[p]`: (matched, index after `]`), or `None` if
/// the class is not closed.
fn match_class(pat: &[char], p: usize, c: char) -> Option<(bool, usize)> {
    let mut j = p + 1;
    let negate = matches!(pat.get(j), Some('!') | Some('^'));
    if negate {
        j += 1;
    }
    let mut matched = false;
    let mut first = true;
    while j < pat.len() {
        if pat[j] == ']' && !first {
            return Some((matched != negate, j + 1));
        }
        first = false;
        if j + 2 < pat.len() && pat[j + 1] == '-' && pat[j + 2] != ']' {
            if pat[j] <= c && c <= pat[j + 2] {
                matched = true;
            }
            j += 3;
        } else {
            if pat[j] == c {
                matched = true;
            }
            j += 1;
        }
    }
    None
}

fn match_segments(pat: &[&str], path: &[&str]) -> bool {
    match pat.first() {
        None => path.is_empty(),
        Some(&"**") => (0..=path.len()).any(|k| match_segments(&pat[1..], &path[k..])),
        Some(seg) => {
            !path.is_empty()
                && match_segment(
                    &seg.chars().collect::<Vec<_>>(),
                    &path[0].chars().collect::<Vec<_>>(),
                )
                && match_segments(&pat[1..], &path[1..])
        }
    }
}

/// A compiled glob.
pub struct Glob {
    patterns: Vec<Vec<String>>,
}

impl Glob {
    /// Compiles `pattern`; a pattern over [`MAX_GLOB_PATTERN`] bytes or expanding to more
    /// than [`MAX_BRACE_EXPANSIONS`] patterns is refused.
    pub fn new(pattern: &str) -> Result<Self, ToolError> {
        let p = pattern.trim().trim_start_matches("./");
        if p.len() > MAX_GLOB_PATTERN {
            return Err(ToolError::BadArgs(format!(
                "the pattern is {} bytes long; at most {MAX_GLOB_PATTERN} are accepted",
                p.len()
            )));
        }
        Ok(Self {
            patterns: expand_braces(p)?
                .into_iter()
                .map(|p| {
                    p.split('/')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .collect(),
        })
    }

    /// Matches a relative `/`-separated path.
    pub fn matches(&self, rel_path: &str) -> bool {
        let segs: Vec<&str> = rel_path.split('/').filter(|s| !s.is_empty()).collect();
        self.patterns.iter().any(|p| {
            let ps: Vec<&str> = p.iter().map(String::as_str).collect();
            match_segments(&ps, &segs)
        })
    }

    /// True when no pattern has a `/`: such globs match the file name alone.
    fn is_name_only(&self) -> bool {
        self.patterns.iter().all(|p| p.len() <= 1)
    }
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
    let g = Glob::new(pattern)?;
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
        .transpose()?;
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

    fn glob(p: &str) -> Glob {
        Glob::new(p).unwrap_or(Glob { patterns: vec![] })
    }

    #[test]
    fn brace_expansion_is_capped() {
        assert_eq!(
            expand_braces("a{b,c{d,e}}f").unwrap(),
            ["abf", "acdf", "acef"]
        );
        assert_eq!(expand_braces("a{b").unwrap(), ["a{b"]);
        assert_eq!(expand_braces("{x}").unwrap(), ["x"]);
        // 2^10 = 1,024 patterns is the limit; one more doubling is refused quickly.
        let ten = "{a,b}".repeat(10);
        assert_eq!(expand_braces(&ten).unwrap().len(), MAX_BRACE_EXPANSIONS);
        let many = "{a,b}".repeat(40);
        let e = expand_braces(&many)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("more than 1024 patterns"), "{e}");
        let wide = format!("{{{}}}", vec!["x"; 2000].join(","));
        assert!(expand_braces(&wide).is_err());
        assert!(Glob::new(&"a".repeat(MAX_GLOB_PATTERN + 1)).is_err());
    }

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

    #[test]
    fn glob_matching() {
        let g = glob("**/*.rs");
        assert!(g.matches("a.rs"));
        assert!(g.matches("src/x/a.rs"));
        assert!(!g.matches("src/a.rsx"));
        let g = glob("src/*.{rs,toml}");
        assert!(g.matches("src/a.toml") && g.matches("src/b.rs"));
        assert!(!g.matches("src/x/b.rs"));
        let g = glob("file?.[a-c]");
        assert!(g.matches("file1.b") && !g.matches("file1.d") && !g.matches("file12.a"));
        let g = glob("src/**");
        assert!(g.matches("src/a/b/c"));
        let g = glob("[!a]*");
        assert!(g.matches("bcd") && !g.matches("abc"));
    }
}
