//! `GET /api/v1/system/integrations`: one [`IntegrationStatus`] per [`Provider`], from the
//! settings and the vault as they are now (`configured` means "credentials present"; the
//! last failure talking to the provider turns the status to `error` with it).
//!
//! Chat's entry is `chat::Chat::status`.
//!
//! Owns: the status shape (opgroups 5.2 IntegrationStatus). Must not touch: secrets' values
//! (only whether they are present), HTTP.

use super::codehost::{self, Unavailable};
use super::Integrations;
use crate::settings::CodehostStrategy;
use serde::Serialize;
use serde_json::{json, Map, Value};

/// The integrations svc knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    Codehost,
    Chat,
}

/// Where a provider stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Disabled,
    MissingCredentials,
    Configured,
    Error,
}

/// One provider's entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntegrationStatus {
    pub provider: Provider,
    pub enabled: bool,
    /// Every credential it needs is present.
    pub configured: bool,
    pub status: State,
    /// Setting or vault entry names that are missing.
    pub missing_credentials: Vec<String>,
    /// The last failure (`status: error`): `{at, message}`.
    pub last_error: Option<Value>,
    /// Non-secret hints: URLs, strategy, app id, which optional secrets are set.
    pub metadata: Map<String, Value>,
}

/// Every provider's status, code host first.
pub fn all(i: &Integrations) -> Vec<IntegrationStatus> {
    vec![codehost_status(i), i.chat.status()]
}

fn present(i: &Integrations, key: &str) -> bool {
    i.vault()
        .get(key)
        .ok()
        .flatten()
        .is_some_and(|v| !v.trim().is_empty())
}

/// The code host's entry.
pub fn codehost_status(i: &Integrations) -> IntegrationStatus {
    let settings = i.settings.get();
    let c = &settings.server.integrations.codehost;
    let mut metadata = Map::new();
    metadata.insert("api_url".into(), json!(c.api_url));
    metadata.insert("web_url".into(), json!(c.web_url));
    metadata.insert(
        "strategy".into(),
        json!(match c.strategy {
            CodehostStrategy::Token => "token",
            CodehostStrategy::App => "app",
        }),
    );
    if let Some(id) = c.app_id {
        metadata.insert("app_id".into(), json!(id));
    }
    if let Some(u) = &c.app_url {
        metadata.insert("app_url".into(), json!(u));
    }
    metadata.insert(
        "webhook_secret_set".into(),
        json!(present(i, codehost::WEBHOOK_SECRET_KEY)),
    );
    metadata.insert(
        "webhook_url".into(),
        json!(settings
            .server
            .api
            .url
            .as_deref()
            .map(|u| format!("{}/webhooks/codehost", u.trim_end_matches('/')))),
    );
    let (status, missing) = match i.config() {
        Err(Unavailable::Disabled) => (State::Disabled, Vec::new()),
        Err(Unavailable::MissingCredentials(m)) => (State::MissingCredentials, m),
        Err(Unavailable::Vault(_)) => (State::Error, Vec::new()),
        Ok(_) => (State::Configured, Vec::new()),
    };
    let last_error = i
        .last_error()
        .map(|(at, message)| json!({"at": at, "message": message}));
    let status = if status == State::Configured && last_error.is_some() {
        State::Error
    } else {
        status
    };
    IntegrationStatus {
        provider: Provider::Codehost,
        enabled: c.enabled,
        configured: matches!(status, State::Configured | State::Error) && missing.is_empty(),
        status,
        missing_credentials: missing,
        last_error,
        metadata,
    }
}
