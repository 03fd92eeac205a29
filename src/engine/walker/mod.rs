//! The stage loop (engine.md 3.2 with decisions.md rules): visits and their limits, each
//! stage's fidelity, thread and preamble (resolved by `fidelity`), the attempt loop with
//! retries, backoff and per-attempt timeouts, `allow_partial` and `auto_status`, recording
//! outcomes into the state and the context, the failure-signature breaker, routing,
//! `loop_restart`, goal gates at the exit, and checkpoints.
//!
//! One [`Walker`] walks one scope: the run itself, a parallel branch (stops at its join,
//! no checkpoints) or a child workflow of a manager loop (events prefixed with the manager
//! node, no checkpoints).
//! Files: this one (the walk loop and its types), `stage` (one stage: plan, attempts,
//! recording), `route` (routing, restarts, checkpoints, goal gates), `emit` (events).
//! Must not touch: handler internals (see `handlers/`), run-level events (see `run.rs`).

mod emit;
mod route;
mod stage;

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
use super::services::{Capture, Services};
use super::timing::{describe_duration, millis, start_timer, TIMED_OUT};
use crate::base::event_kind;
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
#[non_exhaustive]
pub enum FailureReason {
    /// A stage failed with nowhere to go, the graph was wrong for the input, or it stalled.
    WorkflowError,
    /// Cancelled by its caller (`CancelToken::cancel`, the API, a signal).
    Cancelled,
    /// A tool, provider or sandbox outside the workflow failed after its retries.
    TransientInfra,
    /// A stage failed on an exhausted budget: a turn, token or context limit.
    BudgetExhausted,
    /// The run's recorded LLM cost reached its budget (`budget_usd`, `[run] max_usd`).
    BudgetExceeded,
    /// The graph succeeded but its work could not be published (`Services::publisher`).
    PublishFailed,
}

impl FailureReason {
    /// The wire name (`workflow_error`, `cancelled`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::WorkflowError => "workflow_error",
            FailureReason::Cancelled => "cancelled",
            FailureReason::TransientInfra => "transient_infra",
            FailureReason::BudgetExhausted => "budget_exhausted",
            FailureReason::BudgetExceeded => "budget_exceeded",
            FailureReason::PublishFailed => "publish_failed",
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
                event_kind::RUN_BLOCKED,
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
                .emit(EventDraft::new(event_kind::RUN_UNBLOCKED, Value::Null))?;
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
            self.emit(event_kind::RUN_PAUSED, None, json!({"prior_block": null}))?;
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
