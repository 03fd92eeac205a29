//! The code-host connection (GitHub's REST wire format): what `[server.integrations.codehost]`
//! and the vault say ([`Config`]), how svc authenticates per repository ([`auth`]: a
//! personal access token, or an app's installation tokens minted from an RS256 JWT
//! ([`app`])), the REST calls svc makes ([`api`]), and pushing a run branch with the
//! credential kept out of argv, `.git/config` and the remote URL ([`push`]).
//!
//! Owns: talking to the code host. Must not touch: runs, the store, HTTP serving. No
//! credential ever appears in an error message, a log line or a process's argument list;
//! nothing is read from the process environment.

pub mod api;
pub mod app;
pub mod auth;
pub mod push;

use crate::settings::vault::Vault;
use crate::settings::{CodehostIntegrationSettings, CodehostStrategy, Settings};

/// Vault entry holding a personal access token (strategy `token`).
pub const TOKEN_KEY: &str = "CODEHOST_TOKEN";
/// Vault entry holding the app's PEM private key (strategy `app`).
pub const APP_KEY_KEY: &str = "CODEHOST_APP_PRIVATE_KEY";
/// Vault entry holding the webhook secret (`X-Hub-Signature-256`).
pub const WEBHOOK_SECRET_KEY: &str = "CODEHOST_WEBHOOK_SECRET";

/// A repository on the code host.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepoId {
    pub owner: String,
    pub name: String,
}

impl RepoId {
    /// `owner/name` when both are plain names (letters, digits, `-`, `_`, `.`; not `.`/`..`).
    pub fn parse(owner: &str, name: &str) -> Option<RepoId> {
        let ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 100
                && s != "."
                && s != ".."
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        };
        (ok(owner) && ok(name)).then(|| RepoId {
            owner: owner.to_string(),
            name: name.to_string(),
        })
    }

    pub fn slug(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }
}

impl std::fmt::Display for RepoId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

/// The repository an origin URL names on the code host at `web_url`: `<web_url>/<owner>/
/// <repo>(.git)`, or `git@<host>:<owner>/<repo>.git` / `ssh://git@<host>/<owner>/<repo>` on
/// its host. `None` for any other URL (another host, a path, `file://`).
pub fn repo_of_origin(web_url: &str, origin: &str) -> Option<RepoId> {
    let host = host_of(web_url)?;
    let origin = origin.trim().trim_end_matches('/');
    let origin = origin.strip_suffix(".git").unwrap_or(origin);
    let path = if let Some(rest) = origin.split_once("://").map(|(_, r)| r) {
        if origin.starts_with("file://") {
            return None;
        }
        let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
        let (h, path) = rest.split_once('/')?;
        if !same_host(h, &host) {
            return None;
        }
        // A web_url with a path prefix (`https://host/git`) puts repositories under it.
        let prefix = web_url
            .split_once("://")
            .and_then(|(_, r)| r.split_once('/'))
            .map(|(_, p)| p.trim_matches('/'))
            .unwrap_or("");
        if prefix.is_empty() {
            path
        } else {
            path.strip_prefix(prefix)?.trim_start_matches('/')
        }
    } else {
        let (h, path) = origin.split_once(':')?;
        let h = h.rsplit_once('@').map_or(h, |(_, h)| h);
        if h.contains('/') || !same_host(h, &host) {
            return None;
        }
        path
    };
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    match parts.as_slice() {
        [owner, name] => RepoId::parse(owner, name),
        _ => None,
    }
}

/// `host[:port]` of an http(s) URL, lower-cased.
fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let host = rest.split(['/', '?', '#']).next()?;
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// Hosts compare case-insensitively; a port on one side must match the other's.
fn same_host(a: &str, web_host: &str) -> bool {
    let a = a.to_ascii_lowercase();
    if a == web_host {
        return true;
    }
    // ssh remotes carry no port; `github.com:443` style web URLs still match them.
    let bare = |h: &str| h.split(':').next().unwrap_or(h).to_string();
    !a.contains(':') && bare(web_host) == a
}

/// What the connection needs, resolved from settings and the vault at the moment of use
/// (both can change while the server runs).
#[derive(Clone)]
pub struct Config {
    pub api_url: String,
    pub web_url: String,
    pub credential: Credential,
}

/// How svc proves who it is.
#[derive(Clone)]
pub enum Credential {
    Token(String),
    App {
        app_id: u64,
        private_key_pem: String,
    },
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.credential {
            Credential::Token(_) => "token",
            Credential::App { .. } => "app",
        };
        f.debug_struct("Config")
            .field("api_url", &self.api_url)
            .field("web_url", &self.web_url)
            .field("credential", &kind)
            .finish()
    }
}

/// Why the code host cannot be used at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// `[server.integrations.codehost] enabled` is false.
    Disabled,
    /// These settings or vault entries are missing.
    MissingCredentials(Vec<String>),
    /// The vault could not be read.
    Vault(String),
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::Disabled => write!(
                f,
                "the code-host integration is disabled ([server.integrations.codehost] enabled = false)"
            ),
            Unavailable::MissingCredentials(m) => write!(
                f,
                "the code-host integration is missing {} (settings or `svc secrets set`)",
                m.join(", ")
            ),
            Unavailable::Vault(e) => write!(f, "the vault cannot be read: {e}"),
        }
    }
}

impl Config {
    /// The connection `settings` and `vault` describe, or why there is none.
    pub fn resolve(settings: &Settings, vault: &Vault) -> Result<Config, Unavailable> {
        let c: &CodehostIntegrationSettings = &settings.server.integrations.codehost;
        if !c.enabled {
            return Err(Unavailable::Disabled);
        }
        let get = |k: &str| {
            vault
                .get(k)
                .map(|v| v.filter(|s| !s.trim().is_empty()))
                .map_err(|e| Unavailable::Vault(e.to_string()))
        };
        let credential = match c.strategy {
            CodehostStrategy::Token => match get(TOKEN_KEY)? {
                Some(t) => Credential::Token(t.trim().to_string()),
                None => return Err(Unavailable::MissingCredentials(vec![TOKEN_KEY.into()])),
            },
            CodehostStrategy::App => {
                let key = get(APP_KEY_KEY)?;
                let mut missing = Vec::new();
                if c.app_id.is_none() {
                    missing.push("server.integrations.codehost.app_id".to_string());
                }
                if key.is_none() {
                    missing.push(APP_KEY_KEY.to_string());
                }
                match (c.app_id, key) {
                    (Some(app_id), Some(private_key_pem)) => Credential::App {
                        app_id,
                        private_key_pem,
                    },
                    _ => return Err(Unavailable::MissingCredentials(missing)),
                }
            }
        };
        Ok(Config {
            api_url: c.api_url.trim_end_matches('/').to_string(),
            web_url: c.web_url.trim_end_matches('/').to_string(),
            credential,
        })
    }

    /// The web page of pull request `number` of `repo`.
    pub fn pull_url(&self, repo: &RepoId, number: u64) -> String {
        format!("{}/{}/pull/{number}", self.web_url, repo.slug())
    }

    /// Where git pushes `repo`: `<web_url>/<owner>/<repo>.git` (no credential in it).
    pub fn git_url(&self, repo: &RepoId) -> String {
        format!("{}/{}.git", self.web_url, repo.slug())
    }
}

/// `(owner, repo, number)` of a pull request's web URL on the code host at `web_url`:
/// `<web_url>/<owner>/<repo>/pull/<n>`.
pub fn parse_pull_url(web_url: &str, url: &str) -> Result<(RepoId, u64), PullUrlError> {
    let url = url.trim();
    let base = web_url.trim_end_matches('/');
    let Some(host) = host_of(url) else {
        return Err(PullUrlError::Invalid);
    };
    let web_host = host_of(base).unwrap_or_default();
    if host != web_host || !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(PullUrlError::OtherHost(host));
    }
    let rest = url
        .split_once("://")
        .map(|(_, r)| r)
        .and_then(|r| r.split_once('/').map(|(_, p)| p))
        .unwrap_or("");
    let prefix = base
        .split_once("://")
        .and_then(|(_, r)| r.split_once('/'))
        .map(|(_, p)| p.trim_matches('/'))
        .unwrap_or("");
    let rest = if prefix.is_empty() {
        rest
    } else {
        rest.strip_prefix(prefix).ok_or(PullUrlError::Invalid)?
    };
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    match parts.as_slice() {
        [owner, name, "pull" | "pulls", n] => {
            let repo = RepoId::parse(owner, name).ok_or(PullUrlError::Invalid)?;
            let number = n
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or(PullUrlError::Invalid)?;
            Ok((repo, number))
        }
        _ => Err(PullUrlError::Invalid),
    }
}

/// Why a pull request URL was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullUrlError {
    /// On another host than the configured code host.
    OtherHost(String),
    /// Not `<web_url>/<owner>/<repo>/pull/<number>`.
    Invalid,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_on_the_code_host_name_their_repository() {
        let gh = "https://github.com";
        let r = |o: &str, n: &str| Some(RepoId::parse(o, n).unwrap());
        assert_eq!(
            repo_of_origin(gh, "https://github.com/acme/app.git"),
            r("acme", "app")
        );
        assert_eq!(
            repo_of_origin(gh, "https://GitHub.com/acme/app/"),
            r("acme", "app")
        );
        assert_eq!(
            repo_of_origin(gh, "git@github.com:acme/app.git"),
            r("acme", "app")
        );
        assert_eq!(
            repo_of_origin(gh, "ssh://git@github.com/acme/app"),
            r("acme", "app")
        );
        assert_eq!(
            repo_of_origin(gh, "https://x@github.com/acme/app"),
            r("acme", "app")
        );
        assert_eq!(repo_of_origin(gh, "https://gitlab.com/acme/app"), None);
        assert_eq!(repo_of_origin(gh, "https://github.com/acme"), None);
        assert_eq!(repo_of_origin(gh, "https://github.com/a/b/c"), None);
        assert_eq!(repo_of_origin(gh, "/srv/git/app"), None);
        assert_eq!(repo_of_origin(gh, "file:///srv/app.git"), None);
        let local = "http://127.0.0.1:8123";
        assert_eq!(
            repo_of_origin(local, "http://127.0.0.1:8123/o/r.git"),
            r("o", "r")
        );
        assert_eq!(repo_of_origin(local, "http://127.0.0.1:9999/o/r.git"), None);
        let ghe = "https://git.example.com/code";
        assert_eq!(
            repo_of_origin(ghe, "https://git.example.com/code/o/r.git"),
            r("o", "r")
        );
        assert_eq!(repo_of_origin(ghe, "https://git.example.com/o/r.git"), None);
    }

    #[test]
    fn pull_request_urls() {
        let gh = "https://github.com";
        assert_eq!(
            parse_pull_url(gh, "https://github.com/acme/app/pull/42"),
            Ok((RepoId::parse("acme", "app").unwrap(), 42))
        );
        assert_eq!(
            parse_pull_url(gh, "https://github.com/acme/app/pull/42#discussion"),
            Ok((RepoId::parse("acme", "app").unwrap(), 42))
        );
        assert_eq!(
            parse_pull_url(gh, "https://gitlab.com/acme/app/pull/42"),
            Err(PullUrlError::OtherHost("gitlab.com".into()))
        );
        for bad in [
            "https://github.com/acme/app/issues/42",
            "https://github.com/acme/app/pull/0",
            "https://github.com/acme/app/pull/x",
            "https://github.com/acme/pull/4",
            "https://github.com/../app/pull/4",
            "nope",
        ] {
            assert!(parse_pull_url(gh, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn config_names_exactly_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let vault = Vault::in_state_dir(dir.path());
        let mut s = Settings::default();
        assert_eq!(
            Config::resolve(&s, &vault).unwrap_err(),
            Unavailable::Disabled
        );
        s.server.integrations.codehost.enabled = true;
        assert_eq!(
            Config::resolve(&s, &vault).unwrap_err(),
            Unavailable::MissingCredentials(vec![TOKEN_KEY.into()])
        );
        s.server.integrations.codehost.strategy = CodehostStrategy::App;
        assert_eq!(
            Config::resolve(&s, &vault).unwrap_err(),
            Unavailable::MissingCredentials(vec![
                "server.integrations.codehost.app_id".into(),
                APP_KEY_KEY.into()
            ])
        );
        s.server.integrations.codehost.app_id = Some(7);
        vault
            .set(
                APP_KEY_KEY,
                "pem",
                crate::settings::vault::SecretType::Environment,
            )
            .unwrap();
        let c = Config::resolve(&s, &vault).unwrap();
        assert!(matches!(c.credential, Credential::App { app_id: 7, .. }));
        assert!(!format!("{c:?}").contains("pem"));
    }
}
