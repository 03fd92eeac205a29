//! Where a run's processes execute: on the host (`local`) or inside a bubblewrap container
//! (`container`), and the one place every run process is spawned from ([`Isolation::command`]).
//!
//! Owns: the provider kinds, the bwrap command line (own mount, pid, network, ipc, uts
//! namespaces; the host's system directories read-only and nothing else of it; the
//! workspace read-write; a private `/tmp`; `--die-with-parent`), and starting a sandbox (checking the provider can run a process).
//! Must not touch: the workspace's contents (that is `workspace`), runs or the store.

use super::holder::{self, Holder, LazyHolder};
use super::limits::{Limits, Resources};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// SPEC 2.5 provider enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    Local,
    Container,
    Hosted,
}

impl ProviderKind {
    pub const ALL: [ProviderKind; 3] = [
        ProviderKind::Local,
        ProviderKind::Container,
        ProviderKind::Hosted,
    ];

    pub fn parse(s: &str) -> Option<ProviderKind> {
        match s {
            "local" => Some(ProviderKind::Local),
            "container" => Some(ProviderKind::Container),
            "hosted" => Some(ProviderKind::Hosted),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Local => "local",
            ProviderKind::Container => "container",
            ProviderKind::Hosted => "hosted",
        }
    }
}

/// How processes of one run are started. Cheap to clone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Isolation {
    /// On the host, as the server's user.
    #[default]
    Local,
    /// On the host, inside the sandbox's resource limits.
    LocalLimited(Arc<Limits>),
    /// On the host, every process in the run's pid namespace (`holder`, started with the
    /// run's first process), within the sandbox's resource limits if it has any: what a
    /// `local` run's sandbox starts.
    Host {
        holder: Arc<LazyHolder>,
        limits: Option<Arc<Limits>>,
    },
    /// Inside bubblewrap: the host's system directories read-only, `workspace` read-write,
    /// nothing else of the host; one container per run (`holder`), which every process of
    /// the run enters.
    Container {
        holder: Arc<Holder>,
        workspace: PathBuf,
        network: bool,
        /// The environment's resource limits, when it set any.
        limits: Option<Arc<Limits>>,
    },
}

/// Why a sandbox could not be started: `error` for people, `causes` most specific last.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct StartError {
    pub error: String,
    pub causes: Vec<String>,
}

impl StartError {
    pub fn new(error: impl Into<String>, causes: Vec<String>) -> StartError {
        StartError {
            error: error.into(),
            causes,
        }
    }
}

/// What a sandbox is asked to be (SPEC 2.5 `plan`, plus the run's network permission).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPlan {
    pub provider: ProviderKind,
    pub image: Option<String>,
    pub snapshot: Option<String>,
    pub network: bool,
    /// The bubblewrap binary (`bwrap` on `PATH` unless configured).
    pub bwrap: PathBuf,
    /// What the sandbox's processes may use (the run's environment's `resources`).
    pub resources: Resources,
}

/// A started sandbox: how to run processes in it and how long starting took.
#[derive(Debug, Clone)]
pub struct Started {
    pub isolation: Isolation,
    pub duration: Duration,
}

impl Isolation {
    pub fn provider(&self) -> ProviderKind {
        match self {
            Isolation::Local | Isolation::LocalLimited(_) | Isolation::Host { .. } => {
                ProviderKind::Local
            }
            Isolation::Container { .. } => ProviderKind::Container,
        }
    }

    /// True when processes run on the host's file system (no container).
    pub fn on_host(&self) -> bool {
        !matches!(self, Isolation::Container { .. })
    }

    /// The run's process holder, when its processes share one (see `holder`) and (for
    /// `local`, whose holder starts with the run's first process) it has been started.
    pub fn holder(&self) -> Option<Arc<Holder>> {
        match self {
            Isolation::Host { holder, .. } => holder.started(),
            Isolation::Container { holder, .. } => Some(Arc::clone(holder)),
            Isolation::Local | Isolation::LocalLimited(_) => None,
        }
    }

    /// Ends every process of the run (its holder's namespace), at the run's end whatever
    /// the ending. Processes started afterwards through this isolation fail to start.
    pub fn end(&self) {
        match self {
            Isolation::Host { holder, .. } => holder.end(),
            Isolation::Container { holder, .. } => holder.end(),
            Isolation::Local | Isolation::LocalLimited(_) => {}
        }
    }

    /// The resource limits in force, if any.
    pub fn limits(&self) -> Option<&Limits> {
        match self {
            Isolation::LocalLimited(l) => Some(l),
            Isolation::Container { limits, .. } | Isolation::Host { limits, .. } => {
                limits.as_deref()
            }
            Isolation::Local => None,
        }
    }

    /// Why a process that just failed was stopped by one of the sandbox's limits, if it was
    /// (e.g. `out of memory (limit 64 MiB)`).
    pub fn limit_hit(&self, signal: Option<i32>, code: Option<i32>) -> Option<String> {
        self.limits()?.explain(signal, code)
    }

    /// A command running `program` in `workdir`, leading its own process group (so a stage
    /// can signal everything it started) that dies with the thread that spawns it and is
    /// recorded for the restart sweep (`procs::isolate`), started inside the run's holder
    /// (`nsenter` into its namespaces) when the run has one. Every process a run starts
    /// (command stages, the agent's shell tool, ACP agents, MCP servers) comes from here.
    pub fn command(&self, program: &str, workdir: &Path) -> Command {
        let mut cmd = self.unconfined_command(program, workdir);
        if let Some(l) = self.limits() {
            l.apply(&mut cmd);
        }
        cmd
    }

    /// [`Isolation::command`] without the sandbox's resource limits: only for the start
    /// probe, which runs `true` and must not pay for joining the limits' groups (on cgroup v1
    /// each join after a quiet spell waits for an RCU grace period, 10-20 ms on a loaded
    /// host, and the first real process pays it again).
    fn unconfined_command(&self, program: &str, workdir: &Path) -> Command {
        let mut cmd = match self {
            Isolation::Local | Isolation::LocalLimited(_) => Command::new(program),
            // A program found nowhere cannot run in the holder either: started directly, it
            // fails to start with the same error as without a holder.
            Isolation::Host { holder, .. } => match on_host(program, workdir) {
                true => match holder.container() {
                    holder::Container::Holder(h) => h.command(&program.into(), workdir),
                    holder::Container::None => Command::new(program),
                    // Never started: fails to start, as a process sent into an ended
                    // holder's namespace would.
                    holder::Container::Ended => Command::new(RUN_ENDED),
                },
                false => Command::new(program),
            },
            Isolation::Container { holder, .. } => {
                let mut c = holder.command(&program.into(), workdir);
                // The server's home is not in the container: both point into its private /tmp.
                c.env("HOME", "/tmp").env("TMPDIR", "/tmp");
                c
            }
        };
        // `nsenter` needs a directory that exists outside; the child gets `--wdns`.
        cmd.current_dir(workdir);
        // Own process group, SIGKILL when the forking (stage) thread dies, and the group's
        // record for the next start's sweep (`procs`).
        crate::procs::isolate(&mut cmd);
        cmd
    }
}

/// The program a process of an ended run is given: it names nothing, so it fails to start.
const RUN_ENDED: &str = "svc: the run has ended";

/// Whether `program` names an executable file on the host (through `PATH` for a bare name).
fn on_host(program: &str, workdir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(&workdir.join(program));
    }
    std::env::var_os("PATH").is_some_and(|dirs| {
        std::env::split_paths(&dirs).any(|d| executable(&workdir.join(d).join(program)))
    })
}

/// The host's system directories a container sees, read-only: programs and their
/// libraries. A directory that is a symlink on the host (`/bin -> usr/bin` on merged-/usr
/// systems) is the same symlink inside.
pub const SYSTEM_DIRS: [&str; 7] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// The parts of the host's `/etc` a container sees, read-only, when they exist: users and
/// groups by name, name resolution, time zone, the dynamic linker's cache, Debian's
/// alternatives (many `/usr/bin` commands point there), TLS certificates, MIME and file
/// types, shell start-up files, terminal descriptions, locale aliases, the OS release, and
/// the system configuration of Python and Perl. Not `shadow`, not `ssh`, not `sudoers`, not
/// `gitconfig`, `npmrc` or `pip.conf` (which may hold credentials), nothing else.
pub const ETC_ENTRIES: [&str; 37] = [
    "/etc/alternatives",
    "/etc/bash.bashrc",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/crypto-policies",
    "/etc/debian_version",
    "/etc/fonts",
    "/etc/gai.conf",
    "/etc/group",
    "/etc/host.conf",
    "/etc/hostname",
    "/etc/hosts",
    "/etc/inputrc",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/locale.alias",
    "/etc/localtime",
    "/etc/lsb-release",
    "/etc/magic",
    "/etc/magic.mime",
    "/etc/mime.types",
    "/etc/networks",
    "/etc/nsswitch.conf",
    "/etc/os-release",
    "/etc/passwd",
    "/etc/perl",
    "/etc/pki",
    "/etc/profile",
    "/etc/profile.d",
    "/etc/protocols",
    "/etc/python3",
    "/etc/resolv.conf",
    "/etc/services",
    "/etc/ssl",
    "/etc/terminfo",
    "/etc/timezone",
];

/// The mount arguments for [`SYSTEM_DIRS`] and [`ETC_ENTRIES`] (plus `/etc/python3.*`) as
/// this host has them, worked out once: a process start should not stat forty paths.
fn system_mounts() -> &'static [std::ffi::OsString] {
    static MOUNTS: std::sync::OnceLock<Vec<std::ffi::OsString>> = std::sync::OnceLock::new();
    MOUNTS.get_or_init(|| {
        let mut a: Vec<std::ffi::OsString> = Vec::new();
        let mut paths: Vec<PathBuf> = SYSTEM_DIRS
            .iter()
            .chain(ETC_ENTRIES.iter())
            .map(PathBuf::from)
            .collect();
        // `/etc/python3.11` and the like: the versioned Python's site configuration.
        if let Ok(entries) = std::fs::read_dir("/etc") {
            let mut versioned: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("python3."))
                })
                .collect();
            versioned.sort();
            paths.extend(versioned);
        }
        for p in paths {
            let Ok(meta) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if meta.file_type().is_symlink() && SYSTEM_DIRS.iter().any(|d| Path::new(d) == p) {
                if let Ok(target) = std::fs::read_link(&p) {
                    a.push("--symlink".into());
                    a.push(target.into());
                    a.push(p.into());
                }
                continue;
            }
            // A symlinked /etc entry (resolv.conf into /run) is mounted as what it points
            // to; one that points nowhere is left out.
            if std::fs::metadata(&p).is_ok() {
                a.push("--ro-bind".into());
                a.push(p.clone().into());
                a.push(p.into());
            }
        }
        a.push("--symlink".into());
        a.push("/proc/self/mounts".into());
        a.push("/etc/mtab".into());
        a
    })
}

/// The bubblewrap arguments before the program: the host's system directories read-only
/// ([`SYSTEM_DIRS`], [`ETC_ENTRIES`]), a private `/dev`, `/proc` and `/tmp`, the workspace
/// read-write, and nothing else of the host: no state directory, no home directory, no
/// other user's files. `HOME` and `TMPDIR` point into the private `/tmp` (the server's
/// home is not there). Order matters: the private `/tmp` is mounted before the workspace,
/// so a workspace under `/tmp` stays visible. `tmp_size` caps the private `/tmp` (bytes).
pub fn bwrap_args(
    workspace: &Path,
    workdir: &Path,
    network: bool,
    tmp_size: Option<u64>,
) -> Vec<std::ffi::OsString> {
    let system = system_mounts();
    let mut a: Vec<std::ffi::OsString> = Vec::with_capacity(24 + system.len());
    let mut push = |s: &str| a.push(s.into());
    push("--unshare-all");
    if network {
        push("--share-net");
    }
    push("--die-with-parent");
    a.extend(system.iter().cloned());
    for s in ["--dev", "/dev", "--proc", "/proc"] {
        a.push(s.into());
    }
    // bubblewrap takes `--size` only right before the `--tmpfs` it sizes.
    if let Some(n) = tmp_size {
        a.push("--size".into());
        a.push(n.to_string().into());
    }
    for s in [
        "--tmpfs", "/tmp", "--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp",
    ] {
        a.push(s.into());
    }
    a.push("--bind".into());
    a.push(workspace.into());
    a.push(workspace.into());
    // The root bubblewrap builds (where the mount points were made) is read-only too:
    // writes go to the workspace or the private /tmp.
    a.push("--remount-ro".into());
    a.push("/".into());
    a.push("--chdir".into());
    a.push(workdir.into());
    a.push("--".into());
    a
}

/// Starts a sandbox for `workspace` as `plan` asks, or says why it cannot.
pub fn start(plan: &SandboxPlan, workspace: &Path) -> Result<Started, StartError> {
    let began = Instant::now();
    unsupported_plan(plan)?;
    if !workspace.is_dir() {
        return Err(StartError::new(
            format!("the workspace {} is not a directory", workspace.display()),
            vec![],
        ));
    }
    let limits = limits_for(plan, workspace)?;
    let isolation = match plan.provider {
        // The holder starts with the run's first process (`LazyHolder`); without
        // bubblewrap a local run still works, its processes in process groups (`procs`),
        // said once per run in the log.
        ProviderKind::Local => Isolation::Host {
            holder: Arc::new(LazyHolder::new(&plan.bwrap, holder::local_args(workspace))),
            limits,
        },
        ProviderKind::Container => {
            let tmp_size = limits.as_ref().and_then(|l| l.resources().disk);
            let args = bwrap_args(workspace, workspace, plan.network, tmp_size);
            let iso = Isolation::Container {
                holder: Arc::new(Holder::start(&plan.bwrap, &args)?),
                workspace: workspace.to_path_buf(),
                network: plan.network,
                limits,
            };
            probe(&iso, workspace)?;
            iso
        }
        ProviderKind::Hosted => {
            return Err(StartError::new(
                "sandbox provider `hosted` is not configured on this server",
                vec!["no hosted sandbox provider is configured; use `local` or `container`".into()],
            ))
        }
    };
    Ok(Started {
        isolation,
        duration: began.elapsed(),
    })
}

/// The plan's limits put in force for the sandbox on `workspace` (its groups named after the
/// workspace, so a resumed run's sandbox finds its own), or none when it sets none.
fn limits_for(plan: &SandboxPlan, workspace: &Path) -> Result<Option<Arc<Limits>>, StartError> {
    if plan.resources.is_empty() || plan.provider == ProviderKind::Hosted {
        return Ok(None);
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(workspace.as_os_str().as_encoded_bytes());
    let id = crate::base::hex(&digest[..8]);
    Limits::start(&id, plan.resources)
        .map(|l| Some(Arc::new(l)))
        .map_err(|e| StartError::new(e.error, e.causes))
}

/// `image` and `snapshot` name things neither local provider has: refuse rather than ignore.
fn unsupported_plan(plan: &SandboxPlan) -> Result<(), StartError> {
    if plan.provider == ProviderKind::Hosted {
        return Ok(());
    }
    for (what, value) in [("image", &plan.image), ("snapshot", &plan.snapshot)] {
        if let Some(v) = value {
            return Err(StartError::new(
                format!(
                    "sandbox provider `{}` cannot use {what} `{v}`",
                    plan.provider.as_str()
                ),
                vec![format!(
                    "the {} provider runs on the host's file system and has no {what}s",
                    plan.provider.as_str()
                )],
            ));
        }
    }
    Ok(())
}

/// Runs `true` in the container: proves bubblewrap is installed and allowed to make
/// namespaces here, so a broken setup fails the sandbox, not the first stage. Outside the
/// limits: `Limits::start` has already opened every group a process joins.
fn probe(iso: &Isolation, workspace: &Path) -> Result<(), StartError> {
    if !matches!(iso, Isolation::Container { .. }) {
        return Ok(());
    }
    let bwrap = "nsenter";
    let out = iso
        .unconfined_command("true", workspace)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| {
            StartError::new(
                format!("cannot enter the container (`{bwrap}`)"),
                vec![
                    e.to_string(),
                    "install the `util-linux` package (it has nsenter)".into(),
                ],
            )
        })?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    Err(StartError::new(
        "the bubblewrap container cannot run a process",
        vec![format!("{bwrap} exited with {}: {stderr}", out.status)],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(provider: ProviderKind) -> SandboxPlan {
        SandboxPlan {
            provider,
            image: None,
            snapshot: None,
            network: false,
            bwrap: "bwrap".into(),
            resources: Resources::default(),
        }
    }

    #[test]
    fn hosted_is_not_configured_and_images_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let e = start(&plan(ProviderKind::Hosted), dir.path()).unwrap_err();
        assert!(e.error.contains("not configured"), "{e:?}");
        let mut p = plan(ProviderKind::Local);
        p.image = Some("debian:12".into());
        let e = start(&p, dir.path()).unwrap_err();
        assert!(e.error.contains("image `debian:12`"), "{e:?}");
        assert!(!e.causes.is_empty());
        let ok = start(&plan(ProviderKind::Local), dir.path()).unwrap();
        assert_eq!(ok.isolation.provider(), ProviderKind::Local);
        assert!(ok.isolation.on_host());
    }

    #[test]
    fn missing_bwrap_fails_with_a_cause() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = plan(ProviderKind::Container);
        p.bwrap = "/nonexistent/bwrap".into();
        let e = start(&p, dir.path()).unwrap_err();
        assert!(e.error.contains("bubblewrap"), "{e:?}");
        assert!(e.causes.iter().any(|c| c.contains("bubblewrap")), "{e:?}");
    }

    #[test]
    #[cfg_attr(
        not(has_bwrap),
        ignore = "needs bubblewrap able to create namespaces: apt-get install bubblewrap"
    )]
    fn a_limited_containers_processes_start_in_its_groups() {
        use crate::test_tools::{require, Tool};
        require(Tool::Bwrap);
        let dir = tempfile::tempdir().unwrap();
        let runtime = super::super::limits::Runtime::host();
        let mut p = plan(ProviderKind::Container);
        // The disk limit holds everywhere (RLIMIT_FSIZE); the groups where the host has them.
        p.resources = Resources {
            memory: Some(256 << 20),
            disk: Some(1 << 20),
            ..Resources::default()
        };
        let started = start(&p, dir.path()).unwrap();
        let limits = started.isolation.limits().expect("limits in force");
        // The start probe ran outside the groups; the first real process is inside them.
        let out = started
            .isolation
            .command("sh", dir.path())
            .args(["-c", "cat /proc/self/cgroup; ulimit -f"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text} {out:?}");
        // `ulimit -f` counts 512-byte blocks: 1 MiB.
        assert!(text.trim_end().ends_with("2048"), "{text}");
        if !matches!(runtime, super::super::limits::Runtime::Rlimits) {
            let leaf = limits.groups()[0].file_name().unwrap().to_owned();
            assert!(text.contains(leaf.to_str().unwrap()), "{text}");
        }
    }

    #[test]
    fn tmp_is_mounted_before_the_workspace() {
        let a = bwrap_args(Path::new("/tmp/ws"), Path::new("/tmp/ws"), false, None);
        let pos = |s: &str| a.iter().position(|x| x == s).unwrap();
        assert!(pos("--tmpfs") < pos("--bind"));
        assert!(!a.iter().any(|x| x == "--share-net"));
        assert!(a.iter().any(|x| x == "--die-with-parent"));
    }

    #[test]
    fn a_disk_limit_sizes_the_private_tmp() {
        // bubblewrap refuses `--size` anywhere but right before `--tmpfs` ("--size must be
        // followed by --tmpfs"): an environment with `disk` could not start a container.
        let a = bwrap_args(Path::new("/w"), Path::new("/w"), true, Some(1 << 20));
        let at = a.iter().position(|x| x == "--size").unwrap();
        assert_eq!(a[at + 1], "1048576");
        assert_eq!(a[at + 2], "--tmpfs");
        assert_eq!(a[at + 3], "/tmp");
    }
}
