//! Sandboxes: a run's working directory, the path resolution every file tool goes through,
//! and ([`isolation`]) how the run's processes are started (on the host or in bubblewrap).
//! A path is refused when it is absolute outside the root, climbs out with `..`, or reaches
//! outside through a symlink (existing prefixes are canonicalised, dangling links followed).
//! [`lifecycle`] starts, reopens and removes a run's sandbox (the server's and `svc run`'s).
//! Must not know about agents, or (outside `lifecycle`) runs or the store. The file tools are confined by
//! [`Sandbox::resolve`]; processes by the [`Isolation`] the sandbox carries (a `local`
//! one reaches anything the user can).

pub mod holder;
pub mod inventory;
pub mod isolation;
pub mod lifecycle;
pub mod limits;

pub use isolation::{Isolation, ProviderKind, SandboxPlan, StartError};

use std::path::{Component, Path, PathBuf};

/// Why a path was refused or the sandbox could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    #[error("the sandbox root {root} cannot be opened: {reason}")]
    Root { root: String, reason: String },
    #[error("path {path:?} is outside the working directory {root}")]
    Escape { path: String, root: String },
    #[error(
        "path {path:?} goes through a symlink that points outside the working directory {root}"
    )]
    SymlinkEscape { path: String, root: String },
    #[error("path {path:?} has too many levels of symbolic links")]
    SymlinkLoop { path: String },
    #[error("path is empty")]
    Empty,
}

/// A directory that file tools are confined to.
#[derive(Debug, Clone)]
pub struct Sandbox {
    root: PathBuf,
    isolation: Isolation,
    /// The environment its processes start from (`None`: the clean allowlist alone).
    env: Option<std::sync::Arc<crate::procs::EnvSnapshot>>,
}

const MAX_LINKS: u32 = 32;

impl Sandbox {
    /// Opens a sandbox on an existing directory (canonicalised).
    pub fn new(root: impl AsRef<Path>) -> Result<Self, SandboxError> {
        let r = root.as_ref();
        let root = r.canonicalize().map_err(|e| SandboxError::Root {
            root: r.display().to_string(),
            reason: e.to_string(),
        })?;
        if !root.is_dir() {
            return Err(SandboxError::Root {
                root: root.display().to_string(),
                reason: "not a directory".into(),
            });
        }
        Ok(Self {
            root,
            isolation: Isolation::Local,
            env: None,
        })
    }

    /// The same sandbox with its processes started under `isolation`.
    pub fn with_isolation(mut self, isolation: Isolation) -> Self {
        self.isolation = isolation;
        self
    }

    /// The same sandbox with its processes starting from `env` (the run's
    /// `procs::EnvSnapshot::for_stages`); `None` keeps the clean allowlist alone.
    pub fn with_env(mut self, env: Option<std::sync::Arc<crate::procs::EnvSnapshot>>) -> Self {
        self.env = env;
        self
    }

    /// The environment the sandbox's processes start from, when the run gave one.
    pub fn env(&self) -> Option<&crate::procs::EnvSnapshot> {
        self.env.as_deref()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// How the sandbox's processes are started.
    pub fn isolation(&self) -> &Isolation {
        &self.isolation
    }

    /// A process in the sandbox's root (see [`Isolation::command`]).
    pub fn command(&self, program: &str) -> std::process::Command {
        self.isolation.command(program, &self.root)
    }

    /// Resolves a tool-supplied path (relative to the root, or absolute inside it) to an
    /// absolute path inside the root. The result's existing part has no symlink leading
    /// outside; a missing tail is fine (files to be created).
    pub fn resolve(&self, path: &str) -> Result<PathBuf, SandboxError> {
        if path.trim().is_empty() {
            return Err(SandboxError::Empty);
        }
        let p = Path::new(path);
        let joined = if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.root.join(p)
        };
        let escape = || SandboxError::Escape {
            path: path.to_string(),
            root: self.root.display().to_string(),
        };
        let normal = normalize(&joined).ok_or_else(escape)?;
        if !normal.starts_with(&self.root) {
            return Err(escape());
        }
        self.check_links(path, &normal, 0)?;
        Ok(normal)
    }

    /// Walks `normal` (lexically normal, inside the root) component by component and
    /// verifies every symlink on the way resolves inside the root.
    fn check_links(&self, orig: &str, normal: &Path, depth: u32) -> Result<(), SandboxError> {
        if depth > MAX_LINKS {
            return Err(SandboxError::SymlinkLoop {
                path: orig.to_string(),
            });
        }
        let outside = || SandboxError::SymlinkEscape {
            path: orig.to_string(),
            root: self.root.display().to_string(),
        };
        let Ok(rel) = normal.strip_prefix(&self.root) else {
            return Err(outside());
        };
        let mut cur = self.root.clone();
        let comps: Vec<Component> = rel.components().collect();
        for (i, c) in comps.iter().enumerate() {
            cur.push(c);
            let Ok(meta) = std::fs::symlink_metadata(&cur) else {
                // Missing: nothing below it exists either.
                return Ok(());
            };
            if !meta.file_type().is_symlink() {
                continue;
            }
            match cur.canonicalize() {
                Ok(real) => {
                    if !real.starts_with(&self.root) {
                        return Err(outside());
                    }
                    // Continue from the real location.
                    let mut rest = real;
                    for c in &comps[i + 1..] {
                        rest.push(c);
                    }
                    return self.check_links(orig, &rest, depth + 1);
                }
                Err(_) => {
                    // Dangling (or looping) link: follow its target lexically.
                    let target = std::fs::read_link(&cur).map_err(|_| outside())?;
                    let parent = cur.parent().unwrap_or(&self.root).to_path_buf();
                    let mut next = if target.is_absolute() {
                        target
                    } else {
                        parent.join(target)
                    };
                    for c in &comps[i + 1..] {
                        next.push(c);
                    }
                    let next = normalize(&next).ok_or_else(outside)?;
                    if !next.starts_with(&self.root) {
                        return Err(outside());
                    }
                    return self.check_links(orig, &next, depth + 1);
                }
            }
        }
        Ok(())
    }

    /// The path relative to the root, for messages (`.` for the root itself).
    pub fn display(&self, p: &Path) -> String {
        match p.strip_prefix(&self.root) {
            Ok(r) if r.as_os_str().is_empty() => ".".to_string(),
            Ok(r) => r.display().to_string(),
            Err(_) => p.display().to_string(),
        }
    }
}

/// Removes `.` and resolves `..` lexically; `None` if `..` climbs above the filesystem root.
fn normalize(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => out.push(c),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() || out.as_os_str().is_empty() {
                    return None;
                }
            }
            Component::Normal(s) => out.push(s),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_escapes() -> Result<(), Box<dyn std::error::Error>> {
        let outer = tempfile::tempdir()?;
        let root = outer.path().join("root");
        std::fs::create_dir_all(root.join("sub"))?;
        std::fs::write(outer.path().join("secret"), "s")?;
        let sb = Sandbox::new(&root)?;
        assert!(sb.resolve("sub/../a.txt").is_ok());
        assert!(sb.resolve("new/dir/file").is_ok());
        assert!(matches!(
            sb.resolve("../secret"),
            Err(SandboxError::Escape { .. })
        ));
        assert!(matches!(
            sb.resolve("sub/../../secret"),
            Err(SandboxError::Escape { .. })
        ));
        assert!(matches!(
            sb.resolve("/etc/passwd"),
            Err(SandboxError::Escape { .. })
        ));
        let inside = sb.root().join("sub/x");
        assert_eq!(sb.resolve(&inside.display().to_string())?, inside);
        std::os::unix::fs::symlink(outer.path(), root.join("out"))?;
        assert!(matches!(
            sb.resolve("out/secret"),
            Err(SandboxError::SymlinkEscape { .. })
        ));
        std::os::unix::fs::symlink(outer.path().join("nothing-yet"), root.join("dangling"))?;
        assert!(matches!(
            sb.resolve("dangling"),
            Err(SandboxError::SymlinkEscape { .. })
        ));
        std::os::unix::fs::symlink("sub", root.join("ok-link"))?;
        assert!(sb.resolve("ok-link/file").is_ok());
        std::os::unix::fs::symlink("loop2", root.join("loop1"))?;
        std::os::unix::fs::symlink("loop1", root.join("loop2"))?;
        assert!(sb.resolve("loop1/x").is_err());
        Ok(())
    }
}
