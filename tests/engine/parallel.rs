//! End-to-end: parallel fan-out/fan-in — branch isolation, merge order, multi-node
//! branches, `max_parallel` observed through files, and fan-in outcomes for every mix.

use crate::support::cli::Sandbox;
use serde_json::json;

#[test]
fn branches_are_isolated_merged_in_order_and_bounded() {
    let s = Sandbox::new();
    let r = s.run("parallel.dot", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.path(),
        ["start", "fork", "a", "b", "c1", "c2", "d", "join", "after", "exit"]
    );
    assert_eq!(r.ctx("b_saw_a"), &json!(""), "b must not see a's keys");
    assert_eq!(r.ctx("only_a"), &json!("1"));
    assert_eq!(
        r.ctx("shared"),
        &json!("c"),
        "later branches win, in fork-edge order"
    );
    assert_eq!(s.read("after.txt").trim(), "c");
    let results = r
        .ctx("parallel.results")
        .as_array()
        .cloned()
        .unwrap_or_default();
    let branches: Vec<&str> = results
        .iter()
        .filter_map(|b| b["branch"].as_str())
        .collect();
    assert_eq!(branches, ["a", "b", "c1", "d"]);
    assert!(results.iter().all(|b| b["status"] == "succeeded"));
    assert_eq!(results[0]["outputs"]["shared"], "a");
    assert_eq!(results[2]["outputs"]["shared"], "c");
    let counts: Vec<usize> = s
        .read("concurrency.txt")
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert_eq!(counts.len(), 4);
    assert_eq!(counts.iter().max(), Some(&2), "max_parallel=2: {counts:?}");
}

#[test]
fn fan_in_outcome_follows_the_branches() {
    let cases: [(&[&str], &str); 3] = [
        (&["--input", "bad_exit=0"], "all_ok"),
        (&[], "partial"),
        (&["--input", "ok_exit=1"], "none_ok"),
    ];
    for (inputs, expected) in cases {
        let r = Sandbox::new().run("parallel_mixed.dot", inputs);
        assert_eq!(r.code, 0, "{expected}: {}", r.stderr);
        assert_eq!(
            r.path().get(5).map(String::as_str),
            Some(expected),
            "{:?}",
            r.path()
        );
    }
}

#[test]
fn failed_branches_are_reported_with_their_status() {
    let r = Sandbox::new().run("parallel_mixed.dot", &[]);
    let results = r
        .ctx("parallel.results")
        .as_array()
        .cloned()
        .unwrap_or_default();
    let statuses: Vec<&str> = results
        .iter()
        .filter_map(|b| b["status"].as_str())
        .collect();
    assert_eq!(statuses, ["succeeded", "failed"]);
}
