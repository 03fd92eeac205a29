//! Startup activation (SPEC 1.11): before routes, scheduler or workers start, open the
//! database, migrate it, check it, import legacy data once and keep its private backup.
//!
//! Owns: the state directory layout it creates (`svc.db`, `legacy-backup.svcbak`), the
//! integrity policy at startup, the one-time legacy import and the backup format.
//! Must not touch: `<state-dir>/legacy/` beyond reading it; anything else in the state dir.
//!
//! Integrity policy. `PRAGMA quick_check` reads the whole file, so its cost grows with the
//! database: measured by `benches/store_bench.rs` on the 508 MiB database of 10,000 runs /
//! 1,000,000 events, 1.6 s to 10 s (3 to 20 ms per MiB on a loaded 2-core machine), far over
//! the 100 ms startup budget, while startup without it takes under 1 ms. So in
//! [`IntegrityMode::Auto`] (the default) a normal start runs `quick_check` only while the
//! database and its WAL total at most [`QUICK_CHECK_MAX_BYTES`]; above that it runs cheap
//! checks that read a few pages whatever the size: SQLite's header and schema are read by the
//! migration step (schema version, application id), and the newest run's row is checked
//! against its `run.created` and last events (nothing after `last_seq`). A start that imports
//! legacy data always runs the full `integrity_check` afterwards, and
//! `SqliteStore::integrity_problems` runs a full check on demand (e.g. from a maintenance
//! command).
//!
//! Backup format (`legacy-backup.svcbak`, mode 0600, digest recorded in the database):
//! ```text
//! svc-legacy-backup 1\n
//! file <size> <sha256> <relative path>\n<size bytes>\n      (once per file)
//! end <file count>\n
//! ```

use super::error::{ActivationError, Location, StoreError};
use super::portable::{self, ImportSummary, PortableError};
use super::prep::sha256_hex;
use super::sqlite::LegacyRecord;
use super::{SqliteStore, DB_FILE};
use crate::base::{clock, hex};
use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Largest database (plus WAL) that gets a full `quick_check` at a normal start in
/// [`IntegrityMode::Auto`]: 8 MiB (a 7.7 MiB database activates in 28 ms median, 61 ms worst,
/// on a loaded 2-core machine).
pub const QUICK_CHECK_MAX_BYTES: u64 = 8 * 1024 * 1024;

/// The backup file name inside the state directory.
pub const BACKUP_FILE: &str = "legacy-backup.svcbak";

/// The legacy directory inside the state directory.
pub const LEGACY_DIR: &str = "legacy";

const BACKUP_MAGIC: &str = "svc-legacy-backup 1";

/// Which integrity check a normal start runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IntegrityMode {
    /// `quick_check` up to [`QUICK_CHECK_MAX_BYTES`], cheap checks above.
    #[default]
    Auto,
    /// Cheap checks only.
    Cheap,
    /// Always `PRAGMA quick_check`.
    Quick,
    /// Always `PRAGMA integrity_check`.
    Full,
}

/// Options of [`SqliteStore::activate_with`].
#[derive(Debug, Clone, Default)]
pub struct ActivationOptions {
    /// Where legacy data is looked for; default `<state-dir>/legacy`.
    pub legacy_dir: Option<PathBuf>,
    pub integrity: IntegrityMode,
}

/// What the legacy step found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyReport {
    /// True when this start imported; false when an earlier start had (backup revalidated).
    pub imported_now: bool,
    pub source: String,
    pub backup_path: PathBuf,
    pub backup_sha256: String,
    pub runs: u64,
    pub events: u64,
    pub blobs: u64,
    /// Runs the store already held identically (only when `imported_now`).
    pub runs_already_present: u64,
}

/// What activation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivationReport {
    pub db_path: PathBuf,
    /// The integrity check that ran: "quick_check", "integrity_check" or "cheap".
    pub integrity_check: &'static str,
    pub legacy: Option<LegacyReport>,
    pub elapsed: Duration,
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ActivationError {
    let path = path.to_path_buf();
    move |source| ActivationError::Io { what, path, source }
}

fn legacy_err(e: PortableError) -> ActivationError {
    ActivationError::Legacy {
        location: e.location,
        run_id: e.run_id,
        reason: e.reason,
    }
}

fn store_err(path: &Path) -> impl FnOnce(StoreError) -> ActivationError {
    let path = path.to_path_buf();
    move |source| ActivationError::Store {
        path,
        source: Box::new(source),
    }
}

fn create_private_dir(dir: &Path) -> Result<(), ActivationError> {
    crate::base::perms::private_dir(dir).map_err(io_err("create the state directory", dir))
}

fn sync_dir(dir: &Path) -> Result<(), ActivationError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("sync directory", dir))
}

fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

impl SqliteStore {
    /// Server startup: [`SqliteStore::activate_with`] with default options.
    pub fn activate(state_dir: &Path) -> Result<SqliteStore, ActivationError> {
        SqliteStore::activate_with(state_dir, &ActivationOptions::default())
    }

    /// Opens `<state-dir>/svc.db` (creating the directory, mode 0700, and the file), migrates
    /// it (refusing a newer schema), checks it (see the module doc), then either revalidates
    /// the backup of an earlier legacy import or imports `<state-dir>/legacy/` when it exists
    /// and is non-empty. Any failure is returned with what failed and where; nothing is left
    /// half-done that a later start would mistake for done.
    pub fn activate_with(
        state_dir: &Path,
        options: &ActivationOptions,
    ) -> Result<SqliteStore, ActivationError> {
        let started = Instant::now();
        create_private_dir(state_dir)?;
        let db_path = state_dir.join(DB_FILE);
        let mut store = SqliteStore::open(&db_path)?;
        let integrity_check = run_startup_check(&store, &db_path, options.integrity)?;
        let legacy = match store.legacy_record().map_err(store_err(&db_path))? {
            Some(record) => Some(revalidate_backup(state_dir, &record)?),
            None => {
                let dir = options
                    .legacy_dir
                    .clone()
                    .unwrap_or_else(|| state_dir.join(LEGACY_DIR));
                if portable::dir_has_entries(&dir).map_err(legacy_err)? {
                    import_legacy(&store, state_dir, &dir)?
                } else {
                    None
                }
            }
        };
        let integrity_check = match &legacy {
            Some(l) if l.imported_now => "integrity_check",
            _ => integrity_check,
        };
        store.report = Some(ActivationReport {
            db_path,
            integrity_check,
            legacy,
            elapsed: started.elapsed(),
        });
        Ok(store)
    }
}

fn run_startup_check(
    store: &SqliteStore,
    db_path: &Path,
    mode: IntegrityMode,
) -> Result<&'static str, ActivationError> {
    let size = file_len(db_path) + file_len(&PathBuf::from(format!("{}-wal", db_path.display())));
    let check = match mode {
        IntegrityMode::Auto if size <= QUICK_CHECK_MAX_BYTES => "quick_check",
        IntegrityMode::Auto | IntegrityMode::Cheap => "cheap",
        IntegrityMode::Quick => "quick_check",
        IntegrityMode::Full => "integrity_check",
    };
    let problems = match check {
        "cheap" => match store.cheap_check() {
            Ok(()) => Vec::new(),
            Err(e) => vec![e.to_string()],
        },
        full => store
            .integrity_problems(full == "integrity_check")
            .map_err(store_err(db_path))?,
    };
    if problems.is_empty() {
        Ok(check)
    } else {
        Err(ActivationError::Integrity {
            path: db_path.to_path_buf(),
            check,
            details: problems.join("; "),
        })
    }
}

/// Streams files into the backup archive while hashing it.
struct BackupWriter {
    file: File,
    hasher: Sha256,
    size: u64,
    files: u64,
    path: PathBuf,
}

impl BackupWriter {
    fn create(path: &Path) -> Result<BackupWriter, ActivationError> {
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options
            .open(path)
            .map_err(io_err("create the legacy backup", path))?;
        // The mode above applies only to a new file; make sure an old one is private too.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(path, fs::Permissions::from_mode(0o600))
                .map_err(io_err("restrict the legacy backup", path))?;
        }
        let mut w = BackupWriter {
            file,
            hasher: Sha256::new(),
            size: 0,
            files: 0,
            path: path.to_path_buf(),
        };
        w.put(format!("{BACKUP_MAGIC}\n").as_bytes())
            .map_err(|e| ActivationError::Io {
                what: "write the legacy backup",
                path: path.to_path_buf(),
                source: e,
            })?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all(bytes)?;
        self.hasher.update(bytes);
        self.size += bytes.len() as u64;
        Ok(())
    }

    fn add(&mut self, rel: &str, bytes: &[u8]) -> Result<(), PortableError> {
        let header = format!("file {} {} {rel}\n", bytes.len(), sha256_hex(bytes));
        self.put(header.as_bytes())
            .and_then(|_| self.put(bytes))
            .and_then(|_| self.put(b"\n"))
            .map_err(|e| PortableError {
                location: Location {
                    path: self.path.clone(),
                    line: None,
                },
                run_id: None,
                reason: format!("cannot write the legacy backup: {e}"),
            })?;
        self.files += 1;
        Ok(())
    }

    /// Writes the trailer and syncs; returns (sha256 hex, size).
    fn finish(mut self) -> Result<(String, u64), ActivationError> {
        let trailer = format!("end {}\n", self.files);
        let path = self.path.clone();
        self.put(trailer.as_bytes())
            .and_then(|_| self.file.sync_all())
            .map_err(io_err("write the legacy backup", &path))?;
        Ok((hex(&self.hasher.finalize()), self.size))
    }
}

/// SHA-256 and size of a file, streamed.
fn digest_file(path: &Path) -> std::io::Result<(String, u64)> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((hex(&hasher.finalize()), size))
}

fn check_backup(path: &Path, sha256: &str, size: u64) -> Result<(), ActivationError> {
    let (actual, actual_size) = digest_file(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            ActivationError::BackupMissing {
                path: path.to_path_buf(),
                source,
            }
        } else {
            ActivationError::Io {
                what: "read the legacy backup",
                path: path.to_path_buf(),
                source,
            }
        }
    })?;
    if actual != sha256 || actual_size != size {
        return Err(ActivationError::BackupMismatch {
            path: path.to_path_buf(),
            expected: sha256.to_string(),
            actual,
            size,
        });
    }
    Ok(())
}

fn revalidate_backup(
    state_dir: &Path,
    record: &LegacyRecord,
) -> Result<LegacyReport, ActivationError> {
    let path = state_dir.join(&record.backup_file);
    check_backup(&path, &record.backup_sha256, record.backup_size)?;
    Ok(LegacyReport {
        imported_now: false,
        source: record.source.clone(),
        backup_path: path,
        backup_sha256: record.backup_sha256.clone(),
        runs: record.runs,
        events: record.events,
        blobs: record.blobs,
        runs_already_present: 0,
    })
}

/// The one-time import: validate everything while writing the backup, import, verify byte
/// for byte, run the full integrity check, and only then record the import (so a crash at
/// any point makes the next start redo it; re-importing identical runs is a no-op).
fn import_legacy(
    store: &SqliteStore,
    state_dir: &Path,
    legacy_dir: &Path,
) -> Result<Option<LegacyReport>, ActivationError> {
    let backup_path = state_dir.join(BACKUP_FILE);
    let partial = state_dir.join(format!("{BACKUP_FILE}.partial"));
    let mut writer = BackupWriter::create(&partial)?;
    let plan = match portable::scan(store, legacy_dir, &mut |rel, bytes| writer.add(rel, bytes)) {
        Ok(plan) => plan,
        Err(e) => {
            drop(writer);
            let _ = fs::remove_file(&partial);
            return Err(legacy_err(e));
        }
    };
    if plan.is_empty() {
        drop(writer);
        let _ = fs::remove_file(&partial);
        return Ok(None);
    }
    let (sha256, size) = writer.finish()?;
    fs::rename(&partial, &backup_path)
        .map_err(io_err("move the legacy backup into place", &backup_path))?;
    sync_dir(state_dir)?;
    check_backup(&backup_path, &sha256, size)?;

    let db_path = store.path().to_path_buf();
    let summary: ImportSummary = portable::apply(store, &plan).map_err(legacy_err)?;
    portable::verify(store, &plan).map_err(legacy_err)?;
    let problems = store
        .integrity_problems(true)
        .map_err(store_err(&db_path))?;
    if !problems.is_empty() {
        return Err(ActivationError::Integrity {
            path: db_path,
            check: "integrity_check",
            details: problems.join("; "),
        });
    }
    let record = LegacyRecord {
        source: legacy_dir.display().to_string(),
        backup_file: BACKUP_FILE.to_string(),
        backup_sha256: sha256.clone(),
        backup_size: size,
        runs: plan.runs.len() as u64,
        events: plan.event_count(),
        blobs: plan.blobs.len() as u64,
        completed_at: clock::now(),
    };
    store.record_legacy(&record).map_err(store_err(&db_path))?;
    Ok(Some(LegacyReport {
        imported_now: true,
        source: record.source,
        backup_path,
        backup_sha256: sha256,
        runs: record.runs,
        events: record.events,
        blobs: record.blobs,
        runs_already_present: summary.runs_present,
    }))
}

/// Unpacks a legacy backup into `out_dir` (which must not exist yet), verifying each file's
/// digest: the way back from the backup to a legacy directory. Returns the number of files.
pub fn unpack_backup(backup: &Path, out_dir: &Path) -> Result<u64, PortableError> {
    let bad = |line: usize, reason: String| PortableError {
        location: Location {
            path: backup.to_path_buf(),
            line: Some(line),
        },
        run_id: None,
        reason,
    };
    let io = |e: std::io::Error| PortableError {
        location: Location {
            path: backup.to_path_buf(),
            line: None,
        },
        run_id: None,
        reason: format!("cannot read: {e}"),
    };
    if out_dir.exists() {
        return Err(PortableError {
            location: Location {
                path: out_dir.to_path_buf(),
                line: None,
            },
            run_id: None,
            reason: "already exists".into(),
        });
    }
    let mut reader = BufReader::new(File::open(backup).map_err(io)?);
    let mut header = String::new();
    let mut line_no = 1;
    reader.read_line(&mut header).map_err(io)?;
    if header.trim_end_matches('\n') != BACKUP_MAGIC {
        return Err(bad(line_no, "not an svc legacy backup".into()));
    }
    let mut files = 0u64;
    loop {
        line_no += 1;
        let mut header = String::new();
        if reader.read_line(&mut header).map_err(io)? == 0 {
            return Err(bad(line_no, "truncated: no end marker".into()));
        }
        let header = header.trim_end_matches('\n');
        if let Some(count) = header.strip_prefix("end ") {
            if count.parse::<u64>().ok() != Some(files) {
                return Err(bad(
                    line_no,
                    format!("end marker says {count} files, found {files}"),
                ));
            }
            return Ok(files);
        }
        let mut parts = header.splitn(4, ' ');
        let (Some("file"), Some(size), Some(sha), Some(rel)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad(line_no, "malformed entry header".into()));
        };
        let size: usize = size
            .parse()
            .map_err(|_| bad(line_no, "malformed size".into()))?;
        if rel
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
        {
            return Err(bad(line_no, format!("unsafe path {rel:?}")));
        }
        let mut bytes = vec![0u8; size];
        reader.read_exact(&mut bytes).map_err(io)?;
        let mut nl = [0u8; 1];
        reader.read_exact(&mut nl).map_err(io)?;
        if sha256_hex(&bytes) != sha || nl != *b"\n" {
            return Err(bad(
                line_no,
                format!("entry {rel} does not match its digest"),
            ));
        }
        line_no += bytes.iter().filter(|b| **b == b'\n').count() + 1;
        let path = out_dir.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io)?;
        }
        fs::write(&path, &bytes).map_err(io)?;
        files += 1;
    }
}
