//! The route table: every path the server answers, in one list shared by both listeners,
//! the OpenAPI document's completeness test and demo mode.
//!
//! Owns: which handler serves which method and path, and whether it needs credentials.
//! Must not touch: handler logic.

use super::router::{Access, Route};
use super::system;

const fn public(method: &'static str, pattern: &'static str, handler: super::router::HandlerFn) -> Route {
    Route {
        method,
        pattern,
        access: Access::Public,
        handler,
    }
}

const fn user(method: &'static str, pattern: &'static str, handler: super::router::HandlerFn) -> Route {
    Route {
        method,
        pattern,
        access: Access::User,
        handler,
    }
}

pub fn routes() -> Vec<Route> {
    let ni = system::not_implemented;
    vec![
        public("GET", "/", system::root),
        public("GET", "/health", system::health),
        public("GET", "/api/v1/openapi.json", system::openapi_doc),
        user("GET", "/api/v1/user", system::user),
        user("POST", "/api/v1/workflow-versions", system::create_version),
        user("GET", "/api/v1/workflow-versions/{id}", system::get_version),
        // Placeholders (SPEC 7: 501).
        user("GET", "/api/v1/runs/{id}/usage", ni),
        user("GET", "/api/v1/runs/{id}/files", ni),
        user("GET", "/runs/{id}/files", ni),
        user("POST", "/api/v1/runs/{id}/steer", ni),
        user("POST", "/runs/{id}/steer", ni),
        user("POST", "/api/v1/runs/{id}/preview", ni),
        user("GET", "/api/v1/sandboxes", ni),
        user("GET", "/api/v1/sandboxes/{id}", ni),
        user("POST", "/api/v1/providers/test", ni),
    ]
}
