//! The versioned workspace as the engine sees it: the [`Workspace`] trait the walker
//! checkpoints through after every stage, its [`WorkspaceCheckpoint`], and [`NoWorkspace`].
//!
//! The trait lives here, below the engine, so that `workspace` (which implements it) and
//! `sandbox::lifecycle` (which prepares workspaces) never import the engine that uses them.
//! Must not touch: git (that is [`super::git`]'s), the store, the engine's loop.

/// A checkpoint of the workspace taken after a stage.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceCheckpoint {
    /// The checkpoint id (a commit on the run branch).
    pub id: String,
    /// What this stage changed: `{files_changed, additions, deletions}`.
    pub stage_diff: serde_json::Value,
    /// Everything the run changed so far, against its base (the Run's `diff`).
    pub run_diff: serde_json::Value,
}

/// The run's working files, versioned: the walker checkpoints them after every stage of
/// the run and a resume puts them back to the checkpoint it resumes from.
pub trait Workspace: Send + Sync {
    /// Records what stage `stage` changed; `None` when it changed nothing.
    fn checkpoint(&self, stage: &str) -> Result<Option<WorkspaceCheckpoint>, String>;
    /// The latest checkpoint id, `None` without a versioned workspace.
    fn head(&self) -> Option<String>;
    /// Puts the files back exactly as they were at checkpoint `id`.
    fn restore(&self, id: &str) -> Result<(), String>;
}

/// No versioned workspace (the CLI in the user's own directory, tests).
pub struct NoWorkspace;

impl Workspace for NoWorkspace {
    fn checkpoint(&self, _: &str) -> Result<Option<WorkspaceCheckpoint>, String> {
        Ok(None)
    }
    fn head(&self) -> Option<String> {
        None
    }
    fn restore(&self, _: &str) -> Result<(), String> {
        Ok(())
    }
}
