//! Ask benchmark (harness = false): what a turn does before it calls the model on a
//! 1,000-stage run in the SQLite store: read the run's events (blob references resolved),
//! fold its stage visits and write the run snapshot that opens the turn's input. Issue 30's
//! target: at most 20 ms.
//!
//! Run: `cargo bench --bench ask_bench` (`ASK_STAGES`, `ASK_REPS` to change the shape).

mod support;

use serde_json::json;
use std::time::Instant;
use svc::store::{EventDraft, RunStore, SqliteStore};

fn main() {
    let stages: usize = support::env_or("ASK_STAGES", 1000);
    let reps: usize = support::env_or("ASK_REPS", 30);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(&dir.path().join("svc.db")).expect("store");
    let row = svc::store::test_support::new_run(&store, "ask bench");
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
        let events = svc::stages::run_events(&store, &row.id).expect("events");
        let text = svc::ask::snapshot::text(&row, &events);
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        len = text.len();
    }
    let median = support::median(&mut ms);
    println!(
        "ask snapshot, {stages}-stage run ({} events): median {median:.2} ms over {reps} (target <= 20 ms), {len} bytes",
        stages * 3 + 1
    );
}
