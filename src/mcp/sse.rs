//! Bounded reading for MCP transports: lines of at most a given size (stdout, event
//! streams) and Server-Sent Events (`event:`, `data:`, comments, blank-line dispatch).
//! Must not interpret the JSON-RPC messages inside.

use std::io::{self, BufRead};

/// One line read by [`read_line`].
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A line (without its `\n` or `\r\n`) is in the buffer.
    Full,
    /// The line went on past the limit; what was read of it is dropped.
    TooLong,
    /// The stream ended (a last line without `\n` is returned as a `Line` first).
    Eof,
}

/// Reads one `\n`-terminated line into `buf` (cleared first), never holding more than `max`
/// bytes. After `TooLong` the rest of that line is still unread.
pub fn read_line(r: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<Line> {
    buf.clear();
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(if buf.is_empty() {
                Line::Eof
            } else {
                Line::Full
            });
        }
        let (take, done) = match memchr::memchr(b'\n', chunk) {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if buf.len() + take > max + 1 {
            return Ok(Line::TooLong);
        }
        buf.extend_from_slice(&chunk[..take]);
        r.consume(take);
        if done {
            buf.pop();
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(Line::Full);
        }
    }
}

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// `event:` (absent means `message`).
    pub name: Option<String>,
    /// The `data:` lines joined by `\n`.
    pub data: String,
}

/// Why an event stream could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("the event stream is not UTF-8")]
    NotUtf8,
    #[error("an event of the stream is larger than {0} bytes")]
    TooLarge(usize),
    #[error("reading the event stream failed: {0}")]
    Io(String),
}

/// Reads events one at a time; at most `max` bytes are held for one event.
pub struct EventReader<R: BufRead> {
    inner: R,
    max: usize,
    line: Vec<u8>,
}

impl<R: BufRead> EventReader<R> {
    pub fn new(inner: R, max: usize) -> Self {
        Self {
            inner,
            max,
            line: Vec::new(),
        }
    }

    /// The next event; `Ok(None)` when the stream ends (an unfinished event is dropped, as
    /// the SSE rules say).
    pub fn next_event(&mut self) -> Result<Option<Event>, StreamError> {
        let mut name: Option<String> = None;
        let mut data = String::new();
        let mut has_data = false;
        loop {
            match read_line(&mut self.inner, &mut self.line, self.max) {
                Ok(Line::Full) => {}
                Ok(Line::TooLong) => return Err(StreamError::TooLarge(self.max)),
                Ok(Line::Eof) => return Ok(None),
                Err(e) => return Err(StreamError::Io(e.to_string())),
            }
            let line = std::str::from_utf8(&self.line).map_err(|_| StreamError::NotUtf8)?;
            if line.is_empty() {
                if has_data {
                    return Ok(Some(Event { name, data }));
                }
                name = None;
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line, ""),
            };
            match field {
                "event" => name = Some(value.to_string()),
                "data" => {
                    if has_data {
                        data.push('\n');
                    }
                    if data.len() + value.len() > self.max {
                        return Err(StreamError::TooLarge(self.max));
                    }
                    data.push_str(value);
                    has_data = true;
                }
                // `id` and `retry` matter for resuming streams, which svc does not do.
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_bounded_and_split_on_newlines() {
        let mut r = io::BufReader::with_capacity(4, &b"ab\r\ncdefgh\nij"[..]);
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut r, &mut buf, 5).unwrap(), Line::Full);
        assert_eq!(buf, b"ab");
        assert_eq!(read_line(&mut r, &mut buf, 5).unwrap(), Line::TooLong);
        let mut r = io::BufReader::new(&b"ij"[..]);
        assert_eq!(read_line(&mut r, &mut buf, 5).unwrap(), Line::Full);
        assert_eq!(buf, b"ij");
        assert_eq!(read_line(&mut r, &mut buf, 5).unwrap(), Line::Eof);
    }

    #[test]
    fn events_join_data_lines_and_skip_comments() {
        let text = ": ping\n\nevent: endpoint\ndata: /messages?x=1\n\ndata: {\"a\":\ndata: 1}\nid: 7\n\ndata: unfinished";
        let mut r = EventReader::new(io::BufReader::new(text.as_bytes()), 1024);
        let e = r.next_event().unwrap().unwrap();
        assert_eq!(e.name.as_deref(), Some("endpoint"));
        assert_eq!(e.data, "/messages?x=1");
        let e = r.next_event().unwrap().unwrap();
        assert_eq!(e.name, None);
        assert_eq!(e.data, "{\"a\":\n1}");
        assert_eq!(r.next_event().unwrap(), None);
    }

    #[test]
    fn oversized_and_binary_events_are_errors() {
        let big = format!("data: {}\n\n", "x".repeat(100));
        let mut r = EventReader::new(io::BufReader::new(big.as_bytes()), 50);
        assert_eq!(r.next_event().unwrap_err(), StreamError::TooLarge(50));
        let mut r = EventReader::new(io::BufReader::new(&b"data: \xff\xfe\n\n"[..]), 50);
        assert_eq!(r.next_event().unwrap_err(), StreamError::NotUtf8);
    }
}
