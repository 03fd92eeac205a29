//! Ask benchmarks (harness = false), issue 30's two targets:
//!
//! - **snapshot**: what a turn does before it calls the model on a 1,000-stage run in the
//!   SQLite store: read the run's events (blob references resolved), fold its stage visits
//!   and write the run snapshot that opens the turn's input. Target: at most 20 ms.
//! - **time to first token**: the real `svc` server, a finished run, one Ask session, and the
//!   tests' scripted Anthropic provider (its real streaming wire format) answering after
//!   `ASK_PROVIDER_MS` (default 100 ms, its own time to first token). Per turn: from writing
//!   the turn's POST to reading the first `run.session.assistant_delta` frame of its SSE
//!   stream, minus the provider's own time (request received to answer sent). Target: at most
//!   50 ms above the provider's. `ASK_TURNS` turns (default 20) after one warm-up turn; the
//!   session's history grows by one question and answer per turn, as a user's does.
//!
//! Run: `cargo bench --bench ask_bench` (`ASK_STAGES`, `ASK_REPS` shape the snapshot part).

mod support;

use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::binary::{bin, state_dir, Svc};
use support::llm::{reply, streamed, text, ScriptedServer, SMALL_USAGE};
use svc::internal::llm::Provider;
use svc::internal::store::{EventDraft, RunStore, SqliteStore};

fn main() {
    snapshot();
    time_to_first_token();
}

fn snapshot() {
    let stages: usize = support::env_or("ASK_STAGES", 1000);
    let reps: usize = support::env_or("ASK_REPS", 30);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(&dir.path().join("svc.db")).expect("store");
    let row = svc::internal::store::test_support::new_run(&store, "ask bench");
    for i in 0..stages {
        let node = format!("n{i}");
        let mut drafts = Vec::new();
        let mut started = EventDraft::new(
            "stage.started",
            json!({"attempt": 1, "handler_type": "command"}),
        );
        started.node_id = Some(node.clone());
        let mut done = EventDraft::new(
            "stage.completed",
            json!({"status": "success", "duration_ms": 12, "notes": "ok",
                   "response": "x".repeat(200)}),
        );
        done.node_id = Some(node.clone());
        let checkpoint = EventDraft::new(
            "checkpoint.completed",
            json!({"kind": "delta", "current_node": node, "next_node_id": format!("n{}", i + 1),
                   "stage_index": i, "base_seq": 2}),
        );
        drafts.extend([started, done, checkpoint]);
        store.append_all(&row.id, drafts).expect("append");
    }
    let mut ms = Vec::with_capacity(reps);
    let mut len = 0;
    for _ in 0..reps {
        let t = Instant::now();
        let row = store.get_run(&row.id).expect("row").expect("run");
        let events = svc::internal::stages::run_events(&store, &row.id).expect("events");
        let text = svc::internal::ask::snapshot::text(&row, &events);
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        len = text.len();
    }
    let median = support::median(&mut ms);
    println!(
        "ask snapshot, {stages}-stage run ({} events): median {median:.2} ms over {reps} (target <= 20 ms), {len} bytes",
        stages * 3 + 1
    );
}

/// Milliseconds the scripted provider waits before its first token (its own time to first
/// token), unless `ASK_PROVIDER_MS` says otherwise.
const PROVIDER_MS: u64 = 100;

/// The real server with the scripted provider as Anthropic's endpoint.
fn start_svc(provider_base: &str) -> Svc {
    let settings = format!(
        "[server.auth]\nmethods = [\"dev-token\"]\n[llm.providers.anthropic]\nbase_url = \"{provider_base}\"\n"
    );
    let dir = state_dir(&settings, &[("ANTHROPIC_API_KEY", "bench-key")]);
    Svc::start(Command::new(bin()), dir)
}

impl Svc {
    /// Posts a turn and reads its SSE stream as it comes: when the first
    /// `run.session.assistant_delta` frame arrived, measured from just before the request
    /// was written.
    fn turn_first_delta(&self, session: &str, input: &str) -> Duration {
        let body = json!({ "input": input }).to_string();
        let req = format!(
            "POST /api/v1/sessions/{session}/turns HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\
             Authorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.token,
            body.len()
        );
        let mut s = TcpStream::connect(&self.addr).expect("connect");
        s.set_nodelay(true).ok();
        let t0 = Instant::now();
        s.write_all(req.as_bytes()).expect("write");
        let mut seen = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        let mut first = None;
        loop {
            let n = s.read(&mut buf).unwrap_or(0);
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen);
            if first.is_none() && text.contains("event: run.session.assistant_delta") {
                first = Some(t0.elapsed());
            }
            if text.contains("event: run.session.turn.succeeded")
                || text.contains("event: run.session.turn.failed")
            {
                break;
            }
        }
        let text = String::from_utf8_lossy(&seen);
        assert!(
            text.contains("run.session.turn.succeeded"),
            "the turn did not succeed: {text}"
        );
        first.expect("a streamed delta")
    }
}

/// Ask's time to first token on the real server against the scripted streaming provider:
/// from the turn's POST to the first `assistant_delta` frame on its stream, minus the
/// provider's own time to its first token (request received to answer sent).
fn time_to_first_token() {
    let turns: usize = support::env_or("ASK_TURNS", 20);
    let provider_ms: u64 = support::env_or("ASK_PROVIDER_MS", PROVIDER_MS);
    let own: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let recorded = Arc::clone(&own);
    let llm = ScriptedServer::start_with(move |_, r| {
        std::thread::sleep(Duration::from_millis(provider_ms));
        let reply = reply(
            Provider::Anthropic,
            &text("The work stage wrote plan-42 into notes.txt."),
            SMALL_USAGE,
            streamed(r),
        );
        recorded.lock().expect("lock").push(r.at.elapsed());
        reply
    });
    let svc = start_svc(&llm.base);
    let flow = r#"digraph notes { start [shape=Mdiamond]; exit [shape=Msquare]
        work [shape=parallelogram, script="echo plan-42 > notes.txt"]
        start -> work -> exit }"#;
    let body = json!({"workflow": {"entrypoint": "main.dot", "files": {"main.dot": flow}}});
    let (st, run) = svc.json("POST", "/api/v1/runs", &body.to_string());
    assert_eq!(st, 201, "{run}");
    let id = run["id"].as_str().expect("run id").to_string();
    let (st, _) = svc.json("POST", &format!("/api/v1/runs/{id}/start"), "{}");
    assert_eq!(st, 200);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, r) = svc.json("GET", &format!("/api/v1/runs/{id}"), "");
        match r["lifecycle"]["status"]["kind"].as_str() {
            Some("succeeded") => break,
            Some("failed" | "dead" | "cancelled") => panic!("the run failed: {r}"),
            _ => {}
        }
        assert!(Instant::now() < deadline, "the run did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (st, s) = svc.json("POST", &format!("/api/v1/runs/{id}/sessions"), "{}");
    assert_eq!(st, 201, "{s}");
    let session = s["id"].as_str().expect("session id").to_string();
    // One turn to warm up (first connection, first provider client).
    svc.turn_first_delta(&session, "warm up");
    let mut total = Vec::with_capacity(turns);
    let mut above = Vec::with_capacity(turns);
    for i in 0..turns {
        let seen = svc.turn_first_delta(&session, &format!("question {i}: what did work write?"));
        let provider = own
            .lock()
            .expect("lock")
            .last()
            .copied()
            .unwrap_or_default();
        total.push(seen.as_secs_f64() * 1000.0);
        above.push(seen.saturating_sub(provider).as_secs_f64() * 1000.0);
    }
    let median_total = support::median(&mut total);
    let mut sorted = above.clone();
    let median_above = support::median(&mut above);
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    println!(
        "ask time to first token, real server, scripted Anthropic stream ({provider_ms} ms to its first token): \
         first delta frame at median {median_total:.1} ms; above the provider's own: median {median_above:.1} ms, \
         p90 {:.1} ms, worst {:.1} ms over {turns} turns (target <= 50 ms)",
        support::percentile(&sorted, 0.9),
        sorted.last().copied().unwrap_or(0.0)
    );
}
