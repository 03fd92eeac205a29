//! A run's artifacts: the workspace files matching the run's patterns (`[run] artifacts`, or
//! the create body's `artifacts`) copied into the object store at the end of each stage,
//! listed from the run's `artifact.captured` events, read back for download, and removed with
//! the run.
//!
//! Keys are `artifacts/<run id>/<artifact id>` (a ULID per kept file); the file's path, size
//! and SHA-256 live in its event, so the run's event log is the artifacts' index and a
//! deleted run's objects are found by their prefix. Files are read without following
//! symbolic links (a link to the state directory or a home directory is never kept), and a
//! file unchanged since it was last kept is not kept again.
//!
//! Owns: the patterns' rules, walking the workspace, keeping files, listing and deleting a
//! run's objects, and where artifacts go when no object store is configured
//! (`<state-dir>/objects`). Must not touch: HTTP (`server::runs::artifacts` serves them), SQL,
//! or how objects are stored (`objects`).

use crate::base::event_kind;
use crate::base::glob::Glob;
use crate::engine::{ArtifactSink, Capture, CapturedArtifact};
use crate::objects::{ObjectError, ObjectStore};
use crate::settings::Settings;
use crate::store::Event;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Where artifacts live in the object store.
pub const PREFIX: &str = "artifacts/";
/// At most this many patterns per run.
pub const MAX_PATTERNS: usize = crate::base::glob::MAX_PATTERNS_PER_LIST;
/// Files kept at most per stage visit; the rest are reported as `artifact.failed`.
pub const MAX_FILES_PER_STAGE: usize = 1000;
/// The largest file kept.
pub const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;
/// Directory entries looked at per walk at most (a guard against huge trees).
const MAX_WALK: usize = 200_000;

/// The run's patterns, checked: each a relative glob (`**/*.xml`, `report.html`) that
/// [`Glob`] accepts, at most [`MAX_PATTERNS`]; `Err` names the bad one.
pub fn check_patterns(patterns: &[String]) -> Result<(), String> {
    crate::base::glob::check_relative_patterns(patterns).map_err(|e| format!("artifacts: {e}"))
}

/// The object store artifacts go to: `[server.object_store]`, else `<state-dir>/objects`.
pub fn store_for(settings: &Settings, state_dir: &Path) -> Result<ObjectStore, ObjectError> {
    match &settings.server.object_store {
        Some(os) => {
            let vault = crate::settings::vault::Vault::in_state_dir(state_dir);
            let secret = |n: &str| vault.get(n).ok().flatten();
            ObjectStore::from_settings(os, &secret)
        }
        None => Ok(ObjectStore::Local {
            root: state_dir.join("objects"),
        }),
    }
}

/// The key prefix of run `run_id`'s artifacts.
fn run_prefix(run_id: &str) -> String {
    format!("{PREFIX}{run_id}/")
}

/// Keeps a run's artifacts: the engine's [`ArtifactSink`] for one run.
pub struct RunArtifacts {
    run_id: String,
    store: ObjectStore,
    globs: Vec<Glob>,
    /// Where a file is copied (and hashed) before it is put: `<state-dir>/tmp`.
    tmp_dir: PathBuf,
    /// Path → SHA-256 of what was last kept, so an unchanged file is kept once.
    kept: Mutex<HashMap<String, String>>,
}

impl RunArtifacts {
    /// The sink of run `run_id` for `patterns` (checked when the run was created; a pattern
    /// that no longer compiles is skipped). `kept` are the run's `artifact.captured` events
    /// so far (a resumed run does not keep unchanged files again).
    pub fn new(
        run_id: &str,
        patterns: &[String],
        store: ObjectStore,
        state_dir: &Path,
        kept: &[Artifact],
    ) -> RunArtifacts {
        RunArtifacts {
            run_id: run_id.to_string(),
            store,
            globs: patterns
                .iter()
                .filter_map(|p| crate::base::glob::relative(p).ok())
                .collect(),
            tmp_dir: state_dir.join("tmp"),
            kept: Mutex::new(
                kept.iter()
                    .map(|a| (a.path.clone(), a.content_sha256.clone()))
                    .collect(),
            ),
        }
    }

    /// Copies `file` to a private temporary file while hashing it, then puts that copy (so
    /// the kept bytes are the hashed bytes even if a process still writes the file).
    fn keep(&self, rel: &str, file: &Path) -> Result<Option<CapturedArtifact>, String> {
        crate::base::perms::private_dir(&self.tmp_dir)
            .map_err(|e| format!("cannot create {}: {e}", self.tmp_dir.display()))?;
        let id = crate::base::clock::new_ulid();
        let tmp = self.tmp_dir.join(format!("artifact-{id}"));
        let copied = copy_hashing(file, &tmp);
        let result = (|| {
            let (bytes, sha256) = copied?;
            if self.kept.lock().get(rel) == Some(&sha256) {
                return Ok(None);
            }
            let key = format!("{}{id}", run_prefix(&self.run_id));
            self.store.put_file(&key, &tmp).map_err(|e| e.0)?;
            self.kept.lock().insert(rel.to_string(), sha256.clone());
            Ok(Some(CapturedArtifact {
                id,
                path: rel.to_string(),
                key,
                bytes,
                sha256,
            }))
        })();
        let _ = std::fs::remove_file(&tmp);
        result
    }
}

impl ArtifactSink for RunArtifacts {
    fn wanted(&self) -> bool {
        !self.globs.is_empty()
    }

    fn capture(&self, _node_id: &str, workdir: &Path) -> Vec<Capture> {
        let mut out = Vec::new();
        let mut kept = 0usize;
        for (rel, file, size) in matching_files(workdir, &self.globs) {
            let failed = |error: String| Capture::Failed {
                path: rel.clone(),
                error,
            };
            if size > MAX_FILE_BYTES {
                out.push(failed(format!(
                    "{size} bytes; artifacts are kept up to {MAX_FILE_BYTES} bytes"
                )));
                continue;
            }
            if kept >= MAX_FILES_PER_STAGE {
                out.push(failed(format!(
                    "more than {MAX_FILES_PER_STAGE} files matched in one stage"
                )));
                continue;
            }
            match self.keep(&rel, &file) {
                Ok(Some(a)) => {
                    kept += 1;
                    out.push(Capture::Kept(a));
                }
                Ok(None) => {}
                Err(e) => out.push(failed(e)),
            }
        }
        out
    }
}

/// Copies `from` to a new private file `to`: (bytes, SHA-256 hex).
fn copy_hashing(from: &Path, to: &Path) -> Result<(u64, String), String> {
    let mut src = std::fs::File::open(from).map_err(|e| format!("cannot read it: {e}"))?;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(to)
        .map_err(|e| format!("cannot write {}: {e}", to.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = src
            .read(&mut buf)
            .map_err(|e| format!("cannot read it: {e}"))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > MAX_FILE_BYTES {
            return Err(format!(
                "grew past {MAX_FILE_BYTES} bytes while it was read"
            ));
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n])
            .map_err(|e| format!("cannot write {}: {e}", to.display()))?;
    }
    out.flush().map_err(|e| e.to_string())?;
    Ok((total, crate::base::hex(&hasher.finalize())))
}

/// Regular files under `root` whose relative path matches a glob, by path: (relative path,
/// full path, size). Skips `.git` and never follows a symbolic link.
pub fn matching_files(root: &Path, globs: &[Glob]) -> Vec<(String, PathBuf, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            seen += 1;
            if seen > MAX_WALK {
                break;
            }
            if e.file_name() == ".git" {
                continue;
            }
            // `DirEntry::file_type` does not follow links.
            let Ok(ft) = e.file_type() else { continue };
            let path = e.path();
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_file() {
                let Ok(rel) = path.strip_prefix(root) else {
                    continue;
                };
                let rel = rel.to_string_lossy().replace('\\', "/");
                if globs.iter().any(|g| g.matches(&rel)) {
                    let size = e.metadata().map(|m| m.len()).unwrap_or(0);
                    out.push((rel, path, size));
                }
            }
        }
    }
    out.sort();
    out
}

/// One kept file as the API lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Artifact {
    pub id: String,
    /// The stage visit that left it.
    pub node_id: Option<String>,
    pub attempt: u64,
    pub path: String,
    pub bytes: u64,
    pub content_sha256: String,
    pub captured_at: String,
    #[serde(skip)]
    pub key: String,
}

/// The artifact an `artifact.captured` event records.
pub fn from_event(e: &Event) -> Option<Artifact> {
    if e.event != event_kind::ARTIFACT_CAPTURED {
        return None;
    }
    let p = &e.properties;
    let s = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
    let key = s("key")?;
    // Only keys of this run: an event is never a way to read another run's objects.
    if !key.starts_with(&run_prefix(&e.run_id)) {
        return None;
    }
    Some(Artifact {
        id: s("artifact_id")?,
        node_id: e.node_id.clone(),
        attempt: p.get("attempt").and_then(Value::as_u64).unwrap_or(1),
        path: s("path")?,
        bytes: p.get("bytes").and_then(Value::as_u64).unwrap_or(0),
        content_sha256: s("content_sha256").unwrap_or_default(),
        captured_at: e.ts.clone(),
        key,
    })
}

/// The object's bytes as a reader, and its length.
pub fn open(store: &ObjectStore, a: &Artifact) -> Result<(Box<dyn Read + Send>, u64), String> {
    store.open(&a.key).map_err(|e| e.0)
}

/// Removes every object of run `run_id` (none: fine).
pub fn delete_run(store: &ObjectStore, run_id: &str) -> Result<usize, String> {
    store.delete_prefix(&run_prefix(run_id)).map_err(|e| e.0)
}

#[cfg(test)]
mod tests;
