//! The route table: every path the server answers, in one list shared by both listeners,
//! the OpenAPI document's completeness test and demo mode.
//!
//! Owns: which handler serves which method and path, and whether it needs credentials.
//! Must not touch: handler logic.

use super::auth;
use super::automations;
use super::catalog;
use super::completions;
use super::environments;
use super::housekeeping;
use super::insights;
use super::integrations;
use super::mcp_servers;
use super::models;
use super::pages;
use super::preview;
use super::router::{Access, Route};
use super::runs;
use super::sandboxes;
use super::sessions;
use super::settings_api;
use super::spending;
use super::system;
use super::workflows;
use crate::automations::Automations;
use crate::environments::Environments;
use crate::insights::SavedQueries;
use crate::mcp::catalog::McpServers;

const fn public(
    method: &'static str,
    pattern: &'static str,
    handler: super::router::HandlerFn,
) -> Route {
    Route {
        method,
        pattern,
        access: Access::Public,
        handler,
    }
}

const fn user(
    method: &'static str,
    pattern: &'static str,
    handler: super::router::HandlerFn,
) -> Route {
    Route {
        method,
        pattern,
        access: Access::User,
        handler,
    }
}

const fn admin(
    method: &'static str,
    pattern: &'static str,
    handler: super::router::HandlerFn,
) -> Route {
    Route {
        method,
        pattern,
        access: Access::Admin,
        handler,
    }
}

pub fn routes() -> Vec<Route> {
    vec![
        public("GET", "/", system::root),
        public("GET", "/health", system::health),
        public("GET", "/api/v1/openapi.json", system::openapi_doc),
        public("GET", "/openapi.json", system::openapi_doc),
        // Browser sign-in: these check credentials themselves (see `server::auth`).
        public("GET", "/api/v1/auth/config", auth::config),
        public("POST", "/auth/dev-token", auth::dev_token_login),
        public("POST", "/auth/logout", auth::logout),
        public("GET", "/auth/login", auth::login),
        public("GET", "/auth/callback", auth::callback),
        user("GET", "/api/v1/user", system::user),
        user("POST", "/api/v1/workflow-versions", system::create_version),
        user("GET", "/api/v1/workflow-versions/{id}", system::get_version),
        user("POST", "/api/v1/runs", runs::create),
        user("GET", "/api/v1/runs", runs::list),
        user("GET", "/runs", runs::list),
        user("GET", "/api/v1/runs/{id}", runs::get),
        user("DELETE", "/api/v1/runs/{id}", runs::delete),
        user("POST", "/api/v1/runs/{id}/start", runs::start),
        user("POST", "/api/v1/runs/{id}/cancel", runs::cancel),
        user("POST", "/api/v1/runs/{id}/pause", runs::pause),
        user("POST", "/api/v1/runs/{id}/unpause", runs::unpause),
        user("POST", "/api/v1/runs/{id}/archive", runs::archive),
        user("POST", "/api/v1/runs/{id}/unarchive", runs::unarchive),
        user("POST", "/api/v1/runs/{id}/retry", runs::retry::retry),
        user("POST", "/api/v1/runs/{id}/rewind", runs::rewind::rewind),
        user("POST", "/api/v1/runs/{id}/approve", runs::approve),
        user("POST", "/api/v1/runs/{id}/deny", runs::deny),
        user("GET", "/api/v1/runs/{id}/questions", runs::questions),
        user(
            "POST",
            "/api/v1/runs/{id}/questions/{qid}/answer",
            runs::answer,
        ),
        user("GET", "/api/v1/runs/{id}/events", runs::events),
        user("GET", "/api/v1/runs/{id}/attach", runs::attach),
        user("GET", "/api/v1/attach", runs::attach_all),
        user("GET", "/api/v1/runs/{id}/checkpoint", runs::checkpoint),
        user("GET", "/api/v1/runs/{id}/stages", runs::stages::list),
        user("GET", "/api/v1/runs/{id}/stages/{node}", runs::stages::node),
        user("GET", "/api/v1/runs/{id}/graph/source", runs::graph_source),
        user("GET", "/api/v1/runs/{id}/graph", runs::graph_svg),
        user("POST", "/api/v1/runs/{id}/steer", runs::steer),
        user("GET", "/api/v1/runs/{id}/sessions", sessions::list),
        user("POST", "/api/v1/runs/{id}/sessions", sessions::create),
        user("GET", "/api/v1/sessions/{id}", sessions::get),
        user("GET", "/api/v1/sessions/{id}/events", sessions::events),
        user("GET", "/api/v1/sessions/{id}/attach", sessions::attach),
        user("POST", "/api/v1/sessions/{id}/turns", sessions::turn),
        user(
            "POST",
            "/api/v1/sessions/{id}/turns/{turn}/interrupt",
            sessions::interrupt,
        ),
        user("POST", "/runs/{id}/steer", runs::steer),
        user("GET", "/api/v1/runs/{id}/usage", runs::usage::get),
        user("GET", "/api/v1/models", models::list),
        user("POST", "/api/v1/providers/test", models::test_providers),
        user("GET", "/api/v1/runs/{id}/files", runs::files::list),
        user("GET", "/api/v1/runs/{id}/artifacts", runs::artifacts::list),
        user(
            "GET",
            "/api/v1/runs/{id}/artifacts/{artifact_id}",
            runs::artifacts::download,
        ),
        user("GET", "/runs/{id}/files", runs::files::list),
        user("GET", "/api/v1/sandboxes", sandboxes::list),
        user("GET", "/api/v1/sandboxes/{id}", sandboxes::get),
        user("POST", "/api/v1/runs/{id}/preview", preview::create),
        user("GET", "/api/v1/automations", catalog::list::<Automations>),
        user(
            "POST",
            "/api/v1/automations",
            catalog::create::<Automations>,
        ),
        user(
            "GET",
            "/api/v1/automations/{id}",
            catalog::get::<Automations>,
        ),
        user(
            "PUT",
            "/api/v1/automations/{id}",
            catalog::replace::<Automations>,
        ),
        user(
            "DELETE",
            "/api/v1/automations/{id}",
            catalog::delete::<Automations>,
        ),
        user("POST", "/api/v1/automations/{id}/runs", automations::fire),
        user("GET", "/api/v1/automations/{id}/runs", automations::runs),
        user("GET", "/api/v1/automations/{id}/fires", automations::fires),
        // Outside senders have no token: the delivery's HMAC signature is the credential.
        public(
            "POST",
            "/api/v1/automations/{id}/hooks/{trigger_id}",
            automations::hook,
        ),
        user("GET", "/api/v1/mcp-servers", catalog::list::<McpServers>),
        user("POST", "/api/v1/mcp-servers", catalog::create::<McpServers>),
        user(
            "GET",
            "/api/v1/mcp-servers/{id}",
            catalog::get::<McpServers>,
        ),
        user(
            "PUT",
            "/api/v1/mcp-servers/{id}",
            catalog::replace::<McpServers>,
        ),
        user(
            "DELETE",
            "/api/v1/mcp-servers/{id}",
            catalog::delete::<McpServers>,
        ),
        user("POST", "/api/v1/mcp-servers/{id}/test", mcp_servers::test),
        // Settings and secrets: admins only (server::auth::require_admin).
        admin("GET", "/api/v1/system/backups", system::backups),
        admin("GET", "/api/v1/settings", settings_api::get),
        admin("PATCH", "/api/v1/settings", settings_api::patch),
        admin("GET", "/api/v1/secrets", settings_api::list_secrets),
        admin("PUT", "/api/v1/secrets/{name}", settings_api::put_secret),
        admin(
            "DELETE",
            "/api/v1/secrets/{name}",
            settings_api::delete_secret,
        ),
        user("GET", "/api/v1/system/info", housekeeping::info),
        user("GET", "/api/v1/system/df", housekeeping::df),
        admin("POST", "/api/v1/system/prune", housekeeping::prune),
        user("GET", "/api/v1/usage", spending::get),
        // The workflow catalog (opgroups 11).
        user("GET", "/api/v1/workflows", workflows::list),
        user("GET", "/api/v1/workflows/{name}", workflows::get),
        user("GET", "/api/v1/workflows/{name}/runs", workflows::runs),
        // One model call through the server's providers (it spends: signed-in users only).
        user("POST", "/api/v1/completions", completions::create),
        // Insights (issue 29): read-only SQL over the store's views, admins only.
        admin("POST", "/api/v1/insights/query", insights::query),
        admin("GET", "/api/v1/insights/schema", insights::schema),
        admin(
            "GET",
            "/api/v1/insights/queries",
            catalog::list::<SavedQueries>,
        ),
        admin(
            "POST",
            "/api/v1/insights/queries",
            catalog::create::<SavedQueries>,
        ),
        admin(
            "GET",
            "/api/v1/insights/queries/{id}",
            catalog::get::<SavedQueries>,
        ),
        admin(
            "PUT",
            "/api/v1/insights/queries/{id}",
            catalog::replace::<SavedQueries>,
        ),
        admin(
            "DELETE",
            "/api/v1/insights/queries/{id}",
            catalog::delete::<SavedQueries>,
        ),
        // Integrations (opgroups 5): the code host's pull requests, checks and webhooks.
        user("GET", "/api/v1/system/integrations", integrations::list),
        user(
            "GET",
            "/api/v1/repos/codehost/{owner}/{name}",
            integrations::repo,
        ),
        user(
            "POST",
            "/api/v1/runs/{id}/pull_request",
            integrations::create,
        ),
        user("GET", "/api/v1/runs/{id}/pull_request", integrations::get),
        user("PUT", "/api/v1/runs/{id}/pull_request", integrations::link),
        user(
            "DELETE",
            "/api/v1/runs/{id}/pull_request",
            integrations::unlink,
        ),
        user(
            "GET",
            "/api/v1/runs/{id}/pull_request/creation",
            integrations::creation,
        ),
        user(
            "POST",
            "/api/v1/runs/{id}/pull_request/merge",
            integrations::merge,
        ),
        user(
            "POST",
            "/api/v1/runs/{id}/pull_request/close",
            integrations::close,
        ),
        // Signed by the code host (X-Hub-Signature-256), not by a user credential.
        public("POST", "/api/v1/webhooks/codehost", integrations::webhook),
        public("POST", "/api/v1/webhooks/chat", integrations::chat_callback),
        user(
            "GET",
            "/api/v1/webhooks/codehost/deliveries",
            integrations::deliveries,
        ),
        user("GET", "/api/v1/environments", environments::list),
        user(
            "POST",
            "/api/v1/environments",
            catalog::create::<Environments>,
        ),
        user(
            "GET",
            "/api/v1/environments/{id}",
            catalog::get::<Environments>,
        ),
        user(
            "PUT",
            "/api/v1/environments/{id}",
            catalog::replace::<Environments>,
        ),
        user(
            "DELETE",
            "/api/v1/environments/{id}",
            catalog::delete::<Environments>,
        ),
        user(
            "GET",
            "/api/v1/environments/{id}/preflight",
            environments::preflight,
        ),
    ]
}

/// The web UI's pages and assets (public: the pages hold no data; they read the API with
/// the browser's session). Not API routes, so not in the OpenAPI document.
pub fn page_routes() -> Vec<Route> {
    vec![
        public("GET", "/login", pages::sign_in),
        public("GET", "/logout", pages::sign_out),
        public("GET", "/runs/new", pages::new_run),
        public("GET", "/runs/{id}", pages::run),
        public("GET", "/automations", pages::automations),
        public("GET", "/automations/{id}", pages::automation),
        public("GET", "/settings", pages::settings),
        public("GET", "/insights", pages::insights),
        public("GET", "/environments", pages::environments),
        public("GET", "/assets/{name}", pages::asset),
    ]
}

/// Every route the server answers: the API, then the pages.
pub fn all() -> Vec<Route> {
    let mut r = routes();
    r.extend(page_routes());
    r
}
