//! LLM providers: the compiled-in model catalog, the provider-neutral request/response
//! model, one synchronous client per wire format (Anthropic Messages, OpenAI Responses,
//! Gemini generateContent, OpenAI-compatible Chat Completions), error classification and
//! retries, usage pricing and rollups, project memory, single prompt calls and the wording of
//! structured-output repair turns. Must not know about workflows, the engine's stage loop,
//! the store, or HTTP serving; secrets arrive only through [`Credentials`].

pub mod anthropic;
pub mod catalog;
pub mod chat;
pub mod client;
pub mod cost;
pub mod error;
pub mod gemini;
pub mod http;
pub mod memory;
pub mod models;
pub mod openai;
pub mod prompt;
pub mod provider;
pub mod structured;
pub mod types;
pub mod wire;

pub use client::{ChatModel, LlmClient, RetryPolicy};
pub use cost::{
    cost_of, size_bucket, Cost, CostSource, PricedUsage, Speed, StageRecord, Timing, UsageRollup,
};
pub use error::{ErrorKind, LlmError};
pub use http::HttpOptions;
pub use provider::{Credentials, Provider, ProviderConfig, StaticCredentials, ToolProfile};
pub use types::{
    Message, Part, Request, Response, Role, StopReason, StreamEvent, ToolCall, ToolSpec, Usage,
};
