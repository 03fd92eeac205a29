//! Workflows written for other Attractor-family engines (`testdata/compat/`, one per rule of
//! issue 14), driven through the real binary: `svc validate` for the lint rules, `svc parse`
//! for aliases the model applies, `svc run` for what a run does with them.

use crate::support;
use std::path::PathBuf;
use std::process::Command;

use crate::support::cli::Sandbox;
use serde_json::Value;

fn compat(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/compat")
        .join(name)
}

/// `svc validate FILE`: exit code and stdout.
fn validate(name: &str) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_svc"))
        .arg("validate")
        .arg(compat(name))
        .output()
        .expect("svc runs");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// The diagnostic lines of one rule, without the `path:line:col: ` prefix.
fn lines_of(out: &str, rule: &str) -> Vec<String> {
    let tag = format!("[{rule}]: ");
    out.lines()
        .filter_map(|l| l.split_once(&tag).map(|(_, m)| m.to_string()))
        .collect()
}

/// `svc run testdata/compat/NAME --format json EXTRA...` in a fresh sandbox.
fn run(sb: &Sandbox, name: &str, extra: &[&str]) -> support::cli::Finished {
    let file = compat(name);
    let mut args = vec!["run", file.to_str().unwrap_or(""), "--format", "json"];
    args.extend_from_slice(extra);
    sb.finish(sb.command(&args))
}

#[test]
fn a_dead_end_validates_with_a_warning_and_a_run_reaching_it_fails_with_no_route() {
    let (code, out) = validate("dead_end_success.dot");
    assert_eq!(code, 0, "{out}");
    let w = lines_of(&out, "dead_end");
    assert_eq!(w.len(), 1, "{out}");
    assert!(w[0].contains("no route from `deploy`"), "{}", w[0]);
    assert!(out.contains("warning[dead_end]"), "{out}");

    let sb = Sandbox::new();
    let r = run(&sb, "dead_end_success.dot", &["--answer", "approve=D"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.status(), "failed");
    assert!(
        r.error().contains("no route from `deploy`"),
        "{}",
        r.error()
    );
    // The stage itself ran: the run fails after it, at the dead end.
    assert_eq!(sb.read("deployed.txt"), "deployed\n");
    assert_eq!(r.path(), ["start", "approve", "deploy"]);

    // Choosing the other option never meets the dead end.
    let sb = Sandbox::new();
    let r = run(&sb, "dead_end_success.dot", &["--answer", "approve=S"]);
    assert_eq!(r.status(), "succeeded", "{}", r.stderr);
}

#[test]
fn a_stage_failing_at_a_dead_end_fails_the_run_with_its_own_error() {
    let sb = Sandbox::new();
    let r = run(&sb, "dead_end_failure.dot", &[]);
    assert_eq!(r.code, 1);
    assert_eq!(r.status(), "failed");
    assert!(
        r.error().contains("stage `boom` failed") && r.error().contains("the disk is full"),
        "{}",
        r.error()
    );
}

#[test]
fn a_loop_with_no_way_out_is_refused_naming_its_nodes() {
    let (code, out) = validate("trapped_loop.dot");
    assert_eq!(code, 1, "{out}");
    let e = lines_of(&out, "no_path_to_exit");
    assert_eq!(e.len(), 1, "{out}");
    assert!(e[0].contains("implement, review"), "{}", e[0]);
    assert!(out.contains("error[no_path_to_exit]"), "{out}");
    // `svc run` refuses it too instead of looping.
    let sb = Sandbox::new();
    let r = run(&sb, "trapped_loop.dot", &["--dry-run"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("no_path_to_exit"), "{}", r.stderr);
}

#[test]
fn typos_are_warnings_with_a_did_you_mean_and_graphviz_styling_is_not() {
    let (code, out) = validate("typos.dot");
    assert_eq!(code, 0, "{out}");
    let unknown = lines_of(&out, "unknown_attribute");
    assert_eq!(
        unknown,
        [
            "graph: unknown attribute `gaol` is ignored; did you mean `goal`?",
            "node `build`: unknown attribute `scirpt` is ignored; did you mean `script`?",
            "edge `build -> exit`: unknown attribute `wieght` is ignored; did you mean `weight`?",
        ],
        "{out}"
    );
    let sheet = lines_of(&out, "stylesheet_property");
    assert_eq!(sheet.len(), 1, "{out}");
    assert!(sheet[0].contains("`modle`") && sheet[0].contains("did you mean `model`?"));
    assert!(
        out.ends_with("ok: 1 file checked, 0 errors, 4 warnings\n"),
        "{out}"
    );
}

#[test]
fn a_command_node_without_a_script_is_an_error() {
    let (code, out) = validate("command_no_script.dot");
    assert_eq!(code, 1, "{out}");
    let e = lines_of(&out, "command_script");
    assert_eq!(e.len(), 1, "{out}");
    assert!(e[0].contains("`test` has no script"), "{}", e[0]);
}

#[test]
fn other_engines_names_are_read_as_ours_with_warnings_naming_ours() {
    let (code, out) = validate("aliases.dot");
    assert_eq!(code, 0, "{out}");
    let alias = lines_of(&out, "alias_attribute");
    for want in [
        "model_stylesheet property `llm_model` is read as `model`",
        "model_stylesheet property `llm_provider` is read as `provider`",
        "graph: `default_max_retry` is read as `default_max_retries`",
        "node `probe`: `tool_command` is read as `script`",
        "node `review`: `llm_model` is read as `model`",
        "node `review`: `llm_provider` is read as `provider`",
    ] {
        assert!(
            alias.iter().any(|l| l.contains(want)),
            "missing `{want}` in:\n{out}"
        );
    }
    let ctx = lines_of(&out, "alias_context_key");
    assert_eq!(ctx.len(), 1, "{out}");
    assert!(
        ctx[0].contains("write `context.command.output`"),
        "{}",
        ctx[0]
    );

    // The model the engine sees carries our names.
    let o = Command::new(env!("CARGO_BIN_EXE_svc"))
        .arg("parse")
        .arg(compat("aliases.dot"))
        .output()
        .expect("svc parse");
    let model: Value = serde_json::from_slice(&o.stdout).expect("parse JSON");
    let node = |id: &str| {
        model["nodes"]
            .as_array()
            .and_then(|a| a.iter().find(|n| n["id"] == id))
            .map(|n| n["attrs"].clone())
            .unwrap_or(Value::Null)
    };
    assert_eq!(node("probe")["script"], "printf ready");
    assert_eq!(
        node("review")["model"],
        "gpt-5.2",
        "a node's own alias beats the stylesheet"
    );
    assert_eq!(node("review")["provider"], "openai");
    assert_eq!(node("probe")["model"], "claude-opus-4-6");
    assert_eq!(node("probe")["provider"], "anthropic");

    // The run executes tool_command and routes on context.tool.output (= command.output).
    let sb = Sandbox::new();
    let r = run(&sb, "aliases.dot", &[]);
    assert_eq!(r.status(), "succeeded", "{} {}", r.error(), r.stderr);
    assert_eq!(r.path(), ["start", "probe", "check", "ready", "exit"]);
    assert_eq!(sb.read("branch.txt"), "took-ready-branch\n");
}

#[test]
fn manager_nodes_read_the_legacy_child_key_and_unprefixed_loop_keys() {
    let (code, out) = validate("manager_aliases.dot");
    assert_eq!(code, 0, "{out}");
    assert_eq!(lines_of(&out, "alias_attribute").len(), 4, "{out}");
    assert!(lines_of(&out, "unknown_attribute").is_empty(), "{out}");
    let sb = Sandbox::new();
    let r = run(&sb, "manager_aliases.dot", &[]);
    assert_eq!(r.status(), "succeeded", "{} {}", r.error(), r.stderr);
    // The child ran (stack.child_dotfile) and was stopped by stop_condition before step2.
    assert_eq!(sb.lines("child_step1.txt"), 1);
    assert_eq!(sb.read("child_done.txt"), "");
}

#[test]
fn a_human_gate_asks_its_prompt_else_its_label_else_its_id() {
    let sb = Sandbox::new();
    let r = run(
        &sb,
        "human_prompt.dot",
        &[
            "--answer",
            "ship=Y",
            "--answer",
            "confirm=Y",
            "--answer",
            "last=O",
        ],
    );
    assert_eq!(r.status(), "succeeded", "{} {}", r.error(), r.stderr);
    assert!(
        r.stderr
            .contains("? ship: Ship release 2.0 to production? → Y"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("? confirm: Really? → Y"), "{}", r.stderr);
    assert!(r.stderr.contains("? last: last → O"), "{}", r.stderr);
}
