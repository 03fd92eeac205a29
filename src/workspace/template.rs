//! The empty repository every scratch workspace starts from: made once per process with
//! `git` (an `init` and an empty base commit), kept in memory as its files, and written into
//! each new scratch workspace's `.git` with the run's branch pointing at that base. A run
//! without a repository then costs a few small file writes instead of four `git` processes
//! (about 25 ms of a trivial run's 35).
//!
//! Every scratch run of one server process shares the base commit (same empty tree, same
//! author, same time); runs never compare base commits across runs, only within their own
//! history, so nothing can tell the difference.
//!
//! Owns: making, keeping and writing the template. Must not touch: a workspace that has
//! files (a copied directory gets a real `git init` + commit of its files), runs or the store.

use super::git::{self, Git};
use super::WorkspaceError;
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The template's files: relative path under `.git` and contents; directories to create
/// (empty ones included: git wants `refs/tags`, `objects/pack`); the base commit.
#[derive(Debug)]
struct Template {
    dirs: Vec<PathBuf>,
    files: Vec<(PathBuf, Vec<u8>)>,
    base: String,
}

/// The process's template, made on first use (again after a failure: a missing `git` may be
/// installed later).
static TEMPLATE: Mutex<Option<Arc<Template>>> = Mutex::new(None);

/// The branch the template is made on; its ref and its reflog are not copied.
const TEMPLATE_BRANCH: &str = "svc/template";

/// Makes `dest` (an existing empty directory) a repository on `branch` whose only commit is
/// the empty base; the base commit's id.
pub fn write_empty_history(dest: &Path, branch: &str) -> Result<String, WorkspaceError> {
    let template = template(dest.parent().unwrap_or(dest))?;
    let git_dir = dest.join(".git");
    let fail = |p: &Path, e: std::io::Error| {
        WorkspaceError::new(format!("cannot write the repository {}", p.display()), e)
    };
    for d in &template.dirs {
        let p = git_dir.join(d);
        std::fs::create_dir_all(&p).map_err(|e| fail(&p, e))?;
    }
    for (rel, bytes) in &template.files {
        let p = git_dir.join(rel);
        std::fs::write(&p, bytes).map_err(|e| fail(&p, e))?;
    }
    let reference = git_dir.join("refs/heads").join(branch);
    if let Some(parent) = reference.parent() {
        std::fs::create_dir_all(parent).map_err(|e| fail(parent, e))?;
    }
    std::fs::write(&reference, format!("{}\n", template.base)).map_err(|e| fail(&reference, e))?;
    let head = git_dir.join("HEAD");
    std::fs::write(&head, format!("ref: refs/heads/{branch}\n")).map_err(|e| fail(&head, e))?;
    Ok(template.base.clone())
}

/// The template, made under `scratch_parent` (in a folder removed right after) when this
/// process has none yet.
fn template(scratch_parent: &Path) -> Result<Arc<Template>, WorkspaceError> {
    let mut slot = TEMPLATE.lock();
    if let Some(t) = slot.as_ref() {
        return Ok(Arc::clone(t));
    }
    let dir = scratch_parent.join(format!(".svc-template-{}", crate::base::clock::new_ulid()));
    let made = make(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let t = Arc::new(made?);
    *slot = Some(Arc::clone(&t));
    Ok(t)
}

fn make(dir: &Path) -> Result<Template, WorkspaceError> {
    let fail = |e: git::GitError| {
        WorkspaceError::new(
            "cannot make the empty repository scratch workspaces start from",
            e,
        )
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| WorkspaceError::new(format!("cannot create {}", dir.display()), e))?;
    let g = Git::new(dir);
    g.run(&["init", "--quiet", "--initial-branch", TEMPLATE_BRANCH])
        .map_err(fail)?;
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
    let git_dir = dir.join(".git");
    let mut t = Template {
        dirs: Vec::new(),
        files: Vec::new(),
        base,
    };
    collect(&git_dir, Path::new(""), &mut t).map_err(|e| {
        WorkspaceError::new(format!("cannot read the template {}", git_dir.display()), e)
    })?;
    Ok(t)
}

/// Whether a template path is the run's own (written per run, or not at all).
fn per_run(rel: &Path) -> bool {
    rel == Path::new("HEAD")
        || rel == Path::new("COMMIT_EDITMSG")
        || rel.starts_with("logs")
        || rel.starts_with(Path::new("refs/heads").join(TEMPLATE_BRANCH))
}

fn collect(root: &Path, rel: &Path, t: &mut Template) -> std::io::Result<()> {
    t.dirs.push(rel.to_path_buf());
    for entry in std::fs::read_dir(root.join(rel))? {
        let entry = entry?;
        let sub = rel.join(entry.file_name());
        if per_run(&sub) {
            continue;
        }
        let kind = entry.file_type()?;
        if kind.is_dir() {
            collect(root, &sub, t)?;
        } else if kind.is_file() {
            t.files.push((sub.clone(), std::fs::read(root.join(&sub))?));
        }
    }
    Ok(())
}
