//! Ask (opgroups 4): `Run.ask_svc` readiness as a run's sandbox goes from planned to ready and
//! as a provider key comes and goes; turns against the scripted provider (read-only scoped
//! tools, streaming, interrupt, restart), a run deleted mid-turn, and a run whose sandbox
//! retention removed.

use crate::support::server::*;
use serde_json::{json, Value};
use svc::internal::test_tools::{require, Tool};

const HELLO_FLOW: &str =
    "digraph hello { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }";

fn ask_svc(s: &Server, id: &str) -> Value {
    run_json(s, id)["ask_svc"].clone()
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn ask_readiness_follows_the_sandbox_and_the_provider_keys() {
    require(Tool::Git);
    let s = Server::with(Opts {
        settings: Some(&settings_with(&[])),
        ..Opts::default()
    });
    let id = create_run(&s, &run_body(HELLO_FLOW));
    // Created, not started: the sandbox is only planned (the rule before the provider's).
    assert_eq!(
        ask_svc(&s, &id),
        json!({"available": false, "unavailable_reason": "sandbox_not_ready", "default_model": null})
    );
    start_run(&s, &id);
    assert_eq!(wait_kind(&s, &id, &["succeeded", "failed"]), "succeeded");
    // The finished run keeps its ready sandbox; no provider key yet.
    assert_eq!(run_json(&s, &id)["sandbox"]["kind"], "ready");
    assert_eq!(
        ask_svc(&s, &id),
        json!({"available": false, "unavailable_reason": "llm_unconfigured", "default_model": null})
    );
    // A key stored while the server runs counts on the next response.
    store_key(&s, "ANTHROPIC_API_KEY", "k-1");
    let a = ask_svc(&s, &id);
    assert_eq!(a["available"], true, "{a}");
    assert_eq!(a["unavailable_reason"], Value::Null);
    assert_eq!(
        a["default_model"].as_str(),
        svc::internal::llm::Provider::Anthropic.default_model()
    );
    // The create response and the start response carry it too (every Run response).
    let created = create_run_json(&s, &run_body(HELLO_FLOW));
    assert_eq!(
        created["ask_svc"]["unavailable_reason"],
        "sandbox_not_ready"
    );
}

use crate::support;
use crate::support::llm::{reply, text, tool_results, tools, user_texts, ScriptedServer};
use svc::internal::llm::Provider;

const NOTES_FLOW: &str = r#"digraph notes {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [shape=parallelogram, script="echo plan-42 > notes.txt"]
  start -> work -> exit
}"#;

/// One SSE frame of a turn or attach stream: its id, event name and data.
#[derive(Debug)]
struct Frame {
    id: Option<u64>,
    event: String,
    data: Value,
}

fn frames(body: &str) -> Vec<Frame> {
    body.split("\n\n")
        .filter_map(|block| {
            let (mut id, mut event, mut data) = (None, String::new(), None);
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    id = v.trim().parse().ok();
                } else if let Some(v) = line.strip_prefix("event: ") {
                    event = v.to_string();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(v).ok();
                }
            }
            Some(Frame {
                id,
                event,
                data: data?,
            })
        })
        .collect()
}

/// A finished run of [`NOTES_FLOW`] on a server whose Anthropic endpoint is `llm`.
fn finished_run(llm: &ScriptedServer) -> (Server, String) {
    require(Tool::Git);
    let s = served_anthropic(&llm.base, "");
    let id = run_to_end(&s, &run_body(NOTES_FLOW));
    assert_eq!(status_kind(&s, &id), "succeeded");
    (s, id)
}

fn new_session(s: &Server, run: &str) -> String {
    let r = s.post(
        &format!("/api/v1/runs/{run}/sessions"),
        r#"{"title": "why"}"#,
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    assert_eq!(v["status"], "idle");
    assert_eq!(v["run_id"], run);
    v["id"].as_str().unwrap_or_default().to_string()
}

fn ask(s: &Server, session: &str, input: &str) -> (Resp, Vec<Frame>) {
    let r = s.post(
        &format!("/api/v1/sessions/{session}/turns"),
        &json!({ "input": input }).to_string(),
    );
    let f = frames(&r.text());
    (r, f)
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_turn_reads_a_file_and_an_event_and_writes_are_refused() {
    require(Tool::Git);
    let other_run = "01AAAAAAAAAAAAAAAAAAAAAAAA";
    let llm = ScriptedServer::turns(
        Provider::Anthropic,
        vec![
            tools(&[
                ("c1", "read_file", json!({"file_path": "notes.txt"})),
                ("c2", "run_events", json!({"kind": "command."})),
            ]),
            tools(&[
                (
                    "c3",
                    "write_file",
                    json!({"file_path": "evil.txt", "content": "x"}),
                ),
                ("c4", "run_events", json!({"run_id": other_run})),
            ]),
            text("The stage wrote plan-42 into notes.txt."),
        ],
        support::llm::SMALL_USAGE,
    );
    let (s, run) = finished_run(&llm);
    assert_eq!(run_json(&s, &run)["billing"], Value::Null);
    let sid = new_session(&s, &run);

    let (r, f) = ask(&s, &sid, "What did the work stage write?");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.header("x-svc-turn-id").is_some());
    let kinds: Vec<&str> = f.iter().map(|f| f.event.as_str()).collect();
    assert_eq!(
        kinds.first(),
        Some(&"run.session.turn.started"),
        "{kinds:?}"
    );
    assert_eq!(kinds.get(1), Some(&"run.session.user_message"));
    assert_eq!(
        kinds.last(),
        Some(&"run.session.turn.succeeded"),
        "{kinds:?}"
    );
    // Frames are committed run events, in order.
    let ids: Vec<u64> = f.iter().map(|f| f.id.unwrap_or(0)).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let completed: Vec<&Frame> = f
        .iter()
        .filter(|f| f.event == "run.session.tool_call.completed")
        .collect();
    assert_eq!(completed.len(), 4, "{kinds:?}");
    let out = |i: usize| {
        completed[i].data["properties"]["output"]
            .as_str()
            .unwrap_or("")
    };
    assert!(out(0).contains("plan-42"), "{}", out(0));
    assert!(out(1).contains("command."), "{}", out(1));
    assert_eq!(completed[2].data["properties"]["is_error"], true);
    assert_eq!(completed[3].data["properties"]["is_error"], true);
    // The answer streamed: deltas that make up the final text, before the message.
    let deltas: String = f
        .iter()
        .filter(|f| f.event == "run.session.assistant_delta")
        .map(|f| f.data["properties"]["delta"].as_str().unwrap_or(""))
        .collect();
    assert!(
        deltas.ends_with("The stage wrote plan-42 into notes.txt."),
        "{deltas}"
    );

    // The refusals reached the model, and nothing was written.
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 3);
    let results = tool_results(Provider::Anthropic, &reqs[2].body);
    let refused: Vec<&(String, String, bool)> = results.iter().filter(|r| r.2).collect();
    assert_eq!(refused.len(), 2, "{results:?}");
    assert!(
        refused.iter().any(|r| r.1.contains("read-only")),
        "{results:?}"
    );
    assert!(
        refused.iter().any(|r| r.1.contains("out of its scope")),
        "{results:?}"
    );
    assert!(!s
        .path()
        .join("workspaces")
        .join(&run)
        .join("evil.txt")
        .exists());
    // The question carried a run snapshot; only read-only tools were offered.
    let first = user_texts(Provider::Anthropic, &reqs[0].body).join("\n");
    assert!(
        first.contains("Run snapshot") && first.contains(&run),
        "{first}"
    );
    let offered: Vec<&str> = reqs[0].body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        offered,
        [
            "read_file",
            "grep",
            "glob",
            "list_dir",
            "run_events",
            "run_stages",
            "run_diff"
        ]
    );

    // The session reads back; its events are in the run's log; usage counts on the run.
    let d = s.get(&format!("/api/v1/sessions/{sid}")).json();
    assert_eq!(d["status"], "idle", "{d}");
    let msgs = d["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(msgs.first().map(|m| m["kind"].clone()), Some(json!("user")));
    assert!(msgs
        .iter()
        .any(|m| m["kind"] == "assistant"
            && m["content"] == "The stage wrote plan-42 into notes.txt."));
    let evs = s
        .get(&format!("/api/v1/sessions/{sid}/events?limit=1000"))
        .json();
    let evs = evs["data"].as_array().cloned().unwrap_or_default();
    assert_eq!(evs.len(), f.len() + 1, "created + the turn's events");
    assert!(evs
        .iter()
        .all(|e| e["properties"]["session_id"] == sid.as_str()));
    assert!(run_events(&s, &run)
        .iter()
        .any(|e| e["event"] == "run.session.turn.succeeded"));
    assert!(run_json(&s, &run)["billing"].is_object());
    let list = s.get(&format!("/api/v1/runs/{run}/sessions")).json();
    assert_eq!(list["data"][0]["id"], sid.as_str());
    assert_eq!(list["meta"]["total"], 1);
    // Attach replays the whole session (and would follow it live).
    let mut a = s.sse(&format!("/api/v1/sessions/{sid}/attach"), &[]);
    assert_eq!(a.status, 200);
    let mut seen = 0;
    while let Some(fr) = a.next() {
        seen += 1;
        if fr.data["event"] == "run.session.turn.succeeded" {
            break;
        }
    }
    assert_eq!(seen, f.len() + 1);
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_second_turn_is_409_while_one_runs_and_interrupt_ends_it() {
    require(Tool::Git);
    // The model answers slowly: the turn is certainly running while the test acts.
    let llm = ScriptedServer::start_with(|n, r| {
        if n == 0 {
            std::thread::sleep(std::time::Duration::from_millis(1500));
        }
        reply(
            Provider::Anthropic,
            &text("late answer"),
            support::llm::SMALL_USAGE,
            support::llm::streamed(r),
        )
    });
    let (s, run) = finished_run(&llm);
    let sid = new_session(&s, &run);
    std::thread::scope(|scope| {
        let first = scope.spawn(|| ask(&s, &sid, "first question"));
        let turn = wait_for(20, "the turn to be active", || {
            let d = s.get(&format!("/api/v1/sessions/{sid}")).json();
            d["active_turn"]["id"].as_str().map(str::to_string)
        });
        let (busy, _) = ask(&s, &sid, "second question");
        let b = assert_error(&busy, 409);
        assert_eq!(b["errors"][0]["code"], "session_active_turn");
        assert_eq!(busy.header("x-svc-active-turn-id"), Some(turn.as_str()));

        let r = s.post(
            &format!("/api/v1/sessions/{sid}/turns/{turn}/interrupt"),
            "",
        );
        assert_eq!(r.status, 202, "{}", r.text());
        assert_eq!(r.json()["event"], "run.session.turn.interrupted");
        let (_, f) = first.join().expect("first turn");
        assert_eq!(
            f.last().map(|f| f.event.as_str()),
            Some("run.session.turn.interrupted")
        );
        // Not running any more: interrupting again is 409; the next turn is accepted.
        let again = s.post(
            &format!("/api/v1/sessions/{sid}/turns/{turn}/interrupt"),
            "",
        );
        assert_error(&again, 409);
        let (r, f) = ask(&s, &sid, "third question");
        assert_eq!(r.status, 200);
        assert_eq!(
            f.last().map(|f| f.event.as_str()),
            Some("run.session.turn.succeeded")
        );
    });
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_session_survives_a_restart_and_bad_requests_are_refused() {
    require(Tool::Git);
    let llm = ScriptedServer::turns(
        Provider::Anthropic,
        vec![text("first answer"), text("second answer")],
        support::llm::SMALL_USAGE,
    );
    let (s, run) = finished_run(&llm);
    let sid = new_session(&s, &run);

    // Bad input: nothing recorded, clear errors.
    let r = s.post(
        &format!("/api/v1/sessions/{sid}/turns"),
        r#"{"input": "  "}"#,
    );
    assert_error(&r, 400);
    let big = json!({ "input": "x".repeat(1024 * 1024) }).to_string();
    let r = s.post(&format!("/api/v1/sessions/{sid}/turns"), &big);
    assert!(r.status == 400 || r.status == 413, "{}", r.status);
    let r = s.post(&format!("/api/v1/sessions/{sid}/turns"), "{nope");
    assert_error(&r, 400);
    let r = s.post(
        "/api/v1/sessions/01AAAAAAAAAAAAAAAAAAAAAAAA/turns",
        r#"{"input": "q"}"#,
    );
    assert_error(&r, 404);
    let r = s.post(
        &format!("/api/v1/runs/{run}/sessions"),
        r#"{"model": "gpt-5.4"}"#,
    );
    let b = assert_error(&r, 400);
    assert!(
        b["errors"][0]["detail"]
            .as_str()
            .unwrap_or("")
            .contains("gpt-5.4"),
        "{b}"
    );
    // A run whose sandbox is only planned: Ask is unavailable, with the reason as code.
    let planned = create_run(&s, &run_body(NOTES_FLOW));
    let r = s.post(&format!("/api/v1/runs/{planned}/sessions"), "{}");
    let b = assert_error(&r, 409);
    assert_eq!(b["errors"][0]["code"], "sandbox_not_ready");

    let (r, _) = ask(&s, &sid, "first question");
    assert_eq!(r.status, 200);
    let before = s.get(&format!("/api/v1/sessions/{sid}")).json();

    let dir = s.kill();
    let s = Server::with(Opts {
        dir: Some(dir),
        ..Opts::default()
    });
    let after = s.get(&format!("/api/v1/sessions/{sid}")).json();
    assert_eq!(after["messages"], before["messages"]);
    assert_eq!(after["last_seq"], before["last_seq"]);
    let (r, f) = ask(&s, &sid, "second question");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        f.last().map(|f| f.event.as_str()),
        Some("run.session.turn.succeeded")
    );
    // The second turn's model call carried the first question and answer.
    let reqs = llm.requests();
    let texts = user_texts(Provider::Anthropic, &reqs[1].body).join("\n");
    assert!(texts.contains("first question"), "{texts}");
    let d = s.get(&format!("/api/v1/sessions/{sid}")).json();
    assert!(d["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|m| m["content"] == "second answer"));
}

/// A run deleted while one of its Ask turns waits on the model: the turn's stream ends with
/// a `run.session.turn.failed` frame saying the run was deleted, the turn's late model
/// answer finds no log to write to and is dropped (no panic, nothing recorded), the session
/// is gone with its run, and the server keeps serving (a new run and its Ask work).
#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_run_deleted_mid_turn_ends_the_turn_with_an_error() {
    require(Tool::Git);
    let llm = ScriptedServer::start_with(|n, r| {
        if n == 0 {
            std::thread::sleep(std::time::Duration::from_millis(1500));
        }
        reply(
            Provider::Anthropic,
            &text("an answer nobody can record"),
            support::llm::SMALL_USAGE,
            support::llm::streamed(r),
        )
    });
    let (s, run) = finished_run(&llm);
    let sid = new_session(&s, &run);
    let (r, f) = std::thread::scope(|scope| {
        let turn = scope.spawn(|| ask(&s, &sid, "why?"));
        wait_for(20, "the turn to be active", || {
            let d = s.get(&format!("/api/v1/sessions/{sid}")).json();
            d["active_turn"]["id"].as_str().map(str::to_string)
        });
        let del = s.call("DELETE", &format!("/api/v1/runs/{run}"), None);
        assert_eq!(del.status, 204, "{}", del.text());
        turn.join().expect("the turn's request")
    });
    assert_eq!(r.status, 200);
    let last = f.last().expect("frames");
    assert_eq!(last.event, "run.session.turn.failed", "{f:?}");
    let err = last.data["properties"]["error"].as_str().unwrap_or("");
    assert!(err.contains("deleted"), "{err}");
    assert_eq!(last.data["properties"]["session_id"], sid.as_str());

    // The model's late answer arrives after the run is gone: wait for it, then look.
    wait_for(20, "the model call to be answered", || {
        (llm.count() >= 1).then_some(())
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_error(&s.get(&format!("/api/v1/runs/{run}")), 404);
    assert_error(&s.get(&format!("/api/v1/sessions/{sid}")), 404);
    let again = s.post(
        &format!("/api/v1/sessions/{sid}/turns"),
        r#"{"input": "still there?"}"#,
    );
    assert_error(&again, 404);
    assert!(
        !s.stderr().contains("panicked"),
        "the server panicked: {}",
        s.stderr()
    );
    let next = run_to_end(&s, &run_body(NOTES_FLOW));
    let sid = new_session(&s, &next);
    let (r, f) = ask(&s, &sid, "and now?");
    assert_eq!(r.status, 200);
    assert_eq!(
        f.last().map(|f| f.event.as_str()),
        Some("run.session.turn.succeeded")
    );
}

/// Ask on a run whose sandbox retention removed, end to end: Ask stays available (it
/// answers from the record), the model is told the workspace is gone, a file read is
/// refused with that reason (which reaches the model) while the stored stages still read,
/// and the turn does not bring the removed workspace back.
#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn ask_on_a_run_whose_sandbox_was_removed_answers_from_the_record() {
    require(Tool::Git);
    let llm = ScriptedServer::turns(
        Provider::Anthropic,
        vec![
            tools(&[
                ("c1", "read_file", json!({"file_path": "notes.txt"})),
                ("c2", "run_stages", json!({})),
            ]),
            text("The workspace is gone; by the record, the work stage succeeded."),
        ],
        support::llm::SMALL_USAGE,
    );
    let s = served_anthropic(&llm.base, "[run.sandbox]\nretention_hours = 0\n");
    let run = run_to_end(&s, &run_body(NOTES_FLOW));
    assert_eq!(status_kind(&s, &run), "succeeded");
    wait_for(30, "retention to remove the sandbox", || {
        run_json(&s, &run)["sandbox"]["removed"]
            .is_object()
            .then_some(())
    });
    let ws = s.path().join("workspaces").join(&run);
    assert!(!ws.exists());
    let a = run_json(&s, &run)["ask_svc"].clone();
    assert_eq!(a["available"], true, "{a}");

    let sid = new_session(&s, &run);
    let (r, f) = ask(&s, &sid, "What did the work stage write?");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        f.last().map(|f| f.event.as_str()),
        Some("run.session.turn.succeeded"),
        "{f:?}"
    );
    let completed: Vec<&Frame> = f
        .iter()
        .filter(|f| f.event == "run.session.tool_call.completed")
        .collect();
    assert_eq!(completed.len(), 2);
    assert_eq!(completed[0].data["properties"]["is_error"], true);
    let refusal = completed[0].data["properties"]["output"]
        .as_str()
        .unwrap_or("");
    assert!(refusal.contains("sandbox was removed"), "{refusal}");
    assert_eq!(completed[1].data["properties"]["is_error"], false);
    let stages = completed[1].data["properties"]["output"]
        .as_str()
        .unwrap_or("");
    assert!(stages.contains("work"), "{stages}");

    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2);
    let system = reqs[0].body["system"].to_string();
    assert!(system.contains("sandbox was removed"), "{system}");
    let results = tool_results(Provider::Anthropic, &reqs[1].body);
    assert!(
        results
            .iter()
            .any(|r| r.2 && r.1.contains("sandbox was removed")),
        "{results:?}"
    );
    // Not restarted to be read.
    assert!(!ws.exists(), "the removed workspace came back");
    let after = run_json(&s, &run);
    assert!(after["sandbox"]["removed"].is_object(), "{after}");
    assert_eq!(after["sandbox"]["instance"], Value::Null);
}

/// A turn's budget, end to end: a model call that reports more tokens than a turn may spend
/// ends the turn there (`stop: token_budget`, no further call); a model that asks for tools
/// forever is stopped after the turn's model-call limit (`stop: turn_limit`). Either way the
/// turn succeeds with what it has, and the next turn starts afresh.
#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_turn_stops_at_its_token_budget_and_at_its_model_call_limit() {
    require(Tool::Git);
    let huge = svc::internal::llm::Usage {
        input: 450_000,
        ..support::llm::SMALL_USAGE
    };
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = std::sync::Arc::clone(&calls);
    // Request 0: a tool call that spends the whole budget. After it: tool calls forever.
    let llm = ScriptedServer::start_with(move |n, r| {
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let usage = if n == 0 {
            huge
        } else {
            support::llm::SMALL_USAGE
        };
        reply(
            Provider::Anthropic,
            &tools(&[(&format!("c{n}"), "run_stages", json!({}))]),
            usage,
            support::llm::streamed(r),
        )
    });
    let (s, run) = finished_run(&llm);
    let sid = new_session(&s, &run);
    let stop_of = |f: &[Frame]| {
        let last = f.last().expect("frames");
        assert_eq!(last.event, "run.session.turn.succeeded", "{f:?}");
        last.data["properties"]["stop"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let (r, f) = ask(&s, &sid, "spend it all");
    assert_eq!(r.status, 200);
    assert_eq!(stop_of(&f), "token_budget");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);

    let (r, f) = ask(&s, &sid, "keep calling tools");
    assert_eq!(r.status, 200);
    assert_eq!(stop_of(&f), "turn_limit");
    let limit = svc::internal::ask::service::MAX_MODEL_CALLS as usize;
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1 + limit);
}
