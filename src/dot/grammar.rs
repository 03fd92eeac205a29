//! The DOT grammar (`grammar/dot.pest`) compiled by pest: [`DotParser`] and its `Rule`s, the
//! layer below both the builder (`build`) and the error wording (`error`).
//!
//! Must not touch: building graphs or describing failures.

#[derive(pest_derive::Parser)]
#[grammar = "../grammar/dot.pest"]
pub(super) struct DotParser;
