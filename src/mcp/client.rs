//! The protocol over any transport: request ids, waiting for the matching response within a
//! deadline (woken at once by cancellation), `notifications/cancelled` for a request given
//! up, the `initialize` handshake with version negotiation, `tools/list` pages, `tools/call`,
//! and what reader threads do with messages nobody waits for (answer `ping`, refuse other
//! server requests, note `tools/list_changed`, keep stray output for diagnostics).
//! Must not start processes or open connections itself (the transports do).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex;
use serde_json::{json, Value};

use super::{McpError, PROTOCOL_VERSIONS};
use crate::base::cancel::{CancelHook, CancelToken};

/// How much of a server's stderr (and stray stdout) is kept.
pub(crate) const TAIL_BYTES: usize = 8 * 1024;

/// What a transport's reader threads hand to the client.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// A response (result or error) to one of our requests.
    Response(Value),
    /// The transport could not deliver request `id` or its answer.
    Failed { id: u64, error: McpError },
    /// Streamable HTTP: the server no longer knows our session (404); re-initialize.
    SessionExpired { id: u64 },
    /// The connection ended (process exit, stream end, oversized message).
    Closed(String),
    /// The caller's cancel token fired.
    Cancelled,
}

/// State the client shares with its reader threads.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// `notifications/tools/list_changed` arrived since the last listing.
    pub tools_changed: AtomicBool,
    /// The end of the server's stderr, stray stdout lines and log notifications.
    tail: Mutex<String>,
    /// Things the client noticed while waiting (unknown response ids).
    notes: Mutex<String>,
}

impl Shared {
    pub fn push_tail(&self, s: &str) {
        push_bounded(&mut self.tail.lock(), s);
    }

    pub fn tail(&self) -> String {
        self.tail.lock().clone()
    }

    fn note(&self, s: &str) {
        let mut n = self.notes.lock();
        push_bounded(&mut n, s);
        n.push('\n');
    }

    fn take_notes(&self) -> String {
        std::mem::take(&mut *self.notes.lock())
    }
}

fn push_bounded(b: &mut String, s: &str) {
    b.push_str(s);
    if b.len() > TAIL_BYTES {
        let mut cut = b.len() - TAIL_BYTES;
        while !b.is_char_boundary(cut) {
            cut += 1;
        }
        b.drain(..cut);
    }
}

/// How a reader thread answers a server's request (stdio: a line on stdin; HTTP: a POST).
pub(crate) type Replier = dyn Fn(Value) + Send + Sync;

/// Handles one message a reader thread read: a response goes to the waiting caller, a
/// server request is answered at once (`ping`, else "method not found"), a notification is
/// noted. A batch (array) is handled element by element. Returns the ids of the responses
/// forwarded, so an HTTP reader knows when its answer has come.
pub(crate) fn dispatch(
    msg: Value,
    shared: &Shared,
    reply: &Replier,
    tx: &Sender<Inbound>,
) -> Vec<u64> {
    let mut answered = Vec::new();
    dispatch_into(msg, shared, reply, tx, &mut answered);
    answered
}

fn dispatch_into(
    msg: Value,
    shared: &Shared,
    reply: &Replier,
    tx: &Sender<Inbound>,
    answered: &mut Vec<u64>,
) {
    let msg = match msg {
        Value::Array(items) => {
            for m in items {
                dispatch_into(m, shared, reply, tx, answered);
            }
            return;
        }
        m @ Value::Object(_) => m,
        other => {
            shared.push_tail(&format!("(not a JSON-RPC message: {})\n", snippet(&other)));
            return;
        }
    };
    let id = msg.get("id").filter(|i| !i.is_null()).cloned();
    match (msg.get("method").and_then(Value::as_str), id) {
        (Some(method), Some(id)) => {
            let answer = if method == "ping" {
                json!({"jsonrpc": "2.0", "id": id, "result": {}})
            } else {
                json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": -32601,
                    "message": format!("svc's MCP client does not support `{method}`"),
                }})
            };
            reply(answer);
        }
        (Some(method), None) => match method {
            "notifications/tools/list_changed" => {
                shared.tools_changed.store(true, Ordering::SeqCst);
            }
            "notifications/message" => {
                let p = msg.get("params").unwrap_or(&Value::Null);
                let level = p.get("level").and_then(Value::as_str).unwrap_or("info");
                let data = match p.get("data") {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                    None => String::new(),
                };
                shared.push_tail(&format!("[{level}] {data}\n"));
            }
            // Progress, resource and cancellation notifications change nothing here.
            _ => {}
        },
        (None, Some(id)) => {
            if let Some(n) = id_number(&id) {
                answered.push(n);
            }
            let _ = tx.send(Inbound::Response(msg));
        }
        (None, None) => {
            shared.push_tail(&format!("(not a JSON-RPC message: {})\n", snippet(&msg)));
        }
    }
}

/// A request id as we sent it (a number; some servers echo it as a string).
fn id_number(id: &Value) -> Option<u64> {
    id.as_u64()
        .or_else(|| id.as_str().and_then(|s| s.parse().ok()))
}

pub(crate) fn snippet(v: &Value) -> String {
    let s = v.to_string();
    if s.len() <= 200 {
        s
    } else {
        let mut cut = 200;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}...", &s[..cut])
    }
}

/// A transport: sends messages; its reader threads deliver [`Inbound`]s.
pub(crate) trait Link: Send {
    /// Prepares the connection before `initialize` (the legacy SSE transport waits for its
    /// `endpoint` event). Most transports have nothing to do.
    fn open(&mut self, _deadline: Instant, _cancel: &CancelToken) -> Result<(), McpError> {
        Ok(())
    }
    /// Sends one message; `request` is the id when the message is a request (HTTP reads its
    /// answer on a thread of its own).
    fn send(
        &mut self,
        msg: &Value,
        request: Option<u64>,
        timeout: Duration,
    ) -> Result<(), McpError>;
    /// The protocol version `initialize` agreed on (Streamable HTTP sends it as a header).
    fn negotiated(&mut self, _version: &str) {}
    /// Forgets the HTTP session before a new `initialize`.
    fn reset_session(&mut self) {}
    /// The error to report once the connection closed for `why` (stdio adds the exit
    /// status and the stderr tail).
    fn closed_error(&mut self, why: String) -> McpError {
        McpError::Closed(why)
    }
    /// Starts shutting down (stdio: closes stdin; HTTP: ends the session) without waiting.
    fn begin_close(&mut self);
    /// The server's process id (stdio).
    fn pid(&self) -> Option<u32> {
        None
    }
    /// Finishes shutting down by `deadline`: everything the transport started has ended
    /// when this returns (processes killed if they would not stop).
    fn finish_close(&mut self, deadline: Instant);
}

/// What `initialize` told us about the server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
    pub protocol_version: String,
    pub instructions: Option<String>,
    pub capabilities: Value,
}

/// A tool the server offers.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: String,
    /// The JSON Schema of the arguments (an object schema).
    pub input_schema: Value,
}

/// The result of `tools/call`.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    pub content: Vec<Value>,
    pub structured: Option<Value>,
    pub is_error: bool,
}

/// The client's name and version in `initialize`.
const CLIENT_NAME: &str = "svc";

/// At most this many `tools/list` pages are read (a server that keeps returning a cursor
/// would otherwise hold the stage forever).
const MAX_PAGES: usize = 100;

/// How long a notification (`initialized`, `cancelled`) may take to send over HTTP.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);

/// One connection to one MCP server. Calls are made one at a time (`&mut self`).
pub struct Client {
    link: Box<dyn Link>,
    inbox: Receiver<Inbound>,
    tx: Sender<Inbound>,
    shared: Arc<Shared>,
    next_id: u64,
    info: Option<ServerInfo>,
    /// Set once the connection closed: every later call fails with it.
    dead: Option<McpError>,
    closed: bool,
    /// The `initialize` parameters, kept to start a new HTTP session.
    init_timeout: Duration,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("info", &self.info)
            .field("dead", &self.dead)
            .finish_non_exhaustive()
    }
}

impl Client {
    pub(crate) fn new(
        link: Box<dyn Link>,
        inbox: Receiver<Inbound>,
        tx: Sender<Inbound>,
        shared: Arc<Shared>,
    ) -> Client {
        Client {
            link,
            inbox,
            tx,
            shared,
            next_id: 1,
            info: None,
            dead: None,
            closed: false,
            init_timeout: Duration::from_secs(10),
        }
    }

    /// What `initialize` returned (after [`Client::initialize`]).
    pub fn info(&self) -> Option<&ServerInfo> {
        self.info.as_ref()
    }

    /// The server process's id (stdio servers; it leads its own process group).
    pub fn pid(&self) -> Option<u32> {
        self.link.pid()
    }

    /// The end of the server's stderr (stdio), stray output and log notifications.
    pub fn stderr_tail(&self) -> String {
        self.shared.tail()
    }

    /// True (once) when the server said its tool list changed since the last listing.
    pub fn take_tools_changed(&self) -> bool {
        self.shared.tools_changed.swap(false, Ordering::SeqCst)
    }

    /// The handshake: `initialize` (offering 2025-06-18) within `timeout`, the version
    /// check, then `notifications/initialized`.
    pub fn initialize(
        &mut self,
        timeout: Duration,
        cancel: &CancelToken,
    ) -> Result<&ServerInfo, McpError> {
        self.init_timeout = timeout;
        let deadline = Instant::now() + timeout;
        self.link.open(deadline, cancel)?;
        self.handshake(deadline, cancel)?;
        self.info
            .as_ref()
            .ok_or_else(|| McpError::Protocol("no server info".into()))
    }

    fn handshake(&mut self, deadline: Instant, cancel: &CancelToken) -> Result<(), McpError> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSIONS[0],
            "capabilities": {},
            "clientInfo": {"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")},
        });
        let r = self.request_until("initialize", params, deadline, cancel, false)?;
        let version = r
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                McpError::Protocol("the `initialize` result has no protocolVersion".into())
            })?;
        if !PROTOCOL_VERSIONS.contains(&version) {
            return Err(McpError::Version(version.to_string()));
        }
        let info = r.get("serverInfo").unwrap_or(&Value::Null);
        let text = |k: &str| {
            info.get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        self.info = Some(ServerInfo {
            name: text("name"),
            version: text("version"),
            protocol_version: version.to_string(),
            instructions: r
                .get("instructions")
                .and_then(Value::as_str)
                .map(str::to_string),
            capabilities: r.get("capabilities").cloned().unwrap_or(Value::Null),
        });
        self.link.negotiated(version);
        self.notify("notifications/initialized", None)
    }

    /// Every tool, following `nextCursor` until the server gives none.
    pub fn list_tools(
        &mut self,
        timeout: Duration,
        cancel: &CancelToken,
    ) -> Result<Vec<Tool>, McpError> {
        self.shared.tools_changed.store(false, Ordering::SeqCst);
        let deadline = Instant::now() + timeout;
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let r = self.request_until("tools/list", params, deadline, cancel, true)?;
            let page = r.get("tools").and_then(Value::as_array).ok_or_else(|| {
                McpError::Protocol("the `tools/list` result has no `tools` array".into())
            })?;
            for t in page {
                tools.push(parse_tool(t)?);
            }
            cursor = r
                .get("nextCursor")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
                .map(str::to_string);
            if cursor.is_none() {
                return Ok(tools);
            }
        }
        Err(McpError::Protocol(format!(
            "`tools/list` still had more pages after {MAX_PAGES}"
        )))
    }

    /// Calls tool `name` with `arguments` (a JSON object) within `timeout`; on timeout or
    /// cancellation the server is told with `notifications/cancelled`.
    pub fn call_tool(
        &mut self,
        name: &str,
        arguments: &Value,
        timeout: Duration,
        cancel: &CancelToken,
    ) -> Result<CallResult, McpError> {
        let deadline = Instant::now() + timeout;
        let r = self.request_until(
            "tools/call",
            json!({"name": name, "arguments": arguments}),
            deadline,
            cancel,
            true,
        )?;
        let content = match r.get("content") {
            Some(Value::Array(a)) => a.clone(),
            None | Some(Value::Null) => Vec::new(),
            Some(_) => {
                return Err(McpError::Protocol(
                    "the `tools/call` result's `content` is not an array".into(),
                ))
            }
        };
        Ok(CallResult {
            content,
            structured: r.get("structuredContent").filter(|v| !v.is_null()).cloned(),
            is_error: r.get("isError").and_then(Value::as_bool).unwrap_or(false),
        })
    }

    /// Sends `ping` and waits for its answer.
    pub fn ping(&mut self, timeout: Duration, cancel: &CancelToken) -> Result<(), McpError> {
        let deadline = Instant::now() + timeout;
        self.request_until("ping", json!({}), deadline, cancel, true)
            .map(|_| ())
    }

    fn notify(&mut self, method: &str, params: Option<Value>) -> Result<(), McpError> {
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if let Some(p) = params {
            msg["params"] = p;
        }
        self.link.send(&msg, None, NOTIFY_TIMEOUT)
    }

    /// Sends a request and waits for its response until `deadline`. `cancellable`: tell
    /// the server when we give up (never for `initialize`, as the protocol says).
    fn request_until(
        &mut self,
        method: &str,
        params: Value,
        deadline: Instant,
        cancel: &CancelToken,
        cancellable: bool,
    ) -> Result<Value, McpError> {
        if let Some(e) = &self.dead {
            return Err(e.clone());
        }
        if cancel.is_cancelled() {
            return Err(McpError::Cancelled);
        }
        // The token's hook wakes the wait below at once.
        let tx = self.tx.clone();
        let hook: CancelHook = Arc::new(move || {
            let _ = tx.send(Inbound::Cancelled);
        });
        cancel.on_cancel(&hook);
        let mut renewed = false;
        let started = Instant::now();
        'send: loop {
            let id = self.next_id;
            self.next_id += 1;
            let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            let left = deadline.saturating_duration_since(Instant::now());
            self.link
                .send(&msg, Some(id), left)
                .map_err(|e| self.fail(e))?;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let got = if left.is_zero() {
                    Err(RecvTimeoutError::Timeout)
                } else {
                    self.inbox.recv_timeout(left)
                };
                match got {
                    Ok(Inbound::Response(v)) => {
                        if v.get("id").and_then(id_number) != Some(id) {
                            self.shared.note(&format!(
                                "ignored a response with an id svc did not send: {}",
                                snippet(&v)
                            ));
                            continue;
                        }
                        return response_result(method, v);
                    }
                    Ok(Inbound::Failed { id: f, error }) if f == id => return Err(error),
                    Ok(Inbound::Failed { .. }) => continue,
                    Ok(Inbound::SessionExpired { id: f }) if f == id && !renewed => {
                        renewed = true;
                        self.renew_session(deadline, cancel)?;
                        continue 'send;
                    }
                    Ok(Inbound::SessionExpired { id: f }) if f == id => {
                        return Err(McpError::Http(
                            "the server forgot the session again right after a new `initialize`"
                                .into(),
                        ))
                    }
                    Ok(Inbound::SessionExpired { .. }) => continue,
                    Ok(Inbound::Closed(why)) => {
                        let e = self.link.closed_error(why);
                        return Err(self.fail(e));
                    }
                    Ok(Inbound::Cancelled) => {
                        if !cancel.is_cancelled() {
                            continue; // a token of an earlier call
                        }
                        if cancellable {
                            self.send_cancelled(id, "the svc stage was cancelled");
                        }
                        return Err(McpError::Cancelled);
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        if cancellable {
                            self.send_cancelled(id, "svc stopped waiting: the call timed out");
                        }
                        return Err(McpError::Timeout {
                            method: method.to_string(),
                            // The time allowed, not the (noisier) time waited.
                            after_ms: deadline.saturating_duration_since(started).as_millis()
                                as u64,
                            notes: self.diagnostics(),
                        });
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        let e = self.link.closed_error("the connection ended".into());
                        return Err(self.fail(e));
                    }
                }
            }
        }
    }

    /// What to tell people when a wait ran out: what we noticed, then the output tail.
    fn diagnostics(&self) -> String {
        let mut s = self.shared.take_notes();
        s.push_str(&self.shared.tail());
        s
    }

    fn send_cancelled(&mut self, id: u64, reason: &str) {
        let _ = self.notify(
            "notifications/cancelled",
            Some(json!({"requestId": id, "reason": reason})),
        );
    }

    /// Streamable HTTP answered 404 for our session: start a new one.
    fn renew_session(&mut self, deadline: Instant, cancel: &CancelToken) -> Result<(), McpError> {
        self.link.reset_session();
        let limit = deadline.min(Instant::now() + self.init_timeout);
        self.handshake(limit, cancel)
    }

    /// Remembers a connection-ending error.
    fn fail(&mut self, e: McpError) -> McpError {
        if matches!(e, McpError::Closed(_) | McpError::Exited { .. }) {
            self.dead = Some(e.clone());
        }
        e
    }

    /// Starts shutting down without waiting (see [`Client::finish_close`]); lets a caller
    /// close several servers in the time of the slowest.
    pub fn begin_close(&mut self) {
        if !self.closed {
            self.link.begin_close();
        }
    }

    /// Waits for the shutdown begun by [`Client::begin_close`] until `deadline`, then stops
    /// whatever is left (kills the process group, interrupts streams).
    pub fn finish_close(&mut self, deadline: Instant) {
        if !self.closed {
            self.closed = true;
            self.link.finish_close(deadline);
            self.dead = Some(McpError::Closed("svc closed the connection".into()));
        }
    }

    /// Shuts the connection down: stdio closes stdin, waits up to `grace`, then kills the
    /// process group; HTTP ends the session and stops its readers.
    pub fn close(mut self, grace: Duration) {
        self.begin_close();
        self.finish_close(Instant::now() + grace);
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.begin_close();
        self.finish_close(Instant::now() + Duration::from_secs(1));
    }
}

fn response_result(method: &str, v: Value) -> Result<Value, McpError> {
    if let Some(err) = v.get("error") {
        return Err(McpError::Rpc {
            method: method.to_string(),
            code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        });
    }
    match v.get("result") {
        Some(r @ Value::Object(_)) => Ok(r.clone()),
        Some(other) => Err(McpError::Protocol(format!(
            "the result of `{method}` is not an object: {}",
            snippet(other)
        ))),
        None => Err(McpError::Protocol(format!(
            "the response to `{method}` has neither result nor error"
        ))),
    }
}

fn parse_tool(t: &Value) -> Result<Tool, McpError> {
    let name = t
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| McpError::Protocol(format!("a tool has no name: {}", snippet(t))))?;
    let description = t
        .get("description")
        .or_else(|| t.get("title"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    // Models need an object schema; a server that gives none gets the empty object.
    let input_schema = match t.get("inputSchema") {
        Some(s @ Value::Object(_)) => {
            let mut s = s.clone();
            if s.get("type").is_none() {
                s["type"] = json!("object");
            }
            s
        }
        _ => json!({"type": "object", "properties": {}}),
    };
    Ok(Tool {
        name: name.to_string(),
        description,
        input_schema,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_answers_pings_refuses_requests_and_forwards_responses() {
        let shared = Shared::default();
        let (tx, rx) = crossbeam_channel::unbounded();
        let replies: Arc<Mutex<Vec<Value>>> = Arc::default();
        let sink = replies.clone();
        let reply = move |v: Value| sink.lock().push(v);
        let ids = dispatch(
            json!([
                {"jsonrpc": "2.0", "id": "p1", "method": "ping"},
                {"jsonrpc": "2.0", "id": 9, "method": "sampling/createMessage", "params": {}},
                {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
                {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "error", "data": "disk full"}},
                {"jsonrpc": "2.0", "id": 3, "result": {}},
                "garbage"
            ]),
            &shared,
            &reply,
            &tx,
        );
        assert_eq!(ids, [3]);
        let r = replies.lock();
        assert_eq!(r[0], json!({"jsonrpc": "2.0", "id": "p1", "result": {}}));
        assert_eq!(r[1]["error"]["code"], -32601);
        assert_eq!(r[1]["id"], 9);
        assert!(shared.tools_changed.load(Ordering::SeqCst));
        assert!(matches!(rx.try_recv(), Ok(Inbound::Response(_))));
        let tail = shared.tail();
        assert!(tail.contains("[error] disk full"), "{tail}");
        assert!(tail.contains("garbage"), "{tail}");
    }

    #[test]
    fn tools_get_object_schemas_and_errors_become_rpc_errors() {
        let t = parse_tool(&json!({"name": "x", "inputSchema": {"properties": {}}})).unwrap();
        assert_eq!(t.input_schema["type"], "object");
        let t = parse_tool(&json!({"name": "y"})).unwrap();
        assert_eq!(t.input_schema["type"], "object");
        assert!(parse_tool(&json!({"description": "no name"})).is_err());
        let e = response_result(
            "tools/call",
            json!({"id": 1, "error": {"code": -32602, "message": "Unknown tool"}}),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the server refused `tools/call`: Unknown tool (JSON-RPC error -32602)"
        );
    }

    #[test]
    fn tails_stay_bounded() {
        let s = Shared::default();
        for _ in 0..100 {
            s.push_tail(&"é".repeat(100));
        }
        assert!(s.tail().len() <= TAIL_BYTES);
    }
}
