//! Stage handlers: one module per handler kind, named after it (`command`, `human`,
//! `parallel`, `fan_in`, `manager_loop`, `wait`, `llm` for agent and prompt), dispatched by
//! `run`; `child_run` is the manager loop's child run record. Each handler turns
//! one attempt of one node into a [`StageOutcome`] (or an [`Interrupt`] when the attempt's
//! token was cancelled or the store failed).
//! Must not touch: routing, retries, visits or checkpoints (the walker owns those).

mod child_run;
mod command;
mod fan_in;
pub mod human;
mod llm;
mod manager_loop;
mod parallel;
mod pull_request;
mod wait;

use super::checkpoint::RunState;
use super::context::{self, Context};
use super::events::QuietGuard;
use super::fidelity::StagePlan;
use super::options::RunOptions;
use super::outcome::StageOutcome;
use super::scope::Scope;
use super::services::Services;
use super::walker::Walker;
use crate::base::cancel::CancelToken;
use crate::procs::EnvSnapshot;
use crate::store::StoreError;
use crate::workflow::attrs::View;
use crate::workflow::{HandlerKind, Workflow};
use serde_json::Value;

/// Why an attempt produced no outcome.
#[derive(Debug)]
pub enum Interrupt {
    /// The attempt's token was cancelled (run cancelled, node timeout, manager stop).
    Cancelled,
    Store(StoreError),
    /// The run's LLM budget is spent: the run stops (`budget_exceeded`) before the next
    /// model call; the message names the budget and the spend.
    BudgetExceeded(String),
}

impl From<StoreError> for Interrupt {
    fn from(e: StoreError) -> Interrupt {
        Interrupt::Store(e)
    }
}

pub type HandlerResult = Result<StageOutcome, Interrupt>;

/// What a handler sees of its stage. The walker stays private: handlers reach the run
/// through these methods, and start nested walks (a branch, a child workflow) with
/// [`StageCtx::sub_walk`].
pub(crate) struct StageCtx<'a, 'w> {
    walker: &'a Walker<'w>,
    pub node: usize,
    pub kind: HandlerKind,
    /// This attempt's token (child of the scope's token).
    pub cancel: &'a CancelToken,
}

impl<'a, 'w> StageCtx<'a, 'w> {
    pub fn new(
        walker: &'a Walker<'w>,
        node: usize,
        kind: HandlerKind,
        cancel: &'a CancelToken,
    ) -> StageCtx<'a, 'w> {
        StageCtx {
            walker,
            node,
            kind,
            cancel,
        }
    }

    /// The workflow this walk runs.
    pub fn wf(&self) -> &'w Workflow {
        self.walker.wf
    }

    pub fn services(&self) -> &'a Services {
        self.walker.services()
    }

    pub fn options(&self) -> &'a RunOptions {
        self.walker.options()
    }

    /// What this walk is (run, branch or child workflow), its files and mirrors.
    pub fn scope(&self) -> &'a Scope {
        &self.walker.scope
    }

    /// The walk's run state (context, visits, notes).
    pub fn state(&self) -> &'a RunState {
        &self.walker.state
    }

    /// The fidelity, thread and preamble the walker resolved for this stage.
    pub fn plan(&self) -> Option<&'a StagePlan> {
        self.walker.plan.as_ref()
    }

    /// The environment commands inherit.
    pub fn base_env(&self) -> Option<&'a EnvSnapshot> {
        self.walker.shared.base_env()
    }

    /// While the guard lives, waiting does not count toward the stall watchdog.
    pub fn quiet(&self) -> QuietGuard<'a> {
        self.walker.shared.emitter.activity.quiet()
    }

    /// Opens a human question across the run (`run.blocked`, ref-counted).
    pub fn block(&self) -> Result<(), StoreError> {
        self.walker.shared.block()
    }

    /// Closes one (`run.unblocked` when it was the last).
    pub fn unblock(&self) -> Result<(), StoreError> {
        self.walker.shared.unblock()
    }

    /// `node`'s id as events and messages show it.
    pub fn scoped_id_of(&self, node: usize) -> String {
        self.walker.scoped_id(node)
    }

    /// A nested walk of `wf` (this workflow for a parallel branch, a child workflow for a
    /// manager) sharing the run, in `scope`, from `state`.
    pub fn sub_walk(&self, wf: &'w Workflow, scope: Scope, state: RunState) -> Walker<'w> {
        Walker::new(wf, self.walker.shared, scope, state)
    }

    pub fn id(&self) -> &str {
        &self.walker.wf.node(self.node).id
    }

    /// The node id as events and messages show it.
    pub fn scoped_id(&self) -> String {
        self.walker.scoped_id(self.node)
    }

    pub fn view(&self) -> View<'_> {
        self.walker.wf.node_view(self.node)
    }

    pub fn context(&self) -> &Context {
        &self.walker.state.context
    }

    pub fn inputs(&self) -> &Context {
        &self.walker.options().inputs
    }

    pub fn goal(&self) -> &str {
        self.context()
            .get(context::GRAPH_GOAL)
            .and_then(Value::as_str)
            .unwrap_or_else(|| self.walker.wf.goal())
    }

    /// `$goal`, `$context.x`, `$inputs.x` expanded.
    pub fn expand(&self, text: &str) -> String {
        context::expand(text, self.goal(), self.context(), self.inputs())
    }

    pub fn emit(&self, kind: &str, props: Value) -> Result<(), StoreError> {
        self.walker.emit(kind, Some(self.node), props)
    }

    /// Records an event committed with the stage's next one (see `Walker::hold`): only for
    /// an event after which the handler returns without any other effect.
    pub fn hold(&self, kind: &str, props: Value) -> Result<(), StoreError> {
        self.walker.hold(kind, Some(self.node), props)
    }
}

pub(crate) fn run(cx: &StageCtx<'_, '_>) -> HandlerResult {
    match cx.kind {
        HandlerKind::Start | HandlerKind::Exit | HandlerKind::Conditional => {
            Ok(StageOutcome::succeeded())
        }
        HandlerKind::Command => command::run(cx),
        HandlerKind::Wait => wait::run(cx),
        HandlerKind::Human => human::run(cx),
        HandlerKind::Agent | HandlerKind::Prompt => llm::run(cx),
        HandlerKind::Parallel => parallel::run(cx),
        HandlerKind::FanIn => fan_in::run(cx),
        HandlerKind::ManagerLoop => manager_loop::run(cx),
        HandlerKind::PullRequest => pull_request::run(cx),
    }
}
