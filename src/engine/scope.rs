//! What one walk is: the run itself, a parallel branch or a manager's child workflow
//! ([`ScopeKind`]), how its events are tagged, where it stops, its cancel token and files,
//! and the child runs that mirror its events ([`Mirror`]).
//!
//! Must not touch: walking (the walker), running stages (handlers).

use crate::base::cancel::CancelToken;
use crate::workflow::FileSource;
use std::sync::Arc;

/// Which kind of walk this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScopeKind {
    Run,
    Branch,
    Child,
}

/// What a walk is allowed to do and how its events are tagged.
#[derive(Clone)]
pub(crate) struct Scope {
    pub kind: ScopeKind,
    /// Prepended to node ids in events (`<manager node>/` for child workflows).
    pub prefix: String,
    /// `(parallel_group_id, parallel_branch_id)` for events inside a branch.
    pub branch: Option<(String, String)>,
    /// A branch stops when routing reaches this node (its join).
    pub stop_at: Option<usize>,
    pub cancel: CancelToken,
    /// Files relative to this workflow (schemas, child workflows).
    pub files: Arc<dyn FileSource + Send + Sync>,
    /// The manager child runs this walk is inside, outermost first: each gets a copy of
    /// every event with its node ids relative to it (the first `strip` bytes of the scoped
    /// id removed). Empty for the run itself.
    pub mirrors: Vec<Mirror>,
}

/// A child run that records the events of its subtree (see [`Scope::mirrors`]).
#[derive(Clone, Debug)]
pub(crate) struct Mirror {
    pub run_id: String,
    /// Length of the scoped-id prefix (`<manager>/`) that its node ids drop.
    pub strip: usize,
}

impl Scope {
    /// The run this walk belongs to (the innermost child run), `None` for the run itself.
    pub fn run_id(&self) -> Option<&str> {
        self.mirrors.last().map(|m| m.run_id.as_str())
    }
}
