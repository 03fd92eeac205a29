//! Integration tests of the HTTP service through the real `svc server start` binary over real
//! sockets (needs the `cli` feature: `required-features` in Cargo.toml). One test binary;
//! one module per area; helpers only in `tests/support/`.

#[path = "../support/mod.rs"]
mod support;

// Listeners, error bodies, limits, discovery, OpenAPI, settings reload, versions, secrets.
mod http;
// Oversize bodies, huge headers, slowloris, descriptor exhaustion at the edge.
mod edge_attacks;
// Sign-in, session cookies, the Authorization header, the Origin check.
mod auth;
// The install wizard driven over HTTP, then the configured second start.
mod install_mode;
// The runs API: create, start, SSE, questions, FIFO, cancel, pause, restart, paging.
mod runs;
// Run semantics: goal and model, recorded prompts, resume/retry/children rules.
mod run_semantics;
// Prompt and agent stages against a scripted provider; steering.
mod llm;
// Workspaces (git) and sandboxes (bubblewrap) for runs.
mod workspace;
// Nothing a run starts outlives it: every ending, both providers, checked through /proc.
mod processes;
// The threat model: server secrets never reach workflow code or what users read; previews,
// redirects and tokens that cannot be turned against a signed-in user.
mod security;
// One server per state directory: a second server, `svc run` and `svc import` beside one,
// a killed server's lock.
mod state_lock;
// Runs ending in pull requests against a scripted code host: push, PR, checks, webhooks.
mod pull_requests;
// Chat against a scripted Slack Web API: questions posted, answered by signed clicks, outages.
mod chat;
// SIGKILL under load, many times, on one state directory: nothing acknowledged is lost.
mod crash;
// Automations: the catalog rules over HTTP, fires, hooks, the scheduler across restarts.
mod automations;
// Insights: read-only SQL over the store's views, saved queries, hostile queries.
mod insights;
// Environments: the catalog over HTTP, limits frozen into runs and enforced on their processes.
mod environments;
// The web UI's pages, assets and SVG graph over HTTP.
mod web_pages;
// The web UI in headless Chromium (Selenium).
mod web_browser;
// Ask: readiness on runs, sessions and turns against a scripted provider.
mod ask;
// Rewind: a new run from the checkpoint before a stage; superseded_by.
mod rewind;
// MCP servers: the catalog and its test route, runs whose agents use catalog and inline servers.
mod mcp;
// The README's set-up and shell examples, run as written (bwrap, curl, jq).
mod readme_examples;
// Issue 29: settings and secrets over HTTP, system housekeeping, spending, workflows, insights.
mod operator;
// Issue 32: backups to the object store (local directory, S3-compatible), restore, schedule.
mod backup;
// Issue 29: the workflow catalog (names across versions, their runs and automations).
mod workflows;
// Stage artifacts kept in the object store (issue 32).
mod artifacts;
