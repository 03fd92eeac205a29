//! Engine loop tests over the in-memory store with scripted LLM replies and a clock that
//! records sleeps instead of sleeping.
//! Must not: sleep for real, or use the network or an LLM provider.

use super::*;
use crate::base::cancel::CancelToken;
use crate::store::{Event, EventDraft, MemoryStore, NewRun, RunStore, StoreError};
use crate::workflow::{load, NoFiles, Workflow};
use parking_lot::Mutex;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Default)]
struct RecordingClock {
    sleeps: Mutex<Vec<Duration>>,
}

impl Clock for RecordingClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn sleep(&self, dur: Duration, cancel: &CancelToken) -> bool {
        self.sleeps.lock().push(dur);
        cancel.is_cancelled()
    }
}

/// Replies per node, in order; a node without (more) replies answers "ok".
#[derive(Default)]
struct Scripted {
    replies: Mutex<HashMap<String, VecDeque<Result<String, LlmError>>>>,
    calls: Mutex<Vec<String>>,
    /// Every request, in order.
    requests: Mutex<Vec<LlmRequest>>,
    cancel_on: Mutex<Option<(String, CancelToken)>>,
}

impl Scripted {
    fn reply(&self, node: &str, r: Result<&str, (&str, bool)>) {
        let r = r.map(String::from).map_err(|(m, retryable)| LlmError {
            message: m.to_string(),
            retryable,
        });
        self.replies
            .lock()
            .entry(node.into())
            .or_default()
            .push_back(r);
    }
    fn calls_to(&self, node: &str) -> usize {
        self.calls.lock().iter().filter(|n| *n == node).count()
    }
    /// The requests made for `node`, in order.
    fn requests_to(&self, node: &str) -> Vec<LlmRequest> {
        let all = self.requests.lock();
        all.iter().filter(|r| r.node_id == node).cloned().collect()
    }
    /// The first request made for `node`.
    fn request(&self, node: &str) -> LlmRequest {
        match self.requests_to(node).into_iter().next() {
            Some(r) => r,
            None => panic!("no request for {node}"),
        }
    }
}

impl LlmBackend for Scripted {
    fn complete(
        &self,
        req: &LlmRequest,
        _: &CancelToken,
        _: super::LlmEvents<'_>,
    ) -> Result<LlmResponse, LlmError> {
        self.calls.lock().push(req.node_id.clone());
        self.requests.lock().push(req.clone());
        if let Some((node, token)) = &*self.cancel_on.lock() {
            if *node == req.node_id {
                token.cancel("test interrupt");
                return Err(LlmError {
                    message: "interrupted".into(),
                    retryable: true,
                });
            }
        }
        let next = self
            .replies
            .lock()
            .get_mut(&req.node_id)
            .and_then(VecDeque::pop_front);
        next.unwrap_or_else(|| Ok("ok".into()))
            .map(|text| LlmResponse {
                text,
                stop: crate::engine::LlmStop::Completed,
                simulated: false,
                usage: None,
            })
    }
}

struct Harness {
    store: Arc<MemoryStore>,
    llm: Arc<Scripted>,
    clock: Arc<RecordingClock>,
    services: Services,
}

fn harness() -> Harness {
    let store = Arc::new(MemoryStore::new());
    let llm = Arc::new(Scripted::default());
    let clock = Arc::new(RecordingClock::default());
    let mut services = Services::new(store.clone());
    services.llm = llm.clone();
    services.clock = clock.clone();
    Harness {
        store,
        llm,
        clock,
        services,
    }
}

/// A workflow parsed from DOT text (panics with the rendered diagnostics).
pub(super) fn workflow(src: &str) -> Workflow {
    match load(src, &NoFiles) {
        Ok(l) => l.workflow,
        Err(e) => panic!("{}", e.render("test.dot")),
    }
}

impl Harness {
    /// Runs `wf` with the run cancelled when the LLM is called for `node` (the run fails),
    /// then resumes it with a fresh token (it succeeds). Returns both outcomes.
    fn cancel_at_then_resume(&self, wf: &Workflow, node: &str) -> (RunOutcome, RunOutcome) {
        *self.llm.cancel_on.lock() = Some((node.into(), self.services.cancel.clone()));
        let first = self.run(wf);
        assert_eq!(first.status, RunResult::Failed);
        *self.llm.cancel_on.lock() = None;
        let services = Services {
            cancel: CancelToken::new(),
            ..self.services.clone()
        };
        let opts = RunOptions::new(&first.run_id, std::env::temp_dir());
        let second = Engine::resume(wf, &opts, &services);
        assert_eq!(second.status, RunResult::Succeeded, "{:?}", second.error);
        (first, second)
    }

    fn run(&self, wf: &Workflow) -> RunOutcome {
        let row = self.store.create_run(NewRun::default());
        let id = row.map(|r| r.id).unwrap_or_default();
        let opts = RunOptions::new(&id, std::env::temp_dir());
        Engine::run(wf, &opts, &self.services)
    }
    fn events(&self, run_id: &str) -> Vec<Event> {
        self.store.events(run_id, 1, 100_000).unwrap_or_default()
    }
    fn kinds(&self, run_id: &str, node: &str) -> Vec<String> {
        self.events(run_id)
            .into_iter()
            .filter(|e| e.node_id.as_deref() == Some(node))
            .map(|e| e.event)
            .collect()
    }
}

const LINEAR: &str = r#"digraph L {
    start [shape=Mdiamond]; exit [shape=Msquare]
    a [shape=diamond]; b [shape=diamond]
    start -> a -> b -> exit
}"#;

#[test]
fn linear_run_succeeds_with_path_events_and_checkpoints() {
    let h = harness();
    let out = h.run(&workflow(LINEAR));
    assert_eq!(out.status, RunResult::Succeeded, "{:?}", out.error);
    assert_eq!(out.path, ["start", "a", "b", "exit"]);
    let kinds: Vec<String> = h.events(&out.run_id).into_iter().map(|e| e.event).collect();
    assert_eq!(kinds[..3], ["run.created", "run.started", "run.running"]);
    assert_eq!(kinds.last().map(String::as_str), Some("run.completed"));
    assert_eq!(
        kinds
            .iter()
            .filter(|k| *k == "checkpoint.completed")
            .count(),
        3
    );
    assert_eq!(
        h.kinds(&out.run_id, "a"),
        [
            "stage.started",
            "stage.completed",
            "edge.selected",
            "checkpoint.completed"
        ]
    );
    assert_eq!(
        out.context.get("graph.goal"),
        Some(&Value::String(String::new()))
    );
    assert_eq!(
        out.context.get("internal.run_id"),
        Some(&Value::String(out.run_id.clone()))
    );
}

fn visit_loop(limit: &str) -> String {
    format!(
        r#"digraph V {{
        start [shape=Mdiamond]; exit [shape=Msquare]
        a [shape=diamond {limit}]
        start -> a
        a -> a [condition="internal.node_visit_count<4"]
        a -> exit
    }}"#
    )
}

#[test]
fn visit_limit_allows_exactly_n_visits() {
    let h = harness();
    let ok = h.run(&workflow(&visit_loop(", max_visits=4")));
    assert_eq!(ok.status, RunResult::Succeeded, "{:?}", ok.error);
    assert_eq!(ok.path.iter().filter(|p| *p == "a").count(), 4);
    let bad = h.run(&workflow(&visit_loop(", max_visits=3")));
    assert_eq!(bad.status, RunResult::Failed);
    let err = bad.error.unwrap_or_default();
    assert!(err.contains("`a`") && err.contains("max_visits=3"), "{err}");
    assert_eq!(bad.path.iter().filter(|p| *p == "a").count(), 3);
    let unlimited = h.run(&workflow(&visit_loop(", max_visits=0")));
    assert_eq!(unlimited.status, RunResult::Succeeded);
}

#[test]
fn graph_visit_limit_applies_when_node_has_none() {
    let h = harness();
    let src = visit_loop("").replace("digraph V {", "digraph V { graph [max_node_visits=2]");
    let out = h.run(&workflow(&src));
    let err = out.error.unwrap_or_default();
    assert!(err.contains("max_node_visits=2"), "{err}");
}

#[test]
fn retries_use_backoff_and_stop_at_max_attempts() {
    let h = harness();
    h.llm.reply("work", Err(("rate limit", true)));
    h.llm.reply("work", Err(("rate limit", true)));
    let wf = workflow(
        r#"digraph R { start [shape=Mdiamond]; exit [shape=Msquare]
           work [max_retries=2]; start -> work -> exit }"#,
    );
    let out = h.run(&wf);
    assert_eq!(out.status, RunResult::Succeeded, "{:?}", out.error);
    assert_eq!(h.llm.calls_to("work"), 3);
    let sleeps = h.clock.sleeps.lock().clone();
    assert_eq!(sleeps.len(), 2);
    assert!(sleeps[0] >= Duration::from_millis(100) && sleeps[0] < Duration::from_millis(300));
    assert!(sleeps[1] >= Duration::from_millis(200) && sleeps[1] < Duration::from_millis(600));
    let kinds = h.kinds(&out.run_id, "work");
    assert_eq!(kinds.iter().filter(|k| *k == "stage.retrying").count(), 2);
    assert_eq!(out.path, ["start", "work", "exit"]);
    assert_eq!(
        out.context.get("internal.retry_count.work"),
        Some(&Value::from(2))
    );
}

#[test]
fn deterministic_failures_are_not_retried() {
    let h = harness();
    h.llm.reply("work", Err(("invalid api key", false)));
    let wf = workflow(
        r#"digraph R { start [shape=Mdiamond]; exit [shape=Msquare]
           work [max_retries=3]; start -> work -> exit }"#,
    );
    let out = h.run(&wf);
    assert_eq!(out.status, RunResult::Failed);
    assert_eq!(h.llm.calls_to("work"), 1);
    assert!(out.error.unwrap_or_default().contains("invalid api key"));
}

#[test]
fn allow_partial_and_auto_status() {
    let h = harness();
    h.llm.reply("p", Err(("flaky", true)));
    h.llm.reply("q", Err(("broken", false)));
    let wf = workflow(
        r#"digraph R { start [shape=Mdiamond]; exit [shape=Msquare]
           p [allow_partial=true]; q [auto_status=true]
           start -> p -> q -> exit }"#,
    );
    let out = h.run(&wf);
    assert_eq!(out.status, RunResult::Succeeded, "{:?}", out.error);
    assert_eq!(out.reason, EndReason::PartialSuccess);
    assert_eq!(out.context.get("outcome"), Some(&Value::from("succeeded")));
}

#[test]
fn goal_gate_jumps_to_retry_target_then_passes() {
    let h = harness();
    h.llm.reply(
        "g",
        Ok(r#"{"outcome": "failed", "failure_reason": "tests red"}"#),
    );
    let wf = workflow(
        r#"digraph G { start [shape=Mdiamond]; exit [shape=Msquare]
           g [goal_gate=true, retry_target=fix]
           start -> g
           g -> exit [condition="outcome=failed"]
           g -> exit
           fix -> g }"#,
    );
    let out = h.run(&wf);
    assert_eq!(out.status, RunResult::Succeeded, "{:?}", out.error);
    assert_eq!(out.path, ["start", "g", "fix", "g", "exit"]);
}

#[test]
fn goal_gate_without_target_fails_the_run() {
    let h = harness();
    h.llm.reply("g", Ok(r#"{"outcome": "failed"}"#));
    let wf = workflow(
        r#"digraph G { start [shape=Mdiamond]; exit [shape=Msquare]
           g [goal_gate=true]
           start -> g; g -> exit [condition="outcome=failed"] }"#,
    );
    let out = h.run(&wf);
    let err = out.error.unwrap_or_default();
    assert!(
        err.contains("goal gate `g`") && err.contains("no retry target"),
        "{err}"
    );
}

#[test]
fn success_without_route_fails_with_no_route() {
    let h = harness();
    let wf = workflow(
        r#"digraph N { start [shape=Mdiamond]; exit [shape=Msquare]
           start -> a; a -> exit [condition="context.never=1"] }"#,
    );
    let out = h.run(&wf);
    assert!(out.error.unwrap_or_default().contains("no route from `a`"));
}

#[test]
fn failure_signature_limit_stops_a_failing_loop() {
    let h = harness();
    for _ in 0..5 {
        h.llm.reply(
            "t",
            Ok(r#"{"outcome": "failed", "failure_reason": "same 123 error"}"#),
        );
    }
    let wf = workflow(
        r#"digraph S { start [shape=Mdiamond]; exit [shape=Msquare]
           start -> t; t -> fix [condition="outcome=failed"]; t -> exit; fix -> t }"#,
    );
    let out = h.run(&wf);
    assert_eq!(h.llm.calls_to("t"), 3);
    let err = out.error.unwrap_or_default();
    assert!(err.contains("loop_restart_signature_limit=3"), "{err}");
}

#[test]
fn loop_restart_resets_context_but_keeps_visits() {
    let h = harness();
    h.llm.reply("a", Ok(r#"{"context_updates": {"mark": 1}}"#));
    h.llm.reply("a", Ok(r#"{"context_updates": {"other": 1}}"#));
    let wf = workflow(
        r#"digraph L { start [shape=Mdiamond]; exit [shape=Msquare]
           start -> a
           a -> a [condition="context.mark=1", loop_restart=true]
           a -> exit }"#,
    );
    let out = h.run(&wf);
    assert_eq!(out.status, RunResult::Succeeded, "{:?}", out.error);
    assert!(!out.context.contains_key("mark"));
    assert!(out.context.contains_key("other"));
    assert!(out.context.contains_key("graph.goal"));
    assert_eq!(
        out.context.get("internal.node_visit_count"),
        Some(&Value::from(2))
    );
    assert!(h
        .kinds(&out.run_id, "a")
        .contains(&"loop.restart".to_string()));
}

#[test]
fn resume_continues_after_the_last_checkpoint() {
    let h = harness();
    let wf = workflow(
        r#"digraph R { start [shape=Mdiamond]; exit [shape=Msquare]
           start -> one -> two -> exit }"#,
    );
    let (first, second) = h.cancel_at_then_resume(&wf, "two");
    assert_eq!(first.reason, EndReason::Failed(FailureReason::Cancelled));
    assert_eq!(h.llm.calls_to("one"), 1);
    assert_eq!(h.llm.calls_to("two"), 2);
    assert_eq!(second.path, ["start", "one", "two", "exit"]);
}

#[test]
fn preferred_label_does_not_linger() {
    let h = harness();
    h.llm.reply("a", Ok(r#"{"preferred_next_label": "go"}"#));
    let wf = workflow(
        r#"digraph P { start [shape=Mdiamond]; exit [shape=Msquare]
           start -> a; a -> b [label="go"]; b -> exit }"#,
    );
    let out = h.run(&wf);
    assert_eq!(out.path, ["start", "a", "b", "exit"]);
    assert!(!out.context.contains_key("preferred_label"));
}

#[test]
fn large_values_are_stored_as_blobs_in_events() {
    let h = harness();
    let wf = workflow(
        r#"digraph B { start [shape=Mdiamond]; exit [shape=Msquare]
           big [shape=parallelogram, script="head -c 150000 /dev/zero | tr '\\0' a"]
           start -> big -> exit }"#,
    );
    let out = h.run(&wf);
    assert_eq!(out.status, RunResult::Succeeded, "{:?}", out.error);
    assert_eq!(
        out.context
            .get("command.output")
            .and_then(Value::as_str)
            .map(str::len),
        Some(150_000)
    );
    let events = h.events(&out.run_id);
    let completed = events.iter().find(|e| e.event == "command.completed");
    let stdout = completed
        .and_then(|e| e.properties.get("stdout"))
        .and_then(Value::as_str)
        .unwrap_or("");
    assert!(stdout.starts_with("blob://sha256/"), "{stdout}");
    let hex = stdout.trim_start_matches("blob://sha256/");
    let blob = h.store.get_blob(hex).ok().flatten().unwrap_or_default();
    assert_eq!(blob.len(), 150_000);
    let cp = events
        .iter()
        .rev()
        .find(|e| e.event == "checkpoint.completed");
    let v = cp
        .and_then(|e| e.properties.pointer("/context_values/command.output"))
        .and_then(Value::as_str)
        .unwrap_or("");
    assert!(v.starts_with("blob://sha256/"), "{v}");
}

#[test]
fn pause_holds_the_run_between_stages() {
    let h = harness();
    h.services.cancel.pause();
    let token = h.services.cancel.clone();
    let unpauser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        token.unpause();
    });
    let started = Instant::now();
    let out = h.run(&workflow(LINEAR));
    assert_eq!(out.status, RunResult::Succeeded);
    assert!(started.elapsed() >= Duration::from_millis(90));
    let _ = unpauser.join();
}

#[test]
fn node_timeout_abandons_non_command_handlers() {
    let mut h = harness();
    h.services.clock = Arc::new(SystemClock);
    let wf = workflow(
        r#"digraph W { start [shape=Mdiamond]; exit [shape=Msquare]
           nap [shape=insulator, duration=30s, timeout=100ms]
           start -> nap -> exit }"#,
    );
    let started = Instant::now();
    let out = h.run(&wf);
    assert!(started.elapsed() < Duration::from_secs(5));
    let err = out.error.unwrap_or_default();
    assert!(err.contains("timed out after 100ms"), "{err}");
    assert_eq!(out.reason, EndReason::Failed(FailureReason::TransientInfra));
}

#[test]
fn resume_closes_questions_left_open() {
    let h = harness();
    let wf = workflow(LINEAR);
    let row = h.store.create_run(NewRun::default());
    let id = row.map(|r| r.id).unwrap_or_default();
    let q = serde_json::json!({"question_id": "Q1", "question": "Ok?", "stage": "gate"});
    let _ = h.store.append(
        &id,
        crate::store::EventDraft::new("interview.started", q).node("gate"),
    );
    let opts = RunOptions::new(&id, std::env::temp_dir());
    let out = Engine::resume(&wf, &opts, &h.services);
    assert_eq!(out.status, RunResult::Succeeded, "{:?}", out.error);
    let interrupted = h
        .events(&id)
        .into_iter()
        .filter(|e| e.event == "interview.interrupted")
        .count();
    assert_eq!(interrupted, 1);
    let row = h.store.get_run(&id).ok().flatten();
    assert!(row.map(|r| r.questions.is_empty()).unwrap_or(false));
}

#[test]
fn llm_stages_get_the_compact_preamble_and_high_reasoning_effort_by_default() {
    let h = harness();
    let wf = workflow(
        r#"digraph F { goal="Ship it"
           start [shape=Mdiamond]; exit [shape=Msquare]
           plan [prompt="Plan"]; build [shape=parallelogram, script="echo built"]
           review [shape=tab, prompt="Review", reasoning_effort="low"]
           start -> plan -> build -> review -> exit }"#,
    );
    let out = h.run(&wf);
    assert_eq!(out.status, RunResult::Succeeded, "{:?}", out.error);
    let plan = h.llm.request("plan");
    assert_eq!(plan.reasoning_effort.as_deref(), Some("high"));
    assert_eq!(plan.preamble.as_deref(), Some("Goal: Ship it"));
    assert_eq!(plan.thread, None, "compact never continues a conversation");
    let review = h.llm.request("review");
    assert_eq!(review.reasoning_effort.as_deref(), Some("low"));
    let p = review.preamble.unwrap_or_default();
    assert!(p.contains("- plan (agent): succeeded"), "{p}");
    assert!(p.contains("- build (command): succeeded"), "{p}");
    assert!(
        p.contains("script: echo built") && p.contains("    built"),
        "{p}"
    );
    assert_eq!(
        out.context.get("internal.fidelity"),
        Some(&Value::from("compact"))
    );
}

#[test]
fn a_full_chain_without_thread_ids_is_one_conversation() {
    let h = harness();
    let wf = workflow(
        r#"digraph F { default_fidelity="full"
           start [shape=Mdiamond]; exit [shape=Msquare]
           a; b; c [thread_id="side"]; d
           start -> a -> b -> c -> d -> exit }"#,
    );
    let out = h.run(&wf);
    assert_eq!(out.status, RunResult::Succeeded, "{:?}", out.error);
    let thread = |n: &str| h.llm.request(n).thread;
    assert!(thread("a").is_some());
    assert_eq!(thread("a"), thread("b"), "b continues a");
    assert_ne!(
        thread("b"),
        thread("c"),
        "an explicit thread id starts its own"
    );
    assert_eq!(
        thread("c"),
        thread("d"),
        "d continues the thread of the stage before it"
    );
    // The preamble a `full` stage would use without a conversation is the summary:high one.
    let p = h.llm.request("b").preamble.unwrap_or_default();
    assert!(p.contains("Progress: 1 stage completed of 4"), "{p}");
    assert!(p.contains("> ok"), "summary:high quotes responses: {p}");
}

#[test]
fn parallel_branches_never_share_a_conversation() {
    let h = harness();
    let wf = workflow(
        r#"digraph P { default_fidelity="full"
           start [shape=Mdiamond]; exit [shape=Msquare]
           fork [shape=component]; join [shape=tripleoctagon]
           a [thread_id="shared"]; b [thread_id="shared"]; a2 [thread_id="shared"]; b2 [thread_id="shared"]
           start -> pre -> fork
           fork -> a [thread_id="shared"]; fork -> b
           a -> a2 -> join; b -> b2 -> join; join -> exit }"#,
    );
    let out = h.run(&wf);
    assert_eq!(out.status, RunResult::Succeeded, "{:?}", out.error);
    for first in ["a", "b"] {
        let r = h.llm.request(first);
        assert_eq!(r.thread, None, "{first}: full becomes summary:high");
        let p = r.preamble.unwrap_or_default();
        assert!(
            p.contains("Progress:") && p.contains("- pre (agent)"),
            "{p}"
        );
    }
    let (a2, b2) = (h.llm.request("a2").thread, h.llm.request("b2").thread);
    assert!(a2.is_some() && b2.is_some());
    assert_ne!(a2, b2, "same thread id, different branches");
    assert_ne!(a2, h.llm.request("pre").thread);
}

#[test]
fn a_loop_restart_starts_new_conversations() {
    let h = harness();
    h.llm.reply("a", Ok(r#"{"context_updates": {"again": 1}}"#));
    let wf = workflow(
        r#"digraph L { default_fidelity="full"; default_thread="main"
           start [shape=Mdiamond]; exit [shape=Msquare]
           start -> a
           a -> a [condition="context.again=1", loop_restart=true]
           a -> exit }"#,
    );
    let out = h.run(&wf);
    assert_eq!(out.status, RunResult::Succeeded, "{:?}", out.error);
    let threads: Vec<Option<String>> = h
        .llm
        .requests_to("a")
        .into_iter()
        .map(|r| r.thread)
        .collect();
    assert_eq!(threads.len(), 2);
    assert!(threads[0].is_some() && threads[1].is_some());
    assert_ne!(threads[0], threads[1]);
}

#[test]
fn resumed_runs_keep_the_history_their_preambles_show() {
    let h = harness();
    let wf = workflow(
        r#"digraph R { start [shape=Mdiamond]; exit [shape=Msquare]
           one [shape=parallelogram, script="echo first-output"]
           start -> one -> two -> exit }"#,
    );
    h.cancel_at_then_resume(&wf, "two");
    let resumed = h.llm.requests_to("two").pop().and_then(|r| r.preamble);
    let p = resumed.unwrap_or_default();
    assert!(p.contains("- one (command): succeeded"), "{p}");
    assert!(
        p.contains("first-output"),
        "the command's output survives the checkpoint: {p}"
    );
}

#[test]
fn a_child_workflow_stage_sees_its_managers_preamble_first() {
    let h = harness();
    let wf = workflow(
        r#"digraph M { goal="Parent goal"
           start [shape=Mdiamond]; exit [shape=Msquare]
           pre [prompt="Prep"]
           mgr [shape=house, manager.poll_interval="10ms",
                stack.child_dot_source="digraph C { start [shape=Mdiamond]; exit [shape=Msquare]; before [shape=parallelogram, script=\"true\"]; inner [prompt=\"Inner\"]; start -> before -> inner -> exit }"]
           start -> pre -> mgr -> exit }"#,
    );
    let out = h.run(&wf);
    assert_eq!(out.status, RunResult::Succeeded, "{:?}", out.error);
    let p = h.llm.request("mgr/inner").preamble.unwrap_or_default();
    let parent = p.find("- pre (agent): succeeded");
    let own = p.find("- before (command): succeeded");
    assert!(p.starts_with("Goal: Parent goal"), "{p}");
    assert!(parent.is_some() && own.is_some() && parent < own, "{p}");
}

/// The run store of a process that dies just before its `die_at`-th commit (counted from
/// 0): that commit and every later one store nothing. Records what each commit held.
struct DyingStore {
    inner: Arc<MemoryStore>,
    die_at: usize,
    commits: Mutex<Vec<Vec<String>>>,
}

impl DyingStore {
    /// Records a commit of `kinds`, or refuses it once the process has died.
    fn admit(&self, run_id: &str, kinds: Vec<String>) -> Result<(), StoreError> {
        let mut commits = self.commits.lock();
        if commits.len() >= self.die_at {
            return Err(StoreError::Corrupt {
                run_id: run_id.into(),
                reason: "the process died".into(),
            });
        }
        commits.push(kinds);
        Ok(())
    }
}

impl RunStore for DyingStore {
    fn create_run(&self, new: NewRun) -> Result<crate::store::RunRow, StoreError> {
        self.inner.create_run(new)
    }
    fn append(&self, run_id: &str, draft: EventDraft) -> Result<Event, StoreError> {
        self.admit(run_id, vec![draft.event.clone()])?;
        self.inner.append(run_id, draft)
    }
    fn append_all(&self, run_id: &str, drafts: Vec<EventDraft>) -> Result<Option<u64>, StoreError> {
        self.admit(run_id, drafts.iter().map(|d| d.event.clone()).collect())?;
        self.inner.append_all(run_id, drafts)
    }
    fn append_decided(
        &self,
        run_id: &str,
        decide: &mut dyn FnMut(&crate::store::RunRow) -> Vec<EventDraft>,
    ) -> Result<(crate::store::RunRow, Vec<Event>), StoreError> {
        self.inner.append_decided(run_id, decide)
    }
    fn get_run(&self, run_id: &str) -> Result<Option<crate::store::RunRow>, StoreError> {
        self.inner.get_run(run_id)
    }
    fn query_runs(
        &self,
        query: &crate::store::RunQuery,
    ) -> Result<Vec<crate::store::RunRow>, StoreError> {
        self.inner.query_runs(query)
    }
    fn count_runs(&self, query: &crate::store::RunQuery) -> Result<usize, StoreError> {
        self.inner.count_runs(query)
    }
    fn events(&self, run_id: &str, since_seq: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        self.inner.events(run_id, since_seq, limit)
    }
    fn events_raw(
        &self,
        run_id: &str,
        since_seq: u64,
        limit: usize,
    ) -> Result<Vec<crate::store::RawEvent>, StoreError> {
        self.inner.events_raw(run_id, since_seq, limit)
    }
    fn delete_run(&self, run_id: &str) -> Result<(), StoreError> {
        self.inner.delete_run(run_id)
    }
    fn tombstone(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        self.inner.tombstone(run_id)
    }
    fn import_run(
        &self,
        run_id: &str,
        lines: &[String],
    ) -> Result<crate::store::ImportOutcome, StoreError> {
        self.inner.import_run(run_id, lines)
    }
    fn put_blob(&self, bytes: &[u8]) -> Result<String, StoreError> {
        self.inner.put_blob(bytes)
    }
    fn get_blob(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.get_blob(id)
    }
    fn has_blob(&self, id: &str) -> Result<bool, StoreError> {
        self.inner.has_blob(id)
    }
    fn hub(&self) -> &crate::store::Hub {
        self.inner.hub()
    }
}

#[test]
fn a_no_op_stage_is_one_commit_and_a_command_stage_two() {
    let inner = Arc::new(MemoryStore::new());
    let store = Arc::new(DyingStore {
        inner: inner.clone(),
        die_at: usize::MAX,
        commits: Mutex::new(Vec::new()),
    });
    let wf = workflow(
        r#"digraph C {
            start [shape=Mdiamond]; exit [shape=Msquare]
            a [shape=diamond]; c [shape=parallelogram, script="true"]
            start -> a -> c -> exit
        }"#,
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let id = inner
        .create_run(NewRun::default())
        .map(|r| r.id)
        .unwrap_or_default();
    let out = Engine::run(
        &wf,
        &RunOptions::new(&id, dir.path().to_path_buf()),
        &Services::new(store.clone()),
    );
    assert_eq!(out.status, RunResult::Succeeded, "{:?}", out.error);
    let stage = [
        "stage.started",
        "stage.completed",
        "edge.selected",
        "checkpoint.completed",
    ];
    let commits = store.commits.lock().clone();
    assert_eq!(
        commits,
        [
            vec!["run.started"],
            vec!["run.running"],
            stage.to_vec(),
            stage.to_vec(),
            vec!["stage.started", "command.started"],
            vec![
                "command.completed",
                "stage.completed",
                "edge.selected",
                "checkpoint.completed"
            ],
            vec!["stage.started", "stage.completed"],
            vec!["run.completed"],
        ]
    );
}

#[test]
fn a_crash_before_any_commit_never_leaves_half_a_stage_and_resume_finishes() {
    let wf = workflow(LINEAR);
    // Commits of a whole run: run.started, run.running, three stages, the exit (then
    // run.completed: a crash before it re-records the exit, which no checkpoint follows).
    for die_at in 0..6 {
        let inner = Arc::new(MemoryStore::new());
        let dying = Arc::new(DyingStore {
            inner: inner.clone(),
            die_at,
            commits: Mutex::new(Vec::new()),
        });
        let id = inner
            .create_run(NewRun::default())
            .map(|r| r.id)
            .unwrap_or_default();
        let opts = RunOptions::new(&id, std::env::temp_dir());
        let first = Engine::run(&wf, &opts, &Services::new(dying));
        assert_eq!(first.status, RunResult::Failed, "died at commit {die_at}");
        let second = Engine::resume(&wf, &opts, &Services::new(inner.clone()));
        assert_eq!(second.status, RunResult::Succeeded, "{:?}", second.error);
        let events = inner.events(&id, 1, 10_000).unwrap_or_default();
        for node in ["start", "a", "b", "exit"] {
            let count = |kind: &str| {
                events
                    .iter()
                    .filter(|e| e.node_id.as_deref() == Some(node) && e.event == kind)
                    .count()
            };
            assert_eq!(
                (count("stage.started"), count("stage.completed")),
                (1, 1),
                "node {node} after a crash at commit {die_at}"
            );
        }
    }
}

#[test]
fn agent_stages_get_the_runs_mcp_servers_or_the_subset_they_name() {
    let h = harness();
    let def = |id: &str| crate::mcp::ServerDef {
        id: id.into(),
        display_name: None,
        description: None,
        transport: crate::mcp::Transport::Stdio {
            command: vec!["srv".into()],
            env: Default::default(),
        },
        startup_timeout_secs: 10,
        tool_timeout_secs: 60,
        required: false,
    };
    let wf = workflow(
        "digraph T { start [shape=Mdiamond] exit [shape=Msquare]
           all [prompt=\"x\"]
           some [prompt=\"x\", mcp_servers=\"git\"]
           none [prompt=\"x\", mcp_servers=\"\"]
           p [shape=tab, prompt=\"x\"]
           start -> all -> some -> none -> p -> exit }",
    );
    let row = h.store.create_run(NewRun::default()).map(|r| r.id);
    let mut opts = RunOptions::new(&row.unwrap_or_default(), std::env::temp_dir());
    opts.mcp_servers = vec![def("time"), def("git")];
    let out = Engine::run(&wf, &opts, &h.services);
    assert_eq!(out.status, RunResult::Succeeded, "{:?}", out.error);
    let ids = |node: &str| -> Vec<String> {
        h.llm
            .request(node)
            .mcp_servers
            .into_iter()
            .map(|s| s.id)
            .collect()
    };
    assert_eq!(ids("all"), ["time", "git"]);
    assert_eq!(ids("some"), ["git"]);
    assert!(ids("none").is_empty());
    assert!(ids("p").is_empty(), "prompt stages use no tools");

    // A name the run does not have fails the stage, naming what the run has.
    let wf = workflow(
        "digraph T { start [shape=Mdiamond] exit [shape=Msquare]
           a [prompt=\"x\", mcp_servers=\"jira\"]
           start -> a -> exit }",
    );
    let row = h.store.create_run(NewRun::default()).map(|r| r.id);
    let mut opts = RunOptions::new(&row.unwrap_or_default(), std::env::temp_dir());
    opts.mcp_servers = vec![def("time")];
    let out = Engine::run(&wf, &opts, &h.services);
    assert_eq!(out.status, RunResult::Failed);
    let err = out.error.unwrap_or_default();
    assert!(
        err.contains("`jira`") && err.contains("its servers: time"),
        "{err}"
    );
}
