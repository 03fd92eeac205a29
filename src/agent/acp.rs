//! The ACP backend (engine.md §12.7): runs an external Agent Client Protocol agent
//! (`acp.command`) as a child process in the sandbox directory and talks JSON-RPC 2.0 over
//! its stdio, one message per line: `initialize` → `session/new{cwd}` → `session/prompt`,
//! `session/update` notifications turned into [`AgentEvent`]s, `session/cancel` on
//! cancellation. Agent requests are answered: permissions are granted once (the run is
//! unattended), `fs/read_text_file` and `fs/write_text_file` go through the [`Sandbox`],
//! anything else is "method not found". [`run_stage`] is one `backend=acp` stage: it counts
//! as a running agent session for steering and sends queued guidance as follow-up prompts.
//! Must not call model providers or pass credentials.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use parking_lot::Mutex;
use serde_json::{json, Value};

use super::{AgentEvent, Steered, Steering};
use crate::base::cancel::CancelToken;
use crate::sandbox::Sandbox;

/// The ACP protocol version we speak.
pub const PROTOCOL_VERSION: u64 = 1;

/// How to start the agent.
#[derive(Debug, Clone)]
pub struct AcpConfig {
    /// A shell command line (`sh -c`), run in the sandbox directory.
    pub command: String,
    /// Extra environment for the agent (nothing from the vault is passed implicitly).
    pub env: Vec<(String, String)>,
    /// Limit for `initialize` and `session/new` (agents started through package runners
    /// may take a while on first start).
    pub startup_timeout: Duration,
    /// After `session/cancel`, how long to wait for the agent to stop before killing it.
    pub cancel_grace: Duration,
    /// The stage's MCP servers, passed to the agent in `session/new` in the forms it says it
    /// supports (stdio always; HTTP and SSE when its `mcpCapabilities` say so).
    pub mcp_servers: Vec<AcpMcpServer>,
}

/// An MCP server for an ACP agent: its definition and its `env` (stdio) or `headers` (HTTP)
/// with `{{ secrets.NAME }}` already expanded (they go to the agent, never to an event).
#[derive(Clone)]
pub struct AcpMcpServer {
    pub def: crate::mcp::ServerDef,
    pub values: Vec<(String, String)>,
}

impl std::fmt::Debug for AcpMcpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the values: they may hold secrets.
        f.debug_struct("AcpMcpServer")
            .field("id", &self.def.id)
            .finish_non_exhaustive()
    }
}

/// The `mcpServers` of `session/new` for `servers`, in ACP's shapes, and the servers the
/// agent cannot take (`(id, why, required)`): stdio is always supported, HTTP and SSE only
/// when `initialize` said `agentCapabilities.mcpCapabilities.http` / `.sse`.
pub fn session_mcp_servers(
    agent_info: &Value,
    servers: &[AcpMcpServer],
) -> (Vec<Value>, Vec<(String, String, bool)>) {
    use crate::mcp::{HttpProtocol, Transport};
    let caps = agent_info
        .pointer("/agentCapabilities/mcpCapabilities")
        .cloned()
        .unwrap_or(Value::Null);
    let pairs = |values: &[(String, String)]| -> Vec<Value> {
        values
            .iter()
            .map(|(k, v)| json!({"name": k, "value": v}))
            .collect()
    };
    let mut offered = Vec::new();
    let mut refused = Vec::new();
    for s in servers {
        let d = &s.def;
        match &d.transport {
            Transport::Stdio { command, .. } => offered.push(json!({
                "name": d.id,
                "command": command.first().cloned().unwrap_or_default(),
                "args": command.iter().skip(1).collect::<Vec<_>>(),
                "env": pairs(&s.values),
            })),
            Transport::Http { url, protocol, .. } => {
                let kind = match protocol {
                    HttpProtocol::StreamableHttp => "http",
                    HttpProtocol::Sse => "sse",
                };
                if caps.get(kind).and_then(Value::as_bool) == Some(true) {
                    offered.push(json!({
                        "type": kind, "name": d.id, "url": url, "headers": pairs(&s.values),
                    }));
                } else {
                    refused.push((
                        d.id.clone(),
                        format!(
                            "the ACP agent does not support MCP servers over {} (its \
                             agentCapabilities.mcpCapabilities.{kind} is not true)",
                            if kind == "http" { "HTTP" } else { "SSE" }
                        ),
                        d.required,
                    ));
                }
            }
        }
    }
    (offered, refused)
}

impl AcpConfig {
    pub fn new(command: &str) -> Self {
        Self {
            command: command.to_string(),
            env: Vec::new(),
            startup_timeout: Duration::from_secs(120),
            cancel_grace: Duration::from_secs(5),
            mcp_servers: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    #[error("cannot start the ACP agent `{command}`: {reason}")]
    Spawn { command: String, reason: String },
    #[error("the ACP agent exited{}{}", .status.as_deref().map(|s| format!(" ({s})")).unwrap_or_default(), stderr_suffix(.stderr))]
    Exited {
        status: Option<String>,
        stderr: String,
    },
    #[error("the ACP agent did not answer `{method}` within {secs} s")]
    Timeout { method: String, secs: u64 },
    #[error("the ACP agent refused `{method}`: {message} (code {code})")]
    Rpc {
        method: String,
        code: i64,
        message: String,
    },
    #[error("the ACP agent sent an invalid `{method}` result: {reason}")]
    Protocol { method: String, reason: String },
    #[error("cannot write to the ACP agent: {0}")]
    Io(String),
    #[error("the ACP session was cancelled")]
    Cancelled,
    #[error("the required MCP server `{server}` failed: {error}")]
    McpRequired { server: String, error: String },
    #[error("the ACP agent refused the prompt (stop reason `refusal`)")]
    Refused,
}

fn stderr_suffix(s: &str) -> String {
    let t = s.trim();
    if t.is_empty() {
        String::new()
    } else {
        format!("; its stderr ends with:\n{t}")
    }
}

impl AcpError {
    /// The engine's failure class.
    pub fn failure_class(&self) -> &'static str {
        match self {
            AcpError::Cancelled => "canceled",
            AcpError::Exited { .. } | AcpError::Timeout { .. } | AcpError::Io(_) => {
                "transient_infra"
            }
            _ => "deterministic",
        }
    }
}

/// The result of one prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct AcpOutcome {
    /// The agent's message text for this prompt.
    pub text: String,
    /// `end_turn`, `max_tokens`, `max_turn_requests`, `refusal` or `cancelled`.
    pub stop_reason: String,
    pub tool_calls: u32,
    /// Files the agent wrote through `fs/write_text_file` (relative to the sandbox root).
    pub files_touched: Vec<String>,
    /// The agent's name from `initialize` (`agentInfo.name`), when it gave one.
    pub agent_name: Option<String>,
}

const STDERR_TAIL: usize = 8 * 1024;

/// A running ACP agent with one session.
pub struct AcpClient {
    child: Child,
    stdin: ChildStdin,
    rx: Receiver<Value>,
    stderr: Arc<Mutex<String>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    next_id: u64,
    session_id: Option<String>,
    sandbox: Sandbox,
    config: AcpConfig,
    /// Cancels `initialize` and `session/new` (prompts take their own token).
    cancel: CancelToken,
    /// What `initialize` returned.
    pub agent_info: Value,
    /// Dropped last, after `Drop` killed the agent.
    _tracked: crate::procs::Tracked,
}

impl std::fmt::Debug for AcpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpClient")
            .field("command", &self.config.command)
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

impl AcpClient {
    /// Spawns the agent and runs `initialize`.
    pub fn start(config: AcpConfig, sandbox: Sandbox) -> Result<Self, AcpError> {
        Self::spawn(config, sandbox, &CancelToken::new())
    }

    /// Like [`AcpClient::start`], but `cancel` also stops the start-up (`initialize`, then
    /// `session/new`): the agent is killed at once, since there is no session to cancel.
    pub fn spawn(
        config: AcpConfig,
        sandbox: Sandbox,
        cancel: &CancelToken,
    ) -> Result<Self, AcpError> {
        if cancel.is_cancelled() {
            return Err(AcpError::Cancelled);
        }
        // Through the sandbox: its own process group, inside the run's container if any.
        let mut cmd = sandbox.command("sh");
        cmd.arg("-c")
            .arg(&config.command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Never the server's environment: the run's clean one (`procs::env`).
        match sandbox.env() {
            Some(env) => env.apply_to(&mut cmd),
            None => crate::procs::clean_command_env(&mut cmd).map_err(|e| AcpError::Spawn {
                command: config.command.clone(),
                reason: format!("cannot read the environment: {e}"),
            })?,
        }
        for (k, v) in &config.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().map_err(|e| AcpError::Spawn {
            command: config.command.clone(),
            reason: e.to_string(),
        })?;
        let tracked = crate::procs::track(&child);
        let (Some(stdin), Some(stdout), Some(stderr_pipe)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(AcpError::Spawn {
                command: config.command.clone(),
                reason: "no stdio pipes".into(),
            });
        };
        let (tx, rx) = crossbeam_channel::unbounded();
        let stderr = Arc::new(Mutex::new(String::new()));
        let err_tail = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let t = line.trim();
                if t.is_empty() {
                    continue;
                }
                // Non-JSON lines (stray prints) are kept with stderr for diagnostics.
                match serde_json::from_str::<Value>(t) {
                    Ok(v) => {
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                    Err(_) => push_tail(&err_tail, &format!("stdout: {t}\n")),
                }
            }
        });
        let err_tail = stderr.clone();
        let stderr_reader = std::thread::spawn(move || {
            let mut r = BufReader::new(stderr_pipe);
            let mut buf = [0u8; 4096];
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 {
                    break;
                }
                push_tail(&err_tail, &String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut c = Self {
            child,
            stdin,
            rx,
            stderr,
            stderr_reader: Some(stderr_reader),
            next_id: 1,
            session_id: None,
            sandbox,
            config,
            cancel: cancel.clone(),
            agent_info: Value::Null,
            _tracked: tracked,
        };
        let timeout = c.config.startup_timeout;
        let info = c.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": false},
                "clientInfo": {"name": "svc", "version": env!("CARGO_PKG_VERSION")},
            }),
            timeout,
        )?;
        c.agent_info = info;
        Ok(c)
    }

    /// Creates the session (`session/new{cwd, mcpServers: []}`).
    pub fn new_session(&mut self) -> Result<String, AcpError> {
        self.new_session_with(Vec::new())
    }

    /// Creates the session with `mcp_servers` (in ACP's shapes, see [`session_mcp_servers`]).
    pub fn new_session_with(&mut self, mcp_servers: Vec<Value>) -> Result<String, AcpError> {
        let cwd = self.sandbox.root().display().to_string();
        let r = self.request(
            "session/new",
            json!({"cwd": cwd, "mcpServers": mcp_servers}),
            self.config.startup_timeout,
        )?;
        let id = r
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| AcpError::Protocol {
                method: "session/new".into(),
                reason: "no sessionId".into(),
            })?
            .to_string();
        self.session_id = Some(id.clone());
        Ok(id)
    }

    /// `agentInfo.name` from `initialize`.
    pub fn agent_name(&self) -> Option<String> {
        self.agent_info
            .pointer("/agentInfo/name")
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// Sends a prompt and waits for its stop reason, streaming updates as events. On
    /// cancellation `session/cancel` is sent; the agent gets `cancel_grace` to stop.
    pub fn prompt(
        &mut self,
        text: &str,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(AgentEvent),
    ) -> Result<AcpOutcome, AcpError> {
        let sid = match &self.session_id {
            Some(s) => s.clone(),
            None => self.new_session()?,
        };
        let mut st = PromptState::default();
        let r = self.request_with(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
            None,
            Some(cancel),
            &mut st,
            on_event,
        );
        let cancelled = st.cancel_sent;
        let r = match r {
            Ok(r) => r,
            Err(_) if cancelled => return Err(AcpError::Cancelled),
            Err(e) => return Err(e),
        };
        let stop = r
            .get("stopReason")
            .and_then(Value::as_str)
            .unwrap_or("end_turn")
            .to_string();
        if cancelled || stop == "cancelled" {
            return Err(AcpError::Cancelled);
        }
        on_event(AgentEvent::Message {
            text: st.text.clone(),
            model: String::new(),
            tool_call_count: st.tool_calls as usize,
            usage: Default::default(),
            cost: crate::llm::Cost {
                usd_micros: 0,
                source: crate::llm::CostSource::Unpriced,
            },
        });
        Ok(AcpOutcome {
            text: st.text,
            stop_reason: stop,
            tool_calls: st.tool_calls,
            files_touched: st.files,
            agent_name: self.agent_name(),
        })
    }

    /// Stops the agent (its whole process group).
    pub fn shutdown(mut self) {
        self.kill();
    }

    fn kill(&mut self) {
        let pid = self.child.id() as i32;
        // SAFETY: plain syscall on the process group created for the agent.
        unsafe {
            libc::kill(-pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // SAFETY: as above.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }

    fn send(&mut self, v: &Value) -> Result<(), AcpError> {
        let mut line = v.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|_| self.stdin.flush())
            .map_err(|e| match self.exited() {
                Some(err) => err,
                None => AcpError::Io(e.to_string()),
            })
    }

    fn exited(&mut self) -> Option<AcpError> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(AcpError::Exited {
                status: Some(status.to_string()),
                stderr: self.stderr_tail(),
            }),
            _ => None,
        }
    }

    /// The end of the agent's stderr, after giving the reader a moment to drain it.
    fn stderr_tail(&mut self) -> String {
        if let Some(h) = self.stderr_reader.take() {
            let until = Instant::now() + Duration::from_millis(500);
            while !h.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
        self.stderr.lock().clone()
    }

    /// A start-up request, cancelled by the client's token.
    fn request(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, AcpError> {
        let mut st = PromptState::default();
        let cancel = self.cancel.clone();
        self.request_with(
            method,
            params,
            Some(timeout),
            Some(&cancel),
            &mut st,
            &mut |_| {},
        )
    }

    fn request_with(
        &mut self,
        method: &str,
        params: Value,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
        st: &mut PromptState,
        on_event: &mut dyn FnMut(AgentEvent),
    ) -> Result<Value, AcpError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let start = Instant::now();
        let mut cancel_deadline: Option<Instant> = None;
        loop {
            if let Some(c) = cancel {
                if c.is_cancelled() && !st.cancel_sent {
                    st.cancel_sent = true;
                    let Some(sid) = self.session_id.clone() else {
                        // Still starting: no session to cancel, so stop the agent now.
                        self.kill();
                        return Err(AcpError::Cancelled);
                    };
                    cancel_deadline = Some(Instant::now() + self.config.cancel_grace);
                    let _ = self.send(&json!({"jsonrpc": "2.0", "method": "session/cancel",
                                              "params": {"sessionId": sid}}));
                }
            }
            if cancel_deadline.is_some_and(|d| Instant::now() >= d) {
                self.kill();
                return Err(AcpError::Cancelled);
            }
            if let Some(t) = timeout {
                if start.elapsed() >= t {
                    return Err(AcpError::Timeout {
                        method: method.to_string(),
                        secs: t.as_secs(),
                    });
                }
            }
            let msg = match self.rx.recv_timeout(Duration::from_millis(50)) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    // Give the process a moment to be reaped for its status.
                    let _ = self.child.wait();
                    return Err(match self.exited() {
                        Some(e) => e,
                        None => AcpError::Exited {
                            status: None,
                            stderr: self.stderr_tail(),
                        },
                    });
                }
            };
            let m_method = msg.get("method").and_then(Value::as_str);
            let m_id = msg.get("id").cloned();
            match (m_method, m_id) {
                // A response to us.
                (None, Some(rid)) => {
                    if rid.as_u64() != Some(id) {
                        continue;
                    }
                    if let Some(err) = msg.get("error") {
                        return Err(AcpError::Rpc {
                            method: method.to_string(),
                            code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
                            message: err
                                .get("message")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                        });
                    }
                    return Ok(msg.get("result").cloned().unwrap_or(Value::Null));
                }
                // A notification.
                (Some(m), None) => {
                    if m == "session/update" {
                        st.update(msg.get("params").unwrap_or(&Value::Null), on_event);
                    }
                }
                // A request from the agent.
                (Some(m), Some(rid)) => {
                    let m = m.to_string();
                    let reply = self.answer(&m, msg.get("params").unwrap_or(&Value::Null), st);
                    let out = match reply {
                        Ok(result) => json!({"jsonrpc": "2.0", "id": rid, "result": result}),
                        Err((code, message)) => json!({"jsonrpc": "2.0", "id": rid,
                            "error": {"code": code, "message": message}}),
                    };
                    self.send(&out)?;
                }
                (None, None) => {}
            }
        }
    }

    /// Answers a request from the agent.
    fn answer(
        &mut self,
        method: &str,
        p: &Value,
        st: &mut PromptState,
    ) -> Result<Value, (i64, String)> {
        match method {
            "session/request_permission" => {
                if st.cancel_sent {
                    return Ok(json!({"outcome": {"outcome": "cancelled"}}));
                }
                let options = p
                    .get("options")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let pick = ["allow_once", "allow_always"].iter().find_map(|k| {
                    options
                        .iter()
                        .find(|o| o.get("kind").and_then(Value::as_str) == Some(k))
                        .and_then(|o| o.get("optionId").cloned())
                });
                match pick {
                    Some(id) => Ok(json!({"outcome": {"outcome": "selected", "optionId": id}})),
                    None => Ok(json!({"outcome": {"outcome": "cancelled"}})),
                }
            }
            "fs/read_text_file" => {
                let path = p.get("path").and_then(Value::as_str).unwrap_or("");
                let full = self
                    .sandbox
                    .resolve(path)
                    .map_err(|e| (-32602, e.to_string()))?;
                let text = std::fs::read_to_string(&full)
                    .map_err(|e| (-32603, format!("cannot read {path}: {e}")))?;
                let line = p.get("line").and_then(Value::as_u64).unwrap_or(1).max(1) as usize;
                let limit = p.get("limit").and_then(Value::as_u64).map(|l| l as usize);
                let content = if line == 1 && limit.is_none() {
                    text
                } else {
                    let mut out: Vec<&str> = text.lines().skip(line - 1).collect();
                    if let Some(l) = limit {
                        out.truncate(l);
                    }
                    let mut s = out.join("\n");
                    if !s.is_empty() {
                        s.push('\n');
                    }
                    s
                };
                Ok(json!({ "content": content }))
            }
            "fs/write_text_file" => {
                let path = p.get("path").and_then(Value::as_str).unwrap_or("");
                let content = p.get("content").and_then(Value::as_str).unwrap_or("");
                let full = self
                    .sandbox
                    .resolve(path)
                    .map_err(|e| (-32602, e.to_string()))?;
                if let Some(parent) = full.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| (-32603, e.to_string()))?;
                }
                std::fs::write(&full, content)
                    .map_err(|e| (-32603, format!("cannot write {path}: {e}")))?;
                let shown = self.sandbox.display(&full);
                if !st.files.contains(&shown) {
                    st.files.push(shown);
                }
                Ok(Value::Null)
            }
            other => Err((-32601, format!("method not found: {other}"))),
        }
    }
}

impl Drop for AcpClient {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}

fn push_tail(buf: &Mutex<String>, s: &str) {
    let mut b = buf.lock();
    b.push_str(s);
    if b.len() > STDERR_TAIL {
        let mut cut = b.len() - STDERR_TAIL;
        while !b.is_char_boundary(cut) {
            cut += 1;
        }
        b.drain(..cut);
    }
}

#[derive(Default)]
struct PromptState {
    text: String,
    tool_calls: u32,
    files: Vec<String>,
    cancel_sent: bool,
    /// Tool call id → title, for completion events.
    titles: Vec<(String, String)>,
}

impl PromptState {
    fn update(&mut self, params: &Value, on_event: &mut dyn FnMut(AgentEvent)) {
        let u = params.get("update").unwrap_or(&Value::Null);
        let kind = u.get("sessionUpdate").and_then(Value::as_str).unwrap_or("");
        match kind {
            "agent_message_chunk" => {
                if let Some(t) = content_text(u.get("content")) {
                    self.text.push_str(&t);
                    on_event(AgentEvent::TextDelta { text: t });
                }
            }
            "tool_call" => {
                self.tool_calls += 1;
                let id = u
                    .get("toolCallId")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let title = u
                    .get("title")
                    .or_else(|| u.get("kind"))
                    .and_then(Value::as_str)
                    .unwrap_or("tool")
                    .to_string();
                self.titles.push((id.clone(), title.clone()));
                on_event(AgentEvent::ToolStarted {
                    tool_name: title,
                    tool_call_id: id.clone(),
                    arguments: u.get("rawInput").cloned().unwrap_or(Value::Null),
                });
                self.maybe_completed(u, &id, on_event);
            }
            "tool_call_update" => {
                let id = u
                    .get("toolCallId")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                self.maybe_completed(u, &id, on_event);
            }
            _ => {}
        }
    }

    fn maybe_completed(&mut self, u: &Value, id: &str, on_event: &mut dyn FnMut(AgentEvent)) {
        let status = u.get("status").and_then(Value::as_str).unwrap_or("");
        if status != "completed" && status != "failed" {
            return;
        }
        let mut output = String::new();
        for c in u
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            // Tool call content: {type: "content", content: {type: "text", text}} or diffs.
            if let Some(t) = content_text(c.get("content")) {
                output.push_str(&t);
            } else if c.get("type").and_then(Value::as_str) == Some("diff") {
                let path = c.get("path").and_then(Value::as_str).unwrap_or("");
                output.push_str(&format!("diff: {path}\n"));
            }
        }
        if output.is_empty() {
            if let Some(raw) = u.get("rawOutput") {
                output = match raw {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
            }
        }
        let title = self
            .titles
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, t)| t.clone())
            .unwrap_or_else(|| "tool".to_string());
        on_event(AgentEvent::ToolCompleted {
            tool_name: title,
            tool_call_id: id.to_string(),
            output,
            is_error: status == "failed",
        });
    }
}

fn content_text(c: Option<&Value>) -> Option<String> {
    let c = c?;
    if c.get("type").and_then(Value::as_str) == Some("text") {
        return c.get("text").and_then(Value::as_str).map(str::to_string);
    }
    None
}

/// One-shot: start the agent, create a session, send `prompt`, stop the agent.
pub fn run_acp(
    config: AcpConfig,
    sandbox: Sandbox,
    prompt: &str,
    cancel: &CancelToken,
    on_event: &mut dyn FnMut(AgentEvent),
) -> Result<AcpOutcome, AcpError> {
    run_stage(config, sandbox, prompt, &Steering::new(), cancel, on_event)
}

/// One `backend=acp` stage: start the agent, create a session (counted as a running agent
/// session by `steering`), send `prompt`, stop the agent (its whole process group) however
/// the stage ends. ACP cannot add input to a running turn, so guidance queued while a
/// prompt runs is sent as a follow-up prompt in the same session when the turn ends; the
/// stage's text is the last prompt's. A `refusal` stop fails the stage.
pub fn run_stage(
    config: AcpConfig,
    sandbox: Sandbox,
    prompt: &str,
    steering: &Steering,
    cancel: &CancelToken,
    on_event: &mut dyn FnMut(AgentEvent),
) -> Result<AcpOutcome, AcpError> {
    let command = config.command.clone();
    let mcp_servers = config.mcp_servers.clone();
    let mut active = steering.enter();
    let mut c = AcpClient::spawn(config, sandbox, cancel)?;
    let result = (|| {
        let (offered, refused) = session_mcp_servers(&c.agent_info, &mcp_servers);
        for (server, error, required) in refused {
            on_event(AgentEvent::McpFailed {
                server: server.clone(),
                error: error.clone(),
                required,
                transient: false,
            });
            if required {
                return Err(AcpError::McpRequired { server, error });
            }
        }
        let sid = c.new_session_with(offered)?;
        on_event(AgentEvent::AcpSessionStarted {
            command,
            session_id: sid,
        });
        let mut input = prompt.to_string();
        let mut t = AcpOutcome {
            text: String::new(),
            stop_reason: String::new(),
            tool_calls: 0,
            files_touched: Vec::new(),
            agent_name: c.agent_name(),
        };
        loop {
            let o = c.prompt(&input, cancel, on_event)?;
            if o.stop_reason == "refusal" {
                return Err(AcpError::Refused);
            }
            if !o.text.trim().is_empty() {
                t.text = o.text;
            }
            t.stop_reason = o.stop_reason;
            t.tool_calls += o.tool_calls;
            for f in o.files_touched {
                if !t.files_touched.contains(&f) {
                    t.files_touched.push(f);
                }
            }
            let late = active.end_or_take();
            if late.is_empty() {
                let stop = match t.stop_reason.as_str() {
                    "max_tokens" => super::AgentStop::MaxTokens,
                    "max_turn_requests" => super::AgentStop::TurnLimit,
                    _ => super::AgentStop::Completed,
                };
                on_event(AgentEvent::SessionEnded { stop });
                return Ok(t);
            }
            let mut texts = Vec::with_capacity(late.len());
            for Steered { text, location } in late {
                on_event(AgentEvent::SteeringInjected {
                    text: text.clone(),
                    location,
                });
                texts.push(text);
            }
            input = texts.join("\n\n");
        }
    })();
    c.shutdown();
    result
}
