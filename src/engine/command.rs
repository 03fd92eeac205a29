//! Runs a command stage's script as a real process: its own process group, captured and
//! bounded output, timeout and cancellation that kill the whole group.
//!
//! Owns process spawning, output capture and signalling. Must not decide what an exit code
//! means for the stage (statuses, classes and retries live in `failure`), nor parse output
//! (`output`).

use crate::engine::cancel::CancelToken;
use parking_lot::Mutex;
use std::io::Read;
use std::path::Path;
use std::process::{Child, ExitStatus, Stdio};
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
            Language::Shell => "sh",
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
    pub timeout: Option<Duration>,
    /// How the process is started (host or the run's container).
    pub isolation: &'a crate::sandbox::Isolation,
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
    #[error("cannot start an output reader thread: {0}")]
    Thread(std::io::Error),
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
    if !spec.workdir.is_dir() {
        return Err(CommandError::Workdir {
            path: spec.workdir.display().to_string(),
        });
    }
    let started = Instant::now();
    if cancel.is_cancelled() {
        return Ok(not_started(started));
    }
    let mut child = spawn(spec)?;
    // Recorded until the group is empty, so a restarted server can stop what a crash left.
    let _tracked = crate::procs::track(&child);
    let capture = match Capture::start(&mut child) {
        Ok(c) => c,
        Err(e) => {
            kill_group(&mut child);
            return Err(CommandError::Thread(e));
        }
    };
    let (status, termination) = match wait(&mut child, spec.timeout, cancel, started) {
        Ok(done) => done,
        Err(e) => {
            kill_group(&mut child);
            return Err(CommandError::Wait(e));
        }
    };
    let out = capture.finish(Instant::now() + PIPE_GRACE);
    Ok(CommandResult {
        exit_code: status.and_then(|s| s.code()),
        stdout: out.stdout.text,
        stderr: out.stderr.text,
        merged: out.merged.text,
        stdout_bytes: out.stdout.total,
        stderr_bytes: out.stderr.total,
        truncated: out.stdout.truncated || out.stderr.truncated || out.merged.truncated,
        termination,
        duration: started.elapsed(),
    })
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
        termination: Termination::Cancelled,
        duration: started.elapsed(),
    }
}

fn spawn(spec: &CommandSpec) -> Result<Child, CommandError> {
    let program = spec.language.program();
    // The isolation puts the script in its own process group (and in bwrap for a container).
    spec.isolation
        .command(program, spec.workdir)
        .arg("-c")
        .arg(spec.script)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| CommandError::Spawn {
            program: program.to_string(),
            source,
        })
}

/// Polls the child (1 ms doubling to 20 ms) until it exits, times out or is cancelled.
/// The status is `None` only if it could not be collected after killing.
fn wait(
    child: &mut Child,
    timeout: Option<Duration>,
    cancel: &CancelToken,
    started: Instant,
) -> std::io::Result<(Option<ExitStatus>, Termination)> {
    let deadline = timeout.map(|t| started + t);
    let mut poll = Duration::from_millis(1);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok((Some(status), Termination::Exited));
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok((kill_group(child), Termination::TimedOut));
        }
        let nap = deadline.map_or(poll, |d| poll.min(d - now));
        if cancel.sleep(nap) {
            return Ok((kill_group(child), Termination::Cancelled));
        }
        poll = (poll * 2).min(MAX_POLL);
    }
}

/// SIGTERM to the whole group; SIGKILL once the script has exited or after [`KILL_GRACE`];
/// then reaps the script. The script is not reaped before the SIGKILL, so its process group
/// id cannot be reused by an unrelated group in between.
fn kill_group(child: &mut Child) -> Option<ExitStatus> {
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

/// The three buffers the reader threads fill.
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

/// Two reader threads and their shared buffers.
struct Capture {
    buffers: Arc<Mutex<Buffers>>,
    done: crossbeam_channel::Receiver<()>,
    readers: usize,
}

impl Capture {
    fn start(child: &mut Child) -> std::io::Result<Capture> {
        let buffers = Arc::new(Mutex::new(Buffers::default()));
        let (tx, done) = crossbeam_channel::unbounded();
        let mut readers = 0;
        if let Some(out) = child.stdout.take() {
            spawn_reader(out, Stream::Stdout, &buffers, &tx)?;
            readers += 1;
        }
        if let Some(err) = child.stderr.take() {
            spawn_reader(err, Stream::Stderr, &buffers, &tx)?;
            readers += 1;
        }
        Ok(Capture {
            buffers,
            done,
            readers,
        })
    }

    /// Waits (until `deadline`) for both pipes to close, then takes what was captured.
    /// Readers still blocked by a leftover process keep draining into closed buffers.
    fn finish(self, deadline: Instant) -> Output {
        for _ in 0..self.readers {
            if self.done.recv_deadline(deadline).is_err() {
                break;
            }
        }
        let mut b = self.buffers.lock();
        Output {
            stdout: b.stdout.take(),
            stderr: b.stderr.take(),
            merged: b.merged.take(),
        }
    }
}

fn spawn_reader(
    pipe: impl Read + Send + 'static,
    stream: Stream,
    buffers: &Arc<Mutex<Buffers>>,
    done: &crossbeam_channel::Sender<()>,
) -> std::io::Result<()> {
    let buffers = Arc::clone(buffers);
    let done = done.clone();
    let name = match stream {
        Stream::Stdout => "svc-cmd-stdout",
        Stream::Stderr => "svc-cmd-stderr",
    };
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            read_stream(pipe, stream, &buffers);
            let _ = done.send(());
        })
        .map(drop)
}

/// Reads until EOF, pushing whole UTF-8 characters so that the merged text never splits a
/// character between the two streams.
fn read_stream(mut pipe: impl Read, stream: Stream, buffers: &Mutex<Buffers>) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        carry.extend_from_slice(&buf[..n]);
        let complete = complete_prefix_len(&carry);
        push(buffers, stream, &carry[..complete]);
        carry.drain(..complete);
    }
    push(buffers, stream, &carry);
}

/// Length of the prefix that does not end inside a UTF-8 character.
fn complete_prefix_len(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        _ => bytes.len(),
    }
}

fn push(buffers: &Mutex<Buffers>, stream: Stream, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    let mut b = buffers.lock();
    match stream {
        Stream::Stdout => b.stdout.push(bytes),
        Stream::Stderr => b.stderr.push(bytes),
    }
    b.merged.push(bytes);
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
            timeout: None,
            isolation: &LOCAL,
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
            .stdout(Stdio::null())
            .stderr(Stdio::null())
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
        let r = run(&spec("sleep 30 & echo $! > pidfile; echo done", dir.path()));
        assert_eq!((r.exit_code, r.stdout.as_str()), (Some(0), "done\n"));
        assert!(started.elapsed() < PIPE_GRACE + Duration::from_secs(2));
        let pid: libc::pid_t = std::fs::read_to_string(dir.path().join("pidfile"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // SAFETY: test cleanup of the process this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
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
