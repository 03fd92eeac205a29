//! Workspaces against real git repositories made in temporary directories.

use super::*;
use std::process::Command;

fn git_available() -> bool {
    Command::new("git").arg("--version").output().is_ok()
}

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

#[test]
fn clones_on_a_run_branch_checkpoints_and_restores() {
    if !git_available() {
        eprintln!("note: git is not installed; skipping");
        return;
    }
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
fn directories_are_copied_or_used_in_place_without_touching_their_git() {
    if !git_available() {
        eprintln!("note: git is not installed; skipping");
        return;
    }
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
fn file_contents_come_from_blobs() {
    if !git_available() {
        eprintln!("note: git is not installed; skipping");
        return;
    }
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
