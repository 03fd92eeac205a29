//! The `shell` tool: `sh -c <command>` in the sandbox directory, in its own process group,
//! with a timeout (default 10 s, max 600 s) and cancellation that kill the whole group.
//! Provider credential variables are removed from the child's environment. Must not touch
//! files itself.

use std::io::Read;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::base::cancel::CancelToken;
use crate::llm::Provider;
use crate::sandbox::Sandbox;

/// Bytes of each stream kept in memory (the rest is counted and dropped).
const MAX_CAPTURE: usize = 8 * 1024 * 1024;

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

type Buf = Arc<Mutex<(Vec<u8>, usize)>>;

fn reader(mut r: impl Read + Send + 'static, buf: Buf) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match r.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let mut b = buf.lock();
                    let room = MAX_CAPTURE.saturating_sub(b.0.len());
                    let take = n.min(room);
                    b.0.extend_from_slice(&chunk[..take]);
                    b.1 += n - take;
                }
            }
        }
    })
}

fn take(buf: &Buf) -> String {
    let b = buf.lock();
    let mut s = String::from_utf8_lossy(&b.0).to_string();
    if b.1 > 0 {
        s.push_str(&format!("\n[... {} more bytes not captured ...]", b.1));
    }
    s
}

fn kill_group(pid: i32, sig: i32) {
    // SAFETY: plain syscall; a negative pid addresses the process group we created.
    unsafe {
        libc::kill(-pid, sig);
    }
}

/// Runs a command. Returns `Err` only when it cannot be started.
pub fn run(
    sb: &Sandbox,
    command: &str,
    timeout: Duration,
    cancel: &CancelToken,
) -> Result<ShellOutput, String> {
    run_with_env(sb, command, &[], timeout, cancel)
}

/// [`run`] with extra environment variables (tool hooks).
pub fn run_with_env(
    sb: &Sandbox,
    command: &str,
    env: &[(&str, &str)],
    timeout: Duration,
    cancel: &CancelToken,
) -> Result<ShellOutput, String> {
    let start = Instant::now();
    // Through the sandbox: its own process group, inside the run's container if it has one.
    let mut cmd = sb.command("sh");
    cmd.arg("-c")
        .arg(command)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for p in Provider::ALL {
        for k in p.key_names() {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd.spawn().map_err(|e| format!("cannot start sh: {e}"))?;
    let _tracked = crate::procs::track(&child);
    let pid = child.id() as i32;
    let out_buf: Buf = Arc::new(Mutex::new((Vec::new(), 0)));
    let err_buf: Buf = Arc::new(Mutex::new((Vec::new(), 0)));
    let mut readers = Vec::new();
    if let Some(o) = child.stdout.take() {
        readers.push(reader(o, out_buf.clone()));
    }
    if let Some(e) = child.stderr.take() {
        readers.push(reader(e, err_buf.clone()));
    }
    let deadline = start + timeout;
    let mut poll = Duration::from_millis(1);
    let termination = loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                use std::os::unix::process::ExitStatusExt;
                break match (status.code(), status.signal()) {
                    (Some(c), _) => Termination::Exited(c),
                    (None, Some(s)) => Termination::Signaled(s),
                    (None, None) => Termination::Exited(-1),
                };
            }
            Ok(None) => {}
            Err(e) => return Err(format!("cannot wait for the command: {e}")),
        }
        let now = Instant::now();
        let stop = if cancel.is_cancelled() {
            Some(Termination::Cancelled)
        } else if now >= deadline {
            Some(Termination::TimedOut)
        } else {
            None
        };
        if let Some(t) = stop {
            kill_group(pid, libc::SIGTERM);
            let grace = Instant::now() + Duration::from_secs(2);
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if Instant::now() >= grace {
                    kill_group(pid, libc::SIGKILL);
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            // Anything left in the group goes too.
            kill_group(pid, libc::SIGKILL);
            break t;
        }
        // Wake early for a cancel: the token's sleep returns as soon as it is cancelled.
        let wait = poll.min(deadline.saturating_duration_since(now));
        cancel.sleep(wait);
        poll = (poll * 2).min(Duration::from_millis(20));
    };
    // Wait briefly for the pipes to drain; a background job that keeps them open is left
    // running and its later output is dropped.
    let drain_until = Instant::now() + Duration::from_millis(250);
    for r in readers {
        while !r.is_finished() && Instant::now() < drain_until {
            std::thread::sleep(Duration::from_millis(1));
        }
        if r.is_finished() {
            let _ = r.join();
        }
    }
    Ok(ShellOutput {
        termination,
        stdout: take(&out_buf),
        stderr: take(&err_buf),
        duration: start.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_in_root_with_exit_codes_and_timeout() -> Result<(), Box<dyn std::error::Error>> {
        let t = tempfile::tempdir()?;
        let sb = Sandbox::new(t.path())?;
        let c = CancelToken::new();
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
    fn in_a_container_only_the_workspace_is_writable() -> Result<(), Box<dyn std::error::Error>> {
        use crate::sandbox::{isolation, ProviderKind, SandboxPlan};
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
        };
        let started = match isolation::start(&plan, &ws.canonicalize()?) {
            Ok(s) => s,
            Err(e) => {
                assert!(
                    std::env::var("SVC_REQUIRE_BWRAP").as_deref() != Ok("1"),
                    "SVC_REQUIRE_BWRAP=1 but bubblewrap cannot run: {e:?}"
                );
                eprintln!("note: bubblewrap is not usable here; skipping ({e})");
                return Ok(());
            }
        };
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
    fn cancel_kills_the_group() -> Result<(), Box<dyn std::error::Error>> {
        let t = tempfile::tempdir()?;
        let sb = Sandbox::new(t.path())?;
        let c = CancelToken::new();
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
