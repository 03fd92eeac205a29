//! The integrations' part of the OpenAPI document (opgroups 5): system integrations, the
//! repository access check, a run's pull request routes and code-host webhooks, with their
//! schemas.
//!
//! Owns: describing these routes. Must not touch: handlers.

use super::{err, ok, op, r, Op};
use serde_json::{json, Value};

pub(super) fn operations() -> Vec<Op> {
    let nf = || {
        err(
            "404",
            "No such run, or it has no pull request (code `no_stored_record`).",
        )
    };
    let unavailable = || {
        err(
            "409",
            "The code-host integration is disabled or lacks credentials (code `integration_unavailable`).",
        )
    };
    let host = || {
        err(
            "502",
            "The code host refused or failed; `detail` carries its reason.",
        )
    };
    vec![
        op("get", "/api/v1/system/integrations", "System", "Each integration's status")
            .resp(vec![ok("200", "One entry per provider (codehost, chat).", r("IntegrationList"))]),
        op("get", "/api/v1/repos/codehost/{owner}/{name}", "Integrations", "Whether svc's code-host credentials reach a repository")
            .param("owner", "path", json!({"type": "string"}), "Repository owner.")
            .param("name", "path", json!({"type": "string"}), "Repository name.")
            .resp(vec![
                ok("200", "Access, default branch, private flag and permissions.", r("RepoAccess")),
                err("400", "Not a repository name."),
                unavailable(),
                host(),
            ]),
        op("post", "/api/v1/runs/{id}/pull_request", "Integrations", "Open the run's pull request (a durable job)")
            .id()
            .body(r("CreatePullRequest"), false)
            .resp(vec![
                ok("202", "The job (the pending one if there is one); `Location` is its creation resource, `Retry-After` when to look.", r("PullRequestCreation")),
                err("400", "A precondition failed: code missing_repo_origin, missing_run_branch, empty_diff, missing_base_branch, run_not_finished or run_not_successful (send force)."),
                err("404", "No such run."),
                err("409", "The run already has a pull request (`pull_request_exists`), or the integration is unavailable (`integration_unavailable`)."),
            ]),
        op("get", "/api/v1/runs/{id}/pull_request/creation", "Integrations", "The run's latest pull request creation job")
            .id()
            .resp(vec![ok("200", "The job.", r("PullRequestCreation")), err("404", "No such run, or no job.")]),
        op("get", "/api/v1/runs/{id}/pull_request", "Integrations", "The run's pull request: link, live details, checks, comments")
            .id()
            .resp(vec![ok("200", "Details are refreshed from the host at most every 30 s; `meta.details_status` is `unavailable` with the reason when the host cannot answer.", r("PullRequestView")), nf()]),
        op("put", "/api/v1/runs/{id}/pull_request", "Integrations", "Link a pull request made elsewhere")
            .id()
            .body(r("LinkPullRequest"), true)
            .resp(vec![
                ok("200", "The link.", r("PullRequestLink")),
                err("400", "Malformed body, a URL on another host (`unsupported_host`) or not a pull request (`invalid_pull_request_url`)."),
                err("404", "No such run."),
            ]),
        op("delete", "/api/v1/runs/{id}/pull_request", "Integrations", "Unlink the run's pull request (it is not touched on the host)")
            .id()
            .resp(vec![ok("200", "The removed link.", r("PullRequestLink")), nf()]),
        op("post", "/api/v1/runs/{id}/pull_request/merge", "Integrations", "Merge the run's pull request")
            .id()
            .body(r("MergePullRequest"), false)
            .resp(vec![
                ok("200", "Merged.", r("MergeResult")),
                err("400", "Malformed body or unknown method."),
                nf(),
                unavailable(),
                host(),
            ]),
        op("post", "/api/v1/runs/{id}/pull_request/close", "Integrations", "Close the run's pull request without merging")
            .id()
            .resp(vec![ok("200", "Closed.", r("CloseResult")), nf(), unavailable(), host()]),
        op("post", "/api/v1/webhooks/codehost", "Integrations", "A code-host webhook delivery (signed with X-Hub-Signature-256)")
            .public()
            .param("X-GitHub-Event", "header", json!({"type": "string"}), "The event name.")
            .param("X-GitHub-Delivery", "header", json!({"type": "string"}), "The delivery id (deliveries are deduplicated on it).")
            .param("X-Hub-Signature-256", "header", json!({"type": "string"}), "`sha256=` and the HMAC-SHA256 of the raw body under the webhook secret.")
            .body(json!({"type": "object"}), true)
            .resp(vec![
                ok("200", "Received (or a replay, acknowledged and not applied again).", r("WebhookReceipt")),
                err("400", "A missing X-GitHub-Event or X-GitHub-Delivery, or a body that is not a JSON object."),
                err("401", "Missing, malformed or wrong signature, or no webhook secret configured."),
                err("413", "Body too large."),
                err("500", "svc could not record or apply it (recorded `failed`; a redelivery with the same id is applied)."),
            ]),
        op("post", "/api/v1/webhooks/chat", "Integrations", "Chat's interactivity callback (Slack's block_actions, signed with X-Slack-Signature v0)")
            .public()
            .param("X-Slack-Request-Timestamp", "header", json!({"type": "string"}), "Unix seconds; more than 5 minutes from now is refused.")
            .param("X-Slack-Signature", "header", json!({"type": "string"}), "`v0=` and the HMAC-SHA256 of `v0:<timestamp>:<raw body>` under the signing secret.")
            .resp(vec![
                ok("200", "Verified: `outcome` is `answered` (with `answer`), `already_answered`, `refused` or `ignored` (not an answer button).", json!({"type": "object", "required": ["outcome"], "properties": {"outcome": {"enum": ["answered", "already_answered", "refused", "ignored"]}}})),
                err("400", "Not a form with a JSON `payload` field."),
                err("401", "Missing, wrong or stale signature, or no signing secret configured."),
                err("413", "Body too large."),
            ]),
        op("get", "/api/v1/webhooks/codehost/deliveries", "Integrations", "Webhook deliveries received, newest first")
            .paging()
            .resp(vec![ok("200", "A page of deliveries.", r("DeliveryPage")), err("400", "Bad paging parameter.")]),
    ]
}

pub(super) fn schemas() -> Value {
    let nullable = |t: &str| json!({"type": [t, "null"]});
    let check = json!({"type": "object", "required": ["name", "status"], "properties": {
        "name": {"type": "string"}, "status": {"type": "string"}, "duration_secs": nullable("integer"),
        "started_at": nullable("string"), "completed_at": nullable("string"), "title": nullable("string"),
        "summary": nullable("string"), "details_url": nullable("string")
    }});
    json!({
        "IntegrationStatus": {"type": "object", "required": ["provider", "enabled", "configured", "status", "missing_credentials", "metadata"], "properties": {
            "provider": {"enum": ["codehost", "chat"]},
            "enabled": {"type": "boolean"},
            "configured": {"type": "boolean"},
            "status": {"enum": ["disabled", "missing_credentials", "configured", "connecting", "connected", "error"]},
            "missing_credentials": {"type": "array", "items": {"type": "string"}},
            "last_error": {"type": ["object", "null"]},
            "metadata": {"type": "object"}
        }},
        "IntegrationList": {"type": "object", "required": ["data"], "properties": {"data": {"type": "array", "items": r("IntegrationStatus")}}},
        "RepoAccess": {"type": "object", "required": ["owner", "name", "accessible"], "properties": {
            "owner": {"type": "string"}, "name": {"type": "string"}, "accessible": {"type": "boolean"},
            "default_branch": {"type": "string"}, "private": {"type": "boolean"},
            "permissions": {"type": "object", "properties": {"pull": {"type": "boolean"}, "push": {"type": "boolean"}, "admin": {"type": "boolean"}}},
            "install_url": nullable("string"),
            "reason": {"type": "string", "description": "Why the repository cannot be reached (not accessible only)."}
        }},
        "PullRequestLink": {"type": "object", "required": ["owner", "repo", "number", "html_url"], "properties": {
            "owner": {"type": "string"}, "repo": {"type": "string"}, "number": {"type": "integer"}, "html_url": {"type": "string"}
        }},
        "CreatePullRequest": {"type": "object", "additionalProperties": false, "properties": {
            "force": {"type": "boolean", "default": false, "description": "Publish a run that did not succeed."},
            "model": {"type": ["string", "null"], "description": "The model that writes the title and body (default: the run's)."}
        }},
        "PullRequestCreation": {"type": "object", "required": ["id", "status"], "properties": {
            "id": {"type": "string"}, "status": {"enum": ["pending", "succeeded", "failed"]},
            "model": {"type": ["string", "null"], "description": "As requested while pending; once succeeded, the model that wrote the title and body (null: the template)."}, "force": {"type": "boolean"},
            "requested_at": {"type": "string"}, "updated_at": {"type": "string"},
            "pull_request": {"oneOf": [r("PullRequestLink"), {"type": "null"}]}, "error": nullable("string")
        }},
        "PullRequestView": {"type": "object", "required": ["data", "meta"], "properties": {
            "data": {"type": "object", "required": ["link", "details", "checks", "comments"], "properties": {
                "link": r("PullRequestLink"),
                "state": {"enum": ["open", "draft", "merged", "closed", "unknown"]},
                "details": {"type": ["object", "null"], "description": "PullRequestDetails: title, body, state, draft, merged, merged_at, mergeable, additions, deletions, changed_files, author, head_branch, base_branch, head_sha, timestamps."},
                "comments": {"type": "integer"},
                "checks": {"type": "array", "items": check},
                "checks_verdict": {"enum": ["none", "pending", "passed", "failed"]},
                "auto_merge": {"type": "boolean"}
            }},
            "meta": {"type": "object", "required": ["details_status"], "properties": {
                "details_status": {"enum": ["available", "unavailable"]},
                "details_unavailable_reason": {"enum": ["integration_unavailable", "not_found", "fetch_failed", null]},
                "details_error": nullable("string")
            }}
        }},
        "LinkPullRequest": {"type": "object", "required": ["html_url"], "additionalProperties": false, "properties": {
            "html_url": {"type": "string", "description": "<web_url>/<owner>/<repo>/pull/<number> on the configured code host."}
        }},
        "MergePullRequest": {"type": "object", "additionalProperties": false, "properties": {
            "method": {"enum": ["merge", "squash", "rebase"], "description": "Default: the run's merge_strategy."}
        }},
        "MergeResult": {"type": "object", "required": ["number", "html_url", "method"], "properties": {
            "number": {"type": "integer"}, "html_url": {"type": "string"}, "method": {"enum": ["merge", "squash", "rebase"]}
        }},
        "CloseResult": {"type": "object", "required": ["number", "html_url"], "properties": {
            "number": {"type": "integer"}, "html_url": {"type": "string"}
        }},
        "WebhookReceipt": {"type": "object", "required": ["delivery_id", "event", "outcome"], "properties": {
            "delivery_id": {"type": "string"}, "event": {"type": "string"}, "action": nullable("string"),
            "outcome": {"enum": ["applied", "ignored", "duplicate"]}, "detail": nullable("string"),
            "runs": {"type": "array", "items": {"type": "string"}}
        }},
        "Delivery": {"type": "object", "required": ["delivery_id", "event", "outcome", "received_at"], "properties": {
            "delivery_id": {"type": "string"}, "event": {"type": "string"}, "action": nullable("string"),
            "repository": nullable("string"), "outcome": {"type": "string"}, "detail": nullable("string"),
            "received_at": {"type": "string"}
        }},
        "DeliveryPage": {"type": "object", "required": ["data", "meta"], "properties": {"data": {"type": "array", "items": r("Delivery")}, "meta": r("Meta")}}
    })
}
