//! Demo mode (SPEC 1.12): requests with `X-Svc-Demo: 1` or the cookie `svc-demo=1` get
//! static fixture data without authentication; mutations get harmless canned answers.
//!
//! Owns: the fixtures. Must not touch: real runs, the store, versions or settings.

use super::error::ApiError;
use super::http::{Incoming, Reply};
use super::router::{Ctx, Route};
use super::App;

pub fn is_demo(inc: &Incoming<'_>) -> bool {
    inc.header("x-svc-demo").map(str::trim) == Some("1") || inc.cookie("svc-demo") == Some("1")
}

pub fn handle(_app: &App, _route: &Route, _ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    Err(ApiError::not_implemented())
}
