//! Rewind (issue 30): a finished run rewound to a stage makes a new run that starts from the
//! checkpoint before that stage (its context and its workspace commit), runs it and what
//! follows, and the old run shows `superseded_by`; bad requests are refused.

use crate::support::server::*;
use serde_json::{json, Value};
use std::path::Path;
use svc::internal::test_tools::{require, Tool};

/// A bare repository `origin.git` under `root` with one commit (`readme.txt`).
fn bare_origin(root: &Path) -> String {
    let script = "git init -q -b main src && cd src && echo hello > readme.txt \
                  && git add . && git commit -qm one && cd .. && git clone -q --bare src origin.git";
    let out = std::process::Command::new("sh")
        .args(["-c", script])
        .current_dir(root)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!("file://{}", root.join("origin.git").display())
}

/// `a` writes a.txt, `b` appends a line to log.txt and records a context value, `c` reads
/// both into c.txt.
const FLOW: &str = r#"digraph rw {
  start [shape=Mdiamond]; exit [shape=Msquare]
  a [shape=parallelogram, script="echo first > a.txt"]
  b [shape=parallelogram, script="echo b-ran >> log.txt"]
  c [shape=parallelogram, script="cat a.txt log.txt > c.txt"]
  start -> a -> b -> c -> exit
}"#;

fn stage_nodes(s: &Server, id: &str) -> Vec<String> {
    run_events(s, id)
        .iter()
        .filter(|e| e["event"] == "stage.started")
        .filter_map(|e| e["node_id"].as_str().map(str::to_string))
        .collect()
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_rewound_run_starts_at_the_stage_commit_and_supersedes_the_old_one() {
    require(Tool::Git);
    let tmp = tempfile::tempdir().expect("tempdir");
    let url = bare_origin(tmp.path());
    let s = Server::start();
    let body = json!({"workflow": package(FLOW), "repository": {"origin_url": url}});
    let old = run_to_end(&s, &body);
    assert_eq!(status_kind(&s, &old), "succeeded");
    let old_ws = s.path().join("workspaces").join(&old);
    assert_eq!(
        std::fs::read_to_string(old_ws.join("log.txt")).unwrap(),
        "b-ran\n"
    );

    let r = s.post(&format!("/api/v1/runs/{old}/rewind"), r#"{"to": "b"}"#);
    assert_eq!(r.status, 201, "{}", r.text());
    let new = r.json()["id"].as_str().unwrap_or_default().to_string();
    assert_ne!(new, old);
    assert_eq!(
        wait_kind(&s, &new, &["succeeded", "failed", "dead"]),
        "succeeded"
    );

    // Only b and what follows ran again; the workspace started at a's commit, so b's line
    // is there once (from the old run's end it would be twice).
    let ran = stage_nodes(&s, &new);
    assert!(!ran.contains(&"a".to_string()), "{ran:?}");
    assert!(
        ran.contains(&"b".to_string()) && ran.contains(&"c".to_string()),
        "{ran:?}"
    );
    let new_ws = s.path().join("workspaces").join(&new);
    assert_eq!(
        std::fs::read_to_string(new_ws.join("log.txt")).unwrap(),
        "b-ran\n"
    );
    assert_eq!(
        std::fs::read_to_string(new_ws.join("c.txt")).unwrap(),
        "first\nb-ran\n"
    );
    assert!(new_ws.join("readme.txt").exists());

    // The new run says where it came from; the old one is superseded, its history intact.
    let evs = run_events(&s, &new);
    let rewound = evs
        .iter()
        .find(|e| e["event"] == "run.rewound")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(
        rewound["properties"]["from_run_id"],
        old.as_str(),
        "{rewound}"
    );
    assert_eq!(rewound["properties"]["to_node"], "b");
    let old_run = run_json(&s, &old);
    assert_eq!(old_run["superseded_by"], new.as_str());
    assert_eq!(old_run["lifecycle"]["status"]["kind"], "succeeded");
    assert_eq!(run_json(&s, &new)["superseded_by"], Value::Null);
    assert_eq!(
        stage_nodes(&s, &old),
        ["start", "a", "b", "c", "exit"].map(String::from)
    );

    // Bad requests.
    let r = s.post(&format!("/api/v1/runs/{old}/rewind"), r#"{"to": "nope"}"#);
    assert_eq!(assert_error(&r, 422)["errors"][0]["code"], "unknown_node");
    let r = s.post(&format!("/api/v1/runs/{old}/rewind"), r#"{}"#);
    assert_error(&r, 400);
    let r = s.post(
        "/api/v1/runs/01AAAAAAAAAAAAAAAAAAAAAAAA/rewind",
        r#"{"to": "b"}"#,
    );
    assert_error(&r, 404);
    let active = create_run(&s, &body);
    let r = s.post(&format!("/api/v1/runs/{active}/rewind"), r#"{"to": "b"}"#);
    assert_eq!(assert_error(&r, 409)["errors"][0]["code"], "run_active");
}

/// [`FLOW`] with a repair stage only a failing `b` reaches (it never runs here).
const BRANCHED: &str = r#"digraph rw {
  start [shape=Mdiamond]; exit [shape=Msquare]
  a [shape=parallelogram, script="echo first > a.txt"]
  b [shape=parallelogram, script="echo b-ran >> log.txt"]
  repair [shape=parallelogram, script="echo repaired >> log.txt"]
  c [shape=parallelogram, script="cat a.txt log.txt > c.txt"]
  start -> a -> b
  b -> repair [condition="outcome=failed"]
  b -> c
  repair -> c
  c -> exit
}"#;

/// The issue's two edges of rewind: a node of the workflow the run never reached is 422
/// `unknown_checkpoint` (nothing created, the old run not superseded); the start node is a
/// fresh run of the same workflow and inputs on a fresh workspace, every stage run again,
/// and the old run's `superseded_by` names it.
#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn rewind_to_a_node_never_reached_is_refused_and_to_the_start_is_a_fresh_run() {
    require(Tool::Git);
    let tmp = tempfile::tempdir().expect("tempdir");
    let url = bare_origin(tmp.path());
    let s = Server::start();
    let body = json!({"workflow": package(BRANCHED), "repository": {"origin_url": url},
                      "inputs": {"who": "team"}});
    let old = run_to_end(&s, &body);
    assert_eq!(status_kind(&s, &old), "succeeded");
    let runs_before = s.get("/api/v1/runs").json()["data"]
        .as_array()
        .map_or(0, Vec::len);

    let r = s.post(&format!("/api/v1/runs/{old}/rewind"), r#"{"to": "repair"}"#);
    let e = assert_error(&r, 422);
    assert_eq!(e["errors"][0]["code"], "unknown_checkpoint");
    let detail = e["errors"][0]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("repair") && detail.contains("never ran"),
        "{detail}"
    );
    assert_eq!(run_json(&s, &old)["superseded_by"], Value::Null);
    assert_eq!(
        s.get("/api/v1/runs").json()["data"]
            .as_array()
            .map_or(0, Vec::len),
        runs_before,
        "a refused rewind creates no run"
    );

    let r = s.post(&format!("/api/v1/runs/{old}/rewind"), r#"{"to": "start"}"#);
    assert_eq!(r.status, 201, "{}", r.text());
    let new = r.json()["id"].as_str().unwrap_or_default().to_string();
    assert_eq!(
        wait_kind(&s, &new, &["succeeded", "failed", "dead"]),
        "succeeded"
    );
    let ran = stage_nodes(&s, &new);
    for n in ["a", "b", "c"] {
        assert!(
            ran.contains(&n.to_string()),
            "{n} did not run again: {ran:?}"
        );
    }
    // A fresh clone: b's line once, not appended to the old run's workspace.
    let new_ws = s.path().join("workspaces").join(&new);
    assert_eq!(
        std::fs::read_to_string(new_ws.join("log.txt")).unwrap(),
        "b-ran\n"
    );
    let evs = run_events(&s, &new);
    let rewound = evs
        .iter()
        .find(|e| e["event"] == "run.rewound")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(rewound["properties"]["to_node"], "start", "{rewound}");
    assert_eq!(rewound["properties"]["checkpoint_seq"], Value::Null);
    let created = evs
        .iter()
        .find(|e| e["event"] == "run.created")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(created["properties"]["inputs"]["who"], "team", "{created}");
    assert_eq!(run_json(&s, &old)["superseded_by"], new.as_str());
}
