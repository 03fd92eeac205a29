//! Crash safety with a real process killed by SIGKILL.
//!
//! The test re-executes this test binary as a child (`crash_child`, activated by an
//! environment variable) that appends events to a few runs from several threads and prints
//! each committed seq after `append` returns. The parent kills it at seeded random points,
//! many times, reopening the database each time: no event reported as committed may be
//! lost, seqs stay contiguous, every row equals the fold of its events, and SQLite's
//! `integrity_check` passes.

use crate::support::store::Rng;
use serde_json::json;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use svc::internal::store::test_support::new_run;
use svc::internal::store::{blob_ref, EventDraft, RunQuery, RunStore, SqliteStore, DB_FILE};

const CHILD_ENV: &str = "SVC_STORE_CRASH_CHILD_DB";
const RUNS: usize = 3;

/// The child: a no-op unless started by `sigkill_never_loses_a_committed_event`.
#[test]
fn crash_child() {
    let Some(db) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let store = Arc::new(SqliteStore::open(Path::new(&db)).unwrap());
    let mut runs: Vec<String> = store
        .query_runs(&RunQuery {
            oldest_first: true,
            ..RunQuery::default()
        })
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    while runs.len() < RUNS {
        let row = new_run(&*store, "crash");
        println!("committed {} 1", row.id);
        runs.push(row.id);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let threads: Vec<_> = runs
        .into_iter()
        .enumerate()
        .map(|(t, id)| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let mut i = 0u64;
                while Instant::now() < deadline {
                    i += 1;
                    let draft = match i % 7 {
                        0 => {
                            let blob = store
                                .put_blob(format!("output {t} {i}").as_bytes())
                                .unwrap();
                            println!("blob {blob}");
                            EventDraft::new(
                                "checkpoint.completed",
                                json!({"current_node": format!("n{i}"), "log": blob_ref(&blob)}),
                            )
                        }
                        3 => EventDraft::new("interview.started", json!({"question_id": i})),
                        4 => EventDraft::new("interview.completed", json!({"question_id": i - 1})),
                        _ => EventDraft::new(
                            "stage.started",
                            json!({"i": i, "pad": "x".repeat(200)}),
                        )
                        .node("n"),
                    };
                    let e = store.append(&id, draft).unwrap();
                    println!("committed {} {}", e.run_id, e.seq);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn sigkill_never_loses_a_committed_event() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(DB_FILE);
    let exe = std::env::current_exe().unwrap();
    // The child test's name inside this binary (`crash::crash_child`): the module path
    // without the crate's name.
    let child_test = format!(
        "{}::crash_child",
        module_path!().split_once("::").map_or("", |(_, m)| m)
    );
    let mut rng = Rng::new(0x5EED_CAFE);
    let mut committed: HashMap<String, u64> = HashMap::new();
    let mut blobs: Vec<String> = Vec::new();
    let mut total_lines = 0u64;
    for round in 0..20 {
        let mut child = Command::new(&exe)
            .args([
                child_test.as_str(),
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &db)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("child.err")).unwrap())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let kill_after = rng.range(1, 600);
        let mut seen = 0;
        let mut record = |line: &str| {
            let mut parts = line.split_whitespace();
            match (parts.next(), parts.next(), parts.next()) {
                (Some("committed"), Some(run), Some(seq)) => {
                    let seq: u64 = seq.parse().unwrap();
                    let max = committed.entry(run.to_string()).or_insert(0);
                    *max = (*max).max(seq);
                    true
                }
                (Some("blob"), Some(id), None) => {
                    blobs.push(id.to_string());
                    false
                }
                _ => false,
            }
        };
        for line in lines.by_ref() {
            if record(&line.unwrap()) {
                seen += 1;
                if seen >= kill_after {
                    break;
                }
            }
        }
        // Let the child run on for a random moment, then SIGKILL it mid-flight.
        std::thread::sleep(Duration::from_micros(rng.range(0, 3000)));
        child.kill().unwrap();
        // Everything it printed before dying was committed before it was printed.
        for line in lines {
            record(&line.unwrap());
        }
        let status = child.wait().unwrap();
        {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                status.signal(),
                Some(9),
                "round {round}: the child ended on its own ({status}); its stderr:\n{}",
                std::fs::read_to_string(dir.path().join("child.err")).unwrap_or_default()
            );
        }
        total_lines += seen;

        let store = SqliteStore::open(&db).unwrap();
        for (run_id, max_seq) in &committed {
            let row = store
                .get_run(run_id)
                .unwrap()
                .unwrap_or_else(|| panic!("round {round}: run {run_id} lost"));
            assert!(
                row.last_seq >= *max_seq,
                "round {round}: run {run_id} lost committed events: last_seq {} < reported {max_seq}",
                row.last_seq
            );
            store.verify_run(run_id).unwrap();
        }
        for blob in &blobs {
            assert!(store.get_blob(blob).unwrap().is_some(), "blob {blob} lost");
        }
        let problems = store.integrity_problems(true).unwrap();
        assert!(problems.is_empty(), "round {round}: {problems:?}");
    }
    assert_eq!(committed.len(), RUNS);
    assert!(total_lines >= 20, "the child barely ran");
}
