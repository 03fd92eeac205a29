//! End-to-end: manager loops — stop condition against the child's context, max cycles,
//! a child that finishes, inline child sources, and child events in the parent's stream.

use crate::support;
use crate::support::cli::Sandbox;
use serde_json::json;
use std::time::Duration;

#[test]
fn stop_condition_stops_the_child_early() {
    let s = Sandbox::new();
    let r = s.run("manager_stop.dot", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.path(), ["start", "mgr", "exit"]);
    assert!(r.elapsed < Duration::from_secs(4), "{:?}", r.elapsed);
    assert_eq!(r.ctx("progress"), &json!("1"));
    assert_eq!(s.lines("child_step1.txt"), 1);
    assert_eq!(
        s.lines("child_done.txt"),
        0,
        "the slow child step was stopped"
    );
}

#[test]
fn max_cycles_fails_the_stage() {
    let s = Sandbox::new();
    let r = s.run("manager_cycles.dot", &[]);
    assert_eq!(r.code, 1);
    assert!(r.error().contains("manager.max_cycles=3"), "{}", r.error());
    assert!(r.elapsed < Duration::from_secs(4), "{:?}", r.elapsed);
}

#[test]
fn a_finished_child_succeeds_and_shares_its_keys() {
    let s = Sandbox::new();
    let r = s.run("manager_cycles.dot", &["--input", "child_fast=yes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(s.lines("child_done.txt"), 1);
    assert_eq!(r.ctx("progress"), &json!("1"));
}

#[test]
fn inline_child_source_runs() {
    let s = Sandbox::new();
    let r = s.run("manager_inline.dot", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(s.read("inline.txt").trim(), "inline");
}

#[test]
fn child_events_carry_the_manager_prefix() {
    let s = Sandbox::new();
    let file = support::cli::testdata("manager_cycles.dot");
    let mut cmd = s.command(&["run", file.to_str().unwrap_or("")]);
    cmd.args(["--input", "child_fast=yes"]);
    let r = s.finish(cmd);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("▸ mgr/step1 (command)"), "{}", r.stderr);
    assert!(r.stderr.contains("mgr/step1 → mgr/step2"), "{}", r.stderr);
}

#[test]
fn svc_run_records_children_and_needs_auto_approve_when_approval_is_required() {
    let s = Sandbox::new();
    let r = s.run("manager_inline.dot", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The child is a run of its own, linked to the parent.
    let runs = s.finish(s.command(&["runs", "--format", "json"]));
    let rows = runs.json["data"].as_array().cloned().unwrap_or_default();
    let child = rows
        .iter()
        .find(|row| row["parent_id"] == r.run_id().as_str())
        .cloned()
        .unwrap_or_default();
    assert_eq!(child["status"], "succeeded", "{rows:?}");

    std::fs::create_dir_all(s.state()).expect("state dir");
    std::fs::write(
        s.state().join("settings.toml"),
        "[run]\nchild_approval = \"required\"\n",
    )
    .expect("settings");
    let refused = s.run("manager_inline.dot", &[]);
    assert_eq!(refused.code, 1);
    assert!(
        refused.error().contains("--auto-approve"),
        "{}",
        refused.error()
    );
    let approved = s.run("manager_inline.dot", &["--auto-approve"]);
    assert_eq!(approved.code, 0, "{}", approved.stderr);
}

#[test]
fn nested_children_link_to_the_run_their_manager_belongs_to() {
    let s = Sandbox::new();
    let r = s.run("nested_outer.dot", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(s.read("deep.txt"), "deep\n");
    let runs = s.finish(s.command(&["runs", "--format", "json"]));
    let rows = runs.json["data"].as_array().cloned().unwrap_or_default();
    let top = r.run_id();
    let middle = rows
        .iter()
        .find(|row| row["parent_id"] == top.as_str())
        .cloned()
        .unwrap_or_default();
    let inner = rows
        .iter()
        .find(|row| row["parent_id"] == middle["id"])
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        middle["workflow"]["graph_name"], "nested_middle",
        "{rows:?}"
    );
    assert_eq!(inner["workflow"]["graph_name"], "c", "{rows:?}");
    assert_eq!(inner["status"], "succeeded");
    // Each run's stream holds its subtree, node ids relative to it.
    let middle_events = s
        .command(&["events", middle["id"].as_str().unwrap_or("")])
        .output()
        .expect("svc events");
    let text = String::from_utf8_lossy(&middle_events.stdout);
    assert!(text.contains("\"node_id\":\"inner/work\""), "{text}");
    // The innermost child's stage logs, from its own stream.
    let logs = s.export_stages("inner-logs", inner["id"].as_str().unwrap_or(""));
    let status = std::fs::read_to_string(logs.join("work/status.json")).unwrap_or_default();
    let status: serde_json::Value = serde_json::from_str(&status).unwrap_or_default();
    assert_eq!(status["outcome"], "succeeded", "{status}");
    assert_eq!(status["node_id"], "work");
}
