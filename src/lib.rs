//! svc runs AI workflows written as DOT graphs: an engine walks the graph, runs each stage
//! (a shell command, a human question, a parallel fan-out, a child workflow, an LLM agent),
//! picks the next edge, and records every event in one SQLite database. The `svc` binary
//! adds an HTTP service around it; this library lets another program embed the engine.
//!
//! # The stable API
//! Only the items at this crate's root are stable: [`Workflow`] (load, parse, validate),
//! [`Engine`] with its [`EngineBuilder`], [`Store`] (SQLite file or memory), the
//! [`Interviewer`] trait for human answers, the event callback and the types they use. The
//! modules (hidden from these docs) are the service's internals: the `svc` binary, its tests
//! and benchmarks use them, and they change without notice.
//!
//! ```
//! use svc::{CancelToken, Engine, InterviewError, Interviewer, Question, Reply, Workflow};
//!
//! /// Approves every question.
//! struct Approver;
//! impl Interviewer for Approver {
//!     fn ask(&self, q: &Question, _: &CancelToken) -> Result<Reply, InterviewError> {
//!         Ok(Reply::Text(q.options[0].label.clone()))
//!     }
//! }
//!
//! let wf = Workflow::parse(r#"digraph review {
//!     start   [shape=Mdiamond]
//!     review  [shape=hexagon, label="Ship it?"]
//!     ship    [shape=parallelogram, script="echo shipped"]
//!     exit    [shape=Msquare]
//!     start -> review
//!     review -> ship [label="[Y] Yes"]
//!     review -> exit [label="[N] No"]
//!     ship -> exit
//! }"#)?;
//! let engine = Engine::builder().interviewer(Approver).build()?;
//! let run = engine.run(&wf, serde_json::Map::new())?;
//! assert_eq!(run.path, ["start", "review", "ship", "exit"]);
//! # Ok::<(), svc::Error>(())
//! ```
//!
//! # Cargo features
//! `default` builds everything (`cli`). Without default features the crate is the language
//! (parse, validate, conditions, stylesheet) and the engine with the SQLite store and the
//! command, human, wait, parallel and manager handlers: no HTTP server, no outbound HTTP or
//! TLS, no JSON Schema. In between: `schema` (custom JSON Schema output contracts), `watch`
//! (workspace checkpoints that stage only what inotify saw change), `llm`
//! (the provider clients), `agent` (the agent loop and ACP agents), `server` (the HTTP
//! service), `cli` (the `svc` binary). README "Embedding" gives each set's crate count and
//! size.
//!
//! Data flows one way: `dot` parses text into a flat graph, `workflow` turns it into a typed,
//! validated model, `engine` plans and executes it, `store` records every event, and
//! `server` streams them. See `ARCHITECTURE.md` for the tour.
//!
//! Must not: hold logic of its own: it declares the modules and re-exports the stable API.

#![recursion_limit = "256"]
#![deny(missing_docs)]

mod embed;
pub use embed::{
    Answer, CancelToken, Diagnostic, EndReason, Engine, EngineBuilder, Error, FailureReason,
    InterviewError, Interviewer, Question, QuestionOption, Reply, RunOutcome, RunResult, Severity,
    Store, Workflow,
};
pub use store::Event;

#[cfg(feature = "agent")]
#[doc(hidden)]
pub mod agent;
#[cfg(feature = "server")]
#[doc(hidden)]
pub mod artifacts;
#[cfg(feature = "server")]
#[doc(hidden)]
pub mod ask;
#[cfg(feature = "server")]
#[doc(hidden)]
pub mod auth;
#[cfg(feature = "server")]
#[doc(hidden)]
pub mod automations;
#[cfg(feature = "server")]
#[doc(hidden)]
pub mod backup;
#[doc(hidden)]
pub mod base;
#[doc(hidden)]
pub mod catalog;
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
#[doc(hidden)]
pub mod dot;
#[doc(hidden)]
pub mod engine;
#[doc(hidden)]
pub mod environments;
#[cfg(feature = "server")]
#[doc(hidden)]
pub mod insights;
#[cfg(feature = "server")]
#[doc(hidden)]
pub mod install;
#[cfg(feature = "server")]
#[doc(hidden)]
pub mod integrations;
#[doc(hidden)]
pub mod llm;
#[doc(hidden)]
pub mod mcp;
#[cfg(feature = "server")]
#[doc(hidden)]
pub mod objects;
#[doc(hidden)]
pub mod procs;
#[doc(hidden)]
pub mod sandbox;
#[cfg(feature = "server")]
#[doc(hidden)]
pub mod server;
#[cfg(feature = "agent")]
#[doc(hidden)]
pub mod settings;
#[doc(hidden)]
pub mod stages;
#[doc(hidden)]
pub mod store;
#[cfg(feature = "server")]
#[doc(hidden)]
pub mod system;
/// The external tools some tests need (git, gvpr, bubblewrap, a browser): probes and the
/// ignore reasons of tests that cannot run without them. Only in this crate's tests and
/// under the `test-support` feature.
#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod test_tools;
#[cfg(feature = "server")]
#[doc(hidden)]
pub mod web;
#[doc(hidden)]
pub mod workflow;
#[doc(hidden)]
pub mod workspace;
