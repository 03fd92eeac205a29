//! Stage artifacts (issue 32) with the real binary: the files matching a run's patterns kept
//! at the end of each stage into the object store (`<state-dir>/objects` when none is
//! configured, a configured local root otherwise), listed and downloaded over HTTP, a
//! symbolic link out of the workspace never followed, bad patterns refused, `[run]
//! artifacts` as the default, and the objects removed with the run (`DELETE`, `svc prune`).

use crate::support::server::*;
use serde_json::{json, Value};
use svc::internal::test_tools::{require, Tool};

/// Two command stages: the first writes a report, a JUnit file and a link to the state
/// directory's vault; the second rewrites the report and leaves the XML as it was.
const FLOW: &str = r#"digraph t {
  start [shape=Mdiamond]; exit [shape=Msquare]
  build [shape=parallelogram, script="mkdir -p out/deep && printf '<p>one</p>' > out/report.html && printf '<ok/>' > out/deep/junit.xml && printf 'x' > notes.txt && ln -s ../secrets.json out/vault.html"]
  again [shape=parallelogram, script="printf '<p>two</p>' > out/report.html"]
  start -> build -> again -> exit
}"#;

fn artifacts(s: &Server, id: &str) -> Vec<Value> {
    let r = s.get(&format!("/api/v1/runs/{id}/artifacts?page[limit]=100"));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["data"].as_array().cloned().unwrap_or_default()
}

fn download(s: &Server, a: &Value) -> Resp {
    s.get(a["download_url"].as_str().unwrap_or(""))
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn stage_files_are_kept_listed_downloaded_and_removed_with_the_run() {
    require(Tool::Git);
    let s = Server::start();
    let mut body = run_body(FLOW);
    body["artifacts"] = json!(["out/**/*.html", "**/*.xml"]);
    let id = run_to_end(&s, &body);
    assert_eq!(status_kind(&s, &id), "succeeded", "{}", s.stderr());
    let list = artifacts(&s, &id);
    let seen: Vec<(String, String)> = list
        .iter()
        .map(|a| {
            (
                a["node_id"].as_str().unwrap_or("").to_string(),
                a["path"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    // The unchanged XML is kept once; the link to the vault never; notes.txt matches nothing.
    assert_eq!(
        seen,
        [
            ("build".to_string(), "out/deep/junit.xml".to_string()),
            ("build".to_string(), "out/report.html".to_string()),
            ("again".to_string(), "out/report.html".to_string()),
        ],
        "{list:?}"
    );
    let first = download(&s, &list[1]);
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.body, b"<p>one</p>");
    assert_eq!(
        first.header("content-type"),
        Some("application/octet-stream")
    );
    assert_eq!(
        first.header("content-disposition"),
        Some("attachment; filename=\"report.html\"")
    );
    assert_eq!(download(&s, &list[2]).body, b"<p>two</p>");
    assert_eq!(list[0]["bytes"], 5);
    assert_eq!(
        list[0]["content_sha256"].as_str().map(str::len),
        Some(64),
        "{list:?}"
    );
    // The events say the same, with the stage.
    let kinds: Vec<Value> = run_events(&s, &id)
        .into_iter()
        .filter(|e| e["event"] == "artifact.captured")
        .collect();
    assert_eq!(kinds.len(), 3);
    let unknown = s.get(&format!("/api/v1/runs/{id}/artifacts/01NOPE"));
    assert_error(&unknown, 404);
    let objects = s.dir.path().join("objects/artifacts").join(&id);
    assert_eq!(std::fs::read_dir(&objects).expect("objects").count(), 3);
    // Deleting the run removes its objects (once its worker let go of it).
    let del = s.call("DELETE", &format!("/api/v1/runs/{id}"), None);
    assert_eq!(del.status, 204, "{}", del.text());
    wait_for(20, "the run's artifacts to be removed", || {
        (!objects.exists()).then_some(())
    });
    assert_error(&s.get(&format!("/api/v1/runs/{id}/artifacts")), 404);
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn settings_name_the_default_patterns_and_the_object_store() {
    require(Tool::Git);
    let objects = tempfile::tempdir().expect("tempdir");
    let settings = format!(
        "[run]\nartifacts = [\"out/*.html\"]\n[server.object_store]\nprovider = \"local\"\nroot = \"{}\"\n",
        objects.path().display()
    );
    let s = Server::with(Opts {
        settings: Some(&settings),
        ..Opts::default()
    });
    let id = run_to_end(&s, &run_body(FLOW));
    let list = artifacts(&s, &id);
    assert_eq!(list.len(), 2, "{list:?}");
    assert!(objects.path().join("artifacts").join(&id).is_dir());
    assert_eq!(download(&s, &list[0]).body, b"<p>one</p>");
    // `[]` in the create body: nothing kept.
    let mut none = run_body(FLOW);
    none["artifacts"] = json!([]);
    let quiet = run_to_end(&s, &none);
    assert!(artifacts(&s, &quiet).is_empty());
    // `svc prune` (the server stopped) removes the pruned runs' artifacts too.
    let state = s.kill();
    let out = crate::support::cli::svc(&[
        "prune",
        "--state-dir",
        state.path().to_str().unwrap_or(""),
        "--older-than",
        "0s",
        "--yes",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!objects.path().join("artifacts").join(&id).exists());
}

#[test]
fn patterns_outside_the_workspace_are_refused() {
    let s = Server::start();
    for bad in [
        json!(["/etc/passwd"]),
        json!(["../x"]),
        json!([""]),
        json!("x"),
    ] {
        let mut body = run_body(FLOW);
        body["artifacts"] = bad.clone();
        let r = s.post("/api/v1/runs", &body.to_string());
        assert_error(&r, 400);
    }
}
