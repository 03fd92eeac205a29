use std::io::Read;
use std::io::Result as IoResult;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

/// svc patch: raises `flag` when dropped before its reader reached the end (a chunked body
/// the application did not read to the end; the connection then closes).
pub struct UntilEnd<R: Read> {
    reader: R,
    ended: bool,
    flag: Arc<AtomicBool>,
}

impl<R: Read> UntilEnd<R> {
    pub fn new(reader: R, flag: Arc<AtomicBool>) -> Self {
        UntilEnd {
            reader,
            ended: false,
            flag,
        }
    }
}

impl<R: Read> Read for UntilEnd<R> {
    fn read(&mut self, buf: &mut [u8]) -> IoResult<usize> {
        let n = self.reader.read(buf)?;
        if n == 0 && !buf.is_empty() {
            self.ended = true;
        }
        Ok(n)
    }
}

impl<R: Read> Drop for UntilEnd<R> {
    fn drop(&mut self) {
        if !self.ended {
            self.flag.store(true, Ordering::SeqCst);
        }
    }
}

/// A `Reader` that reads exactly the number of bytes from a sub-reader.
///
/// If the limit is reached, it returns EOF. If the limit is not reached
/// when the destructor is called, the remaining bytes will be read and
/// thrown away.
pub struct EqualReader<R>
where
    R: Read,
{
    reader: R,
    size: usize,
    last_read_signal: Sender<IoResult<()>>,
    /// svc patch: when set, an unread rest is not drained on drop; the flag is raised instead
    /// (the connection then closes).
    abandoned: Option<Arc<AtomicBool>>,
}

impl<R> EqualReader<R>
where
    R: Read,
{
    pub fn new(reader: R, size: usize) -> (EqualReader<R>, Receiver<IoResult<()>>) {
        let (tx, rx) = channel();

        let r = EqualReader {
            reader,
            size,
            last_read_signal: tx,
            abandoned: None,
        };

        (r, rx)
    }

    /// svc patch: see the `abandoned` field.
    pub fn abandon_into(mut self, flag: Option<Arc<AtomicBool>>) -> Self {
        self.abandoned = flag;
        self
    }
}

impl<R> Read for EqualReader<R>
where
    R: Read,
{
    fn read(&mut self, buf: &mut [u8]) -> IoResult<usize> {
        if self.size == 0 {
            return Ok(0);
        }

        let buf = if buf.len() < self.size {
            buf
        } else {
            &mut buf[..self.size]
        };

        match self.reader.read(buf) {
            Ok(len) => {
                self.size -= len;
                Ok(len)
            }
            err @ Err(_) => err,
        }
    }
}

impl<R> Drop for EqualReader<R>
where
    R: Read,
{
    fn drop(&mut self) {
        let mut remaining_to_read = self.size;
        if remaining_to_read > 0 {
            if let Some(flag) = &self.abandoned {
                flag.store(true, Ordering::SeqCst);
                return;
            }
        }

        // svc patch: a fixed buffer; this was `vec![0; remaining_to_read]` per read, which
        // allocates whatever a client declared.
        let mut buf = vec![0; remaining_to_read.min(8 * 1024)];
        while remaining_to_read > 0 {
            let want = remaining_to_read.min(buf.len());
            match self.reader.read(&mut buf[..want]) {
                Err(e) => {
                    self.last_read_signal.send(Err(e)).ok();
                    break;
                }
                Ok(0) => {
                    self.last_read_signal.send(Ok(())).ok();
                    break;
                }
                Ok(other) => {
                    remaining_to_read -= other;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::EqualReader;
    use std::io::Read;

    #[test]
    fn test_limit() {
        use std::io::Cursor;

        let mut org_reader = Cursor::new("hello world".to_string().into_bytes());

        {
            let (mut equal_reader, _) = EqualReader::new(org_reader.by_ref(), 5);

            let mut string = String::new();
            equal_reader.read_to_string(&mut string).unwrap();
            assert_eq!(string, "hello");
        }

        let mut string = String::new();
        org_reader.read_to_string(&mut string).unwrap();
        assert_eq!(string, " world");
    }

    #[test]
    fn test_not_enough() {
        use std::io::Cursor;

        let mut org_reader = Cursor::new("hello world".to_string().into_bytes());

        {
            let (mut equal_reader, _) = EqualReader::new(org_reader.by_ref(), 5);

            let mut vec = [0];
            equal_reader.read_exact(&mut vec).unwrap();
            assert_eq!(vec[0], b'h');
        }

        let mut string = String::new();
        org_reader.read_to_string(&mut string).unwrap();
        assert_eq!(string, " world");
    }
}
