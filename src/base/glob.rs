//! Path globs: `*`, `**`, `?`, `[…]` and `{a,b}` over relative `/`-separated paths, for the
//! agent's `glob`/`grep` tools and the run's artifact patterns (`[run] artifacts`).
//!
//! Owns: compiling a pattern (with its size and expansion limits) and matching a path.
//! Must not touch: the file system (callers walk their trees).

use std::fmt;

/// Why a pattern is refused, in words for whoever wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobError(pub String);

impl fmt::Display for GlobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GlobError {}

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
fn expand_braces(p: &str) -> Result<Vec<String>, GlobError> {
    let too_many = || {
        GlobError(format!(
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
    pub fn new(pattern: &str) -> Result<Self, GlobError> {
        let p = pattern.trim().trim_start_matches("./");
        if p.len() > MAX_GLOB_PATTERN {
            return Err(GlobError(format!(
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
    pub fn is_name_only(&self) -> bool {
        self.patterns.iter().all(|p| p.len() <= 1)
    }
}

/// At most this many patterns in one list ([`check_relative_patterns`]).
pub const MAX_PATTERNS_PER_LIST: usize = 64;

/// Compiles a pattern confined to a tree: relative, without `..` parts.
pub fn relative(pattern: &str) -> Result<Glob, GlobError> {
    let t = pattern.trim();
    if t.is_empty() {
        return Err(GlobError("a pattern is empty".into()));
    }
    if t.starts_with('/') || t.split('/').any(|s| s == "..") {
        return Err(GlobError(format!(
            "pattern `{pattern}` leaves the workspace: patterns are relative to it, without `..`"
        )));
    }
    Glob::new(t).map_err(|e| GlobError(format!("pattern `{pattern}`: {e}")))
}

/// Checks a list of [`relative`] patterns (at most [`MAX_PATTERNS_PER_LIST`]).
pub fn check_relative_patterns(patterns: &[String]) -> Result<(), GlobError> {
    if patterns.len() > MAX_PATTERNS_PER_LIST {
        return Err(GlobError(format!(
            "{} patterns; at most {MAX_PATTERNS_PER_LIST} are accepted",
            patterns.len()
        )));
    }
    patterns.iter().try_for_each(|p| relative(p).map(drop))
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
