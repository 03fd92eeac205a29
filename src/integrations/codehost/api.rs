//! The REST calls svc makes to the code host (GitHub's wire format: `Accept:
//! application/vnd.github+json`, bearer credentials, errors as `{message}`), each with the
//! credential of the repository it is about ([`super::auth`]): repositories, git refs,
//! pull requests (open, find, read, merge, close), a commit's check runs and statuses.
//!
//! Every call has a 10 s connect and 30 s overall timeout; a host error or timeout becomes
//! a [`HostError`] carrying the host's own message, never a panic or a hung thread.
//!
//! Owns: the request and answer shapes. Must not touch: runs, the store.

use super::auth::TokenCache;
use super::{Config, RepoId, Unavailable};
use serde_json::{json, Value};
use std::time::Duration;

/// Why a call to the code host did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// The integration is off or lacks credentials.
    #[error("{0}")]
    Unavailable(Unavailable),
    /// The host answered 404 (repository, branch or pull request unknown, or hidden from
    /// these credentials).
    #[error("the code host has no such resource: {0}")]
    NotFound(String),
    /// The host refused the request; `message` is its own words.
    #[error("the code host answered {status}: {message}")]
    Refused { status: u16, message: String },
    /// The host could not be reached, timed out or answered something unreadable.
    #[error("the code host could not be reached: {0}")]
    Unreachable(String),
    /// The credentials were refused even after a renewal, or cannot be used.
    #[error("the code host refused svc's credentials: {0}")]
    Credentials(String),
}

/// A blocking HTTP client with the code host's headers and timeouts.
#[derive(Clone)]
pub struct Http {
    agent: ureq::Agent,
    calls: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Default for Http {
    fn default() -> Self {
        Http::new(Duration::from_secs(30))
    }
}

/// Bodies larger than this are refused (a pull request with its diff stats is a few KiB).
const MAX_ANSWER_BYTES: u64 = 8 * 1024 * 1024;

impl Http {
    pub fn new(timeout: Duration) -> Http {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(10)))
            .timeout_global(Some(timeout))
            .user_agent(concat!("svc/", env!("CARGO_PKG_VERSION")))
            .build();
        Http {
            agent: ureq::Agent::new_with_config(config),
            calls: Default::default(),
        }
    }

    /// Requests sent so far (benchmarks: the board makes none).
    pub fn calls(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// One request with `bearer`; 2xx answers are JSON (`null` when empty).
    pub fn send(
        &self,
        method: &str,
        url: &str,
        bearer: &str,
        body: Option<&Value>,
    ) -> Result<Value, HostError> {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let auth = format!("Bearer {bearer}");
        let unreachable = |e: ureq::Error| HostError::Unreachable(format!("{method} {url}: {e}"));
        let req = ureq::http::Request::builder()
            .method(method)
            .uri(url)
            .header("Accept", "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28")
            .header("Authorization", &auth);
        let resp = match body {
            Some(b) => {
                let req = req
                    .header("Content-Type", "application/json")
                    .body(b.to_string())
                    .map_err(|e| HostError::Unreachable(format!("{method} {url}: {e}")))?;
                self.agent.run(req).map_err(unreachable)?
            }
            None => {
                let req = req
                    .body(())
                    .map_err(|e| HostError::Unreachable(format!("{method} {url}: {e}")))?;
                self.agent.run(req).map_err(unreachable)?
            }
        };
        let status = resp.status().as_u16();
        let (_, body) = resp.into_parts();
        let text = body
            .into_with_config()
            .limit(MAX_ANSWER_BYTES)
            .lossy_utf8(true)
            .read_to_string()
            .map_err(unreachable)?;
        if (200..300).contains(&status) {
            if text.trim().is_empty() {
                return Ok(Value::Null);
            }
            return serde_json::from_str(&text).map_err(|e| {
                HostError::Unreachable(format!("{method} {url}: the answer is not JSON: {e}"))
            });
        }
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| host_message(&v))
            .unwrap_or_else(|| first_line(&text));
        if status == 404 {
            return Err(HostError::NotFound(format!("{method} {url}: {message}")));
        }
        Err(HostError::Refused { status, message })
    }
}

/// The host's error text: `message`, plus each `errors[].message` it lists.
fn host_message(v: &Value) -> Option<String> {
    let mut m = v.get("message")?.as_str()?.to_string();
    if let Some(errs) = v.get("errors").and_then(Value::as_array) {
        let more: Vec<&str> = errs
            .iter()
            .filter_map(|e| e.get("message").and_then(Value::as_str))
            .collect();
        if !more.is_empty() {
            m = format!("{m} ({})", more.join("; "));
        }
    }
    Some(m)
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    if line.is_empty() {
        "no message".to_string()
    } else {
        line.chars().take(300).collect()
    }
}

/// Calls about repositories, with the credential of each.
pub struct Client<'a> {
    pub cfg: &'a Config,
    pub tokens: &'a TokenCache,
    pub http: &'a Http,
}

/// A repository as svc needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoInfo {
    pub default_branch: String,
    pub private: bool,
    pub pull: bool,
    pub push: bool,
    pub admin: bool,
}

/// A new pull request.
#[derive(Debug, Clone)]
pub struct NewPull<'a> {
    pub title: &'a str,
    pub body: &'a str,
    pub head: &'a str,
    pub base: &'a str,
    pub draft: bool,
}

/// How a merge went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    pub sha: Option<String>,
}

impl Client<'_> {
    /// `method path` about `repo`: on 401 the credential is renewed and the call retried
    /// once (an expired or revoked installation token).
    fn call(
        &self,
        repo: &RepoId,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, HostError> {
        let url = format!("{}{path}", self.cfg.api_url);
        let token = self.tokens.credential(self.http, self.cfg, repo)?;
        match self.http.send(method, &url, &token, body) {
            Err(HostError::Refused { status: 401, .. }) => {
                self.tokens.forget(self.cfg, repo);
                let token = self.tokens.credential(self.http, self.cfg, repo)?;
                match self.http.send(method, &url, &token, body) {
                    Err(HostError::Refused {
                        status: 401,
                        message,
                    }) => Err(HostError::Credentials(format!(
                        "{method} {url} was refused twice (401), after a fresh credential: {message}"
                    ))),
                    other => other,
                }
            }
            other => other,
        }
    }

    /// The token git pushes `repo` with (the same credential as its REST calls).
    pub fn git_token(&self, repo: &RepoId) -> Result<String, HostError> {
        self.tokens.credential(self.http, self.cfg, repo)
    }

    /// Drops a credential the host refused (a push answered 401/403).
    pub fn forget_token(&self, repo: &RepoId) {
        self.tokens.forget(self.cfg, repo);
    }

    pub fn repo(&self, repo: &RepoId) -> Result<RepoInfo, HostError> {
        let v = self.call(repo, "GET", &format!("/repos/{}", repo.slug()), None)?;
        let perm = |k: &str| {
            v.pointer(&format!("/permissions/{k}"))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        Ok(RepoInfo {
            default_branch: v
                .get("default_branch")
                .and_then(Value::as_str)
                .unwrap_or("main")
                .to_string(),
            private: v.get("private").and_then(Value::as_bool).unwrap_or(false),
            pull: perm("pull"),
            push: perm("push"),
            admin: perm("admin"),
        })
    }

    /// The commit branch `branch` points at, `None` when it does not exist.
    pub fn branch_head(&self, repo: &RepoId, branch: &str) -> Result<Option<String>, HostError> {
        let path = format!("/repos/{}/git/ref/heads/{branch}", repo.slug());
        match self.call(repo, "GET", &path, None) {
            Ok(v) => Ok(v
                .pointer("/object/sha")
                .and_then(Value::as_str)
                .map(str::to_string)),
            Err(HostError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Opens a pull request; the host's pull request object.
    pub fn create_pull(&self, repo: &RepoId, p: &NewPull<'_>) -> Result<Value, HostError> {
        let body = json!({"title": p.title, "body": p.body, "head": p.head, "base": p.base,
                          "draft": p.draft, "maintainer_can_modify": false});
        self.call(
            repo,
            "POST",
            &format!("/repos/{}/pulls", repo.slug()),
            Some(&body),
        )
    }

    /// The open pull request from branch `head` of `repo` itself, if any.
    pub fn open_pull_from(&self, repo: &RepoId, head: &str) -> Result<Option<Value>, HostError> {
        let q = form_urlencoded::Serializer::new(String::new())
            .append_pair("head", &format!("{}:{head}", repo.owner))
            .append_pair("state", "open")
            .finish();
        let v = self.call(
            repo,
            "GET",
            &format!("/repos/{}/pulls?{q}", repo.slug()),
            None,
        )?;
        Ok(v.as_array().and_then(|a| a.first()).cloned())
    }

    pub fn pull(&self, repo: &RepoId, number: u64) -> Result<Value, HostError> {
        self.call(
            repo,
            "GET",
            &format!("/repos/{}/pulls/{number}", repo.slug()),
            None,
        )
    }

    /// Merges with `method` (`merge`, `squash`, `rebase`), only while the head is `sha`
    /// when given; the host's refusal (405 not mergeable, 409 head moved) comes back as
    /// [`HostError::Refused`].
    pub fn merge(
        &self,
        repo: &RepoId,
        number: u64,
        method: &str,
        sha: Option<&str>,
    ) -> Result<Merged, HostError> {
        let mut body = json!({"merge_method": method});
        if let Some(sha) = sha {
            body["sha"] = json!(sha);
        }
        let v = self.call(
            repo,
            "PUT",
            &format!("/repos/{}/pulls/{number}/merge", repo.slug()),
            Some(&body),
        )?;
        if v.get("merged").and_then(Value::as_bool) == Some(false) {
            return Err(HostError::Refused {
                status: 200,
                message: host_message(&v).unwrap_or_else(|| "not merged".into()),
            });
        }
        Ok(Merged {
            sha: v.get("sha").and_then(Value::as_str).map(str::to_string),
        })
    }

    pub fn close(&self, repo: &RepoId, number: u64) -> Result<Value, HostError> {
        self.call(
            repo,
            "PATCH",
            &format!("/repos/{}/pulls/{number}", repo.slug()),
            Some(&json!({"state": "closed"})),
        )
    }

    /// Every check run of commit `sha` (up to 100).
    pub fn check_runs(&self, repo: &RepoId, sha: &str) -> Result<Vec<Value>, HostError> {
        let v = self.call(
            repo,
            "GET",
            &format!(
                "/repos/{}/commits/{sha}/check-runs?per_page=100",
                repo.slug()
            ),
            None,
        )?;
        Ok(v.get("check_runs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default())
    }

    /// The latest commit status of each context on `sha`.
    pub fn statuses(&self, repo: &RepoId, sha: &str) -> Result<Vec<Value>, HostError> {
        let v = self.call(
            repo,
            "GET",
            &format!("/repos/{}/commits/{sha}/status", repo.slug()),
            None,
        )?;
        Ok(v.get("statuses")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default())
    }
}
