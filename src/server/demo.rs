//! Demo mode (SPEC 1.12, api.md 8): a request with `X-Svc-Demo: 1` or the cookie
//! `svc-demo=1` gets static fixture data without authentication on every read route, and a
//! harmless canned answer on every mutation. Public routes (discovery, health, OpenAPI)
//! answer as usual.
//!
//! Owns: the fixtures. Must not touch: real runs, the store, versions, settings or the
//! vault — nothing here reads or writes state.

use super::error::ApiError;
use super::http::{Incoming, Reply, StreamReply};
use super::router::{Ctx, Route};
use super::App;
use crate::base::event_kind;
use serde_json::{json, Value};

/// The demo workflow's version id (a well-formed id no real package has).
const DEMO_VERSION: &str = "de00000000000000000000000000000000000000000000000000000000000001";

pub fn is_demo(inc: &Incoming<'_>) -> bool {
    inc.header("x-svc-demo").map(str::trim) == Some("1") || inc.cookie("svc-demo") == Some("1")
}

struct Fixture {
    id: &'static str,
    repo: &'static str,
    title: &'static str,
    slug: &'static str,
    status: Value,
    board: &'static str,
    created_at: &'static str,
    pending_control: Option<&'static str>,
    question: Option<&'static str>,
    labels: Value,
}

fn fixtures() -> Vec<Fixture> {
    vec![
        Fixture {
            id: "01JNDEM0000000000000000001",
            repo: "api-server",
            title: "Add rate limiting to the public endpoints",
            slug: "implement",
            status: json!({"kind": "running"}),
            board: "running",
            created_at: "2026-03-06T09:12:00.000Z",
            pending_control: None,
            question: None,
            labels: json!({"team": "platform"}),
        },
        Fixture {
            id: "01JNDEM0000000000000000002",
            repo: "web-dashboard",
            title: "Dark mode for the settings page",
            slug: "implement",
            status: json!({"kind": "running"}),
            board: "running",
            created_at: "2026-03-05T16:40:00.000Z",
            pending_control: Some("pause"),
            question: None,
            labels: json!({"team": "frontend"}),
        },
        Fixture {
            id: "01JNDEM0000000000000000003",
            repo: "shared-types",
            title: "Generate TypeScript types from the API schema",
            slug: "codegen",
            status: json!({"kind": "starting"}),
            board: "initializing",
            created_at: "2026-03-05T11:05:00.000Z",
            pending_control: None,
            question: None,
            labels: json!({"team": "platform"}),
        },
        Fixture {
            id: "01JNDEM0000000000000000004",
            repo: "api-server",
            title: "Migrate sessions to the new store",
            slug: "migrate",
            status: json!({"kind": "blocked", "blocked_reason": "human_input_required"}),
            board: "blocked",
            created_at: "2026-03-04T08:30:00.000Z",
            pending_control: None,
            question: Some("Apply the migration to production?"),
            labels: json!({"team": "platform", "risk": "high"}),
        },
        Fixture {
            id: "01JNDEM0000000000000000005",
            repo: "web-dashboard",
            title: "Fix flaky login test",
            slug: "fix",
            status: json!({"kind": "failed", "reason": "workflow_error"}),
            board: "failed",
            created_at: "2026-03-02T14:00:00.000Z",
            pending_control: None,
            question: None,
            labels: json!({"team": "frontend"}),
        },
        Fixture {
            id: "01JNDEM0000000000000000006",
            repo: "shared-types",
            title: "Bump serde and regenerate fixtures",
            slug: "chore",
            status: json!({"kind": "succeeded", "reason": "completed"}),
            board: "succeeded",
            created_at: "2026-03-01T10:20:00.000Z",
            pending_control: None,
            question: None,
            labels: json!({"team": "platform"}),
        },
        Fixture {
            id: "01JNDEM0000000000000000007",
            repo: "api-server",
            title: "Document the pagination parameters",
            slug: "docs",
            status: json!({"kind": "runnable"}),
            board: "queued",
            created_at: "2026-02-28T09:00:00.000Z",
            pending_control: None,
            question: None,
            labels: json!({"team": "docs"}),
        },
    ]
}

fn run_json(f: &Fixture) -> Value {
    let terminal = matches!(f.board, "succeeded" | "failed");
    json!({
        "id": f.id,
        "parent_id": null,
        "children_count": 0,
        "title": f.title,
        "goal": f.title,
        "workflow": {"slug": f.slug, "name": f.slug, "graph_name": f.slug, "node_count": 6, "edge_count": 6},
        "automation": null,
        "repository": {"name": f.repo, "origin_url": format!("https://code.example.com/acme/{}", f.repo), "provider": "git"},
        "created_by": {"kind": "user", "identity": {"issuer": "svc:demo", "subject": "demo"}, "login": "demo", "auth_method": "dev_token"},
        "origin": {"kind": "api"},
        "labels": f.labels,
        "lifecycle": {
            "status": f.status,
            "approval": null,
            "pending_control": f.pending_control,
            "queue_position": if f.board == "queued" { json!(1) } else { Value::Null },
            "error": if f.board == "failed" { json!({"message": "stage `test` failed: 2 tests failed"}) } else { Value::Null },
            "archived": false,
            "archived_at": null,
        },
        "sandbox": {"kind": "ready", "plan": {"provider": "container", "image": "buildpack-deps:noble", "snapshot": null, "environment": "default"},
                     "instance": {"provider": "container", "image": "buildpack-deps:noble", "snapshot": null,
                                  "runtime": {"id": format!("sbx-{}", &f.id[20..]), "working_directory": "/workspace", "repo_cloned": true, "clone_origin_url": null, "clone_branch": null}},
                     "failure": null},
        "models": [{"provider": "anthropic", "name": "claude-sonnet-4-6"}],
        "source_directory": null,
        "timestamps": {"created_at": f.created_at, "started_at": f.created_at, "last_event_at": f.created_at,
                        "completed_at": if terminal { json!(f.created_at) } else { Value::Null }},
        "timing": {"wall_time_ms": 754_000, "active_time_ms": 610_000, "inference_time_ms": 540_000, "tool_time_ms": 70_000},
        "billing": {"total_usd_micros": if f.board == "succeeded" { 720_000 } else { 2_260_000 }},
        "size": "M",
        "ask_svc": {"available": false, "unavailable_reason": "no_sandbox", "default_model": null},
        "diff": {"files_changed": 3, "additions": 42, "deletions": 7},
        "pull_request": demo_link(f),
        "current_question": f.question.map(|q| json!({"text": q})),
        "superseded_by": null,
        "retried_from": null,
        "links": {"web": null},
    })
}

fn board_item(f: &Fixture) -> Value {
    json!({
        "id": f.id,
        "repository": {"name": f.repo},
        "title": f.title,
        "workflow": {"slug": f.slug},
        "status": f.board,
        "created_at": f.created_at,
        "pull_request": if f.board == "succeeded" {
            json!({"number": 128, "state": "open", "html_url": demo_link(f)["html_url"],
                   "additions": 42, "deletions": 7, "comments": 2,
                   "checks": [{"name": "ci", "status": "success", "duration_secs": 312}]})
        } else { Value::Null },
        "timings": {"elapsed_secs": 754, "elapsed_warning": false},
        "sandbox": {"id": format!("sbx-{}", &f.id[20..]), "resources": {"cpu": 4, "memory": 8}},
        "question": f.question.map(|q| json!({"text": q})),
    })
}

/// The succeeded fixtures' pull request link (others have none).
fn demo_link(f: &Fixture) -> Value {
    if f.board != "succeeded" {
        return Value::Null;
    }
    json!({"owner": "acme", "repo": f.repo, "number": 128,
           "html_url": format!("https://github.com/acme/{}/pull/128", f.repo)})
}

/// `GET /runs/{id}/pull_request` of a fixture: 404 without a link.
fn demo_pull_request(f: &Fixture) -> Result<Reply, ApiError> {
    let link = demo_link(f);
    if link.is_null() {
        return Err(
            ApiError::not_found(format!("Run {} has no pull request.", f.id))
                .with_code("no_stored_record"),
        );
    }
    Ok(Reply::json(
        200,
        &json!({
            "data": {
                "link": link,
                "state": "open",
                "details": {"title": f.title, "body": null, "state": "open", "draft": false,
                            "merged": false, "merged_at": null, "mergeable": true, "additions": 42,
                            "deletions": 7, "changed_files": 3, "author": {"login": "svc-bot"},
                            "head_branch": format!("svc/run/{}", f.id.to_ascii_lowercase()),
                            "base_branch": "main", "head_sha": "4f2a9c1",
                            "timestamps": {"created_at": f.created_at, "updated_at": f.created_at}},
                "comments": 2,
                "checks": [{"name": "ci", "status": "success", "duration_secs": 312,
                            "started_at": f.created_at, "completed_at": f.created_at,
                            "title": "All tests passed", "summary": "412 tests", "details_url": null}],
                "checks_verdict": "passed",
                "auto_merge": false,
            },
            "meta": {"details_status": "available", "details_unavailable_reason": null, "details_error": null},
        }),
    ))
}

fn demo_creation(f: &Fixture) -> Value {
    json!({"id": "01JNDEMCREATI0N00000000001", "status": "succeeded", "model": null, "force": false,
           "requested_at": f.created_at, "updated_at": f.created_at,
           "pull_request": demo_link(f), "error": null})
}

fn find(ctx: &Ctx<'_, '_>) -> Result<Fixture, ApiError> {
    let id = ctx.param("id");
    fixtures()
        .into_iter()
        .find(|f| f.id == id)
        .ok_or_else(|| ApiError::not_found(format!("No demo run with id {id}.")))
}

fn with_status(f: &Fixture, status: Value, pending: Option<&str>) -> Value {
    let mut v = run_json(f);
    v["lifecycle"]["status"] = status;
    v["lifecycle"]["pending_control"] = json!(pending);
    v
}

fn events(f: &Fixture) -> Vec<Value> {
    let ev = |seq: u64, kind: &str, props: Value| {
        json!({"seq": seq, "id": format!("01JNDEMEVENT0000000000000{seq}"), "ts": f.created_at,
               "run_id": f.id, "event": kind, "properties": props})
    };
    vec![
        ev(1, event_kind::RUN_CREATED, json!({"title": f.title})),
        ev(2, event_kind::RUN_QUEUED, json!({})),
        ev(3, event_kind::RUN_STARTING, json!({})),
        ev(4, event_kind::RUN_STARTED, json!({"name": f.slug})),
        ev(
            5,
            event_kind::STAGE_STARTED,
            json!({"index": 0, "handler_type": "agent", "attempt": 1, "max_attempts": 1}),
        ),
        ev(
            6,
            event_kind::RUN_COMPLETED,
            json!({"status": "succeeded", "reason": "completed", "duration_ms": 754_000}),
        ),
    ]
}

const DEMO_GRAPH: &str = "digraph demo {\n  start [shape=Mdiamond]\n  plan\n  implement\n  test [shape=parallelogram, script=\"make test\"]\n  review [shape=hexagon]\n  exit [shape=Msquare]\n  start -> plan -> implement -> test -> review -> exit\n}\n";

fn questions() -> Value {
    json!({"data": [
        {"id": "q-001", "text": "Apply the migration to production?", "stage": "review", "question_type": "yes_no",
         "options": [{"key": "Y", "label": "Yes"}, {"key": "N", "label": "No"}],
         "allow_freeform": false, "timeout_seconds": null, "context_display": null},
        {"id": "q-002", "text": "Which rollout strategy?", "stage": "rollout", "question_type": "multiple_choice",
         "options": [{"key": "C", "label": "Canary"}, {"key": "B", "label": "Blue/green"}],
         "allow_freeform": true, "timeout_seconds": 3600, "context_display": null}
    ], "meta": {"has_more": false}})
}

fn sse(events: Vec<Value>, with_id: bool) -> Reply {
    Reply::Stream(StreamReply {
        status: 200,
        headers: vec![
            ("Content-Type".into(), "text/event-stream".into()),
            ("Cache-Control".into(), "no-cache".into()),
        ],
        body: Box::new(move |w| {
            for e in events {
                let data = e.to_string();
                let frame = if with_id {
                    format!("id: {}\ndata: {data}\n\n", e["seq"])
                } else {
                    format!("data: {data}\n\n")
                };
                w.send(frame.as_bytes())?;
            }
            Ok(())
        }),
    })
}

/// Answers `route` with fixtures. Reads no state and writes none.
pub fn handle(_app: &App, route: &Route, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let p = route.pattern;
    let m = route.method;
    let j = |v: Value| Ok(Reply::json(200, &v));
    match (m, p) {
        ("GET", "/api/v1/user") => j(json!({"login": "demo", "auth_method": "dev_token"})),
        ("GET", "/api/v1/runs") | ("GET", "/runs") => {
            let (limit, offset) = super::runs::page(ctx)?;
            let all: Vec<Value> = fixtures().iter().map(board_item).collect();
            let data: Vec<Value> = all.iter().skip(offset).take(limit).cloned().collect();
            j(json!({"data": data, "meta": {"has_more": offset + limit < all.len()}}))
        }
        ("POST", "/api/v1/runs") => Ok(Reply::json(
            201,
            &json!({"id": "demo-run-new", "lifecycle": {"status": {"kind": "submitted"}}, "status": "submitted", "created_at": "2026-03-06T12:00:00.000Z"}),
        )),
        ("GET", "/api/v1/runs/{id}") => j(run_json(&find(ctx)?)),
        ("DELETE", "/api/v1/runs/{id}") => {
            find(ctx)?;
            Ok(Reply::empty(204))
        }
        ("POST", "/api/v1/runs/{id}/start") => {
            j(with_status(&find(ctx)?, json!({"kind": "runnable"}), None))
        }
        ("POST", "/api/v1/runs/{id}/cancel") => j(with_status(
            &find(ctx)?,
            json!({"kind": "failed", "reason": "cancelled"}),
            None,
        )),
        ("POST", "/api/v1/runs/{id}/pause") => j(with_status(
            &find(ctx)?,
            json!({"kind": "paused", "prior_block": null}),
            None,
        )),
        ("POST", "/api/v1/runs/{id}/unpause") => {
            j(with_status(&find(ctx)?, json!({"kind": "running"}), None))
        }
        ("POST", "/api/v1/runs/{id}/archive") => {
            let mut v = run_json(&find(ctx)?);
            v["lifecycle"]["archived"] = json!(true);
            j(v)
        }
        ("POST", "/api/v1/runs/{id}/unarchive") => j(run_json(&find(ctx)?)),
        ("POST", "/api/v1/runs/{id}/retry") => {
            let f = find(ctx)?;
            let mut v = with_status(&f, json!({"kind": "runnable"}), None);
            v["retried_from"] = json!(f.id);
            Ok(Reply::json(201, &v))
        }
        ("POST", "/api/v1/runs/{id}/rewind") => {
            let f = find(ctx)?;
            let mut v = with_status(&f, json!({"kind": "runnable"}), None);
            v["id"] = json!("01JNDEM00000000000000RWND1");
            Ok(Reply::json(201, &v))
        }
        ("GET", "/api/v1/runs/{id}/sessions") => {
            find(ctx)?;
            j(json!({"data": [demo_session()], "meta": {"total": 1, "has_more": false}}))
        }
        ("POST", "/api/v1/runs/{id}/sessions") => {
            find(ctx)?;
            Ok(Reply::json(201, &demo_session()))
        }
        ("GET", "/api/v1/sessions/{id}") => {
            let mut s = demo_session();
            s["messages"] = json!([
                {"kind": "user", "content": "Why did verify fail?", "timestamp": "2026-03-01T09:05:00.000Z"},
                {"kind": "assistant", "content": "The test step exited 1: `cargo test` failed in parser::tests (seq 41).", "timestamp": "2026-03-01T09:05:04.000Z"}
            ]);
            s["last_seq"] = json!(44);
            j(s)
        }
        ("GET", "/api/v1/sessions/{id}/events") => {
            j(json!({"data": [], "meta": {"has_more": false}}))
        }
        ("GET", "/api/v1/sessions/{id}/attach")
        | ("POST", "/api/v1/sessions/{id}/turns")
        | ("POST", "/api/v1/sessions/{id}/turns/{turn}/interrupt") => Err(ApiError::conflict(
            "Ask does not run in demo mode: it needs a real run and a configured provider.",
        )),
        ("POST", "/api/v1/runs/{id}/approve") => {
            j(with_status(&find(ctx)?, json!({"kind": "runnable"}), None))
        }
        ("POST", "/api/v1/runs/{id}/deny") => j(with_status(
            &find(ctx)?,
            json!({"kind": "failed", "reason": "approval_denied"}),
            None,
        )),
        ("GET", "/api/v1/runs/{id}/questions") => {
            find(ctx)?;
            j(questions())
        }
        ("POST", "/api/v1/runs/{id}/questions/{qid}/answer") => Ok(Reply::empty(204)),
        ("GET", "/api/v1/runs/{id}/events") => {
            let f = find(ctx)?;
            j(json!({"data": events(&f), "meta": {"has_more": false}}))
        }
        ("GET", "/api/v1/runs/{id}/attach") => Ok(sse(events(&find(ctx)?), true)),
        ("GET", "/api/v1/attach") => Ok(sse(
            fixtures().iter().take(2).flat_map(events).collect(),
            false,
        )),
        ("GET", "/api/v1/runs/{id}/checkpoint") => {
            find(ctx)?;
            j(Value::Null)
        }
        ("GET", "/api/v1/runs/{id}/stages") => {
            find(ctx)?;
            j(json!({"data": []}))
        }
        ("GET", "/api/v1/runs/{id}/stages/{node}") => {
            find(ctx)?;
            Err(ApiError::not_found("Demo runs have no stage records."))
        }
        ("GET", "/api/v1/runs/{id}/graph/source") => {
            find(ctx)?;
            Ok(Reply::Full(rouille::Response {
                status_code: 200,
                headers: vec![(
                    "Content-Type".into(),
                    "text/vnd.graphviz; charset=utf-8".into(),
                )],
                data: rouille::ResponseBody::from_string(DEMO_GRAPH),
                upgrade: None,
            }))
        }
        ("GET", "/api/v1/runs/{id}/graph") => {
            find(ctx)?;
            let direction = ctx.inc.query("direction");
            super::runs::graph_reply(DEMO_GRAPH, direction.as_deref())
        }
        ("POST", "/api/v1/workflow-versions") => {
            let pkg: super::versions::Package = super::http::parse_json(ctx.inc.body()?)?;
            let mut pkg = pkg;
            pkg.dependencies.sort();
            pkg.dependencies.dedup();
            let id = super::versions::package_id(&pkg);
            Ok(Reply::json(
                201,
                &json!({"id": id, "entrypoint": pkg.entrypoint, "files": pkg.files, "dependencies": pkg.dependencies, "created_at": "2026-03-06T12:00:00.000Z", "demo": true}),
            ))
        }
        ("GET", "/api/v1/workflow-versions/{id}") => Err(ApiError::not_found(format!(
            "No demo workflow version with id `{}`.",
            ctx.param("id")
        ))),
        ("GET", "/api/v1/runs/{id}/usage") => {
            find(ctx)?;
            let usage = json!({"tokens": {"input": 61_200, "output": 18_400, "reasoning": 9_020, "cache_read": 3_000, "cache_write": 1_000},
                               "cost": {"usd_micros": 2_260_000, "source": "catalog"}});
            let timing = json!({"wall_time_ms": 754_000, "inference_time_ms": 540_000, "tool_time_ms": 70_000, "active_time_ms": 610_000});
            let model = json!({"provider": "anthropic", "model_id": "claude-sonnet-4-6", "speed": "standard"});
            j(json!({
                "stages": [{"stage": {"id": "implement", "name": "Implement"}, "model": model, "usage": usage, "timing": timing,
                            "started_at": "2026-03-06T09:12:00.000Z", "state": "succeeded"}],
                "totals": {"timing": timing, "usage": usage},
                "by_model": [{"model": model, "stages": 1, "usage": usage}]
            }))
        }
        ("GET", "/api/v1/runs/{id}/files") | ("GET", "/runs/{id}/files") => {
            find(ctx)?;
            j(json!({"data": [
                {"old_file": {"name": "src/limits.rs", "contents": ""}, "new_file": {"name": "src/limits.rs", "contents": "pub const MAX: u32 = 100;\n"}},
                {"old_file": {"name": "README.md", "contents": "# api\n"}, "new_file": {"name": "README.md", "contents": "# api\n\nRate limited.\n"}}
            ], "meta": {"has_more": false}}))
        }
        ("GET", "/api/v1/runs/{id}/artifacts") => {
            find(ctx)?;
            j(json!({"data": [], "meta": {"has_more": false, "total": 0}}))
        }
        ("GET", "/api/v1/runs/{id}/artifacts/{artifact_id}") => {
            let run = find(ctx)?;
            Err(ApiError::not_found(format!(
                "Demo run {} kept no artifacts.",
                run.id
            )))
        }
        ("POST", "/api/v1/runs/{id}/steer") | ("POST", "/runs/{id}/steer") => {
            find(ctx)?;
            super::runs::steer::parse_body(ctx.inc.body()?)?;
            Ok(Reply::json(202, &json!({"accepted": true})))
        }
        ("POST", "/api/v1/runs/{id}/preview") => {
            let f = find(ctx)?;
            Ok(Reply::json(
                201,
                &json!({"url": format!("https://preview.example.com/{}", f.id), "token": "demo-preview-token"}),
            ))
        }
        ("GET", "/api/v1/sandboxes") => j(json!({"data": [
            {"id": "sbx-000001", "provider": "container", "state": "running", "run_id": "01JNDEM0000000000000000001"},
            {"id": "sbx-000002", "provider": "container", "state": "running", "run_id": "01JNDEM0000000000000000002"}
        ], "meta": {"has_more": false, "failures": []}})),
        ("GET", "/api/v1/sandboxes/{id}") => match ctx.param("id") {
            id @ ("sbx-000001" | "sbx-000002") => {
                j(json!({"id": id, "provider": "container", "state": "running"}))
            }
            id => Err(ApiError::not_found(format!("No demo sandbox {id}."))),
        },
        ("GET", "/api/v1/models") => {
            // The catalog is static; the demo pretends only Anthropic has a key.
            let creds = crate::llm::StaticCredentials::new().with("ANTHROPIC_API_KEY", "demo");
            j(super::models::page_of_models(ctx, &creds)?)
        }
        ("POST", "/api/v1/completions") => Err(ApiError::bad_request(
            "Completions do not run in demo mode: they need a configured provider.",
        )
        .with_code("provider_not_configured")),
        ("POST", "/api/v1/providers/test") => j(json!({"data": [
            {"provider": "anthropic", "model_id": "claude-haiku-4-5", "status": "ok", "error_message": null, "latency_ms": 412},
            {"provider": "openai", "model_id": "gpt-5.4-mini", "status": "skip", "error_message": null, "latency_ms": 0}
        ]})),
        ("GET", "/api/v1/automations") => {
            j(json!({"data": [demo_automation()], "meta": {"total": 1}}))
        }
        ("POST", "/api/v1/automations") => Ok(Reply::json(201, &demo_automation())),
        ("GET", "/api/v1/automations/{id}") | ("PUT", "/api/v1/automations/{id}") => {
            match ctx.param("id") {
                "nightly-deps" => j(demo_automation()),
                id => Err(ApiError::not_found(format!("No demo automation {id}."))),
            }
        }
        ("DELETE", "/api/v1/automations/{id}") => Ok(Reply::empty(204)),
        ("POST", "/api/v1/automations/{id}/runs") => j(run_json(&fixtures()[0])),
        ("GET", "/api/v1/automations/{id}/runs") => {
            j(json!({"data": [run_json(&fixtures()[0])], "meta": {"has_more": false}}))
        }
        ("GET", "/api/v1/automations/{id}/fires") => j(json!({"data": [{
            "id": "01JNDEM0000000000000000F01", "automation_id": "nightly-deps", "trigger_id": "tuesday",
            "trigger_kind": "schedule", "due_at": "2026-03-03T01:00:00.000Z", "fired_at": "2026-03-03T01:00:00.004Z",
            "outcome": "created", "policy": null, "error": null, "detail": null,
            "run_id": "01JNDEM0000000000000000001", "delivery_id": null}],
            "meta": {"has_more": false, "schedules": [{"trigger_id": "tuesday",
                "next_due_at": "2026-03-10T01:00:00.000Z", "last_due_at": "2026-03-03T01:00:00.000Z",
                "last_fired_at": "2026-03-03T01:00:00.004Z"}]}})),
        ("GET", "/api/v1/mcp-servers") => {
            j(json!({"data": [demo_mcp_server()], "meta": {"total": 1}}))
        }
        ("POST", "/api/v1/mcp-servers") => Ok(Reply::json(201, &demo_mcp_server())),
        ("GET", "/api/v1/mcp-servers/{id}") | ("PUT", "/api/v1/mcp-servers/{id}") => {
            match ctx.param("id") {
                "time" => j(demo_mcp_server()),
                id => Err(ApiError::not_found(format!("No demo MCP server {id}."))),
            }
        }
        ("DELETE", "/api/v1/mcp-servers/{id}") => Ok(Reply::empty(204)),
        ("POST", "/api/v1/mcp-servers/{id}/test") => j(json!({
            "ok": true, "server": {"name": "mcp-time", "version": "2026.10.19"},
            "protocol_version": "2025-06-18", "tools": ["get_current_time", "convert_time"],
            "timings_ms": {"start": 2, "initialize": 310, "list_tools": 4, "total": 316}
        })),
        ("GET", "/api/v1/system/info") => j(json!({
            "version": env!("CARGO_PKG_VERSION"), "uptime_secs": 0, "state_dir": "/demo",
            "database": {"path": "/demo/svc.db", "bytes": 0, "wal_bytes": 0, "schema_version": crate::store::SCHEMA_VERSION},
            "runs": {"total": fixtures().len(), "active": 0, "queued": 0},
            "sandbox_providers": ["local"], "features": [],
        })),
        ("GET", "/api/v1/system/df") => j(json!({
            "runs": fixtures().len(), "events": {"count": 0, "bytes": 0}, "blobs": {"count": 0, "bytes": 0},
            "database": {"bytes": 0, "wal_bytes": 0}, "workspaces": {"bytes": 0}, "sandboxes": {"bytes": 0},
            "backups": {"bytes": 0}, "total_bytes": 0, "largest_runs": [],
        })),
        ("GET", "/api/v1/usage") => {
            let zero = json!({"records": 0, "input_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0,
                              "cache_read_tokens": 0, "cache_write_tokens": 0, "usd_micros": 0, "priced_records": 0});
            j(
                json!({"since": "2026-02-04T00:00:00.000Z", "until": "2026-03-06T00:00:00.000Z", "totals": zero,
                     "by_model": [], "by_workflow": [], "by_automation": [], "by_day": [], "daily_cap": null}),
            )
        }
        ("GET", "/api/v1/workflows") => j(json!({"data": [{
            "name": "implement", "latest_version_id": DEMO_VERSION,
            "latest_version_created_at": "2026-03-01T09:00:00.000Z", "version_count": 1,
            "last_run": {"id": "01JNDEM0000000000000000001", "status": "running",
                         "created_at": "2026-03-05T09:12:00.000Z", "updated_at": "2026-03-05T09:12:00.000Z"},
            "automations": []
        }], "meta": {"has_more": false, "total": 1}})),
        ("GET", "/api/v1/workflows/{name}") => match ctx.param("name") {
            "implement" => j(json!({
                "name": "implement", "latest_version_id": DEMO_VERSION, "version_count": 1,
                "versions": [{"id": DEMO_VERSION, "created_at": "2026-03-01T09:00:00.000Z"}],
                "version": {"id": DEMO_VERSION, "created_at": "2026-03-01T09:00:00.000Z",
                            "entrypoint": "implement.dot", "files": ["implement.dot"], "dependencies": [],
                            "source": "digraph implement { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }",
                            "diagnostics": []},
                "last_run": null, "automations": []
            })),
            name => Err(ApiError::not_found(format!("No demo workflow {name}."))),
        },
        ("GET", "/api/v1/workflows/{name}/runs") => match ctx.param("name") {
            "implement" => j(json!({"data": [], "meta": {"has_more": false}})),
            name => Err(ApiError::not_found(format!("No demo workflow {name}."))),
        },
        ("GET", "/api/v1/system/integrations") => j(json!({"data": [
            {"provider": "codehost", "enabled": true, "configured": true, "status": "configured",
             "missing_credentials": [], "last_error": null,
             "metadata": {"api_url": "https://api.github.com", "web_url": "https://github.com", "strategy": "app",
                          "app_id": 1234, "webhook_secret_set": true, "webhook_url": null}},
            {"provider": "chat", "enabled": false, "configured": false, "status": "disabled",
             "missing_credentials": [], "last_error": null, "metadata": {}}
        ]})),
        ("GET", "/api/v1/repos/codehost/{owner}/{name}") => j(json!({
            "owner": ctx.param("owner"), "name": ctx.param("name"), "accessible": true,
            "default_branch": "main", "private": true,
            "permissions": {"pull": true, "push": true, "admin": false}
        })),
        ("POST", "/api/v1/runs/{id}/pull_request") => {
            let f = find(ctx)?;
            Ok(Reply::json(202, &demo_creation(&f)))
        }
        ("GET", "/api/v1/runs/{id}/pull_request/creation") => j(demo_creation(&find(ctx)?)),
        ("GET", "/api/v1/runs/{id}/pull_request") => demo_pull_request(&find(ctx)?),
        ("PUT", "/api/v1/runs/{id}/pull_request")
        | ("DELETE", "/api/v1/runs/{id}/pull_request") => {
            let f = find(ctx)?;
            j(json!({"owner": "acme", "repo": f.repo, "number": 128,
                     "html_url": format!("https://github.com/acme/{}/pull/128", f.repo)}))
        }
        ("POST", "/api/v1/runs/{id}/pull_request/merge") => {
            let f = find(ctx)?;
            j(
                json!({"number": 128, "html_url": format!("https://github.com/acme/{}/pull/128", f.repo), "method": "merge"}),
            )
        }
        ("POST", "/api/v1/runs/{id}/pull_request/close") => {
            let f = find(ctx)?;
            j(
                json!({"number": 128, "html_url": format!("https://github.com/acme/{}/pull/128", f.repo)}),
            )
        }
        ("GET", "/api/v1/webhooks/codehost/deliveries") => j(json!({"data": [
            {"delivery_id": "72d3162e-cc78-11e3-81ab-4c9367dc0958", "event": "check_run", "action": "completed",
             "repository": "acme/api-server", "outcome": "applied", "detail": null,
             "received_at": "2026-03-06T12:00:00.000Z"}
        ], "meta": {"has_more": false}})),
        ("GET", "/api/v1/environments") => {
            j(json!({"data": [demo_environment()], "meta": {"total": 1, "run_default": null}}))
        }
        ("POST", "/api/v1/environments") => Ok(Reply::json(201, &demo_environment())),
        ("GET", "/api/v1/environments/{id}") | ("PUT", "/api/v1/environments/{id}") => {
            match ctx.param("id") {
                "default" => j(demo_environment()),
                id => Err(ApiError::not_found(format!("No demo environment {id}."))),
            }
        }
        ("DELETE", "/api/v1/environments/{id}") => Ok(Reply::empty(204)),
        ("GET", "/api/v1/environments/{id}/preflight") => j(json!({
            "id": "default", "provider": "container", "limits": "cgroup-v2",
            "providers": [
                {"provider": "local", "ok": true, "refused": []},
                {"provider": "container", "ok": true, "refused": []},
                {"provider": "hosted", "ok": false, "refused": [{"field": "provider",
                    "reason": "the `hosted` provider is not configured on this server; use `container` (bubblewrap on this host) or `local`"}]}
            ]
        })),
        _ => Err(ApiError::not_implemented()),
    }
}

fn demo_automation() -> Value {
    json!({
        "id": "nightly-deps", "revision": "0".repeat(64), "name": "Dependency update",
        "description": "Every Tuesday at 02:00", "target": {"workflow_version_id": "0".repeat(64)},
        "triggers": [{"id": "manual", "kind": "api", "enabled": true},
                     {"id": "tuesday", "kind": "schedule", "enabled": true, "expression": "0 2 * * 2", "timezone": "Europe/Berlin"}],
        "inputs": {}, "goal": null, "title": null, "labels": {}, "sandbox": null,
        "policies": {"misfire": "fire_once", "overlap": "allow"},
        "created_at": "2026-03-01T09:00:00.000Z", "updated_at": "2026-03-01T09:00:00.000Z"
    })
}

fn demo_session() -> Value {
    json!({
        "id": "01JNDEM0000000000000000S01", "run_id": "01JNDEM0000000000000000001",
        "title": "Why did verify fail?", "status": "idle", "model": "claude-sonnet-4-6",
        "provider": "anthropic", "active_turn": null,
        "created_at": "2026-03-01T09:05:00.000Z", "updated_at": "2026-03-01T09:05:04.000Z"
    })
}

fn demo_environment() -> Value {
    let mut e = crate::environments::seeded_default();
    e["id"] = json!("default");
    e["revision"] = json!("0".repeat(64));
    e["created_at"] = json!("2026-03-01T09:00:00.000Z");
    e["updated_at"] = json!("2026-03-01T09:00:00.000Z");
    e
}

fn demo_mcp_server() -> Value {
    json!({
        "id": "time", "revision": "0".repeat(64), "display_name": "Time",
        "description": "Current time and time-zone conversion",
        "transport": {"type": "stdio", "command": ["mcp-server-time"], "env_keys": []},
        "startup_timeout_secs": 10, "tool_timeout_secs": 60, "required": false,
        "created_at": "2026-03-01T09:00:00.000Z", "updated_at": "2026-03-01T09:00:00.000Z"
    })
}

#[cfg(test)]
mod tests {
    use crate::server::router::Access;

    /// Every authenticated route has a fixture answer (none falls through to 501).
    #[test]
    fn every_user_route_is_covered() {
        let src = include_str!("demo.rs");
        for r in crate::server::routes::routes() {
            if r.access == Access::User {
                let needle = format!("(\"{}\", \"{}\")", r.method, r.pattern);
                assert!(src.contains(&needle), "no demo answer for {needle}");
            }
        }
    }
}
