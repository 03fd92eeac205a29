//! Running `git` as a process with a fixed identity and none of the user's configuration
//! (no global or system config, no hooks, no signing, no automatic gc), so a checkpoint
//! behaves the same on every machine and never prompts.
//!
//! Must not: read the user's git configuration or prompt.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A failed git command: what was run and what git said.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("git {args} failed: {detail}")]
pub struct GitError {
    pub args: String,
    pub detail: String,
}

/// A work tree and, when it is not `<work tree>/.git`, its separate git directory (an
/// `in_place` workspace keeps svc's history outside the user's directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Git {
    pub work_tree: PathBuf,
    pub git_dir: Option<PathBuf>,
}

const IDENTITY: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "svc"),
    ("GIT_AUTHOR_EMAIL", "svc@localhost"),
    ("GIT_COMMITTER_NAME", "svc"),
    ("GIT_COMMITTER_EMAIL", "svc@localhost"),
];

/// A git command with svc's environment, outside any repository.
pub fn bare_command() -> Command {
    let mut c = Command::new("git");
    c.envs(IDENTITY)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        // Tracing would print HTTP headers, and with them a credential given to a clone or
        // a push.
        .env_remove("GIT_TRACE")
        .env_remove("GIT_TRACE_CURL")
        .env_remove("GIT_TRACE_PACKET")
        .env_remove("GIT_TRACE2")
        .env_remove("GIT_TRACE2_EVENT")
        .env_remove("GIT_CURL_VERBOSE")
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "commit.gpgSign=false",
            "-c",
            "gc.auto=0",
            "-c",
            "core.autocrlf=false",
            "-c",
            "core.quotePath=false",
            // Large work trees: remember untracked folders' state between `add --all`s.
            "-c",
            "core.untrackedCache=true",
            // A 10,000-file index is a megabyte: not hashing it on every write saves a few
            // milliseconds per command that stages or writes a tree.
            "-c",
            "index.skipHash=true",
            // Staging names its paths: lstat-ing all 10,000 entries in threads first (the
            // preload) was half of `add`'s time.
            "-c",
            "core.preloadIndex=false",
            // New objects are renamed into place instead of linked and their temporary
            // name unlinked: 22 fewer deleted files per checkpoint. ext4 steps over recently
            // deleted inodes one by one when it creates a file, which made every later
            // checkpoint's object writes several times slower (write-tree 3 -> 10-12 ms
            // from the seventh stage on). Objects are named by their content, so
            // replacing one that exists changes nothing.
            "-c",
            "core.createObject=rename",
        ])
        .stdin(Stdio::null());
    c
}

/// Runs a prepared command, failing on a non-zero exit with git's stderr.
pub fn run(mut cmd: Command, what: &str) -> Result<Output, GitError> {
    let out = cmd.output().map_err(|e| GitError {
        args: what.to_string(),
        detail: format!("cannot run git: {e}"),
    })?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(GitError {
            args: what.to_string(),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

impl Git {
    pub fn new(work_tree: &Path) -> Git {
        Git {
            work_tree: work_tree.to_path_buf(),
            git_dir: None,
        }
    }

    /// `git <args>` in this repository (not checked).
    pub fn command<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Command {
        let mut c = bare_command();
        c.current_dir(&self.work_tree);
        if let Some(d) = &self.git_dir {
            c.arg("--git-dir")
                .arg(d)
                .arg("--work-tree")
                .arg(&self.work_tree);
        }
        c.args(args);
        c
    }

    /// Runs `git <args>` and returns stdout; a non-zero exit is an error.
    pub fn run(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        run(self.command(args), &args.join(" ")).map(|o| o.stdout)
    }

    /// Like [`Git::run`], as trimmed text.
    pub fn text(&self, args: &[&str]) -> Result<String, GitError> {
        self.run(args)
            .map(|o| String::from_utf8_lossy(&o).trim().to_string())
    }

    /// Runs `git <args>` feeding `input` on stdin.
    pub fn run_with_input<S: AsRef<std::ffi::OsStr>>(
        &self,
        args: &[S],
        input: &[u8],
    ) -> Result<Vec<u8>, GitError> {
        let err = |detail: String| GitError {
            args: args
                .iter()
                .map(|a| a.as_ref().to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
            detail,
        };
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| err(format!("cannot run git: {e}")))?;
        let mut stdin = child.stdin.take();
        let input = input.to_vec();
        // Writing from another thread: git answers while it reads, so one thread doing both
        // could fill the output pipe and stall.
        let writer = std::thread::spawn(move || {
            if let Some(s) = stdin.as_mut() {
                let _ = s.write_all(&input);
            }
        });
        let out = child
            .wait_with_output()
            .map_err(|e| err(format!("cannot read git's output: {e}")))?;
        let _ = writer.join();
        if !out.status.success() {
            return Err(err(String::from_utf8_lossy(&out.stderr).trim().to_string()));
        }
        Ok(out.stdout)
    }

    /// The commit `HEAD` names.
    pub fn head(&self) -> Result<String, GitError> {
        self.text(&["rev-parse", "HEAD"])
    }

    /// Whether `dir` is inside a git work tree.
    pub fn is_repository(dir: &Path) -> bool {
        let mut c = bare_command();
        c.current_dir(dir)
            .args(["rev-parse", "--is-inside-work-tree"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c.status().is_ok_and(|s| s.success())
    }
}
