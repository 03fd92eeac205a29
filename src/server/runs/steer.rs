//! `POST /api/v1/runs/{id}/steer` (and its alias `/runs/{id}/steer`): guidance for the
//! run's running agent stage (SPEC 2.11). The body is checked (400), the run must exist
//! (404) and have an agent session running now (409); the guidance is queued on the run's
//! [`RunHandle`](super::RunHandle) steering queue and answered 202 `{"accepted": true}`. The
//! agent session injects it before its next model call and records
//! `agent.steering.injected`.
//!
//! Owns: the steer body rules and the 409 decision. Must not touch: the store (the engine
//! records the event when the guidance is delivered) or agent internals.

use super::super::error::ApiError;
use super::super::http::{parse_json, Reply};
use super::super::router::Ctx;
use super::super::App;
use crate::agent::SteerLocation;
use serde::Deserialize;
use serde_json::json;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SteerBody {
    guidance: String,
    #[serde(default)]
    location: Option<LocationBody>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LocationBody {
    file: String,
    /// A JSON number: `3` and `3.0` are the same integer (JSON Schema says so).
    #[serde(default)]
    line: Option<serde_json::Number>,
}

/// A whole number >= 1, written as an integer or as a float without a fraction.
fn line_number(n: &serde_json::Number) -> Option<u64> {
    n.as_u64().or_else(|| {
        let f = n.as_f64()?;
        (f.fract() == 0.0 && f >= 0.0 && f <= u64::MAX as f64).then_some(f as u64)
    })
}

/// A checked steering request: non-blank guidance; a location names a non-blank file and,
/// optionally, a line >= 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SteerRequest {
    pub guidance: String,
    pub location: Option<SteerLocation>,
}

/// Parses and checks a steer body (400 with a message saying what is wrong).
pub fn parse_body(body: &[u8]) -> Result<SteerRequest, ApiError> {
    let b: SteerBody = parse_json(body)?;
    if b.guidance.trim().is_empty() {
        return Err(ApiError::bad_request("`guidance` is empty.").with_code("invalid_body"));
    }
    let location = match b.location {
        None => None,
        Some(l) => {
            if l.file.trim().is_empty() {
                return Err(
                    ApiError::bad_request("`location.file` is empty.").with_code("invalid_body")
                );
            }
            let line = match &l.line {
                None => None,
                Some(n) => match line_number(n) {
                    Some(0) | None => {
                        return Err(ApiError::bad_request(
                            "`location.line` must be a whole number starting at 1.",
                        )
                        .with_code("invalid_body"))
                    }
                    line => line,
                },
            };
            Some(SteerLocation {
                file: l.file.trim().to_string(),
                line,
            })
        }
    };
    Ok(SteerRequest {
        guidance: b.guidance.trim().to_string(),
        location,
    })
}

pub fn steer(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let id = ctx.param("id").to_string();
    let row = app.runs.row(&id)?;
    let req = parse_body(ctx.inc.body()?)?;
    let no_agent = |why: String| ApiError::conflict(why).with_code("no_active_agent");
    // A run without a live engine (queued, finished, ...) has no handle.
    let handle = app.runs.handle(&id).ok_or_else(|| {
        no_agent(format!(
            "Run {id} is {}; steering needs a running agent stage.",
            row.status.name()
        ))
    })?;
    handle
        .steering
        .offer(&req.guidance, req.location)
        .map_err(|_| {
            no_agent(format!(
                "Run {id} has no agent stage running now (it is {}); steer while an agent stage runs.",
                row.status.name()
            ))
        })?;
    Ok(Reply::json(202, &json!({"accepted": true})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies() {
        let ok = |b: &str| parse_body(b.as_bytes()).expect(b);
        let bad = |b: &str| parse_body(b.as_bytes()).expect_err(b).status;
        assert_eq!(
            ok(r#"{"guidance": " Use the helper. "}"#),
            SteerRequest {
                guidance: "Use the helper.".into(),
                location: None
            }
        );
        assert_eq!(
            ok(r#"{"guidance": "x", "location": {"file": "src/a.rs", "line": 3}}"#).location,
            ok(r#"{"guidance": "x", "location": {"file": "src/a.rs", "line": 3.0}}"#).location,
        );
        assert_eq!(
            ok(r#"{"guidance": "x", "location": {"file": "src/a.rs", "line": 3}}"#).location,
            Some(SteerLocation {
                file: "src/a.rs".into(),
                line: Some(3)
            })
        );
        assert_eq!(
            ok(r#"{"guidance": "x", "location": {"file": "src/a.rs"}}"#).location,
            Some(SteerLocation {
                file: "src/a.rs".into(),
                line: None
            })
        );
        assert_eq!(ok(r#"{"guidance": "x", "location": null}"#).location, None);
        for b in [
            "",
            "{",
            "[]",
            r#"{}"#,
            r#"{"guidance": ""}"#,
            r#"{"guidance": "   "}"#,
            r#"{"guidance": 5}"#,
            r#"{"guidance": "x", "extra": 1}"#,
            r#"{"guidance": "x", "location": {}}"#,
            r#"{"guidance": "x", "location": {"file": " "}}"#,
            r#"{"guidance": "x", "location": {"file": "a", "line": 0}}"#,
            r#"{"guidance": "x", "location": {"file": "a", "line": -2}}"#,
            r#"{"guidance": "x", "location": {"file": "a", "line": "3"}}"#,
            r#"{"guidance": "x", "location": {"file": "a", "line": 2.5}}"#,
            r#"{"guidance": "x", "location": "a.rs:3"}"#,
        ] {
            assert_eq!(bad(b), 400, "{b}");
        }
    }
}
