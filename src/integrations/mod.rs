//! Integrations with the services around svc: the code host (a run's branch pushed, its
//! pull request opened and followed with its checks, code-host webhooks) and, beside it,
//! chat. [`Integrations`] is the one service the server holds: the HTTP routes call it, the
//! engine reaches it through `engine::Publisher` ([`publish::RunPublisher`]), and
//! `GET /api/v1/system/integrations` lists one [`IntegrationStatus`] per [`Provider`].
//!
//! Layout: [`codehost`] (the connection: config, credentials, REST calls, push),
//! [`pulls`] (a run's pull request as kept: link, details, checks, comments; refresh, merge,
//! close), [`publish`] (push + verify + open; the end-of-run step, `pull_request` stages and
//! the durable creation jobs), [`text`] (title and body), [`webhooks`] (signature, dedupe,
//! dispatch), [`watch`] (auto-merge without webhooks), [`status`], and [`chat`]
//! (notifications and answers in chat, Slack's wire format).
//!
//! Owns: the integrations' behaviour. Must not touch: HTTP routing or responses (the server
//! maps [`Error`] to statuses), SQL (`store::CodehostTable`), engine internals. No secret
//! reaches an event, a log line, an error or a process's argument list.

pub mod chat;
pub mod codehost;
pub mod publish;
pub mod pulls;
pub mod status;
pub mod text;
pub mod watch;
pub mod webhooks;

use crate::settings::vault::Vault;
use crate::settings::{Settings, SettingsHandle};
use crate::store::{CodehostTable, EventDraft, RunRow, RunStore, StoreError};
use codehost::api::{Client, HostError, Http};
use codehost::auth::TokenCache;
use codehost::{Config, RepoId, Unavailable};
use parking_lot::{Condvar, Mutex};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use status::{IntegrationStatus, Provider};

/// Run event kinds this module appends.
pub mod kinds {
    pub const CREATION_REQUESTED: &str = "pull_request.creation_requested";
    pub const CREATED: &str = crate::base::event_kind::PULL_REQUEST_CREATED;
    pub const FAILED: &str = "pull_request.failed";
    pub const LINKED: &str = crate::base::event_kind::PULL_REQUEST_LINKED;
    pub const UNLINKED: &str = crate::base::event_kind::PULL_REQUEST_UNLINKED;
    pub const MERGED: &str = "pull_request.merged";
    pub const CLOSED: &str = "pull_request.closed";
    /// A later head pushed to an open pull request (a `pull_request` stage visited again).
    pub const PUSHED: &str = "pull_request.pushed";
    /// Publishing at the end of a run found nothing to publish.
    pub const SKIPPED: &str = "pull_request.skipped";
    /// What the board shows of the pull request changed (state, counts, checks).
    pub const UPDATED: &str = "pull_request.updated";
}

/// Why an integration operation failed, with the code the API answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The integration is off or lacks credentials (503 `integration_unavailable`).
    #[error("{0}")]
    Unavailable(Unavailable),
    /// A request precondition (400 with `code`).
    #[error("{detail}")]
    Precondition { code: &'static str, detail: String },
    /// Nothing to act on (404 with `code`).
    #[error("{detail}")]
    NotFound { code: &'static str, detail: String },
    /// Conflicts with what exists (409 with `code`).
    #[error("{detail}")]
    Conflict { code: &'static str, detail: String },
    /// The code host refused or failed (502, the host's reason in `detail`).
    #[error("{0}")]
    Host(HostError),
    /// svc's own storage failed (500).
    #[error("{0}")]
    Store(String),
}

impl From<HostError> for Error {
    fn from(e: HostError) -> Error {
        match e {
            HostError::Unavailable(u) => Error::Unavailable(u),
            other => Error::Host(other),
        }
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Error {
        Error::Store(e.to_string())
    }
}

impl From<Unavailable> for Error {
    fn from(u: Unavailable) -> Error {
        Error::Unavailable(u)
    }
}

impl Error {
    pub fn precondition(code: &'static str, detail: impl Into<String>) -> Error {
        Error::Precondition {
            code,
            detail: detail.into(),
        }
    }
}

/// Where a run's workspace is, as the server lays workspaces out: its git view and base
/// commit, when it still exists.
pub trait WorkspaceLocator: Send + Sync {
    fn locate(&self, row: &RunRow) -> Option<(crate::workspace::Git, String)>;
}

/// A code-host delivery the automations module may start runs from (`push`, `issues`,
/// `pull_request`): event name, delivery id and the parsed payload. It answers what it did
/// (recorded as the delivery's outcome detail), or `None` when nothing matched.
pub type AutomationHook = Arc<dyn Fn(&str, &str, &Value) -> Option<String> + Send + Sync>;

/// Wakes waiters when a kept pull request changes (webhooks, refreshes): a generation
/// counter under a mutex, so a waiter never misses a change made between its check and
/// its wait.
#[derive(Default)]
pub struct Changes {
    generation: Mutex<u64>,
    cv: Condvar,
}

impl Changes {
    pub fn current(&self) -> u64 {
        *self.generation.lock()
    }

    pub fn bump(&self) {
        *self.generation.lock() += 1;
        self.cv.notify_all();
    }

    /// Waits up to `timeout` for a generation after `seen`; the generation then.
    pub fn wait_after(&self, seen: u64, timeout: Duration) -> u64 {
        let mut g = self.generation.lock();
        if *g == seen {
            let _ = self.cv.wait_for(&mut g, timeout);
        }
        *g
    }
}

/// The integrations service (see the module docs).
pub struct Integrations {
    pub settings: SettingsHandle,
    pub state_dir: PathBuf,
    vault: Vault,
    pub http: Http,
    tokens: TokenCache,
    pub table: Arc<dyn CodehostTable>,
    /// The run store events are appended through (the server's gated store).
    store: Arc<dyn RunStore>,
    locator: Arc<dyn WorkspaceLocator>,
    /// The last code-host failure, for the status entry: (when, what).
    last_error: Mutex<Option<(String, String)>>,
    pub changes: Changes,
    /// Runs whose pull request is being fetched now (at most one fetch per pull request).
    refreshing: Mutex<std::collections::HashSet<String>>,
    /// Serialises read-modify-write of kept pull requests (webhooks arrive concurrently).
    edit: Mutex<()>,
    automation_hook: Mutex<Option<AutomationHook>>,
    jobs: publish::Jobs,
    /// Chat: notifications and answers (its own worker; see [`chat`]).
    pub chat: Arc<chat::Chat>,
    /// Runs whose pull request awaits svc's auto-merge, with when the watch last asked the
    /// host about it ([`watch`]).
    watched: Mutex<std::collections::HashMap<String, Option<std::time::Instant>>>,
    watch_started: std::sync::atomic::AtomicBool,
    me: std::sync::Weak<Integrations>,
}

impl Integrations {
    pub fn new(
        settings: SettingsHandle,
        state_dir: PathBuf,
        table: Arc<dyn CodehostTable>,
        store: Arc<dyn RunStore>,
        locator: Arc<dyn WorkspaceLocator>,
    ) -> Arc<Integrations> {
        let vault = Vault::in_state_dir(&state_dir);
        let timeout = settings
            .get()
            .server
            .integrations
            .codehost
            .timeout_secs
            .max(1);
        let chat = chat::Chat::new(settings.clone(), vault.clone(), Arc::clone(&store));
        Arc::new_cyclic(|me| Integrations {
            settings,
            state_dir,
            vault,
            http: Http::new(Duration::from_secs(timeout)),
            tokens: TokenCache::default(),
            table,
            store,
            locator,
            last_error: Mutex::new(None),
            changes: Changes::default(),
            refreshing: Mutex::new(Default::default()),
            edit: Mutex::new(()),
            automation_hook: Mutex::new(None),
            jobs: publish::Jobs::default(),
            chat,
            watched: Mutex::new(Default::default()),
            watch_started: Default::default(),
            me: me.clone(),
        })
    }

    /// Where code-host deliveries that can start runs go (see [`AutomationHook`]).
    pub fn set_automation_hook(&self, hook: AutomationHook) {
        *self.automation_hook.lock() = Some(hook);
    }

    pub fn vault(&self) -> &Vault {
        &self.vault
    }

    pub fn store(&self) -> &Arc<dyn RunStore> {
        &self.store
    }

    /// Installation tokens minted so far (tests, benchmarks).
    pub fn tokens_minted(&self) -> u64 {
        self.tokens.minted()
    }

    /// The code-host connection as configured now.
    pub fn config(&self) -> Result<Config, Unavailable> {
        Config::resolve(&self.settings.get(), &self.vault)
    }

    /// Runs `f` with a client over the current configuration, noting a host failure for the
    /// status entry.
    pub fn with_client<T>(
        &self,
        f: impl FnOnce(&Client<'_>, &Config) -> Result<T, HostError>,
    ) -> Result<T, HostError> {
        let cfg = self.config().map_err(HostError::Unavailable)?;
        let client = Client {
            cfg: &cfg,
            tokens: &self.tokens,
            http: &self.http,
        };
        let r = f(&client, &cfg);
        match &r {
            Ok(_) => {
                let mut last = self.last_error.lock();
                if last.is_some() {
                    *last = None;
                }
            }
            Err(HostError::NotFound(_)) | Err(HostError::Unavailable(_)) => {}
            Err(e) => self.note_error(&e.to_string()),
        }
        r
    }

    fn note_error(&self, message: &str) {
        *self.last_error.lock() = Some((crate::base::clock::now(), message.to_string()));
    }

    /// The last code-host failure seen: (when, what).
    pub fn last_error(&self) -> Option<(String, String)> {
        self.last_error.lock().clone()
    }

    /// The code-host repository of a run (its origin under `web_url`), if any.
    pub fn repo_of_run(&self, row: &RunRow, settings: &Settings) -> Option<RepoId> {
        let origin = row
            .created_meta
            .get("repository")
            .and_then(|r| r.get("origin_url"))
            .and_then(Value::as_str)?;
        codehost::repo_of_origin(&settings.server.integrations.codehost.web_url, origin)
    }

    /// Appends a run event (with `actor` when given).
    pub fn append(
        &self,
        run_id: &str,
        kind: &str,
        props: Value,
        actor: Option<&Value>,
    ) -> Result<(), StoreError> {
        let mut d = EventDraft::new(kind, props);
        if let Some(a) = actor {
            d = d.actor(a.clone());
        }
        self.store.append(run_id, d).map(|_| ())
    }

    fn arc(&self) -> Option<Arc<Integrations>> {
        self.me.upgrade()
    }
}

#[cfg(test)]
mod tests;
