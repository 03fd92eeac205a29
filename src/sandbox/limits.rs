//! Resource limits on a sandbox's processes: what an environment lets a run use
//! ([`Resources`]: CPUs, memory, processes, disk) and how this host enforces it ([`Runtime`]),
//! worked out once per server process:
//!
//! - **cgroup v2** where the unified hierarchy has the `memory` and `pids` controllers and the
//!   server may make a child group (its own group's subtree, else the hierarchy's root, which
//!   root may write): one leaf group per sandbox with `memory.max` (and `memory.swap.max` 0),
//!   `pids.max`, `cpu.max`;
//! - **cgroup v1** where the `memory` and `pids` hierarchies are writable: one leaf per
//!   sandbox in each (and in `cpu` when writable): `memory.limit_in_bytes`, `pids.max`,
//!   `cpu.cfs_quota_us`;
//! - **rlimits** otherwise: `RLIMIT_AS` per process for memory, `RLIMIT_NPROC` for processes
//!   (which the kernel does not apply to root: a process limit is then refused at start, with
//!   the cause), CPU affinity for CPUs.
//!
//! In every runtime `disk` is `RLIMIT_FSIZE` (no file the run writes grows past it) and, in a
//! container, the size of its private `/tmp`. A process is placed in its sandbox's groups
//! before it executes (in the forked child, so nothing it starts escapes), and a process
//! the kernel's OOM killer stopped is reported as "out of memory (limit X)".
//!
//! Owns: the probe, the per-sandbox groups (made at start, removed when the last handle on
//! them goes) and the limits a spawned process gets. Must not touch: runs, the store, which
//! environment asked for what (`environments`).

use crate::procs::Confinement;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// What a sandbox's processes may use together; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Resources {
    /// CPUs (whole cores' worth of time).
    pub cpu: Option<u32>,
    /// Memory in bytes, all processes together (per process under rlimits).
    pub memory: Option<u64>,
    /// Processes and threads at once.
    pub pids: Option<u32>,
    /// Bytes: the largest file a process may write, and a container's `/tmp`.
    pub disk: Option<u64>,
}

impl Resources {
    pub fn is_empty(&self) -> bool {
        *self == Resources::default()
    }
}

/// The smallest limits a sandbox can start with (a shell and git need this much).
pub const MIN_MEMORY: u64 = 16 << 20;
pub const MIN_PIDS: u32 = 8;
pub const MIN_DISK: u64 = 1 << 20;

/// How this host enforces limits (shown as `sandbox.instance.runtime.limits`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runtime {
    CgroupV2 {
        base: PathBuf,
    },
    CgroupV1 {
        memory: PathBuf,
        pids: PathBuf,
        cpu: Option<PathBuf>,
    },
    Rlimits,
}

impl Runtime {
    /// `cgroup-v2`, `cgroup-v1` or `rlimits`.
    pub fn name(&self) -> &'static str {
        match self {
            Runtime::CgroupV2 { .. } => "cgroup-v2",
            Runtime::CgroupV1 { .. } => "cgroup-v1",
            Runtime::Rlimits => "rlimits",
        }
    }

    /// This host's runtime, probed once.
    pub fn host() -> &'static Runtime {
        static HOST: OnceLock<Runtime> = OnceLock::new();
        HOST.get_or_init(probe)
    }

    /// Why `r` cannot be enforced here, if it cannot.
    pub fn refuses(&self, r: &Resources) -> Option<String> {
        if matches!(self, Runtime::Rlimits) && r.pids.is_some() && is_root() {
            return Some(
                "this server runs as root without a writable cgroup (v2 with the pids \
                 controller, or v1 pids): RLIMIT_NPROC does not apply to root, so a process \
                 limit cannot be enforced; remove resources.pids or give the server a cgroup"
                    .into(),
            );
        }
        None
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid never fails.
    unsafe { libc::geteuid() == 0 }
}

fn probe() -> Runtime {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    probe_v2(&mounts, &own)
        .or_else(|| probe_v1(&mounts, &own))
        .unwrap_or(Runtime::Rlimits)
}

/// `(mount point, options)` of each mount of `fstype`.
fn mounts_of<'a>(mounts: &'a str, fstype: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> {
    mounts.lines().filter_map(move |l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 4 && f[2] == fstype).then(|| (f[1], f[3]))
    })
}

/// This process's group in the hierarchy whose `/proc/self/cgroup` line names `controller`
/// (`""` for v2's `0::`).
fn own_group<'a>(own: &'a str, controller: &str) -> Option<&'a str> {
    own.lines().find_map(|l| {
        let mut p = l.splitn(3, ':');
        let (_, ctrls, path) = (p.next()?, p.next()?, p.next()?);
        let hit = if controller.is_empty() {
            ctrls.is_empty()
        } else {
            ctrls.split(',').any(|c| c == controller)
        };
        hit.then_some(path)
    })
}

fn controllers(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default()
}

fn has_all(list: &str, want: &[&str]) -> bool {
    want.iter()
        .all(|w| list.split_whitespace().any(|c| c == *w))
}

fn probe_v2(mounts: &str, own: &str) -> Option<Runtime> {
    let (mount, _) = mounts_of(mounts, "cgroup2").next()?;
    let mount = PathBuf::from(mount);
    let mine = own_group(own, "").unwrap_or("/");
    let mut candidates = vec![mount.join(mine.trim_start_matches('/'))];
    if mine != "/" {
        candidates.push(mount.clone());
    }
    for parent in candidates {
        if !has_all(&controllers(&parent), &["memory", "pids"]) {
            continue;
        }
        let base = parent.join("svc-sandboxes");
        let enable = |dir: &Path| {
            let want = if has_all(&controllers(dir), &["cpu"]) {
                "+memory +pids +cpu"
            } else {
                "+memory +pids"
            };
            std::fs::write(dir.join("cgroup.subtree_control"), want)
        };
        if enable(&parent).is_err() {
            continue;
        }
        if std::fs::create_dir_all(&base).is_err() || enable(&base).is_err() {
            continue;
        }
        if has_all(&controllers(&base), &["memory", "pids"]) && writable_leaf(&base) {
            return Some(Runtime::CgroupV2 { base });
        }
    }
    None
}

fn probe_v1(mounts: &str, own: &str) -> Option<Runtime> {
    let hierarchy = |controller: &str| -> Option<PathBuf> {
        let (mount, _) = mounts_of(mounts, "cgroup")
            .find(|(_, opts)| opts.split(',').any(|o| o == controller))?;
        let mine = own_group(own, controller).unwrap_or("/");
        let dir = Path::new(mount).join(mine.trim_start_matches('/'));
        writable_leaf(&dir).then_some(dir)
    };
    Some(Runtime::CgroupV1 {
        memory: hierarchy("memory")?,
        pids: hierarchy("pids")?,
        cpu: hierarchy("cpu"),
    })
}

/// True when a child group can be made (and removed) under `dir`.
fn writable_leaf(dir: &Path) -> bool {
    let probe = dir.join(format!("svc-probe-{}", std::process::id()));
    let made = std::fs::create_dir(&probe).is_ok() && probe.join("cgroup.procs").exists();
    let _ = std::fs::remove_dir(&probe);
    made
}

/// One sandbox's limits in force: its groups (removed on drop) and what its processes get.
#[derive(Debug)]
pub struct Limits {
    resources: Resources,
    runtime: Runtime,
    /// The sandbox's leaf groups (one for v2, memory/pids[/cpu] for v1).
    groups: Vec<PathBuf>,
    /// OOM kills seen so far (so each is reported once).
    oom_seen: AtomicU64,
    confine: Confinement,
}

impl PartialEq for Limits {
    fn eq(&self, other: &Limits) -> bool {
        self.resources == other.resources && self.groups == other.groups
    }
}
impl Eq for Limits {}

/// Why limits could not be put in force.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct LimitError {
    pub error: String,
    pub causes: Vec<String>,
}

fn write_file(dir: &Path, name: &str, value: &str) -> Result<(), LimitError> {
    std::fs::write(dir.join(name), value).map_err(|e| LimitError {
        error: format!("cannot set {name} on the sandbox's cgroup"),
        causes: vec![format!("{}: {e}", dir.join(name).display())],
    })
}

impl Limits {
    /// Puts `resources` in force for the sandbox `id` on this host's runtime: makes and
    /// configures its groups, or says why it cannot.
    pub fn start(id: &str, resources: Resources) -> Result<Limits, LimitError> {
        Limits::start_on(Runtime::host().clone(), id, resources)
    }

    pub fn start_on(runtime: Runtime, id: &str, r: Resources) -> Result<Limits, LimitError> {
        if let Some(cause) = runtime.refuses(&r) {
            return Err(LimitError {
                error: "the sandbox's process limit cannot be enforced on this host".into(),
                causes: vec![cause],
            });
        }
        let leaf = format!("svc-{id}");
        let mut groups = Vec::new();
        let mk = |dir: &Path| -> Result<PathBuf, LimitError> {
            let g = dir.join(&leaf);
            match std::fs::create_dir(&g) {
                Ok(()) => Ok(g),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(g),
                Err(e) => Err(LimitError {
                    error: "cannot make the sandbox's cgroup".into(),
                    causes: vec![format!("{}: {e}", g.display())],
                }),
            }
        };
        match &runtime {
            Runtime::CgroupV2 { base } => {
                let g = mk(base)?;
                let max = |v: Option<u64>| v.map_or("max".to_string(), |n| n.to_string());
                write_file(&g, "memory.max", &max(r.memory))?;
                if r.memory.is_some() && g.join("memory.swap.max").exists() {
                    write_file(&g, "memory.swap.max", "0")?;
                }
                write_file(&g, "pids.max", &max(r.pids.map(u64::from)))?;
                if g.join("cpu.max").exists() {
                    let quota = r.cpu.map(|c| u64::from(c) * 100_000);
                    write_file(&g, "cpu.max", &format!("{} 100000", max(quota)))?;
                }
                groups.push(g);
            }
            Runtime::CgroupV1 { memory, pids, cpu } => {
                let m = mk(memory)?;
                // -1: unlimited (a resumed sandbox may have had a limit before).
                let lim = r.memory.map_or("-1".to_string(), |n| n.to_string());
                write_file(&m, "memory.limit_in_bytes", &lim)?;
                if m.join("memory.memsw.limit_in_bytes").exists() {
                    let _ = write_file(&m, "memory.memsw.limit_in_bytes", &lim);
                }
                groups.push(m);
                let p = mk(pids)?;
                let max = r.pids.map_or("max".to_string(), |n| n.to_string());
                write_file(&p, "pids.max", &max)?;
                groups.push(p);
                if let Some(cpu) = cpu {
                    let c = mk(cpu)?;
                    write_file(&c, "cpu.cfs_period_us", "100000")?;
                    let quota = r.cpu.map_or(-1, |n| i64::from(n) * 100_000);
                    write_file(&c, "cpu.cfs_quota_us", &quota.to_string())?;
                    groups.push(c);
                }
            }
            Runtime::Rlimits => {}
        }
        let mut limits = Limits {
            resources: r,
            runtime,
            groups,
            oom_seen: AtomicU64::new(0),
            confine: Confinement::default(),
        };
        limits.confine = limits.make_confinement();
        // Checked here, not by joining (each join may wait for an RCU grace period): a
        // group a process could not join would silently drop its limit.
        if limits.confine.groups.len() != limits.groups.len() {
            return Err(LimitError {
                error: "cannot open the sandbox's cgroup for its processes".into(),
                causes: limits
                    .groups
                    .iter()
                    .map(|g| g.join("cgroup.procs"))
                    .filter(|p| std::fs::OpenOptions::new().write(true).open(p).is_err())
                    .map(|p| format!("{}: not writable", p.display()))
                    .collect(),
            });
        }
        limits.oom_seen.store(limits.oom_kills(), Ordering::SeqCst);
        Ok(limits)
    }

    pub fn resources(&self) -> &Resources {
        &self.resources
    }

    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The sandbox's leaf groups (none under rlimits).
    pub fn groups(&self) -> &[PathBuf] {
        &self.groups
    }

    /// What a process of this sandbox puts on itself before it executes (opened once: the
    /// command stages' spawner uses it as is).
    pub fn confinement(&self) -> &Confinement {
        &self.confine
    }

    /// A fresh [`Confinement`] (its own descriptors on the groups' `cgroup.procs`).
    fn make_confinement(&self) -> Confinement {
        let groups = self
            .groups
            .iter()
            .filter_map(|g| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(g.join("cgroup.procs"))
                    .ok()
            })
            .collect();
        let cpus = match (&self.runtime, self.resources.cpu) {
            // Without a cgroup's CPU quota: the first N CPUs.
            (Runtime::Rlimits, Some(n)) | (Runtime::CgroupV1 { cpu: None, .. }, Some(n)) => {
                Some(n as usize)
            }
            _ => None,
        };
        Confinement {
            groups,
            rlimits: self.rlimits().into_iter().flatten().collect(),
            cpus,
        }
    }

    /// Makes `cmd`'s process start inside the limits: joins the sandbox's groups and sets its
    /// rlimits and CPU affinity in the forked child, before it executes anything.
    pub fn apply(&self, cmd: &mut Command) {
        let confine = self.make_confinement();
        // SAFETY: the closure runs in the forked child before exec; `enter` makes only
        // async-signal-safe system calls on data prepared here and allocates nothing.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(cmd, move || {
                confine.enter().map_err(io::Error::from_raw_os_error)
            });
        }
    }

    /// The rlimits a process gets (fixed size: built before fork).
    fn rlimits(&self) -> [Option<(libc::__rlimit_resource_t, libc::rlim_t)>; 3] {
        let r = &self.resources;
        let rl = matches!(self.runtime, Runtime::Rlimits);
        [
            r.disk.map(|d| (libc::RLIMIT_FSIZE, d as libc::rlim_t)),
            r.memory
                .filter(|_| rl)
                .map(|m| (libc::RLIMIT_AS, m as libc::rlim_t)),
            r.pids
                .filter(|_| rl)
                .map(|p| (libc::RLIMIT_NPROC, libc::rlim_t::from(p))),
        ]
    }

    /// The OOM kills in the sandbox's memory group so far (0 without one).
    fn oom_kills(&self) -> u64 {
        let (dir, file) = match &self.runtime {
            Runtime::CgroupV2 { .. } => (self.groups.first(), "memory.events"),
            Runtime::CgroupV1 { .. } => (self.groups.first(), "memory.oom_control"),
            Runtime::Rlimits => return 0,
        };
        let Some(text) = dir.and_then(|d| std::fs::read_to_string(d.join(file)).ok()) else {
            return 0;
        };
        text.lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// The processes in the sandbox's groups now (0 without groups).
    pub fn count(&self) -> usize {
        self.members().len()
    }

    fn members(&self) -> Vec<libc::pid_t> {
        let mut pids: Vec<libc::pid_t> = self
            .groups
            .iter()
            .filter_map(|g| std::fs::read_to_string(g.join("cgroup.procs")).ok())
            .flat_map(|t| {
                t.lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<_>>()
            })
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Sends SIGKILL to every process in the sandbox's groups (`cgroup.kill` where the
    /// kernel has it): nothing a run started outlives its sandbox, however it forked.
    pub fn kill_all(&self) {
        if let (Runtime::CgroupV2 { .. }, Some(g)) = (&self.runtime, self.groups.first()) {
            if std::fs::write(g.join("cgroup.kill"), "1").is_ok() {
                return;
            }
        }
        for pid in self.members() {
            // SAFETY: a plain signal to a process of this sandbox.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }

    /// Why a process of this sandbox that just ended was stopped by a limit, if it was: the
    /// memory limit (the OOM killer acted since the last call) or the file size limit
    /// (`SIGXFSZ`, or a shell's exit code for it). Call after a process fails.
    pub fn explain(&self, signal: Option<i32>, code: Option<i32>) -> Option<String> {
        let kills = self.oom_kills();
        let before = self.oom_seen.swap(kills, Ordering::SeqCst);
        if kills > before {
            if let Some(m) = self.resources.memory {
                return Some(format!("out of memory (limit {})", format_bytes(m)));
            }
        }
        if signal == Some(libc::SIGXFSZ) || code == Some(128 + libc::SIGXFSZ) {
            if let Some(d) = self.resources.disk {
                return Some(format!(
                    "file size limit exceeded (disk limit {})",
                    format_bytes(d)
                ));
            }
        }
        None
    }
}

impl Drop for Limits {
    fn drop(&mut self) {
        // Best effort: a group still holding processes stays (the next start reuses it).
        for g in &self.groups {
            let _ = std::fs::remove_dir(g);
        }
    }
}

/// `64 MiB`, `2 GiB`, `1500 B`: the largest binary unit that divides `n` exactly.
pub fn format_bytes(n: u64) -> String {
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{} {unit}", n >> shift);
        }
    }
    format!("{n} B")
}

/// Parses `512MB`, `4GB`, `1GiB`, `64 MiB`, `1048576` (bytes). MB/GB are binary here, as
/// memory sizes are usually meant (`4GB` is 4 GiB).
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

#[cfg(test)]
mod tests;
