//! The kinds of run events, named once: every emitter and every reader that matches on a
//! kind uses these constants, so a misspelt kind does not compile.
//!
//! They live in `base` because emitters sit in layers that may not import each other (the
//! agent never imports the store). The strings are the wire format of SPEC 6: a constant's
//! value never changes once released, and tests keep asserting the literal strings.
//! Must not: hold anything but the names (payloads belong to their emitters).

// Run lifecycle (folded into the run row by `store::fold`).
pub const RUN_CREATED: &str = "run.created";
pub const RUN_SUBMITTED: &str = "run.submitted";
pub const RUN_PENDING: &str = "run.pending";
pub const RUN_APPROVED: &str = "run.approved";
pub const RUN_DENIED: &str = "run.denied";
pub const RUN_QUEUED: &str = "run.queued";
pub const RUN_STARTING: &str = "run.starting";
pub const RUN_STARTED: &str = "run.started";
pub const RUN_RUNNING: &str = "run.running";
pub const RUN_BLOCKED: &str = "run.blocked";
pub const RUN_UNBLOCKED: &str = "run.unblocked";
pub const RUN_PAUSE_REQUESTED: &str = "run.pause.requested";
pub const RUN_PAUSED: &str = "run.paused";
pub const RUN_UNPAUSE_REQUESTED: &str = "run.unpause.requested";
pub const RUN_UNPAUSED: &str = "run.unpaused";
pub const RUN_CANCEL_REQUESTED: &str = "run.cancel.requested";
pub const RUN_COMPLETED: &str = "run.completed";
pub const RUN_FAILED: &str = "run.failed";
pub const RUN_INTERRUPTED: &str = "run.interrupted";
pub const RUN_DEAD: &str = "run.dead";
pub const RUN_REMOVING: &str = "run.removing";
pub const RUN_ARCHIVED: &str = "run.archived";
pub const RUN_UNARCHIVED: &str = "run.unarchived";
pub const RUN_SUPERSEDED_BY: &str = "run.superseded_by";
pub const WATCHDOG_TIMEOUT: &str = "watchdog.timeout";

// A run's sandbox (`sandbox::lifecycle`).
pub const SANDBOX_INITIALIZING: &str = "sandbox.initializing";
pub const SANDBOX_INITIALIZED: &str = "sandbox.initialized";
pub const SANDBOX_FAILED: &str = "sandbox.failed";
pub const SANDBOX_CLEANUP_COMPLETED: &str = "sandbox.cleanup.completed";

// Stages, routing and checkpoints (the engine's walker and handlers).
pub const STAGE_STARTED: &str = "stage.started";
pub const STAGE_PROMPT: &str = "stage.prompt";
pub const STAGE_RETRYING: &str = "stage.retrying";
pub const STAGE_COMPLETED: &str = "stage.completed";
pub const STAGE_FAILED: &str = "stage.failed";
pub const STAGE_CHILD_CREATED: &str = "stage.child.created";
pub const ARTIFACT_CAPTURED: &str = "artifact.captured";
pub const ARTIFACT_FAILED: &str = "artifact.failed";
pub const COMMAND_STARTED: &str = "command.started";
pub const COMMAND_COMPLETED: &str = "command.completed";
pub const EDGE_SELECTED: &str = "edge.selected";
pub const LOOP_RESTART: &str = "loop.restart";
pub const WORKSPACE_CHECKPOINT: &str = "workspace.checkpoint";
pub const WORKSPACE_CHECKPOINT_FAILED: &str = "workspace.checkpoint.failed";
pub const CHECKPOINT_COMPLETED: &str = "checkpoint.completed";
pub const PARALLEL_STARTED: &str = "parallel.started";
pub const PARALLEL_BRANCH_STARTED: &str = "parallel.branch.started";
pub const PARALLEL_BRANCH_COMPLETED: &str = "parallel.branch.completed";
pub const PARALLEL_COMPLETED: &str = "parallel.completed";
pub const INTERVIEW_STARTED: &str = "interview.started";
pub const INTERVIEW_COMPLETED: &str = "interview.completed";
pub const INTERVIEW_TIMEOUT: &str = "interview.timeout";
pub const INTERVIEW_INTERRUPTED: &str = "interview.interrupted";
/// The run's pull request link (`integrations::kinds` has the rest of `pull_request.*`).
pub const PULL_REQUEST_CREATED: &str = "pull_request.created";
pub const PULL_REQUEST_LINKED: &str = "pull_request.linked";
pub const PULL_REQUEST_UNLINKED: &str = "pull_request.unlinked";

// An agent or prompt stage's session (`agent`).
pub const AGENT_SESSION_STARTED: &str = "agent.session.started";
pub const AGENT_MESSAGE_DELTA: &str = "agent.message.delta";
pub const AGENT_MESSAGE: &str = "agent.message";
pub const AGENT_TOOL_STARTED: &str = "agent.tool.started";
pub const AGENT_TOOL_COMPLETED: &str = "agent.tool.completed";
pub const AGENT_TOOL_HOOK_FAILED: &str = "agent.tool_hook.failed";
pub const AGENT_LOOP_DETECTED: &str = "agent.loop.detected";
pub const AGENT_TURN_LIMIT: &str = "agent.turn.limit";
pub const AGENT_STEERING_INJECTED: &str = "agent.steering.injected";
pub const AGENT_LLM_RETRY: &str = "agent.llm.retry";
pub const AGENT_SESSION_ENDED: &str = "agent.session.ended";
pub const AGENT_MCP_READY: &str = "agent.mcp.ready";
pub const AGENT_MCP_FAILED: &str = "agent.mcp.failed";
pub const AGENT_MCP_SUMMARY: &str = "agent.mcp.summary";

/// Every kind above, for checks that a kind is known.
pub const ALL: &[&str] = &[
    RUN_CREATED,
    RUN_SUBMITTED,
    RUN_PENDING,
    RUN_APPROVED,
    RUN_DENIED,
    RUN_QUEUED,
    RUN_STARTING,
    RUN_STARTED,
    RUN_RUNNING,
    RUN_BLOCKED,
    RUN_UNBLOCKED,
    RUN_PAUSE_REQUESTED,
    RUN_PAUSED,
    RUN_UNPAUSE_REQUESTED,
    RUN_UNPAUSED,
    RUN_CANCEL_REQUESTED,
    RUN_COMPLETED,
    RUN_FAILED,
    RUN_INTERRUPTED,
    RUN_DEAD,
    RUN_REMOVING,
    RUN_ARCHIVED,
    RUN_UNARCHIVED,
    RUN_SUPERSEDED_BY,
    WATCHDOG_TIMEOUT,
    SANDBOX_INITIALIZING,
    SANDBOX_INITIALIZED,
    SANDBOX_FAILED,
    SANDBOX_CLEANUP_COMPLETED,
    STAGE_STARTED,
    STAGE_PROMPT,
    STAGE_RETRYING,
    STAGE_COMPLETED,
    STAGE_FAILED,
    STAGE_CHILD_CREATED,
    ARTIFACT_CAPTURED,
    ARTIFACT_FAILED,
    COMMAND_STARTED,
    COMMAND_COMPLETED,
    EDGE_SELECTED,
    LOOP_RESTART,
    WORKSPACE_CHECKPOINT,
    WORKSPACE_CHECKPOINT_FAILED,
    CHECKPOINT_COMPLETED,
    PARALLEL_STARTED,
    PARALLEL_BRANCH_STARTED,
    PARALLEL_BRANCH_COMPLETED,
    PARALLEL_COMPLETED,
    INTERVIEW_STARTED,
    INTERVIEW_COMPLETED,
    INTERVIEW_TIMEOUT,
    INTERVIEW_INTERRUPTED,
    PULL_REQUEST_CREATED,
    PULL_REQUEST_LINKED,
    PULL_REQUEST_UNLINKED,
    AGENT_SESSION_STARTED,
    AGENT_MESSAGE_DELTA,
    AGENT_MESSAGE,
    AGENT_TOOL_STARTED,
    AGENT_TOOL_COMPLETED,
    AGENT_TOOL_HOOK_FAILED,
    AGENT_LOOP_DETECTED,
    AGENT_TURN_LIMIT,
    AGENT_STEERING_INJECTED,
    AGENT_LLM_RETRY,
    AGENT_SESSION_ENDED,
    AGENT_MCP_READY,
    AGENT_MCP_FAILED,
    AGENT_MCP_SUMMARY,
];

#[cfg(test)]
mod tests {
    use super::ALL;
    use std::collections::BTreeSet;

    #[test]
    fn every_kind_is_distinct_and_dotted_lowercase() {
        let set: BTreeSet<&str> = ALL.iter().copied().collect();
        assert_eq!(set.len(), ALL.len(), "a kind is listed twice");
        for k in ALL {
            assert!(k.contains('.'), "{k}");
            assert!(
                k.chars()
                    .all(|c| c.is_ascii_lowercase() || c == '.' || c == '_'),
                "{k}"
            );
        }
    }
}
