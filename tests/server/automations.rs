//! Automations through the real server: the catalog rules (ids, revisions, ETag/If-Match,
//! validation, secrets) over HTTP, and a restart keeping every entry.

use crate::support::server::{assert_error, package, Opts, Resp, Server, HELLO};
use serde_json::{json, Value};

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
        ["target.workflow_version_id", "triggers[0].expression"]
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
