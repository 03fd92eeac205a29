//! Environments through the real server: the catalog over HTTP (the seeded `default`, the
//! reserved `local`, refusals naming the field and the fix, preflight), a run choosing one
//! whose limits are frozen into it and enforced on real processes (a memory hog fails its
//! stage with the limit named, a fork bomb is held at the process limit, the server keeps
//! serving), and the board showing the run's limits.

use crate::support::server::{
    assert_error, create_run_json, run_events, start_run, wait_kind, Resp, Server,
};
use serde_json::{json, Value};
use svc::test_tools::{require, Tool};

fn put(s: &Server, path: &str, if_match: &str, body: &Value) -> Resp {
    let auth = s.auth();
    let headers = vec![("Authorization", auth.as_str()), ("If-Match", if_match)];
    s.raw("PUT", path, &headers, Some(body.to_string().as_bytes()))
}

fn workflow(script: &str) -> Value {
    let dot = format!(
        "digraph w {{ start [shape=Mdiamond]; exit [shape=Msquare]; \
         work [shape=parallelogram, script=\"{script}\"]; start -> work -> exit }}"
    );
    json!({"entrypoint": "w.dot", "files": {"w.dot": dot}})
}

/// The run's stage failure text (every `stage.failed` error, joined).
fn failures(s: &Server, id: &str) -> String {
    run_events(s, id)
        .iter()
        .filter(|e| e["event"] == "stage.failed" || e["event"] == "command.completed")
        .map(|e| e["properties"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_catalog_over_http() {
    let s = Server::start();
    let list = s.get("/api/v1/environments").json();
    assert_eq!(list["meta"]["total"], 1, "{list}");
    let default = &list["data"][0];
    assert_eq!(default["id"], "default");
    assert_eq!(default["provider"], "container");
    assert_eq!(default["resources"]["cpu"], 2);
    // Refusals name the field, the provider and the fix; all at once.
    let r = s.post(
        "/api/v1/environments",
        &json!({"id": "bad", "provider": "local", "network": "block", "image": "debian:12",
                "resources": {"memory": "1MB"}})
        .to_string(),
    );
    let e = assert_error(&r, 422);
    let text = e.to_string();
    for field in ["resources.memory", "network", "image"] {
        assert!(text.contains(&format!("\"field\":\"{field}\"")), "{text}");
    }
    let r = s.post(
        "/api/v1/environments",
        &json!({"id": "bad", "provider": "local", "network": "block", "image": "debian:12"})
            .to_string(),
    );
    let text = assert_error(&r, 422).to_string();
    assert!(text.contains("\"field\":\"network\""), "{text}");
    assert!(text.contains("\"field\":\"image\""), "{text}");
    assert!(text.contains("use provider `container`"), "{text}");
    let r = s.post(
        "/api/v1/environments",
        &json!({"id": "local", "provider": "local"}).to_string(),
    );
    assert!(assert_error(&r, 422).to_string().contains("reserved"));
    let r = s.post("/api/v1/environments", "{not json");
    assert_error(&r, 400);
    // Create, read, preflight, replace with the revision.
    let r = s.post(
        "/api/v1/environments",
        &json!({"id": "small", "provider": "container", "network": "block",
                "resources": {"cpu": 1, "memory": "256MB"}})
        .to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let etag = r.header("ETag").unwrap().to_string();
    let p = s.get("/api/v1/environments/small/preflight").json();
    let local = p["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["provider"] == "local")
        .unwrap()
        .clone();
    assert_eq!(local["ok"], false, "{p}");
    assert_eq!(local["refused"][0]["field"], "network", "{p}");
    assert!(["cgroup-v2", "cgroup-v1", "rlimits"].contains(&p["limits"].as_str().unwrap()));
    let r = put(
        &s,
        "/api/v1/environments/small",
        &etag,
        &json!({"provider": "container", "resources": {"cpu": 2}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["resources"]["cpu"], 2);
    assert_error(
        &put(
            &s,
            "/api/v1/environments/small",
            &etag,
            &json!({"provider": "local"}),
        ),
        409,
    );
    assert_error(&s.get("/api/v1/environments/nope"), 404);
    assert_error(&s.get("/api/v1/environments/Not_A_Slug"), 400);
    // A run naming an unknown environment, or overriding it into something refused: 422.
    let r = s.post(
        "/api/v1/runs",
        &json!({"workflow": workflow("true"), "environment": "nope"}).to_string(),
    );
    assert_error(&r, 422);
    let r = s.post(
        "/api/v1/runs",
        &json!({"workflow": workflow("true"),
                "environment": {"id": "small", "provider": "local", "network": "block"}})
        .to_string(),
    );
    let text = assert_error(&r, 422).to_string();
    assert!(text.contains("environment.network"), "{text}");
}

#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
#[test]
fn limits_are_frozen_into_the_run_and_enforced_on_its_processes() {
    require(Tool::Git);
    let s = Server::start();
    let p = {
        let r = s.post(
            "/api/v1/environments",
            &json!({"id": "tight", "provider": "local",
                    "resources": {"memory": "64MB", "pids": 32, "cpu": 1}})
            .to_string(),
        );
        if r.status == 422 {
            // Only where nothing can hold a process limit (root without a cgroup), and said so.
            let text = r.text();
            assert!(text.contains("RLIMIT_NPROC"), "{text}");
            return;
        }
        assert_eq!(r.status, 201, "{}", r.text());
        s.get("/api/v1/environments/tight/preflight").json()
    };
    let cgroup = p["limits"] != "rlimits";
    // A memory hog: 300 MB in one shell variable.
    let hog = create_run_json(
        &s,
        &json!({"workflow": workflow("x=$(head -c 300000000 /dev/zero | tr -c a a); echo ${#x}"),
                "environment": "tight"}),
    );
    let id = hog["id"].as_str().unwrap().to_string();
    // Frozen: editing the environment now changes nothing for this run.
    let etag = s
        .get("/api/v1/environments/tight")
        .header("ETag")
        .unwrap()
        .to_string();
    let r = put(
        &s,
        "/api/v1/environments/tight",
        &etag,
        &json!({"provider": "local"}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    start_run(&s, &id);
    let end = wait_kind(&s, &id, &["succeeded", "failed", "dead"]);
    assert_eq!(end, "failed", "{:#?}", run_events(&s, &id));
    let why = failures(&s, &id);
    if cgroup {
        assert!(why.contains("out of memory (limit 64 MiB)"), "{why}");
    }
    let run = s.get(&format!("/api/v1/runs/{id}")).json();
    let runtime = &run["sandbox"]["instance"]["runtime"];
    assert_eq!(runtime["limits"], p["limits"], "{run}");
    assert_eq!(runtime["resources"]["memory"], 64u64 << 20, "{run}");
    // The server is unaffected.
    assert_eq!(s.get("/api/v1/environments").status, 200);
    // The board shows the run's limits, not the host's.
    let board = s.get("/api/v1/runs").json();
    let item = board["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(
        item["sandbox"]["resources"]["memory"],
        64u64 << 20,
        "{item}"
    );
    assert_eq!(item["sandbox"]["resources"]["cpu"], 1, "{item}");
    assert_eq!(item["sandbox"]["resources"]["pids"], 32, "{item}");

    // A fork bomb, bounded so it ends: 100 sleepers against a limit of 32.
    let bomb = create_run_json(
        &s,
        &json!({"workflow": workflow("for i in $(seq 1 100); do sleep 20 >/dev/null 2>&1 & done; echo forked"),
                "environment": {"id": "tight", "resources": {"pids": 32, "memory": null}}}),
    );
    let id = bomb["id"].as_str().unwrap().to_string();
    start_run(&s, &id);
    let end = wait_kind(&s, &id, &["succeeded", "failed", "dead"]);
    let why = failures(&s, &id);
    assert!(
        why.contains("fork"),
        "the shell could not fork past the limit: {end} {why}"
    );
    assert_eq!(s.get("/api/v1/environments").status, 200);
}
