use ascii::AsciiString;

use std::io::Error as IoError;
use std::io::Result as IoResult;
use std::io::{BufReader, BufWriter, ErrorKind, Read};

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::limits::Limits;
use crate::util::deadline::Deadline;

use crate::common::{HTTPVersion, Method};
use crate::util::RefinedTcpStream;
use crate::util::{SequentialReader, SequentialReaderBuilder, SequentialWriterBuilder};
use crate::Request;

/// A ClientConnection is an object that will store a socket to a client
/// and return Request objects.
pub struct ClientConnection {
    // address of the client
    remote_addr: IoResult<Option<SocketAddr>>,

    // sequence of Readers to the stream, so that the data is not read in
    //  the wrong order
    source: SequentialReaderBuilder<BufReader<RefinedTcpStream>>,

    // sequence of Writers to the stream, to avoid writing response #2 before
    //  response #1
    sink: SequentialWriterBuilder<BufWriter<RefinedTcpStream>>,

    // Reader to read the next header from
    next_header_source: SequentialReader<BufReader<RefinedTcpStream>>,

    // set to true if we know that the previous request is the last one
    no_more_requests: bool,

    // true if the connection goes through SSL
    secure: bool,

    /// svc patch: the bounds this connection is read under.
    limits: Arc<Limits>,
    /// svc patch: the read deadline of the socket's read half.
    deadline: Arc<Deadline>,
    /// svc patch: raised when a request's body was left unread (`Limits::close_on_unread_body`).
    abandoned: Arc<AtomicBool>,
    /// svc patch: no request has been read yet.
    first: bool,
}

/// Error that can happen when reading a request.
#[derive(Debug)]
enum ReadError {
    WrongRequestLine,
    WrongHeader(HTTPVersion),
    /// the client sent an unrecognized `Expect` header
    ExpectationFailed(HTTPVersion),
    ReadIoError(IoError),
    /// svc patch: the request line and headers exceed `Limits::max_head_bytes` or
    /// `Limits::max_headers`
    HeadTooLarge,
    /// svc patch: the previous request's body was left unread; the connection cannot go on
    Abandoned,
}

impl ClientConnection {
    /// Creates a new `ClientConnection` that takes ownership of the `TcpStream`.
    ///
    /// svc patch: read under `limits` (was `new(write_socket, read_socket)`).
    pub(crate) fn with_limits(
        write_socket: RefinedTcpStream,
        mut read_socket: RefinedTcpStream,
        limits: Arc<Limits>,
    ) -> ClientConnection {
        let remote_addr = read_socket.peer_addr();
        let secure = read_socket.secure();
        let deadline = Arc::new(Deadline::new());
        let timed = limits.head_timeout.is_some()
            || limits.idle_timeout.is_some()
            || limits.body_timeout.is_some();
        let read_socket = if timed {
            read_socket.with_deadline(Arc::clone(&deadline))
        } else {
            read_socket
        };

        let mut source = SequentialReaderBuilder::new(BufReader::with_capacity(1024, read_socket));
        let first_header = source.next().unwrap();

        ClientConnection {
            source,
            sink: SequentialWriterBuilder::new(BufWriter::with_capacity(1024, write_socket)),
            remote_addr,
            next_header_source: first_header,
            no_more_requests: false,
            secure,
            limits,
            deadline,
            abandoned: Arc::new(AtomicBool::new(false)),
            first: true,
        }
    }

    /// svc patch: writes tiny_http's own error response (see `Limits::error_response`); the
    /// caller then closes the connection.
    fn respond_error(&mut self, status: u16, version: HTTPVersion) {
        if let Some(mut writer) = self.sink.next() {
            let bytes = self.limits.error_bytes(status, version);
            std::io::Write::write_all(&mut writer, &bytes).ok();
            std::io::Write::flush(&mut writer).ok();
        }
    }

    /// true if the connection is HTTPS
    pub fn secure(&self) -> bool {
        self.secure
    }

    /// Reads the next line from self.next_header_source.
    ///
    /// Reads until `CRLF` is reached. The next read will start
    ///  at the first byte of the new line.
    /// svc patch: reads at most `budget` bytes (and takes them off it).
    fn read_next_line(&mut self, budget: &mut usize) -> Result<AsciiString, ReadError> {
        let mut buf = Vec::new();
        let mut prev_byte_was_cr = false;

        loop {
            let byte = self.next_header_source.by_ref().bytes().next();

            let byte = match byte {
                Some(b) => b.map_err(ReadError::ReadIoError)?,
                None => {
                    return Err(ReadError::ReadIoError(IoError::new(
                        ErrorKind::ConnectionAborted,
                        "Unexpected EOF",
                    )))
                }
            };
            if *budget == 0 {
                return Err(ReadError::HeadTooLarge);
            }
            *budget -= 1;

            if byte == b'\n' && prev_byte_was_cr {
                buf.pop(); // removing the '\r'
                return AsciiString::from_ascii(buf).map_err(|_| {
                    ReadError::ReadIoError(IoError::new(
                        ErrorKind::InvalidInput,
                        "Header is not in ASCII",
                    ))
                });
            }

            prev_byte_was_cr = byte == b'\r';

            buf.push(byte);
        }
    }

    /// Reads a request from the stream.
    /// Blocks until the header has been read.
    fn read(&mut self) -> Result<Request, ReadError> {
        // svc patch: wait until the previous request's body is finished with; when it was left
        // unread the next request cannot be found, so the connection ends.
        self.next_header_source
            .wait_turn()
            .map_err(ReadError::ReadIoError)?;
        if self.abandoned.load(Ordering::SeqCst) {
            return Err(ReadError::Abandoned);
        }
        let idle = if self.first {
            self.limits.head_timeout
        } else {
            self.limits.idle_timeout
        };
        self.first = false;
        self.deadline.idle(idle, self.limits.head_timeout);
        let mut budget = self.limits.max_head_bytes.unwrap_or(usize::MAX);
        let max_headers = self.limits.max_headers.unwrap_or(usize::MAX);

        let (method, path, version, headers) = {
            // reading the request line
            let (method, path, version) = {
                let line = self.read_next_line(&mut budget)?;

                parse_request_line(
                    line.as_str().trim(), // TODO: remove this conversion
                )?
            };

            // getting all headers
            let headers = {
                let mut headers = Vec::new();
                loop {
                    let line = self.read_next_line(&mut budget)?;

                    if line.is_empty() {
                        break;
                    };
                    if headers.len() >= max_headers {
                        return Err(ReadError::HeadTooLarge);
                    }
                    headers.push(match FromStr::from_str(line.as_str().trim()) {
                        // TODO: remove this conversion
                        Ok(h) => h,
                        _ => return Err(ReadError::WrongHeader(version)),
                    });
                }

                headers
            };

            (method, path, version, headers)
        };

        // svc patch: the body (read by the application) has its own time
        self.deadline.within(self.limits.body_timeout);
        let abandoned = if self.limits.close_on_unread_body {
            Some(Arc::clone(&self.abandoned))
        } else {
            None
        };

        // building the writer for the request
        let writer = self.sink.next().unwrap();

        // follow-up for next potential request
        let mut data_source = self.source.next().unwrap();
        std::mem::swap(&mut self.next_header_source, &mut data_source);

        // building the next reader
        let request = crate::request::new_request(
            self.secure,
            method,
            path,
            version.clone(),
            headers,
            *self.remote_addr.as_ref().unwrap(),
            data_source,
            writer,
            abandoned,
        )
        .map_err(|e| {
            use crate::request;
            match e {
                request::RequestCreationError::CreationIoError(e) => ReadError::ReadIoError(e),
                request::RequestCreationError::ExpectationFailed => {
                    ReadError::ExpectationFailed(version)
                }
            }
        })?;

        // svc patch: an upgrade may change the connection's read deadline
        let mut request = request;
        request.set_deadline(Arc::clone(&self.deadline));

        // return the request
        Ok(request)
    }
}

impl Iterator for ClientConnection {
    type Item = Request;

    /// Blocks until the next Request is available.
    /// Returns None when no new Requests will come from the client.
    fn next(&mut self) -> Option<Request> {
        use crate::{Response, StatusCode};

        // the client sent a "connection: close" header in this previous request
        //  or is using HTTP 1.0, meaning that no new request will come
        if self.no_more_requests {
            return None;
        }

        loop {
            let rq = match self.read() {
                Err(ReadError::WrongRequestLine) => {
                    self.respond_error(400, HTTPVersion(1, 1));
                    return None; // we don't know where the next request would start,
                                 // se we have to close
                }

                Err(ReadError::WrongHeader(ver)) => {
                    self.respond_error(400, ver);
                    return None; // we don't know where the next request would start,
                                 // se we have to close
                }

                // svc patch: a head over the limits
                Err(ReadError::HeadTooLarge) => {
                    self.respond_error(431, HTTPVersion(1, 1));
                    return None;
                }

                Err(ReadError::Abandoned) => return None,

                Err(ReadError::ReadIoError(ref err)) if err.kind() == ErrorKind::TimedOut => {
                    // svc patch: a kept-alive connection that stays silent is closed without
                    // an answer; a request that started and did not finish gets 408
                    if self.deadline.is_idle() {
                        return None;
                    }
                    self.respond_error(408, HTTPVersion(1, 1));
                    return None; // closing the connection
                }

                Err(ReadError::ExpectationFailed(ver)) => {
                    self.respond_error(417, ver);
                    return None; // TODO: should be recoverable, but needs handling in case of body
                }

                Err(ReadError::ReadIoError(_)) => return None,

                Ok(rq) => rq,
            };

            // checking HTTP version
            if *rq.http_version() > (1, 1) {
                let writer = self.sink.next().unwrap();
                let response = Response::from_string(
                    "This server only supports HTTP versions 1.0 and 1.1".to_owned(),
                )
                .with_status_code(StatusCode(505));
                response
                    .raw_print(writer, HTTPVersion(1, 1), &[], false, None)
                    .ok();
                continue;
            }

            // updating the status of the connection
            let connection_header = rq
                .headers()
                .iter()
                .find(|h| h.field.equiv("Connection"))
                .map(|h| h.value.as_str());

            let lowercase = connection_header.map(|h| h.to_ascii_lowercase());

            match lowercase {
                Some(ref val) if val.contains("close") => self.no_more_requests = true,
                Some(ref val) if val.contains("upgrade") => self.no_more_requests = true,
                Some(ref val)
                    if !val.contains("keep-alive") && *rq.http_version() == HTTPVersion(1, 0) =>
                {
                    self.no_more_requests = true
                }
                None if *rq.http_version() == HTTPVersion(1, 0) => self.no_more_requests = true,
                _ => (),
            };

            // returning the request
            return Some(rq);
        }
    }
}

/// Parses a "HTTP/1.1" string.
fn parse_http_version(version: &str) -> Result<HTTPVersion, ReadError> {
    let (major, minor) = match version {
        "HTTP/0.9" => (0, 9),
        "HTTP/1.0" => (1, 0),
        "HTTP/1.1" => (1, 1),
        "HTTP/2.0" => (2, 0),
        "HTTP/3.0" => (3, 0),
        _ => return Err(ReadError::WrongRequestLine),
    };

    Ok(HTTPVersion(major, minor))
}

/// Parses the request line of the request.
/// eg. GET / HTTP/1.1
fn parse_request_line(line: &str) -> Result<(Method, String, HTTPVersion), ReadError> {
    let mut parts = line.split(' ');

    let method = parts.next().and_then(|w| w.parse().ok());
    let path = parts.next().map(ToOwned::to_owned);
    let version = parts.next().and_then(|w| parse_http_version(w).ok());

    method
        .and_then(|method| Some((method, path?, version?)))
        .ok_or(ReadError::WrongRequestLine)
}

#[cfg(test)]
mod test {
    #[test]
    fn test_parse_request_line() {
        let (method, path, ver) = super::parse_request_line("GET /hello HTTP/1.1").unwrap();

        assert!(method == crate::Method::Get);
        assert!(path == "/hello");
        assert!(ver == crate::common::HTTPVersion(1, 1));

        assert!(super::parse_request_line("GET /hello").is_err());
        assert!(super::parse_request_line("qsd qsd qsd").is_err());
    }
}
