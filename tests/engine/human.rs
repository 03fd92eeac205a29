//! End-to-end: human gates through `svc run` — scripted answers by key, label and free
//! text, answers used in order, refused answers, auto-approve, timeouts with and without a
//! default, and the clear failure when nobody can answer.

use crate::support::cli::Sandbox;
use serde_json::json;
use std::time::Duration;

#[test]
fn answer_by_key_routes_and_sets_gate_keys() {
    let s = Sandbox::new();
    let r = s.run("human.dot", &["--answer", "gate=y"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.path(), ["start", "gate", "ship", "exit"]);
    assert_eq!(s.read("chosen.txt").trim(), "Y|[Y] Yes, ship");
    assert_eq!(r.ctx("human.gate.label"), &json!("[Y] Yes, ship"));
}

#[test]
fn answers_for_one_node_are_used_in_order_and_labels_match() {
    let s = Sandbox::new();
    let r = s.run(
        "human.dot",
        &["--answer", "gate=No", "--answer", "gate=yes, ship"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.path(), ["start", "gate", "fix", "gate", "ship", "exit"]);
    assert_eq!(s.lines("fix.txt"), 1);
}

#[test]
fn free_text_takes_the_freeform_edge() {
    let s = Sandbox::new();
    let r = s.run("human.dot", &["--answer", "gate=please add tests first"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.path(), ["start", "gate", "note", "exit"]);
    assert_eq!(s.read("note.txt").trim(), "please add tests first");
    assert_eq!(r.ctx("human.gate.selected"), &json!("freeform"));
}

#[test]
fn unmatched_answer_is_refused_and_not_retried() {
    let r = Sandbox::new().run("human_strict.dot", &["--answer", "gate=maybe"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.path(), ["start", "gate"]);
    let e = r.error();
    assert!(e.contains("maybe") && e.contains("refused"), "{e}");
}

#[test]
fn auto_approve_picks_the_first_option() {
    let r = Sandbox::new().run("human_strict.dot", &["--auto-approve"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.path(), ["start", "gate", "exit"]);
}

#[test]
fn no_answer_source_fails_clearly_instead_of_hanging() {
    let r = Sandbox::new().run("human_strict.dot", &[]);
    assert_eq!(r.code, 1);
    assert!(r.elapsed < Duration::from_secs(5));
    let e = r.error();
    assert!(e.contains("--answer gate=CHOICE"), "{e}");
}

#[test]
fn timeout_takes_the_default_choice() {
    let r = Sandbox::new().run("human_timeout.dot", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.path(), ["start", "gate", "skip", "exit"]);
    assert!(r.elapsed >= Duration::from_secs(1));
}

#[test]
fn timeout_without_default_fails_retryably() {
    let r = Sandbox::new().run("human_timeout_nodefault.dot", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.path(), ["start", "gate", "gave_up", "exit"]);
    assert!(
        r.elapsed >= Duration::from_millis(600),
        "two attempts of 300ms"
    );
}

/// A human stage's log folder holds the question (`prompt.md`, with its options) and the
/// answer (`response.md`), as an LLM stage's holds what it was sent and answered.
#[test]
fn human_stages_log_the_question_and_the_answer() {
    let s = Sandbox::new();
    let logs = s.work().join("logs");
    let r = s.run(
        "human.dot",
        &["--answer", "gate=y", "--logs", logs.to_str().unwrap_or("")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let read = |p: &str| std::fs::read_to_string(logs.join(p)).unwrap_or_default();
    let prompt = read("gate/prompt.md");
    assert!(prompt.starts_with("Ship it?"), "{prompt}");
    assert!(
        prompt.contains("- [Y] Yes, ship") && prompt.contains("- [N] No"),
        "{prompt}"
    );
    assert!(prompt.contains("free-text answer is accepted"), "{prompt}");
    let response = read("gate/response.md");
    assert!(
        response.trim().eq_ignore_ascii_case("y") || response.contains("Yes"),
        "{response}"
    );
}
