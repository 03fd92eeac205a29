//! The fan-in handler (decisions.md "Parallel"): the join of a parallel node turns the
//! branch statuses its fork left in `parallel.results` into its own outcome.
//! Must not touch: the branches (the parallel handler ran and merged them).

use super::parallel::counts_as_success;
use super::{HandlerResult, StageCtx};
use crate::engine::context::PARALLEL_RESULTS;
use crate::engine::failure::StageStatus;
use crate::engine::outcome::{Failure, StageOutcome};
use serde_json::Value;

/// The fan-in's outcome: succeeded when every branch succeeded, partially_succeeded when
/// some did, failed when none did.
pub(super) fn run(cx: &StageCtx<'_, '_>) -> HandlerResult {
    let Some(Value::Array(results)) = cx.context().get(PARALLEL_RESULTS) else {
        return Ok(StageOutcome::failed(Failure::deterministic(format!(
            "fan-in stage `{}` was reached without parallel results (it must follow a parallel node's branches)",
            cx.scoped_id()
        ))));
    };
    let statuses: Vec<StageStatus> = results
        .iter()
        .map(|r| {
            r.get("status")
                .and_then(Value::as_str)
                .and_then(|s| s.parse::<StageStatus>().ok())
                .unwrap_or(StageStatus::Failed)
        })
        .collect();
    let ok = statuses.iter().filter(|s| counts_as_success(**s)).count();
    let some = statuses
        .iter()
        .filter(|s| counts_as_success(**s) || **s == StageStatus::PartiallySucceeded)
        .count();
    let mut o = StageOutcome::succeeded();
    if ok == statuses.len() {
        return Ok(o);
    }
    if some > 0 {
        o.status = StageStatus::PartiallySucceeded;
        o.notes = Some(format!("{ok} of {} branches succeeded", statuses.len()));
        return Ok(o);
    }
    Ok(StageOutcome::failed(Failure::deterministic(format!(
        "fan-in stage `{}`: all {} branches failed",
        cx.scoped_id(),
        statuses.len()
    ))))
}
