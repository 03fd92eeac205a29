//! Run workspaces: where a run's files come from (a repository cloned on a run branch, a
//! directory cloned or copied, the directory itself with `in_place`, or an empty scratch
//! folder), the per-stage checkpoints as git commits, restoring one, and diffs against the
//! run's base.
//!
//! Owns: preparing the workspace directory, the run branch `svc/run/<id>`, checkpoint
//! commits (author `svc`), [`diff`]. Must not touch: processes other than `git`, the store,
//! HTTP. The user's own checkout and the origin are never written: clones are made from
//! them, and an `in_place` workspace keeps svc's history in a git directory of its own.

pub mod diff;
pub mod git;
pub mod template;
pub mod versioned;
pub mod watch;

use diff::{DiffSummary, FileChange};
pub use git::{Git, GitError};
use serde_json::json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use versioned::WorkspaceCheckpoint;

/// Where a run's files come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An empty folder.
    Scratch,
    /// `git clone origin_url`, at `branch` or the default branch.
    Repository {
        origin_url: String,
        branch: Option<String>,
    },
    /// A directory on the server host: cloned when it is a git work tree, else copied;
    /// `in_place` works in the directory itself.
    Directory { path: PathBuf, in_place: bool },
    /// Another run's workspace history (its git directory `from`) at `commit`, with that
    /// run's `base`: a run rewound to a stage starts from the checkpoint before it.
    Rewind {
        from: PathBuf,
        commit: String,
        base: String,
    },
}

/// Why a workspace could not be made: `error` for people, `causes` most specific last.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct WorkspaceError {
    pub error: String,
    pub causes: Vec<String>,
}

impl WorkspaceError {
    fn new(error: impl Into<String>, cause: impl std::fmt::Display) -> WorkspaceError {
        WorkspaceError {
            error: error.into(),
            causes: vec![cause.to_string()],
        }
    }
}

/// A ready workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    pub git: Git,
    /// The commit the run started from (its changes are diffed against it).
    pub base: String,
    pub branch: String,
    pub repo_cloned: bool,
    pub clone_origin_url: Option<String>,
    pub clone_branch: Option<String>,
    /// False for `in_place`: the directory is the user's and is never removed.
    pub owned: bool,
}

/// SPEC 2.3 RepositoryRef provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RepoProvider {
    /// A code host svc knows (GitHub, GitLab, Bitbucket, Codeberg).
    Codehost,
    /// Any other git URL or local repository.
    Git,
    /// Not a git repository.
    Unknown,
}

const CODE_HOSTS: [&str; 4] = ["github.com", "gitlab.com", "bitbucket.org", "codeberg.org"];

/// `owner/repo` and the provider of an origin URL (`https://host/owner/repo(.git)`,
/// `git@host:owner/repo.git`, `ssh://...`); for `file://` URLs and paths, the folder name.
pub fn repository_name(origin: &str) -> (String, RepoProvider) {
    let trimmed = origin.trim().trim_end_matches('/');
    let trimmed = trimmed.strip_suffix(".git").unwrap_or(trimmed);
    let (host, path) = if let Some(rest) = trimmed.split_once("://").map(|(_, r)| r) {
        if trimmed.starts_with("file://") {
            ("", rest)
        } else {
            let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
            rest.split_once('/').unwrap_or((rest, ""))
        }
    } else if let Some((h, p)) = trimmed.split_once(':').filter(|(h, _)| !h.contains('/')) {
        (h.rsplit_once('@').map_or(h, |(_, h)| h), p)
    } else {
        ("", trimmed)
    };
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    if host.is_empty() {
        let name = parts.last().copied().unwrap_or("unknown").to_string();
        return (name, RepoProvider::Git);
    }
    let host = host.split(':').next().unwrap_or(host).to_ascii_lowercase();
    let name = match parts.as_slice() {
        [.., owner, repo] => format!("{owner}/{repo}"),
        [repo] => repo.to_string(),
        [] => "unknown".to_string(),
    };
    let provider = if CODE_HOSTS.contains(&host.as_str()) {
        RepoProvider::Codehost
    } else {
        RepoProvider::Git
    };
    (name, provider)
}

/// The run branch of `run_id`.
pub fn run_branch(run_id: &str) -> String {
    format!("svc/run/{}", run_id.to_ascii_lowercase())
}

/// Where the separate git directory of an in-place workspace lives, beside `dest`.
fn side_git_dir(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(".git");
    dest.with_file_name(name)
}

/// Makes the workspace of run `run_id` at `dest` (which must not exist yet; for
/// `in_place` only its sibling git directory is created).
pub fn prepare(source: &Source, run_id: &str, dest: &Path) -> Result<Workspace, WorkspaceError> {
    prepare_with(source, run_id, dest, &[])
}

/// [`prepare`], cloning with `clone_env` added to the `git clone` process's environment
/// only (a code host's credential as `GIT_CONFIG_*` variables): nothing of it is written
/// to the clone.
pub fn prepare_with(
    source: &Source,
    run_id: &str,
    dest: &Path,
    clone_env: &[(String, String)],
) -> Result<Workspace, WorkspaceError> {
    let branch = run_branch(run_id);
    match source {
        Source::Scratch => {
            std::fs::create_dir_all(dest)
                .map_err(|e| WorkspaceError::new(format!("cannot create {}", dest.display()), e))?;
            // An empty folder needs no `git init` + commit of its own: the process's
            // template repository is written in (`template`).
            let base = template::write_empty_history(dest, &branch)?;
            Ok(Workspace {
                git: Git::new(dest),
                base,
                branch,
                repo_cloned: false,
                clone_origin_url: None,
                clone_branch: None,
                owned: true,
            })
        }
        Source::Repository {
            origin_url,
            branch: b,
        } => clone(origin_url, b.as_deref(), dest, &branch, clone_env),
        Source::Directory { path, in_place } => {
            if !path.is_dir() {
                return Err(WorkspaceError::new(
                    format!("source_directory {} is not a directory", path.display()),
                    "it does not exist on the server host or is not a folder",
                ));
            }
            if *in_place {
                let git = Git {
                    work_tree: path.clone(),
                    git_dir: Some(side_git_dir(dest)),
                };
                let mut ws = fresh_history(git, &branch, false)?;
                ws.owned = false;
                Ok(ws)
            } else if Git::is_repository(path) {
                let mut ws = clone(&path.display().to_string(), None, dest, &branch, &[])?;
                ws.clone_origin_url = Some(path.display().to_string());
                Ok(ws)
            } else {
                copy_dir(path, dest)?;
                fresh_history(Git::new(dest), &branch, true)
            }
        }
        Source::Rewind { from, commit, base } => rewound(from, commit, base, dest, &branch),
    }
}

/// A clone of another run's workspace history, checked out at `commit` on `run_branch`.
fn rewound(
    from: &Path,
    commit: &str,
    base: &str,
    dest: &Path,
    run_branch: &str,
) -> Result<Workspace, WorkspaceError> {
    let origin = from.display().to_string();
    let mut cmd = git::bare_command();
    cmd.args(["clone", "--quiet", "--no-tags", "--no-checkout", "--"])
        .arg(from)
        .arg(dest);
    git::run(cmd, "clone").map_err(|e| {
        WorkspaceError::new(format!("cannot copy the history of {origin}"), e.detail)
    })?;
    let g = Git::new(dest);
    g.run(&["checkout", "--quiet", "-b", run_branch, commit])
        .map_err(|e| WorkspaceError::new(format!("cannot check out checkpoint {commit}"), e))?;
    Ok(Workspace {
        git: g,
        base: base.to_string(),
        branch: run_branch.to_string(),
        repo_cloned: false,
        clone_origin_url: None,
        clone_branch: None,
        owned: true,
    })
}

/// Re-opens the workspace of an earlier [`prepare`] (a resumed run).
pub fn reopen(dest: &Path, source: &Source, run_id: &str) -> Option<Git> {
    let git = match source {
        Source::Directory {
            path,
            in_place: true,
        } => Git {
            work_tree: path.clone(),
            git_dir: Some(side_git_dir(dest)),
        },
        _ => Git::new(dest),
    };
    let branch = run_branch(run_id);
    let current = git.text(&["rev-parse", "--abbrev-ref", "HEAD"]).ok()?;
    (current == branch).then_some(git)
}

fn clone(
    origin: &str,
    branch: Option<&str>,
    dest: &Path,
    run_branch: &str,
    env: &[(String, String)],
) -> Result<Workspace, WorkspaceError> {
    let mut cmd = git::bare_command();
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    cmd.args(["clone", "--quiet", "--no-tags"]);
    if let Some(b) = branch {
        cmd.args(["--branch", b]);
    }
    cmd.arg("--").arg(origin).arg(dest);
    git::run(cmd, "clone")
        .map_err(|e| WorkspaceError::new(format!("cannot clone {origin}"), e.detail))?;
    let g = Git::new(dest);
    let fail =
        |e: GitError| WorkspaceError::new(format!("cannot prepare the clone of {origin}"), e);
    let clone_branch = match branch {
        Some(b) => b.to_string(),
        None => g
            .text(&["rev-parse", "--abbrev-ref", "HEAD"])
            .map_err(fail)?,
    };
    g.run(&["checkout", "--quiet", "-b", run_branch])
        .map_err(fail)?;
    let base = g.head().map_err(fail)?;
    Ok(Workspace {
        git: g,
        base,
        branch: run_branch.to_string(),
        repo_cloned: true,
        clone_origin_url: Some(origin.to_string()),
        clone_branch: Some(clone_branch),
        owned: true,
    })
}

/// A new repository whose first commit (the base) holds the files as they are.
fn fresh_history(g: Git, branch: &str, owned: bool) -> Result<Workspace, WorkspaceError> {
    let fail = |e: GitError| {
        WorkspaceError::new(
            format!("cannot version the workspace {}", g.work_tree.display()),
            e,
        )
    };
    let mut init = g.command(&["init", "--quiet", "--initial-branch", branch]);
    if let Some(d) = &g.git_dir {
        // `init` with --git-dir creates that directory; the work tree stays the user's.
        init = git::bare_command();
        init.current_dir(&g.work_tree)
            .arg("--git-dir")
            .arg(d)
            .arg("--work-tree")
            .arg(&g.work_tree)
            .args(["init", "--quiet", "--initial-branch", branch]);
    }
    git::run(init, "init").map_err(fail)?;
    g.run(&["add", "--all"]).map_err(fail)?;
    g.run(&[
        "commit",
        "--quiet",
        "--no-verify",
        "--allow-empty",
        "-m",
        "svc: base",
    ])
    .map_err(fail)?;
    let base = g.head().map_err(fail)?;
    Ok(Workspace {
        git: g,
        base,
        branch: branch.to_string(),
        repo_cloned: false,
        clone_origin_url: None,
        clone_branch: None,
        owned,
    })
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), WorkspaceError> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| WorkspaceError::new(format!("cannot create {}", parent.display()), e))?;
    }
    let out = std::process::Command::new("cp")
        .arg("-a")
        .arg("--")
        .arg(from)
        .arg(to)
        .output()
        .map_err(|e| WorkspaceError::new("cannot run cp", e))?;
    if !out.status.success() {
        return Err(WorkspaceError::new(
            format!("cannot copy {} to the workspace", from.display()),
            String::from_utf8_lossy(&out.stderr).trim(),
        ));
    }
    Ok(())
}

/// Commits everything in the work tree as a checkpoint of `stage`; `None` when nothing
/// changed since the last one. Walks the whole work tree (see [`EngineWorkspace`] for the
/// watched, faster way).
pub fn checkpoint(g: &Git, stage: &str) -> Result<Option<String>, GitError> {
    stage_all(g)?;
    commit_index(g, stage, None).map(|c| c.map(|c| c.id))
}

/// `git add --all`: the index made equal to the work tree (ignored files left out).
fn stage_all(g: &Git) -> Result<(), GitError> {
    g.run(&["add", "--all"]).map(|_| ())
}

/// Stages only `paths` (relative to the work tree; files or folders, existing or not, none
/// inside another: see [`outermost`]),
/// with the same result as [`stage_all`] when they are all that changed. Paths that no
/// longer exist leave the index with `rm --cached` (folders recursively, unknown ones
/// skipped); the rest go through `add --all -- <paths>`, which walks named folders and
/// skips ignored files in them. An ignored path named explicitly makes `add` fail: then the
/// ignored ones are dropped with `check-ignore` and the rest staged again.
fn stage_paths(g: &Git, paths: &[PathBuf]) -> Result<(), GitError> {
    let (present, gone): (Vec<&PathBuf>, Vec<&PathBuf>) = paths
        .iter()
        .partition(|p| g.work_tree.join(p).symlink_metadata().is_ok());
    if !gone.is_empty() {
        let list = nul_list(&gone, true);
        g.run_with_input(
            &[
                "rm",
                "-r",
                "--cached",
                "--ignore-unmatch",
                "-f",
                "-q",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
            ],
            &list,
        )?;
    }
    if present.is_empty() {
        return Ok(());
    }
    let add = [
        "add",
        "--all",
        "--pathspec-from-file=-",
        "--pathspec-file-nul",
    ];
    if g.run_with_input(&add, &nul_list(&present, true)).is_ok() {
        return Ok(());
    }
    let ignored = g.run_with_input(
        &["check-ignore", "-z", "--stdin"],
        &nul_list(&present, false),
    );
    // check-ignore exits 1 when nothing is ignored.
    let ignored: BTreeSet<Vec<u8>> = match ignored {
        Ok(out) => out.split(|b| *b == 0).map(<[u8]>::to_vec).collect(),
        Err(_) => BTreeSet::new(),
    };
    let rest: Vec<&PathBuf> = present
        .into_iter()
        .filter(|p| !ignored.contains(p.as_os_str().as_encoded_bytes()))
        .collect();
    if rest.is_empty() {
        return Ok(());
    }
    g.run_with_input(&add, &nul_list(&rest, true)).map(|_| ())
}

/// The paths not inside another of them (a folder named covers everything below it), in
/// order.
fn outermost(paths: BTreeSet<PathBuf>) -> Vec<PathBuf> {
    let mut kept: Vec<PathBuf> = Vec::new();
    for p in paths {
        if !kept.last().is_some_and(|k| p.starts_with(k)) {
            kept.push(p);
        }
    }
    kept
}

/// Paths as NUL-separated input: pathspecs taken literally (`--pathspec-file-nul`), or
/// plain paths (`check-ignore -z --stdin`).
fn nul_list(paths: &[&PathBuf], pathspecs: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for p in paths {
        if pathspecs {
            out.extend_from_slice(b":(literal)");
        }
        out.extend_from_slice(p.as_os_str().as_encoded_bytes());
        out.push(0);
    }
    out
}

/// A commit and its tree.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Commit {
    id: String,
    tree: String,
}

/// Commits the index on `HEAD` (known as `head`, else asked) as a checkpoint of `stage`;
/// `None` when its tree is `HEAD`'s. Plumbing (`write-tree`, `commit-tree`, `update-ref`)
/// rather than `git commit`, which would refresh every file of the index again.
fn commit_index(g: &Git, stage: &str, head: Option<Commit>) -> Result<Option<Commit>, GitError> {
    let tree = g.text(&["write-tree"])?;
    let parent = match head {
        Some(h) => h,
        None => head_commit(g)?,
    };
    if parent.tree == tree {
        return Ok(None);
    }
    let id = commit_tree(g, &tree, &parent.id, stage)?;
    Ok(Some(Commit { id, tree }))
}

/// Commits `tree` on `parent` as the checkpoint of `stage` and moves `HEAD` (the run
/// branch) to it, only if it still names `parent`.
fn commit_tree(g: &Git, tree: &str, parent: &str, stage: &str) -> Result<String, GitError> {
    let message = format!("svc: checkpoint after stage {stage}");
    let id = g.text(&["commit-tree", tree, "-p", parent, "-m", &message])?;
    g.run(&["update-ref", "-m", &message, "HEAD", &id, parent])?;
    Ok(id)
}

/// `HEAD` and the tree of `base`, in one `rev-parse`.
fn heads(g: &Git, base: &str) -> Result<(Commit, String), GitError> {
    let base_tree = format!("{base}^{{tree}}");
    let out = g.text(&["rev-parse", "HEAD", "HEAD^{tree}", &base_tree])?;
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    match lines.as_slice() {
        [id, tree, base_tree] => Ok((
            Commit {
                id: id.to_string(),
                tree: tree.to_string(),
            },
            base_tree.to_string(),
        )),
        _ => Err(GitError {
            args: "rev-parse HEAD".into(),
            detail: format!("unexpected answer {out:?}"),
        }),
    }
}

fn head_commit(g: &Git) -> Result<Commit, GitError> {
    let heads = g.text(&["rev-parse", "HEAD", "HEAD^{tree}"])?;
    let mut lines = heads.lines();
    match (lines.next(), lines.next()) {
        (Some(id), Some(tree)) => Ok(Commit {
            id: id.trim().to_string(),
            tree: tree.trim().to_string(),
        }),
        _ => Err(GitError {
            args: "rev-parse HEAD".into(),
            detail: format!("unexpected answer {heads:?}"),
        }),
    }
}

/// Puts the work tree back to commit `id` (tracked files reset, new files removed; ignored
/// files are left alone).
pub fn restore(g: &Git, id: &str) -> Result<(), GitError> {
    g.run(&["reset", "--quiet", "--hard", id])?;
    g.run(&["clean", "--quiet", "-fd"])?;
    Ok(())
}

/// Whether `id` is a checkpoint of the run: a commit after `base` on the run branch.
pub fn is_checkpoint(g: &Git, base: &str, id: &str) -> bool {
    if id.len() < 4 || !id.chars().all(|c| c.is_ascii_hexdigit()) {
        return false;
    }
    let Ok(full) = g.text(&[
        "rev-parse",
        "--verify",
        "--quiet",
        &format!("{id}^{{commit}}"),
    ]) else {
        return false;
    };
    g.text(&["rev-list", &format!("{base}..HEAD")])
        .is_ok_and(|list| list.lines().any(|l| l == full))
}

/// The engine's view of a workspace: checkpoints after stages, restore on resume.
///
/// A checkpoint stages only what the workspace's [`watch::Watch`] saw change since the
/// previous one; it walks the whole tree (`git add --all`) the first time, after a restore,
/// and whenever the watcher cannot vouch for its answer. The latest checkpoint is kept in
/// memory so committing needs no `rev-parse`, and both diff figures come from one
/// `git diff-tree --stdin` over trees, run while the commit is made.
pub struct EngineWorkspace {
    pub git: Git,
    pub base: String,
    state: parking_lot::Mutex<WatchState>,
}

struct WatchState {
    watch: Option<watch::Watch>,
    /// The index matched the work tree when the watcher last synced: its paths suffice.
    indexed: bool,
    head: Option<Commit>,
    /// The tree of the run's base commit, once asked.
    base_tree: Option<String>,
    /// The run's changed files as of `head` (none until a checkpoint counted them all).
    run_files: Option<diff::RunFiles>,
    last: Scan,
}

/// How the last checkpoint found the changed files (for tests and benchmarks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    None,
    /// `git add --all` over the whole tree.
    Full,
    /// Only this many paths the watcher reported.
    Paths(usize),
}

impl EngineWorkspace {
    /// Starts watching the work tree (see [`watch::Watch::start`]).
    pub fn new(git: Git, base: String) -> EngineWorkspace {
        let git_dir = git
            .git_dir
            .clone()
            .unwrap_or_else(|| git.work_tree.join(".git"));
        let watch = watch::Watch::start(&git.work_tree, &git_dir);
        EngineWorkspace {
            git,
            base,
            state: parking_lot::Mutex::new(WatchState {
                watch,
                indexed: false,
                head: None,
                base_tree: None,
                run_files: None,
                last: Scan::None,
            }),
        }
    }

    /// How the last checkpoint found the changed files.
    pub fn last_scan(&self) -> Scan {
        self.state.lock().last
    }

    /// Stages what changed; the watched paths it staged (none inside another), or `None`
    /// when it walked the tree.
    fn stage(&self, st: &mut WatchState) -> Result<Option<Vec<PathBuf>>, GitError> {
        let changes = match st.watch.as_mut() {
            Some(w) => w.changes(),
            None => watch::Changes::Unknown,
        };
        let trusted = std::mem::replace(&mut st.indexed, false);
        let watched = match changes {
            watch::Changes::Paths(p) if trusted => {
                st.last = Scan::Paths(p.len());
                let p = outermost(p);
                stage_paths(&self.git, &p)?;
                Some(p)
            }
            _ => {
                st.last = Scan::Full;
                stage_all(&self.git)?;
                None
            }
        };
        st.indexed = true;
        Ok(watched)
    }
}

/// Whether `limit` can go on a command line as pathspecs (else the diffs take the whole
/// trees): a stage that touched thousands of paths is cheaper to diff whole anyway.
fn limit_fits(limit: &[&Path]) -> bool {
    const MAX_PATHS: usize = 1000;
    const MAX_BYTES: usize = 64 * 1024;
    let bytes: usize = limit.iter().map(|p| p.as_os_str().len() + 1).sum();
    limit.len() <= MAX_PATHS && bytes <= MAX_BYTES
}

fn summary_json(s: DiffSummary) -> serde_json::Value {
    json!({"files_changed": s.files_changed, "additions": s.additions, "deletions": s.deletions})
}

/// The DiffSummary of `from..to`.
pub fn summary(g: &Git, from: &str, to: &str) -> Result<DiffSummary, GitError> {
    diff::changes(g, from, to).map(|c: Vec<FileChange>| DiffSummary::of(&c))
}

impl versioned::Workspace for EngineWorkspace {
    fn checkpoint(&self, stage: &str) -> Result<Option<WorkspaceCheckpoint>, String> {
        let mut st = self.state.lock();
        let watched = self.stage(&mut st).map_err(|e| e.to_string())?;
        let run_files = st.run_files.take();
        let (parent, base_tree) = match (st.head.take(), st.base_tree.take()) {
            (Some(h), Some(b)) => (h, b),
            _ => heads(&self.git, &self.base).map_err(|e| e.to_string())?,
        };
        st.base_tree = Some(base_tree.clone());
        let tree = self.git.text(&["write-tree"]).map_err(|e| e.to_string())?;
        if tree == parent.tree {
            st.head = Some(parent);
            return Ok(None);
        }
        // Committing and counting both need only the trees: they run side by side.
        let git = self.git.clone();
        let (parent_id, new_tree, stage) = (parent.id.clone(), tree.clone(), stage.to_string());
        let commit = std::thread::spawn(move || commit_tree(&git, &new_tree, &parent_id, &stage));
        let pairs = [
            (parent.tree.as_str(), tree.as_str()),
            (base_tree.as_str(), tree.as_str()),
        ];
        // With the run's files known, both diffs need only the paths this stage touched.
        let limit: Vec<&Path> = match (&watched, &run_files) {
            (Some(paths), Some(_)) => paths.iter().map(PathBuf::as_path).collect(),
            _ => Vec::new(),
        };
        let limit = if limit_fits(&limit) {
            limit
        } else {
            Vec::new()
        };
        let files = diff::pair_files(&self.git, &pairs, &limit);
        let id = match commit.join() {
            Ok(r) => r.map_err(|e| e.to_string())?,
            Err(_) => return Err("the checkpoint commit failed".to_string()),
        };
        st.head = Some(Commit {
            id: id.clone(),
            tree,
        });
        let files = files.map_err(|e| e.to_string())?;
        let Ok([stage_files, base_files]) = <[diff::PairFiles; 2]>::try_from(files) else {
            return Err("git diff-tree did not answer for both tree pairs".to_string());
        };
        let run_files = match run_files {
            Some(mut known) if !limit.is_empty() => {
                known.update_under(&limit, base_files);
                known
            }
            _ => diff::RunFiles::new(base_files),
        };
        let stage_diff = diff::summary_of(&stage_files);
        let run_diff = run_files.summary();
        st.run_files = Some(run_files);
        Ok(Some(WorkspaceCheckpoint {
            id,
            stage_diff: summary_json(stage_diff),
            run_diff: summary_json(run_diff),
        }))
    }

    fn head(&self) -> Option<String> {
        self.git.head().ok()
    }

    fn restore(&self, id: &str) -> Result<(), String> {
        let mut st = self.state.lock();
        // The next checkpoint walks the whole tree and asks git where HEAD is.
        st.indexed = false;
        st.head = None;
        st.base_tree = None;
        st.run_files = None;
        restore(&self.git, id).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests;
