//! LLM providers: the compiled-in model catalog, the provider-neutral request/response
//! model, one synchronous client per wire format (Anthropic Messages, OpenAI Responses,
//! Gemini generateContent, OpenAI-compatible Chat Completions), error classification and
//! retries, usage pricing and rollups, project memory, single prompt calls and the wording of
//! structured-output repair turns. Must not know about workflows, the engine's stage loop,
//! the store, or HTTP serving; secrets arrive only through [`Credentials`].
//!
//! The data half (catalog, request/response types, providers, errors, pricing, memory,
//! repair wording) is always compiled: the language checks model names against the catalog
//! and the engine records usage and cost. The clients (everything that speaks HTTP) are the
//! `llm` cargo feature.

#[cfg(feature = "llm")]
pub mod anthropic;
pub mod catalog;
#[cfg(feature = "llm")]
pub mod chat;
#[cfg(feature = "llm")]
pub mod client;
pub mod cost;
pub mod error;
#[cfg(feature = "llm")]
pub mod gemini;
#[cfg(feature = "llm")]
pub mod http;
pub mod memory;
#[cfg(feature = "llm")]
pub mod models;
#[cfg(feature = "llm")]
pub mod openai;
#[cfg(feature = "llm")]
pub mod prompt;
pub mod provider;
pub mod structured;
pub mod types;
#[cfg(feature = "llm")]
pub mod wire;

#[cfg(feature = "llm")]
pub use client::{ChatModel, LlmClient, RetryPolicy};
pub use cost::{
    cost_of, size_bucket, Cost, CostSource, PricedUsage, Speed, StageRecord, Timing, UsageRollup,
};
pub use error::{ErrorKind, LlmError};
#[cfg(feature = "llm")]
pub use http::HttpOptions;
pub use provider::{Credentials, Provider, ProviderConfig, StaticCredentials, ToolProfile};
pub use types::{
    Message, Part, Request, Response, Role, StopReason, StreamEvent, ToolCall, ToolSpec, Usage,
};
