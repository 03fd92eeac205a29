//! Code-host webhooks (`POST /api/v1/webhooks/codehost`): GitHub's delivery format. A
//! delivery is verified before anything else: `X-Hub-Signature-256: sha256=<hex>` must be
//! the HMAC-SHA256 of the raw body under the vault's `CODEHOST_WEBHOOK_SECRET`, compared in
//! constant time. Then it is recorded once by its `X-GitHub-Delivery` id (a replay is
//! acknowledged and does nothing) and dispatched, acting as principal
//! `webhook {delivery_id}`:
//!
//! - `pull_request`: the kept details (state, draft, merged, counts, head); merged/closed
//!   recorded on the run; a new head drops the old head's checks;
//! - `check_run`, `status`: the check of that name on that head commit;
//! - `check_suite`, `pull_request_review`: the pull request is fetched again on next read;
//! - `issue_comment` on a pull request: its comment count;
//! - `push`, `issues`, `pull_request`: offered to the automations hook
//!   ([`super::AutomationHook`]).
//!
//! Each delivery's event, action, repository and outcome are listed newest first.
//!
//! Owns: verification, dedupe and dispatch. Must not touch: HTTP (the server reads the
//! headers and body and maps [`WebhookError`]), SQL.

use super::codehost::{RepoId, WEBHOOK_SECRET_KEY};
use super::pulls::{self, Check};
use super::{Error, Integrations};
use crate::store::{DeliveryRecord, PullRequestRecord};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};

/// One delivery as received.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    /// `X-GitHub-Event`.
    pub event: Option<&'a str>,
    /// `X-GitHub-Delivery`.
    pub delivery_id: Option<&'a str>,
    /// `X-Hub-Signature-256`.
    pub signature: Option<&'a str>,
    pub body: &'a [u8],
}

/// Why a delivery was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    /// Missing, malformed or wrong signature, or no secret to check it with (401).
    #[error("{0}")]
    Signature(String),
    /// A required header is missing or the body is not a JSON object (400).
    #[error("{0}")]
    BadRequest(String),
    /// svc could not record it (500).
    #[error("{0}")]
    Store(String),
}

/// What svc did with a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub delivery_id: String,
    pub event: String,
    pub action: Option<String>,
    /// `applied` (a run's pull request changed), `ignored` (nothing of svc's), `duplicate`
    /// (recorded before). A delivery svc could not apply is recorded `failed` (answered 500)
    /// and applied when the host delivers it again.
    pub outcome: String,
    pub detail: Option<String>,
    pub runs: Vec<String>,
}

impl Receipt {
    pub fn to_json(&self) -> Value {
        json!({"delivery_id": self.delivery_id, "event": self.event, "action": self.action,
               "outcome": self.outcome, "detail": self.detail, "runs": self.runs})
    }
}

/// Checks `header` (`sha256=<64 hex>`) against the HMAC-SHA256 of `body` under `secret`,
/// in constant time.
pub fn verify_signature(secret: &[u8], body: &[u8], header: Option<&str>) -> Result<(), String> {
    let header = header
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .ok_or("The delivery has no X-Hub-Signature-256 header.")?;
    let hex = header
        .strip_prefix("sha256=")
        .ok_or("X-Hub-Signature-256 must be `sha256=<hex digest>`.")?;
    let expected = decode_hex(hex).ok_or("X-Hub-Signature-256 is not a SHA-256 hex digest.")?;
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret)
        .map_err(|_| "The webhook secret cannot be used as an HMAC key.")?;
    mac.update(body);
    mac.verify_slice(&expected)
        .map_err(|_| "X-Hub-Signature-256 does not match the delivery: it was not signed with the webhook secret.".to_string())
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() != 64 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `sha256=<hex>` of `body` under `secret` (tests, benchmarks, and anyone sending).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = match Hmac::<sha2::Sha256>::new_from_slice(secret) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    mac.update(body);
    format!("sha256={}", crate::base::hex(&mac.finalize().into_bytes()))
}

fn webhook_actor(delivery_id: &str) -> Value {
    json!({"kind": "webhook", "delivery_id": delivery_id})
}

fn str_at<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p).and_then(Value::as_str)
}

impl Integrations {
    /// Verifies, records and dispatches one delivery (see the module docs).
    pub fn receive(&self, d: Delivery<'_>) -> Result<Receipt, WebhookError> {
        let secret = self
            .vault()
            .get(WEBHOOK_SECRET_KEY)
            .map_err(|e| WebhookError::Store(format!("the vault cannot be read: {e}")))?
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                WebhookError::Signature(format!(
                    "No webhook secret is configured ({WEBHOOK_SECRET_KEY} in the vault): deliveries cannot be verified."
                ))
            })?;
        verify_signature(secret.as_bytes(), d.body, d.signature)
            .map_err(WebhookError::Signature)?;
        let delivery_id = d
            .delivery_id
            .map(str::trim)
            .filter(|s| !s.is_empty() && s.len() <= 200)
            .ok_or_else(|| {
                WebhookError::BadRequest("The delivery has no X-GitHub-Delivery header.".into())
            })?;
        let event = d
            .event
            .map(str::trim)
            .filter(|s| !s.is_empty() && s.len() <= 100)
            .ok_or_else(|| {
                WebhookError::BadRequest("The delivery has no X-GitHub-Event header.".into())
            })?;
        let payload: Value = serde_json::from_slice(d.body)
            .map_err(|e| WebhookError::BadRequest(format!("The delivery body is not JSON: {e}")))?;
        if !payload.is_object() {
            return Err(WebhookError::BadRequest(
                "The delivery body is not a JSON object.".into(),
            ));
        }
        let action = str_at(&payload, "/action").map(str::to_string);
        let repository = str_at(&payload, "/repository/full_name").map(str::to_string);
        let fresh = self
            .table
            .insert_delivery(&DeliveryRecord {
                delivery_id: delivery_id.to_string(),
                event: event.to_string(),
                action: action.clone(),
                repository: repository.clone(),
                outcome: "received".into(),
                detail: None,
                received_at: crate::base::clock::now(),
            })
            .map_err(|e| WebhookError::Store(e.to_string()))?;
        // A delivery svc failed to apply (its store failed) is applied when it comes again
        // (the host's redelivery keeps the id); any other is a replay.
        let failed_before = !fresh
            && self
                .table
                .delivery_outcome(delivery_id)
                .map_err(|e| WebhookError::Store(e.to_string()))?
                .as_deref()
                == Some("failed");
        if !fresh && !failed_before {
            return Ok(Receipt {
                delivery_id: delivery_id.to_string(),
                event: event.to_string(),
                action,
                outcome: "duplicate".into(),
                detail: Some("this delivery was received before; nothing was done again".into()),
                runs: Vec::new(),
            });
        }
        let actor = webhook_actor(delivery_id);
        let (mut runs, mut detail) = match self.dispatch(event, &payload, &actor) {
            Ok(r) => r,
            Err(e) => {
                let why = format!("not applied: {e}");
                let _ = self
                    .table
                    .set_delivery_outcome(delivery_id, "failed", Some(&why));
                return Err(WebhookError::Store(why));
            }
        };
        if matches!(event, "push" | "issues" | "pull_request") {
            let hook = self.automation_hook_now();
            if let Some(h) = hook {
                if let Some(what) = h(event, delivery_id, &payload) {
                    detail = Some(match detail {
                        Some(d) => format!("{d}; {what}"),
                        None => what,
                    });
                }
            }
        }
        runs.sort();
        runs.dedup();
        let outcome = if runs.is_empty() {
            "ignored"
        } else {
            "applied"
        };
        if let Err(e) = self
            .table
            .set_delivery_outcome(delivery_id, outcome, detail.as_deref())
        {
            log::warn!("webhook {delivery_id}: cannot record its outcome: {e}");
        }
        Ok(Receipt {
            delivery_id: delivery_id.to_string(),
            event: event.to_string(),
            action,
            outcome: outcome.into(),
            detail,
            runs,
        })
    }

    fn automation_hook_now(&self) -> Option<super::AutomationHook> {
        self.automation_hook.lock().clone()
    }

    /// The runs whose pull request changed, and a note.
    fn dispatch(
        &self,
        event: &str,
        p: &Value,
        actor: &Value,
    ) -> Result<(Vec<String>, Option<String>), Error> {
        let Some(repo) = str_at(p, "/repository/owner/login")
            .zip(str_at(p, "/repository/name"))
            .and_then(|(o, n)| RepoId::parse(o, n))
        else {
            return Ok((Vec::new(), Some("no repository in the payload".into())));
        };
        let runs = match event {
            "pull_request" => self.on_pull_request(&repo, p, actor)?,
            "check_run" => {
                let cr = p.get("check_run").unwrap_or(&Value::Null);
                let sha = str_at(cr, "/head_sha").unwrap_or("");
                let numbers = numbers_of(cr.get("pull_requests"));
                match Check::from_check_run(cr) {
                    Some(c) => self.on_check(&repo, sha, &numbers, c, actor)?,
                    None => Vec::new(),
                }
            }
            "status" => {
                let sha = str_at(p, "/sha").unwrap_or("");
                match Check::from_status(p) {
                    Some(c) => self.on_check(&repo, sha, &[], c, actor)?,
                    None => Vec::new(),
                }
            }
            "check_suite" => {
                let sha = str_at(p, "/check_suite/head_sha").unwrap_or("");
                let recs = self
                    .table
                    .pull_requests_by_head(&repo.owner, &repo.name, sha)?;
                self.mark_stale(recs)?
            }
            "pull_request_review" => {
                let n = p
                    .pointer("/pull_request/number")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                let recs = self
                    .table
                    .pull_requests_by_number(&repo.owner, &repo.name, n)?;
                self.mark_stale(recs)?
            }
            "issue_comment" => self.on_issue_comment(&repo, p, actor)?,
            "ping" => return Ok((Vec::new(), Some("pong".into()))),
            _ => return Ok((Vec::new(), Some(format!("svc does not act on `{event}`")))),
        };
        let note = runs
            .is_empty()
            .then(|| "no run's pull request matches".to_string());
        Ok((runs, note))
    }

    fn on_pull_request(
        &self,
        repo: &RepoId,
        p: &Value,
        actor: &Value,
    ) -> Result<Vec<String>, Error> {
        let pr = p.get("pull_request").unwrap_or(&Value::Null);
        let Some(number) = pr.get("number").and_then(Value::as_u64) else {
            return Ok(Vec::new());
        };
        let details = pulls::details_of(pr);
        let head = str_at(pr, "/head/sha").map(str::to_string);
        let counts = pr.get("comments").and_then(Value::as_u64).map(|c| {
            c + pr
                .get("review_comments")
                .and_then(Value::as_u64)
                .unwrap_or(0)
        });
        let mut runs = Vec::new();
        for rec in self
            .table
            .pull_requests_by_number(&repo.owner, &repo.name, number)?
        {
            let edited = self.edit_kept_as(&rec.run_id, Some(actor), |k, h| {
                k.details = Some(details.clone());
                if let Some(c) = counts {
                    k.comments = c;
                }
                if head.is_some() && *h != head {
                    *h = head.clone();
                    k.checks.clear();
                }
                true
            })?;
            if edited.is_some() {
                runs.push(rec.run_id);
            }
        }
        Ok(runs)
    }

    /// A check (run or status) reported for commit `sha`: the pull requests whose head it
    /// is take it.
    fn on_check(
        &self,
        repo: &RepoId,
        sha: &str,
        numbers: &[u64],
        check: Check,
        actor: &Value,
    ) -> Result<Vec<String>, Error> {
        if sha.is_empty() {
            return Ok(Vec::new());
        }
        let mut recs = self
            .table
            .pull_requests_by_head(&repo.owner, &repo.name, sha)?;
        for n in numbers {
            for r in self
                .table
                .pull_requests_by_number(&repo.owner, &repo.name, *n)?
            {
                if !recs.iter().any(|x| x.run_id == r.run_id) {
                    recs.push(r);
                }
            }
        }
        let mut runs = Vec::new();
        for rec in recs {
            let edited = self.edit_kept_as(&rec.run_id, Some(actor), |k, h| {
                h.as_deref() == Some(sha) && k.put_check(check.clone())
            })?;
            if edited.is_some() && rec.head_sha.as_deref() == Some(sha) {
                runs.push(rec.run_id);
            }
        }
        Ok(runs)
    }

    fn on_issue_comment(
        &self,
        repo: &RepoId,
        p: &Value,
        actor: &Value,
    ) -> Result<Vec<String>, Error> {
        if p.pointer("/issue/pull_request").is_none() {
            return Ok(Vec::new());
        }
        let Some(n) = p.pointer("/issue/number").and_then(Value::as_u64) else {
            return Ok(Vec::new());
        };
        let delta: i64 = match str_at(p, "/action") {
            Some("created") => 1,
            Some("deleted") => -1,
            _ => 0,
        };
        let mut runs = Vec::new();
        for rec in self
            .table
            .pull_requests_by_number(&repo.owner, &repo.name, n)?
        {
            self.edit_kept_as(&rec.run_id, Some(actor), |k, _| {
                let next = (k.comments as i64 + delta).max(0) as u64;
                let changed = next != k.comments;
                k.comments = next;
                changed
            })?;
            runs.push(rec.run_id);
        }
        Ok(runs)
    }

    /// These pull requests are fetched again on their next read.
    fn mark_stale(&self, recs: Vec<PullRequestRecord>) -> Result<Vec<String>, Error> {
        let mut runs = Vec::new();
        for mut r in recs {
            r.refreshed_at_ms = 0;
            self.table.put_pull_request(&r)?;
            runs.push(r.run_id);
        }
        self.changes.bump();
        Ok(runs)
    }

    /// `GET /api/v1/webhooks/codehost/deliveries`: newest first.
    pub fn deliveries(&self, offset: usize, limit: usize) -> Result<Vec<Value>, Error> {
        Ok(self
            .table
            .deliveries(offset, limit)?
            .into_iter()
            .map(|d| {
                json!({"delivery_id": d.delivery_id, "event": d.event, "action": d.action,
                       "repository": d.repository, "outcome": d.outcome, "detail": d.detail,
                       "received_at": d.received_at})
            })
            .collect())
    }
}

fn numbers_of(v: Option<&Value>) -> Vec<u64> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|p| p.get("number").and_then(Value::as_u64))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_only_with_the_secret_and_the_exact_body() {
        let body = br#"{"zen":"ok"}"#;
        let good = sign(b"s3cret", body);
        assert!(good.starts_with("sha256=") && good.len() == 71);
        assert!(verify_signature(b"s3cret", body, Some(&good)).is_ok());
        assert!(verify_signature(b"other", body, Some(&good)).is_err());
        assert!(verify_signature(b"s3cret", b"{\"zen\":\"no\"}", Some(&good)).is_err());
        assert!(verify_signature(b"s3cret", body, None).is_err());
        assert!(verify_signature(b"s3cret", body, Some("sha1=abc")).is_err());
        assert!(verify_signature(b"s3cret", body, Some("sha256=zz")).is_err());
        let upper = good.to_uppercase().replace("SHA256=", "sha256=");
        assert!(verify_signature(b"s3cret", body, Some(&upper)).is_ok());
    }
}
