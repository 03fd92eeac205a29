//! End-to-end: `svc run --format json` on testdata/engine workflows — routing, failures,
//! retries, partial outcomes, goal gates, visit limits, signatures, restarts, timeouts,
//! wait, structured output, environment, LLM stages and exit codes.

use crate::support;
use crate::support::cli::{gone, Sandbox};
use serde_json::json;
use std::time::Duration;

#[test]
fn routing_tiers_in_order() {
    let cases = [
        ("1", "by_condition"),
        ("2", "beta"),
        ("3", "gamma"),
        ("4", "heavy"),
    ];
    for (tier, expected) in cases {
        let s = Sandbox::new();
        let r = s.run("routing_tiers.dot", &["--input", &format!("tier={tier}")]);
        assert_eq!(r.code, 0, "tier {tier}: {}", r.stderr);
        assert_eq!(
            r.path(),
            ["start", "decide", expected, "exit"],
            "tier {tier}"
        );
    }
}

#[test]
fn equal_weights_pick_the_smallest_target_id() {
    let r = Sandbox::new().run("routing_ties.dot", &[]);
    assert_eq!(r.path(), ["start", "x", "eta", "exit"]);
}

#[test]
fn failure_does_not_follow_unconditional_edges() {
    let s = Sandbox::new();
    let r = s.run("fail_unconditional.dot", &[]);
    assert_eq!(r.code, 1);
    assert_eq!(r.status(), "failed");
    assert_eq!(r.path(), ["start", "build"]);
    let e = r.error();
    assert!(
        e.contains("stage `build` failed: command exited with code 3"),
        "{e}"
    );
    assert!(e.contains("compile error"), "{e}");
    assert_eq!(s.lines("after.txt"), 0);
}

#[test]
fn failure_takes_conditions_then_the_retry_target_chain() {
    let s = Sandbox::new();
    let r = s.run("fail_routes.dot", &["--input", "code=2"]);
    assert_eq!(
        r.path(),
        ["start", "build", "on_two", "exit"],
        "{}",
        r.stderr
    );
    let s = Sandbox::new();
    let r = s.run("fail_routes.dot", &["--input", "code=1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.path(),
        [
            "start",
            "build",
            "graph_target",
            "check",
            "node_target",
            "exit"
        ]
    );
    assert_eq!(s.read("class.txt").trim(), "deterministic");
}

#[test]
fn retries_count_attempts_through_a_counter_file() {
    let s = Sandbox::new();
    let r = s.run("retries.dot", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(s.lines("flaky.txt"), 3);
    assert_eq!(s.lines("bad.txt"), 2);
    assert_eq!(r.path(), ["start", "flaky", "always_bad", "exit"]);
    assert_eq!(r.ctx("internal.retry_count.flaky"), &json!(2));
}

#[test]
fn validation_failures_are_not_retried() {
    let s = Sandbox::new();
    let r = s.run("retries_deterministic.dot", &[]);
    assert_eq!(r.code, 1);
    assert_eq!(s.lines("attempts.txt"), 1);
    assert!(
        r.error().contains("does not match its output_schema"),
        "{}",
        r.error()
    );
}

#[test]
fn allow_partial_and_auto_status() {
    let s = Sandbox::new();
    let r = s.run("partial.dot", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(s.lines("p.txt"), 2);
    assert_eq!(r.path(), ["start", "p", "q", "exit"]);
    assert_eq!(r.json["reason"], "partial_success");
    assert_eq!(r.ctx("outcome"), &json!("succeeded"));
}

#[test]
fn goal_gate_sends_the_run_back_to_its_retry_target() {
    let s = Sandbox::new();
    let r = s.run("goal_gate.dot", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.path(), ["start", "prep", "gate", "prep", "gate", "exit"]);
    assert_eq!(s.lines("prep.txt"), 2);
}

#[test]
fn unsatisfied_goal_gate_without_target_fails() {
    let r = Sandbox::new().run("goal_gate_unsatisfied.dot", &[]);
    assert_eq!(r.code, 1);
    assert!(
        r.error().contains("goal gate `gate` is not satisfied"),
        "{}",
        r.error()
    );
    assert_eq!(r.path(), ["start", "gate"]);
}

#[test]
fn visit_limit_boundary() {
    let s = Sandbox::new();
    let ok = s.run("visits_5.dot", &[]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_eq!(s.lines("visits.txt"), 5);
    let s = Sandbox::new();
    let over = s.run("visits_4.dot", &[]);
    assert_eq!(over.code, 1);
    assert_eq!(s.lines("visits.txt"), 4);
    let e = over.error();
    assert!(e.contains("`again`") && e.contains("max_visits=4"), "{e}");
}

#[test]
fn repeated_failure_signature_stops_the_loop() {
    let s = Sandbox::new();
    let r = s.run("signature_limit.dot", &[]);
    assert_eq!(r.code, 1);
    assert_eq!(s.lines("test.txt"), 3);
    assert_eq!(s.lines("fix.txt"), 2);
    assert!(
        r.error().contains("loop_restart_signature_limit=3"),
        "{}",
        r.error()
    );
}

#[test]
fn loop_restart_resets_the_context() {
    let s = Sandbox::new();
    let r = s.run("loop_restart.dot", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.path(), ["start", "work", "work", "exit"]);
    assert_eq!(r.ctx("round"), &json!("2"));
    assert_eq!(
        r.ctx("seen_2"),
        &json!(""),
        "round 2 must not see round 1's keys"
    );
    assert!(r.ctx("seen_1").is_null());
}

#[test]
fn only_transient_failures_cross_loop_restart() {
    let s = Sandbox::new();
    let r = s.run("loop_restart_guard.dot", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(s.lines("tries.txt"), 2);
    let s = Sandbox::new();
    let r = s.run("loop_restart_guard.dot", &["--input", "mode=plain"]);
    assert_eq!(r.code, 1);
    assert!(
        r.error().contains("only transient infrastructure failures"),
        "{}",
        r.error()
    );
}

#[test]
fn node_timeout_kills_the_process_group() {
    let s = Sandbox::new();
    let r = s.run("timeout.dot", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.path(), ["start", "slow", "timed_out", "exit"]);
    assert!(r.elapsed < Duration::from_secs(10));
    for f in ["shell.pid", "sleep.pid"] {
        let pid: i32 = s.read(f).trim().parse().unwrap_or(0);
        assert!(pid > 0, "{f} missing");
        assert!(gone(pid), "{f}: process {pid} survived the timeout");
    }
}

#[test]
fn wait_node_waits() {
    let r = Sandbox::new().run("wait.dot", &[]);
    assert_eq!(r.code, 0);
    assert!(r.elapsed >= Duration::from_millis(400));
    assert_eq!(r.path(), ["start", "pause", "exit"]);
}

#[test]
fn custom_schemas_store_output_under_the_node_id() {
    let r = Sandbox::new().run("schema_custom.dot", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.ctx("output.report"), &json!({"passed": 12, "failed": 0}));
    assert_eq!(r.ctx("output.inline"), &json!({"ok": true}));
}

#[test]
fn invalid_structured_output_fails_once() {
    let s = Sandbox::new();
    let r = s.run("schema_invalid.dot", &[]);
    assert_eq!(r.code, 1);
    assert_eq!(s.lines("attempts.txt"), 1);
    assert!(r.error().contains("output_schema"), "{}", r.error());
}

#[test]
fn commands_see_context_inputs_and_run_variables() {
    let r = Sandbox::new().run("env.dot", &["--input", "who=ada"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = r.ctx("command.output").as_str().unwrap_or("").to_string();
    let run_id = r.run_id();
    assert_eq!(
        out,
        format!("check the env|ada|b-7|show|{run_id}\ncheck the env|ada|b-7\n")
    );
}

#[test]
fn llm_stages_need_a_provider_or_dry_run() {
    let s = Sandbox::new();
    let r = s.run("llm.dot", &[]);
    assert_eq!(r.code, 1);
    assert!(r.error().contains("no LLM provider"), "{}", r.error());
    let r = s.run("llm.dot", &["--dry-run"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.path(), ["start", "draft", "polish", "exit"]);
    let resp = r.ctx("response.draft").as_str().unwrap_or("");
    assert!(resp.contains("Draft: write a poem"), "{resp}");
}

#[test]
fn invalid_workflows_and_usage_errors_exit_2() {
    let s = Sandbox::new();
    let r = s.run("invalid.dot", &[]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("error[terminal_node]"), "{}", r.stderr);
    let r = s.run("wait.dot", &["--answer", "nonsense"]);
    assert_eq!(r.code, 2);
    let r = s.run("missing.dot", &[]);
    assert_eq!(r.code, 2);
}

#[test]
fn text_format_shows_progress_and_the_run_id() {
    let s = Sandbox::new();
    let file = support::cli::testdata("retries.dot");
    let r = s.finish(s.command(&["run", file.to_str().unwrap_or("")]));
    assert_eq!(r.code, 0);
    assert!(r.stderr.starts_with("run "), "{}", r.stderr);
    assert!(r.stderr.contains("▸ flaky (command)"), "{}", r.stderr);
    assert!(r.stderr.contains("↻ flaky retrying in"), "{}", r.stderr);
    assert!(r.stderr.contains("flaky → always_bad"), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("succeeded: start → flaky → always_bad → exit"),
        "{}",
        r.stderr
    );
}

/// Text mode shows what each command printed as its stage finishes: the last lines of
/// stdout and stderr, each line cut short, with a count of the lines left out.
#[test]
fn text_format_shows_each_commands_output_tail() {
    let s = Sandbox::new();
    let flow = s.work().join("out.dot");
    std::fs::write(
        &flow,
        r#"digraph Out {
  start [shape=Mdiamond]
  talk [shape=parallelogram, script="for i in $(seq 1 30); do echo line-$i; done; echo oops >&2; printf 'x%.0s' $(seq 1 300)"]
  exit [shape=Msquare]
  start -> talk -> exit
}"#,
    )
    .expect("write workflow");
    let r = s.finish(s.command(&["run", flow.to_str().unwrap_or("")]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("│ line-29\n"), "{}", r.stderr);
    assert!(r.stderr.contains("│ … 21 earlier lines"), "{}", r.stderr);
    assert!(
        !r.stderr.contains("│ line-20\n"),
        "only the tail: {}",
        r.stderr
    );
    assert!(r.stderr.contains("stderr│ oops"), "{}", r.stderr);
    let long = format!("│ {}…\n", "x".repeat(200));
    assert!(r.stderr.contains(&long), "a long line is cut: {}", r.stderr);
    // The output comes before the stage's own "finished" line.
    let out_at = r.stderr.find("stderr│ oops").unwrap_or(usize::MAX);
    let done_at = r.stderr.find("✓ talk").unwrap_or(0);
    assert!(out_at < done_at, "{}", r.stderr);
}

#[test]
fn stall_watchdog_cancels_quiet_runs_but_not_waits_or_questions() {
    let r = Sandbox::new().run("stall.dot", &[]);
    assert_eq!(
        r.code, 0,
        "waits and questions are not stalls: {}",
        r.stderr
    );
    assert_eq!(r.path(), ["start", "nap", "ask", "quiet", "exit"]);
    let r = Sandbox::new().run("stall.dot", &["--input", "quiet=yes"]);
    assert_eq!(r.code, 1);
    assert!(r.error().contains("stalled"), "{}", r.error());
    assert!(r.elapsed < Duration::from_millis(2900), "{:?}", r.elapsed);
}

#[test]
fn last_stage_is_written_only_by_stages_that_do_work() {
    let s = Sandbox::new();
    let r = s.run("last_stage.dot", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Two diamonds in a row both see `build`, and so does the stage after them.
    assert_eq!(r.path(), ["start", "build", "route", "again", "ok", "exit"]);
    assert_eq!(s.read("seen.txt").trim(), "build");
    // The exit leaves it at the last stage that did work.
    assert_eq!(r.ctx("last_stage"), &json!("ok"));
}

#[test]
fn run_logs_and_export_stages_write_the_per_stage_folders() {
    let s = Sandbox::new();
    let logs = s.work().join("logs");
    let r = s.run(
        "logs.dot",
        &["--dry-run", "--logs", logs.to_str().unwrap_or("")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let read = |p: &str| std::fs::read_to_string(logs.join(p)).unwrap_or_default();
    let json = |p: &str| serde_json::from_str::<serde_json::Value>(&read(p)).unwrap_or_default();
    // Command stage: its output files and status.
    assert_eq!(read("build/stdout"), "hello\n");
    assert_eq!(read("build/stderr"), "warning\n");
    let status = json("build/status.json");
    assert_eq!(status["outcome"], "succeeded");
    assert_eq!(status["failure_reason"], json!(null));
    assert_eq!(status["context_updates"]["command.output"], "hello\n");
    // LLM stage: exactly what the model would have been sent, and its response.
    let prompt = read("ask/prompt.md");
    assert!(prompt.contains("Goal: ship the parser"), "{prompt}");
    assert!(
        prompt.ends_with("Summarise the build for: ship the parser"),
        "{prompt}"
    );
    assert!(read("ask/response.md").starts_with("[dry run]"));
    assert_eq!(json("ask/status.json")["outcome"], "succeeded");
    // checkpoint.json: completed nodes in order, and the context.
    let cp = json("checkpoint.json");
    let done: Vec<&str> = cp["completed_nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(&done[..3], ["start", "build", "ask"], "{cp}");
    assert_eq!(cp["context"]["graph.goal"], "ship the parser");

    // `svc events` shows the same text in the stage's `stage.prompt` event.
    let events = s
        .command(&["events", &r.run_id()])
        .output()
        .expect("svc events");
    let shown = String::from_utf8_lossy(&events.stdout).to_string();
    let event = shown
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "stage.prompt")
        .unwrap_or_default();
    assert_eq!(event["node_id"], "ask");
    assert_eq!(event["properties"]["text"], prompt.as_str());
    assert_eq!(event["properties"]["fidelity"], "compact");

    // `svc export --stages DIR RUN_ID` writes the same layout from the store.
    let again = s.export_stages("again", &r.run_id());
    for f in [
        "build/stdout",
        "build/status.json",
        "ask/prompt.md",
        "ask/response.md",
        "checkpoint.json",
    ] {
        assert_eq!(
            std::fs::read_to_string(again.join(f)).unwrap_or_default(),
            read(f),
            "{f}"
        );
    }
}

#[test]
fn svc_run_uses_the_settings_run_goal() {
    let s = Sandbox::new();
    std::fs::create_dir_all(s.state()).expect("state dir");
    std::fs::write(
        s.state().join("settings.toml"),
        "[run]\ngoal = \"the settings goal\"\n",
    )
    .expect("settings");
    let logs = s.work().join("logs");
    let r = s.run(
        "logs.dot",
        &["--dry-run", "--logs", logs.to_str().unwrap_or("")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.ctx("graph.goal"), &json!("the settings goal"));
    let prompt = std::fs::read_to_string(logs.join("ask/prompt.md")).unwrap_or_default();
    assert!(prompt.contains("Goal: the settings goal"), "{prompt}");
    assert!(prompt.ends_with("for: the settings goal"), "{prompt}");
}
