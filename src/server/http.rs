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

use super::error::ApiError;
use super::ids;
use parking_lot::{Condvar, Mutex};
use serde::de::DeserializeOwned;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Unix(PathBuf),
    Tcp(String),
}

impl Listen {
    /// `unix:PATH` or `HOST:PORT` (also `tcp:HOST:PORT`).
    pub fn parse(s: &str) -> Result<Listen, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            if p.is_empty() {
                return Err("unix: needs a socket path".into());
            }
            return Ok(Listen::Unix(PathBuf::from(p)));
        }
        let addr = s.strip_prefix("tcp:").unwrap_or(s);
        match addr.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(Listen::Tcp(addr.to_string()))
            }
            _ => Err(format!(
                "`{s}` is neither unix:PATH nor HOST:PORT (e.g. 127.0.0.1:32276)"
            )),
        }
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Unix(p) => write!(f, "unix:{}", p.display()),
            Listen::Tcp(a) => write!(f, "{a}"),
        }
    }
}

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

impl HttpOptions {
    /// The bounds our patched tiny_http applies while reading connections.
    fn limits(&self) -> tiny_http::Limits {
        let opts = *self;
        tiny_http::Limits {
            max_head_bytes: Some(self.max_head_bytes),
            max_headers: Some(self.max_headers),
            head_timeout: Some(self.head_timeout),
            idle_timeout: Some(self.idle_timeout),
            body_timeout: Some(self.read_timeout),
            max_connections: Some(self.max_connections),
            close_on_unread_body: true,
            error_response: Some(Arc::new(move |status| edge_error(&opts, status.0))),
        }
    }
}

/// The responses tiny_http writes by itself, in the API's error shape with a request id.
fn edge_error(opts: &HttpOptions, status: u16) -> tiny_http::Response<io::Cursor<Vec<u8>>> {
    let err = match status {
        400 => ApiError::bad_request("Malformed HTTP request line or header."),
        408 => {
            ApiError::new(408, "The request was not received in time.").with_code("request_timeout")
        }
        417 => ApiError::new(417, "Only `Expect: 100-continue` is supported.")
            .with_code("expectation_failed"),
        431 => ApiError::new(
            431,
            format!(
                "The request line and headers exceed the limit of {} bytes or {} headers.",
                opts.max_head_bytes, opts.max_headers
            ),
        )
        .with_code("header_too_large"),
        503 => ApiError::unavailable(format!(
            "The server has {} connections open, its limit; retry later.",
            opts.max_connections
        ))
        .with_header("Retry-After", "1".into()),
        _ => ApiError::new(status, "The request could not be read."),
    };
    let request_id = ids::request_id();
    let body = serde_json::to_vec(&err.body(&request_id)).unwrap_or_default();
    let mut headers: Vec<tiny_http::Header> = [
        ("Content-Type", "application/json"),
        ("Server", "svc"),
        ("x-request-id", request_id.as_str()),
    ]
    .into_iter()
    .filter_map(|(k, v)| header(k, v))
    .collect();
    headers.extend(err.headers.iter().filter_map(|(k, v)| header(k, v)));
    let len = body.len();
    tiny_http::Response::new(
        tiny_http::StatusCode(status),
        headers,
        io::Cursor::new(body),
        Some(len),
        None,
    )
}

/// What the application does with a request.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, req: &mut Incoming<'_>) -> Reply;
}

/// A response: whole, or streamed in chunks (SSE).
pub enum Reply {
    Full(rouille::Response),
    Stream(StreamReply),
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

/// The bound socket; tiny_http gets a duplicate of it.
enum Bound {
    Tcp(std::net::TcpListener),
    /// The listener and the public path it answers on.
    Unix(std::os::unix::net::UnixListener, PathBuf),
}

impl Bound {
    fn server(&self, opts: &HttpOptions) -> io::Result<tiny_http::Server> {
        let limits = opts.limits();
        let r = match self {
            Bound::Tcp(l) => {
                tiny_http::Server::from_listener_with_limits(l.try_clone()?, None, limits)
            }
            Bound::Unix(l, _) => {
                tiny_http::Server::from_listener_with_limits(l.try_clone()?, None, limits)
            }
        };
        r.map_err(io::Error::other)
    }

    /// Connects to ourselves and hangs up at once.
    ///
    /// Why: tiny_http reads each connection on a thread of its own task pool, and that pool
    /// can strand a connection: when two connections arrive while one idle thread is being
    /// woken, both are queued for it, and the second waits until some pool thread finishes
    /// its connection. A streamed response keeps its connection's thread for as long as it
    /// streams, so under a burst of SSE clients (server_bench: 1,000 at once) a few never got
    /// an answer. A new connection while every pool thread is busy makes the pool start a
    /// thread; ours ends at once (nothing to read) and that thread then takes the oldest
    /// stranded connection. Every stream start nudges, so each rescued stream rescues the next.
    fn nudge(&self) {
        let r = match self {
            Bound::Tcp(l) => l
                .local_addr()
                .and_then(std::net::TcpStream::connect)
                .map(drop),
            Bound::Unix(_, path) => std::os::unix::net::UnixStream::connect(path).map(drop),
        };
        if let Err(e) = r {
            log::debug!("cannot nudge the connection pool: {e}");
        }
    }
}

/// A bound listener, serving until dropped or [`HttpServer::shutdown`].
///
/// tiny_http gets a duplicate of the bound socket (the Unix socket's public path must outlive
/// tiny_http, which deletes its listener's path when dropped).
pub struct HttpServer {
    bound: Arc<Bound>,
    listen: Listen,
    local: String,
    unix_path: Option<PathBuf>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl HttpServer {
    /// Binds the listener. A Unix socket path left by a dead server is removed first; one that
    /// a live server still answers on is an error.
    pub fn bind(listen: &Listen, opts: &HttpOptions) -> io::Result<HttpServer> {
        let (bound, local, unix_path) = match listen {
            Listen::Unix(path) => {
                prepare_unix_path(path)?;
                // Bound under a private name, then hard-linked to the public path: tiny_http
                // removes its listener's path when it is dropped, and that must never be the
                // public one.
                let mut rnd = [0u8; 6];
                ids::fill_random(&mut rnd)?;
                let private = path.with_file_name(format!(".svc-{}.sock", ids::hex(&rnd)));
                let l = std::os::unix::net::UnixListener::bind(&private)?;
                set_mode_0600(&private);
                let linked = std::fs::hard_link(&private, path);
                let _ = std::fs::remove_file(&private);
                linked?;
                set_write_timeout(l.as_raw_fd(), opts)?;
                set_backlog(l.as_raw_fd());
                (
                    Bound::Unix(l, path.clone()),
                    format!("unix:{}", path.display()),
                    Some(path.clone()),
                )
            }
            Listen::Tcp(addr) => {
                let l = std::net::TcpListener::bind(addr.as_str())?;
                set_write_timeout(l.as_raw_fd(), opts)?;
                // Linux copies TCP_NODELAY to accepted sockets: without it a response written
                // in two segments waits for the client's delayed ACK (40 ms).
                set_nodelay(l.as_raw_fd())?;
                set_backlog(l.as_raw_fd());
                let local = l.local_addr()?.to_string();
                (Bound::Tcp(l), local, None)
            }
        };
        Ok(HttpServer {
            bound: Arc::new(bound),
            listen: listen.clone(),
            local,
            unix_path,
            stop: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        })
    }

    /// `unix:PATH` or the bound `HOST:PORT` (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> &str {
        &self.local
    }

    pub fn listen(&self) -> &Listen {
        &self.listen
    }

    /// Starts accepting and dispatching.
    pub fn serve(&self, handler: Arc<dyn Handler>, opts: HttpOptions) -> io::Result<()> {
        let server = self.bound.server(&opts)?;
        let bound = Arc::clone(&self.bound);
        let stop = Arc::clone(&self.stop);
        std::thread::Builder::new()
            .name("http-dispatch".into())
            .spawn(move || dispatch(server, handler, opts, bound, stop))?;
        Ok(())
    }

    /// Stops accepting (in-flight requests finish).
    pub fn shutdown(&self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Hands every request tiny_http reads to a pool thread, until stopped and quiet for a second.
fn dispatch(
    server: tiny_http::Server,
    handler: Arc<dyn Handler>,
    opts: HttpOptions,
    bound: Arc<Bound>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
    let pool = Pool::new(4);
    loop {
        match server.recv_timeout(Duration::from_secs(1)) {
            Ok(Some(rq)) => {
                let h = Arc::clone(&handler);
                let bound = Arc::clone(&bound);
                pool.execute(Box::new(move || serve_one(&*h, rq, &opts, &bound)));
            }
            Ok(None) => {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
            }
            // The patched accept loop reports no errors; should one come, keep serving.
            Err(e) => {
                log::warn!("http: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.shutdown();
        if let Some(p) = &self.unix_path {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn prepare_unix_path(path: &Path) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    if std::fs::symlink_metadata(path).is_ok() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("a server is already listening on {}", path.display()),
            ));
        }
        log::info!("removing stale socket {}", path.display());
        std::fs::remove_file(path)?;
    }
    Ok(())
}

fn set_mode_0600(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
        log::warn!("could not restrict {}: {e}", path.display());
    }
}

/// `SO_SNDTIMEO` on the listening socket; accepted sockets inherit it. (Reads are bounded by
/// tiny_http's deadlines: `SO_RCVTIMEO` here would also bound `accept`.)
fn set_write_timeout(fd: i32, opts: &HttpOptions) -> io::Result<()> {
    let d = opts.write_timeout;
    let tv = libc::timeval {
        tv_sec: d.as_secs() as libc::time_t,
        tv_usec: d.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: `tv` is a valid timeval and the length matches it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// std listens with a backlog of 128; a burst of clients (hundreds of SSE subscribers
/// reconnecting at once) overflows it. Calling listen(2) again raises it (the kernel caps
/// it at `net.core.somaxconn`).
fn set_backlog(fd: i32) {
    // SAFETY: plain syscall on a listening socket we own.
    if unsafe { libc::listen(fd, 4096) } != 0 {
        log::warn!(
            "cannot raise the listen backlog: {}",
            io::Error::last_os_error()
        );
    }
}

fn set_nodelay(fd: i32) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: `one` is a valid c_int and the length matches it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Handles one request from start to finish. Never panics.
fn serve_one(handler: &dyn Handler, mut rq: tiny_http::Request, opts: &HttpOptions, bound: &Bound) {
    let request_id = ids::request_id();
    let url = rq.url().to_string();
    let (raw_path, raw_query) = url.split_once('?').unwrap_or((url.as_str(), ""));
    let headers: Vec<(String, String)> = rq
        .headers()
        .iter()
        .map(|h| (h.field.as_str().to_string(), h.value.as_str().to_string()))
        .collect();
    let method = rq.method().as_str().to_string();
    let http10 = rq.http_version() == &tiny_http::HTTPVersion(1, 0);
    let content_length = rq.body_length();
    let path = percent_decode(raw_path);

    if content_length.is_some_and(|n| n > opts.max_body_bytes) {
        // Refused before the handler (and auth) runs; the body is never read and the
        // connection closes after the answer.
        let reply = Reply::error(&too_large(opts.max_body_bytes), &request_id);
        log::debug!("{request_id} {method} {url} -> 413 (declared {content_length:?})");
        if let Reply::Full(resp) = reply {
            let head_only = method.eq_ignore_ascii_case("HEAD");
            if let Err(e) = respond_whole(rq, resp, &request_id, head_only, true) {
                log::debug!("{request_id}: client went away: {e}");
            }
        }
        return;
    }

    let (reply, unread) = {
        let mut inc = Incoming {
            request_id: request_id.clone(),
            method: method.clone(),
            path,
            raw_query: raw_query.to_string(),
            headers,
            http10,
            max_body: opts.max_body_bytes,
            content_length,
            rq: &mut rq,
            body: None,
            body_touched: false,
        };
        let reply = match catch_unwind(AssertUnwindSafe(|| handler.handle(&mut inc))) {
            Ok(r) => r,
            Err(p) => {
                let msg = panic_message(&p);
                log::error!("request {request_id} {method} {url} panicked: {msg}");
                Reply::error(
                    &ApiError::internal(format!("Internal server error: {msg}")),
                    &request_id,
                )
            }
        };
        let unread = inc.body_left_unread();
        (reply, unread)
    };
    log::debug!("{request_id} {method} {url} -> {}", reply.status());

    match reply {
        Reply::Full(resp) => {
            let head_only = method.eq_ignore_ascii_case("HEAD");
            // A body left unread (whole or in part) ends the connection: tiny_http closes it
            // instead of draining.
            let close = unread || wants_close(&rq, http10);
            if let Err(e) = respond_whole(rq, resp, &request_id, head_only, close) {
                log::debug!("{request_id}: client went away: {e}");
            }
        }
        Reply::Stream(s) => {
            bound.nudge();
            stream(rq, s, &request_id, http10)
        }
    }
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

fn header(name: &str, value: &str) -> Option<tiny_http::Header> {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).ok()
}

fn to_tiny_parts(
    status: u16,
    resp_headers: &[(
        std::borrow::Cow<'static, str>,
        std::borrow::Cow<'static, str>,
    )],
    reader: Box<dyn Read + Send>,
    size: Option<usize>,
    request_id: &str,
    close: bool,
) -> tiny_http::Response<Box<dyn Read + Send>> {
    let mut headers: Vec<tiny_http::Header> = resp_headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("content-length"))
        .filter_map(|(k, v)| header(k, v))
        .collect();
    headers.extend(header("x-request-id", request_id));
    if close {
        headers.extend(header("Connection", "close"));
    }
    tiny_http::Response::new(tiny_http::StatusCode(status), headers, reader, size, None)
}

/// Bodies up to this size are answered in one `send`; larger ones (or bodies of unknown size)
/// are streamed by tiny_http.
const WHOLE_MAX: usize = 256 * 1024;

/// True when the connection ends after this response: the client asked for it, or spoke
/// HTTP/1.0 without keep-alive (tiny_http then stops reading the connection).
fn wants_close(rq: &tiny_http::Request, http10: bool) -> bool {
    let conn = rq
        .headers()
        .iter()
        .find(|h| h.field.equiv("Connection"))
        .map(|h| h.value.as_str().to_ascii_lowercase());
    match conn {
        Some(v) if v.contains("close") => true,
        Some(v) => http10 && !v.contains("keep-alive"),
        None => http10,
    }
}

/// Writes the status line, headers and body with one `write` on the connection.
///
/// Why: tiny_http prints the head into its 1 KiB connection buffer and then copies the
/// body; a body larger than that buffer (a Run is about 1 KiB) left as two `send`s, and the
/// client woke up twice. Taking the writer keeps the connection's order and keep-alive (the
/// writer signals the connection's next request when dropped, as `respond` does).
fn respond_whole(
    rq: tiny_http::Request,
    resp: rouille::Response,
    request_id: &str,
    head_only: bool,
    close: bool,
) -> io::Result<()> {
    let status = resp.status_code;
    let (mut reader, size) = resp.data.into_reader_and_size();
    if size.is_none_or(|n| n > WHOLE_MAX) {
        let r = to_tiny_parts(status, &resp.headers, reader, size, request_id, close);
        return rq.respond(r);
    }
    let mut body = Vec::with_capacity(size.unwrap_or(0));
    reader.read_to_end(&mut body)?;
    let version = if rq.http_version() == &tiny_http::HTTPVersion(1, 0) {
        "1.0"
    } else {
        "1.1"
    };
    let mut out = Vec::with_capacity(256 + body.len());
    write_head(&mut out, version, status, &resp.headers, request_id, close);
    // 1xx, 204 and 304 carry no body; HEAD gets the length without it.
    let bodiless = matches!(status, 100..=199 | 204 | 304);
    if !bodiless {
        out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    if !bodiless && !head_only {
        out.extend_from_slice(&body);
    }
    let mut w = rq.into_writer();
    w.write_all(&out)?;
    w.flush()
}

/// The status line and headers (without `Content-Length` and the blank line) of a response.
fn write_head(
    out: &mut Vec<u8>,
    version: &str,
    status: u16,
    headers: &[(
        std::borrow::Cow<'static, str>,
        std::borrow::Cow<'static, str>,
    )],
    request_id: &str,
    close: bool,
) {
    use std::io::Write as _;
    let _ = write!(
        out,
        "HTTP/{version} {status} {}\r\nServer: svc\r\nDate: {}\r\nx-request-id: {request_id}\r\n",
        super::error::reason_phrase(status),
        http_date()
    );
    for (k, v) in headers {
        let clean = !k.contains(['\r', '\n']) && !v.contains(['\r', '\n']);
        if clean && !k.eq_ignore_ascii_case("content-length") {
            let _ = write!(out, "{k}: {v}\r\n");
        }
    }
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
}

/// The current time as an HTTP date (`Sun, 22 Nov 2026 01:10:00 GMT`), formatted once per
/// second per thread.
fn http_date() -> String {
    use std::cell::RefCell;
    thread_local! {
        static CACHE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.0 != secs {
            *c = (secs, format_http_date(secs));
        }
        c.1.clone()
    })
}

/// IMF-fixdate (RFC 9110 section 5.6.7) of `secs` since the Unix epoch.
fn format_http_date(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = (secs / 86_400) as i64;
    let sod = secs % 86_400;
    let (y, m, d) = crate::store::civil_from_days(days);
    format!(
        "{}, {d:02} {} {y:04} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[(m - 1) as usize],
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

fn stream(rq: tiny_http::Request, s: StreamReply, request_id: &str, http10: bool) {
    let mut w = rq.into_writer();
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nx-request-id: {request_id}\r\n",
        s.status,
        super::error::reason_phrase(s.status)
    );
    for (k, v) in &s.headers {
        if !k.contains(['\r', '\n']) && !v.contains(['\r', '\n']) {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    if http10 {
        head.push_str("Connection: close\r\n\r\n");
    } else {
        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
    }
    if w.write_all(head.as_bytes())
        .and_then(|_| w.flush())
        .is_err()
    {
        return;
    }
    let _batch = BatchScheduling::enter();
    let mut cw = ChunkWriter {
        inner: &mut *w,
        chunked: !http10,
    };
    let body = s.body;
    match catch_unwind(AssertUnwindSafe(|| body(&mut cw))) {
        Ok(Ok(())) => {
            let _ = cw.finish();
        }
        Ok(Err(e)) => log::debug!("{request_id}: stream ended: {e}"),
        Err(p) => {
            log::error!("{request_id}: stream panicked: {}", panic_message(&p));
            let _ = cw.finish();
        }
    }
}

/// While a thread streams a response it runs under `SCHED_BATCH`: woken threads of that
/// policy never preempt the thread that woke them. One committed event wakes every SSE
/// thread of its run; without this the committing thread (an engine worker, holding the
/// store's writer lock) was preempted by the threads it woke and a hand-off to 1,000
/// subscribers took 17 ms instead of about one (server_bench). Restored on drop, because the
/// thread goes back to the pool.
struct BatchScheduling {
    entered: bool,
}

impl BatchScheduling {
    fn enter() -> BatchScheduling {
        BatchScheduling {
            entered: set_policy(libc::SCHED_BATCH),
        }
    }
}

impl Drop for BatchScheduling {
    fn drop(&mut self) {
        if self.entered {
            set_policy(libc::SCHED_OTHER);
        }
    }
}

/// Sets the calling thread's scheduling policy (priority 0); false when refused.
fn set_policy(policy: libc::c_int) -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param. Moving between
    // SCHED_OTHER and SCHED_BATCH needs no privilege.
    unsafe { libc::sched_setscheduler(0, policy, &param) == 0 }
}

type Job = Box<dyn FnOnce() + Send>;

/// An elastic thread pool: a job runs on an idle worker, or on a new one when none is idle;
/// workers beyond `min` exit after 30 s idle. The queue and the idle count share one lock,
/// so a job is never left waiting for a worker that is about to exit.
struct Pool {
    shared: Arc<(Mutex<PoolState>, Condvar)>,
    min: usize,
}

struct PoolState {
    queue: VecDeque<Job>,
    idle: usize,
    total: usize,
}

impl Pool {
    fn new(min: usize) -> Pool {
        Pool {
            shared: Arc::new((
                Mutex::new(PoolState {
                    queue: VecDeque::new(),
                    idle: 0,
                    total: 0,
                }),
                Condvar::new(),
            )),
            min,
        }
    }

    fn execute(&self, job: Job) {
        let (lock, cv) = &*self.shared;
        let mut st = lock.lock();
        if st.idle > st.queue.len() {
            st.queue.push_back(job);
            cv.notify_one();
            return;
        }
        st.total += 1;
        drop(st);
        let shared = Arc::clone(&self.shared);
        let min = self.min;
        let spawned = std::thread::Builder::new()
            .name("http-worker".into())
            .spawn(move || worker(shared, min, job));
        if let Err(e) = spawned {
            log::error!("could not start a request thread: {e}");
            self.shared.0.lock().total -= 1;
        }
    }
}

fn worker(shared: Arc<(Mutex<PoolState>, Condvar)>, min: usize, first: Job) {
    first();
    let (lock, cv) = &*shared;
    let mut st = lock.lock();
    loop {
        if let Some(job) = st.queue.pop_front() {
            drop(st);
            job();
            st = lock.lock();
            continue;
        }
        st.idle += 1;
        let timed_out = cv.wait_for(&mut st, Duration::from_secs(30)).timed_out();
        st.idle -= 1;
        if timed_out && st.queue.is_empty() && st.total > min {
            st.total -= 1;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_parse() {
        assert_eq!(
            Listen::parse("unix:/tmp/x.sock"),
            Ok(Listen::Unix("/tmp/x.sock".into()))
        );
        assert_eq!(
            Listen::parse("127.0.0.1:80"),
            Ok(Listen::Tcp("127.0.0.1:80".into()))
        );
        assert_eq!(
            Listen::parse("tcp:[::1]:80"),
            Ok(Listen::Tcp("[::1]:80".into()))
        );
        assert!(Listen::parse("nope").is_err());
        assert!(Listen::parse("unix:").is_err());
    }

    #[test]
    fn http_dates_are_imf_fixdate() {
        assert_eq!(format_http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(
            format_http_date(951_782_400),
            "Tue, 29 Feb 2000 00:00:00 GMT"
        );
        assert_eq!(
            format_http_date(1_795_308_600),
            "Sun, 22 Nov 2026 00:50:00 GMT"
        );
    }

    #[test]
    fn query_decoding() {
        let q = parse_query("page%5Blimit%5D=5&page[offset]=10&x=a+b%21&flag");
        assert_eq!(
            q,
            vec![
                ("page[limit]".into(), "5".into()),
                ("page[offset]".into(), "10".into()),
                ("x".into(), "a b!".into()),
                ("flag".into(), "".into()),
            ]
        );
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }

    struct Panicky;

    impl Handler for Panicky {
        fn handle(&self, inc: &mut Incoming<'_>) -> Reply {
            if inc.path == "/boom" {
                panic!("boom at {}", inc.path);
            }
            Reply::json(200, &serde_json::json!({"ok": true}))
        }
    }

    /// Answers `/N` with N bytes of `x`.
    struct Sized;

    impl Handler for Sized {
        fn handle(&self, inc: &mut Incoming<'_>) -> Reply {
            let n: usize = inc.path[1..].parse().unwrap_or(0);
            Reply::Full(rouille::Response::text("x".repeat(n)))
        }
    }

    /// `/echo` answers with the body's length; any other path ignores the body.
    struct Echo;

    impl Handler for Echo {
        fn handle(&self, inc: &mut Incoming<'_>) -> Reply {
            if inc.path == "/echo" {
                return match inc.body() {
                    Ok(b) => Reply::Full(rouille::Response::text(b.len().to_string())),
                    Err(e) => Reply::error(&e, &inc.request_id),
                };
            }
            Reply::Full(rouille::Response::text("ignored"))
        }
    }

    #[test]
    fn read_bodies_keep_the_connection_and_an_unread_body_closes_it() {
        let opts = HttpOptions::default();
        let server = HttpServer::bind(&Listen::Tcp("127.0.0.1:0".into()), &opts).unwrap();
        server.serve(Arc::new(Echo), opts).unwrap();
        let s = std::net::TcpStream::connect(server.local_addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = std::io::BufReader::new(s);
        let big = "y".repeat(100_000);
        write!(
            w,
            "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{big}",
            big.len()
        )
        .unwrap();
        let (status, head, body) = read_response(&mut r, false);
        assert_eq!((status, body.as_slice()), (200, &b"100000"[..]), "{head}");
        assert!(!head.contains("Connection: close"), "{head}");
        write!(
            w,
            "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
        )
        .unwrap();
        let (status, head, body) = read_response(&mut r, false);
        assert_eq!((status, body.as_slice()), (200, &b"5"[..]), "{head}");
        // A body the handler leaves unread is not drained: the connection ends.
        write!(
            w,
            "POST /other HTTP/1.1\r\nHost: x\r\nContent-Length: 50000\r\n\r\n{}",
            "z".repeat(2000)
        )
        .unwrap();
        let (status, head, _) = read_response(&mut r, false);
        assert_eq!(status, 200);
        assert!(head.contains("Connection: close"), "{head}");
        let mut rest = Vec::new();
        if let Err(e) = r.read_to_end(&mut rest) {
            let open = matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            );
            assert!(!open, "the connection was left open: {e}");
        }
        assert!(rest.is_empty());
    }

    #[test]
    fn silent_connections_are_closed_without_an_answer_and_partial_heads_get_408() {
        let opts = HttpOptions {
            head_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
            ..HttpOptions::default()
        };
        let server = HttpServer::bind(&Listen::Tcp("127.0.0.1:0".into()), &opts).unwrap();
        server.serve(Arc::new(Sized), opts).unwrap();
        let rest = |s: std::net::TcpStream| {
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut r = std::io::BufReader::new(s);
            let mut out = Vec::new();
            r.read_to_end(&mut out).expect("closed by the server");
            String::from_utf8_lossy(&out).into_owned()
        };
        // Kept alive after one request, then silent.
        let s = std::net::TcpStream::connect(server.local_addr()).unwrap();
        let mut w = s.try_clone().unwrap();
        write!(w, "GET /3 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let text = rest(s);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        // Only one answer: no 408 after it (a random request id may hold the digits 408).
        assert!(!text.contains("HTTP/1.1 408"), "{text}");
        // Never a byte.
        let s = std::net::TcpStream::connect(server.local_addr()).unwrap();
        assert_eq!(rest(s), "");
        // Half a head.
        let s = std::net::TcpStream::connect(server.local_addr()).unwrap();
        let mut w = s.try_clone().unwrap();
        write!(w, "GET /3 HTTP/1.1\r\nHost:").unwrap();
        let text = rest(s);
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        assert!(text.contains("Connection: close"), "{text}");
        assert!(text.contains("\"code\":\"request_timeout\""), "{text}");
    }

    /// Reads one response (status, head, body) by its Content-Length; `head_only` for HEAD.
    fn read_response(
        r: &mut std::io::BufReader<std::net::TcpStream>,
        head_only: bool,
    ) -> (u16, String, Vec<u8>) {
        use std::io::BufRead;
        let mut head = String::new();
        loop {
            let mut line = String::new();
            assert!(
                r.read_line(&mut line).unwrap() > 0,
                "connection closed early"
            );
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .map(|v| v.trim().parse().unwrap())
            .unwrap_or(0);
        let mut body = vec![0; if head_only { 0 } else { len }];
        r.read_exact(&mut body).unwrap();
        (head[9..12].parse().unwrap(), head, body)
    }

    #[test]
    fn keep_alive_serves_small_large_and_head_responses_in_order() {
        let opts = HttpOptions::default();
        let server = HttpServer::bind(&Listen::Tcp("127.0.0.1:0".into()), &opts).unwrap();
        server.serve(Arc::new(Sized), opts).unwrap();
        let s = std::net::TcpStream::connect(server.local_addr()).unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = std::io::BufReader::new(s);
        // Pipelined: all requests written before any response is read.
        for (method, n) in [
            ("GET", 10),
            ("GET", 5000),
            ("HEAD", 7000),
            ("GET", 200_000),
            ("GET", 3),
        ] {
            write!(w, "{method} /{n} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        }
        for (head_only, n) in [
            (false, 10),
            (false, 5000),
            (true, 7000),
            (false, 200_000),
            (false, 3),
        ] {
            let (status, head, body) = read_response(&mut r, head_only);
            assert_eq!(status, 200);
            assert!(head.contains(&format!("Content-Length: {n}")), "{head}");
            assert!(head.contains("x-request-id: "), "{head}");
            assert!(head.contains(" GMT\r\n"), "a Date header: {head}");
            assert!(!head.contains("Connection: close"), "{head}");
            assert_eq!(body.len(), if head_only { 0 } else { n });
            assert!(body.iter().all(|b| *b == b'x'));
        }
    }

    #[test]
    fn http10_and_connection_close_end_the_connection_after_the_response() {
        let opts = HttpOptions::default();
        let server = HttpServer::bind(&Listen::Tcp("127.0.0.1:0".into()), &opts).unwrap();
        server.serve(Arc::new(Sized), opts).unwrap();
        for req in [
            "GET /2000 HTTP/1.0\r\n\r\n",
            "GET /2000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ] {
            let mut s = std::net::TcpStream::connect(server.local_addr()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.write_all(req.as_bytes()).unwrap();
            let mut out = Vec::new();
            s.read_to_end(&mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(head.contains("Connection: close"), "{head}");
            assert_eq!(body.len(), 2000);
        }
    }

    fn get(addr: &str, path: &str) -> (u16, String, String) {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let status = out[9..12].parse().unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        (status, head.to_string(), body.to_string())
    }

    #[test]
    fn a_panicking_handler_gets_500_and_the_server_keeps_serving() {
        let opts = HttpOptions::default();
        let server = HttpServer::bind(&Listen::Tcp("127.0.0.1:0".into()), &opts).unwrap();
        server.serve(Arc::new(Panicky), opts).unwrap();
        let addr = server.local_addr().to_string();
        for _ in 0..3 {
            let (status, head, body) = get(&addr, "/boom");
            assert_eq!(status, 500);
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert!(v["errors"][0]["detail"]
                .as_str()
                .unwrap()
                .contains("boom at /boom"));
            let rid = v["request_id"].as_str().unwrap();
            assert!(head.contains(&format!("x-request-id: {rid}")));
            assert_eq!(get(&addr, "/ok").0, 200);
        }
    }
}
