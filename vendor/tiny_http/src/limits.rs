//! Bounds on what one client can make the server hold (svc patch, see PATCHES.md).
//!
//! `Limits::default()` bounds nothing, which is tiny_http 0.12's behaviour.

use std::fmt;
use std::io::Cursor;
use std::sync::Arc;
use std::time::Duration;

use crate::{HTTPVersion, Response, StatusCode};

/// Renders the responses tiny_http writes by itself (400, 408, 413, 417, 431, 503, 505), so
/// they can carry the application's error body and headers.
pub type ErrorResponder = Arc<dyn Fn(StatusCode) -> Response<Cursor<Vec<u8>>> + Send + Sync>;

/// Per-connection and per-request bounds, given to [`crate::Server::from_listener_with_limits`].
#[derive(Clone, Default)]
pub struct Limits {
    /// Request line and headers together, in bytes; beyond it: 431 and the connection closed.
    pub max_head_bytes: Option<usize>,
    /// Number of header lines; beyond it: 431 and the connection closed.
    pub max_headers: Option<usize>,
    /// Time to receive a whole request head, counted from its first byte (from the accept for
    /// the first request of a connection); beyond it: 408 and the connection closed.
    pub head_timeout: Option<Duration>,
    /// Time a kept-alive connection may wait for the first byte of its next request; beyond
    /// it the connection is closed without a response.
    pub idle_timeout: Option<Duration>,
    /// Time to receive a request body, counted from the end of its head; a read past it fails
    /// with `ErrorKind::TimedOut`.
    pub body_timeout: Option<Duration>,
    /// Open connections at most. A connection accepted beyond it is answered 503 by the accept
    /// thread itself (one non-blocking write, no thread) and closed.
    pub max_connections: Option<usize>,
    /// A request body the application did not read to its end is not drained (tiny_http 0.12
    /// reads and discards it when the request is dropped); the connection is closed instead.
    pub close_on_unread_body: bool,
    /// Renders tiny_http's own error responses; `None`: an empty body.
    pub error_response: Option<ErrorResponder>,
}

impl fmt::Debug for Limits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limits")
            .field("max_head_bytes", &self.max_head_bytes)
            .field("max_headers", &self.max_headers)
            .field("head_timeout", &self.head_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("body_timeout", &self.body_timeout)
            .field("max_connections", &self.max_connections)
            .field("close_on_unread_body", &self.close_on_unread_body)
            .field("error_response", &self.error_response.is_some())
            .finish()
    }
}

impl Limits {
    /// The bytes of a complete error response with `status`, with `Connection: close` (the
    /// caller closes the connection; `Response` refuses a `Connection` header, so it is put
    /// in after the status line).
    pub(crate) fn error_bytes(&self, status: u16, version: HTTPVersion) -> Vec<u8> {
        let response = match &self.error_response {
            Some(f) => f(StatusCode(status)),
            None => Response::from_data(Vec::new()).with_status_code(StatusCode(status)),
        };
        let mut out = Vec::with_capacity(512);
        response.raw_print(&mut out, version, &[], false, None).ok();
        if let Some(eol) = out.windows(2).position(|w| w == b"\r\n") {
            out.splice(eol + 2..eol + 2, b"Connection: close\r\n".iter().copied());
        }
        out
    }
}
