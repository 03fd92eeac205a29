//! Tool-output truncation for the model (engine.md §12.5): characters are cut first, then
//! lines, keeping both ends (`HeadTail`) or only the end (`Tail`), with a marker saying what
//! was left out. Events always carry the full output. Pure string work: must not know
//! which tool produced the text or do I/O.

/// Which part of an oversized output survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    HeadTail,
    Tail,
}

/// A tool's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub chars: usize,
    pub lines: Option<usize>,
    pub mode: Mode,
}

pub const READ_FILE: Limit = Limit {
    chars: 50_000,
    lines: None,
    mode: Mode::HeadTail,
};
pub const SHELL: Limit = Limit {
    chars: 30_000,
    lines: Some(256),
    mode: Mode::HeadTail,
};
pub const GREP: Limit = Limit {
    chars: 20_000,
    lines: Some(200),
    mode: Mode::Tail,
};
pub const GLOB: Limit = Limit {
    chars: 20_000,
    lines: Some(500),
    mode: Mode::Tail,
};
pub const LIST_DIR: Limit = Limit {
    chars: 20_000,
    lines: Some(500),
    mode: Mode::HeadTail,
};
/// An MCP tool's result.
pub const MCP: Limit = Limit {
    chars: 30_000,
    lines: None,
    mode: Mode::HeadTail,
};
pub const EDIT: Limit = Limit {
    chars: 10_000,
    lines: None,
    mode: Mode::Tail,
};
pub const WRITE: Limit = Limit {
    chars: 1_000,
    lines: None,
    mode: Mode::Tail,
};

/// Applies a limit. Output within the limit is returned unchanged (borrowed cheaply by
/// the caller through `Cow` semantics is not needed: tools outputs are owned anyway).
pub fn apply(s: &str, limit: Limit) -> String {
    let cut = cut_chars(s, limit.chars, limit.mode);
    match limit.lines {
        Some(n) => cut_lines(&cut, n, limit.mode),
        None => cut,
    }
}

fn cut_chars(s: &str, max: usize, mode: Mode) -> String {
    // Fast path on bytes: a string with ≤ max bytes has ≤ max chars.
    if s.len() <= max {
        return s.to_string();
    }
    let total = s.chars().count();
    if total <= max {
        return s.to_string();
    }
    let omitted = total - max;
    match mode {
        Mode::HeadTail => {
            let head_n = max / 2;
            let tail_n = max - head_n;
            let head_end = s.char_indices().nth(head_n).map_or(s.len(), |(i, _)| i);
            let tail_start = s
                .char_indices()
                .nth(total - tail_n)
                .map_or(s.len(), |(i, _)| i);
            format!(
                "{}\n[... {omitted} characters omitted ...]\n{}",
                &s[..head_end],
                &s[tail_start..]
            )
        }
        Mode::Tail => {
            let start = s
                .char_indices()
                .nth(total - max)
                .map_or(s.len(), |(i, _)| i);
            format!("[... {omitted} characters omitted ...]\n{}", &s[start..])
        }
    }
}

fn cut_lines(s: &str, max: usize, mode: Mode) -> String {
    let lines: Vec<&str> = s.split('\n').collect();
    if lines.len() <= max {
        return s.to_string();
    }
    let omitted = lines.len() - max;
    match mode {
        Mode::HeadTail => {
            let head = max / 2;
            let tail = max - head;
            format!(
                "{}\n[... {omitted} lines omitted ...]\n{}",
                lines[..head].join("\n"),
                lines[lines.len() - tail..].join("\n")
            )
        }
        Mode::Tail => format!(
            "[... {omitted} lines omitted ...]\n{}",
            lines[lines.len() - max..].join("\n")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_tail_chars_and_lines() {
        let s = "a".repeat(100);
        let l = Limit {
            chars: 10,
            lines: None,
            mode: Mode::HeadTail,
        };
        let out = apply(&s, l);
        assert!(out.starts_with("aaaaa\n[... 90 characters omitted ...]\naaaaa"));
        let lines: String = (0..20).map(|i| format!("{i}\n")).collect();
        let out = apply(
            &lines,
            Limit {
                chars: 1000,
                lines: Some(4),
                mode: Mode::HeadTail,
            },
        );
        assert_eq!(out, "0\n1\n[... 17 lines omitted ...]\n19\n");
        let out = apply(
            &lines,
            Limit {
                chars: 1000,
                lines: Some(2),
                mode: Mode::Tail,
            },
        );
        assert_eq!(out, "[... 19 lines omitted ...]\n19\n");
        assert_eq!(apply("short", SHELL), "short");
        // Multi-byte characters are cut on boundaries.
        let u = "é".repeat(50);
        let out = apply(
            &u,
            Limit {
                chars: 10,
                lines: None,
                mode: Mode::Tail,
            },
        );
        assert!(out.ends_with(&"é".repeat(10)));
    }
}
