//! What Ask tells the model: its system prompt (a read-only analyst of one run) and the
//! run snapshot that opens each turn's input (run id, goal, status, stages completed, the
//! last five stages, a pending question), marked as possibly stale.
//!
//! Owns: the wording. Must not touch: the store (callers hand in the row and events).

use super::readiness::SandboxFor;
use crate::store::{Event, RunRow};
use std::fmt::Write;

/// Stages the snapshot lists, newest last.
const LAST_STAGES: usize = 5;

/// The system prompt of a session on `run_id`.
pub fn system_prompt(run_id: &str, sandbox: SandboxFor) -> String {
    let mut s = format!(
        "You are Ask, a read-only analyst of one workflow run ({run_id}) of svc, a workflow run \
         service. Answer the user's questions about this run: why a stage failed, what changed, \
         what a stage did. Use the tools to look up facts before answering; quote event seqs, \
         stage ids and file paths. You cannot change anything: there are no write, shell or \
         network tools, and any tool call about another run is refused. Be brief."
    );
    match sandbox {
        SandboxFor::Live => s.push_str(
            "\nThe run's workspace is available: read_file, grep, glob and list_dir read it \
             (paths relative to the workspace).",
        ),
        SandboxFor::Gone => s.push_str(
            "\nThe run's sandbox was removed, so its files cannot be read: answer from \
             run_events, run_stages and run_diff (the stored record), and say in your answer \
             that the workspace is gone.",
        ),
    }
    s
}

/// The run as it stands, for the start of a turn's input.
pub fn text(row: &RunRow, events: &[Event]) -> String {
    let visits = crate::stages::collect(events);
    let done = visits.iter().filter(|v| v.outcome != "running").count();
    let mut s = String::with_capacity(1024);
    let _ = writeln!(
        s,
        "Run snapshot (taken as this turn started; it may be stale: use run_events for exact facts)"
    );
    let _ = writeln!(s, "- run: {}", row.id);
    if !row.goal.is_empty() {
        let _ = writeln!(s, "- goal: {}", row.goal);
    }
    let _ = writeln!(s, "- status: {}", row.status.name());
    if let Some(e) = &row.error {
        let _ = writeln!(s, "- error: {e}");
    }
    let _ = writeln!(
        s,
        "- stages: {done} of {} visits completed ({} nodes in the workflow)",
        visits.len(),
        row.workflow.node_count
    );
    let start = visits.len().saturating_sub(LAST_STAGES);
    for v in &visits[start..] {
        let _ = write!(s, "  - {} (visit {}): {}", v.node_id, v.visit, v.outcome);
        if let Some(h) = &v.handler_type {
            let _ = write!(s, ", handler {h}");
        }
        if let Some(m) = v
            .prompts
            .last()
            .and_then(|p| p.get("model"))
            .and_then(|m| m.as_str())
        {
            let _ = write!(s, ", model {m}");
        }
        if let Some(f) = &v.failure_reason {
            let _ = write!(s, ", failure: {f}");
        }
        s.push('\n');
    }
    if let Some(q) = row
        .current_question
        .as_ref()
        .and_then(|q| q.get("question"))
    {
        let _ = writeln!(s, "- waiting for a human answer to: {q}");
    }
    if let Some(d) = &row.diff {
        let _ = writeln!(s, "- files changed so far: {d}");
    }
    s
}
