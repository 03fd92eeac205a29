//! Waiting for a started process: one `poll(2)` on its output pipes, a pidfd of the process
//! (readable when it exits) and an eventfd the cancel token writes, until it exits, times out
//! or is cancelled (then its whole group is killed: SIGTERM, SIGKILL after [`KILL_GRACE`]).
//!
//! No sleeping, no polling of the exit, no reader threads. Where the kernel has no pidfd
//! (before 5.3) the exit is checked at 1 ms doubling to 20 ms instead. Only a process the
//! script left behind holding the pipes past its grace gets a thread, which drains them to
//! their end.
//!
//! Owns: a watched process's life from its start to its reaping, and signalling its group.
//! Must not touch: what an exit code means (its callers decide).

use super::capture::{complete_prefix_len, Buffers, Kept, Output, Stream};
use super::{Piped, Proc, Tracked};
use crate::base::cancel::{CancelHook, CancelToken};
use crate::base::scratch::Scratch;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    Exited,
    TimedOut,
    Cancelled,
}

/// After SIGTERM, how long the group gets before SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);

const MAX_POLL: Duration = Duration::from_millis(20);

/// How a watched process ended, with its kept output.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// `None` when the process was killed by a signal (a program started directly that a
    /// signal killed on its own reports `128 + signal`, as `sh` does).
    pub exit_code: Option<i32>,
    /// The signal that ended the process itself, if one did.
    pub signal: Option<i32>,
    pub termination: Termination,
    pub stdout: Kept,
    pub stderr: Kept,
    /// stdout and stderr interleaved in arrival order.
    pub merged: Kept,
    pub duration: Duration,
}

impl Finished {
    /// A process that never started: the run was cancelled first.
    pub fn not_started(started: Instant) -> Finished {
        Finished {
            exit_code: None,
            signal: None,
            termination: Termination::Cancelled,
            stdout: Kept::default(),
            stderr: Kept::default(),
            merged: Kept::default(),
            duration: started.elapsed(),
        }
    }
}

/// A started process whose output is being captured, recorded until its group is empty.
/// Dropped without [`Running::wait`], its process group is killed.
pub struct Running {
    child: Proc,
    watch: Option<Watch>,
    /// Started directly rather than by `sh` ([`super::simple_words`]).
    direct: bool,
    started: Instant,
    pipe_grace: Duration,
    /// Recorded until the group is empty, so a restarted server can stop what a crash left.
    _tracked: Tracked,
}

impl Running {
    /// Records the group of `piped` and starts watching its output, its exit and `cancel`
    /// (the group is killed when that fails). `direct`: started without `sh`; `pipe_grace`:
    /// after the exit, how long processes it left behind may keep the output pipes open
    /// before [`Running::wait`] returns without their later output.
    pub fn start(
        piped: Piped,
        direct: bool,
        started: Instant,
        pipe_grace: Duration,
        cancel: &CancelToken,
    ) -> std::io::Result<Running> {
        let Piped {
            proc: mut child,
            stdout,
            stderr,
        } = piped;
        let tracked = super::track_proc(&child);
        let watch = match Watch::start(&child, stdout, stderr, cancel) {
            Ok(w) => w,
            Err(e) => {
                kill_group(&mut child);
                return Err(e);
            }
        };
        Ok(Running {
            child,
            watch: Some(watch),
            direct,
            started,
            pipe_grace,
            _tracked: tracked,
        })
    }

    /// Captures the output until the process has ended (exit, `timeout` or cancel).
    pub fn wait(
        mut self,
        timeout: Option<Duration>,
        cancel: &CancelToken,
    ) -> std::io::Result<Finished> {
        let watch = self
            .watch
            .take()
            .ok_or_else(|| std::io::Error::other("already waited for"))?;
        let (status, termination, out) = watch
            .run(
                &mut self.child,
                timeout,
                cancel,
                self.started,
                self.pipe_grace,
            )
            .inspect_err(|_| {
                kill_group(&mut self.child);
            })?;
        Ok(Finished {
            exit_code: exit_code(status, termination, self.direct),
            signal: status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s)),
            stdout: out.stdout,
            stderr: out.stderr,
            merged: out.merged,
            termination,
            duration: self.started.elapsed(),
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.watch.is_some() {
            kill_group(&mut self.child);
        }
    }
}

/// The exit code reported. A program started directly that a signal killed on its
/// own reports `128 + signal`, as `sh` does for the program it ran, so a script means the
/// same however it was started. (Killed by the timeout or cancel, the code stays
/// absent either way.)
fn exit_code(status: Option<ExitStatus>, termination: Termination, direct: bool) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    let status = status?;
    match status.code() {
        Some(code) => Some(code),
        None if direct && termination == Termination::Exited => {
            status.signal().map(|signal| 128 + signal)
        }
        None => None,
    }
}

/// How the script ended: its status (`None` only if it could not be collected after
/// killing), why, and when.
type Ended = (Option<ExitStatus>, Termination, Instant);

/// One output pipe's read end (non-blocking) and the bytes of a character its last read cut.
struct Pipe {
    file: File,
    stream: Stream,
    carry: Vec<u8>,
}

/// What the waiting thread polls: the output pipes, the script's exit and the cancel token.
pub(super) struct Watch {
    pipes: Vec<Pipe>,
    /// Readable once the script has exited; `None` where the kernel has no pidfd.
    pidfd: Option<OwnedFd>,
    /// Readable once the token is cancelled (the hook writes it); shared with the hook so
    /// it stays open while a canceller may still write it.
    wake: Option<Arc<OwnedFd>>,
    /// Registered with the token, which holds it weakly: dropping it unregisters it.
    _hook: Option<CancelHook>,
    buffers: Buffers,
    chunk: Scratch,
}

const READ_CHUNK: usize = 16 * 1024;
/// Reads of one pipe per wake-up before the other pipe gets its turn.
const READS_PER_TURN: usize = 64;

impl Watch {
    fn start(
        child: &Proc,
        stdout: OwnedFd,
        stderr: OwnedFd,
        cancel: &CancelToken,
    ) -> std::io::Result<Watch> {
        let pipes = vec![
            Pipe::new(stdout, Stream::Stdout)?,
            Pipe::new(stderr, Stream::Stderr)?,
        ];
        let pidfd = pidfd_open(child.id());
        let wake = eventfd().map(Arc::new);
        let hook = wake.as_ref().map(|fd| {
            let fd = Arc::clone(fd);
            let hook: CancelHook = Arc::new(move || signal_eventfd(fd.as_raw_fd()));
            cancel.on_cancel(&hook);
            hook
        });
        Ok(Watch {
            pipes,
            pidfd,
            wake,
            _hook: hook,
            buffers: Buffers::default(),
            chunk: Scratch::take(READ_CHUNK),
        })
    }

    /// Reads the output until the script has ended (exit, timeout or cancel: the group is
    /// killed) and both pipes are closed, or `grace` after the end.
    fn run(
        mut self,
        child: &mut Proc,
        timeout: Option<Duration>,
        cancel: &CancelToken,
        started: Instant,
        grace: Duration,
    ) -> std::io::Result<(Option<ExitStatus>, Termination, Output)> {
        let deadline = timeout.map(|t| started + t);
        let mut ended: Option<Ended> = None;
        let mut tick = Duration::from_millis(1);
        let (status, termination) = loop {
            if ended.is_none() {
                ended = check_end(child, deadline, cancel)?;
            }
            let now = Instant::now();
            let until = match ended {
                Some((status, termination, at)) => {
                    if self.pipes.is_empty() || now >= at + grace {
                        break (status, termination);
                    }
                    Some(at + grace)
                }
                None => deadline,
            };
            let mut wait = until.map(|u| u.saturating_duration_since(now));
            let running = ended.is_none();
            if running && (self.pidfd.is_none() || self.wake.is_none()) {
                // Nothing would wake us on the exit or the cancel: look again soon.
                wait = Some(wait.map_or(tick, |w| w.min(tick)));
                tick = (tick * 2).min(MAX_POLL);
            }
            self.poll(wait, running)?;
        };
        let out = Output {
            stdout: self.buffers.stdout.take(),
            stderr: self.buffers.stderr.take(),
            merged: self.buffers.merged.take(),
        };
        drain_in_background(std::mem::take(&mut self.pipes));
        Ok((status, termination, out))
    }

    /// One `poll(2)` (the exit and the cancel only while the script runs), then reads what
    /// is ready.
    fn poll(&mut self, wait: Option<Duration>, running: bool) -> std::io::Result<()> {
        let mut fds: Vec<libc::pollfd> = self.pipes.iter().map(|p| pollin(p.fd())).collect();
        if running {
            fds.extend(self.pidfd.as_ref().map(|fd| pollin(fd.as_raw_fd())));
            fds.extend(self.wake.as_ref().map(|fd| pollin(fd.as_raw_fd())));
        }
        if !poll_fds(&mut fds, wait)? {
            return Ok(());
        }
        let ready: Vec<bool> = fds[..self.pipes.len()]
            .iter()
            .map(|f| f.revents != 0)
            .collect();
        let mut i = 0;
        let mut ready = ready.into_iter();
        while i < self.pipes.len() {
            let open = match ready.next() {
                Some(true) => self.pipes[i].read(&mut self.chunk, &mut self.buffers),
                _ => true,
            };
            if open {
                i += 1;
            } else {
                self.pipes.remove(i);
            }
        }
        Ok(())
    }
}

impl Pipe {
    fn new(fd: OwnedFd, stream: Stream) -> std::io::Result<Pipe> {
        set_nonblocking(fd.as_raw_fd())?;
        Ok(Pipe {
            file: File::from(fd),
            stream,
            carry: Vec::new(),
        })
    }

    fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// Reads what is there, pushing whole UTF-8 characters so that the merged text never
    /// splits a character between the two streams. `false` at the end of the stream.
    fn read(&mut self, chunk: &mut [u8], buffers: &mut Buffers) -> bool {
        for _ in 0..READS_PER_TURN {
            let n = match self.file.read(chunk) {
                Ok(0) => return self.end(buffers),
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                Err(_) => return self.end(buffers),
            };
            self.carry.extend_from_slice(&chunk[..n]);
            let complete = complete_prefix_len(&self.carry);
            buffers.push(self.stream, &self.carry[..complete]);
            self.carry.drain(..complete);
            if n < chunk.len() {
                // Probably all there was; the next poll says.
                return true;
            }
        }
        true
    }

    /// The stream ended: what is left of a cut character goes in as it is.
    fn end(&mut self, buffers: &mut Buffers) -> bool {
        buffers.push(self.stream, &std::mem::take(&mut self.carry));
        false
    }
}

/// Whether the script has ended now: exited, or killed (with its group) because the token
/// was cancelled or the deadline passed.
fn check_end(
    child: &mut Proc,
    deadline: Option<Instant>,
    cancel: &CancelToken,
) -> std::io::Result<Option<Ended>> {
    if let Some(status) = child.try_wait()? {
        return Ok(Some((Some(status), Termination::Exited, Instant::now())));
    }
    let end = if cancel.is_cancelled() {
        Termination::Cancelled
    } else if deadline.is_some_and(|d| Instant::now() >= d) {
        Termination::TimedOut
    } else {
        return Ok(None);
    };
    let status = kill_group(child);
    Ok(Some((status, end, Instant::now())))
}

/// Pipes still held open by processes the script left behind are read to their end (and
/// the bytes dropped) by a thread of their own, so those processes never block on a full
/// pipe or die of SIGPIPE because the stage ended.
fn drain_in_background(pipes: Vec<Pipe>) {
    if pipes.is_empty() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("svc-cmd-drain".into())
        .spawn(move || {
            let mut pipes = pipes;
            let mut chunk = vec![0u8; READ_CHUNK];
            let mut sink = Buffers::default();
            sink.close();
            while !pipes.is_empty() {
                let mut fds: Vec<libc::pollfd> = pipes.iter().map(|p| pollin(p.fd())).collect();
                if poll_fds(&mut fds, None).is_err() {
                    return;
                }
                let ready: Vec<bool> = fds.iter().map(|f| f.revents != 0).collect();
                let mut ready = ready.into_iter();
                pipes.retain_mut(|p| {
                    !ready.next().unwrap_or(false) || p.read(&mut chunk, &mut sink)
                });
            }
        });
    // Without a thread the pipes close here: a leftover writer then gets EPIPE.
    drop(spawned);
}

fn pollin(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// `poll(2)` for at most `wait` (rounded up to whole milliseconds; `None`: no limit).
/// `false` when nothing is ready (timeout or a signal).
fn poll_fds(fds: &mut [libc::pollfd], wait: Option<Duration>) -> std::io::Result<bool> {
    let ms = wait.map_or(-1, |w| {
        let ms = w.as_nanos().div_ceil(1_000_000);
        libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
    });
    // SAFETY: `fds` is a valid, exclusively borrowed slice of pollfd for the whole call.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        return match e.kind() {
            ErrorKind::Interrupted => Ok(false),
            _ => Err(e),
        };
    }
    Ok(rc > 0)
}

/// Makes the read end of a pipe `spawn_piped` just made non-blocking. A fresh pipe end has
/// none of the flags F_SETFL can change (`O_APPEND`, `O_ASYNC`, `O_DIRECT`, `O_NOATIME`; the
/// access mode is left alone), so they are set without reading them first: one `fcntl`
/// instead of two per pipe.
fn set_nonblocking(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor we own; F_SETFL only sets its status flags.
    let ok = unsafe { libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK) >= 0 };
    if ok {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A pidfd of our unreaped child (it cannot be another process: an unreaped pid is never
/// reused); `None` where the kernel has none (before 5.3, or refused by a seccomp filter).
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = RawFd::try_from(fd).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A non-blocking, close-on-exec eventfd, or `None` if none can be made.
fn eventfd() -> Option<OwnedFd> {
    // SAFETY: eventfd returns a new descriptor or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    // SAFETY: a descriptor just returned to us; nothing else owns it.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

fn signal_eventfd(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an eventfd the caller keeps open. A full
    // counter (EAGAIN) already means "readable", which is all the waiter needs.
    unsafe {
        libc::write(fd, (&one as *const u64).cast(), std::mem::size_of::<u64>());
    }
}

/// SIGTERM to the whole group; SIGKILL once the script has exited or after [`KILL_GRACE`];
/// then reaps the script. The script is not reaped before the SIGKILL, so its process group
/// id cannot be reused by an unrelated group in between.
pub fn kill_group(child: &mut Proc) -> Option<ExitStatus> {
    let Ok(pgid) = libc::pid_t::try_from(child.id()) else {
        return child.wait().ok();
    };
    signal_group(pgid, libc::SIGTERM);
    let deadline = Instant::now() + KILL_GRACE;
    while Instant::now() < deadline && !has_exited(pgid) {
        std::thread::sleep(Duration::from_millis(10));
    }
    signal_group(pgid, libc::SIGKILL);
    child.wait().ok()
}

pub fn signal_group(pgid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: killpg only sends a signal; pgid is the id of our unreaped child, which leads
    // its own process group (process_group(0)), so the group cannot belong to anyone else.
    unsafe {
        libc::killpg(pgid, signal);
    }
}

/// Whether the (unreaped) child has exited, without reaping it.
fn has_exited(pid: libc::pid_t) -> bool {
    // SAFETY: siginfo_t is plain data; waitid writes into it. WNOWAIT leaves the child
    // waitable, so std's Child::wait still collects its status.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let rc = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        rc == 0 && info.si_pid() != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    struct Spec<'a> {
        script: &'a str,
        dir: &'a Path,
        timeout: Option<Duration>,
        pipe_grace: Duration,
    }

    fn spec<'a>(script: &'a str, dir: &'a Path) -> Spec<'a> {
        Spec {
            script,
            dir,
            timeout: None,
            pipe_grace: Duration::from_secs(2),
        }
    }

    /// The wait as on a kernel without pidfd (and without an eventfd): the exit and the
    /// cancel are looked at on a timer instead.
    fn run_without_wakeups(s: &Spec, token: &CancelToken) -> Finished {
        let started = Instant::now();
        let mut cmd = std::process::Command::new(super::super::SH);
        cmd.arg("-c").arg(s.script).current_dir(s.dir);
        let Piped {
            proc: mut child,
            stdout,
            stderr,
        } = super::super::spawn_piped(&cmd, &[], None).unwrap();
        let mut watch = Watch::start(&child, stdout, stderr, token).unwrap();
        watch.pidfd = None;
        watch.wake = None;
        watch._hook = None;
        let (status, termination, out) = watch
            .run(&mut child, s.timeout, token, started, s.pipe_grace)
            .unwrap();
        Finished {
            exit_code: status.and_then(|s| s.code()),
            signal: None,
            stdout: out.stdout,
            stderr: out.stderr,
            merged: out.merged,
            termination,
            duration: started.elapsed(),
        }
    }

    #[test]
    fn without_pidfd_the_exit_timeout_and_cancel_are_still_seen() {
        let dir = tempfile::tempdir().unwrap();
        let token = CancelToken::new();
        let r = run_without_wakeups(&spec("echo out; echo err >&2; exit 4", dir.path()), &token);
        assert_eq!((r.exit_code, r.termination), (Some(4), Termination::Exited));
        assert_eq!(
            (r.stdout.text.as_str(), r.stderr.text.as_str()),
            ("out\n", "err\n")
        );
        let mut slow = spec("sleep 30", dir.path());
        slow.timeout = Some(Duration::from_millis(100));
        let r = run_without_wakeups(&slow, &token);
        assert_eq!(r.termination, Termination::TimedOut);
        let t2 = token.clone();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            t2.cancel("user");
        });
        let r = run_without_wakeups(&spec("sleep 30", dir.path()), &token);
        let _ = canceller.join();
        assert_eq!(r.termination, Termination::Cancelled);
    }
}
