//! The MCP servers' part of the OpenAPI document: the catalog routes, the `test` route and
//! their schemas.
//!
//! Owns: describing `/api/v1/mcp-servers*`. Must not touch: handlers.

use super::{err, no_content, ok, op, r, Op};
use serde_json::{json, Value};

fn slug_param(op: Op) -> Op {
    op.slug_id("MCP server id (a slug; also the server's name in tool names mcp__<id>__<tool>)")
}

fn if_match(op: Op) -> Op {
    op.if_match_revision("The server's")
}

pub(super) fn operations() -> Vec<Op> {
    let bad_id = || err("400", "Malformed MCP server id, body or If-Match.");
    let nf = || err("404", "No such MCP server.");
    let invalid = || {
        err(
            "422",
            "Invalid fields: one error entry per field, each naming it in `field`.",
        )
    };
    vec![
        op("get", "/api/v1/mcp-servers", "MCP Servers", "List MCP servers, sorted by id")
            .resp(vec![ok("200", "Every MCP server.", r("McpServerList"))]),
        op("post", "/api/v1/mcp-servers", "MCP Servers", "Create an MCP server")
            .body(r("CreateMcpServer"), true)
            .resp(vec![
                ok("201", "The server (ETag: its revision).", r("McpServer")),
                err("400", "Malformed JSON, or not an object."),
                err("409", "An MCP server with this id exists."),
                invalid(),
            ]),
        slug_param(op("get", "/api/v1/mcp-servers/{id}", "MCP Servers", "One MCP server"))
            .resp(vec![
                ok("200", "The server (ETag: its revision).", r("McpServer")),
                bad_id(),
                nf(),
            ]),
        if_match(slug_param(op(
            "put",
            "/api/v1/mcp-servers/{id}",
            "MCP Servers",
            "Replace an MCP server (env and header values left out are kept)",
        )))
        .body(r("ReplaceMcpServer"), true)
        .resp(vec![
            ok("200", "The server (ETag: its new revision).", r("McpServer")),
            bad_id(),
            nf(),
            err("409", "Stale revision: the server changed since it was read."),
            invalid(),
            err("428", "If-Match is required."),
        ]),
        if_match(slug_param(op(
            "delete",
            "/api/v1/mcp-servers/{id}",
            "MCP Servers",
            "Delete an MCP server",
        )))
        .resp(vec![
            no_content("204", "Deleted."),
            bad_id(),
            nf(),
            err("409", "Stale revision."),
            err("428", "If-Match is required."),
        ]),
        slug_param(op(
            "post",
            "/api/v1/mcp-servers/{id}/test",
            "MCP Servers",
            "Start or connect to the server, handshake and list its tools",
        ))
        .resp(vec![
            ok(
                "200",
                "What happened: the server's name, version, protocol version, tools and each step's time, or the failed step with its error and the server's stderr tail.",
                r("McpServerTest"),
            ),
            bad_id(),
            nf(),
        ]),
    ]
}

fn transport_schema(write: bool) -> Value {
    let map = if write {
        json!({"type": "object", "additionalProperties": {"type": "string"}, "writeOnly": true,
               "description": "Values are write-only (read back as *_keys) and may reference vault secrets as {{ secrets.NAME }}, resolved just before launch. Left out on replace: kept."})
    } else {
        json!({"type": "array", "items": {"type": "string"}, "readOnly": true})
    };
    let mut stdio = json!({
        "type": "object", "required": ["type", "command"],
        "properties": {
            "type": {"const": "stdio"},
            "command": {"type": "array", "minItems": 1, "items": {"type": "string"}, "description": "argv: the program and its arguments (run in the run's sandbox)."}
        }
    });
    let mut http = json!({
        "type": "object", "required": ["type", "url"],
        "properties": {
            "type": {"const": "http"},
            "url": {"type": "string", "description": "http:// or https:// URL of the server's endpoint (sse: its event stream)."},
            "protocol": {"enum": ["streamable_http", "sse"], "default": "streamable_http"}
        }
    });
    if write {
        stdio["properties"]["env"] = map.clone();
        http["properties"]["headers"] = map;
    } else {
        stdio["properties"]["env_keys"] = map.clone();
        http["properties"]["header_keys"] = map;
    }
    json!({"oneOf": [stdio, http], "description": "A union discriminated by type."})
}

fn definition_properties(write: bool) -> Value {
    let nullable = |t: &str| json!({"type": [t, "null"]});
    let secs = |d: u64| json!({"type": "integer", "minimum": 1, "maximum": 86400, "default": d});
    json!({
        "display_name": {"type": "string", "description": "Default: the id."},
        "description": nullable("string"),
        "transport": transport_schema(write),
        "startup_timeout_secs": secs(10),
        "tool_timeout_secs": secs(60),
        "required": {"type": "boolean", "default": false, "description": "A failure to start fails the agent stage before any model call."}
    })
}

pub(super) fn schemas() -> Value {
    let mut server = definition_properties(false);
    server["id"] = json!({"type": "string"});
    server["revision"] = json!({"type": "string", "pattern": "^[0-9a-f]{64}$"});
    server["created_at"] = json!({"type": "string", "format": "date-time"});
    server["updated_at"] = json!({"type": "string", "format": "date-time"});
    let mut create = definition_properties(true);
    create["id"] = json!({"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{0,62}$"});
    json!({
        "McpServer": {
            "type": "object",
            "required": ["id", "revision", "display_name", "description", "transport", "startup_timeout_secs", "tool_timeout_secs", "required", "created_at", "updated_at"],
            "properties": server
        },
        "McpServerList": {
            "type": "object",
            "required": ["data", "meta"],
            "properties": {
                "data": {"type": "array", "items": r("McpServer")},
                "meta": {"type": "object", "required": ["total"], "properties": {"total": {"type": "integer", "minimum": 0}}}
            }
        },
        "CreateMcpServer": {
            "type": "object",
            "required": ["id", "transport"],
            "examples": [{"id": "time", "transport": {"type": "stdio", "command": ["mcp-server-time"]}}],
            "properties": create
        },
        "ReplaceMcpServer": {
            "type": "object",
            "required": ["transport"],
            "properties": definition_properties(true)
        },
        "McpServerTest": {
            "type": "object",
            "required": ["ok", "timings_ms"],
            "properties": {
                "ok": {"type": "boolean"},
                "server": {"type": "object", "properties": {"name": {"type": "string"}, "version": {"type": "string"}}},
                "protocol_version": {"type": "string"},
                "tools": {"type": "array", "items": {"type": "string"}},
                "step": {"enum": ["start", "initialize", "list_tools"], "description": "The step that failed."},
                "error": {"type": "string"},
                "stderr": {"type": "string", "description": "The end of the server's stderr (stdio)."},
                "timings_ms": {"type": "object", "description": "Milliseconds per step: start, initialize, list_tools, total.", "additionalProperties": {"type": "integer"}}
            }
        },
        "RunMcpServers": {
            "type": "array",
            "description": "The run's MCP servers: catalog ids, or inline definitions ({id, transport, ...} as in CreateMcpServer). Absent: [run.agent] mcp_servers. Resolved and frozen when the run is created.",
            "items": {"oneOf": [
                {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{0,62}$"},
                r("CreateMcpServer")
            ]}
        }
    })
}
