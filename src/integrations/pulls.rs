//! A run's pull request as svc keeps it ([`Kept`], stored per run in `store::CodehostTable`):
//! the link, the live details, the head commit's checks (check runs and commit statuses)
//! and the comment count. Webhooks keep it current; reads refresh it from the host at most
//! every [`REFRESH_SECS`] per pull request, one fetch at a time whatever the number of
//! readers ([`Integrations::refresh`]); the board reads only what is kept.
//!
//! Also: linking a pull request made elsewhere, unlinking, merging and closing, each
//! recorded as a run event; and svc's auto-merge (a run's `auto_merge` merges its pull
//! request once every check on its head passed).
//!
//! Owns: the kept shape, check verdicts, these operations. Must not touch: HTTP shapes
//! beyond the JSON it returns, SQL.

use super::codehost::api::HostError;
use super::codehost::{parse_pull_url, PullUrlError, RepoId};
use super::{kinds, Error, Integrations};
use crate::settings::MergeStrategy;
use crate::store::{PullRequestRecord, RunRow};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A kept pull request is fetched again from the host at most this often.
pub const REFRESH_SECS: i64 = 30;

/// SPEC 2.3 PullRequestLink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub owner: String,
    pub repo: String,
    pub number: u64,
    pub html_url: String,
}

impl Link {
    pub fn repo_id(&self) -> RepoId {
        RepoId {
            owner: self.owner.clone(),
            name: self.repo.clone(),
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The link in a run row (`RunRow::pull_request`).
    pub fn of_row(row: &RunRow) -> Option<Link> {
        row.pull_request
            .as_ref()
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }
}

/// One check on the head commit: a check run (keyed by its name) or a commit status
/// (keyed by its context).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    pub key: String,
    pub name: String,
    /// A check run's conclusion once completed, else its status (`queued`, `in_progress`);
    /// a commit status's state (`pending`, `success`, `failure`, `error`).
    pub status: String,
    #[serde(default)]
    pub started_at: Option<String>,
    #[serde(default)]
    pub completed_at: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub summary: Option<String>,
    #[serde(default)]
    pub details_url: Option<String>,
}

impl Check {
    pub fn state(&self) -> CheckState {
        match self.status.as_str() {
            "success" | "neutral" | "skipped" => CheckState::Passed,
            "failure" | "cancelled" | "timed_out" | "action_required" | "error" | "stale"
            | "startup_failure" => CheckState::Failed,
            _ => CheckState::Pending,
        }
    }

    pub fn duration_secs(&self) -> Option<u64> {
        let start = crate::base::clock::parse_ts(self.started_at.as_deref()?)?;
        let end = crate::base::clock::parse_ts(self.completed_at.as_deref()?)?;
        u64::try_from((end - start).max(0) / 1000).ok()
    }

    /// `{name, status, duration_secs}` (SPEC 2.12).
    pub fn board_json(&self) -> Value {
        json!({"name": self.name, "status": self.status, "duration_secs": self.duration_secs()})
    }

    /// Everything kept, for `GET .../pull_request` and repair stages.
    pub fn full_json(&self) -> Value {
        json!({"name": self.name, "status": self.status, "duration_secs": self.duration_secs(),
               "started_at": self.started_at, "completed_at": self.completed_at,
               "title": self.title, "summary": self.summary, "details_url": self.details_url})
    }

    /// From a check run object (REST answer or `check_run` webhook).
    pub fn from_check_run(v: &Value) -> Option<Check> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let name = s("name")?;
        let status = match (s("status").as_deref(), s("conclusion")) {
            (Some("completed"), Some(c)) => c,
            (Some(st), _) => st.to_string(),
            (None, _) => "queued".to_string(),
        };
        let out = |k: &str| {
            v.pointer(&format!("/output/{k}"))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Some(Check {
            key: format!("check_run:{name}"),
            name,
            status,
            started_at: s("started_at"),
            completed_at: s("completed_at"),
            title: out("title"),
            summary: out("summary"),
            details_url: s("details_url").or_else(|| s("html_url")),
        })
    }

    /// From a commit status (REST `statuses[]` item or `status` webhook).
    pub fn from_status(v: &Value) -> Option<Check> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let context = s("context")?;
        let state = s("state").unwrap_or_else(|| "pending".into());
        let done = state != "pending";
        Some(Check {
            key: format!("status:{context}"),
            name: context,
            status: state,
            started_at: s("created_at"),
            completed_at: if done { s("updated_at") } else { None },
            title: s("description"),
            summary: s("description"),
            details_url: s("target_url"),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckState {
    Passed,
    Failed,
    Pending,
}

/// What a head commit's checks say together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// No check reported (yet).
    None,
    Pending,
    Passed,
    Failed,
}

impl Verdict {
    pub fn of(checks: &[Check]) -> Verdict {
        if checks.is_empty() {
            return Verdict::None;
        }
        let states: Vec<CheckState> = checks.iter().map(Check::state).collect();
        if states.contains(&CheckState::Pending) {
            Verdict::Pending
        } else if states.contains(&CheckState::Failed) {
            Verdict::Failed
        } else {
            Verdict::Passed
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::None => "none",
            Verdict::Pending => "pending",
            Verdict::Passed => "passed",
            Verdict::Failed => "failed",
        }
    }
}

/// What svc does with the pull request on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Options {
    #[serde(default)]
    pub auto_merge: bool,
    #[serde(default)]
    pub merge_strategy: MergeStrategy,
}

/// The kept state of a run's pull request (the `state` JSON of its record).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kept {
    pub link: Link,
    /// PullRequestDetails (opgroups 5.2), `null` until fetched.
    #[serde(default)]
    pub details: Option<Value>,
    /// Issue comments plus review comments.
    #[serde(default)]
    pub comments: u64,
    /// The head commit's checks, in the order first seen.
    #[serde(default)]
    pub checks: Vec<Check>,
    #[serde(default)]
    pub options: Options,
    /// `pull_request.merged` / `.closed` already recorded for the current state.
    #[serde(default)]
    pub merged_recorded: bool,
    /// The head commit svc's auto-merge was refused on (not tried again on that head).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_merge_refused: Option<String>,
    #[serde(default)]
    pub closed_recorded: bool,
}

impl Kept {
    pub fn new(link: Link) -> Kept {
        Kept {
            link,
            details: None,
            comments: 0,
            checks: Vec::new(),
            options: Options::default(),
            merged_recorded: false,
            closed_recorded: false,
            auto_merge_refused: None,
        }
    }

    fn detail_i64(&self, key: &str) -> i64 {
        self.details
            .as_ref()
            .and_then(|d| d.get(key))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    }

    fn detail_bool(&self, key: &str) -> bool {
        self.details
            .as_ref()
            .and_then(|d| d.get(key))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    pub fn is_open(&self) -> bool {
        self.details
            .as_ref()
            .and_then(|d| d.get("state"))
            .and_then(Value::as_str)
            .is_none_or(|s| s == "open")
    }

    /// Upserts a check by key.
    pub fn put_check(&mut self, c: Check) -> bool {
        match self.checks.iter_mut().find(|x| x.key == c.key) {
            Some(x) if *x == c => false,
            Some(x) => {
                *x = c;
                true
            }
            None => {
                self.checks.push(c);
                true
            }
        }
    }

    /// The board item's `pull_request` (SPEC 2.12).
    pub fn board_json(&self) -> Value {
        json!({
            "number": self.link.number,
            "state": self.state_name(),
            "html_url": self.link.html_url,
            "additions": self.detail_i64("additions"),
            "deletions": self.detail_i64("deletions"),
            "comments": self.comments,
            "checks": self.checks.iter().map(Check::board_json).collect::<Vec<_>>(),
        })
    }

    /// `open`, `draft`, `merged` or `closed` (`unknown` before the first fetch).
    pub fn state_name(&self) -> &'static str {
        if self.details.is_none() {
            return "unknown";
        }
        if self.detail_bool("merged") {
            "merged"
        } else if !self.is_open() {
            "closed"
        } else if self.detail_bool("draft") {
            "draft"
        } else {
            "open"
        }
    }
}

/// PullRequestDetails (opgroups 5.2) from the host's pull request object.
pub fn details_of(pr: &Value) -> Value {
    let s = |p: &str| pr.pointer(p).cloned().unwrap_or(Value::Null);
    json!({
        "title": s("/title"),
        "body": s("/body"),
        "state": s("/state"),
        "draft": pr.get("draft").and_then(Value::as_bool).unwrap_or(false),
        "merged": pr.get("merged").and_then(Value::as_bool).unwrap_or(false),
        "merged_at": s("/merged_at"),
        "mergeable": s("/mergeable"),
        "additions": pr.get("additions").and_then(Value::as_i64).unwrap_or(0),
        "deletions": pr.get("deletions").and_then(Value::as_i64).unwrap_or(0),
        "changed_files": pr.get("changed_files").and_then(Value::as_i64).unwrap_or(0),
        "author": {"login": s("/user/login")},
        "head_branch": s("/head/ref"),
        "base_branch": s("/base/ref"),
        "head_sha": s("/head/sha"),
        "timestamps": {"created_at": s("/created_at"), "updated_at": s("/updated_at")},
    })
}

/// Issue comments plus review comments of a host pull request object.
fn comments_of(pr: &Value) -> Option<u64> {
    let c = pr.get("comments").and_then(Value::as_u64);
    let r = pr.get("review_comments").and_then(Value::as_u64);
    match (c, r) {
        (None, None) => None,
        (c, r) => Some(c.unwrap_or(0) + r.unwrap_or(0)),
    }
}

fn now_ms() -> i64 {
    crate::base::clock::parse_ts(&crate::base::clock::now()).unwrap_or(0)
}

fn record_of(
    run_id: &str,
    kept: &Kept,
    head: Option<String>,
    refreshed_at_ms: i64,
) -> PullRequestRecord {
    PullRequestRecord {
        run_id: run_id.to_string(),
        owner: kept.link.owner.clone(),
        repo: kept.link.repo.clone(),
        number: kept.link.number,
        head_sha: head,
        state: serde_json::to_value(kept).unwrap_or(Value::Null),
        refreshed_at_ms,
        updated_at: crate::base::clock::now(),
    }
}

/// The kept state of a record.
pub fn kept_of(r: &PullRequestRecord) -> Option<Kept> {
    serde_json::from_value(r.state.clone()).ok()
}

fn system_actor() -> Value {
    json!({"kind": "system", "system_kind": "engine"})
}

/// A fetch that failed: why, and the host's words.
pub type Failure = (Unavailability, String);

/// Why `GET .../pull_request` has no live details.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailability {
    IntegrationUnavailable,
    NotFound,
    FetchFailed,
}

impl Unavailability {
    pub fn as_str(self) -> &'static str {
        match self {
            Unavailability::IntegrationUnavailable => "integration_unavailable",
            Unavailability::NotFound => "not_found",
            Unavailability::FetchFailed => "fetch_failed",
        }
    }
}

impl Integrations {
    /// The board's `pull_request` of each of `run_ids` that keeps one, by run id: what is
    /// kept, never fetched (a store failure leaves them out, logged).
    pub fn board_pull_requests(
        &self,
        run_ids: &[&str],
    ) -> std::collections::HashMap<String, Value> {
        match self.table.pull_requests_of(run_ids) {
            Ok(recs) => recs
                .into_iter()
                .filter_map(|r| Some((r.run_id.clone(), kept_of(&r)?.board_json())))
                .collect(),
            Err(e) => {
                log::warn!("cannot read the board's pull requests: {e}");
                Default::default()
            }
        }
    }

    /// The kept pull request of run `run_id` with its head commit.
    pub fn kept(&self, run_id: &str) -> Result<Option<(Kept, Option<String>, i64)>, Error> {
        Ok(self
            .table
            .pull_request(run_id)?
            .and_then(|r| Some((kept_of(&r)?, r.head_sha, r.refreshed_at_ms))))
    }

    /// Stores a kept pull request and wakes anyone waiting on checks.
    pub fn put_kept(
        &self,
        run_id: &str,
        kept: &Kept,
        head: Option<String>,
        refreshed_at_ms: i64,
    ) -> Result<(), Error> {
        self.table
            .put_pull_request(&record_of(run_id, kept, head, refreshed_at_ms))?;
        self.note_watch(run_id, Some(kept));
        self.changes.bump();
        Ok(())
    }

    /// Applies `edit` to the run's kept pull request under the edit lock; stores it when
    /// `edit` says it changed. `None` when the run keeps none.
    pub fn edit_kept(
        &self,
        run_id: &str,
        edit: impl FnOnce(&mut Kept, &mut Option<String>) -> bool,
    ) -> Result<Option<Kept>, Error> {
        self.edit_kept_as(run_id, None, edit)
    }

    /// [`Integrations::edit_kept`], recording merged/closed as `actor` (a webhook).
    pub fn edit_kept_as(
        &self,
        run_id: &str,
        actor: Option<&Value>,
        edit: impl FnOnce(&mut Kept, &mut Option<String>) -> bool,
    ) -> Result<Option<Kept>, Error> {
        let (before, kept, changed) = {
            let _g = self.edit.lock();
            let Some(rec) = self.table.pull_request(run_id)? else {
                return Ok(None);
            };
            let Some(mut kept) = kept_of(&rec) else {
                return Ok(None);
            };
            let before = kept.clone();
            let mut head = rec.head_sha.clone();
            let changed = edit(&mut kept, &mut head);
            if changed {
                self.put_kept(run_id, &kept, head, rec.refreshed_at_ms)?;
            }
            (before, kept, changed)
        };
        if changed {
            self.after_change(run_id, Some(&before), &kept, actor);
        }
        Ok(Some(kept))
    }

    /// Fetches the run's pull request, its head's checks and statuses from the host when
    /// the kept copy is older than [`REFRESH_SECS`] (or `force`), unless another thread is
    /// fetching it right now. Answers the kept copy (fresh or not) and the failure, if the
    /// fetch failed.
    pub fn refresh(
        &self,
        run_id: &str,
        force: bool,
    ) -> Result<Option<(Kept, Option<Failure>)>, Error> {
        let Some((kept, _, at)) = self.kept(run_id)? else {
            return Ok(None);
        };
        let fresh = now_ms().saturating_sub(at) < REFRESH_SECS * 1000;
        if fresh && !force {
            return Ok(Some((kept, None)));
        }
        if !self.refreshing.lock().insert(run_id.to_string()) {
            return Ok(Some((kept, None)));
        }
        let fetched = self.fetch(&kept.link);
        self.refreshing.lock().remove(run_id);
        let kept_before = kept.clone();
        match fetched {
            Ok((pr, checks)) => {
                let comments = comments_of(&pr);
                let head = pr
                    .pointer("/head/sha")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                let kept = {
                    let _g = self.edit.lock();
                    let mut k = self
                        .kept(run_id)?
                        .map(|(k, _, _)| k)
                        .unwrap_or_else(|| kept.clone());
                    k.details = Some(details_of(&pr));
                    if let Some(c) = comments {
                        k.comments = c;
                    }
                    k.checks = checks;
                    self.put_kept(run_id, &k, head, now_ms())?;
                    k
                };
                let before = kept_before;
                self.after_change(run_id, Some(&before), &kept, None);
                Ok(Some((kept, None)))
            }
            Err(e) => {
                let why = match &e {
                    HostError::Unavailable(_) => Unavailability::IntegrationUnavailable,
                    HostError::NotFound(_) => Unavailability::NotFound,
                    _ => Unavailability::FetchFailed,
                };
                Ok(Some((kept, Some((why, e.to_string())))))
            }
        }
    }

    /// The pull request and the checks of its head, from the host.
    fn fetch(&self, link: &Link) -> Result<(Value, Vec<Check>), HostError> {
        let repo = link.repo_id();
        self.with_client(|c, _| {
            let pr = c.pull(&repo, link.number)?;
            let mut checks = Vec::new();
            if let Some(sha) = pr.pointer("/head/sha").and_then(Value::as_str) {
                for run in c.check_runs(&repo, sha)? {
                    if let Some(ch) = Check::from_check_run(&run) {
                        upsert(&mut checks, ch);
                    }
                }
                for st in c.statuses(&repo, sha)? {
                    if let Some(ch) = Check::from_status(&st) {
                        upsert(&mut checks, ch);
                    }
                }
            }
            Ok((pr, checks))
        })
    }

    /// After a kept pull request changed (from `before`, `None` when it is new): record
    /// `pull_request.updated` with what the board shows when that changed, merged/closed
    /// once (as `actor`, else the engine), and start svc's auto-merge when every check
    /// passed.
    pub fn after_change(
        &self,
        run_id: &str,
        before: Option<&Kept>,
        kept: &Kept,
        actor: Option<&Value>,
    ) {
        let shown = kept.board_json();
        if before.map(Kept::board_json).as_ref() != Some(&shown) {
            let a = actor.cloned().unwrap_or_else(system_actor);
            let props =
                json!({"pull_request": shown, "verdict": Verdict::of(&kept.checks).as_str()});
            if let Err(e) = self.append(run_id, kinds::UPDATED, props, Some(&a)) {
                log::warn!("run {run_id}: cannot record pull_request.updated: {e}");
            }
        }
        let state = kept.state_name();
        let note = |kind: &str, props: Value, mark: fn(&mut Kept)| {
            let first = self.edit_flag(run_id, mark).unwrap_or(false);
            if first {
                let a = actor.cloned().unwrap_or_else(system_actor);
                if let Err(e) = self.append(run_id, kind, props, Some(&a)) {
                    log::warn!("run {run_id}: cannot record {kind}: {e}");
                }
            }
        };
        if state == "merged" && !kept.merged_recorded {
            note(
                kinds::MERGED,
                json!({"pr_number": kept.link.number, "pr_url": kept.link.html_url, "method": null,
                       "source": "codehost"}),
                |k| k.merged_recorded = true,
            );
        } else if state == "closed" && !kept.closed_recorded {
            note(
                kinds::CLOSED,
                json!({"pr_number": kept.link.number, "pr_url": kept.link.html_url, "source": "codehost"}),
                |k| k.closed_recorded = true,
            );
        }
        if kept.options.auto_merge
            && state == "open"
            && Verdict::of(&kept.checks) == Verdict::Passed
        {
            self.spawn_auto_merge(run_id, kept.options.merge_strategy);
        }
    }

    /// Sets a flag on the kept record; true when it was not set before.
    fn edit_flag(&self, run_id: &str, mark: fn(&mut Kept)) -> Result<bool, Error> {
        let _g = self.edit.lock();
        let Some(rec) = self.table.pull_request(run_id)? else {
            return Ok(false);
        };
        let Some(mut kept) = kept_of(&rec) else {
            return Ok(false);
        };
        let before = kept.clone();
        mark(&mut kept);
        if kept == before {
            return Ok(false);
        }
        self.table.put_pull_request(&record_of(
            run_id,
            &kept,
            rec.head_sha,
            rec.refreshed_at_ms,
        ))?;
        Ok(true)
    }

    /// Merges the run's pull request on its own thread (one at a time per run), if, read
    /// again now, it is still open with every check on its head passed; the host is told
    /// that head, so a commit pushed since (whose checks did not pass yet) is not merged.
    fn spawn_auto_merge(&self, run_id: &str, method: MergeStrategy) {
        if !self.refreshing.lock().insert(format!("merge:{run_id}")) {
            return;
        }
        let Some(me) = self.arc() else { return };
        let run_id = run_id.to_string();
        let who = run_id.clone();
        let spawned = std::thread::Builder::new()
            .name("pr-auto-merge".into())
            .spawn(move || {
                let actor = system_actor();
                let head = match me.kept(&run_id) {
                    Ok(Some((k, Some(head), _)))
                        if k.options.auto_merge
                            && k.state_name() == "open"
                            && Verdict::of(&k.checks) == Verdict::Passed
                            && k.auto_merge_refused.as_deref() != Some(head.as_str()) =>
                    {
                        Some(head)
                    }
                    _ => None,
                };
                if let Some(head) = head {
                    let merged =
                        me.merge_as(&run_id, Some(method), Some(&head), "auto_merge", &actor);
                    if let Err(e) = merged {
                        log::warn!("run {run_id}: auto-merge failed: {e}");
                        if !matches!(e, Error::Host(HostError::Refused { .. })) {
                            // The host not reached: tried again at its next change or
                            // refresh (the status entry shows the error).
                            me.refreshing.lock().remove(&format!("merge:{run_id}"));
                            return;
                        }
                        // Not tried again on this head: a person decides (merge by hand,
                        // or a new commit is tried once its checks pass).
                        let _ = me.edit_kept(&run_id, |k, _| {
                            k.auto_merge_refused = Some(head.clone());
                            true
                        });
                        let _ = me.append(
                            &run_id,
                            kinds::FAILED,
                            json!({"error": format!("auto-merge failed: {e}"),
                                   "operation": "auto_merge", "head_sha": head}),
                            Some(&actor),
                        );
                    }
                }
                me.refreshing.lock().remove(&format!("merge:{run_id}"));
            });
        if let Err(e) = spawned {
            log::warn!("cannot start the auto-merge of run {who}: {e}");
        }
    }

    /// `PUT /runs/{id}/pull_request {html_url}`: links a pull request made elsewhere (not
    /// touched on the host).
    pub fn link(&self, row: &RunRow, html_url: &str, actor: &Value) -> Result<Link, Error> {
        let web_url = self
            .settings
            .get()
            .server
            .integrations
            .codehost
            .web_url
            .clone();
        let (repo, number) = parse_pull_url(&web_url, html_url).map_err(|e| match e {
            PullUrlError::OtherHost(h) => Error::precondition(
                "unsupported_host",
                format!("`{html_url}` is on {h}, not on the configured code host {web_url}."),
            ),
            PullUrlError::Invalid => Error::precondition(
                "invalid_pull_request_url",
                format!("`{html_url}` is not a pull request URL ({web_url}/<owner>/<repo>/pull/<number>)."),
            ),
        })?;
        let link = Link {
            owner: repo.owner.clone(),
            repo: repo.name.clone(),
            number,
            html_url: format!(
                "{}/{}/pull/{number}",
                web_url.trim_end_matches('/'),
                repo.slug()
            ),
        };
        self.append(
            &row.id,
            kinds::LINKED,
            json!({"pr_url": link.html_url, "pr_number": number, "owner": link.owner, "repo": link.repo}),
            Some(actor),
        )?;
        let mut kept = Kept::new(link.clone());
        kept.options = Options::of(&self.options_of(row));
        self.put_kept(&row.id, &kept, None, 0)?;
        self.after_change(&row.id, None, &kept, Some(actor));
        Ok(link)
    }

    /// `DELETE /runs/{id}/pull_request`: forgets the link (the pull request is untouched).
    pub fn unlink(&self, row: &RunRow, actor: &Value) -> Result<Link, Error> {
        let link = Link::of_row(row).ok_or_else(|| no_record(&row.id))?;
        self.append(
            &row.id,
            kinds::UNLINKED,
            json!({"pr_url": link.html_url, "pr_number": link.number, "owner": link.owner, "repo": link.repo}),
            Some(actor),
        )?;
        self.table.delete_pull_request(&row.id)?;
        self.note_watch(&row.id, None);
        self.changes.bump();
        Ok(link)
    }

    /// The run's link and kept record (made from the link when none is kept).
    fn linked(&self, run_id: &str) -> Result<(Link, Kept), Error> {
        let row = self
            .store()
            .get_run(run_id)?
            .ok_or_else(|| no_record(run_id))?;
        let link = Link::of_row(&row).ok_or_else(|| no_record(run_id))?;
        let kept = match self.kept(run_id)? {
            Some((k, _, _)) if k.link == link => k,
            _ => {
                let mut k = Kept::new(link.clone());
                k.options = Options::of(&self.options_of(&row));
                self.put_kept(run_id, &k, None, 0)?;
                k
            }
        };
        Ok((link, kept))
    }

    /// `POST .../merge {method}`: merges on the host (502 with its reason when it refuses).
    pub fn merge(
        &self,
        run_id: &str,
        method: Option<MergeStrategy>,
        actor: &Value,
    ) -> Result<(Link, MergeStrategy), Error> {
        self.merge_as(run_id, method, None, "svc", actor)
    }

    /// Merges the run's pull request; with `sha`, only while its head is that commit (the
    /// host refuses otherwise). `source` goes in the event (`svc`, `auto_merge`).
    fn merge_as(
        &self,
        run_id: &str,
        method: Option<MergeStrategy>,
        sha: Option<&str>,
        source: &str,
        actor: &Value,
    ) -> Result<(Link, MergeStrategy), Error> {
        let (link, kept) = self.linked(run_id)?;
        let method = method.unwrap_or(kept.options.merge_strategy);
        let repo = link.repo_id();
        let merged = self.with_client(|c, _| c.merge(&repo, link.number, method.as_str(), sha))?;
        self.edit_kept(run_id, |k, _| {
            let d = k.details.get_or_insert_with(|| json!({}));
            d["merged"] = json!(true);
            d["state"] = json!("closed");
            k.merged_recorded = true;
            true
        })?;
        self.append(
            run_id,
            kinds::MERGED,
            json!({"pr_number": link.number, "pr_url": link.html_url, "method": method.as_str(),
                   "sha": merged.sha, "source": source}),
            Some(actor),
        )?;
        Ok((link, method))
    }

    /// `POST .../close`: closes it on the host without merging.
    pub fn close(&self, run_id: &str, actor: &Value) -> Result<Link, Error> {
        let (link, _) = self.linked(run_id)?;
        let repo = link.repo_id();
        let pr = self.with_client(|c, _| c.close(&repo, link.number))?;
        self.edit_kept(run_id, |k, _| {
            if pr.is_object() {
                k.details = Some(details_of(&pr));
            } else {
                let d = k.details.get_or_insert_with(|| json!({}));
                d["state"] = json!("closed");
            }
            k.closed_recorded = true;
            true
        })?;
        self.append(
            run_id,
            kinds::CLOSED,
            json!({"pr_number": link.number, "pr_url": link.html_url, "source": "svc"}),
            Some(actor),
        )?;
        Ok(link)
    }

    /// `GET /runs/{id}/pull_request`: the link, the kept (refreshed when stale) details,
    /// checks and comments; `details_status: unavailable` with the reason when the host
    /// cannot answer.
    pub fn view(&self, row: &RunRow) -> Result<Value, Error> {
        let link = Link::of_row(row).ok_or_else(|| no_record(&row.id))?;
        self.linked(&row.id)?;
        let (kept, failure) = match self.refresh(&row.id, false)? {
            Some(k) => k,
            None => return Err(no_record(&row.id)),
        };
        let (status, reason, error) = match (&failure, &kept.details) {
            (None, Some(_)) => ("available", Value::Null, Value::Null),
            (None, None) => (
                "unavailable",
                json!(Unavailability::FetchFailed.as_str()),
                json!("not fetched yet"),
            ),
            (Some((why, msg)), _) => ("unavailable", json!(why.as_str()), json!(msg)),
        };
        let verdict = Verdict::of(&kept.checks);
        Ok(json!({
            "data": {
                "link": link.to_json(),
                "state": kept.state_name(),
                "details": if failure.is_none() { kept.details.clone().unwrap_or(Value::Null) } else { Value::Null },
                "comments": kept.comments,
                "checks": kept.checks.iter().map(Check::full_json).collect::<Vec<_>>(),
                "checks_verdict": verdict.as_str(),
                "auto_merge": kept.options.auto_merge,
            },
            "meta": {
                "details_status": status,
                "details_unavailable_reason": reason,
                "details_error": error,
            },
        }))
    }
}

/// Upserts `c` into `list` by key.
pub fn upsert(list: &mut Vec<Check>, c: Check) {
    match list.iter_mut().find(|x| x.key == c.key) {
        Some(x) => *x = c,
        None => list.push(c),
    }
}

pub fn no_record(run_id: &str) -> Error {
    Error::NotFound {
        code: "no_stored_record",
        detail: format!("Run {run_id} has no pull request."),
    }
}
