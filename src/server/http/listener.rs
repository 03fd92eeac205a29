//! Where the server listens: binding a Unix socket or TCP address, socket options, the limits
//! tiny_http applies while reading connections, and the loop that hands each request to the
//! pool.
//!
//! Owns: sockets and their options. Must not touch: routing, auth, or how a response is
//! written (`responder`).

use super::pool::Pool;
use super::responder::{header, serve_one};
use super::{Handler, HttpOptions};
use crate::server::error::ApiError;
use crate::server::ids;
use std::io;
use std::os::fd::AsRawFd;
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

/// The bound socket; tiny_http gets a duplicate of it.
pub(super) enum Bound {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener),
}

impl Bound {
    fn server(&self, opts: &HttpOptions) -> io::Result<tiny_http::Server> {
        let limits = opts.limits();
        let r = match self {
            Bound::Tcp(l) => {
                tiny_http::Server::from_listener_with_limits(l.try_clone()?, None, limits)
            }
            Bound::Unix(l) => {
                tiny_http::Server::from_listener_with_limits(l.try_clone()?, None, limits)
            }
        };
        r.map_err(io::Error::other)
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
                crate::base::random::fill_random(&mut rnd)?;
                let private = path.with_file_name(format!(".svc-{}.sock", crate::base::hex(&rnd)));
                let l = std::os::unix::net::UnixListener::bind(&private)?;
                set_mode_0600(&private);
                let linked = std::fs::hard_link(&private, path);
                let _ = std::fs::remove_file(&private);
                linked?;
                set_write_timeout(l.as_raw_fd(), opts)?;
                set_backlog(l.as_raw_fd());
                (
                    Bound::Unix(l),
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
        let stop = Arc::clone(&self.stop);
        std::thread::Builder::new()
            .name("http-dispatch".into())
            .spawn(move || dispatch(server, handler, opts, stop))?;
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
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
    let pool = Pool::new(4);
    loop {
        match server.recv_timeout(Duration::from_secs(1)) {
            Ok(Some(rq)) => {
                let h = Arc::clone(&handler);
                pool.execute(Box::new(move || serve_one(&*h, rq, &opts)));
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
