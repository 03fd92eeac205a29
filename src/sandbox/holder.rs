//! A run's container of processes: one long-lived bubblewrap per run (its "holder") whose
//! pid namespace every process of the run enters, so that ending the holder ends them all.
//!
//! The holder is `bwrap --unshare-pid --die-with-parent ... -- sh -c 'echo; exec sleep'`:
//! bubblewrap's init is pid 1 of a new pid namespace (it reaps the run's orphans), and the
//! kernel SIGKILLs every process of a pid namespace when its pid 1 dies. Each process of the
//! run is started by `nsenter` into the holder's namespaces (pid, mount, and for a container
//! the rest: network, ipc, uts, user), from the workspace, so a background job started by
//! one stage (a dev server) lives on into the next stages and is previewable there, and is
//! gone as soon as the holder is:
//! - at the run's end, whatever the ending (completed, failed, cancelled, deleted while
//!   running): [`Holder::end`], called by the run's executor, also by `Drop`;
//! - when the server dies, `kill -9` included: the holder's outer bubblewrap has
//!   `PR_SET_PDEATHSIG(SIGKILL)` tied to the thread that started it (the run's own thread,
//!   `procs::isolate`), and its pid 1 has `--die-with-parent`.
//!
//! For `local` the holder shows the host's whole file system writable (`--dev-bind / /`)
//! with a `/proc` of the run's pid namespace; only the pid namespace is new. For `container`
//! it is the container itself (the bubblewrap arguments of `isolation::bwrap_args`).
//!
//! Owns: starting the holder, waiting until its namespaces are complete, the `nsenter` line
//! that enters them, ending it. Must not touch: what runs inside, runs or the store.

use super::StartError;
use std::ffi::OsString;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a holder may take to be ready before its sandbox fails.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`Holder::end`] waits for the namespace's pid 1 to be gone.
const END_WAIT: Duration = Duration::from_secs(2);

/// A run's holder: its pid namespace lives until [`Holder::end`] or the holder's drop.
pub struct Holder {
    /// The outer bubblewrap (our child, leading its own process group); `None` once ended.
    child: Mutex<Option<Child>>,
    /// Pid 1 of the run's namespace, as the host sees it: what `nsenter` targets.
    init: libc::pid_t,
    /// The `nsenter` options of the namespaces the holder has and this process has not.
    enter: Vec<&'static str>,
    /// Kept open so the holder's late errors never meet a closed pipe.
    _stderr: Option<ChildStderr>,
    /// The holder's record for the startup sweep (`procs`), kept while it lives.
    _tracked: crate::procs::Tracked,
}

impl std::fmt::Debug for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Holder").field("init", &self.init).finish()
    }
}

impl PartialEq for Holder {
    fn eq(&self, other: &Holder) -> bool {
        self.init == other.init
    }
}

impl Eq for Holder {}

/// The bubblewrap arguments of a `local` run's holder: the host's file system as it is
/// (writable where the user may write), a `/proc` of the run's pid namespace, `workdir` as
/// the holder's working directory.
pub fn local_args(workdir: &Path) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::with_capacity(12);
    for s in [
        "--unshare-pid",
        "--die-with-parent",
        "--dev-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--chdir",
    ] {
        a.push(s.into());
    }
    a.push(workdir.into());
    a.push("--".into());
    a
}

impl Holder {
    /// Starts `bwrap` with `args` (everything before the program, ending in `--`) and waits
    /// until the namespace is complete: its command has started (so every mount is made).
    /// Call from the thread that lives as long as the run: the holder dies with it.
    pub fn start(bwrap: &Path, args: &[OsString]) -> Result<Holder, StartError> {
        let shown = bwrap.display().to_string();
        let (info_read, info_write) = pipe().map_err(|e| {
            StartError::new("cannot start the run's process holder", vec![e.to_string()])
        })?;
        let info_fd = info_write.as_raw_fd();
        let mut cmd = Command::new(bwrap);
        // `--info-fd` must come before the other options' `--`.
        cmd.arg("--info-fd").arg(info_fd.to_string());
        cmd.args(args)
            .args(["sh", "-c", "echo ready; exec sleep infinity"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        crate::procs::isolate(&mut cmd);
        // SAFETY: fcntl on a descriptor this process owns, in the child before exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                let flags = libc::fcntl(info_fd, libc::F_GETFD);
                if flags < 0 || libc::fcntl(info_fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| {
            StartError::new(
                format!("cannot start bubblewrap (`{shown}`)"),
                vec![
                    e.to_string(),
                    "install the `bubblewrap` package or set run.sandbox.bwrap".into(),
                ],
            )
        })?;
        drop(info_write);
        let tracked = crate::procs::track(&child);
        let stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let ready = stdout
            .as_ref()
            .map(|out| read_until(out.as_raw_fd(), |b| b.contains(&b'\n')))
            .unwrap_or_default();
        let info = read_until(info_read.as_raw_fd(), |b| {
            serde_json::from_slice::<serde_json::Value>(b).is_ok()
        });
        let init = serde_json::from_slice::<serde_json::Value>(&info)
            .ok()
            .and_then(|v| v.get("child-pid")?.as_i64())
            .and_then(|p| libc::pid_t::try_from(p).ok());
        match init {
            Some(init) if ready.starts_with(b"ready") => Ok(Holder {
                child: Mutex::new(Some(child)),
                init,
                enter: namespaces_of(init),
                _stderr: stderr,
                _tracked: tracked,
            }),
            _ => {
                kill_and_reap(&mut child);
                let mut text = String::new();
                if let Some(e) = stderr.as_mut() {
                    let _ = e.read_to_string(&mut text);
                }
                Err(StartError::new(
                    "bubblewrap cannot create the run's process namespace",
                    vec![format!(
                        "{shown} exited before its namespace was ready: {}",
                        text.trim()
                    )],
                ))
            }
        }
    }

    /// Pid 1 of the run's namespace, as the host sees it.
    pub fn init_pid(&self) -> libc::pid_t {
        self.init
    }

    /// A command running `program` inside the run's namespaces, in `workdir` (a path as
    /// the namespace sees it): `nsenter` joins them and forks it there.
    pub fn command(&self, program: &OsString, workdir: &Path) -> Command {
        let mut c = Command::new(nsenter());
        c.arg("-t")
            .arg(self.init.to_string())
            .args(&self.enter)
            .args(["--preserve-credentials", "--root"])
            // `=`: util-linux 2.38 reads a separate argument after `--wdns` as the program.
            .arg(wdns(workdir))
            .arg("--")
            .arg(program);
        c
    }

    /// Whether the namespace still runs (its pid 1 lives).
    pub fn alive(&self) -> bool {
        running(self.init)
    }

    /// Ends the run's namespace: SIGKILL to its pid 1 (the kernel then kills every process
    /// in it) and to the holder's group, waits for them. Idempotent.
    pub fn end(&self) {
        let Some(mut child) = self.child.lock().ok().and_then(|mut c| c.take()) else {
            return;
        };
        // SAFETY: kill only sends a signal, to the namespace's pid 1 which the outer
        // bubblewrap (still unreaped, so the id is not reused) is the parent of.
        unsafe { libc::kill(self.init, libc::SIGKILL) };
        kill_and_reap(&mut child);
        let deadline = Instant::now() + END_WAIT;
        while running(self.init) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.end();
    }
}

/// A `local` run's holder, started when the run starts its first process: a run that
/// starts none (a trivial run, a run waiting on a person or a timer) never pays for one.
/// Holders are started by one long-lived thread of the process (`start_on_keeper`): the
/// holder's death signal is tied to the thread that forked it, and the thread that asks
/// first may be a parallel branch's, which ends long before the run.
pub struct LazyHolder {
    bwrap: PathBuf,
    args: Vec<OsString>,
    state: Mutex<Lazy>,
}

enum Lazy {
    NotStarted,
    Up(std::sync::Arc<Holder>),
    /// Bubblewrap could not make the namespace: the run's processes run in their own
    /// process groups (said once in the log).
    Unavailable,
    Ended,
}

/// What a run's next process starts in.
pub enum Container {
    Holder(std::sync::Arc<Holder>),
    /// No namespace: started on the host, in its own process group.
    None,
    /// The run has ended: nothing may start.
    Ended,
}

impl std::fmt::Debug for LazyHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &*self.state.lock().unwrap_or_else(|e| e.into_inner()) {
            Lazy::NotStarted => "not started".to_string(),
            Lazy::Up(h) => format!("init {}", h.init),
            Lazy::Unavailable => "unavailable".to_string(),
            Lazy::Ended => "ended".to_string(),
        };
        f.debug_struct("LazyHolder").field("state", &state).finish()
    }
}

impl PartialEq for LazyHolder {
    fn eq(&self, other: &LazyHolder) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for LazyHolder {}

impl LazyHolder {
    /// A holder to start with `bwrap` and `args` (as [`Holder::start`]) when first needed.
    pub fn new(bwrap: &Path, args: Vec<OsString>) -> LazyHolder {
        LazyHolder {
            bwrap: bwrap.to_path_buf(),
            args,
            state: Mutex::new(Lazy::NotStarted),
        }
    }

    /// Where the run's next process goes: the holder, started now when this is the first.
    pub fn container(&self) -> Container {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Lazy::NotStarted = *state {
            *state = match start_on_keeper(&self.bwrap, &self.args) {
                Ok(h) => Lazy::Up(std::sync::Arc::new(h)),
                Err(e) => {
                    log::warn!(
                        "local sandbox: no pid namespace for the run ({}: {}); its background processes are stopped only by their process groups and the next start's sweep",
                        e.error,
                        e.causes.join("; ")
                    );
                    Lazy::Unavailable
                }
            };
        }
        match &*state {
            Lazy::Up(h) => Container::Holder(std::sync::Arc::clone(h)),
            Lazy::Unavailable => Container::None,
            Lazy::NotStarted | Lazy::Ended => Container::Ended,
        }
    }

    /// The holder, if one was started and still runs.
    pub fn started(&self) -> Option<std::sync::Arc<Holder>> {
        match &*self.state.lock().unwrap_or_else(|e| e.into_inner()) {
            Lazy::Up(h) => Some(std::sync::Arc::clone(h)),
            _ => None,
        }
    }

    /// Ends the holder if it was started; later processes of the run cannot start.
    /// Idempotent.
    pub fn end(&self) {
        let was = std::mem::replace(
            &mut *self.state.lock().unwrap_or_else(|e| e.into_inner()),
            Lazy::Ended,
        );
        if let Lazy::Up(h) = was {
            h.end();
        }
    }
}

impl Drop for LazyHolder {
    fn drop(&mut self) {
        self.end();
    }
}

/// A request to the keeper thread: what to start, where to answer.
type Request = (
    PathBuf,
    Vec<OsString>,
    crossbeam_channel::Sender<Result<Holder, StartError>>,
);

/// Starts a holder on the process's keeper thread, which lives as long as the process (so
/// the holder dies with the server, `kill -9` included, and with nothing else); on this
/// thread when the keeper cannot be started.
fn start_on_keeper(bwrap: &Path, args: &[OsString]) -> Result<Holder, StartError> {
    static KEEPER: std::sync::OnceLock<Option<crossbeam_channel::Sender<Request>>> =
        std::sync::OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = crossbeam_channel::unbounded::<Request>();
        std::thread::Builder::new()
            .name("svc-holders".into())
            .spawn(move || {
                for (bwrap, args, answer) in rx {
                    let _ = answer.send(Holder::start(&bwrap, &args));
                }
            })
            .ok()
            .map(|_| tx)
    });
    let (answer, answered) = crossbeam_channel::bounded(1);
    let sent = keeper
        .as_ref()
        .is_some_and(|k| k.send((bwrap.to_path_buf(), args.to_vec(), answer)).is_ok());
    match sent.then(|| answered.recv().ok()).flatten() {
        Some(result) => result,
        None => Holder::start(bwrap, args),
    }
}

/// `nsenter`'s option for each kind of namespace, by its name under `/proc/<pid>/ns`.
const NAMESPACES: [(&str, &str); 7] = [
    ("user", "--user"),
    ("mnt", "--mount"),
    ("pid", "--pid"),
    ("net", "--net"),
    ("ipc", "--ipc"),
    ("uts", "--uts"),
    ("cgroup", "--cgroup"),
];

/// The `nsenter` options of the namespaces `pid` is in and this process is not (`--all`
/// when they cannot be read). Not `--all` itself: it enters the shared ones too (the host's
/// cgroup namespace), which, once inside the run's user namespace, a server running without
/// root is refused ("reassociate to namespace 'ns/cgroup' failed").
fn namespaces_of(pid: libc::pid_t) -> Vec<&'static str> {
    let id = |who: &str, ns: &str| std::fs::read_link(format!("/proc/{who}/ns/{ns}")).ok();
    let mut out = Vec::new();
    for (ns, option) in NAMESPACES {
        match (id(&pid.to_string(), ns), id("self", ns)) {
            (Some(theirs), Some(ours)) if theirs != ours => out.push(option),
            (Some(_), Some(_)) => {}
            _ => return vec!["--all"],
        }
    }
    out
}

/// `nsenter` (util-linux), from `/usr/bin` when it is there (the server's `PATH` may not
/// hold `sbin`-style directories), else by name.
fn nsenter() -> &'static Path {
    static PATH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        ["/usr/bin/nsenter", "/bin/nsenter", "/usr/sbin/nsenter"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("nsenter"))
    })
}

fn wdns(workdir: &Path) -> OsString {
    let mut a = OsString::from("--wdns=");
    a.push(workdir);
    a
}

/// Whether `pid` is a process that is not a zombie.
fn running(pid: libc::pid_t) -> bool {
    std::fs::read(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        let close = s.iter().rposition(|b| *b == b')').unwrap_or(0);
        !matches!(s.get(close + 2), Some(b'Z' | b'X') | None)
    })
}

fn kill_and_reap(child: &mut Child) {
    // SAFETY: killpg only sends a signal, to the group our unreaped child leads.
    unsafe { libc::killpg(child.id() as libc::pid_t, libc::SIGKILL) };
    let _ = child.wait();
}

fn pipe() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array, which we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nothing else.
    Ok(unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    })
}

/// Reads `fd` until `done` says the bytes are complete, it ends, or [`READY_TIMEOUT`].
fn read_until(fd: libc::c_int, done: impl Fn(&[u8]) -> bool) -> Vec<u8> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !done(&got) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one valid pollfd for at most `left`.
        let n = unsafe { libc::poll(&mut p, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if n == 0 {
            break;
        }
        // SAFETY: read into a stack buffer of its length.
        let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        match r {
            r if r > 0 => got.extend_from_slice(&buf[..r as usize]),
            _ => break,
        }
    }
    got
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        not(has_bwrap),
        ignore = "needs bubblewrap able to create namespaces: apt-get install bubblewrap"
    )]
    fn a_background_process_lives_until_the_holder_ends() {
        use crate::test_tools::{require, Tool};
        require(Tool::Bwrap);
        let dir = tempfile::tempdir().unwrap();
        let holder = Holder::start(Path::new("bwrap"), &local_args(dir.path())).unwrap();
        let out = holder
            .command(&"sh".into(), dir.path())
            .args(["-c", "sleep 600 >/dev/null 2>&1 & echo $!; pwd"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text} {out:?}");
        assert!(text.contains(&dir.path().display().to_string()), "{text}");
        // The background `sleep` is the namespace's (its pid there is small) and still runs.
        let sleeper = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
            .find(|p| {
                std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c == b"sleep\x00600\x00")
                    && std::fs::read_link(format!("/proc/{p}/ns/pid")).ok()
                        == std::fs::read_link(format!("/proc/{}/ns/pid", holder.init_pid())).ok()
            })
            .expect("the background job runs in the holder's namespace");
        assert!(running(sleeper));
        holder.end();
        assert!(!running(sleeper), "the background job outlived the holder");
        assert!(!holder.alive());
    }
}
