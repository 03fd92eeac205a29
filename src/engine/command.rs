//! TEMPORARY STAND-IN for the `blocks` branch (replaced when it is merged): running one
//! command in its own process group with a timeout and cancellation.
//! Must not touch: the engine loop.

use super::cancel::CancelToken;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    Shell,
    Python,
}

#[derive(Debug, Clone)]
pub struct CommandSpec {
    pub script: String,
    pub language: Language,
    pub workdir: PathBuf,
    pub env: Vec<(String, String)>,
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    Exited,
    TimedOut,
    Cancelled,
}

impl Termination {
    pub fn as_str(self) -> &'static str {
        match self {
            Termination::Exited => "exited",
            Termination::TimedOut => "timed_out",
            Termination::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Clone)]
pub struct CommandResult {
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub merged: String,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub truncated: bool,
    pub termination: Termination,
    pub duration: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("cannot start the command: {0}")]
    Spawn(#[from] std::io::Error),
}

fn reader(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        buf
    })
}

fn kill_group(pid: u32) {
    // SAFETY: plain syscall on the child's process group.
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
    }
}

pub fn run_command(
    spec: &CommandSpec,
    cancel: &CancelToken,
) -> Result<CommandResult, CommandError> {
    let started = Instant::now();
    let mut cmd = match spec.language {
        Language::Shell => {
            let mut c = Command::new("sh");
            c.arg("-c").arg(&spec.script);
            c
        }
        Language::Python => {
            let mut c = Command::new("python3");
            c.arg("-c").arg(&spec.script);
            c
        }
    };
    cmd.current_dir(&spec.workdir)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn()?;
    let pid = child.id();
    let out = child.stdout.take().map(reader);
    let err = child.stderr.take().map(reader);
    let deadline = spec.timeout.map(|t| started + t);
    let mut termination = Termination::Exited;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if cancel.is_cancelled() {
            termination = Termination::Cancelled;
            kill_group(pid);
            break child.wait()?;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            termination = Termination::TimedOut;
            kill_group(pid);
            break child.wait()?;
        }
        cancel.sleep(Duration::from_millis(5));
    };
    if termination != Termination::Exited {
        kill_group(pid);
    }
    let stdout = out.and_then(|h| h.join().ok()).unwrap_or_default();
    let stderr = err.and_then(|h| h.join().ok()).unwrap_or_default();
    let so = String::from_utf8_lossy(&stdout).into_owned();
    let se = String::from_utf8_lossy(&stderr).into_owned();
    Ok(CommandResult {
        exit_code: status.code(),
        merged: format!("{so}{se}"),
        stdout_bytes: stdout.len() as u64,
        stderr_bytes: stderr.len() as u64,
        stdout: so,
        stderr: se,
        truncated: false,
        termination,
        duration: started.elapsed(),
    })
}
