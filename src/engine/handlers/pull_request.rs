//! The `pull_request` handler: pushes the workspace's latest checkpoint on the run branch,
//! opens (or updates) the run's pull request and, unless `pull_request.wait_checks=false`,
//! waits for the head commit's checks ([`crate::engine::Publisher`]). Green checks (or none
//! within `pull_request.checks_grace`) succeed; red checks fail the stage deterministically
//! so an `outcome=failed` edge can route to a repair stage, which reads
//! `$context.pull_request.failed_checks` and `$context.pull_request.checks_summary`; checks
//! still running at `pull_request.checks_timeout` fail it as a retryable timeout.
//!
//! Context written: `pull_request.number`, `pull_request.url`, `pull_request.head`,
//! `pull_request.checks` (`passed`, `failed`, `none`, `pending`, `skipped`),
//! `pull_request.failed_checks` (names, comma-separated) and `pull_request.checks_summary`
//! (one line per failed check with its output).
//! Must not touch: the code host itself (the publisher does).

use super::{HandlerResult, Interrupt, StageCtx};
use crate::engine::failure::FailureClass;
use crate::engine::outcome::{Failure, StageOutcome};
use crate::engine::{ChecksVerdict, PullRequestReport, PullRequestStage};
use serde_json::{json, Value};
use std::time::Duration;

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
const DEFAULT_GRACE: Duration = Duration::from_secs(120);

pub(super) fn run(cx: &StageCtx<'_, '_>) -> HandlerResult {
    let view = cx.view();
    let services = cx.services();
    let stage = PullRequestStage {
        node_id: cx.scoped_id(),
        head: services.workspace.head(),
        draft: view.bool("pull_request.draft"),
        wait_checks: view.bool("pull_request.wait_checks").unwrap_or(true),
        checks_timeout: view
            .duration("pull_request.checks_timeout")
            .unwrap_or(DEFAULT_TIMEOUT),
        checks_grace: view
            .duration("pull_request.checks_grace")
            .unwrap_or(DEFAULT_GRACE),
    };
    // Waiting on the code host is deliberate: it does not count toward the stall watchdog.
    let _quiet = cx.quiet();
    let report = match services.publisher.pull_request(&stage, cx.cancel) {
        Ok(r) => r,
        Err(_) if cx.cancel.is_cancelled() => return Err(Interrupt::Cancelled),
        Err(message) => {
            return Ok(StageOutcome::failed(Failure::retryable(
                message,
                FailureClass::TransientInfra,
            )))
        }
    };
    if cx.cancel.is_cancelled() {
        return Err(Interrupt::Cancelled);
    }
    cx.emit("pull_request.checks", checks_event(&report))?;
    Ok(outcome(&report))
}

fn checks_event(r: &PullRequestReport) -> Value {
    json!({
        "pr_number": r.number,
        "pr_url": r.html_url,
        "head_sha": r.head,
        "verdict": r.verdict.as_str(),
        "checks": r.checks.iter().map(|c| json!({"name": c.name, "status": c.status, "summary": c.summary})).collect::<Vec<_>>(),
    })
}

/// The stage outcome and context of a report.
fn outcome(r: &PullRequestReport) -> StageOutcome {
    let failed: Vec<_> = r.checks.iter().filter(|c| !c.passed).collect();
    let names: Vec<&str> = failed.iter().map(|c| c.name.as_str()).collect();
    let summary: String = failed
        .iter()
        .map(|c| {
            let words = c.summary.as_deref().unwrap_or("no output");
            format!("- {} ({}): {}\n", c.name, c.status, words)
        })
        .collect();
    let mut o = match r.verdict {
        ChecksVerdict::Passed | ChecksVerdict::None | ChecksVerdict::Skipped => {
            StageOutcome::succeeded()
        }
        ChecksVerdict::Failed => StageOutcome::failed(Failure::deterministic(format!(
            "checks failed on pull request #{}: {}",
            r.number,
            names.join(", ")
        ))),
        ChecksVerdict::Pending => StageOutcome::failed(Failure::timeout(format!(
            "checks of pull request #{} were still running at pull_request.checks_timeout: {}",
            r.number,
            names.join(", ")
        ))),
    };
    let ctx = &mut o.context_updates;
    ctx.insert("pull_request.number".into(), json!(r.number));
    ctx.insert("pull_request.url".into(), json!(r.html_url));
    ctx.insert("pull_request.head".into(), json!(r.head));
    ctx.insert("pull_request.checks".into(), json!(r.verdict.as_str()));
    ctx.insert("pull_request.failed_checks".into(), json!(names.join(", ")));
    ctx.insert("pull_request.checks_summary".into(), json!(summary));
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::CheckReport;

    fn report(verdict: ChecksVerdict, checks: Vec<(&str, &str, bool)>) -> PullRequestReport {
        PullRequestReport {
            number: 7,
            html_url: "https://h/o/r/pull/7".into(),
            head: "abc".into(),
            verdict,
            checks: checks
                .into_iter()
                .map(|(n, s, p)| CheckReport {
                    name: n.into(),
                    status: s.into(),
                    passed: p,
                    summary: (!p).then(|| format!("{n} broke")),
                })
                .collect(),
        }
    }

    #[test]
    fn red_checks_fail_the_stage_with_what_failed_in_the_context() {
        let o = outcome(&report(
            ChecksVerdict::Failed,
            vec![("lint", "success", true), ("test", "failure", false)],
        ));
        assert!(o.is_failed());
        assert!(!o.failure.as_ref().unwrap().retryable);
        assert_eq!(o.context_updates["pull_request.checks"], "failed");
        assert_eq!(o.context_updates["pull_request.failed_checks"], "test");
        assert_eq!(
            o.context_updates["pull_request.checks_summary"],
            "- test (failure): test broke\n"
        );
        let green = outcome(&report(
            ChecksVerdict::Passed,
            vec![("test", "success", true)],
        ));
        assert!(!green.is_failed());
        assert_eq!(green.context_updates["pull_request.number"], 7);
        let pending = outcome(&report(
            ChecksVerdict::Pending,
            vec![("slow", "in_progress", false)],
        ));
        assert!(pending.failure.unwrap().retryable);
        assert!(!outcome(&report(ChecksVerdict::None, vec![])).is_failed());
    }
}
