//! Automations through the real server: the catalog rules (ids, revisions, ETag/If-Match,
//! validation, secrets) over HTTP, and a restart keeping every entry; the api, webhook,
//! code-host and repository targets; a slow run (at a human gate) under each overlap
//! policy; and, with the scheduler clock the binary is given
//! (`SVC_TEST_CLOCK_START`), fires missed while it was stopped and a `kill -9` between a
//! fire and its run.

use crate::support::server::{
    assert_error, package, run_events, wait_for, wait_kind, wait_status, Opts, Resp, Server, HELLO,
};
use serde_json::{json, Value};
use svc::internal::test_tools::{require, Tool};

fn version(s: &Server) -> String {
    let r = s.post("/api/v1/workflow-versions", &package(HELLO).to_string());
    assert!(r.status == 201 || r.status == 200, "{}", r.text());
    r.json()["id"].as_str().unwrap().to_string()
}

fn put(s: &Server, path: &str, if_match: Option<&str>, body: &Value) -> Resp {
    let auth = s.auth();
    let mut headers = vec![("Authorization", auth.as_str())];
    if let Some(m) = if_match {
        headers.push(("If-Match", m));
    }
    s.raw("PUT", path, &headers, Some(body.to_string().as_bytes()))
}

fn delete(s: &Server, path: &str, if_match: Option<&str>) -> Resp {
    let auth = s.auth();
    let mut headers = vec![("Authorization", auth.as_str())];
    if let Some(m) = if_match {
        headers.push(("If-Match", m));
    }
    s.raw("DELETE", path, &headers, None)
}

#[test]
fn the_catalog_rules_over_http() {
    let s = Server::start();
    let v = version(&s);
    let body = json!({
        "id": "nightly",
        "name": "Nightly",
        "target": {"workflow_version_id": v},
        "triggers": [
            {"id": "manual", "kind": "api"},
            {"id": "hook", "kind": "webhook", "secret": "a-long-webhook-secret"}
        ]
    });
    let created = s.post("/api/v1/automations", &body.to_string());
    assert_eq!(created.status, 201, "{}", created.text());
    let a = created.json();
    let rev = a["revision"].as_str().unwrap().to_string();
    assert_eq!(created.header("etag"), Some(format!("\"{rev}\"").as_str()));
    assert_eq!(
        a["policies"],
        json!({"misfire": "fire_once", "overlap": "allow"})
    );
    assert_eq!(a["triggers"][1]["secret_set"], true);
    assert!(!created.text().contains("a-long-webhook-secret"));

    // Create again: 409. Malformed: 400. Invalid: 422 naming each field.
    assert_error(&s.post("/api/v1/automations", &body.to_string()), 409);
    assert_error(&s.post("/api/v1/automations", "{\"id\": "), 400);
    let bad = json!({"id": "Bad_Slug", "name": "x", "target": {"workflow_version_id": v}, "triggers": []});
    let e = assert_error(&s.post("/api/v1/automations", &bad.to_string()), 422);
    assert_eq!(e["errors"][0]["field"], "id");
    let bad = json!({"id": "x", "name": "x", "target": {"workflow_version_id": "f".repeat(64)},
        "triggers": [{"id": "t", "kind": "schedule", "expression": "0 0 2 * * 2", "timezone": "Nowhere/City"}]});
    let e = assert_error(&s.post("/api/v1/automations", &bad.to_string()), 422);
    let fields: Vec<&str> = e["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "target.workflow_version_id",
            "triggers[0].timezone",
            "triggers[0].expression"
        ]
    );

    // Read: ETag; list: sorted envelope.
    let got = s.get("/api/v1/automations/nightly");
    assert_eq!(got.status, 200);
    assert_eq!(got.header("etag"), created.header("etag"));
    assert_error(&s.get("/api/v1/automations/nope"), 404);
    assert_error(&s.get("/api/v1/automations/NOT_A_SLUG"), 400);
    let list = s.get("/api/v1/automations").json();
    assert_eq!(list["meta"]["total"], 1);
    assert_eq!(list["data"][0]["id"], "nightly");

    // Replace: If-Match missing 428, malformed 400, stale 409, right 200 with a new ETag.
    let mut changed = a.clone();
    changed["name"] = json!("Nightly, renamed");
    let path = "/api/v1/automations/nightly";
    assert_error(&put(&s, path, None, &changed), 428);
    assert_error(&put(&s, path, Some("\"abc\""), &changed), 400);
    let stale = format!("\"{}\"", "0".repeat(64));
    let e = assert_error(&put(&s, path, Some(&stale), &changed), 409);
    assert_eq!(e["errors"][0]["current_revision"], json!(rev));
    let replaced = put(&s, path, Some(&format!("\"{rev}\"")), &changed);
    assert_eq!(replaced.status, 200, "{}", replaced.text());
    let new_rev = replaced.json()["revision"].as_str().unwrap().to_string();
    assert_ne!(new_rev, rev);
    assert_eq!(
        replaced.json()["triggers"][1]["secret_set"],
        true,
        "the secret was kept"
    );

    // Delete: stale 409, then 204; then 404.
    assert_error(&delete(&s, path, None), 428);
    assert_error(&delete(&s, path, Some(&rev)), 409);
    let keep =
        json!({"id": "keep", "name": "Kept", "target": {"workflow_version_id": v}, "triggers": []});
    assert_eq!(s.post("/api/v1/automations", &keep.to_string()).status, 201);
    assert_eq!(delete(&s, path, Some(&new_rev)).status, 204);
    assert_error(&s.get(path), 404);

    // A restart keeps what was stored, revision and all.
    let before = s.get("/api/v1/automations/keep");
    let dir = s.kill();
    let s = Server::with(Opts {
        dir: Some(dir),
        ..Opts::default()
    });
    let after = s.get("/api/v1/automations/keep");
    assert_eq!(after.status, 200);
    assert_eq!(after.header("etag"), before.header("etag"));
    assert_eq!(s.get("/api/v1/automations").json()["meta"]["total"], 1);
}

fn with_headers(s: &Server, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
    s.raw("POST", path, headers, Some(body))
}

/// HMAC-SHA256 signature header of `body` (what a sender computes).
fn sign(secret: &str, body: &[u8]) -> String {
    svc::internal::automations::fires::sign(secret, body)
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn the_api_trigger_makes_a_run_that_says_where_it_came_from() {
    require(Tool::Git);
    let s = Server::start();
    let v = version(&s);
    let body = json!({"id": "on-demand", "name": "On demand", "target": {"workflow_version_id": v},
        "inputs": {"who": "team"}, "labels": {"source": "automation"},
        "triggers": [{"id": "manual", "kind": "api"}]});
    assert_eq!(s.post("/api/v1/automations", &body.to_string()).status, 201);
    let r = s.post("/api/v1/automations/on-demand/runs", "");
    assert_eq!(r.status, 201, "{}", r.text());
    let run = r.json();
    let id = run["id"].as_str().unwrap().to_string();
    assert_eq!(
        run["automation"],
        json!({"id": "on-demand", "name": "On demand", "trigger_id": "manual"})
    );
    assert_eq!(run["created_by"]["kind"], "user");
    assert_eq!(run["labels"]["source"], "automation");
    wait_status(&s, &id, "succeeded", 30);
    // Listed under the automation, by the runs filter, and on record as a fire.
    let listed = s.get("/api/v1/automations/on-demand/runs").json();
    assert_eq!(listed["data"][0]["id"], json!(id));
    let board = s.get("/api/v1/runs?automation=on-demand").json();
    assert_eq!(board["data"].as_array().unwrap().len(), 1);
    assert_eq!(board["data"][0]["automation"]["id"], "on-demand");
    assert_eq!(
        s.get("/api/v1/runs?automation=other").json()["data"],
        json!([])
    );
    let fires = s.get("/api/v1/automations/on-demand/fires").json();
    assert_eq!(fires["data"][0]["outcome"], "created");
    assert_eq!(fires["data"][0]["run_id"], json!(id));
    assert_eq!(fires["data"][0]["trigger_kind"], "api");
    // Without an enabled api trigger: 409 with its code.
    let off = json!({"id": "no-api", "name": "x", "target": {"workflow_version_id": v},
        "triggers": [{"id": "manual", "kind": "api", "enabled": false}]});
    assert_eq!(s.post("/api/v1/automations", &off.to_string()).status, 201);
    let e = assert_error(&s.post("/api/v1/automations/no-api/runs", ""), 409);
    assert_eq!(e["errors"][0]["code"], "automation_api_trigger_disabled");
    assert_error(&s.post("/api/v1/automations/missing/runs", ""), 404);
}

#[test]
fn webhook_deliveries_over_http() {
    let s = Server::start();
    let v = version(&s);
    let secret = "a-webhook-secret-of-some-length";
    let body = json!({"id": "hooked", "name": "Hooked", "target": {"workflow_version_id": v},
        "triggers": [{"id": "deploy", "kind": "webhook", "secret": secret,
                      "inputs": {"sha": "$.head_commit.id", "env": "prod"}}]});
    assert_eq!(s.post("/api/v1/automations", &body.to_string()).status, 201);
    let path = "/api/v1/automations/hooked/hooks/deploy";
    let payload = br#"{"head_commit": {"id": "abc123"}}"#;
    let good = sign(secret, payload);
    // No bearer token is needed; a missing or wrong signature is 401 with the error body.
    let e = assert_error(
        &with_headers(&s, path, &[("X-Svc-Delivery", "d-1")], payload),
        401,
    );
    assert_eq!(e["errors"][0]["code"], "invalid_signature");
    let forged = sign("not-the-secret-at-all", payload);
    assert_error(
        &with_headers(
            &s,
            path,
            &[("X-Svc-Signature-256", &forged), ("X-Svc-Delivery", "d-1")],
            payload,
        ),
        401,
    );
    assert_eq!(
        s.get("/api/v1/automations/hooked/fires").json()["data"],
        json!([])
    );
    // A valid delivery: 202 with the fire; the run has the mapped inputs and the principal.
    let r = with_headers(
        &s,
        path,
        &[("X-Svc-Signature-256", &good), ("X-Svc-Delivery", "d-1")],
        payload,
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let fire = r.json()["fire"].clone();
    assert_eq!(fire["outcome"], "created");
    let run_id = fire["run_id"].as_str().unwrap().to_string();
    let run = s.get(&format!("/api/v1/runs/{run_id}")).json();
    assert_eq!(
        run["created_by"],
        json!({"kind": "webhook", "delivery_id": "d-1"})
    );
    assert_eq!(run["automation"]["trigger_id"], "deploy");
    let events = run_events(&s, &run_id);
    assert_eq!(
        events[0]["properties"]["inputs"],
        json!({"sha": "abc123", "env": "prod"})
    );
    // Replayed: acknowledged, the same fire, nothing new started.
    let r = with_headers(
        &s,
        path,
        &[("X-Svc-Signature-256", &good), ("X-Svc-Delivery", "d-1")],
        payload,
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["replayed"], true);
    assert_eq!(r.json()["fire"]["id"], fire["id"]);
    assert_eq!(
        s.get("/api/v1/automations/hooked/runs").json()["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // A delivery whose mapping finds nothing: a failed fire naming the input.
    let other = br#"{"ref": "main"}"#;
    let r = with_headers(
        &s,
        path,
        &[
            ("X-Svc-Signature-256", &sign(secret, other)),
            ("X-Svc-Delivery", "d-2"),
        ],
        other,
    );
    assert_eq!(r.status, 202);
    assert_eq!(r.json()["fire"]["outcome"], "failed");
    assert!(r.json()["fire"]["error"]
        .as_str()
        .unwrap()
        .contains("input `sha`"));
    // The secret never comes back.
    assert!(!s.get("/api/v1/automations/hooked").text().contains(secret));
}

#[test]
fn code_host_deliveries_posted_to_the_hook() {
    let s = Server::start();
    let v = version(&s);
    let secret = "the-repository-webhook-secret";
    let body = json!({"id": "review", "name": "Review PRs", "target": {"workflow_version_id": v},
        "triggers": [{"id": "prs", "kind": "codehost", "secret": secret,
            "events": ["pull_request.opened", "pull_request.labeled"],
            "filter": {"repositories": ["acme/app"], "labels": ["svc-review"]},
            "inputs": {"pr": "$.pull_request.number", "branch": "$.pull_request.head.ref"}}]});
    assert_eq!(s.post("/api/v1/automations", &body.to_string()).status, 201,);
    let path = "/api/v1/automations/review/hooks/prs";
    let deliver = |event: &str, id: &str, payload: &Value| {
        let bytes = payload.to_string().into_bytes();
        let sig = sign(secret, &bytes);
        with_headers(
            &s,
            path,
            &[
                ("X-Hub-Signature-256", &sig),
                ("X-GitHub-Delivery", id),
                ("X-GitHub-Event", event),
            ],
            &bytes,
        )
    };
    let labeled = json!({"action": "labeled", "label": {"name": "svc-review"},
        "pull_request": {"number": 12, "head": {"ref": "feature/x"}, "base": {"ref": "main"}, "labels": [{"name": "svc-review"}]},
        "repository": {"full_name": "acme/app"}});
    let r = deliver("pull_request", "gh-1", &labeled);
    assert_eq!(r.status, 202, "{}", r.text());
    let run_id = r.json()["fire"]["run_id"].as_str().unwrap().to_string();
    assert_eq!(
        run_events(&s, &run_id)[0]["properties"]["inputs"],
        json!({"pr": 12, "branch": "feature/x"})
    );
    // Another label, another repository, an event it does not listen to: ignored, no fire.
    let mut other_label = labeled.clone();
    other_label["label"]["name"] = json!("wontfix");
    assert!(deliver("pull_request", "gh-2", &other_label).json()["ignored"].is_string());
    let mut other_repo = labeled.clone();
    other_repo["repository"]["full_name"] = json!("acme/other");
    assert!(deliver("pull_request", "gh-3", &other_repo).json()["ignored"].is_string());
    assert!(deliver(
        "push",
        "gh-4",
        &json!({"ref": "refs/heads/main", "repository": {"full_name": "acme/app"}})
    )
    .json()["ignored"]
        .is_string());
    assert_eq!(
        s.get("/api/v1/automations/review/fires").json()["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

fn git(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_repository_target_reads_the_workflow_at_fire_time() {
    require(Tool::Git);
    let s = Server::start();
    let repo = tempfile::tempdir().unwrap();
    // The goal comes from a file the workflow references: it travels with the workflow.
    let flow = "digraph flow { goal=\"@goal.md\"; start [shape=Mdiamond]; work [shape=parallelogram, script=\"echo working\"]; exit [shape=Msquare]; start -> work -> exit }";
    std::fs::create_dir_all(repo.path().join("flows")).unwrap();
    std::fs::write(repo.path().join("flows/main.dot"), flow).unwrap();
    std::fs::write(repo.path().join("flows/goal.md"), "first version").unwrap();
    git(repo.path(), &["init", "-q"]);
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-qm", "one"]);
    let origin = repo.path().display().to_string();
    let body = json!({"id": "from-repo", "name": "From the repo",
        "target": {"repository": {"origin_url": origin, "ref": "main"}, "workflow": "flows/main.dot"},
        "triggers": [{"id": "manual", "kind": "api"}]});
    assert_eq!(s.post("/api/v1/automations", &body.to_string()).status, 201);
    let first = s.post("/api/v1/automations/from-repo/runs", "");
    assert_eq!(first.status, 201, "{}", first.text());
    assert_eq!(first.json()["goal"], "first version");
    assert_eq!(first.json()["repository"]["origin_url"], json!(origin));
    let id = first.json()["id"].as_str().unwrap().to_string();
    let end = wait_kind(&s, &id, &["succeeded", "failed", "dead"]);
    assert_eq!(
        end,
        "succeeded",
        "{}",
        s.get(&format!("/api/v1/runs/{id}")).text()
    );
    // Change the file in the repository: the next run runs the new one.
    std::fs::write(repo.path().join("flows/goal.md"), "second version").unwrap();
    git(repo.path(), &["commit", "-qam", "two"]);
    let second = s.post("/api/v1/automations/from-repo/runs", "");
    assert_eq!(second.status, 201, "{}", second.text());
    assert_eq!(second.json()["goal"], "second version");
    // The file gone: a failed fire saying so (422), on record.
    git(repo.path(), &["rm", "-q", "flows/main.dot"]);
    git(repo.path(), &["commit", "-qm", "three"]);
    let e = assert_error(&s.post("/api/v1/automations/from-repo/runs", ""), 422);
    assert!(
        e["errors"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("workflow missing"),
        "{e}"
    );
    let fires = s.get("/api/v1/automations/from-repo/fires").json();
    assert_eq!(fires["data"][0]["outcome"], "failed");
    assert!(fires["data"][0]["error"]
        .as_str()
        .unwrap()
        .contains("flows/main.dot"));
}

/// The issue's crash test on the real binary: the scheduler's clock is set two seconds
/// before a schedule's due time (`SVC_TEST_CLOCK_START`), the server stops at a pause point
/// of the fire protocol (`SVC_TEST_PAUSE_AT`, compiled only under `test-support`) and is
/// killed with SIGKILL there: once right after the `automation_fires` row (and the
/// schedule's advance) committed and before the run exists, once after the run was made and
/// before the fire was settled. The store is read directly after each kill, then the server
/// starts again on the same state directory: the fire is neither lost (its run is made and
/// finishes, the fire says `created` and names it) nor doubled (one fire, one run, and the
/// schedule goes on to the next day rather than firing the due time again).
#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn kill_9_between_a_fire_and_its_run_neither_loses_nor_doubles_it() {
    use svc::internal::base::test_hooks::{CLOCK_START_VAR, PAUSE_AT_VAR, PAUSE_MARK_VAR};
    use svc::internal::store::{AutomationTables, RunStore, SqliteStore, DB_FILE};
    require(Tool::Git);
    for point in ["fire_recorded", "fire_launched"] {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("paused");
        let s = Server::with(Opts {
            dir: Some(dir),
            env: vec![
                (CLOCK_START_VAR, "2026-05-01T10:59:57Z".to_string()),
                (PAUSE_AT_VAR, point.to_string()),
                (PAUSE_MARK_VAR, mark.display().to_string()),
            ],
            ..Opts::default()
        });
        let v = version(&s);
        let body = json!({"id": "nightly", "name": "Nightly",
            "target": {"workflow_version_id": v},
            "triggers": [{"id": "at-eleven", "kind": "schedule", "expression": "0 11 * * *"}]});
        let created = s.post("/api/v1/automations", &body.to_string());
        assert_eq!(created.status, 201, "{}", created.text());
        let run_id = wait_for(60, &format!("the server to pause at {point}"), || {
            std::fs::read_to_string(&mark).ok()
        });
        assert_eq!(
            run_id.len(),
            26,
            "the pause point names the fire's run: {run_id:?}"
        );
        let dir = s.kill();

        // What the crash left: the fire committed as `pending` with its run id, the schedule
        // already advanced; the run exists only if the kill came after the launch.
        {
            let store = SqliteStore::open(&dir.path().join(DB_FILE)).unwrap();
            let fires = store.fires_of("nightly", 0, 10).unwrap();
            assert_eq!(fires.len(), 1, "{point}: {fires:?}");
            assert_eq!(fires[0].outcome, "pending", "{point}");
            assert_eq!(fires[0].run_id.as_deref(), Some(run_id.as_str()));
            assert_eq!(fires[0].due_at.as_deref(), Some("2026-05-01T11:00:00.000Z"));
            let run = store.get_run(&run_id).unwrap();
            assert_eq!(run.is_some(), point == "fire_launched", "{point}: {run:?}");
            let sched = store.schedules_of("nightly").unwrap();
            assert_eq!(
                svc::internal::base::clock::format_millis(sched[0].next_due_ms),
                "2026-05-02T11:00:00.000Z"
            );
        }

        // Restart on the same state directory, five seconds after the due time (within the
        // misfire grace: the due time, were it still due, would fire again).
        let s = Server::with(Opts {
            dir: Some(dir),
            env: vec![(CLOCK_START_VAR, "2026-05-01T11:00:05Z".to_string())],
            ..Opts::default()
        });
        wait_status(&s, &run_id, "succeeded", 60);
        let run = s.get(&format!("/api/v1/runs/{run_id}")).json();
        assert_eq!(
            run["automation"],
            json!({"id": "nightly", "name": "Nightly", "trigger_id": "at-eleven"})
        );
        assert_eq!(run["created_by"]["kind"], "system");
        // Give the scheduler a moment to do anything it would wrongly do, then count.
        std::thread::sleep(std::time::Duration::from_millis(1_500));
        let fires = s.get("/api/v1/automations/nightly/fires").json();
        let fires = fires["data"].as_array().unwrap();
        assert_eq!(fires.len(), 1, "{point}: not doubled: {fires:?}");
        assert_eq!(fires[0]["outcome"], "created", "{point}: not lost");
        assert_eq!(fires[0]["run_id"], json!(run_id));
        assert_eq!(fires[0]["due_at"], "2026-05-01T11:00:00.000Z");
        assert_eq!(fires[0]["error"], Value::Null);
        let runs = s.get("/api/v1/runs?automation=nightly").json();
        let ids: Vec<&str> = runs["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["id"].as_str())
            .collect();
        assert_eq!(ids, vec![run_id.as_str()], "{point}: exactly one run");
        let sched = &s.get("/api/v1/automations/nightly/fires").json()["meta"]["schedules"][0];
        assert_eq!(
            sched["next_due_at"], "2026-05-02T11:00:00.000Z",
            "{point}: the schedule goes on to the next day: {sched}"
        );
        assert_eq!(sched["last_due_at"], "2026-05-01T11:00:00.000Z");
    }
}

/// Fires missed while the server was stopped, under each misfire policy, on the real binary:
/// the server starts with its scheduler clock before a daily due time and is stopped; it
/// starts again (same state directory) with the clock three due times later. `skip`
/// records one `skipped` fire (policy `misfire`) counting the three; `fire_once` fires once,
/// for the latest; both schedules go on from the restart.
#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn fires_missed_while_the_server_was_stopped_follow_the_misfire_policy() {
    use svc::internal::base::test_hooks::CLOCK_START_VAR;
    require(Tool::Git);
    let s = Server::with(Opts {
        env: vec![(CLOCK_START_VAR, "2026-05-01T10:58:00Z".to_string())],
        ..Opts::default()
    });
    let v = version(&s);
    for (id, misfire) in [("skipper", "skip"), ("catcher", "fire_once")] {
        let body = json!({"id": id, "name": id, "target": {"workflow_version_id": v},
            "policies": {"misfire": misfire},
            "triggers": [{"id": "daily", "kind": "schedule", "expression": "0 11 * * *"}]});
        let r = s.post("/api/v1/automations", &body.to_string());
        assert_eq!(r.status, 201, "{}", r.text());
        let sched =
            &s.get(&format!("/api/v1/automations/{id}/fires")).json()["meta"]["schedules"][0];
        assert_eq!(sched["next_due_at"], "2026-05-01T11:00:00.000Z", "{sched}");
    }
    let dir = s.kill();

    let s = Server::with(Opts {
        dir: Some(dir),
        env: vec![(CLOCK_START_VAR, "2026-05-03T11:05:00Z".to_string())],
        ..Opts::default()
    });
    let fires_of = |id: &str| -> Vec<Value> {
        s.get(&format!("/api/v1/automations/{id}/fires")).json()["data"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let caught = wait_for(30, "the missed fire of `catcher`", || {
        let f = fires_of("catcher");
        (f.first().is_some_and(|f| f["outcome"] == "created")).then_some(f)
    });
    assert_eq!(
        caught.len(),
        1,
        "fired once, not per missed due time: {caught:?}"
    );
    assert_eq!(
        caught[0]["due_at"], "2026-05-03T11:00:00.000Z",
        "the latest"
    );
    let run = caught[0]["run_id"].as_str().unwrap_or_default().to_string();
    wait_status(&s, &run, "succeeded", 60);
    let detail = caught[0]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("3 due times"), "{detail}");

    let skipped = wait_for(30, "the skipped fire of `skipper`", || {
        let f = fires_of("skipper");
        (!f.is_empty()).then_some(f)
    });
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0]["outcome"], "skipped");
    assert_eq!(skipped[0]["policy"], "misfire");
    assert_eq!(skipped[0]["run_id"], Value::Null);
    assert!(
        skipped[0]["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("while the server was down"),
        "{}",
        skipped[0]
    );
    assert_eq!(
        s.get("/api/v1/runs?automation=skipper").json()["data"],
        json!([])
    );
    for id in ["skipper", "catcher"] {
        let sched =
            &s.get(&format!("/api/v1/automations/{id}/fires")).json()["meta"]["schedules"][0];
        assert_eq!(
            sched["next_due_at"], "2026-05-04T11:00:00.000Z",
            "{id}: {sched}"
        );
    }
}

/// A run that waits at a human gate until the test answers: "slow" for as long as needed.
const GATED: &str = r#"digraph gated {
  start [shape=Mdiamond]; exit [shape=Msquare]
  ask [shape=hexagon, label="Go on?"]
  start -> ask
  ask -> exit [label="[Y] Yes"]
}"#;

/// Waits for run `id`'s open question and answers it; the run then finishes.
fn answer_gate(s: &Server, id: &str) {
    let qs = s
        .get(&format!("/api/v1/runs/{id}/questions?wait=30s"))
        .json();
    let qid = qs["data"][0]["id"].as_str().unwrap_or_default().to_string();
    assert!(!qid.is_empty(), "run {id} asks nothing: {qs}");
    let ok = s.post(
        &format!("/api/v1/runs/{id}/questions/{qid}/answer"),
        r#"{"selected_option_key":"Y"}"#,
    );
    assert_eq!(ok.status, 204, "{}", ok.text());
    wait_status(s, id, "succeeded", 30);
}

/// A slow run (waiting at a human gate) under each overlap policy, with real runs on the
/// real binary: `allow` starts a second run beside it; `skip` refuses the second fire (409
/// `automation_overlap`, a `skipped` fire with policy `overlap`); `queue_one` queues it (202),
/// skips a third while one is queued, and starts the queued run once the first one ends.
#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_slow_run_under_each_overlap_policy() {
    require(Tool::Git);
    let s = Server::start();
    let r = s.post("/api/v1/workflow-versions", &package(GATED).to_string());
    assert!(r.status == 201 || r.status == 200, "{}", r.text());
    let v = r.json()["id"].as_str().unwrap_or_default().to_string();
    for policy in ["allow", "skip", "queue_one"] {
        let body = json!({"id": policy.replace('_', "-"), "name": policy,
            "target": {"workflow_version_id": v}, "policies": {"overlap": policy},
            "triggers": [{"id": "manual", "kind": "api"}]});
        assert_eq!(s.post("/api/v1/automations", &body.to_string()).status, 201);
    }
    let fire = |id: &str| s.post(&format!("/api/v1/automations/{id}/runs"), "");
    let fires_of = |id: &str| -> Vec<Value> {
        s.get(&format!("/api/v1/automations/{id}/fires")).json()["data"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let runs_of = |id: &str| -> usize {
        s.get(&format!("/api/v1/runs?automation={id}")).json()["data"]
            .as_array()
            .map_or(0, Vec::len)
    };
    let first = |id: &str| -> String {
        let r = fire(id);
        assert_eq!(r.status, 201, "{}", r.text());
        let run = r.json()["id"].as_str().unwrap_or_default().to_string();
        // At its gate: the run is still going.
        let qs = s
            .get(&format!("/api/v1/runs/{run}/questions?wait=30s"))
            .json();
        assert_eq!(qs["data"][0]["text"], "Go on?", "{qs}");
        run
    };

    // allow: a second run beside the first.
    let a1 = first("allow");
    let r = fire("allow");
    assert_eq!(r.status, 201, "{}", r.text());
    let a2 = r.json()["id"].as_str().unwrap_or_default().to_string();
    assert_ne!(a1, a2);
    assert_eq!(runs_of("allow"), 2);
    answer_gate(&s, &a1);
    answer_gate(&s, &a2);

    // skip: refused while the first runs, on record; after it ends, a fire runs again.
    let s1 = first("skip");
    let e = assert_error(&fire("skip"), 409);
    assert_eq!(e["errors"][0]["code"], "automation_overlap");
    let f = fires_of("skip");
    assert_eq!(f[0]["outcome"], "skipped", "{f:?}");
    assert_eq!(f[0]["policy"], "overlap");
    assert!(
        f[0]["detail"].as_str().unwrap_or_default().contains(&s1),
        "names the active run: {}",
        f[0]
    );
    assert_eq!(runs_of("skip"), 1);
    answer_gate(&s, &s1);
    let r = fire("skip");
    assert_eq!(r.status, 201, "after the run ended: {}", r.text());
    answer_gate(&s, r.json()["id"].as_str().unwrap_or_default());

    // queue_one: the second fire waits, a third is skipped, the queued one starts when the
    // first run ends.
    let q1 = first("queue-one");
    let r = fire("queue-one");
    assert_eq!(r.status, 202, "{}", r.text());
    let queued = r.json();
    assert_eq!(queued["outcome"], "queued", "{queued}");
    let e = assert_error(&fire("queue-one"), 409);
    assert_eq!(e["errors"][0]["code"], "automation_overlap");
    assert_eq!(runs_of("queue-one"), 1);
    answer_gate(&s, &q1);
    let released = wait_for(30, "the queued fire to start its run", || {
        fires_of("queue-one")
            .into_iter()
            .find(|f| f["id"] == queued["id"] && f["outcome"] == "created")
    });
    let q2 = released["run_id"].as_str().unwrap_or_default().to_string();
    assert_ne!(q2, q1);
    answer_gate(&s, &q2);
    assert_eq!(runs_of("queue-one"), 2);
    let outcomes: Vec<Value> = fires_of("queue-one")
        .iter()
        .map(|f| f["outcome"].clone())
        .collect();
    assert_eq!(
        outcomes,
        vec![json!("skipped"), json!("created"), json!("created")]
    );
}

#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
#[test]
fn a_fired_run_uses_the_automations_environment() {
    require(Tool::Git);
    let s = Server::start();
    let dot = "digraph w { start [shape=Mdiamond]; exit [shape=Msquare]; \
               work [shape=parallelogram, script=\"echo seen=$FROM_ENV\"]; start -> work -> exit }";
    let r = s.post("/api/v1/workflow-versions", &package(dot).to_string());
    assert!(r.status == 201 || r.status == 200, "{}", r.text());
    let v = r.json()["id"].as_str().unwrap().to_string();
    let r = s.post(
        "/api/v1/environments",
        &json!({"id": "nightly", "provider": "local", "env": {"FROM_ENV": "the nightly environment"},
                "resources": {"cpu": 1}})
        .to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let body = json!({"id": "nightly-job", "name": "Nightly", "target": {"workflow_version_id": v},
        "environment": {"id": "nightly", "labels": {"from": "automation"}},
        "triggers": [{"id": "manual", "kind": "api"}]});
    let r = s.post("/api/v1/automations", &body.to_string());
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["environment"]["id"], "nightly");
    let r = s.post("/api/v1/automations/nightly-job/runs", "");
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    assert_eq!(wait_kind(&s, &id, &["succeeded", "failed"]), "succeeded");
    let evs = run_events(&s, &id);
    let plan = &evs.iter().find(|e| e["event"] == "run.created").unwrap()["properties"]["sandbox"];
    assert_eq!(plan["environment"], "nightly", "{plan}");
    assert_eq!(plan["labels"]["from"], "automation", "{plan}");
    assert_eq!(plan["resources"]["cpu"], 1, "{plan}");
    let out: String = evs
        .iter()
        .filter(|e| e["event"] == "command.completed")
        .filter_map(|e| e["properties"]["stdout"].as_str())
        .collect();
    assert!(out.contains("seen=the nightly environment"), "{out}");
    // The environment deleted: the next fire fails, on record with the reason.
    let etag = s
        .get("/api/v1/environments/nightly")
        .header("ETag")
        .unwrap()
        .to_string();
    assert_eq!(
        delete(&s, "/api/v1/environments/nightly", Some(&etag)).status,
        204
    );
    let e = assert_error(&s.post("/api/v1/automations/nightly-job/runs", ""), 422);
    let text = e.to_string();
    assert!(text.contains("no environment with id `nightly`"), "{text}");
    let fires = s.get("/api/v1/automations/nightly-job/fires").json();
    let failed = fires["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["outcome"] != "created")
        .cloned()
        .unwrap_or_default();
    assert!(failed.to_string().contains("environment"), "{fires}");
}
