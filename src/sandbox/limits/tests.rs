//! Resource limits on real processes: joining the sandbox's groups, a memory hog stopped and
//! named, fork bombs held at the process limit, the disk limit on a file.
//! Must not: leave processes or groups behind (each test kills and removes what it made).

use super::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn id(tag: &str) -> String {
    format!("test-{tag}-{}", std::process::id())
}

fn sh(limits: &Limits, script: &str) -> std::process::Output {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    limits.apply(&mut cmd);
    cmd.output().unwrap()
}

#[test]
fn sizes_read_and_print() {
    assert_eq!(parse_bytes("4GB"), Some(4 << 30));
    assert_eq!(parse_bytes("512 MiB"), Some(512 << 20));
    assert_eq!(parse_bytes("1048576"), Some(1 << 20));
    assert_eq!(parse_bytes("12 parsecs"), None);
    assert_eq!(parse_bytes("GB"), None);
    assert_eq!(format_bytes(64 << 20), "64 MiB");
    assert_eq!(format_bytes(1500), "1500 B");
}

#[test]
fn the_probe_finds_cgroups_in_mount_tables() {
    let mounts = "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n\
                  cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n";
    let own = "4:memory:/a/b\n0::/\n";
    assert_eq!(own_group(own, "memory"), Some("/a/b"));
    assert_eq!(own_group(own, ""), Some("/"));
    assert_eq!(mounts_of(mounts, "cgroup").count(), 1);
    assert_eq!(
        mounts_of(mounts, "cgroup2").next(),
        Some(("/sys/fs/cgroup/unified", "rw"))
    );
}

#[test]
fn processes_start_inside_their_sandboxs_groups() {
    let rt = Runtime::host();
    let l = Limits::start(
        &id("join"),
        Resources {
            pids: Some(64),
            ..Resources::default()
        },
    );
    let l = match (rt, l) {
        (Runtime::Rlimits, Err(e)) if is_root() => {
            assert!(e.causes[0].contains("root"), "{e:?}");
            return;
        }
        (_, l) => l.unwrap(),
    };
    let out = sh(&l, "cat /proc/self/cgroup");
    let text = String::from_utf8_lossy(&out.stdout);
    if !matches!(rt, Runtime::Rlimits) {
        assert!(text.contains(&format!("svc-{}", id("join"))), "{text}");
    }
}

#[test]
fn a_memory_hog_is_stopped_and_named() {
    let l = Limits::start(
        &id("hog"),
        Resources {
            memory: Some(64 << 20),
            ..Resources::default()
        },
    )
    .unwrap();
    // 300 MB held in one shell variable.
    let out = sh(
        &l,
        "x=$(head -c 300000000 /dev/zero | tr -c a a); echo ${#x}",
    );
    assert!(!out.status.success(), "{out:?}");
    use std::os::unix::process::ExitStatusExt;
    let why = l.explain(out.status.signal(), out.status.code());
    if !matches!(l.runtime(), Runtime::Rlimits) {
        assert_eq!(
            why.as_deref(),
            Some("out of memory (limit 64 MiB)"),
            "{out:?}"
        );
        // Reported once.
        assert_eq!(l.explain(None, None), None);
    }
    // The next process in the sandbox is fine.
    assert!(sh(&l, "echo ok").status.success());
}

#[test]
fn a_fork_bomb_is_held_at_the_process_limit() {
    let l = match Limits::start(
        &id("bomb"),
        Resources {
            pids: Some(32),
            ..Resources::default()
        },
    ) {
        Err(e) => {
            // Only where nothing can enforce it, and said so.
            assert!(
                matches!(Runtime::host(), Runtime::Rlimits) && is_root(),
                "{e:?}"
            );
            assert!(e.causes[0].contains("RLIMIT_NPROC"), "{e:?}");
            return;
        }
        Ok(l) => l,
    };
    // 100 sleepers: past the limit, forks fail instead of piling up.
    let out = sh(
        &l,
        "for i in $(seq 1 100); do sleep 30 >/dev/null 2>&1 & done; echo tried",
    );
    let alive = l.count();
    if !matches!(l.runtime(), Runtime::Rlimits) {
        assert!((8..=32).contains(&alive), "{alive} processes: {out:?}");
    }
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("fork"),
        "the shell says it could not fork: {out:?}"
    );
    l.kill_all();
    let began = Instant::now();
    while l.count() > 0 && began.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if !matches!(l.runtime(), Runtime::Rlimits) {
        assert_eq!(l.count(), 0);
    }
}

#[test]
fn a_real_fork_bomb_is_contained_and_the_host_keeps_forking() {
    if !Path::new("/bin/bash").exists() {
        return;
    }
    let l = match Limits::start(
        &id("realbomb"),
        Resources {
            pids: Some(48),
            ..Resources::default()
        },
    ) {
        Err(_) => return, // refused with a cause: the test above checks it
        Ok(l) => l,
    };
    if matches!(l.runtime(), Runtime::Rlimits) {
        // RLIMIT_NPROC counts every process of this user, not the sandbox's: not run here.
        return;
    }
    let mut cmd = Command::new("/bin/bash");
    cmd.args(["-c", "b() { b | b & }; b"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    l.apply(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let began = Instant::now();
    let mut most = 0;
    while began.elapsed() < Duration::from_secs(2) {
        most = most.max(l.count());
        std::thread::sleep(Duration::from_millis(10));
    }
    // This process can still start others.
    assert!(Command::new("true").status().unwrap().success());
    l.kill_all();
    let _ = child.wait();
    assert!(most <= 48, "{most}");
    assert!(most >= 8, "the bomb never went off: {most}");
    let began = Instant::now();
    while l.count() > 0 && began.elapsed() < Duration::from_secs(10) {
        l.kill_all();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(l.count(), 0);
}

#[test]
fn a_file_past_the_disk_limit_is_refused_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let l = Limits::start_on(
        Runtime::Rlimits,
        &id("disk"),
        Resources {
            disk: Some(1 << 20),
            ..Resources::default()
        },
    )
    .unwrap();
    let f = dir.path().join("big");
    let out = sh(&l, &format!("head -c 5000000 /dev/zero > {}", f.display()));
    assert!(!out.status.success());
    assert!(std::fs::metadata(&f).unwrap().len() <= 1 << 20);
    // The shell reports the child's SIGXFSZ as its exit code.
    assert_eq!(out.status.code(), Some(128 + libc::SIGXFSZ), "{out:?}");
    assert_eq!(
        l.explain(None, out.status.code()).as_deref(),
        Some("file size limit exceeded (disk limit 1 MiB)")
    );
}
