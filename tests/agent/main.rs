//! Integration tests of the LLM clients and the agent: the provider wire formats and their
//! errors against a scripted provider, the agent loop and its tools, ACP agents, and LLM
//! stages in `svc run` (needs the `llm` feature: `required-features` in Cargo.toml; the
//! agent loop needs `agent`, the binary-driving modules `cli`). One test binary; one module
//! per area; helpers only in `tests/support/`.

#[path = "../support/mod.rs"]
mod support;

// Every provider's wire format: plain and streamed text, tool use, usage and cost.
mod llm_providers;
// Error classification, retries and backoff, redaction, cancellation.
mod llm_errors;
// The agent loop: steering, loop detection, limits, cancel, file tools' sandbox escapes.
#[cfg(feature = "agent")]
mod agent_loop;
// `svc run` with prompt and agent stages against the scripted provider.
#[cfg(feature = "cli")]
mod llm_run;
// The ACP backend against a scripted ACP agent, in `svc run` and in the server.
#[cfg(feature = "cli")]
mod acp;
// The MCP client against real servers (PyPI, npm) and scripted misbehaving ones.
mod mcp_client;
// Agent stages with MCP servers: tools offered and called, failures named, required servers.
#[cfg(feature = "agent")]
mod mcp_agent;
