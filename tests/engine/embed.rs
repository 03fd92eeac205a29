//! The embedding front door (`svc::Workflow`, `svc::Engine`, `svc::Store`, `Interviewer`, the
//! event callback) as another program uses it, in every feature set: a real SQLite file on
//! disk, real command processes, human gates answered in code, a cancel from another thread,
//! and a resume from the file.

use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use svc::{
    CancelToken, EndReason, Engine, Error, FailureReason, InterviewError, Interviewer, Question,
    Reply, RunResult, Severity, Store, Workflow,
};

const GATE: &str = r#"digraph gate {
    start  [shape=Mdiamond]
    ask    [shape=hexagon, label="Which way?"]
    left   [shape=parallelogram, script="echo went-left"]
    right  [shape=parallelogram, script="echo went-right"]
    exit   [shape=Msquare]
    start -> ask
    ask -> left  [label="[L] Left"]
    ask -> right [label="[R] Right"]
    left -> exit
    right -> exit
}"#;

/// Answers with a fixed key and remembers the questions.
struct Answer {
    key: &'static str,
    asked: Arc<Mutex<Vec<Question>>>,
}

impl Interviewer for Answer {
    fn ask(&self, q: &Question, _: &CancelToken) -> Result<Reply, InterviewError> {
        self.asked.lock().unwrap().push(q.clone());
        Ok(Reply::Text(self.key.to_string()))
    }
}

fn inputs(pairs: &[(&str, &str)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect()
}

#[test]
fn a_human_gate_answered_in_code_routes_the_run() {
    let wf = Workflow::parse(GATE).unwrap();
    for (key, branch) in [("R", "right"), ("L", "left")] {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let engine = Engine::builder()
            .interviewer(Answer {
                key,
                asked: Arc::clone(&asked),
            })
            .build()
            .unwrap();
        let run = engine.run(&wf, Map::new()).unwrap();
        assert_eq!(run.status, RunResult::Succeeded, "{run:?}");
        assert_eq!(run.path, ["start", "ask", branch, "exit"]);
        let asked = asked.lock().unwrap();
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].text, "Which way?");
        let keys: Vec<&str> = asked[0].options.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys, ["L", "R"]);
    }
}

#[test]
fn without_an_interviewer_a_human_stage_fails_the_run_with_a_reason() {
    let wf = Workflow::parse(GATE).unwrap();
    let run = Engine::builder()
        .build()
        .unwrap()
        .run(&wf, Map::new())
        .unwrap();
    assert_eq!(run.status, RunResult::Failed);
    assert!(!run.path.contains(&"left".to_string()));
    assert!(run.error.is_some(), "{run:?}");
}

#[test]
fn the_callback_sees_every_committed_event_in_order_and_the_file_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let engine = Engine::builder()
        .store(Store::open(&db).unwrap())
        .interviewer(Answer {
            key: "L",
            asked: Arc::default(),
        })
        .workdir(dir.path())
        .on_event(move |e| log.lock().unwrap().push(e.clone()))
        .build()
        .unwrap();
    let wf = Workflow::parse(GATE).unwrap();
    let run = engine.run(&wf, Map::new()).unwrap();
    assert_eq!(run.status, RunResult::Succeeded);
    drop(engine);

    // Reopened from the file, in another store: the same events the callback saw.
    let stored = Store::open(&db).unwrap().events(&run.run_id).unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(*seen, stored);
    let seqs: Vec<u64> = stored.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=stored.len() as u64).collect::<Vec<_>>());
    assert_eq!(
        stored.first().map(|e| e.event.as_str()),
        Some("run.created")
    );
    assert_eq!(
        stored.last().map(|e| e.event.as_str()),
        Some("run.completed")
    );
    let output = stored
        .iter()
        .filter(|e| e.node_id.as_deref() == Some("left"))
        .map(|e| e.properties.to_string())
        .collect::<String>();
    assert!(output.contains("went-left"), "{output}");
}

#[test]
fn inputs_reach_commands_and_files_resolve_next_to_the_workflow() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("greet.sh"),
        "echo \"hello $SVC_INPUT_WHO\" > out.txt\n",
    )
    .unwrap();
    let path = dir.path().join("flow.dot");
    std::fs::write(
        &path,
        r#"digraph files {
            start [shape=Mdiamond]
            greet [shape=parallelogram, script="sh greet.sh"]
            exit  [shape=Msquare]
            start -> greet -> exit
        }"#,
    )
    .unwrap();
    let wf = Workflow::load(&path).unwrap();
    let engine = Engine::builder().workdir(dir.path()).build().unwrap();
    let run = engine.run(&wf, inputs(&[("who", "embedder")])).unwrap();
    assert_eq!(run.status, RunResult::Succeeded, "{run:?}");
    let out = std::fs::read_to_string(dir.path().join("out.txt")).unwrap();
    assert_eq!(out.trim(), "hello embedder");
}

#[test]
fn bad_workflows_are_refused_with_what_is_wrong() {
    match Workflow::parse("digraph { start -> }") {
        Err(Error::Parse(e)) => assert!(e.pos.line >= 1, "{e}"),
        other => panic!("expected a parse error, got {other:?}"),
    }
    match Workflow::parse("digraph nostart { a -> b }") {
        Err(Error::Invalid(diagnostics)) => {
            assert!(diagnostics.iter().any(|d| d.severity == Severity::Error));
            let msg = Error::Invalid(diagnostics).to_string();
            assert!(msg.starts_with("the workflow has errors: "), "{msg}");
        }
        other => panic!("expected diagnostics, got {other:?}"),
    }
    match Workflow::load("/nonexistent/flow.dot") {
        Err(e @ Error::Read { .. }) => assert!(e.to_string().contains("/nonexistent/flow.dot")),
        other => panic!("expected a read error, got {other:?}"),
    }
}

#[test]
fn a_cancel_from_another_thread_stops_a_running_command() {
    let wf = Workflow::parse(
        r#"digraph slow {
            start [shape=Mdiamond]
            wait  [shape=parallelogram, script="sleep 30"]
            exit  [shape=Msquare]
            start -> wait -> exit
        }"#,
    )
    .unwrap();
    let engine = Engine::builder().build().unwrap();
    let cancel = CancelToken::new();
    let canceller = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            cancel.cancel("the embedder changed its mind");
        })
    };
    let started = std::time::Instant::now();
    let run = engine.run_with_cancel(&wf, Map::new(), cancel).unwrap();
    canceller.join().unwrap();
    assert_eq!(run.status, RunResult::Failed);
    assert_eq!(
        run.reason,
        EndReason::Failed(FailureReason::Cancelled),
        "{run:?}"
    );
    assert_eq!(run.reason.to_string(), "cancelled");
    // Far less than the command's 30 s: the process was killed, not waited for.
    assert!(started.elapsed() < Duration::from_secs(20));
}

/// Runs `wf` on the SQLite file `db` with nobody to answer its gate: the run stops there,
/// failed, resumable.
fn stopped_at_its_gate(
    wf: &Workflow,
    db: &std::path::Path,
    dir: &std::path::Path,
) -> svc::RunOutcome {
    let first = Engine::builder()
        .store(Store::open(db).unwrap())
        .workdir(dir)
        .build()
        .unwrap()
        .run(wf, Map::new())
        .unwrap();
    assert_eq!(first.status, RunResult::Failed, "{first:?}");
    first
}

/// An engine on the same file whose interviewer answers `Y`.
fn answering_yes(db: &std::path::Path, dir: &std::path::Path) -> Engine {
    Engine::builder()
        .store(Store::open(db).unwrap())
        .workdir(dir)
        .interviewer(Answer {
            key: "Y",
            asked: Arc::default(),
        })
        .build()
        .unwrap()
}

#[test]
fn a_run_resumes_from_its_file_without_repeating_finished_stages() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    // The first stage counts its executions; the gate has nobody to ask the first time.
    let wf = Workflow::parse(
        r#"digraph resumable {
            start [shape=Mdiamond]
            count [shape=parallelogram, script="echo x >> count.txt"]
            ask   [shape=hexagon, label="Go on?"]
            done  [shape=parallelogram, script="echo done > done.txt"]
            exit  [shape=Msquare]
            start -> count -> ask
            ask -> done [label="[Y] Yes"]
            done -> exit
        }"#,
    )
    .unwrap();
    let first = stopped_at_its_gate(&wf, &db, dir.path());
    let engine = answering_yes(&db, dir.path());
    let resumed = engine.resume(&wf, &first.run_id).unwrap();
    assert_eq!(resumed.status, RunResult::Succeeded, "{resumed:?}");
    let count = std::fs::read_to_string(dir.path().join("count.txt")).unwrap();
    assert_eq!(count.lines().count(), 1, "the finished stage ran again");
    assert!(dir.path().join("done.txt").exists());
    assert!(matches!(
        engine.resume(&wf, "01ARZ3NDEKTSV4RRFFQ69G5FAV"),
        Err(Error::Store(_))
    ));
}

/// `resume` takes a cancel token as `run` does: a resumed run's long stage is killed when
/// another thread cancels, and the run ends cancelled.
#[test]
fn a_resumed_run_can_be_cancelled_from_another_thread() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let wf = Workflow::parse(
        r#"digraph slow_after_gate {
            start [shape=Mdiamond]
            ask   [shape=hexagon, label="Go on?"]
            slow  [shape=parallelogram, script="sleep 30"]
            exit  [shape=Msquare]
            start -> ask
            ask -> slow [label="[Y] Yes"]
            slow -> exit
        }"#,
    )
    .unwrap();
    let first = stopped_at_its_gate(&wf, &db, dir.path());
    let engine = answering_yes(&db, dir.path());
    let cancel = CancelToken::new();
    let canceller = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            cancel.cancel("the embedder is shutting down");
        })
    };
    let started = std::time::Instant::now();
    let resumed = engine
        .resume_with_cancel(&wf, &first.run_id, cancel)
        .unwrap();
    canceller.join().unwrap();
    assert_eq!(resumed.status, RunResult::Failed, "{resumed:?}");
    assert_eq!(
        resumed.reason,
        EndReason::Failed(FailureReason::Cancelled),
        "{resumed:?}"
    );
    // Cancelled inside the slow stage, not before it started.
    assert_eq!(resumed.context["current_node"], "slow", "{resumed:?}");
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn a_custom_output_schema_needs_the_schema_feature_and_says_so() {
    let wf = Workflow::parse(
        r#"digraph schema {
            start [shape=Mdiamond]
            emit  [shape=parallelogram, script="echo '{\"n\": 3}'", output_schema="{\"type\":\"object\",\"required\":[\"n\"]}"]
            exit  [shape=Msquare]
            start -> emit -> exit
        }"#,
    );
    if cfg!(feature = "schema") {
        let wf = wf.unwrap();
        let run = Engine::builder()
            .build()
            .unwrap()
            .run(&wf, Map::new())
            .unwrap();
        assert_eq!(run.status, RunResult::Succeeded, "{run:?}");
    } else {
        match wf {
            Err(Error::Invalid(d)) => {
                let text: Vec<&str> = d.iter().map(|d| d.message.as_str()).collect();
                assert!(
                    text.iter().any(|m| m.contains("`schema` cargo feature")),
                    "{text:?}"
                );
            }
            other => panic!("expected the schema feature to be named, got {other:?}"),
        }
    }
    // `routing` needs no JSON Schema in any build.
    let routing = Workflow::parse(
        r#"digraph routing {
            start [shape=Mdiamond]
            emit  [shape=parallelogram, script="echo '{\"outcome\": \"success\"}'", output_schema="routing"]
            exit  [shape=Msquare]
            start -> emit -> exit
        }"#,
    );
    assert!(routing.is_ok(), "{routing:?}");
}
