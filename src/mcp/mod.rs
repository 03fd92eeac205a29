//! MCP, the Model Context Protocol: server definitions ([`spec`], always compiled) and, with
//! the `llm` feature, a synchronous client that speaks the protocol for real over stdio,
//! Streamable HTTP and the legacy HTTP+SSE transport (`Client`): JSON-RPC 2.0,
//! `initialize` with version negotiation (2025-06-18, 2025-03-26), `tools/list` across
//! pages, `tools/call`, `notifications/cancelled` on timeout or cancellation, answers to
//! `ping`, refusals of every other server request, and `notifications/tools/list_changed`.
//! No async runtime: each connection has reader threads that hand messages to the caller
//! through a crossbeam channel; nothing outlives `Client::close`.
//! Must not know about runs, stages, the store or models: the agent layer decides which
//! servers a stage gets and how results reach a model.

pub mod catalog;
pub mod spec;

#[cfg(feature = "llm")]
mod client;
#[cfg(feature = "llm")]
pub mod content;
#[cfg(feature = "llm")]
mod http;
#[cfg(feature = "llm")]
mod sse;
#[cfg(feature = "llm")]
mod stdio;

#[cfg(feature = "llm")]
pub use client::{CallResult, Client, ServerInfo, Tool};
#[cfg(feature = "llm")]
pub use http::{legacy_sse, streamable};
#[cfg(feature = "llm")]
pub use stdio::spawn as spawn_stdio;

pub use spec::{HttpProtocol, ServerDef, Transport};

/// The protocol versions svc speaks, preferred first. It offers the first in `initialize`
/// and accepts a server's answer of any of them. 2024-11-05 is accepted too: it is what
/// servers of the legacy HTTP+SSE transport answer, and the tool messages svc uses are the
/// same in it.
pub const PROTOCOL_VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];

/// The largest message svc reads from a server (a line on stdout, an HTTP body, an event).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Why talking to a server failed. The texts are for people (events, the system prompt, the
/// `test` route); none carries a secret value svc put into the server's environment or
/// headers (a server that prints one itself is the event redactor's business).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    #[error("cannot start `{program}`: {reason}")]
    Spawn { program: String, reason: String },
    #[error("the server exited{}{}", .status.as_deref().map(|s| format!(" ({s})")).unwrap_or_default(), tail_suffix(.stderr))]
    Exited {
        status: Option<String>,
        stderr: String,
    },
    #[error("the server did not answer `{method}` within {}{}", secs(*.after_ms), tail_suffix(.notes))]
    Timeout {
        method: String,
        after_ms: u64,
        /// What the server did meanwhile that was not an answer (stray output, wrong ids).
        notes: String,
    },
    #[error("the server refused `{method}`: {message} (JSON-RPC error {code})")]
    Rpc {
        method: String,
        code: i64,
        message: String,
    },
    #[error("the server broke the protocol: {0}")]
    Protocol(String),
    #[error("the server answered with protocol version `{0}`; svc speaks {versions}", versions = PROTOCOL_VERSIONS.join(", "))]
    Version(String),
    #[error("{0}")]
    Http(String),
    #[error("the call was cancelled")]
    Cancelled,
    #[error("the connection is closed: {0}")]
    Closed(String),
}

/// Seconds to a tenth, without the tenth when it is zero: `1 s`, `8.7 s`.
fn secs(ms: u64) -> String {
    let tenths = (ms + 50) / 100;
    if tenths.is_multiple_of(10) {
        format!("{} s", tenths / 10)
    } else {
        format!("{}.{} s", tenths / 10, tenths % 10)
    }
}

fn tail_suffix(s: &str) -> String {
    let t = s.trim();
    if t.is_empty() {
        String::new()
    } else {
        format!("; its output ends with:\n{t}")
    }
}
