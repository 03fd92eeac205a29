//! One server per state directory (`store::lock`), with real server processes: a second
//! `svc server start` on a busy directory fails at once naming the holder and changes
//! nothing (the first server's running stage keeps running, its run can still be
//! cancelled); `svc run` and `svc import` beside a server refuse clearly and touch nothing;
//! the lock of a server killed with SIGKILL never blocks the next start.

use crate::support::server::{
    bin, create_run, run_body, start_run, status_kind, wait_for, wait_kind, Opts, Server,
};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use svc::internal::test_tools::{require, Tool};

/// `svc server start --dev` on `dir` (the test's second server): its exit status and stderr,
/// waiting at most 10 s (a second server must fail at once, not serve).
fn second_server(dir: &Path, listen: &str) -> (std::process::ExitStatus, String, Duration) {
    let began = Instant::now();
    let mut child = Command::new(bin())
        .args(["server", "start", "--dev", "--state-dir"])
        .arg(dir)
        .args(["--listen", listen])
        .env("RUST_LOG", "warn,tiny_http=off")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn svc");
    let status = wait_for(10, "the second server to exit", || {
        child.try_wait().ok().flatten()
    });
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    (status, err, began.elapsed())
}

/// `svc run` of a two-node workflow on `state`, in a scratch working directory.
fn svc_run(state: &Path) -> Command {
    let work = std::env::temp_dir().join(format!("svc-lock-work-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let flow = work.join("flow.dot");
    std::fs::write(
        &flow,
        "digraph g { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }",
    )
    .unwrap();
    let mut c = Command::new(bin());
    c.args(["run", "--state-dir"])
        .arg(state)
        .arg("--workdir")
        .arg(&work)
        .arg(flow);
    c
}

fn pid_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_second_server_on_a_busy_state_directory_fails_at_once_and_changes_nothing() {
    require(Tool::Git);
    let a = Server::start();
    // A run inside a long command stage that records its pid.
    let id = create_run(
        &a,
        &run_body(
            r#"digraph g { start [shape=Mdiamond]; exit [shape=Msquare];
               s [shape=parallelogram, script="echo $$ > /tmp/svc-lock-$SVC_RUN_ID.pid; exec sleep 30"];
               start -> s -> exit }"#,
        ),
    );
    start_run(&a, &id);
    wait_kind(&a, &id, &["running"]);
    let pid_file = format!("/tmp/svc-lock-{id}.pid");
    let stage_pid: u32 = wait_for(20, "the stage to record its pid", || {
        std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
    });
    let _ = std::fs::remove_file(&pid_file);
    let events_before = a
        .get(&format!("/api/v1/runs/{id}/events?limit=1000"))
        .json()["data"]
        .as_array()
        .map(Vec::len);

    // Same state directory, same port: refused at once, naming the holder.
    let listen = format!("127.0.0.1:{}", a.tcp_port());
    let (status, err, took) = second_server(a.path(), &listen);
    assert_eq!(status.code(), Some(1), "{err}");
    let holder = format!("pid {}", a.child.id());
    assert!(
        err.contains("is in use by svc server start")
            && err.contains(&holder)
            && err.contains(&format!("listening on http://{listen}")),
        "the refusal names the holder: {err}"
    );
    assert!(took < Duration::from_secs(5), "refused at once: {took:?}");
    // And on another port: still refused (the directory is the resource, not the port).
    let (status, err, _) = second_server(a.path(), "127.0.0.1:0");
    assert_eq!(status.code(), Some(1), "{err}");

    // Nothing changed: the stage process lives, the run is running with no new event, and
    // the first server still controls it.
    assert!(pid_alive(stage_pid), "the first server's stage was killed");
    assert_eq!(status_kind(&a, &id), "running");
    let events_after = a
        .get(&format!("/api/v1/runs/{id}/events?limit=1000"))
        .json()["data"]
        .as_array()
        .map(Vec::len);
    assert_eq!(
        events_before, events_after,
        "the second server wrote events"
    );
    let r = a.post(&format!("/api/v1/runs/{id}/cancel"), "{}");
    assert!(r.status < 300, "{}", r.text());
    let st = wait_kind(&a, &id, &["failed"]);
    assert_eq!(st, "failed");
    assert_eq!(
        crate::support::server::run_status(&a, &id)["reason"],
        "cancelled"
    );
}

#[test]
fn svc_run_and_import_beside_a_server_refuse_and_touch_nothing() {
    let a = Server::start();
    let runs_before = a.get("/api/v1/runs").json()["data"]
        .as_array()
        .map(Vec::len);
    let out = svc_run(a.path()).output().expect("svc run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is in use by svc server start")
            && err.contains(&format!("pid {}", a.child.id()))
            && err.contains("POST /api/v1/runs"),
        "svc run says why and what to do: {err}"
    );
    let export = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args(["import", "--state-dir"])
        .arg(a.path())
        .arg(export.path())
        .output()
        .expect("svc import");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("is in use by svc server start"), "{err}");
    let runs_after = a.get("/api/v1/runs").json()["data"]
        .as_array()
        .map(Vec::len);
    assert_eq!(runs_before, runs_after);
    // Reading beside a server is fine.
    let out = Command::new(bin())
        .args(["runs", "--state-dir"])
        .arg(a.path())
        .output()
        .expect("svc runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_killed_servers_lock_never_blocks_the_next_start_and_commands_share_the_directory() {
    let a = Server::start();
    let lock_file = a.path().join("svc.lock");
    let record = std::fs::read_to_string(&lock_file).unwrap();
    assert!(
        record.contains(&format!("pid={}", a.child.id())),
        "{record}"
    );
    let dir = a.kill();
    // The file is still there, naming a dead process: it does not block.
    assert!(lock_file.exists());
    let b = Server::with(Opts {
        dir: Some(dir),
        ..Opts::default()
    });
    assert_eq!(b.get("/health").status, 200);
    let dir = b.kill();
    // Two `svc run`s may share a directory with no server (each takes the lock shared).
    let runs: Vec<_> = (0..2)
        .map(|_| {
            svc_run(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("svc run")
        })
        .collect();
    for r in runs {
        let out = r.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let listed = Command::new(bin())
        .args(["runs", "--format", "json", "--state-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&listed.stdout);
    let listed: Value = serde_json::from_str(&text).unwrap_or_default();
    assert_eq!(listed["data"].as_array().map(Vec::len), Some(2), "{text}");
}
