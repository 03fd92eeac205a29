//! LLM providers: the compiled-in model catalog now; provider clients come with their issue.
//! Must not know about workflows or the engine.

pub mod catalog;
