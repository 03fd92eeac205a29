//! Publishing a run: push its branch `svc/run/<id>` at the run's commit, check that the
//! host reports the branch at exactly that commit, then open the pull request (or adopt the
//! one already open from that branch, so a retried or resumed publish never opens two) and
//! record `pull_request.created`. Three callers:
//!
//! - the end of a successful run ([`RunPublisher::finish`], when `[run.pull_request]
//!   enabled` or the create body's `pull_request_options.enabled`): before `run.completed`,
//!   a failure fails the run with `publish_failed` and the host's answer;
//! - a `pull_request` stage ([`RunPublisher::pull_request`]): publish the latest checkpoint
//!   and wait for the head's checks (webhooks wake the wait; the host is asked again at
//!   most every 30 s);
//! - `POST /runs/{id}/pull_request`: a durable creation job ([`Jobs`]): recorded in
//!   `pr_creations`, run by a small pool of worker threads, resumed after a restart.
//!
//! Owns: the publish sequence and creation jobs. Must not touch: HTTP, SQL.

use super::codehost::api::{HostError, NewPull};
use super::codehost::{push, RepoId};
use super::pulls::{self, Check, CheckState, Kept, Link, Options, Verdict};
use super::{kinds, text, Error, Integrations};
use crate::base::cancel::CancelToken;
use crate::engine::{CheckReport, ChecksVerdict, Publisher, PullRequestReport, PullRequestStage};
use crate::settings::{MergeStrategy, PullRequestDefaults};
use crate::store::{CreationRecord, RunRow, RunStatus};
use crate::workspace::{self, Git};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The create body's `pull_request_options` (every field optional; `[run.pull_request]`
/// fills the rest).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PullRequestOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_merge: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_strategy: Option<MergeStrategy>,
}

impl PullRequestOptions {
    /// A bad base branch name, said plainly.
    pub fn validate(&self) -> Result<(), String> {
        match &self.base {
            Some(b) if b.trim().is_empty() || b.starts_with('-') || b.contains("..") => Err(
                format!("pull_request_options.base `{b}` is not a branch name"),
            ),
            _ => Ok(()),
        }
    }
}

impl Options {
    pub fn of(d: &PullRequestDefaults) -> Options {
        Options {
            auto_merge: d.auto_merge,
            merge_strategy: d.merge_strategy,
        }
    }
}

/// Runs whose creation job is queued go through this many worker threads.
const JOB_WORKERS: usize = 2;
/// A job whose bookkeeping failed this many times is failed for good.
const MAX_JOB_ATTEMPTS: u64 = 3;
/// A waiting `pull_request` stage asks the host itself at most this often.
const POLL_EVERY: Duration = Duration::from_secs(pulls::REFRESH_SECS as u64);

/// The creation-job queue and its worker threads (started on first use).
#[derive(Default)]
pub struct Jobs {
    tx: parking_lot::Mutex<Option<crossbeam_channel::Sender<String>>>,
}

/// What publishing did.
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    pub link: Link,
    /// A pull request was opened now (else an open one was found and updated).
    pub created: bool,
    pub head: String,
    /// The model that wrote its title and body (`None`: the template, or not written now).
    pub written_by: Option<String>,
}

fn runtime_str(row: &RunRow, key: &str) -> Option<String> {
    row.sandbox
        .instance
        .as_ref()?
        .get("runtime")?
        .get(key)?
        .as_str()
        .map(str::to_string)
}

fn checkpoint_commit(row: &RunRow) -> Option<String> {
    row.checkpoint
        .as_ref()?
        .get("git_commit_sha")?
        .as_str()
        .map(str::to_string)
}

/// The graph of a run that failed only at publishing succeeded: its work may be
/// published again without `force`.
fn graph_succeeded(status: &RunStatus) -> bool {
    match status {
        RunStatus::Succeeded { .. } => true,
        RunStatus::Failed { reason } => reason == "publish_failed",
        _ => false,
    }
}

impl Integrations {
    /// `[run.pull_request]` with the run's `pull_request_options` over it.
    pub fn options_of(&self, row: &RunRow) -> PullRequestDefaults {
        let mut d = self.settings.get().run.pull_request.clone();
        let o: PullRequestOptions = row
            .created_meta
            .get("pull_request_options")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default();
        if let Some(v) = o.enabled {
            d.enabled = v;
        }
        if let Some(v) = o.draft {
            d.draft = v;
        }
        if o.base.is_some() {
            d.base = o.base;
        }
        if let Some(v) = o.auto_merge {
            d.auto_merge = v;
        }
        if let Some(v) = o.merge_strategy {
            d.merge_strategy = v;
        }
        d
    }

    /// What a `git clone` of `origin` needs in its environment: the repository's credential
    /// when `origin` is on the configured code host (empty otherwise, or when the
    /// integration is off or cannot mint one: the clone then goes without, as before).
    pub fn clone_env(&self, origin: &str) -> Vec<(String, String)> {
        let settings = self.settings.get();
        let web_url = &settings.server.integrations.codehost.web_url;
        let Some(repo) = super::codehost::repo_of_origin(web_url, origin) else {
            return Vec::new();
        };
        match self.with_client(|c, _| c.git_token(&repo)) {
            Ok(token) => push::auth_env(&token),
            Err(e) => {
                log::warn!("cloning {repo} without the code host's credential: {e}");
                Vec::new()
            }
        }
    }

    /// The run's code-host repository, or `missing_repo_origin`.
    fn repo_or_precondition(&self, row: &RunRow) -> Result<RepoId, Error> {
        let settings = self.settings.get();
        self.repo_of_run(row, &settings).ok_or_else(|| {
            let web = &settings.server.integrations.codehost.web_url;
            Error::precondition(
                "missing_repo_origin",
                format!(
                    "Run {} has no repository on the code host ({web}/<owner>/<repo>); \
                     only such runs can open a pull request.",
                    row.id
                ),
            )
        })
    }

    /// Pushes `head` as the run branch, verifies the host has it, and opens (or finds) the
    /// run's pull request (see the module docs). `draft` overrides the run's setting;
    /// `model` the model that writes the title and body.
    pub fn publish(
        &self,
        row: &RunRow,
        git: &Git,
        head: &str,
        draft: Option<bool>,
        model: Option<&str>,
        actor: &Value,
    ) -> Result<Published, Error> {
        let repo = self.repo_or_precondition(row)?;
        let opts = self.options_of(row);
        let base_commit = runtime_str(row, "base_commit");
        if base_commit.as_deref() == Some(head) {
            return Err(Error::precondition(
                "empty_diff",
                format!(
                    "Run {} changed nothing: there is nothing to publish.",
                    row.id
                ),
            ));
        }
        let branch = workspace::run_branch(&row.id);
        let existing = Link::of_row(row).filter(|l| l.repo_id() == repo);
        // The kept head moves first, so checks reported for the new head as soon as it is
        // pushed are taken.
        if let Some(l) = &existing {
            self.set_head(&row.id, l, head)?;
        }
        self.push_and_verify(&repo, git, head, &branch)?;
        if let Some(link) = existing {
            self.append(
                &row.id,
                kinds::PUSHED,
                json!({"pr_number": link.number, "pr_url": link.html_url, "head_sha": head,
                       "head_branch": branch}),
                Some(actor),
            )?;
            return Ok(Published {
                link,
                created: false,
                head: head.to_string(),
                written_by: None,
            });
        }
        let base = match opts
            .base
            .clone()
            .or_else(|| runtime_str(row, "clone_branch"))
        {
            Some(b) => b,
            None => self.with_client(|c, _| c.repo(&repo))?.default_branch,
        };
        let draft = draft.unwrap_or(opts.draft && !opts.auto_merge);
        let (pr, title, written_by, created) =
            match self.with_client(|c, _| c.open_pull_from(&repo, &branch))? {
                Some(pr) => {
                    let title = pr
                        .get("title")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    (pr, title, None, false)
                }
                None => {
                    let settings = self.settings.get();
                    let base_commit = base_commit.clone().unwrap_or_else(|| format!("{head}^"));
                    let facts = text::facts(
                        &settings,
                        self.store().as_ref(),
                        row,
                        git,
                        &base_commit,
                        head,
                    );
                    let written = text::write(&settings, self.vault(), row, &facts, model);
                    log::info!(
                        "run {}: pull request text from {}",
                        row.id,
                        written.model.as_deref().unwrap_or("the template")
                    );
                    let pr = self.with_client(|c, _| {
                        c.create_pull(
                            &repo,
                            &NewPull {
                                title: &written.title,
                                body: &written.body,
                                head: &branch,
                                base: &base,
                                draft,
                            },
                        )
                    })?;
                    (pr, written.title, written.model, true)
                }
            };
        let number = pr.get("number").and_then(Value::as_u64).ok_or_else(|| {
            Error::Host(HostError::Unreachable(
                "the code host answered a pull request without a number".into(),
            ))
        })?;
        let cfg = self.config()?;
        let link = Link {
            owner: repo.owner.clone(),
            repo: repo.name.clone(),
            number,
            html_url: pr
                .get("html_url")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| cfg.pull_url(&repo, number)),
        };
        let mut kept = Kept::new(link.clone());
        kept.details = Some(pulls::details_of(&pr));
        kept.options = Options::of(&opts);
        self.put_kept(&row.id, &kept, Some(head.to_string()), now_ms())?;
        self.append(
            &row.id,
            kinds::CREATED,
            json!({"pr_url": link.html_url, "pr_number": number, "owner": link.owner,
                   "repo": link.repo, "base_branch": base, "head_branch": branch,
                   "head_sha": head, "title": title, "written_by": written_by,
                   "draft": pr.get("draft").and_then(Value::as_bool).unwrap_or(draft),
                   "adopted": !created}),
            Some(actor),
        )?;
        self.after_change(&row.id, None, &kept, Some(actor));
        Ok(Published {
            link,
            created,
            head: head.to_string(),
            written_by,
        })
    }

    /// The kept pull request's head becomes `head`; its checks (of the old head) are
    /// dropped.
    fn set_head(&self, run_id: &str, link: &Link, head: &str) -> Result<(), Error> {
        let edited = self.edit_kept(run_id, |k, h| {
            if h.as_deref() == Some(head) {
                return false;
            }
            *h = Some(head.to_string());
            k.checks.clear();
            true
        })?;
        if edited.is_none() {
            self.put_kept(run_id, &Kept::new(link.clone()), Some(head.to_string()), 0)?;
        }
        Ok(())
    }

    /// `git push` with the repository's credential (renewed once when refused), then the
    /// host must report `branch` at `head`.
    fn push_and_verify(
        &self,
        repo: &RepoId,
        git: &Git,
        head: &str,
        branch: &str,
    ) -> Result<(), Error> {
        let cfg = self.config()?;
        let url = cfg.git_url(repo);
        let attempt = || -> Result<(), push::PushError> {
            let token =
                self.with_client(|c, _| c.git_token(repo))
                    .map_err(|e| push::PushError {
                        url: url.clone(),
                        detail: e.to_string(),
                        auth: false,
                    })?;
            push::push(git, &url, &token, head, branch)
        };
        let once = || match attempt() {
            Err(e) if e.auth => {
                let _ = self.with_client(|c, _| {
                    c.forget_token(repo);
                    Ok(())
                });
                attempt()
            }
            other => other,
        };
        // A branch another push is updating right now (the previous server's push of a
        // resumed job) is tried again, up to three times a second apart.
        let mut pushed = once();
        for _ in 0..3 {
            match &pushed {
                Err(e) if e.busy() => {
                    std::thread::sleep(std::time::Duration::from_secs(1));
                    pushed = once();
                }
                _ => break,
            }
        }
        pushed.map_err(|e| {
            Error::Host(HostError::Refused {
                status: 0,
                message: e.to_string(),
            })
        })?;
        let remote = self.with_client(|c, _| c.branch_head(repo, branch))?;
        if remote.as_deref() != Some(head) {
            return Err(Error::Host(HostError::Refused {
                status: 0,
                message: format!(
                    "after the push the code host reports {branch} at {}, not at the run's commit {head}",
                    remote.as_deref().unwrap_or("nothing")
                ),
            }));
        }
        Ok(())
    }

    /// Waits until the checks of `head` on the run's pull request are all finished (or
    /// none came within the grace time, or the timeout or `cancel`).
    fn wait_checks(
        &self,
        run_id: &str,
        head: &str,
        stage: &PullRequestStage,
        cancel: &CancelToken,
    ) -> (ChecksVerdict, Vec<Check>) {
        let began = Instant::now();
        let mut polled = Instant::now();
        loop {
            let seen = self.changes.current();
            let checks = match self.kept(run_id) {
                Ok(Some((k, Some(h), _))) if h == head => k.checks,
                _ => Vec::new(),
            };
            let waited = began.elapsed();
            match Verdict::of(&checks) {
                Verdict::Passed => return (ChecksVerdict::Passed, checks),
                Verdict::Failed => return (ChecksVerdict::Failed, checks),
                Verdict::None if waited >= stage.checks_grace => {
                    return (ChecksVerdict::None, checks)
                }
                _ if waited >= stage.checks_timeout => return (ChecksVerdict::Pending, checks),
                _ => {}
            }
            if cancel.is_cancelled() {
                return (ChecksVerdict::Pending, checks);
            }
            if polled.elapsed() >= POLL_EVERY {
                polled = Instant::now();
                if let Err(e) = self.refresh(run_id, false) {
                    log::warn!("run {run_id}: cannot refresh its pull request: {e}");
                }
            }
            self.changes.wait_after(seen, Duration::from_millis(250));
        }
    }

    /// Queues a creation job for the run (`POST /runs/{id}/pull_request`): the pending job
    /// when there is one, else a new one after the preconditions. `(job, new)`.
    pub fn request_creation(
        &self,
        row: &RunRow,
        force: bool,
        model: Option<String>,
        actor: &Value,
    ) -> Result<(CreationRecord, bool), Error> {
        if let Some(p) = self
            .table
            .creation(&row.id)?
            .filter(|c| c.status == "pending")
        {
            return Ok((p, false));
        }
        if let Some(l) = Link::of_row(row) {
            return Err(Error::Conflict {
                code: "pull_request_exists",
                detail: format!("Run {} already has pull request {}.", row.id, l.html_url),
            });
        }
        self.repo_or_precondition(row)?;
        if !row.status.is_terminal() {
            return Err(Error::precondition(
                "run_not_finished",
                format!(
                    "Run {} is {}; it can open a pull request once it ended.",
                    row.id,
                    row.status.name()
                ),
            ));
        }
        if !force && !graph_succeeded(&row.status) {
            return Err(Error::precondition(
                "run_not_successful",
                format!(
                    "Run {} did not succeed; send {{\"force\": true}} to publish it anyway.",
                    row.id
                ),
            ));
        }
        if row.sandbox.instance.is_none() || runtime_str(row, "base_commit").is_none() {
            return Err(Error::precondition(
                "missing_run_branch",
                format!("Run {} never had a workspace on its run branch.", row.id),
            ));
        }
        let changed = row
            .diff
            .as_ref()
            .and_then(|d| d.get("files_changed"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if changed == 0 {
            return Err(Error::precondition(
                "empty_diff",
                format!(
                    "Run {} changed nothing: there is nothing to publish.",
                    row.id
                ),
            ));
        }
        self.config()?;
        self.check_base(row)?;
        let now = crate::base::clock::now();
        let id = crate::base::clock::new_ulid();
        let record = json!({
            "id": id, "status": "pending", "model": model, "force": force,
            "requested_at": now, "updated_at": now, "pull_request": null, "error": null,
            "attempts": 0, "actor": actor,
        });
        let job = CreationRecord {
            run_id: row.id.clone(),
            id: id.clone(),
            status: "pending".into(),
            record,
        };
        if let Some(p) = self.table.begin_creation(&job)? {
            return Ok((p, false));
        }
        self.append(
            &row.id,
            kinds::CREATION_REQUESTED,
            json!({"creation_id": id, "force": force, "model": model}),
            Some(actor),
        )?;
        self.enqueue(&row.id);
        Ok((job, true))
    }

    /// The base branch the run's pull request would target (`pull_request_options.base`,
    /// `[run.pull_request] base`, else the branch it was cloned from) must exist on the host:
    /// 400 `missing_base_branch` otherwise. The host not answering is left to the job (which
    /// reports the host's words).
    fn check_base(&self, row: &RunRow) -> Result<(), Error> {
        let Some(base) = self
            .options_of(row)
            .base
            .or_else(|| runtime_str(row, "clone_branch"))
        else {
            return Ok(());
        };
        let repo = self.repo_or_precondition(row)?;
        match self.with_client(|c, _| c.branch_head(&repo, &base)) {
            Ok(None) => Err(Error::precondition(
                "missing_base_branch",
                format!(
                    "The base branch `{base}` of run {}'s pull request does not exist on {}.",
                    row.id,
                    repo.slug()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Queues every job a previous process left pending (startup).
    pub fn resume_pending(&self) -> usize {
        match self.table.pending_creations() {
            Ok(jobs) => {
                for j in &jobs {
                    self.enqueue(&j.run_id);
                }
                jobs.len()
            }
            Err(e) => {
                log::error!("cannot read pending pull request creations: {e}");
                0
            }
        }
    }

    fn enqueue(&self, run_id: &str) {
        let mut tx = self.jobs.tx.lock();
        if tx.is_none() {
            let (s, r) = crossbeam_channel::unbounded::<String>();
            for n in 0..JOB_WORKERS {
                let r = r.clone();
                let Some(me) = self.arc() else { return };
                let spawned = std::thread::Builder::new()
                    .name(format!("pr-create-{n}"))
                    .spawn(move || {
                        for run_id in r {
                            me.run_creation(&run_id);
                        }
                    });
                if let Err(e) = spawned {
                    log::error!("cannot start a pull request worker: {e}");
                }
            }
            *tx = Some(s);
        }
        if let Some(s) = tx.as_ref() {
            let _ = s.send(run_id.to_string());
        }
    }

    /// Runs the run's pending creation job to its end.
    fn run_creation(&self, run_id: &str) {
        let Ok(Some(job)) = self.table.creation(run_id) else {
            return;
        };
        if job.status != "pending" {
            return;
        }
        let mut record = job.record.clone();
        let attempts = record.get("attempts").and_then(Value::as_u64).unwrap_or(0) + 1;
        record["attempts"] = json!(attempts);
        let actor = record
            .get("actor")
            .cloned()
            .unwrap_or_else(|| json!({"kind": "system", "system_kind": "engine"}));
        let model = record
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string);
        let outcome = if attempts > MAX_JOB_ATTEMPTS {
            Err(Error::Store(format!(
                "gave up after {MAX_JOB_ATTEMPTS} attempts"
            )))
        } else {
            let _ = self.table.put_creation(&CreationRecord {
                record: record.clone(),
                ..job.clone()
            });
            self.creation_attempt(run_id, model.as_deref(), &actor)
        };
        record["updated_at"] = json!(crate::base::clock::now());
        let status = match &outcome {
            Ok(p) => {
                record["status"] = json!("succeeded");
                record["pull_request"] = p.link.to_json();
                // The model as resolved: the one that wrote the text (null: the template).
                if p.created {
                    record["model"] = json!(p.written_by);
                }
                "succeeded"
            }
            Err(e) => {
                record["status"] = json!("failed");
                record["error"] = json!(e.to_string());
                let _ = self.append(
                    run_id,
                    kinds::FAILED,
                    json!({"error": e.to_string(), "creation_id": job.id}),
                    Some(&actor),
                );
                "failed"
            }
        };
        let done = CreationRecord {
            status: status.into(),
            record,
            ..job
        };
        if let Err(e) = self.table.put_creation(&done) {
            // Left pending: the next start resumes it (publishing again adopts the open
            // pull request instead of opening a second).
            log::error!("run {run_id}: cannot record the pull request creation's end: {e}");
        }
    }

    fn creation_attempt(
        &self,
        run_id: &str,
        model: Option<&str>,
        actor: &Value,
    ) -> Result<Published, Error> {
        let row = self
            .store()
            .get_run(run_id)?
            .ok_or_else(|| pulls::no_record(run_id))?;
        let (git, _) = self.locator.locate(&row).ok_or_else(|| {
            Error::precondition(
                "missing_run_branch",
                format!("The workspace of run {run_id} was removed; its branch is gone."),
            )
        })?;
        let head = match checkpoint_commit(&row) {
            Some(c) => c,
            None => git.head().map_err(|e| Error::Store(e.to_string()))?,
        };
        self.publish(&row, &git, &head, None, model, actor)
    }
}

fn now_ms() -> i64 {
    crate::base::clock::parse_ts(&crate::base::clock::now()).unwrap_or(0)
}

/// The engine's [`Publisher`] for one run of the server.
pub struct RunPublisher {
    pub integrations: Arc<Integrations>,
    pub run_id: String,
    pub git: Git,
}

fn engine_actor() -> Value {
    json!({"kind": "system", "system_kind": "engine"})
}

impl RunPublisher {
    fn row(&self) -> Result<RunRow, String> {
        match self.integrations.store().get_run(&self.run_id) {
            Ok(Some(r)) => Ok(r),
            Ok(None) => Err(format!("run {} is gone", self.run_id)),
            Err(e) => Err(e.to_string()),
        }
    }

    fn skip(&self, reason: &str, detail: String) {
        let _ = self.integrations.append(
            &self.run_id,
            kinds::SKIPPED,
            json!({"reason": reason, "detail": detail}),
            Some(&engine_actor()),
        );
    }
}

impl Publisher for RunPublisher {
    fn finish(&self, head: Option<&str>) -> Result<(), String> {
        let row = self.row()?;
        let i = &self.integrations;
        if !i.options_of(&row).enabled {
            return Ok(());
        }
        let settings = i.settings.get();
        if i.repo_of_run(&row, &settings).is_none() {
            self.skip(
                "missing_repo_origin",
                "the run's repository is not on the code host".into(),
            );
            return Ok(());
        }
        let head = match head {
            Some(h) => h.to_string(),
            None => self.git.head().map_err(|e| e.to_string())?,
        };
        match i.publish(&row, &self.git, &head, None, None, &engine_actor()) {
            Ok(_) => Ok(()),
            Err(Error::Precondition {
                code: "empty_diff",
                detail,
            }) => {
                self.skip("empty_diff", detail);
                Ok(())
            }
            Err(e) => {
                let message = format!("publishing the run failed: {e}");
                let _ = i.append(
                    &self.run_id,
                    kinds::FAILED,
                    json!({"error": message, "operation": "publish"}),
                    Some(&engine_actor()),
                );
                Err(message)
            }
        }
    }

    fn pull_request(
        &self,
        stage: &PullRequestStage,
        cancel: &CancelToken,
    ) -> Result<PullRequestReport, String> {
        let row = self.row()?;
        let i = &self.integrations;
        let head = match &stage.head {
            Some(h) => h.clone(),
            None => self.git.head().map_err(|e| e.to_string())?,
        };
        let published = i
            .publish(&row, &self.git, &head, stage.draft, None, &engine_actor())
            .map_err(|e| format!("pull_request stage `{}`: {e}", stage.node_id))?;
        let (verdict, checks) = if stage.wait_checks {
            i.wait_checks(&self.run_id, &head, stage, cancel)
        } else {
            (ChecksVerdict::Skipped, Vec::new())
        };
        Ok(PullRequestReport {
            number: published.link.number,
            html_url: published.link.html_url,
            head,
            verdict,
            checks: checks.iter().map(report_of).collect(),
        })
    }
}

fn report_of(c: &Check) -> CheckReport {
    let summary = match (c.title.as_deref(), c.summary.as_deref()) {
        (Some(t), Some(s)) if t != s => Some(format!("{t}: {s}")),
        (Some(t), _) => Some(t.to_string()),
        (None, Some(s)) => Some(s.to_string()),
        (None, None) => None,
    };
    CheckReport {
        name: c.name.clone(),
        status: c.status.clone(),
        passed: c.state() == CheckState::Passed,
        summary: summary.map(|s| s.split_whitespace().collect::<Vec<_>>().join(" ")),
    }
}
