//! Typed errors of the store and of startup activation.
//!
//! Owns: [`StoreError`] (every fallible store operation) and [`ActivationError`] (everything
//! that stops startup). Each variant carries what failed and where (run id, file path, line),
//! and database failures keep the real SQLite cause (disk full, I/O error, ...).
//! Must not touch: anything else; these are plain data.

use std::fmt;
use std::path::PathBuf;

/// Where in a file something went wrong: `path` or `path:line`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub path: PathBuf,
    pub line: Option<usize>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}", self.path.display()),
            None => write!(f, "{}", self.path.display()),
        }
    }
}

fn for_run(run_id: &Option<String>) -> String {
    match run_id {
        Some(id) => format!(" (run {id})"),
        None => String::new(),
    }
}

/// An error from a store operation.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("run {run_id} not found")]
    NotFound { run_id: String },
    #[error("run {run_id} already exists")]
    AlreadyExists { run_id: String },
    #[error("run {run_id} was deleted at {deleted_at}; a deleted run id can never be used again")]
    Tombstoned { run_id: String, deleted_at: String },
    #[error(
        "invalid run id {run_id:?}: expected a ULID (26 uppercase Crockford base32 characters)"
    )]
    InvalidRunId { run_id: String },
    #[error("invalid {kind:?} event for run {run_id}: {reason}")]
    InvalidEvent {
        run_id: String,
        kind: String,
        reason: String,
    },
    #[error("invalid new run: {reason}")]
    InvalidRun { reason: String },
    #[error("invalid blob id {id:?}: expected 64 lowercase hex digits (a SHA-256)")]
    InvalidBlobId { id: String },
    #[error("blob {id} is corrupt: its {size} stored bytes hash to {actual}")]
    CorruptBlob {
        id: String,
        actual: String,
        size: usize,
    },
    #[error("stored data of run {run_id} is corrupt: {reason}")]
    Corrupt { run_id: String, reason: String },
    #[error("import of run {run_id} rejected at event line {line}: {reason}")]
    Import {
        run_id: String,
        line: usize,
        reason: String,
    },
    #[error("import of run {run_id} conflicts with the stored run: {reason}")]
    ImportConflict { run_id: String, reason: String },
    #[error("database error while {op}{}: {source}", for_run(.run_id))]
    Database {
        op: &'static str,
        run_id: Option<String>,
        #[source]
        source: rusqlite::Error,
    },
    #[error("cannot encode {what} of run {run_id}: {source}")]
    Encode {
        what: &'static str,
        run_id: String,
        #[source]
        source: serde_json::Error,
    },
}

impl StoreError {
    /// The run the error is about, when there is one.
    pub fn run_id(&self) -> Option<&str> {
        match self {
            StoreError::NotFound { run_id }
            | StoreError::AlreadyExists { run_id }
            | StoreError::Tombstoned { run_id, .. }
            | StoreError::InvalidRunId { run_id }
            | StoreError::InvalidEvent { run_id, .. }
            | StoreError::Corrupt { run_id, .. }
            | StoreError::Import { run_id, .. }
            | StoreError::ImportConflict { run_id, .. }
            | StoreError::Encode { run_id, .. } => Some(run_id),
            StoreError::Database { run_id, .. } => run_id.as_deref(),
            _ => None,
        }
    }

    /// The SQLite result code behind a database error.
    pub fn sqlite_code(&self) -> Option<rusqlite::ErrorCode> {
        match self {
            StoreError::Database { source, .. } => source.sqlite_error_code(),
            _ => None,
        }
    }

    /// The disk (or the database's size limit) is full.
    pub fn is_disk_full(&self) -> bool {
        self.sqlite_code() == Some(rusqlite::ErrorCode::DiskFull)
    }

    pub(crate) fn db<'a>(
        op: &'static str,
        run_id: &'a str,
    ) -> impl Fn(rusqlite::Error) -> StoreError + 'a {
        move |source| StoreError::Database {
            op,
            run_id: Some(run_id.to_string()),
            source,
        }
    }

    pub(crate) fn db_global(op: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
        move |source| StoreError::Database {
            op,
            run_id: None,
            source,
        }
    }
}

/// Why startup activation stopped. Displays what failed and where.
#[derive(Debug, thiserror::Error)]
pub enum ActivationError {
    #[error("cannot {what} {}: {source}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("database {}: {what} failed: {source}", .path.display())]
    Database {
        what: String,
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("database {} is not an svc database (application_id {found:#x})", .path.display())]
    NotOurs { path: PathBuf, found: i64 },
    #[error(
        "database {} has schema version {found}, newer than version {supported} that this svc \
         supports; refusing to open it (use the svc release that wrote it, or a newer one)",
        .path.display()
    )]
    NewerSchema {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("database {} failed {check}: {details}", .path.display())]
    Integrity {
        path: PathBuf,
        check: &'static str,
        details: String,
    },
    #[error("legacy import stopped at {location}: {reason}")]
    Legacy {
        location: Location,
        run_id: Option<String>,
        reason: String,
    },
    #[error(
        "legacy backup {} does not match the digest recorded at import (expected sha256 {expected}, \
         {size} bytes; found sha256 {actual}); restore the backup file or investigate before starting",
        .path.display()
    )]
    BackupMismatch {
        path: PathBuf,
        expected: String,
        actual: String,
        size: u64,
    },
    #[error(
        "legacy backup {} recorded at import is missing: {source}; restore it before starting",
        .path.display()
    )]
    BackupMissing {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("store check of {} failed: {source}", .path.display())]
    Store {
        path: PathBuf,
        #[source]
        source: Box<StoreError>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_and_where() {
        let e = ActivationError::Legacy {
            location: Location {
                path: PathBuf::from("/l/runs/X/events.jsonl"),
                line: Some(3),
            },
            run_id: Some("X".into()),
            reason: "not JSON".into(),
        };
        assert_eq!(
            e.to_string(),
            "legacy import stopped at /l/runs/X/events.jsonl:3: not JSON"
        );
        let e = StoreError::Database {
            op: "appending an event",
            run_id: Some("R".into()),
            source: rusqlite::Error::InvalidQuery,
        };
        assert!(e
            .to_string()
            .starts_with("database error while appending an event (run R): "));
    }
}
