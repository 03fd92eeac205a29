//! The artifacts routes' part of the OpenAPI document (issue 32): `GET /api/v1/runs/{id}/
//! artifacts`, the download of one, and their schemas.
//!
//! Owns: describing the artifacts routes. Must not touch: handlers.

use super::{err, ok, op, r, Op};
use serde_json::{json, Value};

pub(super) fn operations() -> Vec<Op> {
    vec![
        op(
            "get",
            "/api/v1/runs/{id}/artifacts",
            "Run Outputs",
            "Files the run kept at the end of its stages ([run] artifacts or the create body's artifacts)",
        )
        .id()
        .paging()
        .resp(vec![
            ok("200", "A page of artifacts, in the order they were kept.", r("ArtifactPage")),
            err("400", "Malformed run id or paging parameter."),
            err("404", "No such run."),
        ]),
        op(
            "get",
            "/api/v1/runs/{id}/artifacts/{artifact_id}",
            "Run Outputs",
            "Download one artifact",
        )
        .id()
        .param(
            "artifact_id",
            "path",
            json!({"type": "string"}),
            "The artifact's id (from the list).",
        )
        .resp(vec![
            (
                "200".to_string(),
                json!({"description": "The file's bytes as an attachment (application/octet-stream, X-Content-SHA256).",
                       "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}),
            ),
            err("400", "Malformed run id."),
            err("404", "No such run, or the run has no artifact with this id."),
            err("503", "The object store cannot be read (object_store_unavailable)."),
        ]),
    ]
}

pub(super) fn schemas() -> Value {
    json!({
        "Artifact": {
            "type": "object",
            "required": ["id", "path", "bytes", "content_sha256", "captured_at", "attempt", "download_url"],
            "properties": {
                "id": {"type": "string"},
                "node_id": {"type": ["string", "null"], "description": "The stage that left it."},
                "attempt": {"type": "integer", "minimum": 1},
                "path": {"type": "string", "description": "Relative to the workspace."},
                "bytes": {"type": "integer", "minimum": 0},
                "content_sha256": {"type": "string"},
                "captured_at": {"type": "string", "format": "date-time"},
                "download_url": {"type": "string"}
            }
        },
        "ArtifactPage": {
            "type": "object",
            "required": ["data", "meta"],
            "properties": {
                "data": {"type": "array", "items": r("Artifact")},
                "meta": {
                    "type": "object",
                    "required": ["has_more", "total"],
                    "properties": {"has_more": {"type": "boolean"}, "total": {"type": "integer", "minimum": 0}}
                }
            }
        }
    })
}
