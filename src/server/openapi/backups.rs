//! The backups route's part of the OpenAPI document (issue 32): `GET /api/v1/system/backups`
//! and its schemas.
//!
//! Owns: describing `/api/v1/system/backups`. Must not touch: handlers.

use super::{err, ok, op, r, Op};
use serde_json::{json, Value};

pub(super) fn operations() -> Vec<Op> {
    vec![op(
        "get",
        "/api/v1/system/backups",
        "System",
        "The database snapshots in the object store, newest first, and the schedule (admin)",
    )
    .resp(vec![
        ok(
            "200",
            "object_store is null (and backups empty) when [server.object_store] is not set.",
            r("BackupList"),
        ),
        err(
            "503",
            "The object store cannot be reached or listed (object_store_unavailable).",
        ),
    ])]
}

pub(super) fn schemas() -> Value {
    json!({
        "Backup": {
            "type": "object",
            "required": ["key", "size", "taken_at"],
            "properties": {
                "key": {"type": "string", "description": "backups/svc-<UTC time>-<ULID>.db"},
                "size": {"type": "integer", "minimum": 0},
                "taken_at": {"type": "string", "format": "date-time"}
            }
        },
        "BackupList": {
            "type": "object",
            "required": ["object_store", "schedule", "backups"],
            "properties": {
                "object_store": {"type": ["string", "null"], "description": "The local root or s3://bucket."},
                "schedule": {
                    "type": "object",
                    "properties": {
                        "every": {"type": ["string", "null"]},
                        "keep": {"type": "integer", "minimum": 1}
                    }
                },
                "backups": {"type": "array", "items": r("Backup")}
            }
        }
    })
}
