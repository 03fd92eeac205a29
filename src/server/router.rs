//! The one route table both listeners share: method + path pattern → handler, with path
//! parameters (`{id}`), 404 for unknown paths and 405 (with `Allow`) for known paths asked
//! with the wrong method. `HEAD` is answered by the `GET` route.
//!
//! Owns: matching. Must not touch: auth, demo mode or handler logic (see `app.rs`).

use super::error::ApiError;
use super::http::{Incoming, Reply};
use super::App;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No credentials needed (discovery, health, OpenAPI).
    Public,
    /// A valid credential (or demo mode) is required.
    User,
    /// A valid credential of a user with the server's admin rights (see
    /// [`super::auth::require_admin`]); never demo mode.
    Admin,
}

pub type HandlerFn = fn(&App, &mut Ctx<'_, '_>) -> Result<Reply, ApiError>;

/// One route.
pub struct Route {
    pub method: &'static str,
    pub pattern: &'static str,
    pub access: Access,
    pub handler: HandlerFn,
}

/// What a handler gets: the request, its path parameters and the caller.
pub struct Ctx<'r, 'a> {
    pub inc: &'r mut Incoming<'a>,
    pub params: Vec<(&'static str, String)>,
    /// The authenticated principal (SPEC 2.6), `None` on public routes and in demo mode.
    pub principal: Option<serde_json::Value>,
    pub route: &'static str,
}

impl Ctx<'_, '_> {
    pub fn param(&self, name: &str) -> &str {
        self.params
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }

    pub fn request_id(&self) -> &str {
        &self.inc.request_id
    }
}

pub enum Match<'t> {
    Found(&'t Route, Vec<(&'static str, String)>),
    MethodNotAllowed(Vec<&'static str>),
    NotFound,
}

pub struct Router {
    routes: Vec<Route>,
}

impl Router {
    pub fn new(routes: Vec<Route>) -> Router {
        Router { routes }
    }

    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    pub fn find(&self, method: &str, path: &str) -> Match<'_> {
        let method = if method == "HEAD" { "GET" } else { method };
        let mut allowed = Vec::new();
        for r in &self.routes {
            if let Some(params) = match_pattern(r.pattern, path) {
                if r.method == method {
                    return Match::Found(r, params);
                }
                if !allowed.contains(&r.method) {
                    allowed.push(r.method);
                }
            }
        }
        if allowed.is_empty() {
            Match::NotFound
        } else {
            Match::MethodNotAllowed(allowed)
        }
    }
}

/// `"/api/v1/runs/{id}"` against `"/api/v1/runs/01H…"` → `[("id", "01H…")]`.
pub fn match_pattern(pattern: &'static str, path: &str) -> Option<Vec<(&'static str, String)>> {
    let mut params = Vec::new();
    let mut pi = pattern.split('/');
    let mut si = path.split('/');
    loop {
        match (pi.next(), si.next()) {
            (None, None) => return Some(params),
            (Some(p), Some(s)) => {
                if let Some(name) = p.strip_prefix('{').and_then(|n| n.strip_suffix('}')) {
                    if s.is_empty() {
                        return None;
                    }
                    params.push((name, s.to_string()));
                } else if p != s {
                    return None;
                }
            }
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert_eq!(match_pattern("/health", "/health"), Some(vec![]));
        assert_eq!(match_pattern("/health", "/health/"), None);
        assert_eq!(
            match_pattern("/a/{id}/b/{q}", "/a/1/b/2"),
            Some(vec![("id", "1".into()), ("q", "2".into())])
        );
        assert_eq!(match_pattern("/a/{id}", "/a/"), None);
        assert_eq!(match_pattern("/a/{id}", "/a/1/2"), None);
    }
}
