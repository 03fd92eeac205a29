//! Runs a command stage's script as a real process: its own process group, captured and
//! bounded output, timeout and cancellation that kill the whole group.
//!
//! The calling thread waits in one `poll(2)` on the output pipes, a pidfd of the script
//! (readable when it exits) and an eventfd the cancel token writes: no sleeping, no
//! polling of the exit, no reader threads. Where the kernel has no pidfd (before 5.3) the
//! exit is checked at 1 ms doubling to 20 ms instead. Only a process the script left behind
//! holding the pipes past [`PIPE_GRACE`] gets a thread, which drains them to their end.
//!
//! Owns process spawning, output capture and signalling. Must not decide what an exit code
//! means for the stage (statuses, classes and retries live in `failure`), nor parse output
//! (`output`).

use crate::base::scratch::Scratch;
use crate::engine::cancel::{CancelHook, CancelToken};
use crate::procs::{Piped, Proc};
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The interpreter of a script: `sh -c` or `python3 -c`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    Shell,
    Python,
}

impl Language {
    /// The `language` attribute (`shell` or `python`); absent or blank means shell.
    pub fn from_attr(value: Option<&str>) -> Option<Language> {
        match value.map(str::trim).unwrap_or("") {
            "" | "shell" => Some(Language::Shell),
            "python" => Some(Language::Python),
            _ => None,
        }
    }

    pub fn program(self) -> &'static str {
        match self {
            // An absolute path, as system(3) uses: no PATH search per spawn, and no other
            // `sh` earlier on the PATH.
            Language::Shell => "/bin/sh",
            Language::Python => "python3",
        }
    }
}

/// How the process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    Exited,
    TimedOut,
    Cancelled,
}

pub struct CommandSpec<'a> {
    pub script: &'a str,
    pub language: Language,
    pub workdir: &'a Path,
    /// Added to the inherited environment.
    pub env: Vec<(String, String)>,
    /// The inherited environment (`None`: this process's, read at the spawn).
    pub base_env: Option<&'a crate::procs::EnvSnapshot>,
    pub timeout: Option<Duration>,
    /// How the process is started (host or the run's container).
    pub isolation: &'a crate::sandbox::Isolation,
    /// After the script exits, how long processes it left behind may keep the output pipes
    /// open before the result comes back without their later output ([`PIPE_GRACE`] for a
    /// command stage).
    pub pipe_grace: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CommandResult {
    /// `None` when the process was killed by a signal.
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// stdout and stderr interleaved in arrival order.
    pub merged: String,
    /// Every byte the stream produced, including the ones cut from the kept text.
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// Some kept text (stdout, stderr or merged) lost its middle to [`OUTPUT_LIMIT`].
    pub truncated: bool,
    /// The signal that ended the process itself (the program, or the `sh` running the
    /// script), if one did.
    pub signal: Option<i32>,
    pub termination: Termination,
    pub duration: Duration,
}

impl CommandResult {
    pub fn succeeded(&self) -> bool {
        self.termination == Termination::Exited && self.exit_code == Some(0)
    }

    /// One line saying how the command ended (`command exited with code 3`, ...).
    pub fn summary(&self, timeout: Option<Duration>) -> String {
        match (self.termination, self.exit_code) {
            (Termination::TimedOut, _) => match timeout {
                Some(t) => format!("command timed out after {}", human_duration(t)),
                None => "command timed out".to_string(),
            },
            (Termination::Cancelled, _) => "command cancelled".to_string(),
            (Termination::Exited, Some(code)) => format!("command exited with code {code}"),
            (Termination::Exited, None) => "command was killed by a signal".to_string(),
        }
    }

    /// The stage failure message: the summary plus the last [`FAILURE_TAIL`] bytes of each
    /// non-empty stream.
    pub fn failure_message(&self, timeout: Option<Duration>) -> String {
        let mut msg = self.summary(timeout);
        for (name, text) in [("stderr", &self.stderr), ("stdout", &self.stdout)] {
            let tail = tail_at_boundary(text.trim_end(), FAILURE_TAIL);
            if !tail.is_empty() {
                msg.push_str(&format!("\n{name}:\n{tail}"));
            }
        }
        msg
    }
}

/// Bytes of each stream appended to a failure message.
pub const FAILURE_TAIL: usize = 4096;

fn human_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

fn tail_at_boundary(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("working directory `{path}` is not a directory")]
    Workdir { path: String },
    #[error("cannot watch the command's output: {0}")]
    Capture(std::io::Error),
    #[error("cannot wait for the command: {0}")]
    Wait(std::io::Error),
}

/// Bytes of each stream (and of the merged text) kept in memory; beyond it the head and
/// the tail are kept around a marker, and every byte is still counted.
pub const OUTPUT_LIMIT: usize = 4 * 1024 * 1024;

/// After SIGTERM, how long the group gets before SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);

/// After the script exits, how long to wait for processes it left behind to close the
/// output pipes before returning without their output.
pub const PIPE_GRACE: Duration = Duration::from_secs(2);

const MAX_POLL: Duration = Duration::from_millis(20);

/// Runs the script to completion, timeout or cancellation.
pub fn run_command(
    spec: &CommandSpec,
    cancel: &CancelToken,
) -> Result<CommandResult, CommandError> {
    match start_command(spec, cancel)? {
        Started::Running(running) => running.wait(spec.timeout, cancel),
        Started::Cancelled(result) => Ok(result),
    }
}

/// What [`start_command`] did.
pub enum Started {
    /// The script runs; [`Running::wait`] for it.
    Running(Box<Running>),
    /// The run was cancelled before the script started: nothing ran.
    Cancelled(CommandResult),
}

/// A started script whose output is being captured. Dropped without [`Running::wait`] (the
/// stage could not record its start), its process group is killed.
pub struct Running {
    child: Proc,
    watch: Option<Watch>,
    /// Started directly rather than by `sh` (`procs::simple_words`).
    direct: bool,
    started: Instant,
    pipe_grace: Duration,
    /// Recorded until the group is empty, so a restarted server can stop what a crash left.
    _tracked: crate::procs::Tracked,
}

/// Starts the script and returns at once, so the caller can record the start while the
/// process is starting up.
pub fn start_command(spec: &CommandSpec, cancel: &CancelToken) -> Result<Started, CommandError> {
    // On the host the child's own `chdir` reports a missing directory, so it is looked at
    // only when the start fails (one `statx` less per command); bubblewrap would start and
    // then fail inside, so a container checks first.
    let local = matches!(spec.isolation, crate::sandbox::Isolation::Local);
    if !local && !spec.workdir.is_dir() {
        return Err(workdir_error(spec));
    }
    let started = Instant::now();
    if cancel.is_cancelled() {
        return Ok(Started::Cancelled(not_started(started)));
    }
    let (
        Piped {
            proc: mut child,
            stdout,
            stderr,
        },
        direct,
    ) = match spawn(spec) {
        Ok(p) => p,
        Err(_) if local && !spec.workdir.is_dir() => return Err(workdir_error(spec)),
        Err(e) => return Err(e),
    };
    let tracked = crate::procs::track_proc(&child);
    let watch = match Watch::start(&child, stdout, stderr, cancel) {
        Ok(w) => w,
        Err(e) => {
            kill_group(&mut child);
            return Err(CommandError::Capture(e));
        }
    };
    Ok(Started::Running(Box::new(Running {
        child,
        watch: Some(watch),
        direct,
        started,
        pipe_grace: spec.pipe_grace,
        _tracked: tracked,
    })))
}

impl Running {
    /// Captures the output until the script has ended (exit, `timeout` or cancel).
    pub fn wait(
        mut self,
        timeout: Option<Duration>,
        cancel: &CancelToken,
    ) -> Result<CommandResult, CommandError> {
        let watch = self
            .watch
            .take()
            .ok_or_else(|| CommandError::Wait(std::io::Error::other("already waited for")))?;
        let (status, termination, out) = watch
            .run(
                &mut self.child,
                timeout,
                cancel,
                self.started,
                self.pipe_grace,
            )
            .map_err(|e| {
                kill_group(&mut self.child);
                CommandError::Wait(e)
            })?;
        Ok(CommandResult {
            exit_code: exit_code(status, termination, self.direct),
            signal: status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s)),
            stdout: out.stdout.text,
            stderr: out.stderr.text,
            merged: out.merged.text,
            stdout_bytes: out.stdout.total,
            stderr_bytes: out.stderr.total,
            truncated: out.stdout.truncated || out.stderr.truncated || out.merged.truncated,
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

/// The exit code the stage reports. A program started directly that a signal killed on its
/// own reports `128 + signal`, as `sh` does for the program it ran, so a script means the
/// same however it was started. (Killed by the stage's timeout or cancel, the code stays
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

fn workdir_error(spec: &CommandSpec) -> CommandError {
    CommandError::Workdir {
        path: spec.workdir.display().to_string(),
    }
}

/// The result for a run cancelled before the script started: nothing ran.
fn not_started(started: Instant) -> CommandResult {
    CommandResult {
        exit_code: None,
        stdout: String::new(),
        stderr: String::new(),
        merged: String::new(),
        stdout_bytes: 0,
        stderr_bytes: 0,
        truncated: false,
        signal: None,
        termination: Termination::Cancelled,
        duration: started.elapsed(),
    }
}

/// Starts the script (in bwrap for a container) through `procs::spawn_piped`: its own
/// process group, PDEATHSIG tied to this (the stage's) thread, the group's record, and no
/// `fork()` of the whole server. Whether it was started directly comes with it.
fn spawn(spec: &CommandSpec) -> Result<(Piped, bool), CommandError> {
    if let Some(piped) = spawn_direct(spec) {
        return Ok((piped, true));
    }
    let program = spec.language.program();
    let mut cmd = spec.isolation.command(program, spec.workdir);
    cmd.arg("-c").arg(spec.script);
    crate::procs::spawn_piped(&cmd, &spec.env, spec.base_env)
        .map(|piped| (piped, false))
        .map_err(|source| CommandError::Spawn {
            program: program.to_string(),
            source,
        })
}

/// A shell script that is one program with literal words, started on the host without
/// `sh` (`procs::simple_words`), with the `PWD` sh would have exported. `None` when the
/// script is not one, or the start failed in any way: the script then goes to `sh`, which
/// reports a missing or unrunnable program in its own words (and runs a file without a
/// `#!` line as a script), exactly as before.
fn spawn_direct(spec: &CommandSpec) -> Option<Piped> {
    let local = matches!(spec.isolation, crate::sandbox::Isolation::Local);
    if spec.language != Language::Shell || !local {
        return None;
    }
    let words = crate::procs::simple_words(spec.script)?;
    let inherited_pwd = match spec.base_env {
        Some(base) => base.get(std::ffi::OsStr::new("PWD")).map(ToOwned::to_owned),
        None => std::env::var_os("PWD"),
    };
    let pwd = crate::procs::shell_pwd(inherited_pwd.as_deref(), spec.workdir)?;
    let mut env = Vec::with_capacity(spec.env.len() + 1);
    env.extend(spec.env.iter().cloned());
    env.push(("PWD".to_string(), pwd.into_string().ok()?));
    let mut cmd = spec.isolation.command(words[0], spec.workdir);
    cmd.args(&words[1..]);
    crate::procs::spawn_piped(&cmd, &env, spec.base_env).ok()
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
struct Watch {
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
fn kill_group(child: &mut Proc) -> Option<ExitStatus> {
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

fn signal_group(pgid: libc::pid_t, signal: libc::c_int) {
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

/// Kept text of one stream: everything up to [`OUTPUT_LIMIT`], else head + marker + tail.
#[derive(Debug, Default)]
struct Buffer {
    head: Vec<u8>,
    tail: Vec<u8>,
    total: u64,
    closed: bool,
}

#[derive(Debug, Default)]
struct Kept {
    text: String,
    total: u64,
    truncated: bool,
}

const HALF: usize = OUTPUT_LIMIT / 2;

impl Buffer {
    fn push(&mut self, mut bytes: &[u8]) {
        if self.closed {
            return;
        }
        self.total += bytes.len() as u64;
        let room = HALF.saturating_sub(self.head.len());
        let take = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..take]);
        bytes = &bytes[take..];
        self.tail.extend_from_slice(bytes);
        if self.tail.len() >= 2 * HALF {
            let excess = self.tail.len() - HALF;
            self.tail.drain(..excess);
        }
    }

    /// Takes the kept text; later pushes are dropped.
    fn take(&mut self) -> Kept {
        self.closed = true;
        let head = std::mem::take(&mut self.head);
        let mut tail = std::mem::take(&mut self.tail);
        let kept = (head.len() + tail.len()) as u64;
        let omitted = self.total - kept.min(self.total);
        let tail_cut = tail.len().saturating_sub(HALF);
        tail.drain(..tail_cut);
        let omitted = omitted + tail_cut as u64;
        if omitted == 0 {
            let mut all = head;
            all.extend_from_slice(&tail);
            return Kept {
                text: String::from_utf8_lossy(&all).into_owned(),
                total: self.total,
                truncated: false,
            };
        }
        let head_text = String::from_utf8_lossy(trim_partial_end(&head));
        let tail_text = String::from_utf8_lossy(trim_partial_start(&tail));
        Kept {
            text: format!("{head_text}\n[... {omitted} bytes omitted ...]\n{tail_text}"),
            total: self.total,
            truncated: true,
        }
    }
}

/// Drops an incomplete UTF-8 sequence at the end (a cut in the middle of a character).
fn trim_partial_end(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => &bytes[..e.valid_up_to()],
        _ => bytes,
    }
}

/// Drops continuation bytes at the start (a cut in the middle of a character).
fn trim_partial_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|b| (**b & 0xC0) == 0x80)
        .count();
    &bytes[skip..]
}

/// The three buffers the output fills.
#[derive(Debug, Default)]
struct Buffers {
    stdout: Buffer,
    stderr: Buffer,
    merged: Buffer,
}

#[derive(Debug, Default)]
struct Output {
    stdout: Kept,
    stderr: Kept,
    merged: Kept,
}

#[derive(Clone, Copy)]
enum Stream {
    Stdout,
    Stderr,
}

/// Length of the prefix that does not end inside a UTF-8 character.
fn complete_prefix_len(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        _ => bytes.len(),
    }
}

impl Buffers {
    fn push(&mut self, stream: Stream, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        match stream {
            Stream::Stdout => self.stdout.push(bytes),
            Stream::Stderr => self.stderr.push(bytes),
        }
        self.merged.push(bytes);
    }

    /// Later pushes are dropped (a drain that keeps nothing).
    fn close(&mut self) {
        for b in [&mut self.stdout, &mut self.stderr, &mut self.merged] {
            b.closed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The wait as on a kernel without pidfd (and without an eventfd): the exit and the
    /// cancel are looked at on a timer instead.
    fn run_without_wakeups(s: &CommandSpec, token: &CancelToken) -> CommandResult {
        let started = Instant::now();
        let (
            Piped {
                proc: mut child,
                stdout,
                stderr,
            },
            _,
        ) = spawn(s).unwrap();
        let mut watch = Watch::start(&child, stdout, stderr, token).unwrap();
        watch.pidfd = None;
        watch.wake = None;
        watch._hook = None;
        let (status, termination, out) = watch
            .run(&mut child, s.timeout, token, started, s.pipe_grace)
            .unwrap();
        CommandResult {
            exit_code: status.and_then(|s| s.code()),
            signal: None,
            stdout: out.stdout.text,
            stderr: out.stderr.text,
            merged: out.merged.text,
            stdout_bytes: out.stdout.total,
            stderr_bytes: out.stderr.total,
            truncated: false,
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
        assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("out\n", "err\n"));
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

    #[test]
    fn buffer_keeps_head_and_tail_on_char_boundaries() {
        let mut b = Buffer::default();
        let chunk = "é".repeat(1000);
        for _ in 0..(OUTPUT_LIMIT / chunk.len() + 700) {
            b.push(chunk.as_bytes());
            b.push(b"x");
        }
        let total = b.total;
        let kept = b.take();
        assert!(kept.truncated && kept.total == total);
        assert!(!kept.text.contains('\u{FFFD}'));
        b.push(b"late");
        assert_eq!(b.total, total);
    }

    #[test]
    fn reader_never_splits_a_character() {
        assert_eq!(complete_prefix_len("aé".as_bytes()), 3);
        assert_eq!(complete_prefix_len(&"aé".as_bytes()[..2]), 1);
        assert_eq!(complete_prefix_len(b"a\xff"), 2);
    }

    #[test]
    fn language_attribute() {
        assert_eq!(Language::from_attr(None), Some(Language::Shell));
        assert_eq!(Language::from_attr(Some("python")), Some(Language::Python));
        assert_eq!(Language::from_attr(Some("ruby")), None);
    }
}
