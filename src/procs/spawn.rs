//! Starting a stage process without copying the server's memory: [`spawn_piped`] starts a
//! command built by `Isolation::command` (program, arguments, environment changes, working
//! directory) with everything [`super::isolate`] gives a child (its own process group,
//! `PR_SET_PDEATHSIG(SIGKILL)` tied to the calling thread, the group's record written by the
//! child before exec), stdin from `/dev/null` and stdout/stderr to new pipes.
//!
//! `std::process::Command` must `fork()` as soon as a `pre_exec` hook is set, and a fork
//! copies the page tables of the whole process: 0.2 ms for a 16 MB process, several ms for a
//! server holding 60 MB, on every command stage. Here the child is a `clone(CLONE_VM |
//! CLONE_VFORK)`: it runs on a stack of its own inside the parent's memory while the calling
//! thread waits, until it has exec'd (or failed, reporting its errno through that memory),
//! as glibc's `posix_spawn` does. Everything it needs is prepared before; it makes only raw
//! system calls on stack buffers and never returns into Rust code of the parent.
//!
//! Must not touch: what the process runs or means (stages decide), other children.

use crate::base::scratch::Scratch;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

/// Stack of the child until it execs: `child_record` uses about 5 KiB of it. Below malloc's
/// mmap threshold, so the allocation is reused from one spawn to the next.
const CHILD_STACK: usize = 64 * 1024;

/// A child started by [`spawn_piped`](super::spawn_piped): reap it with [`Proc::wait`] (or a successful
/// [`Proc::try_wait`]); until then its pid (and so its group id) cannot be reused.
#[derive(Debug)]
pub struct Proc {
    pid: libc::pid_t,
    status: Option<ExitStatus>,
}

/// A started process and the read ends of its stdout and stderr.
#[derive(Debug)]
pub struct Piped {
    pub proc: Proc,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

impl Proc {
    /// The process id, which is also its process group id.
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// The exit status if the process has ended (reaping it), without blocking.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.reap(libc::WNOHANG)
    }

    /// Blocks until the process ends and reaps it.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.reap(0)? {
                return Ok(status);
            }
        }
    }

    fn reap(&mut self, flags: libc::c_int) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        let mut raw: libc::c_int = 0;
        // SAFETY: waitpid on our own unreaped child, writing into a local int.
        let rc = unsafe { libc::waitpid(self.pid, &mut raw, flags) };
        match rc {
            0 => Ok(None),
            r if r == self.pid => {
                let status = ExitStatus::from_raw(raw);
                self.status = Some(status);
                Ok(Some(status))
            }
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    Ok(None)
                } else {
                    Err(e)
                }
            }
        }
    }
}

/// Resource limits a child puts on itself before it executes anything (made by
/// `sandbox::limits`): the groups it joins (their open `cgroup.procs` files, written `0`),
/// its rlimits, the CPUs it may run on.
#[derive(Debug, Default)]
pub struct Confinement {
    pub groups: Vec<std::fs::File>,
    pub rlimits: Vec<(libc::__rlimit_resource_t, libc::rlim_t)>,
    /// The first this many of the CPUs the parent may use.
    pub cpus: Option<usize>,
}

impl Confinement {
    /// Applies the confinement to the calling process: `Err(errno)` on failure.
    ///
    /// # Safety
    /// Only in a freshly forked or cloned child before exec: raw system calls on data the
    /// parent prepared and stack buffers, no allocation.
    pub unsafe fn enter(&self) -> Result<(), libc::c_int> {
        let errno = || unsafe { *libc::__errno_location() };
        // SAFETY: writes of a stack buffer to open descriptors; setrlimit and the affinity
        // calls on local values.
        unsafe {
            for f in &self.groups {
                let zero = b"0";
                if libc::write(f.as_raw_fd(), zero.as_ptr().cast(), zero.len()) < 0 {
                    return Err(errno());
                }
            }
            for (resource, value) in &self.rlimits {
                let lim = libc::rlimit {
                    rlim_cur: *value,
                    rlim_max: *value,
                };
                if libc::setrlimit(*resource, &lim) != 0 {
                    return Err(errno());
                }
            }
            if let Some(n) = self.cpus {
                let size = std::mem::size_of::<libc::cpu_set_t>();
                let mut current: libc::cpu_set_t = std::mem::zeroed();
                if libc::sched_getaffinity(0, size, &mut current) != 0 {
                    return Err(errno());
                }
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                let mut have = 0;
                for c in 0..libc::CPU_SETSIZE as usize {
                    if have == n {
                        break;
                    }
                    if libc::CPU_ISSET(c, &current) {
                        libc::CPU_SET(c, &mut set);
                        have += 1;
                    }
                }
                if have > 0 && libc::sched_setaffinity(0, size, &set) != 0 {
                    return Err(errno());
                }
            }
        }
        Ok(())
    }
}

/// What the child reads (prepared by the parent) and writes (its errno when it fails).
#[repr(C)]
struct ChildArgs {
    path: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: *const libc::c_char,
    /// The records directory and its length, or null.
    records: *const u8,
    records_len: usize,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    parent: libc::pid_t,
    /// Limits the child puts on itself, or null.
    confine: *const Confinement,
    errno: libc::c_int,
}

/// Starts `cmd` as described in the module documentation, with `extra` added to its
/// environment (cheaper than `Command::envs` for many variables); `records` is where the
/// child records its group (`None`: no record). The command's own stdio settings and
/// `pre_exec` hooks are not used: this function does their work itself.
pub fn spawn_piped(
    cmd: &Command,
    extra: &[(String, String)],
    base: Option<&EnvSnapshot>,
    records: Option<&Path>,
) -> io::Result<Piped> {
    spawn_confined(cmd, extra, base, records, None)
}

/// [`spawn_piped`] with the child confined (`sandbox::limits`) before it executes.
pub fn spawn_confined(
    cmd: &Command,
    extra: &[(String, String)],
    base: Option<&EnvSnapshot>,
    records: Option<&Path>,
    confine: Option<&Confinement>,
) -> io::Result<Piped> {
    let program = cmd.get_program();
    let captured;
    let base = match base {
        Some(b) => b,
        None => {
            // Never the server's whole environment (see `procs::env`).
            captured = EnvSnapshot::for_stages(&[], &[])?;
            &captured
        }
    };
    let path = resolve(program, cmd, base)?;
    let path = cstring(path.as_os_str())?;
    let mut argv_owned = vec![cstring(program)?];
    for a in cmd.get_args() {
        argv_owned.push(cstring(a)?);
    }
    let (env_owned, envp) = environment(cmd, extra, base)?;
    let cwd = cmd
        .get_current_dir()
        .map(|d| cstring(d.as_os_str()))
        .transpose()?;
    let records = records.map(|d| d.as_os_str().as_bytes().to_vec());
    let argv = null_terminated(&argv_owned);
    let stdin = above_stdio(std::fs::File::open("/dev/null")?.into())?;
    let (out_read, out_write) = pipe()?;
    let (err_read, err_write) = pipe()?;
    let (out_write, err_write) = (above_stdio(out_write)?, above_stdio(err_write)?);
    let mut args = ChildArgs {
        path: path.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: cwd.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
        records: records.as_ref().map_or(std::ptr::null(), |r| r.as_ptr()),
        records_len: records.as_ref().map_or(0, Vec::len),
        stdin: stdin.as_raw_fd(),
        stdout: out_write.as_raw_fd(),
        stderr: err_write.as_raw_fd(),
        // SAFETY: getpid never fails.
        parent: unsafe { libc::getpid() },
        confine: confine.map_or(std::ptr::null(), |c| c as *const Confinement),
        errno: 0,
    };
    let pid = clone_vfork(&mut args)?;
    // The child has exec'd (or failed): the strings `envp` points into may go.
    drop(env_owned);
    // The child has exec'd or exited: its errno (if any) is in `args`.
    // SAFETY: `args` is a live local; the volatile read sees what the child wrote.
    let errno = unsafe { std::ptr::read_volatile(&args.errno) };
    let mut proc = Proc { pid, status: None };
    if errno != 0 {
        let _ = proc.wait();
        return Err(io::Error::from_raw_os_error(errno));
    }
    Ok(Piped {
        proc,
        stdout: out_read,
        stderr: err_read,
    })
}

/// Runs [`child_main`] in a `CLONE_VM | CLONE_VFORK` child with every signal blocked
/// around the clone (a parent's handler must never run in the child, which shares its
/// memory); returns once the child has exec'd or exited.
fn clone_vfork(args: &mut ChildArgs) -> io::Result<libc::pid_t> {
    // Reused from this thread's earlier spawns: a fresh one page-faults on every command.
    let mut stack = Scratch::take(CHILD_STACK);
    // The stack grows down from its (16-byte aligned) top.
    let top = (stack.as_mut_ptr() as usize + CHILD_STACK) & !15;
    // SAFETY: sigset_t is plain data, filled by sigfillset; pthread_sigmask only changes
    // this thread's mask, restored below.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: the child runs `child_main` on `stack` (alive until clone returns, which
    // CLONE_VFORK delays until the child has exec'd or exited) with a pointer to `args`
    // (alive as long); it only reads what was prepared and writes `args.errno`.
    let pid = unsafe {
        libc::clone(
            child_main,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (args as *mut ChildArgs).cast(),
        )
    };
    let clone_error = io::Error::last_os_error();
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    drop(stack);
    if pid < 0 {
        return Err(clone_error);
    }
    Ok(pid)
}

/// The child, between clone and exec. Only raw system calls on prepared data and stack
/// buffers (async-signal-safe): no allocation, no lock, no panic.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `ChildArgs`, alive and not touched by the parent until
    // this child execs or exits (CLONE_VFORK).
    let a = unsafe { &mut *arg.cast::<ChildArgs>() };
    // SAFETY: every call below is a system call wrapper on valid pointers prepared by the
    // parent (NUL-terminated strings, null-terminated arrays) or on local buffers.
    unsafe {
        // Handlers the parent installed would run on its memory: default them before any
        // signal is let in. An ignored SIGPIPE (Rust ignores it) is reset as std does.
        for sig in 1..64 {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut action) != 0 {
                continue;
            }
            let handled =
                action.sa_sigaction != libc::SIG_DFL && action.sa_sigaction != libc::SIG_IGN;
            if handled || sig == libc::SIGPIPE {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &default, std::ptr::null_mut());
            }
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        if libc::setpgid(0, 0) != 0 {
            return fail(a);
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
            return fail(a);
        }
        // The parent may have died before the prctl: then nobody would kill us.
        if libc::getppid() != a.parent {
            a.errno = libc::ESRCH;
            libc::_exit(127);
        }
        if !a.records.is_null() {
            super::child_record(std::slice::from_raw_parts(a.records, a.records_len));
        }
        if !a.confine.is_null() {
            if let Err(errno) = (*a.confine).enter() {
                std::ptr::write_volatile(&mut a.errno, errno);
                libc::_exit(127);
            }
        }
        for (from, to) in [(a.stdin, 0), (a.stdout, 1), (a.stderr, 2)] {
            if libc::dup2(from, to) < 0 {
                return fail(a);
            }
        }
        if !a.cwd.is_null() && libc::chdir(a.cwd) != 0 {
            return fail(a);
        }
        libc::execve(a.path, a.argv, a.envp);
        fail(a)
    }
}

/// Reports the failed call's errno to the parent and exits.
///
/// # Safety
/// Only in the child of [`clone_vfork`].
unsafe fn fail(a: &mut ChildArgs) -> libc::c_int {
    // SAFETY: the calling thread's errno location; `a` is the parent's live ChildArgs.
    unsafe {
        let errno = *libc::__errno_location();
        std::ptr::write_volatile(&mut a.errno, if errno == 0 { libc::EIO } else { errno });
        libc::_exit(127)
    }
}

/// The program's path: as given when it holds a `/`, else the first executable match on the
/// `PATH` the child gets (the command's own, else the inherited snapshot's), as `execvp`
/// would find it.
fn resolve(program: &OsStr, cmd: &Command, base: &EnvSnapshot) -> io::Result<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    // The `PATH` the child gets: the command's own, else the inherited one.
    let path_var = cmd
        .get_envs()
        .find(|(k, _)| *k == OsStr::new("PATH"))
        .map(|(_, v)| v.map(OsString::from))
        .unwrap_or_else(|| base.get(OsStr::new("PATH")).map(OsString::from));
    // Relative entries are relative to the directory the child starts in.
    let base = cmd.get_current_dir().unwrap_or(Path::new("."));
    path_var
        .as_deref()
        .and_then(|dirs| find_in(dirs, program, base))
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))
}

/// The first executable file named `program` in the `PATH`-style list `dirs` (relative
/// entries, the empty one included, taken from `base`).
fn find_in(dirs: &OsStr, program: &OsStr, base: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(dirs)
        .map(|d| base.join(d))
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The process environment as `KEY=value` C strings, read once and then shared by many
/// spawns: reading it costs a lock and three allocations per variable, the largest part of
/// a spawn's own work. A run takes one at its first command (docs/decisions.md
/// "Variables": commands see the environment as it was then).
#[derive(Debug)]
pub struct EnvSnapshot {
    /// (length of the key, `KEY=value`).
    vars: Vec<(usize, CString)>,
}

impl EnvSnapshot {
    /// This process's environment now.
    pub fn capture() -> io::Result<EnvSnapshot> {
        let vars = std::env::vars_os()
            .map(|(k, v)| Ok((k.len(), pair(&k, &v)?)))
            .collect::<io::Result<_>>()?;
        Ok(EnvSnapshot { vars })
    }

    /// This process's environment now, without `keys` (credentials its processes must not
    /// see).
    pub fn capture_without(keys: &[&str]) -> io::Result<EnvSnapshot> {
        let mut env = EnvSnapshot::capture()?;
        env.vars
            .retain(|(n, kv)| !keys.iter().any(|k| k.as_bytes() == &kv.as_bytes()[..*n]));
        Ok(env)
    }

    pub(super) fn from_pairs(vars: Vec<(usize, CString)>) -> EnvSnapshot {
        EnvSnapshot { vars }
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &OsStr) -> Option<&OsStr> {
        self.vars.iter().find_map(|(n, kv)| {
            let bytes = kv.as_bytes();
            (&bytes[..*n] == key.as_bytes()).then(|| OsStr::from_bytes(&bytes[*n + 1..]))
        })
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&OsStr, &CString)> {
        self.vars
            .iter()
            .map(|(n, kv)| (OsStr::from_bytes(&kv.as_bytes()[..*n]), kv))
    }
}

/// `base` with the command's changes and then `extra` applied: the strings made for the
/// changes, and the null-terminated `envp` pointing into them and into `base`.
fn environment(
    cmd: &Command,
    extra: &[(String, String)],
    base: &EnvSnapshot,
) -> io::Result<(Vec<CString>, Vec<*const libc::c_char>)> {
    let mut changes: std::collections::BTreeMap<&OsStr, Option<&OsStr>> = cmd.get_envs().collect();
    for (k, v) in extra {
        changes.insert(OsStr::new(k), Some(OsStr::new(v)));
    }
    let mut owned = Vec::with_capacity(changes.len());
    for (k, v) in &changes {
        if let Some(v) = v {
            owned.push(pair(k, v)?);
        }
    }
    let mut envp = Vec::with_capacity(base.vars.len() + owned.len() + 1);
    for (k, kv) in base.iter() {
        if !changes.contains_key(k) {
            envp.push(kv.as_ptr());
        }
    }
    envp.extend(owned.iter().map(|kv| kv.as_ptr()));
    envp.push(std::ptr::null());
    Ok((owned, envp))
}

pub(super) fn pair(k: &OsStr, v: &OsStr) -> io::Result<CString> {
    let mut kv = Vec::with_capacity(k.len() + v.len() + 2);
    kv.extend_from_slice(k.as_bytes());
    kv.push(b'=');
    kv.extend_from_slice(v.as_bytes());
    CString::new(kv).map_err(|_| nul_error())
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| nul_error())
}

fn nul_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "a program, argument or environment variable holds a NUL byte",
    )
}

fn null_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two descriptors into the local array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: descriptors just returned to us; nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `fd` itself when it is above 2, else a close-on-exec copy that is: the child moves its
/// descriptors onto 0, 1 and 2 in turn, which must not overwrite one still to be moved.
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC makes a new descriptor >= 3 for one we own.
    let copy = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just returned to us.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn a_snapshot_without_keys_lacks_exactly_them() -> std::io::Result<()> {
        let all = EnvSnapshot::capture()?;
        let Some(path) = all.get(OsStr::new("PATH")) else {
            return Ok(()); // nothing to remove in an environment without PATH
        };
        assert!(!path.is_empty());
        let without = EnvSnapshot::capture_without(&["PATH", "SVC_NO_SUCH_VARIABLE"])?;
        assert_eq!(without.get(OsStr::new("PATH")), None);
        assert_eq!(without.vars.len(), all.vars.len() - 1);
        Ok(())
    }

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script);
        cmd
    }

    fn output(p: Piped) -> (ExitStatus, String, String) {
        let Piped {
            mut proc,
            stdout,
            stderr,
        } = p;
        let mut out = String::new();
        let mut err = String::new();
        std::fs::File::from(stdout)
            .read_to_string(&mut out)
            .unwrap();
        std::fs::File::from(stderr)
            .read_to_string(&mut err)
            .unwrap();
        (proc.wait().unwrap(), out, err)
    }

    #[test]
    fn a_snapshot_is_the_base_environment_under_the_commands_changes() {
        let kv = |k: &str, v: &str| (k.len(), CString::new(format!("{k}={v}")).unwrap());
        let base = EnvSnapshot {
            vars: ["SVC_A", "SVC_B", "SVC_C", "SVC_D"]
                .iter()
                .map(|k| kv(k, "base"))
                .collect(),
        };
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg("echo \"$SVC_A $SVC_B ${SVC_C-unset} $SVC_D ${HOME-none}\"")
            .env("SVC_B", "cmd")
            .env_remove("SVC_C");
        let extra = [("SVC_D".to_string(), "extra".to_string())];
        let (status, out, _) = output(spawn_piped(&cmd, &extra, Some(&base), None).unwrap());
        // Only the snapshot is inherited: this process's HOME is not in it.
        assert_eq!(out, "base cmd unset extra none\n");
        assert!(status.success());
    }

    #[test]
    fn runs_with_args_env_cwd_and_null_stdin() {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd =
            sh("echo \"$0 $SVC_T $SVC_U ${HOME:+home} $(pwd)\"; cat; echo err >&2; exit 3");
        cmd.arg("zero")
            .env("SVC_T", "t v")
            .env("SVC_U", "u")
            .current_dir(dir.path());
        let extra = [("SVC_U".to_string(), "extra".to_string())];
        let (status, out, err) = output(spawn_piped(&cmd, &extra, None, None).unwrap());
        let cwd = dir.path().canonicalize().unwrap();
        assert_eq!(out, format!("zero t v extra home {}\n", cwd.display()));
        assert_eq!((status.code(), err.as_str()), (Some(3), "err\n"));
    }

    #[test]
    fn leads_its_own_group_and_records_it_before_it_runs() {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        // The script sees its own record: it was written before exec.
        let mut cmd = sh("cat \"$0/$$\"; echo; exec sleep 30");
        cmd.arg(dir.path());
        let Piped {
            mut proc, stdout, ..
        } = spawn_piped(&cmd, &[], None, Some(dir.path())).unwrap();
        let pid = proc.id() as libc::pid_t;
        let mut first = String::new();
        std::io::BufReader::new(std::fs::File::from(stdout))
            .read_line(&mut first)
            .unwrap();
        let start = super::super::start_time(pid).unwrap();
        assert_eq!(first.trim(), start.to_string());
        assert_eq!(super::super::stat(pid).map(|s| s.pgrp), Some(pid));
        // SAFETY: test cleanup of our own group.
        unsafe { libc::killpg(pid, libc::SIGKILL) };
        assert_eq!(proc.wait().unwrap().signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn the_program_is_looked_up_like_execvp() {
        let base = Path::new("/");
        let found = find_in(
            OsStr::new("/nonexistent:/bin:/usr/bin"),
            OsStr::new("sh"),
            base,
        );
        assert!(found.is_some_and(|p| p.ends_with("sh")));
        assert_eq!(
            find_in(OsStr::new("/usr/bin"), OsStr::new("no-such-svc"), base),
            None
        );
        let mut cmd = sh("true");
        cmd.env("PATH", "/nonexistent");
        let e = spawn_piped(&cmd, &[], None, None).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn pdeathsig_kills_it_when_the_spawning_thread_ends() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let p = spawn_piped(&sh("sleep 30"), &[], None, None).unwrap();
            tx.send(p.proc.id() as libc::pid_t).unwrap();
            std::mem::forget(p);
        })
        .join()
        .unwrap();
        let pid = rx.recv().unwrap();
        let mut proc = Proc { pid, status: None };
        let status = proc.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn a_missing_program_is_an_error_and_leaves_no_child() {
        let e = spawn_piped(&Command::new("no-such-program-svc"), &[], None, None).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let e = spawn_piped(&Command::new("/nonexistent/prog"), &[], None, None).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = sh("true");
        cmd.current_dir(dir.path().join("gone"));
        assert!(spawn_piped(&cmd, &[], None, None).is_err());
    }
}
