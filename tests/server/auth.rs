//! Authentication through the real binary: dev-token sign-in by form, the private session
//! cookie (tampering, expiry, sign-out revocation surviving a restart), the Authorization
//! header beating the cookie, the Origin check, `created_by`, and start failures.

use crate::support::server::*;
use serde_json::{json, Value};

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

    // Without the web UI there are no sessions: the sign-in endpoints are 404 and a cookie is
    // 401. (A configured server without `[server.web]`: `--dev` turns the UI on.)
    let plain = Server::with(Opts {
        dev: false,
        settings: Some("[server.auth]\nmethods = [\"dev-token\"]\n"),
        ..Opts::default()
    });
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
    // Every /auth/* route the OpenAPI document lists answers, with the UI off, a 404 that
    // says why (not a bare "no such route"), and the document says so for each (issue 32).
    let doc = plain.get("/api/v1/openapi.json").json();
    for (method, path) in [
        ("POST", "/auth/dev-token"),
        ("POST", "/auth/logout"),
        ("GET", "/auth/login"),
        ("GET", "/auth/callback"),
    ] {
        let r = plain.raw(method, path, &[FORM], Some(b"".as_slice()));
        let e = assert_error(&r, 404);
        let text = e.to_string();
        assert!(
            text.contains("web_disabled") || text.contains("method_disabled"),
            "{method} {path}: {text}"
        );
        let documented = &doc["paths"][path][method.to_lowercase()]["responses"]["404"];
        assert!(
            documented["description"]
                .as_str()
                .is_some_and(|d| d.contains("off")),
            "{method} {path}: the 404 is not documented: {documented}"
        );
    }
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

// ---------------------------------------------------------------------------------------
// Code-host OAuth against a scripted GitHub (real OAuth web-flow wire format).

use crate::support::llm::{Recorded, Reply, ScriptedServer};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

const CLIENT_ID: &str = "Iv1.test";
const CLIENT_SECRET: &str = "codehost-client-secret-value";

/// A scripted GitHub: `/login/oauth/authorize` approves as `approve_as` and redirects back
/// with a one-time code; `/login/oauth/access_token` (form POST) exchanges it, answering
/// JSON or form encoding by `Accept` as GitHub does; `/user` describes the token's owner.
struct FakeGithub {
    server: ScriptedServer,
    approve_as: Arc<Mutex<String>>,
}

fn query_of(url: &str) -> Vec<(String, String)> {
    let q = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    form_urlencoded::parse(q.as_bytes()).into_owned().collect()
}

fn field(f: &[(String, String)], k: &str) -> String {
    f.iter()
        .find(|(n, _)| n == k)
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

impl FakeGithub {
    fn start() -> FakeGithub {
        let approve_as = Arc::new(Mutex::new("alice".to_string()));
        let used: Arc<Mutex<HashSet<String>>> = Arc::default();
        let who = approve_as.clone();
        let server = ScriptedServer::start_with(move |n, r: &Recorded| {
            let path = r.url.split('?').next().unwrap_or("");
            match (r.method.as_str(), path) {
                ("GET", "/login/oauth/authorize") => {
                    let q = query_of(&r.url);
                    assert_eq!(field(&q, "client_id"), CLIENT_ID);
                    let login = who.lock().unwrap().clone();
                    let loc = format!(
                        "{}?code=code-{login}-{n}&state={}",
                        field(&q, "redirect_uri"),
                        field(&q, "state")
                    );
                    Reply {
                        status: 302,
                        headers: vec![("Location".into(), loc)],
                        body: String::new(),
                    }
                }
                ("POST", "/login/oauth/access_token") => {
                    let body = r.body.as_str().unwrap_or("").to_string();
                    let f: Vec<(String, String)> = form_urlencoded::parse(body.as_bytes())
                        .into_owned()
                        .collect();
                    let code = field(&f, "code");
                    let ok = field(&f, "client_id") == CLIENT_ID
                        && field(&f, "client_secret") == CLIENT_SECRET
                        && code.starts_with("code-")
                        && used.lock().unwrap().insert(code.clone());
                    let json = r.header("accept").is_some_and(|a| a.contains("json"));
                    let login = code
                        .trim_start_matches("code-")
                        .rsplit_once('-')
                        .map(|x| x.0)
                        .unwrap_or("");
                    let pairs: Vec<(&str, String)> = if ok {
                        vec![
                            ("access_token", format!("gho_{login}")),
                            ("scope", String::new()),
                            ("token_type", "bearer".into()),
                        ]
                    } else {
                        vec![
                            ("error", "bad_verification_code".into()),
                            (
                                "error_description",
                                "The code passed is incorrect or expired.".into(),
                            ),
                        ]
                    };
                    if json {
                        let m: serde_json::Map<String, serde_json::Value> = pairs
                            .into_iter()
                            .map(|(k, v)| (k.to_string(), json!(v)))
                            .collect();
                        Reply::json(serde_json::Value::Object(m))
                    } else {
                        let mut s = form_urlencoded::Serializer::new(String::new());
                        for (k, v) in &pairs {
                            s.append_pair(k, v);
                        }
                        Reply {
                            status: 200,
                            headers: vec![(
                                "content-type".into(),
                                "application/x-www-form-urlencoded".into(),
                            )],
                            body: s.finish(),
                        }
                    }
                }
                ("GET", "/user") => {
                    let login = r
                        .header("authorization")
                        .and_then(|a| a.strip_prefix("Bearer gho_"))
                        .unwrap_or("")
                        .to_string();
                    if login.is_empty() {
                        return Reply::error(
                            401,
                            json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"}),
                        );
                    }
                    let id = 1000 + login.len() as u64;
                    Reply::json(json!({
                        "login": login, "id": id, "node_id": "MDQ6VXNlcjE=",
                        "avatar_url": format!("https://avatars.example/u/{id}?v=4"),
                        "html_url": format!("https://github.com/{login}"),
                        "type": "User", "site_admin": false, "name": null
                    }))
                }
                _ => Reply::error(404, json!({"message": "Not Found"})),
            }
        });
        FakeGithub { server, approve_as }
    }
}

fn no_redirects() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .max_redirects(0)
            .http_status_as_error(false)
            .build(),
    )
}

fn codehost_server(gh: &FakeGithub, methods: &str, allowed: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let st = std::process::Command::new(bin())
        .args([
            "secrets",
            "set",
            "CODEHOST_CLIENT_SECRET",
            CLIENT_SECRET,
            "--state-dir",
        ])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(st.success());
    let settings = format!(
        "[server.web]\nenabled = true\nurl = \"{ORIGIN}\"\n[server.auth]\nmethods = {methods}\n\
         [server.auth.codehost]\nweb_url = \"{0}\"\napi_url = \"{0}\"\nclient_id = \"{CLIENT_ID}\"\n\
         allowed_usernames = {allowed}\n",
        gh.server.base
    );
    web_server(&settings, Some(dir))
}

/// Runs the browser's part of the sign-in as `login`: returns the callback's response.
fn oauth_round_trip(s: &Server, gh: &FakeGithub, login: &str) -> Resp {
    oauth_round_trip_to(s, gh, login, "%2Fruns")
}

/// [`oauth_round_trip`] with `next` (as written in the query string) on `/auth/login`.
fn oauth_round_trip_to(s: &Server, gh: &FakeGithub, login: &str, next: &str) -> Resp {
    *gh.approve_as.lock().unwrap() = login.to_string();
    let start = s.raw("GET", &format!("/auth/login?next={next}"), &[], None);
    assert_eq!(start.status, 302, "{}", start.text());
    let authorize = start.header("location").unwrap().to_string();
    assert!(authorize.starts_with(&format!("{}/login/oauth/authorize?", gh.server.base)));
    let q = query_of(&authorize);
    assert_eq!(field(&q, "redirect_uri"), format!("{ORIGIN}/auth/callback"));
    let state_cookie = start.set_cookie("__svc_oauth_state").expect("state cookie");
    // The browser visits the code host, which sends it back to our callback.
    let back = no_redirects().get(&authorize).call().unwrap();
    assert_eq!(back.status().as_u16(), 302);
    let back = back
        .headers()
        .get("location")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let path = back.strip_prefix(ORIGIN).unwrap().to_string();
    let c = format!("__svc_oauth_state={state_cookie}");
    s.raw("GET", &path, &[("Cookie", &c)], None)
}

#[test]
fn codehost_oauth_round_trip_allowed_and_refused_users() {
    let gh = FakeGithub::start();
    let s = codehost_server(&gh, "[\"codehost\"]", "[\"alice\"]");
    let cfg = s.raw("GET", "/api/v1/auth/config", &[], None).json();
    assert_eq!(cfg["codehost_login_url"], "/auth/login");
    assert_eq!(cfg["dev_token_login_url"], json!(null));

    let done = oauth_round_trip(&s, &gh, "alice");
    assert_eq!(done.status, 303, "{}", done.text());
    assert_eq!(done.header("location"), Some("/runs"));
    let cookie = done.set_cookie("__svc_session").expect("session");
    let me = with_cookie(&s, "GET", "/api/v1/user", &cookie, &[], None).json();
    assert_eq!(me["login"], "alice");
    assert_eq!(me["auth_method"], "codehost");
    assert_eq!(me["avatar_url"], "https://avatars.example/u/1005?v=4");
    let create = json!({"workflow": package(HELLO)}).to_string();
    let r = with_cookie(
        &s,
        "POST",
        "/api/v1/runs",
        &cookie,
        &[("Origin", ORIGIN)],
        Some(&create),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let by = &r.json()["created_by"];
    assert_eq!(by["auth_method"], "codehost");
    assert_eq!(by["login"], "alice");
    assert_eq!(by["identity"]["issuer"], gh.server.base.as_str());
    assert_eq!(by["identity"]["subject"], "1005");

    // The code exchange used the vault's secret, form-encoded, asking for JSON.
    let reqs = gh.server.requests();
    let ex = reqs
        .iter()
        .find(|r| r.url.starts_with("/login/oauth/access_token"))
        .unwrap();
    assert!(ex
        .header("content-type")
        .unwrap()
        .starts_with("application/x-www-form-urlencoded"));
    assert!(ex
        .body
        .as_str()
        .unwrap()
        .contains("client_secret=codehost-client-secret-value"));
    assert!(
        !s.stderr().contains(CLIENT_SECRET),
        "the secret is never logged"
    );

    // Someone outside allowed_usernames: 403 with the error body and no session.
    let refused = oauth_round_trip(&s, &gh, "mallory");
    let b = assert_error(&refused, 403);
    assert_eq!(b["errors"][0]["code"], "user_not_allowed");
    assert!(refused.set_cookie("__svc_session").is_none());

    // The state must come back to the browser that started the flow.
    *gh.approve_as.lock().unwrap() = "alice".into();
    let start = s.raw("GET", "/auth/login", &[], None);
    let authorize = start.header("location").unwrap().to_string();
    let back = no_redirects().get(&authorize).call().unwrap();
    let back = back
        .headers()
        .get("location")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let path = back.strip_prefix(ORIGIN).unwrap().to_string();
    assert_error(&s.raw("GET", &path, &[], None), 400);
    let other = s
        .raw("GET", "/auth/login", &[], None)
        .set_cookie("__svc_oauth_state")
        .unwrap();
    let c = format!("__svc_oauth_state={other}");
    assert_error(&s.raw("GET", &path, &[("Cookie", &c)], None), 400);
    // A code is good once: the right state but a used code is refused by the code host.
    let mine = start.set_cookie("__svc_oauth_state").unwrap();
    let c = format!("__svc_oauth_state={mine}");
    assert_eq!(s.raw("GET", &path, &[("Cookie", &c)], None).status, 303);
    assert_error(&s.raw("GET", &path, &[("Cookie", &c)], None), 401);
    // The user denied access at the code host.
    let denied = s.raw(
        "GET",
        "/auth/callback?error=access_denied&state=x",
        &[("Cookie", &c)],
        None,
    );
    assert_error(&denied, 401);

    // Taking alice off the list locks her session out at once (settings are live).
    std::fs::write(
        s.path().join("settings.toml"),
        std::fs::read_to_string(s.path().join("settings.toml"))
            .unwrap()
            .replace("[\"alice\"]", "[\"bob\"]"),
    )
    .unwrap();
    wait_for(10, "allowed list reload", || {
        (with_cookie(&s, "GET", "/api/v1/user", &cookie, &[], None).status == 403).then_some(())
    });
}

// ---------------------------------------------------------------------------------------
// Ed25519 JWT bearer tokens.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use ed25519_dalek::pkcs8::EncodePublicKey;
use ed25519_dalek::{Signer, SigningKey};

fn jwt(key: &SigningKey, iss: &str, sub: &str, iat: i64, exp: i64) -> String {
    jwt_with(
        key,
        &json!({"alg": "EdDSA", "typ": "JWT"}),
        &json!({"iss": iss, "sub": sub, "iat": iat, "exp": exp}),
    )
}

/// A token with any header and claims, signed by `key`.
fn jwt_with(key: &SigningKey, header: &Value, claims: &Value) -> String {
    let h = URL_SAFE_NO_PAD.encode(header.to_string());
    let p = URL_SAFE_NO_PAD.encode(claims.to_string());
    let sig = key.sign(format!("{h}.{p}").as_bytes());
    format!("{h}.{p}.{}", URL_SAFE_NO_PAD.encode(sig.to_bytes()))
}

/// Issue 33's JWT table: `sub` must be one user's URL on the configured code host (the last
/// path segment of any URL is not enough), the lifetime is capped (`exp` of 2^64-1 and
/// `iat` of 0 refused), and a `crit` header svc does not understand is refused.
#[test]
fn jwt_subjects_lifetimes_and_crit_headers() {
    let key = SigningKey::from_bytes(&[12u8; 32]);
    let pem = key
        .verifying_key()
        .to_public_key_pem(Default::default())
        .unwrap();
    let settings = "[server.auth]\nmethods = [\"codehost\"]\njwt_max_lifetime_secs = 3600\n[server.auth.codehost]\nallowed_usernames = [\"alice\", \"bob\"]\n";
    let s = Server::with(Opts {
        settings: Some(settings),
        dev: false,
        env: vec![("SVC_JWT_PUBLIC_KEY", STANDARD.encode(&pem))],
        ..Opts::default()
    });
    let t = now();
    let user = |tok: &str| {
        let a = format!("Bearer {tok}");
        s.raw("GET", "/api/v1/user", &[("Authorization", &a)], None)
    };
    let hdr = json!({"alg": "EdDSA", "typ": "JWT"});
    let claims = |sub: &str, iat: Value, exp: Value| json!({"iss": "svc-web", "sub": sub, "iat": iat, "exp": exp});
    let ok = |sub: &str| claims(sub, json!(t), json!(t + 300));
    let me = user(&jwt_with(&key, &hdr, &ok("https://github.com/alice")));
    assert_eq!(me.status, 200, "{}", me.text());
    assert_eq!(me.json()["login"], "alice");
    for sub in [
        "https://evil.example/x/alice",
        "https://github.com/bob?u=/alice",
        "https://github.com/bob/alice",
        "https://github.com.evil.example/alice",
        "http://github.com/alice",
        "https://github.com:444/alice",
        "https://alice@github.com/bob",
        "https://github.com/alice/",
        "https://github.com/",
        "alice",
    ] {
        let r = user(&jwt_with(&key, &hdr, &ok(sub)));
        assert_eq!(
            assert_error(&r, 401)["errors"][0]["code"],
            "access_token_invalid",
            "{sub}"
        );
    }
    // Lifetimes: the cap (3600 s here), iat 0, exp 2^64-1.
    for (iat, exp) in [
        (json!(t), json!(t + 3601)),
        (json!(0), json!(t + 300)),
        (json!(t), json!(u64::MAX)),
        (json!(0), json!(u64::MAX)),
    ] {
        let r = user(&jwt_with(
            &key,
            &hdr,
            &claims("https://github.com/alice", iat.clone(), exp.clone()),
        ));
        assert_error(&r, 401);
        assert_ne!(
            r.json()["errors"][0]["code"],
            "user_not_allowed",
            "{iat} {exp}"
        );
    }
    let exactly = claims("https://github.com/alice", json!(t), json!(t + 3600));
    assert_eq!(user(&jwt_with(&key, &hdr, &exactly)).status, 200);
    // Clock skew: issued 30 s in the future is fine, 10 minutes is not.
    let skewed = claims("https://github.com/alice", json!(t + 30), json!(t + 330));
    assert_eq!(user(&jwt_with(&key, &hdr, &skewed)).status, 200);
    let future = claims("https://github.com/alice", json!(t + 600), json!(t + 900));
    assert_error(&user(&jwt_with(&key, &hdr, &future)), 401);
    // crit: svc understands no extension.
    for crit in [json!(["exp"]), json!(["b64"]), json!(["x-unknown"])] {
        let h = json!({"alg": "EdDSA", "typ": "JWT", "crit": crit, "x-unknown": 1, "b64": true});
        let r = user(&jwt_with(&key, &h, &ok("https://github.com/alice")));
        assert_error(&r, 401);
    }
    // The code host's URL is the setting's: changing it live changes whose URLs count.
    std::fs::write(
        s.path().join("settings.toml"),
        settings.replace(
            "[server.auth.codehost]\n",
            "[server.auth.codehost]\nweb_url = \"https://git.example.com\"\n",
        ),
    )
    .unwrap();
    let gh = jwt_with(&key, &hdr, &ok("https://github.com/alice"));
    wait_for(10, "web_url reload", || {
        (user(&gh).status == 401).then_some(())
    });
    let own = user(&jwt_with(&key, &hdr, &ok("https://git.example.com/bob")));
    assert_eq!(own.status, 200, "{}", own.text());
    assert_eq!(own.json()["login"], "bob");
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[test]
fn ed25519_jwt_bearer() {
    let key = SigningKey::from_bytes(&[9u8; 32]);
    let pem = key
        .verifying_key()
        .to_public_key_pem(Default::default())
        .unwrap();
    let settings = "[server.auth]\nmethods = [\"dev-token\", \"codehost\"]\n[server.auth.codehost]\nallowed_usernames = [\"alice\"]\n";
    let s = Server::with(Opts {
        settings: Some(settings),
        dev: false,
        env: vec![("SVC_JWT_PUBLIC_KEY", STANDARD.encode(&pem))],
        ..Opts::default()
    });
    let t = now();
    let call = |tok: &str| {
        let a = format!("Bearer {tok}");
        s.raw("GET", "/api/v1/user", &[("Authorization", &a)], None)
    };
    let ok = jwt(&key, "svc-web", "https://github.com/alice", t, t + 300);
    let me = call(&ok);
    assert_eq!(me.status, 200, "{}", me.text());
    assert_eq!(me.json()["login"], "alice");
    assert_eq!(me.json()["auth_method"], "codehost");
    let create = json!({"workflow": package(HELLO)}).to_string();
    let a = format!("Bearer {ok}");
    let r = s.raw(
        "POST",
        "/api/v1/runs",
        &[("Authorization", &a)],
        Some(create.as_bytes()),
    );
    assert_eq!(r.status, 201);
    assert_eq!(r.json()["created_by"]["login"], "alice");
    assert_eq!(
        r.json()["created_by"]["identity"]["subject"],
        "https://github.com/alice"
    );

    let expired = call(&jwt(
        &key,
        "svc-web",
        "https://github.com/alice",
        t - 7200,
        t - 3600,
    ));
    assert_eq!(
        assert_error(&expired, 401)["errors"][0]["code"],
        "access_token_expired"
    );
    assert_error(
        &call(&jwt(
            &key,
            "someone-else",
            "https://github.com/alice",
            t,
            t + 300,
        )),
        401,
    );
    let other = SigningKey::from_bytes(&[10u8; 32]);
    assert_error(
        &call(&jwt(
            &other,
            "svc-web",
            "https://github.com/alice",
            t,
            t + 300,
        )),
        401,
    );
    let b = assert_error(
        &call(&jwt(&key, "svc-web", "https://github.com/bob", t, t + 300)),
        403,
    );
    assert_eq!(b["errors"][0]["code"], "user_not_allowed");
    // The dev token still works alongside.
    assert_eq!(s.get("/api/v1/user").status, 200);

    // Without codehost among the methods a JWT is not accepted.
    std::fs::write(
        s.path().join("settings.toml"),
        "[server.auth]\nmethods = [\"dev-token\"]\n",
    )
    .unwrap();
    wait_for(10, "methods reload", || {
        (call(&ok).status == 401).then_some(())
    });

    // A PEM key given directly works too; a bad key stops the start.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("settings.toml"), settings).unwrap();
    let out = std::process::Command::new(bin())
        .args(["server", "start", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(dir.path())
        .env("SVC_JWT_PUBLIC_KEY", "not a key")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SVC_JWT_PUBLIC_KEY"));
    let s2 = Server::with(Opts {
        settings: Some(settings),
        dev: false,
        env: vec![("SVC_JWT_PUBLIC_KEY", pem.clone())],
        ..Opts::default()
    });
    let a = format!("Bearer {ok}");
    assert_eq!(
        s2.raw("GET", "/api/v1/user", &[("Authorization", &a)], None)
            .status,
        200
    );
}

// ---------------------------------------------------------------------------------------
// The 401/403 matrix over every route of the OpenAPI document.

#[test]
fn every_documented_route_answers_401_and_403() {
    let key = SigningKey::from_bytes(&[11u8; 32]);
    let pem = key
        .verifying_key()
        .to_public_key_pem(Default::default())
        .unwrap();
    let settings = format!(
        "[server.web]\nenabled = true\nurl = \"{ORIGIN}\"\n[server.auth]\nmethods = [\"dev-token\", \"codehost\"]\n\
         [server.auth.codehost]\nallowed_usernames = [\"alice\"]\n"
    );
    let s = Server::with(Opts {
        settings: Some(&settings),
        dev: false,
        env: vec![
            ("SESSION_SECRET", SECRET.to_string()),
            ("SVC_JWT_PUBLIC_KEY", pem),
        ],
        ..Opts::default()
    });
    let cookie = sign_in(&s);
    let t = now();
    let expired = format!(
        "Bearer {}",
        jwt(
            &key,
            "svc-web",
            "https://github.com/alice",
            t - 7200,
            t - 3600
        )
    );
    let outsider = format!(
        "Bearer {}",
        jwt(&key, "svc-web", "https://github.com/mallory", t, t + 300)
    );
    let wrong_dev = format!("Bearer svc_dev_{}", "f".repeat(64));
    let mut tampered = cookie.clone();
    tampered.insert(4, 'x');
    let tampered = format!("__svc_session={tampered}");
    let good_cookie = format!("__svc_session={cookie}");

    let doc = s.raw("GET", "/api/v1/openapi.json", &[], None).json();
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let method = method.to_uppercase();
            let concrete = path
                .replace("{id}", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
                .replace("{qid}", "q");
            let body = (method == "POST").then_some(b"{}".as_slice());
            let public = op["security"].as_array().unwrap().is_empty();
            let hit = |h: &[(&str, &str)]| s.raw(&method, &concrete, h, body);
            if public {
                // The sign-in endpoints and webhooks (signed deliveries) judge the credentials
                // they are given themselves.
                if !path.starts_with("/auth/") && !path.starts_with("/api/v1/webhooks/") {
                    assert_ne!(hit(&[]).status, 401, "{method} {path} is public");
                }
                continue;
            }
            checked += 1;
            let responses = &op["responses"];
            assert!(
                responses["401"].is_object() && responses["403"].is_object(),
                "{method} {path}"
            );
            for (what, headers) in [
                ("no credentials", vec![]),
                (
                    "wrong dev token",
                    vec![("Authorization", wrong_dev.as_str())],
                ),
                ("expired JWT", vec![("Authorization", expired.as_str())]),
                ("tampered cookie", vec![("Cookie", tampered.as_str())]),
                ("bad scheme", vec![("Authorization", "Basic Zm9vOmJhcg==")]),
            ] {
                let r = hit(&headers);
                assert_eq!(r.status, 401, "{what}: {method} {path}: {}", r.text());
                assert_error(&r, 401);
            }
            let r = hit(&[("Authorization", outsider.as_str())]);
            assert_eq!(r.status, 403, "outsider: {method} {path}: {}", r.text());
            assert_error(&r, 403);
            if method != "GET" {
                let r = hit(&[
                    ("Cookie", good_cookie.as_str()),
                    ("Origin", "http://evil.test"),
                ]);
                assert_eq!(r.status, 403, "cross-site: {method} {path}");
                assert_error(&r, 403);
            }
        }
    }
    assert!(checked >= 30, "only {checked} protected operations");
}

// ---------------------------------------------------------------------------------------
// Closed redirects: `next` after signing in.

/// Hostile `next` values as a form or query string carries them (percent-encoded once):
/// tab, backslash, `//`, `%2F%2F`, `/\`, scheme-relative, absolute URLs, encoded CR/LF.
const HOSTILE_NEXT: [&str; 16] = [
    "%2F%09%2F127.0.0.1:38201%2Fx",
    "%2F%5C127.0.0.1:38201%2Fx",
    "%5C%5C127.0.0.1:38201",
    "%2F%2F127.0.0.1:38201%2Fx",
    "%2F%252F127.0.0.1:38201",
    "%252F%252F127.0.0.1:38201",
    "%2F%255C127.0.0.1:38201",
    "%2F%0D%0A%2F127.0.0.1:38201",
    "%2F%0A%2F127.0.0.1:38201",
    "%2F%250D%250A%2F127.0.0.1:38201",
    "http%3A%2F%2F127.0.0.1:38201%2Fx",
    "https%3A127.0.0.1:38201",
    "javascript%3Aalert(1)",
    "%2F%20%2F127.0.0.1:38201",
    "runs",
    "",
];

#[test]
fn hostile_next_values_land_on_the_root() {
    let s = web_server(&web_settings(""), None);
    for next in HOSTILE_NEXT {
        // A right token: 303 to `/`.
        let body = format!("token={}&next={next}", s.token);
        let r = s.raw("POST", "/auth/dev-token", &[FORM], Some(body.as_bytes()));
        assert_eq!(r.status, 303, "{next}: {}", r.text());
        assert_eq!(r.header("location"), Some("/"), "{next}");
        // A wrong one: back to the sign-in page, carrying `/`, not the hostile value.
        let body = format!("token=wrong&next={next}");
        let r = s.raw("POST", "/auth/dev-token", &[FORM], Some(body.as_bytes()));
        assert_eq!(
            r.header("location"),
            Some("/login?error=invalid_token&next=%2F"),
            "{next}"
        );
    }
    // A local path survives both.
    let body = format!("token={}&next=%2Fruns%3Fpage%3D2", s.token);
    let r = s.raw("POST", "/auth/dev-token", &[FORM], Some(body.as_bytes()));
    assert_eq!(r.header("location"), Some("/runs?page=2"));

    // The OAuth flow binds `next` at /auth/login and redirects there after the callback.
    let gh = FakeGithub::start();
    let s = codehost_server(&gh, "[\"codehost\"]", "[\"alice\"]");
    for next in HOSTILE_NEXT {
        let done = oauth_round_trip_to(&s, &gh, "alice", next);
        assert_eq!(done.status, 303, "{next}: {}", done.text());
        assert_eq!(done.header("location"), Some("/"), "{next}");
    }
}
