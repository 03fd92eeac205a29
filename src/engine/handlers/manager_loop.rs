//! The manager-loop handler: loads the child workflow (`stack.child_dot_source`, or
//! `stack.child_workflow` relative to the parent file), runs it in-process on its own
//! thread with a copy of the parent's context, polls it every `manager.poll_interval`,
//! stops it early when `manager.stop_condition` holds against the child's context, and
//! fails after `manager.max_cycles` polls. Child events carry `<manager>/<child node>` ids.
//! The child gets the manager's preamble as `internal.parent_preamble`.
//! Must not touch: the parent's state beyond the stage outcome (the child's new context
//! keys come back as context updates, engine keys excluded).

use super::child_run::{self, Refused};
use super::{HandlerResult, Interrupt, StageCtx};
use crate::engine::checkpoint::RunState;
use crate::engine::context::{self, Context};
use crate::engine::failure::FailureClass;
use crate::engine::outcome::{Failure, StageOutcome};
use crate::engine::preamble;
use crate::engine::scope::{Mirror, Scope, ScopeKind};
use crate::engine::walker::{Stop, WalkEnd};
use crate::workflow::condition::{Condition, MapEnv};
use crate::workflow::{self, FileSource, Workflow};
use crossbeam_channel::RecvTimeoutError;
use parking_lot::Mutex;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

const DEFAULT_POLL: Duration = Duration::from_secs(45);
const DEFAULT_MAX_CYCLES: i64 = 1000;
const STOPPED: &str = "manager stop condition";
const EXHAUSTED: &str = "manager max cycles";

type Files = Arc<dyn FileSource + Send + Sync>;

/// Files of a child workflow: paths relative to the child file's directory, read through
/// the parent's source.
struct SubDirFiles {
    base: Files,
    dir: String,
}

impl FileSource for SubDirFiles {
    fn read(&self, rel: &str) -> Option<String> {
        self.base.read(&self.join(rel))
    }
    fn describe(&self, rel: &str) -> String {
        self.base.describe(&self.join(rel))
    }
}

impl SubDirFiles {
    fn join(&self, rel: &str) -> String {
        if self.dir.is_empty() || rel.starts_with('/') || rel.starts_with('~') {
            rel.to_string()
        } else {
            format!("{}/{rel}", self.dir)
        }
    }
}

/// How the child ended, as the manager saw it.
enum Verdict {
    Finished(Result<WalkEnd, Stop>),
    Stopped(u64),
    Exhausted(u64),
}

pub(super) fn run(cx: &StageCtx<'_, '_>) -> HandlerResult {
    let (child, files, source, path) = match load_child(cx) {
        Ok(x) => x,
        Err(why) => return deterministic(cx, &why),
    };
    let Some(start) = child.start else {
        return deterministic(cx, "has a child workflow without a start node");
    };
    let record = match child_run::open(cx, &child, &source, path) {
        Ok(r) => r,
        Err(Refused::Store(e)) => return Err(Interrupt::Store(e)),
        Err(Refused::Cancelled) => return Err(Interrupt::Cancelled),
        Err(Refused::Denied(why)) => {
            return deterministic(
                cx,
                &format!("could not run its child: approval denied: {why}"),
            )
        }
    };
    let result = supervise(cx, &child, files, start, &record.id);
    let ended = match &result {
        Ok(o) if !o.is_failed() => child_run::end(cx, &record, Ok(())),
        Ok(o) => {
            let why = o.failure.as_ref().map_or("failed", |f| f.message.as_str());
            child_run::end(cx, &record, Err(("workflow_error", why)))
        }
        Err(_) => child_run::end(
            cx,
            &record,
            Err(("cancelled", "the manager stage was cancelled")),
        ),
    };
    ended?;
    result
}

/// Runs the child workflow on its own thread, polling it and applying the stop condition
/// and the cycle budget.
fn supervise(
    cx: &StageCtx<'_, '_>,
    child: &Workflow,
    files: Files,
    start: usize,
    child_run: &str,
) -> HandlerResult {
    let v = cx.view();
    let poll = v
        .duration("manager.poll_interval")
        .filter(|d| !d.is_zero())
        .unwrap_or(DEFAULT_POLL);
    let max_cycles = v
        .int("manager.max_cycles")
        .filter(|&c| c >= 1)
        .unwrap_or(DEFAULT_MAX_CYCLES) as u64;
    let stop = match v.nonempty("manager.stop_condition").map(Condition::parse) {
        None => None,
        Some(Ok(c)) => Some(c),
        Some(Err(e)) => {
            return deterministic(cx, &format!("has an invalid manager.stop_condition: {e}"))
        }
    };
    let before = cx.context().clone();
    let mirror = Arc::new(Mutex::new(before.clone()));
    let token = cx.cancel.child();
    let scope = Scope {
        kind: ScopeKind::Child,
        prefix: format!("{}/", cx.scoped_id()),
        branch: cx.scope().branch.clone(),
        stop_at: None,
        cancel: token.clone(),
        files,
        mirrors: cx.scope().mirrors.clone(),
    };
    let strip = scope.prefix.len();
    let mut scope = scope;
    scope.mirrors.push(Mirror {
        run_id: child_run.to_string(),
        strip,
    });
    let (done_tx, done_rx) = crossbeam_channel::bounded(1);
    let (verdict, after) = std::thread::scope(|s| {
        s.spawn(|| {
            let mut state = RunState::default();
            state.context = before.clone();
            // The child's LLM stages put the manager's preamble before their own.
            match cx.plan().and_then(|p| p.preamble.clone()) {
                Some(p) => {
                    state
                        .context
                        .insert(preamble::PARENT_PREAMBLE.into(), Value::String(p));
                }
                None => {
                    state.context.remove(preamble::PARENT_PREAMBLE);
                }
            }
            let mut walker = cx.sub_walk(child, scope, state);
            walker.seed_context();
            *mirror.lock() = walker.state.context.clone();
            walker.mirror = Some(mirror.clone());
            let end = walker.walk(start);
            let _ = done_tx.send((end, walker.state.context));
        });
        let mut cycles = 0;
        loop {
            match done_rx.recv_timeout(poll) {
                Ok((end, ctx)) => break (Verdict::Finished(end), ctx),
                Err(RecvTimeoutError::Disconnected) => {
                    let why = "the child workflow thread ended without a result".to_string();
                    break (Verdict::Finished(Err(Stop::Cancelled(why))), before.clone());
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            cycles += 1;
            let stop_now = stop.as_ref().is_some_and(|c| holds(c, &mirror.lock()));
            if stop_now || cycles >= max_cycles {
                token.cancel(if stop_now { STOPPED } else { EXHAUSTED });
                let ctx = done_rx
                    .recv()
                    .map(|(_, c)| c)
                    .unwrap_or_else(|_| before.clone());
                let verdict = if stop_now {
                    Verdict::Stopped(cycles)
                } else {
                    Verdict::Exhausted(cycles)
                };
                break (verdict, ctx);
            }
        }
    });
    if cx.cancel.is_cancelled() {
        return Err(Interrupt::Cancelled);
    }
    let mut o = outcome(cx, verdict, max_cycles, poll);
    o.context_updates = child_updates(&before, &after);
    Ok(o)
}

fn deterministic(cx: &StageCtx<'_, '_>, what: &str) -> HandlerResult {
    Ok(StageOutcome::failed(Failure::deterministic(format!(
        "manager stage `{}` {what}",
        cx.scoped_id()
    ))))
}

/// The child workflow, the files it may reference, its source and its path (none inline).
fn load_child(cx: &StageCtx<'_, '_>) -> Result<(Workflow, Files, String, Option<String>), String> {
    let v = cx.view();
    let parent_files = cx.scope().files.clone();
    let named = v.nonempty("stack.child_workflow").map(String::from);
    let (source, files): (String, Files) = if let Some(src) = v.nonempty("stack.child_dot_source") {
        (src.to_string(), parent_files)
    } else if let Some(path) = v.nonempty("stack.child_workflow") {
        let text = parent_files.read(path).ok_or_else(|| {
            format!(
                "cannot read its child workflow {}",
                parent_files.describe(path)
            )
        })?;
        let dir = std::path::Path::new(path)
            .parent()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        (
            text,
            Arc::new(SubDirFiles {
                base: parent_files,
                dir,
            }),
        )
    } else {
        return Err(
            "has no child workflow (set stack.child_workflow or stack.child_dot_source)".into(),
        );
    };
    let named = named.filter(|_| v.nonempty("stack.child_dot_source").is_none());
    let loaded = workflow::load(&source, files.as_ref())
        .map_err(|e| format!("has a child workflow that does not parse: {}", e.message))?;
    if loaded.has_errors() {
        let errors: Vec<String> = loaded
            .diagnostics
            .iter()
            .filter(|d| d.severity == workflow::Severity::Error)
            .map(|d| d.message.clone())
            .collect();
        return Err(format!(
            "has an invalid child workflow: {}",
            errors.join("; ")
        ));
    }
    Ok((loaded.workflow, files, source, named))
}

/// The stop condition against the child's context (its latest `outcome` and label).
fn holds(c: &Condition, ctx: &Context) -> bool {
    let text = |k: &str| ctx.get(k).and_then(Value::as_str).unwrap_or("");
    let outcome = match text(context::OUTCOME) {
        "" => "succeeded",
        o => o,
    };
    c.eval(&MapEnv {
        outcome,
        preferred_label: text(context::PREFERRED_LABEL),
        context: ctx,
    })
}

fn outcome(
    cx: &StageCtx<'_, '_>,
    verdict: Verdict,
    max_cycles: u64,
    poll: Duration,
) -> StageOutcome {
    match verdict {
        Verdict::Finished(Ok(_)) => StageOutcome::succeeded(),
        Verdict::Finished(Err(Stop::Failed(f))) => StageOutcome::failed(Failure::retryable(
            format!("child workflow failed: {}", f.message),
            FailureClass::Deterministic,
        )),
        Verdict::Finished(Err(Stop::Cancelled(why))) => StageOutcome::failed(Failure::retryable(
            format!("child workflow stopped: {why}"),
            FailureClass::Deterministic,
        )),
        Verdict::Stopped(cycles) => {
            let mut o = StageOutcome::succeeded();
            o.notes = Some(format!("stop condition held after {cycles} cycle(s); child stopped"));
            o
        }
        Verdict::Exhausted(cycles) => StageOutcome::failed(Failure {
            message: format!(
                "manager stage `{}`: the child workflow did not finish within manager.max_cycles={max_cycles} ({cycles} polls every {})",
                cx.scoped_id(),
                crate::engine::timing::describe_duration(poll)
            ),
            class: FailureClass::BudgetExhausted,
            retryable: false,
        }),
    }
}

/// Keys the child added or changed, engine keys excluded.
fn child_updates(before: &Context, after: &Context) -> Context {
    after
        .iter()
        .filter(|(k, v)| !context::is_engine_key(k) && before.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
