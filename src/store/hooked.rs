//! A run store wrapped with hooks around its writes: an optional gate held for each write (the
//! server's control requests and the engine's appends never interleave) and an optional
//! observer told of every committed event (the embedding API's event callback), and an
//! optional hook told of each event a single `append` committed (no read-back: the server's
//! FIFO turns watch a run's `run.running` with it). One decorator for all, so none repeats
//! the whole [`RunStore`] forwarding.
//! Must not touch: what is written (every call goes to the inner store unchanged).

use super::{
    Event, EventDraft, Hub, ImportOutcome, NewRun, RawEvent, RunQuery, RunRow, RunStore, StoreError,
};
use parking_lot::Mutex;
use std::sync::Arc;

/// Told of events right after they are committed, on the committing thread.
pub type Observer = Arc<dyn Fn(&Event) + Send + Sync>;

/// `inner` with `gate` held around every write and `observer` told of every committed event.
pub struct HookedStore {
    pub inner: Arc<dyn RunStore>,
    pub gate: Option<Arc<Mutex<()>>>,
    pub observer: Option<Observer>,
    /// Told of each event committed by [`RunStore::append`] alone, on the committing
    /// thread (cheap: the event is at hand; `append_all` reads nothing back for it).
    pub appended: Option<Observer>,
}

impl HookedStore {
    fn enter(&self) -> Option<parking_lot::MutexGuard<'_, ()>> {
        self.gate.as_deref().map(Mutex::lock)
    }

    fn tell(&self, events: &[Event]) {
        if let Some(observer) = &self.observer {
            for event in events {
                observer(event);
            }
        }
    }

    /// Reads back committed events `first..=last` for the observer (append_all and
    /// create_run return no events). A failed read tells nothing: the write stands.
    fn tell_range(&self, run_id: &str, first: u64, last: u64) {
        if self.observer.is_none() || last < first {
            return;
        }
        let count = usize::try_from(last - first + 1).unwrap_or(usize::MAX);
        if let Ok(events) = self.inner.events(run_id, first, count) {
            self.tell(&events);
        }
    }
}

impl RunStore for HookedStore {
    fn create_run(&self, new: NewRun) -> Result<RunRow, StoreError> {
        let row = self.inner.create_run(new)?;
        self.tell_range(&row.id, 1, 1);
        Ok(row)
    }

    fn append(&self, run_id: &str, draft: EventDraft) -> Result<Event, StoreError> {
        let event = {
            let _gate = self.enter();
            self.inner.append(run_id, draft)?
        };
        self.tell(std::slice::from_ref(&event));
        if let Some(hook) = &self.appended {
            hook(&event);
        }
        Ok(event)
    }

    fn append_all(&self, run_id: &str, drafts: Vec<EventDraft>) -> Result<Option<u64>, StoreError> {
        let count = drafts.len() as u64;
        let last = {
            let _gate = self.enter();
            self.inner.append_all(run_id, drafts)?
        };
        if let Some(last) = last {
            self.tell_range(run_id, (last + 1).saturating_sub(count), last);
        }
        Ok(last)
    }

    fn append_decided(
        &self,
        run_id: &str,
        decide: &mut dyn FnMut(&RunRow) -> Vec<EventDraft>,
    ) -> Result<(RunRow, Vec<Event>), StoreError> {
        let (row, events) = {
            let _gate = self.enter();
            self.inner.append_decided(run_id, decide)?
        };
        self.tell(&events);
        Ok((row, events))
    }

    fn get_run(&self, run_id: &str) -> Result<Option<RunRow>, StoreError> {
        self.inner.get_run(run_id)
    }

    fn query_runs(&self, query: &RunQuery) -> Result<Vec<RunRow>, StoreError> {
        self.inner.query_runs(query)
    }

    fn count_runs(&self, query: &RunQuery) -> Result<usize, StoreError> {
        self.inner.count_runs(query)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::new_run;
    use crate::store::MemoryStore;
    use serde_json::json;

    #[test]
    fn the_observer_sees_every_committed_event_once_in_order() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let store = HookedStore {
            inner: Arc::new(MemoryStore::new()),
            gate: Some(Arc::new(Mutex::new(()))),
            observer: Some(Arc::new(move |e: &Event| log.lock().push(e.seq))),
            appended: None,
        };
        let row = new_run(&store, "");
        store
            .append(&row.id, EventDraft::new("run.started", json!({})))
            .unwrap();
        let drafts = vec![
            EventDraft::new("stage.started", json!({})).node("a"),
            EventDraft::new("stage.completed", json!({})).node("a"),
        ];
        assert_eq!(store.append_all(&row.id, drafts).unwrap(), Some(4));
        assert_eq!(store.append_all(&row.id, Vec::new()).unwrap(), None);
        // A write that fails (unknown run) tells nothing.
        assert!(store
            .append(
                "01ARZ3NDEKTSV4RRFFQ69G5FAV",
                EventDraft::new("run.started", json!({}))
            )
            .is_err());
        let stored: Vec<u64> = store
            .events(&row.id, 1, 100)
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(*seen.lock(), stored);
        assert_eq!(stored, [1, 2, 3, 4]);
    }
}
