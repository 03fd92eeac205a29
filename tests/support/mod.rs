//! The one support module of every integration test binary (`tests/*/main.rs` include it
//! with `#[path = "../support/mod.rs"] mod support;`): one helper per job, one name per
//! helper, so a test never re-writes what a neighbour already has.
//!
//! - [`store`]: a seeded RNG, legacy-directory fixtures, the "row equals fold of events"
//!   check (every feature set).
//! - [`cli`]: `svc <verb>` on the real binary in a temporary working and state directory,
//!   `svc run --format json` parsed, one `svc()` command (needs `cli`).
//! - [`server`]: the real `svc server start` on a loopback port or a Unix socket, a small
//!   HTTP/1.1 + SSE client, and the runs-API steps (create, start, wait for a status) (needs
//!   `cli`).
//! - [`codehost`]: a scripted code host in GitHub's REST wire format in front of real git
//!   repositories served over smart HTTP (needs `cli`).
//! - [`slack`]: a scripted chat service in Slack's Web API wire format, and signed
//!   interactivity callbacks (needs `cli`).
//! - [`llm`]: a scripted LLM provider speaking each provider's real wire format (needs
//!   `llm`; `benches/agent_bench.rs` includes it too).
//! - [`mcp`]: real MCP servers installed by `.ci/mcp-servers.sh`, the scripted ones in
//!   `tests/mcp/`, HTTP server processes, leak checks (needs `llm`).
//!
//! Must not: hold tests, or assert anything a test should state itself beyond "this step
//! worked" (a helper that creates a run checks the 201; the test checks the run).

// Each binary uses the part of the support its tests need; the rest is dead code there.
#![allow(dead_code)]

#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "cli")]
pub mod codehost;
#[cfg(feature = "llm")]
pub mod llm;
#[cfg(feature = "llm")]
pub mod mcp;
#[cfg(feature = "cli")]
pub mod server;
#[cfg(feature = "cli")]
pub mod slack;
pub mod store;
