//! The engine: walks a validated [`crate::workflow::Workflow`], runs each stage's handler,
//! picks the next edge, and records events and checkpoints through the run store.
//! Must not parse DOT or know about HTTP.
//!
//! Map: [`run`] (front door, run-level events) → `walker` (the stage loop: visits,
//! attempts, retries, timeouts, recording, routing, restarts, goal gates, checkpoints) →
//! [`handlers`] (one module per handler kind, named after it). Around them: `options`
//! ([`RunOptions`], [`ChildApproval`], [`ModelChoice`]), `scope` (what one walk is: run,
//! branch or child), `timing` (timers and the one duration format), [`routing`] (edge
//! selection), [`context`] (keys, seeding, expansion), [`events`] (emission, blobs,
//! activity), [`checkpoint`], [`fidelity`] (fidelity, threads), [`preamble`] (the run so far as text), [`outcome`],
//! [`failure`] (statuses, classes, signatures), [`output`] (structured output), [`command`]
//! (a command stage's script and result), [`prng`], [`rewind`] (a finished run rewound to a node), [`watchdog`], [`services`] (store,
//! interviewer, LLM, clock, redactor, cancel; the cancel token and the redactor are
//! `base`'s).

pub mod checkpoint;
pub mod command;
pub mod context;
pub mod events;
pub mod failure;
pub mod fidelity;
pub mod handlers;
mod options;
pub mod outcome;
pub mod output;
pub mod preamble;
pub mod prng;
pub mod rewind;
pub mod routing;
pub mod run;
mod scope;
pub mod services;
mod timing;
mod walker;
pub mod watchdog;

pub use options::{ChildApproval, ModelChoice, RunOptions};
pub use run::{EndReason, Engine, RunOutcome, RunResult};
pub use services::{
    ArtifactSink, Capture, CapturedArtifact, CheckReport, ChecksVerdict, Clock, DryRunBackend,
    InterviewError, Interviewer, LlmBackend, LlmError, LlmEvents, LlmMode, LlmRequest, LlmResponse,
    LlmStop, LlmUsage, NoArtifacts, NoInterviewer, NoPublisher, NoWorkspace, Publisher,
    PullRequestReport, PullRequestStage, Reply, Services, SystemClock, UnconfiguredBackend,
    Workspace, WorkspaceCheckpoint,
};
pub use walker::FailureReason;

#[cfg(test)]
mod tests;
