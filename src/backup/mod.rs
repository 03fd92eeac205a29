//! Backups of the state directory's database to the object store: a snapshot taken now
//! (`svc backup`, the server's schedule of `[server.backup]`), the list of snapshots, the
//! retention that keeps the newest `keep`, and the restore of one into a state directory
//! without a database (`svc restore`).
//!
//! A snapshot is made with SQLite's online backup API, in paced steps, into
//! `<state-dir>/tmp`, checked like a restore checks it, then put under
//! `backups/svc-<UTC time>-<ULID>.db` (sorted by time); the object store's put is
//! all-or-nothing, so a `kill -9` at any point leaves every earlier snapshot as it was and no
//! partial object under a final name. Backups run at a lower CPU priority (nice 10).
//!
//! Owns: naming, taking, listing, pruning and restoring snapshots. Must not touch: SQL (see
//! `store::backup`), how objects are stored (`objects`).

pub mod schedule;

use crate::objects::{older_than, ObjectError, ObjectInfo, ObjectStore};
use crate::settings::{BackupSettings, Settings};
use crate::store::backup::{check_snapshot, snapshot_into, SnapshotInfo};
use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where snapshots live in the object store.
pub const PREFIX: &str = "backups/";

/// Temporary files older than this are what a killed backup or restore left.
const STALE: Duration = Duration::from_secs(3600);

/// Why a backup or a restore failed, in words for an operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupError(pub String);

impl fmt::Display for BackupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BackupError {}

impl From<ObjectError> for BackupError {
    fn from(e: ObjectError) -> Self {
        BackupError(e.0)
    }
}

impl From<crate::store::backup::SnapshotError> for BackupError {
    fn from(e: crate::store::backup::SnapshotError) -> Self {
        BackupError(e.0)
    }
}

/// One snapshot in the object store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    pub key: String,
    pub size: u64,
    /// RFC 3339 UTC, from the key.
    pub taken_at: String,
}

/// What [`take`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Taken {
    pub key: String,
    pub size: u64,
    pub runs: u64,
    pub events: u64,
    /// Older snapshots removed by the retention.
    pub pruned: Vec<String>,
}

/// The object store `settings` name, with its keys from the state directory's vault.
pub fn store_of(settings: &Settings, state_dir: &Path) -> Result<ObjectStore, BackupError> {
    let Some(os) = &settings.server.object_store else {
        return Err(BackupError(
            "no object store is configured ([server.object_store] in settings.toml)".into(),
        ));
    };
    let vault = crate::settings::vault::Vault::in_state_dir(state_dir);
    let secret = |n: &str| vault.get(n).ok().flatten();
    Ok(ObjectStore::from_settings(os, &secret)?)
}

/// Takes a snapshot of `<state_dir>/svc.db` now, puts it in `store`, then keeps the newest
/// `keep` snapshots.
pub fn take(state_dir: &Path, store: &ObjectStore, keep: usize) -> Result<Taken, BackupError> {
    let db = state_dir.join(crate::store::DB_FILE);
    if !db.is_file() {
        return Err(BackupError(format!(
            "{} has no database",
            state_dir.display()
        )));
    }
    let tmp_dir = state_dir.join("tmp");
    crate::base::perms::private_dir(&tmp_dir)
        .map_err(|e| BackupError(format!("cannot create {}: {e}", tmp_dir.display())))?;
    sweep_tmp(&tmp_dir);
    let suffix = random_suffix()?;
    let tmp = tmp_dir.join(format!("backup-{suffix}.db"));
    let result = (|| {
        snapshot_into(&db, &tmp)?;
        let info = check_snapshot(&tmp)?;
        // The ULID orders snapshots taken within the same second (by millisecond).
        let key = format!(
            "{PREFIX}svc-{}-{}.db",
            crate::objects::sigv4::amz_date(crate::auth::unix_now()),
            crate::base::clock::new_ulid()
        );
        store.sweep_partials(PREFIX, STALE);
        store.put_file(&key, &tmp)?;
        let size = std::fs::metadata(&tmp).map(|m| m.len()).unwrap_or(0);
        Ok::<_, BackupError>((key, size, info))
    })();
    remove_db_files(&tmp);
    let (key, size, info) = result?;
    let pruned = prune(store, keep.max(1))?;
    Ok(Taken {
        key,
        size,
        runs: info.runs,
        events: info.events,
        pruned,
    })
}

/// Lowers the calling thread's CPU priority (nice 10) for the rest of its life, so a backup
/// (the `backups` thread, `svc backup`) yields the CPU to the server's threads (Linux sets
/// the nice value per thread). Best effort: a refusal changes nothing else.
pub fn lower_priority() {
    // SAFETY: gettid and setpriority only read their arguments; the id is this thread's.
    let r = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 10)
    };
    if r != 0 {
        log::debug!(
            "cannot lower the backup's priority: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// The snapshots in `store`, oldest first.
pub fn list(store: &ObjectStore) -> Result<Vec<Snapshot>, BackupError> {
    Ok(store
        .list(PREFIX)?
        .into_iter()
        .filter_map(snapshot_of)
        .collect())
}

/// Removes all but the newest `keep` snapshots; the keys removed.
pub fn prune(store: &ObjectStore, keep: usize) -> Result<Vec<String>, BackupError> {
    let all = list(store)?;
    let extra = all.len().saturating_sub(keep);
    let mut removed = Vec::with_capacity(extra);
    for s in all.into_iter().take(extra) {
        store.delete(&s.key)?;
        removed.push(s.key);
    }
    Ok(removed)
}

/// `backups/svc-YYYYMMDDTHHMMSSZ-<ULID>.db` → its snapshot; anything else: not ours.
fn snapshot_of(o: ObjectInfo) -> Option<Snapshot> {
    let name = o.key.strip_prefix(PREFIX)?;
    let stamp = name.strip_prefix("svc-")?.strip_suffix(".db")?;
    let (t, _) = stamp.split_once('-')?;
    let b = t.as_bytes();
    let ok = b.len() == 16
        && b[8] == b'T'
        && b[15] == b'Z'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 8 || i == 15 || c.is_ascii_digit());
    if !ok {
        return None;
    }
    let taken_at = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &t[0..4],
        &t[4..6],
        &t[6..8],
        &t[9..11],
        &t[11..13],
        &t[13..15]
    );
    Some(Snapshot {
        key: o.key,
        size: o.size,
        taken_at,
    })
}

/// Where [`restore`] reads a snapshot from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    Url(String),
    /// An object of the target state directory's own `[server.object_store]`; `latest`:
    /// the newest snapshot.
    Object(String),
}

impl Source {
    /// An existing file, else an `http(s)://` URL, else an object key (or `latest`).
    pub fn parse(text: &str) -> Source {
        if text.starts_with("http://") || text.starts_with("https://") {
            Source::Url(text.to_string())
        } else if Path::new(text).exists() || text.starts_with('/') || text.starts_with('.') {
            Source::File(PathBuf::from(text))
        } else {
            Source::Object(text.to_string())
        }
    }
}

/// What [`restore`] restored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    pub db_path: PathBuf,
    pub info: SnapshotInfo,
}

/// Restores `source` as `<state_dir>/svc.db`: only into a state directory without a
/// database; the snapshot is checked (size, `integrity_check`, svc's schema, not newer than
/// this build) before it takes the database's name, then opened as the server would.
pub fn restore(source: &Source, state_dir: &Path) -> Result<Restored, BackupError> {
    let db = state_dir.join(crate::store::DB_FILE);
    if db.exists() {
        return Err(BackupError(format!(
            "{} already has a database ({}); restore into a state directory without one",
            state_dir.display(),
            db.display()
        )));
    }
    crate::base::perms::private_dir(state_dir)
        .map_err(|e| BackupError(format!("cannot create {}: {e}", state_dir.display())))?;
    let part = state_dir.join(format!(
        "{}.restore-{}",
        crate::store::DB_FILE,
        random_suffix()?
    ));
    let result = (|| {
        fetch(source, state_dir, &part)?;
        let info = check_snapshot(&part)?;
        remove_sidecars(&part);
        std::fs::rename(&part, &db)
            .map_err(|e| BackupError(format!("cannot move the snapshot into place: {e}")))?;
        Ok::<_, BackupError>(info)
    })();
    remove_db_files(&part);
    let info = result?;
    crate::store::SqliteStore::activate(state_dir)
        .map_err(|e| BackupError(format!("the restored database does not open: {e}")))?;
    Ok(Restored { db_path: db, info })
}

fn fetch(source: &Source, state_dir: &Path, to: &Path) -> Result<(), BackupError> {
    match source {
        Source::File(p) => std::fs::copy(p, to)
            .map(drop)
            .map_err(|e| BackupError(format!("cannot read {}: {e}", p.display()))),
        Source::Url(u) => download(u, to),
        Source::Object(key) => {
            let settings =
                crate::settings::Settings::load(&state_dir.join(crate::settings::SETTINGS_FILE))
                    .map_err(|e| BackupError(format!("cannot read the settings: {e}")))?;
            let store = store_of(&settings, state_dir)?;
            let key = if key == "latest" {
                list(&store)?
                    .pop()
                    .map(|s| s.key)
                    .ok_or_else(|| BackupError(format!("{} holds no snapshot", store.describe())))?
            } else {
                key.clone()
            };
            store.get_to_file(&key, to).map_err(BackupError::from)
        }
    }
}

fn download(url: &str, to: &Path) -> Result<(), BackupError> {
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(20)))
            .build(),
    );
    let resp = agent
        .get(url)
        .call()
        .map_err(|e| BackupError(format!("GET {url}: {e}")))?;
    let status = resp.status().as_u16();
    if status != 200 {
        return Err(BackupError(format!("GET {url} answered {status}")));
    }
    let mut reader = resp.into_body().into_reader();
    let mut out = std::fs::File::create(to)
        .map_err(|e| BackupError(format!("cannot write {}: {e}", to.display())))?;
    std::io::copy(&mut reader, &mut out).map_err(|e| BackupError(format!("GET {url}: {e}")))?;
    Ok(())
}

fn random_suffix() -> Result<String, BackupError> {
    let mut rnd = [0u8; 4];
    crate::auth::random_bytes(&mut rnd).map_err(|e| BackupError(e.to_string()))?;
    Ok(crate::base::hex(&rnd))
}

/// Removes a database file and the journal files SQLite may have made beside it. A big file
/// is first cut down 64 MiB at a time: freeing a whole 1 GB snapshot in one unlink is one
/// long file-system transaction that the server's own writes would wait behind.
fn remove_db_files(path: &Path) {
    if let Ok(f) = std::fs::OpenOptions::new().write(true).open(path) {
        let mut len = f.metadata().map(|m| m.len()).unwrap_or(0);
        while len > 64 << 20 {
            len -= 64 << 20;
            if f.set_len(len).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let _ = std::fs::remove_file(path);
    remove_sidecars(path);
}

fn remove_sidecars(path: &Path) {
    for ext in ["-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(ext);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}

/// What killed backups left in `<state-dir>/tmp`.
fn sweep_tmp(dir: &Path) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("backup-") && older_than(&e.path(), STALE) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// When the next scheduled snapshot is due given the newest one's age: `None` when
/// `[server.backup] every` is not set.
pub fn due_in(settings: &BackupSettings, newest_age: Option<Duration>) -> Option<Duration> {
    let every = settings.every_duration()?;
    Some(match newest_age {
        Some(age) => every.saturating_sub(age),
        None => Duration::ZERO,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_keys_give_their_time_and_others_are_not_snapshots() {
        let s = snapshot_of(ObjectInfo {
            key: "backups/svc-20261127T143000Z-01KB3Z6P9W8XK2M4T5V6N7Q8R9.db".into(),
            size: 4,
        })
        .expect("a snapshot");
        assert_eq!(s.taken_at, "2026-11-27T14:30:00Z");
        for other in [
            "backups/notes.txt",
            "backups/svc-2026-x.db",
            "other/svc-20261127T143000Z-0a.db",
        ] {
            let o = ObjectInfo {
                key: other.into(),
                size: 1,
            };
            assert!(snapshot_of(o).is_none(), "{other}");
        }
    }

    #[test]
    fn sources_are_files_urls_or_objects() {
        assert_eq!(
            Source::parse("https://x/s.db"),
            Source::Url("https://x/s.db".into())
        );
        assert_eq!(Source::parse("/tmp/s.db"), Source::File("/tmp/s.db".into()));
        assert_eq!(Source::parse("latest"), Source::Object("latest".into()));
    }
}
