//! Running one promoted run: the [`Executor`] the worker threads call, and [`GatedStore`],
//! the store the engine writes through.
//!
//! Owns: the glue between a scheduled run and the engine (workflow, files, work directory,
//! services). Must not touch: scheduling decisions or HTTP.

use super::super::versions::{PackageFiles, Version};
use super::interviewer::RunHandle;
use crate::store::{
    Event, EventDraft, Hub, ImportOutcome, NewRun, RawEvent, RunQuery, RunRow, RunStore, StoreError,
};
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;

/// One promoted run, handed to a worker thread.
pub struct Job {
    pub row: RunRow,
    pub version: Option<Arc<Version>>,
    pub handle: Arc<RunHandle>,
    /// Where commands and agents run (`<state-dir>/scratch/<run-id>`).
    pub workdir: PathBuf,
    pub store: Arc<dyn RunStore>,
}

/// Runs a job to its end. Must append the run's terminal event (`run.completed` or
/// `run.failed`); the worker appends `run.failed` itself if it did not.
pub trait Executor: Send + Sync + 'static {
    fn execute(&self, job: &Job);
}

/// Files of a registered version, owned (the engine keeps them for the whole run).
pub struct VersionFiles {
    pub version: Arc<Version>,
    pub deps: Vec<Arc<Version>>,
}

impl crate::workflow::FileSource for VersionFiles {
    fn read(&self, rel: &str) -> Option<String> {
        PackageFiles {
            from: self.version.package.entrypoint.clone(),
            files: &self.version.package.files,
            deps: &self.deps,
        }
        .read(rel)
    }
}

/// The run store with one gate around every append, so a control request's
/// read-check-append never interleaves with the engine's own appends.
pub struct GatedStore {
    pub inner: Arc<dyn RunStore>,
    pub gate: Arc<Mutex<()>>,
}

impl RunStore for GatedStore {
    fn create_run(&self, new: NewRun) -> Result<RunRow, StoreError> {
        self.inner.create_run(new)
    }
    fn append(&self, run_id: &str, draft: EventDraft) -> Result<Event, StoreError> {
        let _g = self.gate.lock();
        self.inner.append(run_id, draft)
    }
    fn get_run(&self, run_id: &str) -> Result<Option<RunRow>, StoreError> {
        self.inner.get_run(run_id)
    }
    fn query_runs(&self, query: &RunQuery) -> Result<Vec<RunRow>, StoreError> {
        self.inner.query_runs(query)
    }
    fn events(&self, run_id: &str, since_seq: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        self.inner.events(run_id, since_seq, limit)
    }
    fn events_raw(
        &self,
        run_id: &str,
        since_seq: u64,
        limit: usize,
    ) -> Result<Vec<RawEvent>, StoreError> {
        self.inner.events_raw(run_id, since_seq, limit)
    }
    fn delete_run(&self, run_id: &str) -> Result<(), StoreError> {
        self.inner.delete_run(run_id)
    }
    fn tombstone(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        self.inner.tombstone(run_id)
    }
    fn import_run(&self, run_id: &str, lines: &[String]) -> Result<ImportOutcome, StoreError> {
        self.inner.import_run(run_id, lines)
    }
    fn put_blob(&self, bytes: &[u8]) -> Result<String, StoreError> {
        self.inner.put_blob(bytes)
    }
    fn get_blob(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.get_blob(id)
    }
    fn has_blob(&self, id: &str) -> Result<bool, StoreError> {
        self.inner.has_blob(id)
    }
    fn hub(&self) -> &Hub {
        self.inner.hub()
    }
}

/// Used until the engine is linked in: fails every run at launch, saying why.
pub struct NoEngine;

impl Executor for NoEngine {
    fn execute(&self, job: &Job) {
        let _ = job.store.append(
            &job.row.id,
            EventDraft::new(
                "run.failed",
                serde_json::json!({"reason": "launch_failed", "error": "this build has no engine", "causes": [], "duration_ms": 0}),
            ),
        );
    }
}
