//! Database snapshots: a consistent copy of a live database made with SQLite's online backup
//! API in small paced steps on a read connection of its own, inside one read transaction
//! (WAL: writers go on meanwhile and never wait for it), and the checks a snapshot must pass
//! before it is restored (SQLite's header and size, `integrity_check`, svc's application id,
//! a schema version this build reads).
//!
//! Owns: the SQL of taking and checking snapshots. Must not touch: where snapshots are kept
//! (`objects`, `backup`) or the live database's rows.

use super::schema::{current_version, open_reader, APPLICATION_ID, SCHEMA_VERSION};
use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};
use std::fmt;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

/// What a checked snapshot holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub schema_version: i64,
    pub runs: u64,
    pub events: u64,
}

/// Why a snapshot cannot be taken or restored, in words for an operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotError(pub String);

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SnapshotError {}

/// Pages a snapshot copies per step (4 MiB at svc's 4 KiB pages).
const STEP_PAGES: i32 = 1024;
/// The pause after each step, so a snapshot never holds a core or the disk for long.
const STEP_PAUSE: Duration = Duration::from_millis(4);
/// The snapshot file is synced every this many bytes: the kernel then never holds a big
/// backlog of its dirty pages, whose writeback would hold up the server's own writes.
const SYNC_EVERY: u64 = 32 << 20;

/// Writes a consistent copy of the database at `db` to `dest` (which must not exist), as
/// of one instant, then syncs it.
///
/// Why not `VACUUM INTO` (one statement that rebuilds every table and index, about twice
/// the CPU, with no pause until it ends) or a plain `backup.step(-1)`: small steps with a
/// pause between them keep the server's writer and request threads on the CPU and the
/// disk (issue 32: a backup must not stall runs by more than 50 ms at a time). The read
/// transaction held across the steps is what makes them one snapshot: without it, every
/// commit made between two steps by the server would restart the copy from the first page.
pub fn snapshot_into(db: &Path, dest: &Path) -> Result<(), SnapshotError> {
    let fail = |e: rusqlite::Error| SnapshotError(format!("cannot snapshot {}: {e}", db.display()));
    let src =
        open_reader(db).map_err(|e| SnapshotError(format!("cannot open {}: {e}", db.display())))?;
    src.execute_batch("BEGIN")
        .and_then(|_| src.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(())))
        .map_err(fail)?;
    let mut out = Connection::open(dest).map_err(fail)?;
    // The copy is ours alone until it is renamed: no journal, no syncs but ours.
    out.execute_batch("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;")
        .map_err(fail)?;
    let file = std::fs::File::open(dest)
        .map_err(|e| SnapshotError(format!("cannot open {}: {e}", dest.display())))?;
    {
        let backup = Backup::new(&src, &mut out).map_err(fail)?;
        let mut synced = 0u64;
        loop {
            match backup.step(STEP_PAGES).map_err(fail)? {
                StepResult::Done => break,
                // Busy or locked: only our own connection could hold these (the source is
                // read in a transaction of its own); waiting a little is SQLite's advice.
                StepResult::More => {}
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
            let written = file.metadata().map(|m| m.len()).unwrap_or(0);
            if written >= synced + SYNC_EVERY {
                file.sync_data()
                    .map_err(|e| SnapshotError(format!("cannot sync {}: {e}", dest.display())))?;
                synced = written;
            }
            std::thread::sleep(STEP_PAUSE);
        }
    }
    src.execute_batch("COMMIT").map_err(fail)?;
    // The copied header says WAL (the source's mode); a snapshot is a single file that opens
    // anywhere, read-only too, so it is switched to a rollback journal.
    let mode: String = out
        .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))
        .map_err(fail)?;
    if !mode.eq_ignore_ascii_case("delete") {
        return Err(SnapshotError(format!(
            "cannot snapshot {}: the copy stayed in journal mode {mode}",
            db.display()
        )));
    }
    out.close().map_err(|(_, e)| fail(e))?;
    file.sync_all()
        .map_err(|e| SnapshotError(format!("cannot sync {}: {e}", dest.display())))
}

/// Checks the snapshot at `path` before it is used: an SQLite file as long as its header
/// says, sound by `integrity_check`, svc's, and of a schema this build reads.
pub fn check_snapshot(path: &Path) -> Result<SnapshotInfo, SnapshotError> {
    let bad = |why: String| {
        SnapshotError(format!(
            "{} is not a usable snapshot: {why}",
            path.display()
        ))
    };
    check_header(path).map_err(bad)?;
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| bad(e.to_string()))?;
    let problems: Vec<String> = conn
        .prepare("PRAGMA integrity_check")
        .and_then(|mut st| {
            st.query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<String>>>()
        })
        .map_err(|e| bad(format!("the integrity check failed: {e}")))?;
    let problems: Vec<&String> = problems.iter().filter(|p| p.as_str() != "ok").collect();
    if !problems.is_empty() {
        let first: Vec<&str> = problems.iter().take(3).map(|p| p.as_str()).collect();
        return Err(bad(format!(
            "the integrity check found {} problem(s): {}",
            problems.len(),
            first.join("; ")
        )));
    }
    let app: i64 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(|e| bad(e.to_string()))?;
    if app != APPLICATION_ID {
        return Err(bad("it is not an svc database".into()));
    }
    let version = current_version(&conn).map_err(|e| bad(e.to_string()))?;
    if version > SCHEMA_VERSION {
        return Err(bad(format!(
            "its schema version {version} is newer than this svc's ({SCHEMA_VERSION}); restore it with a newer svc"
        )));
    }
    if version < 1 {
        return Err(bad("it has no svc schema".into()));
    }
    let count = |sql: &str| -> Result<u64, SnapshotError> {
        conn.query_row(sql, [], |r| r.get::<_, i64>(0))
            .map(|n| n.max(0) as u64)
            .map_err(|e| bad(e.to_string()))
    };
    Ok(SnapshotInfo {
        schema_version: version,
        runs: count("SELECT COUNT(*) FROM runs")?,
        events: count("SELECT COUNT(*) FROM events")?,
    })
}

/// The file starts with SQLite's magic and is at least as long as its header's page count
/// says (a truncated copy is refused before SQLite reads it).
fn check_header(path: &Path) -> Result<(), String> {
    let mut f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let len = f.metadata().map_err(|e| e.to_string())?.len();
    let mut h = [0u8; 100];
    f.read_exact(&mut h)
        .map_err(|_| format!("it is {len} bytes, shorter than an SQLite header"))?;
    if &h[..16] != b"SQLite format 3\0" {
        return Err("it is not an SQLite database".into());
    }
    let page_size = match u16::from_be_bytes([h[16], h[17]]) {
        1 => 65_536,
        n => u64::from(n),
    };
    let pages = u64::from(u32::from_be_bytes([h[28], h[29], h[30], h[31]]));
    if pages > 0 && len < page_size * pages {
        return Err(format!(
            "it is truncated ({len} bytes of {})",
            page_size * pages
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;

    /// Commits made between the steps neither restart the copy nor reach it: the snapshot
    /// is of the instant it began, and it ends while the writer keeps writing.
    #[test]
    fn a_snapshot_is_of_one_instant_while_the_writer_goes_on() {
        use crate::store::RunStore;
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::Arc;
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Arc::new(SqliteStore::activate(&dir.path().join("state")).expect("activate"));
        // 24 MiB: six steps, so commits land between them.
        for i in 0..24u8 {
            store.put_blob(&vec![i; 1 << 20]).expect("blob");
        }
        let stop = Arc::new(AtomicBool::new(false));
        let written = Arc::new(AtomicUsize::new(0));
        let writer = {
            let (store, stop, written) = (store.clone(), stop.clone(), written.clone());
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    store.put_blob(&n.to_le_bytes()).expect("blob");
                    written.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        while written.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        let snap = dir.path().join("snap.db");
        let at_start = written.load(Ordering::SeqCst);
        snapshot_into(store.path(), &snap).expect("snapshot");
        let at_end = written.load(Ordering::SeqCst);
        stop.store(true, Ordering::SeqCst);
        writer.join().expect("writer");
        assert!(
            at_end > at_start + 5,
            "the writer was held up: {at_start} -> {at_end}"
        );
        check_snapshot(&snap).expect("a sound snapshot");
        let blobs: usize = Connection::open(&snap)
            .and_then(|c| c.query_row("SELECT COUNT(*) FROM blobs", [], |r| r.get(0)))
            .expect("count");
        // The 24 big blobs and the small ones committed before it began, not those of
        // the end.
        assert!(
            (24 + at_start..24 + at_end).contains(&blobs),
            "{blobs} blobs; small ones written: {at_start} at its start, {at_end} at its end"
        );
    }

    #[test]
    fn a_snapshot_passes_its_checks_and_damaged_ones_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state");
        let store = SqliteStore::activate(&state).expect("activate");
        let snap = dir.path().join("snap.db");
        snapshot_into(store.path(), &snap).expect("snapshot");
        let info = check_snapshot(&snap).expect("check");
        assert_eq!(info.schema_version, SCHEMA_VERSION);

        let bytes = std::fs::read(&snap).expect("read");
        let truncated = dir.path().join("truncated.db");
        std::fs::write(&truncated, &bytes[..bytes.len() / 2]).expect("write");
        let e = check_snapshot(&truncated).expect_err("truncated");
        assert!(e.0.contains("truncated"), "{e}");

        let not_sqlite = dir.path().join("junk.db");
        std::fs::write(&not_sqlite, vec![b'x'; 8192]).expect("write");
        assert!(check_snapshot(&not_sqlite)
            .expect_err("junk")
            .0
            .contains("not an SQLite database"));

        let newer = dir.path().join("newer.db");
        std::fs::copy(&snap, &newer).expect("copy");
        Connection::open(&newer)
            .and_then(|c| {
                c.execute(
                    "INSERT INTO schema_version (version, applied_at) VALUES (?1, 'x')",
                    [SCHEMA_VERSION + 1],
                )
            })
            .expect("bump");
        assert!(check_snapshot(&newer)
            .expect_err("newer")
            .0
            .contains("is newer than this svc's"));
    }
}
