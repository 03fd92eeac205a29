//! The portable run export format, and export/import through any [`RunStore`].
//!
//! Owns: reading and writing the format, its validation, and the byte-for-byte verification
//! of an import. Must not touch: anything outside the directory it is given and the store.
//!
//! The format is a directory:
//! ```text
//! runs/<run_id>/events.jsonl   one event JSON object per line, in seq order from 1, each line
//!                              the event's exact bytes, each line ended by "\n"
//! blobs/<sha256 hex>           a blob's bytes; the name is the lowercase SHA-256 of the content
//! ```
//! Nothing else may appear in it: an unexpected entry is an error rather than silently left
//! behind. An export holds every blob its events reference (`blob://sha256/<hex>`); an import
//! requires every referenced blob to be in the directory or already in the store.
//!
//! Import is all-or-nothing per run (one transaction each), keeps every event's bytes and
//! seq, rebuilds the row by folding, and counts a run as done only after re-reading it from
//! the store and comparing it byte for byte with the file (blobs: by content and SHA-256).
//! Importing the same directory twice is harmless: identical runs are left as they are.

use super::error::{Location, StoreError};
use super::model::{Event, ImportOutcome, RunQuery};
use super::prep::{self, blob_refs, is_blob_id, sha256_hex};
use super::{replay, RunStore};
use crate::base::clock::is_canonical_ulid;
use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The events file inside `runs/<run_id>/`.
pub const EVENTS_FILE: &str = "events.jsonl";

/// What went wrong, where (file and line when known), and for which run.
#[derive(Debug, thiserror::Error)]
#[error("{location}: {reason}")]
pub struct PortableError {
    pub location: Location,
    pub run_id: Option<String>,
    pub reason: String,
}

impl PortableError {
    fn at(path: &Path, line: Option<usize>, run_id: Option<&str>, reason: String) -> Self {
        PortableError {
            location: Location {
                path: path.to_path_buf(),
                line,
            },
            run_id: run_id.map(str::to_string),
            reason,
        }
    }

    fn io(path: &Path, what: &str, e: std::io::Error) -> Self {
        PortableError::at(path, None, None, format!("cannot {what}: {e}"))
    }

    fn store(path: &Path, run_id: Option<&str>, e: StoreError) -> Self {
        let line = match &e {
            StoreError::Import { line, .. } => Some(*line),
            _ => None,
        };
        PortableError::at(path, line, run_id, e.to_string())
    }
}

/// Counts of an import.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// Runs written by this import.
    pub runs_imported: u64,
    /// Runs the store already held with exactly the same events.
    pub runs_present: u64,
    pub events: u64,
    pub blobs: u64,
    /// Bytes of all files read.
    pub bytes: u64,
}

/// Counts of an export.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportSummary {
    pub runs: u64,
    pub events: u64,
    pub blobs: u64,
}

/// One checked run of a directory about to be imported.
#[derive(Debug, Clone)]
pub(crate) struct PlannedRun {
    pub run_id: String,
    pub path: PathBuf,
    pub sha256: String,
    pub events: u64,
}

/// One checked blob of a directory about to be imported.
#[derive(Debug, Clone)]
pub(crate) struct PlannedBlob {
    pub id: String,
    pub path: PathBuf,
}

/// A directory that passed validation.
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    pub runs: Vec<PlannedRun>,
    pub blobs: Vec<PlannedBlob>,
    pub bytes: u64,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty() && self.blobs.is_empty()
    }

    pub fn event_count(&self) -> u64 {
        self.runs.iter().map(|r| r.events).sum()
    }
}

/// Receives every file of a directory being scanned: its path relative to the directory
/// (with `/` separators) and its bytes.
pub(crate) type Sink<'a> = dyn FnMut(&str, &[u8]) -> Result<(), PortableError> + 'a;

fn read(path: &Path) -> Result<Vec<u8>, PortableError> {
    fs::read(path).map_err(|e| PortableError::io(path, "read", e))
}

fn sorted_entries(dir: &Path) -> Result<Vec<(String, PathBuf, fs::FileType)>, PortableError> {
    let mut out = Vec::new();
    let entries = fs::read_dir(dir).map_err(|e| PortableError::io(dir, "list", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| PortableError::io(dir, "list", e))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| PortableError::io(&path, "inspect", e))?;
        let name = entry
            .file_name()
            .to_str()
            .map(str::to_string)
            .ok_or_else(|| {
                PortableError::at(&path, None, None, "the name is not valid UTF-8".into())
            })?;
        out.push((name, path, kind));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The lines of an events file: UTF-8, split at `\n` (a missing final newline is tolerated).
fn split_lines(path: &Path, run_id: &str, bytes: &[u8]) -> Result<Vec<String>, PortableError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1;
        PortableError::at(path, Some(line), Some(run_id), "not valid UTF-8".into())
    })?;
    Ok(text.split_terminator('\n').map(str::to_string).collect())
}

/// True when `dir` exists and holds at least one entry.
pub(crate) fn dir_has_entries(dir: &Path) -> Result<bool, PortableError> {
    match fs::read_dir(dir) {
        Ok(mut it) => Ok(it.next().is_some()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(PortableError::io(dir, "list", e)),
    }
}

/// Validates a whole directory before anything is written: its structure, every blob's
/// content against its name, every events file (UTF-8, one event per line, this run's id,
/// seqs 1..n, `run.created` first), and every blob reference. Each file is handed to `sink`.
pub(crate) fn scan(
    store: &dyn RunStore,
    dir: &Path,
    sink: &mut Sink<'_>,
) -> Result<Plan, PortableError> {
    let meta = fs::metadata(dir).map_err(|e| PortableError::io(dir, "open", e))?;
    if !meta.is_dir() {
        return Err(PortableError::at(dir, None, None, "not a directory".into()));
    }
    let mut runs_dir = None;
    let mut blobs_dir = None;
    for (name, path, kind) in sorted_entries(dir)? {
        match (name.as_str(), kind.is_dir()) {
            ("runs", true) => runs_dir = Some(path),
            ("blobs", true) => blobs_dir = Some(path),
            _ => return Err(PortableError::at(
                &path,
                None,
                None,
                "unexpected entry: the export format holds only the directories runs/ and blobs/"
                    .into(),
            )),
        }
    }
    let mut plan = Plan::default();
    let mut blob_ids = BTreeSet::new();
    if let Some(blobs_dir) = blobs_dir {
        for (name, path, kind) in sorted_entries(&blobs_dir)? {
            if !kind.is_file() || !is_blob_id(&name) {
                return Err(PortableError::at(
                    &path,
                    None,
                    None,
                    "unexpected entry: blobs/ holds only files named by the lowercase SHA-256 of \
                     their content"
                        .into(),
                ));
            }
            let bytes = read(&path)?;
            let actual = sha256_hex(&bytes);
            if actual != name {
                return Err(PortableError::at(
                    &path,
                    None,
                    None,
                    format!("corrupt blob: its content hashes to {actual}, not to its name"),
                ));
            }
            sink(&format!("blobs/{name}"), &bytes)?;
            plan.bytes += bytes.len() as u64;
            blob_ids.insert(name.clone());
            plan.blobs.push(PlannedBlob { id: name, path });
        }
    }
    if let Some(runs_dir) = runs_dir {
        for (run_id, run_path, kind) in sorted_entries(&runs_dir)? {
            if !kind.is_dir() || !is_canonical_ulid(&run_id) {
                return Err(PortableError::at(
                    &run_path,
                    None,
                    None,
                    "unexpected entry: runs/ holds only directories named by run ULIDs".into(),
                ));
            }
            let mut events_path = None;
            for (name, path, kind) in sorted_entries(&run_path)? {
                if name == EVENTS_FILE && kind.is_file() {
                    events_path = Some(path);
                } else {
                    return Err(PortableError::at(
                        &path,
                        None,
                        Some(&run_id),
                        format!("unexpected entry: a run directory holds only {EVENTS_FILE}"),
                    ));
                }
            }
            let path = events_path.ok_or_else(|| {
                PortableError::at(
                    &run_path.join(EVENTS_FILE),
                    None,
                    Some(&run_id),
                    "missing events file".into(),
                )
            })?;
            let bytes = read(&path)?;
            let lines = split_lines(&path, &run_id, &bytes)?;
            prep::parse_import(&run_id, &lines)
                .map_err(|e| PortableError::store(&path, Some(&run_id), e))?;
            for (i, line) in lines.iter().enumerate() {
                for blob in blob_refs(line) {
                    let known = blob_ids.contains(&blob)
                        || store
                            .has_blob(&blob)
                            .map_err(|e| PortableError::store(&path, Some(&run_id), e))?;
                    if !known {
                        return Err(PortableError::at(
                            &path,
                            Some(i + 1),
                            Some(&run_id),
                            format!(
                                "references blob {blob}, which is neither in blobs/ nor in the store"
                            ),
                        ));
                    }
                }
            }
            sink(&format!("runs/{run_id}/{EVENTS_FILE}"), &bytes)?;
            plan.bytes += bytes.len() as u64;
            plan.runs.push(PlannedRun {
                run_id,
                path,
                sha256: sha256_hex(&bytes),
                events: lines.len() as u64,
            });
        }
    }
    Ok(plan)
}

/// Writes a validated plan into the store: blobs, then each run in its own transaction.
pub(crate) fn apply(store: &dyn RunStore, plan: &Plan) -> Result<ImportSummary, PortableError> {
    let mut summary = ImportSummary {
        bytes: plan.bytes,
        ..ImportSummary::default()
    };
    for blob in &plan.blobs {
        let bytes = read(&blob.path)?;
        let id = store
            .put_blob(&bytes)
            .map_err(|e| PortableError::store(&blob.path, None, e))?;
        if id != blob.id {
            return Err(PortableError::at(
                &blob.path,
                None,
                None,
                format!("the file changed during the import (its content now hashes to {id})"),
            ));
        }
        summary.blobs += 1;
    }
    for run in &plan.runs {
        let bytes = read(&run.path)?;
        if sha256_hex(&bytes) != run.sha256 {
            return Err(PortableError::at(
                &run.path,
                None,
                Some(&run.run_id),
                "the file changed during the import".into(),
            ));
        }
        let lines = split_lines(&run.path, &run.run_id, &bytes)?;
        match store.import_run(&run.run_id, &lines) {
            Ok(ImportOutcome::Imported) => summary.runs_imported += 1,
            Ok(ImportOutcome::AlreadyPresent) => summary.runs_present += 1,
            Err(e) => return Err(PortableError::store(&run.path, Some(&run.run_id), e)),
        }
        summary.events += lines.len() as u64;
    }
    Ok(summary)
}

/// Re-reads every planned run and blob from the store and compares it with the files: each
/// event's bytes, the seqs, the row against the fold of the events, each blob's bytes.
pub(crate) fn verify(store: &dyn RunStore, plan: &Plan) -> Result<(), PortableError> {
    for blob in &plan.blobs {
        let file = read(&blob.path)?;
        match store.get_blob(&blob.id) {
            Ok(Some(stored)) if stored == file => {}
            Ok(Some(_)) => {
                return Err(PortableError::at(
                    &blob.path,
                    None,
                    None,
                    "verification failed: the stored blob differs from the file".into(),
                ))
            }
            Ok(None) => {
                return Err(PortableError::at(
                    &blob.path,
                    None,
                    None,
                    "verification failed: the blob is not in the store".into(),
                ))
            }
            Err(e) => return Err(PortableError::store(&blob.path, None, e)),
        }
    }
    for run in &plan.runs {
        let id = Some(run.run_id.as_str());
        let bytes = read(&run.path)?;
        if sha256_hex(&bytes) != run.sha256 {
            return Err(PortableError::at(
                &run.path,
                None,
                id,
                "the file changed during the import".into(),
            ));
        }
        let lines = split_lines(&run.path, &run.run_id, &bytes)?;
        let stored = store
            .events_raw(&run.run_id, 1, usize::MAX)
            .map_err(|e| PortableError::store(&run.path, id, e))?;
        if stored.len() != lines.len() {
            return Err(PortableError::at(
                &run.path,
                None,
                id,
                format!(
                    "verification failed: the store holds {} events, the file {}",
                    stored.len(),
                    lines.len()
                ),
            ));
        }
        let mut events: Vec<Event> = Vec::with_capacity(lines.len());
        for (i, (raw, line)) in stored.iter().zip(&lines).enumerate() {
            if raw.seq != i as u64 + 1 || raw.json != *line {
                return Err(PortableError::at(
                    &run.path,
                    Some(i + 1),
                    id,
                    "verification failed: the stored event differs from the file's bytes".into(),
                ));
            }
            events.push(serde_json::from_str(line).map_err(|e| {
                PortableError::at(&run.path, Some(i + 1), id, format!("not a JSON event: {e}"))
            })?);
        }
        let row = store
            .get_run(&run.run_id)
            .map_err(|e| PortableError::store(&run.path, id, e))?;
        if row != replay(&events) {
            return Err(PortableError::at(
                &run.path,
                None,
                id,
                "verification failed: the stored row differs from the fold of the events".into(),
            ));
        }
    }
    Ok(())
}

/// Imports a directory in the portable format into `store`: validate everything, write each
/// run in its own transaction, then verify byte for byte. Idempotent.
pub fn import_dir(store: &dyn RunStore, dir: &Path) -> Result<ImportSummary, PortableError> {
    let plan = scan(store, dir, &mut |_, _| Ok(()))?;
    let summary = apply(store, &plan)?;
    verify(store, &plan)?;
    Ok(summary)
}

/// Writes a file under a temporary name and renames it into place, so a reader never sees
/// half a file. Not fsynced: an export is a copy, the database stays the authority, and one
/// fsync per file would make exporting thousands of runs take minutes on a busy disk.
/// Run data: the file is private (0600), like the database it comes from.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), PortableError> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("partial");
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|f| crate::base::perms::tighten_file(&tmp).map(|()| f))
        .map_err(|e| PortableError::io(&tmp, "create", e))?;
    f.write_all(bytes)
        .map_err(|e| PortableError::io(&tmp, "write", e))?;
    fs::rename(&tmp, path).map_err(|e| PortableError::io(path, "rename into place", e))
}

/// Page size when reading a run's events for export.
const EXPORT_PAGE: usize = 10_000;

/// Writes `run_ids` (every run when empty) and the blobs their events reference to `out_dir`
/// in the portable format. `out_dir` is created if needed; an existing run directory in it is
/// an error (nothing is overwritten). Tombstoned or unknown ids are errors.
pub fn export_runs(
    store: &dyn RunStore,
    out_dir: &Path,
    run_ids: &[String],
) -> Result<ExportSummary, PortableError> {
    let ids: Vec<String> = if run_ids.is_empty() {
        let mut all = Vec::new();
        let mut seen = BTreeSet::new();
        loop {
            let page = store
                .query_runs(&RunQuery {
                    oldest_first: true,
                    offset: all.len(),
                    limit: 500,
                    ..RunQuery::default()
                })
                .map_err(|e| PortableError::store(out_dir, None, e))?;
            if page.is_empty() {
                break;
            }
            for row in page {
                if seen.insert(row.id.clone()) {
                    all.push(row.id);
                }
            }
        }
        all
    } else {
        run_ids.to_vec()
    };
    let runs_dir = out_dir.join("runs");
    let blobs_dir = out_dir.join("blobs");
    for d in [&runs_dir, &blobs_dir] {
        crate::base::perms::private_dir(d).map_err(|e| PortableError::io(d, "create", e))?;
    }
    let mut summary = ExportSummary::default();
    let mut blobs = BTreeSet::new();
    for run_id in &ids {
        let run_dir = runs_dir.join(run_id);
        if run_dir.exists() {
            return Err(PortableError::at(
                &run_dir,
                None,
                Some(run_id),
                "already exists; export into an empty directory".into(),
            ));
        }
        let mut text = String::new();
        let mut since = 1;
        loop {
            let page = store
                .events_raw(run_id, since, EXPORT_PAGE)
                .map_err(|e| PortableError::store(&run_dir, Some(run_id), e))?;
            let Some(last) = page.last() else { break };
            since = last.seq + 1;
            for raw in &page {
                blobs.extend(blob_refs(&raw.json));
                text.push_str(&raw.json);
                text.push('\n');
                summary.events += 1;
            }
            if page.len() < EXPORT_PAGE {
                break;
            }
        }
        crate::base::perms::private_dir(&run_dir)
            .map_err(|e| PortableError::io(&run_dir, "create", e))?;
        write_file(&run_dir.join(EVENTS_FILE), text.as_bytes())?;
        summary.runs += 1;
    }
    for id in &blobs {
        let path = blobs_dir.join(id);
        let bytes = store
            .get_blob(id)
            .map_err(|e| PortableError::store(&path, None, e))?
            .ok_or_else(|| {
                PortableError::at(
                    &path,
                    None,
                    None,
                    "an exported event references this blob, but the store does not hold it".into(),
                )
            })?;
        write_file(&path, &bytes)?;
        summary.blobs += 1;
    }
    Ok(summary)
}
