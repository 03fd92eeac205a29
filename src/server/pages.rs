//! The web UI's HTTP side: serves the pages and assets of [`crate::web`] with their security
//! headers when `server.web.enabled` is true, and 404 (error body) when it is not. `GET /`
//! answers the runs board to browsers (an `Accept` naming `text/html`) when the UI is on,
//! and the discovery JSON otherwise.
//!
//! Owns: page routes' responses. Must not touch: page content (see `crate::web`), auth.

use super::error::ApiError;
use super::http::Reply;
use super::router::Ctx;
use super::App;
use crate::web::{self, Page};

fn enabled(app: &App) -> Result<(), ApiError> {
    if app.settings.get().server.web.enabled {
        Ok(())
    } else {
        Err(ApiError::not_found(
            "The web UI is off: set server.web.enabled = true in settings.toml.",
        )
        .with_code("web_disabled"))
    }
}

fn reply(content_type: &str, body: String) -> Reply {
    let mut headers: Vec<(
        std::borrow::Cow<'static, str>,
        std::borrow::Cow<'static, str>,
    )> = vec![("Content-Type".into(), content_type.to_string().into())];
    for (k, v) in web::security_headers() {
        headers.push((k.into(), v.into()));
    }
    Reply::Full(rouille::Response {
        status_code: 200,
        headers,
        data: rouille::ResponseBody::from_string(body),
        upgrade: None,
    })
}

fn page(app: &App, p: Page) -> Result<Reply, ApiError> {
    enabled(app)?;
    Ok(reply("text/html; charset=utf-8", web::render(p)))
}

/// Whether `GET /` should get the board: the UI is on and the client is a browser.
pub fn wants_board(app: &App, ctx: &Ctx<'_, '_>) -> bool {
    app.settings.get().server.web.enabled
        && ctx
            .inc
            .header("accept")
            .is_some_and(|a| a.contains("text/html"))
}

pub fn board(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    page(app, Page::Board)
}

pub fn sign_in(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    page(app, Page::SignIn)
}

pub fn sign_out(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    page(app, Page::SignOut)
}

pub fn new_run(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    page(app, Page::NewRun)
}

pub fn run(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    page(app, Page::Run)
}

pub fn automations(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    page(app, Page::Automations)
}

/// `/automations/new` and `/automations/{id}`: the form (and an existing one's fires).
pub fn automation(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    page(app, Page::Automation)
}

/// `/settings`: admins' settings, providers, integrations and secrets (the API says 403 to
/// anyone else, and the page says so).
pub fn settings(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    page(app, Page::Settings)
}

/// `/insights`: admins' read-only SQL over the store's views, saved queries and a chart (the
/// API says 403 to anyone else, and the page says so).
pub fn insights(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    page(app, Page::Insights)
}

/// `/environments`: the environments catalog (list, preflight, create, edit, delete).
pub fn environments(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    page(app, Page::Environments)
}

pub fn asset(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    enabled(app)?;
    let name = ctx.param("name");
    let a =
        web::asset(name).ok_or_else(|| ApiError::not_found(format!("No asset named `{name}`.")))?;
    Ok(reply(a.content_type, a.body.to_string()))
}
