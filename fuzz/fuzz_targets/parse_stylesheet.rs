//! Fuzz target `parse_stylesheet`: the properties are in `fuzz/checks/mod.rs` (`checks::parse_stylesheet`), shared
//! with the stable replay test `tests/language/fuzz_replay.rs`.
#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::parse_stylesheet(data));
