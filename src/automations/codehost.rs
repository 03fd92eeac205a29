//! Code-host events as GitHub delivers them (its documented webhook payloads): naming an
//! event from the `X-GitHub-Event` header and the payload's `action`, and matching a
//! `codehost` trigger's events and filter.
//!
//! - `push`: `ref` (`refs/heads/<branch>`), `repository.full_name`.
//! - `pull_request` with action `opened` / `labeled`: `pull_request.base.ref` (the branch the
//!   pull request targets), `pull_request.labels[].name`, `label.name` (the label added),
//!   `repository.full_name`.
//! - `issues` with action `opened` / `labeled`: `issue.labels[].name`, `label.name`,
//!   `repository.full_name`.
//!
//! Filters: `repositories` against `repository.full_name`; `branches` against the branch
//! pushed or targeted (issues have none and pass); `labels`: a `labeled` event passes when
//! the label added is listed, an `opened` one when any of the item's labels is (a push
//! passes). Empty lists pass everything.
//!
//! Owns: event names and filter matching. Must not touch: signatures, firing.

use super::model::CodehostFilter;
use serde_json::Value;

/// The trigger event name (`push`, `pull_request.opened`, ...) of a delivery, or `None` for
/// one no trigger can listen to.
pub fn event_name(header: &str, payload: &Value) -> Option<String> {
    let action = payload.get("action").and_then(Value::as_str);
    let name = match (header, action) {
        ("push", _) => "push".to_string(),
        ("pull_request" | "issues", Some(a @ ("opened" | "labeled"))) => format!("{header}.{a}"),
        _ => return None,
    };
    Some(name)
}

fn str_at<'v>(v: &'v Value, pointer: &str) -> Option<&'v str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// Whether a delivery named `event` passes `filter`; `Err` says why not.
pub fn matches(filter: &CodehostFilter, event: &str, payload: &Value) -> Result<(), String> {
    if !filter.repositories.is_empty() {
        let repo = str_at(payload, "/repository/full_name").unwrap_or("");
        if !filter
            .repositories
            .iter()
            .any(|r| r.eq_ignore_ascii_case(repo))
        {
            return Err(format!("repository `{repo}` is not in the filter"));
        }
    }
    let branch = match event {
        "push" => str_at(payload, "/ref").map(|r| r.strip_prefix("refs/heads/").unwrap_or(r)),
        e if e.starts_with("pull_request.") => str_at(payload, "/pull_request/base/ref"),
        _ => None,
    };
    if !filter.branches.is_empty() {
        if let Some(b) = branch {
            if !filter.branches.iter().any(|f| f == b) {
                return Err(format!("branch `{b}` is not in the filter"));
            }
        } else if event == "push" || event.starts_with("pull_request.") {
            return Err("the delivery names no branch".into());
        }
    }
    if !filter.labels.is_empty() && event != "push" {
        let labels: Vec<&str> = if event.ends_with(".labeled") {
            str_at(payload, "/label/name").into_iter().collect()
        } else {
            let item = if event.starts_with("issues.") {
                "/issue/labels"
            } else {
                "/pull_request/labels"
            };
            payload
                .pointer(item)
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|l| str_at(l, "/name")).collect())
                .unwrap_or_default()
        };
        if !labels.iter().any(|l| filter.labels.iter().any(|f| f == l)) {
            return Err(format!("labels {labels:?} are not in the filter"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn filter(repos: &[&str], branches: &[&str], labels: &[&str]) -> CodehostFilter {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
        CodehostFilter {
            repositories: v(repos),
            branches: v(branches),
            labels: v(labels),
        }
    }

    #[test]
    fn names_and_filters() {
        let push = json!({"ref": "refs/heads/main", "repository": {"full_name": "acme/app"}});
        assert_eq!(event_name("push", &push).as_deref(), Some("push"));
        assert!(matches(&filter(&["acme/app"], &["main"], &["x"]), "push", &push).is_ok());
        assert!(matches(&filter(&[], &["dev"], &[]), "push", &push).is_err());
        assert!(matches(&filter(&["other/repo"], &[], &[]), "push", &push).is_err());

        let pr = json!({"action": "labeled", "label": {"name": "svc-review"},
            "pull_request": {"number": 7, "base": {"ref": "main"}, "labels": [{"name": "svc-review"}]},
            "repository": {"full_name": "acme/app"}});
        assert_eq!(
            event_name("pull_request", &pr).as_deref(),
            Some("pull_request.labeled")
        );
        assert!(matches(
            &filter(&[], &["main"], &["svc-review"]),
            "pull_request.labeled",
            &pr
        )
        .is_ok());
        assert!(matches(&filter(&[], &[], &["other"]), "pull_request.labeled", &pr).is_err());

        let issue = json!({"action": "opened", "issue": {"number": 3, "labels": [{"name": "bug"}]},
            "repository": {"full_name": "acme/app"}});
        assert_eq!(
            event_name("issues", &issue).as_deref(),
            Some("issues.opened")
        );
        assert!(matches(&filter(&[], &["main"], &["bug"]), "issues.opened", &issue).is_ok());
        assert!(matches(&filter(&[], &[], &["feature"]), "issues.opened", &issue).is_err());
        assert_eq!(event_name("issues", &json!({"action": "closed"})), None);
        assert_eq!(event_name("star", &json!({})), None);
    }
}
