//! The HTTP service: `svc server start`. Binds one listener (Unix socket by default, or plain
//! TCP), routes every request through one table, authenticates, and serves discovery,
//! workflow versions, runs (lifecycle, scheduler, SSE) and demo data.
//!
//! Layout: [`http`] (sockets, threads, limits, request ids, panics), [`router`] (the table),
//! [`routes`] (the list of routes), [`auth`], [`system`] (discovery), [`openapi`], [`pages`]
//! (the web UI's pages and assets from [`crate::web`]),
//! [`versions`], [`models`], [`demo`], [`error`], [`ids`].
//!
//! Startup order (SPEC 1.11): settings → the state directory's lock (`store::lock`: a
//! second server on the same directory fails here, having changed nothing) → dev token → store activation → sweep of the last
//! process's stage processes → recovery of runs interrupted by the last stop (resumed) →
//! scheduler and workers → routes/listener. Nothing is
//! served before the store is active.
//!
//! Owns: the HTTP API and the server process's wiring. Must not touch: DOT parsing (it calls
//! `workflow::load`), SQL of the run store (it goes through `RunStore`), or engine internals.

pub mod auth;
pub mod automations;
pub mod catalog;
pub mod completions;
pub mod demo;
pub mod environments;
pub mod error;
pub mod fdlimit;
pub mod housekeeping;
pub mod http;
pub mod ids;
pub mod insights;
pub mod integrations;
pub mod mcp_servers;
pub mod models;
pub mod openapi;
pub mod pages;
pub mod preview;
pub mod router;
pub mod routes;
pub mod runs;
pub mod sandboxes;
pub mod sessions;
pub mod settings_api;
pub mod spending;
pub mod system;
pub mod versions;
pub mod workflows;

use crate::settings::{self, ListenSettings, Settings, SettingsHandle, SettingsWatcher};
use error::ApiError;
use http::{HttpOptions, HttpServer, Incoming, Listen, Reply};
use router::{Access, Ctx, Match, Router};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The application: shared state behind every request.
pub struct App {
    pub settings: SettingsHandle,
    /// The settings file (`<state-dir>/settings.toml` unless `--settings` named another).
    pub settings_path: PathBuf,
    pub state_dir: PathBuf,
    pub auth: crate::auth::Authenticator,
    pub versions: Arc<versions::VersionStore>,
    pub runs: Arc<runs::Runs>,
    /// The automations catalog (`crate::automations`).
    pub automations: Arc<crate::catalog::Catalog<crate::automations::Automations>>,
    /// Fires automations (scheduler, API fires, hooks).
    pub dispatcher: Arc<crate::automations::Dispatcher>,
    /// The MCP servers catalog (`crate::mcp::catalog`).
    pub mcp_servers: Arc<crate::catalog::Catalog<crate::mcp::catalog::McpServers>>,
    /// Ask sessions on runs (`crate::ask`).
    pub sessions: Arc<crate::ask::Sessions>,
    /// What the store's data weighs (`system/df`, `system/info`, prune).
    pub sizes: Arc<dyn crate::store::StoreSizes>,
    /// LLM spend across runs (`GET /api/v1/usage`, the daily cap).
    pub ledger: Arc<dyn crate::store::UsageLedger>,
    /// The code host (and chat): pull requests, checks, webhooks.
    pub integrations: Arc<crate::integrations::Integrations>,
    /// The environments catalog (`crate::environments`).
    pub environments: Arc<crate::catalog::Catalog<crate::environments::Environments>>,
    /// Read-only SQL over the store's views, and saved queries (`crate::insights`).
    pub insights: Arc<crate::insights::Insights>,
    pub router: Router,
    pub started: Instant,
    /// The TCP addresses this server listens on, set once they are bound (previews refuse
    /// svc's own ports and build URLs from them when no URL is configured).
    pub listening: std::sync::OnceLock<preview::origin::Listeners>,
}

impl App {
    /// An app over `state_dir` with the given settings, versions table and runs service.
    // One argument per shared service the app holds.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        settings: SettingsHandle,
        state_dir: PathBuf,
        auth: crate::auth::Authenticator,
        versions: Arc<versions::VersionStore>,
        runs: Arc<runs::Runs>,
        automations: Arc<crate::catalog::Catalog<crate::automations::Automations>>,
        dispatcher: Arc<crate::automations::Dispatcher>,
        mcp_servers: Arc<crate::catalog::Catalog<crate::mcp::catalog::McpServers>>,
        sessions: Arc<crate::ask::Sessions>,
        sizes: Arc<dyn crate::store::StoreSizes>,
        ledger: Arc<dyn crate::store::UsageLedger>,
        integrations: Arc<crate::integrations::Integrations>,
        environments: Arc<crate::catalog::Catalog<crate::environments::Environments>>,
        insights: Arc<crate::insights::Insights>,
    ) -> App {
        App {
            settings,
            settings_path: state_dir.join(settings::SETTINGS_FILE),
            state_dir,
            auth,
            versions,
            runs,
            automations,
            dispatcher,
            mcp_servers,
            sessions,
            sizes,
            ledger,
            integrations,
            environments,
            insights,
            router: Router::new(routes::all()),
            started: Instant::now(),
            listening: std::sync::OnceLock::new(),
        }
    }

    /// The TCP addresses this server listens on (none before they are bound).
    pub fn listeners(&self) -> preview::origin::Listeners {
        self.listening.get().copied().unwrap_or_default()
    }

    /// svc's own TCP ports, which no preview reaches.
    pub fn own_ports(&self) -> Vec<u16> {
        let l = self.listeners();
        [l.main, l.preview]
            .into_iter()
            .flatten()
            .map(|a| a.port())
            .collect()
    }

    /// Previews: on the previews' own host name, nothing else is served; on the UI's
    /// origin, `/preview/` is served only when previews have no origin of their own.
    fn previews(&self, inc: &mut Incoming<'_>) -> Option<Result<Reply, ApiError>> {
        let s = self.settings.get();
        if preview::origin::is_preview_host(&s, inc) {
            return Some(if inc.path.starts_with(preview::PREFIX) {
                preview::serve(self, inc)
            } else {
                Err(ApiError::not_found(
                    "This host serves previews only (server.preview.url).",
                ))
            });
        }
        if !inc.path.starts_with(preview::PREFIX) {
            return None;
        }
        if preview::origin::separate(&s) {
            let base = preview::origin::public_base(&s, &self.listeners()).unwrap_or_default();
            return Some(Err(ApiError::not_found(format!(
                "Previews are served at {base}, never on this origin."
            ))));
        }
        Some(preview::serve(self, inc))
    }

    fn dispatch(&self, inc: &mut Incoming<'_>) -> Result<Reply, ApiError> {
        // Preview URLs take any method and any path below them: not a route-table pattern.
        if let Some(r) = self.previews(inc) {
            return r;
        }
        let (route, params) = match self.router.find(&inc.method, &inc.path) {
            Match::Found(r, p) => (r, p),
            Match::NotFound => {
                return Err(ApiError::not_found(format!(
                    "No route for {} {}.",
                    inc.method, inc.path
                )))
            }
            Match::MethodNotAllowed(allowed) => {
                let allow = allowed.join(", ");
                return Err(ApiError::new(
                    405,
                    format!(
                        "{} is not allowed on {}; allowed: {allow}.",
                        inc.method, inc.path
                    ),
                )
                .with_code("method_not_allowed")
                .with_header("Allow", allow));
            }
        };
        let demo = demo::is_demo(inc);
        let mut ctx = Ctx {
            inc,
            params,
            principal: None,
            route: route.pattern,
        };
        if demo && route.access == Access::User {
            return demo::handle(self, route, &mut ctx);
        }
        if matches!(route.access, Access::User | Access::Admin) {
            ctx.principal = Some(auth::authenticate(self, ctx.inc)?);
        }
        if route.access == Access::Admin {
            auth::require_admin(self, ctx.principal.as_ref())?;
        }
        (route.handler)(self, &mut ctx)
    }
}

/// The handler of `[server.preview] listen`: previews and nothing else.
pub struct PreviewListener(pub Arc<App>);

impl http::Handler for PreviewListener {
    fn handle(&self, inc: &mut Incoming<'_>) -> Reply {
        let r = if inc.path.starts_with(preview::PREFIX) {
            preview::serve(&self.0, inc)
        } else {
            Err(ApiError::not_found(
                "This listener serves previews only (server.preview.listen).",
            ))
        };
        r.unwrap_or_else(|e| {
            if e.status >= 500 {
                log::error!("{} {} {}: {e}", inc.request_id, inc.method, inc.path);
            }
            Reply::error(&e, &inc.request_id)
        })
    }
}

impl http::Handler for App {
    fn handle(&self, inc: &mut Incoming<'_>) -> Reply {
        match self.dispatch(inc) {
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

/// How to start the server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub state_dir: PathBuf,
    /// The settings file (default `<state-dir>/settings.toml`).
    pub settings_path: Option<PathBuf>,
    /// Overrides `server.listen`.
    pub listen: Option<Listen>,
    /// Boot configured with dev-token auth even without a settings file.
    pub dev: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0} does not exist: `svc server start` without --dev serves the install wizard, `--dev` boots with throw-away defaults.")]
    NotConfigured(PathBuf),
    #[error("{0}")]
    Settings(#[from] settings::SettingsError),
    #[error("{0}")]
    Token(#[from] crate::auth::TokenError),
    #[error("server.web.enabled = true needs SESSION_SECRET (at least 32 bytes) in the environment or the vault; it is {0}")]
    SessionSecret(&'static str),
    #[error("{0}")]
    Sessions(#[from] crate::auth::session::SessionError),
    #[error("{0}")]
    JwtKey(#[from] crate::auth::jwt::KeyError),
    #[error("cannot open the state directory {path}: {message}")]
    State { path: PathBuf, message: String },
    #[error("{0}")]
    Store(#[from] crate::store::ActivationError),
    #[error("{0}")]
    Locked(#[from] crate::store::LockError),
    #[error("cannot listen on {listen}: {source}")]
    Bind {
        listen: Listen,
        source: std::io::Error,
    },
}

impl StartError {
    /// Usage/configuration problems exit 2, runtime failures 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            StartError::NotConfigured(_)
            | StartError::Settings(_)
            | StartError::SessionSecret(_)
            | StartError::JwtKey(_) => 2,
            _ => 1,
        }
    }
}

/// A started server. Dropping it stops the listener.
pub struct RunningServer {
    pub http: HttpServer,
    /// `[server.preview] listen`, when set.
    pub preview_http: Option<HttpServer>,
    pub app: Arc<App>,
    /// The dev token, and whether this start created it.
    pub dev_token: Option<(String, bool)>,
    _watcher: SettingsWatcher,
    /// The state directory's lock, held while this server lives (`store::lock`).
    _lock: crate::store::StateLock,
}

impl RunningServer {
    /// `http://HOST:PORT` of the preview listener, when there is one.
    pub fn preview_url(&self) -> Option<String> {
        self.preview_http
            .as_ref()
            .map(|p| format!("http://{}", p.local_addr()))
    }

    /// `http://HOST:PORT` or `unix:PATH`.
    pub fn url(&self) -> String {
        match self.http.listen() {
            Listen::Tcp(_) => format!("http://{}", self.http.local_addr()),
            Listen::Unix(_) => self.http.local_addr().to_string(),
        }
    }
}

/// The listener the settings ask for.
pub fn listen_of(s: &Settings, state_dir: &Path) -> Listen {
    match &s.server.listen {
        ListenSettings::Unix { path } => {
            Listen::Unix(path.clone().unwrap_or_else(|| state_dir.join("svc.sock")))
        }
        ListenSettings::Tcp { address } => Listen::Tcp(address.clone()),
    }
}

/// Where `--dev` listens without `--listen`: TCP on loopback, so the web UI can be opened
/// in a browser ([`DEV_LISTEN`] unless `settings.toml` names a loopback address or a socket
/// path). A non-loopback address from the settings is not used: dev-token sign-in stays on
/// this machine unless `--listen` says otherwise.
pub fn dev_listen(s: &Settings, state_dir: &Path) -> Listen {
    match &s.server.listen {
        ListenSettings::Unix { path: Some(_) } => listen_of(s, state_dir),
        ListenSettings::Tcp { address } if is_loopback(address) => Listen::Tcp(address.clone()),
        ListenSettings::Tcp { address } => {
            let port = address.rsplit_once(':').map_or("32276", |(_, p)| p);
            log::warn!(
                "--dev listens on loopback only: ignoring server.listen.address `{address}` (pass --listen {address} to serve it)"
            );
            Listen::Tcp(format!("127.0.0.1:{port}"))
        }
        ListenSettings::Unix { path: None } => Listen::Tcp(DEV_LISTEN.to_string()),
    }
}

/// The address `svc server start --dev` listens on by default.
pub const DEV_LISTEN: &str = "127.0.0.1:32276";

/// Whether `host:port` names this machine only (`127.0.0.0/8`, `::1`, `localhost`).
pub fn is_loopback(address: &str) -> bool {
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Boots the server (see the module docs for the order) and starts serving.
pub fn start(opts: ServerOptions) -> Result<RunningServer, StartError> {
    let settings_path = opts
        .settings_path
        .clone()
        .unwrap_or_else(|| opts.state_dir.join(settings::SETTINGS_FILE));
    let initial = if settings_path.exists() {
        Settings::load(&settings_path)?
    } else if opts.dev {
        Settings::dev()
    } else {
        return Err(StartError::NotConfigured(settings_path));
    };
    let mut initial = initial;
    if opts.dev {
        Settings::dev_overlay(&mut initial);
    }
    let state_err = |e: &dyn std::fmt::Display| StartError::State {
        path: opts.state_dir.clone(),
        message: e.to_string(),
    };
    crate::base::perms::private_dir(&opts.state_dir).map_err(|e| state_err(&e))?;
    // One server per state directory, before anything is written, swept or recovered.
    let mut lock =
        crate::store::StateLock::take(&opts.state_dir, crate::store::lock::Role::Server)?;
    let dev_token = if initial.has_auth(settings::AuthMethod::DevToken) {
        Some(crate::auth::load_or_create_dev_token(&opts.state_dir)?)
    } else {
        None
    };
    let authenticator = authenticator(&initial, &opts.state_dir, &dev_token, opts.dev)?;
    let sqlite = Arc::new(crate::store::SqliteStore::activate(&opts.state_dir)?);
    let versions = Arc::new(versions::VersionStore::new(Arc::clone(&sqlite) as _));
    // Versions stored before the workflow catalog kept names get theirs (once).
    match versions.name_unnamed() {
        Ok(0) => {}
        Ok(n) => log::info!("workflow catalog: named {n} workflow version(s) stored before it"),
        Err(e) => log::warn!(
            "workflow catalog: naming older versions failed: {}",
            e.detail
        ),
    }
    let automations = Arc::new(
        crate::catalog::Catalog::open(automations_kind(&versions), Arc::clone(&sqlite) as _)
            .map_err(|e| state_err(&e))?,
    );
    let automation_tables: Arc<dyn crate::store::AutomationTables> = Arc::clone(&sqlite) as _;
    let session_index: Arc<dyn crate::store::SessionIndex> = Arc::clone(&sqlite) as _;
    let mcp_servers = Arc::new(
        crate::catalog::Catalog::open(crate::mcp::catalog::McpServers, Arc::clone(&sqlite) as _)
            .map_err(|e| state_err(&e))?,
    );
    let sizes: Arc<dyn crate::store::StoreSizes> = Arc::clone(&sqlite) as _;
    let ledger: Arc<dyn crate::store::UsageLedger> = Arc::clone(&sqlite) as _;
    let environments = Arc::new(
        crate::catalog::Catalog::open(crate::environments::Environments, Arc::clone(&sqlite) as _)
            .map_err(|e| state_err(&e))?,
    );
    let insights = Arc::new(
        crate::insights::Insights::open(
            Arc::new(crate::store::InsightsDb::new(sqlite.path())),
            Arc::clone(&sqlite) as _,
        )
        .map_err(|e| state_err(&e))?,
    );
    let store: Arc<dyn crate::store::RunStore> = Arc::clone(&sqlite) as _;

    let listen = match (&opts.listen, opts.dev) {
        (Some(l), _) => l.clone(),
        (None, true) => dev_listen(&initial, &opts.state_dir),
        (None, false) => listen_of(&initial, &opts.state_dir),
    };
    let http_opts = http_options(&initial.server.http);
    let handle = if opts.dev {
        SettingsHandle::with_overlay(initial, Settings::dev_overlay)
    } else {
        SettingsHandle::new(initial)
    };
    handle.on_change(|old, new| {
        if old.server.listen != new.server.listen || old.server.http != new.server.http {
            log::warn!("server.listen / server.http changed: restart the server to apply");
        }
    });
    let watcher = settings::watch(&settings_path, handle.clone());
    let integrations = crate::integrations::Integrations::new(
        handle.clone(),
        opts.state_dir.clone(),
        sqlite,
        Arc::clone(&store),
        Arc::new(ServerWorkspaces {
            state_dir: opts.state_dir.clone(),
        }),
    );
    let runs = runs::Runs::new(
        store,
        Arc::new(runs::exec::EngineExecutor {
            state_dir: opts.state_dir.clone(),
            settings: handle.clone(),
            integrations: Some(Arc::clone(&integrations)),
        }),
        handle.clone(),
        opts.state_dir.clone(),
        Arc::clone(&versions),
    );
    // Stage processes the previous server left (its descendants outlive a kill -9 of it)
    // are stopped before any run resumes, so no stage ever runs twice at once.
    let procs_dir = opts.state_dir.join(PROCS_DIR);
    let swept =
        crate::procs::sweep(&procs_dir, Duration::from_secs(10)).map_err(|e| state_err(&e))?;
    if !swept.killed.is_empty() {
        log::warn!(
            "stopped {} stage process group(s) left by the previous server: {:?}",
            swept.killed.len(),
            swept.killed
        );
    }
    crate::procs::install(&procs_dir).map_err(|e| state_err(&e))?;
    let resume = handle.get().server.recovery.resume_interrupted;
    let recovered = runs.recover(resume).map_err(|e| state_err(&e))?;
    if recovered != runs::Recovered::default() {
        log::warn!(
            "runs active when the server last stopped: {} resumed, {} failed",
            recovered.resumed,
            recovered.failed
        );
    }
    runs.set_mcp_catalog(Arc::clone(&mcp_servers));
    runs.set_ledger(Arc::clone(&ledger));
    runs.set_environments(Arc::clone(&environments));
    runs.start_scheduler().map_err(|e| state_err(&e))?;
    // Automations after the runs service: pending fires' runs are made and started now.
    let dispatcher = crate::automations::Dispatcher::new(
        Arc::clone(&automations),
        automation_tables,
        Arc::new(automations::RunLauncher {
            runs: Arc::clone(&runs),
            versions: Arc::clone(&versions),
            scratch: opts.state_dir.join("automations"),
        }),
        scheduler_clock(),
    );
    let finished = dispatcher.recover().map_err(|e| state_err(&e))?;
    if finished > 0 {
        log::warn!("{finished} automation fire(s) the last stop interrupted were finished");
    }
    dispatcher.start().map_err(|e| state_err(&e))?;
    let sessions = crate::ask::Sessions::new(
        Arc::clone(&runs.store),
        session_index,
        handle.clone(),
        opts.state_dir.clone(),
        Arc::clone(&runs.redactor) as _,
    );
    crate::backup::schedule::start(handle.clone(), opts.state_dir.clone())
        .map_err(|e| state_err(&e))?;
    // Code-host deliveries the integrations endpoint verified feed automations' `codehost`
    // triggers.
    let hooked = Arc::clone(&dispatcher);
    integrations.set_automation_hook(Arc::new(move |event, delivery_id, payload| {
        let fired = hooked.codehost_event(event, delivery_id, payload);
        (!fired.is_empty()).then(|| {
            let ids: Vec<&str> = fired.iter().map(|f| f.automation_id.as_str()).collect();
            format!("fired automation(s) {}", ids.join(", "))
        })
    }));
    // Chat: committed run events go to its worker; answers from chat go through the
    // questions API.
    integrations.chat.start();
    integrations
        .chat
        .set_answerer(Arc::new(runs::ChatAnswers(Arc::clone(&runs))));
    let chat = Arc::clone(&integrations.chat);
    runs.set_event_tap(Arc::new(move |e| chat.observe(e)));
    let pending = integrations.resume_pending();
    if pending > 0 {
        log::warn!("{pending} pull request creation(s) left pending by the last stop resumed");
    }
    let watched = integrations.start_watch().map_err(|e| state_err(&e))?;
    if watched > 0 {
        log::info!("{watched} pull request(s) await svc's auto-merge");
    }
    let mut app = App::new(
        handle,
        opts.state_dir.clone(),
        authenticator,
        versions,
        runs,
        automations,
        dispatcher,
        mcp_servers,
        sessions,
        sizes,
        Arc::clone(&ledger),
        integrations,
        environments,
        insights,
    );
    app.settings_path = settings_path.clone();
    let app = Arc::new(app);
    let http = HttpServer::bind(&listen, &http_opts).map_err(|source| StartError::Bind {
        listen: listen.clone(),
        source,
    })?;
    let preview_http = match &app.settings.get().server.preview.listen {
        Some(address) => {
            let l = Listen::Tcp(address.clone());
            let bind_err = |source| StartError::Bind {
                listen: l.clone(),
                source,
            };
            Some(HttpServer::bind(&l, &http_opts).map_err(bind_err)?)
        }
        None => None,
    };
    let tcp = |h: &HttpServer| match h.listen() {
        Listen::Tcp(_) => h.local_addr().parse().ok(),
        Listen::Unix(_) => None,
    };
    let _ = app.listening.set(preview::origin::Listeners {
        main: tcp(&http),
        preview: preview_http.as_ref().and_then(tcp),
    });
    http.serve(app.clone(), http_opts)
        .map_err(|source| StartError::Bind {
            listen: listen.clone(),
            source,
        })?;
    if let Some(p) = &preview_http {
        p.serve(Arc::new(PreviewListener(app.clone())), http_opts)
            .map_err(|source| StartError::Bind {
                listen: p.listen().clone(),
                source,
            })?;
    }
    lock.set_address(&match http.listen() {
        Listen::Tcp(_) => format!("http://{}", http.local_addr()),
        Listen::Unix(p) => format!("unix:{}", p.display()),
    });
    Ok(RunningServer {
        http,
        preview_http,
        app,
        dev_token,
        _watcher: watcher,
        _lock: lock,
    })
}

/// The edge's limits from `[server.http]`. Raises the soft descriptor limit to the hard one
/// first; a `max_connections` of 0 is derived from it.
fn http_options(h: &settings::HttpSettings) -> HttpOptions {
    let soft = fdlimit::raise_soft_limit().unwrap_or_else(|e| {
        log::warn!("cannot read the descriptor limit: {e}");
        1024
    });
    let max_connections = if h.max_connections > 0 {
        h.max_connections
    } else {
        fdlimit::connection_cap(soft)
    };
    log::info!("descriptor limit {soft}; at most {max_connections} connections");
    HttpOptions {
        max_body_bytes: h.max_body_bytes,
        max_head_bytes: h.max_head_bytes,
        max_headers: h.max_headers,
        head_timeout: Duration::from_secs(h.head_timeout_secs),
        read_timeout: Duration::from_secs(h.read_timeout_secs),
        write_timeout: Duration::from_secs(h.read_timeout_secs),
        idle_timeout: Duration::from_secs(h.idle_timeout_secs),
        max_connections,
    }
}

/// The automations catalog's rules, asking `versions` whether a target version exists.
/// The automations scheduler's clock: the wall clock, or under the `test-support` feature
/// the shifted one `SVC_TEST_CLOCK_START` asks for (an end-to-end test's schedule comes due
/// in seconds).
fn scheduler_clock() -> Arc<dyn crate::base::clock::Clock> {
    #[cfg(feature = "test-support")]
    if let Some(clock) = crate::base::test_hooks::clock_for_tests() {
        return clock;
    }
    Arc::new(crate::base::clock::SystemClock)
}

fn automations_kind(versions: &Arc<versions::VersionStore>) -> crate::automations::Automations {
    let versions = Arc::clone(versions);
    crate::automations::Automations::new(move |id| matches!(versions.get(id), Ok(Some(_))))
}

/// Records of live stage process groups, under the state directory (see `procs`).
pub const PROCS_DIR: &str = "procs";

/// The credential checker: the dev token, session keys when the web UI is on
/// (`SESSION_SECRET` from the environment or the vault, at least 32 bytes; with `--dev`,
/// else `<state-dir>/dev-session-secret`, made on first use), and the JWT key
/// when `SVC_JWT_PUBLIC_KEY` is set.
fn authenticator(
    s: &Settings,
    state_dir: &Path,
    dev_token: &Option<(String, bool)>,
    dev: bool,
) -> Result<crate::auth::Authenticator, StartError> {
    let sessions = if s.server.web.enabled {
        // `--dev` makes one up (and keeps it) rather than asking for it.
        let secret = match crate::auth::session_secret(state_dir) {
            Some(s) => s,
            None if dev => crate::auth::load_or_create_dev_session_secret(state_dir)?,
            None => return Err(StartError::SessionSecret("missing")),
        };
        if secret.len() < crate::auth::session::MIN_SECRET_BYTES {
            return Err(StartError::SessionSecret("too short"));
        }
        Some(crate::auth::Sessions::new(
            secret.as_bytes(),
            state_dir,
            crate::auth::unix_now(),
        )?)
    } else {
        None
    };
    let jwt = crate::auth::jwt::JwtVerifier::from_env()?;
    Ok(crate::auth::Authenticator::new(
        dev_token.as_ref().map(|(t, _)| t.clone()),
        sessions,
        jwt,
    ))
}

/// The executor worker threads run promoted runs with (no code host: runs publish nothing).
pub fn executor(state_dir: &Path, settings: SettingsHandle) -> Arc<dyn runs::exec::Executor> {
    Arc::new(runs::exec::EngineExecutor {
        state_dir: state_dir.to_path_buf(),
        settings,
        integrations: None,
    })
}

/// Where the integrations find a run's workspace: as `runs::sandbox` lays them out.
struct ServerWorkspaces {
    state_dir: PathBuf,
}

impl crate::integrations::WorkspaceLocator for ServerWorkspaces {
    fn locate(&self, row: &crate::store::RunRow) -> Option<(crate::workspace::Git, String)> {
        crate::sandbox::lifecycle::workspace_git(row, &self.state_dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_mode_listens_on_loopback_unless_told_otherwise() {
        let dir = Path::new("/state");
        let with = |listen: ListenSettings| {
            let mut s = Settings::dev();
            s.server.listen = listen;
            dev_listen(&s, dir)
        };
        // Nothing configured: TCP on loopback, so a browser can open the board.
        assert_eq!(
            with(ListenSettings::Unix { path: None }),
            Listen::Tcp(DEV_LISTEN.into())
        );
        // A loopback address or a socket path the settings name is kept.
        for a in ["127.0.0.1:9000", "localhost:9000", "[::1]:9000"] {
            assert_eq!(
                with(ListenSettings::Tcp { address: a.into() }),
                Listen::Tcp(a.into())
            );
        }
        let sock = PathBuf::from("/run/svc.sock");
        assert_eq!(
            with(ListenSettings::Unix {
                path: Some(sock.clone())
            }),
            Listen::Unix(sock)
        );
        // Any other address is not used: its port, on loopback.
        assert_eq!(
            with(ListenSettings::Tcp {
                address: "0.0.0.0:9000".into()
            }),
            Listen::Tcp("127.0.0.1:9000".into())
        );
        assert!(!is_loopback("10.0.0.1:80") && !is_loopback("example.com:80"));
    }
}
