//! The agent loop against the scripted server: steering (also late, during the final
//! answer, and refused when no session runs), loop detection, the turn limit,
//! cancellation (also inside a running shell command), conversation reuse, tool-output
//! truncation, bad arguments, apply_patch, and sandbox escapes through every file tool
//! (absolute paths, `..`, symlinks; the tree walks of grep, glob and list_dir; shell cwd).

use std::time::{Duration, Instant};

use crate::support::llm::*;
use serde_json::{json, Value};
use svc::internal::agent::{
    AgentConfig, AgentError, AgentEvent, AgentStop, Session, SteerLocation, Steering, LOOP_WARNING,
};
use svc::internal::base::cancel::CancelToken;
use svc::internal::engine::services::ToolHooks;
use svc::internal::llm::{Provider, Usage};
use svc::internal::sandbox::Sandbox;

const P: Provider = Provider::Anthropic;

fn u() -> Usage {
    Usage {
        input: 10,
        output: 5,
        ..Default::default()
    }
}

fn session(dir: &std::path::Path, model: &str) -> Session {
    Session::new(AgentConfig::new(model), Sandbox::new(dir).expect("sandbox")).expect("session")
}

fn results(p: Provider, body: &Value) -> Vec<(String, String, bool)> {
    tool_results(p, body)
}

#[test]
fn steering_is_injected_before_the_next_model_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = ScriptedServer::start(vec![
        reply(P, &tools(&[("t1", "list_dir", json!({}))]), u(), true),
        reply(P, &text("ok"), u(), true),
    ]);
    let c = client(P, &server);
    let steering = Steering::new();
    steering.push("Before you start: be careful.");
    let mut s = session(dir.path(), "sonnet").with_steering(steering.clone());
    let handle = steering.clone();
    let mut injected = Vec::new();
    s.run(&c, "Do the task.", &CancelToken::new(), &mut |e| {
        if let AgentEvent::ToolStarted { .. } = e {
            // The server pushes guidance while a tool runs.
            handle.push("Focus on src/ only.");
        }
        if let AgentEvent::SteeringInjected { text, .. } = e {
            injected.push(text);
        }
    })
    .expect("run");
    assert_eq!(
        injected,
        vec!["Before you start: be careful.", "Focus on src/ only."]
    );
    let reqs = server.requests();
    let first = user_texts(P, &reqs[0].body);
    assert_eq!(first, vec!["Do the task.", "Before you start: be careful."]);
    let second = user_texts(P, &reqs[1].body);
    assert_eq!(
        second.last().map(String::as_str),
        Some("Focus on src/ only.")
    );
    // Strict alternation: tool results and steering share one user turn, results first.
    let msgs = reqs[1].body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
    assert_eq!(msgs[2]["content"][1]["text"], "Focus on src/ only.");
    assert!(steering.is_empty());
}

#[test]
fn guidance_is_accepted_only_while_a_session_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let steering = Steering::new();
    assert!(!steering.is_active());
    assert!(steering.offer("too early", None).is_err());
    // The provider sees a running session: guidance offered while it answers is accepted.
    let during = steering.clone();
    let accepted = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let acc = accepted.clone();
    let server = ScriptedServer::start_with(move |n, _| {
        if n == 0 {
            let loc = SteerLocation {
                file: "src/lib.rs".into(),
                line: Some(12),
            };
            let r = during.offer("Keep the public API unchanged.", Some(loc));
            acc.lock().expect("lock").push(r.is_ok());
            reply(P, &text("All done."), u(), true)
        } else {
            reply(P, &text("Done, and the API is unchanged."), u(), true)
        }
    });
    let c = client(P, &server);
    let mut s = session(dir.path(), "sonnet").with_steering(steering.clone());
    let mut injected = Vec::new();
    let out = s
        .run(&c, "Refactor.", &CancelToken::new(), &mut |e| {
            if let AgentEvent::SteeringInjected { .. } = &e {
                injected.push(e.properties());
            }
        })
        .expect("run");
    assert_eq!(*accepted.lock().expect("lock"), vec![true]);
    // The guidance came while the model gave its final answer: one more call delivers it.
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let last = user_texts(P, &reqs[1].body);
    let guidance = last.last().cloned().unwrap_or_default();
    assert!(
        guidance.contains("src/lib.rs:12") && guidance.contains("Keep the public API unchanged."),
        "{guidance}"
    );
    assert_eq!(out.text, "Done, and the API is unchanged.");
    assert_eq!(injected.len(), 1);
    assert_eq!(injected[0]["text"], guidance.as_str());
    assert_eq!(injected[0]["location"]["file"], "src/lib.rs");
    assert_eq!(injected[0]["location"]["line"], 12);
    // Once the session ended, nothing runs to read guidance.
    assert!(!steering.is_active());
    assert!(steering.offer("too late", None).is_err());
    assert!(steering.is_empty());
}

#[test]
fn identical_tool_turns_are_detected_as_a_loop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let same = tools(&[("x", "glob", json!({"pattern": "*.md"}))]);
    let server = ScriptedServer::start(vec![
        reply(P, &same, u(), false),
        reply(
            P,
            &tools(&[("y", "glob", json!({"pattern": "*.md"}))]),
            u(),
            false,
        ),
        reply(
            P,
            &tools(&[("z", "glob", json!({"pattern": "*.md"}))]),
            u(),
            false,
        ),
        reply(P, &text("giving up"), u(), false),
    ]);
    let c = client(P, &server).with_streaming(false);
    let mut s = session(dir.path(), "sonnet");
    let mut detected = 0;
    let out = s
        .run(&c, "find docs", &CancelToken::new(), &mut |e| {
            if e.kind() == "agent.loop.detected" {
                detected += 1;
            }
        })
        .expect("run");
    assert_eq!(detected, 1);
    assert_eq!(out.text, "giving up");
    let reqs = server.requests();
    assert!(!user_texts(P, &reqs[2].body)
        .iter()
        .any(|t| t == LOOP_WARNING));
    assert_eq!(
        user_texts(P, &reqs[3].body).last().map(String::as_str),
        Some(LOOP_WARNING)
    );
}

#[test]
fn alternating_tool_turns_are_detected_as_a_loop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = tools(&[("a", "glob", json!({"pattern": "*.md"}))]);
    let b = tools(&[("b", "list_dir", json!({"path": "."}))]);
    let server = ScriptedServer::start(vec![
        reply(P, &a, u(), false),
        reply(P, &b, u(), false),
        reply(P, &a, u(), false),
        reply(P, &b, u(), false),
        reply(P, &text("stopping"), u(), false),
    ]);
    let c = client(P, &server).with_streaming(false);
    let mut s = session(dir.path(), "sonnet");
    let mut detected = Vec::new();
    s.run(&c, "find docs", &CancelToken::new(), &mut |e| {
        if e.kind() == "agent.loop.detected" {
            detected.push(e.properties());
        }
    })
    .expect("run");
    assert_eq!(detected, vec![json!({"pattern_length": 2, "repeats": 2})]);
    let reqs = server.requests();
    assert_eq!(
        user_texts(P, &reqs[4].body).last().map(String::as_str),
        Some(LOOP_WARNING)
    );
}

#[test]
fn loop_threshold_is_configurable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let same = tools(&[("x", "list_dir", json!({"path": "."}))]);
    let server = ScriptedServer::start(vec![
        reply(P, &same, u(), false),
        reply(P, &same, u(), false),
        reply(P, &text("ok"), u(), false),
    ]);
    let c = client(P, &server);
    let cfg = AgentConfig {
        loop_threshold: 2,
        ..AgentConfig::new("sonnet")
    };
    let mut s = Session::new(cfg, Sandbox::new(dir.path()).expect("sb")).expect("session");
    let mut detected = 0;
    s.run(&c, "x", &CancelToken::new(), &mut |e| {
        detected += (e.kind() == "agent.loop.detected") as i32
    })
    .expect("run");
    assert_eq!(detected, 1);
}

#[test]
fn the_turn_limit_stops_the_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = ScriptedServer::start(vec![
        reply(
            P,
            &Turn::Tools(
                "first".into(),
                vec![("a".into(), "list_dir".into(), json!({}))],
            ),
            u(),
            false,
        ),
        reply(
            P,
            &tools(&[("b", "glob", json!({"pattern": "*"}))]),
            u(),
            false,
        ),
        reply(P, &text("never asked"), u(), false),
    ]);
    let c = client(P, &server);
    let cfg = AgentConfig {
        max_turns: 2,
        ..AgentConfig::new("sonnet")
    };
    let mut s = Session::new(cfg, Sandbox::new(dir.path()).expect("sb")).expect("session");
    let mut limit = None;
    let out = s
        .run(&c, "x", &CancelToken::new(), &mut |e| {
            if let AgentEvent::TurnLimit { max_turns } = e {
                limit = Some(max_turns);
            }
        })
        .expect("run");
    assert_eq!(limit, Some(2));
    assert_eq!(out.stop, AgentStop::TurnLimit);
    assert_eq!(out.turns, 2);
    assert_eq!(out.text, "first");
    assert_eq!(server.count(), 2);
}

#[test]
fn cancellation_stops_a_running_shell_and_the_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = ScriptedServer::start(vec![
        reply(
            P,
            &tools(&[(
                "s",
                "shell",
                json!({"command": "sleep 30", "timeout_ms": 60000}),
            )]),
            u(),
            false,
        ),
        reply(P, &text("unreachable"), u(), false),
    ]);
    let c = client(P, &server);
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    let mut s = session(dir.path(), "sonnet");
    let t = Instant::now();
    let mut shell_out = None;
    let r = s.run(&c, "x", &cancel, &mut |e| match e {
        AgentEvent::ToolStarted { .. } => {
            let c3 = c2.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(150));
                c3.cancel("user requested");
            });
        }
        AgentEvent::ToolCompleted { output, .. } => shell_out = Some(output),
        _ => {}
    });
    assert!(matches!(r, Err(AgentError::Cancelled { .. })), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(shell_out.unwrap_or_default().contains("cancelled"));
    assert_eq!(server.count(), 1);
    // A cancelled token stops before any call.
    let server = ScriptedServer::start(vec![]);
    let c = client(P, &server);
    let r = s.run(&c, "y", &cancel, &mut |_| {});
    assert!(r.is_err());
    assert_eq!(server.count(), 0);
}

#[test]
fn a_second_input_continues_the_conversation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = ScriptedServer::start(vec![
        reply(P, &text("first answer"), u(), false),
        reply(P, &text("second"), u(), false),
    ]);
    let c = client(P, &server);
    let mut s = session(dir.path(), "sonnet");
    s.run(&c, "one", &CancelToken::new(), &mut |_| {})
        .expect("run");
    let history = s.messages().to_vec();
    // A new session restored from the history (thread reuse) continues it.
    let mut s2 = session(dir.path(), "sonnet").with_history(history);
    let mut started = 0;
    s2.run(&c, "two", &CancelToken::new(), &mut |e| {
        started += (e.kind() == "agent.session.started") as i32
    })
    .expect("run");
    assert_eq!(started, 1);
    let msgs = server.requests()[1].body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[1]["content"][0]["text"], "first answer");
    assert_eq!(s2.messages().len(), 4);
}

#[test]
fn shell_output_is_truncated_for_the_model_but_not_in_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = ScriptedServer::start(vec![
        reply(
            P,
            &tools(&[("s", "shell", json!({"command": "seq 1 2000"}))]),
            u(),
            false,
        ),
        reply(P, &text("ok"), u(), false),
    ]);
    let c = client(P, &server);
    let mut s = session(dir.path(), "sonnet");
    let mut full = String::new();
    s.run(&c, "x", &CancelToken::new(), &mut |e| {
        if let AgentEvent::ToolCompleted { output, .. } = e {
            full = output;
        }
    })
    .expect("run");
    assert!(full.contains("\n1000\n") && full.contains("\n2000\n"));
    let r = results(P, &server.requests()[1].body);
    let seen = &r[0].1;
    assert!(seen.contains("lines omitted"), "{seen}");
    assert!(seen.contains("exit code: 0") && seen.contains("2000"));
    assert!(seen.lines().count() <= 260);
}

#[test]
fn bad_arguments_come_back_as_error_results() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = ScriptedServer::start(vec![
        reply(
            P,
            &tools(&[
                ("a", "read_file", json!({})),
                ("b", "read_file", json!({"file_path": 42})),
                ("c", "grep", json!({"pattern": "("})),
                (
                    "d",
                    "edit_file",
                    json!({"file_path": "missing.txt", "old_string": "a", "new_string": "b"}),
                ),
                ("e", "apply_patch", json!({"patch": "x"})),
            ]),
            u(),
            false,
        ),
        reply(P, &text("ok"), u(), false),
    ]);
    let c = client(P, &server);
    let mut s = session(dir.path(), "sonnet");
    let out = s
        .run(&c, "x", &CancelToken::new(), &mut |_| {})
        .expect("session survives");
    assert_eq!(out.text, "ok");
    let r = results(P, &server.requests()[1].body);
    assert!(r.iter().all(|(_, _, err)| *err), "{r:?}");
    assert!(r[0].1.contains("missing required argument `file_path`"));
    assert!(r[1].1.contains("must be a string"));
    assert!(r[2].1.contains("invalid regex"));
    assert!(r[3].1.contains("cannot read missing.txt"));
    // apply_patch is not an Anthropic tool.
    assert!(r[4].1.contains("unknown tool `apply_patch`"));
}

#[test]
fn apply_patch_adds_updates_moves_and_deletes() {
    let p = Provider::OpenAi;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("keep.rs"),
        "fn main() {\n    println!(\"hi\");\n}\n\nfn other() {\n    println!(\"hi\");\n}\n",
    )
    .expect("w");
    std::fs::write(dir.path().join("old.txt"), "x\n").expect("w");
    std::fs::write(dir.path().join("rename.txt"), "one\ntwo\n").expect("w");
    let patch = "*** Begin Patch\n\
*** Add File: docs/new.md\n+# Title\n+body\n\
*** Update File: keep.rs\n@@ fn other() {\n-    println!(\"hi\");\n+    println!(\"bye\");\n\
*** Delete File: old.txt\n\
*** Update File: rename.txt\n*** Move to: renamed.txt\n one\n-two\n+three\n\
*** End Patch";
    let server = ScriptedServer::start(vec![
        reply(
            p,
            &tools(&[("p1", "apply_patch", json!({"patch": patch}))]),
            u(),
            false,
        ),
        reply(
            p,
            &tools(&[(
                "p2",
                "apply_patch",
                json!({"patch": "*** Begin Patch\n*** Update File: keep.rs\n-not there\n+x\n*** End Patch"}),
            )]),
            u(),
            false,
        ),
        reply(p, &text("done"), u(), false),
    ]);
    let c = client(p, &server);
    let mut s = session(dir.path(), "gpt-5.2");
    let out = s
        .run(&c, "x", &CancelToken::new(), &mut |_| {})
        .expect("run");
    let d = dir.path();
    assert_eq!(
        std::fs::read_to_string(d.join("docs/new.md")).expect("r"),
        "# Title\nbody\n"
    );
    assert_eq!(
        std::fs::read_to_string(d.join("keep.rs")).expect("r"),
        "fn main() {\n    println!(\"hi\");\n}\n\nfn other() {\n    println!(\"bye\");\n}\n"
    );
    assert!(!d.join("old.txt").exists());
    assert!(!d.join("rename.txt").exists());
    assert_eq!(
        std::fs::read_to_string(d.join("renamed.txt")).expect("r"),
        "one\nthree\n"
    );
    assert_eq!(
        out.files_touched,
        vec![
            "docs/new.md",
            "keep.rs",
            "old.txt",
            "rename.txt",
            "renamed.txt"
        ]
    );
    let r = results(p, &server.requests()[1].body);
    assert!(
        !r[0].2 && r[0].1.contains("A docs/new.md") && r[0].1.contains("D old.txt"),
        "{r:?}"
    );
    let r = results(p, &server.requests()[2].body);
    assert!(r[1].2 && r[1].1.contains("could not find"), "{r:?}");
}

#[test]
fn every_file_tool_refuses_to_leave_the_sandbox() {
    let outer = tempfile::tempdir().expect("tempdir");
    let root = outer.path().join("work");
    std::fs::create_dir(&root).expect("mkdir");
    std::fs::write(outer.path().join("secret.txt"), "TOP SECRET").expect("w");
    std::os::unix::fs::symlink(outer.path(), root.join("escape")).expect("symlink");
    std::os::unix::fs::symlink(outer.path().join("secret.txt"), root.join("link.txt"))
        .expect("symlink");
    std::os::unix::fs::symlink(outer.path().join("planted.txt"), root.join("dangling.txt"))
        .expect("symlink");
    let abs_secret = outer.path().join("secret.txt").display().to_string();

    let attempts_common = vec![
        ("read_file", json!({"file_path": "../secret.txt"})),
        ("read_file", json!({"file_path": abs_secret})),
        ("read_file", json!({"file_path": "escape/secret.txt"})),
        ("read_file", json!({"file_path": "link.txt"})),
        ("read_file", json!({"file_path": "sub/../../secret.txt"})),
        (
            "write_file",
            json!({"file_path": "../planted.txt", "content": "x"}),
        ),
        (
            "write_file",
            json!({"file_path": "escape/planted.txt", "content": "x"}),
        ),
        (
            "write_file",
            json!({"file_path": "dangling.txt", "content": "x"}),
        ),
        (
            "write_file",
            json!({"file_path": "/tmp/../../planted.txt", "content": "x"}),
        ),
        ("grep", json!({"pattern": "SECRET", "path": ".."})),
        ("grep", json!({"pattern": "SECRET", "path": "escape"})),
        ("glob", json!({"pattern": "*", "path": "/"})),
        ("glob", json!({"pattern": "**/*.txt", "path": "escape"})),
        ("list_dir", json!({"path": "../"})),
        ("list_dir", json!({"path": "escape"})),
        // Absolute paths outside the root, for every tool that takes a path.
        (
            "write_file",
            json!({"file_path": outer.path().join("planted.txt").display().to_string(), "content": "x"}),
        ),
        (
            "grep",
            json!({"pattern": "SECRET", "path": outer.path().display().to_string()}),
        ),
        ("grep", json!({"pattern": "SECRET", "path": abs_secret})),
        ("glob", json!({"pattern": "*", "path": ".."})),
        (
            "list_dir",
            json!({"path": outer.path().display().to_string()}),
        ),
    ];
    for p in [Provider::Anthropic, Provider::OpenAi] {
        let mut attempts = attempts_common.clone();
        if p == Provider::Anthropic {
            attempts.push((
                "edit_file",
                json!({"file_path": "link.txt", "old_string": "TOP", "new_string": "NOT"}),
            ));
            attempts.push((
                "edit_file",
                json!({"file_path": "../secret.txt", "old_string": "TOP", "new_string": "NOT"}),
            ));
            attempts.push((
                "edit_file",
                json!({"file_path": abs_secret, "old_string": "TOP", "new_string": "NOT"}),
            ));
            attempts.push((
                "edit_file",
                json!({"file_path": "escape/secret.txt", "old_string": "TOP", "new_string": "NOT"}),
            ));
        } else {
            attempts.push(("apply_patch", json!({"patch": "*** Begin Patch\n*** Add File: ../planted.txt\n+x\n*** End Patch"})));
            attempts.push(("apply_patch", json!({"patch": "*** Begin Patch\n*** Update File: link.txt\n-TOP SECRET\n+NOT\n*** End Patch"})));
            attempts.push(("apply_patch", json!({"patch": "*** Begin Patch\n*** Delete File: escape/secret.txt\n*** End Patch"})));
            attempts.push(("apply_patch", json!({"patch": "*** Begin Patch\n*** Add File: inside.txt\n+ok\n*** Update File: ../secret.txt\n-TOP SECRET\n+NOT\n*** End Patch"})));
            attempts.push(("apply_patch", json!({"patch": format!("*** Begin Patch\n*** Update File: {abs_secret}\n-TOP SECRET\n+NOT\n*** End Patch")})));
            attempts.push(("apply_patch", json!({"patch": "*** Begin Patch\n*** Add File: inside2.txt\n+a\n*** Update File: inside2.txt\n*** Move to: ../moved.txt\n-a\n+b\n*** End Patch"})));
        }
        let calls: Vec<(String, &str, Value)> = attempts
            .iter()
            .enumerate()
            .map(|(i, (n, a))| (format!("c{i}"), *n, a.clone()))
            .collect();
        let call_refs: Vec<(&str, &str, Value)> = calls
            .iter()
            .map(|(i, n, a)| (i.as_str(), *n, a.clone()))
            .collect();
        let server = ScriptedServer::start(vec![
            reply(p, &tools(&call_refs), u(), false),
            reply(p, &text("ok"), u(), false),
        ]);
        let c = client(p, &server);
        let mut s = session(&root, &model_for(p));
        let mut outputs = Vec::new();
        let out = s
            .run(&c, "x", &CancelToken::new(), &mut |e| {
                if let AgentEvent::ToolCompleted {
                    output,
                    is_error,
                    tool_name,
                    ..
                } = e
                {
                    outputs.push((tool_name, output, is_error));
                }
            })
            .expect("run");
        assert_eq!(outputs.len(), attempts.len());
        for (i, (name, output, is_error)) in outputs.iter().enumerate() {
            assert!(
                *is_error,
                "{p} attempt {i} ({name}) was not refused: {output}"
            );
            assert!(
                output.contains("outside the working directory"),
                "{p} attempt {i} ({name}): {output}"
            );
            assert!(!output.contains("TOP SECRET"));
        }
        assert!(out.files_touched.is_empty());
        assert_eq!(
            std::fs::read_to_string(outer.path().join("secret.txt")).expect("r"),
            "TOP SECRET"
        );
        assert!(!outer.path().join("planted.txt").exists());
        // The all-or-nothing patches wrote nothing.
        assert!(!root.join("inside.txt").exists());
        assert!(!root.join("inside2.txt").exists());
        assert!(!outer.path().join("moved.txt").exists());
    }
}

#[test]
fn tree_tools_and_shell_stay_in_the_working_directory() {
    // grep, glob and list_dir walk the tree themselves: a symlink inside it that points
    // outside must not let them read (or descend into) what it points to; links that stay
    // inside still work. The shell runs in the working directory.
    let outer = tempfile::tempdir().expect("tempdir");
    let root = outer.path().join("work");
    std::fs::create_dir(&root).expect("mkdir");
    std::fs::write(outer.path().join("secret.txt"), "TOP SECRET").expect("w");
    std::fs::write(root.join("inner.txt"), "inner SECRET").expect("w");
    std::os::unix::fs::symlink(outer.path().join("secret.txt"), root.join("link.txt"))
        .expect("symlink");
    std::os::unix::fs::symlink(outer.path(), root.join("escape")).expect("symlink");
    std::os::unix::fs::symlink("inner.txt", root.join("inlink.txt")).expect("symlink");
    let calls = [
        ("g1", "grep", json!({"pattern": "SECRET"})),
        ("g2", "grep", json!({"pattern": "SECRET", "path": "."})),
        (
            "g3",
            "grep",
            json!({"pattern": "SECRET", "path": ".", "glob_filter": "*.txt"}),
        ),
        ("g4", "glob", json!({"pattern": "**/*.txt"})),
        ("g5", "list_dir", json!({"depth": 3})),
        ("g6", "shell", json!({"command": "pwd"})),
    ];
    let server = ScriptedServer::start(vec![
        reply(P, &tools(&calls), u(), false),
        reply(P, &text("ok"), u(), false),
    ]);
    let c = client(P, &server);
    let mut s = session(&root, &model_for(P));
    let mut outputs = Vec::new();
    s.run(&c, "x", &CancelToken::new(), &mut |e| {
        if let AgentEvent::ToolCompleted {
            output, is_error, ..
        } = e
        {
            outputs.push((output, is_error));
        }
    })
    .expect("run");
    assert_eq!(outputs.len(), calls.len());
    for (i, (output, is_error)) in outputs.iter().enumerate() {
        assert!(!is_error, "call {i}: {output}");
        assert!(!output.contains("TOP SECRET"), "call {i} leaked: {output}");
        assert!(
            !output.contains("escape/secret.txt"),
            "call {i} walked out: {output}"
        );
    }
    for grep in &outputs[..3] {
        assert!(grep.0.contains("inner.txt:1:inner SECRET"), "{}", grep.0);
        assert!(grep.0.contains("inlink.txt:1:inner SECRET"), "{}", grep.0);
        assert!(!grep.0.contains("link.txt:1:TOP"), "{}", grep.0);
    }
    let root_shown = root.canonicalize().expect("canon").display().to_string();
    assert!(
        outputs[5].0.contains(&format!("stdout:\n{root_shown}\n")),
        "{}",
        outputs[5].0
    );
    // The model got the same answers.
    let r = results(P, &server.requests()[1].body);
    assert!(
        r.iter().all(|(_, out, _)| !out.contains("TOP SECRET")),
        "{r:?}"
    );
}

#[test]
fn the_stage_backend_continues_a_conversation_for_repair_calls() {
    use std::sync::Arc;
    use svc::internal::agent::stage::StageBackend;
    use svc::internal::engine::{LlmMode, LlmRequest};
    let dir = tempfile::tempdir().expect("tempdir");
    let server = ScriptedServer::start(vec![
        reply(P, &text("not json"), u(), true),
        reply(P, &text("{\"outcome\": \"succeeded\"}"), u(), true),
        reply(
            P,
            &tools(&[(
                "w",
                "write_file",
                json!({"file_path": "a.txt", "content": "x"}),
            )]),
            u(),
            true,
        ),
        reply(P, &text("wrote it"), u(), true),
        reply(P, &text("{\"preferred_next_label\": \"done\"}"), u(), true),
    ]);
    let c = client(P, &server);
    let creds = Arc::new(
        svc::internal::llm::StaticCredentials::new().with("ANTHROPIC_API_KEY", &test_key(P)),
    );
    let backend = StageBackend::new(Arc::new(c), creds);
    assert_eq!(backend.default_model(), "claude-sonnet-4-6");
    let mut req = LlmRequest {
        node_id: "review".into(),
        mode: LlmMode::Prompt,
        prompt: "Review.".into(),
        max_tokens: Some(1000),
        workdir: dir.path().to_path_buf(),
        project_memory: true,
        ..LlmRequest::default()
    };
    let r = backend
        .complete(&req, &CancelToken::new(), &mut |_| {})
        .expect("first");
    assert_eq!(r.text, "not json");
    assert_eq!(r.model, "claude-sonnet-4-6");
    assert_eq!(r.usage.input, 10);
    req.feedback.push("no JSON object".into());
    let r = backend
        .complete(&req, &CancelToken::new(), &mut |_| {})
        .expect("repair");
    assert_eq!(r.text, "{\"outcome\": \"succeeded\"}");
    let reqs = server.requests();
    let users = user_texts(P, &reqs[1].body);
    assert_eq!(users.len(), 2);
    assert_eq!(users[0], "Review.");
    assert!(users[1].contains("no JSON object"));
    assert_eq!(reqs[1].body["max_tokens"], 1000);
    assert!(reqs[1].body.get("tools").is_none());

    // An agent stage: tools, then a repair call in the same session.
    let mut req = LlmRequest {
        node_id: "build".into(),
        mode: LlmMode::Agent,
        prompt: "Build.".into(),
        model: Some("sonnet".into()),
        provider: Some("anthropic".into()),
        feedback: vec![],
        ..req
    };
    let r = backend
        .complete(&req, &CancelToken::new(), &mut |_| {})
        .expect("agent");
    assert_eq!(r.text, "wrote it");
    assert_eq!(r.files_touched, vec!["a.txt"]);
    assert_eq!(r.turns, 2);
    req.feedback.push("no routing".into());
    let r = backend
        .complete(&req, &CancelToken::new(), &mut |_| {})
        .expect("agent repair");
    assert!(r.text.contains("preferred_next_label"));
    let last = &server.requests()[4].body;
    assert!(last["tools"].is_array());
    let users = user_texts(P, last);
    assert_eq!(users.first().map(String::as_str), Some("Build."));
    assert!(users.last().is_some_and(|t| t.contains("no routing")));

    // Bad provider attribute: deterministic.
    req.provider = Some("nope".into());
    req.feedback.clear();
    let e = backend
        .complete(&req, &CancelToken::new(), &mut |_| {})
        .expect_err("bad provider");
    assert!(!e.retryable);
    assert_eq!(e.failure_class, "deterministic");
}

/// `tool_hooks`: the pre hook runs before every call with the tool's name, call id and
/// arguments in its environment; a failing pre hook refuses the call (the tool does not
/// run) and the model reads why; the post hook runs after, with the result's error flag.
#[test]
fn tool_hooks_run_around_every_call_and_a_failing_pre_hook_refuses_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = ScriptedServer::start(vec![
        reply(
            P,
            &tools(&[
                ("c1", "shell", json!({"command": "echo ran > ran.txt"})),
                ("c2", "shell", json!({"command": "echo no > blocked.txt"})),
            ]),
            u(),
            false,
        ),
        reply(P, &text("done"), u(), false),
    ]);
    let c = client(P, &server);
    // The pre hook logs its environment and refuses any call whose arguments mention
    // blocked.txt; the post hook logs the result flag.
    let cfg = AgentConfig {
        hooks: ToolHooks {
            pre: Some(
                r#"echo "pre $SVC_TOOL_NAME $SVC_TOOL_CALL_ID" >> hooks.log; case "$SVC_TOOL_ARGUMENTS" in *blocked.txt*) echo "writing blocked.txt is not allowed" >&2; exit 3;; esac"#.into(),
            ),
            post: Some(r#"echo "post $SVC_TOOL_NAME $SVC_TOOL_CALL_ID $SVC_TOOL_IS_ERROR" >> hooks.log"#.into()),
        },
        ..AgentConfig::new("sonnet")
    };
    let mut s = Session::new(cfg, Sandbox::new(dir.path()).expect("sb")).expect("session");
    let mut failed = Vec::new();
    s.run(&c, "x", &CancelToken::new(), &mut |e| {
        if e.kind() == "agent.tool_hook.failed" {
            failed.push(e.properties());
        }
    })
    .expect("run");
    let log = std::fs::read_to_string(dir.path().join("hooks.log")).expect("hooks ran");
    assert_eq!(
        log,
        "pre shell c1\npost shell c1 false\npre shell c2\npost shell c2 true\n"
    );
    assert!(dir.path().join("ran.txt").exists());
    assert!(
        !dir.path().join("blocked.txt").exists(),
        "a refused call must not run"
    );
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["hook"], "pre");
    assert_eq!(failed[0]["tool_call_id"], "c2");
    assert_eq!(failed[0]["exit_code"], 3);
    // The model is told why.
    let reqs = server.requests();
    let res = results(P, &reqs[1].body);
    assert_eq!(res.len(), 2);
    assert!(!res[0].2);
    assert!(res[1].2, "{res:?}");
    assert!(
        res[1].1.contains("refused by the tool_hooks.pre hook")
            && res[1].1.contains("writing blocked.txt is not allowed"),
        "{}",
        res[1].1
    );
}
