//! Stage handlers: one module per handler kind, named after it (`command`, `human`,
//! `parallel`, `fan_in`, `manager_loop`, `wait`, `llm` for agent and prompt), dispatched by
//! [`run`]; `child_run` is the manager loop's child run record. Each handler turns
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
mod wait;

use super::context::{self, Context};
use super::outcome::StageOutcome;
use super::walker::Walker;
use crate::base::cancel::CancelToken;
use crate::store::StoreError;
use crate::workflow::attrs::View;
use crate::workflow::HandlerKind;
use serde_json::Value;

/// Why an attempt produced no outcome.
#[derive(Debug)]
pub enum Interrupt {
    /// The attempt's token was cancelled (run cancelled, node timeout, manager stop).
    Cancelled,
    Store(StoreError),
}

impl From<StoreError> for Interrupt {
    fn from(e: StoreError) -> Interrupt {
        Interrupt::Store(e)
    }
}

pub type HandlerResult = Result<StageOutcome, Interrupt>;

/// What a handler sees of its stage.
pub(crate) struct StageCtx<'a, 'w> {
    pub walker: &'a Walker<'w>,
    pub node: usize,
    pub kind: HandlerKind,
    /// This attempt's token (child of the scope's token).
    pub cancel: &'a CancelToken,
}

impl StageCtx<'_, '_> {
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
    }
}
