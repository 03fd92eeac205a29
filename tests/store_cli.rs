//! Compiles and runs `src/cli/runs.rs` (and its unit tests) against the library's store
//! before the top-level `svc` command wires it in: the file only uses `crate::store`, which
//! this test crate provides by re-exporting `svc::store`.

mod store {
    pub use svc::store::*;
}

#[path = "../src/cli/runs.rs"]
#[allow(dead_code)]
mod runs;
