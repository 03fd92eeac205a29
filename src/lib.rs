//! svc runs AI workflows written as DOT graphs: an engine walks the graph, runs each stage
//! (a shell command, a human question, a parallel fan-out, a child workflow, an LLM agent),
//! picks the next edge, and records every event in one SQLite database. The `svc` binary
//! adds an HTTP service around it; this library lets another program embed the engine.
//!
//! # The stable API
//! Only the items at this crate's root are stable: [`Workflow`] (load, parse, validate),
//! [`Engine`] with its [`EngineBuilder`], [`Store`] (SQLite file or memory), the
//! [`Interviewer`] trait for human answers, the event callback and the types they use. The
//! one module, `internal` (hidden from these docs), holds the service's internals: the `svc`
//! binary, its tests and benchmarks use them, and they change without notice.
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

/// The service's internals: the `svc` binary, its tests and benchmarks use them, and they
/// change without notice. Nothing in here is part of the stable API above.
#[doc(hidden)]
pub mod internal;

// Inside the crate the internals keep their short paths (`crate::store`, `crate::engine`).
#[cfg(feature = "agent")]
pub(crate) use internal::agent;
#[cfg(feature = "server")]
pub(crate) use internal::artifacts;
#[cfg(feature = "server")]
pub(crate) use internal::ask;
#[cfg(feature = "server")]
pub(crate) use internal::auth;
#[cfg(feature = "server")]
pub(crate) use internal::automations;
#[cfg(feature = "server")]
pub(crate) use internal::backup;
pub(crate) use internal::base;
pub(crate) use internal::catalog;
pub(crate) use internal::dot;
pub(crate) use internal::engine;
// The slim build reaches this module only through other internals, never by its short path.
#[cfg_attr(not(feature = "server"), allow(unused_imports))]
pub(crate) use internal::environments;
#[cfg(feature = "server")]
pub(crate) use internal::insights;
#[cfg(feature = "server")]
pub(crate) use internal::install;
#[cfg(feature = "server")]
pub(crate) use internal::integrations;
pub(crate) use internal::llm;
pub(crate) use internal::mcp;
#[cfg(feature = "server")]
pub(crate) use internal::objects;
pub(crate) use internal::procs;
pub(crate) use internal::sandbox;
#[cfg(feature = "server")]
pub(crate) use internal::server;
#[cfg(feature = "agent")]
pub(crate) use internal::settings;
// The slim build reaches this module only through other internals, never by its short path.
#[cfg_attr(not(feature = "server"), allow(unused_imports))]
pub(crate) use internal::stages;
pub(crate) use internal::store;
#[cfg(feature = "server")]
pub(crate) use internal::system;
#[cfg(test)]
pub(crate) use internal::test_tools;
#[cfg(feature = "server")]
pub(crate) use internal::web;
pub(crate) use internal::workflow;
pub(crate) use internal::workspace;
