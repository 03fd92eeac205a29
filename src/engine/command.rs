//! A command stage's script: its language, what it is started with ([`CommandSpec`]), and
//! what the stage reports about it ([`CommandResult`]: the summary line and the failure
//! message). Starting, capturing and killing the process are `procs`'s.
//!
//! Must not decide what an exit code means for the stage (statuses, classes and retries live
//! in `failure`), nor parse output (`output`), nor manage processes (`procs`).

use crate::base::cancel::CancelToken;
use crate::procs::{CommandError, Finished, Script, Started, Termination};
use std::path::Path;
use std::time::Duration;

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
            Language::Shell => crate::procs::SH,
            Language::Python => "python3",
        }
    }
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
    /// Some kept text (stdout, stderr or merged) lost its middle to [`crate::procs::OUTPUT_LIMIT`].
    pub truncated: bool,
    /// The signal that ended the process itself (the program, or the `sh` running the
    /// script), if one did.
    pub signal: Option<i32>,
    pub termination: Termination,
    pub duration: Duration,
    /// The sandbox limit that stopped the process, when one did (`out of memory (limit
    /// 64 MiB)`): [`crate::sandbox::Isolation::limit_hit`].
    pub limit: Option<String>,
}

impl CommandResult {
    pub fn succeeded(&self) -> bool {
        self.termination == Termination::Exited && self.exit_code == Some(0)
    }

    /// One line saying how the command ended (`command exited with code 3`, ...).
    pub fn summary(&self, timeout: Option<Duration>) -> String {
        let how = self.how_it_ended(timeout);
        match &self.limit {
            Some(limit) => format!("{limit}: {how}"),
            None => how,
        }
    }

    fn how_it_ended(&self, timeout: Option<Duration>) -> String {
        match (self.termination, self.exit_code) {
            (Termination::TimedOut, _) => match timeout {
                Some(t) => format!(
                    "command timed out after {}",
                    super::timing::describe_duration(t)
                ),
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

/// After the script exits, how long to wait for processes it left behind to close the
/// output pipes before returning without their output.
pub const PIPE_GRACE: Duration = Duration::from_secs(2);

impl<'a> CommandSpec<'a> {
    /// The script as `procs` starts it, its commands built by `command`.
    fn script(&'a self, command: crate::procs::CommandBuilder<'a>) -> Script<'a> {
        Script {
            program: self.language.program(),
            script: self.script,
            workdir: self.workdir,
            env: &self.env,
            base_env: self.base_env,
            shell: self.language == Language::Shell,
            on_host: self.isolation.on_host(),
            pipe_grace: self.pipe_grace,
            command,
            confine: self
                .isolation
                .limits()
                .map(crate::sandbox::limits::Limits::confinement),
        }
    }
}

impl From<Finished> for CommandResult {
    fn from(f: Finished) -> CommandResult {
        CommandResult {
            exit_code: f.exit_code,
            truncated: f.stdout.truncated || f.stderr.truncated || f.merged.truncated,
            stdout: f.stdout.text,
            stderr: f.stderr.text,
            merged: f.merged.text,
            stdout_bytes: f.stdout.total,
            stderr_bytes: f.stderr.total,
            signal: f.signal,
            termination: f.termination,
            duration: f.duration,
            limit: None,
        }
    }
}

/// Runs the script to completion, timeout or cancellation.
pub fn run_command(
    spec: &CommandSpec,
    cancel: &CancelToken,
) -> Result<CommandResult, CommandError> {
    let mut r = start_command(spec, cancel)?
        .wait(spec.timeout, cancel)
        .map(CommandResult::from)?;
    r.note_limit(spec.isolation);
    Ok(r)
}

impl CommandResult {
    /// Records which sandbox limit stopped a failed process, if one did.
    pub fn note_limit(&mut self, isolation: &crate::sandbox::Isolation) {
        if !self.succeeded() {
            self.limit = isolation.limit_hit(self.signal, self.exit_code);
        }
    }
}

/// Starts the script (`procs::start_script`, in the run's isolation) and returns at once, so
/// the caller can record the start while the process is starting up.
pub fn start_command(spec: &CommandSpec, cancel: &CancelToken) -> Result<Started, CommandError> {
    let command = |program: &str, dir: &Path| spec.isolation.command(program, dir);
    crate::procs::start_script(&spec.script(&command), cancel)
}

#[cfg(test)]
mod tests;
