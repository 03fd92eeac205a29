//! `SqliteStore`'s tests: migrations, run numbers, key ranges, appends, the row cache and
//! the queue counts, on real database files.
//! Must not: share a database file between tests or assert on timing.

use super::*;
use crate::store::test_support::new_run;
use crate::store::{RunStatus, WorkflowMeta};
use serde_json::json;

fn store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(&dir.path().join("svc.db")).unwrap();
    (dir, s)
}

/// Turns a current database back into schema 1 (events keyed by run id and seq, WITHOUT
/// ROWID; runs without a number), as an older svc left it.
fn downgrade_to_v1(path: &Path) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "BEGIN;
         CREATE TABLE events_v1 (run_id TEXT NOT NULL, seq INTEGER NOT NULL,
             kind TEXT NOT NULL, ts TEXT NOT NULL, payload TEXT NOT NULL,
             PRIMARY KEY (run_id, seq)) WITHOUT ROWID;
         INSERT INTO events_v1 SELECT run_id, seq, kind, ts, payload FROM events;
         DROP TABLE events;
         ALTER TABLE events_v1 RENAME TO events;
         DROP INDEX runs_by_num;
         ALTER TABLE runs DROP COLUMN num;
         DROP INDEX runs_by_automation;
         ALTER TABLE runs DROP COLUMN automation_id;
         DROP INDEX runs_by_workflow;
         ALTER TABLE runs DROP COLUMN workflow;
         DROP INDEX workflow_versions_by_name;
         ALTER TABLE workflow_versions DROP COLUMN name;
         ALTER TABLE runs DROP COLUMN event_count;
         ALTER TABLE runs DROP COLUMN event_bytes;
         DELETE FROM schema_version WHERE version >= 2;
         COMMIT;",
    )
    .unwrap();
}

/// Runs made before migration 11 are filed under their workflow's name from `run.created`;
/// runs made after by the writer.
#[test]
fn runs_are_filed_under_their_workflow_name_before_and_after_migration_11() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("svc.db");
    let named = |s: &SqliteStore, name: &str, graph: &str| {
        s.create_run(NewRun {
            title: name.to_string(),
            workflow: WorkflowMeta {
                name: Some(name.to_string()),
                graph_name: Some(graph.to_string()),
                ..WorkflowMeta::default()
            },
            ..NewRun::default()
        })
        .unwrap()
        .id
    };
    let (a, b) = {
        let s = SqliteStore::open(&path).unwrap();
        (named(&s, "alpha", "alpha"), named(&s, "", "beta"))
    };
    Connection::open(&path)
        .unwrap()
        .execute_batch(
            "DROP INDEX runs_by_workflow; ALTER TABLE runs DROP COLUMN workflow;
             DROP INDEX workflow_versions_by_name; ALTER TABLE workflow_versions DROP COLUMN name;
             ALTER TABLE runs DROP COLUMN event_count; ALTER TABLE runs DROP COLUMN event_bytes;
             DELETE FROM schema_version WHERE version >= 11;",
        )
        .unwrap();
    let s = SqliteStore::open(&path).unwrap();
    let c = named(&s, "alpha", "alpha");
    let of = |w: &str| -> Vec<String> {
        s.query_runs(&RunQuery {
            workflow: Some(w.to_string()),
            ..RunQuery::default()
        })
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect()
    };
    assert_eq!(of("alpha"), [c, a]);
    assert_eq!(of("beta"), [b]);
    assert!(of("gamma").is_empty());
}

#[test]
fn a_schema_1_database_is_migrated_with_every_run_and_event_and_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("svc.db");
    let mut before = Vec::new();
    {
        let s = SqliteStore::open(&path).unwrap();
        for title in ["first", "second", "third"] {
            let row = new_run(&s, title);
            s.append(&row.id, EventDraft::new("run.queued", json!({})))
                .unwrap();
            s.append(
                &row.id,
                EventDraft::new("checkpoint.completed", json!({"current_node": title})),
            )
            .unwrap();
            before.push(row.id);
        }
        // Deleted before the migration: nothing of it may come back.
        s.delete_run(&before[1]).unwrap();
    }
    // A deleted run reads as an error (tombstoned) and no events.
    let read = |s: &SqliteStore, id: &str| {
        let events: Vec<(u64, String)> = s
            .events(id, 0, 100)
            .unwrap_or_default()
            .into_iter()
            .map(|e| (e.seq, e.event))
            .collect();
        (s.get_run(id).ok().flatten(), events)
    };
    let expected: Vec<_> = {
        let s = SqliteStore::open(&path).unwrap();
        before.iter().map(|id| read(&s, id)).collect()
    };
    downgrade_to_v1(&path);
    let s = SqliteStore::open(&path).unwrap();
    let after: Vec<_> = before.iter().map(|id| read(&s, id)).collect();
    assert_eq!(after, expected);
    assert!(after[1].0.is_none() && after[1].1.is_empty());
    assert_eq!(after[2].1.len(), 3);
    assert_eq!(
        after[2].0.as_ref().and_then(|r| r.checkpoint.clone()),
        Some(json!({"current_node": "third"}))
    );
    // Appends go on after the migrated events, and a new run gets a number of its own.
    let e = s
        .append(&before[0], EventDraft::new("run.started", json!({})))
        .unwrap();
    assert_eq!(e.seq, 4);
    let fresh = new_run(&s, "");
    assert_eq!(s.events(&fresh.id, 0, 100).unwrap().len(), 1);
    assert_eq!(s.events(&before[0], 0, 100).unwrap().len(), 4);
    s.verify_run(&before[0]).unwrap();
    s.verify_run(&fresh.id).unwrap();
}

#[test]
fn a_run_number_freed_by_a_delete_elsewhere_never_mixes_two_runs_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("svc.db");
    let (here, elsewhere) = (
        SqliteStore::open(&path).unwrap(),
        SqliteStore::open(&path).unwrap(),
    );
    let kept = new_run(&here, "").id;
    let gone = new_run(&here, "").id;
    here.append(&gone, EventDraft::new("run.queued", json!({})))
        .unwrap();
    // Another connection deletes the newest run and creates one, which takes its number.
    elsewhere.delete_run(&gone).unwrap();
    let fresh = new_run(&elsewhere, "").id;
    // This writer still remembers the deleted run's number: its append must fail, and
    // the new run's events stay the new run's.
    assert!(here
        .append(&gone, EventDraft::new("run.started", json!({})))
        .is_err());
    here.append(&fresh, EventDraft::new("run.queued", json!({})))
        .unwrap();
    let kinds = |id: &str| -> Vec<String> {
        here.events(id, 0, 100)
            .unwrap()
            .into_iter()
            .map(|e| e.event)
            .collect()
    };
    assert_eq!(kinds(&fresh), ["run.created", "run.queued"]);
    assert_eq!(kinds(&kept), ["run.created"]);
    here.verify_run(&fresh).unwrap();
    here.verify_run(&kept).unwrap();
}

#[test]
fn a_runs_events_are_read_as_a_key_range_not_a_scan() {
    let (_d, s) = store();
    let row = new_run(&s, "");
    let plan: Vec<String> = s
        .read(|conn| {
            let mut st = conn
                .prepare(concat!(
                    "EXPLAIN QUERY PLAN SELECT seq, payload FROM events WHERE ",
                    run_keys_from!("?2"),
                    " ORDER BY key LIMIT ?3"
                ))
                .map_err(StoreError::db("planning", &row.id))?;
            let rows = st
                .query_map(params![row.id, 1, 10], |r| r.get::<_, String>(3))
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(StoreError::db("planning", &row.id))?;
            Ok(rows)
        })
        .unwrap();
    let events_plan: Vec<&String> = plan.iter().filter(|p| p.contains("events")).collect();
    assert!(
        events_plan
            .iter()
            .all(|p| p.starts_with("SEARCH events USING INTEGER PRIMARY KEY")),
        "{plan:?}"
    );
    assert!(!events_plan.is_empty(), "{plan:?}");
}

#[test]
fn create_append_read_back() {
    let (_d, s) = store();
    let row = new_run(&s, "t");
    let e = s
        .append(&row.id, EventDraft::new("run.queued", json!({})))
        .unwrap();
    assert_eq!(e.seq, 2);
    s.append(
        &row.id,
        EventDraft::new("checkpoint.completed", json!({"current_node":"a"})),
    )
    .unwrap();
    let got = s.get_run(&row.id).unwrap().unwrap();
    assert_eq!(got.status, RunStatus::Runnable);
    assert_eq!(got.checkpoint, Some(json!({"current_node":"a"})));
    assert_eq!(got.last_seq, 3);
    s.verify_run(&row.id).unwrap();
    let raw = s.events_raw(&row.id, 2, 10).unwrap();
    assert_eq!(raw.len(), 2);
    assert_eq!(raw[0].json, serde_json::to_string(&e).unwrap());
    assert!(s.cheap_check().is_ok());
}

#[test]
fn append_all_commits_every_event_or_none() {
    let (_d, s) = store();
    let row = new_run(&s, "");
    let batch = vec![
        EventDraft::new("run.queued", json!({})),
        EventDraft::new("stage.started", json!({"index": 0})),
        EventDraft::new("checkpoint.completed", json!({"current_node": "a"})),
        EventDraft::new("stage.completed", json!({"index": 0})),
    ];
    let sub = s.hub().subscribe(&row.id);
    assert_eq!(s.append_all(&row.id, batch).unwrap(), Some(5));
    // A subscriber gets every event whole, the checkpoint's properties included.
    let live: Vec<(u64, Value)> = std::iter::from_fn(|| sub.try_recv().ok())
        .map(|e| (e.seq, e.properties.clone()))
        .collect();
    assert_eq!(live.len(), 4);
    assert_eq!(live[2], (4, json!({"current_node": "a"})));
    // A bad draft anywhere appends nothing of the batch.
    let bad = vec![
        EventDraft::new("stage.started", json!({})),
        EventDraft::new(" ", json!({})),
    ];
    assert!(s.append_all(&row.id, bad).is_err());
    assert_eq!(s.append_all(&row.id, Vec::new()).unwrap(), None);
    let reopened = SqliteStore::open(s.path()).unwrap();
    let got = reopened.get_run(&row.id).unwrap().unwrap();
    assert_eq!(got.status, RunStatus::Runnable);
    assert_eq!(got.last_seq, 5);
    assert_eq!(got.checkpoint, Some(json!({"current_node": "a"})));
    let kinds: Vec<String> = reopened
        .events(&row.id, 1, 10)
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(
        kinds,
        [
            "run.created",
            "run.queued",
            "stage.started",
            "checkpoint.completed",
            "stage.completed"
        ]
    );
    reopened.verify_run(&row.id).unwrap();
    assert_eq!(
        reopened.get_run(&row.id).unwrap(),
        s.get_run(&row.id).unwrap()
    );
}

#[test]
fn usage_totals_survive_a_reopen() {
    let (_d, s) = store();
    let row = new_run(&s, "");
    s.append(
        &row.id,
        EventDraft::new(
            "stage.completed",
            json!({"status": "succeeded", "usage": {"cost": {"usd_micros": 42, "source": "catalog"},
                   "inference_time_ms": 7, "tool_time_ms": 3}}),
        ),
    )
    .unwrap();
    let reopened = SqliteStore::open(s.path()).unwrap();
    let got = reopened.get_run(&row.id).unwrap().unwrap();
    assert_eq!(got.usage.usd_micros, 42);
    assert_eq!(got.usage.inference_time_ms, 7);
    assert_eq!(got.usage.tool_time_ms, 3);
    reopened.verify_run(&row.id).unwrap();
}

#[test]
fn cached_rows_equal_rows_read_from_the_file() {
    let (_d, s) = store();
    let row = new_run(&s, "cache");
    let steps = [
        ("run.queued", json!({})),
        ("run.starting", json!({})),
        ("run.running", json!({})),
        (
            "interview.started",
            json!({"question_id": "q1", "question": "Go?"}),
        ),
        (
            "checkpoint.completed",
            json!({"current_node": "a", "context": {"k": [1, 2]}}),
        ),
        ("interview.completed", json!({"question_id": "q1"})),
        (
            "stage.completed",
            json!({"node_id": "a", "usage": {"tokens": {"input": 5, "output": 1}, "cost": {"usd_micros": 7, "source": "catalog"}}}),
        ),
        ("run.completed", json!({"duration_ms": 5})),
        ("run.archived", json!({})),
    ];
    for (kind, props) in steps {
        s.append(&row.id, EventDraft::new(kind, props)).unwrap();
        let cached = s.get_run(&row.id).unwrap();
        let fresh = SqliteStore::open(s.path())
            .unwrap()
            .get_run(&row.id)
            .unwrap();
        assert_eq!(cached, fresh, "after {kind}");
    }
    // A reader fills the cache too, and a deleted run is never served from it.
    let other = SqliteStore::open(s.path()).unwrap();
    assert!(other.get_run(&row.id).unwrap().is_some());
    s.delete_run(&row.id).unwrap();
    assert_eq!(other.get_run(&row.id).unwrap(), None);
}

#[test]
fn queue_counts_follow_status_changes() {
    let (_d, s) = store();
    let ids: Vec<String> = (0..4).map(|_| new_run(&s, "").id).collect();
    let runnable = |below: Option<&String>| {
        s.count_runs(&RunQuery {
            statuses: vec!["runnable".into()],
            id_below: below.cloned(),
            ..RunQuery::default()
        })
        .unwrap()
    };
    assert_eq!(runnable(None), 0);
    for id in &ids {
        s.append(id, EventDraft::new("run.queued", json!({})))
            .unwrap();
    }
    assert_eq!(runnable(None), 4);
    assert_eq!(runnable(Some(&ids[2])), 2);
    s.append(&ids[0], EventDraft::new("run.starting", json!({})))
        .unwrap();
    s.delete_run(&ids[3]).unwrap();
    assert_eq!(runnable(None), 2);
    assert_eq!(runnable(Some(&ids[2])), 1);
    // The same answers a fresh store reads from the file.
    let fresh = SqliteStore::open(s.path()).unwrap();
    let listed = fresh
        .query_runs(&RunQuery {
            statuses: vec!["runnable".into()],
            ..RunQuery::default()
        })
        .unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(
        fresh
            .count_runs(&RunQuery {
                statuses: vec!["runnable".into()],
                id_below: Some(ids[2].clone()),
                ..RunQuery::default()
            })
            .unwrap(),
        1
    );
    // A change another connection commits shows here within the recheck interval.
    fresh
        .append(&ids[1], EventDraft::new("run.starting", json!({})))
        .unwrap();
    std::thread::sleep(super::super::queue::RECHECK_AFTER + Duration::from_millis(100));
    assert_eq!(runnable(None), 1);
    assert_eq!(runnable(Some(&ids[2])), 0);
}

#[test]
fn stale_cache_is_detected() {
    let (_d, s) = store();
    let row = new_run(&s, "");
    // Another writer moves the row on behind the cache's back.
    let other = SqliteStore::open(s.path()).unwrap();
    other
        .append(&row.id, EventDraft::new("run.queued", json!({})))
        .unwrap();
    let e = s
        .append(&row.id, EventDraft::new("run.starting", json!({})))
        .unwrap();
    assert_eq!(e.seq, 3);
    s.verify_run(&row.id).unwrap();
    other.delete_run(&row.id).unwrap();
    let err = s
        .append(&row.id, EventDraft::new("x", json!({})))
        .unwrap_err();
    assert!(matches!(err, StoreError::Tombstoned { .. }), "{err}");
}

/// Every run's events as the file holds them: (run id, count, UTF-8 bytes), by run id.
fn weights_on_file(path: &Path) -> Vec<(String, u64, u64)> {
    let conn = Connection::open(path).unwrap();
    let mut st = conn
        .prepare(
            "SELECT run_id, COUNT(*), SUM(length(CAST(payload AS BLOB))) FROM events \
             GROUP BY run_id ORDER BY run_id",
        )
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// What `system/df` reports per run and in total, through the store's size queries.
fn weights_reported(s: &SqliteStore) -> (Vec<(String, u64, u64)>, u64, u64) {
    use crate::store::StoreSizes;
    let (t, heaviest) = s.weigh(100).unwrap();
    let mut per_run: Vec<_> = heaviest
        .into_iter()
        .map(|w| (w.run_id, w.events, w.event_bytes))
        .collect();
    per_run.sort();
    for (id, events, bytes) in &per_run {
        let one = s.run_weight(id).unwrap();
        assert_eq!((one.events, one.event_bytes), (*events, *bytes), "{id}");
    }
    (per_run, t.events, t.event_bytes)
}

/// Each run's event count and bytes (kept on its row for `system/df`) equal what its events
/// hold: filled by migration 13 for runs written before it, kept by creates, appends (one
/// event, batches, decided) and imports after; an unknown run weighs nothing.
#[test]
fn run_weights_are_filled_by_migration_13_and_kept_by_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("svc.db");
    let append = |s: &SqliteStore, id: &str, text: &str| {
        s.append(
            id,
            EventDraft::new("stage.started", json!({"note": text})).node("n1"),
        )
        .unwrap();
    };
    let (a, b) = {
        let s = SqliteStore::open(&path).unwrap();
        let a = new_run(&s, "ascii").id;
        let b = new_run(&s, "ünïcödé títle").id;
        append(&s, &a, "x");
        append(&s, &b, "€€€ multi-byte text");
        (a, b)
    };
    Connection::open(&path)
        .unwrap()
        .execute_batch(
            "ALTER TABLE runs DROP COLUMN event_count; ALTER TABLE runs DROP COLUMN event_bytes;
             DELETE FROM schema_version WHERE version >= 13;",
        )
        .unwrap();
    let s = SqliteStore::open(&path).unwrap();
    let on_file = weights_on_file(&path);
    assert_eq!(on_file.len(), 2);
    let (per_run, events, bytes) = weights_reported(&s);
    assert_eq!(per_run, on_file, "migration 13 measured every run");
    assert_eq!(events, 4);
    assert_eq!(bytes, on_file.iter().map(|w| w.2).sum::<u64>());
    // The multi-byte run's bytes are bytes, not characters.
    let b_chars: u64 = s
        .events_raw(&b, 0, 100)
        .unwrap()
        .iter()
        .map(|e| e.json.chars().count() as u64)
        .sum();
    assert!(on_file.iter().any(|w| w.0 == b && w.2 > b_chars));

    // After the migration every kind of write keeps the figures.
    append(&s, &a, "one more");
    s.append_all(
        &b,
        vec![
            EventDraft::new("stage.started", json!({"i": 1})).node("n2"),
            EventDraft::new("stage.completed", json!({"status": "succeeded"})).node("n2"),
            EventDraft::new("checkpoint.completed", json!({"current_node": "n2"})),
        ],
    )
    .unwrap();
    s.append_decided(&a, &mut |_| {
        vec![EventDraft::new(
            "run.cancel.requested",
            json!({"reason": "test"}),
        )]
    })
    .unwrap();
    let c = new_run(&s, "third").id;
    let imported = crate::base::clock::new_ulid();
    let lines: Vec<String> = s
        .events_raw(&c, 0, 100)
        .unwrap()
        .into_iter()
        .map(|e| e.json.replace(&c, &imported))
        .collect();
    s.import_runs(&[(imported.clone(), lines)]).unwrap();
    let on_file = weights_on_file(&path);
    assert_eq!(on_file.len(), 4);
    let (per_run, events, bytes) = weights_reported(&s);
    assert_eq!(per_run, on_file);
    assert_eq!(events, on_file.iter().map(|w| w.1).sum::<u64>());
    assert_eq!(bytes, on_file.iter().map(|w| w.2).sum::<u64>());
    use crate::store::StoreSizes;
    // Heaviest first, ties by id, cut at the number asked for.
    let mut expected = on_file.clone();
    expected.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    for n in 0..=5 {
        let (t, top) = s.weigh(n).unwrap();
        assert_eq!(t.runs, 4);
        let got: Vec<_> = top
            .into_iter()
            .map(|w| (w.run_id, w.events, w.event_bytes))
            .collect();
        assert_eq!(got, expected[..n.min(4)], "{n}");
    }
    assert_eq!(
        s.run_weight("01NOSUCHRUN0000000000000000").unwrap().events,
        0
    );

    // A deleted run's events leave the totals with it.
    s.delete_run(&a).unwrap();
    let (_, events, _) = weights_reported(&s);
    assert_eq!(
        events,
        weights_on_file(&path).iter().map(|w| w.1).sum::<u64>()
    );
}

/// The board's page ("every run but `removing`", newest first) walks the runs in id order and
/// stops at the page's end: no sort of every run per page (at 100,000 runs that sort was the
/// whole of a page's time). The filter itself still holds.
#[test]
fn the_board_page_walks_runs_in_id_order_without_sorting_them_all() {
    let (_d, s) = store();
    let rows: Vec<String> = (0..5).map(|_| new_run(&s, "").id).collect();
    let q = RunQuery {
        exclude_archived: true,
        exclude_statuses: vec!["removing".into()],
        limit: 3,
        ..RunQuery::default()
    };
    let page: Vec<String> = s
        .query_runs(&q)
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    let newest: Vec<String> = rows.iter().rev().take(3).cloned().collect();
    assert_eq!(page, newest);
    let (filter, args) = super::rows::run_filter(&q);
    let sql = format!(
        "EXPLAIN QUERY PLAN {} WHERE {filter} ORDER BY r.id DESC LIMIT 3",
        super::rows::ROW_SELECT
    );
    let plan: Vec<String> = s
        .read(|conn| {
            let mut st = conn
                .prepare(&sql)
                .map_err(StoreError::db_global("planning"))?;
            let rows = st
                .query_map(rusqlite::params_from_iter(args.iter()), |r| {
                    r.get::<_, String>(3)
                })
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(StoreError::db_global("planning"))?;
            Ok(rows)
        })
        .unwrap();
    assert!(plan.iter().all(|p| !p.contains("TEMP B-TREE")), "{plan:?}");
}
