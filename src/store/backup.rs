//! Database snapshots: a consistent copy of a live database made with `VACUUM INTO` on a
//! read connection of its own (writers go on meanwhile: WAL), and the checks a snapshot
//! must pass before it is restored (SQLite's header and size, `integrity_check`, svc's
//! application id, a schema version this build reads).
//!
//! Owns: the SQL of taking and checking snapshots. Must not touch: where snapshots are kept
//! (`objects`, `backup`) or the live database's rows.

use super::schema::{current_version, open_reader, APPLICATION_ID, SCHEMA_VERSION};
use rusqlite::{Connection, OpenFlags};
use std::fmt;
use std::io::Read;
use std::path::Path;

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

/// Writes a consistent copy of the database at `db` to `dest` (which must not exist).
pub fn snapshot_into(db: &Path, dest: &Path) -> Result<(), SnapshotError> {
    let conn =
        open_reader(db).map_err(|e| SnapshotError(format!("cannot open {}: {e}", db.display())))?;
    let target = dest
        .to_str()
        .ok_or_else(|| SnapshotError(format!("{} is not a UTF-8 path", dest.display())))?;
    conn.execute("VACUUM INTO ?1", [target])
        .map_err(|e| SnapshotError(format!("cannot snapshot {}: {e}", db.display())))?;
    Ok(())
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
