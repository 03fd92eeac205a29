//! End-to-end: `svc run` killed with SIGKILL, or cancelled with SIGINT/SIGTERM, in the
//! middle of a stage, then `svc resume` continues from the last checkpoint without
//! re-running completed stages; resume refuses finished and unknown runs.

use crate::support::cli::{gone, testdata, Sandbox};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn wait_for(path: &std::path::Path, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn resume_after_sigkill_skips_completed_stages() {
    let s = Sandbox::new();
    let file = testdata("resume.dot");
    let mut cmd = s.command(&["run", file.to_str().unwrap_or(""), "--format", "json"]);
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("svc starts");
    assert!(
        wait_for(&s.work().join("second.pid"), Duration::from_secs(20)),
        "second never started"
    );
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut stderr);
    }
    let run_id = stderr
        .lines()
        .find_map(|l| l.strip_prefix("run "))
        .map(|s| s.trim().to_string())
        .expect("run id on stderr");
    // The orphaned script of the killed run must not interfere.
    let pid: i32 = s.read("second.pid").trim().parse().unwrap_or(0);
    let _ = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status();
    assert!(gone(pid));

    std::fs::write(s.work().join("release"), "").expect("release");
    let r = s.finish(s.command(&["resume", &run_id, "--format", "json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.run_id(), run_id);
    assert_eq!(s.lines("first.txt"), 1, "first must not run again");
    assert_eq!(s.lines("second.txt"), 2, "the interrupted stage runs again");
    assert_eq!(
        s.read("third.txt").trim(),
        "kept",
        "context restored from the checkpoint"
    );
    assert_eq!(r.path(), ["start", "first", "second", "third", "exit"]);

    let again = s.finish(s.command(&["resume", &run_id]));
    assert_eq!(again.code, 2);
    assert!(
        again.stderr.contains("already finished"),
        "{}",
        again.stderr
    );
}

#[test]
fn resume_of_an_unknown_run_is_a_usage_error() {
    let s = Sandbox::new();
    let r = s.finish(s.command(&["resume", "01ARZ3NDEKTSV4RRFFQ69G5FAV"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("not found"), "{}", r.stderr);
}

/// Starts `svc run resume.dot`, waits until its `second` stage runs, sends `signal` to svc
/// and returns the printed JSON outcome.
fn interrupt_at_second(s: &Sandbox, signal: &str) -> serde_json::Value {
    interrupt_at_second_with(s, signal, &[])
}

/// Like [`interrupt_at_second`], with more `svc run` arguments.
fn interrupt_at_second_with(s: &Sandbox, signal: &str, extra: &[&str]) -> serde_json::Value {
    let file = testdata("resume.dot");
    let mut args = vec!["run", file.to_str().unwrap_or(""), "--format", "json"];
    args.extend_from_slice(extra);
    let child = s
        .command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("svc starts");
    assert!(wait_for(
        &s.work().join("second.pid"),
        Duration::from_secs(20)
    ));
    let _ = std::process::Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status();
    let out = child.wait_with_output().expect("svc exits");
    assert_eq!(out.status.code(), Some(1));
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

/// Ctrl-C (SIGINT) or SIGTERM cancels the run and kills its command; the cancelled run is
/// resumable: `svc resume` continues at the interrupted stage without re-running finished
/// ones, and a finished run cannot be resumed again.
fn signal_then_resume(signal: &str) {
    let s = Sandbox::new();
    let json = interrupt_at_second(&s, signal);
    assert_eq!(json["status"], "failed");
    assert_eq!(json["reason"], "cancelled");
    let pid: i32 = s.read("second.pid").trim().parse().unwrap_or(0);
    assert!(gone(pid), "the stage's process survived the interrupt");

    let run_id = json["run_id"].as_str().unwrap_or("").to_string();
    std::fs::write(s.work().join("release"), "").expect("release");
    let r = s.finish(s.command(&["resume", &run_id, "--format", "json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.status(), "succeeded");
    assert_eq!(s.lines("first.txt"), 1, "first must not run again");
    assert_eq!(s.lines("second.txt"), 2, "the interrupted stage runs again");
    assert_eq!(s.read("third.txt").trim(), "kept");
    let again = s.finish(s.command(&["resume", &run_id]));
    assert_eq!(again.code, 2);
    assert!(
        again.stderr.contains("already finished"),
        "{}",
        again.stderr
    );
}

/// The stage a SIGTERM cancelled is not left `running` in `--logs`: its status.json says
/// `cancelled`, with why; the stages before it keep their own outcome.
#[test]
fn a_stage_cancelled_by_sigterm_is_recorded_cancelled_in_the_logs() {
    let s = Sandbox::new();
    let logs = s.work().join("logs");
    let json = interrupt_at_second_with(&s, "-TERM", &["--logs", logs.to_str().unwrap_or("")]);
    assert_eq!(json["reason"], "cancelled");
    let status = |node: &str| -> serde_json::Value {
        serde_json::from_str(
            &std::fs::read_to_string(logs.join(node).join("status.json")).unwrap_or_default(),
        )
        .unwrap_or_default()
    };
    let second = status("second");
    assert_eq!(second["outcome"], "cancelled", "{second}");
    assert!(
        second["failure_reason"]
            .as_str()
            .is_some_and(|r| r.contains("cancelled")),
        "{second}"
    );
    assert_eq!(status("first")["outcome"], "succeeded");
}

#[test]
fn sigint_cancels_the_run_and_resume_continues_it() {
    signal_then_resume("-INT");
}

#[test]
fn sigterm_cancels_the_run_and_resume_continues_it() {
    signal_then_resume("-TERM");
}

/// A run whose checkpoint names a node its saved workflow no longer has can never continue:
/// `svc resume` makes it `dead` (with the reason), and a dead run cannot be resumed again.
#[test]
fn a_run_that_cannot_be_resumed_becomes_dead() {
    let s = Sandbox::new();
    let json = interrupt_at_second(&s, "-INT");
    let run_id = json["run_id"].as_str().unwrap_or("").to_string();
    // The workflow saved with the run loses the node the checkpoint resumes at.
    let db = rusqlite::Connection::open(s.state().join("svc.db")).expect("db");
    let changed = db
        .execute(
            "UPDATE events SET payload = replace(payload, 'second', 'zecond') WHERE run_id = ?1 AND seq = 1",
            [&run_id],
        )
        .expect("update");
    assert_eq!(changed, 1);
    drop(db);

    let r = s.finish(s.command(&["resume", &run_id, "--format", "json"]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.json["reason"], "dead");
    assert!(
        r.error().contains("`second` is not in the workflow"),
        "{}",
        r.error()
    );
    let runs = s.finish(s.command(&["runs", "--format", "json"]));
    let row = &runs.json["data"][0];
    assert_eq!(row["status"], "dead", "{row}");
    assert!(
        row["error"]
            .as_str()
            .unwrap_or("")
            .contains("cannot resume"),
        "{row}"
    );
    let again = s.finish(s.command(&["resume", &run_id]));
    assert_eq!(again.code, 2);
    assert!(again.stderr.contains("it is dead"), "{}", again.stderr);
}
