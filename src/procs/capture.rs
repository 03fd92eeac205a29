//! Captured output of a process: each stream's kept text (everything up to [`OUTPUT_LIMIT`],
//! else its head and tail around a marker, on character boundaries), the two streams
//! interleaved in arrival order, and every byte counted.
//!
//! Owns: output buffers. Must not touch: descriptors or processes (`wait`).

/// Bytes of each stream (and of the merged text) kept in memory; beyond it the head and
/// the tail are kept around a marker, and every byte is still counted.
pub const OUTPUT_LIMIT: usize = 4 * 1024 * 1024;

/// Kept text of one stream: everything up to [`OUTPUT_LIMIT`], else head + marker + tail.
#[derive(Debug, Default)]
pub(super) struct Buffer {
    head: Vec<u8>,
    tail: Vec<u8>,
    total: u64,
    closed: bool,
}

/// The text kept of one stream.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Kept {
    pub text: String,
    /// Every byte the stream produced, including the ones cut from `text`.
    pub total: u64,
    /// `text` lost its middle to [`OUTPUT_LIMIT`].
    pub truncated: bool,
}

const HALF: usize = OUTPUT_LIMIT / 2;

impl Buffer {
    pub(super) fn push(&mut self, mut bytes: &[u8]) {
        if self.closed {
            return;
        }
        self.total += bytes.len() as u64;
        let room = HALF.saturating_sub(self.head.len());
        let take = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..take]);
        bytes = &bytes[take..];
        self.tail.extend_from_slice(bytes);
        if self.tail.len() >= 2 * HALF {
            let excess = self.tail.len() - HALF;
            self.tail.drain(..excess);
        }
    }

    /// Takes the kept text; later pushes are dropped.
    pub(super) fn take(&mut self) -> Kept {
        self.closed = true;
        let head = std::mem::take(&mut self.head);
        let mut tail = std::mem::take(&mut self.tail);
        let kept = (head.len() + tail.len()) as u64;
        let omitted = self.total - kept.min(self.total);
        let tail_cut = tail.len().saturating_sub(HALF);
        tail.drain(..tail_cut);
        let omitted = omitted + tail_cut as u64;
        if omitted == 0 {
            let mut all = head;
            all.extend_from_slice(&tail);
            return Kept {
                text: String::from_utf8_lossy(&all).into_owned(),
                total: self.total,
                truncated: false,
            };
        }
        let head_text = String::from_utf8_lossy(trim_partial_end(&head));
        let tail_text = String::from_utf8_lossy(trim_partial_start(&tail));
        Kept {
            text: format!("{head_text}\n[... {omitted} bytes omitted ...]\n{tail_text}"),
            total: self.total,
            truncated: true,
        }
    }
}

/// Drops an incomplete UTF-8 sequence at the end (a cut in the middle of a character).
fn trim_partial_end(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => &bytes[..e.valid_up_to()],
        _ => bytes,
    }
}

/// Drops continuation bytes at the start (a cut in the middle of a character).
fn trim_partial_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|b| (**b & 0xC0) == 0x80)
        .count();
    &bytes[skip..]
}

/// The three buffers the output fills.
#[derive(Debug, Default)]
pub(super) struct Buffers {
    pub(super) stdout: Buffer,
    pub(super) stderr: Buffer,
    pub(super) merged: Buffer,
}

/// The kept text of both streams and of the two interleaved.
#[derive(Debug, Default)]
pub(super) struct Output {
    pub(super) stdout: Kept,
    pub(super) stderr: Kept,
    pub(super) merged: Kept,
}

#[derive(Clone, Copy)]
pub(super) enum Stream {
    Stdout,
    Stderr,
}

/// Length of the prefix that does not end inside a UTF-8 character.
pub(super) fn complete_prefix_len(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        _ => bytes.len(),
    }
}

impl Buffers {
    pub(super) fn push(&mut self, stream: Stream, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        match stream {
            Stream::Stdout => self.stdout.push(bytes),
            Stream::Stderr => self.stderr.push(bytes),
        }
        self.merged.push(bytes);
    }

    /// Later pushes are dropped (a drain that keeps nothing).
    pub(super) fn close(&mut self) {
        for b in [&mut self.stdout, &mut self.stderr, &mut self.merged] {
            b.closed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_keeps_head_and_tail_on_char_boundaries() {
        let mut b = Buffer::default();
        let chunk = "é".repeat(1000);
        for _ in 0..(OUTPUT_LIMIT / chunk.len() + 700) {
            b.push(chunk.as_bytes());
            b.push(b"x");
        }
        let total = b.total;
        let kept = b.take();
        assert!(kept.truncated && kept.total == total);
        assert!(!kept.text.contains('\u{FFFD}'));
        b.push(b"late");
        assert_eq!(b.total, total);
    }

    #[test]
    fn reader_never_splits_a_character() {
        assert_eq!(complete_prefix_len("aé".as_bytes()), 3);
        assert_eq!(complete_prefix_len(&"aé".as_bytes()[..2]), 1);
        assert_eq!(complete_prefix_len(b"a\xff"), 2);
    }
}
