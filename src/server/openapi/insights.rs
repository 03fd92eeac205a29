//! The insights' part of the OpenAPI document (issue 29): the query, the schema and the
//! saved queries' catalog routes, and their schemas.
//!
//! Owns: describing `/api/v1/insights/*`. Must not touch: handlers.

use super::{err, no_content, ok, op, r, Op};
use serde_json::{json, Value};

const TAG: &str = "Insights";
const ADMIN: &str = "Admins only (the dev token's user and the logins of [server.auth] admins).";

fn slug_param(op: Op) -> Op {
    op.slug_id("Saved query id (a slug)")
}

fn if_match(op: Op) -> Op {
    op.if_match_revision("The saved query's")
}

pub(super) fn operations() -> Vec<Op> {
    let bad_id = || err("400", "Malformed saved query id, body or If-Match.");
    let nf = || err("404", "No such saved query.");
    let invalid = || {
        err(
            "422",
            "Invalid fields (one error entry per field, naming it in `field`); SQL that would be refused or does not compile is invalid.",
        )
    };
    vec![
        op("post", "/api/v1/insights/query", TAG, "Run a read-only SQL query over the insights views (admin)")
            .param(
                "Accept",
                "header",
                json!({"type": "string"}),
                "`text/csv` for CSV (a header line, then one line per row); anything else: JSON.",
            )
            .body(r("InsightQueryRequest"), true)
            .resp(vec![
                ok("200", ADMIN, r("InsightAnswer")),
                err("400", "Malformed body, empty SQL, more than one statement, or SQL that does not compile (code invalid_sql)."),
                err("404", "No saved query with this `query_id`."),
                err("422", "Refused or stopped: anything but reading the views (writes, ATTACH, PRAGMA, EXPLAIN, other tables, functions outside the list; code query_refused), past the time limit (query_timeout), more rows than the cap (row_limit_exceeded), more bytes than the cap (result_too_large), SQL longer than the cap (sql_too_long)."),
                err("429", "Two insights queries are already running; retry (Retry-After: 1)."),
            ]),
        op("get", "/api/v1/insights/schema", TAG, "The insights views with their columns, the built-in sample queries and the limits (admin)")
            .resp(vec![ok("200", ADMIN, r("InsightSchema"))]),
        op("get", "/api/v1/insights/queries", TAG, "List saved queries, sorted by id (admin)")
            .resp(vec![ok("200", "Every saved query.", r("SavedQueryList"))]),
        op("post", "/api/v1/insights/queries", TAG, "Save a query (admin)")
            .body(r("CreateSavedQuery"), true)
            .resp(vec![
                ok("201", "The saved query (ETag: its revision).", r("SavedQuery")),
                err("400", "Malformed JSON, or not an object."),
                err("409", "A saved query with this id exists."),
                invalid(),
            ]),
        slug_param(op("get", "/api/v1/insights/queries/{id}", TAG, "One saved query (admin)")).resp(vec![
            ok("200", "The saved query (ETag: its revision).", r("SavedQuery")),
            bad_id(),
            nf(),
        ]),
        if_match(slug_param(op("put", "/api/v1/insights/queries/{id}", TAG, "Replace a saved query (admin)")))
            .body(r("ReplaceSavedQuery"), true)
            .resp(vec![
                ok("200", "The saved query (ETag: its new revision).", r("SavedQuery")),
                bad_id(),
                nf(),
                err("409", "Stale revision: the saved query changed since it was read."),
                invalid(),
                err("428", "If-Match is required."),
            ]),
        if_match(slug_param(op("delete", "/api/v1/insights/queries/{id}", TAG, "Delete a saved query (admin)")))
            .resp(vec![
                no_content("204", "Deleted."),
                bad_id(),
                nf(),
                err("409", "Stale revision."),
                err("428", "If-Match is required."),
            ]),
    ]
}

fn query_properties() -> Value {
    json!({
        "name": {"type": "string", "minLength": 1, "maxLength": 200},
        "description": {"type": ["string", "null"]},
        "sql": {"type": "string", "minLength": 1, "maxLength": 65536, "description": "One SELECT over the insights views; checked (compiled, not run) when saved."}
    })
}

pub(super) fn schemas() -> Value {
    let mut saved = query_properties();
    saved["id"] = json!({"type": "string"});
    saved["revision"] = json!({"type": "string", "pattern": "^[0-9a-f]{64}$"});
    saved["created_at"] = json!({"type": "string", "format": "date-time"});
    saved["updated_at"] = json!({"type": "string", "format": "date-time"});
    let mut create = query_properties();
    create["id"] = json!({"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{0,62}$"});
    json!({
        "InsightQueryRequest": {
            "type": "object",
            "description": "Exactly one of `sql` and `query_id`.",
            "additionalProperties": false,
            "examples": [{"sql": "SELECT substr(created_at, 1, 10) AS day, status, count(*) AS runs FROM insights_runs GROUP BY day, status"}],
            "properties": {
                "sql": {"type": "string", "description": "One SELECT over the views insights_runs, insights_stages, insights_usage, insights_events, insights_automations (docs/insights.md)."},
                "query_id": {"type": "string", "description": "A saved query to run instead."}
            }
        },
        "InsightAnswer": {
            "type": "object",
            "required": ["columns", "rows", "row_count", "elapsed_ms"],
            "properties": {
                "columns": {"type": "array", "items": {"type": "string"}},
                "rows": {"type": "array", "items": {"type": "array", "items": {"type": ["string", "number", "integer", "null"]}}, "description": "One array per row, a value per column; a blob as lowercase hex."},
                "row_count": {"type": "integer", "minimum": 0},
                "elapsed_ms": {"type": "number", "minimum": 0},
                "query_id": {"type": ["string", "null"]}
            }
        },
        "InsightSchema": {
            "type": "object",
            "required": ["views", "samples", "limits"],
            "properties": {
                "views": {"type": "array", "items": {"type": "object", "required": ["name", "columns"], "properties": {
                    "name": {"type": "string"}, "columns": {"type": "array", "items": {"type": "string"}}
                }}},
                "samples": {"type": "array", "items": {"type": "object", "required": ["id", "name", "sql"], "properties": {
                    "id": {"type": "string"}, "name": {"type": "string"}, "sql": {"type": "string"}
                }}},
                "limits": {"type": "object", "properties": {
                    "max_rows": {"type": "integer"}, "max_bytes": {"type": "integer"},
                    "timeout_ms": {"type": "integer"}, "max_sql_bytes": {"type": "integer"}
                }}
            }
        },
        "SavedQuery": {
            "type": "object",
            "required": ["id", "revision", "name", "description", "sql", "created_at", "updated_at"],
            "properties": saved
        },
        "SavedQueryList": {
            "type": "object",
            "required": ["data", "meta"],
            "properties": {
                "data": {"type": "array", "items": r("SavedQuery")},
                "meta": {"type": "object", "required": ["total"], "properties": {"total": {"type": "integer", "minimum": 0}}}
            }
        },
        "CreateSavedQuery": {
            "type": "object",
            "required": ["id", "name", "sql"],
            "examples": [{"id": "runs-per-day", "name": "Runs per day", "sql": "SELECT substr(created_at, 1, 10) AS day, count(*) AS runs FROM insights_runs GROUP BY day"}],
            "properties": create
        },
        "ReplaceSavedQuery": {
            "type": "object",
            "required": ["name", "sql"],
            "properties": query_properties()
        }
    })
}
