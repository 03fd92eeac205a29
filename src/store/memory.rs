//! In-memory [`RunStore`]: the same semantics as the SQLite store (atomic create/append,
//! gap-free seqs, tombstones, verified blobs, post-commit notification), nothing on disk.
//! Used by the engine's tests and benches.
//!
//! Owns: its maps, behind one lock. Must not touch: files, the clock beyond `clock::now`.

use super::error::StoreError;
use super::fold::{empty_row, fold};
use super::hub::{Hub, Published};
use super::model::{Event, EventDraft, ImportOutcome, NewRun, RawEvent, RunQuery, RunRow};
use super::prep::{self, sha256_hex};
use super::RunStore;
use crate::base::clock;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A store that lives and dies with the process.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    hub: Hub,
}

#[derive(Debug, Default)]
struct Inner {
    runs: BTreeMap<String, MemRun>,
    tombstones: HashMap<String, String>,
    blobs: HashMap<String, Vec<u8>>,
}

#[derive(Debug)]
struct MemRun {
    row: RunRow,
    events: Vec<Arc<Published>>,
    raw: Vec<String>,
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// Test hook: overwrites a stored blob's bytes without changing its id.
    #[cfg(any(test, feature = "test-support"))]
    pub fn corrupt_blob_for_tests(&self, id: &str, bytes: Vec<u8>) {
        self.inner.lock().blobs.insert(id.to_string(), bytes);
    }
}

impl Inner {
    fn missing(&self, run_id: &str) -> StoreError {
        match self.tombstones.get(run_id) {
            Some(at) => StoreError::Tombstoned {
                run_id: run_id.to_string(),
                deleted_at: at.clone(),
            },
            None => StoreError::NotFound {
                run_id: run_id.to_string(),
            },
        }
    }

    fn run(&self, run_id: &str) -> Result<&MemRun, StoreError> {
        self.runs.get(run_id).ok_or_else(|| self.missing(run_id))
    }
}

fn page<T: Clone>(items: &[T], since_seq: u64, limit: usize) -> Vec<T> {
    let start = usize::try_from(since_seq.saturating_sub(1)).unwrap_or(usize::MAX);
    items.iter().skip(start).take(limit).cloned().collect()
}

impl MemoryStore {
    /// One append with the lock held (see [`RunStore::append`]).
    fn append_locked(
        &self,
        inner: &mut Inner,
        run_id: &str,
        draft: EventDraft,
    ) -> Result<Event, StoreError> {
        let event = self.append_shared(inner, run_id, draft)?;
        Ok(Event::clone(&event))
    }

    /// [`MemoryStore::append_locked`] without the caller's copy of the event (`append_all`
    /// needs only its seq; a copy was a quarter of an append's time).
    fn append_shared(
        &self,
        inner: &mut Inner,
        run_id: &str,
        draft: EventDraft,
    ) -> Result<Arc<Published>, StoreError> {
        let Some(run) = inner.runs.get_mut(run_id) else {
            return Err(inner.missing(run_id));
        };
        let event = prep::mint(run_id, run.row.last_seq + 1, draft);
        let payload = prep::encode(&event)?;
        let row = std::mem::replace(&mut run.row, empty_row());
        run.row = fold(row, &event);
        let event = Arc::new(Published::with_json(event, payload.clone()));
        run.raw.push(payload);
        run.events.push(Arc::clone(&event));
        self.hub.publish(Arc::clone(&event));
        Ok(event)
    }
}

impl RunStore for MemoryStore {
    fn create_run(&self, new: NewRun) -> Result<RunRow, StoreError> {
        let (event, payload, row) = prep::prepare_created(new)?;
        let mut inner = self.inner.lock();
        let run_id = event.run_id.clone();
        if inner.runs.contains_key(&run_id) {
            return Err(StoreError::AlreadyExists { run_id });
        }
        if let Some(at) = inner.tombstones.get(&run_id) {
            return Err(StoreError::Tombstoned {
                run_id,
                deleted_at: at.clone(),
            });
        }
        let event = Arc::new(Published::with_json(event, payload.clone()));
        inner.runs.insert(
            run_id,
            MemRun {
                row: row.clone(),
                events: vec![Arc::clone(&event)],
                raw: vec![payload],
            },
        );
        self.hub.publish(event);
        Ok(row)
    }

    fn append(&self, run_id: &str, draft: EventDraft) -> Result<Event, StoreError> {
        prep::check_draft(run_id, &draft)?;
        let mut guard = self.inner.lock();
        self.append_locked(&mut guard, run_id, draft)
    }

    fn append_all(&self, run_id: &str, drafts: Vec<EventDraft>) -> Result<Option<u64>, StoreError> {
        for d in &drafts {
            prep::check_draft(run_id, d)?;
        }
        // One lock hold: nothing else is appended in between, which is this store's
        // transaction.
        let mut guard = self.inner.lock();
        let mut last = None;
        for d in drafts {
            last = Some(self.append_shared(&mut guard, run_id, d)?.seq);
        }
        Ok(last)
    }

    fn append_decided(
        &self,
        run_id: &str,
        decide: &mut dyn FnMut(&RunRow) -> Vec<EventDraft>,
    ) -> Result<(RunRow, Vec<Event>), StoreError> {
        let mut guard = self.inner.lock();
        let row = match guard.runs.get(run_id) {
            Some(run) => run.row.clone(),
            None => return Err(guard.missing(run_id)),
        };
        let drafts = decide(&row);
        prep::append_all(run_id, row, drafts, |d| {
            self.append_locked(&mut guard, run_id, d)
        })
    }

    fn get_run(&self, run_id: &str) -> Result<Option<RunRow>, StoreError> {
        Ok(self.inner.lock().runs.get(run_id).map(|r| r.row.clone()))
    }

    fn query_runs(&self, query: &RunQuery) -> Result<Vec<RunRow>, StoreError> {
        let inner = self.inner.lock();
        let matching = inner.runs.values().filter(|r| query.matches(&r.row));
        let rows: Vec<RunRow> = if query.oldest_first {
            matching
                .skip(query.offset)
                .take(query.limit)
                .map(|r| r.row.clone())
                .collect()
        } else {
            matching
                .rev()
                .skip(query.offset)
                .take(query.limit)
                .map(|r| r.row.clone())
                .collect()
        };
        Ok(rows)
    }

    fn count_runs(&self, query: &RunQuery) -> Result<usize, StoreError> {
        let inner = self.inner.lock();
        Ok(inner
            .runs
            .values()
            .filter(|r| query.matches(&r.row))
            .count())
    }

    fn events(&self, run_id: &str, since_seq: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let inner = self.inner.lock();
        let run = inner.run(run_id)?;
        Ok(page(&run.events, since_seq, limit)
            .into_iter()
            .map(|e| Event::clone(&e))
            .collect())
    }

    fn events_raw(
        &self,
        run_id: &str,
        since_seq: u64,
        limit: usize,
    ) -> Result<Vec<RawEvent>, StoreError> {
        let inner = self.inner.lock();
        let run = inner.run(run_id)?;
        let first = since_seq.max(1);
        Ok(page(&run.raw, first, limit)
            .into_iter()
            .zip(first..)
            .map(|(json, seq)| RawEvent { seq, json })
            .collect())
    }

    fn delete_run(&self, run_id: &str) -> Result<(), StoreError> {
        let mut inner = self.inner.lock();
        if inner.tombstones.contains_key(run_id) {
            return Ok(());
        }
        if inner.runs.remove(run_id).is_none() {
            return Err(StoreError::NotFound {
                run_id: run_id.to_string(),
            });
        }
        inner.tombstones.insert(run_id.to_string(), clock::now());
        self.hub.close_run(run_id);
        Ok(())
    }

    fn tombstone(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        Ok(self.inner.lock().tombstones.get(run_id).cloned())
    }

    fn import_run(&self, run_id: &str, lines: &[String]) -> Result<ImportOutcome, StoreError> {
        let (events, row) = prep::parse_import(run_id, lines)?;
        let mut inner = self.inner.lock();
        if let Some(at) = inner.tombstones.get(run_id) {
            return Err(StoreError::Tombstoned {
                run_id: run_id.to_string(),
                deleted_at: at.clone(),
            });
        }
        if let Some(existing) = inner.runs.get(run_id) {
            return if existing.raw == lines {
                Ok(ImportOutcome::AlreadyPresent)
            } else {
                Err(StoreError::ImportConflict {
                    run_id: run_id.to_string(),
                    reason: "the store holds different events for this run".into(),
                })
            };
        }
        inner.runs.insert(
            run_id.to_string(),
            MemRun {
                row,
                events: events
                    .into_iter()
                    .map(|e| Arc::new(Published::new(e)))
                    .collect(),
                raw: lines.to_vec(),
            },
        );
        Ok(ImportOutcome::Imported)
    }

    fn put_blob(&self, bytes: &[u8]) -> Result<String, StoreError> {
        let id = sha256_hex(bytes);
        self.inner
            .lock()
            .blobs
            .entry(id.clone())
            .or_insert_with(|| bytes.to_vec());
        Ok(id)
    }

    fn get_blob(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        if !prep::is_blob_id(id) {
            return Err(StoreError::InvalidBlobId { id: id.to_string() });
        }
        let bytes = match self.inner.lock().blobs.get(id) {
            Some(b) => b.clone(),
            None => return Ok(None),
        };
        let actual = sha256_hex(&bytes);
        if actual != id {
            return Err(StoreError::CorruptBlob {
                id: id.to_string(),
                actual,
                size: bytes.len(),
            });
        }
        Ok(Some(bytes))
    }

    fn has_blob(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.inner.lock().blobs.contains_key(id))
    }

    fn hub(&self) -> &Hub {
        &self.hub
    }
}
