//! The runs API through the real binary: create → start → SSE (replay and live) → human
//! question → answer → succeeded; FIFO and the concurrency limit; cancel, pause, unpause;
//! restart: interrupted runs resume by themselves (or fail, by setting) and paused ones stay paused; pagination and event paging; deletion.

use crate::support::server::*;
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::time::Duration;
use svc::internal::test_tools::{require, Tool};

const GATE: &str = r#"digraph gate {
  goal="ship the thing"
  start [shape=Mdiamond]
  build [shape=parallelogram, script="echo built"]
  ask [shape=hexagon, label="Ship it?"]
  exit [shape=Msquare]
  start -> build -> ask
  ask -> exit [label="[Y] Yes"]
  ask -> build [label="[N] No"]
}"#;

fn command(script: &str) -> String {
    format!(
        "digraph c {{ start [shape=Mdiamond]; work [shape=parallelogram, script={}]; exit [shape=Msquare]; start -> work -> exit }}",
        serde_json::to_string(script).unwrap()
    )
}

/// `?wait=` holds the list until the run reaches its gate, so a script that starts a run and
/// asks for its question at once gets it (the README's example does exactly that).
#[test]
fn the_question_list_waits_for_the_gate() {
    let s = Server::start();
    let slow = GATE.replace("echo built", "sleep 1; echo built");
    let id = create_run(&s, &run_body(&slow));
    assert_error(
        &s.get(&format!("/api/v1/runs/{id}/questions?wait=soon")),
        400,
    );
    assert_eq!(s.post(&format!("/api/v1/runs/{id}/start"), "").status, 200);
    let qs = s
        .get(&format!("/api/v1/runs/{id}/questions?wait=30s"))
        .json();
    assert_eq!(qs["data"][0]["text"], "Ship it?", "{qs}");
    let qid = qs["data"][0]["id"].as_str().unwrap().to_string();
    let ok = s.post(
        &format!("/api/v1/runs/{id}/questions/{qid}/answer"),
        "{\"selected_option_key\":\"Y\"}",
    );
    assert_eq!(ok.status, 204, "{}", ok.text());
    // Asked but answered: 409, not 404.
    assert_error(
        &s.post(
            &format!("/api/v1/runs/{id}/questions/{qid}/answer"),
            "{\"selected_option_key\":\"Y\"}",
        ),
        409,
    );
    wait_status(&s, &id, "succeeded", 20);
    // A run that has ended answers at once (the client gives up after 30 s; the wait asked
    // for is 60 s).
    let done = s.get(&format!("/api/v1/runs/{id}/questions?wait=60s"));
    assert_eq!(done.status, 200);
    assert_eq!(done.json()["data"], json!([]));
}

fn human_flow(s: &Server) {
    let run = create_run_json(s, &run_body(GATE));
    let id = run["id"].as_str().unwrap().to_string();
    assert_eq!(run["lifecycle"]["status"]["kind"], "submitted");
    assert_eq!(run["title"], "ship the thing");
    assert_eq!(run["workflow"]["node_count"], 4);
    assert_eq!(run["created_by"]["login"], "dev");
    // A question id that is no id: 400 saying what one looks like; an id the run never
    // asked: 404.
    for bad in ["nope", "null"] {
        let b = assert_error(
            &s.post(
                &format!("/api/v1/runs/{id}/questions/{bad}/answer"),
                "{\"value\":\"yes\"}",
            ),
            400,
        );
        let detail = b["errors"][0]["detail"].as_str().unwrap();
        assert!(
            detail.contains(&format!("`{bad}`")) && detail.contains("ULID"),
            "{detail}"
        );
    }
    let early = s.post(
        &format!("/api/v1/runs/{id}/questions/01ARZ3NDEKTSV4RRFFQ69G5FAV/answer"),
        "{\"value\":\"yes\"}",
    );
    assert_error(&early, 404);

    let mut live = s.sse(&format!("/api/v1/runs/{id}/attach"), &[]);
    assert_eq!(live.status, 200);
    let started = s.post(&format!("/api/v1/runs/{id}/start"), "");
    assert_eq!(started.status, 200, "{}", started.text());
    assert_error(&s.post(&format!("/api/v1/runs/{id}/start"), "{}"), 409);

    wait_status(s, id.as_str(), "blocked", 20);
    let qs = s.get(&format!("/api/v1/runs/{id}/questions")).json();
    let q = &qs["data"][0];
    assert_eq!(q["text"], "Ship it?");
    assert_eq!(q["question_type"], "multiple_choice");
    let qid = q["id"].as_str().unwrap().to_string();
    let run = s.get(&format!("/api/v1/runs/{id}")).json();
    assert_eq!(run["current_question"]["text"], "Ship it?");
    let board = s.get("/runs").json();
    let item = board["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(item["status"], "blocked");
    assert_eq!(item["question"]["text"], "Ship it?");

    let bad = s.post(
        &format!("/api/v1/runs/{id}/questions/{qid}/answer"),
        "{\"selected_option_key\":\"Q\"}",
    );
    assert_error(&bad, 400);
    assert_error(
        &s.post(&format!("/api/v1/runs/{id}/questions/{qid}/answer"), "{}"),
        400,
    );
    let ok = s.post(
        &format!("/api/v1/runs/{id}/questions/{qid}/answer"),
        "{\"selected_option_key\":\"y\"}",
    );
    assert_eq!(ok.status, 204, "{}", ok.text());
    let again = s.post(
        &format!("/api/v1/runs/{id}/questions/{qid}/answer"),
        "{\"value\":\"yes\"}",
    );
    assert_error(&again, 409);

    // Live stream: everything after attach, closing after run.completed.
    let frames = live.collect();
    let kinds: Vec<&str> = frames
        .iter()
        .map(|f| f.data["event"].as_str().unwrap())
        .collect();
    assert_eq!(*kinds.last().unwrap(), "run.completed", "{kinds:?}");
    assert!(kinds.contains(&"interview.started") && kinds.contains(&"run.blocked"));
    for f in &frames {
        assert_eq!(f.id, f.data["seq"].as_u64());
    }
    let seqs: Vec<u64> = frames.iter().map(|f| f.id.unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    assert_eq!(seqs[0], 2);
    let st = wait_status(s, id.as_str(), "succeeded", 10);
    assert_eq!(st["reason"], "completed");

    // Replay from the start, and Last-Event-ID resumes after n.
    let all = s
        .sse(&format!("/api/v1/runs/{id}/attach?since_seq=1"), &[])
        .collect();
    assert_eq!(all.len() as u64, *seqs.last().unwrap());
    assert_eq!(all[0].data["event"], "run.created");
    let tail = s
        .sse(
            &format!("/api/v1/runs/{id}/attach"),
            &[("Last-Event-ID", "5")],
        )
        .collect();
    assert_eq!(tail[0].id, Some(6));
    // A browser's EventSource reconnects to the URL it started with plus Last-Event-ID:
    // the header wins, so nothing is replayed twice.
    let resumed = s
        .sse(
            &format!("/api/v1/runs/{id}/attach?since_seq=1"),
            &[("Last-Event-ID", "5")],
        )
        .collect();
    assert_eq!(resumed[0].id, Some(6));
    // Terminal run with nothing left: 410.
    let gone = s.raw(
        "GET",
        &format!("/api/v1/runs/{id}/attach"),
        &[("Authorization", &s.auth())],
        None,
    );
    assert_error(&gone, 410);
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn human_gate_run_over_tcp_and_unix() {
    require(Tool::Git);
    human_flow(&Server::start());
    human_flow(&Server::with(Opts {
        unix: true,
        ..Opts::default()
    }));
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn fifo_and_the_concurrency_limit_hold_under_many_queued_runs() {
    require(Tool::Git);
    let s = Server::with(Opts {
        settings: Some("[server.scheduler]\nmax_concurrent_runs = 2\n"),
        ..Opts::default()
    });
    let dot = command("sleep 0.3");
    let ids: Vec<String> = (0..10).map(|_| create_run(&s, &run_body(&dot))).collect();
    for id in &ids {
        assert_eq!(
            s.post(&format!("/api/v1/runs/{id}/start"), "{}").status,
            200
        );
    }
    let queued = s.get(&format!("/api/v1/runs/{}", ids[9])).json();
    assert!(queued["lifecycle"]["queue_position"].as_u64().is_some());
    let mut peak = 0;
    wait_for(60, "all runs to finish", || {
        let board = s.get("/runs?page[limit]=100").json();
        let items = board["data"].as_array().unwrap().clone();
        let active = items
            .iter()
            .filter(|i| {
                matches!(
                    i["status"].as_str(),
                    Some("initializing" | "running" | "blocked")
                )
            })
            .count();
        peak = peak.max(active);
        assert!(active <= 2, "{active} runs active at once");
        items
            .iter()
            .all(|i| i["status"] == "succeeded")
            .then_some(())
    });
    assert!(peak >= 1);
    // FIFO: the scheduler promoted (run.starting) in creation order (run.running follows
    // that order too: `runs_started_together_are_seen_running_in_promotion_order`).
    let promoted: Vec<String> = ids
        .iter()
        .map(|id| {
            let evs = s
                .get(&format!("/api/v1/runs/{id}/events?limit=1000"))
                .json();
            evs["data"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["event"] == "run.starting")
                .map(|e| e["ts"].as_str().unwrap().to_string())
                .unwrap()
        })
        .collect();
    let mut sorted = promoted.clone();
    sorted.sort();
    assert_eq!(promoted, sorted);
}

/// The id (a ULID from one monotonic generator: commit order across runs) and the time of
/// the run's first event of `kind`.
fn first_event(s: &Server, id: &str, kind: &str) -> (String, String) {
    let evs = s
        .get(&format!("/api/v1/runs/{id}/events?limit=1000"))
        .json();
    let e = evs["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == kind)
        .unwrap_or_else(|| panic!("run {id} has no {kind}"))
        .clone();
    (
        e["id"].as_str().unwrap().to_string(),
        e["ts"].as_str().unwrap().to_string(),
    )
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn runs_started_together_are_seen_running_in_promotion_order() {
    require(Tool::Git);
    let s = Server::with(Opts {
        settings: Some("[server.scheduler]\nmax_concurrent_runs = 6\n"),
        ..Opts::default()
    });
    let dot = command("true");
    // Rounds of six runs started together: each round's six race to prepare their sandboxes.
    for round in 0..4 {
        let ids: Vec<String> = (0..6).map(|_| create_run(&s, &run_body(&dot))).collect();
        for id in &ids {
            start_run(&s, id);
        }
        for id in &ids {
            wait_kind(&s, id, &["succeeded"]);
        }
        let order = |kind: &str| {
            let mut by: Vec<(String, String)> = ids
                .iter()
                .map(|id| (first_event(&s, id, kind).0, id.clone()))
                .collect();
            by.sort();
            by.into_iter().map(|(_, id)| id).collect::<Vec<_>>()
        };
        let promoted = order("run.starting");
        assert_eq!(
            promoted, ids,
            "round {round}: promoted in creation order (FIFO)"
        );
        assert_eq!(
            order("run.running"),
            promoted,
            "round {round}: run.running recorded in promotion order"
        );
        let started: Vec<String> = promoted
            .iter()
            .map(|id| {
                run_json(&s, id)["timestamps"]["started_at"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        let mut sorted = started.clone();
        sorted.sort();
        assert_eq!(
            started, sorted,
            "round {round}: started_at follows promotion order"
        );
    }
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn global_attach_streams_live_events_of_the_listed_runs() {
    require(Tool::Git);
    let s = Server::start();
    let a = create_run(&s, &run_body(HELLO));
    let b = create_run(&s, &run_body(HELLO));
    assert_error(&s.get("/api/v1/attach?run_id=nope"), 400);
    let mut all = s.sse(&format!("/api/v1/attach?run_id={a}"), &[]);
    assert_eq!(all.status, 200);
    s.post(&format!("/api/v1/runs/{b}/start"), "");
    wait_status(&s, &b, "succeeded", 20);
    s.post(&format!("/api/v1/runs/{a}/start"), "");
    let mut kinds = Vec::new();
    while let Some(f) = all.next() {
        assert_eq!(f.data["run_id"], a.as_str(), "only the listed run");
        assert_eq!(f.id, None);
        let k = f.data["event"].as_str().unwrap().to_string();
        kinds.push(k.clone());
        if k == "run.completed" {
            break;
        }
    }
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("run.queued"),
        "{kinds:?}"
    );
}

#[test]
fn web_ui_needs_a_session_secret() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("settings.toml"),
        "[server.web]\nenabled = true\n",
    )
    .unwrap();
    let out = std::process::Command::new(bin())
        .args(["server", "start", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(dir.path())
        .env_remove("SESSION_SECRET")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SESSION_SECRET"));
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn cancel_pause_unpause() {
    require(Tool::Git);
    let s = Server::start();
    // Cancel a queued (submitted) run: immediate.
    let r = create_run_json(&s, &run_body(&command("sleep 30")));
    let id = r["id"].as_str().unwrap();
    let c = s.post(&format!("/api/v1/runs/{id}/cancel"), "");
    assert_eq!(
        c.json()["lifecycle"]["status"],
        json!({"kind": "failed", "reason": "cancelled"})
    );
    assert_error(&s.post(&format!("/api/v1/runs/{id}/cancel"), ""), 409);

    // Cancel a running stage: the sleep is interrupted.
    let r = create_run_json(&s, &run_body(&command("sleep 30")));
    let id = r["id"].as_str().unwrap().to_string();
    s.post(&format!("/api/v1/runs/{id}/start"), "");
    wait_status(&s, &id, "running", 20);
    std::thread::sleep(Duration::from_millis(300));
    let c = s.post(&format!("/api/v1/runs/{id}/cancel"), "").json();
    assert_eq!(c["lifecycle"]["pending_control"], "cancel");
    let st = wait_status(&s, &id, "failed", 10);
    assert_eq!(st["reason"], "cancelled");

    // Pause holds the run before its next stage; unpause lets it finish.
    let two = "digraph p { start [shape=Mdiamond]; a [shape=parallelogram, script=\"sleep 1\"]; b [shape=parallelogram, script=\"echo b\"]; exit [shape=Msquare]; start -> a -> b -> exit }";
    let r = create_run_json(&s, &run_body(two));
    let id = r["id"].as_str().unwrap().to_string();
    s.post(&format!("/api/v1/runs/{id}/start"), "");
    wait_status(&s, &id, "running", 20);
    let p = s.post(&format!("/api/v1/runs/{id}/pause"), "");
    assert_eq!(p.status, 200, "{}", p.text());
    // Until the engine holds (after stage a), the request shows as pending.
    assert_eq!(p.json()["lifecycle"]["status"]["kind"], "running");
    assert_eq!(p.json()["lifecycle"]["pending_control"], "pause");
    assert_error(&s.post(&format!("/api/v1/runs/{id}/pause"), ""), 409);
    let held = wait_status(&s, &id, "paused", 20);
    assert_eq!(held["kind"], "paused");
    let row = s.get(&format!("/api/v1/runs/{id}")).json();
    assert_eq!(row["lifecycle"]["pending_control"], json!(null));
    std::thread::sleep(Duration::from_millis(500));
    let evs = s
        .get(&format!("/api/v1/runs/{id}/events?limit=1000"))
        .json();
    let b_started = evs["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["event"] == "stage.started" && e["node_id"] == "b");
    assert!(!b_started, "stage b started while paused");
    assert_eq!(run_status(&s, &id)["kind"], "paused");
    let u = s.post(&format!("/api/v1/runs/{id}/unpause"), "");
    assert_eq!(u.status, 200);
    wait_status(&s, &id, "succeeded", 20);
    assert_error(&s.post(&format!("/api/v1/runs/{id}/unpause"), ""), 409);

    // Archive only finished runs; approve/deny only pending ones.
    let a = s.post(&format!("/api/v1/runs/{id}/archive"), "");
    assert_eq!(a.json()["lifecycle"]["archived"], true);
    assert_eq!(
        s.post(&format!("/api/v1/runs/{id}/archive"), "").status,
        200
    );
    let listed = s.get("/api/v1/runs").json();
    assert!(!listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["id"] == id.as_str()));
    let all = s.get("/api/v1/runs?include_archived=true").json();
    assert!(all["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["id"] == id.as_str()));
    assert_eq!(
        s.post(&format!("/api/v1/runs/{id}/unarchive"), "").json()["lifecycle"]["archived"],
        false
    );
    assert_error(&s.post(&format!("/api/v1/runs/{id}/approve"), "{}"), 409);
    assert_error(
        &s.post(&format!("/api/v1/runs/{id}/deny"), "{\"reason\":\"no\"}"),
        409,
    );
}

fn events_of(s: &Server, id: &str) -> Vec<Value> {
    s.get(&format!("/api/v1/runs/{id}/events?limit=1000"))
        .json()["data"]
        .as_array()
        .unwrap()
        .clone()
}

fn ts_of(events: &[Value], kind: &str) -> String {
    let e = events.iter().find(|e| e["event"] == kind);
    e.and_then(|e| e["ts"].as_str())
        .unwrap_or_else(|| panic!("no {kind} in {events:?}"))
        .to_string()
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn restart_resumes_interrupted_runs_by_themselves_before_queued_ones() {
    require(Tool::Git);
    let s = Server::with(Opts {
        settings: Some("[server.scheduler]\nmax_concurrent_runs = 1\n"),
        ..Opts::default()
    });
    // First attempt leaves a background process and hangs; the resumed attempt finds its
    // marker and finishes at once. The marker lives outside the workspace: a resume
    // restores the workspace to its checkpoint. The background process carries the marker's
    // path in its command line (`$0`), so `/proc` finds it whatever pid namespace it is in.
    let marks = tempfile::tempdir().unwrap();
    let marker = marks.path().join("marker");
    let bg = format!("{}.bg", marker.display());
    let script = format!(
        "if [ -f {m} ]; then echo resumed; else touch {m}; sh -c 'sleep 60; :' {bg} & wait; fi",
        m = marker.display(),
    );
    let id = create_run(&s, &run_body(&command(&script)));
    let queued: Vec<String> = (0..2).map(|_| create_run(&s, &run_body(HELLO))).collect();
    let waiting = create_run(&s, &run_body(HELLO));
    s.post(&format!("/api/v1/runs/{id}/start"), "");
    wait_status(&s, &id, "running", 20);
    for q in &queued {
        s.post(&format!("/api/v1/runs/{q}/start"), "");
    }
    wait_for(20, "the stage's background process", || {
        (!processes_with(&bg).is_empty()).then_some(())
    });
    let dir = s.kill();
    // With bubblewrap the run's pid namespace dies with the server (docs/decisions.md
    // "Nothing outlives its run"); without it, the restart's sweep stops the group.
    if svc::internal::test_tools::Tool::Bwrap.check().is_ok() {
        wait_for(10, "the background process to die with the server", || {
            processes_with(&bg).is_empty().then_some(())
        });
    } else {
        assert!(
            !processes_with(&bg).is_empty(),
            "the background process died with the server"
        );
    }
    let s = Server::with(Opts {
        dir: Some(dir),
        settings: Some("[server.scheduler]\nmax_concurrent_runs = 1\n"),
        ..Opts::default()
    });
    assert!(
        processes_with(&bg).is_empty(),
        "the previous server's stage process survived the restart"
    );
    wait_status(&s, &id, "succeeded", 30);
    for q in &queued {
        wait_status(&s, q, "succeeded", 30);
    }
    assert_eq!(run_status(&s, &waiting)["kind"], "submitted");
    let evs = events_of(&s, &id);
    let interrupted = evs
        .iter()
        .find(|e| e["event"] == "run.interrupted")
        .unwrap();
    assert_eq!(interrupted["properties"]["action"], "resume");
    assert_eq!(interrupted["properties"]["status"], "running");
    assert!(evs
        .iter()
        .any(|e| e["event"] == "run.running" && e["properties"]["resumed"] == true));
    let work_starts = evs
        .iter()
        .filter(|e| e["event"] == "stage.started" && e["node_id"] == "work")
        .count();
    assert_eq!(
        work_starts, 2,
        "the stage in flight runs again from its start"
    );
    // The interrupted run held its slot; queued runs follow it in their order.
    let a_end = ts_of(&evs, "run.completed");
    let q0 = events_of(&s, &queued[0]);
    let q1 = events_of(&s, &queued[1]);
    assert!(a_end <= ts_of(&q0, "run.starting"));
    assert!(ts_of(&q0, "run.completed") <= ts_of(&q1, "run.starting"));
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn restart_without_resume_fails_active_runs_and_start_resume_continues() {
    require(Tool::Git);
    let settings = "[server.recovery]\nresume_interrupted = false\n";
    let s = Server::with(Opts {
        settings: Some(settings),
        ..Opts::default()
    });
    // The marker lives outside the workspace: a resume restores the workspace to its
    // checkpoint.
    let marks = tempfile::tempdir().unwrap();
    let marker = marks.path().join("marker");
    let script = format!(
        "if [ -f {m} ]; then echo resumed; else touch {m}; sleep 60; fi",
        m = marker.display()
    );
    let id = create_run(&s, &run_body(&command(&script)));
    s.post(&format!("/api/v1/runs/{id}/start"), "");
    wait_status(&s, &id, "running", 20);
    wait_for(20, "the marker", || marker.exists().then_some(()));
    let dir = s.kill();
    let s = Server::with(Opts {
        dir: Some(dir),
        settings: Some(settings),
        ..Opts::default()
    });
    let st = run_status(&s, &id);
    assert_eq!(st, json!({"kind": "failed", "reason": "terminated"}));
    let evs = events_of(&s, &id);
    let interrupted = evs
        .iter()
        .find(|e| e["event"] == "run.interrupted")
        .unwrap();
    assert_eq!(interrupted["properties"]["action"], "fail");
    assert_error(&s.post(&format!("/api/v1/runs/{id}/start"), "{}"), 409);
    let resumed = s.post(&format!("/api/v1/runs/{id}/start"), "{\"resume\": true}");
    assert_eq!(resumed.status, 200, "{}", resumed.text());
    wait_status(&s, &id, "succeeded", 20);
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_run_paused_when_the_server_died_resumes_paused() {
    require(Tool::Git);
    let s = Server::start();
    // The marker lives outside the workspace: a resume restores the workspace.
    let marks = tempfile::tempdir().unwrap();
    let m = marks.path().join("m");
    let dot = format!(
        "digraph p {{ start [shape=Mdiamond]; a [shape=parallelogram, script=\"[ -f {m} ] || {{ touch {m}; sleep 30; }}\"]; b [shape=parallelogram, script=\"echo b\"]; exit [shape=Msquare]; start -> a -> b -> exit }}",
        m = m.display()
    );
    let id = create_run(&s, &run_body(&dot));
    s.post(&format!("/api/v1/runs/{id}/start"), "");
    wait_for(20, "stage a", || {
        events_of(&s, &id)
            .iter()
            .any(|e| e["event"] == "stage.started" && e["node_id"] == "a")
            .then_some(())
    });
    // The first attempt has left its marker (so the rerun after the restart finishes at once).
    wait_for(20, "the marker", || m.exists().then_some(()));
    assert_eq!(s.post(&format!("/api/v1/runs/{id}/pause"), "").status, 200);
    let dir = s.kill();
    let s = Server::with(Opts {
        dir: Some(dir),
        ..Opts::default()
    });
    wait_for(20, "the resumed run to hold paused", || {
        let evs = events_of(&s, &id);
        let resumed = evs
            .iter()
            .position(|e| e["event"] == "run.running" && e["properties"]["resumed"] == true)?;
        evs[resumed..]
            .iter()
            .any(|e| e["event"] == "run.paused")
            .then_some(())
    });
    assert_eq!(run_status(&s, &id)["kind"], "paused");
    let a_starts = |s: &Server| {
        events_of(s, &id)
            .iter()
            .filter(|e| e["event"] == "stage.started" && e["node_id"] == "a")
            .count()
    };
    assert_eq!(a_starts(&s), 1, "a paused run started a stage");
    assert_eq!(
        s.post(&format!("/api/v1/runs/{id}/unpause"), "").status,
        200
    );
    wait_status(&s, &id, "succeeded", 20);
    assert_eq!(a_starts(&s), 2);
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn pagination_events_and_deletion() {
    require(Tool::Git);
    let s = Server::start();
    let ids: Vec<String> = (0..3).map(|_| create_run(&s, &run_body(HELLO))).collect();
    let page = |q: &str| s.get(&format!("/api/v1/runs{q}")).json();
    let p = page("?page[limit]=0");
    assert_eq!(p["data"].as_array().unwrap().len(), 1);
    assert_eq!(p["meta"]["has_more"], true);
    assert_eq!(p["data"][0]["id"], ids[2].as_str(), "newest first");
    let p = page("?page[limit]=1000");
    assert_eq!(p["data"].as_array().unwrap().len(), 3);
    assert_eq!(p["meta"]["has_more"], false);
    let p = page("?page%5Blimit%5D=2&page%5Boffset%5D=2");
    assert_eq!(p["data"].as_array().unwrap().len(), 1);
    assert_eq!(p["data"][0]["id"], ids[0].as_str());
    assert_eq!(
        page("?page[offset]=-5")["data"].as_array().unwrap().len(),
        3
    );
    assert_error(&s.get("/api/v1/runs?page[limit]=abc"), 400);
    assert_eq!(
        s.get("/runs?page[limit]=2").json()["data"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    let id = &ids[0];
    s.post(&format!("/api/v1/runs/{id}/start"), "");
    wait_status(&s, id, "succeeded", 20);
    let e = s
        .get(&format!("/api/v1/runs/{id}/events?since_seq=0&limit=0"))
        .json();
    assert_eq!(e["data"].as_array().unwrap().len(), 1);
    assert_eq!(e["data"][0]["seq"], 1);
    assert_eq!(e["meta"]["has_more"], true);
    let e = s
        .get(&format!("/api/v1/runs/{id}/events?since_seq=2&limit=5000"))
        .json();
    assert_eq!(e["data"][0]["seq"], 2);
    assert_eq!(e["meta"]["has_more"], false);
    assert!(s
        .get(&format!("/api/v1/runs/{id}/checkpoint"))
        .json()
        .is_object());
    let src = s.get(&format!("/api/v1/runs/{id}/graph/source"));
    assert_eq!(src.text(), HELLO);

    // Unknown and malformed ids.
    assert_error(&s.get("/api/v1/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV"), 404);
    assert_error(&s.get("/api/v1/runs/not-a-ulid"), 400);
    assert_error(
        &s.post("/api/v1/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/start", "{}"),
        404,
    );
    // Creation errors.
    assert_error(&s.post("/api/v1/runs", "{}"), 400);
    assert_error(
        &s.post(
            "/api/v1/runs",
            &json!({"workflow_version_id": "c".repeat(64)}).to_string(),
        ),
        404,
    );
    let bad = s.post(
        "/api/v1/runs",
        &json!({"workflow": package("digraph x { a -> b }")}).to_string(),
    );
    assert!(assert_error(&bad, 422)["errors"][0]["diagnostics"].is_array());
    let v = s
        .post("/api/v1/workflow-versions", &package(HELLO).to_string())
        .json();
    let by_version = s.post(
        "/api/v1/runs",
        &json!({"workflow_version_id": v["id"], "title": "T", "labels": {"k": "v"}, "model": {"name": "gpt-5.4"}, "sandbox": {"provider": "local"}}).to_string(),
    );
    assert_eq!(by_version.status, 201, "{}", by_version.text());
    let run = by_version.json();
    assert_eq!(run["title"], "T");
    assert_eq!(run["labels"]["k"], "v");
    assert_eq!(run["models"][0]["name"], "gpt-5.4");
    assert_eq!(run["sandbox"]["kind"], "planned");

    // Deletion: 409 while active, force, then gone.
    let active = create_run(&s, &run_body(&command("sleep 30")));
    s.post(&format!("/api/v1/runs/{active}/start"), "");
    wait_status(&s, &active, "running", 20);
    assert_error(
        &s.call("DELETE", &format!("/api/v1/runs/{active}"), None),
        409,
    );
    assert_eq!(
        s.call("DELETE", &format!("/api/v1/runs/{active}?force=true"), None)
            .status,
        204
    );
    assert_error(&s.get(&format!("/api/v1/runs/{active}")), 404);
    assert_eq!(
        s.call("DELETE", &format!("/api/v1/runs/{id}"), None).status,
        204
    );
    assert_eq!(
        s.call("DELETE", &format!("/api/v1/runs/{id}"), None).status,
        204
    );
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_burst_of_subscribers_is_served_in_full() {
    require(Tool::Git);
    // A thousand SSE clients connecting at once each get their stream. tiny_http's connection
    // pool used to strand a few of them until some other connection ended; here nothing else
    // happens meanwhile, so a stranded stream would wait for ever.
    let s = Server::start();
    let id = create_run(&s, &run_body(GATE));
    let started = s.post(&format!("/api/v1/runs/{id}/start"), "");
    assert_eq!(started.status, 200, "{}", started.text());
    wait_status(&s, &id, "blocked", 30);
    let auth = s.auth();
    let n = 1000;
    let mut conns: Vec<_> = (0..n)
        .map(|_| {
            let mut c = s.connect();
            let req = format!(
                "GET /api/v1/runs/{id}/attach?since_seq=1 HTTP/1.1\r\nHost: localhost\r\nAuthorization: {auth}\r\n\r\n"
            );
            c.write_all(req.as_bytes()).unwrap();
            c
        })
        .collect();
    for c in conns.iter_mut() {
        // Each stream answers 200 and replays the run up to its question. `connect` gives
        // every socket a 30 s read timeout, so a stranded stream fails here.
        let mut r = std::io::BufReader::new(c);
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 200"), "{line:?}");
        while !line.contains("\"interview.started\"") {
            line.clear();
            assert!(r.read_line(&mut line).unwrap() > 0, "stream ended early");
        }
    }
    drop(conns);
    s.post(&format!("/api/v1/runs/{id}/cancel"), "");
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn state_files_are_private_whatever_the_umask() {
    require(Tool::Git);
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let s = Server::with(Opts {
        dir: Some(dir),
        umask: Some(0),
        ..Opts::default()
    });
    let id = create_run(&s, &run_body(&command("echo data > out.txt")));
    s.post(&format!("/api/v1/runs/{id}/start"), "");
    wait_status(&s, &id, "succeeded", 20);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let root = s.path().to_path_buf();
    assert_eq!(mode(&root), 0o700, "state directory");
    for name in ["svc.db", "svc.db-wal", "svc.db-shm", "dev-token"] {
        assert_eq!(mode(&root.join(name)), 0o600, "{name}");
    }
    for name in ["workspaces", "procs"] {
        assert_eq!(mode(&root.join(name)), 0o700, "{name}");
    }
    // Every regular file the server wrote at the top of the state directory is private.
    for entry in std::fs::read_dir(&root).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_file() && !name.starts_with("stderr-") {
            assert_eq!(mode(&entry.path()), 0o600, "{name}");
        }
    }
}

#[test]
fn bodies_that_are_not_objects_and_odd_booleans_are_refused() {
    let s = Server::start();
    let id = create_run(&s, &run_body(HELLO));
    for (route, body) in [
        ("start", "[]"),
        ("start", "[true]"),
        ("approve", "[]"),
        ("approve", "\"yes\""),
        ("approve", "1"),
        ("approve", "null"),
        ("deny", "[]"),
        ("deny", "[\"no\"]"),
    ] {
        let r = s.post(&format!("/api/v1/runs/{id}/{route}"), body);
        let e = assert_error(&r, 400);
        assert!(
            e["errors"][0]["detail"]
                .as_str()
                .is_some_and(|d| d.contains("JSON object") || d.contains("Malformed JSON")),
            "{route} {body}: {e}"
        );
    }
    assert_error(&s.post("/api/v1/runs", "[]"), 400);
    // The run was never started by the refused bodies.
    assert_eq!(run_status(&s, &id)["kind"], "submitted");
    assert_error(&s.post("/api/v1/runs/not-a-ulid/start", "{}"), 400);
    // Boolean query parameters are true or false, nothing else.
    assert_error(&s.get("/api/v1/runs?include_archived=yes"), 400);
    assert_error(
        &s.call("DELETE", &format!("/api/v1/runs/{id}?force=1"), None),
        400,
    );
    assert_eq!(s.get("/api/v1/runs?include_archived=false").status, 200);
    // Paging integers beyond 64 bits are clamped like any other out-of-range value.
    let huge = s
        .get("/api/v1/runs?page[limit]=-99999999999999999999999&page[offset]=99999999999999999999");
    assert_eq!(huge.status, 200, "{}", huge.text());
    assert_error(&s.get("/api/v1/runs?page[limit]=1e3"), 400);
}
