//! The HTTP side of authentication: checking each protected request through
//! [`crate::auth::Authenticator`] (401/403 with the error body), the `Origin` check for
//! cookie-authenticated state changes, and the browser endpoints under `/auth/`:
//!
//! - `POST /auth/dev-token` (form field `token`, optional `next`): dev-token sign-in; sets
//!   `__svc_session` and answers 303 to `next` (default `/`); a wrong token answers 303 to
//!   `/login?error=invalid_token`. A JSON body `{token}` gets 200 `{ok, user}` or 401.
//! - `POST /auth/logout`: revokes the session server-side, clears the cookie, 303 to `/login`
//!   (204 when the client accepts JSON).
//! - `GET /auth/login?next=`: 302 to the code host's authorize URL with a `state` bound to
//!   the browser by the private cookie `__svc_oauth_state`.
//! - `GET /auth/callback?code&state`: exchanges the code, fetches the user, checks
//!   `allowed_usernames` (403), issues the session, 303 to `next`.
//! - `GET /api/v1/auth/config` (public): which sign-in methods a page should offer.
//!
//! Owns: these handlers and cookie headers. Must not touch: credential checks or crypto
//! (see [`crate::auth`]).

use super::error::ApiError;
use super::http::{Incoming, Reply};
use super::router::Ctx;
use super::App;
use crate::auth::session::{OAuthState, STATE_COOKIE, STATE_LIFETIME_SECS};
use crate::auth::{self, oauth, AuthError, Credentials, Method, Principal, Via, SESSION_COOKIE};
use crate::settings::{AuthMethod, Settings};
use serde_json::json;

/// Checks the caller of a protected route; the principal's wire form on success.
pub fn authenticate(app: &App, inc: &Incoming<'_>) -> Result<serde_json::Value, ApiError> {
    let s = app.settings.get();
    let creds = Credentials {
        authorization: inc.header("authorization"),
        session_cookie: inc.cookie(SESSION_COOKIE),
    };
    let (p, via) = app
        .auth
        .authenticate(&s, creds, auth::unix_now())
        .map_err(api_error)?;
    if via == Via::Cookie && !matches!(inc.method.as_str(), "GET" | "HEAD" | "OPTIONS") {
        check_origin(&s, inc)?;
    }
    Ok(p.to_json())
}

/// Admin rights (settings and secrets over HTTP): the dev token's user, and the logins of
/// `[server.auth] admins` (case-insensitive). Everyone else is 403.
pub fn require_admin(app: &App, principal: Option<&serde_json::Value>) -> Result<(), ApiError> {
    let p = principal.ok_or_else(|| ApiError::unauthorized("Sign in first."))?;
    let login = p["login"].as_str().unwrap_or("");
    let dev = p["auth_method"] == auth::Method::DevToken.as_str();
    let listed = app
        .settings
        .get()
        .server
        .auth
        .admins
        .iter()
        .any(|a| a.eq_ignore_ascii_case(login));
    if dev || listed {
        return Ok(());
    }
    Err(ApiError::forbidden(format!(
        "The user `{login}` has no admin rights on this server (server.auth.admins)."
    ))
    .with_code("admin_required"))
}

fn api_error(e: AuthError) -> ApiError {
    match e {
        AuthError::Unauthorized { detail, code } => ApiError::unauthorized(detail).with_code(code),
        AuthError::Forbidden { login } => ApiError::forbidden(format!(
            "The user `{login}` is not allowed on this server (server.auth.codehost.allowed_usernames)."
        ))
        .with_code("user_not_allowed"),
    }
}

/// The browser origin this server answers as: `server.web.url`, else `http://<Host>`.
pub fn public_origin(s: &Settings, inc: &Incoming<'_>) -> String {
    if let Some(u) = &s.server.web.url {
        return origin_of(u);
    }
    match inc.header("host") {
        Some(h) if !h.is_empty() && !h.contains(['/', ' ']) => format!("http://{h}"),
        _ => "http://localhost".into(),
    }
}

/// `scheme://host[:port]` of a URL.
fn origin_of(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    format!(
        "{}://{}",
        scheme.to_ascii_lowercase(),
        host.to_ascii_lowercase()
    )
}

/// A state-changing request carried by the cookie must come from our own pages: its
/// `Origin` must be `server.web.url`'s origin (or this Host's when no URL is set).
/// A missing `Origin` is refused too (browsers send it on every POST).
fn check_origin(s: &Settings, inc: &Incoming<'_>) -> Result<(), ApiError> {
    let Some(origin) = inc.header("origin") else {
        return Err(ApiError::forbidden(
            "A request authenticated by the session cookie must carry an Origin header.",
        )
        .with_code("origin_mismatch"));
    };
    let got = origin_of(origin.trim());
    let ok = if s.server.web.url.is_some() {
        got == public_origin(s, inc)
    } else {
        let host = inc.header("host").unwrap_or("").to_ascii_lowercase();
        got == format!("http://{host}") || got == format!("https://{host}")
    };
    if ok {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!(
            "Origin `{origin}` is not this server's origin; cross-site requests are refused."
        ))
        .with_code("origin_mismatch"))
    }
}

fn secure(s: &Settings) -> bool {
    s.server
        .web
        .url
        .as_deref()
        .is_some_and(|u| u.to_ascii_lowercase().starts_with("https://"))
}

/// A `Set-Cookie` value for `name`.
fn set_cookie(s: &Settings, name: &str, value: &str, path: &str, max_age: u64) -> String {
    format!(
        "{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; SameSite=Lax{}",
        if secure(s) { "; Secure" } else { "" }
    )
}

fn redirect(status: u16, location: &str, cookies: Vec<String>) -> Reply {
    let mut headers: Vec<(
        std::borrow::Cow<'static, str>,
        std::borrow::Cow<'static, str>,
    )> = vec![("Location".into(), location.to_string().into())];
    for c in cookies {
        headers.push(("Set-Cookie".into(), c.into()));
    }
    headers.push(("Cache-Control".into(), "no-store".into()));
    Reply::Full(rouille::Response {
        status_code: status,
        headers,
        data: rouille::ResponseBody::empty(),
        upgrade: None,
    })
}

fn with_cookies(reply: Reply, cookies: Vec<String>) -> Reply {
    match reply {
        Reply::Full(mut r) => {
            for c in cookies {
                r.headers.push(("Set-Cookie".into(), c.into()));
            }
            r.headers.push(("Cache-Control".into(), "no-store".into()));
            Reply::Full(r)
        }
        other => other,
    }
}

/// A local path to return to after signing in (never another site): `auth::redirect`.
fn safe_next(next: Option<&str>) -> String {
    crate::auth::redirect::local_path(next)
}

fn sessions(app: &App) -> Result<&auth::Sessions, ApiError> {
    app.auth.sessions.as_ref().ok_or_else(|| {
        ApiError::not_found("Browser sign-in is off: server.web.enabled is false.")
            .with_code("web_disabled")
    })
}

fn wants_json(inc: &Incoming<'_>) -> bool {
    let ct = inc.header("content-type").unwrap_or("");
    let accept = inc.header("accept").unwrap_or("");
    ct.starts_with("application/json") || accept.starts_with("application/json")
}

/// The fields of a form or JSON body.
fn fields(ctx: &mut Ctx<'_, '_>) -> Result<Vec<(String, String)>, ApiError> {
    let json = ctx
        .inc
        .header("content-type")
        .is_some_and(|c| c.starts_with("application/json"));
    let body = ctx.inc.body()?;
    if json {
        let v: serde_json::Map<String, serde_json::Value> = super::http::parse_json(body)?;
        return Ok(v
            .into_iter()
            .filter_map(|(k, v)| v.as_str().map(|s| (k, s.to_string())))
            .collect());
    }
    Ok(form_urlencoded::parse(body).into_owned().collect())
}

fn issue_session(app: &App, s: &Settings, p: &Principal) -> Result<String, ApiError> {
    let lifetime = s.server.web.session_lifetime_secs;
    let (value, _) = sessions(app)?
        .issue(p, auth::unix_now(), lifetime)
        .map_err(|e| ApiError::internal(format!("cannot create a session: {e}")))?;
    Ok(set_cookie(s, SESSION_COOKIE, &value, "/", lifetime))
}

/// `POST /auth/dev-token`.
pub fn dev_token_login(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let s = app.settings.get();
    sessions(app)?;
    if !s.has_auth(AuthMethod::DevToken) {
        return Err(
            ApiError::not_found("Dev-token sign-in is not enabled.").with_code("method_disabled")
        );
    }
    if ctx.inc.header("origin").is_some() {
        check_origin(&s, ctx.inc)?;
    }
    let json = wants_json(ctx.inc);
    let f = fields(ctx)?;
    let get = |k: &str| f.iter().find(|(n, _)| n == k).map(|(_, v)| v.trim());
    let next = safe_next(get("next"));
    if !get("token").is_some_and(|t| app.auth.dev_token_matches(t)) {
        if json {
            return Err(ApiError::unauthorized("The dev token is invalid.")
                .with_code("access_token_invalid"));
        }
        let q = form_urlencoded::Serializer::new(String::new())
            .append_pair("error", "invalid_token")
            .append_pair("next", &next)
            .finish();
        return Ok(redirect(303, &format!("/login?{q}"), Vec::new()));
    }
    let p = Principal::dev();
    let cookie = issue_session(app, &s, &p)?;
    if json {
        return Ok(with_cookies(
            Reply::json(200, &json!({"ok": true, "user": p.to_json()})),
            vec![cookie],
        ));
    }
    Ok(redirect(303, &next, vec![cookie]))
}

/// `POST /auth/logout`.
pub fn logout(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let s = app.settings.get();
    let sessions = sessions(app)?;
    if let Some(claims) = ctx
        .inc
        .cookie(SESSION_COOKIE)
        .and_then(|c| sessions.open(c, auth::unix_now()))
    {
        check_origin(&s, ctx.inc)?;
        sessions
            .revoke(&claims)
            .map_err(|e| ApiError::internal(format!("cannot sign out: {e}")))?;
    }
    let clear = set_cookie(&s, SESSION_COOKIE, "", "/", 0);
    if wants_json(ctx.inc) {
        return Ok(with_cookies(Reply::empty(204), vec![clear]));
    }
    Ok(redirect(303, "/login", vec![clear]))
}

/// The code-host OAuth app, or why sign-in through it is unavailable.
fn codehost_app(app: &App, s: &Settings) -> Result<(String, String), ApiError> {
    sessions(app)?;
    if !s.has_auth(AuthMethod::Codehost) {
        return Err(
            ApiError::not_found("Code-host sign-in is not enabled.").with_code("method_disabled")
        );
    }
    let client_id = s.server.auth.codehost.client_id.clone().ok_or_else(|| {
        ApiError::unavailable(
            "Code-host sign-in is not configured: server.auth.codehost.client_id is not set.",
        )
    })?;
    let secret = crate::settings::vault::Vault::in_state_dir(&app.state_dir)
        .get("CODEHOST_CLIENT_SECRET")
        .ok()
        .flatten()
        .ok_or_else(|| {
            ApiError::unavailable(
                "Code-host sign-in is not configured: the vault has no CODEHOST_CLIENT_SECRET.",
            )
        })?;
    Ok((client_id, secret))
}

fn redirect_uri(s: &Settings, inc: &Incoming<'_>) -> String {
    format!("{}/auth/callback", public_origin(s, inc))
}

/// `GET /auth/login`.
pub fn login(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let s = app.settings.get();
    let (client_id, _) = codehost_app(app, &s)?;
    let mut raw = [0u8; 32];
    auth::random_bytes(&mut raw).map_err(|e| ApiError::internal(e.to_string()))?;
    use base64::Engine as _;
    let state = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw);
    let sealed = sessions(app)?
        .seal_state(&OAuthState {
            state: state.clone(),
            next: safe_next(ctx.inc.query("next").as_deref()),
            exp: auth::unix_now() + STATE_LIFETIME_SECS,
        })
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let url = oauth::authorize_url(
        &s.server.auth.codehost,
        &client_id,
        &redirect_uri(&s, ctx.inc),
        &state,
    );
    let cookie = set_cookie(&s, STATE_COOKIE, &sealed, "/auth", STATE_LIFETIME_SECS);
    Ok(redirect(302, &url, vec![cookie]))
}

/// `GET /auth/callback`.
pub fn callback(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let s = app.settings.get();
    let (client_id, secret) = codehost_app(app, &s)?;
    let clear_state = set_cookie(&s, STATE_COOKIE, "", "/auth", 0);
    if let Some(e) = ctx.inc.query("error") {
        return Err(
            ApiError::unauthorized(format!("The code host did not sign you in ({e})."))
                .with_code("codehost_denied"),
        );
    }
    let pending = ctx
        .inc
        .cookie(STATE_COOKIE)
        .and_then(|c| sessions(app).ok()?.open_state(c, auth::unix_now()));
    let state = ctx.inc.query("state").unwrap_or_default();
    let Some(pending) =
        pending.filter(|p| auth::constant_time_eq(p.state.as_bytes(), state.as_bytes()))
    else {
        return Err(ApiError::bad_request(
            "The sign-in state does not match this browser or has expired; start again at /auth/login.",
        )
        .with_code("invalid_state"));
    };
    let code = ctx
        .inc
        .query("code")
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request("The callback has no `code`.").with_code("invalid_request")
        })?;
    let cfg = &s.server.auth.codehost;
    let token = oauth::exchange_code(cfg, &client_id, &secret, &code, &redirect_uri(&s, ctx.inc))
        .map_err(oauth_error)?;
    let user = oauth::fetch_user(cfg, &token).map_err(oauth_error)?;
    let p = Principal {
        login: user.login,
        method: Method::Codehost,
        issuer: cfg.web_url.trim_end_matches('/').to_string(),
        subject: user.id.to_string(),
        avatar_url: user.avatar_url,
    };
    auth::check_allowed(&s, &p).map_err(api_error)?;
    let cookie = issue_session(app, &s, &p)?;
    Ok(redirect(303, &pending.next, vec![cookie, clear_state]))
}

fn oauth_error(e: oauth::OAuthError) -> ApiError {
    match e {
        oauth::OAuthError::Refused(_) => {
            ApiError::unauthorized(e.to_string()).with_code("invalid_code")
        }
        oauth::OAuthError::Upstream(_) => {
            ApiError::new(502, e.to_string()).with_code("upstream_failed")
        }
    }
}

/// `GET /api/v1/auth/config`: what a sign-in page should offer.
pub fn config(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let s = app.settings.get();
    let web = app.auth.sessions.is_some();
    let dev = web && s.has_auth(AuthMethod::DevToken);
    let codehost =
        web && s.has_auth(AuthMethod::Codehost) && s.server.auth.codehost.client_id.is_some();
    Ok(Reply::json(
        200,
        &json!({
            "methods": s.server.auth.methods,
            "web_enabled": web,
            "session_cookie": SESSION_COOKIE,
            "dev_token_login_url": dev.then_some("/auth/dev-token"),
            "codehost_login_url": codehost.then_some("/auth/login"),
            "logout_url": web.then_some("/auth/logout"),
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_next() {
        assert_eq!(
            origin_of("https://SVC.example.com/x?y"),
            "https://svc.example.com"
        );
        assert_eq!(origin_of("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
        assert_eq!(safe_next(Some("/runs/1")), "/runs/1");
        for bad in ["//evil.com", "https://evil.com", "/\\evil", ""] {
            assert_eq!(safe_next(Some(bad)), "/", "{bad}");
        }
        assert_eq!(safe_next(None), "/");
    }

    #[test]
    fn cookies_are_secure_behind_https() {
        let mut s = Settings::default();
        let plain = set_cookie(&s, SESSION_COOKIE, "v", "/", 60);
        assert_eq!(
            plain,
            "__svc_session=v; Path=/; Max-Age=60; HttpOnly; SameSite=Lax"
        );
        s.server.web.url = Some("https://svc.example.com".into());
        assert!(set_cookie(&s, SESSION_COOKIE, "v", "/", 60).ends_with("; Secure"));
    }
}
