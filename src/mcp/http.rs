//! The HTTP transports over `ureq` (one agent per connection, so shutting it down interrupts
//! every read of that connection and nothing else):
//! - Streamable HTTP: every message is a POST with `Accept: application/json,
//!   text/event-stream`; a request's answer (a JSON body or an event stream read up to the
//!   matching response) is read on a thread of its own and handed to the client; the
//!   `Mcp-Session-Id` from `initialize` and the negotiated `MCP-Protocol-Version` go on every
//!   later message; a 404 for our session asks the client to initialize again; the session
//!   is DELETEd at shutdown.
//! - Legacy HTTP+SSE (`protocol = "sse"`): a GET event stream whose `endpoint` event names
//!   where to POST messages (same origin only); answers arrive on the stream.
//!
//! Must not retry requests on its own (the client decides) or log header values.

use std::io::{BufRead, BufReader, Read};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use serde_json::Value;

use super::client::{dispatch, snippet, Client, Inbound, Link, Shared};
use super::sse::EventReader;
use super::{McpError, MAX_MESSAGE_BYTES};
use crate::base::cancel::CancelToken;

/// Time to open a TCP connection (the overall limits come from the caller's deadlines).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A request's reader gives up this long after the caller's deadline at the latest.
const READER_GRACE: Duration = Duration::from_secs(5);
/// Time the DELETE of a session may take at shutdown.
const DELETE_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest error body read for a message.
const MAX_ERROR_BODY: u64 = 64 * 1024;

/// What every thread of one HTTP connection shares.
struct Conn {
    agent: ureq::Agent,
    url: String,
    /// The definition's headers, secrets already expanded (never logged).
    headers: Vec<(String, String)>,
    session: Mutex<Option<String>>,
    protocol: Mutex<Option<String>>,
}

impl Conn {
    fn new(url: &str, headers: Vec<(String, String)>) -> Conn {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .user_agent(concat!("svc/", env!("CARGO_PKG_VERSION")))
            .build();
        Conn {
            agent: ureq::Agent::new_with_config(config),
            url: url.to_string(),
            headers,
            session: Mutex::new(None),
            protocol: Mutex::new(None),
        }
    }

    /// POSTs one JSON-RPC message to `url`.
    fn post(
        &self,
        url: &str,
        body: &[u8],
        timeout: Duration,
        streamable: bool,
    ) -> Result<(Option<String>, ureq::http::Response<ureq::Body>), McpError> {
        let mut req = self
            .agent
            .post(url)
            .config()
            .timeout_global(Some(timeout))
            .build()
            .header("content-type", "application/json");
        if streamable {
            req = req.header("accept", "application/json, text/event-stream");
        }
        for (k, v) in &self.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let session = if streamable {
            self.session.lock().clone()
        } else {
            None
        };
        if let Some(s) = &session {
            req = req.header("mcp-session-id", s.as_str());
        }
        if streamable {
            if let Some(p) = self.protocol.lock().as_deref() {
                req = req.header("mcp-protocol-version", p);
            }
        }
        let resp = req
            .send(body)
            .map_err(|e| McpError::Http(format!("cannot reach {}: {e}", self.url)))?;
        Ok((session, resp))
    }

    /// Reads an error body and describes the status.
    fn status_error(&self, status: u16, body: ureq::Body) -> McpError {
        let text = body
            .into_with_config()
            .limit(MAX_ERROR_BODY)
            .lossy_utf8(true)
            .read_to_string()
            .unwrap_or_default();
        let text = text.trim();
        let shown = if text.len() > 500 {
            let mut cut = 500;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{}...", &text[..cut])
        } else {
            text.to_string()
        };
        if shown.is_empty() {
            McpError::Http(format!("HTTP {status} from {}", self.url))
        } else {
            McpError::Http(format!("HTTP {status} from {}: {shown}", self.url))
        }
    }
}

fn content_type(resp: &ureq::http::Response<ureq::Body>) -> String {
    resp.headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase()
}

/// A session id is visible ASCII (0x21 to 0x7E), per the protocol.
fn valid_session_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= 1024 && s.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

// ---------------------------------------------------------------------------------------
// Streamable HTTP

struct StreamableLink {
    conn: Arc<Conn>,
    tx: Sender<Inbound>,
    shared: Arc<Shared>,
    /// Readers of request answers (finished ones are pruned as new ones start).
    readers: Vec<JoinHandle<()>>,
    closing: Option<JoinHandle<()>>,
}

/// A client for a Streamable HTTP server at `url` (no I/O until `initialize`).
pub fn streamable(url: &str, headers: Vec<(String, String)>) -> Client {
    let shared = Arc::new(Shared::default());
    let (tx, rx) = crossbeam_channel::unbounded();
    let link = StreamableLink {
        conn: Arc::new(Conn::new(url, headers)),
        tx: tx.clone(),
        shared: shared.clone(),
        readers: Vec::new(),
        closing: None,
    };
    Client::new(Box::new(link), rx, tx, shared)
}

impl Link for StreamableLink {
    fn send(
        &mut self,
        msg: &Value,
        request: Option<u64>,
        timeout: Duration,
    ) -> Result<(), McpError> {
        let body = serde_json::to_vec(msg)
            .map_err(|e| McpError::Protocol(format!("cannot encode a message: {e}")))?;
        let Some(id) = request else {
            // Notifications and responses: 202 Accepted, nothing to read.
            let (_, resp) = self.conn.post(&self.conn.url, &body, timeout, true)?;
            let status = resp.status().as_u16();
            let (_, b) = resp.into_parts();
            if !(200..300).contains(&status) {
                return Err(self.conn.status_error(status, b));
            }
            let _ = b.into_with_config().limit(MAX_ERROR_BODY).read_to_vec();
            return Ok(());
        };
        self.readers.retain(|h| !h.is_finished());
        let (conn, tx, shared) = (self.conn.clone(), self.tx.clone(), self.shared.clone());
        let limit = timeout + READER_GRACE;
        let h = std::thread::Builder::new()
            .name("mcp-http".into())
            .spawn(move || {
                if let Some(e) = exchange(&conn, &body, id, limit, &shared, &tx) {
                    let _ = tx.send(e);
                }
            })
            .map_err(|e| McpError::Http(format!("cannot start a reader thread: {e}")))?;
        self.readers.push(h);
        Ok(())
    }

    fn negotiated(&mut self, version: &str) {
        *self.conn.protocol.lock() = Some(version.to_string());
    }

    fn reset_session(&mut self) {
        *self.conn.session.lock() = None;
        *self.conn.protocol.lock() = None;
    }

    fn begin_close(&mut self) {
        let Some(session) = self.conn.session.lock().take() else {
            return;
        };
        let conn = self.conn.clone();
        // Ending the session is a courtesy: a server that does not allow it answers 405.
        self.closing = std::thread::Builder::new()
            .name("mcp-http-close".into())
            .spawn(move || {
                let mut req = conn
                    .agent
                    .delete(&conn.url)
                    .config()
                    .timeout_global(Some(DELETE_TIMEOUT))
                    .build()
                    .header("mcp-session-id", session.as_str());
                if let Some(p) = conn.protocol.lock().as_deref() {
                    req = req.header("mcp-protocol-version", p);
                }
                for (k, v) in &conn.headers {
                    req = req.header(k.as_str(), v.as_str());
                }
                let _ = req.call();
            })
            .ok();
    }

    fn finish_close(&mut self, deadline: Instant) {
        if let Some(h) = self.closing.take() {
            join_until(h, deadline);
        }
        // Interrupts every read still running on this connection's sockets.
        self.conn.agent.clone().shutdown();
        let until = Instant::now() + Duration::from_millis(500);
        for h in self.readers.drain(..) {
            join_until(h, until);
        }
    }
}

fn join_until(h: JoinHandle<()>, until: Instant) {
    while !h.is_finished() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
    }
    if h.is_finished() {
        let _ = h.join();
    } else {
        log::warn!("an MCP HTTP reader did not stop in time");
    }
}

/// POSTs request `id` and reads its answer; returns what to tell the waiting client when
/// the answer did not come (the answer itself was dispatched).
fn exchange(
    conn: &Arc<Conn>,
    body: &[u8],
    id: u64,
    limit: Duration,
    shared: &Shared,
    tx: &Sender<Inbound>,
) -> Option<Inbound> {
    let failed = |error: McpError| Some(Inbound::Failed { id, error });
    let (session, resp) = match conn.post(&conn.url, body, limit, true) {
        Ok(r) => r,
        Err(e) => return failed(e),
    };
    let status = resp.status().as_u16();
    if status == 404 && session.is_some() {
        return Some(Inbound::SessionExpired { id });
    }
    if let Some(sid) = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .filter(|s| valid_session_id(s))
    {
        *conn.session.lock() = Some(sid.to_string());
    }
    let ctype = content_type(&resp);
    let (_, body) = resp.into_parts();
    if !(200..300).contains(&status) {
        return failed(conn.status_error(status, body));
    }
    let reply = {
        let conn = conn.clone();
        move |v: Value| {
            if let Ok(b) = serde_json::to_vec(&v) {
                let _ = conn.post(&conn.url, &b, DELETE_TIMEOUT, true);
            }
        }
    };
    if ctype.starts_with("text/event-stream") {
        let reader = BufReader::new(body.into_with_config().limit(u64::MAX).reader());
        let mut events = EventReader::new(reader, MAX_MESSAGE_BYTES);
        loop {
            match events.next_event() {
                Ok(Some(ev)) => {
                    if ev.name.as_deref().is_some_and(|n| n != "message") || ev.data.is_empty() {
                        continue;
                    }
                    let msg: Value = match serde_json::from_str(&ev.data) {
                        Ok(v) => v,
                        Err(e) => {
                            return failed(McpError::Protocol(format!(
                                "the event stream carried data that is not JSON ({e}): {}",
                                snippet(&Value::String(ev.data))
                            )))
                        }
                    };
                    if dispatch(msg, shared, &reply, tx).contains(&id) {
                        return None;
                    }
                }
                Ok(None) => {
                    return failed(McpError::Http(
                        "the server ended the event stream without answering".into(),
                    ))
                }
                Err(e) => return failed(McpError::Http(e.to_string())),
            }
        }
    }
    if ctype.starts_with("application/json") {
        let mut buf = Vec::new();
        let read = body
            .into_with_config()
            .limit(MAX_MESSAGE_BYTES as u64 + 1)
            .reader()
            .read_to_end(&mut buf);
        if let Err(e) = read {
            return failed(McpError::Http(format!("reading the answer failed: {e}")));
        }
        if buf.len() > MAX_MESSAGE_BYTES {
            return failed(McpError::Protocol(format!(
                "the answer is larger than {} MiB",
                MAX_MESSAGE_BYTES / (1024 * 1024)
            )));
        }
        let msg: Value = match serde_json::from_slice(&buf) {
            Ok(v) => v,
            Err(e) => {
                return failed(McpError::Protocol(format!(
                    "the answer is not JSON ({e}): {}",
                    snippet(&Value::String(String::from_utf8_lossy(&buf).into_owned()))
                )))
            }
        };
        if dispatch(msg, shared, &reply, tx).contains(&id) {
            return None;
        }
        return failed(McpError::Protocol(
            "the JSON answer does not hold the response to the request".into(),
        ));
    }
    failed(McpError::Protocol(format!(
        "the server answered a request with HTTP {status} and content type `{ctype}` \
         (expected application/json or text/event-stream)"
    )))
}

// ---------------------------------------------------------------------------------------
// Legacy HTTP+SSE

struct SseLink {
    conn: Arc<Conn>,
    tx: Sender<Inbound>,
    shared: Arc<Shared>,
    endpoint: Arc<Mutex<Option<String>>>,
    endpoint_rx: Option<Receiver<Result<String, McpError>>>,
    stream: Option<JoinHandle<()>>,
}

/// A client for a legacy HTTP+SSE server whose event stream is at `url`.
pub fn legacy_sse(url: &str, headers: Vec<(String, String)>) -> Client {
    let shared = Arc::new(Shared::default());
    let (tx, rx) = crossbeam_channel::unbounded();
    let link = SseLink {
        conn: Arc::new(Conn::new(url, headers)),
        tx: tx.clone(),
        shared: shared.clone(),
        endpoint: Arc::new(Mutex::new(None)),
        endpoint_rx: None,
        stream: None,
    };
    Client::new(Box::new(link), rx, tx, shared)
}

/// `scheme://host[:port]` of an absolute URL.
fn origin(url: &str) -> Option<&str> {
    let scheme_end = url.find("://")? + 3;
    let rest = &url[scheme_end..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some(&url[..scheme_end + end])
}

/// Resolves the `endpoint` event's reference against the stream's URL.
fn resolve(base: &str, reference: &str) -> Option<String> {
    let r = reference.trim();
    if r.starts_with("http://") || r.starts_with("https://") {
        return Some(r.to_string());
    }
    let o = origin(base)?;
    if r.starts_with('/') {
        return Some(format!("{o}{r}"));
    }
    let path = &base[o.len()..];
    let path = &path[..path.find(['?', '#']).unwrap_or(path.len())];
    let dir = &path[..path.rfind('/').map(|i| i + 1).unwrap_or(0)];
    let dir = if dir.is_empty() { "/" } else { dir };
    Some(format!("{o}{dir}{r}"))
}

fn read_stream(
    conn: &Arc<Conn>,
    endpoint: &Arc<Mutex<Option<String>>>,
    endpoint_tx: &Sender<Result<String, McpError>>,
    shared: &Shared,
    tx: &Sender<Inbound>,
) -> Result<(), McpError> {
    let mut req = conn
        .agent
        .get(&conn.url)
        .header("accept", "text/event-stream");
    for (k, v) in &conn.headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let resp = req
        .call()
        .map_err(|e| McpError::Http(format!("cannot reach {}: {e}", conn.url)))?;
    let status = resp.status().as_u16();
    let ctype = content_type(&resp);
    let (_, body) = resp.into_parts();
    if !(200..300).contains(&status) {
        return Err(conn.status_error(status, body));
    }
    if !ctype.starts_with("text/event-stream") {
        return Err(McpError::Protocol(format!(
            "the SSE endpoint answered with content type `{ctype}`, not text/event-stream"
        )));
    }
    let reply = {
        let (conn, endpoint) = (conn.clone(), endpoint.clone());
        move |v: Value| {
            let to = endpoint.lock().clone();
            if let (Some(to), Ok(b)) = (to, serde_json::to_vec(&v)) {
                let _ = conn.post(&to, &b, DELETE_TIMEOUT, false);
            }
        }
    };
    let reader: Box<dyn BufRead> = Box::new(BufReader::new(
        body.into_with_config().limit(u64::MAX).reader(),
    ));
    let mut events = EventReader::new(reader, MAX_MESSAGE_BYTES);
    loop {
        let ev = match events.next_event() {
            Ok(Some(ev)) => ev,
            Ok(None) => return Err(McpError::Closed("the server ended its event stream".into())),
            Err(e) => return Err(McpError::Closed(e.to_string())),
        };
        match ev.name.as_deref() {
            Some("endpoint") => {
                let resolved = resolve(&conn.url, &ev.data)
                    .filter(|u| origin(u) == origin(&conn.url))
                    .ok_or_else(|| {
                        McpError::Protocol(format!(
                            "the `endpoint` event names `{}`, which is not on the server's origin",
                            ev.data.trim()
                        ))
                    });
                if let Ok(u) = &resolved {
                    *endpoint.lock() = Some(u.clone());
                }
                let _ = endpoint_tx.send(resolved);
            }
            None | Some("message") => match serde_json::from_str::<Value>(&ev.data) {
                Ok(v) => {
                    dispatch(v, shared, &reply, tx);
                }
                Err(_) => shared.push_tail(&format!(
                    "(an event that is not JSON: {})\n",
                    snippet(&Value::String(ev.data))
                )),
            },
            Some(_) => {}
        }
    }
}

impl Link for SseLink {
    fn open(&mut self, deadline: Instant, cancel: &CancelToken) -> Result<(), McpError> {
        if self.endpoint.lock().is_some() {
            return Ok(());
        }
        if self.stream.is_none() {
            let (etx, erx) = crossbeam_channel::bounded(4);
            let (conn, endpoint, shared, tx) = (
                self.conn.clone(),
                self.endpoint.clone(),
                self.shared.clone(),
                self.tx.clone(),
            );
            let h = std::thread::Builder::new()
                .name("mcp-sse".into())
                .spawn(move || {
                    let end = read_stream(&conn, &endpoint, &etx, &shared, &tx);
                    let why = match end {
                        Ok(()) => "the event stream ended".to_string(),
                        Err(e) => e.to_string(),
                    };
                    let _ = etx.send(Err(McpError::Closed(why.clone())));
                    let _ = tx.send(Inbound::Closed(why));
                })
                .map_err(|e| McpError::Http(format!("cannot start a reader thread: {e}")))?;
            self.stream = Some(h);
            self.endpoint_rx = Some(erx);
        }
        let Some(rx) = &self.endpoint_rx else {
            return Err(McpError::Closed("no event stream".into()));
        };
        loop {
            if cancel.is_cancelled() {
                return Err(McpError::Cancelled);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(McpError::Timeout {
                    method: "the `endpoint` event".into(),
                    after_ms: 0,
                    notes: self.shared.tail(),
                });
            }
            match rx.recv_timeout(left.min(Duration::from_millis(50))) {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(McpError::Closed(why))) => return Err(McpError::Http(why)),
                Ok(Err(e)) => return Err(e),
                Err(_) => continue,
            }
        }
    }

    fn send(
        &mut self,
        msg: &Value,
        _request: Option<u64>,
        timeout: Duration,
    ) -> Result<(), McpError> {
        let Some(to) = self.endpoint.lock().clone() else {
            return Err(McpError::Closed("the server named no endpoint".into()));
        };
        let body = serde_json::to_vec(msg)
            .map_err(|e| McpError::Protocol(format!("cannot encode a message: {e}")))?;
        let (_, resp) =
            self.conn
                .post(&to, &body, timeout.max(Duration::from_millis(100)), false)?;
        let status = resp.status().as_u16();
        let (_, b) = resp.into_parts();
        if !(200..300).contains(&status) {
            return Err(self.conn.status_error(status, b));
        }
        let _ = b.into_with_config().limit(MAX_ERROR_BODY).read_to_vec();
        Ok(())
    }

    fn begin_close(&mut self) {}

    fn finish_close(&mut self, _deadline: Instant) {
        // The legacy transport has no session to end: closing the stream is the goodbye.
        self.conn.agent.clone().shutdown();
        if let Some(h) = self.stream.take() {
            join_until(h, Instant::now() + Duration::from_millis(500));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_resolve_against_the_stream_url() {
        let base = "http://127.0.0.1:8000/mcp/sse?x=1";
        assert_eq!(
            resolve(base, "/messages/?session_id=ab").as_deref(),
            Some("http://127.0.0.1:8000/messages/?session_id=ab")
        );
        assert_eq!(
            resolve(base, "messages?s=1").as_deref(),
            Some("http://127.0.0.1:8000/mcp/messages?s=1")
        );
        assert_eq!(resolve("http://h:1", "m").as_deref(), Some("http://h:1/m"));
        assert_eq!(origin("https://a.b:9/x?y"), Some("https://a.b:9"));
        assert_ne!(
            origin(&resolve(base, "http://evil.example/x").unwrap_or_default()),
            origin(base)
        );
    }

    #[test]
    fn session_ids_are_visible_ascii() {
        assert!(valid_session_id("abc-123_DEF"));
        assert!(!valid_session_id("a b"));
        assert!(!valid_session_id(""));
        assert!(!valid_session_id("é"));
    }
}
