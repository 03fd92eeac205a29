//! Fuzz target `eval_condition`: the properties are in `fuzz/checks/mod.rs` (`checks::eval_condition`), shared
//! with the stable replay test `tests/language/fuzz_replay.rs`.
#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::eval_condition(data));
