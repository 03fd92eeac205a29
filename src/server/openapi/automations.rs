//! The automations' part of the OpenAPI document: the catalog routes and their schemas.
//!
//! Owns: describing `/api/v1/automations*`. Must not touch: handlers.

use super::{err, no_content, ok, op, r, Op};
use serde_json::{json, Value};

/// An automation id in a path.
fn slug_param(op: Op) -> Op {
    op.slug_id("Automation id (a slug)")
}

fn if_match(op: Op) -> Op {
    op.if_match_revision("The automation's")
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
        slug_param(op("post", "/api/v1/automations/{id}/runs", "Automations", "Fire the automation's api trigger now"))
            .resp(vec![
                ok("201", "The run it made (`automation` set), started.", r("Run")),
                ok("202", "Queued behind the automation's active run (overlap queue_one): the fire.", r("AutomationFire")),
                bad_id(),
                nf(),
                err("409", "automation_api_trigger_disabled: no enabled api trigger; automation_overlap: skipped because its previous run is active."),
                err("422", "automation_fire_failed: the run could not be made (workflow missing, clone failed, invalid workflow); the failed fire is on record."),
            ]),
        slug_param(op("get", "/api/v1/automations/{id}/runs", "Automations", "The automation's runs, newest first"))
            .paging()
            .resp(vec![ok("200", "A page of runs.", r("RunPage")), bad_id(), nf()]),
        slug_param(op("get", "/api/v1/automations/{id}/fires", "Automations", "Every fire of the automation, newest first"))
            .paging()
            .resp(vec![ok("200", "A page of fires; meta.schedules has each schedule trigger's next due time.", r("AutomationFirePage")), bad_id(), nf()]),
        slug_param(op("post", "/api/v1/automations/{id}/hooks/{trigger_id}", "Automations", "Deliver an event to a webhook or code-host trigger"))
            .public()
            .param("trigger_id", "path", json!({"type": "string"}), "The trigger's id.")
            .param("X-Svc-Signature-256", "header", json!({"type": "string"}), "sha256=<hex HMAC-SHA256 of the raw body with the trigger's secret> (X-Hub-Signature-256 is read too).")
            .param("X-Svc-Delivery", "header", json!({"type": "string"}), "A unique id per delivery; a repeated one is a replay (X-GitHub-Delivery is read too).")
            .param("X-GitHub-Event", "header", json!({"type": "string"}), "Code-host triggers: push, pull_request, issues.")
            .body(json!({"type": "object"}), true)
            .resp(vec![
                ok("202", "Recorded: the fire (its outcome says whether a run was made).", r("HookResult")),
                ok("200", "A replayed delivery (nothing started) or an ignored code-host event.", r("HookResult")),
                err("400", "Missing delivery id or malformed JSON (after a valid signature)."),
                err("401", "Missing or wrong signature."),
                nf(),
                err("409", "The trigger is disabled."),
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
        "environment": {"type": ["string", "object", "null"], "description": "The environment its runs use: an id, or {id, ...sparse override} as POST /runs takes it (no `env`: variables go in the environment). Resolved when a fire makes its run: an unknown id then fails that fire (422 automation_fire_failed, on record). At most one of sandbox and environment; neither: [run] environment."},
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
        "AutomationFire": {
            "type": "object",
            "required": ["id", "automation_id", "trigger_id", "trigger_kind", "due_at", "fired_at", "outcome", "policy", "error", "run_id"],
            "properties": {
                "id": {"type": "string"},
                "automation_id": {"type": "string"},
                "trigger_id": {"type": "string"},
                "trigger_kind": {"enum": ["api", "schedule", "webhook", "codehost"]},
                "due_at": {"type": ["string", "null"], "format": "date-time"},
                "fired_at": {"type": "string", "format": "date-time"},
                "outcome": {"enum": ["pending", "queued", "created", "skipped", "failed"]},
                "policy": {"enum": ["misfire", "overlap", null]},
                "error": {"type": ["string", "null"]},
                "detail": {"type": ["string", "null"]},
                "run_id": {"type": ["string", "null"]},
                "delivery_id": {"type": ["string", "null"]}
            }
        },
        "AutomationFirePage": {
            "type": "object",
            "required": ["data", "meta"],
            "properties": {
                "data": {"type": "array", "items": r("AutomationFire")},
                "meta": {"type": "object", "required": ["has_more", "schedules"], "properties": {
                    "has_more": {"type": "boolean"},
                    "schedules": {"type": "array", "items": {"type": "object", "properties": {
                        "trigger_id": {"type": "string"},
                        "next_due_at": {"type": ["string", "null"]},
                        "last_due_at": {"type": ["string", "null"]},
                        "last_fired_at": {"type": ["string", "null"]}
                    }}}
                }}
            }
        },
        "RunPage": {
            "type": "object",
            "required": ["data", "meta"],
            "properties": {"data": {"type": "array", "items": r("Run")}, "meta": r("Meta")}
        },
        "HookResult": {
            "type": "object",
            "properties": {
                "replayed": {"type": "boolean"},
                "ignored": {"type": "string"},
                "fire": {"oneOf": [r("AutomationFire"), {"type": "null"}]}
            }
        },
        "ReplaceAutomation": {
            "type": "object",
            "required": ["name", "target", "triggers"],
            "properties": props
        }
    })
}
