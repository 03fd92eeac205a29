//! Command stage scripts' tests: the spec a node makes, results, summaries and failure
//! messages.
//! Must not: assert on timing.

use super::*;
use crate::procs::{KILL_GRACE, OUTPUT_LIMIT};
use std::time::Instant;

fn spec<'a>(script: &'a str, dir: &'a Path) -> CommandSpec<'a> {
    CommandSpec {
        script,
        language: Language::Shell,
        workdir: dir,
        env: Vec::new(),
        base_env: None,
        timeout: None,
        isolation: &LOCAL,
        pipe_grace: PIPE_GRACE,
    }
}

static LOCAL: crate::sandbox::Isolation = crate::sandbox::Isolation::Local;

fn run(s: &CommandSpec) -> CommandResult {
    run_command(s, &CancelToken::new()).unwrap()
}

/// Exists and is not a zombie (a container's init may be slow to reap orphans).
fn alive(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks for existence.
    let exists = unsafe { libc::kill(pid, 0) == 0 };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = stat
        .rsplit(')')
        .next()
        .is_some_and(|s| s.trim_start().starts_with('Z'));
    exists && !zombie
}

/// An executable file in `dir` holding `text`.
fn program(dir: &Path, name: &str, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn sorted_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    lines
}

#[test]
fn a_simple_command_starts_without_sh_and_sees_what_sh_would_give_it() {
    let dir = tempfile::tempdir().unwrap();
    // The parent's name: `sh` when the shell started the program.
    program(dir.path(), "parent.sh", "#!/bin/sh\ncat /proc/$PPID/comm\n");
    let direct = run(&spec("./parent.sh", dir.path()));
    let through_sh = run(&spec("./parent.sh;", dir.path()));
    assert_eq!(through_sh.stdout.trim(), "sh", "{through_sh:?}");
    assert!(
        !["sh", "dash"].contains(&direct.stdout.trim()),
        "{direct:?}"
    );
    // The same environment, `PWD` included (`exec` is a built-in: the shell runs it).
    let mut with_env = spec("env", dir.path());
    with_env.env = vec![("SVC_NODE_ID".into(), "n1".into())];
    let mut exec_env = spec("exec env", dir.path());
    exec_env.env = with_env.env.clone();
    let (a, b) = (run(&with_env), run(&exec_env));
    assert_eq!(sorted_lines(&a.stdout), sorted_lines(&b.stdout));
    assert!(a.stdout.contains("SVC_NODE_ID=n1\n"), "{}", a.stdout);
    let pwd = std::fs::canonicalize(dir.path()).unwrap();
    assert!(
        a.stdout.contains(&format!("PWD={}\n", pwd.display())),
        "{}",
        a.stdout
    );
}

#[test]
fn a_simple_command_fails_and_dies_as_it_would_under_sh() {
    let dir = tempfile::tempdir().unwrap();
    // Not found: sh's own message and 127.
    let missing = run(&spec("no-such-program-for-svc --flag", dir.path()));
    assert_eq!(missing.exit_code, Some(127));
    assert!(missing.stderr.contains("not found"), "{missing:?}");
    // No `#!` line: sh runs the file as a script.
    program(dir.path(), "plain", "echo from-plain\n");
    let plain = run(&spec("./plain", dir.path()));
    assert_eq!(
        (plain.exit_code, plain.stdout.as_str()),
        (Some(0), "from-plain\n")
    );
    // Killed by a signal of its own: 128 + the signal, as sh reports it.
    program(dir.path(), "selfkill.sh", "#!/bin/sh\nkill -9 $$\n");
    let direct = run(&spec("./selfkill.sh", dir.path()));
    let through_sh = run(&spec("./selfkill.sh;", dir.path()));
    assert_eq!(through_sh.exit_code, Some(137));
    assert_eq!(
        (direct.exit_code, direct.termination),
        (Some(137), Termination::Exited)
    );
}

#[test]
fn exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let ok = run(&spec("true", dir.path()));
    assert_eq!(
        (ok.exit_code, ok.termination),
        (Some(0), Termination::Exited)
    );
    assert!(ok.succeeded());
    let three = run(&spec("exit 3", dir.path()));
    assert_eq!(three.exit_code, Some(3));
    assert!(!three.succeeded());
    assert_eq!(three.summary(None), "command exited with code 3");
}

#[test]
fn streams_captured_and_merged() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(&spec(
        "echo out1; sleep 0.05; echo err1 >&2; sleep 0.05; echo out2",
        dir.path(),
    ));
    assert_eq!(r.stdout, "out1\nout2\n");
    assert_eq!(r.stderr, "err1\n");
    assert_eq!(r.merged, "out1\nerr1\nout2\n");
    assert_eq!(
        (r.stdout_bytes, r.stderr_bytes, r.truncated),
        (10, 5, false)
    );
    let msg = r.failure_message(None);
    assert!(msg.contains("stderr:\nerr1") && msg.contains("stdout:\nout1\nout2"));
}

#[test]
fn python_language_and_env_and_workdir() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(
        "import os; print(os.environ['SVC_X'], os.getcwd())",
        dir.path(),
    );
    s.language = Language::Python;
    s.env = vec![("SVC_X".into(), "hello".into())];
    if !python3_available() {
        return;
    }
    let r = run(&s);
    let cwd = dir.path().canonicalize().unwrap();
    assert_eq!(r.stdout.trim(), format!("hello {}", cwd.display()));
    let mut sh = spec("echo \"$SVC_X\"; echo \"$HOME\" | grep -c .", dir.path());
    sh.env = vec![("SVC_X".into(), "a b".into())];
    assert_eq!(run(&sh).stdout, "a b\n1\n");
}

fn python3_available() -> bool {
    std::process::Command::new("python3")
        .arg("-c")
        .arg("pass")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn missing_python_is_a_spawn_error() {
    if python3_available() {
        return; // only meaningful where python3 is really absent
    }
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec("print(1)", dir.path());
    s.language = Language::Python;
    let e = run_command(&s, &CancelToken::new()).unwrap_err();
    assert!(matches!(e, CommandError::Spawn { ref program, .. } if program == "python3"));
}

#[test]
fn missing_workdir_is_reported_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("nope");
    let e = run_command(&spec("true", &gone), &CancelToken::new()).unwrap_err();
    assert!(matches!(e, CommandError::Workdir { .. }), "{e}");
}

#[test]
fn timeout_kills_the_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec("sleep 30 & echo $! > pidfile; wait", dir.path());
    s.timeout = Some(Duration::from_millis(300));
    let started = Instant::now();
    let r = run(&s);
    assert_eq!(r.termination, Termination::TimedOut);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(r.summary(s.timeout), "command timed out after 300ms");
    let pid: libc::pid_t = std::fs::read_to_string(dir.path().join("pidfile"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // the orphaned grandchild is reaped by init shortly after it dies
    let gone_by = Instant::now() + Duration::from_secs(2);
    while alive(pid) && Instant::now() < gone_by {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!alive(pid), "grandchild {pid} survived");
}

#[test]
fn term_ignoring_group_is_killed_after_grace() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec("trap '' TERM; sleep 30", dir.path());
    s.timeout = Some(Duration::from_millis(100));
    let started = Instant::now();
    let r = run(&s);
    assert_eq!((r.termination, r.exit_code), (Termination::TimedOut, None));
    let took = started.elapsed();
    assert!(
        took >= KILL_GRACE && took < KILL_GRACE + Duration::from_secs(2),
        "{took:?}"
    );
}

#[test]
fn cancel_from_another_thread_stops_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let token = CancelToken::new();
    let t2 = token.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        t2.cancel("user");
        Instant::now()
    });
    let r = run_command(&spec("sleep 30", dir.path()), &token).unwrap();
    let returned = Instant::now();
    let cancelled_at = canceller.join().unwrap();
    assert_eq!(r.termination, Termination::Cancelled);
    assert!(returned - cancelled_at < Duration::from_millis(500));
}

#[test]
fn already_cancelled_token_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let token = CancelToken::new();
    token.cancel("stop");
    let r = run_command(&spec("touch ran", dir.path()), &token).unwrap();
    assert_eq!((r.termination, r.exit_code), (Termination::Cancelled, None));
    assert!(!dir.path().join("ran").exists());
}

#[test]
fn huge_output_is_truncated_with_exact_counts() {
    let dir = tempfile::tempdir().unwrap();
    let script = "head -c 10485760 /dev/zero | tr '\\0' 'a'; echo END; echo tail-err >&2";
    let r = run(&spec(script, dir.path()));
    assert_eq!(r.stdout_bytes, 10 * 1024 * 1024 + 4);
    assert_eq!(r.stderr_bytes, 9);
    assert!(r.truncated);
    assert!(r.stdout.len() <= OUTPUT_LIMIT + 100);
    assert!(r.stdout.starts_with("aaaa") && r.stdout.ends_with("aEND\n"));
    let omitted = 10 * 1024 * 1024 + 4 - OUTPUT_LIMIT;
    assert!(r
        .stdout
        .contains(&format!("[... {omitted} bytes omitted ...]")));
    // stderr's line may arrive before stdout's last chunk is read: only its presence counts
    assert!(r.merged.len() <= OUTPUT_LIMIT + 100 && r.merged.contains("tail-err\n"));
    assert_eq!(r.stderr, "tail-err\n");
}

#[test]
fn leftover_background_process_does_not_hold_the_stage() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let r = run(&spec(
        "(sleep 2.5; echo late; touch wrote-late) & echo $! > pidfile; echo done",
        dir.path(),
    ));
    assert_eq!((r.exit_code, r.stdout.as_str()), (Some(0), "done\n"));
    assert!(started.elapsed() < PIPE_GRACE + Duration::from_secs(2));
    // Its output after the stage is drained, not refused: it goes on (no SIGPIPE).
    let done_by = Instant::now() + Duration::from_secs(10);
    while !dir.path().join("wrote-late").exists() && Instant::now() < done_by {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(dir.path().join("wrote-late").exists());
    let pid: libc::pid_t = std::fs::read_to_string(dir.path().join("pidfile"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: test cleanup of the process this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

#[test]
fn language_attribute() {
    assert_eq!(Language::from_attr(None), Some(Language::Shell));
    assert_eq!(Language::from_attr(Some("python")), Some(Language::Python));
    assert_eq!(Language::from_attr(Some("ruby")), None);
}
