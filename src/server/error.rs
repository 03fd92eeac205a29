//! Typed API errors and their wire shape (SPEC 2.7): `{"errors":[{status, title, detail,
//! code?, request_id}], "request_id"}`.
//!
//! Owns: [`ApiError`] and the mapping from an error to a status code, reason phrase and JSON
//! body. Must not touch: routing, I/O, or any resource logic (handlers build errors, the HTTP
//! layer writes them).

use serde_json::{json, Value};
use std::fmt;

/// One API error: an HTTP status, a human-readable detail and an optional machine code.
/// Validation failures may carry extra members (e.g. workflow diagnostics) merged into the
/// first error entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub detail: String,
    pub code: Option<&'static str>,
    /// Extra members of the error entry, e.g. `diagnostics` for 422 on invalid workflows.
    pub extra: Option<Box<Value>>,
    /// Headers to add to the error response (e.g. `Allow` on 405).
    pub headers: Vec<(&'static str, String)>,
    /// Further entries of the same status after the first, each `(detail, extra members)`
    /// (e.g. one per invalid field of a catalog body).
    pub more: Vec<(String, Value)>,
}

impl ApiError {
    pub fn new(status: u16, detail: impl Into<String>) -> ApiError {
        ApiError {
            status,
            detail: detail.into(),
            code: None,
            extra: None,
            headers: Vec::new(),
            more: Vec::new(),
        }
    }

    /// Adds an entry after the first (same status, title and code).
    pub fn with_entry(mut self, detail: impl Into<String>, extra: Value) -> ApiError {
        self.more.push((detail.into(), extra));
        self
    }

    pub fn with_code(mut self, code: &'static str) -> ApiError {
        self.code = Some(code);
        self
    }

    pub fn with_extra(mut self, extra: Value) -> ApiError {
        self.extra = Some(Box::new(extra));
        self
    }

    pub fn with_header(mut self, name: &'static str, value: String) -> ApiError {
        self.headers.push((name, value));
        self
    }

    pub fn bad_request(detail: impl Into<String>) -> ApiError {
        ApiError::new(400, detail).with_code("bad_request")
    }

    pub fn unauthorized(detail: impl Into<String>) -> ApiError {
        ApiError::new(401, detail).with_code("unauthorized")
    }

    pub fn forbidden(detail: impl Into<String>) -> ApiError {
        ApiError::new(403, detail).with_code("forbidden")
    }

    pub fn not_found(detail: impl Into<String>) -> ApiError {
        ApiError::new(404, detail).with_code("not_found")
    }

    pub fn conflict(detail: impl Into<String>) -> ApiError {
        ApiError::new(409, detail).with_code("conflict")
    }

    pub fn gone(detail: impl Into<String>) -> ApiError {
        ApiError::new(410, detail).with_code("gone")
    }

    pub fn unprocessable(detail: impl Into<String>) -> ApiError {
        ApiError::new(422, detail).with_code("invalid_workflow")
    }

    pub fn not_implemented() -> ApiError {
        ApiError::new(501, "Not implemented.").with_code("not_implemented")
    }

    pub fn internal(detail: impl Into<String>) -> ApiError {
        ApiError::new(500, detail).with_code("internal_error")
    }

    pub fn unavailable(detail: impl Into<String>) -> ApiError {
        ApiError::new(503, detail).with_code("unavailable")
    }

    /// The short classification (the HTTP reason phrase).
    pub fn title(&self) -> &'static str {
        reason_phrase(self.status)
    }

    /// The JSON body, with `request_id` at the top level and in every entry.
    pub fn body(&self, request_id: &str) -> Value {
        let mut entry = json!({
            "status": self.status.to_string(),
            "title": self.title(),
            "detail": self.detail,
        });
        if let Some(code) = self.code {
            entry["code"] = json!(code);
        }
        if let Some(Value::Object(extra)) = self.extra.as_deref() {
            for (k, v) in extra {
                entry[k.as_str()] = v.clone();
            }
        }
        entry["request_id"] = json!(request_id);
        let mut entries = vec![entry];
        for (detail, extra) in &self.more {
            let mut e = json!({
                "status": self.status.to_string(),
                "title": self.title(),
                "detail": detail,
            });
            if let Some(code) = self.code {
                e["code"] = json!(code);
            }
            if let Value::Object(extra) = extra {
                for (k, v) in extra {
                    e[k.as_str()] = v.clone();
                }
            }
            e["request_id"] = json!(request_id);
            entries.push(e);
        }
        json!({ "errors": entries, "request_id": request_id })
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.status, self.title(), self.detail)
    }
}

impl std::error::Error for ApiError {}

/// Reason phrases for the statuses the API uses.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        302 => "Found",
        303 => "See Other",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        417 => "Expectation Failed",
        422 => "Unprocessable Entity",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_shape() {
        let e = ApiError::not_found("no run").with_extra(json!({"diagnostics": []}));
        let b = e.body("rid");
        assert_eq!(b["request_id"], "rid");
        assert_eq!(b["errors"][0]["status"], "404");
        assert_eq!(b["errors"][0]["title"], "Not Found");
        assert_eq!(b["errors"][0]["detail"], "no run");
        assert_eq!(b["errors"][0]["code"], "not_found");
        assert_eq!(b["errors"][0]["request_id"], "rid");
        assert!(b["errors"][0]["diagnostics"].is_array());
    }
}
