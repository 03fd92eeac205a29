//! Embedding svc: run a workflow with a human gate answered in code, events printed as they
//! are committed, runs kept in a SQLite file.
//!
//!     cargo run --example embed --no-default-features [-- DB_FILE]
//!
//! Builds with the slim feature set (no HTTP server, no LLM clients, no JSON Schema); the
//! default features work too. Exits 0 when the run succeeds.

use svc::{CancelToken, Engine, InterviewError, Interviewer, Question, Reply, Store, Workflow};

const WORKFLOW: &str = r#"digraph release {
    goal = "Release when the tests pass and a human agrees"
    start   [shape=Mdiamond]
    test    [shape=parallelogram, script="echo 'tests: 42 passed'"]
    approve [shape=hexagon, label="Tests passed. Release?"]
    release [shape=parallelogram, script="echo released"]
    exit    [shape=Msquare]
    start -> test -> approve
    approve -> release [label="[R] Release"]
    approve -> exit    [label="[H] Hold"]
    release -> exit
}"#;

/// Answers human gates in code: release when the question offers it.
struct ReleaseManager;

impl Interviewer for ReleaseManager {
    fn ask(&self, question: &Question, _cancel: &CancelToken) -> Result<Reply, InterviewError> {
        let choice = question
            .options
            .iter()
            .find(|o| o.label.contains("Release"))
            .or(question.options.first())
            .ok_or_else(|| InterviewError::Refused("no options to choose from".into()))?;
        println!("  ? {} -> {}", question.text, choice.label);
        Ok(Reply::Text(choice.key.clone()))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let asked = std::env::args().nth(1).map(std::path::PathBuf::from);
    let scratch = std::env::temp_dir().join(format!("svc-embed-{}.db", std::process::id()));
    let db = asked.clone().unwrap_or_else(|| scratch.clone());
    let workflow = Workflow::parse(WORKFLOW)?;
    let engine = Engine::builder()
        .store(Store::open(&db)?)
        .interviewer(ReleaseManager)
        .on_event(|e| {
            if e.event.starts_with("stage.") || e.event.starts_with("run.") {
                println!(
                    "  {:>3} {} {}",
                    e.seq,
                    e.event,
                    e.node_id.as_deref().unwrap_or("")
                );
            }
        })
        .build()?;
    println!(
        "running `{}` (runs kept in {})",
        workflow.name(),
        db.display()
    );
    let run = engine.run(&workflow, serde_json::Map::new())?;
    drop(engine);
    if asked.is_none() {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", scratch.display()));
        }
    }
    println!(
        "run {} {:?}: {}",
        run.run_id,
        run.status,
        run.path.join(" -> ")
    );
    match run.status {
        svc::RunResult::Succeeded => Ok(()),
        // `RunResult` may grow (#[non_exhaustive]): anything else is not a success.
        _ => Err(run.error.unwrap_or_else(|| run.reason.to_string()).into()),
    }
}
