//! Issue 29 over the real binary: settings and secrets over HTTP (the admin/403 matrix,
//! revisions, live-safe keys, the write-only vault), system housekeeping, spending.

use crate::support::llm::{text, ScriptedServer};
use crate::support::server::*;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ed25519_dalek::pkcs8::EncodePublicKey;
use ed25519_dalek::{Signer, SigningKey};
use serde_json::{json, Value};
use svc::internal::llm::Provider;
use svc::internal::test_tools::{require, Tool};

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A bearer JWT for `login` on github.com, signed by `key` (also the browser tests' user
/// without admin rights, `web_browser`).
pub(crate) fn bearer(key: &SigningKey, login: &str) -> String {
    let t = now();
    let h = URL_SAFE_NO_PAD.encode(json!({"alg": "EdDSA", "typ": "JWT"}).to_string());
    let p = URL_SAFE_NO_PAD.encode(
        json!({"iss": "svc-web", "sub": format!("https://github.com/{login}"), "iat": t, "exp": t + 600})
            .to_string(),
    );
    let sig = key.sign(format!("{h}.{p}").as_bytes());
    format!("Bearer {h}.{p}.{}", URL_SAFE_NO_PAD.encode(sig.to_bytes()))
}

fn call_as(
    s: &Server,
    auth: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Resp {
    let mut h = vec![("Authorization", auth)];
    h.extend_from_slice(headers);
    s.raw(method, path, &h, body.map(str::as_bytes))
}

/// The current settings revision (ETag without quotes).
fn revision(s: &Server) -> String {
    let r = s.get("/api/v1/settings");
    assert_eq!(r.status, 200, "{}", r.text());
    r.header("etag").unwrap_or("").trim_matches('"').to_string()
}

fn patch(s: &Server, if_match: Option<&str>, body: &Value) -> Resp {
    let auth = s.auth();
    let mut h = vec![("Authorization", auth.as_str())];
    let quoted;
    if let Some(m) = if_match {
        quoted = format!("\"{m}\"");
        h.push(("If-Match", quoted.as_str()));
    }
    s.raw(
        "PATCH",
        "/api/v1/settings",
        &h,
        Some(body.to_string().as_bytes()),
    )
}

#[test]
fn settings_and_secrets_are_for_admins_only() {
    let key = SigningKey::from_bytes(&[29u8; 32]);
    let pem = key
        .verifying_key()
        .to_public_key_pem(Default::default())
        .unwrap();
    let settings = "[server.auth]\nmethods = [\"dev-token\", \"codehost\"]\nadmins = [\"Alice\"]\n\
                    [server.auth.codehost]\nallowed_usernames = [\"alice\", \"bob\"]\n";
    let s = Server::with(Opts {
        settings: Some(settings),
        dev: false,
        env: vec![("SVC_JWT_PUBLIC_KEY", pem)],
        ..Opts::default()
    });
    let alice = bearer(&key, "alice");
    let bob = bearer(&key, "bob");
    let dev = s.auth();
    let put = json!({"value": "sk-matrix-0123456789"}).to_string();
    let sql = json!({"sql": "SELECT count(*) FROM insights_runs"}).to_string();
    let saved = json!({"id": "q", "name": "q", "sql": "SELECT 1"}).to_string();
    let routes: [(&str, &str, Option<&str>); 9] = [
        ("GET", "/api/v1/settings", None),
        // Insights read every run and its events: admins only too.
        ("POST", "/api/v1/insights/query", Some(sql.as_str())),
        ("GET", "/api/v1/insights/schema", None),
        ("GET", "/api/v1/insights/queries", None),
        ("POST", "/api/v1/insights/queries", Some(saved.as_str())),
        ("PATCH", "/api/v1/settings", Some("{}")),
        ("GET", "/api/v1/secrets", None),
        ("PUT", "/api/v1/secrets/OPENAI_API_KEY", Some(put.as_str())),
        ("DELETE", "/api/v1/secrets/OPENAI_API_KEY", None),
    ];
    for (method, path, body) in routes {
        // Nobody: 401. Bob (may sign in, no admin rights): 403 and nothing changes.
        let r = s.raw(method, path, &[], body.map(str::as_bytes));
        assert_error(&r, 401);
        let r = call_as(&s, &bob, method, path, &[("If-Match", "\"x\"")], body);
        let e = assert_error(&r, 403);
        assert_eq!(e["errors"][0]["code"], "admin_required", "{method} {path}");
        assert!(e["errors"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("server.auth.admins"));
    }
    assert!(
        !s.path().join("secrets.json").exists(),
        "bob's PUT stored nothing"
    );
    // Alice (listed, any case) and the dev token's user are admins.
    for who in [&alice, &dev] {
        let r = call_as(&s, who, "GET", "/api/v1/settings", &[], None);
        assert_eq!(r.status, 200, "{}", r.text());
        let r = call_as(&s, who, "POST", "/api/v1/insights/query", &[], Some(&sql));
        assert_eq!(r.status, 200, "{}", r.text());
        let r = call_as(
            &s,
            who,
            "PUT",
            "/api/v1/secrets/OPENAI_API_KEY",
            &[],
            Some(&put),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        let r = call_as(
            &s,
            who,
            "DELETE",
            "/api/v1/secrets/OPENAI_API_KEY",
            &[],
            None,
        );
        assert_eq!(r.status, 204, "{}", r.text());
    }
    // Bob still reads what every user may.
    assert_eq!(
        call_as(&s, &bob, "GET", "/api/v1/runs", &[], None).status,
        200
    );
}

#[test]
fn settings_patches_are_revisioned_live_and_limited_to_live_keys() {
    let s = Server::with(Opts {
        settings: Some("[server.auth]\nmethods = [\"dev-token\"]\n# a comment\n[server.scheduler]\nmax_concurrent_runs = 2\n"),
        ..Opts::default()
    });
    let r = s.get("/api/v1/settings");
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(
        v["settings"]["server"]["scheduler"]["max_concurrent_runs"],
        2
    );
    // Defaults are resolved too.
    assert_eq!(
        v["settings"]["server"]["http"]["max_body_bytes"],
        8 * 1024 * 1024
    );
    assert!(v["live_keys"]
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k == "run"));
    let rev = revision(&s);
    assert_eq!(rev, v["revision"]);

    // No If-Match: 428; a stale one: 409 naming the current revision.
    let body = json!({"server": {"scheduler": {"max_concurrent_runs": 4}}, "run": {"goal": "ship", "max_usd": 2.5}});
    assert_error(&patch(&s, None, &body), 428);
    let e = assert_error(&patch(&s, Some(&"0".repeat(64)), &body), 409);
    assert_eq!(e["errors"][0]["current_revision"], rev.as_str());
    // Refusals: restart-only, not live, unknown, wrong type, invalid value, not an object.
    let refusals = [
        (
            json!({"server": {"listen": {"type": "tcp", "address": "0.0.0.0:80"}}}),
            422,
            "restart_required",
            "restart",
        ),
        (
            json!({"server": {"http": {"max_body_bytes": 4096}}}),
            422,
            "restart_required",
            "restart",
        ),
        (
            json!({"server": {"auth": {"methods": ["codehost"]}}}),
            422,
            "not_live",
            "cannot be changed over HTTP",
        ),
        (
            json!({"server": {"colour": "blue"}}),
            422,
            "unknown_key",
            "not a settings key",
        ),
        (
            json!({"server": {"scheduler": {"max_concurrent_runs": "many"}}}),
            422,
            "invalid_settings",
            "invalid",
        ),
        (
            json!({"server": {"scheduler": {"max_concurrent_runs": 0}}}),
            422,
            "invalid_settings",
            "at least 1",
        ),
        (
            json!({"run": {"max_usd": -1}}),
            422,
            "invalid_settings",
            "positive",
        ),
        (json!([1, 2]), 400, "invalid_body", "object"),
    ];
    for (p, status, code, words) in refusals {
        let e = assert_error(&patch(&s, Some(&rev), &p), status);
        assert_eq!(e["errors"][0]["code"], code, "{p}: {e}");
        assert!(
            e["errors"][0]["detail"].as_str().unwrap().contains(words),
            "{p}: {e}"
        );
    }
    assert_eq!(revision(&s), rev, "refused patches change nothing");

    let r = patch(&s, Some(&rev), &body);
    assert_eq!(r.status, 200, "{}", r.text());
    let new_rev = r.header("etag").unwrap().trim_matches('"').to_string();
    assert_ne!(new_rev, rev);
    let v = r.json();
    assert_eq!(
        v["settings"]["server"]["scheduler"]["max_concurrent_runs"],
        4
    );
    assert_eq!(v["settings"]["run"]["goal"], "ship");
    // Written to the file (atomically, 0600) and what the server runs with from now on.
    let text = std::fs::read_to_string(s.path().join("settings.toml")).unwrap();
    assert!(
        text.contains("max_concurrent_runs = 4") && text.contains("goal = \"ship\""),
        "{text}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(s.path().join("settings.toml"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let run = create_run_json(&s, &run_body(HELLO));
    assert_eq!(
        run["goal"], "ship",
        "a new run gets the patched run default: {run}"
    );
    assert_eq!(revision(&s), new_rev);
    // The old revision is stale now.
    assert_error(&patch(&s, Some(&rev), &json!({"run": {"goal": "x"}})), 409);
    // null removes a key.
    let r = patch(&s, Some(&new_rev), &json!({"run": {"goal": null}}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["settings"]["run"].get("goal").is_none());
    // An edit of the file by hand shows in the revision (and is picked up by the reload).
    std::fs::write(
        s.path().join("settings.toml"),
        "[server.auth]\nmethods = [\"dev-token\"]\n[server.scheduler]\nmax_concurrent_runs = 3\n",
    )
    .unwrap();
    wait_for(10, "the reload", || {
        (s.get("/api/v1/settings").json()["settings"]["server"]["scheduler"]["max_concurrent_runs"]
            == 3)
            .then_some(())
    });
    assert_ne!(revision(&s), new_rev);
}

#[test]
fn secrets_are_write_only_and_limited_to_names_svc_uses() {
    let s = Server::start();
    let list = s.get("/api/v1/secrets").json();
    let names: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    for n in [
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "CODEHOST_CLIENT_SECRET",
        "OBJECT_STORE_SECRET_ACCESS_KEY",
    ] {
        assert!(names.contains(&n), "{n} in {names:?}");
    }
    assert!(list["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["set"] == false));
    let value = "sk-ant-secret-value-4242";
    let put =
        |name: &str, body: &str| s.call("PUT", &format!("/api/v1/secrets/{name}"), Some(body));
    // Names svc does not use, bad bodies.
    for name in ["MY_OWN_THING", "SESSION_SECRET", "anthropic_api_key"] {
        let e = assert_error(&put(name, &json!({"value": value}).to_string()), 422);
        assert!(
            e["errors"][0]["detail"]
                .as_str()
                .unwrap()
                .contains("does not use"),
            "{e}"
        );
    }
    assert_error(&put("ANTHROPIC_API_KEY", "{not json"), 400);
    assert_error(
        &put("ANTHROPIC_API_KEY", &json!({"value": ""}).to_string()),
        422,
    );
    assert_error(
        &put("ANTHROPIC_API_KEY", &json!({"val": value}).to_string()),
        400,
    );

    let r = put("ANTHROPIC_API_KEY", &json!({"value": value}).to_string());
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["set"], true);
    for body in [
        r.text(),
        s.get("/api/v1/secrets").text(),
        s.get("/api/v1/settings").text(),
    ] {
        assert!(!body.contains(value), "a secret value was served: {body}");
    }
    let entry = s.get("/api/v1/secrets").json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "ANTHROPIC_API_KEY")
        .cloned()
        .unwrap();
    assert_eq!(entry["set"], true);
    assert!(entry["updated_at"].is_string());
    // Stored in the vault the CLI and the runs read.
    let vault: Value =
        serde_json::from_slice(&std::fs::read(s.path().join("secrets.json")).unwrap()).unwrap();
    assert_eq!(vault["ANTHROPIC_API_KEY"]["value"], value);
    // A name [run] secrets gives to runs becomes one svc uses.
    let rev = revision(&s);
    assert_eq!(
        patch(
            &s,
            Some(&rev),
            &json!({"run": {"secrets": ["DEPLOY_TOKEN"]}})
        )
        .status,
        200
    );
    assert_eq!(
        put("DEPLOY_TOKEN", &json!({"value": "tok-1"}).to_string()).status,
        200
    );

    assert_eq!(
        s.call("DELETE", "/api/v1/secrets/ANTHROPIC_API_KEY", None)
            .status,
        204
    );
    assert_error(
        &s.call("DELETE", "/api/v1/secrets/ANTHROPIC_API_KEY", None),
        404,
    );
    assert_error(&s.call("DELETE", "/api/v1/secrets/MY_OWN_THING", None), 422);
    assert!(!s.stderr().contains(value), "the value reached the log");
}

/// The install wizard's LLM step was skipped: the LLM stage fails without a key; an admin
/// stores the key over HTTP and the same workflow's LLM stage then succeeds.
#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_skipped_llm_install_step_is_fixed_over_http() {
    require(Tool::Git);
    let llm = ScriptedServer::turns(
        Provider::Anthropic,
        vec![text("fixed from the browser")],
        crate::support::llm::SMALL_USAGE,
    );
    let settings = settings_with(&[("anthropic", &llm.base)]);
    let s = Server::with(Opts {
        settings: Some(&settings),
        ..Opts::default()
    });
    let dot = r#"digraph p {
  start [shape=Mdiamond]; exit [shape=Msquare]
  ask [shape=tab, prompt="Answer"]
  start -> ask -> exit
}"#;
    let failed = run_to_end(&s, &run_body(dot));
    assert_eq!(status_kind(&s, &failed), "failed");
    assert_eq!(llm.count(), 0);
    let r = s.call(
        "PUT",
        "/api/v1/secrets/ANTHROPIC_API_KEY",
        Some(&json!({"value": "browser-key"}).to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let ok = run_to_end(&s, &run_body(dot));
    assert_eq!(
        status_kind(&s, &ok),
        "succeeded",
        "{:?}",
        run_events(&s, &ok)
    );
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].header("x-api-key"), Some("browser-key"));
}

const GATE: &str = r#"digraph g {
  start [shape=Mdiamond]; exit [shape=Msquare]
  ask [shape=hexagon, label="Ship it?"]
  start -> ask; ask -> exit [label="Yes"]
}"#;

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn system_info_df_and_prune_leave_every_active_run_alone() {
    require(Tool::Git);
    let s = Server::start();
    let done_a = run_to_end(
        &s,
        &json!({"workflow": package(HELLO), "labels": {"team": "a"}}),
    );
    let done_b = run_to_end(
        &s,
        &json!({"workflow": package(HELLO), "labels": {"team": "b"}}),
    );
    let submitted = create_run(&s, &run_body(HELLO));
    let blocked = create_run(&s, &run_body(GATE));
    start_run(&s, &blocked);
    wait_status(&s, &blocked, "blocked", 60);

    let info = s.get("/api/v1/system/info");
    assert_eq!(info.status, 200, "{}", info.text());
    let info = info.json();
    assert_eq!(info["runs"]["total"], 4, "{info}");
    assert_eq!(info["runs"]["active"], 1, "the blocked run: {info}");
    assert_eq!(info["runs"]["queued"], 1, "the submitted run: {info}");
    assert!(info["database"]["bytes"].as_u64().unwrap() > 0);
    assert_eq!(info["state_dir"], s.path().display().to_string());
    assert!(info["sandbox_providers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p == "local"));

    let df = s.get("/api/v1/system/df").json();
    assert!(df["events"]["bytes"].as_u64().unwrap() > 0, "{df}");
    let largest: Vec<&str> = df["largest_runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["run_id"].as_str())
        .collect();
    for id in [&done_a, &done_b, &blocked] {
        assert!(largest.contains(&id.as_str()), "{id} in {largest:?}");
    }

    let prune = |body: &Value| s.post("/api/v1/system/prune", &body.to_string());
    // Contradictory and unsafe filters.
    for bad in [
        json!({"older_than": "1h", "before": "2026-01-01"}),
        json!({"status": ["running"]}),
        json!({"status": ["blocked", "succeeded"]}),
        json!({"older_than": "soon"}),
        json!({"automation": "nightly", "manual_only": true}),
    ] {
        assert_error(&prune(&bad), 422);
    }
    assert_error(&prune(&json!({"everything": true})), 400);
    // The default keeps runs that ended in the last 24 hours.
    let r = prune(&json!({})).json();
    assert_eq!(r["dry_run"], true);
    assert_eq!(r["total_count"], 0, "{r}");
    // A dry run names what would go, removes nothing.
    let r = prune(&json!({"older_than": "0s", "labels": {"team": "a"}})).json();
    assert_eq!(r["total_count"], 1, "{r}");
    assert_eq!(r["runs"][0]["run_id"], done_a.as_str());
    assert!(r["total_size_bytes"].as_u64().unwrap() > 0);
    assert_eq!(r["deleted_count"], 0);
    assert_eq!(s.get(&format!("/api/v1/runs/{done_a}")).status, 200);
    // For real: every finished run goes, every active one stays.
    let r = prune(&json!({"older_than": "0s", "dry_run": false})).json();
    assert_eq!(r["deleted_count"], 2, "{r}");
    assert_eq!(r["freed_bytes"], r["total_size_bytes"]);
    for id in [&done_a, &done_b] {
        assert_error(&s.get(&format!("/api/v1/runs/{id}")), 404);
    }
    assert_eq!(status_kind(&s, &submitted), "submitted");
    assert_eq!(status_kind(&s, &blocked), "blocked");
    assert_eq!(s.get("/api/v1/system/info").json()["runs"]["total"], 2);
    // The blocked run still finishes.
    let q = s.get(&format!("/api/v1/runs/{blocked}/questions")).json();
    let qid = q["data"][0]["id"].as_str().unwrap().to_string();
    let r = s.post(
        &format!("/api/v1/runs/{blocked}/questions/{qid}/answer"),
        &json!({"value": "Yes"}).to_string(),
    );
    assert!(r.status < 300, "{}", r.text());
    wait_status(&s, &blocked, "succeeded", 60);
}

const FOUR_PROMPTS: &str = r#"digraph spend {
  start [shape=Mdiamond]; exit [shape=Msquare]
  a [shape=tab, prompt="one"]; b [shape=tab, prompt="two"]
  c [shape=tab, prompt="three"]; d [shape=tab, prompt="four"]
  start -> a -> b -> c -> d -> exit
}"#;

/// A budget stops the run before the model call that would start past it: with a budget of
/// 2.5 calls' cost, the third call is made (2 calls' cost < budget) and the fourth is not.
#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_budget_stops_a_run_before_the_call_that_would_pass_it() {
    require(Tool::Git);
    let usage = PRICED_CALL;
    let llm = ScriptedServer::turns(
        Provider::Anthropic,
        (0..8).map(|i| text(&format!("answer {i}"))).collect(),
        usage,
    );
    let s = served_anthropic(&llm.base, "");
    let per_call = price_of_one_call(&s, ONE_PROMPT);
    let calls_before = llm.count();

    let budget_usd = (per_call as f64 * 2.5) / 1e6;
    let id = create_run(
        &s,
        &json!({"workflow": package(FOUR_PROMPTS), "budget_usd": budget_usd}),
    );
    assert_eq!(
        run_json(&s, &id)["billing"]["budget_usd_micros"],
        (budget_usd * 1e6).round() as i64
    );
    start_run(&s, &id);
    let run = wait_run_end(&s, &id);
    let status = &run["lifecycle"]["status"];
    assert_eq!(status["kind"], "failed", "{run}");
    assert_eq!(status["reason"], "budget_exceeded", "{run}");
    assert_eq!(llm.count() - calls_before, 3, "three calls, not four");
    let evs = run_events(&s, &id);
    let stop = evs
        .iter()
        .find(|e| e["event"] == "llm.budget_exceeded")
        .expect("the budget event");
    assert_eq!(stop["node_id"], "d");
    assert_eq!(stop["properties"]["spent_usd_micros"], 3 * per_call);
    let failed = evs.iter().find(|e| e["event"] == "run.failed").unwrap();
    let error = failed["properties"]["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains("budget") && error.contains(&format!("${:.4}", budget_usd)),
        "{failed}"
    );
    assert_eq!(run["billing"]["total_usd_micros"], 3 * per_call);

    // [run] max_usd is the default budget; bad budgets are refused.
    let rev = revision(&s);
    assert_eq!(
        patch(&s, Some(&rev), &json!({"run": {"max_usd": 7.5}})).status,
        200
    );
    let r = create_run_json(&s, &run_body(HELLO));
    assert_eq!(r["billing"]["budget_usd_micros"], 7_500_000);
    for bad in [json!(0), json!(-1), json!("ten")] {
        let r = s.post(
            "/api/v1/runs",
            &json!({"workflow": package(HELLO), "budget_usd": bad}).to_string(),
        );
        assert_error(&r, 400);
    }
}

const ONE_PROMPT: &str = "digraph priced { start [shape=Mdiamond]; exit [shape=Msquare]; a [shape=tab, prompt=\"x\"]; start -> a -> exit }";

/// What each scripted answer reports using: enough that one call has a visible price.
const PRICED_CALL: svc::internal::llm::Usage = svc::internal::llm::Usage {
    input: 100_000,
    output: 10_000,
    reasoning: 0,
    cache_read: 0,
    cache_write: 0,
};

/// One call's cost as the server prices it: a run of `dot` (one prompt stage) to its end.
fn price_of_one_call(s: &Server, dot: &str) -> i64 {
    let id = run_to_end(s, &run_body(dot));
    let micros = run_json(s, &id)["billing"]["total_usd_micros"]
        .as_i64()
        .unwrap();
    assert!(micros > 0, "a priced call costs something");
    micros
}

/// Spending across runs comes from the store (it survives a restart), and the daily cap
/// holds back runs with LLM stages (others still run) and says why on the board.
#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn usage_across_runs_and_the_daily_cap() {
    require(Tool::Git);
    let usage = PRICED_CALL;
    let llm = ScriptedServer::turns(
        Provider::Anthropic,
        (0..8).map(|i| text(&format!("answer {i}"))).collect(),
        usage,
    );
    let s = served_anthropic(&llm.base, "");
    let per_call = price_of_one_call(&s, ONE_PROMPT);
    let u = s.get("/api/v1/usage");
    assert_eq!(u.status, 200, "{}", u.text());
    let u = u.json();
    assert_eq!(u["totals"]["records"], 1, "{u}");
    assert_eq!(u["totals"]["usd_micros"], per_call);
    assert_eq!(u["totals"]["input_tokens"], 100_000);
    assert_eq!(u["by_model"][0]["provider"], "anthropic", "{u}");
    assert_eq!(u["by_workflow"][0]["workflow"], "priced", "{u}");
    assert_eq!(u["by_day"].as_array().unwrap().len(), 1);
    assert_eq!(u["daily_cap"], Value::Null);
    // A range without it, and bad ranges.
    let empty = s
        .get("/api/v1/usage?since=2020-01-01&until=2020-02-01")
        .json();
    assert_eq!(empty["totals"]["records"], 0);
    assert_error(&s.get("/api/v1/usage?since=yesterday"), 400);
    assert_error(
        &s.get("/api/v1/usage?since=2026-02-01&until=2026-01-01"),
        400,
    );

    // A cap below today's spend: LLM runs wait, others run, the board says why.
    let rev = revision(&s);
    let cap = per_call as f64 / 2e6;
    assert_eq!(
        patch(&s, Some(&rev), &json!({"server": {"max_usd_per_day": cap}})).status,
        200
    );
    let held = create_run(&s, &run_body(ONE_PROMPT));
    start_run(&s, &held);
    let plain = run_to_end(&s, &run_body(HELLO));
    assert_eq!(status_kind(&s, &plain), "succeeded");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(status_kind(&s, &held), "runnable", "held by the cap");
    let board = s.get("/api/v1/runs").json();
    let c = &board["meta"]["daily_cap"];
    assert_eq!(c["reached"], true, "{board}");
    assert!(
        c["message"].as_str().unwrap().contains("max_usd_per_day"),
        "{c}"
    );
    assert_eq!(
        s.get("/api/v1/usage").json()["daily_cap"]["spent_usd_micros"],
        per_call
    );
    // A higher cap lets it go.
    let rev = revision(&s);
    assert_eq!(
        patch(
            &s,
            Some(&rev),
            &json!({"server": {"max_usd_per_day": 1000.0}})
        )
        .status,
        200
    );
    s.post(&format!("/api/v1/runs/{plain}/archive"), "{}"); // any request; the scheduler wakes each second anyway
    let end = wait_run_end(&s, &held);
    assert_eq!(end["lifecycle"]["status"]["kind"], "succeeded", "{end}");

    // After a restart, and after the runs are gone, the spend is still there.
    let dir = s.kill();
    let s = Server::with(Opts {
        dir: Some(dir),
        settings: None,
        ..Opts::default()
    });
    let r = s.post(
        "/api/v1/system/prune",
        &json!({"older_than": "0s", "dry_run": false}).to_string(),
    );
    assert_eq!(r.json()["deleted_count"], 3, "{}", r.text());
    let u = s.get("/api/v1/usage").json();
    assert_eq!(u["totals"]["records"], 2, "{u}");
    assert_eq!(u["totals"]["usd_micros"], 2 * per_call);
}

/// `svc prune` on the state directory answers what the route answers, removes only finished
/// runs its filters match (a dry run unless --yes), and refuses beside a running server.
#[test]
fn svc_prune_does_what_the_prune_route_does() {
    use crate::support::cli::svc;
    let s = Server::start();
    let cancelled = |labels: Value| {
        let mut body = run_body(HELLO);
        body["labels"] = labels;
        let id = create_run(&s, &body);
        let r = s.post(&format!("/api/v1/runs/{id}/cancel"), "{}");
        assert_eq!(r.status, 200, "{}", r.text());
        wait_status(&s, &id, "failed", 30);
        id
    };
    let plain = cancelled(json!({}));
    let labelled = cancelled(json!({"team": "a"}));
    let waiting = create_run(&s, &run_body(HELLO));
    let dir_arg = s.path().display().to_string();
    let prune = |extra: &[&str]| {
        let mut args = vec!["prune", "--state-dir", dir_arg.as_str()];
        args.extend_from_slice(extra);
        svc(&args)
    };
    // Beside a running server: refused, pointing at the route.
    let o = prune(&["--older-than", "0s"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("POST /api/v1/system/prune"));
    let route = s.post(
        "/api/v1/system/prune",
        &json!({"older_than": "0s"}).to_string(),
    );
    assert_eq!(route.status, 200, "{}", route.text());
    let route = route.json();
    let dir = s.kill();

    // Contradictory filters: a usage error naming them, nothing removed.
    let o = prune(&["--older-than", "1h", "--before", "2026-01-01", "--yes"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not both"));
    let o = prune(&["--status", "running"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // The dry run lists what the route listed: the two finished runs, not the waiting one.
    let o = prune(&["--older-than", "0s", "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dry: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids = |v: &Value| -> Vec<String> {
        let mut ids: Vec<String> = v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["run_id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    let mut finished = vec![plain.clone(), labelled.clone()];
    finished.sort();
    assert_eq!(ids(&dry), finished);
    assert_eq!(ids(&route), finished);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["total_size_bytes"], route["total_size_bytes"]);
    assert_eq!(dry["deleted_count"], 0);

    // --label narrows, --yes removes; the text form says what happened.
    let o = prune(&["--older-than", "0s", "--label", "team=a", "--yes"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains(&format!("removed {labelled}")), "{out}");
    assert!(out.contains("removed 1 run(s)"), "{out}");
    let o = prune(&["--older-than", "0s", "--yes", "--format", "json"]);
    let done: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(ids(&done), vec![plain.clone()]);
    assert_eq!(done["deleted_count"], 1);

    // The waiting run is untouched; the removed ones are gone for the server too.
    let s = Server::with(Opts {
        dir: Some(dir),
        ..Opts::default()
    });
    assert_eq!(status_kind(&s, &waiting), "submitted");
    for gone in [&plain, &labelled] {
        assert_ne!(s.get(&format!("/api/v1/runs/{gone}")).status, 200);
    }
}

const AGENT_LOOP: &str = r#"digraph agentic {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [shape=box, prompt="Keep looking", max_turns=20]
  start -> work -> exit
}"#;

/// A budget that runs out inside an agent stage stops it before its next turn: with 2.5
/// turns' cost, three turns are made, the stage fails with their usage recorded, and the run
/// fails `budget_exceeded`. `svc run` reads `[run] max_usd` and stops the same way.
#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_budget_stops_an_agent_between_turns_on_the_server_and_in_svc_run() {
    use crate::support::cli::Sandbox;
    use crate::support::llm::tools;
    require(Tool::Git);
    let usage = PRICED_CALL;
    let turn = |i: usize| {
        tools(&[(
            &format!("t{i}"),
            "shell",
            json!({"command": "echo looking"}),
        )])
    };
    let llm = ScriptedServer::turns(Provider::Anthropic, (0..40).map(turn).collect(), usage);
    let s = served_anthropic(&llm.base, "");
    // One turn's cost, as the server prices it.
    let per_turn = price_of_one_call(&s, ONE_PROMPT);
    let before = llm.count();
    let budget_usd = (per_turn as f64 * 2.5) / 1e6;
    let id = create_run(
        &s,
        &json!({"workflow": package(AGENT_LOOP), "budget_usd": budget_usd}),
    );
    start_run(&s, &id);
    let run = wait_run_end(&s, &id);
    assert_eq!(run["lifecycle"]["status"]["kind"], "failed", "{run}");
    assert_eq!(
        run["lifecycle"]["status"]["reason"], "budget_exceeded",
        "{run}"
    );
    assert_eq!(llm.count() - before, 3, "three turns, then the stop");
    let evs = run_events(&s, &id);
    let stop = evs
        .iter()
        .find(|e| e["event"] == "llm.budget_exceeded")
        .expect("the budget event");
    assert_eq!(stop["node_id"], "work");
    assert_eq!(stop["properties"]["during_stage"], true);
    assert_eq!(stop["properties"]["spent_usd_micros"], 3 * per_turn);
    assert!(stop["properties"]["message"]
        .as_str()
        .unwrap()
        .contains("stopped before its next turn"));
    // The stage's three turns are recorded and billed; the run goes no further.
    let failed = evs
        .iter()
        .find(|e| e["event"] == "stage.failed" && e["node_id"] == "work")
        .expect("the stage's end");
    assert_eq!(
        failed["properties"]["usage"]["cost"]["usd_micros"],
        3 * per_turn
    );
    assert!(!evs
        .iter()
        .any(|e| e["event"] == "stage.started" && e["node_id"] == "exit"));
    assert_eq!(run["billing"]["total_usd_micros"], 3 * per_turn);
    let spent: i64 = s.get("/api/v1/usage").json()["totals"]["usd_micros"]
        .as_i64()
        .unwrap();
    assert_eq!(
        spent,
        4 * per_turn,
        "the ledger has the probe and the three turns"
    );

    // svc run: the same stop from [run] max_usd in the state directory's settings.
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.state()).unwrap();
    std::fs::write(
        sb.state().join("settings.toml"),
        format!(
            "[llm.providers.anthropic]\nbase_url = \"{}\"\n[run]\nmax_usd = {budget_usd}\n",
            llm.base
        ),
    )
    .unwrap();
    let o = sb
        .command(&["secrets", "set", "ANTHROPIC_API_KEY", "served-key"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let file = sb.work().join("agentic.dot");
    std::fs::write(&file, AGENT_LOOP).unwrap();
    let before = llm.count();
    let done = sb.finish(sb.command(&["run", file.to_str().unwrap(), "--format", "json"]));
    assert_eq!(done.code, 1, "{}\n{}", done.json, done.stderr);
    assert_eq!(llm.count() - before, 3, "{}", done.stderr);
    let text = format!("{}{}", done.json, done.stderr);
    assert!(text.contains("budget"), "{text}");
}

/// A completion through the server's provider and vault key: answered as JSON, streamed
/// as SSE, structured against a schema, recorded in the usage ledger (so `/usage` and
/// insights see it), refused with bad input, and refused once the daily cap is reached.
#[test]
fn completions_use_the_servers_provider_and_count_in_spending() {
    let usage = PRICED_CALL;
    let llm = ScriptedServer::turns(
        Provider::Anthropic,
        vec![
            text("Hello from the team's provider"),
            text("streamed answer"),
            text("{\"n\": 3}"),
        ],
        usage,
    );
    let s = served_anthropic(&llm.base, "");
    let ask = |body: Value| s.post("/api/v1/completions", &body.to_string());

    let r =
        ask(json!({"messages": [{"role": "user", "content": "Say hello"}], "system": "Be brief."}));
    assert_eq!(r.status, 200, "{}", r.text());
    let c = r.json();
    assert_eq!(c["message"]["content"], "Hello from the team's provider");
    assert_eq!(c["provider"], "anthropic");
    assert_eq!(c["usage"]["input_tokens"], 100_000);
    let cost = c["cost_usd_micros"].as_i64().unwrap();
    assert!(cost > 0, "{c}");
    assert_eq!(c["cost_source"], "catalog");
    let sent = &llm.requests()[0];
    assert_eq!(
        sent.header("x-api-key"),
        Some("served-key"),
        "the vault's key"
    );
    assert_eq!(sent.body["messages"][0]["content"][0]["text"], "Say hello");
    assert_eq!(sent.body["max_tokens"], 4096);

    // Streamed: stream_start, the text, finish with the completion.
    let auth = s.auth();
    let r = s.raw(
        "POST",
        "/api/v1/completions",
        &[("Authorization", auth.as_str())],
        Some(
            json!({"messages": [{"role": "user", "content": "Stream it"}], "stream": true})
                .to_string()
                .as_bytes(),
        ),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let frames: Vec<Value> = r
        .text()
        .split("\n\n")
        .filter_map(|f| f.strip_prefix("event: stream_event\ndata: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(frames.first().unwrap()["type"], "stream_start");
    let streamed: String = frames
        .iter()
        .filter(|f| f["type"] == "text_delta")
        .map(|f| f["delta"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, "streamed answer");
    let last = frames.last().unwrap();
    assert_eq!(last["type"], "finish", "{last}");
    assert_eq!(last["completion"]["message"]["content"], "streamed answer");

    // Structured output, checked against the schema.
    let schema =
        json!({"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}});
    let r = ask(json!({"messages": [{"role": "user", "content": "n?"}], "schema": schema}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["output"], json!({"n": 3}));

    // Bad input never reaches the provider.
    for bad in [
        json!({"messages": []}),
        json!({"messages": [{"role": "system", "content": "x"}]}),
        json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 1_000_000}),
        json!({"messages": [{"role": "user", "content": "x"}], "provider": "nope"}),
        json!({"messages": [{"role": "user", "content": "x"}], "temperature_typo": 1}),
    ] {
        assert_error(&ask(bad), 400);
    }
    assert_eq!(llm.count(), 3);

    // Counted in spending and visible to insights.
    let u = s.get("/api/v1/usage").json();
    assert_eq!(u["totals"]["records"], 3, "{u}");
    assert_eq!(u["totals"]["usd_micros"], cost * 3);
    let q = s.post(
        "/api/v1/insights/query",
        &json!({"sql": "SELECT origin, count(*), sum(usd_micros) FROM insights_usage GROUP BY origin"})
            .to_string(),
    );
    assert_eq!(
        q.json()["rows"],
        json!([["completion", 3, cost * 3]]),
        "{}",
        q.text()
    );

    // The daily cap, once reached, refuses completions before any provider call.
    let rev = revision(&s);
    let cap = cost as f64 / 1e6;
    assert_eq!(
        patch(&s, Some(&rev), &json!({"server": {"max_usd_per_day": cap}})).status,
        200
    );
    let r = ask(json!({"messages": [{"role": "user", "content": "more"}]}));
    let e = assert_error(&r, 429);
    assert_eq!(e["errors"][0]["code"], "daily_cap_reached");
    assert!(e["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("max_usd_per_day"));
    assert_eq!(llm.count(), 3);
}
