//! The stall watchdog (graph `stall_timeout`, default 1800s, 0 disables): a thread that
//! cancels the run and emits `watchdog.timeout` when nothing happened for that long.
//! Any event counts as activity (branches and child workflows included); human questions,
//! wait nodes and pauses do not count as stalls.
//! Must not touch: the run's state; it only reads activity and cancels the token.

use super::events::Emitter;
use crate::base::cancel::CancelToken;
use crate::base::event_kind;
use crate::store::EventDraft;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub const DEFAULT_STALL: Duration = Duration::from_secs(1800);
/// Prefix of the cancel reason the watchdog gives.
pub const STALLED: &str = "stalled";

/// Watches until `stop` is cancelled; returns nothing, sets `fired` when it cancels `run`.
pub fn watch(
    emitter: &Emitter,
    stall: Duration,
    run: &CancelToken,
    stop: &CancelToken,
    fired: &AtomicBool,
) {
    let tick = (stall / 4).clamp(Duration::from_millis(10), Duration::from_secs(5));
    while !stop.sleep(tick) {
        if run.is_paused() {
            emitter.activity.touch();
            continue;
        }
        let idle = emitter.activity.idle();
        if idle >= stall {
            fired.store(true, Ordering::SeqCst);
            let _ = emitter.emit(EventDraft::new(
                event_kind::WATCHDOG_TIMEOUT,
                json!({"idle_seconds": idle.as_secs_f64(), "stall_timeout_ms": stall.as_millis() as u64}),
            ));
            run.cancel(&format!(
                "{STALLED}: no activity for {} (stall_timeout={})",
                super::timing::describe_duration(idle),
                super::timing::describe_duration(stall)
            ));
            return;
        }
    }
}
