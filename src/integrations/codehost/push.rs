//! Pushing a run's branch to the code host: `git push <web_url>/<owner>/<repo>.git
//! +<commit>:refs/heads/svc/run/<id>` from the run's workspace, authenticated by an
//! `Authorization` header that reaches git only through its environment
//! (`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` set `http.extraHeader` for
//! that one process). So the credential is never in an argument list (`ps`), the
//! workspace's `.git/config`, the remote URL or a credential helper's store; git's tracing
//! variables are removed (`workspace::git`) so it cannot log the header either. A clone of
//! a repository on the code host gets the same environment ([`auth_env`]).
//!
//! The run branch belongs to the run: it is force-pushed to the run's commit (a resumed or
//! rewound run may have moved it back).
//!
//! Owns: the push. Must not touch: the REST API (the caller verifies the remote head).

use crate::workspace::Git;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

/// Why a push failed: git's own words, with the credential scrubbed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("git push to {url} failed: {detail}")]
pub struct PushError {
    pub url: String,
    pub detail: String,
    /// The host refused the credential (HTTP 401/403).
    pub auth: bool,
}

impl PushError {
    /// The remote could not update the branch because another push holds it now (a
    /// stopped server's push still finishing on the host while the resumed job pushes):
    /// worth trying again shortly.
    pub fn busy(&self) -> bool {
        self.detail.contains("cannot lock ref") || self.detail.contains("failed to update ref")
    }
}

/// The header value git sends: HTTP Basic with user `x-access-token`, which code hosts in
/// GitHub's format accept for personal access and installation tokens alike.
pub fn auth_header(token: &str) -> String {
    format!(
        "Authorization: Basic {}",
        STANDARD.encode(format!("x-access-token:{token}"))
    )
}

/// The environment that gives one git process `token` (and only that process: git reads
/// `GIT_CONFIG_*` as configuration without writing it anywhere; `workspace::git` removes
/// git's tracing variables, which would print the header).
pub fn auth_env(token: &str) -> Vec<(String, String)> {
    let config = [
        ("http.extraHeader", auth_header(token)),
        // A stalled transfer ends instead of holding the run (under 1 KiB/s for 30 s).
        ("http.lowSpeedLimit", "1024".to_string()),
        ("http.lowSpeedTime", "30".to_string()),
        // No helper may store or offer another credential.
        ("credential.helper", String::new()),
    ];
    let mut env = vec![("GIT_CONFIG_COUNT".to_string(), config.len().to_string())];
    for (i, (k, v)) in config.into_iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{i}"), k.to_string()));
        env.push((format!("GIT_CONFIG_VALUE_{i}"), v));
    }
    env
}

/// Pushes `commit` of `git`'s repository to `refs/heads/<branch>` at `url`.
pub fn push(
    git: &Git,
    url: &str,
    token: &str,
    commit: &str,
    branch: &str,
) -> Result<(), PushError> {
    let refspec = format!("+{commit}:refs/heads/{branch}");
    let mut cmd = git.command(&["push", "--quiet", "--no-verify", "--", url, &refspec]);
    cmd.envs(auth_env(token));
    match crate::workspace::git::run(cmd, "push") {
        Ok(_) => Ok(()),
        Err(e) => {
            let detail = scrub(&e.detail, token);
            let auth = [
                "401",
                "403",
                "Authentication failed",
                "could not read Username",
            ]
            .iter()
            .any(|m| detail.contains(m));
            Err(PushError {
                url: url.to_string(),
                detail,
                auth,
            })
        }
    }
}

/// `text` without the token or its header form.
fn scrub(text: &str, token: &str) -> String {
    let mut out = text.to_string();
    let header = auth_header(token);
    let encoded = header.trim_start_matches("Authorization: Basic ");
    for s in [token, encoded] {
        if !s.is_empty() {
            out = out.replace(s, "[REDACTED]");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_tools::{require, Tool};
    use std::process::Command;

    fn sh(dir: &std::path::Path, script: &str) {
        let ok = Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "{script}");
    }

    #[test]
    #[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
    fn pushes_a_commit_to_the_run_branch_and_leaves_no_credential_in_the_config() {
        require(Tool::Git);
        let dir = tempfile::tempdir().unwrap();
        sh(
            dir.path(),
            "git init -q --bare remote.git && git init -q -b main work && cd work \
             && echo a > a && git add a && git commit -qm one",
        );
        let work = Git::new(&dir.path().join("work"));
        let head = work.head().unwrap();
        let remote = format!("file://{}/remote.git", dir.path().display());
        push(&work, &remote, "tok-secret-123", &head, "svc/run/x").unwrap();
        let remote_git = Git {
            work_tree: dir.path().to_path_buf(),
            git_dir: Some(dir.path().join("remote.git")),
        };
        assert_eq!(
            remote_git
                .text(&["rev-parse", "refs/heads/svc/run/x"])
                .unwrap(),
            head
        );
        let config = std::fs::read_to_string(dir.path().join("work/.git/config")).unwrap();
        assert!(!config.contains("tok-secret") && !config.contains("extraHeader"));
        // A missing remote is an error in git's words, without the token.
        let e = push(
            &work,
            "file:///nonexistent/x.git",
            "tok-secret-123",
            &head,
            "b",
        )
        .unwrap_err();
        assert!(!e.detail.is_empty() && !e.to_string().contains("tok-secret-123"));
    }

    #[test]
    fn a_ref_another_push_holds_is_busy_not_refused() {
        let e = |detail: &str| PushError {
            url: "u".into(),
            detail: detail.into(),
            auth: false,
        };
        assert!(e(
            "remote: error: cannot lock ref 'refs/heads/svc/run/x': reference already exists"
        )
        .busy());
        assert!(e(" ! [remote rejected] abc -> svc/run/x (failed to update ref)").busy());
        assert!(!e("remote: Permission to acme/app.git denied").busy());
    }

    #[test]
    fn scrubbing() {
        let h = auth_header("abc");
        let enc = h.trim_start_matches("Authorization: Basic ");
        assert_eq!(
            scrub(&format!("x abc y {enc}"), "abc"),
            "x [REDACTED] y [REDACTED]"
        );
    }
}
