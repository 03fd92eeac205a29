//! A scripted code host for tests: a `tiny_http` server on a loopback port speaking GitHub's
//! REST wire format under `/api/v3` (repositories, git refs, pull requests, merges, check
//! runs, commit statuses, issue comments, app installations and their access tokens, with
//! the app JWT verified against the app's public key), in front of real bare git
//! repositories it serves over smart HTTP through `git http-backend` (CGI), so svc's real
//! push runs over HTTP with real credentials. Every request is recorded (method, path, the
//! credential it carried), its latency can be set, and it can be told to refuse merges or
//! revoke the tokens it issued.
//!
//! Also: signing and sending webhook deliveries to svc as the host would.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::signature::Verifier;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The test-only app key (`svc::internal::integrations::codehost::app` tests use it too).
pub const APP_KEY_PEM: &str = include_str!("codehost_app_key.pem");
pub const APP_ID: u64 = 4242;
const INSTALLATION_ID: u64 = 777;

/// One request the host received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// The `Authorization` header as sent.
    pub authorization: Option<String>,
    pub at: Instant,
    /// When it arrived, on the wall clock (to compare with event timestamps).
    pub at_ms: i64,
    /// How long the host took to answer it (its latency setting included).
    pub took: Duration,
}

/// A pull request the host holds.
#[derive(Debug, Clone)]
pub struct Pull {
    pub repo: String,
    pub number: u64,
    pub title: String,
    pub body: String,
    pub head: String,
    pub base: String,
    pub draft: bool,
    pub state: String,
    pub merged: bool,
    pub merge_method: Option<String>,
    pub comments: u64,
    pub created_at: String,
}

#[derive(Default)]
struct State {
    /// The personal access token it accepts.
    pat: Option<String>,
    /// Installation tokens it issued: token → (repository, expires at, unix s).
    installation_tokens: HashMap<String, (String, u64)>,
    /// Lifetime of the installation tokens it issues.
    token_ttl_secs: u64,
    minted: u64,
    /// Tokens it now refuses (as if revoked or expired early).
    revoked: Vec<String>,
    repos: HashMap<String, Value>,
    pulls: Vec<Pull>,
    check_runs: HashMap<String, Vec<Value>>,
    statuses: HashMap<String, Vec<Value>>,
    seen: Vec<Seen>,
    latency: Duration,
    refuse_merge: Option<String>,
    /// Pushes are answered 403 with this message.
    refuse_push: Option<String>,
    /// Every installation token is refused (the host revoked the app's access).
    reject_tokens: bool,
    next_check_id: u64,
}

/// The scripted host (stops when dropped).
pub struct CodeHost {
    /// `http://127.0.0.1:<port>`: the web URL (pull request pages, git remotes).
    pub url: String,
    /// `<url>/api/v3`: the REST API.
    pub api_url: String,
    state: Arc<Mutex<State>>,
    root: tempfile::TempDir,
    server: Arc<tiny_http::Server>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Drop for CodeHost {
    fn drop(&mut self) {
        // Each call releases one thread blocked in `recv`.
        for _ in 0..self.threads.len() {
            self.server.unblock();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn git_ok(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn now_iso() -> String {
    svc::internal::base::clock::now()
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn iso_of(secs: u64) -> String {
    let mut s = svc::internal::base::clock::format_millis(secs as i64 * 1000);
    // `2026-01-01T00:00:00.000Z` -> `2026-01-01T00:00:00Z`, as the host writes it.
    if let Some(dot) = s.find('.') {
        s.replace_range(dot..s.len() - 1, "");
    }
    s
}

impl CodeHost {
    /// A host holding `owner/name` with `main` = `files` (path, content), accepting the
    /// personal access token `pat`, and the app's installation tokens.
    pub fn start(pat: &str, owner: &str, name: &str, files: &[(&str, &str)]) -> CodeHost {
        let root = tempfile::tempdir().expect("tempdir");
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind"));
        let port = server.server_addr().to_ip().expect("ip").port();
        let url = format!("http://127.0.0.1:{port}");
        let state = Arc::new(Mutex::new(State {
            pat: Some(pat.to_string()),
            token_ttl_secs: 3600,
            next_check_id: 1000,
            ..State::default()
        }));
        let mut host = CodeHost {
            api_url: format!("{url}/api/v3"),
            url,
            state,
            root,
            server,
            threads: Vec::new(),
        };
        host.add_repo(owner, name, files);
        for _ in 0..8 {
            let server = Arc::clone(&host.server);
            let state = Arc::clone(&host.state);
            let root = host.root.path().to_path_buf();
            let base = host.url.clone();
            host.threads.push(std::thread::spawn(move || {
                while let Ok(req) = server.recv() {
                    handle(req, &state, &root, &base);
                }
            }));
        }
        host
    }

    /// Adds a repository with one commit on `main`.
    pub fn add_repo(&self, owner: &str, name: &str, files: &[(&str, &str)]) {
        let dir = self.root.path().join(owner);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let work = self.root.path().join(format!("seed-{owner}-{name}"));
        std::fs::create_dir_all(&work).expect("mkdir");
        git(&work, &["init", "-q", "-b", "main"]);
        for (p, c) in files {
            let f = work.join(p);
            if let Some(parent) = f.parent() {
                std::fs::create_dir_all(parent).expect("mkdir");
            }
            std::fs::write(f, c).expect("write");
        }
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-qm", "initial"]);
        let bare = dir.join(format!("{name}.git"));
        git(
            self.root.path(),
            &[
                "clone",
                "-q",
                "--bare",
                work.to_str().unwrap(),
                bare.to_str().unwrap(),
            ],
        );
        let slug = format!("{owner}/{name}");
        self.state.lock().unwrap().repos.insert(
            slug.clone(),
            json!({"name": name, "full_name": slug, "owner": {"login": owner}, "private": true,
                   "default_branch": "main",
                   "permissions": {"admin": false, "push": true, "pull": true}}),
        );
    }

    /// The origin URL svc clones (no credential in it).
    pub fn origin(&self, owner: &str, name: &str) -> String {
        format!("{}/{owner}/{name}.git", self.url)
    }

    /// The bare repository of `owner/name` on disk.
    pub fn bare(&self, owner: &str, name: &str) -> PathBuf {
        self.root.path().join(owner).join(format!("{name}.git"))
    }

    /// The commit `branch` points at, if it exists.
    pub fn branch(&self, owner: &str, name: &str, branch: &str) -> Option<String> {
        git_ok(
            &self.bare(owner, name),
            &[
                "rev-parse",
                "--verify",
                "-q",
                &format!("refs/heads/{branch}"),
            ],
        )
    }

    /// A file's content at `rev`.
    pub fn show(&self, owner: &str, name: &str, rev: &str, path: &str) -> Option<String> {
        git_ok(&self.bare(owner, name), &["show", &format!("{rev}:{path}")])
    }

    /// Marks pull request `number` draft or ready, as a person would on the host.
    pub fn set_draft(&self, number: u64, draft: bool) {
        let mut st = self.state.lock().unwrap();
        if let Some(p) = st.pulls.iter_mut().find(|p| p.number == number) {
            p.draft = draft;
        }
    }

    /// Accepts `pat` as the personal access token from now on (`None`: none).
    pub fn set_pat(&self, pat: Option<&str>) {
        self.state.lock().unwrap().pat = pat.map(str::to_string);
    }

    pub fn set_latency(&self, d: Duration) {
        self.state.lock().unwrap().latency = d;
    }

    pub fn refuse_merges(&self, message: Option<&str>) {
        self.state.lock().unwrap().refuse_merge = message.map(str::to_string);
    }

    pub fn refuse_pushes(&self, message: Option<&str>) {
        self.state.lock().unwrap().refuse_push = message.map(str::to_string);
    }

    /// Refuses every installation token, those to come too.
    pub fn reject_tokens(&self, on: bool) {
        self.state.lock().unwrap().reject_tokens = on;
    }

    pub fn set_token_ttl(&self, secs: u64) {
        self.state.lock().unwrap().token_ttl_secs = secs;
    }

    /// Refuses every token issued so far (as if they expired early).
    pub fn revoke_installation_tokens(&self) {
        let mut st = self.state.lock().unwrap();
        let all: Vec<String> = st.installation_tokens.keys().cloned().collect();
        st.revoked.extend(all);
    }

    /// Installation tokens issued so far.
    pub fn tokens_minted(&self) -> u64 {
        self.state.lock().unwrap().minted
    }

    /// Every token the host issued (to look for them where they must not be).
    pub fn issued_tokens(&self) -> Vec<String> {
        self.state
            .lock()
            .unwrap()
            .installation_tokens
            .keys()
            .cloned()
            .collect()
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// REST requests received (the git transport left out).
    pub fn api_calls(&self) -> usize {
        self.requests()
            .iter()
            .filter(|s| s.path.starts_with("/api/v3/"))
            .count()
    }

    pub fn pulls(&self) -> Vec<Pull> {
        self.state.lock().unwrap().pulls.clone()
    }

    pub fn pull(&self, number: u64) -> Option<Pull> {
        self.pulls().into_iter().find(|p| p.number == number)
    }

    /// Records a check run on `sha` (as CI would, through the API); the `check_run`
    /// webhook payload to deliver.
    pub fn check_run(
        &self,
        owner: &str,
        name: &str,
        sha: &str,
        check: &str,
        conclusion: Option<&str>,
        summary: &str,
    ) -> Value {
        let mut st = self.state.lock().unwrap();
        st.next_check_id += 1;
        let id = st.next_check_id;
        let numbers: Vec<Value> = st
            .pulls
            .iter()
            .filter(|p| p.repo == format!("{owner}/{name}"))
            .map(|p| json!({"number": p.number}))
            .collect();
        let run = json!({
            "id": id, "name": check, "head_sha": sha,
            "status": if conclusion.is_some() { "completed" } else { "in_progress" },
            "conclusion": conclusion,
            "started_at": "2026-01-01T00:00:00Z",
            "completed_at": conclusion.map(|_| "2026-01-01T00:02:05Z"),
            "output": {"title": format!("{check}: {}", conclusion.unwrap_or("running")), "summary": summary},
            "details_url": format!("https://ci.example.com/{id}"),
            "pull_requests": numbers,
        });
        let list = st.check_runs.entry(sha.to_string()).or_default();
        list.retain(|r| r["name"] != check);
        list.push(run.clone());
        let repo = st
            .repos
            .get(&format!("{owner}/{name}"))
            .cloned()
            .unwrap_or(Value::Null);
        json!({"action": if conclusion.is_some() { "completed" } else { "created" },
               "check_run": run, "repository": repo})
    }

    /// Records a commit status; the `status` webhook payload.
    pub fn status(&self, owner: &str, name: &str, sha: &str, context: &str, state: &str) -> Value {
        let mut st = self.state.lock().unwrap();
        let s = json!({"context": context, "state": state, "description": format!("{context} is {state}"),
                       "target_url": null, "created_at": "2026-01-01T00:00:00Z",
                       "updated_at": "2026-01-01T00:00:30Z"});
        let list = st.statuses.entry(sha.to_string()).or_default();
        list.retain(|x| x["context"] != context);
        list.push(s.clone());
        let repo = st
            .repos
            .get(&format!("{owner}/{name}"))
            .cloned()
            .unwrap_or(Value::Null);
        let mut p = s;
        p["sha"] = json!(sha);
        p["repository"] = repo;
        p
    }

    /// The `pull_request` webhook payload for pull request `number` as it is now.
    pub fn pull_request_event(&self, action: &str, number: u64) -> Value {
        let st = self.state.lock().unwrap();
        let p = st.pulls.iter().find(|p| p.number == number).cloned();
        let repo_slug = p.as_ref().map(|p| p.repo.clone()).unwrap_or_default();
        let repo = st.repos.get(&repo_slug).cloned().unwrap_or(Value::Null);
        drop(st);
        let pr = p.map(|p| self.pull_json(&p)).unwrap_or(Value::Null);
        json!({"action": action, "number": number, "pull_request": pr, "repository": repo})
    }

    fn pull_json(&self, p: &Pull) -> Value {
        pull_json(p, self.root.path(), &self.url)
    }
}

fn pull_json(p: &Pull, root: &Path, base_url: &str) -> Value {
    let (owner, name) = p.repo.split_once('/').unwrap_or(("", ""));
    let bare = root.join(owner).join(format!("{name}.git"));
    let head_sha = git_ok(
        &bare,
        &[
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{}", p.head),
        ],
    )
    .unwrap_or_default();
    let (mut adds, mut dels, mut files) = (0, 0, 0);
    if let Some(stat) = git_ok(
        &bare,
        &[
            "diff",
            "--numstat",
            &format!("refs/heads/{}...{head_sha}", p.base),
        ],
    ) {
        for line in stat.lines() {
            let mut parts = line.split_whitespace();
            adds += parts
                .next()
                .and_then(|a| a.parse::<u64>().ok())
                .unwrap_or(0);
            dels += parts
                .next()
                .and_then(|d| d.parse::<u64>().ok())
                .unwrap_or(0);
            files += 1;
        }
    }
    json!({
        "number": p.number, "title": p.title, "body": p.body, "state": p.state,
        "draft": p.draft, "merged": p.merged,
        "merged_at": if p.merged { json!("2026-01-01T01:00:00Z") } else { Value::Null },
        "mergeable": !p.merged && p.state == "open",
        "html_url": format!("{base_url}/{}/pull/{}", p.repo, p.number),
        "user": {"login": "svc-bot"},
        "head": {"ref": p.head, "sha": head_sha},
        "base": {"ref": p.base},
        "additions": adds, "deletions": dels, "changed_files": files,
        "comments": p.comments, "review_comments": 0,
        "created_at": p.created_at, "updated_at": p.created_at,
    })
}

/// The headers a delivery carries: event, delivery id and `X-Hub-Signature-256`.
pub fn signed_headers(
    secret: &str,
    event: &str,
    delivery: &str,
    body: &[u8],
) -> Vec<(String, String)> {
    vec![
        ("X-GitHub-Event".into(), event.into()),
        ("X-GitHub-Delivery".into(), delivery.into()),
        (
            "X-Hub-Signature-256".into(),
            svc::internal::integrations::webhooks::sign(secret.as_bytes(), body),
        ),
        ("Content-Type".into(), "application/json".into()),
    ]
}

fn respond(req: tiny_http::Request, status: u16, body: &Value) {
    let h = tiny_http::Header::from_bytes("Content-Type", "application/json").expect("header");
    let _ = req.respond(
        tiny_http::Response::from_string(body.to_string())
            .with_status_code(status)
            .with_header(h),
    );
}

fn header(req: &tiny_http::Request, name: &str) -> Option<String> {
    req.headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str().to_string())
}

/// Which repository a bearer or basic credential may act on: `Some("*")` for the
/// personal access token, `Some(repo)` for an installation token.
fn token_scope(st: &State, token: &str) -> Option<String> {
    if st.revoked.iter().any(|t| t == token) {
        return None;
    }
    if st.pat.as_deref() == Some(token) {
        return Some("*".into());
    }
    if st.reject_tokens {
        return None;
    }
    let (repo, exp) = st.installation_tokens.get(token)?;
    (*exp > unix_now()).then(|| repo.clone())
}

fn allowed(st: &State, token: Option<&str>, repo: &str) -> bool {
    match token.and_then(|t| token_scope(st, t)) {
        Some(s) => s == "*" || s.eq_ignore_ascii_case(repo),
        None => false,
    }
}

fn handle(mut req: tiny_http::Request, state: &Arc<Mutex<State>>, root: &Path, base_url: &str) {
    let url = req.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((url.as_str(), ""));
    let path = path.to_string();
    let query = query.to_string();
    let method = req.method().as_str().to_string();
    let authorization = header(&req, "authorization");
    let began = Instant::now();
    let at_ms =
        svc::internal::base::clock::parse_ts(&svc::internal::base::clock::now()).unwrap_or(0);
    let (latency, index) = {
        let mut st = state.lock().unwrap();
        st.seen.push(Seen {
            method: method.clone(),
            path: path.clone(),
            authorization: authorization.clone(),
            at: began,
            at_ms,
            took: Duration::ZERO,
        });
        (st.latency, st.seen.len() - 1)
    };
    let finished = |state: &Arc<Mutex<State>>| {
        if let Some(s) = state.lock().unwrap().seen.get_mut(index) {
            s.took = began.elapsed();
        }
    };
    if let Some(rest) = path.strip_prefix("/api/v3") {
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        let mut body = Vec::new();
        let _ = req.as_reader().read_to_end(&mut body);
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let (status, answer) = api(
            state,
            root,
            base_url,
            &method,
            rest,
            &query,
            authorization.as_deref(),
            &body,
        );
        finished(state);
        respond(req, status, &answer);
        return;
    }
    if path.contains(".git/") {
        git_http(
            req,
            state,
            root,
            &method,
            &path,
            &query,
            authorization.as_deref(),
        );
        finished(state);
        return;
    }
    respond(req, 404, &json!({"message": "Not Found"}));
}

fn bearer(auth: Option<&str>) -> Option<&str> {
    auth?.strip_prefix("Bearer ").map(str::trim)
}

/// Verifies an app JWT (RS256 under the app key, iss = the app id, not expired).
fn app_jwt_ok(auth: Option<&str>) -> bool {
    let Some(jwt) = bearer(auth) else {
        return false;
    };
    let parts: Vec<&str> = jwt.split('.').collect();
    if parts.len() != 3 {
        return false;
    }
    let key = rsa::PrivateKey::from_pkcs1_pem(APP_KEY_PEM.trim()).expect("test key");
    let vk = rsa::pkcs1v15::VerifyingKey::<rsa::sha2::Sha256>::new(key.to_public_key());
    let Ok(sig_bytes) = URL_SAFE_NO_PAD.decode(parts[2]) else {
        return false;
    };
    let Ok(sig) = rsa::pkcs1v15::Signature::try_from(sig_bytes.as_slice()) else {
        return false;
    };
    if vk
        .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &sig)
        .is_err()
    {
        return false;
    }
    let Ok(claims) = URL_SAFE_NO_PAD.decode(parts[1]) else {
        return false;
    };
    let Ok(claims) = serde_json::from_slice::<Value>(&claims) else {
        return false;
    };
    claims["iss"].as_str().and_then(|s| s.parse::<u64>().ok()) == Some(APP_ID)
        && claims["exp"].as_u64().is_some_and(|e| e > unix_now())
        && claims["iat"].as_u64().is_some_and(|i| i <= unix_now())
}

#[allow(clippy::too_many_arguments)]
fn api(
    state: &Arc<Mutex<State>>,
    root: &Path,
    base_url: &str,
    method: &str,
    path: &str,
    query: &str,
    auth: Option<&str>,
    body: &Value,
) -> (u16, Value) {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let bad_creds = (
        401,
        json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}),
    );
    let not_found = (404, json!({"message": "Not Found"}));
    // App endpoints: the JWT.
    if let ["app", "installations", id, "access_tokens"] = parts.as_slice() {
        if method != "POST" || !app_jwt_ok(auth) {
            return bad_creds;
        }
        if *id != INSTALLATION_ID.to_string() {
            return not_found;
        }
        let Some(repo) = body["repositories"][0].as_str() else {
            return (422, json!({"message": "repositories is required"}));
        };
        let mut st = state.lock().unwrap();
        let owner = st
            .repos
            .keys()
            .find(|k| k.ends_with(&format!("/{repo}")))
            .cloned();
        let Some(full) = owner else { return not_found };
        st.minted += 1;
        let token = format!("ghs_{:032}", st.minted * 7919 + unix_now());
        let exp = unix_now() + st.token_ttl_secs;
        st.installation_tokens.insert(token.clone(), (full, exp));
        return (
            201,
            json!({"token": token, "expires_at": iso_of(exp), "permissions": {"contents": "write"}}),
        );
    }
    let ["repos", owner, name, rest @ ..] = parts.as_slice() else {
        return not_found;
    };
    let slug = format!("{owner}/{name}");
    if rest == ["installation"] {
        if !app_jwt_ok(auth) {
            return bad_creds;
        }
        let known = state.lock().unwrap().repos.contains_key(&slug);
        return if known {
            (200, json!({"id": INSTALLATION_ID, "app_id": APP_ID}))
        } else {
            not_found
        };
    }
    let token = bearer(auth);
    {
        let st = state.lock().unwrap();
        if token.and_then(|t| token_scope(&st, t)).is_none() {
            return bad_creds;
        }
        if !st.repos.contains_key(&slug) || !allowed(&st, token, &slug) {
            return not_found;
        }
    }
    let bare = root.join(owner).join(format!("{name}.git"));
    match (method, rest) {
        ("GET", []) => (200, state.lock().unwrap().repos[&slug].clone()),
        ("GET", ["git", "ref", "heads", branch @ ..]) => {
            let branch = branch.join("/");
            match git_ok(
                &bare,
                &[
                    "rev-parse",
                    "--verify",
                    "-q",
                    &format!("refs/heads/{branch}"),
                ],
            ) {
                Some(sha) => (
                    200,
                    json!({"ref": format!("refs/heads/{branch}"), "object": {"sha": sha, "type": "commit"}}),
                ),
                None => not_found,
            }
        }
        ("GET", ["pulls"]) => {
            let q: HashMap<String, String> = form_urlencoded::parse(query.as_bytes())
                .into_owned()
                .collect();
            let st = state.lock().unwrap();
            let list: Vec<Value> = st
                .pulls
                .iter()
                .filter(|p| p.repo == slug)
                .filter(|p| q.get("state").is_none_or(|s| s == "all" || *s == p.state))
                .filter(|p| {
                    q.get("head")
                        .is_none_or(|h| *h == format!("{owner}:{}", p.head))
                })
                .map(|p| pull_json(p, root, base_url))
                .collect();
            (200, json!(list))
        }
        ("POST", ["pulls"]) => {
            let s = |k: &str| body[k].as_str().unwrap_or("").to_string();
            let (head, base) = (s("head"), s("base"));
            let head_sha = git_ok(
                &bare,
                &["rev-parse", "--verify", "-q", &format!("refs/heads/{head}")],
            );
            let base_sha = git_ok(
                &bare,
                &["rev-parse", "--verify", "-q", &format!("refs/heads/{base}")],
            );
            let (Some(h), Some(b)) = (head_sha, base_sha) else {
                return (
                    422,
                    json!({"message": "Validation Failed", "errors": [{"message": "head or base does not exist"}]}),
                );
            };
            if h == b {
                return (
                    422,
                    json!({"message": "Validation Failed", "errors": [{"message": format!("No commits between {base} and {head}")}]}),
                );
            }
            let mut st = state.lock().unwrap();
            if st
                .pulls
                .iter()
                .any(|p| p.repo == slug && p.head == head && p.state == "open")
            {
                return (
                    422,
                    json!({"message": "Validation Failed", "errors": [{"message": format!("A pull request already exists for {owner}:{head}.")}]}),
                );
            }
            let p = Pull {
                repo: slug.clone(),
                number: st.pulls.len() as u64 + 1,
                title: s("title"),
                body: s("body"),
                head,
                base,
                draft: body["draft"].as_bool().unwrap_or(false),
                state: "open".into(),
                merged: false,
                merge_method: None,
                comments: 0,
                created_at: now_iso(),
            };
            st.pulls.push(p.clone());
            drop(st);
            (201, pull_json(&p, root, base_url))
        }
        ("GET", ["pulls", n]) | ("PATCH", ["pulls", n]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let mut st = state.lock().unwrap();
            let Some(p) = st
                .pulls
                .iter_mut()
                .find(|p| p.repo == slug && p.number == n)
            else {
                return not_found;
            };
            if method == "PATCH" {
                if let Some(s) = body["state"].as_str() {
                    p.state = s.to_string();
                }
            }
            let p = p.clone();
            drop(st);
            (200, pull_json(&p, root, base_url))
        }
        ("PUT", ["pulls", n, "merge"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let mut st = state.lock().unwrap();
            if let Some(m) = st.refuse_merge.clone() {
                return (405, json!({"message": m}));
            }
            let Some(p) = st
                .pulls
                .iter_mut()
                .find(|p| p.repo == slug && p.number == n)
            else {
                return not_found;
            };
            if p.state != "open" || p.merged {
                return (405, json!({"message": "Pull Request is not mergeable"}));
            }
            if p.draft {
                return (405, json!({"message": "Pull Request is still a draft"}));
            }
            let Some(head) = git_ok(&bare, &["rev-parse", &format!("refs/heads/{}", p.head)])
            else {
                return (422, json!({"message": "head branch is gone"}));
            };
            if body["sha"].as_str().is_some_and(|want| want != head) {
                return (
                    409,
                    json!({"message": "Head branch was modified. Review and try the merge again."}),
                );
            }
            git_ok(
                &bare,
                &["update-ref", &format!("refs/heads/{}", p.base), &head],
            );
            p.merged = true;
            p.state = "closed".into();
            p.merge_method = body["merge_method"].as_str().map(str::to_string);
            (
                200,
                json!({"sha": head, "merged": true, "message": "Pull Request successfully merged"}),
            )
        }
        ("GET", ["commits", sha, "check-runs"]) => {
            let st = state.lock().unwrap();
            let runs = st.check_runs.get(*sha).cloned().unwrap_or_default();
            (200, json!({"total_count": runs.len(), "check_runs": runs}))
        }
        ("GET", ["commits", sha, "status"]) => {
            let st = state.lock().unwrap();
            let list = st.statuses.get(*sha).cloned().unwrap_or_default();
            let combined = if list
                .iter()
                .any(|s| s["state"] == "failure" || s["state"] == "error")
            {
                "failure"
            } else if list.iter().any(|s| s["state"] == "pending") || list.is_empty() {
                "pending"
            } else {
                "success"
            };
            (
                200,
                json!({"state": combined, "sha": sha, "statuses": list, "total_count": list.len()}),
            )
        }
        ("POST", ["issues", n, "comments"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let mut st = state.lock().unwrap();
            let Some(p) = st
                .pulls
                .iter_mut()
                .find(|p| p.repo == slug && p.number == n)
            else {
                return not_found;
            };
            p.comments += 1;
            (201, json!({"id": p.comments, "body": body["body"]}))
        }
        _ => not_found,
    }
}

/// Smart HTTP through `git http-backend`: the credential is checked as the host would.
fn git_http(
    mut req: tiny_http::Request,
    state: &Arc<Mutex<State>>,
    root: &Path,
    method: &str,
    path: &str,
    query: &str,
    auth: Option<&str>,
) {
    let repo = path
        .trim_start_matches('/')
        .split(".git/")
        .next()
        .unwrap_or("")
        .to_string();
    let token = auth
        .and_then(|a| a.strip_prefix("Basic "))
        .and_then(|b| STANDARD.decode(b.trim()).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.split_once(':').map(|(_, p)| p.to_string()));
    let (ok, refused) = {
        let st = state.lock().unwrap();
        (
            allowed(&st, token.as_deref(), &repo),
            st.refuse_push.clone(),
        )
    };
    if let (true, Some(m), true) = (
        ok,
        refused,
        path.ends_with("git-receive-pack") || query.contains("git-receive-pack"),
    ) {
        let _ = req.respond(tiny_http::Response::from_string(m).with_status_code(403));
        return;
    }
    if !ok {
        let h =
            tiny_http::Header::from_bytes("WWW-Authenticate", "Basic realm=\"git\"").expect("h");
        let _ = req.respond(
            tiny_http::Response::from_string("Authentication failed")
                .with_status_code(401)
                .with_header(h),
        );
        return;
    }
    let mut body = Vec::new();
    let _ = req.as_reader().read_to_end(&mut body);
    let content_type = header(&req, "content-type").unwrap_or_default();
    let encoding = header(&req, "content-encoding").unwrap_or_default();
    let mut child = Command::new("git")
        .arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "http.receivepack")
        .env("GIT_CONFIG_VALUE_0", "true")
        .env("REMOTE_USER", "x-access-token")
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("REQUEST_METHOD", method)
        .env("CONTENT_TYPE", content_type)
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("HTTP_CONTENT_ENCODING", encoding)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("git http-backend");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let mut out = Vec::new();
    let _ = child.stdout.take().expect("stdout").read_to_end(&mut out);
    let _ = writer.join();
    let _ = child.wait();
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| (p, 4))
        .or_else(|| out.windows(2).position(|w| w == b"\n\n").map(|p| (p, 2)));
    let Some((at, sep)) = split else {
        let _ =
            req.respond(tiny_http::Response::from_string("bad CGI answer").with_status_code(500));
        return;
    };
    let head = String::from_utf8_lossy(&out[..at]).to_string();
    let payload = out[at + sep..].to_vec();
    let mut status = 200;
    let mut headers = Vec::new();
    for line in head.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k.eq_ignore_ascii_case("status") {
            status = v
                .split_whitespace()
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(200);
        } else if let Ok(h) = tiny_http::Header::from_bytes(k, v) {
            headers.push(h);
        }
    }
    let mut resp = tiny_http::Response::from_data(payload).with_status_code(status);
    for h in headers {
        resp.add_header(h);
    }
    let _ = req.respond(resp);
}
