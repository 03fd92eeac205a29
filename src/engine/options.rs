//! How a run is asked to run ([`RunOptions`]): which run, where, with what inputs, seed,
//! goal and model, and whether a manager's child runs need approval ([`ChildApproval`]).
//! Handlers read these without importing the front door (`run`).
//!
//! Must not touch: running anything (plain data).

use super::context::Context;
use crate::workflow::{FileSource, NoFiles, Workflow};
use std::path::PathBuf;
use std::sync::Arc;

/// How to run: which run (already created in the store), where, with what inputs.
#[derive(Clone)]
pub struct RunOptions {
    pub run_id: String,
    /// The working directory of commands and agents.
    pub workdir: PathBuf,
    /// `$inputs.x` values and `SVC_INPUT_*` variables.
    pub inputs: Context,
    /// Files relative to the workflow (output schemas, child workflows).
    pub files: Arc<dyn FileSource + Send + Sync>,
    /// Seed of weighted edge selection and retry jitter; `None` derives one from the run id.
    pub seed: Option<u64>,
    /// The run's goal (create body or `[run] goal`); `None` keeps the graph's `goal`. It is
    /// `$goal`, `$SVC_GOAL`, `graph.goal`, the preambles' goal and `run.started`'s.
    pub goal: Option<String>,
    /// The run's model: LLM stages whose node names no `model` use it.
    pub model: Option<ModelChoice>,
    /// Whether a manager stage's child run must be approved before it runs.
    pub child_approval: ChildApproval,
    /// The run's MCP servers, frozen when the run was created; an agent stage uses all of
    /// them or the subset its `mcp_servers` attribute names.
    pub mcp_servers: Vec<crate::mcp::ServerDef>,
    /// The run's LLM budget in micro-USD: an LLM stage does not call a model once the run's
    /// recorded cost has reached it (the run fails `budget_exceeded`).
    pub budget_usd_micros: Option<i64>,
}

/// `[run] child_approval` as the engine applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChildApproval {
    /// Children run at once.
    #[default]
    Automatic,
    /// A child waits in `pending{approval_required}` until approved or denied over HTTP.
    Required,
    /// Approval is required but nobody can give it (`svc run` without `--auto-approve`):
    /// the manager stage fails saying so.
    Unavailable,
}

/// A model the run asked for (`provider` optional: the catalog knows most names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelChoice {
    pub provider: Option<String>,
    pub name: String,
}

impl RunOptions {
    pub fn new(run_id: &str, workdir: PathBuf) -> RunOptions {
        RunOptions {
            run_id: run_id.to_string(),
            workdir,
            inputs: Context::new(),
            files: Arc::new(NoFiles),
            seed: None,
            goal: None,
            model: None,
            child_approval: ChildApproval::Automatic,
            mcp_servers: Vec::new(),
            budget_usd_micros: None,
        }
    }

    /// The goal this run works towards: the run's own, else the graph's.
    pub fn goal_of<'a>(&'a self, wf: &'a Workflow) -> &'a str {
        self.goal.as_deref().unwrap_or_else(|| wf.goal())
    }
}
