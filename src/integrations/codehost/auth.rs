//! The credential for a repository: the personal access token, or (strategy `app`) an
//! installation token for that one repository, minted with the app's JWT
//! (`GET /repos/{owner}/{repo}/installation`, then `POST /app/installations/{id}/
//! access_tokens {"repositories": [repo]}`) and cached until five minutes before it
//! expires. A request the host answers 401 drops the cached token and is retried once with
//! a fresh one ([`super::api::Client`]); a second 401 is a clear error.
//!
//! Owns: the token cache. Must not touch: anything but these two calls.

use super::api::{HostError, Http};
use super::app::AppKey;
use super::{Config, Credential, RepoId};
use parking_lot::Mutex;
use serde_json::json;
use std::collections::HashMap;

/// An installation token is renewed this long before it expires.
pub const RENEW_BEFORE_SECS: u64 = 300;

#[derive(Clone)]
struct Cached {
    token: String,
    expires_at: u64,
}

/// Installation tokens per (app, repository), shared by every request thread.
#[derive(Default)]
pub struct TokenCache {
    tokens: Mutex<HashMap<(u64, RepoId), Cached>>,
    minted: std::sync::atomic::AtomicU64,
}

pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl TokenCache {
    /// How many installation tokens were minted (tests, benchmarks).
    pub fn minted(&self) -> u64 {
        self.minted.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The bearer credential for calls about `repo`.
    pub fn credential(
        &self,
        http: &Http,
        cfg: &Config,
        repo: &RepoId,
    ) -> Result<String, HostError> {
        match &cfg.credential {
            Credential::Token(t) => Ok(t.clone()),
            Credential::App {
                app_id,
                private_key_pem,
            } => {
                let key = (*app_id, repo.clone());
                if let Some(c) = self.tokens.lock().get(&key) {
                    if c.expires_at > unix_now() + RENEW_BEFORE_SECS {
                        return Ok(c.token.clone());
                    }
                }
                let fresh = self.mint(http, cfg, *app_id, private_key_pem, repo)?;
                let token = fresh.token.clone();
                self.tokens.lock().insert(key, fresh);
                Ok(token)
            }
        }
    }

    /// Drops the cached token of `repo` (the host refused it).
    pub fn forget(&self, cfg: &Config, repo: &RepoId) {
        if let Credential::App { app_id, .. } = &cfg.credential {
            self.tokens.lock().remove(&(*app_id, repo.clone()));
        }
    }

    fn mint(
        &self,
        http: &Http,
        cfg: &Config,
        app_id: u64,
        pem: &str,
        repo: &RepoId,
    ) -> Result<Cached, HostError> {
        let key = AppKey::from_pem(pem).map_err(|e| HostError::Credentials(e.to_string()))?;
        let jwt = key
            .jwt(app_id, unix_now())
            .map_err(|e| HostError::Credentials(e.to_string()))?;
        let url = format!("{}/repos/{}/installation", cfg.api_url, repo.slug());
        let inst = match http.send("GET", &url, &jwt, None) {
            Ok(v) => v,
            Err(HostError::NotFound(_)) => {
                return Err(HostError::Credentials(format!(
                    "the app (id {app_id}) is not installed on {repo}"
                )))
            }
            Err(HostError::Refused {
                status: 401,
                message,
            }) => {
                return Err(HostError::Credentials(format!(
                    "the code host refused the app's JWT (app id {app_id}): {message}"
                )))
            }
            Err(e) => return Err(e),
        };
        let Some(id) = inst.get("id").and_then(serde_json::Value::as_u64) else {
            return Err(HostError::Unreachable(format!(
                "GET {url} answered without an installation id"
            )));
        };
        let url = format!("{}/app/installations/{id}/access_tokens", cfg.api_url);
        let body = json!({"repositories": [repo.name]});
        let t = http.send("POST", &url, &jwt, Some(&body))?;
        let token = t.get("token").and_then(serde_json::Value::as_str);
        let expires_at = t
            .get("expires_at")
            .and_then(serde_json::Value::as_str)
            .and_then(parse_iso_secs);
        match (token, expires_at) {
            (Some(token), Some(expires_at)) if !token.is_empty() => {
                self.minted
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(Cached {
                    token: token.to_string(),
                    expires_at,
                })
            }
            _ => Err(HostError::Unreachable(format!(
                "POST {url} answered without a token and its expiry"
            ))),
        }
    }
}

/// Unix seconds of the host's `expires_at` (`2026-01-01T00:00:00Z`).
pub fn parse_iso_secs(ts: &str) -> Option<u64> {
    u64::try_from(crate::base::clock::parse_ts(ts)? / 1000).ok()
}
