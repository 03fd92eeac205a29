//! The real `svc` binary as a user runs it: [`svc`] for one command, and [`Sandbox`] for
//! `svc run` on `testdata/engine/*.dot` with `--format json`, a temporary working directory
//! and a temporary state directory.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `svc <args>` on the real binary, as a user types it (no state directory set up); its
/// output. Panics only when the binary cannot be started.
pub fn svc(args: &[&str]) -> Output {
    svc_with_env(args, &[])
}

/// Like [`svc`], with these variables added to its environment.
pub fn svc_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_svc"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run the svc binary")
}

pub fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/engine")
        .join(name)
}

pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

pub struct Finished {
    pub code: i32,
    pub json: Value,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Finished {
    pub fn status(&self) -> &str {
        self.json["status"].as_str().unwrap_or("")
    }
    pub fn path(&self) -> Vec<String> {
        self.json["path"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }
    pub fn error(&self) -> String {
        self.json["error"].as_str().unwrap_or("").to_string()
    }
    pub fn ctx(&self, key: &str) -> &Value {
        &self.json["context"][key]
    }
    pub fn run_id(&self) -> String {
        self.json["run_id"].as_str().unwrap_or("").to_string()
    }
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn work(&self) -> &Path {
        self.dir.path()
    }

    pub fn state(&self) -> PathBuf {
        self.dir.path().join(".state")
    }

    /// `svc <args>` with `--state-dir` (and for `run`, `--workdir`) pointing here.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_svc"));
        cmd.args(args)
            .arg("--state-dir")
            .arg(self.state())
            .current_dir(self.work())
            .stdin(Stdio::null());
        if args.first() == Some(&"run") {
            cmd.arg("--workdir").arg(self.work());
        }
        cmd
    }

    /// `svc run testdata/engine/<name> --format json <extra>`.
    pub fn run(&self, name: &str, extra: &[&str]) -> Finished {
        let file = testdata(name);
        let mut args = vec!["run", file.to_str().unwrap_or(""), "--format", "json"];
        args.extend_from_slice(extra);
        self.finish(self.command(&args))
    }

    pub fn finish(&self, mut cmd: Command) -> Finished {
        let started = Instant::now();
        let out: Output = cmd.output().expect("svc runs");
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let json = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
        Finished {
            code: out.status.code().unwrap_or(-1),
            json,
            stderr: String::from_utf8_lossy(&out.stderr).to_string(),
            elapsed: started.elapsed(),
        }
    }

    /// `svc export --stages <work>/<dir> RUN_ID`, asserted to succeed; returns the folder.
    pub fn export_stages(&self, dir: &str, run_id: &str) -> PathBuf {
        let logs = self.work().join(dir);
        let out = self
            .command(&["export", "--stages", logs.to_str().unwrap_or(""), run_id])
            .output()
            .expect("svc export");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        logs
    }

    /// Lines in a file of the working directory (0 when it does not exist).
    pub fn lines(&self, file: &str) -> usize {
        std::fs::read_to_string(self.work().join(file))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    pub fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.work().join(file)).unwrap_or_default()
    }
}

/// True while a process with this pid exists and is not a zombie waiting to be reaped.
pub fn alive(pid: i32) -> bool {
    let exists = Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|rest| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false);
    exists && !zombie
}

/// Waits up to two seconds for the process to be gone.
pub fn gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !alive(pid)
}
