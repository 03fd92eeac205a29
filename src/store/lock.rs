//! One server per state directory: an OS file lock on `<state-dir>/svc.lock`, held for the
//! life of the process that takes it.
//!
//! `svc server start` takes it exclusively before anything else (before settings are
//! written, the dev token made, the store activated, stage processes swept or runs
//! recovered), so a second server fails at once and changes nothing. The commands that
//! write the store without a server (`svc run`, `svc resume`, `svc import`) take it shared:
//! several of them may work side by side, none beside a server (whose scheduler, caches and
//! startup sweep assume they are the store's only writer). The kernel drops the lock when
//! its process dies, `kill -9` included, so a stale lock file never blocks a start.
//!
//! The exclusive holder writes who it is (pid, command, address) into the file; a refused
//! process names the holder from it, or from `/proc/locks` when the holders are shared.
//!
//! Must not touch: the database (this is a lock beside it), or decide what a holder does.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The lock file's name in the state directory.
pub const LOCK_FILE: &str = "svc.lock";

/// Who takes the lock: shown to a refused process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `svc server start` (exclusive).
    Server,
    /// A command writing the store without a server: `svc run`, `resume`, `import` (shared).
    Command(&'static str),
}

/// A held lock on a state directory. Dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct StateLock {
    file: File,
    exclusive: bool,
}

/// Why a lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the state directory.
    #[error("the state directory {dir} is in use by {holder}; {advice}")]
    Held {
        dir: PathBuf,
        holder: String,
        advice: &'static str,
    },
    #[error("cannot lock the state directory {dir}: {source}")]
    Io {
        dir: PathBuf,
        source: std::io::Error,
    },
}

impl StateLock {
    /// Takes `dir`'s lock for `role` without waiting: exclusive for a server, shared for a
    /// command. `dir` must exist.
    pub fn take(dir: &Path, role: Role) -> Result<StateLock, LockError> {
        let io = |source| LockError::Io {
            dir: dir.to_path_buf(),
            source,
        };
        let path = dir.join(LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(io)?;
        let exclusive = role == Role::Server;
        let op = if exclusive {
            libc::LOCK_EX
        } else {
            libc::LOCK_SH
        };
        // SAFETY: flock on a descriptor this function owns; no memory is passed.
        if unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(io(err));
            }
            return Err(LockError::Held {
                dir: dir.to_path_buf(),
                holder: describe_holder(&file),
                advice: match role {
                    Role::Server => "stop it first, or start this server with another --state-dir",
                    Role::Command(_) => {
                        "start runs through the server's API (`POST /api/v1/runs`), stop it first, or use another --state-dir"
                    }
                },
            });
        }
        let mut lock = StateLock { file, exclusive };
        if exclusive {
            lock.record(role, None).map_err(io)?;
        }
        Ok(lock)
    }

    /// Adds the address the holder listens on to its record (exclusive holders only).
    pub fn set_address(&mut self, address: &str) {
        if self.exclusive {
            if let Err(e) = self.record(Role::Server, Some(address)) {
                log::warn!("cannot record the server's address in {LOCK_FILE}: {e}");
            }
        }
    }

    fn record(&mut self, role: Role, address: Option<&str>) -> std::io::Result<()> {
        let command = match role {
            Role::Server => "svc server start",
            Role::Command(c) => c,
        };
        let mut text = format!("pid={}\ncommand={command}\n", std::process::id());
        if let Some(a) = address {
            text.push_str(&format!("address={a}\n"));
        }
        self.file.set_len(0)?;
        self.file.rewind()?;
        self.file.write_all(text.as_bytes())?;
        self.file.sync_data()
    }
}

/// "svc server start (pid 12, listening on http://127.0.0.1:8080)": from the exclusive
/// holder's record when its pid holds the lock now, else from `/proc/locks`.
fn describe_holder(file: &File) -> String {
    let holders = file
        .metadata()
        .map(|m| lock_holders(m.ino()))
        .unwrap_or_default();
    let mut text = String::new();
    let _ = (&*file).rewind();
    let _ = (&*file).read_to_string(&mut text);
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
            .map(str::to_string)
    };
    let pid: Option<u32> = field("pid").and_then(|p| p.parse().ok());
    // The record is the exclusive holder's: trusted while that pid holds a WRITE lock.
    let writer = |p: &u32| holders.is_empty() || holders.contains(&(*p, true));
    if let Some(pid) = pid.filter(writer) {
        let command = field("command").unwrap_or_else(|| "svc".into());
        return match field("address") {
            Some(a) => format!("{command} (pid {pid}, listening on {a})"),
            None => format!("{command} (pid {pid}, not listening yet)"),
        };
    }
    if holders.is_empty() {
        return "another svc process".into();
    }
    let described: Vec<String> = holders
        .iter()
        .map(|(pid, _)| format!("{} (pid {pid})", command_line(*pid)))
        .collect();
    described.join(", ")
}

/// The pids holding a flock on the inode `ino`, each with whether it is exclusive
/// (`/proc/locks`; blocked waiters left out).
fn lock_holders(ino: u64) -> Vec<(u32, bool)> {
    let text = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    parse_lock_holders(&text, ino)
}

fn parse_lock_holders(text: &str, ino: u64) -> Vec<(u32, bool)> {
    let mut pids = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF"; waiters have "->" second.
        if fields.len() < 6 || fields[1] != "FLOCK" {
            continue;
        }
        let Ok(pid) = fields[4].parse::<u32>() else {
            continue;
        };
        let on_ino = fields[5]
            .rsplit(':')
            .next()
            .and_then(|i| i.parse::<u64>().ok())
            == Some(ino);
        let held = (pid, fields[3] == "WRITE");
        if on_ino && !pids.contains(&held) {
            pids.push(held);
        }
    }
    pids
}

/// A process's command line as words ("svc run flow.dot"), or "pid N" when gone.
fn command_line(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let words: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .take(3)
        .map(|w| {
            let w = String::from_utf8_lossy(w);
            // The program's file name, not its path.
            w.rsplit('/').next().unwrap_or(&w).to_string()
        })
        .collect();
    if words.is_empty() {
        "a process".into()
    } else {
        words.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_excludes_everyone_and_commands_share() {
        let dir = tempfile::tempdir().unwrap();
        let mut server = StateLock::take(dir.path(), Role::Server).unwrap();
        server.set_address("http://127.0.0.1:9");
        let e = StateLock::take(dir.path(), Role::Server).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(&format!("pid {}", std::process::id()))
                && text.contains("listening on http://127.0.0.1:9"),
            "{text}"
        );
        let e = StateLock::take(dir.path(), Role::Command("svc run")).unwrap_err();
        assert!(e.to_string().contains("POST /api/v1/runs"), "{e}");
        drop(server);
        let a = StateLock::take(dir.path(), Role::Command("svc run")).unwrap();
        let _b = StateLock::take(dir.path(), Role::Command("svc run")).unwrap();
        let e = StateLock::take(dir.path(), Role::Server).unwrap_err();
        // The record left by the server that stopped is not taken for the holder.
        assert!(!e.to_string().contains("listening on"), "{e}");
        drop((a, _b));
        StateLock::take(dir.path(), Role::Server).unwrap();
    }

    #[test]
    fn proc_locks_lines_name_the_holders_of_one_inode() {
        let text = "1: FLOCK  ADVISORY  WRITE 4242 fd:01:77 0 EOF\n\
                    1: -> FLOCK  ADVISORY  WRITE 5000 fd:01:77 0 EOF\n\
                    2: FLOCK  ADVISORY  READ 17 00:2a:77 0 EOF\n\
                    3: POSIX  ADVISORY  WRITE 9 fd:01:77 0 EOF\n\
                    4: FLOCK  ADVISORY  READ 18 fd:01:78 0 EOF\n";
        assert_eq!(
            parse_lock_holders(text, 77),
            vec![(4242, true), (17, false)]
        );
    }
}
