//! Post-commit notification of run events to live subscribers.
//!
//! Owns: the subscriber lists and the channels to them. The stores call [`Hub::publish`]
//! only after the event's transaction has committed, while still holding their writer lock,
//! so every subscriber sees a run's events in `seq` order, without gaps and never an
//! uncommitted one.
//! Must not touch: storage; it keeps no history (a subscriber that needs earlier events reads
//! them from the store, see [`Subscription`]).

use super::model::Event;
use crossbeam_channel::{unbounded, Receiver, RecvError, RecvTimeoutError, Sender, TryRecvError};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The fan-out point for committed events. One per store.
#[derive(Debug, Default)]
pub struct Hub {
    inner: Mutex<HubInner>,
}

#[derive(Debug, Default)]
struct HubInner {
    runs: HashMap<String, Vec<Sender<Arc<Event>>>>,
    all: Vec<Sender<Arc<Event>>>,
}

/// A live feed of committed events, in commit order.
///
/// To replay history and then follow live without a gap or a duplicate: subscribe first,
/// then read the history from the store (`events(run_id, since, ..)`), then take live events
/// and skip those whose `seq` you already replayed.
///
/// Channels are unbounded: a consumer that stops reading makes its queue grow, so drop the
/// subscription when done. The feed ends (`recv` returns an error) when the run is deleted
/// or the hub is dropped.
#[derive(Debug)]
pub struct Subscription {
    rx: Receiver<Arc<Event>>,
}

impl Subscription {
    /// Blocks for the next event; `Err` when the feed has ended.
    pub fn recv(&self) -> Result<Arc<Event>, RecvError> {
        self.rx.recv()
    }

    pub fn recv_timeout(&self, timeout: Duration) -> Result<Arc<Event>, RecvTimeoutError> {
        self.rx.recv_timeout(timeout)
    }

    pub fn try_recv(&self) -> Result<Arc<Event>, TryRecvError> {
        self.rx.try_recv()
    }

    /// The underlying channel, e.g. for `crossbeam_channel::select!`.
    pub fn receiver(&self) -> &Receiver<Arc<Event>> {
        &self.rx
    }
}

impl Hub {
    pub fn new() -> Hub {
        Hub::default()
    }

    /// Events of one run committed from now on.
    pub fn subscribe(&self, run_id: &str) -> Subscription {
        let (tx, rx) = unbounded();
        self.inner
            .lock()
            .runs
            .entry(run_id.to_string())
            .or_default()
            .push(tx);
        Subscription { rx }
    }

    /// Events of every run committed from now on.
    pub fn subscribe_all(&self) -> Subscription {
        let (tx, rx) = unbounded();
        self.inner.lock().all.push(tx);
        Subscription { rx }
    }

    /// Number of live subscriptions (dropped ones are pruned on the next publish).
    pub fn subscriber_count(&self) -> usize {
        let inner = self.inner.lock();
        inner.all.len() + inner.runs.values().map(Vec::len).sum::<usize>()
    }

    /// True when someone listens to `run_id` (or to every run).
    pub(crate) fn has_listeners(&self, run_id: &str) -> bool {
        let inner = self.inner.lock();
        !inner.all.is_empty() || inner.runs.contains_key(run_id)
    }

    /// Delivers a committed event. Callers hold their writer lock, so per-run order holds.
    pub(crate) fn publish(&self, event: Arc<Event>) {
        let mut inner = self.inner.lock();
        if let Some(subs) = inner.runs.get_mut(&event.run_id) {
            subs.retain(|tx| tx.send(Arc::clone(&event)).is_ok());
            if subs.is_empty() {
                inner.runs.remove(&event.run_id);
            }
        }
        inner.all.retain(|tx| tx.send(Arc::clone(&event)).is_ok());
    }

    /// Ends every per-run feed of a deleted run.
    pub(crate) fn close_run(&self, run_id: &str) {
        self.inner.lock().runs.remove(run_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::model::EventDraft;
    use serde_json::Value;

    fn ev(run: &str, seq: u64) -> Arc<Event> {
        Arc::new(EventDraft::new("x", Value::Null).into_event(
            run,
            seq,
            String::new(),
            String::new(),
        ))
    }

    #[test]
    fn routes_by_run_and_prunes() {
        let hub = Hub::new();
        let a = hub.subscribe("A");
        let all = hub.subscribe_all();
        {
            let _dropped = hub.subscribe("A");
        }
        hub.publish(ev("A", 1));
        hub.publish(ev("B", 1));
        assert_eq!(
            a.try_recv().map(|e| e.run_id.clone()).ok(),
            Some("A".into())
        );
        assert!(a.try_recv().is_err());
        assert_eq!(
            all.try_recv().map(|e| e.run_id.clone()).ok(),
            Some("A".into())
        );
        assert_eq!(
            all.try_recv().map(|e| e.run_id.clone()).ok(),
            Some("B".into())
        );
        assert_eq!(hub.subscriber_count(), 2);
        hub.close_run("A");
        assert!(matches!(a.try_recv(), Err(TryRecvError::Disconnected)));
    }
}
