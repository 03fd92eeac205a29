//! Runs that end in pull requests, through the real binary against the scripted code host
//! (`support::codehost`: GitHub's REST wire format in front of real bare repositories
//! served over smart HTTP): the run branch pushed with real credentials and verified, the
//! pull request opened with the right head, base, title and draft flag before
//! `run.completed`, red then green checks arriving as signed webhooks and showing on the
//! run's pull request and the board, merge and close, `pull_request` stages that wait for
//! checks and route red ones to a repair stage, creation jobs (preconditions, resumed after
//! a kill), app installation tokens (minted, cached, renewed once on 401), webhook
//! signatures and replays, and the credential nowhere it must not be.

use crate::support::codehost::{signed_headers, CodeHost, APP_ID, APP_KEY_PEM};
use crate::support::server::*;
use serde_json::{json, Value};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use svc::internal::test_tools::{require, Tool};

const PAT: &str = "ghp_svcTestToken0123456789abcdefXYZ";
const SECRET: &str = "whsec-test-5f3a9c";

fn settings(host: &CodeHost, extra: &str) -> String {
    format!(
        "[server.auth]\nmethods = [\"dev-token\"]\n\
         [server.integrations.codehost]\nenabled = true\napi_url = \"{}\"\nweb_url = \"{}\"\n{extra}",
        host.api_url, host.url
    )
}

/// A dev server configured for `host` (token strategy unless `extra` says otherwise),
/// with the token and webhook secret in its vault.
fn server_for(host: &CodeHost, extra: &str) -> Server {
    let text = settings(host, extra);
    let s = Server::with(Opts {
        settings: Some(&text),
        ..Opts::default()
    });
    store_key(&s, "CODEHOST_TOKEN", PAT);
    store_key(&s, "CODEHOST_WEBHOOK_SECRET", SECRET);
    s
}

/// Delivers a signed webhook; the response.
fn deliver(s: &Server, event: &str, id: &str, payload: &Value) -> Resp {
    let body = payload.to_string().into_bytes();
    let headers = signed_headers(SECRET, event, id, &body);
    let h: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    s.raw("POST", "/api/v1/webhooks/codehost", &h, Some(&body))
}

fn flow(script: &str) -> String {
    format!(
        "digraph fix {{ goal=\"Fix the greeting\"; start [shape=Mdiamond]; exit [shape=Msquare]; \
         change [shape=parallelogram, script=\"{script}\"]; start -> change -> exit }}"
    )
}

fn repo_body(host: &CodeHost, dot: &str) -> Value {
    json!({"workflow": package(dot), "repository": {"origin_url": host.origin("acme", "app")}})
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Samples `ps` (every process's argument list) until stopped; every listing seen.
fn watch_ps() -> (Arc<AtomicBool>, std::thread::JoinHandle<Vec<String>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = Arc::clone(&stop);
    let t = std::thread::spawn(move || {
        let mut seen = Vec::new();
        while !s2.load(Ordering::SeqCst) {
            if let Ok(o) = Command::new("ps").args(["-eo", "args"]).output() {
                seen.push(String::from_utf8_lossy(&o.stdout).into_owned());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        seen
    });
    (stop, t)
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_run_on_the_code_host_opens_its_pull_request_and_follows_its_checks() {
    require(Tool::Git);
    let host = CodeHost::start(PAT, "acme", "app", &[("greeting.txt", "helo\n")]);
    let s = server_for(&host, "[run.pull_request]\nenabled = true\n");
    let (stop, ps) = watch_ps();
    let id = run_to_end(&s, &repo_body(&host, &flow("echo hello > greeting.txt")));
    stop.store(true, Ordering::SeqCst);
    let listings = ps.join().unwrap();
    let run = run_json(&s, &id);
    assert_eq!(run["lifecycle"]["status"]["kind"], "succeeded", "{run}");
    assert_eq!(run["repository"]["provider"], "codehost");
    assert_eq!(run["repository"]["name"], "acme/app");

    // The branch is pushed at the run's final workspace commit.
    let branch = format!("svc/run/{}", id.to_lowercase());
    let last = s.get(&format!("/api/v1/runs/{id}/checkpoint")).json()["git_commit_sha"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        host.branch("acme", "app", &branch).as_deref(),
        Some(last.as_str())
    );
    assert_eq!(
        host.show("acme", "app", &last, "greeting.txt").as_deref(),
        Some("hello")
    );

    // One draft pull request from the run branch to main, titled from the goal, its body
    // ending with a link to the run; the Run links it.
    let pulls = host.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    let pr = &pulls[0];
    assert_eq!(
        (pr.head.as_str(), pr.base.as_str(), pr.draft),
        (branch.as_str(), "main", true)
    );
    assert_eq!(pr.title, "Fix the greeting");
    assert!(pr.body.contains("`change`: succeeded"), "{}", pr.body);
    assert!(pr.body.contains("`greeting.txt` +1 -1"), "{}", pr.body);
    assert!(
        pr.body.trim_end().ends_with(&format!("svc run {id}).")),
        "{}",
        pr.body
    );
    let html_url = format!("{}/acme/app/pull/1", host.url);
    assert_eq!(
        run["pull_request"],
        json!({"owner": "acme", "repo": "app", "number": 1, "html_url": html_url})
    );
    // Opened before the run's terminal event.
    let events = run_events(&s, &id);
    let k = kinds(&events);
    let created = k
        .iter()
        .position(|e| e == "pull_request.created")
        .expect("created");
    let completed = k
        .iter()
        .position(|e| e == "run.completed")
        .expect("completed");
    assert!(created < completed, "{k:?}");
    assert_eq!(events[created]["properties"]["head_sha"], last.as_str());
    assert_eq!(events[created]["properties"]["draft"], true);

    // The push carried the token as HTTP Basic credentials.
    let pushes: Vec<_> = host
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("git-receive-pack"))
        .collect();
    assert!(!pushes.is_empty());
    assert!(pushes.iter().all(|r| r
        .authorization
        .as_deref()
        .is_some_and(|a| a.starts_with("Basic "))));

    // Red, then green, as webhooks: on the run's pull request and the board.
    let red = host.check_run(
        "acme",
        "app",
        &last,
        "ci",
        Some("failure"),
        "2 tests failed: test_greeting",
    );
    let r = deliver(&s, "check_run", "d-red", &red);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["outcome"], "applied");
    let view = s.get(&format!("/api/v1/runs/{id}/pull_request")).json();
    assert_eq!(view["data"]["checks_verdict"], "failed", "{view}");
    assert_eq!(
        view["data"]["checks"][0]["summary"],
        "2 tests failed: test_greeting"
    );
    assert_eq!(view["meta"]["details_status"], "available");
    assert_eq!(view["data"]["details"]["head_branch"], branch.as_str());
    let board_pr = || {
        let list = s.get("/api/v1/runs").json();
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["id"] == id.as_str())
            .unwrap()["pull_request"]
            .clone()
    };
    let b = board_pr();
    assert_eq!(b["number"], 1);
    assert_eq!(b["additions"], 1);
    assert_eq!(b["deletions"], 1);
    assert_eq!(
        b["checks"],
        json!([{"name": "ci", "status": "failure", "duration_secs": 125}])
    );
    let green = host.check_run("acme", "app", &last, "ci", Some("success"), "all passed");
    assert_eq!(deliver(&s, "check_run", "d-green", &green).status, 200);
    assert_eq!(board_pr()["checks"][0]["status"], "success");
    let comment = json!({"action": "created", "issue": {"number": 1, "pull_request": {}},
                         "repository": {"name": "app", "full_name": "acme/app", "owner": {"login": "acme"}}});
    assert_eq!(
        deliver(&s, "issue_comment", "d-comment", &comment).status,
        200
    );
    assert_eq!(board_pr()["comments"], 1);

    // Merge (the host refuses a draft: 502 with its reason), then it is ready and merges.
    let refused = s.post(
        &format!("/api/v1/runs/{id}/pull_request/merge"),
        r#"{"method":"squash"}"#,
    );
    let b = assert_error(&refused, 502);
    assert!(
        b["errors"][0]["detail"].as_str().unwrap().contains("draft"),
        "{b}"
    );
    mark_ready(&host, 1);
    let ready = host.pull_request_event("ready_for_review", 1);
    assert_eq!(deliver(&s, "pull_request", "d-ready", &ready).status, 200);
    assert_eq!(board_pr()["state"], "open");
    let merged = s.post(
        &format!("/api/v1/runs/{id}/pull_request/merge"),
        r#"{"method":"squash"}"#,
    );
    assert_eq!(merged.status, 200, "{}", merged.text());
    assert_eq!(
        merged.json(),
        json!({"number": 1, "html_url": html_url, "method": "squash"})
    );
    let pr = host.pull(1).unwrap();
    assert!(pr.merged && pr.merge_method.as_deref() == Some("squash"));
    assert_eq!(
        host.branch("acme", "app", "main").as_deref(),
        Some(last.as_str())
    );
    let k = kinds(&run_events(&s, &id));
    assert_eq!(
        k.iter().filter(|e| *e == "pull_request.merged").count(),
        1,
        "{k:?}"
    );
    assert_eq!(board_pr()["state"], "merged");

    // The token is in no event, log, process listing or the workspace's git config.
    let all_events = s
        .get(&format!("/api/v1/runs/{id}/events?limit=1000"))
        .text();
    assert!(!all_events.contains(PAT));
    assert!(!s.stderr().contains(PAT));
    let b64 = base64_of(&format!("x-access-token:{PAT}"));
    for l in &listings {
        assert!(!l.contains(PAT) && !l.contains(&b64));
    }
    let config =
        std::fs::read_to_string(s.path().join("workspaces").join(&id).join(".git/config")).unwrap();
    assert!(
        !config.contains(PAT) && !config.contains(&b64) && !config.contains("extraheader"),
        "{config}"
    );
    assert!(!config.contains("x-access-token"));
}

fn base64_of(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Marks a pull request ready on the host (as a person would in its web page).
fn mark_ready(host: &CodeHost, number: u64) {
    let st = host.pull(number).unwrap();
    assert!(st.draft);
    host.set_draft(number, false);
}

/// A CI for the scripted host: every new head of `branch` gets a `ci` check run, red while
/// `app.txt` says `broken`, green otherwise, delivered to svc as signed webhooks. Returns
/// the heads it judged (stops when `stop` is set).
fn run_ci(
    host: Arc<CodeHost>,
    server_addr: String,
    token: String,
    branch_of: Arc<Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(String, bool)>> {
    std::thread::spawn(move || {
        let mut judged: Vec<(String, bool)> = Vec::new();
        let mut n = 0;
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(30));
            let Some(branch) = branch_of.lock().unwrap().clone() else {
                continue;
            };
            let Some(head) = host.branch("acme", "app", &branch) else {
                continue;
            };
            if judged.iter().any(|(h, _)| *h == head) || host.pulls().is_empty() {
                continue;
            }
            let broken = host.show("acme", "app", &head, "app.txt").as_deref() == Some("broken");
            n += 1;
            let (conclusion, summary) = if broken {
                ("failure", "test_app: expected `fixed`, found `broken`")
            } else {
                ("success", "3 tests passed")
            };
            let payload = host.check_run("acme", "app", &head, "ci", Some(conclusion), summary);
            let lint = host.status("acme", "app", &head, "lint", "success");
            let body = payload.to_string().into_bytes();
            let headers = signed_headers(SECRET, "check_run", &format!("ci-{n}"), &body);
            post_raw(&server_addr, &token, &headers, &body);
            let body = lint.to_string().into_bytes();
            let headers = signed_headers(SECRET, "status", &format!("lint-{n}"), &body);
            post_raw(&server_addr, &token, &headers, &body);
            judged.push((head, !broken));
        }
        judged
    })
}

/// A webhook POST from another thread (the `Server` handle stays with the test).
fn post_raw(addr: &str, _token: &str, headers: &[(String, String)], body: &[u8]) {
    use std::io::{BufReader, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    let mut req = format!(
        "POST /api/v1/webhooks/codehost HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let r = read_response(&mut BufReader::new(s));
    assert_eq!(r.status, 200, "{}", r.text());
}

fn tcp_addr(s: &Server) -> String {
    match &s.addr {
        Addr::Tcp(a) => a.clone(),
        Addr::Unix(_) => panic!("tcp expected"),
    }
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_workflow_waits_for_red_checks_repairs_and_waits_again_until_green() {
    require(Tool::Git);
    let host = Arc::new(CodeHost::start(PAT, "acme", "app", &[("app.txt", "old\n")]));
    let s = server_for(&host, "");
    let dot = r#"digraph ci {
        goal="Make the app pass CI"
        start [shape=Mdiamond]; exit [shape=Msquare]
        work [shape=parallelogram, script="printf broken > app.txt"]
        pr [type="pull_request", pull_request.checks_timeout="60s", pull_request.checks_grace="30s", max_visits=3]
        repair [shape=parallelogram, max_visits=2, script="printf '%s' \"$SVC_CONTEXT_PULL_REQUEST_CHECKS_SUMMARY\" > ../repair-input.txt; printf '%s' \"$SVC_CONTEXT_PULL_REQUEST_FAILED_CHECKS\" >> ../repair-input.txt; printf fixed > app.txt"]
        start -> work -> pr
        pr -> exit [condition="outcome=succeeded"]
        pr -> repair [condition="outcome=failed"]
        repair -> pr
    }"#;
    let id = create_run(&s, &repo_body(&host, dot));
    let branch = Arc::new(Mutex::new(Some(format!("svc/run/{}", id.to_lowercase()))));
    let stop = Arc::new(AtomicBool::new(false));
    let ci = run_ci(
        Arc::clone(&host),
        tcp_addr(&s),
        s.token.clone(),
        Arc::clone(&branch),
        Arc::clone(&stop),
    );
    start_run(&s, &id);
    let end = wait_status(&s, &id, "succeeded", 90);
    stop.store(true, Ordering::SeqCst);
    let judged = ci.join().unwrap();
    assert_eq!(end["kind"], "succeeded", "{end}");
    // CI saw two heads: the broken one (red) and the repaired one (green).
    assert_eq!(
        judged.iter().map(|(_, ok)| *ok).collect::<Vec<_>>(),
        [false, true],
        "{judged:?}"
    );
    let events = run_events(&s, &id);
    let path: Vec<String> = events
        .iter()
        .filter(|e| e["event"] == "stage.started")
        .map(|e| e["node_id"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        path,
        ["start", "work", "pr", "repair", "pr", "exit"],
        "{path:?}"
    );
    let checks: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "pull_request.checks")
        .collect();
    assert_eq!(checks.len(), 2);
    assert_eq!(checks[0]["properties"]["verdict"], "failed");
    assert_eq!(checks[1]["properties"]["verdict"], "passed");
    assert_eq!(checks[1]["properties"]["head_sha"], judged[1].0.as_str());
    // One pull request, updated in place by the second push.
    assert_eq!(host.pulls().len(), 1);
    let k = kinds(&events);
    assert_eq!(k.iter().filter(|e| *e == "pull_request.created").count(), 1);
    assert_eq!(k.iter().filter(|e| *e == "pull_request.pushed").count(), 1);
    // The repair stage read which check failed and its output.
    let input = std::fs::read_to_string(s.path().join("workspaces").join("repair-input.txt"))
        .unwrap_or_else(|e| panic!("repair input: {e}"));
    assert!(
        input.contains("- ci (failure): ci: failure: test_app: expected `fixed`, found `broken`"),
        "{input}"
    );
    assert!(input.ends_with("ci"), "{input}");
    // The kept pull request is green on the repaired head.
    let view = s.get(&format!("/api/v1/runs/{id}/pull_request")).json();
    assert_eq!(view["data"]["checks_verdict"], "passed", "{view}");
    assert_eq!(
        host.show("acme", "app", &judged[1].0, "app.txt").as_deref(),
        Some("fixed")
    );
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn webhook_signatures_replays_and_bad_bodies() {
    require(Tool::Git);
    let host = CodeHost::start(PAT, "acme", "app", &[("a.txt", "a\n")]);
    let text = settings(&host, "[server.http]\nmax_body_bytes = 65536\n");
    let s = Server::with(Opts {
        settings: Some(&text),
        ..Opts::default()
    });
    let body = br#"{"zen":"Keep it logically awesome.","repository":{"name":"app","full_name":"acme/app","owner":{"login":"acme"}}}"#;
    let send = |headers: &[(&str, &str)], body: &[u8]| {
        s.raw("POST", "/api/v1/webhooks/codehost", headers, Some(body))
    };
    // No secret in the vault: nothing can be verified.
    let sig = svc::internal::integrations::webhooks::sign(SECRET.as_bytes(), body);
    let h = [
        ("X-GitHub-Event", "ping"),
        ("X-GitHub-Delivery", "p0"),
        ("X-Hub-Signature-256", sig.as_str()),
    ];
    let b = assert_error(&send(&h, body), 401);
    assert!(b["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("CODEHOST_WEBHOOK_SECRET"));
    store_key(&s, "CODEHOST_WEBHOOK_SECRET", SECRET);
    // Valid.
    let ok = send(&h, body);
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(ok.json()["detail"], "pong");
    // Replayed: acknowledged, not applied again.
    let again = send(&h, body);
    assert_eq!(again.status, 200);
    assert_eq!(again.json()["outcome"], "duplicate");
    // Forged (another secret), tampered body, missing, malformed and stale signatures: 401.
    let forged = svc::internal::integrations::webhooks::sign(b"not-the-secret", body);
    for (sig, what) in [
        (Some(forged.as_str()), "forged"),
        (None, "missing"),
        (Some("sha256=xyz"), "malformed"),
        (
            Some("sha1=0123456789abcdef0123456789abcdef01234567"),
            "sha1",
        ),
    ] {
        let mut h = vec![("X-GitHub-Event", "ping"), ("X-GitHub-Delivery", "p1")];
        if let Some(sig) = sig {
            h.push(("X-Hub-Signature-256", sig));
        }
        let r = send(&h, body);
        assert_eq!(r.status, 401, "{what}: {}", r.text());
        assert_error(&r, 401);
    }
    let tampered = br#"{"zen":"Keep it logically awesome!","repository":{"name":"app","full_name":"acme/app","owner":{"login":"acme"}}}"#;
    assert_error(&send(&h, tampered), 401);
    // After the secret is rotated, a delivery signed with the old one is stale: 401.
    store_key(&s, "CODEHOST_WEBHOOK_SECRET", "rotated-secret");
    let stale = [
        ("X-GitHub-Event", "ping"),
        ("X-GitHub-Delivery", "p2"),
        ("X-Hub-Signature-256", sig.as_str()),
    ];
    assert_error(&send(&stale, body), 401);
    store_key(&s, "CODEHOST_WEBHOOK_SECRET", SECRET);
    // Signed but malformed JSON, or without a delivery id: 400.
    let bad = b"{not json";
    let bad_sig = svc::internal::integrations::webhooks::sign(SECRET.as_bytes(), bad);
    let h2 = [
        ("X-GitHub-Event", "push"),
        ("X-GitHub-Delivery", "p3"),
        ("X-Hub-Signature-256", bad_sig.as_str()),
    ];
    assert_error(&send(&h2, bad), 400);
    let h3 = [
        ("X-GitHub-Event", "ping"),
        ("X-Hub-Signature-256", sig.as_str()),
    ];
    assert_error(&send(&h3, body), 400);
    // Oversize: 413 from the HTTP edge, with the error body.
    let big = vec![b' '; 100_000];
    let big_sig = svc::internal::integrations::webhooks::sign(SECRET.as_bytes(), &big);
    let h4 = [
        ("X-GitHub-Event", "push"),
        ("X-GitHub-Delivery", "p4"),
        ("X-Hub-Signature-256", big_sig.as_str()),
    ];
    assert_error(&send(&h4, &big), 413);
    // Every accepted delivery is listed, newest first; refused ones were never recorded.
    let list = s.get("/api/v1/webhooks/codehost/deliveries").json();
    let ids: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["delivery_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["p0"], "{list}");
    assert_eq!(list["data"][0]["event"], "ping");
    assert_eq!(list["data"][0]["repository"], "acme/app");
    // The route takes no bearer token, and the list needs one.
    assert_eq!(
        s.raw("GET", "/api/v1/webhooks/codehost/deliveries", &[], None)
            .status,
        401
    );
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn creation_jobs_links_preconditions_and_close() {
    require(Tool::Git);
    let host = CodeHost::start(PAT, "acme", "app", &[("greeting.txt", "helo\n")]);
    let s = server_for(&host, "");
    let id = run_to_end(&s, &repo_body(&host, &flow("echo hello > greeting.txt")));
    assert_eq!(status_kind(&s, &id), "succeeded");
    assert!(
        host.pulls().is_empty(),
        "no [run.pull_request]: nothing opened"
    );
    let pr_path = format!("/api/v1/runs/{id}/pull_request");
    assert_eq!(
        assert_error(&s.get(&pr_path), 404)["errors"][0]["code"],
        "no_stored_record"
    );

    // A creation job: 202, Location, Retry-After; the job ends with the link.
    let r = s.post(&pr_path, "{}");
    assert_eq!(r.status, 202, "{}", r.text());
    assert_eq!(
        r.header("location"),
        Some(format!("{pr_path}/creation").as_str())
    );
    assert!(r.header("retry-after").is_some());
    let job = r.json();
    assert!(
        matches!(job["status"].as_str(), Some("pending" | "succeeded")),
        "{job}"
    );
    let done = wait_for(30, "the creation job", || {
        let c = s.get(&format!("{pr_path}/creation")).json();
        (c["status"] != "pending").then_some(c)
    });
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["id"], job["id"]);
    assert_eq!(done["pull_request"]["number"], 1);
    assert_eq!(run_json(&s, &id)["pull_request"]["number"], 1);
    let b = assert_error(&s.post(&pr_path, "{}"), 409);
    assert_eq!(b["errors"][0]["code"], "pull_request_exists");
    let k = kinds(&run_events(&s, &id));
    let requested = k
        .iter()
        .position(|e| e == "pull_request.creation_requested")
        .unwrap();
    let created = k.iter().position(|e| e == "pull_request.created").unwrap();
    assert!(requested < created);

    // Kept details are served for 30 s; a review marks them stale. The host down then:
    // details unavailable with the reason, never a 5xx.
    let fetches = host.api_calls();
    for _ in 0..5 {
        assert_eq!(
            s.get(&pr_path).json()["meta"]["details_status"],
            "available"
        );
    }
    assert_eq!(host.api_calls(), fetches, "fresh: no fetch");
    host.set_pat(None);
    let review = json!({"action": "submitted", "pull_request": {"number": 1},
                        "repository": {"name": "app", "full_name": "acme/app", "owner": {"login": "acme"}}});
    assert_eq!(
        deliver(&s, "pull_request_review", "rv1", &review).json()["outcome"],
        "applied"
    );
    let v = s.get(&pr_path);
    assert_eq!(v.status, 200, "{}", v.text());
    let v = v.json();
    assert_eq!(v["meta"]["details_status"], "unavailable", "{v}");
    assert_eq!(v["meta"]["details_unavailable_reason"], "fetch_failed");
    assert!(
        v["meta"]["details_error"]
            .as_str()
            .unwrap()
            .contains("Bad credentials"),
        "{v}"
    );
    let st = s.get("/api/v1/system/integrations").json();
    assert_eq!(st["data"][0]["status"], "error", "{st}");
    host.set_pat(Some(PAT));

    // Close on the host, recorded once.
    let c = s.post(&format!("{pr_path}/close"), "");
    assert_eq!(c.status, 200, "{}", c.text());
    assert_eq!(host.pull(1).unwrap().state, "closed");
    let closed = host.pull_request_event("closed", 1);
    assert_eq!(deliver(&s, "pull_request", "c1", &closed).status, 200);
    let k = kinds(&run_events(&s, &id));
    assert_eq!(
        k.iter().filter(|e| *e == "pull_request.closed").count(),
        1,
        "{k:?}"
    );
    let st = s.get("/api/v1/system/integrations").json();
    assert_eq!(st["data"][0]["status"], "configured", "{st}");

    // Unlink, then link a pull request made elsewhere; bad URLs are refused.
    let un = s.call("DELETE", &pr_path, None);
    assert_eq!(un.status, 200, "{}", un.text());
    assert!(run_json(&s, &id)["pull_request"].is_null());
    assert_error(&s.call("DELETE", &pr_path, None), 404);
    let put = |url: &str| s.call("PUT", &pr_path, Some(&json!({"html_url": url}).to_string()));
    assert_eq!(
        assert_error(&put("https://gitlab.com/acme/app/pull/3"), 400)["errors"][0]["code"],
        "unsupported_host"
    );
    assert_eq!(
        assert_error(&put(&format!("{}/acme/app/issues/3", host.url)), 400)["errors"][0]["code"],
        "invalid_pull_request_url"
    );
    assert_error(&s.call("PUT", &pr_path, Some("{not json")), 400);
    let linked = put(&format!("{}/acme/app/pull/1", host.url));
    assert_eq!(linked.status, 200, "{}", linked.text());
    assert_eq!(run_json(&s, &id)["pull_request"]["number"], 1);
    assert_eq!(s.get(&pr_path).json()["data"]["state"], "closed");

    // Preconditions: a scratch run has no repository; a run still going is not finished; a
    // failed one needs force; one that changed nothing has nothing to publish.
    let scratch = run_to_end(&s, &run_body(HELLO));
    let b = assert_error(
        &s.post(&format!("/api/v1/runs/{scratch}/pull_request"), "{}"),
        400,
    );
    assert_eq!(b["errors"][0]["code"], "missing_repo_origin");
    let waiting = create_run(
        &s,
        &repo_body(&host, "digraph w { start [shape=Mdiamond]; exit [shape=Msquare]; w [shape=insulator, duration=\"30s\"]; start -> w -> exit }"),
    );
    start_run(&s, &waiting);
    wait_status(&s, &waiting, "running", 30);
    let b = assert_error(
        &s.post(&format!("/api/v1/runs/{waiting}/pull_request"), "{}"),
        400,
    );
    assert_eq!(b["errors"][0]["code"], "run_not_finished");
    s.post(&format!("/api/v1/runs/{waiting}/cancel"), "");
    let failing = "digraph f { start [shape=Mdiamond]; exit [shape=Msquare]; \
        edit [shape=parallelogram, script=\"echo changed > greeting.txt\"]; \
        check [shape=parallelogram, script=\"exit 3\"]; start -> edit -> check -> exit }";
    let failed = run_to_end(&s, &repo_body(&host, failing));
    assert_eq!(status_kind(&s, &failed), "failed");
    let b = assert_error(
        &s.post(&format!("/api/v1/runs/{failed}/pull_request"), "{}"),
        400,
    );
    assert_eq!(b["errors"][0]["code"], "run_not_successful");
    let forced = s.post(
        &format!("/api/v1/runs/{failed}/pull_request"),
        r#"{"force": true}"#,
    );
    assert_eq!(forced.status, 202, "{}", forced.text());
    let unchanged = run_to_end(&s, &repo_body(&host, &flow("true")));
    let b = assert_error(
        &s.post(&format!("/api/v1/runs/{unchanged}/pull_request"), "{}"),
        400,
    );
    assert_eq!(b["errors"][0]["code"], "empty_diff");
    assert_error(
        &s.post(
            &format!("/api/v1/runs/{unchanged}/pull_request"),
            r#"{"nope": 1}"#,
        ),
        400,
    );
    assert_error(
        &s.post("/api/v1/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/pull_request", "{}"),
        404,
    );
    // A base branch the host does not have.
    let mut body = repo_body(&host, &flow("echo later > greeting.txt"));
    body["pull_request_options"] = json!({"base": "release"});
    let elsewhere = run_to_end(&s, &body);
    let b = assert_error(
        &s.post(&format!("/api/v1/runs/{elsewhere}/pull_request"), "{}"),
        400,
    );
    assert_eq!(b["errors"][0]["code"], "missing_base_branch", "{b}");
    assert!(b["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("`release`"));
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_publish_failure_fails_the_run_keeps_its_work_and_can_be_retried() {
    require(Tool::Git);
    let host = CodeHost::start(PAT, "acme", "app", &[("greeting.txt", "helo\n")]);
    let s = server_for(&host, "[run.pull_request]\nenabled = true\ndraft = false\n");
    host.refuse_pushes(Some(
        "refusing to allow pushes to this repository: branch protection",
    ));
    let id = run_to_end(&s, &repo_body(&host, &flow("echo hello > greeting.txt")));
    let run = run_json(&s, &id);
    assert_eq!(
        run["lifecycle"]["status"],
        json!({"kind": "failed", "reason": "publish_failed"})
    );
    let message = run["lifecycle"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("branch protection"), "{message}");
    assert!(!message.contains(PAT));
    let k = kinds(&run_events(&s, &id));
    assert!(k.contains(&"pull_request.failed".to_string()), "{k:?}");
    assert!(host.pulls().is_empty());
    // Nothing lost: the diff and the run branch's files are still there.
    assert_eq!(run["diff"]["files_changed"], 1);
    let files = s.get(&format!("/api/v1/runs/{id}/files")).json();
    assert_eq!(files["data"][0]["new_file"]["contents"], "hello\n");
    // Retried once the host accepts: no force needed (only publishing failed).
    host.refuse_pushes(None);
    let r = s.post(&format!("/api/v1/runs/{id}/pull_request"), "{}");
    assert_eq!(r.status, 202, "{}", r.text());
    let done = wait_for(30, "the creation job", || {
        let c = s
            .get(&format!("/api/v1/runs/{id}/pull_request/creation"))
            .json();
        (c["status"] != "pending").then_some(c)
    });
    assert_eq!(done["status"], "succeeded", "{done}");
    let pr = host.pull(1).unwrap();
    assert!(!pr.draft, "draft = false");
    let last = s.get(&format!("/api/v1/runs/{id}/checkpoint")).json()["git_commit_sha"].clone();
    assert_eq!(
        host.branch("acme", "app", &pr.head).as_deref(),
        last.as_str()
    );
    assert_eq!(run_json(&s, &id)["pull_request"]["number"], 1);
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_pending_creation_job_resumes_after_a_kill_without_opening_twice() {
    require(Tool::Git);
    let host = CodeHost::start(PAT, "acme", "app", &[("greeting.txt", "helo\n")]);
    let s = server_for(&host, "");
    let id = run_to_end(&s, &repo_body(&host, &flow("echo hello > greeting.txt")));
    host.set_latency(Duration::from_millis(700));
    let r = s.post(&format!("/api/v1/runs/{id}/pull_request"), "{}");
    assert_eq!(r.status, 202);
    assert_eq!(r.json()["status"], "pending");
    // A second request while it is pending answers the same job.
    let again = s.post(&format!("/api/v1/runs/{id}/pull_request"), "{}");
    assert_eq!(again.status, 202);
    assert_eq!(again.json()["id"], r.json()["id"]);
    let dir = s.kill();
    let s = Server::with(Opts {
        dir: Some(dir),
        ..Opts::default()
    });
    let done = wait_for(60, "the resumed creation job", || {
        let c = s
            .get(&format!("/api/v1/runs/{id}/pull_request/creation"))
            .json();
        (c["status"] != "pending").then_some(c)
    });
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(host.pulls().len(), 1, "{:?}", host.pulls());
    assert_eq!(run_json(&s, &id)["pull_request"]["number"], 1);
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn app_installation_tokens_are_minted_cached_and_renewed_once() {
    require(Tool::Git);
    let host = CodeHost::start("no-pat-here", "acme", "app", &[("greeting.txt", "helo\n")]);
    host.add_repo("acme", "other", &[("x", "x\n")]);
    let extra = format!("strategy = \"app\"\napp_id = {APP_ID}\napp_url = \"https://github.com/apps/svc\"\n[run.pull_request]\nenabled = true\n");
    let text = settings(&host, &extra);
    let s = Server::with(Opts {
        settings: Some(&text),
        ..Opts::default()
    });
    // Missing the key: the status names it.
    let st = s.get("/api/v1/system/integrations").json();
    assert_eq!(st["data"][0]["status"], "missing_credentials", "{st}");
    assert_eq!(
        st["data"][0]["missing_credentials"],
        json!(["CODEHOST_APP_PRIVATE_KEY"])
    );
    assert_eq!(st["data"][1]["provider"], "chat");
    // The key from a file, never on a command line.
    let pem = s.path().join("app.pem");
    std::fs::write(&pem, APP_KEY_PEM).unwrap();
    let o = Command::new(bin())
        .args(["secrets", "set", "CODEHOST_APP_PRIVATE_KEY", "--from-file"])
        .arg(&pem)
        .arg("--state-dir")
        .arg(s.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_file(&pem).unwrap();
    let st = s.get("/api/v1/system/integrations").json();
    assert_eq!(st["data"][0]["status"], "configured", "{st}");
    assert_eq!(st["data"][0]["metadata"]["app_id"], APP_ID);
    assert!(!st.to_string().contains("PRIVATE KEY"));

    let id = run_to_end(&s, &repo_body(&host, &flow("echo hello > greeting.txt")));
    assert_eq!(status_kind(&s, &id), "succeeded", "{}", run_json(&s, &id));
    assert_eq!(host.pulls().len(), 1);
    // Clone, push, ref check and pull request: one installation token for the repository.
    assert_eq!(host.tokens_minted(), 1);
    let token = host.issued_tokens().pop().unwrap();
    let used: Vec<_> = host
        .requests()
        .into_iter()
        .filter(|r| r.authorization.as_deref() == Some(&format!("Bearer {token}")))
        .collect();
    assert!(used.len() >= 3, "{used:?}");

    // Repository access: the installed one, and one the app cannot reach.
    let acc = s.get("/api/v1/repos/codehost/acme/app").json();
    assert_eq!(
        acc,
        json!({"owner": "acme", "name": "app", "accessible": true, "default_branch": "main",
                           "private": true, "permissions": {"pull": true, "push": true, "admin": false}})
    );
    let other = s.get("/api/v1/repos/codehost/nobody/else").json();
    assert_eq!(other["accessible"], false, "{other}");
    assert_eq!(other["install_url"], "https://github.com/apps/svc");
    assert_error(&s.get("/api/v1/repos/codehost/acme/bad%20name"), 400);

    // The token expires early (revoked): the next call is refused, renewed once, and works.
    host.revoke_installation_tokens();
    let before = host.tokens_minted();
    let c = s.post(&format!("/api/v1/runs/{id}/pull_request/close"), "");
    assert_eq!(c.status, 200, "{}", c.text());
    assert_eq!(host.tokens_minted(), before + 1);
    // Refused even when fresh: a clear error after one renewal, no loop.
    host.reject_tokens(true);
    let before = host.tokens_minted();
    let m = s.post(&format!("/api/v1/runs/{id}/pull_request/merge"), "{}");
    let b = assert_error(&m, 502);
    assert!(
        b["errors"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("refused twice"),
        "{b}"
    );
    assert_eq!(host.tokens_minted(), before + 1);
    for t in host.issued_tokens() {
        assert!(!s.stderr().contains(&t));
        assert!(!s
            .get(&format!("/api/v1/runs/{id}/events?limit=1000"))
            .text()
            .contains(&t));
    }
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn code_host_deliveries_start_automations_without_a_secret_of_their_own() {
    require(Tool::Git);
    let host = CodeHost::start(PAT, "acme", "app", &[("a.txt", "a\n")]);
    let s = server_for(&host, "");
    let v = s.post("/api/v1/workflow-versions", &package(HELLO).to_string());
    assert!(v.status == 201 || v.status == 200, "{}", v.text());
    let version = v.json()["id"].as_str().unwrap().to_string();
    let body = json!({"id": "on-push", "name": "On push", "target": {"workflow_version_id": version},
        "triggers": [{"id": "main", "kind": "codehost", "events": ["push"],
                      "filter": {"repositories": ["acme/app"], "branches": ["main"]},
                      "inputs": {"sha": "$.after"}}]});
    let r = s.post("/api/v1/automations", &body.to_string());
    assert_eq!(r.status, 201, "{}", r.text());
    let push = json!({"ref": "refs/heads/main", "after": "0123abcd", "repository":
        {"name": "app", "full_name": "acme/app", "owner": {"login": "acme"}}});
    let r = deliver(&s, "push", "push-1", &push);
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.json()["detail"].as_str().unwrap().contains("on-push"),
        "{}",
        r.text()
    );
    let fires = s.get("/api/v1/automations/on-push/fires").json();
    assert_eq!(fires["data"].as_array().unwrap().len(), 1, "{fires}");
    let run_id = fires["data"][0]["run_id"].as_str().unwrap().to_string();
    assert_eq!(
        run_events(&s, &run_id)[0]["properties"]["inputs"],
        json!({"sha": "0123abcd"})
    );
    assert_eq!(fires["data"][0]["delivery_id"], "push-1");
    // A replay starts nothing; a push to another branch is no fire.
    assert_eq!(
        deliver(&s, "push", "push-1", &push).json()["outcome"],
        "duplicate"
    );
    let mut other = push.clone();
    other["ref"] = json!("refs/heads/dev");
    deliver(&s, "push", "push-2", &other);
    let fires = s.get("/api/v1/automations/on-push/fires").json();
    assert_eq!(fires["data"].as_array().unwrap().len(), 1, "{fires}");
    let list = s.get("/api/v1/webhooks/codehost/deliveries").json();
    assert_eq!(
        list["data"][1]["detail"],
        "svc does not act on `push`; fired automation(s) on-push"
    );
}

/// A run repository body whose goal is `goal` (the scripted model answers by goal).
fn goal_body(host: &CodeHost, goal: &str, script: &str) -> Value {
    let dot = format!(
        "digraph fix {{ goal=\"{goal}\"; start [shape=Mdiamond]; exit [shape=Msquare]; \
         change [shape=parallelogram, script=\"{script}\"]; start -> change -> exit }}"
    );
    repo_body(host, &dot)
}

/// The user prompt a recorded Anthropic request carried.
fn prompt_of(r: &crate::support::llm::Recorded) -> String {
    crate::support::llm::user_texts(svc::internal::llm::Provider::Anthropic, &r.body).join("\n")
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn the_runs_model_writes_the_pull_request_and_the_template_stands_in_when_it_fails() {
    use crate::support::llm::{reply, streamed, text, Reply, ScriptedServer, SMALL_USAGE};
    use svc::internal::llm::Provider;
    require(Tool::Git);
    let long_title = "Greet users with hello instead of helo, fixing the typo that every \
                      visitor of the landing page has seen since March";
    assert!(long_title.chars().count() > 72);
    let answer =
        format!("{long_title}\n\nThe greeting said `helo`.\n\n- `greeting.txt` now says `hello`.");
    // The model answers by goal: a good answer, a provider failure, an empty answer.
    let llm = ScriptedServer::start_with(move |_, r| {
        let p = prompt_of(r);
        if p.contains("Fix the greeting") {
            reply(
                Provider::Anthropic,
                &text(&answer),
                SMALL_USAGE,
                streamed(r),
            )
        } else if p.contains("Provider down") {
            Reply::error(
                500,
                json!({"type": "error", "error": {"type": "api_error", "message": "overloaded"}}),
            )
        } else {
            reply(Provider::Anthropic, &text("  \n"), SMALL_USAGE, streamed(r))
        }
    });
    let extra = format!(
        "[run.pull_request]\nenabled = true\n[llm.providers.anthropic]\nbase_url = \"{}\"\n",
        llm.base
    );
    let host = CodeHost::start(PAT, "acme", "app", &[("greeting.txt", "helo\n")]);
    let s = server_for(&host, &extra);
    store_key(&s, "ANTHROPIC_API_KEY", "pr-text-key");

    // The model's title (cut to 72 characters) and body; svc appends the diff stat and the
    // link to the run.
    let id = run_to_end(
        &s,
        &goal_body(&host, "Fix the greeting", "echo hello > greeting.txt"),
    );
    assert_eq!(status_kind(&s, &id), "succeeded");
    let pr = host.pull(1).expect("the pull request");
    assert_eq!(pr.title.chars().count(), 72, "{}", pr.title);
    assert!(
        pr.title
            .starts_with("Greet users with hello instead of helo")
            && pr.title.ends_with("..."),
        "{}",
        pr.title
    );
    assert!(
        pr.body
            .starts_with("The greeting said `helo`.\n\n- `greeting.txt` now says `hello`."),
        "{}",
        pr.body
    );
    assert!(pr.body.contains("`greeting.txt` +1 -1"), "{}", pr.body);
    assert!(
        pr.body.trim_end().ends_with(&format!("svc run {id}).")) && !pr.title.contains(&id),
        "{}",
        pr.body
    );
    let created = run_events(&s, &id)
        .into_iter()
        .find(|e| e["event"] == "pull_request.created")
        .unwrap();
    assert_eq!(created["properties"]["title"], pr.title.as_str());
    let model = crate::support::llm::model_for(Provider::Anthropic);
    assert_eq!(created["properties"]["written_by"], model.as_str());
    // The model was asked with the goal, the stages and their outcomes, and the diff stat,
    // with the vault's key, and the key is nowhere in what the run shows.
    let asked = llm.requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].header("x-api-key"), Some("pr-text-key"));
    let p = prompt_of(&asked[0]);
    assert!(
        p.contains("Fix the greeting")
            && p.contains("- change: succeeded")
            && p.contains("`greeting.txt` +1 -1"),
        "{p}"
    );
    assert!(!s
        .get(&format!("/api/v1/runs/{id}/events?limit=1000"))
        .text()
        .contains("pr-text-key"));

    // The provider failing: the template, and the run still succeeds with its pull request.
    let id = run_to_end(
        &s,
        &goal_body(
            &host,
            "Provider down: fix the greeting again",
            "echo hi > greeting.txt",
        ),
    );
    assert_eq!(status_kind(&s, &id), "succeeded");
    let pr = host.pull(2).expect("the second pull request");
    assert_eq!(pr.title, "Provider down: fix the greeting again");
    let created = run_events(&s, &id)
        .into_iter()
        .find(|e| e["event"] == "pull_request.created")
        .unwrap();
    assert!(created["properties"]["written_by"].is_null(), "{created}");
    assert!(
        pr.body.starts_with("## Goal\n\nProvider down"),
        "{}",
        pr.body
    );
    assert!(pr.body.contains("- `change`: succeeded"), "{}", pr.body);
    assert!(pr.body.trim_end().ends_with(&format!("svc run {id}).")));

    // An empty answer: the template too.
    let id = run_to_end(&s, &goal_body(&host, "Say hey", "echo hey > greeting.txt"));
    assert_eq!(status_kind(&s, &id), "succeeded");
    let pr = host.pull(3).expect("the third pull request");
    assert_eq!(pr.title, "Say hey");
    assert!(pr.body.starts_with("## Goal\n\nSay hey"), "{}", pr.body);
    assert_eq!(llm.count(), 3, "one call per pull request, no retry");

    // A creation job names the model to write with; the job reports it as resolved.
    let mut body = goal_body(&host, "Fix the greeting later", "echo hello > greeting.txt");
    body["pull_request_options"] = json!({"enabled": false});
    let id = run_to_end(&s, &body);
    assert!(run_json(&s, &id)["pull_request"].is_null());
    let pr_path = format!("/api/v1/runs/{id}/pull_request");
    let r = s.post(&pr_path, &json!({"model": model}).to_string());
    assert_eq!(r.status, 202, "{}", r.text());
    let done = wait_for(30, "the creation job", || {
        let c = s.get(&format!("{pr_path}/creation")).json();
        (c["status"] != "pending").then_some(c)
    });
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["model"], model.as_str());
    let pr = host.pull(4).expect("the fourth pull request");
    assert!(
        pr.title.starts_with("Greet users with hello"),
        "{}",
        pr.title
    );
    assert_eq!(llm.count(), 4);
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn auto_merge_merges_once_every_check_passed_and_a_refusal_is_told_once() {
    require(Tool::Git);
    let host = CodeHost::start(PAT, "acme", "app", &[("greeting.txt", "helo\n")]);
    // Nothing in the settings: the create body asks for the pull request and auto-merge.
    let s = server_for(&host, "");
    let body = |script: &str| {
        let mut b = repo_body(&host, &flow(script));
        b["pull_request_options"] =
            json!({"enabled": true, "auto_merge": true, "merge_strategy": "rebase"});
        b
    };
    let id = run_to_end(&s, &body("echo hello > greeting.txt"));
    assert_eq!(status_kind(&s, &id), "succeeded");
    let pr = host.pull(1).expect("opened");
    assert!(!pr.draft, "auto_merge opens it ready for review");
    let head = host.branch("acme", "app", &pr.head).unwrap();
    let pr_path = format!("/api/v1/runs/{id}/pull_request");
    assert_eq!(s.get(&pr_path).json()["data"]["auto_merge"], true);

    // Red CI, and a check still running: not merged.
    let red = host.check_run("acme", "app", &head, "ci", Some("failure"), "1 failed");
    assert_eq!(
        deliver(&s, "check_run", "am-1", &red).json()["outcome"],
        "applied"
    );
    let lint = host.status("acme", "app", &head, "lint", "pending");
    assert_eq!(
        deliver(&s, "status", "am-2", &lint).json()["outcome"],
        "applied"
    );
    let green = host.check_run("acme", "app", &head, "ci", Some("success"), "all passed");
    assert_eq!(
        deliver(&s, "check_run", "am-3", &green).json()["outcome"],
        "applied"
    );
    // The merge would run on its own thread: give it time to (wrongly) happen.
    std::thread::sleep(Duration::from_millis(500));
    assert!(!host.pull(1).unwrap().merged, "lint is still pending");
    assert_eq!(s.get(&pr_path).json()["data"]["checks_verdict"], "pending");

    // Every check passed: merged with the run's strategy, once, by svc.
    let lint = host.status("acme", "app", &head, "lint", "success");
    assert_eq!(
        deliver(&s, "status", "am-4", &lint).json()["outcome"],
        "applied"
    );
    wait_for(30, "the auto-merge", || {
        host.pull(1).unwrap().merged.then_some(())
    });
    assert_eq!(
        host.pull(1).unwrap().merge_method.as_deref(),
        Some("rebase")
    );
    assert_eq!(
        host.branch("acme", "app", "main").as_deref(),
        Some(head.as_str())
    );
    let merged = wait_for(30, "pull_request.merged", || {
        run_events(&s, &id)
            .into_iter()
            .find(|e| e["event"] == "pull_request.merged")
    });
    assert_eq!(merged["properties"]["method"], "rebase", "{merged}");
    assert_eq!(merged["properties"]["source"], "auto_merge");
    assert_eq!(merged["actor"]["kind"], "system");
    // The host's own `closed` delivery afterwards records nothing twice.
    let closed = host.pull_request_event("closed", 1);
    assert_eq!(deliver(&s, "pull_request", "am-5", &closed).status, 200);
    let k = kinds(&run_events(&s, &id));
    assert_eq!(
        k.iter().filter(|e| *e == "pull_request.merged").count(),
        1,
        "{k:?}"
    );
    assert!(!k.contains(&"pull_request.failed".to_string()), "{k:?}");

    // The host refusing (branch protection): told once as pull_request.failed with the
    // host's reason, not retried on the same head; merging by hand later still works.
    let id = run_to_end(&s, &body("echo hi > greeting.txt"));
    let pr = host.pull(2).expect("the second pull request");
    let head = host.branch("acme", "app", &pr.head).unwrap();
    host.refuse_merges(Some("At least 1 approving review is required by reviewers"));
    let green = host.check_run("acme", "app", &head, "ci", Some("success"), "ok");
    assert_eq!(deliver(&s, "check_run", "am-6", &green).status, 200);
    let failed = wait_for(30, "the auto-merge's failure", || {
        run_events(&s, &id)
            .into_iter()
            .find(|e| e["event"] == "pull_request.failed")
    });
    assert_eq!(failed["properties"]["operation"], "auto_merge", "{failed}");
    assert!(
        failed["properties"]["error"]
            .as_str()
            .unwrap()
            .contains("approving review"),
        "{failed}"
    );
    let more = host.status("acme", "app", &head, "lint", "success");
    assert_eq!(
        deliver(&s, "status", "am-7", &more).json()["outcome"],
        "applied"
    );
    std::thread::sleep(Duration::from_millis(500));
    let k = kinds(&run_events(&s, &id));
    assert_eq!(
        k.iter().filter(|e| *e == "pull_request.failed").count(),
        1,
        "{k:?}"
    );
    assert!(!host.pull(2).unwrap().merged);
    host.refuse_merges(None);
    let r = s.post(&format!("/api/v1/runs/{id}/pull_request/merge"), "{}");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["method"],
        "rebase",
        "the run's strategy by default"
    );
    assert!(host.pull(2).unwrap().merged);
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn auto_merge_without_webhooks_merges_after_a_restart_once_the_host_reports_green() {
    require(Tool::Git);
    let host = CodeHost::start(PAT, "acme", "app", &[("greeting.txt", "helo\n")]);
    let s = server_for(
        &host,
        "[run.pull_request]\nenabled = true\nauto_merge = true\nmerge_strategy = \"squash\"\n",
    );
    let id = run_to_end(&s, &repo_body(&host, &flow("echo hello > greeting.txt")));
    assert_eq!(status_kind(&s, &id), "succeeded");
    let pr = host.pull(1).expect("opened");
    let head = host.branch("acme", "app", &pr.head).unwrap();
    // The server stops; CI reports on the host meanwhile, and no webhook ever reaches svc.
    let dir = s.kill();
    host.check_run("acme", "app", &head, "ci", Some("success"), "all passed");
    host.status("acme", "app", &head, "lint", "success");
    let before = host.api_calls();
    let s = Server::with(Opts {
        dir: Some(dir),
        ..Opts::default()
    });
    // The restarted server finds the pull request awaiting its merge and asks the host.
    wait_for(90, "the auto-merge without webhooks", || {
        host.pull(1).unwrap().merged.then_some(())
    });
    assert_eq!(
        host.pull(1).unwrap().merge_method.as_deref(),
        Some("squash")
    );
    let merged = wait_for(30, "pull_request.merged", || {
        run_events(&s, &id)
            .into_iter()
            .find(|e| e["event"] == "pull_request.merged")
    });
    assert_eq!(merged["properties"]["source"], "auto_merge", "{merged}");
    // What it asked: the pull request with its head's checks and statuses, then the merge;
    // a handful of calls, not a poll loop.
    let calls = host.api_calls() - before;
    assert!((4..=12).contains(&calls), "{calls} REST calls");
    assert_eq!(
        s.get(&format!("/api/v1/runs/{id}/pull_request")).json()["data"]["state"],
        "merged"
    );
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_host_slower_than_the_timeout_gives_clear_errors_and_never_holds_a_request() {
    require(Tool::Git);
    let host = CodeHost::start(PAT, "acme", "app", &[("greeting.txt", "helo\n")]);
    let s = server_for(
        &host,
        "timeout_secs = 1\n[run.pull_request]\nenabled = true\n",
    );
    let id = run_to_end(&s, &repo_body(&host, &flow("echo hello > greeting.txt")));
    assert_eq!(status_kind(&s, &id), "succeeded");
    let pr_path = format!("/api/v1/runs/{id}/pull_request");
    // The host now answers its REST calls after 3 s: past svc's 1 s.
    host.set_latency(Duration::from_secs(3));
    let review = json!({"action": "submitted", "pull_request": {"number": 1},
                        "repository": {"name": "app", "full_name": "acme/app", "owner": {"login": "acme"}}});
    assert_eq!(
        deliver(&s, "pull_request_review", "slow-1", &review).status,
        200
    );
    let v = s.get(&pr_path);
    assert_eq!(v.status, 200, "{}", v.text());
    let v = v.json();
    assert_eq!(v["meta"]["details_status"], "unavailable", "{v}");
    assert_eq!(v["meta"]["details_unavailable_reason"], "fetch_failed");
    let why = v["meta"]["details_error"].as_str().unwrap().to_lowercase();
    assert!(why.contains("time"), "{why}");
    // What is kept is still served: the link and the board.
    assert_eq!(v["data"]["link"]["number"], 1);
    let merge = s.post(&format!("{pr_path}/merge"), r#"{"method":"merge"}"#);
    let b = assert_error(&merge, 502);
    assert_eq!(b["errors"][0]["code"], "codehost_error", "{b}");
    assert!(!host.pull(1).unwrap().merged);
    let st = s.get("/api/v1/system/integrations").json();
    assert_eq!(st["data"][0]["status"], "error", "{st}");
    // A run publishing now fails with the reason, and keeps its work.
    let id = run_to_end(&s, &repo_body(&host, &flow("echo hi > greeting.txt")));
    let run = run_json(&s, &id);
    assert_eq!(
        run["lifecycle"]["status"],
        json!({"kind": "failed", "reason": "publish_failed"}),
        "{run}"
    );
    assert_eq!(run["diff"]["files_changed"], 1);
    // The host back to speed: the same server works again.
    host.set_latency(Duration::ZERO);
    let merged = s.post(&format!("{pr_path}/merge"), r#"{"method":"merge"}"#);
    let b = assert_error(&merged, 502);
    assert!(
        b["errors"][0]["detail"].as_str().unwrap().contains("draft"),
        "the host's own reason now: {b}"
    );
}
