//! A hand-written reader for the statements that make up nearly all of a real file: node,
//! edge-chain and `key = value` statements with attribute lists of plain values. It is
//! only a shortcut: `grammar/dot.pest` stays the definition of the language. For each
//! statement the reader either returns exactly what the grammar's parse would give the
//! builder (the same ids, keys, values and positions) or gives up, and the statement goes
//! to pest. It gives up on anything it does not fully know: comments, keywords, numbers
//! other than plain integers and durations, a `-` or `.` it does not expect, the end of
//! the text in memory, every error. `tests::agrees_with_pest` holds it to that.
//!
//! Why: pest calls a function per character and per alternative; on a 100,000-node file
//! statement parsing was about half of `svc validate`'s time.
//!
//! It only reads: it must not build the graph, apply defaults or word errors (the builder
//! and `error` do that, the same for both readers).

use super::value::unescape;
use super::Value;

/// One statement, with byte offsets (into the text given to [`statement`]) where the
/// builder asks for positions.
pub(super) enum Stmt<'a> {
    /// `id [attrs]` (attributes optional).
    Node {
        id: (&'a str, usize),
        attrs: Vec<(&'a str, Value)>,
    },
    /// `a -> b -> ... [attrs]`.
    Edges {
        ids: Vec<(&'a str, usize)>,
        attrs: Vec<(&'a str, Value)>,
    },
    /// `key = value` (a graph attribute).
    Kv {
        key: &'a str,
        at: usize,
        value: Value,
    },
}

/// The statement starting at `offset` (after optional white space) and the offset after
/// it (and after its `;`, if any); `None` to leave it to the grammar. A statement is only
/// taken when the text after it shows that it has ended, so text cut at any point (the
/// streaming parser's buffer) is never mistaken for a shorter statement.
pub(super) fn statement(src: &str, offset: usize) -> Option<(Stmt<'_>, usize)> {
    let mut s = Scan {
        src,
        b: src.as_bytes(),
        i: offset,
    };
    s.space()?;
    let start = s.i;
    let first = s.key()?;
    let head = first.split('.').next().unwrap_or(first);
    if is_keyword(head) {
        return None;
    }
    s.space()?;
    let stmt = match s.peek()? {
        b'=' => {
            s.i += 1;
            s.space()?;
            let value = s.value()?;
            Stmt::Kv {
                key: first,
                at: start,
                value,
            }
        }
        // Only `key = value` has dotted names.
        _ if first.len() != head.len() => return None,
        b'-' => {
            let mut ids = vec![(first, start)];
            while s.peek() == Some(b'-') {
                if s.b.get(s.i + 1) != Some(&b'>') {
                    return None;
                }
                s.i += 2;
                s.space()?;
                let at = s.i;
                let id = s.ident()?;
                if is_keyword(id) {
                    return None;
                }
                ids.push((id, at));
                s.space()?;
            }
            let attrs = if s.peek()? == b'[' {
                s.attr_list()?
            } else {
                Vec::new()
            };
            Stmt::Edges { ids, attrs }
        }
        b'[' => Stmt::Node {
            id: (first, start),
            attrs: s.attr_list()?,
        },
        _ => Stmt::Node {
            id: (first, start),
            attrs: Vec::new(),
        },
    };
    // The statement has ended only if something other than white space follows.
    s.space()?;
    if s.peek()? == b';' {
        s.i += 1;
    }
    Some((stmt, s.i))
}

/// Words the grammar reads as keywords where a node id or statement starts.
fn is_keyword(word: &str) -> bool {
    matches!(
        word,
        "node" | "edge" | "graph" | "digraph" | "subgraph" | "strict"
    )
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

struct Scan<'a> {
    src: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    /// Skips the grammar's white space; `None` at a `/` (a comment, or an error).
    fn space(&mut self) -> Option<()> {
        while let Some(c) = self.peek() {
            match c {
                b'\t'..=b'\r' | b' ' => self.i += 1,
                b'/' => return None,
                _ => break,
            }
        }
        Some(())
    }

    /// `ident`: a letter or `_`, then letters, digits and `_`. `None` when the text in
    /// memory ends inside it.
    fn ident(&mut self) -> Option<&'a str> {
        let start = self.i;
        if !is_ident_start(self.peek()?) {
            return None;
        }
        self.i += 1;
        while is_ident_char(self.peek()?) {
            self.i += 1;
        }
        Some(&self.src[start..self.i])
    }

    /// `key`: identifiers joined by dots. A dot not followed by an identifier is left to
    /// the grammar.
    fn key(&mut self) -> Option<&'a str> {
        let start = self.i;
        self.ident()?;
        while self.peek()? == b'.' {
            self.i += 1;
            self.ident()?;
        }
        Some(&self.src[start..self.i])
    }

    /// `[ key = value (, or ;)? ... ]`.
    fn attr_list(&mut self) -> Option<Vec<(&'a str, Value)>> {
        self.i += 1;
        let mut attrs = Vec::new();
        loop {
            self.space()?;
            if self.peek()? == b']' {
                self.i += 1;
                return Some(attrs);
            }
            let key = self.key()?;
            self.space()?;
            if self.peek()? != b'=' {
                return None;
            }
            self.i += 1;
            self.space()?;
            attrs.push((key, self.value()?));
            self.space()?;
            if matches!(self.peek()?, b',' | b';') {
                self.i += 1;
            }
        }
    }

    /// A quoted string, a plain integer, a duration, `true`/`false` or a bare word, as
    /// the grammar's `value` reads them (first alternative that matches wins).
    fn value(&mut self) -> Option<Value> {
        let start = self.i;
        let c = self.peek()?;
        if c == b'"' {
            let body_start = start + 1;
            let mut j = body_start;
            loop {
                match self.b[j..].iter().position(|&c| c == b'"' || c == b'\\') {
                    Some(k) if self.b[j + k] == b'"' => {
                        self.i = j + k + 1;
                        return Some(Value::Str(unescape(&self.src[body_start..j + k]).into()));
                    }
                    // A backslash escapes the next character, whatever it is.
                    Some(k) if j + k + 1 < self.b.len() => j += k + 2,
                    _ => return None,
                }
            }
        }
        if c.is_ascii_digit() {
            while self.peek()?.is_ascii_digit() {
                self.i += 1;
            }
            let digits = self.i;
            let unit = match (self.peek()?, self.b.get(self.i + 1)) {
                (b'm', Some(b's')) => 2,
                (b'm' | b's' | b'h' | b'd', _) => 1,
                _ => 0,
            };
            self.i += unit;
            let next = self.peek()?;
            if is_ident_char(next) || next == b'.' {
                return None;
            }
            let text = &self.src[start..self.i];
            return Some(if unit > 0 {
                Value::Duration(text.into())
            } else {
                debug_assert_eq!(digits, self.i);
                text.parse()
                    .map(Value::Int)
                    .unwrap_or_else(|_| Value::Bare(text.into()))
            });
        }
        if is_ident_start(c) {
            self.i += 1;
            while matches!(self.peek()?, c if is_ident_char(c) || c == b'-' || c == b'.') {
                self.i += 1;
            }
            return Some(match &self.src[start..self.i] {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                text => Value::Bare(text.into()),
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dot::build::{attr_list, key_value, DotParser, Rule};
    use crate::dot::Attrs;
    use pest::Parser;

    /// What the builder is given for a statement: its kind, ids or key with their offsets,
    /// and the attributes (a graph attribute is one key/value pair).
    type Seen = (&'static str, Vec<(String, usize)>, Attrs);

    fn attrs_of(list: Vec<(&str, Value)>) -> Attrs {
        let mut attrs = Attrs::new();
        for (k, v) in list {
            attrs.set(k, v);
        }
        attrs
    }

    fn by_hand(src: &str) -> Option<(Seen, usize)> {
        let (stmt, end) = statement(src, 0)?;
        let seen = match stmt {
            Stmt::Node { id, attrs } => ("node", vec![(id.0.into(), id.1)], attrs_of(attrs)),
            Stmt::Edges { ids, attrs } => (
                "edges",
                ids.into_iter().map(|(i, o)| (i.into(), o)).collect(),
                attrs_of(attrs),
            ),
            Stmt::Kv { key, at, value } => {
                ("kv", vec![(key.into(), at)], attrs_of(vec![(key, value)]))
            }
        };
        Some((seen, end))
    }

    /// The first statement as the grammar reads it, and where its piece ends.
    fn by_grammar(src: &str) -> Option<(Seen, usize)> {
        let chunk = DotParser::parse(Rule::chunk, src).ok()?.next()?;
        let piece = chunk.into_inner().next()?;
        let end = piece.as_span().end();
        let stmt = piece.into_inner().next()?;
        let start = stmt.as_span().start();
        let seen = match stmt.as_rule() {
            Rule::node_stmt | Rule::edge_stmt => {
                let kind = if stmt.as_rule() == Rule::node_stmt {
                    "node"
                } else {
                    "edges"
                };
                let mut ids = Vec::new();
                let mut attrs = Attrs::new();
                for x in stmt.into_inner() {
                    match x.as_rule() {
                        Rule::node_id => ids.push((x.as_str().into(), x.as_span().start())),
                        _ => attrs = attr_list(x),
                    }
                }
                (kind, ids, attrs)
            }
            Rule::kv_stmt => {
                let (k, v) = key_value(stmt);
                ("kv", vec![(k.into(), start)], attrs_of(vec![(k, v)]))
            }
            _ => return None,
        };
        Some((seen, end))
    }

    fn is_space(s: &str) -> bool {
        s.bytes().all(|c| matches!(c, b'\t'..=b'\r' | b' '))
    }

    /// Whenever the reader takes a statement of `src`, or of any prefix of it (text cut
    /// short, as in the streaming parser's buffer), the grammar reads the same statement
    /// from the whole text, ending at the same place (up to white space).
    fn check(src: &str) -> bool {
        let mut taken = false;
        for cut in (0..=src.len()).filter(|&c| src.is_char_boundary(c)) {
            let Some((mine, my_end)) = by_hand(&src[..cut]) else {
                continue;
            };
            taken = true;
            // The builder refuses keywords as node ids; those statements are the grammar's.
            if mine.0 != "kv" {
                assert!(mine.1.iter().all(|(id, _)| !is_keyword(id)), "{src:?}");
            }
            let Some((theirs, their_end)) = by_grammar(src) else {
                panic!(
                    "the reader took {:?} from {src:?}; the grammar does not",
                    &src[..cut]
                );
            };
            assert_eq!(mine, theirs, "{src:?} cut at {cut}");
            let (a, b) = (my_end.min(their_end), my_end.max(their_end));
            assert!(
                is_space(&src[a..b]),
                "{src:?}: ends {my_end} and {their_end}"
            );
        }
        taken
    }

    #[test]
    fn agrees_with_pest_on_common_statements() {
        let cases = [
            "n1 [label=\"Stage 1\", prompt=\"a \\\"q\\\" \\\\ é\", max_retries=2, timeout=\"900s\"]\n",
            "n1 -> n2\n",
            "n1 -> n2 -> n3 [condition=\"outcome=failed\", label=\"retry\", weight=1];\n",
            "a->b;c",
            "start [shape=Mdiamond]\n",
            "goal = \"ship it\"\n",
            "x.y.z = true\n",
            "rankdir=LR;",
            "a [t=5s; u=250ms, v=3d w=4h x=7m y=false z=gpt-5.2 q=_a.b-c]\n",
            "a [] b",
            "a\n  ->\n  b\n  [ k = v ]\n}",
            "a [n=99999999999999999999]\n",
            "a [k=\"line\\\ncontinued\"]\n",
        ];
        for case in cases {
            // The reader needs to see what follows a statement.
            let src = format!("{case}}}");
            assert!(check(&src), "the reader takes {src:?}");
        }
    }

    #[test]
    fn agrees_with_pest_on_random_statements() {
        let pieces = [
            "a",
            "n1",
            "_x",
            "B2",
            "node",
            "edge",
            "graph",
            "subgraph",
            "strict",
            "digraph",
            "subgraphs",
            "->",
            "-",
            ">",
            "=",
            "[",
            "]",
            ",",
            ";",
            " ",
            "\n",
            "\t",
            "/* c */",
            "// c\n",
            ".",
            "\"s\"",
            "\"a\\\"b\"",
            "\"é\"",
            "\"\\\\\"",
            "\"",
            "\\",
            "5",
            "5s",
            "5ms",
            "5m",
            "5msx",
            "10h",
            "3d",
            "1.5",
            ".5",
            "-1",
            "+2",
            "true",
            "false",
            "true-x",
            "gpt-5.2",
            "LR",
            "x.y",
            "99999999999999999999",
            "é",
            "{",
            "}",
            ":",
            "<",
        ];
        let mut seed: u64 = 16;
        let mut next = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        let mut taken = 0;
        for _ in 0..6_000 {
            let len = 1 + next(12);
            let src: String = (0..len).map(|_| pieces[next(pieces.len())]).collect();
            taken += usize::from(check(&src));
        }
        assert!(taken > 300, "only {taken} statements were read by hand");
    }
}
