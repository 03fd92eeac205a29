//! The stdio transport: the server is a child process started from a prepared
//! [`Command`] (the caller decides isolation: own process group, sandbox, environment);
//! messages are lines of JSON on its stdin and stdout; stdout lines that are not JSON and
//! everything on stderr are kept (bounded) for diagnostics. A reader thread answers server
//! requests on stdin itself. Shutdown closes stdin, waits, then kills the process group.
//! Must not decide what the process may reach (the caller's `Command` does).

use std::io::{BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use parking_lot::Mutex;
use serde_json::Value;

use super::client::{dispatch, Client, Inbound, Link, Shared};
use super::sse::{read_line, Line};
use super::{McpError, MAX_MESSAGE_BYTES};

struct StdioLink {
    child: Child,
    stdin: Arc<Mutex<Option<ChildStdin>>>,
    readers: Vec<JoinHandle<()>>,
    shared: Arc<Shared>,
    /// The exit status, once reaped.
    status: Option<String>,
    /// Dropped after the process group is gone (forgets its record).
    _tracked: crate::procs::Tracked,
}

/// Starts the server process (call from the thread that will own it: the caller's command
/// may tie the child's life to the spawning thread) and returns a client ready for
/// [`Client::initialize`]. `cmd` should lead its own process group (`procs::isolate`);
/// its stdio is replaced by pipes.
pub fn spawn(mut cmd: Command) -> Result<Client, McpError> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| McpError::Spawn {
        program: program.clone(),
        reason: e.to_string(),
    })?;
    let tracked = crate::procs::track(&child);
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        kill_group(&mut child);
        return Err(McpError::Spawn {
            program,
            reason: "no stdio pipes".into(),
        });
    };
    let shared = Arc::new(Shared::default());
    let (tx, rx) = crossbeam_channel::unbounded();
    let stdin = Arc::new(Mutex::new(Some(stdin)));
    let out = {
        let (shared, stdin, tx) = (shared.clone(), stdin.clone(), tx.clone());
        std::thread::Builder::new()
            .name("mcp-stdout".into())
            .spawn(move || read_stdout(stdout, &shared, &stdin, &tx))
    };
    let err = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("mcp-stderr".into())
            .spawn(move || read_stderr(stderr, &shared))
    };
    let mut readers = Vec::new();
    for h in [out, err] {
        match h {
            Ok(h) => readers.push(h),
            Err(e) => {
                kill_group(&mut child);
                return Err(McpError::Spawn {
                    program,
                    reason: format!("cannot start a reader thread: {e}"),
                });
            }
        }
    }
    let link = StdioLink {
        child,
        stdin,
        readers,
        shared: shared.clone(),
        status: None,
        _tracked: tracked,
    };
    Ok(Client::new(Box::new(link), rx, tx, shared))
}

fn write_line(stdin: &Mutex<Option<ChildStdin>>, msg: &Value) -> std::io::Result<()> {
    let mut line = msg.to_string();
    line.push('\n');
    let mut g = stdin.lock();
    match g.as_mut() {
        Some(w) => w.write_all(line.as_bytes()).and_then(|_| w.flush()),
        None => Err(std::io::Error::new(
            std::io::ErrorKind::BrokenPipe,
            "stdin is closed",
        )),
    }
}

fn read_stdout(
    stdout: std::process::ChildStdout,
    shared: &Shared,
    stdin: &Arc<Mutex<Option<ChildStdin>>>,
    tx: &Sender<Inbound>,
) {
    let mut r = BufReader::with_capacity(64 * 1024, stdout);
    let mut buf = Vec::with_capacity(4096);
    let reply = {
        let stdin = stdin.clone();
        move |v: Value| {
            let _ = write_line(&stdin, &v);
        }
    };
    loop {
        match read_line(&mut r, &mut buf, MAX_MESSAGE_BYTES) {
            Ok(Line::Full) => {}
            Ok(Line::TooLong) => {
                let _ = tx.send(Inbound::Closed(format!(
                    "the server wrote a line of more than {} MiB on stdout",
                    MAX_MESSAGE_BYTES / (1024 * 1024)
                )));
                return;
            }
            Ok(Line::Eof) => {
                let _ = tx.send(Inbound::Closed("the server closed its stdout".into()));
                return;
            }
            Err(e) => {
                let _ = tx.send(Inbound::Closed(format!("reading stdout failed: {e}")));
                return;
            }
        }
        let text = String::from_utf8_lossy(&buf);
        let t = text.trim();
        if t.is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(t) {
            Ok(v) => {
                dispatch(v, shared, &reply, tx);
            }
            // The protocol allows only messages on stdout; keep strays for diagnostics.
            Err(_) => shared.push_tail(&format!("stdout: {}\n", cut(t, 500))),
        }
    }
}

fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut i = max;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    &s[..i]
}

fn read_stderr(mut stderr: std::process::ChildStderr, shared: &Shared) {
    let mut buf = [0u8; 4096];
    loop {
        match stderr.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => shared.push_tail(&String::from_utf8_lossy(&buf[..n])),
        }
    }
}

/// SIGKILL to the child's whole group, then reap it.
fn kill_group(child: &mut Child) {
    // The child leads its group (`procs::isolate`) and is not reaped yet, so the group id
    // cannot have been reused.
    crate::procs::signal_group(child.id() as libc::pid_t, libc::SIGKILL);
    let _ = child.kill();
    let _ = child.wait();
}

/// Whether the child has exited, leaving it unreaped (so its group id stays ours).
fn has_exited(child: &Child) -> bool {
    // SAFETY: waitid on our own child with WNOWAIT only reads its state; `info` is a
    // zeroed plain C struct that outlives the call.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(
            libc::P_PID,
            child.id() as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        r == 0 && info.si_pid() != 0
    }
}

/// Waits (without reaping) for the child to exit until `deadline`.
fn wait_until(child: &Child, deadline: Instant) -> bool {
    loop {
        if has_exited(child) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

impl StdioLink {
    /// Kills what is left of the group and reaps the child (once); its exit status.
    fn reap(&mut self) -> Option<String> {
        if let Some(s) = &self.status {
            return Some(s.clone());
        }
        // Whatever the server started is in its group: nothing of it may outlive it.
        kill_group(&mut self.child);
        let s = self.child.wait().ok().map(|s| s.to_string());
        self.status = s.clone();
        s
    }

    /// Joins the reader threads, giving them until `until` to see their pipes close.
    fn join_readers(&mut self, until: Instant) {
        for h in self.readers.drain(..) {
            while !h.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
            if h.is_finished() {
                let _ = h.join();
            } else {
                // A process outside the group still holds the pipe: the thread ends when it
                // closes it; it holds nothing but the pipe and the tail.
                log::warn!("an MCP server's output pipe is still held open by another process");
            }
        }
    }
}

impl Link for StdioLink {
    fn pid(&self) -> Option<u32> {
        Some(self.child.id())
    }

    fn send(&mut self, msg: &Value, _request: Option<u64>, _t: Duration) -> Result<(), McpError> {
        write_line(&self.stdin, msg)
            .map_err(|e| self.closed_error(format!("cannot write to the server's stdin: {e}")))
    }

    fn closed_error(&mut self, why: String) -> McpError {
        // The process usually exits together with its stdout: give it a moment, so the error
        // says how it ended, with the end of its stderr.
        if wait_until(&self.child, Instant::now() + Duration::from_millis(500)) {
            let status = self.reap();
            let until = Instant::now() + Duration::from_millis(200);
            while self.readers.iter().any(|h| !h.is_finished()) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
            return McpError::Exited {
                status,
                stderr: last_lines(&self.shared.tail(), 20),
            };
        }
        let tail = last_lines(&self.shared.tail(), 20);
        if tail.trim().is_empty() {
            McpError::Closed(why)
        } else {
            McpError::Closed(format!("{why}; its output ends with:\n{}", tail.trim()))
        }
    }

    fn begin_close(&mut self) {
        // Closing stdin is how the protocol asks a stdio server to stop.
        self.stdin.lock().take();
    }

    fn finish_close(&mut self, deadline: Instant) {
        self.stdin.lock().take();
        if self.status.is_none() && !wait_until(&self.child, deadline) {
            crate::procs::signal_group(self.child.id() as libc::pid_t, libc::SIGTERM);
            wait_until(&self.child, Instant::now() + Duration::from_millis(200));
        }
        self.reap();
        self.join_readers(Instant::now() + Duration::from_millis(500));
    }
}

/// The last `n` lines of `s`.
pub(crate) fn last_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
