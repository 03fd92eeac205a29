//! MCP tools in an agent session: starting a stage's servers concurrently (stdio servers as
//! stage processes through the run's [`Isolation`], each within its startup timeout), the
//! tools offered to the model as `mcp__<server>__<tool>`, calls routed to the original tool
//! with the server's call timeout, results as text (errors as tool errors), listing again
//! after `tools/list_changed`, what the system prompt says about the servers (failed ones
//! named), the `agent.mcp.*` events, and shutting every server down with the session.
//! `{{ secrets.NAME }}` in `env`/`headers` is expanded here, just before launch, from the
//! caller's lookup; the expanded values go only to the server.
//! Must not know about runs or the store, or decide which servers a stage gets.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::tools::ToolOutput;
use super::truncate;
use crate::base::cancel::CancelToken;
use crate::llm::ToolSpec;
use crate::mcp::spec::{expand_secrets, qualified_tool_name, HttpProtocol};
use crate::mcp::{self, Client, McpError, ServerDef, ServerInfo, Transport};
use crate::sandbox::Isolation;

/// How long shutting a stage's servers down may take before they are killed.
const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// How much of a server's stderr the stage details keep.
const STDERR_KEPT: usize = 4 * 1024;
/// How much of a server's `instructions` the system prompt carries.
const INSTRUCTIONS_KEPT: usize = 2_000;

/// Where and how a stage's servers start.
pub struct StartContext<'a> {
    /// How the run's processes start (host or its bubblewrap container).
    pub isolation: &'a Isolation,
    /// The stage's working directory (a stdio server's current directory).
    pub workdir: &'a Path,
    /// The environment a stdio server starts from: the run's (`procs::env`), else the clean
    /// allowlist. Never the server's own.
    pub env: Option<&'a crate::procs::EnvSnapshot>,
    /// The vault: values for `{{ secrets.NAME }}`.
    pub secrets: &'a (dyn Fn(&str) -> Option<String> + Sync),
}

/// A server's state in the stage.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Ready,
    Failed(String),
}

/// A tool the model was offered.
#[derive(Debug, Clone)]
struct Offered {
    qualified: String,
    original: String,
    spec: ToolSpec,
}

struct Server {
    def: ServerDef,
    client: Option<Client>,
    info: Option<ServerInfo>,
    state: State,
    tools: Vec<Offered>,
    /// Original names of the tools the agent called, in first-use order.
    used: Vec<String>,
    duration: Duration,
    /// The start-up failure may pass on a retry (a timeout, a lost connection).
    transient: bool,
}

/// The MCP servers of one agent session.
pub struct McpTools {
    servers: Vec<Server>,
}

impl std::fmt::Debug for McpTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.servers.iter().map(|s| (&s.def.id, &s.state)))
            .finish()
    }
}

/// A stage cannot run: a `required` server failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredFailed {
    pub server: String,
    pub error: String,
    /// The failure may pass on a retry (a timeout, a lost connection).
    pub transient: bool,
}

/// `ServerDef` transports as a client: expands secrets, spawns a stdio server (on the
/// calling thread, which owns it) or prepares an HTTP client.
fn open(def: &ServerDef, cx: &StartContext<'_>) -> Result<Client, String> {
    let lookup = |n: &str| (cx.secrets)(n);
    match &def.transport {
        Transport::Stdio { command, env } => {
            let Some((program, args)) = command.split_first() else {
                return Err("the server has no command".into());
            };
            let mut cmd = cx.isolation.command(program, cx.workdir);
            cmd.args(args);
            match cx.env {
                Some(e) => e.apply_to(&mut cmd),
                None => crate::procs::clean_command_env(&mut cmd)
                    .map_err(|e| format!("cannot read the environment: {e}"))?,
            }
            for (k, v) in env {
                let value = expand_secrets(v, &lookup).map_err(|e| format!("env {k}: {e}"))?;
                cmd.env(k, value);
            }
            mcp::spawn_stdio(cmd).map_err(|e| e.to_string())
        }
        Transport::Http {
            url,
            protocol,
            headers,
        } => {
            let mut expanded = Vec::with_capacity(headers.len());
            for (k, v) in headers {
                let value = expand_secrets(v, &lookup).map_err(|e| format!("header {k}: {e}"))?;
                expanded.push((k.clone(), value));
            }
            Ok(match protocol {
                HttpProtocol::StreamableHttp => mcp::streamable(url, expanded),
                HttpProtocol::Sse => mcp::legacy_sse(url, expanded),
            })
        }
    }
}

/// Starts (or connects to) one server, handshakes and lists its tools, then closes it: what
/// `POST /api/v1/mcp-servers/{id}/test` answers. `{ok: true, server: {name, version},
/// protocol_version, tools, timings_ms: {start, initialize, list_tools, total}}`, or
/// `{ok: false, step, error, stderr, timings_ms}` naming the step that failed.
pub fn probe(def: &ServerDef, cx: &StartContext<'_>, cancel: &CancelToken) -> Value {
    let t0 = Instant::now();
    let ms = |d: Duration| d.as_millis() as u64;
    let failed = |step: &str, error: String, stderr: String, timings: Value| {
        json!({"ok": false, "step": step, "error": error,
               "stderr": tail(&stderr, STDERR_KEPT), "timings_ms": timings})
    };
    let mut client = match open(def, cx) {
        Ok(c) => c,
        Err(e) => {
            return failed(
                "start",
                e,
                String::new(),
                json!({"start": ms(t0.elapsed())}),
            );
        }
    };
    let start = t0.elapsed();
    let limit = Duration::from_secs(def.startup_timeout_secs);
    let info = client.initialize(limit, cancel).cloned();
    let initialized = t0.elapsed();
    let info = match info {
        Ok(i) => i,
        Err(e) => {
            let stderr = client.stderr_tail();
            client.close(CLOSE_GRACE);
            return failed(
                "initialize",
                e.to_string(),
                stderr,
                json!({"start": ms(start), "initialize": ms(initialized - start)}),
            );
        }
    };
    let listed = client.list_tools(
        limit
            .saturating_sub(initialized)
            .max(Duration::from_millis(1)),
        cancel,
    );
    let done = t0.elapsed();
    let timings = json!({"start": ms(start), "initialize": ms(initialized - start),
                         "list_tools": ms(done - initialized), "total": ms(done)});
    let stderr = client.stderr_tail();
    client.close(CLOSE_GRACE);
    match listed {
        Ok(tools) => json!({
            "ok": true,
            "server": {"name": info.name, "version": info.version},
            "protocol_version": info.protocol_version,
            "tools": tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
            "timings_ms": timings,
        }),
        Err(e) => failed("list_tools", e.to_string(), stderr, timings),
    }
}

/// `initialize` then `tools/list`, both within the server's startup timeout.
fn handshake(
    client: &mut Client,
    def: &ServerDef,
    started: Instant,
    cancel: &CancelToken,
) -> Result<(ServerInfo, Vec<mcp::Tool>), McpError> {
    let limit = Duration::from_secs(def.startup_timeout_secs);
    let info = client.initialize(limit, cancel)?.clone();
    let left = limit.saturating_sub(started.elapsed());
    if left.is_zero() {
        return Err(McpError::Timeout {
            method: "tools/list".into(),
            after_ms: started.elapsed().as_millis() as u64,
            notes: String::new(),
        });
    }
    let tools = client.list_tools(left, cancel)?;
    Ok((info, tools))
}

fn is_transient(e: &McpError) -> bool {
    matches!(
        e,
        McpError::Timeout { .. }
            | McpError::Closed(_)
            | McpError::Exited { .. }
            | McpError::Http(_)
    )
}

/// `s` on one line (line breaks as ` | `), at most about `max` bytes: its start and its end,
/// where a process's last words usually are.
fn one_line(s: &str, max: usize) -> String {
    let joined = s
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" | ");
    if joined.len() <= max {
        return joined;
    }
    format!(
        "{} ... {}",
        cut(&joined, max * 2 / 5),
        tail(&joined, max * 3 / 5)
    )
}

/// The last `max` bytes of `s` (from a character boundary).
fn tail(s: &str, max: usize) -> &str {
    let mut i = s.len().saturating_sub(max);
    while !s.is_char_boundary(i) {
        i += 1;
    }
    &s[i..]
}

fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut i = max;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    &s[..i]
}

impl McpTools {
    /// Starts (or connects to) every server at once, each within its startup timeout;
    /// reports `agent.mcp.ready` / `agent.mcp.failed` for each, in definition order. A
    /// server that fails is closed at once; the others keep working.
    pub fn start(
        defs: &[ServerDef],
        cx: &StartContext<'_>,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(super::AgentEvent),
    ) -> McpTools {
        let began = Instant::now();
        // Spawned here, on the stage's thread: PDEATHSIG ties a stdio server to it.
        let mut opened: Vec<Result<Client, String>> = defs.iter().map(|d| open(d, cx)).collect();
        type Started = Result<(ServerInfo, Vec<mcp::Tool>), (String, bool)>;
        let results: Vec<(Started, Duration)> = std::thread::scope(|s| {
            let handles: Vec<_> = opened
                .iter_mut()
                .zip(defs)
                .map(|(c, def)| {
                    s.spawn(move || {
                        let r = match c {
                            Ok(client) => handshake(client, def, began, cancel)
                                .map_err(|e| (e.to_string(), is_transient(&e))),
                            Err(e) => Err((e.clone(), false)),
                        };
                        (r, began.elapsed())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        (
                            Err(("the MCP start-up thread panicked".into(), false)),
                            began.elapsed(),
                        )
                    })
                })
                .collect()
        });
        let mut servers = Vec::with_capacity(defs.len());
        let mut taken: Vec<String> = Vec::new();
        for ((def, client), (result, duration)) in defs.iter().zip(opened).zip(results) {
            let mut server = Server {
                def: def.clone(),
                client: client.ok(),
                info: None,
                state: State::Ready,
                tools: Vec::new(),
                used: Vec::new(),
                duration,
                transient: false,
            };
            match result {
                Ok((info, tools)) => {
                    server.tools = offer(&def.id, tools, &mut taken);
                    server.info = Some(info);
                    on_event(super::AgentEvent::McpReady {
                        server: def.id.clone(),
                        tool_count: server.tools.len(),
                        duration_ms: duration.as_millis() as u64,
                        tools: server
                            .tools
                            .iter()
                            .map(|t| (t.qualified.clone(), t.original.clone()))
                            .collect(),
                    });
                }
                Err((error, transient)) => {
                    server.state = State::Failed(error.clone());
                    server.transient = transient;
                    on_event(super::AgentEvent::McpFailed {
                        server: def.id.clone(),
                        error,
                        required: def.required,
                        transient,
                    });
                }
            }
            servers.push(server);
        }
        let mut tools = McpTools { servers };
        tools.close_failed();
        tools
    }

    /// The first `required` server that failed to start.
    pub fn required_failure(&self) -> Option<RequiredFailed> {
        self.servers.iter().find_map(|s| match &s.state {
            State::Failed(e) if s.def.required => Some(RequiredFailed {
                server: s.def.id.clone(),
                error: e.clone(),
                transient: s.transient,
            }),
            _ => None,
        })
    }

    /// The tool specs offered to the model.
    pub fn specs(&self) -> impl Iterator<Item = ToolSpec> + '_ {
        self.servers
            .iter()
            .flat_map(|s| s.tools.iter().map(|t| t.spec.clone()))
    }

    /// Whether `name` is one of the offered MCP tools.
    pub fn owns(&self, name: &str) -> bool {
        self.find(name).is_some()
    }

    fn find(&self, name: &str) -> Option<(usize, usize)> {
        self.servers.iter().enumerate().find_map(|(i, s)| {
            s.tools
                .iter()
                .position(|t| t.qualified == name)
                .map(|j| (i, j))
        })
    }

    /// Calls an offered tool (by its qualified name) with the server's call timeout.
    pub fn call(&mut self, name: &str, args: &Value, cancel: &CancelToken) -> ToolOutput {
        let Some((i, j)) = self.find(name) else {
            return super::tools::refused(&format!("unknown tool `{name}`"));
        };
        if !args.is_object() {
            return super::tools::refused("arguments must be a JSON object");
        }
        let server = &mut self.servers[i];
        let original = server.tools[j].original.clone();
        if !server.used.contains(&original) {
            server.used.push(original.clone());
        }
        let timeout = Duration::from_secs(server.def.tool_timeout_secs);
        let Some(client) = server.client.as_mut() else {
            return super::tools::refused(&format!(
                "the MCP server `{}` is not connected",
                server.def.id
            ));
        };
        match client.call_tool(&original, args, timeout, cancel) {
            Ok(r) => {
                let text = mcp::content::render(&r);
                ToolOutput {
                    for_model: truncate::apply(&text, truncate::MCP),
                    output: text,
                    is_error: r.is_error,
                    touched: Vec::new(),
                }
            }
            Err(e) => {
                if matches!(e, McpError::Exited { .. } | McpError::Closed(_)) {
                    server.state = State::Failed(format!("the server stopped: {e}"));
                }
                let msg = match e {
                    McpError::Cancelled => "Error: the call was cancelled".to_string(),
                    e => format!("Error: MCP server `{}`: {e}", server.def.id),
                };
                ToolOutput {
                    for_model: truncate::apply(&msg, truncate::MCP),
                    output: msg,
                    is_error: true,
                    touched: Vec::new(),
                }
            }
        }
    }

    /// Lists the tools of servers that said their list changed; true when the offered set
    /// changed (the caller rebuilds the model's tool list).
    pub fn refresh(&mut self, cancel: &CancelToken) -> bool {
        let mut changed = false;
        let mut taken: Vec<String> = Vec::new();
        for s in &self.servers {
            taken.extend(s.tools.iter().map(|t| t.qualified.clone()));
        }
        for s in &mut self.servers {
            let Some(client) = s.client.as_mut() else {
                continue;
            };
            if s.state != State::Ready || !client.take_tools_changed() {
                continue;
            }
            let timeout = Duration::from_secs(s.def.tool_timeout_secs);
            match client.list_tools(timeout, cancel) {
                Ok(tools) => {
                    taken.retain(|n| !s.tools.iter().any(|t| &t.qualified == n));
                    let new = offer(&s.def.id, tools, &mut taken);
                    let names =
                        |v: &[Offered]| v.iter().map(|t| t.qualified.clone()).collect::<Vec<_>>();
                    changed |= names(&new) != names(&s.tools);
                    s.tools = new;
                }
                Err(e) => log::warn!("MCP server {}: listing tools again failed: {e}", s.def.id),
            }
        }
        changed
    }

    /// What the system prompt says about the servers: where MCP tools come from, each
    /// server's instructions, and which configured servers failed and why.
    pub fn prompt_section(&self) -> Option<String> {
        if self.servers.is_empty() {
            return None;
        }
        let mut s =
            String::from("MCP servers: tools named mcp__<server>__<tool> come from these servers.");
        for server in &self.servers {
            match &server.state {
                State::Ready => {
                    s.push_str(&format!(
                        "\n- {}: ready, {} tool{}.",
                        server.def.id,
                        server.tools.len(),
                        if server.tools.len() == 1 { "" } else { "s" }
                    ));
                    if let Some(text) = server
                        .info
                        .as_ref()
                        .and_then(|i| i.instructions.as_deref())
                        .filter(|t| !t.trim().is_empty())
                    {
                        s.push_str(&format!(
                            " Its instructions: {}",
                            cut(text.trim(), INSTRUCTIONS_KEPT)
                        ));
                    }
                }
                State::Failed(e) => {
                    s.push_str(&format!(
                        "\n- {}: FAILED to start: {}. Its tools are not available in this \
                         session. If the task needs them, say so in your answer; do not \
                         report the task as done.",
                        server.def.id,
                        one_line(e, 500)
                    ));
                }
            }
        }
        Some(s)
    }

    /// Each server's state, tools offered and used, and stderr tail (for stage details).
    pub fn summary(&self) -> Value {
        let servers: Vec<Value> = self
            .servers
            .iter()
            .map(|s| {
                let stderr = s
                    .client
                    .as_ref()
                    .map(|c| c.stderr_tail())
                    .unwrap_or_default();
                let stderr = tail(&stderr, STDERR_KEPT);
                let (state, error) = match &s.state {
                    State::Ready => ("ready", Value::Null),
                    State::Failed(e) => ("failed", json!(e)),
                };
                json!({
                    "server": s.def.id,
                    "transport": s.def.transport.kind(),
                    "required": s.def.required,
                    "state": state,
                    "error": error,
                    "server_info": s.info.as_ref().map(|i| json!({
                        "name": i.name, "version": i.version,
                        "protocol_version": i.protocol_version,
                    })),
                    "duration_ms": s.duration.as_millis() as u64,
                    "tools": s.tools.iter().map(|t| json!({
                        "name": t.qualified, "original_name": t.original,
                    })).collect::<Vec<_>>(),
                    "used": s.used,
                    "stderr": stderr,
                })
            })
            .collect();
        json!({ "servers": servers })
    }

    fn close_failed(&mut self) {
        let mut failed: Vec<&mut Client> = self
            .servers
            .iter_mut()
            .filter(|s| s.state != State::Ready)
            .filter_map(|s| s.client.as_mut())
            .collect();
        close_all(&mut failed);
    }
}

/// Closes clients in the time of the slowest: every stdin closed (or session ended)
/// first, then each waited for against one deadline.
fn close_all(clients: &mut [&mut Client]) {
    for c in clients.iter_mut() {
        c.begin_close();
    }
    let deadline = Instant::now() + CLOSE_GRACE;
    for c in clients.iter_mut() {
        c.finish_close(deadline);
    }
}

impl Drop for McpTools {
    fn drop(&mut self) {
        let mut all: Vec<&mut Client> = self
            .servers
            .iter_mut()
            .filter_map(|s| s.client.as_mut())
            .collect();
        close_all(&mut all);
    }
}

/// The offered form of a server's tools: qualified names, unique across the session.
fn offer(server: &str, tools: Vec<mcp::Tool>, taken: &mut Vec<String>) -> Vec<Offered> {
    tools
        .into_iter()
        .map(|t| {
            let base = qualified_tool_name(server, &t.name);
            let mut name = base.clone();
            let mut n = 2;
            while taken.contains(&name) {
                name = format!("{}_{n}", cut(&base, crate::mcp::spec::MAX_TOOL_NAME - 4));
                n += 1;
            }
            taken.push(name.clone());
            let description = if t.description.is_empty() {
                format!("The `{}` tool of the MCP server `{server}`.", t.name)
            } else {
                t.description.clone()
            };
            Offered {
                spec: ToolSpec {
                    name: name.clone(),
                    description,
                    parameters: t.input_schema,
                },
                qualified: name,
                original: t.name,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offered_names_are_unique_and_keep_the_original() {
        let t = |n: &str| mcp::Tool {
            name: n.into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
        };
        let mut taken = Vec::new();
        let a = offer("s", vec![t("a.b"), t("a_b")], &mut taken);
        assert_eq!(a[0].qualified, "mcp__s__a_b");
        assert_eq!(a[1].qualified, "mcp__s__a_b_2");
        assert_eq!(a[1].original, "a_b");
        assert!(a[0].spec.description.contains("MCP server `s`"));
    }
}
