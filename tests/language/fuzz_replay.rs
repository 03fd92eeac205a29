//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/`, grown by `fuzz/run.sh`
//! campaigns, crash inputs included once fixed) through the same property checks the
//! libFuzzer targets run (`fuzz/checks/mod.rs`), on the stable toolchain: a short, bounded
//! fuzz smoke that every `cargo test` runs, and the regression test for every crash a
//! campaign ever found.

#[path = "../../fuzz/checks/mod.rs"]
mod checks;

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {} (committed corpus): {e}", dir.display()));
    let mut inputs = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let outcome = std::panic::catch_unwind(|| check(&data));
        assert!(
            outcome.is_ok(),
            "{target}: the input {} breaks a property (replay it with \
             `cargo +nightly fuzz run {target} {}`)",
            path.display(),
            path.display()
        );
        inputs += 1;
    }
    // The committed seeds alone are dozens per target: an empty directory means the corpus
    // went missing, not that everything passed.
    assert!(
        inputs >= 10,
        "{target}: only {inputs} inputs in {}",
        dir.display()
    );
}

#[test]
fn parse_dot_corpus() {
    replay("parse_dot", checks::parse_dot);
}

#[test]
fn load_dot_corpus() {
    replay("load_dot", checks::load_dot);
}

#[test]
fn parse_condition_corpus() {
    replay("parse_condition", checks::parse_condition);
}

#[test]
fn eval_condition_corpus() {
    replay("eval_condition", checks::eval_condition);
}

#[test]
fn parse_stylesheet_corpus() {
    replay("parse_stylesheet", checks::parse_stylesheet);
}
