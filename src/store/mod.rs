//! The run store: the only authority for run existence, run events, each run's current
//! projected row, and content-addressed blobs (SPEC 1.11, 6.3).
//!
//! Owns: the event envelope ([`Event`]), the projection ([`RunRow`]) and its pure reducer
//! (`fold`), the [`RunStore`] trait with its two implementations ([`MemoryStore`] and
//! [`SqliteStore`], one SQLite file `<state-dir>/svc.db`), post-commit notification
//! ([`Hub`]), startup activation ([`SqliteStore::activate`]: open, migrate, check, import
//! legacy data, keep its backup), the portable export/import format ([`portable`]) and the
//! `workflow_versions` table ([`VersionTable`]), the code-host integration's tables
//! ([`CodehostTable`]; other modules' tables go beside them, see `schema.rs`), and the state
//! directory's lock ([`lock`]: one server per state directory).
//! Must not touch: workflow parsing or execution, HTTP, settings, or files other than the
//! state directory it is handed and the export/import directories named by its callers.
//!
//! Guarantees, for both implementations:
//! - creating a run commits `run.created`, the row and the run's existence atomically;
//! - every append commits the event and the folded row in one transaction; `seq` starts at 1
//!   and has no gaps, and the next one comes from the row (no log scan);
//! - subscribers hear of an event only after its commit, in `seq` order;
//! - a deleted run leaves a tombstone: its id can never be created, imported or appended to
//!   again (`StoreError::Tombstoned`), across restarts;
//! - blobs are written once, addressed by SHA-256 and verified on every read.

mod activation;
pub mod automations;
pub mod backup;
pub mod catalog;
mod codehost;
mod error;
mod fold;
mod hooked;
pub mod housekeeping;
mod hub;
pub mod insights;
pub mod lock;
mod memory;
mod model;
pub mod portable;
mod prep;
mod queue;
mod rowcache;
mod schema;
pub mod sessions;
mod sqlite;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
mod usage;
mod versions;
mod walbuf;

pub use activation::{
    unpack_backup, ActivationOptions, ActivationReport, IntegrityMode, LegacyReport, BACKUP_FILE,
    LEGACY_DIR, QUICK_CHECK_MAX_BYTES,
};
pub use automations::{Advance, AutomationTables, FireRow, ScheduleRow};
pub use catalog::{CatalogRow, CatalogTable, CatalogTables, MemoryCatalogs, WriteConflict};
pub use codehost::{
    CodehostTable, CreationRecord, DeliveryRecord, MemoryCodehost, PullRequestRecord,
};
pub use error::{ActivationError, Location, StoreError};
pub use fold::{fold, replay};
pub use hooked::{HookedStore, Observer};
pub use housekeeping::{RunWeight, StoreSizes, StoreTotals};
pub use hub::{Hub, Published, Subscription};
pub use insights::{InsightAnswer, InsightError, InsightLimits, InsightsDb};
pub use lock::{LockError, StateLock};
pub use memory::MemoryStore;
pub use model::{
    Control, Event, EventDraft, ImportOutcome, NewRun, RawEvent, RunQuery, RunRow, RunStatus,
    SandboxKind, SandboxState, UsageTotals, WorkflowMeta,
};
pub use prep::{blob_refs, is_blob_id, sha256_hex};
pub use schema::SCHEMA_VERSION;
pub use sessions::{MemorySessions, SessionIndex};
pub use sqlite::SqliteStore;
pub use usage::{CompletionUsage, UsageGroup, UsageGrouping, UsageLedger, UsageSums};
pub use versions::{MemoryVersions, VersionHead, VersionRecord, VersionTable, WorkflowEntry};

use std::path::PathBuf;

/// Payloads larger than this belong in a blob, referenced from the event by [`blob_ref`].
pub const BLOB_THRESHOLD: usize = 100 * 1024;

/// The database file name inside the state directory.
pub const DB_FILE: &str = "svc.db";

/// `blob://sha256/<hex>`, the in-event reference to a blob.
pub fn blob_ref(hex: &str) -> String {
    format!("{}{hex}", prep::BLOB_REF_PREFIX)
}

/// The blob id inside a `blob://sha256/<hex>` reference.
pub fn parse_blob_ref(reference: &str) -> Option<&str> {
    reference
        .strip_prefix(prep::BLOB_REF_PREFIX)
        .filter(|hex| is_blob_id(hex))
}

/// `text` itself when it is at most [`BLOB_THRESHOLD`] bytes, else it is stored as a blob and
/// its [`blob_ref`] is returned.
pub fn offload_text(store: &dyn RunStore, text: &str) -> Result<String, StoreError> {
    if text.len() <= BLOB_THRESHOLD {
        Ok(text.to_string())
    } else {
        Ok(blob_ref(&store.put_blob(text.as_bytes())?))
    }
}

/// The user state directory: `$XDG_STATE_HOME/svc` when that is set to an absolute path,
/// else `$HOME/.local/state/svc`, else `./.svc-state` (no home at all).
pub fn default_state_dir() -> PathBuf {
    state_dir_from(
        std::env::var_os("XDG_STATE_HOME").map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
    )
}

fn state_dir_from(xdg: Option<PathBuf>, home: Option<PathBuf>) -> PathBuf {
    match (xdg, home) {
        (Some(x), _) if x.is_absolute() => x.join("svc"),
        (_, Some(h)) if !h.as_os_str().is_empty() => h.join(".local").join("state").join("svc"),
        _ => PathBuf::from(".svc-state"),
    }
}

/// The store as the engine and the server use it. Both implementations give the guarantees
/// listed in the module documentation.
pub trait RunStore: Send + Sync {
    /// Commits `run.created` (seq 1), the row and the run's existence in one transaction.
    /// Fails with `AlreadyExists`, `Tombstoned` or `InvalidRunId` for a bad caller-chosen id.
    fn create_run(&self, new: NewRun) -> Result<RunRow, StoreError>;

    /// Appends one event at `last_seq + 1` and updates the row, in one transaction; notifies
    /// subscribers after the commit. `NotFound` for an unknown run, `Tombstoned` for a deleted
    /// one; a storage failure (disk full, I/O) is `StoreError::Database` with the real cause.
    fn append(&self, run_id: &str, draft: EventDraft) -> Result<Event, StoreError>;

    /// Appends `drafts` in order at `last_seq + 1, + 2, ...` and updates the row, all in one
    /// transaction: a crash keeps all of them or none. Every draft is checked first (a bad
    /// one appends nothing); an empty list appends nothing. Returns the last appended
    /// event's seq (`None` for no drafts); subscribers are notified after the commit. The
    /// engine commits a stage's closing events (and a no-op stage's whole record) this way.
    fn append_all(&self, run_id: &str, drafts: Vec<EventDraft>) -> Result<Option<u64>, StoreError>;

    /// Reads the run's current row and appends the events `decide` returns for it, in
    /// order, with no other append in between: a read-check-append (a lifecycle control)
    /// in one step. `decide` may be called again if another process moved the run on.
    /// Returns the row after the events and the committed events (none when `decide`
    /// returned none). `NotFound`/`Tombstoned` for an unknown run.
    fn append_decided(
        &self,
        run_id: &str,
        decide: &mut dyn FnMut(&RunRow) -> Vec<EventDraft>,
    ) -> Result<(RunRow, Vec<Event>), StoreError>;

    fn get_run(&self, run_id: &str) -> Result<Option<RunRow>, StoreError>;

    /// Every run, newest first (ULID order), archived ones included.
    fn list_runs(&self, offset: usize, limit: usize) -> Result<Vec<RunRow>, StoreError> {
        self.query_runs(&RunQuery {
            offset,
            limit,
            ..RunQuery::default()
        })
    }

    /// Runs matching a filter, newest first unless `oldest_first`.
    fn query_runs(&self, query: &RunQuery) -> Result<Vec<RunRow>, StoreError>;

    /// How many runs match a filter (paging ignored), without reading them.
    fn count_runs(&self, query: &RunQuery) -> Result<usize, StoreError>;

    /// Events with `seq >= since_seq`, at most `limit`, in order. `NotFound` for an unknown run.
    fn events(&self, run_id: &str, since_seq: u64, limit: usize) -> Result<Vec<Event>, StoreError>;

    /// Like [`RunStore::events`], but each event's stored JSON text, byte for byte (imported
    /// events come back exactly as they were imported).
    fn events_raw(
        &self,
        run_id: &str,
        since_seq: u64,
        limit: usize,
    ) -> Result<Vec<RawEvent>, StoreError>;

    /// Removes the run's events and row and records a tombstone, in one transaction. Deleting a
    /// run that is already deleted succeeds; `NotFound` when the id was never known. Blobs are
    /// global and stay. Live per-run subscriptions end.
    fn delete_run(&self, run_id: &str) -> Result<(), StoreError>;

    /// When the run was deleted, if it was.
    fn tombstone(&self, run_id: &str) -> Result<Option<String>, StoreError>;

    /// Stores a whole imported run in one transaction: `lines` are its events' JSON texts in
    /// order (kept byte for byte), seqs 1..=n, first `run.created`; the row is their fold.
    /// Importing the same events again is a no-op (`AlreadyPresent`); different events for an
    /// existing id is `ImportConflict`; a tombstoned id is `Tombstoned`.
    fn import_run(&self, run_id: &str, lines: &[String]) -> Result<ImportOutcome, StoreError>;

    /// Stores `bytes` once under their lowercase SHA-256 hex, which is returned.
    fn put_blob(&self, bytes: &[u8]) -> Result<String, StoreError>;

    /// The blob's bytes, verified against the id; `CorruptBlob` when they do not match.
    fn get_blob(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// True when a blob with this id is stored (not verified).
    fn has_blob(&self, id: &str) -> Result<bool, StoreError>;

    fn hub(&self) -> &Hub;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_dir_rules() {
        let p = |s: &str| Some(PathBuf::from(s));
        assert_eq!(state_dir_from(p("/x"), p("/h")), PathBuf::from("/x/svc"));
        assert_eq!(
            state_dir_from(p("rel"), p("/h")),
            PathBuf::from("/h/.local/state/svc")
        );
        assert_eq!(
            state_dir_from(None, p("/h")),
            PathBuf::from("/h/.local/state/svc")
        );
        assert_eq!(state_dir_from(None, None), PathBuf::from(".svc-state"));
    }

    #[test]
    fn blob_refs_round_trip() {
        let h = sha256_hex(b"x");
        assert_eq!(parse_blob_ref(&blob_ref(&h)), Some(h.as_str()));
        assert_eq!(parse_blob_ref("blob://sha256/abc"), None);
    }
}
