//! The workflow catalog over the real binary (issue 29): `GET /api/v1/workflows`,
//! `/workflows/{name}`, `/workflows/{name}/runs`, kept across a restart.

use crate::support::server::*;
use serde_json::{json, Value};

fn register(s: &Server, entry: &str, dot: &str) -> String {
    let body = json!({"entrypoint": entry, "files": {entry: dot}});
    let r = s.post("/api/v1/workflow-versions", &body.to_string());
    assert!(r.status == 201 || r.status == 200, "{}", r.text());
    r.json()["id"].as_str().unwrap_or("").to_string()
}

fn create_from(s: &Server, version: &str) -> String {
    create_run(s, &json!({"workflow_version_id": version}))
}

fn names(list: &Value) -> Vec<String> {
    list["data"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|w| w["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn workflows_are_listed_by_name_with_versions_runs_and_automations() {
    let s = Server::start();
    let hello_v1 = register(&s, "main.dot", HELLO);
    let hello_v2 = register(
        &s,
        "main.dot",
        "digraph hello { goal=\"v2\"; start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }",
    );
    let build = register(
        &s,
        "flows/build.dot",
        "digraph build { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }",
    );
    let auto = json!({"id": "nightly", "name": "Nightly", "target": {"workflow_version_id": hello_v1}, "triggers": []});
    assert_eq!(s.post("/api/v1/automations", &auto.to_string()).status, 201);
    let first = create_from(&s, &hello_v1);
    let second = create_from(&s, &hello_v2);
    let other = create_from(&s, &build);

    let list = s.get("/api/v1/workflows");
    assert_eq!(list.status, 200, "{}", list.text());
    let list = list.json();
    assert_eq!(names(&list), ["build", "hello"], "{list}");
    assert_eq!(list["meta"], json!({"has_more": false, "total": 2}));
    let hello = &list["data"][1];
    assert_eq!(hello["latest_version_id"], hello_v2.as_str(), "{hello}");
    assert_eq!(hello["version_count"], 2);
    assert_eq!(hello["last_run"]["id"], second.as_str(), "{hello}");
    assert_eq!(hello["last_run"]["status"], "submitted");
    assert_eq!(hello["automations"], json!(["nightly"]));
    let b = &list["data"][0];
    assert_eq!(b["last_run"]["id"], other.as_str());
    assert_eq!(b["automations"], json!([]));
    // Paging.
    let page = s
        .get("/api/v1/workflows?page[limit]=1&page[offset]=1")
        .json();
    assert_eq!(names(&page), ["hello"]);
    assert_eq!(page["meta"]["has_more"], false);
    let page = s.get("/api/v1/workflows?page[limit]=1").json();
    assert_eq!(names(&page), ["build"]);
    assert_eq!(page["meta"]["has_more"], true);
    assert_error(&s.get("/api/v1/workflows?page[limit]=many"), 400);

    // One workflow: its versions newest first, the newest shown unless ?version= says.
    let w = s.get("/api/v1/workflows/hello").json();
    let ids: Vec<&str> = w["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["id"].as_str())
        .collect();
    assert_eq!(ids, [hello_v2.as_str(), hello_v1.as_str()], "{w}");
    assert_eq!(w["version"]["id"], hello_v2.as_str());
    assert!(w["version"]["source"].as_str().unwrap().contains("v2"));
    assert_eq!(w["version"]["entrypoint"], "main.dot");
    assert!(w["version"]["diagnostics"].is_array());
    let old = s
        .get(&format!("/api/v1/workflows/hello?version={hello_v1}"))
        .json();
    assert_eq!(old["version"]["source"], HELLO);
    let e = assert_error(
        &s.get(&format!("/api/v1/workflows/hello?version={build}")),
        404,
    );
    assert_eq!(e["errors"][0]["code"], "unknown_version");
    let e = assert_error(&s.get("/api/v1/workflows/nope"), 404);
    assert_eq!(e["errors"][0]["code"], "unknown_workflow");
    assert_error(&s.get("/api/v1/workflows/nope/runs"), 404);

    // Its runs, newest first, paged; another workflow's run is not among them.
    let runs = s.get("/api/v1/workflows/hello/runs").json();
    let ids: Vec<&str> = runs["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert_eq!(ids, [second.as_str(), first.as_str()], "{runs}");
    let page = s.get("/api/v1/workflows/hello/runs?page[limit]=1").json();
    assert_eq!(page["data"].as_array().unwrap().len(), 1);
    assert_eq!(page["meta"]["has_more"], true);

    // A deleted run is no longer the last run; all of it survives a restart.
    let r = s.post(&format!("/api/v1/runs/{second}/cancel"), "{}");
    assert_eq!(r.status, 200, "{}", r.text());
    wait_status(&s, &second, "failed", 30);
    let r = s.call("DELETE", &format!("/api/v1/runs/{second}"), None);
    assert_eq!(r.status, 204, "{}", r.text());
    let dir = s.kill();
    let s = Server::with(Opts {
        dir: Some(dir),
        ..Opts::default()
    });
    let list = s.get("/api/v1/workflows").json();
    assert_eq!(names(&list), ["build", "hello"]);
    assert_eq!(list["data"][1]["last_run"]["id"], first.as_str(), "{list}");
    assert_eq!(list["data"][1]["version_count"], 2);
    let runs = s.get("/api/v1/workflows/hello/runs").json();
    assert_eq!(runs["data"].as_array().unwrap().len(), 1);
    // Without credentials: 401.
    assert_error(&s.raw("GET", "/api/v1/workflows", &[], None), 401);
}
