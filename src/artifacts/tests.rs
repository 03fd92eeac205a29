//! Unit tests of the artifacts module: patterns, the walk (no links followed), keeping
//! changed files only, listing from events and deleting a run's objects. Must not: start a
//! server (the end-to-end test in `tests/server/artifacts.rs` does).

use super::*;

fn sink(root: &Path, objects: &Path, patterns: &[&str]) -> RunArtifacts {
    let patterns: Vec<String> = patterns.iter().map(|p| p.to_string()).collect();
    RunArtifacts::new(
        "01RUN",
        &patterns,
        ObjectStore::Local {
            root: objects.to_path_buf(),
        },
        root,
        &[],
    )
}

#[test]
fn patterns_are_relative_globs() {
    assert!(check_patterns(&["**/*.xml".into(), "report.html".into()]).is_ok());
    let e = check_patterns(&["/etc/passwd".into()]).unwrap_err();
    assert!(e.contains("leaves the workspace"), "{e}");
    assert!(check_patterns(&["../x".into()]).is_err());
    assert!(check_patterns(&[" ".into()]).is_err());
    let many: Vec<String> = (0..=MAX_PATTERNS).map(|i| format!("f{i}")).collect();
    assert!(check_patterns(&many).unwrap_err().contains("at most 64"));
}

#[test]
fn keeps_matching_files_once_and_never_follows_links() {
    let state = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let objects = state.path().join("objects");
    std::fs::create_dir_all(work.path().join("out/deep")).unwrap();
    std::fs::create_dir_all(work.path().join(".git")).unwrap();
    std::fs::write(work.path().join("out/deep/a.xml"), "<a/>").unwrap();
    std::fs::write(work.path().join("report.html"), "<p>hi</p>").unwrap();
    std::fs::write(work.path().join(".git/x.xml"), "no").unwrap();
    std::fs::write(work.path().join("notes.txt"), "not matched").unwrap();
    std::fs::write(state.path().join("secret.xml"), "SECRET").unwrap();
    std::os::unix::fs::symlink(
        state.path().join("secret.xml"),
        work.path().join("link.xml"),
    )
    .unwrap();
    let s = sink(state.path(), &objects, &["**/*.xml", "report.html"]);
    let first = s.capture("build", work.path());
    let kept: Vec<&CapturedArtifact> = first
        .iter()
        .filter_map(|c| match c {
            Capture::Kept(a) => Some(a),
            Capture::Failed { .. } => None,
        })
        .collect();
    let paths: Vec<&str> = kept.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(paths, ["out/deep/a.xml", "report.html"]);
    assert_eq!(kept[0].bytes, 4);
    let stored = std::fs::read(objects.join(&kept[1].key)).unwrap();
    assert_eq!(stored, b"<p>hi</p>");
    // Nothing changed: nothing kept again; one change: that file alone.
    assert!(s.capture("test", work.path()).is_empty());
    std::fs::write(work.path().join("report.html"), "<p>v2</p>").unwrap();
    let second = s.capture("test", work.path());
    assert_eq!(second.len(), 1);
    assert!(matches!(&second[0], Capture::Kept(a) if a.path == "report.html"));
    // No temporary copy is left behind.
    assert_eq!(
        std::fs::read_dir(state.path().join("tmp")).unwrap().count(),
        0
    );
    assert_eq!(delete_run(&s.store, "01RUN").unwrap(), 3);
    assert!(!objects.join("artifacts/01RUN").exists());
}

#[test]
fn a_file_too_large_is_reported_not_kept() {
    let state = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let f = std::fs::File::create(work.path().join("big.bin")).unwrap();
    f.set_len(MAX_FILE_BYTES + 1).unwrap();
    let s = sink(state.path(), &state.path().join("objects"), &["*.bin"]);
    let out = s.capture("x", work.path());
    assert!(
        matches!(&out[..], [Capture::Failed { path, error }] if path == "big.bin" && error.contains("bytes")),
        "{out:?}"
    );
}

#[test]
fn events_name_only_their_runs_objects() {
    let ev = |run: &str, key: &str| Event {
        seq: 5,
        id: "E".into(),
        ts: "2026-11-27T10:00:00.000Z".into(),
        run_id: run.into(),
        event: event_kind::ARTIFACT_CAPTURED.into(),
        properties: serde_json::json!({"artifact_id": "A1", "path": "r.html", "key": key,
            "bytes": 3, "content_sha256": "ab", "attempt": 2}),
        node_id: Some("build".into()),
        node_label: None,
        stage_id: None,
        parallel_group_id: None,
        parallel_branch_id: None,
        actor: None,
    };
    let a = from_event(&ev("R1", "artifacts/R1/A1")).unwrap();
    assert_eq!((a.id.as_str(), a.attempt, a.bytes), ("A1", 2, 3));
    assert!(from_event(&ev("R1", "artifacts/R2/A1")).is_none());
    assert!(from_event(&ev("R1", "backups/svc.db")).is_none());
}
