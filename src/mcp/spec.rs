//! MCP server definitions: what a catalog entry, a `[run.agent] mcp_servers` entry or an
//! inline definition in a create body says (transport, timeouts, `required`), their
//! validation (errors name the field), the read view that never shows `env`/`headers`
//! values, `{{ secrets.NAME }}` references (checked here, resolved by the caller just before
//! launch), and the tool names offered to models (`mcp__<server>__<tool>`).
//! Always compiled (the engine carries a run's frozen list); no I/O.
//! Must not resolve secrets itself, start anything, or know about runs or the store.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// `startup_timeout_secs` when a definition gives none.
pub const DEFAULT_STARTUP_TIMEOUT_SECS: u64 = 10;
/// `tool_timeout_secs` when a definition gives none.
pub const DEFAULT_TOOL_TIMEOUT_SECS: u64 = 60;
/// The largest timeout a definition may ask for (one day).
pub const MAX_TIMEOUT_SECS: u64 = 86_400;

/// One MCP server as a run uses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerDef {
    /// The slug that names the server in tool names (`mcp__<id>__<tool>`) and events.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub transport: Transport,
    #[serde(default = "default_startup")]
    pub startup_timeout_secs: u64,
    #[serde(default = "default_tool")]
    pub tool_timeout_secs: u64,
    /// A failure to start or connect fails the stage before any model call.
    #[serde(default)]
    pub required: bool,
}

fn default_startup() -> u64 {
    DEFAULT_STARTUP_TIMEOUT_SECS
}

fn default_tool() -> u64 {
    DEFAULT_TOOL_TIMEOUT_SECS
}

/// How svc reaches the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Transport {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio {
        command: Vec<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
    },
    /// A server listening on HTTP.
    Http {
        url: String,
        #[serde(default)]
        protocol: HttpProtocol,
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
}

/// Which HTTP transport the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum HttpProtocol {
    /// Streamable HTTP (protocol 2025-03-26 and later): one endpoint, a POST per message.
    #[default]
    StreamableHttp,
    /// The legacy HTTP+SSE transport (2024-11-05): a GET event stream and an `endpoint`.
    Sse,
}

impl HttpProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            HttpProtocol::StreamableHttp => "streamable_http",
            HttpProtocol::Sse => "sse",
        }
    }
}

/// A definition that does not hold: the field (a JSON path such as `transport.command`)
/// and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Whether `id` is a catalog slug: `^[a-z0-9][a-z0-9-]{0,62}$`.
pub fn is_slug(id: &str) -> bool {
    let b = id.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

fn is_env_name(k: &str) -> bool {
    let b = k.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// An HTTP header name: RFC 9110 token characters.
fn is_header_name(k: &str) -> bool {
    !k.is_empty()
        && k.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
}

/// Header names svc sets itself (a definition may not override the protocol's headers).
const RESERVED_HEADERS: [&str; 6] = [
    "content-type",
    "accept",
    "content-length",
    "host",
    "mcp-session-id",
    "mcp-protocol-version",
];

impl ServerDef {
    /// The name people see: `display_name`, else the id.
    pub fn name(&self) -> &str {
        self.display_name.as_deref().unwrap_or(&self.id)
    }

    /// Checks every field; the first problem names its field.
    pub fn validate(&self) -> Result<(), FieldError> {
        if !is_slug(&self.id) {
            return Err(FieldError::new(
                "id",
                format!(
                    "`{}` is not a valid id (lowercase letters, digits and `-`, starting with a \
                     letter or digit, at most 63 characters)",
                    self.id
                ),
            ));
        }
        if let Some(n) = &self.display_name {
            if n.trim().is_empty() || n.len() > 200 {
                return Err(FieldError::new(
                    "display_name",
                    "must be 1 to 200 characters and not blank",
                ));
            }
        }
        for (field, secs) in [
            ("startup_timeout_secs", self.startup_timeout_secs),
            ("tool_timeout_secs", self.tool_timeout_secs),
        ] {
            if secs == 0 || secs > MAX_TIMEOUT_SECS {
                return Err(FieldError::new(
                    field,
                    format!("must be between 1 and {MAX_TIMEOUT_SECS} seconds"),
                ));
            }
        }
        self.transport.validate()
    }

    /// The definition as clients may read it: `env` and `headers` values are write-only
    /// (only their keys are shown).
    pub fn view(&self) -> Value {
        json!({
            "id": self.id,
            "display_name": self.name(),
            "description": self.description,
            "transport": self.transport.view(),
            "startup_timeout_secs": self.startup_timeout_secs,
            "tool_timeout_secs": self.tool_timeout_secs,
            "required": self.required,
        })
    }
}

impl Transport {
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }

    fn validate(&self) -> Result<(), FieldError> {
        match self {
            Transport::Stdio { command, env } => {
                match command.first() {
                    None => {
                        return Err(FieldError::new(
                            "transport.command",
                            "must name the program to run (an argv array of at least one word)",
                        ))
                    }
                    Some(p) if p.trim().is_empty() => {
                        return Err(FieldError::new(
                            "transport.command[0]",
                            "the program name is empty",
                        ))
                    }
                    Some(_) => {}
                }
                for (i, a) in command.iter().enumerate() {
                    if a.contains('\0') {
                        return Err(FieldError::new(
                            format!("transport.command[{i}]"),
                            "contains a NUL byte",
                        ));
                    }
                    if a.contains("{{") {
                        return Err(FieldError::new(
                            format!("transport.command[{i}]"),
                            "`{{ ... }}` references are allowed only in `env` values (arguments \
                             show in process lists)",
                        ));
                    }
                }
                for (k, v) in env {
                    if !is_env_name(k) {
                        return Err(FieldError::new(
                            format!("transport.env.{k}"),
                            "is not a valid environment variable name",
                        ));
                    }
                    if v.contains('\0') {
                        return Err(FieldError::new(
                            format!("transport.env.{k}"),
                            "contains a NUL byte",
                        ));
                    }
                    check_references(v).map_err(|m| {
                        FieldError::new(format!("transport.env.{k}"), m.to_string())
                    })?;
                }
                Ok(())
            }
            Transport::Http { url, headers, .. } => {
                let lower = url.to_ascii_lowercase();
                let rest = lower
                    .strip_prefix("http://")
                    .or_else(|| lower.strip_prefix("https://"));
                match rest {
                    Some(r) if !r.is_empty() && !r.starts_with('/') => {}
                    _ => {
                        return Err(FieldError::new(
                            "transport.url",
                            format!("`{url}` is not an http:// or https:// URL with a host"),
                        ))
                    }
                }
                if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    return Err(FieldError::new(
                        "transport.url",
                        "contains whitespace or control characters",
                    ));
                }
                if url.contains("{{") {
                    return Err(FieldError::new(
                        "transport.url",
                        "`{{ ... }}` references are allowed only in header values",
                    ));
                }
                for (k, v) in headers {
                    if !is_header_name(k) {
                        return Err(FieldError::new(
                            format!("transport.headers.{k}"),
                            "is not a valid HTTP header name",
                        ));
                    }
                    if RESERVED_HEADERS.contains(&k.to_ascii_lowercase().as_str()) {
                        return Err(FieldError::new(
                            format!("transport.headers.{k}"),
                            "is set by svc itself",
                        ));
                    }
                    if v.chars().any(|c| c == '\r' || c == '\n' || c == '\0') {
                        return Err(FieldError::new(
                            format!("transport.headers.{k}"),
                            "contains a line break or NUL",
                        ));
                    }
                    check_references(v).map_err(|m| {
                        FieldError::new(format!("transport.headers.{k}"), m.to_string())
                    })?;
                }
                Ok(())
            }
        }
    }

    /// The transport without `env`/`headers` values.
    pub fn view(&self) -> Value {
        match self {
            Transport::Stdio { command, env } => json!({
                "type": "stdio",
                "command": command,
                "env_keys": env.keys().collect::<Vec<_>>(),
            }),
            Transport::Http {
                url,
                protocol,
                headers,
            } => json!({
                "type": "http",
                "url": url,
                "protocol": protocol.as_str(),
                "header_keys": headers.keys().collect::<Vec<_>>(),
            }),
        }
    }
}

/// A piece of a value with `{{ ... }}` references.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    Secret(&'a str),
}

/// Why a `{{ ... }}` reference is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    #[error("`{{{{` opens a reference that is never closed with `}}}}`")]
    Unclosed,
    #[error(
        "`{{{{ {0} }}}}` is not a reference svc knows (only `{{{{ secrets.NAME }}}}` is allowed)"
    )]
    Unknown(String),
    #[error("`{{{{ secrets.{0} }}}}`: the secret name must be letters, digits and `_`")]
    BadName(String),
}

fn parse_references(text: &str) -> Result<Vec<Piece<'_>>, ReferenceError> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        if open > 0 {
            out.push(Piece::Text(&rest[..open]));
        }
        let after = &rest[open + 2..];
        let close = after.find("}}").ok_or(ReferenceError::Unclosed)?;
        let inner = after[..close].trim();
        let name = inner
            .strip_prefix("secrets.")
            .ok_or_else(|| ReferenceError::Unknown(inner.to_string()))?;
        if !is_env_name(name) {
            return Err(ReferenceError::BadName(name.to_string()));
        }
        out.push(Piece::Secret(name));
        rest = &after[close + 2..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}

/// Checks that every `{{ ... }}` in `text` is a well-formed `{{ secrets.NAME }}`.
pub fn check_references(text: &str) -> Result<(), ReferenceError> {
    parse_references(text).map(|_| ())
}

/// The secret names `text` references.
pub fn secret_names(text: &str) -> Vec<String> {
    parse_references(text)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| match p {
            Piece::Secret(n) => Some(n.to_string()),
            Piece::Text(_) => None,
        })
        .collect()
}

/// Why a value could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error("{0}")]
    Reference(#[from] ReferenceError),
    #[error("the secret `{0}` is not in the vault")]
    Missing(String),
}

/// `text` with every `{{ secrets.NAME }}` replaced by `lookup(NAME)`; a missing secret
/// fails (never an empty value or the unexpanded reference). Call just before launch and
/// keep the result out of anything recorded.
pub fn expand_secrets(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(text.len());
    for p in parse_references(text)? {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Secret(n) => {
                out.push_str(&lookup(n).ok_or_else(|| ExpandError::Missing(n.to_string()))?)
            }
        }
    }
    Ok(out)
}

/// The longest tool name offered to a model (OpenAI's limit).
pub const MAX_TOOL_NAME: usize = 64;

/// `mcp__<server>__<tool>`, with every character other than ASCII letters, digits, `_` and
/// `-` written as `_`; a name longer than [`MAX_TOOL_NAME`] keeps its start and ends with a
/// short hash of the whole name, so distinct long names stay distinct.
pub fn qualified_tool_name(server: &str, tool: &str) -> String {
    let raw = format!("mcp__{server}__{tool}");
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.len() <= MAX_TOOL_NAME {
        return clean;
    }
    let digest = crate::store::sha256_hex(raw.as_bytes());
    format!("{}_{}", &clean[..MAX_TOOL_NAME - 9], &digest[..8])
}

/// A node's `mcp_servers` attribute: server ids separated by commas or spaces; empty means
/// none. Returns the ids, or the first word that is not a valid id.
pub fn parse_server_list(text: &str) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for w in text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
    {
        if !is_slug(w) {
            return Err(w.to_string());
        }
        if !out.iter().any(|x| x == w) {
            out.push(w.to_string());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio(cmd: &[&str]) -> ServerDef {
        ServerDef {
            id: "time".into(),
            display_name: None,
            description: None,
            transport: Transport::Stdio {
                command: cmd.iter().map(|s| s.to_string()).collect(),
                env: BTreeMap::new(),
            },
            startup_timeout_secs: 10,
            tool_timeout_secs: 60,
            required: false,
        }
    }

    #[test]
    fn definitions_parse_with_defaults_and_validate_naming_the_field() {
        let d: ServerDef = serde_json::from_value(json!({
            "id": "git", "transport": {"type": "stdio", "command": ["mcp-server-git"]}
        }))
        .unwrap();
        assert_eq!(d.startup_timeout_secs, 10);
        assert_eq!(d.tool_timeout_secs, 60);
        assert!(!d.required);
        d.validate().unwrap();

        let e = stdio(&[]).validate().unwrap_err();
        assert_eq!(e.field, "transport.command");
        let mut bad = stdio(&["x"]);
        bad.id = "Bad_Id".into();
        assert_eq!(bad.validate().unwrap_err().field, "id");
        let mut bad = stdio(&["x"]);
        bad.tool_timeout_secs = 0;
        assert_eq!(bad.validate().unwrap_err().field, "tool_timeout_secs");
        let bad = stdio(&["x", "--token={{ secrets.T }}"]);
        assert_eq!(bad.validate().unwrap_err().field, "transport.command[1]");

        let http = |url: &str, h: &[(&str, &str)]| ServerDef {
            transport: Transport::Http {
                url: url.into(),
                protocol: HttpProtocol::StreamableHttp,
                headers: h
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            },
            ..stdio(&["x"])
        };
        http("http://127.0.0.1:9/mcp", &[]).validate().unwrap();
        assert_eq!(
            http("ftp://x", &[]).validate().unwrap_err().field,
            "transport.url"
        );
        assert_eq!(
            http("https://", &[]).validate().unwrap_err().field,
            "transport.url"
        );
        let e = http("https://x", &[("Mcp-Session-Id", "1")])
            .validate()
            .unwrap_err();
        assert_eq!(e.field, "transport.headers.Mcp-Session-Id");
        let e = http("https://x", &[("Authorization", "Bearer {{ env.HOME }}")])
            .validate()
            .unwrap_err();
        assert_eq!(e.field, "transport.headers.Authorization");
        assert!(e.message.contains("env.HOME"), "{e}");
        http(
            "https://x",
            &[("Authorization", "Bearer {{secrets.TOKEN}}")],
        )
        .validate()
        .unwrap();
        // Unknown fields are refused by the parser.
        assert!(serde_json::from_value::<ServerDef>(json!({
            "id": "x", "transport": {"type": "stdio", "command": ["a"], "cwd": "/"}
        }))
        .is_err());
    }

    #[test]
    fn views_show_keys_never_values() {
        let mut d = stdio(&["srv"]);
        d.transport = Transport::Stdio {
            command: vec!["srv".into()],
            env: [("TOKEN".to_string(), "hunter2".to_string())].into(),
        };
        let v = d.view().to_string();
        assert!(v.contains("\"env_keys\":[\"TOKEN\"]"), "{v}");
        assert!(!v.contains("hunter2"), "{v}");
        assert!(!v.contains("\"env\""), "{v}");
    }

    #[test]
    fn secrets_expand_and_fail_closed() {
        let lookup = |n: &str| (n == "TOKEN").then(|| "s3cr3t".to_string());
        assert_eq!(
            expand_secrets("Bearer {{ secrets.TOKEN }}!", &lookup).unwrap(),
            "Bearer s3cr3t!"
        );
        assert_eq!(expand_secrets("plain", &lookup).unwrap(), "plain");
        assert_eq!(
            expand_secrets("{{ secrets.OTHER }}", &lookup).unwrap_err(),
            ExpandError::Missing("OTHER".into())
        );
        assert!(matches!(
            expand_secrets("{{ secrets.TOKEN", &lookup).unwrap_err(),
            ExpandError::Reference(ReferenceError::Unclosed)
        ));
        assert_eq!(
            secret_names("a {{secrets.A}} b {{ secrets.B }}"),
            ["A", "B"]
        );
    }

    #[test]
    fn tool_names_are_qualified_cleaned_and_bounded() {
        assert_eq!(
            qualified_tool_name("time", "get_current_time"),
            "mcp__time__get_current_time"
        );
        assert_eq!(
            qualified_tool_name("every-thing", "get.sum/ä"),
            "mcp__every-thing__get_sum__"
        );
        let long_a = qualified_tool_name("s", &"a".repeat(80));
        let long_b = qualified_tool_name("s", &format!("{}b", "a".repeat(79)));
        assert_eq!(long_a.len(), MAX_TOOL_NAME);
        assert_ne!(long_a, long_b);
    }

    #[test]
    fn node_server_lists() {
        assert_eq!(
            parse_server_list("time, git  fetch,time").unwrap(),
            ["time", "git", "fetch"]
        );
        assert!(parse_server_list("").unwrap().is_empty());
        assert_eq!(parse_server_list("ok, Not_OK").unwrap_err(), "Not_OK");
    }
}
