//! Authentication through the real binary: dev-token sign-in by form, the private session
//! cookie (tampering, expiry, sign-out revocation surviving a restart), the Authorization
//! header beating the cookie, the Origin check, `created_by`, and start failures.

mod server_support;

use serde_json::json;
use server_support::*;

const SECRET: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const ORIGIN: &str = "http://svc.test";

fn web_settings(extra: &str) -> String {
    format!(
        "[server.web]\nenabled = true\nurl = \"{ORIGIN}\"\n{extra}\n[server.auth]\nmethods = [\"dev-token\"]\n"
    )
}

fn web_server(settings: &str, dir: Option<tempfile::TempDir>) -> Server {
    Server::with(Opts {
        settings: Some(settings),
        dev: false,
        dir,
        env: vec![("SESSION_SECRET", SECRET.to_string())],
        ..Opts::default()
    })
}

const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

/// Signs in through the form; returns the cookie value.
fn sign_in(s: &Server) -> String {
    let body = format!("token={}&next=%2Fruns%2Fabc", s.token);
    let r = s.raw("POST", "/auth/dev-token", &[FORM], Some(body.as_bytes()));
    assert_eq!(r.status, 303, "{}", r.text());
    assert_eq!(r.header("location"), Some("/runs/abc"));
    r.set_cookie("__svc_session").expect("session cookie")
}

fn with_cookie(
    s: &Server,
    method: &str,
    path: &str,
    cookie: &str,
    extra: &[(&str, &str)],
    body: Option<&str>,
) -> Resp {
    let c = format!("__svc_session={cookie}");
    let mut h = vec![("Cookie", c.as_str())];
    h.extend_from_slice(extra);
    s.raw(method, path, &h, body.map(str::as_bytes))
}

#[test]
fn dev_token_form_cookie_origin_and_logout() {
    let s = web_server(&web_settings(""), None);
    let cfg = s.raw("GET", "/api/v1/auth/config", &[], None).json();
    assert_eq!(cfg["dev_token_login_url"], "/auth/dev-token");
    assert_eq!(cfg["codehost_login_url"], json!(null));
    assert_eq!(cfg["session_cookie"], "__svc_session");

    // A wrong token goes back to the sign-in page, without a cookie.
    let bad = s.raw(
        "POST",
        "/auth/dev-token",
        &[FORM],
        Some(b"token=svc_dev_nope"),
    );
    assert_eq!(bad.status, 303);
    assert!(bad
        .header("location")
        .unwrap()
        .starts_with("/login?error=invalid_token"));
    assert!(bad.set_cookie("__svc_session").is_none());
    // JSON callers get 401 / 200.
    let jbad = s.raw("POST", "/auth/dev-token", &[], Some(br#"{"token":"x"}"#));
    assert_error(&jbad, 401);
    let jok = s.raw(
        "POST",
        "/auth/dev-token",
        &[],
        Some(format!(r#"{{"token":"{}"}}"#, s.token).as_bytes()),
    );
    assert_eq!(jok.status, 200);
    assert!(jok.set_cookie("__svc_session").is_some());
    // An off-site `next` is ignored.
    let body = format!("token={}&next=https%3A%2F%2Fevil.test%2F", s.token);
    let off = s.raw("POST", "/auth/dev-token", &[FORM], Some(body.as_bytes()));
    assert_eq!(off.header("location"), Some("/"));

    let body = format!("token={}&next=%2Fruns%2Fabc", s.token);
    let r = s.raw("POST", "/auth/dev-token", &[FORM], Some(body.as_bytes()));
    let set = r
        .headers_named("set-cookie")
        .into_iter()
        .find(|c| c.starts_with("__svc_session="))
        .unwrap()
        .to_string();
    for attr in ["Path=/", "HttpOnly", "SameSite=Lax", "Max-Age=2592000"] {
        assert!(set.contains(attr), "{set}");
    }
    assert!(!set.contains("Secure"), "http origin: {set}");
    assert!(
        !set.contains(&s.token) && !set.contains("dev\""),
        "the cookie is encrypted"
    );
    let cookie = r.set_cookie("__svc_session").unwrap();

    let me = with_cookie(&s, "GET", "/api/v1/user", &cookie, &[], None);
    assert_eq!(me.status, 200, "{}", me.text());
    assert_eq!(
        me.json(),
        json!({"login": "dev", "auth_method": "dev_token"})
    );

    // Tampering: any change to the value is refused.
    let mut t: Vec<char> = cookie.chars().collect();
    let i = t.len() / 2;
    t[i] = if t[i] == 'A' { 'B' } else { 'A' };
    let tampered: String = t.into_iter().collect();
    assert_error(
        &with_cookie(&s, "GET", "/api/v1/user", &tampered, &[], None),
        401,
    );
    assert_error(
        &with_cookie(&s, "GET", "/api/v1/user", "garbage", &[], None),
        401,
    );

    // The Authorization header wins over a valid cookie.
    let wrong = format!("Bearer svc_dev_{}", "0".repeat(64));
    let r = with_cookie(
        &s,
        "GET",
        "/api/v1/user",
        &cookie,
        &[("Authorization", &wrong)],
        None,
    );
    assert_error(&r, 401);

    // State changes by cookie need our Origin.
    let create = json!({"workflow": package(HELLO)}).to_string();
    let r = with_cookie(&s, "POST", "/api/v1/runs", &cookie, &[], Some(&create));
    assert_eq!(
        assert_error(&r, 403)["errors"][0]["code"],
        "origin_mismatch"
    );
    let r = with_cookie(
        &s,
        "POST",
        "/api/v1/runs",
        &cookie,
        &[("Origin", "http://evil.test")],
        Some(&create),
    );
    assert_error(&r, 403);
    let r = with_cookie(
        &s,
        "POST",
        "/api/v1/runs",
        &cookie,
        &[("Origin", ORIGIN)],
        Some(&create),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let run = r.json();
    assert_eq!(run["created_by"]["auth_method"], "dev_token");
    assert_eq!(run["created_by"]["login"], "dev");
    // A bearer POST needs no Origin.
    assert_eq!(s.post("/api/v1/runs", &create).status, 201);

    // Sign-out revokes the session: a copy of the cookie stops working, also after a restart.
    let other = sign_in(&s);
    let out = with_cookie(
        &s,
        "POST",
        "/auth/logout",
        &cookie,
        &[("Origin", ORIGIN)],
        None,
    );
    assert_eq!(out.status, 303);
    assert_eq!(out.header("location"), Some("/login"));
    let cleared = out
        .headers_named("set-cookie")
        .into_iter()
        .find(|c| c.starts_with("__svc_session="))
        .unwrap()
        .to_string();
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    assert_error(
        &with_cookie(&s, "GET", "/api/v1/user", &cookie, &[], None),
        401,
    );
    assert_eq!(
        with_cookie(&s, "GET", "/api/v1/user", &other, &[], None).status,
        200
    );

    let dir = s.kill();
    let s = web_server(&web_settings(""), Some(dir));
    assert_error(
        &with_cookie(&s, "GET", "/api/v1/user", &cookie, &[], None),
        401,
    );
    assert_eq!(
        with_cookie(&s, "GET", "/api/v1/user", &other, &[], None).status,
        200
    );
}

#[test]
fn sessions_expire_and_need_the_web_ui() {
    let s = web_server(&web_settings("session_lifetime_secs = 1"), None);
    let cookie = sign_in(&s);
    assert_eq!(
        with_cookie(&s, "GET", "/api/v1/user", &cookie, &[], None).status,
        200
    );
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_error(
        &with_cookie(&s, "GET", "/api/v1/user", &cookie, &[], None),
        401,
    );

    // Without the web UI there are no sessions: the sign-in endpoints are 404 and a cookie is 401.
    let plain = Server::start();
    let body = format!("token={}", plain.token);
    assert_error(
        &plain.raw("POST", "/auth/dev-token", &[FORM], Some(body.as_bytes())),
        404,
    );
    assert_error(
        &with_cookie(&plain, "GET", "/api/v1/user", &cookie, &[], None),
        401,
    );
    let cfg = plain.raw("GET", "/api/v1/auth/config", &[], None).json();
    assert_eq!(cfg["web_enabled"], false);
    assert_eq!(cfg["dev_token_login_url"], json!(null));
}

#[test]
fn web_ui_needs_a_long_session_secret() {
    for secret in [None, Some("too-short")] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("settings.toml"), web_settings("")).unwrap();
        let mut cmd = std::process::Command::new(bin());
        cmd.args(["server", "start", "--listen", "127.0.0.1:0", "--state-dir"])
            .arg(dir.path())
            .env_remove("SESSION_SECRET");
        if let Some(v) = secret {
            cmd.env("SESSION_SECRET", v);
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("SESSION_SECRET"), "{err}");
        assert!(
            !err.contains("too-short"),
            "the secret is never printed: {err}"
        );
    }
}
