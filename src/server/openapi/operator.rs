//! The operator routes' part of the OpenAPI document (issue 29): settings and secrets (admin
//! only), and their schemas.
//!
//! Owns: describing `/api/v1/settings` and `/api/v1/secrets*`. Must not touch: handlers.

use super::{err, no_content, ok, op, r, Op};
use serde_json::{json, Value};

fn secret_name(op: Op) -> Op {
    op.param(
        "name",
        "path",
        json!({"type": "string"}),
        "A secret name svc uses (see GET /api/v1/secrets); any other is answered 422.",
    )
}

pub(super) fn operations() -> Vec<Op> {
    let admin =
        "Only the dev token's user and the logins of [server.auth] admins; anyone else is 403.";
    vec![
        op("get", "/api/v1/settings", "Settings", "The resolved settings the server runs with (admin)")
            .resp(vec![ok("200", admin, r("SettingsView"))]),
        op("patch", "/api/v1/settings", "Settings", "Change live-safe settings keys (JSON merge patch; admin)")
            .param("If-Match", "header", json!({"type": "string"}), "The settings file's revision (ETag of GET). Missing: 428; not current: 409.")
            .body(json!({"type": "object", "description": "A JSON merge patch (RFC 7396) of settings keys; only live_keys may appear."}), true)
            .resp(vec![
                ok("200", "The settings after the change (ETag: the new revision).", r("SettingsView")),
                err("400", "Malformed JSON or not an object."),
                err("409", "Stale revision: the file changed since it was read."),
                err("422", "An unknown key, a key that needs a restart or cannot change over HTTP, or invalid values."),
                err("428", "If-Match is required."),
            ]),
        op("get", "/api/v1/secrets", "Settings", "The vault's secrets by name (never values; admin)")
            .resp(vec![ok("200", "Every secret svc uses (set or not) and any other stored entry.", r("SecretList"))]),
        secret_name(op("put", "/api/v1/secrets/{name}", "Settings", "Set or replace a secret (write-only; admin)"))
            .body(json!({"type": "object", "required": ["value"], "additionalProperties": false, "properties": {"value": {"type": "string", "minLength": 1, "writeOnly": true}}}), true)
            .resp(vec![
                ok("200", "The entry (without its value).", r("SecretEntry")),
                err("400", "Malformed JSON."),
                err("422", "A name svc does not use, or an empty value."),
            ]),
        secret_name(op("delete", "/api/v1/secrets/{name}", "Settings", "Remove a secret (admin)"))
            .resp(vec![
                no_content("204", "Removed."),
                err("404", "The secret is not set."),
                err("422", "A name svc does not use."),
            ]),
        op("get", "/api/v1/system/info", "System", "Version, uptime, state directory, database and WAL size, run counts, sandbox providers, features")
            .resp(vec![ok("200", "The server.", r("SystemInfo"))]),
        op("get", "/api/v1/system/df", "System", "Bytes used by events, blobs, the database, workspaces, sandboxes and backups, with the largest runs")
            .resp(vec![ok("200", "Disk use.", r("SystemDf"))]),
        op("get", "/api/v1/usage", "Billing", "LLM tokens and cost across all runs and completions, by model, workflow, automation and day")
            .param("since", "query", json!({"type": "string"}), "Start of the range (RFC 3339 UTC or YYYY-MM-DD; default: 30 days before until).")
            .param("until", "query", json!({"type": "string"}), "End of the range, exclusive (default: now).")
            .resp(vec![
                ok("200", "Sums over the range, and the daily cap with today's spend (null without a cap).", r("UsageAggregate")),
                err("400", "A bound that is not a time, or since not before until."),
            ]),
        op("post", "/api/v1/system/prune", "System", "Remove finished runs (a dry run unless dry_run is false; admin)")
            .body(r("PruneRequest"), false)
            .resp(vec![
                ok("200", "What would be or was removed, with the bytes.", r("PruneResult")),
                err("400", "Malformed JSON or an unknown field."),
                err("422", "Contradictory or invalid filters (a status that is not finished, older_than with before, ...)."),
            ]),
    ]
}

pub(super) fn schemas() -> Value {
    let bytes = || json!({"type": "object", "required": ["bytes"], "properties": {"bytes": {"type": "integer", "minimum": 0}}});
    let counted = || json!({"type": "object", "required": ["count", "bytes"], "properties": {"count": {"type": "integer", "minimum": 0}, "bytes": {"type": "integer", "minimum": 0}}});
    json!({
        "UsageSums": {
            "type": "object",
            "required": ["records", "input_tokens", "output_tokens", "reasoning_tokens", "cache_read_tokens", "cache_write_tokens", "usd_micros", "priced_records"],
            "properties": {
                "records": {"type": "integer"}, "input_tokens": {"type": "integer"}, "output_tokens": {"type": "integer"},
                "reasoning_tokens": {"type": "integer"}, "cache_read_tokens": {"type": "integer"}, "cache_write_tokens": {"type": "integer"},
                "usd_micros": {"type": "integer"}, "priced_records": {"type": "integer"},
                "model": {"type": ["string", "null"]}, "provider": {"type": ["string", "null"]}, "workflow": {"type": ["string", "null"]},
                "automation_id": {"type": ["string", "null"]}, "day": {"type": ["string", "null"]}
            }
        },
        "DailyCap": {
            "type": "object",
            "required": ["max_usd_micros", "spent_usd_micros", "day", "reached"],
            "properties": {
                "max_usd_micros": {"type": "integer"}, "spent_usd_micros": {"type": "integer"}, "day": {"type": "string"},
                "reached": {"type": "boolean"}, "message": {"type": ["string", "null"]}
            }
        },
        "UsageAggregate": {
            "type": "object",
            "required": ["since", "until", "totals", "by_model", "by_workflow", "by_automation", "by_day", "daily_cap"],
            "properties": {
                "since": {"type": "string"}, "until": {"type": "string"},
                "totals": r("UsageSums"),
                "by_model": {"type": "array", "items": r("UsageSums")},
                "by_workflow": {"type": "array", "items": r("UsageSums")},
                "by_automation": {"type": "array", "items": r("UsageSums")},
                "by_day": {"type": "array", "items": r("UsageSums")},
                "daily_cap": {"oneOf": [r("DailyCap"), {"type": "null"}]}
            }
        },
        "SystemInfo": {
            "type": "object",
            "required": ["version", "uptime_secs", "state_dir", "database", "runs", "sandbox_providers", "features"],
            "properties": {
                "version": {"type": "string"},
                "uptime_secs": {"type": "integer", "minimum": 0},
                "state_dir": {"type": "string"},
                "database": {"type": "object", "required": ["path", "bytes", "wal_bytes", "schema_version"], "properties": {
                    "path": {"type": "string"}, "bytes": {"type": "integer"}, "wal_bytes": {"type": "integer"}, "schema_version": {"type": "integer"}}},
                "runs": {"type": "object", "required": ["total", "active", "queued"], "properties": {
                    "total": {"type": "integer"}, "active": {"type": "integer"}, "queued": {"type": "integer"}}},
                "sandbox_providers": {"type": "array", "items": {"enum": ["local", "container", "hosted"]}},
                "features": {"type": "array", "items": {"type": "string"}}
            }
        },
        "SystemDf": {
            "type": "object",
            "required": ["runs", "events", "blobs", "database", "workspaces", "sandboxes", "backups", "total_bytes", "largest_runs"],
            "properties": {
                "runs": {"type": "integer", "minimum": 0},
                "events": counted(),
                "blobs": counted(),
                "database": {"type": "object", "required": ["bytes", "wal_bytes"], "properties": {"bytes": {"type": "integer"}, "wal_bytes": {"type": "integer"}}},
                "workspaces": bytes(),
                "sandboxes": bytes(),
                "backups": bytes(),
                "total_bytes": {"type": "integer", "minimum": 0},
                "largest_runs": {"type": "array", "items": {"type": "object", "required": ["run_id", "events", "event_bytes", "workspace_bytes"], "properties": {
                    "run_id": {"type": "string"}, "status": {"type": ["string", "null"]}, "workflow": {"type": ["string", "null"]},
                    "events": {"type": "integer"}, "event_bytes": {"type": "integer"}, "workspace_bytes": {"type": "integer"}}}}
            }
        },
        "PruneRequest": {
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "dry_run": {"type": "boolean", "default": true},
                "older_than": {"type": "string", "pattern": "^[0-9]+[smhdw]$", "description": "Runs that ended more than this long ago (default 24h when before is absent)."},
                "before": {"type": "string", "description": "Runs that ended before this time (RFC 3339 UTC or YYYY-MM-DD)."},
                "status": {"type": "array", "minItems": 1, "items": {"enum": ["succeeded", "failed", "dead"]}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "automation": {"type": "string"},
                "manual_only": {"type": "boolean"}
            }
        },
        "PruneResult": {
            "type": "object",
            "required": ["dry_run", "runs", "total_count", "total_size_bytes", "deleted_count", "freed_bytes"],
            "properties": {
                "dry_run": {"type": "boolean"},
                "runs": {"type": "array", "items": {"type": "object", "required": ["run_id", "status", "size_bytes", "removed"], "properties": {
                    "run_id": {"type": "string"}, "status": {"type": "string"}, "workflow": {"type": ["string", "null"]},
                    "ended_at": {"type": "string"}, "size_bytes": {"type": "integer"}, "removed": {"type": "boolean"}}}},
                "total_count": {"type": "integer"},
                "total_size_bytes": {"type": "integer"},
                "deleted_count": {"type": "integer"},
                "freed_bytes": {"type": "integer"},
                "advice": {"type": ["string", "null"]}
            }
        },
        "SecretEntry": {
            "type": "object",
            "required": ["name", "set"],
            "properties": {
                "name": {"type": "string"},
                "purpose": {"type": ["string", "null"]},
                "set": {"type": "boolean"},
                "type": {"type": ["string", "null"], "enum": ["environment", "file", "credential", null]},
                "updated_at": {"type": ["string", "null"]}
            }
        },
        "SecretList": {
            "type": "object",
            "required": ["data"],
            "properties": {"data": {"type": "array", "items": r("SecretEntry")}}
        },
        "SettingsView": {
            "type": "object",
            "required": ["revision", "file", "settings", "live_keys", "restart_keys", "secrets"],
            "properties": {
                "revision": {"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "SHA-256 of the settings file (of nothing when it does not exist)."},
                "file": {"type": "string"},
                "file_exists": {"type": "boolean"},
                "settings": {"type": "object", "description": "The resolved settings (file over defaults); never a secret."},
                "live_keys": {"type": "array", "items": {"type": "string"}},
                "restart_keys": {"type": "array", "items": {"type": "string"}},
                "secrets": {"type": "array", "items": r("SecretEntry")}
            }
        }
    })
}
