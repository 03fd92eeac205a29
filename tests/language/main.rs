//! Integration tests of the workflow language: the DOT parser, validation and lint, as a
//! library and through `svc validate` / `svc parse`. One test binary (ripgrep's
//! `tests/tests.rs` layout); one module per area; helpers only in `tests/support/`.

#[path = "../support/mod.rs"]
mod support;

// The conformance corpus (`testdata/corpus/SOURCES.md`): counts and expectations per file.
mod corpus;
// Random workflows and marked corpus files against Graphviz's own counts (gvpr).
mod graphviz_diff;
// The committed fuzz corpora through the fuzz targets' property checks, on stable.
mod fuzz_replay;
// `svc validate` / `svc parse` as a user runs them: exit codes, text and JSON, no panic.
#[cfg(feature = "cli")]
mod cli_validate;
// Workflows written for other Attractor-family engines (`testdata/compat/`).
#[cfg(feature = "cli")]
mod compat;
// The house rules of src/ (module docs, SQL only in the store, the layer table of
// ARCHITECTURE.md, code-map entries, test hooks behind `test-support`), read as text.
mod tidy;
