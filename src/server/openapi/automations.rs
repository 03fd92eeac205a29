//! The automations' part of the OpenAPI document: the catalog routes and their schemas.
//!
//! Owns: describing `/api/v1/automations*`. Must not touch: handlers.

use super::{err, no_content, ok, op, r, Op};
use serde_json::{json, Value};

/// An automation id in a path.
fn slug_param(op: Op) -> Op {
    op.param(
        "id",
        "path",
        json!({"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{0,62}$"}),
        "Automation id (a slug). Anything else is answered 400.",
    )
}

fn if_match(op: Op) -> Op {
    op.param(
        "If-Match",
        "header",
        json!({"type": "string"}),
        "The automation's current revision (quotes optional). Missing: 428; not a revision: 400; not current: 409.",
    )
}

pub(super) fn operations() -> Vec<Op> {
    let bad_id = || err("400", "Malformed automation id, body or If-Match.");
    let nf = || err("404", "No such automation.");
    vec![
        op(
            "get",
            "/api/v1/automations",
            "Automations",
            "List automations, sorted by id",
        )
        .resp(vec![ok("200", "Every automation.", r("AutomationList"))]),
        op(
            "post",
            "/api/v1/automations",
            "Automations",
            "Create an automation",
        )
        .body(r("CreateAutomation"), true)
        .resp(vec![
            ok(
                "201",
                "The automation (ETag: its revision).",
                r("Automation"),
            ),
            err("400", "Malformed JSON, or not an object."),
            err("409", "An automation with this id exists."),
            err(
                "422",
                "Invalid fields: one error entry per field, each naming it in `field`.",
            ),
        ]),
        slug_param(op(
            "get",
            "/api/v1/automations/{id}",
            "Automations",
            "One automation",
        ))
        .resp(vec![
            ok(
                "200",
                "The automation (ETag: its revision).",
                r("Automation"),
            ),
            bad_id(),
            nf(),
        ]),
        if_match(slug_param(op(
            "put",
            "/api/v1/automations/{id}",
            "Automations",
            "Replace an automation",
        )))
        .body(r("ReplaceAutomation"), true)
        .resp(vec![
            ok(
                "200",
                "The automation (ETag: its new revision).",
                r("Automation"),
            ),
            bad_id(),
            nf(),
            err(
                "409",
                "Stale revision: the automation changed since it was read.",
            ),
            err(
                "422",
                "Invalid fields: one error entry per field, each naming it in `field`.",
            ),
            err("428", "If-Match is required."),
        ]),
        if_match(slug_param(op(
            "delete",
            "/api/v1/automations/{id}",
            "Automations",
            "Delete an automation",
        )))
        .resp(vec![
            no_content("204", "Deleted."),
            bad_id(),
            nf(),
            err("409", "Stale revision."),
            err("428", "If-Match is required."),
        ]),
    ]
}

fn trigger_schema() -> Value {
    let id = json!({"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,62}$"});
    let inputs = json!({"type": "object", "description": "Run input name -> a `$` path into the delivery's JSON (`$.a.b[0][\"c d\"]`) or a literal (any other value; a text starting with `$` is written `$$...`)."});
    json!({
        "type": "object",
        "required": ["id", "kind"],
        "description": "A union discriminated by kind.",
        "properties": {
            "id": id,
            "kind": {"enum": ["api", "schedule", "webhook", "codehost"]},
            "enabled": {"type": "boolean", "default": true},
            "expression": {"type": "string", "description": "schedule: five-field cron (minute hour day-of-month month day-of-week)."},
            "timezone": {"type": "string", "default": "UTC", "description": "schedule: IANA time zone."},
            "secret": {"type": "string", "minLength": 16, "writeOnly": true, "description": "webhook (required), codehost (optional): HMAC-SHA256 key of X-Svc-Signature-256. Never returned; `secret_set` says it is set. Left out on replace: kept."},
            "secret_set": {"type": "boolean", "readOnly": true},
            "inputs": inputs,
            "events": {"type": "array", "items": {"enum": ["push", "pull_request.opened", "pull_request.labeled", "issues.opened", "issues.labeled"]}},
            "filter": {"type": "object", "properties": {
                "repositories": {"type": "array", "items": {"type": "string"}},
                "branches": {"type": "array", "items": {"type": "string"}},
                "labels": {"type": "array", "items": {"type": "string"}}
            }}
        }
    })
}

fn definition_properties() -> Value {
    let nullable = |t: &str| json!({"type": [t, "null"]});
    json!({
        "name": {"type": "string", "minLength": 1},
        "description": nullable("string"),
        "target": {
            "type": "object",
            "description": "Exactly one of {workflow_version_id} or {repository, workflow}.",
            "properties": {
                "workflow_version_id": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                "repository": {"type": "object", "required": ["origin_url"], "properties": {
                    "origin_url": {"type": "string"},
                    "ref": {"type": "string", "default": "main"}
                }},
                "workflow": {"type": "string", "description": "Path of the workflow file in the repository, read at fire time."}
            }
        },
        "triggers": {"type": "array", "items": trigger_schema()},
        "inputs": {"type": "object"},
        "goal": nullable("string"),
        "title": nullable("string"),
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "sandbox": {"type": ["object", "null"], "properties": {
            "provider": {"enum": ["local", "container", "hosted"]},
            "image": nullable("string"),
            "snapshot": nullable("string"),
            "network": {"type": ["boolean", "null"]}
        }},
        "policies": {"type": "object", "properties": {
            "misfire": {"enum": ["skip", "fire_once"], "default": "fire_once"},
            "overlap": {"enum": ["allow", "skip", "queue_one"], "default": "allow"}
        }}
    })
}

pub(super) fn schemas() -> Value {
    let props = definition_properties();
    let mut automation = props.clone();
    automation["id"] = json!({"type": "string"});
    automation["revision"] = json!({"type": "string", "pattern": "^[0-9a-f]{64}$"});
    automation["created_at"] = json!({"type": "string", "format": "date-time"});
    automation["updated_at"] = json!({"type": "string", "format": "date-time"});
    let mut create = props.clone();
    create["id"] = json!({"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{0,62}$"});
    json!({
        "Automation": {
            "type": "object",
            "required": ["id", "revision", "name", "description", "target", "triggers", "inputs", "goal", "title", "labels", "sandbox", "policies", "created_at", "updated_at"],
            "properties": automation
        },
        "AutomationList": {
            "type": "object",
            "required": ["data", "meta"],
            "properties": {
                "data": {"type": "array", "items": r("Automation")},
                "meta": {"type": "object", "required": ["total"], "properties": {"total": {"type": "integer", "minimum": 0}}}
            }
        },
        "CreateAutomation": {
            "type": "object",
            "required": ["id", "name", "target", "triggers"],
            "examples": [{"id": "nightly", "name": "Nightly", "target": {"workflow_version_id": "0000000000000000000000000000000000000000000000000000000000000000"}, "triggers": [{"id": "manual", "kind": "api"}, {"id": "tue", "kind": "schedule", "expression": "0 2 * * 2", "timezone": "Europe/Berlin"}]}],
            "properties": create
        },
        "ReplaceAutomation": {
            "type": "object",
            "required": ["name", "target", "triggers"],
            "properties": props
        }
    })
}
