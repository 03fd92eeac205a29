//! Startup activation: legacy import (byte for byte), its backup, idempotence, and every
//! failure that must stop startup with a message saying what and where.

use crate::support::store::{assert_row_is_fold, legacy_fixture, tree};
use serde_json::json;
use std::fs;
use std::path::Path;
use svc::internal::store::portable::{export_runs, import_dir};
use svc::internal::store::test_support::new_run;
use svc::internal::store::{
    unpack_backup, ActivationError, EventDraft, RunStore, SqliteStore, BACKUP_FILE, DB_FILE,
    LEGACY_DIR, SCHEMA_VERSION,
};

fn err_of(r: Result<SqliteStore, ActivationError>) -> ActivationError {
    match r {
        Ok(_) => panic!("activation should have failed"),
        Err(e) => e,
    }
}

/// Each event's stored bytes joined back into the file the run came from.
fn stored_file(store: &dyn RunStore, run_id: &str) -> Vec<u8> {
    let mut text = String::new();
    for raw in store.events_raw(run_id, 1, usize::MAX).unwrap() {
        text.push_str(&raw.json);
        text.push('\n');
    }
    text.into_bytes()
}

#[test]
fn imports_hundreds_of_runs_byte_for_byte_once() {
    let state = tempfile::tempdir().unwrap();
    let legacy = state.path().join(LEGACY_DIR);
    let ids = legacy_fixture(&legacy, 200, 7);

    let store = SqliteStore::activate(state.path()).unwrap();
    let report = store.activation_report().unwrap().clone();
    let lr = report.legacy.clone().unwrap();
    assert!(lr.imported_now);
    assert_eq!(lr.runs, 200);
    assert_eq!(report.integrity_check, "integrity_check");
    for id in &ids {
        let file = fs::read(legacy.join("runs").join(id).join("events.jsonl")).unwrap();
        assert_eq!(stored_file(&store, id), file, "run {id} not byte-identical");
        assert_row_is_fold(&store, id);
    }
    let blob_files = tree(&legacy.join("blobs"));
    assert!(!blob_files.is_empty());
    for (name, bytes) in &blob_files {
        assert_eq!(store.get_blob(name).unwrap().as_ref(), Some(bytes));
    }
    // The imported rows look right.
    let row = store.get_run(&ids[0]).unwrap().unwrap();
    assert_eq!(row.title, "legacy run 0");
    assert!(row.status.is_terminal());
    assert_eq!(row.error.as_deref(), Some("server restarted"));
    // The private backup exists, is 0600 and unpacks to exactly the legacy directory.
    let backup = state.path().join(BACKUP_FILE);
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&backup).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let unpacked = state.path().join("unpacked");
    unpack_backup(&backup, &unpacked).unwrap();
    assert_eq!(tree(&unpacked), tree(&legacy));
    // Export gives the same files back.
    let out = state.path().join("export");
    let summary = export_runs(&store, &out, &[]).unwrap();
    assert_eq!(summary.runs, 200);
    assert_eq!(tree(&out), tree(&legacy));
    // New runs keep working alongside the imported ones.
    let fresh = new_run(&store, "");
    store
        .append(&fresh.id, EventDraft::new("run.queued", json!({})))
        .unwrap();
    let (runs, _) = store.counts().unwrap();
    assert_eq!(runs, 201);
    drop(store);

    // Second start: nothing imported twice, backup revalidated.
    let store = SqliteStore::activate(state.path()).unwrap();
    let lr2 = store.activation_report().unwrap().legacy.clone().unwrap();
    assert!(!lr2.imported_now);
    assert_eq!(lr2.backup_sha256, lr.backup_sha256);
    assert_eq!(store.counts().unwrap().0, 201);
    assert_eq!(store.events(&ids[5], 1, usize::MAX).unwrap().len(), {
        let f = fs::read_to_string(legacy.join("runs").join(&ids[5]).join("events.jsonl")).unwrap();
        f.lines().count()
    });
}

#[test]
fn interrupted_import_is_redone_without_duplicates() {
    // Simulates a crash after some runs were imported but before the import was recorded:
    // the next start imports again, identical runs are left as they are.
    let state = tempfile::tempdir().unwrap();
    let legacy = state.path().join(LEGACY_DIR);
    let ids = legacy_fixture(&legacy, 20, 3);
    {
        let store = SqliteStore::open(&state.path().join(DB_FILE)).unwrap();
        for id in &ids[..7] {
            let text =
                fs::read_to_string(legacy.join("runs").join(id).join("events.jsonl")).unwrap();
            let lines: Vec<String> = text.lines().map(str::to_string).collect();
            store.import_run(id, &lines).unwrap();
        }
    }
    let store = SqliteStore::activate(state.path()).unwrap();
    let lr = store.activation_report().unwrap().legacy.clone().unwrap();
    assert!(lr.imported_now);
    assert_eq!(lr.runs_already_present, 7);
    assert_eq!(store.counts().unwrap().0, 20);
}

#[test]
fn corrupt_blob_stops_startup_naming_the_file() {
    let state = tempfile::tempdir().unwrap();
    let legacy = state.path().join(LEGACY_DIR);
    legacy_fixture(&legacy, 10, 11);
    let name = svc::internal::store::sha256_hex(b"what it should be");
    let bad = legacy.join("blobs").join(&name);
    fs::write(&bad, b"what it is").unwrap();
    let err = err_of(SqliteStore::activate(state.path()));
    let msg = err.to_string();
    assert!(matches!(err, ActivationError::Legacy { .. }), "{msg}");
    assert!(msg.contains(&bad.display().to_string()), "{msg}");
    assert!(msg.contains("corrupt blob"), "{msg}");
    // Nothing was imported and nothing recorded: fixing the file lets the next start import.
    {
        let store = SqliteStore::open(&state.path().join(DB_FILE)).unwrap();
        assert_eq!(store.counts().unwrap(), (0, 0));
    }
    assert!(!state.path().join(BACKUP_FILE).exists());
    fs::remove_file(&bad).unwrap();
    let store = SqliteStore::activate(state.path()).unwrap();
    assert_eq!(store.counts().unwrap().0, 10);
}

#[test]
fn non_json_line_stops_startup_naming_file_and_line() {
    let state = tempfile::tempdir().unwrap();
    let legacy = state.path().join(LEGACY_DIR);
    let ids = legacy_fixture(&legacy, 5, 12);
    let file = legacy.join("runs").join(&ids[2]).join("events.jsonl");
    let mut lines: Vec<String> = fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines.insert(1, "this is not json".into());
    fs::write(&file, lines.join("\n") + "\n").unwrap();
    let msg = err_of(SqliteStore::activate(state.path())).to_string();
    assert!(msg.contains(&format!("{}:2", file.display())), "{msg}");
    assert!(msg.contains("not a JSON event"), "{msg}");
}

/// Damages a legacy directory (given its path and run ids).
type Breaker = Box<dyn Fn(&Path, &[String])>;

#[test]
fn structural_problems_stop_startup() {
    let cases: Vec<(&str, Breaker)> = vec![
        (
            "unexpected entry",
            Box::new(|l: &Path, _: &[String]| fs::write(l.join("notes.txt"), "hi").unwrap()),
        ),
        (
            "ULID",
            Box::new(|l: &Path, _: &[String]| {
                fs::create_dir_all(l.join("runs").join("not-a-run")).unwrap()
            }),
        ),
        (
            "seq is 3, expected 2",
            Box::new(|l: &Path, ids: &[String]| {
                let f = l.join("runs").join(&ids[0]).join("events.jsonl");
                let text = fs::read_to_string(&f).unwrap();
                let first = text.lines().next().unwrap().to_string();
                let id = &ids[0];
                fs::write(
                    &f,
                    format!("{first}\n{{\"seq\":3,\"id\":\"x\",\"ts\":\"t\",\"run_id\":\"{id}\",\"event\":\"x\",\"properties\":{{}}}}\n"),
                )
                .unwrap();
            }),
        ),
        (
            "neither in blobs/ nor in the store",
            Box::new(|l: &Path, ids: &[String]| {
                let f = l.join("runs").join(&ids[0]).join("events.jsonl");
                let mut text = fs::read_to_string(&f).unwrap();
                let seq = text.lines().count() + 1;
                let id = &ids[0];
                let missing = svc::internal::store::sha256_hex(b"nowhere");
                text.push_str(&format!(
                    "{{\"seq\":{seq},\"id\":\"x\",\"ts\":\"t\",\"run_id\":\"{id}\",\"event\":\"x\",\"properties\":{{\"out\":\"blob://sha256/{missing}\"}}}}\n"
                ));
                fs::write(&f, text).unwrap();
            }),
        ),
    ];
    for (expect, break_it) in cases {
        let state = tempfile::tempdir().unwrap();
        let legacy = state.path().join(LEGACY_DIR);
        let ids = legacy_fixture(&legacy, 3, 13);
        break_it(&legacy, &ids);
        let msg = err_of(SqliteStore::activate(state.path())).to_string();
        assert!(msg.contains(expect), "expected {expect:?} in: {msg}");
        assert!(msg.contains(&legacy.display().to_string()), "{msg}");
    }
}

#[test]
fn tampered_or_missing_backup_stops_startup() {
    let state = tempfile::tempdir().unwrap();
    legacy_fixture(&state.path().join(LEGACY_DIR), 4, 21);
    drop(SqliteStore::activate(state.path()).unwrap());
    let backup = state.path().join(BACKUP_FILE);
    let original = fs::read(&backup).unwrap();
    let mut tampered = original.clone();
    let mid = tampered.len() / 2;
    tampered[mid] ^= 0x20;
    fs::write(&backup, &tampered).unwrap();
    let err = err_of(SqliteStore::activate(state.path()));
    assert!(
        matches!(err, ActivationError::BackupMismatch { .. }),
        "{err}"
    );
    assert!(err.to_string().contains(&backup.display().to_string()));
    fs::remove_file(&backup).unwrap();
    let err = err_of(SqliteStore::activate(state.path()));
    assert!(
        matches!(err, ActivationError::BackupMissing { .. }),
        "{err}"
    );
    fs::write(&backup, &original).unwrap();
    SqliteStore::activate(state.path()).unwrap();
}

#[test]
fn newer_schema_is_refused() {
    let state = tempfile::tempdir().unwrap();
    drop(SqliteStore::activate(state.path()).unwrap());
    let db = state.path().join(DB_FILE);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "INSERT INTO schema_version (version, applied_at) VALUES (?1, 'later')",
        [SCHEMA_VERSION + 1],
    )
    .unwrap();
    drop(conn);
    let err = err_of(SqliteStore::activate(state.path()));
    let msg = err.to_string();
    assert!(matches!(err, ActivationError::NewerSchema { .. }), "{msg}");
    assert!(
        msg.contains(&db.display().to_string()) && msg.contains("newer"),
        "{msg}"
    );
}

#[test]
fn foreign_database_is_refused() {
    let state = tempfile::tempdir().unwrap();
    let conn = rusqlite::Connection::open(state.path().join(DB_FILE)).unwrap();
    conn.execute_batch("CREATE TABLE mine (x); PRAGMA application_id = 42;")
        .unwrap();
    drop(conn);
    let err = err_of(SqliteStore::activate(state.path()));
    assert!(matches!(err, ActivationError::NotOurs { .. }), "{err}");
}

#[test]
fn damaged_database_stops_startup() {
    let state = tempfile::tempdir().unwrap();
    {
        let store = SqliteStore::activate(state.path()).unwrap();
        for _ in 0..50 {
            let r = new_run(&store, "");
            for _ in 0..20 {
                store
                    .append(
                        &r.id,
                        EventDraft::new("stage.started", json!({"pad": "p".repeat(300)})),
                    )
                    .unwrap();
            }
        }
    }
    let db = state.path().join(DB_FILE);
    // The store's background checkpointer may not have moved the WAL into the main file
    // yet when the store is dropped; do it here so the damage below hits real pages.
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
    }
    let mut bytes = fs::read(&db).unwrap();
    assert!(
        bytes.len() > 40 * 4096,
        "database is only {} bytes",
        bytes.len()
    );
    for b in &mut bytes[20 * 4096..20 * 4096 + 2048] {
        *b = 0xA5;
    }
    fs::write(&db, &bytes).unwrap();
    let msg = err_of(SqliteStore::activate(state.path())).to_string();
    assert!(msg.contains(&db.display().to_string()), "{msg}");
}

#[test]
fn empty_or_missing_legacy_dir_is_nothing_to_do() {
    let state = tempfile::tempdir().unwrap();
    let store = SqliteStore::activate(state.path()).unwrap();
    assert!(store.activation_report().unwrap().legacy.is_none());
    drop(store);
    fs::create_dir_all(state.path().join(LEGACY_DIR).join("runs")).unwrap();
    let store = SqliteStore::activate(state.path()).unwrap();
    assert!(store.activation_report().unwrap().legacy.is_none());
    assert!(!state.path().join(BACKUP_FILE).exists());
}

#[test]
fn import_dir_round_trips_between_stores_and_detects_conflicts() {
    let a_dir = tempfile::tempdir().unwrap();
    let a = SqliteStore::activate(a_dir.path()).unwrap();
    let mut ids = Vec::new();
    for i in 0..5 {
        let r = new_run(&a, &format!("r{i}"));
        let blob = a.put_blob(format!("log {i}").as_bytes()).unwrap();
        a.append(
            &r.id,
            EventDraft::new(
                "checkpoint.completed",
                json!({"log": svc::internal::store::blob_ref(&blob)}),
            ),
        )
        .unwrap();
        ids.push(r.id);
    }
    let out = a_dir.path().join("out");
    export_runs(&a, &out, &ids[..3]).unwrap();
    let b_dir = tempfile::tempdir().unwrap();
    let b = SqliteStore::activate(b_dir.path()).unwrap();
    let s = import_dir(&b, &out).unwrap();
    assert_eq!((s.runs_imported, s.blobs), (3, 3));
    for id in &ids[..3] {
        assert_eq!(stored_file(&b, id), stored_file(&a, id));
        assert_eq!(b.get_run(id).unwrap(), a.get_run(id).unwrap());
    }
    let again = import_dir(&b, &out).unwrap();
    assert_eq!((again.runs_imported, again.runs_present), (0, 3));
    // The same id with different events is a conflict naming the file.
    b.append(&ids[0], EventDraft::new("run.queued", json!({})))
        .unwrap();
    let err = import_dir(&b, &out).unwrap_err().to_string();
    assert!(err.contains("conflicts") && err.contains(&ids[0]), "{err}");
    // Exporting into a directory that already holds the run refuses to overwrite it.
    assert!(export_runs(&a, &out, &ids[..1]).is_err());
}
