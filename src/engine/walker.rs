//! The stage loop (engine.md 3.2 with decisions.md rules): visits and their limits, each
//! stage's fidelity, thread and preamble (resolved by `fidelity`), the attempt loop with
//! retries, backoff and per-attempt timeouts, `allow_partial` and `auto_status`, recording
//! outcomes into the state and the context, the failure-signature breaker, routing,
//! `loop_restart`, goal gates at the exit, and checkpoints.
//!
//! One [`Walker`] walks one scope: the run itself, a parallel branch (stops at its join,
//! no checkpoints) or a child workflow of a manager loop (events prefixed with the manager
//! node, no checkpoints).
//! Must not touch: handler internals (see `handlers/`), run-level events (see `run.rs`).

use super::checkpoint::RunState;
use super::context::{self, Context};
use super::events::Emitter;
use super::failure::{self, FailureClass, StageStatus};
use super::fidelity::{self, StagePlan};
use super::handlers::{self, Interrupt, StageCtx};
use super::options::RunOptions;
use super::outcome::{Failure, Nested, StageNote, StageOutcome};
use super::preamble::{self, History};
use super::prng::Prng;
use super::routing::{self, Route, RoutingInput};
use super::scope::{Mirror, Scope, ScopeKind};
use super::services::Services;
use super::timing::{describe_duration, millis, start_timer, TIMED_OUT};
use crate::store::{EventDraft, StoreError};
use crate::workflow::attrs::Fidelity;
use crate::workflow::condition::MapEnv;
use crate::workflow::{HandlerKind, Workflow};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Cancel reason of a per-attempt token after its attempt ended.
const ATTEMPT_DONE: &str = "attempt finished";
const DEFAULT_SIGNATURE_LIMIT: i64 = 3;

/// Why a run (or a branch, or a child workflow) stopped without reaching its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureReason {
    WorkflowError,
    Cancelled,
    TransientInfra,
    BudgetExhausted,
}

impl FailureReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::WorkflowError => "workflow_error",
            FailureReason::Cancelled => "cancelled",
            FailureReason::TransientInfra => "transient_infra",
            FailureReason::BudgetExhausted => "budget_exhausted",
        }
    }

    fn of_class(class: FailureClass) -> FailureReason {
        match class {
            FailureClass::TransientInfra => FailureReason::TransientInfra,
            FailureClass::BudgetExhausted => FailureReason::BudgetExhausted,
            FailureClass::Canceled => FailureReason::Cancelled,
            _ => FailureReason::WorkflowError,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFailure {
    pub message: String,
    pub reason: FailureReason,
}

/// Why a walk stopped early.
#[derive(Debug)]
pub(crate) enum Stop {
    Cancelled(String),
    Failed(RunFailure),
}

impl Stop {
    fn failed(message: String) -> Stop {
        Stop::Failed(RunFailure {
            message,
            reason: FailureReason::WorkflowError,
        })
    }
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Stop {
        Stop::failed(format!("cannot record the run's events: {e}"))
    }
}

/// How a walk ended normally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WalkEnd {
    /// The exit node was reached with every goal gate satisfied.
    Exited,
    /// A branch reached its join node or a node with no outgoing edges; the status is the
    /// branch's last stage's.
    Ended(StageStatus),
}

/// State shared by every walker of one run.
pub(crate) struct Shared<'s> {
    pub started: std::time::Instant,
    pub services: &'s Services,
    pub options: &'s RunOptions,
    pub emitter: Emitter,
    /// The next stage index.
    pub stages: AtomicU64,
    /// Human questions open across the run (run.blocked / run.unblocked are ref-counted).
    pub blocked: Mutex<usize>,
    pub rng: Mutex<Prng>,
    /// The environment commands inherit when the services bring none: the allowlist of
    /// `procs::EnvSnapshot::for_stages`, read at the run's first command (`None` inside:
    /// it could not be read, and each spawn reads its own).
    pub inherited_env: std::sync::OnceLock<Option<crate::procs::EnvSnapshot>>,
}

impl Shared<'_> {
    /// The environment commands inherit (see `inherited_env`).
    pub fn base_env(&self) -> Option<&crate::procs::EnvSnapshot> {
        if let Some(env) = &self.services.stage_env {
            return Some(env);
        }
        self.inherited_env
            .get_or_init(|| crate::procs::EnvSnapshot::for_stages(&[], &[]).ok())
            .as_ref()
    }

    pub fn block(&self) -> Result<(), StoreError> {
        let mut open = self.blocked.lock();
        if *open == 0 {
            self.emitter.emit(EventDraft::new(
                "run.blocked",
                json!({"blocked_reason": "human_input_required"}),
            ))?;
        }
        *open += 1;
        Ok(())
    }

    pub fn unblock(&self) -> Result<(), StoreError> {
        let mut open = self.blocked.lock();
        *open = open.saturating_sub(1);
        if *open == 0 {
            self.emitter
                .emit(EventDraft::new("run.unblocked", Value::Null))?;
        }
        Ok(())
    }
}

/// Where a stage's attempts ended, for its last event.
#[derive(Clone, Copy)]
struct StageEnd {
    index: u64,
    attempt: u32,
    max_attempts: u32,
    duration_ms: u64,
}

/// A stage after its attempts and post-processing.
struct Finished {
    outcome: StageOutcome,
    attempts: u32,
    signature: Option<String>,
}

/// Walks one scope of a run.
pub(crate) struct Walker<'w> {
    pub wf: &'w Workflow,
    pub shared: &'w Shared<'w>,
    pub scope: Scope,
    pub state: RunState,
    /// Context keys written by this walker's stages (a branch's outputs).
    pub written: BTreeSet<String>,
    /// A copy of the context after every stage, for a manager watching a child workflow.
    pub mirror: Option<Arc<Mutex<Context>>>,
    /// Fidelity, thread and preamble of the stage being run (set before its attempts).
    pub plan: Option<StagePlan>,
    /// Events recorded but not yet committed ([`Walker::hold`]): the next
    /// [`Walker::emit`] commits them with its own event in one store transaction.
    held: Mutex<Vec<EventDraft>>,
}

impl<'w> Walker<'w> {
    pub fn new(wf: &'w Workflow, shared: &'w Shared<'w>, scope: Scope, state: RunState) -> Self {
        Walker {
            wf,
            shared,
            scope,
            state,
            written: BTreeSet::new(),
            mirror: None,
            plan: None,
            held: Mutex::new(Vec::new()),
        }
    }

    pub fn services(&self) -> &Services {
        self.shared.services
    }

    pub fn options(&self) -> &RunOptions {
        self.shared.options
    }

    /// The node id as events show it.
    pub fn scoped_id(&self, node: usize) -> String {
        let id = &self.wf.node(node).id;
        if self.scope.prefix.is_empty() {
            id.to_string()
        } else {
            format!("{}{id}", self.scope.prefix)
        }
    }

    /// Appends an event tagged with this scope's node prefix and branch.
    pub fn emit(&self, kind: &str, node: Option<usize>, props: Value) -> Result<(), StoreError> {
        self.emit_seq(kind, node, props).map(|_| ())
    }

    /// [`Walker::emit`], returning the committed event's seq.
    pub fn emit_seq(
        &self,
        kind: &str,
        node: Option<usize>,
        props: Value,
    ) -> Result<u64, StoreError> {
        let draft = self.draft(kind, node, props);
        // Questions are asked and answered on the run itself only.
        if !kind.starts_with("interview.") {
            for m in &self.scope.mirrors {
                self.mirror(m, &draft)?;
            }
        }
        let mut held = std::mem::take(&mut *self.held.lock());
        if held.is_empty() {
            return self.shared.emitter.emit(draft);
        }
        held.push(draft);
        let last = self.shared.emitter.emit_all(held)?;
        Ok(last.unwrap_or_default())
    }

    /// Records an event that the next [`Walker::emit`] (or [`Walker::flush`]) commits
    /// together with its own, in one store transaction, so a stage's closing events (and a
    /// no-op stage's whole record) cost one commit. Only for events followed by no external
    /// effect before that commit but the workspace checkpoint: a crash before it loses them
    /// all and the run resumes from the previous checkpoint, re-running the stage, exactly
    /// as when the crash comes before its `checkpoint.completed` today. Scopes that copy
    /// events into child runs commit at once.
    pub fn hold(&self, kind: &str, node: Option<usize>, props: Value) -> Result<(), StoreError> {
        if !self.scope.mirrors.is_empty() {
            return self.emit(kind, node, props);
        }
        let draft = self.draft(kind, node, props);
        self.held.lock().push(draft);
        Ok(())
    }

    /// Commits the held events, if any.
    pub fn flush(&self) -> Result<(), StoreError> {
        let held = std::mem::take(&mut *self.held.lock());
        self.shared.emitter.emit_all(held).map(|_| ())
    }

    /// An event of this scope: its node id prefixed, its branch tagged.
    fn draft(&self, kind: &str, node: Option<usize>, props: Value) -> EventDraft {
        let mut draft = EventDraft::new(kind, props);
        if let Some(n) = node {
            draft = draft.node(&self.scoped_id(n));
        }
        if let Some((group, branch)) = &self.scope.branch {
            draft = draft.parallel(group, branch);
        }
        draft
    }

    /// A copy of `draft` for a child run, node ids relative to it.
    fn mirror(&self, m: &Mirror, draft: &EventDraft) -> Result<(), StoreError> {
        let mut copy = draft.clone();
        if let Some(id) = &draft.node_id {
            copy.node_id = Some(id.get(m.strip..).unwrap_or(id).to_string());
        }
        let emitter = Emitter {
            run_id: m.run_id.clone(),
            ..self.shared.emitter.clone()
        };
        emitter.emit(copy).map(|_| ())
    }

    /// Seeds the context (run start, loop restart, child workflow start).
    pub fn seed_context(&mut self) {
        let opts = self.shared.options;
        let work_dir = opts.workdir.display().to_string();
        let inherited = self.state.context.get(context::GRAPH_GOAL).cloned();
        context::seed(&mut self.state.context, self.wf, &opts.run_id, &work_dir);
        // The run's goal (create body, `[run] goal`) wins over the graph's; a manager's
        // child workflow keeps its own goal, or the parent's when it has none.
        let goal = match self.scope.kind {
            ScopeKind::Run => opts.goal.clone().map(Value::String),
            _ if self.wf.goal().is_empty() => inherited,
            _ => None,
        };
        if let Some(goal) = goal {
            self.state.set(context::GRAPH_GOAL.to_string(), goal);
        }
    }

    /// Walks from `node` until the exit, the scope's join, or a stop.
    pub fn walk(&mut self, node: usize) -> Result<WalkEnd, Stop> {
        self.walk_from(node, None)
    }

    /// [`Walker::walk`] entering `node` through edge `via` (a parallel branch's fork edge,
    /// whose `fidelity` applies to the branch's first stage). Every event of the walk is
    /// committed when it returns.
    pub fn walk_from(&mut self, node: usize, via: Option<usize>) -> Result<WalkEnd, Stop> {
        let end = self.walk_stages(node, via);
        let flushed = self.flush();
        match (end, flushed) {
            (Ok(end), Ok(())) => Ok(end),
            (Ok(_), Err(e)) => Err(e.into()),
            // The stop says why; a store that failed it fails this commit too.
            (Err(stop), _) => Err(stop),
        }
    }

    fn walk_stages(&mut self, mut node: usize, mut via: Option<usize>) -> Result<WalkEnd, Stop> {
        let mut last_status = StageStatus::Succeeded;
        let mut previous: Option<usize> = None;
        let mut branch_start = self.scope.kind == ScopeKind::Branch;
        loop {
            self.check_cancel()?;
            if Some(node) == self.scope.stop_at {
                return Ok(WalkEnd::Ended(last_status));
            }
            if self.wf.handler(node) == Some(HandlerKind::Exit) {
                if self.scope.kind == ScopeKind::Branch {
                    return Ok(WalkEnd::Ended(last_status));
                }
                match self.unsatisfied_goal_gate() {
                    None => {
                        self.pass_exit(node)?;
                        return Ok(WalkEnd::Exited);
                    }
                    Some(gate) => {
                        node = self.goal_gate_jump(node, gate)?;
                        via = None;
                        continue;
                    }
                }
            }
            self.enter(node)?;
            self.plan_stage(node, via, previous, branch_start);
            branch_start = false;
            let finished = self.run_stage(node)?;
            last_status = finished.outcome.status;
            self.record(node, &finished)?;
            let Some(route) = self.next_route(node, &finished.outcome) else {
                return self.no_route(node, &finished.outcome);
            };
            self.emit_edge(node, &route, finished.outcome.status)?;
            via = route.edge;
            if self.is_loop_restart(&route) {
                self.guard_restart(node, &route, &finished.outcome)?;
                self.restart(node, route.to)?;
                // A restart drops the fidelity of the edge that caused it (engine.md 4.6).
                via = None;
            }
            self.checkpoint(node, Some(route.to))?;
            previous = Some(node);
            node = route.to;
        }
    }

    fn check_cancel(&self) -> Result<(), Stop> {
        if self.scope.kind == ScopeKind::Run && self.scope.cancel.is_paused() {
            self.honour_pause()?;
        }
        if self.scope.cancel.wait_while_paused() || self.scope.cancel.is_cancelled() {
            return Err(Stop::Cancelled(
                self.scope
                    .cancel
                    .reason()
                    .unwrap_or_else(|| "cancelled".into()),
            ));
        }
        Ok(())
    }

    /// The run holds before its next stage: `run.paused` settles the pending pause request
    /// (`pending_control` shows `pause` until then). A run paused already (it was blocked on
    /// a question when the pause came) records nothing more.
    fn honour_pause(&self) -> Result<(), Stop> {
        let store = &self.shared.services.store;
        let paused = store
            .get_run(&self.shared.options.run_id)?
            .is_some_and(|r| matches!(r.status, crate::store::RunStatus::Paused { .. }));
        if !paused {
            self.emit("run.paused", None, json!({"prior_block": null}))?;
        }
        Ok(())
    }

    /// Counts the visit; the (N+1)th entry of a node limited to N fails the run.
    fn enter(&mut self, node: usize) -> Result<(), Stop> {
        let id = self.wf.node(node).id.to_string();
        let visits = self.state.visit(&id);
        let (limit, attr) = match self.wf.node_view(node).int("max_visits") {
            Some(n) => (n, "max_visits"),
            None => (
                self.wf.graph_view().int("max_node_visits").unwrap_or(0),
                "max_node_visits",
            ),
        };
        if limit > 0 && i64::from(visits) > limit {
            return Err(Stop::failed(format!(
                "node `{}` reached its visit limit: {attr}={limit} allows {limit} visit{}, and the run tried to enter it again",
                self.scoped_id(node),
                if limit == 1 { "" } else { "s" }
            )));
        }
        self.state.set(context::CURRENT_NODE, Value::String(id));
        self.state.set(context::VISIT_COUNT, Value::from(visits));
        Ok(())
    }

    /// Resolves the stage's fidelity and thread (engine.md 5.3), writes `internal.fidelity`
    /// and `internal.thread_id`, and builds the preamble of LLM and manager stages.
    fn plan_stage(
        &mut self,
        node: usize,
        via: Option<usize>,
        previous: Option<usize>,
        branch_start: bool,
    ) {
        let wf = self.wf;
        let mode = fidelity::resolve_fidelity(wf, via, node, branch_start);
        let inherited = self
            .state
            .context
            .get(fidelity::THREAD_KEY)
            .and_then(Value::as_str);
        let thread = fidelity::resolve_thread(wf, via, node, branch_start, inherited, previous);
        let run_id = &self.shared.options.run_id;
        let kind = wf.handler(node).unwrap_or(HandlerKind::Agent);
        let preamble = (kind.is_llm() || kind == HandlerKind::ManagerLoop)
            .then(|| {
                let ctx = &self.state.context;
                let history = History {
                    wf,
                    goal: ctx
                        .get(context::GRAPH_GOAL)
                        .and_then(Value::as_str)
                        .unwrap_or_else(|| wf.goal()),
                    run_id,
                    state: &self.state,
                };
                let parent = ctx.get(preamble::PARENT_PREAMBLE).and_then(Value::as_str);
                preamble::preamble_for(mode, &history, parent)
            })
            .flatten();
        let conversation = (mode == Fidelity::Full).then(|| {
            let scope = match &self.scope.branch {
                Some((group, branch)) => format!("{}{group}:{branch}", self.scope.prefix),
                None => self.scope.prefix.clone(),
            };
            fidelity::conversation_key(run_id, self.state.restarts, &scope, &thread)
        });
        self.state.set(
            fidelity::FIDELITY_KEY,
            Value::String(mode.as_str().to_string()),
        );
        self.state
            .set(fidelity::THREAD_KEY, Value::String(thread.clone()));
        self.plan = Some(StagePlan {
            fidelity: mode,
            thread,
            conversation,
            preamble,
        });
    }

    /// Attempts with retries, then `allow_partial` and `auto_status`; emits the stage events.
    fn run_stage(&mut self, node: usize) -> Result<Finished, Stop> {
        let kind = self.wf.handler(node).unwrap_or(HandlerKind::Agent);
        let nv = self.wf.node_view(node);
        let policy = failure::backoff(
            nv.nonempty("retry_policy"),
            nv.int("max_retries"),
            self.wf.graph_view().int("default_max_retries"),
        );
        let max_attempts = policy.attempts.max(1);
        let index = self.shared.stages.fetch_add(1, Ordering::Relaxed);
        let clock = self.services().clock.clone();
        let mut attempt = 1;
        let (outcome, attempt_start) = loop {
            let props = json!({"index": index, "handler_type": kind.name(), "attempt": attempt,
                       "max_attempts": max_attempts});
            // Committed with the handler's first event or the stage's end where nothing
            // happens in between; otherwise seen to start before the handler runs.
            if starts_quietly(kind) {
                self.hold("stage.started", Some(node), props)?;
            } else {
                self.emit("stage.started", Some(node), props)?;
            }
            let started = clock.now();
            let outcome = self.attempt(node, kind)?;
            let retry = outcome
                .failure
                .as_ref()
                .is_some_and(|f| f.retryable && outcome.is_failed())
                && attempt < max_attempts;
            if !retry {
                break (outcome, started);
            }
            let delay = failure::delay(&policy, attempt, self.shared.rng.lock().unit());
            let failure_json = outcome.failure.as_ref().map(|f| f.to_json(None));
            let mut props = json!({"index": index, "failure": failure_json, "will_retry": true,
                       "duration_ms": millis(clock.now() - started), "attempt": attempt});
            // Tokens a failed attempt spent are billed too.
            if let (Value::Object(m), Some(u)) = (&mut props, &outcome.usage) {
                m.insert("usage".into(), u.clone());
            }
            self.emit("stage.failed", Some(node), props)?;
            attempt += 1;
            self.emit(
                "stage.retrying",
                Some(node),
                json!({"index": index, "attempt": attempt, "max_attempts": max_attempts,
                       "delay_ms": millis(delay)}),
            )?;
            if clock.sleep(delay, &self.scope.cancel) {
                self.check_cancel()?;
            }
        };
        let outcome = self.post_process(node, outcome);
        let signature = outcome
            .failure
            .as_ref()
            .filter(|_| outcome.is_failed())
            .map(|f| failure::signature(&self.wf.node(node).id, f.class, &f.message));
        let duration_ms = millis(clock.now() - attempt_start);
        let end = StageEnd {
            index,
            attempt,
            max_attempts,
            duration_ms,
        };
        self.emit_stage_end(node, &end, &outcome, signature.as_deref())?;
        Ok(Finished {
            outcome,
            attempts: attempt,
            signature,
        })
    }

    /// `stage.failed` (final) or `stage.completed`.
    fn emit_stage_end(
        &self,
        node: usize,
        end: &StageEnd,
        outcome: &StageOutcome,
        signature: Option<&str>,
    ) -> Result<(), Stop> {
        let StageEnd {
            index,
            attempt,
            max_attempts,
            duration_ms,
        } = *end;
        if let (true, Some(f)) = (outcome.is_failed(), &outcome.failure) {
            let mut props = json!({"index": index, "failure": f.to_json(signature), "will_retry": false,
                       "duration_ms": duration_ms, "attempt": attempt});
            if let (Value::Object(m), Some(u)) = (&mut props, &outcome.usage) {
                m.insert("usage".into(), u.clone());
            }
            self.hold("stage.failed", Some(node), props)?;
            return Ok(());
        }
        let mut props = json!({
            "index": index,
            "duration_ms": duration_ms,
            "status": outcome.status.as_str(),
            "suggested_next_ids": outcome.suggested_next_ids,
            "attempt": attempt,
            "max_attempts": max_attempts,
        });
        if let Value::Object(m) = &mut props {
            if let Some(l) = &outcome.preferred_label {
                m.insert("preferred_label".into(), Value::String(l.clone()));
            }
            if !outcome.context_updates.is_empty() {
                m.insert(
                    "context_updates".into(),
                    Value::Object(outcome.context_updates.clone()),
                );
            }
            if let Some(r) = &outcome.response {
                m.insert("response".into(), Value::String(r.clone()));
            }
            if let Some(n) = &outcome.notes {
                m.insert("notes".into(), Value::String(n.clone()));
            }
            if let Some(u) = &outcome.usage {
                m.insert("usage".into(), u.clone());
            }
            if !outcome.files_touched.is_empty() {
                m.insert("files_touched".into(), json!(outcome.files_touched));
            }
        }
        self.hold("stage.completed", Some(node), props)?;
        Ok(())
    }

    /// One attempt under a per-attempt child token, cancelled at the node `timeout` (command
    /// nodes kill their process themselves; human nodes use it as the question timeout).
    fn attempt(&self, node: usize, kind: HandlerKind) -> Result<StageOutcome, Stop> {
        let token = self.scope.cancel.child();
        let timeout = self
            .wf
            .node_view(node)
            .duration("timeout")
            .filter(|d| !d.is_zero());
        let timer = timeout
            .filter(|_| uses_attempt_timer(kind))
            .map(|t| start_timer(&token, t));
        let cx = StageCtx::new(self, node, kind, &token);
        let result = handlers::run(&cx);
        let timed_out = token.reason().as_deref() == Some(TIMED_OUT);
        token.cancel(ATTEMPT_DONE);
        if let Some(t) = timer {
            let _ = t.join();
        }
        match result {
            Ok(outcome) => Ok(outcome),
            Err(Interrupt::Store(e)) => Err(e.into()),
            Err(Interrupt::Cancelled) if timed_out && !self.scope.cancel.is_cancelled() => {
                Ok(StageOutcome::failed(Failure::timeout(format!(
                    "stage `{}` timed out after {}",
                    self.scoped_id(node),
                    describe_duration(timeout.unwrap_or_default())
                ))))
            }
            Err(Interrupt::Cancelled) => {
                self.check_cancel()?;
                Err(Stop::Cancelled("cancelled".into()))
            }
        }
    }

    /// `allow_partial` (a retryable failure after the last attempt becomes
    /// partially_succeeded), then `auto_status` (anything but succeeded/skipped becomes
    /// succeeded).
    fn post_process(&self, node: usize, mut o: StageOutcome) -> StageOutcome {
        let nv = self.wf.node_view(node);
        let retryable = o.failure.as_ref().is_some_and(|f| f.retryable);
        if o.is_failed() && retryable && nv.flag("allow_partial") {
            o.status = StageStatus::PartiallySucceeded;
            o.notes = o
                .failure
                .take()
                .map(|f| format!("allow_partial: {}", f.message));
        }
        if nv.flag("auto_status")
            && !matches!(o.status, StageStatus::Succeeded | StageStatus::Skipped)
        {
            let was = o.status.as_str();
            o.status = StageStatus::Succeeded;
            let why = o.failure.take().map(|f| f.message).or(o.notes.take());
            o.notes = Some(match why {
                Some(m) => format!("auto_status: {was} ({m})"),
                None => format!("auto_status: {was}"),
            });
        }
        o
    }

    /// Folds a finished stage into the state and the context; the breaker may stop the run.
    fn record(&mut self, node: usize, f: &Finished) -> Result<(), Stop> {
        let id = self.wf.node(node).id.clone();
        let o = &f.outcome;
        self.state
            .complete(&id, o.status, f.attempts.saturating_sub(1));
        let kind = self.wf.handler(node).unwrap_or(HandlerKind::Agent);
        self.state.note(&id, StageNote::of(kind, o));
        if let Some(nested) = &o.nested {
            self.merge_nested(nested);
        }
        for (k, v) in &o.context_updates {
            self.state.set(k.clone(), v.clone());
            self.written.insert(k.clone());
        }
        self.write_engine_keys(node, &id, f);
        if let Some(mirror) = &self.mirror {
            *mirror.lock() = self.state.context.clone();
        }
        match &f.signature {
            Some(sig) => self.count_signature(node, sig),
            None => Ok(()),
        }
    }

    fn write_engine_keys(&mut self, node: usize, id: &str, f: &Finished) {
        let st = &mut self.state;
        let o = &f.outcome;
        st.set(
            format!("{}{id}", context::RETRY_COUNT_PREFIX),
            Value::from(f.attempts.saturating_sub(1)),
        );
        // Start, exit and conditional nodes do no work: they leave `last_stage` and the
        // previous stage's outcome keys, so a diamond routes on the stage before it.
        if !writes_last_stage(self.wf.handler(node)) {
            return;
        }
        st.set(context::LAST_STAGE, Value::String(id.to_string()));
        st.set(context::OUTCOME, Value::String(o.status.as_str().into()));
        let failure = o.failure.as_ref().filter(|_| o.is_failed());
        let class = failure.map(|f| f.class.as_str()).unwrap_or("");
        st.set(context::FAILURE_CLASS, Value::String(class.into()));
        let sig = f.signature.clone().unwrap_or_default();
        st.set(context::FAILURE_SIGNATURE, Value::String(sig));
        match &o.preferred_label {
            Some(l) => st.set(context::PREFERRED_LABEL, Value::String(l.clone())),
            None => st.remove(context::PREFERRED_LABEL),
        }
    }

    /// Folds branch stage visits into this state, in order (branches never restart, so
    /// their path and completed nodes are the same list).
    fn merge_nested(&mut self, n: &Nested) {
        for id in &n.path {
            let latest = |list: &[(String, StageStatus)]| {
                list.iter().rev().find(|(o, _)| o == id).map(|(_, s)| *s)
            };
            let status = latest(&n.outcomes).unwrap_or(StageStatus::Succeeded);
            let retries = n
                .retries
                .iter()
                .rev()
                .find(|(r, _)| r == id)
                .map_or(0, |(_, c)| *c);
            self.state.complete(id, status, retries);
            let note = n.notes.iter().rev().find(|(o, _)| o == id);
            self.state
                .note(id, note.map(|(_, x)| x.clone()).unwrap_or_default());
        }
        for (id, v) in &n.visits {
            self.state.add_visits(id, *v);
        }
        for (sig, c) in &n.signatures {
            self.state.count_signature(sig, *c);
        }
    }

    fn count_signature(&mut self, node: usize, sig: &str) -> Result<(), Stop> {
        let count = self.state.count_signature(sig, 1);
        let limit = self
            .wf
            .graph_view()
            .int("loop_restart_signature_limit")
            .filter(|&l| l >= 1)
            .unwrap_or(DEFAULT_SIGNATURE_LIMIT);
        if i64::from(count) >= limit {
            return Err(Stop::failed(format!(
                "stage `{}` failed the same way {count} times (signature `{sig}`, loop_restart_signature_limit={limit}); stopping the run",
                self.scoped_id(node)
            )));
        }
        Ok(())
    }

    fn next_route(&self, node: usize, o: &StageOutcome) -> Option<Route> {
        if let Some(target) = &o.jump_to {
            let to = self.wf.node_index(target)?;
            return Some(Route::jump(to, routing::RouteReason::ParallelJoin));
        }
        let ctx = &self.state.context;
        let transparent = self.wf.handler(node) == Some(HandlerKind::Conditional);
        let text = |key: &str| ctx.get(key).and_then(Value::as_str).unwrap_or("");
        let (outcome, label) = if transparent {
            (text(context::OUTCOME), text(context::PREFERRED_LABEL))
        } else {
            (
                o.status.as_str(),
                o.preferred_label.as_deref().unwrap_or(""),
            )
        };
        let env = MapEnv {
            outcome,
            preferred_label: label,
            context: ctx,
        };
        let input = RoutingInput {
            status: o.status,
            preferred_label: o.preferred_label.as_deref(),
            suggested_next_ids: &o.suggested_next_ids,
        };
        routing::select_route(self.wf, node, input, &env, &mut self.shared.rng.lock())
    }

    fn no_route(&self, node: usize, o: &StageOutcome) -> Result<WalkEnd, Stop> {
        if let (true, Some(f)) = (o.is_failed(), &o.failure) {
            return Err(Stop::Failed(RunFailure {
                message: format!("stage `{}` failed: {}", self.scoped_id(node), f.message),
                reason: FailureReason::of_class(f.class),
            }));
        }
        if self.scope.kind == ScopeKind::Branch && self.wf.out_edges[node].is_empty() {
            return Ok(WalkEnd::Ended(o.status));
        }
        Err(Stop::failed(format!(
            "no route from `{}`: the stage ended {} and none of its outgoing edges applies",
            self.scoped_id(node),
            o.status.as_str()
        )))
    }

    fn emit_edge(&self, from: usize, route: &Route, status: StageStatus) -> Result<(), Stop> {
        let mut props = json!({
            "from_node": self.scoped_id(from),
            "to_node": self.scoped_id(route.to),
            "reason": route.reason.as_str(),
            "stage_status": status.as_str(),
            "is_jump": route.is_jump(),
        });
        if let (Some(e), Value::Object(m)) = (route.edge, &mut props) {
            let ev = self.wf.edge_view(e);
            if let Some(l) = ev.nonempty("label") {
                m.insert("label".into(), Value::String(l.into()));
            }
            if let Some(c) = ev.nonempty("condition") {
                m.insert("condition".into(), Value::String(c.into()));
            }
            if route.random {
                m.insert("random".into(), Value::Bool(true));
            }
        }
        self.hold("edge.selected", Some(from), props)?;
        Ok(())
    }

    fn is_loop_restart(&self, route: &Route) -> bool {
        route
            .edge
            .is_some_and(|e| self.wf.edge_view(e).flag("loop_restart"))
    }

    /// Only successes and transient infrastructure failures may take a `loop_restart` edge,
    /// and never inside a parallel branch.
    fn guard_restart(&self, node: usize, route: &Route, o: &StageOutcome) -> Result<(), Stop> {
        if self.scope.kind == ScopeKind::Branch {
            return Err(Stop::failed(format!(
                "stage `{}` selected a loop_restart edge inside a parallel branch; restarts are only allowed outside branches",
                self.scoped_id(node)
            )));
        }
        match (&o.failure, o.is_failed()) {
            (Some(f), true) if f.class != FailureClass::TransientInfra => Err(Stop::failed(format!(
                "stage `{}` failed ({}: {}); only transient infrastructure failures may take the loop_restart edge to `{}`",
                self.scoped_id(node),
                f.class.as_str(),
                f.message,
                self.scoped_id(route.to)
            ))),
            _ => Ok(()),
        }
    }

    /// Context reset and re-seeded; completed nodes, outcomes and retry counts cleared;
    /// visits and failure signatures kept.
    fn restart(&mut self, from: usize, to: usize) -> Result<(), Stop> {
        self.state.restart();
        self.emit(
            "loop.restart",
            Some(from),
            json!({"from_node": self.scoped_id(from), "to_node": self.scoped_id(to),
                   "restart": self.state.restarts}),
        )?;
        self.seed_context();
        Ok(())
    }

    /// `checkpoint.completed` after every stage of the run itself (not branches or
    /// children: their parent stage is the unit of resume).
    fn checkpoint(&mut self, node: usize, next: Option<usize>) -> Result<(), Stop> {
        if self.scope.kind != ScopeKind::Run {
            return Ok(());
        }
        let sha = self.checkpoint_workspace(node)?;
        let (mut props, full) = self
            .state
            .checkpoint_payload(
                &self.wf.node(node).id,
                next.map(|n| self.wf.node(n).id.as_str()),
                self.shared.stages.load(Ordering::Relaxed),
            )
            .map_err(|e| Stop::failed(format!("cannot encode the checkpoint: {e}")))?;
        if let (Some(sha), Some(obj)) = (sha, props.as_object_mut()) {
            obj.insert("git_commit_sha".into(), Value::String(sha));
        }
        let seq = self.emit_seq("checkpoint.completed", Some(node), props)?;
        self.state.checkpointed(seq, full);
        Ok(())
    }

    /// Commits what the stage changed in the workspace (`workspace.checkpoint` with the
    /// commit and the stage's and run's diff figures) and returns the workspace's current
    /// checkpoint, for the run checkpoint a resume restores. A failed commit is recorded
    /// (`workspace.checkpoint.failed`) and does not fail the run: the files are still there.
    fn checkpoint_workspace(&self, node: usize) -> Result<Option<String>, Stop> {
        let ws = &self.services().workspace;
        let stage = self.wf.node(node).id.clone();
        match ws.checkpoint(&stage) {
            Ok(Some(cp)) => {
                self.hold(
                    "workspace.checkpoint",
                    Some(node),
                    json!({"checkpoint_id": cp.id, "stage": stage,
                           "stage_diff": cp.stage_diff, "diff": cp.run_diff}),
                )?;
                Ok(Some(cp.id))
            }
            Ok(None) => Ok(ws.head()),
            Err(error) => {
                self.hold(
                    "workspace.checkpoint.failed",
                    Some(node),
                    json!({"stage": stage, "error": error}),
                )?;
                Ok(ws.head())
            }
        }
    }

    /// The first goal gate, in declaration order, whose latest outcome is neither
    /// succeeded nor partially_succeeded (gates that never ran are not checked).
    fn unsatisfied_goal_gate(&self) -> Option<usize> {
        (0..self.wf.graph.nodes.len()).find(|&i| {
            self.wf.node_view(i).flag("goal_gate")
                && self
                    .state
                    .outcomes
                    .get(self.wf.node(i).id.as_str())
                    .is_some_and(|s| {
                        !matches!(s, StageStatus::Succeeded | StageStatus::PartiallySucceeded)
                    })
        })
    }

    fn goal_gate_jump(&mut self, exit: usize, gate: usize) -> Result<usize, Stop> {
        let status = self
            .state
            .outcomes
            .get(self.wf.node(gate).id.as_str())
            .copied()
            .unwrap_or(StageStatus::Failed);
        let Some(route) = routing::retry_target(self.wf, gate, true) else {
            return Err(Stop::failed(format!(
                "goal gate `{}` is not satisfied (its latest outcome is {}) and it has no retry target",
                self.scoped_id(gate),
                status.as_str()
            )));
        };
        let props = json!({
            "from_node": self.scoped_id(exit),
            "to_node": self.scoped_id(route.to),
            "reason": "goal_gate",
            "goal_gate": self.scoped_id(gate),
            "via": route.reason.as_str(),
            "stage_status": status.as_str(),
            "is_jump": true,
        });
        self.emit("edge.selected", Some(exit), props)?;
        self.checkpoint(exit, Some(route.to))?;
        Ok(route.to)
    }

    /// The exit's handler never runs: it is recorded as a succeeded stage.
    fn pass_exit(&mut self, node: usize) -> Result<(), Stop> {
        let index = self.shared.stages.fetch_add(1, Ordering::Relaxed);
        self.hold(
            "stage.started",
            Some(node),
            json!({"index": index, "handler_type": "exit", "attempt": 1, "max_attempts": 1}),
        )?;
        self.hold(
            "stage.completed",
            Some(node),
            json!({"index": index, "duration_ms": 0, "status": "succeeded",
                   "suggested_next_ids": [], "attempt": 1, "max_attempts": 1}),
        )?;
        let id = self.wf.node(node).id.clone();
        self.state.complete(&id, StageStatus::Succeeded, 0);
        Ok(())
    }

    /// What a branch walk adds to its parent's state (everything since `base`).
    pub fn nested_since(&self, base: &RunState) -> Nested {
        let mut visits = std::collections::BTreeMap::new();
        for (id, v) in &self.state.visits {
            let before = base.visits.get(id).copied().unwrap_or(0);
            if *v > before {
                visits.insert(id.clone(), v - before);
            }
        }
        let mut signatures = std::collections::BTreeMap::new();
        for (sig, c) in &self.state.signatures {
            let before = base.signatures.get(sig).copied().unwrap_or(0);
            if *c > before {
                signatures.insert(sig.clone(), c - before);
            }
        }
        let new_path = self.state.path.get(base.path.len()..).unwrap_or(&[]);
        let new_completed = self
            .state
            .completed
            .get(base.completed.len()..)
            .unwrap_or(&[]);
        Nested {
            path: new_path.to_vec(),
            completed: new_completed.to_vec(),
            outcomes: new_completed
                .iter()
                .filter_map(|id| self.state.outcomes.get(id).map(|s| (id.clone(), *s)))
                .collect(),
            retries: new_completed
                .iter()
                .filter_map(|id| self.state.retries.get(id).map(|r| (id.clone(), *r)))
                .collect(),
            notes: new_completed
                .iter()
                .filter_map(|id| self.state.notes.get(id).map(|n| (id.clone(), n.clone())))
                .collect(),
            visits,
            signatures,
        }
    }
}

/// Handlers that return at once with no effect, or whose first act is to record an event
/// (a command's `command.started`, before its process starts): their `stage.started` is
/// committed together with that event, or with the stage's end.
fn starts_quietly(kind: HandlerKind) -> bool {
    matches!(
        kind,
        HandlerKind::Start | HandlerKind::Conditional | HandlerKind::Command
    )
}

/// Handlers that get the generic per-attempt timer; commands kill their own process and
/// human gates use `timeout` as the question's timeout.
fn uses_attempt_timer(kind: HandlerKind) -> bool {
    !matches!(
        kind,
        HandlerKind::Command | HandlerKind::Human | HandlerKind::Start | HandlerKind::Exit
    )
}

/// Whether a stage of this handler is "a stage that does work": it sets `last_stage`,
/// `outcome`, `failure_class`, `failure_signature` and `preferred_label`. Start, exit and
/// conditional nodes do not (docs/decisions.md lists the handlers).
fn writes_last_stage(kind: Option<HandlerKind>) -> bool {
    !matches!(
        kind,
        Some(HandlerKind::Start | HandlerKind::Exit | HandlerKind::Conditional)
    )
}
