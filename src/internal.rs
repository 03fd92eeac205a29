//! The service's internals: every module behind the `svc` binary, its tests and its
//! benchmarks (the server, the engine's parts, the store, the providers, the web UI). They
//! change without notice; the stable API is the crate root's re-exports.
//!
//! Must not: hold logic of its own, or be named by the stable root types' signatures: it only
//! declares the modules (their files stay at `src/<module>/`, where ARCHITECTURE.md maps them).

#[cfg(feature = "agent")]
#[path = "agent/mod.rs"]
pub mod agent;

#[cfg(feature = "server")]
#[path = "artifacts/mod.rs"]
pub mod artifacts;

#[cfg(feature = "server")]
#[path = "ask/mod.rs"]
pub mod ask;

#[cfg(feature = "server")]
#[path = "auth/mod.rs"]
pub mod auth;

#[cfg(feature = "server")]
#[path = "automations/mod.rs"]
pub mod automations;

#[cfg(feature = "server")]
#[path = "backup/mod.rs"]
pub mod backup;

#[path = "base/mod.rs"]
pub mod base;

#[path = "catalog/mod.rs"]
pub mod catalog;

#[cfg(feature = "cli")]
#[path = "cli/mod.rs"]
pub mod cli;

#[path = "dot/mod.rs"]
pub mod dot;

#[path = "engine/mod.rs"]
pub mod engine;

#[path = "environments/mod.rs"]
pub mod environments;

#[cfg(feature = "server")]
#[path = "insights/mod.rs"]
pub mod insights;

#[cfg(feature = "server")]
#[path = "install/mod.rs"]
pub mod install;

#[cfg(feature = "server")]
#[path = "integrations/mod.rs"]
pub mod integrations;

#[path = "llm/mod.rs"]
pub mod llm;

#[path = "mcp/mod.rs"]
pub mod mcp;

#[cfg(feature = "server")]
#[path = "objects/mod.rs"]
pub mod objects;

#[path = "procs/mod.rs"]
pub mod procs;

#[path = "sandbox/mod.rs"]
pub mod sandbox;

#[cfg(feature = "server")]
#[path = "server/mod.rs"]
pub mod server;

#[cfg(feature = "agent")]
#[path = "settings/mod.rs"]
pub mod settings;

#[path = "stages/mod.rs"]
pub mod stages;

#[path = "store/mod.rs"]
pub mod store;

#[cfg(feature = "server")]
#[path = "system/mod.rs"]
pub mod system;

/// The external tools some tests need (git, gvpr, bubblewrap, a browser): probes and the
/// ignore reasons of tests that cannot run without them. Only in this crate's tests and
/// under the `test-support` feature.
#[cfg(any(test, feature = "test-support"))]
#[path = "test_tools.rs"]
pub mod test_tools;

#[cfg(feature = "server")]
#[path = "web/mod.rs"]
pub mod web;

#[path = "workflow/mod.rs"]
pub mod workflow;

#[path = "workspace/mod.rs"]
pub mod workspace;
