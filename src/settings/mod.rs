//! Server settings: `settings.toml` in the state directory (SPEC 1.9, api.md 6), parsed into
//! typed [`Settings`], validated, and live-reloaded by [`watch`].
//!
//! Live reload: a `notify` watcher on the file itself, re-armed after every event (editors
//! replace files by rename, which ends a watch) plus a 1 s fallback check of the file's
//! content. Not the directory: the database lives there, and every commit would wake the
//! watcher (5% of the server's CPU under load). A valid change is swapped in atomically
//! (readers hold an `Arc<Settings>` snapshot) and every change callback runs, so the scheduler
//! can wake for a new `max_concurrent_runs`; an invalid edit is logged and the previous
//! settings stay. Keys read per request or per decision (auth methods, concurrency, run
//! defaults, URLs) apply at once; the listener is fixed at startup and a change to it is
//! logged as needing a restart.
//!
//! Owns: the settings file format and its watcher; the secret vault ([`vault`]).
//! Must not touch: sockets, runs, or the store.

pub mod patch;
pub mod vault;

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The settings file name inside the state directory.
pub const SETTINGS_FILE: &str = "settings.toml";

/// Default `server.scheduler.max_concurrent_runs` (SPEC 8).
pub const DEFAULT_MAX_CONCURRENT_RUNS: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid settings: {0}")]
    Parse(String),
    #[error("invalid settings: {0}")]
    Invalid(String),
}

/// Everything in `settings.toml`. Unknown keys are errors (a typo must not silently fall
/// back to a default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    #[serde(rename = "_version")]
    pub version: u32,
    pub server: ServerSettings,
    pub llm: LlmSettings,
    pub run: RunDefaults,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            version: 1,
            server: ServerSettings::default(),
            llm: LlmSettings::default(),
            run: RunDefaults::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSettings {
    pub listen: ListenSettings,
    pub api: ApiSettings,
    pub web: WebSettings,
    pub auth: AuthSettings,
    pub scheduler: SchedulerSettings,
    pub http: HttpSettings,
    pub recovery: RecoverySettings,
    pub preview: PreviewSettings,
    /// `[server.integrations.*]`: the code host (and, later, chat) svc talks to.
    pub integrations: IntegrationsSettings,
    /// Where shared objects (artifacts) go; written by install mode. Nothing reads objects
    /// from it yet: runs, events and blobs live in the SQLite store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_store: Option<ObjectStoreSettings>,
    /// `[server.backup]` (issue 32): scheduled snapshots of the database to the object store.
    #[serde(skip_serializing_if = "BackupSettings::is_default")]
    pub backup: BackupSettings,
    /// Recorded LLM spend (USD) across all runs and completions per UTC day beyond which
    /// no run with LLM stages is promoted and no completion is served (ours, issue 29).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_usd_per_day: Option<f64>,
}

/// `[server.preview]` (ours): where previews are served (docs/decisions.md "Previews").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct PreviewSettings {
    /// The previews' own public origin (e.g. `https://preview.svc-example.net`, routed by
    /// the reverse proxy to this server): preview URLs are made from it, and previews are
    /// served only to requests for that host, never on the UI's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A second TCP listener (`host:port`) that serves previews and nothing else.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// Host ports a `local` run's previews never reach (svc's own listeners are always
    /// refused).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny_ports: Vec<u16>,
}

/// `[server.recovery]` (ours): what a start does with runs the previous process left active.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecoverySettings {
    /// Resume runs that were executing when the server stopped (crash, kill -9) from their
    /// last checkpoint; `false` fails them with reason `terminated` instead.
    pub resume_interrupted: bool,
}

impl Default for RecoverySettings {
    fn default() -> Self {
        RecoverySettings {
            resume_interrupted: true,
        }
    }
}

/// `[server.integrations]`: one table per provider. Secrets are vault entries, never keys here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct IntegrationsSettings {
    pub codehost: CodehostIntegrationSettings,
    pub chat: ChatIntegrationSettings,
}

/// `[server.integrations.chat]`: run notifications and answers to questions in chat, in
/// Slack's Web API wire format. The bot token and signing secret are the vault's
/// `CHAT_BOT_TOKEN` and `CHAT_SIGNING_SECRET`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChatIntegrationSettings {
    pub enabled: bool,
    /// The Web API base (`<api_url>/chat.postMessage`).
    pub api_url: String,
}

impl Default for ChatIntegrationSettings {
    fn default() -> Self {
        ChatIntegrationSettings {
            enabled: false,
            api_url: "https://slack.com/api".into(),
        }
    }
}

/// Checks a chat channel name or id (`[run.notifications] channel`, a create body's
/// `notifications.channel`): 1 to 80 characters, no spaces or control characters.
pub fn validate_chat_channel(c: &str) -> Result<(), String> {
    if c.is_empty() || c.chars().count() > 80 {
        return Err(format!("`{c}` must be 1 to 80 characters"));
    }
    if c.chars().any(|ch| ch.is_whitespace() || ch.is_control()) {
        return Err(format!("`{c}` must not contain spaces"));
    }
    Ok(())
}

/// A run event chat can be told of (`[run.notifications] events`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NotifyEvent {
    #[serde(rename = "run.completed")]
    Completed,
    #[serde(rename = "run.failed")]
    Failed,
    /// Each question the run waits on (with its options as buttons).
    #[serde(rename = "run.blocked")]
    Blocked,
}

/// `[run.notifications]` (per run: the create body's `notifications`): opt-in chat messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NotificationDefaults {
    pub enabled: bool,
    /// The channel id (or `#name`) messages go to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    pub events: Vec<NotifyEvent>,
}

impl Default for NotificationDefaults {
    fn default() -> Self {
        NotificationDefaults {
            enabled: false,
            channel: None,
            events: vec![
                NotifyEvent::Completed,
                NotifyEvent::Failed,
                NotifyEvent::Blocked,
            ],
        }
    }
}

/// How svc authenticates to the code host's REST API and git remote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CodehostStrategy {
    /// A personal access token (vault `CODEHOST_TOKEN`).
    #[default]
    Token,
    /// An app: `app_id` here, its private key in the vault (`CODEHOST_APP_PRIVATE_KEY`);
    /// installation tokens are minted per repository.
    App,
}

/// `[server.integrations.codehost]`: pushing run branches, pull requests and their checks,
/// webhooks (GitHub's REST wire format). The webhook secret is the vault's
/// `CODEHOST_WEBHOOK_SECRET`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CodehostIntegrationSettings {
    pub enabled: bool,
    /// The REST API (`/repos/...`); GitHub Enterprise: `https://host/api/v3`.
    pub api_url: String,
    /// Where repositories and pull requests live for people and for git
    /// (`<web_url>/<owner>/<repo>.git`).
    pub web_url: String,
    pub strategy: CodehostStrategy,
    /// The app's id (strategy `app`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_id: Option<u64>,
    /// The app's public page, shown as a hint to install it on a repository.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_url: Option<String>,
    /// A REST call to the host that takes longer than this fails (502, or
    /// `details_status: unavailable`); read at startup. Default 30, at least 1.
    pub timeout_secs: u64,
}

impl Default for CodehostIntegrationSettings {
    fn default() -> Self {
        CodehostIntegrationSettings {
            enabled: false,
            api_url: "https://api.github.com".into(),
            web_url: "https://github.com".into(),
            strategy: CodehostStrategy::Token,
            app_id: None,
            app_url: None,
            timeout_secs: 30,
        }
    }
}

/// `[server.object_store]`: `provider = "local"` with `root`, or `provider = "s3"` (any
/// S3-compatible bucket). S3 keys live in the vault (`OBJECT_STORE_ACCESS_KEY_ID`,
/// `OBJECT_STORE_SECRET_ACCESS_KEY`), never here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "provider", rename_all = "lowercase", deny_unknown_fields)]
pub enum ObjectStoreSettings {
    Local {
        root: PathBuf,
    },
    S3 {
        bucket: String,
        region: String,
        /// An S3-compatible endpoint (default `https://s3.<region>.amazonaws.com`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        endpoint: Option<String>,
        /// Path-style addressing (`<endpoint>/<bucket>/key`), as most S3-compatible stores need.
        #[serde(default)]
        path_style: bool,
        /// Files above this many MiB go up as multipart uploads in parts of this size
        /// (default 8; S3 allows 5 to 5120).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        part_size_mib: Option<u64>,
    },
}

/// `[server.backup]`: `every` (a duration such as `6h`, `30m`, `1d`; unset: no schedule,
/// `svc backup` only) and `keep` (the newest snapshots kept, default 7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BackupSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every: Option<String>,
    pub keep: usize,
}

impl Default for BackupSettings {
    fn default() -> Self {
        BackupSettings {
            every: None,
            keep: 7,
        }
    }
}

impl BackupSettings {
    fn is_default(&self) -> bool {
        *self == BackupSettings::default()
    }

    /// `every` as a duration (`None`: unset or unreadable, which `validate` refuses).
    pub fn every_duration(&self) -> Option<std::time::Duration> {
        self.every
            .as_deref()
            .and_then(|t| crate::dot::parse_duration(t.trim()))
            .filter(|d| !d.is_zero())
    }
}

/// `[server.listen]`: `type = "unix"` (optional `path`, default `<state-dir>/svc.sock`) or
/// `type = "tcp"` with `address = "host:port"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum ListenSettings {
    Unix {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<PathBuf>,
    },
    Tcp {
        address: String,
    },
}

impl Default for ListenSettings {
    fn default() -> Self {
        ListenSettings::Unix { path: None }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ApiSettings {
    /// The advertised public API URL (e.g. `https://svc.example.com/api/v1`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebSettings {
    /// The web UI (`crate::web`) is off by default; `true` requires `SESSION_SECRET`.
    pub enabled: bool,
    /// The canonical browser/API origin; run links are `<url>/runs/<id>`. Cookie-authenticated
    /// state-changing requests must carry this origin in `Origin`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// How long a session cookie lives, in seconds (default 30 days).
    pub session_lifetime_secs: u64,
}

/// Default `server.web.session_lifetime_secs`: 30 days.
pub const DEFAULT_SESSION_LIFETIME_SECS: u64 = 30 * 24 * 3600;

impl Default for WebSettings {
    fn default() -> Self {
        WebSettings {
            enabled: false,
            url: None,
            session_lifetime_secs: DEFAULT_SESSION_LIFETIME_SECS,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuthMethod {
    DevToken,
    Codehost,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthSettings {
    pub methods: Vec<AuthMethod>,
    pub codehost: CodehostAuthSettings,
    /// The longest lifetime (`exp - iat`) a bearer JWT may have (default 24 h): a token
    /// minted for years is refused however it is signed.
    pub jwt_max_lifetime_secs: u64,
    /// Logins with the server's admin rights (settings and secrets over HTTP), compared
    /// case-insensitively; the dev token's user is always an admin.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub admins: Vec<String>,
}

/// Default of `[server.auth] jwt_max_lifetime_secs`: one day.
pub const DEFAULT_JWT_MAX_LIFETIME_SECS: u64 = 86_400;

impl Default for AuthSettings {
    fn default() -> Self {
        AuthSettings {
            methods: vec![AuthMethod::DevToken],
            codehost: CodehostAuthSettings::default(),
            jwt_max_lifetime_secs: DEFAULT_JWT_MAX_LIFETIME_SECS,
            admins: Vec::new(),
        }
    }
}

/// `[server.auth.codehost]`: the code host's OAuth app (GitHub's web flow and wire format).
/// The client secret is the vault's `CODEHOST_CLIENT_SECRET`, never a setting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CodehostAuthSettings {
    /// Where browsers sign in (`/login/oauth/authorize`) and codes are exchanged.
    pub web_url: String,
    /// The REST API (`/user`).
    pub api_url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Logins allowed to sign in; everyone else gets 403. Required when `codehost` is on.
    pub allowed_usernames: Vec<String>,
}

impl Default for CodehostAuthSettings {
    fn default() -> Self {
        CodehostAuthSettings {
            web_url: "https://github.com".into(),
            api_url: "https://api.github.com".into(),
            client_id: None,
            allowed_usernames: Vec::new(),
        }
    }
}

impl CodehostAuthSettings {
    /// Whether `login` is allowed (code-host logins compare case-insensitively).
    pub fn allows(&self, login: &str) -> bool {
        self.allowed_usernames
            .iter()
            .any(|u| u.eq_ignore_ascii_case(login))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerSettings {
    pub max_concurrent_runs: usize,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        SchedulerSettings {
            max_concurrent_runs: DEFAULT_MAX_CONCURRENT_RUNS,
        }
    }
}

/// `[server.http]` (ours): connection and request limits. Fixed at startup. What each bounds
/// is in docs/decisions.md ("HTTP edge").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSettings {
    /// Request body bytes (413 beyond, before the body is read).
    pub max_body_bytes: usize,
    /// Time to receive a request body, and the time one write to a client may block.
    pub read_timeout_secs: u64,
    /// Request line and headers together, in bytes (431 beyond).
    pub max_head_bytes: usize,
    /// Header lines per request (431 beyond).
    pub max_headers: usize,
    /// Time to receive a request head from its first byte (408 beyond).
    pub head_timeout_secs: u64,
    /// Time a kept-alive connection may stay silent between requests (then closed).
    pub idle_timeout_secs: u64,
    /// Open connections at most (503 beyond); 0 derives it from the descriptor limit.
    pub max_connections: usize,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            max_body_bytes: 8 * 1024 * 1024,
            read_timeout_secs: 30,
            max_head_bytes: 64 * 1024,
            max_headers: 100,
            head_timeout_secs: 10,
            idle_timeout_secs: 30,
            max_connections: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct LlmSettings {
    pub providers: BTreeMap<String, ProviderSettings>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderSettings {
    /// Overrides the provider's API base URL (an OpenAI-compatible gateway, a test server).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
}

/// `[run]`: defaults applied to every run, overridable per run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RunDefaults {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goal: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelDefault>,
    pub inputs: BTreeMap<String, toml::Value>,
    /// Labels added to every run.
    pub metadata: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxDefault>,
    /// The environment (`/api/v1/environments` id) a run's sandbox is made from when the
    /// request names none; unset: `[run.sandbox]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// Whether a manager stage's child run waits for approval (`none` by default).
    pub child_approval: ChildApprovalPolicy,
    /// The repository a run works on when the request names none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repository: Option<RepositoryDefault>,
    /// Names of the server's environment variables passed on to every run's processes
    /// besides the allowlist of `procs::env` (for example `HTTP_PROXY`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pass_env: Vec<String>,
    /// Vault secrets given to every run's processes, each as the environment variable of
    /// its name. The only way a vault value reaches workflow code.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// `[run.agent]`: what agent stages get.
    #[serde(skip_serializing_if = "AgentDefaults::is_empty")]
    pub agent: AgentDefaults,
    /// A run's LLM budget in USD when its create body names none (`budget_usd`): the run
    /// stops before the model call that would start past it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_usd: Option<f64>,
    /// Whether and how a run that succeeds opens a pull request from its branch.
    pub pull_request: PullRequestDefaults,
    pub notifications: NotificationDefaults,
    /// Workspace files kept at the end of each stage (globs relative to the workspace,
    /// `**/*.xml`), for runs whose create body names none: copied into the object store,
    /// listed at `GET /api/v1/runs/{id}/artifacts`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<String>,
}

/// `[run.agent]`: defaults of agent stages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct AgentDefaults {
    /// The MCP servers of every run whose create body names none: catalog ids, or inline
    /// definitions (`{id, transport, ...}`). Resolved and frozen when a run is created.
    pub mcp_servers: Vec<McpServerRef>,
}

impl AgentDefaults {
    /// `mcp_servers` as the references `mcp::catalog::resolve` takes (ids as strings,
    /// inline definitions as objects).
    pub fn mcp_refs(&self) -> Vec<serde_json::Value> {
        self.mcp_servers
            .iter()
            .map(|r| match r {
                McpServerRef::Id(id) => serde_json::Value::String(id.clone()),
                McpServerRef::Inline(d) => {
                    serde_json::to_value(d).unwrap_or(serde_json::Value::Null)
                }
            })
            .collect()
    }

    fn is_empty(&self) -> bool {
        self.mcp_servers.is_empty()
    }
}

/// An MCP server a run uses: the id of a catalog entry, or a definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum McpServerRef {
    Id(String),
    Inline(Box<crate::mcp::ServerDef>),
}

/// How a pull request is merged (`merge_strategy`, and `POST .../merge {method}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum MergeStrategy {
    #[default]
    Merge,
    Squash,
    Rebase,
}

impl MergeStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            MergeStrategy::Merge => "merge",
            MergeStrategy::Squash => "squash",
            MergeStrategy::Rebase => "rebase",
        }
    }
}

/// `[run.pull_request]` (per run: the create body's `pull_request_options`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PullRequestDefaults {
    /// A run that succeeds pushes its branch and opens a PR before its terminal event.
    pub enabled: bool,
    /// Open it as a draft (default true; `auto_merge` opens it ready).
    pub draft: bool,
    /// The branch to merge into (default: the branch the run started from).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// svc merges the PR with `merge_strategy` once every check on its head passed.
    pub auto_merge: bool,
    pub merge_strategy: MergeStrategy,
}

impl Default for PullRequestDefaults {
    fn default() -> Self {
        PullRequestDefaults {
            enabled: false,
            draft: true,
            base: None,
            auto_merge: false,
            merge_strategy: MergeStrategy::Merge,
        }
    }
}

impl RunDefaults {
    /// The environment every process of a run starts from: the allowlist of `procs::env`,
    /// the variables of `pass_env`, and the `secrets` read from `vault` now. A named secret
    /// the vault does not hold fails the run (closed, not silently without it).
    pub fn stage_env(&self, vault: &vault::Vault) -> Result<crate::procs::EnvSnapshot, String> {
        self.stage_env_with(vault, Vec::new())
    }

    /// [`RunDefaults::stage_env`] plus `extra` variables (a run's environment's `env`,
    /// expanded), which win over `[run] secrets` of the same name.
    pub fn stage_env_with(
        &self,
        vault: &vault::Vault,
        extra: Vec<(String, String)>,
    ) -> Result<crate::procs::EnvSnapshot, String> {
        let mut given = Vec::with_capacity(self.secrets.len() + extra.len());
        for name in &self.secrets {
            match vault.get(name) {
                Ok(Some(v)) => given.push((name.clone(), v)),
                Ok(None) => {
                    return Err(format!(
                        "the secret `{name}` named in [run] secrets is not in the vault"
                    ))
                }
                Err(e) => return Err(format!("cannot read the secret `{name}`: {e}")),
            }
        }
        given.retain(|(k, _)| !extra.iter().any(|(e, _)| e == k));
        given.extend(extra);
        crate::procs::EnvSnapshot::for_stages(&self.pass_env, &given)
            .map_err(|e| format!("cannot build the run's environment: {e}"))
    }
}

/// Vault entries the server keeps for itself: never given to a run (`[run] secrets`, an
/// environment's `env`).
pub use crate::base::SERVER_OWNED_SECRETS;

/// A vault entry svc itself reads: its name and what it is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KnownSecret {
    pub name: String,
    pub purpose: &'static str,
}

impl Settings {
    /// The vault entries svc uses: every LLM provider's keys, the code host's OAuth client
    /// secret, the object store's keys, and the names `[run] secrets` gives to runs. The
    /// secrets API accepts these names only (the session secret is set at install).
    pub fn known_secrets(&self) -> Vec<KnownSecret> {
        let mut out: Vec<KnownSecret> = crate::llm::Provider::all_key_names()
            .map(|n| KnownSecret {
                name: n.to_string(),
                purpose: "LLM provider key",
            })
            .collect();
        for (name, purpose) in [
            ("CODEHOST_CLIENT_SECRET", "code host OAuth app (sign-in)"),
            (
                "OBJECT_STORE_ACCESS_KEY_ID",
                "object store (S3) access key id",
            ),
            (
                "OBJECT_STORE_SECRET_ACCESS_KEY",
                "object store (S3) secret key",
            ),
            (
                "CODEHOST_TOKEN",
                "code host personal access token (integration)",
            ),
            (
                "CODEHOST_APP_PRIVATE_KEY",
                "code host app private key, PEM (integration)",
            ),
            (
                "CODEHOST_WEBHOOK_SECRET",
                "code host webhook secret (X-Hub-Signature-256)",
            ),
            ("CHAT_BOT_TOKEN", "chat bot token (Slack Web API)"),
            (
                "CHAT_SIGNING_SECRET",
                "chat signing secret (interactivity callbacks)",
            ),
        ] {
            out.push(KnownSecret {
                name: name.into(),
                purpose,
            });
        }
        for n in &self.run.secrets {
            if !out.iter().any(|k| &k.name == n) {
                out.push(KnownSecret {
                    name: n.clone(),
                    purpose: "given to every run ([run] secrets)",
                });
            }
        }
        out
    }
}

/// `[run] child_approval`: `none` (children run at once, the default) or `required`
/// (each child waits in `pending{approval_required}` until approved or denied over HTTP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ChildApprovalPolicy {
    #[default]
    None,
    Required,
}

/// `[run] repository = {origin_url, branch?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepositoryDefault {
    pub origin_url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelDefault {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxDefault {
    #[serde(default = "default_provider")]
    pub provider: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// Whether container processes may use the network (default: no network).
    #[serde(default)]
    pub network: bool,
    /// The bubblewrap binary of the `container` provider (default `bwrap` on PATH).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bwrap: Option<String>,
    /// Hours a finished run's sandbox and workspace are kept before they are removed
    /// (default 168, one week; 0 removes them as soon as the run ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_hours: Option<u64>,
}

fn default_provider() -> String {
    "local".into()
}

/// Default `[run.sandbox] retention_hours`.
pub const DEFAULT_RETENTION_HOURS: u64 = 168;

impl SandboxDefault {
    /// `[run.sandbox]` with everything at its default.
    pub fn defaults() -> SandboxDefault {
        SandboxDefault {
            provider: default_provider(),
            image: None,
            snapshot: None,
            network: false,
            bwrap: None,
            retention_hours: None,
        }
    }
}

impl Settings {
    /// `[run.sandbox]` as the sandbox lifecycle needs it (its defaults when absent).
    pub fn sandbox_defaults(&self) -> crate::sandbox::lifecycle::Defaults {
        let d = self
            .run
            .sandbox
            .clone()
            .unwrap_or_else(SandboxDefault::defaults);
        crate::sandbox::lifecycle::Defaults {
            network: d.network,
            bwrap: d.bwrap,
            retention_hours: self
                .run
                .sandbox
                .as_ref()
                .and_then(|s| s.retention_hours)
                .unwrap_or(DEFAULT_RETENTION_HOURS),
        }
    }

    /// Parses and validates settings text.
    pub fn parse(text: &str) -> Result<Settings, SettingsError> {
        let s: Settings = toml::from_str(text).map_err(|e| SettingsError::Parse(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    pub fn load(path: &Path) -> Result<Settings, SettingsError> {
        let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Settings::parse(&text)
    }

    /// The throw-away configuration of `svc server start --dev`: the defaults with
    /// [`Settings::dev_overlay`] applied.
    pub fn dev() -> Settings {
        let mut s = Settings::default();
        Settings::dev_overlay(&mut s);
        s
    }

    /// What `--dev` turns on whatever `settings.toml` says (and keeps on across reloads):
    /// dev-token sign-in and the web UI. (Its listener stays on loopback: see
    /// `server::dev_listen`.)
    pub fn dev_overlay(s: &mut Settings) {
        if !s.has_auth(AuthMethod::DevToken) {
            s.server.auth.methods.push(AuthMethod::DevToken);
        }
        s.server.web.enabled = true;
    }

    pub fn validate(&self) -> Result<(), SettingsError> {
        let bad = |m: String| Err(SettingsError::Invalid(m));
        let mut mcp_ids: Vec<&str> = Vec::new();
        for (i, r) in self.run.agent.mcp_servers.iter().enumerate() {
            let id = match r {
                McpServerRef::Id(id) if crate::mcp::spec::is_slug(id) => id.as_str(),
                McpServerRef::Id(id) => {
                    return bad(format!(
                        "run.agent.mcp_servers[{i}]: `{id}` is not an MCP server id"
                    ))
                }
                McpServerRef::Inline(d) => {
                    if let Err(e) = d.validate() {
                        return bad(format!("run.agent.mcp_servers[{i}].{e}"));
                    }
                    d.id.as_str()
                }
            };
            if mcp_ids.contains(&id) {
                return bad(format!(
                    "run.agent.mcp_servers[{i}]: the server `{id}` is listed twice"
                ));
            }
            mcp_ids.push(id);
        }
        if self.version != 1 {
            return bad(format!(
                "_version = {} is not supported (expected 1)",
                self.version
            ));
        }
        if self.server.auth.methods.is_empty() {
            return bad(
                "server.auth.methods must name at least one method (dev-token, codehost)".into(),
            );
        }
        if self.has_auth(AuthMethod::Codehost)
            && self.server.auth.codehost.allowed_usernames.is_empty()
        {
            return bad("server.auth.codehost.allowed_usernames must name at least one user when codehost auth is on".into());
        }
        if self.server.auth.jwt_max_lifetime_secs == 0 {
            return bad("server.auth.jwt_max_lifetime_secs must be at least 1".into());
        }
        if self.server.backup.every.is_some() && self.server.backup.every_duration().is_none() {
            return bad(format!(
                "server.backup.every = {:?} is not a duration (such as \"6h\", \"30m\", \"1d\")",
                self.server.backup.every.as_deref().unwrap_or("")
            ));
        }
        if let Some(ObjectStoreSettings::S3 {
            part_size_mib: Some(mib),
            ..
        }) = &self.server.object_store
        {
            if !(5..=5120).contains(mib) {
                return bad(format!(
                    "server.object_store.part_size_mib = {mib} is outside S3's part sizes (5 to 5120)"
                ));
            }
        }
        if self.server.backup.keep == 0 {
            return bad("server.backup.keep must be at least 1".into());
        }
        if self.server.web.session_lifetime_secs == 0 {
            return bad("server.web.session_lifetime_secs must be at least 1".into());
        }
        for (key, usd) in [
            ("server.max_usd_per_day", self.server.max_usd_per_day),
            ("run.max_usd", self.run.max_usd),
        ] {
            if usd.is_some_and(|u| !(u.is_finite() && u > 0.0)) {
                return bad(format!("{key} must be a positive number of US dollars"));
            }
        }
        if self.server.scheduler.max_concurrent_runs == 0 {
            return bad("server.scheduler.max_concurrent_runs must be at least 1".into());
        }
        if let ListenSettings::Tcp { address } = &self.server.listen {
            match address.rsplit_once(':') {
                Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() => {}
                _ => {
                    return bad(format!(
                        "server.listen.address `{address}` is not host:port"
                    ))
                }
            }
        }
        if self.server.http.max_body_bytes < 1024 {
            return bad("server.http.max_body_bytes must be at least 1024".into());
        }
        let h = &self.server.http;
        for (key, secs) in [
            ("read_timeout_secs", h.read_timeout_secs),
            ("head_timeout_secs", h.head_timeout_secs),
            ("idle_timeout_secs", h.idle_timeout_secs),
        ] {
            if secs == 0 {
                return bad(format!("server.http.{key} must be at least 1"));
            }
        }
        if h.max_head_bytes < 1024 {
            return bad("server.http.max_head_bytes must be at least 1024".into());
        }
        if h.max_headers < 8 {
            return bad("server.http.max_headers must be at least 8".into());
        }
        if let Some(address) = &self.server.preview.listen {
            match address.rsplit_once(':') {
                Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() => {}
                _ => {
                    return bad(format!(
                        "server.preview.listen `{address}` is not host:port"
                    ))
                }
            }
        }
        let urls = [
            ("server.preview.url", self.server.preview.url.as_deref()),
            ("server.api.url", self.server.api.url.as_deref()),
            ("server.web.url", self.server.web.url.as_deref()),
            (
                "server.auth.codehost.web_url",
                Some(self.server.auth.codehost.web_url.as_str()),
            ),
            (
                "server.auth.codehost.api_url",
                Some(self.server.auth.codehost.api_url.as_str()),
            ),
            (
                "server.integrations.codehost.api_url",
                Some(self.server.integrations.codehost.api_url.as_str()),
            ),
            (
                "server.integrations.codehost.web_url",
                Some(self.server.integrations.codehost.web_url.as_str()),
            ),
            (
                "server.integrations.codehost.app_url",
                self.server.integrations.codehost.app_url.as_deref(),
            ),
        ];
        for (key, url) in urls.into_iter().chain(
            self.llm
                .providers
                .values()
                .map(|p| ("llm.providers.*.base_url", p.base_url.as_deref())),
        ) {
            if let Some(u) = url {
                if !(u.starts_with("http://") || u.starts_with("https://")) || u.len() < 10 {
                    return bad(format!("{key} `{u}` is not an http(s) URL"));
                }
            }
        }
        for name in self.llm.providers.keys() {
            if crate::llm::Provider::parse(name).is_none() {
                let known: Vec<&str> = crate::llm::Provider::ALL.iter().map(|p| p.id()).collect();
                return bad(format!(
                    "llm.providers.{name}: unknown LLM provider (known: {})",
                    known.join(", ")
                ));
            }
        }
        let env_name = |n: &str| {
            let mut c = n.chars();
            c.next()
                .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
                && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
        };
        for (key, names) in [
            ("run.pass_env", &self.run.pass_env),
            ("run.secrets", &self.run.secrets),
        ] {
            for n in names {
                if !env_name(n) {
                    return bad(format!("{key}: `{n}` is not an environment variable name"));
                }
                if crate::procs::NEVER_PASSED.contains(&n.as_str())
                    || (key == "run.secrets" && SERVER_OWNED_SECRETS.contains(&n.as_str()))
                {
                    return bad(format!(
                        "{key}: `{n}` is the server's own credential and is never given to workflow code"
                    ));
                }
            }
        }
        if let Err(e) = crate::base::glob::check_relative_patterns(&self.run.artifacts) {
            return bad(format!("run.artifacts: {e}"));
        }
        let ch = &self.server.integrations.codehost;
        if ch.enabled && ch.strategy == CodehostStrategy::App && ch.app_id.is_none() {
            return bad(
                "server.integrations.codehost.app_id is required with strategy = \"app\"".into(),
            );
        }
        if let Some(b) = &self.run.pull_request.base {
            if b.trim().is_empty() || b.starts_with('-') {
                return bad(format!("run.pull_request.base `{b}` is not a branch name"));
            }
        }
        let chat = &self.server.integrations.chat;
        if !(chat.api_url.starts_with("https://") || chat.api_url.starts_with("http://")) {
            return bad(format!(
                "server.integrations.chat.api_url `{}` is not an http(s) URL",
                chat.api_url
            ));
        }
        if let Some(c) = &self.run.notifications.channel {
            if let Err(e) = validate_chat_channel(c) {
                return bad(format!("run.notifications.channel {e}"));
            }
        }
        if let Some(sb) = &self.run.sandbox {
            if !matches!(sb.provider.as_str(), "local" | "container" | "hosted") {
                return bad(format!(
                    "run.sandbox.provider `{}` is not local, container or hosted",
                    sb.provider
                ));
            }
        }
        Ok(())
    }

    pub fn has_auth(&self, m: AuthMethod) -> bool {
        self.server.auth.methods.contains(&m)
    }

    /// `server.web.url + /runs/<id>` when the web UI is enabled and has a URL.
    pub fn run_web_url(&self, run_id: &str) -> Option<String> {
        match (&self.server.web.enabled, &self.server.web.url) {
            (true, Some(u)) => Some(format!("{}/runs/{run_id}", u.trim_end_matches('/'))),
            _ => None,
        }
    }
}

type Callback = Box<dyn Fn(&Settings, &Settings) + Send + Sync>;

/// Shared, live settings: cheap snapshots for readers, callbacks on every applied change.
#[derive(Clone)]
pub struct SettingsHandle {
    inner: Arc<HandleInner>,
}

struct HandleInner {
    current: RwLock<Arc<Settings>>,
    callbacks: Mutex<Vec<Callback>>,
    overlay: Option<fn(&mut Settings)>,
}

impl SettingsHandle {
    pub fn new(s: Settings) -> SettingsHandle {
        SettingsHandle::build(s, None)
    }

    /// Settings that `overlay` amends now and after every reload (what `--dev` turns on
    /// holds whatever the file says).
    pub fn with_overlay(mut s: Settings, overlay: fn(&mut Settings)) -> SettingsHandle {
        overlay(&mut s);
        SettingsHandle::build(s, Some(overlay))
    }

    fn build(s: Settings, overlay: Option<fn(&mut Settings)>) -> SettingsHandle {
        SettingsHandle {
            inner: Arc::new(HandleInner {
                current: RwLock::new(Arc::new(s)),
                callbacks: Mutex::new(Vec::new()),
                overlay,
            }),
        }
    }

    /// The current settings (a snapshot: later changes do not affect it).
    pub fn get(&self) -> Arc<Settings> {
        Arc::clone(&self.inner.current.read())
    }

    /// Runs `f(old, new)` after every applied change.
    pub fn on_change(&self, f: impl Fn(&Settings, &Settings) + Send + Sync + 'static) {
        self.inner.callbacks.lock().push(Box::new(f));
    }

    /// Swaps in `new` (already validated) and runs the callbacks. No-op when equal.
    pub fn replace(&self, mut new: Settings) -> bool {
        if let Some(overlay) = self.inner.overlay {
            overlay(&mut new);
        }
        let old = {
            let mut cur = self.inner.current.write();
            if **cur == new {
                return false;
            }
            std::mem::replace(&mut *cur, Arc::new(new))
        };
        let new = self.get();
        for cb in self.inner.callbacks.lock().iter() {
            cb(&old, &new);
        }
        true
    }
}

/// Keeps the watcher alive; dropping it stops watching.
pub struct SettingsWatcher {
    stop: crossbeam_channel::Sender<()>,
}

impl Drop for SettingsWatcher {
    fn drop(&mut self) {
        let _ = self.stop.send(());
    }
}

/// A `notify` watch on one file, re-armed on demand (a rename over the file ends it).
struct FileWatch {
    watcher: Option<notify::RecommendedWatcher>,
    path: PathBuf,
    armed: bool,
}

impl FileWatch {
    fn new(path: &Path, tx: crossbeam_channel::Sender<()>) -> FileWatch {
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if res.is_ok() {
                let _ = tx.send(());
            }
        });
        let watcher = match watcher {
            Ok(w) => Some(w),
            Err(e) => {
                log::warn!("cannot watch settings ({e}); changes are picked up by polling");
                None
            }
        };
        let mut fw = FileWatch {
            watcher,
            path: path.to_path_buf(),
            armed: false,
        };
        fw.rearm();
        fw
    }

    /// Watches the file as it is now (a missing file is watched once it exists).
    fn rearm(&mut self) {
        use notify::Watcher;
        let Some(w) = self.watcher.as_mut() else {
            return;
        };
        if self.armed {
            let _ = w.unwatch(&self.path);
        }
        self.armed = w
            .watch(&self.path, notify::RecursiveMode::NonRecursive)
            .is_ok();
    }
}

/// Watches `path` and applies valid changes to `handle` (see the module docs).
pub fn watch(path: &Path, handle: SettingsHandle) -> SettingsWatcher {
    let (tx, rx) = crossbeam_channel::unbounded::<()>();
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(1);
    let path = path.to_path_buf();
    let mut last = std::fs::read(&path).ok();
    let spawned = std::thread::Builder::new()
        .name("settings-watch".into())
        .spawn(move || {
            let mut fw = FileWatch::new(&path, tx);
            loop {
                crossbeam_channel::select! {
                    recv(stop_rx) -> _ => return,
                    recv(rx) -> _ => {
                        // Let a burst of events (truncate + write, or a rename) settle.
                        std::thread::sleep(Duration::from_millis(100));
                        while rx.try_recv().is_ok() {}
                        fw.rearm();
                    }
                    default(Duration::from_secs(1)) => {
                        if !fw.armed {
                            fw.rearm();
                        }
                    }
                }
                let now = std::fs::read(&path).ok();
                if now == last {
                    continue;
                }
                match &now {
                    None => log::warn!(
                        "settings file {} disappeared; keeping the current settings",
                        path.display()
                    ),
                    Some(bytes) => match std::str::from_utf8(bytes)
                        .map_err(|e| SettingsError::Parse(e.to_string()))
                        .and_then(Settings::parse)
                    {
                        Ok(s) => {
                            if handle.replace(s) {
                                log::info!("settings reloaded from {}", path.display());
                            }
                        }
                        Err(e) => {
                            log::error!("{}: {e}; keeping the previous settings", path.display())
                        }
                    },
                }
                last = now;
            }
        });
    if let Err(e) = spawned {
        log::error!("cannot start the settings watcher: {e}");
    }
    SettingsWatcher { stop: stop_tx }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_full_file() {
        let s = Settings::parse("").unwrap();
        assert_eq!(s.server.scheduler.max_concurrent_runs, 5);
        assert!(s.server.recovery.resume_interrupted);
        assert_eq!(s.server.listen, ListenSettings::Unix { path: None });
        let s = Settings::parse(
            r#"
_version = 1
[server.listen]
type = "tcp"
address = "127.0.0.1:32276"
[server.api]
url = "https://svc.example.com/api/v1"
[server.web]
enabled = false
url = "https://svc.example.com"
[server.auth]
methods = ["dev-token", "codehost"]
[server.auth.codehost]
client_id = "Iv1.abc"
allowed_usernames = ["alice"]
[server.scheduler]
max_concurrent_runs = 2
[server.recovery]
resume_interrupted = false
[llm.providers.openai]
base_url = "http://127.0.0.1:9999/v1"
[run]
goal = "ship it"
metadata = { team = "platform" }
[run.model]
name = "gpt-5.4"
[run.inputs]
n = 3
[run.sandbox]
provider = "local"
[run.pull_request]
enabled = true
draft = false
merge_strategy = "squash"
[server.integrations.codehost]
enabled = true
strategy = "app"
app_id = 42
api_url = "http://127.0.0.1:9/api/v3"
web_url = "http://127.0.0.1:9"
"#,
        )
        .unwrap();
        assert_eq!(
            s.server.listen,
            ListenSettings::Tcp {
                address: "127.0.0.1:32276".into()
            }
        );
        assert_eq!(s.server.scheduler.max_concurrent_runs, 2);
        assert!(!s.server.recovery.resume_interrupted);
        assert!(s.has_auth(AuthMethod::Codehost));
        assert!(s.server.auth.codehost.allows("Alice") && !s.server.auth.codehost.allows("bob"));
        assert_eq!(s.server.auth.codehost.web_url, "https://github.com");
        assert_eq!(s.server.web.session_lifetime_secs, 30 * 24 * 3600);
        assert_eq!(s.run.metadata["team"], "platform");
        assert!(s.run.pull_request.enabled && !s.run.pull_request.draft);
        assert_eq!(s.run.pull_request.merge_strategy, MergeStrategy::Squash);
        let ch = &s.server.integrations.codehost;
        assert_eq!((ch.strategy, ch.app_id), (CodehostStrategy::App, Some(42)));
        let d = Settings::parse("").unwrap();
        assert!(d.run.pull_request.draft && !d.run.pull_request.enabled);
        assert_eq!(
            d.server.integrations.codehost.api_url,
            "https://api.github.com"
        );
    }

    #[test]
    fn invalid_settings_are_refused() {
        for bad in [
            "[server.scheduler]\nmax_concurrent_runs = 0",
            "[server.auth]\nmethods = []",
            "[server.auth]\nmethods = [\"codehost\"]",
            "[server.web]\nsession_lifetime_secs = 0",
            "[server.auth.codehost]\nallowed_usernames = [\"a\"]\nweb_url = \"github.com\"",
            "[server.auth]\nmethods = [\"password\"]",
            "[server.listen]\ntype = \"tcp\"\naddress = \"nope\"",
            "[server.listen]\ntype = \"tcp\"",
            "[server]\nlisten = 3",
            "[server.schedular]\nmax_concurrent_runs = 2",
            "[llm.providers.x]\nbase_url = \"ftp://x\"",
            "[llm.providers.antropic]\nbase_url = \"http://127.0.0.1:9000\"",
            "_version = 2",
            "not toml [",
            "[server.http]\nhead_timeout_secs = 0",
            "[server.http]\nidle_timeout_secs = 0",
            "[server.http]\nmax_head_bytes = 100",
            "[server.http]\nmax_headers = 2",
            "[server.http]\nmax_conections = 10",
            "[server.integrations.codehost]\nenabled = true\nstrategy = \"app\"",
            "[server.integrations.codehost]\nstrategy = \"oauth\"",
            "[server.integrations.codehost]\napi_url = \"api.github.com\"",
            "[server.integrations.codehost]\ntoken = \"ghp_x\"",
            "[run.pull_request]\nmerge_strategy = \"octopus\"",
            "[run.pull_request]\nbase = \"\"",
        ] {
            assert!(Settings::parse(bad).is_err(), "accepted: {bad}");
        }
    }

    #[test]
    fn handle_callbacks_fire_on_change_only() {
        let h = SettingsHandle::new(Settings::default());
        let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let n2 = Arc::clone(&n);
        h.on_change(move |_, _| {
            n2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        assert!(!h.replace(Settings::default()));
        let mut s = Settings::default();
        s.server.scheduler.max_concurrent_runs = 9;
        assert!(h.replace(s));
        assert_eq!(n.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(h.get().server.scheduler.max_concurrent_runs, 9);
    }
}

#[cfg(test)]
mod mcp_tests {
    use super::*;

    #[test]
    fn run_agent_mcp_servers_take_ids_and_inline_definitions() {
        let s = Settings::parse(
            r#"
[run.agent]
mcp_servers = [
  "time",
  { id = "git", transport = { type = "stdio", command = ["mcp-server-git"] }, required = true },
]
"#,
        )
        .unwrap();
        let refs = &s.run.agent.mcp_servers;
        assert_eq!(refs[0], McpServerRef::Id("time".into()));
        match &refs[1] {
            McpServerRef::Inline(d) => {
                assert_eq!(d.id, "git");
                assert!(d.required);
                assert_eq!(d.tool_timeout_secs, 60);
            }
            other => panic!("{other:?}"),
        }
        for (text, expect) in [
            (r#"mcp_servers = ["Time"]"#, "mcp_servers[0]: `Time`"),
            (r#"mcp_servers = ["a", "a"]"#, "listed twice"),
            (
                r#"mcp_servers = [{ id = "x", transport = { type = "stdio", command = [] } }]"#,
                "mcp_servers[0].transport.command",
            ),
        ] {
            let e = Settings::parse(&format!("[run.agent]\n{text}\n")).unwrap_err();
            assert!(e.to_string().contains(expect), "{text}: {e}");
        }
    }
}
