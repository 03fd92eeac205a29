//! The HTTP side of the integrations (opgroups 5.1): `GET /api/v1/system/integrations`,
//! `GET /api/v1/repos/codehost/{owner}/{name}`, a run's pull request
//! (`/api/v1/runs/{id}/pull_request`: create as a job, its creation, get, link, unlink,
//! merge, close), code-host webhooks (`POST /api/v1/webhooks/codehost`, its delivery
//! list) and chat's interactivity callback (`POST /api/v1/webhooks/chat`). The behaviour is `crate::integrations`'; this maps requests to it and its errors
//! to statuses: a precondition 400 with its code, a missing record 404, an existing pull
//! request 409 `pull_request_exists`, a disabled or unconfigured integration 409
//! `integration_unavailable` (svc's state, not a failure of svc: not a 5xx), the host's
//! refusal or failure 502 with the host's reason.
//!
//! Owns: these routes' request and response shapes. Must not touch: the code host, SQL.

use super::error::ApiError;
use super::http::Reply;
use super::router::Ctx;
use super::App;
use crate::integrations::codehost::RepoId;
use crate::integrations::webhooks::{Delivery, WebhookError};
use crate::integrations::{status, Error};
use crate::settings::MergeStrategy;
use serde::Deserialize;
use serde_json::{json, Value};

/// An integration error as the API answers it.
pub fn api_error(e: Error) -> ApiError {
    match e {
        Error::Unavailable(u) => {
            ApiError::new(409, u.to_string()).with_code("integration_unavailable")
        }
        Error::Precondition { code, detail } => ApiError::new(400, detail).with_code(code),
        Error::NotFound { code, detail } => ApiError::new(404, detail).with_code(code),
        Error::Conflict { code, detail } => ApiError::new(409, detail).with_code(code),
        Error::Host(h) => ApiError::new(502, h.to_string()).with_code("codehost_error"),
        Error::Store(s) => ApiError::internal(format!("Integration store failure: {s}")),
    }
}

fn actor(ctx: &Ctx<'_, '_>) -> Value {
    ctx.principal
        .clone()
        .unwrap_or_else(|| crate::auth::Principal::dev().to_json())
}

/// `GET /api/v1/system/integrations`.
pub fn list(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    Ok(Reply::json(
        200,
        &json!({"data": status::all(&app.integrations)}),
    ))
}

/// `GET /api/v1/repos/codehost/{owner}/{name}`: whether svc's credentials reach it.
pub fn repo(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let (owner, name) = (ctx.param("owner"), ctx.param("name"));
    let repo = RepoId::parse(owner, name).ok_or_else(|| {
        ApiError::bad_request(format!("`{owner}/{name}` is not a repository name."))
            .with_code("invalid_repository")
    })?;
    let settings = app.settings.get();
    let app_url = settings.server.integrations.codehost.app_url.clone();
    let base = json!({"owner": repo.owner, "name": repo.name});
    let found = app.integrations.with_client(|c, _| c.repo(&repo));
    let mut v = base;
    match found {
        Ok(info) => {
            v["accessible"] = json!(true);
            v["default_branch"] = json!(info.default_branch);
            v["private"] = json!(info.private);
            v["permissions"] = json!({"pull": info.pull, "push": info.push, "admin": info.admin});
        }
        Err(
            e @ (crate::integrations::codehost::api::HostError::NotFound(_)
            | crate::integrations::codehost::api::HostError::Credentials(_)),
        ) => {
            v["accessible"] = json!(false);
            v["reason"] = json!(e.to_string());
            v["install_url"] = json!(app_url);
        }
        Err(e) => return Err(api_error(e.into())),
    }
    Ok(Reply::json(200, &v))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    #[serde(default)]
    force: bool,
    #[serde(default)]
    model: Option<String>,
}

fn creation_json(record: &Value) -> Value {
    let f = |k: &str| record.get(k).cloned().unwrap_or(Value::Null);
    json!({"id": f("id"), "status": f("status"), "model": f("model"), "force": f("force"),
           "requested_at": f("requested_at"), "updated_at": f("updated_at"),
           "pull_request": f("pull_request"), "error": f("error")})
}

/// `POST /runs/{id}/pull_request {force?, model?}`: 202 with the job, `Location` and
/// `Retry-After`; the pending job when there is one.
pub fn create(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.get_row(ctx.param("id"))?;
    let body: CreateBody = ctx.inc.json_or_default()?;
    let (job, _) = app
        .integrations
        .request_creation(&row, body.force, body.model, &actor(ctx))
        .map_err(api_error)?;
    let location = format!("/api/v1/runs/{}/pull_request/creation", row.id);
    let Reply::Full(mut resp) = Reply::json(202, &creation_json(&job.record)) else {
        return Err(ApiError::internal("unexpected reply"));
    };
    resp.headers.push(("Location".into(), location.into()));
    resp.headers.push(("Retry-After".into(), "2".into()));
    Ok(Reply::Full(resp))
}

/// `GET /runs/{id}/pull_request/creation`: the run's latest creation job.
pub fn creation(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.get_row(ctx.param("id"))?;
    match app.integrations.table.creation(&row.id) {
        Ok(Some(c)) => Ok(Reply::json(200, &creation_json(&c.record))),
        Ok(None) => Err(ApiError::not_found(format!(
            "Run {} has no pull request creation.",
            row.id
        ))
        .with_code("no_stored_record")),
        Err(e) => Err(api_error(e.into())),
    }
}

/// `GET /runs/{id}/pull_request`.
pub fn get(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.get_row(ctx.param("id"))?;
    let v = app.integrations.view(&row).map_err(api_error)?;
    Ok(Reply::json(200, &v))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkBody {
    html_url: String,
}

/// `PUT /runs/{id}/pull_request {html_url}`.
pub fn link(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.get_row(ctx.param("id"))?;
    let body: LinkBody = ctx.inc.json()?;
    let link = app
        .integrations
        .link(&row, &body.html_url, &actor(ctx))
        .map_err(api_error)?;
    Ok(Reply::json(200, &link.to_json()))
}

/// `DELETE /runs/{id}/pull_request`.
pub fn unlink(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.get_row(ctx.param("id"))?;
    let link = app
        .integrations
        .unlink(&row, &actor(ctx))
        .map_err(api_error)?;
    Ok(Reply::json(200, &link.to_json()))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct MergeBody {
    #[serde(default)]
    method: Option<MergeStrategy>,
}

/// `POST /runs/{id}/pull_request/merge {method?}`.
pub fn merge(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.get_row(ctx.param("id"))?;
    let body: MergeBody = ctx.inc.json_or_default()?;
    let (link, method) = app
        .integrations
        .merge(&row.id, body.method, &actor(ctx))
        .map_err(api_error)?;
    Ok(Reply::json(
        200,
        &json!({"number": link.number, "html_url": link.html_url, "method": method.as_str()}),
    ))
}

/// `POST /runs/{id}/pull_request/close`.
pub fn close(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.get_row(ctx.param("id"))?;
    let link = app
        .integrations
        .close(&row.id, &actor(ctx))
        .map_err(api_error)?;
    Ok(Reply::json(
        200,
        &json!({"number": link.number, "html_url": link.html_url}),
    ))
}

/// `POST /api/v1/webhooks/codehost`: no bearer token; the signature is the credential.
pub fn webhook(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let event = ctx.inc.header("x-github-event").map(str::to_string);
    let delivery_id = ctx.inc.header("x-github-delivery").map(str::to_string);
    let signature = ctx.inc.header("x-hub-signature-256").map(str::to_string);
    let body = ctx.inc.body()?;
    let receipt = app
        .integrations
        .receive(Delivery {
            event: event.as_deref(),
            delivery_id: delivery_id.as_deref(),
            signature: signature.as_deref(),
            body,
        })
        .map_err(|e| match e {
            WebhookError::Signature(m) => ApiError::unauthorized(m).with_code("invalid_signature"),
            WebhookError::BadRequest(m) => ApiError::bad_request(m),
            WebhookError::Store(m) => ApiError::internal(m),
        })?;
    Ok(Reply::json(200, &receipt.to_json()))
}

/// `POST /api/v1/webhooks/chat`: Slack's interactivity callback; no bearer token, the
/// `X-Slack-Signature` is the credential (401 when missing, wrong or older than 5 minutes).
pub fn chat_callback(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    use crate::integrations::chat::InteractError;
    let timestamp = ctx
        .inc
        .header("x-slack-request-timestamp")
        .map(str::to_string);
    let signature = ctx.inc.header("x-slack-signature").map(str::to_string);
    let body = ctx.inc.body()?;
    let answer = app
        .integrations
        .chat
        .interact(timestamp.as_deref(), signature.as_deref(), body)
        .map_err(|e| match e {
            InteractError::Signature(m) => ApiError::unauthorized(m).with_code("invalid_signature"),
            InteractError::BadRequest(m) => ApiError::bad_request(m),
        })?;
    Ok(Reply::json(200, &answer))
}

/// `GET /api/v1/webhooks/codehost/deliveries`: every delivery, newest first.
pub fn deliveries(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let (limit, offset) = super::runs::page(ctx)?;
    let mut data = app
        .integrations
        .deliveries(offset, limit + 1)
        .map_err(api_error)?;
    let has_more = data.len() > limit;
    data.truncate(limit);
    Ok(Reply::json(
        200,
        &json!({"data": data, "meta": {"has_more": has_more}}),
    ))
}
