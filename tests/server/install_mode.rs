//! Install mode through the real binary: the first start without settings prints the
//! install URL and token and serves only the wizard; the whole wizard is driven over HTTP
//! (pages fetched, LLM key tested against a scripted provider, object store on local disk
//! or a scripted S3-compatible bucket checked with a signed request); finish writes the
//! settings and the vault and the process exits 0; the second start boots configured.

use crate::support;
use crate::support::llm::{Recorded, Reply, ScriptedServer};
use crate::support::server::*;
use serde_json::{json, Value};
use svc::internal::llm::{Provider, Usage};
use svc::internal::test_tools::{require, Tool};

fn install_server(dir: Option<tempfile::TempDir>) -> (Server, String) {
    let s = Server::with(Opts {
        dev: false,
        dir,
        ..Opts::default()
    });
    let token = s
        .banner
        .iter()
        .find_map(|l| l.strip_prefix("svc: install token: "))
        .unwrap_or_else(|| panic!("no install token in {:?}", s.banner))
        .to_string();
    let url = s
        .banner
        .iter()
        .find_map(|l| l.strip_prefix("svc: install URL: "))
        .expect("install URL");
    assert!(url.ends_with(&format!("/install?token={token}")), "{url}");
    assert_eq!(token.len(), 43, "32 bytes, base64url without padding");
    (s, token)
}

fn call(s: &Server, token: &str, method: &str, path: &str, body: Option<Value>) -> Resp {
    let b = body.map(|v| v.to_string());
    s.raw(
        method,
        path,
        &[("X-Install-Token", token)],
        b.as_deref().map(str::as_bytes),
    )
}

fn wait_exit(s: &mut Server) -> i32 {
    wait_for(15, "the install process to exit", || {
        s.child.try_wait().ok().flatten()
    })
    .code()
    .unwrap_or(-1)
}

#[test]
fn wizard_end_to_end_then_configured_start() {
    let (mut s, token) = install_server(None);
    let h = s.raw("GET", "/health", &[], None);
    assert_eq!(h.json(), json!({"status": "ok", "mode": "install"}));
    assert_error(&s.raw("GET", "/api/v1/runs", &[], None), 404);
    assert_error(&s.raw("GET", "/api/v1/openapi.json", &[], None), 404);

    // Every /install call needs the token, in any of its three forms.
    assert_error(&s.raw("GET", "/install/session", &[], None), 401);
    assert_error(&s.raw("GET", "/install?token=nope", &[], None), 401);
    assert_error(&call(&s, "wrong", "GET", "/install/session", None), 401);
    assert_eq!(
        call(&s, &token, "GET", "/install/session", None).status,
        200
    );
    let bearer = format!("Bearer {token}");
    assert_eq!(
        s.raw(
            "GET",
            "/install/session",
            &[("Authorization", &bearer)],
            None
        )
        .status,
        200
    );
    assert_eq!(
        s.raw("GET", &format!("/install/session?token={token}"), &[], None)
            .status,
        200
    );

    // The pages: self-contained HTML, one per step.
    for page in [
        "/install",
        "/install/object-store",
        "/install/llm",
        "/install/codehost",
        "/install/finish",
    ] {
        let r = s.raw("GET", &format!("{page}?token={token}"), &[], None);
        assert_eq!(r.status, 200, "{page}");
        assert!(r.header("content-type").unwrap().starts_with("text/html"));
        let html = r.text();
        assert!(
            html.contains("Install svc") && html.contains("<button"),
            "{page}"
        );
        assert!(
            !html.contains("src=\"http") && !html.contains("href=\"http"),
            "no external assets: {page}"
        );
    }

    // Finish before the steps: 422 naming the first incomplete step.
    let e = assert_error(&call(&s, &token, "POST", "/install/finish", None), 422);
    assert!(e["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("'server'"));

    assert_error(
        &call(
            &s,
            &token,
            "PUT",
            "/install/server",
            Some(json!({"canonical_url": "svc.test"})),
        ),
        422,
    );
    let r = call(
        &s,
        &token,
        "PUT",
        "/install/server",
        Some(
            json!({"canonical_url": "http://svc.test/", "auth_methods": ["dev-token", "codehost"]}),
        ),
    );
    assert_eq!(r.status, 204, "{}", r.text());

    let objects = s.path().join("objects");
    let r = call(
        &s,
        &token,
        "PUT",
        "/install/object-store",
        Some(json!({"provider": "local", "root": objects})),
    );
    assert_eq!(r.status, 204, "{}", r.text());
    assert!(objects.is_dir());

    // The LLM key is tested with one real call to the provider endpoint.
    let good = ScriptedServer::start(vec![support::llm::reply(
        Provider::Anthropic,
        &support::llm::text("OK"),
        Usage::default(),
        false,
    )]);
    let key = json!({"provider": "anthropic", "api_key": "sk-ant-install-test-key", "base_url": good.base});
    let r = call(&s, &token, "POST", "/install/llm/test", Some(key.clone()));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(good.count(), 1);
    assert_eq!(
        good.requests()[0].header("x-api-key"),
        Some("sk-ant-install-test-key")
    );
    let bad = ScriptedServer::start(vec![Reply::error(
        401,
        json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
    )]);
    let r = call(
        &s,
        &token,
        "POST",
        "/install/llm/test",
        Some(json!({"provider": "anthropic", "api_key": "sk-wrong-key-123", "base_url": bad.base})),
    );
    let e = assert_error(&r, 422);
    assert!(
        !e.to_string().contains("sk-wrong-key-123"),
        "no key in errors"
    );
    assert_eq!(
        call(
            &s,
            &token,
            "PUT",
            "/install/llm",
            Some(json!({"providers": [key]}))
        )
        .status,
        204
    );

    // Code-host sign-in was chosen, so skipping the OAuth app leaves finish incomplete.
    assert_eq!(
        call(
            &s,
            &token,
            "PUT",
            "/install/codehost",
            Some(json!({"skip": true}))
        )
        .status,
        204
    );
    let e = assert_error(&call(&s, &token, "POST", "/install/finish", None), 422);
    assert!(e["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("'codehost'"));
    let r = call(
        &s,
        &token,
        "PUT",
        "/install/codehost",
        Some(
            json!({"client_id": "Iv1.abc", "client_secret": "oauth-client-secret-xyz", "allowed_usernames": ["alice"]}),
        ),
    );
    assert_eq!(r.status, 204, "{}", r.text());

    let session = call(&s, &token, "GET", "/install/session", None);
    let text = session.text();
    assert!(!text.contains("sk-ant-install-test-key") && !text.contains("oauth-client-secret-xyz"));
    assert_eq!(
        session.json()["completed_steps"],
        json!(["server", "object_store", "llm", "codehost"])
    );

    let done = call(&s, &token, "POST", "/install/finish", None);
    assert_eq!(done.status, 202, "{}", done.text());
    let dev_token = done.json()["dev_token"].as_str().unwrap().to_string();
    assert!(dev_token.starts_with("svc_dev_"));
    assert_eq!(wait_exit(&mut s), 0);

    let dir = s.kill();
    let settings = std::fs::read_to_string(dir.path().join("settings.toml")).unwrap();
    for secret in [
        "sk-ant-install-test-key",
        "oauth-client-secret-xyz",
        &dev_token,
    ] {
        assert!(!settings.contains(secret), "secret in settings.toml");
    }
    assert!(settings.contains("codehost") && settings.contains("http://svc.test"));
    let vault: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("secrets.json")).unwrap()).unwrap();
    assert_eq!(
        vault["ANTHROPIC_API_KEY"]["value"],
        "sk-ant-install-test-key"
    );
    assert_eq!(
        vault["CODEHOST_CLIENT_SECRET"]["value"],
        "oauth-client-secret-xyz"
    );
    assert_eq!(vault["SESSION_SECRET"]["value"].as_str().unwrap().len(), 64);

    // The second start boots configured, with the chosen methods.
    let s = Server::with(Opts {
        dev: false,
        dir: Some(dir),
        env: vec![],
        ..Opts::default()
    });
    assert_eq!(s.token, dev_token);
    assert_eq!(
        s.raw("GET", "/health", &[], None).json(),
        json!({"status": "ok"})
    );
    assert_eq!(s.get("/api/v1/user").status, 200);
    let cfg = s.raw("GET", "/api/v1/auth/config", &[], None).json();
    assert_eq!(cfg["methods"], json!(["dev-token", "codehost"]));
    assert_eq!(cfg["codehost_login_url"], "/auth/login");
    assert_error(&s.raw("GET", "/install/session", &[], None), 404);
}

/// A scripted S3-compatible bucket: accepts SigV4-signed PUT/DELETE from `AKIDTEST`.
fn fake_s3() -> ScriptedServer {
    ScriptedServer::start_with(|_, r: &Recorded| {
        let auth = r.header("authorization").unwrap_or("");
        let signed = auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDTEST/")
            && auth.contains("/eu-west-1/s3/aws4_request")
            && auth.contains("SignedHeaders=host;x-amz-content-sha256;x-amz-date")
            && r.header("x-amz-date").is_some()
            && r.header("x-amz-content-sha256")
                .is_some_and(|h| h.len() == 64);
        if !signed {
            return Reply {
                status: 403,
                headers: vec![("content-type".into(), "application/xml".into())],
                body: "<?xml version=\"1.0\"?><Error><Code>InvalidAccessKeyId</Code><Message>The AWS Access Key Id you provided does not exist.</Message></Error>".into(),
            };
        }
        let status = match r.method.as_str() {
            "PUT" => 200,
            "DELETE" => 204,
            _ => 405,
        };
        Reply {
            status,
            headers: vec![],
            body: String::new(),
        }
    })
}

#[test]
fn s3_object_store_and_skipped_steps() {
    let s3 = fake_s3();
    let (mut s, token) = install_server(None);
    let store = |akid: &str| {
        json!({"provider": "s3", "bucket": "team-bucket", "region": "eu-west-1", "endpoint": s3.base,
               "path_style": true, "access_key_id": akid, "secret_access_key": "s3-secret-key-value"})
    };
    let e = assert_error(
        &call(
            &s,
            &token,
            "POST",
            "/install/object-store/test",
            Some(store("WRONG")),
        ),
        422,
    );
    assert!(e["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("InvalidAccessKeyId"));
    let r = call(
        &s,
        &token,
        "POST",
        "/install/object-store/test",
        Some(store("AKIDTEST")),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let reqs = s3.requests();
    let put = reqs.iter().rev().find(|r| r.method == "PUT").unwrap();
    assert!(
        put.url.starts_with("/team-bucket/svc-install-check-"),
        "{}",
        put.url
    );
    assert!(reqs
        .iter()
        .any(|r| r.method == "DELETE" && r.url == put.url));
    assert_eq!(
        call(
            &s,
            &token,
            "PUT",
            "/install/object-store",
            Some(store("AKIDTEST"))
        )
        .status,
        204
    );
    assert_eq!(
        call(
            &s,
            &token,
            "PUT",
            "/install/server",
            Some(json!({"canonical_url": "https://svc.example.com"}))
        )
        .status,
        204
    );
    assert_eq!(
        call(
            &s,
            &token,
            "PUT",
            "/install/llm",
            Some(json!({"skip": true}))
        )
        .status,
        204
    );
    assert_eq!(
        call(
            &s,
            &token,
            "PUT",
            "/install/codehost",
            Some(json!({"skip": true}))
        )
        .status,
        204
    );
    // A failing finish keeps nothing and says which env keys it touched (none: no env file).
    let vault_path = s.path().join("secrets.json");
    std::fs::create_dir(&vault_path).unwrap();
    let failed = call(&s, &token, "POST", "/install/finish", None);
    let b = assert_error(&failed, 500);
    assert_eq!(b["leftover_env_keys"], json!([]));
    assert_eq!(b["removed_env_keys"], json!([]));
    assert!(!s.path().join("settings.toml").exists());
    assert!(!s.path().join("dev-token").exists());
    std::fs::remove_dir(&vault_path).unwrap();
    assert_eq!(
        call(&s, &token, "POST", "/install/finish", None).status,
        202
    );
    assert_eq!(wait_exit(&mut s), 0);
    let dir = s.kill();
    let vault: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("secrets.json")).unwrap()).unwrap();
    let names: Vec<&String> = vault.as_object().unwrap().keys().collect();
    assert!(
        !names.iter().any(|n| n.ends_with("_API_KEY")),
        "a skipped LLM step stores no LLM credentials: {names:?}"
    );
    assert_eq!(
        vault["OBJECT_STORE_SECRET_ACCESS_KEY"]["value"],
        "s3-secret-key-value"
    );
    let settings = std::fs::read_to_string(dir.path().join("settings.toml")).unwrap();
    assert!(settings.contains("provider = \"s3\"") && !settings.contains("s3-secret-key-value"));
    let s = Server::with(Opts {
        dev: false,
        dir: Some(dir),
        ..Opts::default()
    });
    assert_eq!(s.get("/api/v1/user").status, 200);
}

/// Issue 33: the wizard's pages cannot be framed or run foreign script, and wrong install
/// tokens are logged and, past ten a minute from one address, refused before the token is
/// even compared.
#[test]
fn install_pages_are_locked_down_and_token_guesses_are_limited() {
    let (s, token) = install_server(None);
    for page in [
        "/install",
        "/install/object-store",
        "/install/llm",
        "/install/codehost",
        "/install/finish",
    ] {
        let r = s.raw("GET", &format!("{page}?token={token}"), &[], None);
        assert_eq!(r.status, 200, "{page}");
        assert_eq!(r.header("x-frame-options"), Some("DENY"), "{page}");
        let csp = r.header("content-security-policy").expect("CSP");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(csp.contains("default-src 'none'"), "{csp}");
        assert!(csp.contains("connect-src 'self'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
    }
    for i in 0..10 {
        let r = call(&s, &format!("guess-{i}"), "GET", "/install/session", None);
        assert_eq!(
            assert_error(&r, 401)["errors"][0]["code"],
            "invalid_install_token"
        );
    }
    // Over the limit: refused whatever the token, so a guess learns nothing.
    for t in ["guess-11", token.as_str()] {
        let r = call(&s, t, "GET", "/install/session", None);
        assert_eq!(
            assert_error(&r, 429)["errors"][0]["code"],
            "too_many_attempts"
        );
    }
    let log = s.stderr();
    assert_eq!(
        log.matches("wrong install token from 127.0.0.1").count(),
        10,
        "{log}"
    );
    assert!(log.contains("is refused for 60 s"), "{log}");
    assert!(
        !log.contains("guess-"),
        "the guessed token is not logged: {log}"
    );
    // /health is not behind the limit.
    assert_eq!(s.raw("GET", "/health", &[], None).status, 200);
}

#[test]
fn the_code_host_step_sets_up_the_integration() {
    let (mut s, token) = install_server(None);
    let put = |body: Value| call(&s, &token, "PUT", "/install/codehost", Some(body));
    assert_eq!(
        put(json!({"canonical_url": "x"})).status,
        422,
        "unknown fields are refused"
    );
    // Neither sign-in nor the integration.
    assert_error(&put(json!({})), 422);
    // An app without a usable key.
    let bad =
        put(json!({"integration": {"strategy": "app", "app_id": 42, "private_key": "not a key"}}));
    let b = assert_error(&bad, 422);
    assert!(b["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("private_key"));
    assert_error(&put(json!({"integration": {"strategy": "token"}})), 422);
    let key = support::codehost::APP_KEY_PEM;
    let ok = put(json!({
        "web_url": "https://git.example.com", "api_url": "https://git.example.com/api/v3",
        "integration": {"strategy": "app", "app_id": 42, "private_key": key,
                        "webhook_secret": "install-webhook-secret", "app_url": "https://git.example.com/apps/svc"}
    }));
    assert_eq!(ok.status, 204, "{}", ok.text());
    let session = call(&s, &token, "GET", "/install/session", None);
    assert!(
        !session.text().contains("PRIVATE KEY")
            && !session.text().contains("install-webhook-secret")
    );
    assert_eq!(
        session.json()["codehost"]["integration"]["private_key_saved"],
        true
    );
    for (path, body) in [
        (
            "/install/server",
            json!({"canonical_url": "http://svc.test"}),
        ),
        ("/install/object-store", json!({"provider": "local"})),
        ("/install/llm", json!({"skip": true})),
    ] {
        let r = call(&s, &token, "PUT", path, Some(body));
        assert_eq!(r.status, 204, "{path}: {}", r.text());
    }
    let done = call(&s, &token, "POST", "/install/finish", None);
    assert_eq!(done.status, 202, "{}", done.text());
    assert_eq!(wait_exit(&mut s), 0);
    let dir = s.kill();
    let settings = std::fs::read_to_string(dir.path().join("settings.toml")).unwrap();
    let parsed: toml::Value = toml::from_str(&settings).unwrap();
    let ch = &parsed["server"]["integrations"]["codehost"];
    assert_eq!(ch["enabled"].as_bool(), Some(true));
    assert_eq!(ch["strategy"].as_str(), Some("app"));
    assert_eq!(ch["app_id"].as_integer(), Some(42));
    assert_eq!(
        ch["api_url"].as_str(),
        Some("https://git.example.com/api/v3")
    );
    assert!(!settings.contains("PRIVATE KEY") && !settings.contains("install-webhook-secret"));
    let vault: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("secrets.json")).unwrap()).unwrap();
    assert_eq!(vault["CODEHOST_APP_PRIVATE_KEY"]["value"], key.trim());
    assert_eq!(
        vault["CODEHOST_WEBHOOK_SECRET"]["value"],
        "install-webhook-secret"
    );
    assert!(
        vault.get("CODEHOST_CLIENT_SECRET").is_none(),
        "no sign-in was set up"
    );
    // The configured server reports the integration ready.
    let s = Server::with(Opts {
        dev: false,
        dir: Some(dir),
        ..Opts::default()
    });
    let st = s.get("/api/v1/system/integrations").json();
    assert_eq!(st["data"][0]["status"], "configured", "{st}");
    assert_eq!(st["data"][0]["metadata"]["webhook_secret_set"], true);
}

/// The code-host step with a personal access token, driven as the page does, against the
/// scripted code host: the configured server reaches the repository with what the wizard
/// stored, and the token is in the vault only.
#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn the_code_host_steps_token_reaches_the_host_after_finish() {
    require(Tool::Git);
    const PAT: &str = "ghp_wizardToken0123456789abcdef";
    let host = support::codehost::CodeHost::start(PAT, "acme", "app", &[("a.txt", "a\n")]);
    let (mut s, token) = install_server(None);
    // The page offers every value of the connection.
    let page = call(&s, &token, "GET", "/install/codehost", None).text();
    for id in [
        "web", "api", "strategy", "pat", "appid", "appkey", "appurl", "whsec",
    ] {
        assert!(page.contains(&format!("id={id}")), "no #{id} on the page");
    }
    let ok = call(
        &s,
        &token,
        "PUT",
        "/install/codehost",
        Some(json!({
            "web_url": host.url, "api_url": host.api_url, "allowed_usernames": [],
            "integration": {"strategy": "token", "token": PAT, "webhook_secret": "wizard-whsec"}
        })),
    );
    assert_eq!(ok.status, 204, "{}", ok.text());
    let session = call(&s, &token, "GET", "/install/session", None);
    assert!(!session.text().contains(PAT), "{}", session.text());
    for (path, body) in [
        (
            "/install/server",
            json!({"canonical_url": "http://svc.test"}),
        ),
        ("/install/object-store", json!({"provider": "local"})),
        ("/install/llm", json!({"skip": true})),
    ] {
        let r = call(&s, &token, "PUT", path, Some(body));
        assert_eq!(r.status, 204, "{path}: {}", r.text());
    }
    let done = call(&s, &token, "POST", "/install/finish", None);
    assert_eq!(done.status, 202, "{}", done.text());
    assert_eq!(wait_exit(&mut s), 0);
    let dir = s.kill();
    let settings = std::fs::read_to_string(dir.path().join("settings.toml")).unwrap();
    assert!(!settings.contains(PAT) && !settings.contains("wizard-whsec"));
    let parsed: toml::Value = toml::from_str(&settings).unwrap();
    let ch = &parsed["server"]["integrations"]["codehost"];
    assert_eq!(ch["strategy"].as_str(), Some("token"));
    assert_eq!(ch["web_url"].as_str(), Some(host.url.as_str()));
    let s = Server::with(Opts {
        dev: false,
        dir: Some(dir),
        ..Opts::default()
    });
    let st = s.get("/api/v1/system/integrations").json();
    assert_eq!(st["data"][0]["status"], "configured", "{st}");
    assert_eq!(st["data"][0]["metadata"]["strategy"], "token", "{st}");
    assert_eq!(
        st["data"][0]["metadata"]["webhook_url"],
        "http://svc.test/api/v1/webhooks/codehost"
    );
    // The stored token reaches the repository on the host.
    let acc = s.get("/api/v1/repos/codehost/acme/app").json();
    assert_eq!(acc["accessible"], true, "{acc}");
    assert_eq!(acc["permissions"]["push"], true, "{acc}");
    assert!(host.requests().iter().any(|r| r.authorization.as_deref()
        == Some(&format!("Bearer {PAT}"))
        || r.authorization.as_deref() == Some(&format!("token {PAT}"))));
    assert!(!s.stderr().contains(PAT));
}
