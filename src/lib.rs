//! svc: a self-hostable workflow run service.
//!
//! The library is the embeddable core; the `svc` binary is a thin shell over [`cli`].
//! Data flows one way: [`dot`] parses text into a flat graph, [`workflow`] turns it into a
//! typed, validated model, the engine plans and executes it, the store records every event,
//! and the server streams them. See `ARCHITECTURE.md` for the tour.

#![recursion_limit = "256"]

pub mod agent;
pub mod auth;
pub mod cli;
pub mod dot;
pub mod engine;
pub mod install;
pub mod llm;
pub mod perms;
pub mod procs;
pub mod sandbox;
pub mod server;
pub mod settings;
pub mod stages;
pub mod store;
pub mod web;
pub mod workflow;
pub mod workspace;
