//! The OpenAPI 3.1.0 document (info.version 0.1.0), built once as a `serde_json::Value` and
//! served unauthenticated at `/api/v1/openapi.json`.
//!
//! Owns: the API description. Must not touch: handlers. A test checks that every route of
//! the table ([`super::routes::routes`]) is described here with the same method and
//! security, and that nothing else is.

use serde_json::{json, Map, Value};
use std::sync::OnceLock;

mod artifacts;
mod automations;
mod backups;
mod completions;
mod environments;
mod insights;
mod integrations;
mod mcp_servers;
mod operator;
mod sessions;
mod workflows;

pub fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(build)
}

fn r(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn content(schema: Value) -> Value {
    json!({"application/json": {"schema": schema}})
}

fn ok(code: &str, desc: &str, schema: Value) -> (String, Value) {
    (
        code.to_string(),
        json!({"description": desc, "content": content(schema)}),
    )
}

fn err(code: &str, desc: &str) -> (String, Value) {
    (
        code.to_string(),
        json!({"description": desc, "content": content(r("Error"))}),
    )
}

fn no_content(code: &str, desc: &str) -> (String, Value) {
    (code.to_string(), json!({"description": desc}))
}

struct Op {
    method: &'static str,
    path: &'static str,
    tag: &'static str,
    summary: &'static str,
    public: bool,
    params: Vec<Value>,
    body: Option<(Value, bool)>,
    responses: Vec<(String, Value)>,
    /// Has a run `id` path parameter: a malformed one is answered 400.
    run_id: bool,
}

fn op(method: &'static str, path: &'static str, tag: &'static str, summary: &'static str) -> Op {
    Op {
        method,
        path,
        tag,
        summary,
        public: false,
        params: Vec::new(),
        body: None,
        responses: Vec::new(),
        run_id: false,
    }
}

/// A run id as the API writes them: a canonical ULID (Crockford base32, upper case, 26
/// characters, at most `7ZZZZZZZZZZZZZZZZZZZZZZZZZ`).
pub const ULID_PATTERN: &str = "^[0-7][0-9A-HJKMNP-TV-Z]{25}$";

impl Op {
    fn public(mut self) -> Op {
        self.public = true;
        self
    }
    fn param(mut self, name: &str, location: &str, schema: Value, desc: &str) -> Op {
        self.params.push(json!({
            "name": name, "in": location, "required": location == "path",
            "schema": schema, "description": desc,
        }));
        self
    }
    /// A catalog entry's `{id}` path parameter (a slug, opgroups 0.3); `what` says whose id
    /// it is.
    fn slug_id(self, what: &str) -> Op {
        self.param(
            "id",
            "path",
            json!({"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{0,62}$"}),
            &format!("{what}. Anything else is answered 400."),
        )
    }
    /// A catalog write's `If-Match` header; `whose` names the entry ("The automation's").
    fn if_match_revision(self, whose: &str) -> Op {
        self.param(
            "If-Match",
            "header",
            json!({"type": "string"}),
            &format!(
                "{whose} current revision (quotes optional). Missing: 428; not a revision: 400; not current: 409."
            ),
        )
    }
    fn id(mut self) -> Op {
        self.run_id = true;
        self.param(
            "id",
            "path",
            json!({"type": "string", "pattern": ULID_PATTERN}),
            "Run ULID. Anything else is answered 400.",
        )
    }
    /// Paging values out of range are clamped, never refused (only a non-integer is 400).
    fn paging(self) -> Op {
        self.param(
            "page[limit]",
            "query",
            json!({"type": "integer", "default": 20}),
            "Page size. Clamped: values below 1 count as 1, above 100 as 100.",
        )
        .param(
            "page[offset]",
            "query",
            json!({"type": "integer", "default": 0}),
            "Items to skip. Clamped: negative values count as 0, values above 1000000 as 1000000.",
        )
    }
    fn body(mut self, schema: Value, required: bool) -> Op {
        self.body = Some((schema, required));
        self
    }
    fn resp(mut self, rs: Vec<(String, Value)>) -> Op {
        self.responses.extend(rs);
        self
    }
}

/// `GET .../files`: the checkpoint filter is named `checkpoint`.
fn files_op(path: &'static str, summary: &'static str) -> Op {
    op("get", path, "Run Outputs", summary)
        .id()
        .paging()
        .param("checkpoint", "query", json!({"type": "string"}), "Only the changes of this checkpoint (a commit id from a `workspace.checkpoint` event); omit for all changes against the run's base.")
        .resp(vec![
            ok("200", "A page of changed files, by path.", r("FileDiffPage")),
            err("400", "Bad paging parameter."),
            err("404", "No such run or checkpoint, or the workspace was removed."),
        ])
}

/// Every documented operation (method, path, tag, whether public).
fn operations() -> Vec<Op> {
    let run = || ok("200", "The run.", r("Run"));
    let nf = || err("404", "No such run.");
    let conflict = || err("409", "The run's state does not allow this.");
    vec![
        op("get", "/", "Discovery", "Discovery URLs")
            .public()
            .resp(vec![ok("200", "Where to find things.", r("Discovery"))]),
        op("get", "/health", "System", "Liveness check")
            .public()
            .resp(vec![ok("200", "The server is up.", r("Health"))]),
        op("get", "/api/v1/openapi.json", "Discovery", "This document")
            .public()
            .resp(vec![ok("200", "OpenAPI 3.1 description.", json!({"type": "object"}))]),
        op("get", "/openapi.json", "Discovery", "Alias of GET /api/v1/openapi.json (SPEC 9.3)")
            .public()
            .resp(vec![ok("200", "OpenAPI 3.1 description.", json!({"type": "object"}))]),
        op("get", "/api/v1/auth/config", "Auth", "Sign-in methods a page should offer")
            .public()
            .resp(vec![ok("200", "Methods and sign-in URLs (null when unavailable).", r("AuthConfig"))]),
        op("post", "/auth/dev-token", "Auth", "Sign in with the dev token (browser form)")
            .public()
            .body(json!({"type": "object", "required": ["token"], "properties": {"token": {"type": "string"}, "next": {"type": "string"}}}), true)
            .resp(vec![
                no_content("303", "Form: signed in (Set-Cookie __svc_session), redirect to `next` or `/`; wrong token: redirect to /login?error=invalid_token."),
                ok("200", "JSON body: signed in (Set-Cookie __svc_session).", json!({"type": "object"})),
                err("400", "The body is not a JSON object or form with a `token`."),
                err("401", "JSON body: wrong token."),
                err("403", "Cross-site Origin."),
                err("404", "The web UI or dev-token sign-in is off."),
            ]),
        op("post", "/auth/logout", "Auth", "Sign out (revokes the session)")
            .public()
            .resp(vec![
                no_content("303", "Signed out, redirect to /login."),
                no_content("204", "Signed out (Accept: application/json)."),
                err("403", "Cross-site Origin."),
                err("404", "The web UI is off."),
            ]),
        op("get", "/auth/login", "Auth", "Start code-host sign-in")
            .public()
            .param("next", "query", json!({"type": "string"}), "Local path to return to.")
            .resp(vec![
                no_content("302", "Redirect to the code host's authorize URL."),
                err("404", "Code-host sign-in or the web UI is off."),
                err("503", "The OAuth app is not configured."),
            ]),
        op("get", "/auth/callback", "Auth", "Finish code-host sign-in")
            .public()
            .param("code", "query", json!({"type": "string"}), "OAuth code.")
            .param("state", "query", json!({"type": "string"}), "OAuth state.")
            .resp(vec![
                no_content("303", "Signed in (Set-Cookie __svc_session), redirect to `next`."),
                err("400", "State mismatch or missing code."),
                err("401", "The code host refused the code."),
                err("403", "The user is not in allowed_usernames."),
                err("404", "Code-host sign-in or the web UI is off."),
                err("502", "The code host failed."),
            ]),
        op("get", "/api/v1/user", "Auth", "The authenticated user")
            .resp(vec![ok("200", "The caller.", r("User"))]),
        op("post", "/api/v1/workflow-versions", "Workflows", "Register a workflow package")
            .body(r("WorkflowPackage"), true)
            .resp(vec![
                ok("201", "Registered.", r("WorkflowVersion")),
                ok("200", "Already registered (same content, same id).", r("WorkflowVersion")),
                err("400", "Malformed JSON."),
                err("422", "Invalid package, workflow or unknown dependency."),
            ]),
        op("get", "/api/v1/workflow-versions/{id}", "Workflows", "A registered workflow version")
            .param("id", "path", json!({"type": "string", "pattern": "^[0-9a-f]{64}$"}), "Version id (SHA-256 hex).")
            .resp(vec![ok("200", "The version.", r("WorkflowVersion")), err("404", "Unknown version.")]),
        op("post", "/api/v1/runs", "Runs", "Create a run (status submitted)")
            .body(r("CreateRun"), true)
            .resp(vec![
                ok("201", "The created run.", r("Run")),
                err("400", "Malformed or incomplete body."),
                err("404", "Unknown workflow version."),
                err("422", "Invalid workflow (with diagnostics)."),
            ]),
        op("get", "/api/v1/runs", "Runs", "List runs (board items), newest first")
            .paging()
            .param("include_archived", "query", json!({"type": "boolean", "default": false}), "Include archived runs (`true` or `false`; anything else is 400).")
            .param("automation", "query", json!({"type": "string"}), "Only runs this automation (id) made.")
            .resp(vec![ok("200", "A page of runs.", r("BoardPage")), err("400", "Bad paging or include_archived parameter.")]),
        op("get", "/runs", "Runs", "Alias of GET /api/v1/runs")
            .paging()
            .param("include_archived", "query", json!({"type": "boolean", "default": false}), "Include archived runs (`true` or `false`; anything else is 400).")
            .resp(vec![ok("200", "A page of runs.", r("BoardPage")), err("400", "Bad paging or include_archived parameter.")]),
        op("get", "/api/v1/runs/{id}", "Runs", "One run").id().resp(vec![run(), err("400", "Malformed run id."), nf()]),
        op("delete", "/api/v1/runs/{id}", "Runs", "Delete a run (tombstoned)")
            .id()
            .param("force", "query", json!({"type": "boolean", "default": false}), "Delete even while active (cancels it). `true` or `false`; anything else is 400.")
            .resp(vec![no_content("204", "Deleted."), err("400", "Malformed run id or force value."), nf(), err("409", "The run is active; use force=true.")]),
        op("post", "/api/v1/runs/{id}/start", "Runs", "Queue a submitted run, or resume a failed one")
            .id()
            .body(r("StartRequest"), false)
            .resp(vec![run(), nf(), conflict()]),
        op("post", "/api/v1/runs/{id}/cancel", "Runs", "Cancel a run").id().resp(vec![run(), nf(), conflict()]),
        op("post", "/api/v1/runs/{id}/pause", "Runs", "Pause a running or blocked run").id().resp(vec![run(), nf(), conflict()]),
        op("post", "/api/v1/runs/{id}/unpause", "Runs", "Unpause a paused run").id().resp(vec![run(), nf(), conflict()]),
        op("post", "/api/v1/runs/{id}/archive", "Runs", "Archive a finished run (idempotent)").id().resp(vec![run(), nf(), conflict()]),
        op("post", "/api/v1/runs/{id}/unarchive", "Runs", "Unarchive a run (idempotent)").id().resp(vec![run(), nf()]),
        op("post", "/api/v1/runs/{id}/retry", "Runs", "Retry a failed or dead run: a new run from the same workflow version and inputs, started at once")
            .id()
            .resp(vec![
                ok("201", "The new run (`retried_from` names this one).", r("Run")),
                nf(),
                err("409", "The run is not failed or dead, or its workflow version no longer exists."),
            ]),
        op("post", "/api/v1/runs/{id}/rewind", "Runs", "Rewind a finished run to a node: a new run from the checkpoint before that node's latest visit, started at once")
            .id()
            .body(json!({"type": "object", "required": ["to"], "additionalProperties": false, "properties": {"to": {"type": "string", "minLength": 1, "description": "The node to run again (and everything after it)."}}}), true)
            .resp(vec![
                ok("201", "The new run; the old one's `superseded_by` names it.", r("Run")),
                err("400", "Malformed run id or body."),
                nf(),
                err("409", "The run is still active, or its workspace was removed."),
                err("422", "The node is not in the workflow, or no checkpoint leads to it."),
            ]),
        op("post", "/api/v1/runs/{id}/approve", "Runs", "Approve a run awaiting approval")
            .id()
            .body(json!({"type": "object"}), false)
            .resp(vec![run(), nf(), conflict()]),
        op("post", "/api/v1/runs/{id}/deny", "Runs", "Deny a run awaiting approval")
            .id()
            .body(r("DenyRequest"), false)
            .resp(vec![run(), nf(), conflict()]),
        op("get", "/api/v1/runs/{id}/questions", "Human-in-the-Loop", "Pending questions")
            .id()
            .param("wait", "query", json!({"type": "string", "pattern": "^[0-9]+(ms|s|m)?$"}), "Wait (up to 60 s) until the run has an open question or has ended: seconds (`30`) or a duration (`30s`, `500ms`, `1m`).")
            .resp(vec![ok("200", "Every pending question (none when the wait ended without one).", r("QuestionList")), err("400", "Malformed run id or wait value."), nf()]),
        op("post", "/api/v1/runs/{id}/questions/{qid}/answer", "Human-in-the-Loop", "Answer a question")
            .id()
            .param("qid", "path", json!({"type": "string", "pattern": "^[0-7][0-9A-HJKMNP-TV-Z]{25}$"}), "Question id (a ULID, as listed by GET .../questions).")
            .body(r("SubmitAnswer"), true)
            .resp(vec![
                no_content("204", "Accepted."),
                err("400", "Malformed run or question id, no answer field, or an unknown option."),
                err("404", "Unknown run, or a question the run never asked."),
                err("409", "The question is not pending or the run is not running; `question_already_answered` when another answer (from the API or chat) came first, naming it and who gave it."),
            ]),
        op("get", "/api/v1/runs/{id}/events", "Run Internals", "Events of a run")
            .id()
            .param("since_seq", "query", json!({"type": "integer", "default": 1}), "First seq to return (values below 1 count as 1).")
            .param("limit", "query", json!({"type": "integer", "default": 100}), "At most this many. Clamped: values below 1 count as 1, above 1000 as 1000.")
            .resp(vec![ok("200", "Events in seq order.", r("EventPage")), err("400", "Malformed run id, or a non-integer since_seq or limit."), nf()]),
        op("get", "/api/v1/runs/{id}/attach", "Run Internals", "Stream a run's events (SSE)")
            .id()
            .param("since_seq", "query", json!({"type": "integer", "minimum": 1}), "Replay from this seq, then follow live.")
            .param("Last-Event-ID", "header", json!({"type": "integer"}), "Resume after this seq.")
            .resp(vec![
                ("200".to_string(), json!({"description": "`id: <seq>` and one `data:` line per event; closes after run.completed/run.failed.", "content": {"text/event-stream": {"schema": {"type": "string"}}}})),
                nf(),
                err("410", "The run is finished and nothing is left to send."),
            ]),
        op("get", "/api/v1/attach", "Run Internals", "Stream every run's events live (SSE)")
            .param("run_id", "query", json!({"type": "string"}), "Comma-separated run ids to follow.")
            .resp(vec![
                ("200".to_string(), json!({"description": "One `data:` line per event.", "content": {"text/event-stream": {"schema": {"type": "string"}}}})),
                err("400", "Malformed run id."),
            ]),
        op("get", "/api/v1/runs/{id}/checkpoint", "Run Internals", "Latest checkpoint (or null)")
            .id()
            .resp(vec![ok("200", "The checkpoint, or null.", json!({"type": ["object", "null"]})), nf()]),
        op("get", "/api/v1/runs/{id}/stages", "Run Internals", "Every stage visit: exact prompt text, response, outcome, command output")
            .id()
            .resp(vec![ok("200", "Stage visits in the order they started.", json!({"type": "object", "properties": {"data": {"type": "array", "items": r("StageVisit")}}})), nf()]),
        op("get", "/api/v1/runs/{id}/stages/{node}", "Run Internals", "The visits of one stage")
            .id()
            .param("node", "path", json!({"type": "string"}), "Node id (`<manager>%2F<node>` inside a child workflow).")
            .resp(vec![ok("200", "The node's visits.", json!({"type": "object", "properties": {"node_id": {"type": "string"}, "visits": {"type": "array", "items": r("StageVisit")}}})), err("404", "No such run, or the stage never ran.")]),
        op("get", "/api/v1/runs/{id}/graph/source", "Run Internals", "The run's DOT source")
            .id()
            .resp(vec![
                ("200".to_string(), json!({"description": "DOT text.", "content": {"text/vnd.graphviz": {"schema": {"type": "string"}}}})),
                nf(),
            ]),
        op("get", "/api/v1/runs/{id}/graph", "Run Internals", "The run's workflow drawn as SVG (query direction=lr|tb)")
            .id()
            .resp(vec![
                ("200".to_string(), json!({"description": "SVG; each node is a `g.node` with `data-node` = its id.", "content": {"image/svg+xml": {"schema": {"type": "string"}}}})),
                err("400", "direction is not lr or tb."),
                nf(),
            ]),
        op("post", "/api/v1/runs/{id}/steer", "Runs", "Steer the running agent stage")
            .id()
            .body(r("SteerRequest"), true)
            .resp(steer_responses()),
        op("post", "/runs/{id}/steer", "Runs", "Alias of POST /api/v1/runs/{id}/steer")
            .id()
            .body(r("SteerRequest"), true)
            .resp(steer_responses()),
        op("get", "/api/v1/runs/{id}/usage", "Billing", "Usage and cost per stage and model")
            .id()
            .resp(vec![ok("200", "LLM stages (visits summed per node), totals and per-model sums.", r("Usage")), err("400", "Malformed run id."), nf()]),
        op("get", "/api/v1/models", "Models", "The model catalog")
            .paging()
            .param("provider", "query", json!({"type": "string", "enum": ["anthropic", "openai", "gemini", "google", "kimi", "zai", "minimax", "inception", "openai_compatible", "openai-compatible"]}), "Only this provider's models (case-insensitive; `google` means gemini; empty means all). Anything else is 400.")
            .param("query", "query", json!({"type": "string"}), "Case-insensitive substring of the id, display name or an alias; empty means all.")
            .resp(vec![ok("200", "A page of models.", r("ModelPage")), err("400", "Unknown provider or bad paging parameter.")]),
        op("post", "/api/v1/providers/test", "Models", "Test every LLM provider with a short call")
            .resp(vec![ok("200", "One result per provider; a failing provider does not fail the request.", r("ProviderTestResults"))]),
        files_op("/api/v1/runs/{id}/files", "Files changed by a run"),
        files_op("/runs/{id}/files", "Alias of GET /api/v1/runs/{id}/files"),
        op("post", "/api/v1/runs/{id}/preview", "Sandboxes", "Preview URL for a sandbox port")
            .id()
            .body(r("PreviewRequest"), true)
            .resp(vec![
                ok("201", "The URL (`<base>/preview/...`, `<base>` from [server.preview] url or listen, else the configured public URL; proxied to the port inside the sandbox) and its token.", r("Preview")),
                err("400", "Port outside 1-65535 or expires_in_secs outside 1-86400."),
                err("403", "A host port no preview reaches: svc's own listener or one of [server.preview] deny_ports (code port_not_previewable)."),
                nf(),
                err("409", "The run has no ready sandbox (code sandbox_not_ready)."),
                err("410", "Retention removed the run's sandbox (code sandbox_removed)."),
            ]),
        op("get", "/api/v1/sandboxes", "Sandboxes", "Live sandboxes of every configured provider")
            .paging()
            .resp(vec![
                ok("200", "A page of sandboxes; providers that could not answer are in meta.failures.", r("SandboxPage")),
                err("400", "A paging parameter is not an integer."),
            ]),
        op("get", "/api/v1/sandboxes/{id}", "Sandboxes", "One sandbox")
            .param("id", "path", json!({"type": "string"}), "Provider-native sandbox id.")
            .resp(vec![ok("200", "The sandbox.", r("Sandbox")), err("404", "No provider, or more than one, owns this id.")]),
    ]
}

/// OpenAPI links from a created run (`201` of `POST /api/v1/runs`) to every operation on
/// `/api/v1/runs/{id}...` (and its unprefixed aliases), and from a registered workflow version
/// to reading it back, so clients and stateful testers can follow the ids they got.
fn link_created_runs(paths: &mut Map<String, Value>) {
    let runs = links_to(paths, |p| {
        p.starts_with("/api/v1/runs/{id}") || p.starts_with("/runs/{id}")
    });
    let versions = links_to(paths, |p| p == "/api/v1/workflow-versions/{id}");
    for (path, codes, links) in [
        ("/api/v1/runs", &["201"][..], runs),
        ("/api/v1/workflow-versions", &["200", "201"][..], versions),
    ] {
        for code in codes {
            if let Some(resp) = paths
                .get_mut(path)
                .and_then(|item| item.get_mut("post"))
                .and_then(|op| op["responses"].get_mut(*code))
            {
                resp["links"] = Value::Object(links.clone());
            }
        }
    }
}

/// One link per operation whose path `wanted` accepts, passing the response's `id`.
fn links_to(paths: &Map<String, Value>, wanted: impl Fn(&str) -> bool) -> Map<String, Value> {
    let mut links = Map::new();
    for (path, item) in paths.iter() {
        if !wanted(path) {
            continue;
        }
        for (method, op) in item.as_object().into_iter().flatten() {
            let Some(id) = op["operationId"].as_str() else {
                continue;
            };
            let name: String = format!("{method}_{path}")
                .split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|p| !p.is_empty())
                .collect::<Vec<_>>()
                .join("_");
            links.insert(
                name,
                json!({"operationId": id, "parameters": {"id": "$response.body#/id"}}),
            );
        }
    }
    links
}

fn steer_responses() -> Vec<(String, Value)> {
    vec![
        ok(
            "202",
            "Queued; delivered before the agent's next model call (event agent.steering.injected).",
            r("SteerAccepted"),
        ),
        err("400", "Malformed body, blank guidance, or a bad location."),
        err("404", "No such run."),
        err(
            "409",
            "No agent stage is running now (queued, finished, or on another kind of stage).",
        ),
    ]
}

fn schemas() -> Value {
    let nullable = |t: &str| json!({"type": [t, "null"]});
    json!({
        "Error": {
            "type": "object",
            "required": ["errors"],
            "properties": {
                "errors": {"type": "array", "items": {
                    "type": "object",
                    "required": ["status", "title", "detail"],
                    "properties": {
                        "status": {"type": "string"},
                        "title": {"type": "string"},
                        "detail": {"type": "string"},
                        "code": {"type": "string"},
                        "field": {"type": "string", "description": "422 of a catalog: the invalid field, e.g. triggers[1].expression (empty: the whole body)."},
                        "request_id": {"type": "string", "format": "uuid"},
                        "diagnostics": {"type": "array", "items": {"type": "object"}}
                    }
                }},
                "request_id": {"type": "string", "format": "uuid"},
                "leftover_env_keys": {"type": "array", "items": {"type": "string"}},
                "removed_env_keys": {"type": "array", "items": {"type": "string"}}
            }
        },
        "Discovery": {"type": "object", "required": ["urls"], "properties": {"urls": {
            "type": "object",
            "required": ["openapi_url", "current_user_url", "health_url"],
            "properties": {
                "openapi_url": {"type": "string"},
                "current_user_url": {"type": "string"},
                "health_url": {"type": "string"}
            }
        }}},
        "Health": {"type": "object", "required": ["status"], "properties": {"status": {"const": "ok"}}},
        "User": {"type": "object", "required": ["login", "auth_method"], "properties": {
            "login": {"type": "string"},
            "auth_method": {"enum": ["dev_token", "codehost"]},
            "avatar_url": {"type": "string"}
        }},
        "AuthConfig": {"type": "object", "required": ["methods", "web_enabled", "session_cookie"], "properties": {
            "methods": {"type": "array", "items": {"enum": ["dev-token", "codehost"]}},
            "web_enabled": {"type": "boolean"},
            "session_cookie": {"type": "string"},
            "dev_token_login_url": {"type": ["string", "null"]},
            "codehost_login_url": {"type": ["string", "null"]},
            "logout_url": {"type": ["string", "null"]}
        }},
        "WorkflowPackage": {
            "type": "object",
            "required": ["entrypoint", "files"],
            "additionalProperties": false,
            "properties": {
                "entrypoint": {"type": "string", "minLength": 1, "description": "Path of the workflow file inside the package (one of `files`)."},
                "files": {"type": "object", "minProperties": 1, "maxProperties": 512, "additionalProperties": {"type": "string"}},
                "dependencies": {"type": "array", "maxItems": 512, "items": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}
            }
        },
        "WorkflowVersion": {
            "type": "object",
            "required": ["id", "entrypoint", "files", "dependencies", "created_at"],
            "properties": {
                "id": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                "entrypoint": {"type": "string"},
                "files": {"type": "object", "additionalProperties": {"type": "string"}},
                "dependencies": {"type": "array", "items": {"type": "string"}},
                "created_at": {"type": "string", "format": "date-time"}
            }
        },
        "CreateRun": {
            "type": "object",
            "additionalProperties": false,
            "description": "Exactly one of workflow or workflow_version_id.",
            "oneOf": [{"required": ["workflow"]}, {"required": ["workflow_version_id"]}],
            "examples": [{"title": "hello", "workflow": {"entrypoint": "main.dot", "files": {"main.dot": "digraph hello { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }"}}}],
            "properties": {
                "workflow": r("WorkflowPackage"),
                "workflow_version_id": {"type": "string"},
                "goal": {"type": "string"},
                "title": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "inputs": {"type": "object"},
                "model": {"type": "object", "required": ["name"], "additionalProperties": false, "properties": {"provider": nullable("string"), "name": {"type": "string", "minLength": 1, "pattern": "\\S"}}},
                "sandbox": {"type": "object", "required": ["provider"], "additionalProperties": false, "properties": {
                    "provider": {"enum": ["local", "container", "hosted"]},
                    "image": nullable("string"),
                    "snapshot": nullable("string"),
                    "network": {"type": "boolean", "description": "Container processes may use the network (default [run.sandbox] network, else false)."}
                }},
                "repository": {"type": "object", "required": ["origin_url"], "additionalProperties": false, "properties": {
                    "origin_url": {"type": "string", "description": "Anything `git clone` accepts (https, ssh, file://, a local path)."},
                    "branch": {"type": "string", "description": "Default: the origin's default branch."}
                }},
                "source_directory": {"type": "string", "description": "Absolute path on the server host: cloned if it is a git work tree, else copied."},
                "in_place": {"type": "boolean", "default": false, "description": "Work in source_directory itself (explicit opt-in)."},
                "mcp_servers": r("RunMcpServers"),
                "budget_usd": {"type": "number", "exclusiveMinimum": 0, "description": "The run's LLM budget in US dollars ([run] max_usd when absent)."},
                "artifacts": {"type": "array", "maxItems": 64, "items": {"type": "string", "minLength": 1}, "description": "Workspace files kept at the end of each stage: globs relative to the workspace (`**/*.xml`, `report.html`; no leading `/`, no `..`), listed at /runs/{id}/artifacts ([run] artifacts when absent, [] for none)."},
                "pull_request_options": {"type": "object", "additionalProperties": false, "description": "This run's [run.pull_request] (not the Run's pull_request link).", "properties": {
                    "enabled": {"type": "boolean"}, "draft": {"type": "boolean"}, "base": {"type": "string"},
                    "auto_merge": {"type": "boolean"}, "merge_strategy": {"enum": ["merge", "squash", "rebase"]}
                }},
                "notifications": {"type": "object", "additionalProperties": false, "description": "This run's [run.notifications]: chat messages it posts.", "properties": {
                    "enabled": {"type": "boolean"}, "channel": {"type": "string", "description": "A channel id or #name."},
                    "events": {"type": "array", "items": {"enum": ["run.completed", "run.failed", "run.blocked"]}}
                }}
            }
        },
        "FileDiff": {"type": "object", "required": ["old_file", "new_file"], "properties": {
            "old_file": {"type": "object", "required": ["name", "contents"], "properties": {"name": {"type": "string"}, "contents": {"type": "string"}}},
            "new_file": {"type": "object", "required": ["name", "contents"], "properties": {"name": {"type": "string"}, "contents": {"type": "string"}}}
        }},
        "FileDiffPage": {"type": "object", "required": ["data", "meta"], "properties": {"data": {"type": "array", "items": r("FileDiff")}, "meta": r("Meta")}},
        "Sandbox": {"type": "object", "required": ["id", "provider", "run_id", "state", "working_directory", "resources"], "properties": {
            "id": {"type": "string"},
            "provider": {"enum": ["local", "container", "hosted"]},
            "run_id": {"type": "string"},
            "state": {"enum": ["active", "idle", "orphaned"]},
            "working_directory": {"type": "string"},
            "created_at": {"type": "string", "format": "date-time"},
            "resources": {"type": "object", "properties": {"cpu": {"type": "integer"}, "memory": {"type": ["integer", "null"]}}}
        }},
        "SandboxPage": {"type": "object", "required": ["data", "meta"], "properties": {
            "data": {"type": "array", "items": r("Sandbox")},
            "meta": {"type": "object", "required": ["has_more", "failures"], "properties": {
                "has_more": {"type": "boolean"},
                "failures": {"type": "array", "items": {"type": "object", "required": ["provider", "error"], "properties": {"provider": {"type": "string"}, "error": {"type": "string"}}}}
            }}
        }},
        "StartRequest": {"type": "object", "additionalProperties": false, "properties": {"resume": {"type": "boolean", "default": false}}},
        "DenyRequest": {"type": "object", "additionalProperties": false, "properties": {"reason": {"type": "string"}}},
        "SteerRequest": {"type": "object", "required": ["guidance"], "additionalProperties": false, "properties": {
            "guidance": {"type": "string", "minLength": 1, "description": "Not blank."},
            "location": {"type": ["object", "null"], "required": ["file"], "additionalProperties": false, "properties": {
                "file": {"type": "string", "minLength": 1},
                "line": {"type": "integer", "minimum": 1}
            }}
        }},
        "SteerAccepted": {"type": "object", "required": ["accepted"], "properties": {"accepted": {"const": true}}},
        "PreviewRequest": {"type": "object", "required": ["port", "expires_in_secs"], "additionalProperties": false, "properties": {
            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
            "expires_in_secs": {"type": "integer", "minimum": 1, "maximum": 86400},
            "signed": {"type": "boolean", "default": false, "description": "A signed URL works without other credentials; an unsigned one also needs the API credentials."}
        }},
        "Preview": {"type": "object", "required": ["url", "token"], "properties": {"url": {"type": "string"}, "token": {"type": "string"}}},
        "RunStatus": {
            "type": "object",
            "required": ["kind"],
            "properties": {
                "kind": {"enum": ["submitted", "pending", "runnable", "starting", "running", "blocked", "paused", "removing", "succeeded", "failed", "dead"]},
                "reason": {"type": "string"},
                "blocked_reason": {"enum": ["human_input_required"]},
                "prior_block": nullable("string")
            }
        },
        "Principal": {"type": "object", "required": ["kind"], "properties": {
            "kind": {"enum": ["user", "worker", "webhook", "chat", "agent", "system"]}
        }},
        "StageVisit": {
            "type": "object",
            "required": ["node_id", "visit", "attempts", "outcome", "context_updates", "prompts"],
            "properties": {
                "node_id": {"type": "string"},
                "visit": {"type": "integer", "minimum": 1},
                "handler_type": nullable("string"),
                "attempts": {"type": "integer"},
                "outcome": {"enum": ["succeeded", "partially_succeeded", "skipped", "failed", "running"]},
                "notes": nullable("string"),
                "failure_reason": nullable("string"),
                "preferred_label": nullable("string"),
                "context_updates": {"type": "object"},
                "prompts": {"type": "array", "items": {"type": "object", "description": "`stage.prompt` properties: text (exactly what was sent), mode, provider, model, continued, fidelity, thread_id, preamble, prompt, visit."}},
                "response": nullable("string"),
                "command": {"type": ["object", "null"], "description": "`command.completed` properties (stdout, stderr, exit_code...)."},
                "duration_ms": {"type": ["integer", "null"]},
                "mcp_servers": {"type": "array", "description": "Agent stages with MCP servers: one entry per server.", "items": r("StageMcpServer")}
            }
        },
        "StageMcpServer": {
            "type": "object",
            "required": ["server", "state", "tools", "used"],
            "properties": {
                "server": {"type": "string"},
                "state": {"enum": ["ready", "failed"]},
                "error": nullable("string"),
                "required": {"type": ["boolean", "null"]},
                "transport": {"enum": ["stdio", "http"]},
                "server_info": {"type": ["object", "null"], "description": "What initialize said: name, version, protocol_version."},
                "duration_ms": {"type": ["integer", "null"], "description": "Start-up (spawn or connect, initialize, tools/list)."},
                "tool_count": {"type": ["integer", "null"]},
                "tools": {"type": "array", "items": {"type": "object", "required": ["name", "original_name"], "properties": {
                    "name": {"type": "string", "description": "As offered to the model: mcp__<server>__<tool>."},
                    "original_name": {"type": "string"}
                }}},
                "used": {"type": "array", "items": {"type": "string"}, "description": "Original names of the tools the agent called."},
                "stderr": {"type": "string", "description": "The end of the server's stderr (stdio), bounded."}
            }
        },
        "Run": {
            "type": "object",
            "required": ["id", "children_count", "title", "goal", "workflow", "automation", "repository", "created_by", "origin", "labels", "lifecycle", "sandbox", "models", "source_directory", "timestamps", "timing", "billing", "size", "ask_svc", "diff", "pull_request", "current_question", "superseded_by", "retried_from", "links"],
            "properties": {
                "id": {"type": "string"},
                "parent_id": nullable("string"),
                "children_count": {"type": "integer", "minimum": 0},
                "title": {"type": "string"},
                "goal": {"type": "string"},
                "workflow": {"type": "object", "properties": {
                    "version_id": nullable("string"),
                    "slug": nullable("string"), "name": nullable("string"), "graph_name": nullable("string"),
                    "node_count": {"type": "integer"}, "edge_count": {"type": "integer"}
                }},
                "automation": {"type": ["object", "null"], "description": "AutomationRef {id, name, trigger_id} of the automation that started the run.", "properties": {
                    "id": {"type": "string"}, "name": nullable("string"), "trigger_id": nullable("string")
                }},
                "repository": {"type": ["object", "null"]},
                "created_by": r("Principal"),
                "origin": {"type": "object", "properties": {"kind": {"const": "api"}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "lifecycle": {"type": "object", "required": ["status", "approval", "pending_control", "queue_position", "error", "archived", "archived_at"], "properties": {
                    "status": r("RunStatus"),
                    "approval": {"type": ["object", "null"]},
                    "pending_control": {"enum": ["cancel", "pause", "unpause", null]},
                    "queue_position": nullable("integer"),
                    "error": {"type": ["object", "null"], "properties": {"message": {"type": "string"}}},
                    "archived": {"type": "boolean"},
                    "archived_at": nullable("string")
                }},
                "sandbox": {"type": ["object", "null"]},
                "models": {"type": "array", "items": {"type": "object"}},
                "source_directory": nullable("string"),
                "timestamps": {"type": "object", "properties": {
                    "created_at": {"type": "string", "format": "date-time"},
                    "started_at": nullable("string"), "last_event_at": nullable("string"), "completed_at": nullable("string")
                }},
                "timing": {"oneOf": [r("RunTiming"), {"type": "null"}]},
                "billing": {"oneOf": [r("RunBillingSummary"), {"type": "null"}]},
                "size": {"enum": ["XS", "S", "M", "L", "XL"]},
                "ask_svc": r("AskSvc"),
                "diff": {"type": ["object", "null"]},
                "pull_request": {"oneOf": [r("PullRequestLink"), {"type": "null"}]},
                "current_question": {"type": ["object", "null"], "properties": {"text": {"type": "string"}}},
                "superseded_by": nullable("string"),
                "retried_from": nullable("string"),
                "links": {"type": "object", "properties": {"web": nullable("string")}}
            }
        },
        "AskSvc": {
            "type": "object",
            "required": ["available", "unavailable_reason", "default_model"],
            "description": "Readiness of Ask on this run, computed per response: no sandbox record, then a sandbox that is not ready (a removed one still answers from stored events), then no usable LLM provider.",
            "properties": {
                "available": {"type": "boolean"},
                "unavailable_reason": {"enum": ["no_sandbox", "sandbox_not_ready", "llm_unconfigured", null]},
                "default_model": nullable("string")
            }
        },
        "RunTiming": {
            "type": "object",
            "required": ["wall_time_ms", "active_time_ms"],
            "description": "active_time_ms = inference_time_ms + tool_time_ms, summed over LLM stage attempts; it can exceed wall time when branches run in parallel.",
            "properties": {
                "wall_time_ms": {"type": "integer", "minimum": 0},
                "active_time_ms": {"type": "integer", "minimum": 0},
                "inference_time_ms": {"type": "integer", "minimum": 0, "default": 0},
                "tool_time_ms": {"type": "integer", "minimum": 0, "default": 0}
            }
        },
        "RunBillingSummary": {
            "type": "object",
            "required": ["total_usd_micros"],
            "properties": {
                "total_usd_micros": {"type": ["integer", "null"], "description": "Null when no usage could be priced (or nothing was spent yet)."},
                "budget_usd_micros": {"type": "integer", "description": "The run's LLM budget (budget_usd or [run] max_usd): the run stops budget_exceeded before a model call once its recorded cost reaches it."}
            }
        },
        "UsageTiming": {
            "type": "object",
            "required": ["wall_time_ms", "inference_time_ms", "tool_time_ms", "active_time_ms"],
            "properties": {
                "wall_time_ms": {"type": "integer"}, "inference_time_ms": {"type": "integer"},
                "tool_time_ms": {"type": "integer"}, "active_time_ms": {"type": "integer"}
            }
        },
        "UsageAmount": {
            "type": "object",
            "required": ["tokens", "cost"],
            "properties": {
                "tokens": {"type": "object", "required": ["input", "output", "reasoning", "cache_read", "cache_write"], "properties": {
                    "input": {"type": "integer"}, "output": {"type": "integer"}, "reasoning": {"type": "integer"},
                    "cache_read": {"type": "integer"}, "cache_write": {"type": "integer"}
                }},
                "cost": {"type": "object", "required": ["usd_micros", "source"], "properties": {
                    "usd_micros": {"type": "integer"},
                    "source": {"enum": ["catalog", "unpriced", "partial"]}
                }}
            }
        },
        "UsageModel": {
            "type": "object",
            "required": ["provider", "model_id", "speed"],
            "properties": {"provider": {"type": "string"}, "model_id": {"type": "string"}, "speed": {"enum": ["standard", "fast"]}}
        },
        "Usage": {
            "type": "object",
            "required": ["stages", "totals", "by_model"],
            "properties": {
                "stages": {"type": "array", "items": {
                    "type": "object",
                    "required": ["stage", "model", "usage", "timing", "started_at", "state"],
                    "properties": {
                        "stage": {"type": "object", "required": ["id", "name"], "properties": {"id": {"type": "string"}, "name": {"type": "string"}}},
                        "model": r("UsageModel"),
                        "usage": r("UsageAmount"),
                        "timing": r("UsageTiming"),
                        "started_at": {"type": "string", "format": "date-time"},
                        "state": {"enum": ["running", "retrying", "succeeded", "partially_succeeded", "failed", "skipped", "cancelled"]}
                    }
                }},
                "totals": {"type": "object", "required": ["timing", "usage"], "properties": {"timing": r("UsageTiming"), "usage": r("UsageAmount")}},
                "by_model": {"type": "array", "items": {
                    "type": "object",
                    "required": ["model", "stages", "usage"],
                    "properties": {"model": r("UsageModel"), "stages": {"type": "integer"}, "usage": r("UsageAmount")}
                }}
            }
        },
        "Model": {
            "type": "object",
            "required": ["id", "provider", "display_name", "limits", "features", "costs", "aliases", "default", "configured"],
            "properties": {
                "id": {"type": "string"},
                "provider": {"type": "string"},
                "family": {"type": "string"},
                "display_name": {"type": "string"},
                "limits": {"type": "object", "properties": {"context_window": {"type": "integer"}, "max_output": nullable("integer")}},
                "training": nullable("string"),
                "knowledge_cutoff": nullable("string"),
                "features": {"type": "object", "properties": {
                    "tools": {"type": "boolean"}, "vision": {"type": "boolean"},
                    "reasoning": {"type": "boolean"}, "effort": {"type": "boolean"}
                }},
                "costs": {"type": "object", "description": "USD per million tokens.", "properties": {
                    "input_cost_per_mtok": nullable("number"),
                    "output_cost_per_mtok": nullable("number"),
                    "cache_input_cost_per_mtok": nullable("number")
                }},
                "estimated_output_tps": nullable("number"),
                "aliases": {"type": "array", "items": {"type": "string"}},
                "default": {"type": "boolean", "description": "The provider's default model."},
                "configured": {"type": "boolean", "description": "The provider's key is stored."}
            }
        },
        "ModelPage": {"type": "object", "required": ["data", "meta"], "properties": {"data": {"type": "array", "items": r("Model")}, "meta": r("Meta")}},
        "ProviderTestResults": {"type": "object", "required": ["data"], "properties": {"data": {"type": "array", "items": {
            "type": "object",
            "required": ["provider", "model_id", "status", "error_message", "latency_ms"],
            "properties": {
                "provider": {"type": "string"},
                "model_id": {"type": "string", "description": "The model probed."},
                "status": {"enum": ["ok", "error", "skip"], "description": "skip: no key is stored for the provider."},
                "error_message": nullable("string"),
                "latency_ms": {"type": "integer", "minimum": 0}
            }
        }}}},
        "BoardItem": {
            "type": "object",
            "required": ["id", "title", "status", "created_at"],
            "properties": {
                "id": {"type": "string"},
                "repository": {"type": "object", "properties": {"name": {"type": "string"}}},
                "title": {"type": "string"},
                "workflow": {"type": "object", "properties": {"slug": nullable("string")}},
                "status": {"enum": ["queued", "initializing", "running", "blocked", "succeeded", "failed"]},
                "created_at": {"type": "string", "format": "date-time"},
                "pull_request": {"type": ["object", "null"], "description": "What svc keeps of the run's pull request: number, state, html_url, additions, deletions, comments, checks [{name, status, duration_secs}].", "properties": {
                    "number": {"type": "integer"}, "additions": {"type": "integer"}, "deletions": {"type": "integer"},
                    "comments": {"type": "integer"}, "checks": {"type": "array", "items": {"type": "object", "properties": {
                        "name": {"type": "string"}, "status": {"type": "string"}, "duration_secs": {"type": ["integer", "null"]}
                    }}}
                }},
                "timings": {"type": "object", "properties": {"elapsed_secs": {"type": "integer"}, "elapsed_warning": {"type": "boolean"}}},
                "sandbox": {"type": ["object", "null"]},
                "question": {"type": ["object", "null"]}
            }
        },
        "Meta": {"type": "object", "required": ["has_more"], "properties": {"has_more": {"type": "boolean"}}},
        "BoardPage": {"type": "object", "required": ["data", "meta"], "properties": {"data": {"type": "array", "items": r("BoardItem")}, "meta": r("Meta")}},
        "Event": {
            "type": "object",
            "required": ["seq", "id", "ts", "run_id", "event", "properties"],
            "properties": {
                "seq": {"type": "integer", "minimum": 1},
                "id": {"type": "string"},
                "ts": {"type": "string", "format": "date-time"},
                "run_id": {"type": "string"},
                "event": {"type": "string"},
                "properties": {"type": "object"},
                "node_id": {"type": "string"},
                "node_label": {"type": "string"},
                "stage_id": {"type": "string"},
                "actor": r("Principal")
            }
        },
        "EventPage": {"type": "object", "required": ["data", "meta"], "properties": {"data": {"type": "array", "items": r("Event")}, "meta": r("Meta")}},
        "Question": {
            "type": "object",
            "required": ["id", "text", "stage", "question_type", "options", "allow_freeform"],
            "properties": {
                "id": {"type": "string"},
                "text": {"type": "string"},
                "stage": {"type": "string"},
                "question_type": {"enum": ["yes_no", "confirmation", "multiple_choice", "multi_select", "freeform"]},
                "options": {"type": "array", "items": {"type": "object", "properties": {"key": {"type": "string"}, "label": {"type": "string"}}}},
                "allow_freeform": {"type": "boolean"},
                "timeout_seconds": nullable("integer"),
                "context_display": nullable("string")
            }
        },
        "QuestionList": {"type": "object", "required": ["data", "meta"], "properties": {"data": {"type": "array", "items": r("Question")}, "meta": r("Meta")}},
        "SubmitAnswer": {
            "type": "object",
            "additionalProperties": false,
            "minProperties": 1,
            "properties": {
                "value": {"type": "string"},
                "selected_option_key": {"type": "string"},
                "selected_option_keys": {"type": "array", "items": {"type": "string"}}
            }
        }
    })
}

fn build() -> Value {
    let mut paths = Map::new();
    for o in operations()
        .into_iter()
        .chain(automations::operations())
        .chain(mcp_servers::operations())
        .chain(operator::operations())
        .chain(sessions::operations())
        .chain(backups::operations())
        .chain(artifacts::operations())
        .chain(integrations::operations())
        .chain(environments::operations())
        .chain(workflows::operations())
        .chain(insights::operations())
        .chain(completions::operations())
    {
        let mut responses = Map::new();
        for (code, v) in o.responses {
            responses.insert(code, v);
        }
        if o.run_id {
            responses.entry("400").or_insert_with(|| {
                json!({"description": "Malformed run id (not a ULID) or malformed body.", "content": content(r("Error"))})
            });
        }
        if !o.public {
            responses.insert(
                "401".into(),
                json!({"description": "Missing or invalid credentials.", "content": content(r("Error"))}),
            );
            responses.insert(
                "403".into(),
                json!({"description": "The user is not allowed, or a cookie-authenticated change came from another origin.", "content": content(r("Error"))}),
            );
        }
        let mut operation = json!({
            "tags": [o.tag],
            "summary": o.summary,
            "operationId": format!("{}_{}", o.method, o.path.trim_matches('/').replace(['/', '{', '}', '.', '-'], "_")),
            "parameters": o.params,
            "responses": responses,
        });
        operation["security"] = if o.public {
            json!([])
        } else {
            json!([{"BearerAuth": []}, {"SessionCookie": []}])
        };
        if let Some((schema, required)) = o.body {
            operation["requestBody"] = json!({"required": required, "content": content(schema)});
        }
        let entry = paths.entry(o.path.to_string()).or_insert_with(|| json!({}));
        entry[o.method] = operation;
    }
    link_created_runs(&mut paths);
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "svc",
            "version": "0.1.0",
            "description": "Workflow run service. Errors use the Error schema; every response carries x-request-id.",
            "license": {"name": "MIT", "identifier": "MIT"}
        },
        "servers": [{"url": "/"}],
        "tags": [
            {"name": "Discovery"}, {"name": "System"}, {"name": "Auth"}, {"name": "Workflows"},
            {"name": "Runs"}, {"name": "Human-in-the-Loop"}, {"name": "Run Internals"},
            {"name": "Run Outputs"}, {"name": "Billing"}, {"name": "Sandboxes"}, {"name": "Models"},
            {"name": "Automations"}, {"name": "MCP Servers"}, {"name": "Settings"}, {"name": "Sessions"}, {"name": "Integrations"},
            {"name": "Insights"}, {"name": "Completions"}
        ],
        "paths": paths,
        "components": {
            "schemas": merged(
                merged(
                    merged(
                        merged(
                            merged(merged(schemas(), automations::schemas()), mcp_servers::schemas()),
                            operator::schemas(),
                        ),
                        sessions::schemas(),
                    ),
                    backups::schemas(),
                ),
                merged(
                    merged(integrations::schemas(), environments::schemas()),
                    merged(
                        merged(workflows::schemas(), insights::schemas()),
                        merged(artifacts::schemas(), completions::schemas()),
                    ),
                ),
            ),
            "securitySchemes": {
                "BearerAuth": {"type": "http", "scheme": "bearer", "description": "Dev token (svc_dev_…) or an Ed25519 JWT (iss svc-web)."},
                "SessionCookie": {"type": "apiKey", "in": "cookie", "name": "__svc_session", "description": "Private session cookie set by /auth/dev-token or /auth/callback."}
            }
        },
        "security": [{"BearerAuth": []}, {"SessionCookie": []}]
    })
}

/// `a` with `b`'s members added.
fn merged(mut a: Value, b: Value) -> Value {
    if let (Some(a), Value::Object(b)) = (a.as_object_mut(), b) {
        a.extend(b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::router::Access;

    #[test]
    fn describes_every_route_and_nothing_else() {
        let doc = document();
        let paths = doc["paths"].as_object().unwrap();
        let routes = crate::server::routes::routes();
        let mut documented = 0;
        for (path, item) in paths {
            for (method, op) in item.as_object().unwrap() {
                documented += 1;
                let route = routes
                    .iter()
                    .find(|r| r.pattern == path && r.method.eq_ignore_ascii_case(method))
                    .unwrap_or_else(|| panic!("documented but not routed: {method} {path}"));
                let public = op["security"].as_array().unwrap().is_empty();
                assert_eq!(public, route.access == Access::Public, "{method} {path}");
                assert!(!op["responses"].as_object().unwrap().is_empty());
            }
        }
        assert_eq!(documented, routes.len());
        // Every $ref resolves.
        let text = doc.to_string();
        for part in text.split("#/components/schemas/").skip(1) {
            let name: String = part.chars().take_while(|c| *c != '"').collect();
            assert!(doc["components"]["schemas"].get(&name).is_some(), "{name}");
        }
    }

    #[test]
    fn run_ids_carry_the_ulid_pattern_and_their_400() {
        let doc = document();
        let id = crate::base::clock::new_ulid();
        let re = ulid_pattern_matches;
        assert_eq!(ULID_PATTERN, "^[0-7][0-9A-HJKMNP-TV-Z]{25}$");
        assert!(re(&id), "{id}");
        assert!(!re("0") && !re(&id.to_lowercase()) && !re(&format!("8{}", &id[1..])));
        for (path, item) in doc["paths"].as_object().unwrap() {
            if !path.contains("/runs/{id}") {
                continue;
            }
            for (method, op) in item.as_object().unwrap() {
                let param = op["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|p| p["name"] == "id")
                    .unwrap();
                assert_eq!(param["schema"]["pattern"], ULID_PATTERN, "{method} {path}");
                assert!(op["responses"].get("400").is_some(), "{method} {path}");
            }
        }
    }

    /// [`ULID_PATTERN`] by hand (no regex dependency): first char 0-7, then 25 of the
    /// Crockford alphabet; it must agree with the server's own check.
    fn ulid_pattern_matches(s: &str) -> bool {
        const ALPHABET: &str = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
        let by_hand = s.len() == 26
            && s.starts_with(|c: char| ('0'..='7').contains(&c))
            && s.chars().all(|c| ALPHABET.contains(c));
        assert_eq!(by_hand, crate::base::clock::is_canonical_ulid(s), "{s}");
        by_hand
    }

    #[test]
    fn the_models_provider_filter_lists_exactly_what_the_server_accepts() {
        let doc = document();
        let params = doc["paths"]["/api/v1/models"]["get"]["parameters"]
            .as_array()
            .unwrap();
        let provider = params.iter().find(|p| p["name"] == "provider").unwrap();
        let listed: Vec<&str> = provider["schema"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for name in &listed {
            assert!(crate::llm::Provider::parse(name).is_some(), "{name}");
        }
        for p in crate::llm::Provider::ALL {
            assert!(listed.contains(&p.id()), "{}", p.id());
        }
    }
}
