//! Typed workflow model: handler kinds, typed attribute access, conditions, the model
//! stylesheet and validation. Owns `grammar/condition.pest` and `grammar/stylesheet.pest`.
//! Must not execute anything or touch the file system beyond resolving `@path` references.

pub mod condition;
pub mod stylesheet;
