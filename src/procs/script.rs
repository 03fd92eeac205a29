//! Starting a script as a process: `program -c script` (a shell or `python3`), or, for a shell
//! script that is one program with literal words on the host, that program without `sh`,
//! with the `PWD` sh would have exported. The command stage and the agent's shell tool both
//! start their processes here, through a builder the caller passes (the sandbox's
//! `Isolation::command`), so this module needs no sandbox.
//!
//! Owns: how a script becomes a process. Must not touch: what the script or its exit code
//! mean (stages and tools decide).

use super::wait::{Finished, Running};
use super::{EnvSnapshot, Piped};
use crate::base::cancel::CancelToken;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The shell scripts run with: an absolute path, as system(3) uses (no PATH search per
/// spawn, and no other `sh` earlier on the PATH).
pub const SH: &str = "/bin/sh";

/// Builds the command that runs `program` in a working directory: the sandbox's
/// `Isolation::command` (on the host, or wrapped in the run's container).
pub type CommandBuilder<'a> = &'a dyn Fn(&str, &Path) -> Command;

/// A script to start.
pub struct Script<'a> {
    /// The interpreter, run as `program -c script`.
    pub program: &'a str,
    pub script: &'a str,
    pub workdir: &'a Path,
    /// Added to the inherited environment.
    pub env: &'a [(String, String)],
    /// The inherited environment (`None`: this process's, read at the spawn).
    pub base_env: Option<&'a EnvSnapshot>,
    /// `program` is a POSIX shell: a simple script may start without it.
    pub shell: bool,
    /// Processes start on the host (not in a container).
    pub on_host: bool,
    /// After the script exits, how long processes it left behind may keep the output pipes
    /// open before the result comes back without their later output.
    pub pipe_grace: Duration,
    pub command: CommandBuilder<'a>,
    /// The sandbox's limits the process starts inside (`None`: none).
    pub confine: Option<&'a super::spawn::Confinement>,
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

/// What [`start_script`] did.
pub enum Started {
    /// The script runs; [`Running::wait`] for it.
    Running(Box<Running>),
    /// The run was cancelled before the script started: nothing ran.
    Cancelled(Finished),
}

/// Starts the script and returns at once, so the caller can record the start while the
/// process is starting up.
pub fn start_script(s: &Script, cancel: &CancelToken) -> Result<Started, CommandError> {
    // On the host the child's own `chdir` reports a missing directory, so it is looked at
    // only when the start fails (one `statx` less per command); bubblewrap would start and
    // then fail inside, so a container checks first.
    if !s.on_host && !s.workdir.is_dir() {
        return Err(workdir_error(s));
    }
    let started = Instant::now();
    if cancel.is_cancelled() {
        return Ok(Started::Cancelled(Finished::not_started(started)));
    }
    let (piped, direct) = match spawn(s) {
        Ok(p) => p,
        Err(_) if s.on_host && !s.workdir.is_dir() => return Err(workdir_error(s)),
        Err(e) => return Err(e),
    };
    let running = Running::start(piped, direct, started, s.pipe_grace, cancel)
        .map_err(CommandError::Capture)?;
    Ok(Started::Running(Box::new(running)))
}

impl Started {
    /// Waits for the script until it has ended (exit, `timeout` or cancel).
    pub fn wait(
        self,
        timeout: Option<Duration>,
        cancel: &CancelToken,
    ) -> Result<Finished, CommandError> {
        match self {
            Started::Running(running) => running.wait(timeout, cancel).map_err(CommandError::Wait),
            Started::Cancelled(finished) => Ok(finished),
        }
    }
}

/// Runs the script to completion, `timeout` or cancellation.
pub fn run_script(
    s: &Script,
    timeout: Option<Duration>,
    cancel: &CancelToken,
) -> Result<Finished, CommandError> {
    start_script(s, cancel)?.wait(timeout, cancel)
}

fn workdir_error(s: &Script) -> CommandError {
    CommandError::Workdir {
        path: s.workdir.display().to_string(),
    }
}

/// Starts the script (in bwrap for a container) through `spawn_piped`: its own
/// process group, PDEATHSIG tied to this (the caller's) thread, the group's record, and no
/// `fork()` of the whole server. Whether it was started directly comes with it.
fn spawn(s: &Script) -> Result<(Piped, bool), CommandError> {
    if let Some(piped) = spawn_direct(s) {
        return Ok((piped, true));
    }
    let mut cmd = (s.command)(s.program, s.workdir);
    cmd.arg("-c").arg(s.script);
    super::spawn_piped_confined(&cmd, s.env, s.base_env, s.confine)
        .map(|piped| (piped, false))
        .map_err(|source| CommandError::Spawn {
            program: s.program.to_string(),
            source,
        })
}

/// A shell script that is one program with literal words, started on the host without
/// `sh` ([`super::simple_words`]), with the `PWD` sh would have exported. `None` when the
/// script is not one, or the start failed in any way: the script then goes to `sh`, which
/// reports a missing or unrunnable program in its own words (and runs a file without a
/// `#!` line as a script), exactly as before.
fn spawn_direct(s: &Script) -> Option<Piped> {
    if !s.shell || !s.on_host {
        return None;
    }
    let words = super::simple_words(s.script)?;
    let inherited_pwd = match s.base_env {
        Some(base) => base.get(std::ffi::OsStr::new("PWD")).map(ToOwned::to_owned),
        None => std::env::var_os("PWD"),
    };
    let pwd = super::shell_pwd(inherited_pwd.as_deref(), s.workdir)?;
    let mut env = Vec::with_capacity(s.env.len() + 1);
    env.extend(s.env.iter().cloned());
    env.push(("PWD".to_string(), pwd.into_string().ok()?));
    let mut cmd = (s.command)(words[0], s.workdir);
    cmd.args(&words[1..]);
    super::spawn_piped_confined(&cmd, &env, s.base_env, s.confine).ok()
}
