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
    ]
}

pub(super) fn schemas() -> Value {
    json!({
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
