//! The wait handler: sleeps for the node's `duration`, interruptible by cancellation. A
//! deliberate wait does not count toward the stall watchdog.
//! Must not touch: anything but its own stage.

use super::{HandlerResult, Interrupt, StageCtx};
use crate::engine::outcome::{Failure, StageOutcome};

pub(super) fn run(cx: &StageCtx<'_, '_>) -> HandlerResult {
    let Some(duration) = cx.view().duration("duration") else {
        return Ok(StageOutcome::failed(Failure::deterministic(format!(
            "wait stage `{}` has no valid `duration` (e.g. duration=30s)",
            cx.scoped_id()
        ))));
    };
    let _quiet = cx.quiet();
    if cx.services().clock.sleep(duration, cx.cancel) {
        return Err(Interrupt::Cancelled);
    }
    Ok(StageOutcome::succeeded())
}
