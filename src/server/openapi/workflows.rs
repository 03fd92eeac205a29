//! The workflow catalog's part of the OpenAPI document (issue 29, opgroups 11).
//!
//! Owns: describing `/api/v1/workflows*`. Must not touch: handlers.

use super::{err, ok, op, r, Op};
use serde_json::{json, Value};

fn name_param(op: Op) -> Op {
    op.param(
        "name",
        "path",
        json!({"type": "string"}),
        "A workflow name: the entry graph's name, else the entry file's stem.",
    )
}

pub(super) fn operations() -> Vec<Op> {
    let nf = || {
        err(
            "404",
            "unknown_workflow: no registered version has this name.",
        )
    };
    vec![
        op(
            "get",
            "/api/v1/workflows",
            "Workflows",
            "One entry per workflow name across registered versions",
        )
        .paging()
        .resp(vec![
            ok(
                "200",
                "A page of workflows sorted by name; meta.total counts them all.",
                r("WorkflowPage"),
            ),
            err("400", "A paging value that is not an integer."),
        ]),
        name_param(op(
            "get",
            "/api/v1/workflows/{name}",
            "Workflows",
            "A workflow's versions (newest first) and one version's source and diagnostics",
        ))
        .param(
            "version",
            "query",
            json!({"type": "string"}),
            "The version to show (default: the newest); one of the workflow's versions, else 404.",
        )
        .resp(vec![ok("200", "The workflow.", r("WorkflowDetail")), nf()]),
        name_param(op(
            "get",
            "/api/v1/workflows/{name}/runs",
            "Workflows",
            "The runs of a workflow, newest first",
        ))
        .paging()
        .resp(vec![
            ok("200", "A page of runs.", r("RunPage")),
            err("400", "A paging value that is not an integer."),
            nf(),
        ]),
    ]
}

pub(super) fn schemas() -> Value {
    let last_run = json!({
        "oneOf": [{"type": "null"}, {
            "type": "object", "required": ["id", "status", "created_at", "updated_at"],
            "properties": {"id": {"type": "string"}, "status": {"type": "string"},
                           "created_at": {"type": "string"}, "updated_at": {"type": "string"}}
        }],
        "description": "The newest run filed under the name (any status but removing)."
    });
    let automations = json!({"type": "array", "items": {"type": "string"},
        "description": "Automations whose target is one of the workflow's versions (repository targets are resolved at fire time and not listed)."});
    json!({
        "WorkflowSummary": {
            "type": "object",
            "required": ["name", "latest_version_id", "latest_version_created_at", "version_count", "last_run", "automations"],
            "properties": {
                "name": {"type": "string"},
                "latest_version_id": {"type": "string"},
                "latest_version_created_at": {"type": "string"},
                "version_count": {"type": "integer", "minimum": 1},
                "last_run": last_run,
                "automations": automations,
            }
        },
        "WorkflowPage": {
            "type": "object", "required": ["data", "meta"],
            "properties": {
                "data": {"type": "array", "items": r("WorkflowSummary")},
                "meta": {"type": "object", "required": ["has_more", "total"],
                         "properties": {"has_more": {"type": "boolean"}, "total": {"type": "integer"}}}
            }
        },
        "WorkflowDetail": {
            "type": "object",
            "required": ["name", "latest_version_id", "version_count", "versions", "version", "last_run", "automations"],
            "properties": {
                "name": {"type": "string"},
                "latest_version_id": {"type": "string"},
                "version_count": {"type": "integer", "minimum": 1},
                "versions": {"type": "array", "items": {"type": "object", "required": ["id", "created_at"],
                    "properties": {"id": {"type": "string"}, "created_at": {"type": "string"}}}},
                "version": {
                    "type": "object",
                    "required": ["id", "created_at", "entrypoint", "files", "dependencies", "source", "diagnostics"],
                    "properties": {
                        "id": {"type": "string"}, "created_at": {"type": "string"}, "entrypoint": {"type": "string"},
                        "files": {"type": "array", "items": {"type": "string"}},
                        "dependencies": {"type": "array", "items": {"type": "string"}},
                        "source": {"type": "string", "description": "The entry file's DOT text."},
                        "diagnostics": {"type": "array", "items": {"type": "object"}, "description": "Validation warnings (a registered version has no errors)."}
                    }
                },
                "last_run": last_run,
                "automations": automations,
            }
        }
    })
}
