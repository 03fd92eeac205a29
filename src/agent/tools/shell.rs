//! The `shell` tool: `sh -c <command>` in the sandbox directory, in its own process group,
//! with a timeout (default 10 s, max 600 s) and cancellation that kill the whole group. The
//! process is started and waited for as a command stage's script is (`procs::run_script`).
//! Provider credential variables are removed from the child's environment. Must not touch
//! files itself.

use std::time::Duration;

use crate::base::cancel::CancelToken;
use crate::procs::{self, EnvSnapshot, Script};
use crate::sandbox::Sandbox;

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Termination {
    Exited(i32),
    /// Killed by a signal (its number).
    Signaled(i32),
    TimedOut,
    Cancelled,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellOutput {
    pub termination: Termination,
    pub stdout: String,
    pub stderr: String,
    pub duration: Duration,
}

impl ShellOutput {
    pub fn is_error(&self) -> bool {
        self.termination != Termination::Exited(0)
    }

    /// The text the model sees (before truncation).
    pub fn render(&self, timeout: Duration) -> String {
        let mut s = match &self.termination {
            Termination::Exited(c) => format!("exit code: {c}\n"),
            Termination::Signaled(sig) => format!("killed by signal {sig}\n"),
            Termination::TimedOut => format!(
                "the command timed out after {} ms and was killed (pass timeout_ms to allow longer)\n",
                timeout.as_millis()
            ),
            Termination::Cancelled => "the command was cancelled\n".to_string(),
        };
        if !self.stdout.is_empty() {
            s.push_str("stdout:\n");
            s.push_str(&self.stdout);
            if !self.stdout.ends_with('\n') {
                s.push('\n');
            }
        }
        if !self.stderr.is_empty() {
            s.push_str("stderr:\n");
            s.push_str(&self.stderr);
            if !self.stderr.ends_with('\n') {
                s.push('\n');
            }
        }
        if self.stdout.is_empty() && self.stderr.is_empty() {
            s.push_str("(no output)\n");
        }
        s
    }
}

/// After the command exits, how long a background job it started may keep the output pipes
/// open before the tool answers without that job's later output (the job keeps running).
const PIPE_GRACE: Duration = Duration::from_millis(250);

/// Runs a command. Returns `Err` only when it cannot be started.
pub fn run(
    sb: &Sandbox,
    command: &str,
    timeout: Duration,
    cancel: &CancelToken,
) -> Result<ShellOutput, String> {
    run_with_env(sb, command, &[], timeout, cancel)
}

/// [`run`] with extra environment variables (tool hooks). The command runs as a command
/// stage's script does (`procs::run_script`): started without a fork of the server, waited
/// for on its pipes, its exit and the cancel token at once, its whole group killed on
/// timeout or cancel.
pub fn run_with_env(
    sb: &Sandbox,
    command: &str,
    env: &[(&str, &str)],
    timeout: Duration,
    cancel: &CancelToken,
) -> Result<ShellOutput, String> {
    // The run's clean environment (`procs::env`): never the server's own variables.
    let clean;
    let base = match sb.env() {
        Some(env) => env,
        None => {
            clean = EnvSnapshot::for_stages(&[], &[])
                .map_err(|e| format!("cannot read the environment: {e}"))?;
            &clean
        }
    };
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    let build = |program: &str, dir: &std::path::Path| sb.isolation().command(program, dir);
    let script = Script {
        program: procs::SH,
        script: command,
        workdir: sb.root(),
        env: &env,
        base_env: Some(base),
        shell: true,
        on_host: sb.isolation().on_host(),
        pipe_grace: PIPE_GRACE,
        command: &build,
        confine: sb
            .isolation()
            .limits()
            .map(crate::sandbox::limits::Limits::confinement),
    };
    let result = procs::run_script(&script, Some(timeout), cancel)
        .map_err(|e| format!("cannot start sh: {e}"))?;
    let termination = match (result.termination, result.exit_code, result.signal) {
        (procs::Termination::TimedOut, ..) => Termination::TimedOut,
        (procs::Termination::Cancelled, ..) => Termination::Cancelled,
        (procs::Termination::Exited, Some(code), _) => Termination::Exited(code),
        (procs::Termination::Exited, None, Some(signal)) => Termination::Signaled(signal),
        (procs::Termination::Exited, None, None) => Termination::Exited(-1),
    };
    Ok(ShellOutput {
        termination,
        stdout: result.stdout.text,
        stderr: result.stderr.text,
        duration: result.duration,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A sandbox on a new temporary directory (kept while the first value lives) and a
    /// cancel token nobody cancels.
    fn fresh_sandbox(
    ) -> Result<(tempfile::TempDir, Sandbox, CancelToken), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let sb = Sandbox::new(dir.path())?;
        Ok((dir, sb, CancelToken::new()))
    }

    #[test]
    fn runs_in_root_with_exit_codes_and_timeout() -> Result<(), Box<dyn std::error::Error>> {
        let (_dir, sb, c) = fresh_sandbox()?;
        let o = run(&sb, "pwd; echo err >&2; exit 3", Duration::from_secs(5), &c)?;
        assert_eq!(o.termination, Termination::Exited(3));
        assert_eq!(o.stdout.trim(), sb.root().display().to_string());
        assert_eq!(o.stderr.trim(), "err");
        let start = Instant::now();
        let o = run(&sb, "sleep 5 & sleep 5", Duration::from_millis(200), &c)?;
        assert_eq!(o.termination, Termination::TimedOut);
        assert!(start.elapsed() < Duration::from_secs(3));
        Ok(())
    }

    #[test]
    #[cfg_attr(
        not(has_bwrap),
        ignore = "needs bubblewrap able to create namespaces: apt-get install bubblewrap"
    )]
    fn in_a_container_only_the_workspace_is_writable() -> Result<(), Box<dyn std::error::Error>> {
        use crate::sandbox::{isolation, ProviderKind, SandboxPlan};
        use crate::test_tools::{require, Tool};
        require(Tool::Bwrap);
        // Outside /tmp, which the container replaces with its own (a clone checked out under
        // /tmp would put `target/` there too): /var/tmp where it exists.
        let var_tmp = std::path::Path::new("/var/tmp");
        let base = if var_tmp.is_dir() {
            var_tmp.to_path_buf()
        } else {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target")
        };
        std::fs::create_dir_all(&base)?;
        let outer = tempfile::tempdir_in(&base)?;
        let ws = outer.path().join("ws");
        std::fs::create_dir_all(&ws)?;
        let plan = SandboxPlan {
            provider: ProviderKind::Container,
            image: None,
            snapshot: None,
            network: false,
            bwrap: "bwrap".into(),
            resources: Default::default(),
        };
        let started = isolation::start(&plan, &ws.canonicalize()?)?;
        let sb = Sandbox::new(&ws)?.with_isolation(started.isolation);
        let c = CancelToken::new();
        let script = format!(
            "echo in > inside.txt && touch {}/escaped; echo done",
            outer.path().display()
        );
        let o = run(&sb, &script, Duration::from_secs(20), &c)?;
        assert!(o.stderr.contains("Read-only file system"), "{o:?}");
        assert!(ws.join("inside.txt").exists());
        assert!(!outer.path().join("escaped").exists());
        let o = run(&sb, "sleep 30", Duration::from_millis(300), &c)?;
        assert_eq!(o.termination, Termination::TimedOut);
        Ok(())
    }

    #[test]
    fn a_signal_that_kills_sh_is_reported_and_extra_variables_arrive(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let (_dir, sb, c) = fresh_sandbox()?;
        let o = run(&sb, "echo before; kill -9 $$", Duration::from_secs(5), &c)?;
        assert_eq!(o.termination, Termination::Signaled(9), "{o:?}");
        assert_eq!(o.stdout, "before\n");
        assert!(o
            .render(Duration::from_secs(5))
            .starts_with("killed by signal 9\n"));
        let o = run_with_env(
            &sb,
            "echo \"$HOOK_TOOL\"",
            &[("HOOK_TOOL", "shell")],
            Duration::from_secs(5),
            &c,
        )?;
        assert_eq!(
            (o.termination, o.stdout.as_str()),
            (Termination::Exited(0), "shell\n")
        );
        Ok(())
    }

    #[test]
    fn a_background_job_holding_the_output_does_not_hold_the_answer(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let (_dir, sb, c) = fresh_sandbox()?;
        let start = Instant::now();
        let o = run(&sb, "sleep 30 & echo $!", Duration::from_secs(60), &c)?;
        let answered = start.elapsed();
        assert_eq!(o.termination, Termination::Exited(0));
        let job: i32 = o.stdout.trim().parse()?;
        // The job is left running, as a command stage's are after a normal exit.
        // SAFETY: plain syscalls on the pid the command printed.
        let alive = unsafe { libc::kill(job, 0) } == 0;
        unsafe { libc::kill(job, libc::SIGKILL) };
        assert!(alive, "the background job was killed");
        assert!(answered < Duration::from_secs(20), "{answered:?}");
        Ok(())
    }

    #[test]
    fn cancel_kills_the_group() -> Result<(), Box<dyn std::error::Error>> {
        let (_dir, sb, c) = fresh_sandbox()?;
        let c2 = c.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            c2.cancel("stop");
        });
        let start = Instant::now();
        let o = run(&sb, "sleep 30", Duration::from_secs(60), &c)?;
        assert_eq!(o.termination, Termination::Cancelled);
        assert!(start.elapsed() < Duration::from_secs(3));
        Ok(())
    }
}
