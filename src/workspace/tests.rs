//! Workspaces against real git repositories made in temporary directories.
//! Must not: touch a repository outside a temporary directory.

use super::*;
use crate::test_tools::{require, Tool};
use std::process::Command;

fn sh(dir: &Path, script: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// A bare origin with one commit on `main` and one on `dev`.
fn origin(root: &Path) -> PathBuf {
    sh(
        root,
        "git init -q -b main src && cd src && echo one > a.txt && git add . && git commit -qm one \
         && git checkout -qb dev && echo dev > d.txt && git add . && git commit -qm dev \
         && git checkout -q main && cd .. && git clone -q --bare src origin.git",
    );
    root.join("origin.git")
}

/// A clone of a fresh [`origin`] (default branch) prepared as run `run_id`'s workspace
/// under `root/ws`.
#[cfg(feature = "watch")]
fn cloned(root: &Path, run_id: &str) -> (PathBuf, Workspace) {
    let origin = origin(root);
    let dest = root.join("ws");
    let source = Source::Repository {
        origin_url: format!("file://{}", origin.display()),
        branch: None,
    };
    let ws = prepare(&source, run_id, &dest).unwrap();
    (dest, ws)
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn clones_on_a_run_branch_checkpoints_and_restores() {
    require(Tool::Git);
    let tmp = tempfile::tempdir().unwrap();
    let origin = origin(tmp.path());
    let url = format!("file://{}", origin.display());
    let refs_before = sh(&origin, "git show-ref");
    let dest = tmp.path().join("ws");
    let ws = prepare(
        &Source::Repository {
            origin_url: url.clone(),
            branch: Some("dev".into()),
        },
        "01ABC",
        &dest,
    )
    .unwrap();
    assert!(ws.repo_cloned);
    assert_eq!(ws.clone_branch.as_deref(), Some("dev"));
    assert_eq!(ws.branch, "svc/run/01abc");
    assert!(dest.join("d.txt").exists());

    std::fs::write(dest.join("a.txt"), "one\ntwo\n").unwrap();
    std::fs::write(dest.join("new.txt"), "x\n").unwrap();
    std::fs::remove_file(dest.join("d.txt")).unwrap();
    let first = checkpoint(&ws.git, "edit").unwrap().unwrap();
    assert_eq!(checkpoint(&ws.git, "noop").unwrap(), None);
    let s = summary(&ws.git, &ws.base, &first).unwrap();
    let numstat = sh(&dest, &format!("git diff --numstat {} {first}", ws.base));
    let (adds, dels) = numstat.lines().fold((0, 0), |(a, d), l| {
        let mut it = l.split('\t');
        (
            a + it.next().unwrap().parse::<u64>().unwrap(),
            d + it.next().unwrap().parse::<u64>().unwrap(),
        )
    });
    assert_eq!(
        (s.files_changed, s.additions, s.deletions),
        (numstat.lines().count() as u64, adds, dels)
    );
    let log = sh(&dest, "git log -1 --format=%an%n%s");
    assert_eq!(log, "svc\nsvc: checkpoint after stage edit\n");

    std::fs::write(dest.join("later.txt"), "later").unwrap();
    checkpoint(&ws.git, "later").unwrap().unwrap();
    std::fs::write(dest.join("stray.txt"), "uncommitted").unwrap();
    restore(&ws.git, &first).unwrap();
    assert!(!dest.join("later.txt").exists());
    assert!(!dest.join("stray.txt").exists());
    assert_eq!(
        std::fs::read_to_string(dest.join("a.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert!(is_checkpoint(&ws.git, &ws.base, &first));
    assert!(!is_checkpoint(&ws.git, &ws.base, &ws.base));

    // The origin never saw the run branch or the commits.
    assert_eq!(sh(&origin, "git show-ref"), refs_before);
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn directories_are_copied_or_used_in_place_without_touching_their_git() {
    require(Tool::Git);
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("plain");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("sub/f.txt"), "f").unwrap();
    let dest = tmp.path().join("ws");
    let ws = prepare(
        &Source::Directory {
            path: src.clone(),
            in_place: false,
        },
        "R1",
        &dest,
    )
    .unwrap();
    assert!(!ws.repo_cloned && ws.owned);
    assert!(dest.join("sub/f.txt").exists());
    assert!(
        !src.join(".git").exists(),
        "the source was not made a repository"
    );

    // In place: a user's repository keeps its own HEAD and history.
    let user = tmp.path().join("user");
    std::fs::create_dir_all(&user).unwrap();
    sh(
        &user,
        "git init -q -b main && echo u > u.txt && git add . && git commit -qm u",
    );
    let head_before = sh(&user, "git rev-parse HEAD");
    let dest2 = tmp.path().join("ws2");
    let ws2 = prepare(
        &Source::Directory {
            path: user.clone(),
            in_place: true,
        },
        "R2",
        &dest2,
    )
    .unwrap();
    assert!(!ws2.owned);
    std::fs::write(user.join("u.txt"), "changed\n").unwrap();
    let cp = checkpoint(&ws2.git, "s").unwrap().unwrap();
    let s = summary(&ws2.git, &ws2.base, &cp).unwrap();
    assert_eq!(s.files_changed, 1);
    assert_eq!(sh(&user, "git rev-parse HEAD"), head_before);
    assert_eq!(
        sh(&user, "git branch --format='%(refname:short)'"),
        "main\n"
    );
    assert!(reopen(
        &dest2,
        &Source::Directory {
            path: user,
            in_place: true
        },
        "R2"
    )
    .is_some());
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn file_contents_come_from_blobs() {
    require(Tool::Git);
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("ws");
    let ws = prepare(&Source::Scratch, "R3", &dest).unwrap();
    std::fs::write(dest.join("t.txt"), "hello\n").unwrap();
    std::fs::write(dest.join("b.bin"), [0u8, 1, 2, 0, 255]).unwrap();
    let cp = checkpoint(&ws.git, "s").unwrap().unwrap();
    let changes = diff::changes(&ws.git, &ws.base, &cp).unwrap();
    assert_eq!(changes.len(), 2);
    let bin = &changes[0];
    assert!(bin.binary && bin.path == "b.bin");
    let blobs: Vec<Option<&str>> = changes
        .iter()
        .flat_map(|c| [c.old_blob.as_deref(), c.new_blob.as_deref()])
        .collect();
    let texts = diff::contents(&ws.git, &blobs).unwrap();
    assert_eq!(texts, vec!["", "", "", "hello\n"]);
}

#[test]
fn repository_names_from_origins() {
    let cases = [
        (
            "https://github.com/acme/api.git",
            "acme/api",
            RepoProvider::Codehost,
        ),
        (
            "git@github.com:acme/web.git",
            "acme/web",
            RepoProvider::Codehost,
        ),
        (
            "ssh://git@git.example.com:2222/team/tool",
            "team/tool",
            RepoProvider::Git,
        ),
        ("file:///srv/repos/origin.git", "origin", RepoProvider::Git),
        ("/home/me/project/", "project", RepoProvider::Git),
    ];
    for (url, name, provider) in cases {
        assert_eq!(repository_name(url), (name.to_string(), provider), "{url}");
    }
}

/// After a checkpoint the run branch holds the work tree exactly: `git status` (its own walk
/// of the whole tree) has nothing to report.
#[cfg(feature = "watch")]
fn assert_all_committed(dest: &Path, what: &str) {
    let status = sh(dest, "git status --porcelain --untracked-files=all");
    assert_eq!(status, "", "{what}: left out of the checkpoint");
}

#[test]
#[cfg(feature = "watch")]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn watched_checkpoints_capture_every_kind_of_change() {
    use crate::workspace::versioned::Workspace as _;
    require(Tool::Git);
    let tmp = tempfile::tempdir().unwrap();
    let (dest, ws) = cloned(tmp.path(), "01W");
    let ews = EngineWorkspace::new(ws.git.clone(), ws.base.clone());
    std::fs::write(dest.join(".gitignore"), "build/\n*.log\n").unwrap();
    ews.checkpoint("first").unwrap().unwrap();
    assert_eq!(
        ews.last_scan(),
        Scan::Full,
        "the first checkpoint walks the tree"
    );
    assert_all_committed(&dest, "first");

    let steps: Vec<(&str, &str)> = vec![
        ("modify", "echo more >> a.txt"),
        (
            "new nested folders",
            "mkdir -p n1/n2/n3 && echo deep > n1/n2/n3/f.txt && echo x > n1/top.txt",
        ),
        (
            "write into the new folder later",
            "echo later > n1/n2/later.txt",
        ),
        ("delete", "rm a.txt"),
        ("rename a file", "mv n1/top.txt moved.txt"),
        ("rename a folder", "mv n1 renamed"),
        (
            "write in the renamed folder",
            "echo again >> renamed/n2/n3/f.txt",
        ),
        ("delete a folder", "rm -r renamed/n2"),
        (
            "atomic write via a temp file",
            "echo atomic > .tmp-1 && mv .tmp-1 atomic.txt",
        ),
        (
            "temp file made and removed",
            "echo t > gone.txt && rm gone.txt && echo kept > kept.txt",
        ),
        (
            "ignored files beside a real change",
            "mkdir -p build && echo o > build/out.o && echo l > x.log && echo r > real.txt",
        ),
        (
            "an ignored file changed alone",
            "echo more >> x.log && echo r2 >> real.txt",
        ),
        ("symlink", "ln -s real.txt link.txt"),
        ("mode change", "chmod +x real.txt"),
        // The run diff must drop a file that is back as it was in the base.
        ("a deleted file back as it was", "echo one > a.txt"),
    ];
    let mut previous = sh(&dest, "git rev-parse HEAD").trim().to_string();
    for (what, script) in steps {
        sh(&dest, script);
        let cp = ews.checkpoint(what).unwrap();
        assert!(cp.is_some(), "{what}: no checkpoint");
        let id = &cp.as_ref().unwrap().id;
        let before = previous.clone();
        // A commit by svc naming the stage, on the previous one, and the run branch on it.
        let log = sh(
            &dest,
            "git log -1 '--format=%H%n%an <%ae>%n%cn <%ce>%n%P%n%B' HEAD",
        );
        assert_eq!(
            log,
            format!("{id}\nsvc <svc@localhost>\nsvc <svc@localhost>\n{previous}\nsvc: checkpoint after stage {what}\n\n"),
            "{what}: the checkpoint commit"
        );
        assert_eq!(sh(&dest, "git symbolic-ref --short HEAD").trim(), ws.branch);
        previous = id.clone();
        assert!(
            matches!(ews.last_scan(), Scan::Paths(_)),
            "{what}: walked the tree ({:?})",
            ews.last_scan()
        );
        assert_all_committed(&dest, what);
        let cp = cp.unwrap();
        // Both figures as `git diff --numstat` counts them (a binary file: no lines).
        let numstat = |from: &str| {
            let out = sh(
                &dest,
                &format!("git diff --no-renames --numstat {from} {}", cp.id),
            );
            let lines = |i: usize| -> u64 {
                out.lines()
                    .map(|l| l.split('\t').nth(i).unwrap().parse().unwrap_or(0))
                    .sum()
            };
            serde_json::json!({
                "files_changed": out.lines().count(), "additions": lines(0), "deletions": lines(1)
            })
        };
        assert_eq!(cp.run_diff, numstat(&ws.base), "{what}: run diff");
        assert_eq!(cp.stage_diff, numstat(&before), "{what}: stage diff");
    }
    // `sh` fails the test on a non-zero exit, with git's complaint.
    sh(&dest, "git fsck --no-dangling --strict");
    // Only ignored files changed: nothing to commit.
    sh(&dest, "echo quiet >> x.log && echo o2 > build/out2.o");
    assert_eq!(ews.checkpoint("ignored only").unwrap(), None);
    // Nothing at all.
    assert_eq!(ews.checkpoint("nothing").unwrap(), None);
    assert_eq!(ews.last_scan(), Scan::Paths(0));
}

#[test]
#[cfg(feature = "watch")]
#[cfg_attr(
    not(all(has_git, has_bwrap)),
    ignore = "needs git and bubblewrap able to create namespaces: apt-get install git; apt-get install bubblewrap"
)]
fn watched_checkpoints_see_writes_made_inside_a_container() {
    use crate::sandbox::{isolation, ProviderKind, SandboxPlan};
    use crate::workspace::versioned::Workspace as _;
    require(Tool::Git);
    require(Tool::Bwrap);
    let tmp = tempfile::tempdir().unwrap();
    let (dest, ws) = cloned(tmp.path(), "01C");
    let plan = SandboxPlan {
        provider: ProviderKind::Container,
        image: None,
        snapshot: None,
        network: false,
        bwrap: "bwrap".into(),
        resources: Default::default(),
    };
    let started = isolation::start(&plan, &dest).expect("the container starts");
    let ews = EngineWorkspace::new(ws.git.clone(), ws.base.clone());
    ews.checkpoint("first").unwrap();
    let run = |script: &str| {
        let out = started
            .isolation
            .command("sh", &dest)
            .arg("-c")
            .arg(script)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run("echo inside >> a.txt && mkdir -p c/d && echo deep > c/d/e.txt");
    ews.checkpoint("in the container").unwrap().unwrap();
    assert!(
        matches!(ews.last_scan(), Scan::Paths(n) if n >= 2),
        "the watcher saw the container's writes: {:?}",
        ews.last_scan()
    );
    assert_all_committed(&dest, "container writes");
    run("rm a.txt && echo more >> c/d/e.txt");
    ews.checkpoint("again").unwrap().unwrap();
    assert!(matches!(ews.last_scan(), Scan::Paths(_)));
    assert_all_committed(&dest, "container deletes");
}

#[test]
#[cfg(feature = "watch")]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn watched_checkpoints_work_in_place_with_a_separate_git_directory() {
    use crate::workspace::versioned::Workspace as _;
    require(Tool::Git);
    let tmp = tempfile::tempdir().unwrap();
    let user = tmp.path().join("mine");
    std::fs::create_dir(&user).unwrap();
    std::fs::write(user.join("a.txt"), "a\n").unwrap();
    let source = Source::Directory {
        path: user.clone(),
        in_place: true,
    };
    let ws = prepare(&source, "01P", &tmp.path().join("ws")).unwrap();
    let ews = EngineWorkspace::new(ws.git.clone(), ws.base.clone());
    ews.checkpoint("first").unwrap();
    std::fs::write(user.join("b.txt"), "b\n").unwrap();
    let cp = ews.checkpoint("second").unwrap().unwrap();
    assert_eq!(ews.last_scan(), Scan::Paths(1));
    assert_eq!(cp.stage_diff["files_changed"], 1);
    // The user's directory holds no marker or git data of svc's.
    let mut names: Vec<String> = std::fs::read_dir(&user)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["a.txt", "b.txt"]);
}

#[test]
fn scratch_workspaces_are_sound_separate_repositories_from_the_template() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let wa = prepare(&Source::Scratch, "RA", &a).unwrap();
    let wb = prepare(&Source::Scratch, "RB", &b).unwrap();
    // Nothing but the repository; on the run's branch at the base, clean, and whole.
    let names: Vec<_> = std::fs::read_dir(&a)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from(".git")]);
    assert_eq!(wa.branch, run_branch("RA"));
    assert_eq!(
        wa.git.text(&["rev-parse", "--abbrev-ref", "HEAD"]).unwrap(),
        run_branch("RA")
    );
    assert_eq!(wa.git.head().unwrap(), wa.base);
    assert_eq!(wa.git.text(&["log", "--format=%s"]).unwrap(), "svc: base");
    assert_eq!(wa.git.text(&["status", "--porcelain"]).unwrap(), "");
    wa.git.run(&["fsck", "--strict"]).unwrap();
    assert!(reopen(&a, &Source::Scratch, "RA").is_some());
    // No template folder is left beside the workspaces.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
    // A checkpoint in one is not in the other, and restoring the base empties it again.
    std::fs::write(a.join("f.txt"), "a\n").unwrap();
    let cp = checkpoint(&wa.git, "s").unwrap().unwrap();
    assert!(wb.git.run(&["cat-file", "-e", &cp]).is_err());
    assert_eq!(wb.git.text(&["status", "--porcelain"]).unwrap(), "");
    restore(&wa.git, &wa.base).unwrap();
    assert!(!a.join("f.txt").exists());
}
