//! Child processes that must not outlive the server: every stage process (command stages,
//! the agent shell tool, ACP agents) starts through [`isolate`] and [`track`].
//!
//! - [`isolate`] puts the child in its own process group (so one signal reaches everything it
//!   starts) and asks the kernel to SIGKILL it when the thread that forked it dies
//!   (`PR_SET_PDEATHSIG`). The kernel ties that signal to the forking *thread*, so every
//!   caller forks from the thread that then waits for the child (the stage's own thread),
//!   never from a short-lived helper thread.
//! - PDEATHSIG reaches only the direct child. Its descendants stay in its group, which the
//!   child itself records between fork and exec (`<dir>/<pgid>` holding its start time, in
//!   the directory [`install`] names: the server's `<state-dir>/procs`), so nothing runs
//!   unrecorded; [`track`] keeps the record while the group has members.
//!   [`sweep`] at the next start SIGKILLs every recorded group still alive. The start time
//!   guards against pid reuse: a live leader whose start time differs is someone else's
//!   process and is left alone; a group whose leader is gone still holds its id (Linux never
//!   reuses a pid still used as a process group id), so its members are ours.
//!
//! Running a process to its end (`script`, `wait`, `capture`): [`start_script`] /
//! [`run_script`] start a script (`sh -c`, `python3 -c`, or one simple program directly)
//! through a [`CommandBuilder`] (the sandbox's `Isolation::command`), and [`Running::wait`]
//! captures its output ([`Kept`], bounded by [`OUTPUT_LIMIT`]) until it exits, times out or
//! is cancelled, then kills its group ([`kill_group`]). The command stage and the agent's
//! shell tool both run through them.
//!
//! A long-lived process that talks over its stdio (an ACP agent, an MCP stdio server, a
//! hook) starts from `Isolation::command` (which applies [`isolate`]: the run's sandbox and
//! its own process group) with `Stdio::piped()` for stdin, stdout and stderr, is [`track`]ed,
//! and is stopped with [`signal_group`] on its id (its group's). Spawn it from the thread
//! that owns it for its whole life: PDEATHSIG is tied to that thread.
//!
//! Owns: process-group isolation, starting, waiting for and signalling processes, their
//! captured output, the record of live stage process groups and the sweep.
//! Must not touch: what a process does or means (stages, tools and agents decide that).

mod capture;
mod env;
mod script;
mod simple;
mod spawn;
mod wait;

pub use capture::{Kept, OUTPUT_LIMIT};
pub use env::{clean_command_env, ALLOWED as STAGE_ENV_ALLOWED, NEVER as NEVER_PASSED};
pub use script::{run_script, start_script, CommandBuilder, CommandError, Script, Started, SH};
pub use simple::{shell_pwd, simple_words};
pub use spawn::{Confinement, EnvSnapshot, Piped, Proc};
pub use wait::{kill_group, signal_group, Finished, Running, Termination, KILL_GRACE};

use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

static RECORDS: OnceLock<PathBuf> = OnceLock::new();

/// Own process group, SIGKILL when the forking thread dies, and (once [`install`]ed) the
/// group's record, written by the child itself before it runs anything. Call on every stage
/// spawn, then [`track`] the child.
pub fn isolate(cmd: &mut Command) -> &mut Command {
    isolate_into(cmd, RECORDS.get().map(PathBuf::as_path))
}

fn isolate_into<'c>(cmd: &'c mut Command, records: Option<&Path>) -> &'c mut Command {
    let parent = std::process::id();
    // Everything the child needs is prepared here: after fork it may not allocate.
    let records =
        records.and_then(|dir| std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok());
    cmd.process_group(0);
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (prctl, getppid, getpid, open, read, write, close) on stack
    // buffers; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl: then nobody would kill us.
            if libc::getppid() as u32 != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            // Recorded before exec, so no stage process ever runs unrecorded: a server killed
            // right after the fork still leaves a record for the next start's sweep.
            if let Some(dir) = &records {
                child_record(dir.as_bytes());
            }
            Ok(())
        });
    }
    cmd
}

/// In the forked child: writes `<dir>/<pid>` holding this process's start time. Best effort
/// (a failure leaves the stage unrecorded, not stopped). Only syscalls on stack buffers.
fn child_record(dir: &[u8]) {
    let mut path = [0u8; 4096];
    let mut digits = [0u8; 24];
    // SAFETY: getpid never fails.
    let pid = unsafe { libc::getpid() } as u64;
    let pid_digits = itoa(pid, &mut digits);
    let len = dir.len() + 1 + pid_digits.len();
    if len >= path.len() {
        return;
    }
    path[..dir.len()].copy_from_slice(dir);
    path[dir.len()] = b'/';
    path[dir.len() + 1..len].copy_from_slice(pid_digits);
    let mut stat = [0u8; 1024];
    let Some(start) = read_self_start(&mut stat) else {
        return;
    };
    // SAFETY: `path` is NUL-terminated (zeroed beyond `len`); the buffers outlive the calls.
    unsafe {
        let fd = libc::open(
            path.as_ptr().cast(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        );
        if fd >= 0 {
            libc::write(fd, start.as_ptr().cast(), start.len());
            libc::close(fd);
        }
    }
}

/// The start-time field of `/proc/self/stat`, as its digits inside `buf`.
fn read_self_start(buf: &mut [u8]) -> Option<&[u8]> {
    // SAFETY: a NUL-terminated literal path; `buf` outlives the read.
    let n = unsafe {
        let fd = libc::open(
            c"/proc/self/stat".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return None;
        }
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        n
    };
    let text = buf.get(..usize::try_from(n).ok()?)?;
    stat_field(text, 22)
}

/// Field `n` (1-based, as in proc(5)) of a stat line; the command name (field 2) may hold
/// spaces and parentheses, so fields are counted after its last `)`.
fn stat_field(text: &[u8], n: usize) -> Option<&[u8]> {
    let close = text.iter().rposition(|b| *b == b')')?;
    text[close + 1..]
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
        .nth(n.checked_sub(3)?)
}

/// Decimal digits of `v` at the end of `buf`.
fn itoa(mut v: u64, buf: &mut [u8; 24]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &buf[i..];
        }
    }
}

/// Where this process records its stage process groups (the server calls it once at start;
/// `svc run` records nothing). Creates the directory (0700).
pub fn install(dir: &Path) -> io::Result<()> {
    crate::base::perms::private_dir(dir)?;
    let _ = RECORDS.set(dir.to_path_buf());
    Ok(())
}

/// The record of one live process group; dropping it forgets the group once it is empty
/// (processes a script left behind keep the record, so the next start's sweep stops them).
#[derive(Debug)]
pub struct Tracked {
    pgid: libc::pid_t,
    path: Option<PathBuf>,
}

impl Tracked {
    pub fn pgid(&self) -> libc::pid_t {
        self.pgid
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(path) = &self.path {
            if !group_exists(self.pgid) {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// Starts `cmd` (from `Isolation::command`; `extra_env` added to its environment) with stdin
/// from `/dev/null` and its stdout and stderr piped, as [`isolate`] would (own group, PDEATHSIG tied to the calling thread, the
/// record written by the child before exec), without a `fork()` that copies this process's
/// page tables (see `spawn.rs`). Wait for it from the calling thread, then [`track_proc`].
/// `base` is the environment to start from (`None`: the clean one of `EnvSnapshot::for_stages`, read now).
pub fn spawn_piped(
    cmd: &Command,
    extra_env: &[(String, String)],
    base: Option<&EnvSnapshot>,
) -> io::Result<Piped> {
    spawn::spawn_piped(cmd, extra_env, base, RECORDS.get().map(PathBuf::as_path))
}

/// [`spawn_piped`] with the child confined to a sandbox's limits before it executes.
pub fn spawn_piped_confined(
    cmd: &Command,
    extra_env: &[(String, String)],
    base: Option<&EnvSnapshot>,
    confine: Option<&spawn::Confinement>,
) -> io::Result<Piped> {
    spawn::spawn_confined(
        cmd,
        extra_env,
        base,
        RECORDS.get().map(PathBuf::as_path),
        confine,
    )
}

/// [`track`] for a child started with [`spawn_piped`].
pub fn track_proc(proc: &Proc) -> Tracked {
    let pgid = proc.id() as libc::pid_t;
    let path = RECORDS.get().map(|dir| dir.join(pgid.to_string()));
    Tracked { pgid, path }
}

/// The record of a child started with [`isolate`] (it leads its group and wrote its record
/// itself, when records are [`install`]ed); forgotten once the group is empty.
pub fn track(child: &Child) -> Tracked {
    let pgid = child.id() as libc::pid_t;
    let path = RECORDS.get().map(|dir| dir.join(pgid.to_string()));
    Tracked { pgid, path }
}

#[cfg(test)]
fn write_private(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())
}

/// What [`sweep`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Swept {
    /// Groups still alive and killed.
    pub killed: Vec<libc::pid_t>,
    /// Records whose group was gone or whose id now belongs to another process.
    pub stale: usize,
}

/// Kills every group recorded in `dir` by a previous process that is still alive, waits
/// (at most `wait`) until none of their processes runs, and removes the records.
pub fn sweep(dir: &Path, wait: Duration) -> io::Result<Swept> {
    let mut swept = Swept::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(swept),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        let pgid = entry.file_name().to_string_lossy().parse::<libc::pid_t>();
        let recorded = std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok());
        match (pgid, recorded) {
            (Ok(pgid), Some(start)) if pgid > 1 && ours(pgid, start) => {
                // SAFETY: killpg only sends a signal, to a group `ours` just identified.
                unsafe { libc::killpg(pgid, libc::SIGKILL) };
                swept.killed.push(pgid);
            }
            _ => swept.stale += 1,
        }
        let _ = std::fs::remove_file(&path);
    }
    let deadline = Instant::now() + wait;
    while swept.killed.iter().any(|g| group_running(*g)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(swept)
}

/// Whether group `pgid` is the one recorded with leader start time `start`.
fn ours(pgid: libc::pid_t, start: u64) -> bool {
    if !group_exists(pgid) {
        return false;
    }
    match stat(pgid) {
        // The leader lives: its start time tells whether the id was reused.
        Some(s) => s.start == start && s.pgrp == pgid,
        // Leader gone, group alive: the id is still reserved by the group, so it is ours.
        None => true,
    }
}

/// Any process (zombies included) in the group.
fn group_exists(pgid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

/// Any process of the group that is not a zombie (an unreaped zombie runs nothing).
pub fn group_running(pgid: libc::pid_t) -> bool {
    if !group_exists(pgid) {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries.flatten().any(|e| {
        e.file_name()
            .to_str()
            .and_then(|n| n.parse::<libc::pid_t>().ok())
            .and_then(stat)
            .is_some_and(|s| s.pgrp == pgid && !matches!(s.state, 'Z' | 'X'))
    })
}

struct Stat {
    state: char,
    pgrp: libc::pid_t,
    start: u64,
}

/// `/proc/<pid>/stat`: state (field 3), process group (5) and start time (22).
fn stat(pid: libc::pid_t) -> Option<Stat> {
    let text = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let field = |n| std::str::from_utf8(stat_field(&text, n)?).ok();
    Some(Stat {
        state: field(3)?.chars().next()?,
        pgrp: field(5)?.parse().ok()?,
        start: field(22)?.parse().ok()?,
    })
}

#[cfg(test)]
fn start_time(pid: libc::pid_t) -> Option<u64> {
    stat(pid).map(|s| s.start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    fn spawn_group(script: &str) -> Child {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script).stdin(Stdio::null());
        isolate(&mut cmd).spawn().unwrap()
    }

    #[test]
    fn isolated_child_leads_its_own_group() {
        let mut child = spawn_group("sleep 5");
        let pid = child.id() as libc::pid_t;
        let s = stat(pid).unwrap();
        assert_eq!(s.pgrp, pid);
        assert!(group_running(pid));
        // SAFETY: test cleanup of our own group.
        unsafe { libc::killpg(pid, libc::SIGKILL) };
        child.wait().unwrap();
        // A member other than the reaped leader (if `sh` forked instead of exec'ing) may
        // still be on its way out of the kernel for a moment after the SIGKILL.
        let deadline = Instant::now() + Duration::from_secs(5);
        while group_running(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!group_running(pid));
    }

    #[test]
    fn pdeathsig_kills_the_child_when_its_forking_thread_ends() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let child = spawn_group("sleep 30");
            tx.send(child.id() as libc::pid_t).unwrap();
            std::mem::forget(child);
        })
        .join()
        .unwrap();
        let pid = rx.recv().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while stat(pid).is_some_and(|s| s.state != 'Z') && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(stat(pid).is_none_or(|s| s.state == 'Z'), "child survived");
        // reap it
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    }

    #[test]
    fn sweep_kills_recorded_live_groups_and_skips_reused_ids() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = spawn_group("sleep 30 & sleep 30; wait");
        let pid = child.id() as libc::pid_t;
        let start = start_time(pid).unwrap();
        write_private(&dir.path().join(pid.to_string()), &start.to_string()).unwrap();
        // Same id, another start time: not ours (the id was reused).
        let mut other = spawn_group("sleep 30");
        let opid = other.id() as libc::pid_t;
        write_private(&dir.path().join(opid.to_string()), "1").unwrap();
        // A group that no longer exists.
        write_private(&dir.path().join("999999999"), "5").unwrap();
        let swept = sweep(dir.path(), Duration::from_secs(5)).unwrap();
        assert_eq!(swept.killed, vec![pid]);
        assert_eq!(swept.stale, 2);
        assert!(!group_running(pid), "the recorded group survived");
        assert!(
            group_running(opid),
            "a group with another start time was killed"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        child.wait().unwrap();
        // SAFETY: test cleanup of our own group.
        unsafe { libc::killpg(opid, libc::SIGKILL) };
        other.wait().unwrap();
    }

    #[test]
    fn the_child_records_its_group_before_it_runs() {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new("sh");
        // The script sees its own record: it was written before exec.
        cmd.arg("-c").arg("cat \"$0/$$\"").arg(dir.path());
        cmd.stdout(Stdio::piped());
        let child = isolate_into(&mut cmd, Some(dir.path())).spawn().unwrap();
        let pid = child.id() as libc::pid_t;
        let start = start_time(pid).unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), start.to_string());
        let record = dir.path().join(pid.to_string());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&record).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & !0o600, 0, "{mode:o}");
        // Forgotten once the group is gone.
        drop(Tracked {
            pgid: pid,
            path: Some(record.clone()),
        });
        assert!(!record.exists());
    }

    #[test]
    fn stat_fields_and_digits() {
        let line = b"12 (a) b) c) S 1 12 12 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 98765 4 5";
        assert_eq!(stat_field(line, 3), Some(&b"S"[..]));
        assert_eq!(stat_field(line, 5), Some(&b"12"[..]));
        assert_eq!(stat_field(line, 22), Some(&b"98765"[..]));
        let mut buf = [0u8; 24];
        assert_eq!(itoa(0, &mut buf), b"0");
        assert_eq!(itoa(4194304, &mut buf), b"4194304");
    }

    #[test]
    fn stat_parses_names_with_parentheses() {
        let s = stat(std::process::id() as libc::pid_t).unwrap();
        assert!(s.start > 0);
    }
}
