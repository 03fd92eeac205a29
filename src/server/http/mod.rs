//! HTTP plumbing: listeners (Unix socket or TCP), the request-handling threads, request ids,
//! body limits, read timeouts, panic containment and writing responses (whole or streamed).
//!
//! `tiny_http` accepts connections and parses requests, one pool thread per connection;
//! every request is then handed to a handler thread from an elastic pool (`Pool`) so a
//! long response (an SSE stream) never holds up another connection. Both listener kinds feed
//! the same [`Handler`]. Responses are `rouille::Response`s, written head and body with one
//! `write` (`respond_whole`), or a [`StreamReply`] for SSE.
//!
//! Guarantees for every request: a fresh `x-request-id` header (UUID v4; incoming values are
//! ignored) that error bodies repeat; a body larger than the limit gets 413 with an error
//! body; a handler panic becomes 500 with an error body and the server keeps serving.
//!
//! The edge is bounded ([`HttpOptions`], applied by our patched tiny_http, see
//! `vendor/tiny_http/PATCHES.md`): request line and headers (431), time to receive a head
//! (408) and a body (408), idle keep-alive time (closed silently), open connections (503 with
//! `Retry-After`, written by the accept thread, no thread per refused client). A declared body
//! over the limit is answered 413 before the handler runs and the connection is closed
//! without reading it; any body a handler leaves unread closes its connection the same way.
//! The accept loop survives every accept error, descriptor exhaustion included (it pauses and
//! resumes). Writes are bounded by `SO_SNDTIMEO`, set on the listening socket and inherited
//! by accepted ones.
//!
//! Owns: sockets and the HTTP wire format. Must not touch: routing decisions, auth, or any
//! resource (those live in the [`Handler`]).
//!
//! Files: `listener` (binding, socket options, the accept-and-dispatch loop), `responder`
//! (one request from head to written response, whole or streamed), `pool` (the elastic
//! request-thread pool and the streaming threads' scheduling policy).

mod listener;
mod pool;
mod responder;
#[cfg(test)]
mod tests;

pub use listener::{HttpServer, Listen};

use super::error::ApiError;
use serde::de::DeserializeOwned;
use std::io::{self, Read, Write};
use std::time::Duration;

/// Limits applied to every connection and request (docs/decisions.md, "HTTP edge").
#[derive(Debug, Clone, Copy)]
pub struct HttpOptions {
    /// Request body bytes; a larger declared body gets 413 before it is read.
    pub max_body_bytes: usize,
    /// Request line and headers together (431 beyond).
    pub max_head_bytes: usize,
    /// Header lines (431 beyond).
    pub max_headers: usize,
    /// Time to receive a request head from its first byte (408 beyond).
    pub head_timeout: Duration,
    /// Time to receive a request body from the end of its head (408 beyond).
    pub read_timeout: Duration,
    /// Time one write to a client may block.
    pub write_timeout: Duration,
    /// Time a kept-alive connection may stay silent between requests.
    pub idle_timeout: Duration,
    /// Open connections at most (503 beyond).
    pub max_connections: usize,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            max_body_bytes: 8 * 1024 * 1024,
            max_head_bytes: 64 * 1024,
            max_headers: 100,
            head_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(30),
            max_connections: 1024,
        }
    }
}

/// What the application does with a request.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, req: &mut Incoming<'_>) -> Reply;
}

/// A response: whole, streamed in chunks (SSE), or a protocol switch (a proxied
/// WebSocket).
pub enum Reply {
    Full(rouille::Response),
    Stream(StreamReply),
    Upgrade(UpgradeReply),
}

/// Relays an upgraded connection: given the client's read and write halves, runs until the
/// protocol ends.
pub type Relay = Box<dyn FnOnce(Box<dyn Read + Send>, Box<dyn Write + Send>) + Send>;

/// `101 Switching Protocols` to `protocol` with `headers` (besides `Upgrade` and
/// `Connection`), then `relay` owns the connection. Each read from the client may block at
/// most `read_timeout`.
pub struct UpgradeReply {
    pub protocol: String,
    pub headers: Vec<(String, String)>,
    pub read_timeout: Option<std::time::Duration>,
    pub relay: Relay,
}

impl Reply {
    pub fn json(status: u16, value: &serde_json::Value) -> Reply {
        Reply::Full(json_response(status, value))
    }

    /// A JSON response serialised from any `Serialize` value (no `Value` tree in between).
    pub fn json_of(status: u16, value: &impl serde::Serialize) -> Reply {
        Reply::Full(json_response(status, value))
    }

    pub fn empty(status: u16) -> Reply {
        Reply::Full(rouille::Response {
            status_code: status,
            headers: Vec::new(),
            data: rouille::ResponseBody::empty(),
            upgrade: None,
        })
    }

    pub fn error(err: &ApiError, request_id: &str) -> Reply {
        let mut resp = json_response(err.status, &err.body(request_id));
        for (k, v) in &err.headers {
            resp.headers.push(((*k).into(), v.clone().into()));
        }
        Reply::Full(resp)
    }

    pub fn status(&self) -> u16 {
        match self {
            Reply::Full(r) => r.status_code,
            Reply::Stream(s) => s.status,
            Reply::Upgrade(_) => 101,
        }
    }
}

/// A JSON response with `content-type: application/json`.
pub fn json_response(status: u16, value: &impl serde::Serialize) -> rouille::Response {
    let body = serde_json::to_vec(value).unwrap_or_else(|_| b"null".to_vec());
    rouille::Response {
        status_code: status,
        headers: vec![("Content-Type".into(), "application/json".into())],
        data: rouille::ResponseBody::from_data(body),
        upgrade: None,
    }
}

/// The body of a streamed response is produced by this function, which writes chunks.
pub type StreamBody = Box<dyn FnOnce(&mut ChunkWriter<'_>) -> io::Result<()> + Send>;

/// A streamed response (chunked transfer encoding, flushed after every chunk).
pub struct StreamReply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: StreamBody,
}

/// Writes chunks of a streamed response, flushing each one.
pub struct ChunkWriter<'a> {
    inner: &'a mut dyn Write,
    chunked: bool,
}

impl ChunkWriter<'_> {
    pub fn send(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        if self.chunked {
            // One buffer, one write: the connection's writer buffers only 1 KiB, so a frame
            // written in three parts could cost three syscalls.
            let mut chunk = Vec::with_capacity(data.len() + 12);
            chunk.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
            chunk.extend_from_slice(data);
            chunk.extend_from_slice(b"\r\n");
            self.inner.write_all(&chunk)?;
        } else {
            self.inner.write_all(data)?;
        }
        self.inner.flush()
    }

    fn finish(&mut self) -> io::Result<()> {
        if self.chunked {
            self.inner.write_all(b"0\r\n\r\n")?;
        }
        self.inner.flush()
    }
}

/// One request as the application sees it. The body is read on demand ([`Incoming::body`]),
/// so routing and auth failures never read it.
pub struct Incoming<'a> {
    pub request_id: String,
    pub method: String,
    /// Percent-decoded path without the query string.
    pub path: String,
    /// The path as sent (still percent-encoded), for passing on unchanged.
    pub raw_path: String,
    pub raw_query: String,
    pub headers: Vec<(String, String)>,
    pub http10: bool,
    max_body: usize,
    content_length: Option<usize>,
    rq: &'a mut tiny_http::Request,
    body: Option<Vec<u8>>,
    body_touched: bool,
}

impl Incoming<'_> {
    /// The peer's address (`None` on a Unix socket).
    pub fn remote_addr(&self) -> Option<std::net::SocketAddr> {
        self.rq.remote_addr().copied()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The cookie `name` from the `Cookie` header.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("cookie"))
            .flat_map(|(_, v)| v.split(';'))
            .filter_map(|kv| kv.trim().split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }

    /// The first value of query parameter `name` (names and values percent-decoded).
    pub fn query(&self, name: &str) -> Option<String> {
        parse_query(&self.raw_query)
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    /// The request body, read once, at most the configured limit (413 beyond it).
    pub fn body(&mut self) -> Result<&[u8], ApiError> {
        if self.body.is_none() {
            if self.content_length.is_some_and(|n| n > self.max_body) {
                return Err(too_large(self.max_body));
            }
            self.body_touched = true;
            let mut buf = Vec::with_capacity(self.content_length.unwrap_or(0).min(self.max_body));
            let limit = self.max_body as u64 + 1;
            match self.rq.as_reader().take(limit).read_to_end(&mut buf) {
                Ok(_) if buf.len() > self.max_body => return Err(too_large(self.max_body)),
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                    ) =>
                {
                    return Err(ApiError::new(408, "Timed out reading the request body.")
                        .with_code("request_timeout"))
                }
                Err(e) => {
                    return Err(ApiError::bad_request(format!(
                        "Could not read the request body: {e}"
                    )))
                }
            }
            self.body = Some(buf);
        }
        Ok(self.body.as_deref().unwrap_or_default())
    }

    /// The body parsed as JSON: 400 for malformed JSON or a body of the wrong shape.
    pub fn json<T: DeserializeOwned>(&mut self) -> Result<T, ApiError> {
        let body = self.body()?;
        parse_json(body)
    }

    /// Like [`Incoming::json`], but an empty body gives `T::default()`.
    pub fn json_or_default<T: DeserializeOwned + Default>(&mut self) -> Result<T, ApiError> {
        let body = self.body()?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(T::default());
        }
        parse_json(body)
    }

    /// True when the request had a body and it was not read to its end (never read, or
    /// reading it failed: too large, too slow, malformed chunks).
    fn body_left_unread(&self) -> bool {
        if self.body_touched {
            return self.body.is_none();
        }
        self.content_length.is_some_and(|n| n > 0) || self.header("transfer-encoding").is_some()
    }
}

/// Parses a JSON request body with the API's 400 messages. Every body the API takes is an
/// object: anything else (`[]`, `"x"`, `1`, `null`) is refused before serde would read an
/// array as a struct's fields in order.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let value: serde_json::Value = serde_json::from_slice(body).map_err(json_error)?;
    if !value.is_object() {
        let kind = match &value {
            serde_json::Value::Array(_) => "an array",
            serde_json::Value::String(_) => "a string",
            serde_json::Value::Number(_) => "a number",
            serde_json::Value::Bool(_) => "a boolean",
            _ => "null",
        };
        return Err(ApiError::bad_request(format!(
            "Invalid request body: expected a JSON object, found {kind}."
        ))
        .with_code("invalid_body"));
    }
    serde_json::from_value(value).map_err(json_error)
}

fn json_error(e: serde_json::Error) -> ApiError {
    use serde_json::error::Category;
    match e.classify() {
        Category::Syntax | Category::Eof | Category::Io => {
            ApiError::bad_request(format!("Malformed JSON in request body: {e}"))
                .with_code("malformed_json")
        }
        Category::Data => {
            ApiError::bad_request(format!("Invalid request body: {e}")).with_code("invalid_body")
        }
    }
}

fn too_large(max: usize) -> ApiError {
    ApiError::new(
        413,
        format!("Request body is larger than the limit of {max} bytes."),
    )
    .with_code("payload_too_large")
}

/// `a=1&b%5Bc%5D=2` → `[("a","1"), ("b[c]","2")]`.
pub fn parse_query(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (
                percent_decode(&k.replace('+', " ")),
                percent_decode(&v.replace('+', " ")),
            )
        })
        .collect()
}

/// Percent-decoding; invalid escapes stay as written, invalid UTF-8 is replaced.
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hexval = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hexval(b[i + 1]), hexval(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
