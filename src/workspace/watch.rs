//! Which paths of a work tree changed since the last look, from inotify (the `notify`
//! crate), so a checkpoint stages those paths instead of having git walk the whole tree.
//!
//! Owns: one watcher per workspace and the rule for when its answer can be trusted. Must
//! not touch: git (the caller stages the paths) or anything outside the work tree and its
//! git directory. Processes in a bubblewrap container write through a bind mount of the
//! same directory, so their changes raise the same inotify events.
//!
//! Trust: inotify delivers asynchronously, so [`Watch::changes`] writes a marker file into
//! the git directory and waits for its event; everything written before the marker is then
//! known. A queue overflow, a watcher error, a marker that never arrives, or a watch limit
//! reached makes the answer [`Changes::Unknown`], and the caller walks the whole tree.
//! Without the `watch` cargo feature (the slim library) there is no watcher and every
//! checkpoint walks the tree.
//!
//! Must not: decide what to commit (the checkpoint does; an unknown answer means walk the tree).

use std::collections::BTreeSet;
use std::path::PathBuf;

#[cfg(feature = "watch")]
pub use inotify::Watch;

/// What changed in the work tree since the previous [`Watch::changes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changes {
    /// These paths, relative to the work tree (files or folders, existing or not).
    Paths(BTreeSet<PathBuf>),
    /// The watcher cannot say: the whole tree must be looked at.
    Unknown,
}

#[cfg(feature = "watch")]
mod inotify {
    use super::Changes;
    use notify::event::{EventKind, ModifyKind};
    use notify::{Config, Event, RecursiveMode, Watcher};
    use std::collections::BTreeSet;
    use std::path::{Component, Path, PathBuf};
    use std::sync::mpsc::{Receiver, RecvTimeoutError};
    use std::time::{Duration, Instant};

    /// How long [`Watch::changes`] waits for its marker before giving up on the watcher's answer.
    const SYNC_TIMEOUT: Duration = Duration::from_secs(2);

    /// The name of the marker files in the git directory (`.<round>` appended: a round must
    /// not mistake the previous marker's late events for its own).
    const MARKER: &str = "svc-watch-sync";

    /// What one [`Watch::changes`] gathered.
    #[derive(Default)]
    struct Seen {
        paths: BTreeSet<PathBuf>,
        /// Folders appeared (created or moved in).
        new_folders: bool,
        /// New folders directly in the work tree, to be watched.
        top_folders: Vec<PathBuf>,
        /// The watcher lost events or failed.
        unknown: bool,
    }

    /// A running watcher over one work tree.
    pub struct Watch {
        watcher: notify::RecommendedWatcher,
        events: Receiver<notify::Result<Event>>,
        root: PathBuf,
        git_dir: PathBuf,
        /// The current marker.
        marker: PathBuf,
        rounds: u64,
        /// A watch limit was reached or the marker's folder could not be watched: every later
        /// answer is [`Changes::Unknown`].
        broken: bool,
    }

    impl Watch {
        /// Starts watching `work_tree` (its folders recursively, symlinks not followed, svc's
        /// `.git` left out: git's own writes there would only be noise) with the marker in
        /// `git_dir`. `None` when inotify is unavailable or the tree has more folders than the
        /// watch limit allows: the caller then always walks the tree.
        pub fn start(work_tree: &Path, git_dir: &Path) -> Option<Watch> {
            let (tx, events) = std::sync::mpsc::channel();
            let config = Config::default().with_follow_symlinks(false);
            let watcher = notify::RecommendedWatcher::new(tx, config)
                .map_err(|e| log::info!("workspace watcher unavailable: {e}"))
                .ok()?;
            let mut w = Watch {
                watcher,
                events,
                root: work_tree.to_path_buf(),
                git_dir: git_dir.to_path_buf(),
                marker: PathBuf::new(),
                rounds: 0,
                broken: false,
            };
            // The top folder alone (its files and which folders come and go), each folder in it
            // with everything below (new folders there are watched by the watcher itself).
            w.add(work_tree, RecursiveMode::NonRecursive).ok()?;
            w.add(git_dir, RecursiveMode::NonRecursive).ok()?;
            let entries = std::fs::read_dir(work_tree)
                .map_err(|e| log::info!("cannot list {}: {e}", work_tree.display()))
                .ok()?;
            for entry in entries.flatten() {
                let path = entry.path();
                if w.is_top_folder(&path) {
                    w.add(&path, RecursiveMode::Recursive).ok()?;
                }
            }
            Some(w)
        }

        fn add(&mut self, path: &Path, mode: RecursiveMode) -> Result<(), ()> {
            self.watcher.watch(path, mode).map_err(|e| {
                log::info!("cannot watch {}: {e}", path.display());
            })
        }

        /// A folder (not a symlink) directly in the work tree, other than `.git`.
        fn is_top_folder(&self, path: &Path) -> bool {
            path.parent() == Some(self.root.as_path())
                && path.file_name().is_some_and(|n| n != ".git")
                && path.symlink_metadata().is_ok_and(|m| m.is_dir())
        }

        /// The paths changed since the previous call (or since [`Watch::start`]).
        pub fn changes(&mut self) -> Changes {
            if self.broken {
                return Changes::Unknown;
            }
            let mut seen = Seen::default();
            if !self.sync(&mut seen) {
                return Changes::Unknown;
            }
            for folder in std::mem::take(&mut seen.top_folders) {
                if self.add(&folder, RecursiveMode::Recursive).is_err() {
                    self.broken = true;
                    return Changes::Unknown;
                }
            }
            // The watcher adds watches on new folders after handing out the batch that created
            // them; a second marker is read in a later batch, so those watches are in place and
            // nothing written into the new folders after the caller's walk can be missed.
            if seen.new_folders && !self.sync(&mut seen) {
                return Changes::Unknown;
            }
            if seen.unknown {
                return Changes::Unknown;
            }
            Changes::Paths(seen.paths)
        }

        /// Writes a marker and collects events until it is seen; false when it is not seen.
        fn sync(&mut self, seen: &mut Seen) -> bool {
            self.rounds += 1;
            let _ = std::fs::remove_file(&self.marker);
            self.marker = self.git_dir.join(format!("{MARKER}.{}", self.rounds));
            if std::fs::write(&self.marker, b"").is_err() {
                self.broken = true;
                return false;
            }
            let deadline = Instant::now() + SYNC_TIMEOUT;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let event = match self.events.recv_timeout(left) {
                    Ok(Ok(event)) => event,
                    Ok(Err(e)) => {
                        if matches!(e.kind, notify::ErrorKind::MaxFilesWatch) {
                            self.broken = true;
                        }
                        log::info!("workspace watcher error: {e}");
                        seen.unknown = true;
                        continue;
                    }
                    Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                        log::info!("workspace watcher did not answer; walking the whole tree");
                        return false;
                    }
                };
                if event.paths.contains(&self.marker) {
                    return true;
                }
                if event.need_rescan() {
                    seen.unknown = true;
                }
                if matches!(event.kind, EventKind::Access(_)) {
                    // Opening, reading or closing a file changes nothing.
                    continue;
                }
                let appeared = event.kind.is_create()
                    || matches!(event.kind, EventKind::Modify(ModifyKind::Name(_)));
                for p in &event.paths {
                    if appeared && p.is_dir() {
                        seen.new_folders = true;
                        if self.is_top_folder(p) {
                            seen.top_folders.push(p.clone());
                        }
                    }
                    if let Some(rel) = self.relative(p) {
                        seen.paths.insert(rel);
                    }
                }
            }
        }

        /// `p` relative to the work tree, with anything inside a `.git` folder folded to the
        /// folder holding it (svc's own `.git` is dropped: git writes there itself).
        fn relative(&self, p: &Path) -> Option<PathBuf> {
            let rel = p.strip_prefix(&self.root).ok()?;
            let mut out = PathBuf::new();
            for c in rel.components() {
                match c {
                    Component::Normal(n) if n == ".git" => break,
                    Component::Normal(n) => out.push(n),
                    _ => return None,
                }
            }
            (!out.as_os_str().is_empty()).then_some(out)
        }
    }

    impl Drop for Watch {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.marker);
        }
    }
}

/// Without the `watch` feature: no watcher, so [`Watch::start`] gives `None`.
#[cfg(not(feature = "watch"))]
pub struct Watch(std::convert::Infallible);

#[cfg(not(feature = "watch"))]
impl Watch {
    pub fn start(_work_tree: &std::path::Path, _git_dir: &std::path::Path) -> Option<Watch> {
        None
    }

    pub fn changes(&mut self) -> Changes {
        match self.0 {}
    }
}
