//! Store behaviour through the `RunStore` API, for both implementations: atomicity under
//! concurrent writers, tombstones (also across a restart), blobs, the hub, typed errors.

use crate::support::store::{assert_row_is_fold, Rng};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use svc::internal::store::test_support::new_run;
use svc::internal::store::{
    blob_ref, Control, EventDraft, MemoryStore, NewRun, RunQuery, RunStatus, RunStore, SqliteStore,
    StoreError, DB_FILE,
};

fn sqlite() -> (tempfile::TempDir, Arc<SqliteStore>) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join(DB_FILE)).unwrap();
    (dir, Arc::new(store))
}

fn both() -> Vec<(String, Option<tempfile::TempDir>, Arc<dyn RunStore>)> {
    let (dir, s) = sqlite();
    vec![
        (
            "memory".into(),
            None,
            Arc::new(MemoryStore::new()) as Arc<dyn RunStore>,
        ),
        ("sqlite".into(), Some(dir), s as Arc<dyn RunStore>),
    ]
}

/// A run request titled `title`, for tests that change one more field or expect a refusal
/// (the rest create runs with [`new_run`]).
fn titled(title: &str) -> NewRun {
    NewRun {
        title: title.into(),
        ..NewRun::default()
    }
}

/// A realistic mix of event kinds, chosen by the rng.
fn draft(rng: &mut Rng, i: u64) -> EventDraft {
    match rng.range(0, 10) {
        0 => EventDraft::new(
            "checkpoint.completed",
            json!({"current_node": format!("n{i}")}),
        ),
        1 => EventDraft::new("interview.started", json!({"question_id": format!("q{i}")})),
        2 => EventDraft::new(
            "interview.completed",
            json!({"question_id": format!("q{}", i.saturating_sub(1))}),
        ),
        3 => EventDraft::new("run.running", json!({})),
        4 => EventDraft::new("run.pause.requested", json!({})),
        5 => EventDraft::new("run.paused", json!({})),
        6 => EventDraft::new("run.archived", json!({})),
        _ => EventDraft::new("stage.started", json!({"index": i})).node("plan"),
    }
}

#[test]
fn concurrent_writers_keep_row_equal_to_fold() {
    for (name, _dir, store) in both() {
        let shared: Vec<String> = (0..3)
            .map(|i| new_run(&*store, &format!("shared {i}")).id)
            .collect();
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let store = Arc::clone(&store);
                let shared = shared.clone();
                std::thread::spawn(move || {
                    let mut rng = Rng::new(1000 + t);
                    let mut deleted = 0;
                    for round in 0..6 {
                        // A run of this thread's own: checked after every single operation.
                        let own = new_run(&*store, &format!("t{t} r{round}"));
                        assert_row_is_fold(&*store, &own.id);
                        for i in 0..25 {
                            let e = store.append(&own.id, draft(&mut rng, i)).unwrap();
                            assert_eq!(e.seq, i + 2);
                            assert_row_is_fold(&*store, &own.id);
                            let target = &shared[(rng.next() % 3) as usize];
                            store.append(target, draft(&mut rng, i)).unwrap();
                        }
                        if round % 2 == 1 {
                            store.delete_run(&own.id).unwrap();
                            assert!(store.get_run(&own.id).unwrap().is_none());
                            deleted += 1;
                        }
                    }
                    deleted
                })
            })
            .collect();
        let deleted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        for id in &shared {
            assert_row_is_fold(&*store, id);
        }
        let total: u64 = shared
            .iter()
            .map(|id| store.get_run(id).unwrap().unwrap().last_seq - 1)
            .sum();
        assert_eq!(total, 4 * 6 * 25, "{name}: every shared append landed once");
        let all = store.list_runs(0, 1000).unwrap();
        assert_eq!(all.len(), 3 + 4 * 6 - deleted, "{name}");
        for w in all.windows(2) {
            assert!(w[0].id > w[1].id, "{name}: newest first");
        }
    }
}

#[test]
fn tombstones_hold_and_late_appends_fail() {
    for (name, _dir, store) in both() {
        let run = new_run(&*store, "doomed");
        // A still-running "engine" keeps appending while the run is deleted.
        let stop = Arc::new(AtomicBool::new(false));
        let engine = {
            let store = Arc::clone(&store);
            let id = run.id.clone();
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || loop {
                match store.append(&id, EventDraft::new("stage.started", json!({}))) {
                    Ok(_) => {}
                    Err(e) => return e,
                }
                if stop.load(Ordering::Relaxed) {
                    return StoreError::NotFound {
                        run_id: "stopped".into(),
                    };
                }
            })
        };
        std::thread::sleep(Duration::from_millis(30));
        store.delete_run(&run.id).unwrap();
        let err = engine.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        assert!(
            matches!(err, StoreError::Tombstoned { .. }),
            "{name}: {err}"
        );
        assert!(store.get_run(&run.id).unwrap().is_none());
        assert!(store.tombstone(&run.id).unwrap().is_some());
        let again = store.create_run(NewRun {
            id: Some(run.id.clone()),
            ..titled("again")
        });
        assert!(
            matches!(again, Err(StoreError::Tombstoned { .. })),
            "{name}"
        );
        assert!(matches!(
            store.events(&run.id, 1, 10),
            Err(StoreError::Tombstoned { .. })
        ));
        let line = format!(
            r#"{{"seq":1,"id":"x","ts":"t","run_id":"{}","event":"run.created","properties":{{}}}}"#,
            run.id
        );
        assert!(matches!(
            store.import_run(&run.id, &[line]),
            Err(StoreError::Tombstoned { .. })
        ));
        store.delete_run(&run.id).unwrap(); // idempotent
        assert!(matches!(
            store.delete_run(&svc::internal::base::clock::new_ulid()),
            Err(StoreError::NotFound { .. })
        ));
    }
}

#[test]
fn tombstones_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(DB_FILE);
    let (gone, kept) = {
        let store = SqliteStore::open(&db).unwrap();
        let gone = new_run(&store, "gone").id;
        let kept = new_run(&store, "kept").id;
        store
            .append(&gone, EventDraft::new("run.queued", json!({})))
            .unwrap();
        store.delete_run(&gone).unwrap();
        (gone, kept)
    };
    let store = SqliteStore::open(&db).unwrap();
    assert!(store.get_run(&gone).unwrap().is_none());
    assert!(store.get_run(&kept).unwrap().is_some());
    assert!(matches!(
        store.append(&gone, EventDraft::new("run.queued", json!({}))),
        Err(StoreError::Tombstoned { .. })
    ));
    assert!(matches!(
        store.create_run(NewRun {
            id: Some(gone.clone()),
            ..titled("x")
        }),
        Err(StoreError::Tombstoned { .. })
    ));
    // Nothing of the deleted run is left in the log.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let n: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM events WHERE run_id = ?1",
            [&gone],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 0);
}

#[test]
fn create_rejects_bad_and_duplicate_ids() {
    for (name, _dir, store) in both() {
        let bad = store.create_run(NewRun {
            id: Some("not-a-ulid".into()),
            ..titled("x")
        });
        assert!(
            matches!(bad, Err(StoreError::InvalidRunId { .. })),
            "{name}"
        );
        let id = svc::internal::base::clock::new_ulid();
        store
            .create_run(NewRun {
                id: Some(id.clone()),
                ..titled("x")
            })
            .unwrap();
        let dup = store.create_run(NewRun {
            id: Some(id),
            ..titled("y")
        });
        assert!(
            matches!(dup, Err(StoreError::AlreadyExists { .. })),
            "{name}"
        );
        let clash = store.create_run(NewRun {
            extra: json!({"title": "sneaky"}),
            ..titled("x")
        });
        assert!(
            matches!(clash, Err(StoreError::InvalidRun { .. })),
            "{name}"
        );
        let r = store
            .create_run(NewRun {
                extra: json!({"manifest_blob": "b"}),
                ..titled("x")
            })
            .unwrap();
        let created = store.events(&r.id, 1, 1).unwrap();
        assert_eq!(created[0].event, "run.created");
        assert_eq!(created[0].properties["manifest_blob"], "b");
        assert!(matches!(
            store.append(&r.id, EventDraft::new("run.created", json!({}))),
            Err(StoreError::InvalidEvent { .. })
        ));
        assert!(matches!(
            store.append(&r.id, EventDraft::new("x", json!([1]))),
            Err(StoreError::InvalidEvent { .. })
        ));
        assert!(matches!(
            store.append(
                &svc::internal::base::clock::new_ulid(),
                EventDraft::new("x", json!({}))
            ),
            Err(StoreError::NotFound { .. })
        ));
    }
}

#[test]
fn row_projection_and_queries() {
    for (name, _dir, store) in both() {
        let parent = new_run(&*store, "parent");
        let child = store
            .create_run(NewRun {
                parent_id: Some(parent.id.clone()),
                ..titled("child")
            })
            .unwrap();
        for kind in [
            "run.queued",
            "run.starting",
            "run.running",
            "run.cancel.requested",
        ] {
            store
                .append(&child.id, EventDraft::new(kind, json!({})))
                .unwrap();
        }
        let row = store.get_run(&child.id).unwrap().unwrap();
        assert_eq!(row.status, RunStatus::Running, "{name}");
        assert_eq!(row.pending_control, Some(Control::Cancel));
        assert!(row.started_at.is_some());
        store
            .append(
                &child.id,
                EventDraft::new(
                    "run.failed",
                    json!({"reason": "cancelled", "error": "stopped by user"}),
                ),
            )
            .unwrap();
        store
            .append(&child.id, EventDraft::new("run.archived", json!({})))
            .unwrap();
        let row = store.get_run(&child.id).unwrap().unwrap();
        assert_eq!(
            row.status,
            RunStatus::Failed {
                reason: "cancelled".into()
            }
        );
        assert_eq!(row.pending_control, None);
        assert_eq!(row.error.as_deref(), Some("stopped by user"));
        assert!(row.archived && row.completed_at.is_some());
        let children = store
            .query_runs(&RunQuery {
                parent_id: Some(parent.id.clone()),
                ..RunQuery::default()
            })
            .unwrap();
        assert_eq!(children.len(), 1);
        let visible = store
            .query_runs(&RunQuery {
                exclude_archived: true,
                ..RunQuery::default()
            })
            .unwrap();
        assert_eq!(visible.len(), 1);
        let failed = store
            .query_runs(&RunQuery {
                statuses: vec!["failed".into()],
                ..RunQuery::default()
            })
            .unwrap();
        assert_eq!(failed.len(), 1);
        let fifo = store
            .query_runs(&RunQuery {
                oldest_first: true,
                ..RunQuery::default()
            })
            .unwrap();
        assert_eq!(fifo[0].id, parent.id);
        assert_eq!(store.list_runs(1, 1).unwrap()[0].id, parent.id);
        assert_eq!(store.events(&child.id, 3, 2).unwrap().len(), 2);
        assert_eq!(store.events(&child.id, 3, 2).unwrap()[0].seq, 3);
        assert!(store.events(&child.id, 100, 2).unwrap().is_empty());
    }
}

#[test]
fn blobs_round_trip_and_corruption_is_detected() {
    for (name, _dir, store) in both() {
        let big = vec![7u8; 300 * 1024];
        let id = store.put_blob(&big).unwrap();
        assert_eq!(id, svc::internal::store::sha256_hex(&big));
        assert_eq!(store.put_blob(&big).unwrap(), id, "{name}: written once");
        assert_eq!(store.get_blob(&id).unwrap().as_deref(), Some(&big[..]));
        assert!(store.has_blob(&id).unwrap());
        let empty = store.put_blob(b"").unwrap();
        assert_eq!(store.get_blob(&empty).unwrap(), Some(vec![]));
        assert_eq!(store.get_blob(&"0".repeat(64)).unwrap(), None);
        assert!(matches!(
            store.get_blob("../../etc/passwd"),
            Err(StoreError::InvalidBlobId { .. })
        ));
        let text = "x".repeat(svc::internal::store::BLOB_THRESHOLD + 1);
        let r = svc::internal::store::offload_text(&*store, &text).unwrap();
        assert_eq!(
            r,
            blob_ref(&svc::internal::store::sha256_hex(text.as_bytes()))
        );
        assert_eq!(
            svc::internal::store::offload_text(&*store, "small").unwrap(),
            "small"
        );
    }
    // Corrupt stored bytes: SQLite.
    let (dir, store) = sqlite();
    let id = store.put_blob(b"precious").unwrap();
    let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.execute(
        "UPDATE blobs SET bytes = ?1 WHERE id = ?2",
        rusqlite::params![b"precioUs".to_vec(), id],
    )
    .unwrap();
    match store.get_blob(&id) {
        Err(StoreError::CorruptBlob {
            id: got, actual, ..
        }) => {
            assert_eq!(got, id);
            assert_ne!(actual, id);
        }
        other => panic!("expected CorruptBlob, got {other:?}"),
    }
    // Memory.
    let mem = MemoryStore::new();
    let id = mem.put_blob(b"precious").unwrap();
    mem.corrupt_blob_for_tests(&id, b"tampered".to_vec());
    assert!(matches!(
        mem.get_blob(&id),
        Err(StoreError::CorruptBlob { .. })
    ));
}

#[test]
fn hub_delivers_only_committed_events_in_order() {
    for (name, _dir, store) in both() {
        let all = store.hub().subscribe_all();
        let runs: Vec<String> = (0..3)
            .map(|i| new_run(&*store, &format!("r{i}")).id)
            .collect();
        let one = store.hub().subscribe(&runs[0]);
        let writers: Vec<_> = runs
            .iter()
            .cloned()
            .map(|id| {
                let store = Arc::clone(&store);
                std::thread::spawn(move || {
                    for i in 0..100 {
                        store
                            .append(&id, EventDraft::new("stage.started", json!({"i": i})))
                            .unwrap();
                    }
                })
            })
            .collect();
        // Every delivered event must already be readable by anyone: it was committed.
        let mut last = std::collections::HashMap::new();
        for _ in 0..3 * 101 {
            let e = all.recv_timeout(Duration::from_secs(10)).unwrap();
            let seen = store.events(&e.run_id, e.seq, 1).unwrap();
            assert_eq!(seen.len(), 1, "{name}: delivered before commit");
            assert_eq!(*seen[0].id, e.id);
            assert!(store.get_run(&e.run_id).unwrap().unwrap().last_seq >= e.seq);
            let prev = last.insert(e.run_id.clone(), e.seq).unwrap_or(0);
            assert_eq!(e.seq, prev + 1, "{name}: out of order or gap");
        }
        for w in writers {
            w.join().unwrap();
        }
        let mut seqs = Vec::new();
        while let Ok(e) = one.try_recv() {
            assert_eq!(e.run_id, runs[0]);
            seqs.push(e.seq);
        }
        assert_eq!(seqs, (2..=101).collect::<Vec<u64>>(), "{name}");
        // Deleting the run ends its feed.
        store.delete_run(&runs[0]).unwrap();
        assert!(one.recv_timeout(Duration::from_secs(1)).is_err());
    }
}

#[test]
fn hub_sees_commits_from_a_separate_connection() {
    // Stronger than the pool check above: a second store on the same file (its own
    // connections) reads every event as soon as the hub announces it.
    let (dir, store) = sqlite();
    let observer = SqliteStore::open(&dir.path().join(DB_FILE)).unwrap();
    let run = new_run(&*store, "x");
    let sub = store.hub().subscribe(&run.id);
    let writer = {
        let store = Arc::clone(&store);
        let id = run.id.clone();
        std::thread::spawn(move || {
            for _ in 0..200 {
                store
                    .append(&id, EventDraft::new("tick", json!({})))
                    .unwrap();
            }
        })
    };
    for seq in 2..=201 {
        let e = sub.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(e.seq, seq);
        let seen = observer.events(&run.id, seq, 1).unwrap();
        assert_eq!(seen.len(), 1);
    }
    writer.join().unwrap();
}

#[test]
fn failed_append_is_typed_and_leaves_nothing_behind() {
    let (_dir, store) = sqlite();
    let run = new_run(&*store, "x");
    store
        .append(&run.id, EventDraft::new("run.queued", json!({})))
        .unwrap();
    let sub = store.hub().subscribe(&run.id);
    let conn_pages: u64 = {
        let conn = rusqlite::Connection::open(store.path()).unwrap();
        conn.query_row("PRAGMA page_count", [], |r| r.get(0))
            .unwrap()
    };
    store.limit_pages_for_tests(conn_pages + 2).unwrap();
    let huge = "z".repeat(2 * 1024 * 1024);
    let err = store
        .append(
            &run.id,
            EventDraft::new("stage.completed", json!({"response": huge})),
        )
        .unwrap_err();
    assert!(err.is_disk_full(), "{err:?}");
    assert_eq!(err.run_id(), Some(run.id.as_str()));
    assert!(err.to_string().contains("full"), "{err}");
    assert!(sub.try_recv().is_err(), "a failed append was published");
    let row = store.get_run(&run.id).unwrap().unwrap();
    assert_eq!(row.last_seq, 2);
    assert_row_is_fold(&*store, &run.id);
    store.limit_pages_for_tests(1 << 30).unwrap();
    let e = store
        .append(&run.id, EventDraft::new("run.starting", json!({})))
        .unwrap();
    assert_eq!(e.seq, 3, "no gap after a failed append");
    assert_eq!(sub.try_recv().unwrap().seq, 3);
    store.verify_run(&run.id).unwrap();
}

#[test]
fn events_keep_their_exact_bytes() {
    for (name, _dir, store) in both() {
        let run = new_run(&*store, "x");
        let e = store
            .append(
                &run.id,
                EventDraft::new(
                    "agent.message",
                    json!({"z": 1, "a": [1.5, "é"], "m": {"k": null}}),
                )
                .node("n")
                .stage("n@1")
                .parallel("g", "g:0")
                .actor(json!({"kind": "system", "system_kind": "engine"})),
            )
            .unwrap();
        let raw = store.events_raw(&run.id, 2, 1).unwrap();
        assert_eq!(raw[0].json, serde_json::to_string(&e).unwrap(), "{name}");
        assert!(raw[0]
            .json
            .contains(r#""properties":{"z":1,"a":[1.5,"é"],"m":{"k":null}}"#));
        let back = store.events(&run.id, 2, 1).unwrap();
        assert_eq!(back[0], e);
    }
}

#[test]
fn append_decided_reads_checks_and_appends_in_one_step() {
    for (name, _dir, store) in both() {
        let row = new_run(&*store, "decided");
        // Nothing decided: nothing written.
        let (same, none) = store.append_decided(&row.id, &mut |_| Vec::new()).unwrap();
        assert!(none.is_empty(), "{name}");
        assert_eq!(same.last_seq, 1, "{name}");
        // Two events in order; the returned row is the stored row.
        let mut seen = None;
        let (after, events) = store
            .append_decided(&row.id, &mut |r| {
                seen = Some(r.status.name());
                vec![
                    EventDraft::new("run.queued", json!({})),
                    EventDraft::new("run.starting", json!({})),
                ]
            })
            .unwrap();
        assert_eq!(seen, Some("submitted"), "{name}");
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(after.status.name(), "starting", "{name}");
        assert_eq!(store.get_run(&row.id).unwrap(), Some(after), "{name}");
        // Unknown run: NotFound, and `decide` is never asked.
        let unknown = svc::internal::base::clock::new_ulid();
        let mut asked = false;
        let err = store
            .append_decided(&unknown, &mut |_| {
                asked = true;
                Vec::new()
            })
            .unwrap_err();
        assert!(matches!(err, StoreError::NotFound { .. }), "{name}: {err}");
        assert!(!asked, "{name}");
    }
    // Another connection moves the run on: the decision sees the row as the file has it.
    let (_d, s) = sqlite();
    let row = new_run(&*s, "moved");
    let other = SqliteStore::open(s.path()).unwrap();
    other
        .append(&row.id, EventDraft::new("run.queued", json!({})))
        .unwrap();
    let mut seen = None;
    s.append_decided(&row.id, &mut |r| {
        seen = Some((r.status.name(), r.last_seq));
        vec![EventDraft::new("run.starting", json!({}))]
    })
    .unwrap();
    assert_eq!(seen, Some(("runnable", 2)));
}
