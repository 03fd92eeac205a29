//! Parse errors in plain words. pest reports which grammar rules it tried; users need to
//! hear what was expected where, so failures are re-described from the text around them.
//! Must not: show users pest's rule names.

use super::grammar::{DotParser, Rule};
use super::Pos;

/// A syntax error with its position, the offending source line and a plain-words message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{pos}: {message}")]
pub struct ParseError {
    pub pos: Pos,
    pub message: String,
    /// The source line the error is on (without its newline).
    pub snippet: String,
    /// Byte offset of the error in the source.
    pub offset: usize,
}

impl ParseError {
    pub(crate) fn new(pos: Pos, message: String, src: &str, offset: usize) -> Self {
        ParseError {
            pos,
            message,
            snippet: line_at(src, offset).to_string(),
            offset,
        }
    }

    /// rustc-style rendering: message, location, the line and a caret.
    pub fn render(&self, path: &str) -> String {
        let caret_pad = " ".repeat(self.pos.col.saturating_sub(1) as usize);
        format!(
            "{path}:{}:{}: error[syntax]: {}\n  | {}\n  | {caret_pad}^",
            self.pos.line, self.pos.col, self.message, self.snippet
        )
    }
}

fn line_at(src: &str, offset: usize) -> &str {
    let offset = offset.min(src.len());
    let start = src[..offset].rfind('\n').map_or(0, |i| i + 1);
    let end = src[offset..].find('\n').map_or(src.len(), |i| offset + i);
    src[start..end].trim_end_matches('\r')
}

/// Byte offsets of line starts, for turning offsets into line:column.
pub(crate) struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub(crate) fn new(src: &str) -> Self {
        let mut starts = Vec::with_capacity(src.len() / 40 + 1);
        starts.push(0);
        starts.extend(
            src.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1),
        );
        LineIndex { starts }
    }

    pub(crate) fn pos(&self, src: &str, offset: usize) -> Pos {
        let offset = offset.min(src.len());
        let line = self.starts.partition_point(|&s| s <= offset);
        let start = self.starts[line.saturating_sub(1)];
        let col = src
            .get(start..offset)
            .map_or(offset - start, |s| s.chars().count());
        Pos {
            line: line as u32,
            col: col as u32 + 1,
        }
    }
}

/// What an unterminated construct looks like, found by scanning from a statement start.
enum Unclosed {
    String(usize),
    Comment(usize),
}

/// Scans `src[from..]` honouring strings and comments; reports a string or block comment
/// that never closes.
fn find_unclosed(src: &str, from: usize) -> Option<Unclosed> {
    let b = src.as_bytes();
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let start = i;
                i += 1;
                loop {
                    match b.get(i) {
                        None => return Some(Unclosed::String(start)),
                        Some(b'\\') => i += 2,
                        Some(b'"') => break,
                        Some(_) => i += 1,
                    }
                }
                i += 1;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i = src[i..].find('\n').map_or(b.len(), |n| i + n);
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let start = i;
                match src[i + 2..].find("*/") {
                    Some(n) => i = i + 2 + n + 2,
                    None => return Some(Unclosed::Comment(start)),
                }
            }
            _ => i += 1,
        }
    }
    None
}

fn skip_space_and_comments(src: &str, mut i: usize) -> usize {
    let b = src.as_bytes();
    loop {
        while i < b.len() && (b[i] as char).is_ascii_whitespace() {
            i += 1;
        }
        if src[i..].starts_with("//") {
            i = src[i..].find('\n').map_or(b.len(), |n| i + n);
        } else if src[i..].starts_with("/*") {
            i = src[i + 2..].find("*/").map_or(b.len(), |n| i + 2 + n + 2);
        } else {
            return i;
        }
    }
}

/// A subgraph statement at `offset` nested deeper than `max` levels, as an error at the
/// first brace past the limit. pest and the builder recurse once per level, so without a
/// limit a crafted file overflows the stack. Only subgraph statements are scanned (up to
/// their closing brace), so this adds one linear pass over subgraph text at most.
pub(crate) fn nesting_error(src: &str, offset: usize, max: usize) -> Option<ParseError> {
    let start = skip_space_and_comments(src, offset);
    let rest = &src[start..];
    let keyword = rest
        .strip_prefix("subgraph")
        .is_some_and(|after| !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_'));
    if !(rest.starts_with('{') || keyword) {
        return None;
    }
    let b = src.as_bytes();
    let mut depth = 0usize;
    let mut i = start;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                loop {
                    match b.get(i) {
                        None => return None,
                        Some(b'\\') => i += 2,
                        Some(b'"') => break,
                        Some(_) => i += 1,
                    }
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i = src[i..].find('\n').map_or(b.len(), |n| i + n);
            }
            b'/' if b.get(i + 1) == Some(&b'*') => match src[i + 2..].find("*/") {
                Some(n) => i = i + 2 + n + 1,
                None => return None,
            },
            b'{' => {
                depth += 1;
                if depth > max {
                    let msg = format!("subgraphs are nested more than {max} levels deep");
                    let pos = LineIndex::new(src).pos(src, i);
                    return Some(ParseError::new(pos, msg, src, i));
                }
            }
            b'}' if depth <= 1 => return None,
            b'}' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    None
}

/// Byte offset where the run of word characters at the end of `text` starts. The character
/// before it may be multi-byte (`// see §9x`), so step over it by its length, not by 1.
fn word_start(text: &str, is_word: impl Fn(char) -> bool) -> usize {
    text.char_indices()
        .rev()
        .find(|&(_, c)| !is_word(c))
        .map_or(0, |(i, c)| i + c.len_utf8())
}

/// The token just before `at` (skipping whitespace), for "after `x`" wording.
fn previous_token(src: &str, at: usize) -> &str {
    let before = src[..at].trim_end();
    let is_word = |c: char| c.is_ascii_alphanumeric() || "_.-".contains(c);
    if before.ends_with("->") {
        return "->";
    }
    match before.chars().last() {
        Some(c) if is_word(c) => &before[word_start(before, is_word)..],
        Some(c) => &before[before.len() - c.len_utf8()..],
        None => "",
    }
}

/// A short quotation of what stands at `at`.
fn found_at(src: &str, at: usize) -> String {
    let rest = &src[at..];
    match rest.chars().next() {
        None => "the end of the file".to_string(),
        Some(c) if c.is_ascii_alphanumeric() || c == '_' => {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            format!("`{}`", &rest[..end])
        }
        Some(c) => format!("`{c}`"),
    }
}

pub(crate) fn describe_failure(
    src: &str,
    lines: &LineIndex,
    offset: usize,
    err: &pest::error::Error<Rule>,
    prev_stmt: Option<&(Rule, String, usize)>,
) -> ParseError {
    let rel = match err.location {
        pest::error::InputLocation::Pos(p) => p,
        pest::error::InputLocation::Span((s, _)) => s,
    };
    let at = (offset + rel).min(src.len());
    let make = |at: usize, msg: String| ParseError::new(lines.pos(src, at), msg, src, at);
    // Everything after an unclosed quote or comment is swallowed, so that is the cause.
    match find_unclosed(src, offset) {
        Some(Unclosed::String(s)) => {
            let p = lines.pos(src, s);
            return make(s, format!("unterminated string starting at {p}"));
        }
        Some(Unclosed::Comment(s)) => {
            let p = lines.pos(src, s);
            return make(s, format!("unterminated block comment starting at {p}"));
        }
        None => {}
    }
    let stmt_start = skip_space_and_comments(src, offset);
    // Optional parts (`[...]`, `-> b`) backtrack, leaving the failure at the next statement;
    // re-parse them strictly to find where they really went wrong.
    if at == stmt_start {
        if let Some(deeper) = strict_reparse(src, lines, at, prev_stmt) {
            return deeper;
        }
    }
    let rest = &src[at..];
    let prev = previous_token(src, at);
    let positives: Vec<Rule> = match &err.variant {
        pest::error::ErrorVariant::ParsingError { positives, .. } => positives.clone(),
        pest::error::ErrorVariant::CustomError { .. } => Vec::new(),
    };
    let msg = if rest.is_empty() {
        "unexpected end of file: expected `}` to close the graph".to_string()
    } else if rest.starts_with("--") {
        "undirected edges (`--`) are not supported: use `->`".to_string()
    } else if rest.starts_with('<') {
        "HTML-like values (`<...>`) are not supported: use a quoted string".to_string()
    } else if rest.starts_with(':') && !prev.is_empty() && prev != "=" {
        format!(
            "`:` cannot appear in an unquoted value: write \"{prev}{}\" in quotes",
            rest_word(rest)
        )
    } else if prev == "subgraph"
        && !rest.starts_with('{')
        && src[..at].trim_end().len() > stmt_start
    {
        // `subgraph` opened this statement but no `{` or name followed.
        "`subgraph` is a keyword and cannot be used as a node id: a subgraph is written `subgraph name { ... }`".to_string()
    } else if at == stmt_start && rest.starts_with('"') {
        "node ids must be identifiers (letters, digits and underscores, not starting with a digit); quoted ids are not supported".to_string()
    } else if at == stmt_start && rest.starts_with(|c: char| c.is_ascii_digit()) {
        format!(
            "node ids must start with a letter or underscore, found {}",
            found_at(src, at)
        )
    } else if at == stmt_start {
        match prev_stmt {
            Some((Rule::node_stmt, id, _)) if !prev.is_empty() && prev == id => {
                format!(
                    "expected `->` or `[` after node id `{id}`, found {}",
                    found_at(src, at)
                )
            }
            _ => format!("expected a statement or `}}`, found {}", found_at(src, at)),
        }
    } else {
        expected_message(&positives, prev, src, at)
    };
    make(at, msg)
}

fn strict_reparse(
    src: &str,
    lines: &LineIndex,
    at: usize,
    prev_stmt: Option<&(Rule, String, usize)>,
) -> Option<ParseError> {
    let rest = &src[at..];
    let (rule, from) = if rest.starts_with('[') {
        (Rule::strict_attrs, at)
    } else if rest.starts_with('{') {
        // An anonymous subgraph whose body does not parse.
        (Rule::strict_subgraph, at)
    } else if rest.starts_with("->") {
        let (_, _, prev_start) = prev_stmt?;
        (Rule::strict_edge, *prev_start)
    } else {
        return None;
    };
    strict_failure(src, lines, rule, from)
}

/// Parses `src[from..]` with a strict rule and words its failure, if it fails.
fn strict_failure(src: &str, lines: &LineIndex, rule: Rule, from: usize) -> Option<ParseError> {
    use pest::Parser;
    let e = DotParser::parse(rule, &src[from..]).err()?;
    let rel = match e.location {
        pest::error::InputLocation::Pos(p) => p,
        pest::error::InputLocation::Span((s, _)) => s,
    };
    let deep_at = skip_space_and_comments(src, from + rel);
    let positives = match &e.variant {
        pest::error::ErrorVariant::ParsingError { positives, .. } => positives.clone(),
        pest::error::ErrorVariant::CustomError { .. } => Vec::new(),
    };
    let prev = previous_token(src, deep_at);
    let msg = if src[deep_at..].starts_with(':') {
        format!(
            "`:` cannot appear in an unquoted value: write \"{prev}{}\" in quotes",
            rest_word(&src[deep_at..])
        )
    } else if src[deep_at..].starts_with('<') {
        "HTML-like values (`<...>`) are not supported: use a quoted string".to_string()
    } else {
        expected_message(&positives, prev, src, deep_at)
    };
    Some(ParseError::new(lines.pos(src, deep_at), msg, src, deep_at))
}

fn rest_word(rest: &str) -> &str {
    let end = rest
        .find(|c: char| c.is_whitespace() || ",;]".contains(c))
        .unwrap_or(rest.len());
    &rest[..end]
}

fn expected_message(positives: &[Rule], prev: &str, src: &str, at: usize) -> String {
    let found = found_at(src, at);
    let is_value = |r: &Rule| {
        matches!(
            r,
            Rule::string
                | Rule::duration
                | Rule::float
                | Rule::integer
                | Rule::boolean
                | Rule::bare
        )
    };
    let mut wants: Vec<&str> = Vec::new();
    let mut push = |w: &'static str| {
        if !wants.contains(&w) {
            wants.push(w);
        }
    };
    for r in positives {
        match r {
            _ if is_value(r) => push("a value"),
            Rule::ident | Rule::node_id if prev == "->" => push("a node id"),
            Rule::node_id => push("a node id"),
            Rule::ident | Rule::key if prev == "[" || prev == "," || prev == ";" => {
                push("an attribute name")
            }
            Rule::ident => push("an identifier"),
            Rule::key => push("an attribute name"),
            Rule::edge_op => push("`->`"),
            Rule::attr_list => push("`[`"),
            Rule::attr => push("an attribute"),
            Rule::close => push("`}`"),
            _ => {}
        }
    }
    if wants.is_empty() {
        // pest does not report literals; describe by context instead.
        let want = match prev {
            "=" => "a value",
            "->" => "a node id",
            "[" | "," | ";" => "an attribute name or `]`",
            _ if is_attr_name(src, at) => "`=` after the attribute name",
            _ if src[..at].trim_end().ends_with(']') => "`;` or a new statement",
            _ => "`=` or `,` or `]`",
        };
        return format!("expected {want} after `{prev}`, found {found}");
    }
    let list = match wants.len() {
        1 => wants[0].to_string(),
        _ => format!(
            "{} or {}",
            wants[..wants.len() - 1].join(", "),
            wants[wants.len() - 1]
        ),
    };
    if prev.is_empty() {
        format!("expected {list}, found {found}")
    } else {
        format!("expected {list} after `{prev}`, found {found}")
    }
}

/// Whether the word before `at` follows `[`, `,` or `;` (so it is an attribute name).
fn is_attr_name(src: &str, at: usize) -> bool {
    let before = src[..at].trim_end();
    let word_start = word_start(before, |c| c.is_ascii_alphanumeric() || "_.".contains(c));
    let lead = before[..word_start].trim_end();
    word_start < before.len() && (lead.ends_with('[') || lead.ends_with(',') || lead.ends_with(';'))
}

pub(crate) fn header_error(src: &str, lines: &LineIndex) -> ParseError {
    if let Some(Unclosed::Comment(s)) = find_unclosed(src, 0) {
        let p = lines.pos(src, s);
        return ParseError::new(
            p,
            format!("unterminated block comment starting at {p}"),
            src,
            s,
        );
    }
    let at = skip_space_and_comments(src, 0);
    let rest = &src[at..];
    let word = rest_word(rest);
    let msg = if rest.is_empty() {
        "empty workflow: expected `digraph Name {`".to_string()
    } else if word == "graph" {
        "undirected graphs are not supported: use `digraph`".to_string()
    } else if word == "strict" {
        "strict graphs are not supported: use a plain `digraph`".to_string()
    } else if word == "digraph" || word.starts_with("digraph{") {
        let after = skip_space_and_comments(src, at + "digraph".len());
        if src[after..].starts_with('{') {
            "the digraph needs a name: write `digraph Name {`".to_string()
        } else {
            "expected `digraph Name {`: the name must be an identifier or a quoted string, followed by `{`".to_string()
        }
    } else {
        format!("expected `digraph Name {{` at the start of the file, found `{word}`")
    };
    ParseError::new(lines.pos(src, at), msg, src, at)
}

pub(crate) fn trailing_error(src: &str, lines: &LineIndex, end: usize) -> ParseError {
    if let Some(Unclosed::Comment(s)) = find_unclosed(src, end) {
        let p = lines.pos(src, s);
        return ParseError::new(
            p,
            format!("unterminated block comment starting at {p}"),
            src,
            s,
        );
    }
    let at = skip_space_and_comments(src, end);
    let word = rest_word(&src[at..]);
    let msg = if matches!(word, "digraph" | "graph" | "strict") {
        "only one graph per file is supported: found a second graph after the closing `}`"
            .to_string()
    } else {
        format!(
            "unexpected {} after the closing `}}` of the graph",
            found_at(src, at)
        )
    };
    ParseError::new(lines.pos(src, at), msg, src, at)
}
