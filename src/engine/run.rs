//! The engine's front door: [`Engine::run`] and [`Engine::resume`] execute a workflow on the
//! caller's thread, bracketing the walk with the run-level events (`run.started`,
//! `run.running`, `run.completed` / `run.failed`) and the stall watchdog.
//! Must not touch: creating runs in the store (callers do), parsing workflows, terminals.

use super::checkpoint::{restore, RunState};
use super::context::Context;
use super::events::{Activity, Emitter};
use super::failure::StageStatus;
use super::options::RunOptions;
use super::prng::Prng;
use super::scope::{Scope, ScopeKind};
use super::services::Services;
use super::timing::millis;
use super::walker::{FailureReason, RunFailure, Shared, Stop, WalkEnd, Walker};
use super::watchdog;
use crate::base::event_kind;
use crate::store::{EventDraft, StoreError};
use crate::workflow::Workflow;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

/// Whether a run reached an exit node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunResult {
    /// The walk reached an exit node (and published its work, when it has a publisher).
    Succeeded,
    /// The run stopped without reaching an exit: [`RunOutcome::reason`] says why.
    Failed,
}

impl RunResult {
    /// The wire name (`succeeded`, `failed`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunResult::Succeeded => "succeeded",
            RunResult::Failed => "failed",
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RunOutcome {
    /// The run's id (a ULID).
    pub run_id: String,
    /// Succeeded or failed.
    pub status: RunResult,
    /// Why it ended so: the `reason` of its `run.completed` / `run.failed` event, typed.
    pub reason: EndReason,
    /// What went wrong, in words, when it failed.
    pub error: Option<String>,
    /// Every stage visit whose handler ran, in order, ending with the exit when reached.
    pub path: Vec<String>,
    /// The run context at its end (`$context.KEY`, stage outputs, `outcome`...).
    pub context: Context,
}

/// Why a run ended: the `reason` its terminal event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndReason {
    /// Succeeded, every stage on the way succeeded.
    Completed,
    /// Succeeded, with at least one stage partially successful.
    PartialSuccess,
    /// Failed for this reason.
    Failed(FailureReason),
    /// Can neither progress nor be resumed (`run.dead`; docs/decisions.md lists when).
    Dead,
}

impl EndReason {
    /// The wire name: `completed`, `partial_success`, a [`FailureReason`]'s, or `dead`.
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Completed => "completed",
            EndReason::PartialSuccess => "partial_success",
            EndReason::Failed(reason) => reason.as_str(),
            EndReason::Dead => "dead",
        }
    }
}

impl std::fmt::Display for EndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Runs workflows. Stateless: everything lives in the run's state and the store.
pub struct Engine;

impl Engine {
    /// Runs `wf` from its start node. The run `options.run_id` must exist in the store.
    pub fn run(wf: &Workflow, options: &RunOptions, services: &Services) -> RunOutcome {
        let shared = new_shared(options, services, 0);
        let mut walker = run_walker(wf, &shared, RunState::default());
        walker.seed_context();
        let begun = emit_run(
            &shared,
            event_kind::RUN_STARTED,
            json!({"name": wf.name(), "goal": options.goal_of(wf)}),
        )
        .and_then(|()| emit_run(&shared, event_kind::RUN_RUNNING, Value::Null))
        .and_then(|()| paused_before_start(&shared));
        let end = match (begun, wf.start) {
            (Err(e), _) => Err(Stop::from(e)),
            (Ok(()), None) => Err(stop_failed("the workflow has no start node")),
            (Ok(()), Some(start)) => watched(wf, &shared, || walker.walk(start)),
        };
        finish(&shared, end, walker.state)
    }

    /// Continues a run from its latest checkpoint, at the checkpoint's next node, without
    /// re-running completed stages; without a checkpoint it starts from the beginning.
    pub fn resume(wf: &Workflow, options: &RunOptions, services: &Services) -> RunOutcome {
        if let Err(e) = interrupt_open_questions(services, &options.run_id) {
            return failed_early(options, services, e.to_string());
        }
        let checkpoint = match restore(services.store.as_ref(), &options.run_id) {
            Ok(Some(c)) => c,
            Ok(None) => return Engine::run(wf, options, services),
            Err(why) => {
                return dead(
                    options,
                    services,
                    format!("cannot resume: the checkpoint cannot be read: {why}"),
                )
            }
        };
        if let Err(why) = restore_workspace(services, &options.run_id) {
            return failed_early(options, services, why);
        }
        let next = checkpoint
            .next_node_id
            .as_deref()
            .and_then(|id| wf.node_index(id));
        if next.is_none() {
            return dead(
                options,
                services,
                format!(
                    "cannot resume: the checkpoint's next node `{}` is not in the workflow",
                    checkpoint.next_node_id.unwrap_or_default()
                ),
            );
        }
        let shared = new_shared(options, services, checkpoint.stage_index);
        let mut walker = run_walker(wf, &shared, checkpoint.state);
        let begun = emit_run(
            &shared,
            event_kind::RUN_RUNNING,
            json!({"resumed": true, "from_node": checkpoint.next_node_id}),
        )
        .and_then(|()| paused_before_start(&shared));
        let end = match (begun, next) {
            (Err(e), _) => Err(Stop::from(e)),
            (Ok(()), None) => Err(stop_failed(&format!(
                "cannot resume: the checkpoint's next node `{}` is not in the workflow",
                checkpoint.next_node_id.unwrap_or_default()
            ))),
            (Ok(()), Some(next)) => watched(wf, &shared, || walker.walk(next)),
        };
        finish(&shared, end, walker.state)
    }
}

/// A run resumed with its token already paused (it was paused when the server stopped)
/// says so, and its walk holds before the first stage until it is unpaused.
fn paused_before_start(shared: &Shared<'_>) -> Result<(), StoreError> {
    if shared.services.cancel.is_paused() {
        emit_run(shared, event_kind::RUN_PAUSED, json!({"prior_block": null}))?;
    }
    Ok(())
}

/// Puts the workspace back to the checkpoint the run resumes from (its `git_commit_sha`), so
/// the half-done work of an interrupted stage is not mixed into the stage's rerun.
fn restore_workspace(services: &Services, run_id: &str) -> Result<(), String> {
    let row = services
        .store
        .get_run(run_id)
        .map_err(|e| format!("cannot read the run to restore its workspace: {e}"))?;
    let sha = row
        .as_ref()
        .and_then(|r| r.checkpoint.as_ref())
        .and_then(|c| c.get("git_commit_sha"))
        .and_then(Value::as_str);
    match sha {
        Some(sha) => services
            .workspace
            .restore(sha)
            .map_err(|e| format!("cannot restore the workspace to checkpoint {sha}: {e}")),
        None => Ok(()),
    }
}

/// Questions left open by the interrupted process are closed (`interview.interrupted`);
/// their stages run again and ask anew.
fn interrupt_open_questions(services: &Services, run_id: &str) -> Result<(), StoreError> {
    let Some(row) = services.store.get_run(run_id)? else {
        return Ok(());
    };
    for q in &row.questions {
        let text = |k: &str| q.get(k).cloned().unwrap_or(Value::Null);
        let mut draft = EventDraft::new(
            event_kind::INTERVIEW_INTERRUPTED,
            json!({"question_id": text("question_id"), "question": text("question"),
                   "stage": text("stage"),
                   "reason": "the run was interrupted before an answer; the stage asks again on resume"}),
        );
        if let Some(stage) = q.get("stage").and_then(Value::as_str) {
            draft = draft.node(stage);
        }
        crate::base::redact::redact_json(services.redactor.as_ref(), &mut draft.properties);
        services.store.append(run_id, draft)?;
    }
    Ok(())
}

fn new_shared<'s>(options: &'s RunOptions, services: &'s Services, next_stage: u64) -> Shared<'s> {
    let seed = options
        .seed
        .unwrap_or_else(|| Prng::seed_from(&options.run_id));
    Shared {
        started: services.clock.now(),
        services,
        options,
        emitter: Emitter {
            store: services.store.clone(),
            run_id: options.run_id.clone(),
            activity: Arc::new(Activity::new(services.clock.now())),
            redactor: services.redactor.clone(),
        },
        stages: AtomicU64::new(next_stage),
        blocked: Mutex::new(0),
        rng: Mutex::new(Prng::new(seed)),
        inherited_env: std::sync::OnceLock::new(),
    }
}

fn run_walker<'w>(wf: &'w Workflow, shared: &'w Shared<'w>, state: RunState) -> Walker<'w> {
    let scope = Scope {
        kind: ScopeKind::Run,
        prefix: String::new(),
        branch: None,
        stop_at: None,
        cancel: shared.services.cancel.clone(),
        files: shared.options.files.clone(),
        mirrors: Vec::new(),
    };
    Walker::new(wf, shared, scope, state)
}

fn emit_run(shared: &Shared<'_>, kind: &str, props: Value) -> Result<(), StoreError> {
    shared
        .emitter
        .emit(EventDraft::new(kind, props))
        .map(|_| ())
}

fn stop_failed(message: &str) -> Stop {
    Stop::Failed(RunFailure {
        message: message.to_string(),
        reason: FailureReason::WorkflowError,
    })
}

/// Runs `walk` under the stall watchdog (unless `stall_timeout` is 0).
fn watched(
    wf: &Workflow,
    shared: &Shared<'_>,
    walk: impl FnOnce() -> Result<WalkEnd, Stop>,
) -> Result<WalkEnd, Stop> {
    let stall = wf
        .graph_view()
        .duration("stall_timeout")
        .unwrap_or(watchdog::DEFAULT_STALL);
    if stall.is_zero() {
        return walk();
    }
    let stop = crate::base::cancel::CancelToken::new();
    let fired = AtomicBool::new(false);
    let run = shared.services.cancel.clone();
    std::thread::scope(|s| {
        s.spawn(|| watchdog::watch(&shared.emitter, stall, &run, &stop, &fired));
        let end = walk();
        stop.cancel("run finished");
        end
    })
}

/// `run.completed` or `run.failed`, and the outcome.
fn finish(shared: &Shared<'_>, end: Result<WalkEnd, Stop>, state: RunState) -> RunOutcome {
    let duration_ms = millis(
        shared
            .services
            .clock
            .now()
            .saturating_duration_since(shared.started),
    );
    // A graph that succeeded publishes its work before its terminal event; a failure to do
    // so fails the run (the workspace, its branch and diff stay as they are).
    let end = match end {
        Ok(w) => {
            let head = shared.services.workspace.head();
            match shared.services.publisher.finish(head.as_deref()) {
                Ok(()) => Ok(w),
                Err(message) => Err(Stop::Failed(RunFailure {
                    message,
                    reason: FailureReason::PublishFailed,
                })),
            }
        }
        other => other,
    };
    let (status, reason, error) = match end {
        Ok(_) => {
            let partial = state
                .outcomes
                .values()
                .any(|s| *s == StageStatus::PartiallySucceeded);
            let reason = if partial {
                EndReason::PartialSuccess
            } else {
                EndReason::Completed
            };
            (RunResult::Succeeded, reason, None)
        }
        Err(Stop::Failed(f)) => (
            RunResult::Failed,
            EndReason::Failed(f.reason),
            Some(f.message),
        ),
        Err(Stop::Cancelled(why)) if why.starts_with(watchdog::STALLED) => (
            RunResult::Failed,
            EndReason::Failed(FailureReason::WorkflowError),
            Some(format!("the run {why}")),
        ),
        Err(Stop::Cancelled(why)) => (
            RunResult::Failed,
            EndReason::Failed(FailureReason::Cancelled),
            Some(format!("run cancelled: {why}")),
        ),
    };
    let reason_name = reason.as_str();
    let props = match status {
        RunResult::Succeeded => {
            json!({"status": "succeeded", "reason": reason_name, "duration_ms": duration_ms})
        }
        RunResult::Failed => {
            json!({"error": error, "reason": reason_name, "duration_ms": duration_ms, "causes": []})
        }
    };
    let kind = if status == RunResult::Succeeded {
        event_kind::RUN_COMPLETED
    } else {
        event_kind::RUN_FAILED
    };
    let error = match emit_run(shared, kind, props) {
        Ok(()) => error,
        Err(e) => Some(
            error.unwrap_or_default()
                + &format!(" (and the final event could not be recorded: {e})"),
        ),
    };
    RunOutcome {
        run_id: shared.options.run_id.clone(),
        status,
        reason,
        error,
        path: state.path,
        context: state.context,
    }
}

/// The run can neither make progress nor ever be resumed: `run.dead {reason, error}`.
/// (docs/decisions.md lists when.) The outcome is a failure with reason `dead`.
pub fn dead(options: &RunOptions, services: &Services, why: String) -> RunOutcome {
    let shared = new_shared(options, services, 0);
    let props = json!({"reason": "unresumable", "error": why});
    let error = match emit_run(&shared, event_kind::RUN_DEAD, props) {
        Ok(()) => why,
        Err(e) => format!("{why} (and the final event could not be recorded: {e})"),
    };
    RunOutcome {
        run_id: options.run_id.clone(),
        status: RunResult::Failed,
        reason: EndReason::Dead,
        error: Some(error),
        path: Vec::new(),
        context: Context::new(),
    }
}

fn failed_early(options: &RunOptions, services: &Services, why: String) -> RunOutcome {
    let shared = new_shared(options, services, 0);
    finish(&shared, Err(stop_failed(&why)), RunState::default())
}
