//! Install mode (SPEC 1.10, api.md 7): when `settings.toml` does not exist and `--dev` is not
//! given, the server binds (TCP `127.0.0.1:32276` unless `--listen` says otherwise), prints
//! the install URL `<base>/install?token=<t>` and the one-time install token (32 random
//! bytes, base64url), and serves only the wizard: `GET /health` says
//! `{"status":"ok","mode":"install"}`, `/api/*` is 404, and every `/install*` request needs
//! the token (`Authorization: Bearer`, `?token=` or `X-Install-Token`), else 401.
//!
//! Steps (each an HTML page and a JSON API, see [`steps`]): server URL and sign-in methods,
//! object store (local disk or an S3-compatible bucket, checked with a signed request,
//! [`s3`]), LLM provider (key checked with one real call; skippable), code-host OAuth app
//! (skippable), finish ([`finish`]: settings written atomically, secrets only in the vault,
//! 202, then the process exits 0).
//!
//! Owns: the wizard's state, pages and API. Must not touch: the run store or the configured
//! server's routes; it reuses the server's HTTP plumbing ([`crate::server::http`]) only.

pub mod finish;
pub mod pages;
pub mod s3;
pub mod steps;

use crate::server::error::ApiError;
use crate::server::http::{HttpOptions, HttpServer, Incoming, Listen, Reply};
use crate::settings::AuthMethod;
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The listener install mode uses when none is given.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:32276";

#[derive(Debug, Clone, PartialEq)]
pub struct ServerStep {
    pub canonical_url: String,
    pub auth_methods: Vec<AuthMethod>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ObjectStoreStep {
    Local {
        root: PathBuf,
    },
    S3 {
        bucket: String,
        region: String,
        endpoint: Option<String>,
        path_style: bool,
        access_key_id: String,
        secret_access_key: String,
    },
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmKey {
    pub provider: String,
    pub api_key: String,
    #[serde(default)]
    pub base_url: Option<String>,
}

/// The code-host step: sign-in (the OAuth app), the integration (pushes, pull requests,
/// checks, webhooks), or both.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodehostStep {
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub client_secret: Option<String>,
    #[serde(default)]
    pub allowed_usernames: Vec<String>,
    #[serde(default)]
    pub web_url: Option<String>,
    #[serde(default)]
    pub api_url: Option<String>,
    #[serde(default)]
    pub integration: Option<IntegrationStep>,
}

impl CodehostStep {
    /// The OAuth app was given (client id and secret).
    pub fn has_sign_in(&self) -> bool {
        self.client_id.is_some()
    }
}

/// `[server.integrations.codehost]` and its vault entries.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntegrationStep {
    pub strategy: crate::settings::CodehostStrategy,
    /// Strategy `token`: a personal access token.
    #[serde(default)]
    pub token: Option<String>,
    /// Strategy `app`: the app's id and PEM private key.
    #[serde(default)]
    pub app_id: Option<u64>,
    #[serde(default)]
    pub private_key: Option<String>,
    #[serde(default)]
    pub app_url: Option<String>,
    /// Signs the host's webhook deliveries (optional; without it deliveries are refused).
    #[serde(default)]
    pub webhook_secret: Option<String>,
}

/// The wizard's answers so far (in memory until finish).
#[derive(Debug, Default, Clone)]
pub struct Answers {
    pub server: Option<ServerStep>,
    pub object_store: Option<ObjectStoreStep>,
    /// `Some(empty)` = skipped.
    pub llm: Option<Vec<LlmKey>>,
    /// `Some(None)` = skipped.
    pub codehost: Option<Option<CodehostStep>>,
}

/// The install-mode application.
pub struct Wizard {
    pub state_dir: PathBuf,
    pub settings_path: PathBuf,
    /// The listener as bound (written into `[server.listen]`).
    pub listen: Listen,
    token: String,
    pub answers: Mutex<Answers>,
    pub finishing: AtomicBool,
    done: crossbeam_channel::Sender<()>,
    /// Wrong install tokens per peer, for [`GUESS_LIMIT`].
    guesses: Mutex<Guesses>,
}

/// At most this many wrong install tokens per peer address in [`GUESS_WINDOW`]; beyond,
/// every `/install*` request from that peer answers 429 (before the token is compared, so
/// a guess learns nothing) until the window ends. The token has 256 bits: this is not what
/// keeps it secret, it keeps guessing slow and loud.
pub const GUESS_LIMIT: u32 = 10;
/// The window of [`GUESS_LIMIT`].
pub const GUESS_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// Wrong guesses per peer: (window start, count). Peers whose window ended are dropped when
/// the map is pruned.
#[derive(Debug, Default)]
struct Guesses {
    by_peer: std::collections::HashMap<Option<std::net::IpAddr>, (std::time::Instant, u32)>,
}

impl Guesses {
    /// Seconds until `peer` may try again, when it is over the limit now.
    fn blocked(&mut self, peer: Option<std::net::IpAddr>) -> Option<u64> {
        let (start, n) = *self.by_peer.get(&peer)?;
        let age = start.elapsed();
        if age >= GUESS_WINDOW {
            self.by_peer.remove(&peer);
            return None;
        }
        (n >= GUESS_LIMIT).then(|| (GUESS_WINDOW - age).as_secs().max(1))
    }

    /// Counts a wrong token from `peer`; the count in its window.
    fn wrong(&mut self, peer: Option<std::net::IpAddr>) -> u32 {
        if self.by_peer.len() > 4096 {
            self.by_peer
                .retain(|_, (start, _)| start.elapsed() < GUESS_WINDOW);
        }
        let e = self
            .by_peer
            .entry(peer)
            .or_insert((std::time::Instant::now(), 0));
        if e.0.elapsed() >= GUESS_WINDOW {
            *e = (std::time::Instant::now(), 0);
        }
        e.1 += 1;
        e.1
    }
}

/// A running install-mode server.
pub struct Installer {
    pub http: HttpServer,
    pub wizard: Arc<Wizard>,
    /// The base URL, e.g. `http://127.0.0.1:32276`.
    pub base: String,
    /// Receives once `finish` has written everything and answered.
    pub done: crossbeam_channel::Receiver<()>,
}

impl Installer {
    pub fn install_url(&self) -> String {
        format!("{}/install?token={}", self.base, self.wizard.token)
    }

    pub fn token(&self) -> &str {
        &self.wizard.token
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("cannot listen on {listen}: {source}")]
    Bind {
        listen: Listen,
        source: std::io::Error,
    },
    #[error("cannot create the install token: {0}")]
    Random(std::io::Error),
}

/// Binds and starts serving the wizard.
pub fn start(
    state_dir: PathBuf,
    settings_path: PathBuf,
    listen: Option<Listen>,
) -> Result<Installer, InstallError> {
    let listen = listen.unwrap_or_else(|| Listen::Tcp(DEFAULT_LISTEN.into()));
    let mut raw = [0u8; 32];
    crate::auth::random_bytes(&mut raw).map_err(InstallError::Random)?;
    use base64::Engine as _;
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw);
    let opts = HttpOptions::default();
    let bind_err = |source| InstallError::Bind {
        listen: listen.clone(),
        source,
    };
    let http = HttpServer::bind(&listen, &opts).map_err(bind_err)?;
    let bound = match http.listen() {
        Listen::Tcp(_) => Listen::Tcp(http.local_addr().to_string()),
        other => other.clone(),
    };
    let base = match &bound {
        Listen::Tcp(a) => format!("http://{a}"),
        Listen::Unix(p) => format!("unix:{}", p.display()),
    };
    let (tx, rx) = crossbeam_channel::bounded(1);
    let wizard = Arc::new(Wizard {
        state_dir,
        settings_path,
        listen: bound,
        token,
        answers: Mutex::new(Answers::default()),
        finishing: AtomicBool::new(false),
        done: tx,
        guesses: Mutex::new(Guesses::default()),
    });
    http.serve(wizard.clone(), opts).map_err(bind_err)?;
    Ok(Installer {
        http,
        wizard,
        base,
        done: rx,
    })
}

impl Wizard {
    /// The install token from `Authorization: Bearer`, `X-Install-Token` or `?token=`.
    fn authorized(&self, inc: &Incoming<'_>) -> bool {
        let given = inc
            .header("authorization")
            .and_then(|h| {
                h.strip_prefix("Bearer ")
                    .or_else(|| h.strip_prefix("bearer "))
            })
            .map(|t| t.trim().to_string())
            .or_else(|| inc.header("x-install-token").map(|t| t.trim().to_string()))
            .or_else(|| inc.query("token"));
        given.is_some_and(|t| crate::auth::constant_time_eq(t.as_bytes(), self.token.as_bytes()))
    }

    fn route(&self, inc: &mut Incoming<'_>) -> Result<Reply, ApiError> {
        let path = inc.path.clone();
        let method = if inc.method == "HEAD" {
            "GET".to_string()
        } else {
            inc.method.clone()
        };
        if path == "/health" && method == "GET" {
            return Ok(Reply::json(
                200,
                &serde_json::json!({"status": "ok", "mode": "install"}),
            ));
        }
        if path != "/install" && !path.starts_with("/install/") {
            return Err(ApiError::not_found(format!(
                "The server is in install mode: only /install and /health are served (no route for {method} {path})."
            )));
        }
        let peer = inc.remote_addr().map(|a| a.ip());
        if let Some(wait) = self.guesses.lock().blocked(peer) {
            return Err(ApiError::new(
                429,
                format!("Too many wrong install tokens from this address; try again in {wait} s."),
            )
            .with_code("too_many_attempts"));
        }
        if !self.authorized(inc) {
            let n = self.guesses.lock().wrong(peer);
            let from = peer.map_or("a local socket".to_string(), |p| p.to_string());
            log::warn!(
                "install: wrong install token from {from} for {method} {path} ({n} in the last {} s)",
                GUESS_WINDOW.as_secs()
            );
            if n == GUESS_LIMIT {
                log::warn!(
                    "install: {from} is refused for {} s after {n} wrong install tokens",
                    GUESS_WINDOW.as_secs()
                );
            }
            return Err(ApiError::unauthorized(
                "Invalid install token: use the install URL printed at startup, or send the token as `Authorization: Bearer`, `X-Install-Token` or `?token=`.",
            )
            .with_code("invalid_install_token"));
        }
        dispatch(self, inc, &method, &path)
    }

    /// Tells the process that install mode is over.
    pub(crate) fn signal_done(&self) {
        let _ = self.done.try_send(());
    }
}

/// Routes an authorized `/install*` request to its page or step.
fn dispatch(
    w: &Wizard,
    inc: &mut Incoming<'_>,
    method: &str,
    path: &str,
) -> Result<Reply, ApiError> {
    match (method, path.trim_end_matches('/')) {
        ("GET", "/install") => Ok(pages::page(pages::Page::Server)),
        ("GET", "/install/object-store") => Ok(pages::page(pages::Page::ObjectStore)),
        ("GET", "/install/llm") => Ok(pages::page(pages::Page::Llm)),
        ("GET", "/install/codehost") => Ok(pages::page(pages::Page::Codehost)),
        ("GET", "/install/finish") => Ok(pages::page(pages::Page::Finish)),
        ("GET", "/install/session") => Ok(Reply::json(200, &steps::session(w, inc))),
        ("PUT", "/install/server") => steps::put_server(w, inc),
        ("POST", "/install/object-store/test") => {
            let step = steps::object_store_body(w, inc)?;
            steps::test_object_store(&step)?;
            Ok(Reply::json(200, &json!({"ok": true})))
        }
        ("PUT", "/install/object-store") => {
            let step = steps::object_store_body(w, inc)?;
            steps::test_object_store(&step)?;
            w.answers.lock().object_store = Some(step);
            Ok(Reply::empty(204))
        }
        ("POST", "/install/llm/test") => {
            let key: LlmKey = inc.json()?;
            let (model, ms) = steps::test_llm(&key)?;
            Ok(Reply::json(
                200,
                &json!({"ok": true, "model": model, "latency_ms": ms}),
            ))
        }
        ("PUT", "/install/llm") => steps::put_llm(w, inc),
        ("PUT", "/install/codehost") => steps::put_codehost(w, inc),
        ("POST", "/install/finish") => finish::handle(w, &inc.request_id),
        _ => Err(ApiError::not_found(format!(
            "No install route for {method} {path}."
        ))),
    }
}

impl crate::server::http::Handler for Wizard {
    fn handle(&self, inc: &mut Incoming<'_>) -> Reply {
        match self.route(inc) {
            Ok(r) => r,
            Err(e) => {
                if e.status >= 500 {
                    log::error!("{} {} {}: {e}", inc.request_id, inc.method, inc.path);
                }
                Reply::error(&e, &inc.request_id)
            }
        }
    }
}
