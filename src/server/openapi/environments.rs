//! The environments' part of the OpenAPI document: the catalog routes, `preflight` and
//! their schemas.
//!
//! Owns: describing `/api/v1/environments*`. Must not touch: handlers.

use super::{err, no_content, ok, op, r, Op};
use serde_json::{json, Value};

const TAG: &str = "Environments";

fn slug_param(op: Op) -> Op {
    op.slug_id("Environment id (a slug; `local` is reserved)")
}

fn if_match(op: Op) -> Op {
    op.if_match_revision("The environment's")
}

pub(super) fn operations() -> Vec<Op> {
    let bad_id = || err("400", "Malformed environment id, body or If-Match.");
    let nf = || err("404", "No such environment.");
    let invalid = || {
        err(
            "422",
            "Invalid fields, or fields the provider cannot honour: one error entry per field, each naming it in `field`, with the provider and the fix in its message.",
        )
    };
    vec![
        op("get", "/api/v1/environments", TAG, "List environments, sorted by id")
            .resp(vec![ok("200", "Every environment.", r("EnvironmentList"))]),
        op("post", "/api/v1/environments", TAG, "Create an environment")
            .body(r("CreateEnvironment"), true)
            .resp(vec![
                ok("201", "The environment (ETag: its revision).", r("Environment")),
                err("400", "Malformed JSON, or not an object."),
                err("409", "An environment with this id exists."),
                invalid(),
            ]),
        slug_param(op("get", "/api/v1/environments/{id}", TAG, "One environment")).resp(vec![
            ok("200", "The environment (ETag: its revision).", r("Environment")),
            bad_id(),
            nf(),
        ]),
        if_match(slug_param(op(
            "put",
            "/api/v1/environments/{id}",
            TAG,
            "Replace an environment (runs already created keep the one they froze)",
        )))
        .body(r("ReplaceEnvironment"), true)
        .resp(vec![
            ok("200", "The environment (ETag: its new revision).", r("Environment")),
            bad_id(),
            nf(),
            err("409", "Stale revision: the environment changed since it was read."),
            invalid(),
            err("428", "If-Match is required."),
        ]),
        if_match(slug_param(op(
            "delete",
            "/api/v1/environments/{id}",
            TAG,
            "Delete an environment (the seeded `default` too)",
        )))
        .resp(vec![
            no_content("204", "Deleted."),
            bad_id(),
            nf(),
            err("409", "Stale revision."),
            err("428", "If-Match is required."),
        ]),
        slug_param(op(
            "get",
            "/api/v1/environments/{id}/preflight",
            TAG,
            "What each provider would honour of this environment, and how this host enforces limits",
        ))
        .resp(vec![
            ok("200", "Per provider: ok, and the fields it would refuse with why.", r("EnvironmentPreflight")),
            bad_id(),
            nf(),
        ]),
    ]
}

fn definition_properties() -> Value {
    let size = json!({"type": ["string", "integer", "null"], "description": "\"512MB\", \"4GB\" (binary units), or bytes."});
    json!({
        "description": {"type": ["string", "null"]},
        "provider": {"enum": ["local", "container", "hosted"], "description": "local: on the host; container: bubblewrap on this host; hosted: not configured on this server (refused)."},
        "network": {"enum": ["allow", "block"], "default": "allow", "description": "block: container only."},
        "resources": {"type": "object", "properties": {
            "cpu": {"type": ["integer", "null"], "minimum": 1, "description": "CPUs (cgroup CPU quota, else CPU affinity)."},
            "memory": size.clone(),
            "pids": {"type": ["integer", "null"], "minimum": 8, "description": "Processes and threads at once."},
            "disk": size
        }, "description": "Enforced on the sandbox's processes: a cgroup per sandbox where the host lets the server make one, else rlimits (sandbox.instance.runtime.limits says which). Minimums: 16 MiB memory, 8 processes, 1 MiB disk."},
        "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Variables every process of a run using the environment gets (write-only: read back as env_keys; a replace that leaves it out keeps it). A value may hold {{ secrets.NAME }} references to vault secrets, expanded just before the run's processes start and redacted from their output; a secret missing from the vault fails the run naming the variable. Names: [A-Za-z_][A-Za-z0-9_]*, not SVC_* nor the server's own."},
        "lifecycle": {"type": "object", "properties": {
            "retention_hours": {"type": ["integer", "null"], "minimum": 0, "description": "Hours a finished run's sandbox (its workspace) is kept before it is removed (null: [run.sandbox] retention_hours)."},
            "stop_on_terminal": {"type": "boolean", "default": false, "description": "Stop and remove the sandbox (every process left in it killed, its workspace deleted) as soon as the run completes, fails or is cancelled. Cannot be combined with retention_hours."}
        }},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "image": {"type": ["string", "null"], "description": "hosted only."},
        "snapshot": {"type": ["string", "null"], "description": "hosted only."}
    })
}

pub(super) fn schemas() -> Value {
    let mut env = definition_properties();
    if let Some(m) = env.as_object_mut() {
        m.remove("env");
    }
    env["env_keys"] = json!({"type": "array", "items": {"type": "string"}, "description": "The names of the environment's variables (their values are never shown)."});
    env["id"] = json!({"type": "string"});
    env["revision"] = json!({"type": "string", "pattern": "^[0-9a-f]{64}$"});
    env["created_at"] = json!({"type": "string", "format": "date-time"});
    env["updated_at"] = json!({"type": "string", "format": "date-time"});
    let mut create = definition_properties();
    create["id"] = json!({"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{0,62}$"});
    json!({
        "Environment": {
            "type": "object",
            "required": ["id", "revision", "provider", "network", "resources", "env_keys", "lifecycle", "labels", "image", "snapshot", "created_at", "updated_at"],
            "properties": env
        },
        "EnvironmentList": {
            "type": "object",
            "required": ["data", "meta"],
            "properties": {
                "data": {"type": "array", "items": r("Environment")},
                "meta": {"type": "object", "required": ["total", "run_default"], "properties": {
                    "total": {"type": "integer", "minimum": 0},
                    "run_default": {"type": ["string", "null"], "description": "The `[run] environment` a run naming neither `environment` nor `sandbox` gets; null: none (`[run.sandbox]`)."}
                }}
            }
        },
        "CreateEnvironment": {
            "type": "object",
            "required": ["id", "provider"],
            "examples": [{"id": "small", "provider": "container", "resources": {"cpu": 1, "memory": "512MB", "pids": 256}}],
            "properties": create
        },
        "ReplaceEnvironment": {
            "type": "object",
            "required": ["provider"],
            "properties": definition_properties()
        },
        "EnvironmentPreflight": {
            "type": "object",
            "required": ["id", "limits", "providers"],
            "properties": {
                "id": {"type": "string"},
                "provider": {"type": "string"},
                "limits": {"enum": ["cgroup-v2", "cgroup-v1", "rlimits"], "description": "How this host enforces resources."},
                "providers": {"type": "array", "items": {"type": "object", "properties": {
                    "provider": {"type": "string"},
                    "ok": {"type": "boolean"},
                    "refused": {"type": "array", "items": {"type": "object", "properties": {"field": {"type": "string"}, "reason": {"type": "string"}}}}
                }}}
            }
        },
        "RunEnvironment": {
            "oneOf": [
                {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{0,62}$"},
                {"type": "object", "required": ["id"], "description": "The id plus a sparse override (resources, env, labels and lifecycle merge by key).", "properties": {"id": {"type": "string"}}}
            ],
            "description": "The environment the run's sandbox is made from (absent: [run] environment, else [run.sandbox]). Resolved and frozen into the run's sandbox plan at creation."
        }
    })
}
