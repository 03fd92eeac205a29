//! Writing run events: every event goes through [`Emitter::emit`], which hides secret values
//! in every property string ([`Redact`]), moves values over 100 KB into blobs
//! (`blob://sha256/<hex>`), appends through the store and records activity for the stall
//! watchdog.
//! Must not touch: routing or handler logic; event payloads are built by their callers.

use crate::base::redact::{redact_json, Redact};
use crate::store::{blob_ref, parse_blob_ref, EventDraft, RunStore, StoreError, BLOB_THRESHOLD};
use serde_json::Value;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// When the run last did something, for the stall watchdog. Shared by a run, its parallel
/// branches and its child workflows.
#[derive(Debug)]
pub struct Activity {
    base: Instant,
    last_ms: AtomicU64,
    /// Waits that do not count as stalls (human questions, wait nodes) in progress.
    quiet_waits: AtomicUsize,
}

impl Activity {
    pub fn new(now: Instant) -> Activity {
        Activity {
            base: now,
            last_ms: AtomicU64::new(0),
            quiet_waits: AtomicUsize::new(0),
        }
    }

    pub fn touch(&self) {
        let ms = self.base.elapsed().as_millis() as u64;
        self.last_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// Time since the last activity, or zero while a quiet wait is in progress.
    pub fn idle(&self) -> Duration {
        if self.quiet_waits.load(Ordering::Relaxed) > 0 {
            return Duration::ZERO;
        }
        let now = self.base.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last_ms.load(Ordering::Relaxed)))
    }

    /// Marks a wait that must not trip the watchdog until the guard is dropped.
    pub fn quiet(&self) -> QuietGuard<'_> {
        self.quiet_waits.fetch_add(1, Ordering::Relaxed);
        QuietGuard(self)
    }
}

pub struct QuietGuard<'a>(&'a Activity);

impl Drop for QuietGuard<'_> {
    fn drop(&mut self) {
        self.0.touch();
        self.0.quiet_waits.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Appends a run's events.
#[derive(Clone)]
pub struct Emitter {
    pub store: Arc<dyn RunStore>,
    pub run_id: String,
    pub activity: Arc<Activity>,
    pub redactor: Arc<dyn Redact>,
}

impl Emitter {
    /// Appends the event with secret values hidden; returns its seq.
    pub fn emit(&self, mut draft: EventDraft) -> Result<u64, StoreError> {
        redact_json(self.redactor.as_ref(), &mut draft.properties);
        offload_large(self.store.as_ref(), &mut draft.properties)?;
        let event = self.store.append(&self.run_id, draft)?;
        self.activity.touch();
        Ok(event.seq)
    }

    /// [`Emitter::emit`] for several events committed together (one store transaction);
    /// returns the last one's seq (`None` for no events).
    pub fn emit_all(&self, mut drafts: Vec<EventDraft>) -> Result<Option<u64>, StoreError> {
        for draft in &mut drafts {
            redact_json(self.redactor.as_ref(), &mut draft.properties);
            offload_large(self.store.as_ref(), &mut draft.properties)?;
        }
        let last = self.store.append_all(&self.run_id, drafts)?;
        self.activity.touch();
        Ok(last)
    }
}

/// Replaces every string longer than [`BLOB_THRESHOLD`] bytes inside `v` by a blob reference.
pub fn offload_large(store: &dyn RunStore, v: &mut Value) -> Result<(), StoreError> {
    match v {
        Value::String(s) if s.len() > BLOB_THRESHOLD => {
            let hex = store.put_blob(s.as_bytes())?;
            *s = blob_ref(&hex);
        }
        Value::Array(items) => {
            for item in items {
                offload_large(store, item)?;
            }
        }
        Value::Object(map) => {
            for item in map.values_mut() {
                offload_large(store, item)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The inverse of [`offload_large`]: blob references become their text again.
pub fn resolve_blobs(store: &dyn RunStore, v: &mut Value) -> Result<(), StoreError> {
    match v {
        Value::String(s) => {
            if let Some(hex) = parse_blob_ref(s) {
                if let Some(bytes) = store.get_blob(hex)? {
                    *s = String::from_utf8_lossy(&bytes).into_owned();
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                resolve_blobs(store, item)?;
            }
        }
        Value::Object(map) => {
            for item in map.values_mut() {
                resolve_blobs(store, item)?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;
    use serde_json::json;

    #[test]
    fn large_strings_round_trip_through_blobs() {
        let store = MemoryStore::new();
        let big = "x".repeat(BLOB_THRESHOLD + 1);
        let mut v = json!({"small": "s", "nested": [big.clone()]});
        offload_large(&store, &mut v).ok();
        let r = v["nested"][0].as_str().unwrap_or("");
        assert!(r.starts_with("blob://sha256/"), "{r}");
        assert_eq!(v["small"], "s");
        resolve_blobs(&store, &mut v).ok();
        assert_eq!(v["nested"][0].as_str().map(str::len), Some(big.len()));
    }

    #[test]
    fn quiet_waits_do_not_count_as_idle() {
        let a = Activity::new(Instant::now());
        std::thread::sleep(Duration::from_millis(15));
        assert!(a.idle() >= Duration::from_millis(10));
        let g = a.quiet();
        assert_eq!(a.idle(), Duration::ZERO);
        drop(g);
        assert!(a.idle() < Duration::from_millis(10));
    }
}
