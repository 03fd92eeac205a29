//! Parsing a file without holding all of its text: [`parse_file`] reads it in blocks and
//! builds statements as they become complete, so peak memory is the graph plus a buffer of
//! about 64 KiB instead of the graph plus the whole file (19.7 MiB at 100,000 nodes).
//!
//! Only the happy path streams. Anything else (a syntax error, text that is not UTF-8, a
//! read error) is handed to the whole-text parser ([`super::parse`]) on a fresh read of
//! the file, so errors, their positions and their wording are exactly the same as for
//! [`super::parse`] on the file's contents.
//!
//! Must not: report an error differently from [`super::parse`], or hold the whole file.

use super::build::{Builder, Parsed, Scope, State};
use super::{Graph, ParseError};
use std::io::Read;
use std::path::Path;

/// Bytes asked of the reader at a time, and how much unparsed text is kept ahead of the
/// parser (so a chunk of statements is rarely cut short by the end of the buffer). Tests
/// use small blocks so that small inputs cross many of them.
const BLOCK: usize = if cfg!(test) { 4096 } else { 16 * 1024 };

/// Reads and parses the DOT file at `path`. The outer error is the file's (cannot open or
/// read, not UTF-8), as `std::fs::read_to_string` reports it.
pub fn parse_file(path: &Path) -> std::io::Result<Result<Graph, ParseError>> {
    Ok(parse_file_indexed(path)?.map(|p| p.graph))
}

/// [`parse_file`], keeping the node index and edge ends.
pub(crate) fn parse_file_indexed(path: &Path) -> std::io::Result<Result<Parsed, ParseError>> {
    if let Ok(file) = std::fs::File::open(path) {
        if let Some(parsed) = stream(file) {
            return Ok(Ok(parsed));
        }
    }
    let src = std::fs::read_to_string(path)?;
    Ok(super::build::parse_indexed(&src))
}

/// The text read so far and not yet dropped, and the reader it comes from.
struct Input<R> {
    reader: R,
    text: String,
    /// Bytes of a character cut by the end of the last read.
    partial: Vec<u8>,
    block: Vec<u8>,
    eof: bool,
}

impl<R: Read> Input<R> {
    /// Reads until `text` holds `want` more bytes or the input ends. `None` on a read error
    /// or bytes that are not UTF-8.
    fn fill(&mut self, want: usize) -> Option<()> {
        let target = self.text.len() + want;
        while !self.eof && self.text.len() < target {
            let n = loop {
                match self.reader.read(&mut self.block) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => return None,
                }
            };
            if n == 0 {
                self.eof = true;
                return self.partial.is_empty().then_some(());
            }
            // Usually no character is cut: take the block as it is, without a copy.
            let bytes = if self.partial.is_empty() {
                &self.block[..n]
            } else {
                self.partial.extend_from_slice(&self.block[..n]);
                &self.partial[..]
            };
            let valid = match std::str::from_utf8(bytes) {
                Ok(s) => s.len(),
                // A character cut at the end of the block: keep its bytes for the next read.
                Err(e) if e.error_len().is_none() => e.valid_up_to(),
                Err(_) => return None,
            };
            self.text
                .push_str(std::str::from_utf8(&bytes[..valid]).ok()?);
            let rest = bytes[valid..].to_vec();
            self.partial = rest;
        }
        Some(())
    }

    /// Reads more when less than a block of unparsed text is left after `offset`.
    fn keep_ahead(&mut self, offset: usize) -> Option<()> {
        if self.text.len() - offset < BLOCK {
            self.fill(BLOCK)?;
        }
        Some(())
    }
}

/// The graph, or `None` when the whole-text parser must decide (see the module doc).
fn stream<R: Read>(reader: R) -> Option<Parsed> {
    let mut input = Input {
        reader,
        text: String::new(),
        partial: Vec::new(),
        block: vec![0; BLOCK],
        eof: false,
    };
    let mut st = State::default();
    input.fill(BLOCK)?;
    // The header ends with `{`, so once it parses nothing later can change it.
    let mut offset = loop {
        let mut b = Builder {
            src: &input.text,
            st: &mut st,
        };
        match b.parse_header() {
            Ok(end) => break end,
            Err(_) if input.eof => return None,
            // Read as much again as is held, so retries cost linear time in all.
            Err(_) => input.fill(input.text.len().max(BLOCK))?,
        }
    };
    let mut scope = Scope::default();
    loop {
        // Drop what is built once it is most of the buffer (a memmove of the rest).
        if offset >= BLOCK && offset * 2 >= input.text.len() {
            st.forget(&input.text, offset);
            input.text.drain(..offset);
            offset = 0;
        }
        input.keep_ahead(offset)?;
        let mut b = Builder {
            src: &input.text,
            st: &mut st,
        };
        if input.eof {
            // All the rest is in memory: the whole-text logic finishes the job.
            b.run(offset, &mut scope).ok()?;
            return Some(st.finish());
        }
        let (after, _) = b.chunk(offset, &mut scope, false).ok()?;
        if after > offset {
            offset = after;
            continue;
        }
        // Not one complete plain statement: a subgraph, the closing brace, a statement
        // longer than the buffer, or an error. Take a subgraph when it is complete;
        // otherwise read more (as much again as is held) and try again.
        match b.complete_item(offset, &mut scope) {
            Some(end) => offset = end,
            None => input.fill(input.text.len().max(BLOCK))?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader handing out `step` bytes at a time, to cut statements, strings and
    /// multi-byte characters at every place.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn streamed(src: &str, step: usize) -> Option<Graph> {
        stream(Trickle {
            data: src.as_bytes(),
            step,
        })
        .map(|p| p.graph)
    }

    /// A graph long enough to be compacted several times, with subgraphs, defaults,
    /// chains, comments, multi-line statements and non-ASCII text along the way.
    fn big_source() -> String {
        let mut s = String::from("digraph G {\n  graph [goal=\"é\"]\n  node [timeout=\"5s\"]\n");
        for i in 0..1200 {
            match i % 6 {
                0 => s.push_str(&format!("  n{i} [label=\"Stüfe {i}\", prompt=\"ünïcode\\\"q\\\" {i}\"]\n")),
                1 => s.push_str(&format!("  n{} -> n{i} -> x{i} [condition=\"outcome=success\"];\n", i - 1)),
                2 => s.push_str(&format!("  subgraph cluster_{i} {{ label=\"Group {i}\"; edge [weight=2]; s{i} -> n{} }}\n", i - 2)),
                3 => s.push_str(&format!("  /* comment {i} */ n{i}\n  [\n shape=box ,\n max_retries=2 ]\n")),
                4 => s.push_str(&format!("  // line {i}\n  k{i} = v{i}\n")),
                _ => s.push_str(&format!("  {{ a{i} b{i} }}\n")),
            }
        }
        s.push_str("  start [shape=Mdiamond]\n  exit [shape=Msquare]\n}\n// trailing comment\n");
        s
    }

    #[test]
    fn streaming_builds_the_same_graph_as_the_whole_text() {
        let src = big_source();
        assert!(src.len() > 3 * BLOCK, "the test must cross several blocks");
        let whole = super::super::parse(&src).unwrap();
        for step in [BLOCK, 1021, 1 << 20] {
            let g = streamed(&src, step).expect("streams");
            assert_eq!(g, whole, "read {step} bytes at a time");
        }
    }

    #[test]
    fn small_files_stream_too() {
        let src = "digraph \"x y\" { a -> b [label=\"ü\"] }";
        assert_eq!(streamed(src, 1).unwrap(), super::super::parse(src).unwrap());
    }

    #[test]
    fn errors_and_bad_bytes_are_left_to_the_whole_text_parser() {
        let mut src = big_source();
        let middle = src[src.len() / 2..].find('\n').unwrap() + src.len() / 2;
        src.insert_str(middle, "\n  a -> [x=1]\n");
        assert!(streamed(&src, BLOCK).is_none());
        assert!(streamed("digraph { a -> b ", 7).is_none());
        assert!(streamed("digraph { a } junk", 7).is_none());
        let bad = Trickle {
            data: b"digraph { a [label=\"\xff\"] }",
            step: 5,
        };
        assert!(stream(bad).is_none());
    }

    #[test]
    fn parse_file_reports_errors_like_the_whole_text_parser() {
        let dir = std::env::temp_dir().join(format!("svc-stream-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.dot");
        let src = "digraph {\n  a -> b\n  c -> \n}\n";
        std::fs::write(&path, src).unwrap();
        let streamed = parse_file(&path).unwrap().unwrap_err();
        let whole = super::super::parse(src).unwrap_err();
        assert_eq!(streamed.message, whole.message);
        assert_eq!(streamed.pos, whole.pos);
        assert!(parse_file(&dir.join("missing.dot")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
