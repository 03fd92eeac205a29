//! Run semantics over the real server: the run's goal and model are what the engine uses,
//! every LLM call's exact text is recorded (`stage.prompt`) and shown per stage, and the
//! lifecycle rules of issue 14 (resume, retry, children, dead runs, pending controls).

use crate::support;
use crate::support::llm::{reply, text, Recorded, ScriptedServer};
use crate::support::server::*;
use serde_json::{json, Value};
use svc::internal::llm::{Provider, Usage};
use svc::internal::test_tools::{require, Tool};

const SMALL: Usage = support::llm::SMALL_USAGE;

/// A scripted Anthropic endpoint answering every call with `answer`.
fn always(answer: &'static str) -> ScriptedServer {
    ScriptedServer::start_with(move |_, r: &Recorded| {
        reply(
            Provider::Anthropic,
            &text(answer),
            SMALL,
            support::llm::streamed(r),
        )
    })
}

fn start(s: &Server, id: &str, body: &str) -> Resp {
    s.post(&format!("/api/v1/runs/{id}/start"), body)
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

const GOAL_FLOW: &str = r#"digraph g {
  goal="the graph's goal"
  start [shape=Mdiamond]; exit [shape=Msquare]
  ask [shape=tab, prompt="Work towards: $goal"]
  own [shape=tab, model="claude-haiku-4-5", prompt="Second"]
  env [shape=parallelogram, script="echo \"$SVC_GOAL\""]
  start -> ask -> own -> env -> exit
}"#;

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn the_runs_goal_and_model_are_what_the_engine_uses() {
    require(Tool::Git);
    let llm = always("done");
    let s = served_anthropic(
        &llm.base,
        "[run]\ngoal = \"the settings goal\"\n[run.model]\nname = \"claude-opus-4-6\"\n",
    );
    // Create body goal and model win over the graph's goal and `[run]` defaults.
    let id = run_to_end(
        &s,
        &json!({"workflow": package(GOAL_FLOW), "goal": "the body goal",
               "model": {"provider": "anthropic", "name": "claude-sonnet-4-6"}}),
    );
    let run = s.get(&format!("/api/v1/runs/{id}")).json();
    assert_eq!(run["lifecycle"]["status"]["kind"], "succeeded", "{run}");
    let evs = run_events(&s, &id);
    let started = of_kind(&evs, "run.started");
    assert_eq!(started[0]["properties"]["goal"], "the body goal");
    let prompts = of_kind(&evs, "stage.prompt");
    assert_eq!(prompts.len(), 2, "{evs:?}");
    let first = &prompts[0]["properties"];
    let text = first["text"].as_str().unwrap_or("");
    // The preamble (compact: the goal) then the expanded prompt, exactly as sent.
    assert!(text.contains("Goal: the body goal"), "{text}");
    assert!(text.ends_with("Work towards: the body goal"), "{text}");
    assert_eq!(first["prompt"], "Work towards: the body goal");
    assert_eq!(first["fidelity"], "compact");
    assert_eq!(first["model"], "claude-sonnet-4-6");
    // The node that names its own model keeps it.
    assert_eq!(prompts[1]["properties"]["model"], "claude-haiku-4-5");
    let reqs = llm.requests();
    let sent: Vec<&str> = reqs
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(sent, ["claude-sonnet-4-6", "claude-haiku-4-5"]);
    // The recorded text is the user message the provider received.
    let user = support::llm::user_texts(Provider::Anthropic, &reqs[0].body);
    assert_eq!(user.last().map(String::as_str), Some(text));
    // $SVC_GOAL of a command stage.
    let env = of_kind(&evs, "stage.completed")
        .into_iter()
        .find(|e| e["node_id"] == "env")
        .cloned()
        .unwrap_or(Value::Null);
    assert!(env.to_string().contains("the body goal"), "{env}");
    // Run.models: the models that actually ran.
    assert_eq!(
        run["models"],
        json!([{"provider": "anthropic", "name": "claude-sonnet-4-6"},
               {"provider": "anthropic", "name": "claude-haiku-4-5"}])
    );

    // The stages API shows the same text and the response.
    let st = s.get(&format!("/api/v1/runs/{id}/stages/ask"));
    assert_eq!(st.status, 200, "{}", st.text());
    let visit = &st.json()["visits"][0];
    assert_eq!(visit["prompts"][0]["text"], text);
    assert_eq!(visit["response"], "done");
    assert_eq!(visit["outcome"], "succeeded");
    let all = s.get(&format!("/api/v1/runs/{id}/stages")).json();
    let nodes: Vec<&str> = all["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["node_id"].as_str())
        .collect();
    assert_eq!(nodes, ["start", "ask", "own", "env", "exit"]);
    assert_error(&s.get(&format!("/api/v1/runs/{id}/stages/nope")), 404);

    // Without goal and model in the body, `[run] goal` and `[run.model]` apply.
    let id = run_to_end(&s, &run_body(GOAL_FLOW));
    let evs = run_events(&s, &id);
    assert_eq!(
        of_kind(&evs, "run.started")[0]["properties"]["goal"],
        "the settings goal"
    );
    let prompts = of_kind(&evs, "stage.prompt");
    assert_eq!(prompts[0]["properties"]["model"], "claude-opus-4-6");
    assert_eq!(
        prompts[0]["properties"]["prompt"],
        "Work towards: the settings goal"
    );
}

/// first runs once; second blocks until `release` exists; third reads first's context.
const RESUMABLE: &str = r#"digraph r {
  start [shape=Mdiamond]; exit [shape=Msquare]
  first [shape=parallelogram, output_schema="routing", script="echo x >> first.txt; echo '{\"context_updates\": {\"from_first\": \"kept\"}}'"]
  second [shape=parallelogram, script="echo x >> second.txt; touch second.started; while [ ! -f \"$SVC_INPUT_RELEASE\" ]; do sleep 0.05; done"]
  third [shape=parallelogram, script="echo \"$SVC_CONTEXT_FROM_FIRST\" >> third.txt"]
  start -> first -> second -> third -> exit
}"#;

fn scratch(s: &Server, id: &str) -> std::path::PathBuf {
    s.path().join("workspaces").join(id)
}

fn lines(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_cancelled_run_resumes_from_its_checkpoint_and_retry_makes_a_new_run() {
    require(Tool::Git);
    let s = Server::start();
    // The release flag lives outside the workspace: a resume restores the workspace to its
    // checkpoint.
    let flags = tempfile::tempdir().expect("temp dir");
    let release = flags.path().join("release");
    let id = create_run(
        &s,
        &json!({"workflow": package(RESUMABLE), "inputs": {"who": "me", "release": release.display().to_string()}}),
    );
    start_run(&s, &id);
    let dir = scratch(&s, &id);
    wait_for(30, "the second stage", || {
        dir.join("second.started").exists().then_some(())
    });
    let c = s.post(&format!("/api/v1/runs/{id}/cancel"), "");
    assert_eq!(c.json()["lifecycle"]["pending_control"], "cancel");
    assert_eq!(wait_kind(&s, &id, &["failed"]), "failed");
    let run = s.get(&format!("/api/v1/runs/{id}")).json();
    assert_eq!(run["lifecycle"]["status"]["reason"], "cancelled");

    // The same rule as `svc resume`: a cancelled run continues at the interrupted stage.
    std::fs::write(&release, "").expect("release");
    let r = start(&s, &id, r#"{"resume": true}"#);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(wait_kind(&s, &id, &["succeeded", "failed"]), "succeeded");
    assert_eq!(lines(&dir.join("first.txt")), 1, "first must not run again");
    // The interrupted attempt's line was undone with the workspace restore; the rerun wrote one.
    assert_eq!(lines(&dir.join("second.txt")), 1);
    assert_eq!(
        std::fs::read_to_string(dir.join("third.txt")).unwrap_or_default(),
        "kept\n"
    );
    // A succeeded run can be neither resumed nor retried.
    assert_error(&start(&s, &id, r#"{"resume": true}"#), 409);
    assert_error(&s.post(&format!("/api/v1/runs/{id}/retry"), ""), 409);

    // Retry: a failed run gives a new run from the same version and inputs, started.
    let failing = "digraph f { start [shape=Mdiamond]; exit [shape=Msquare]; boom [shape=parallelogram, script=\"echo $SVC_INPUT_WHO; exit 3\"]; start -> boom -> exit }";
    let old = run_to_end(
        &s,
        &json!({"workflow": package(failing), "inputs": {"who": "me"}, "goal": "try"}),
    );
    let before = s.get(&format!("/api/v1/runs/{old}")).json();
    assert_eq!(before["lifecycle"]["status"]["kind"], "failed");
    let r = s.post(&format!("/api/v1/runs/{old}/retry"), "");
    assert_eq!(r.status, 201, "{}", r.text());
    let new = r.json();
    let new_id = new["id"].as_str().unwrap_or("").to_string();
    assert_ne!(new_id, old);
    assert_eq!(new["retried_from"], old.as_str());
    assert_eq!(new["goal"], "try");
    assert_eq!(new["workflow"], before["workflow"]);
    assert_eq!(wait_kind(&s, &new_id, &["succeeded", "failed"]), "failed");
    let out = run_events(&s, &new_id)
        .into_iter()
        .find(|e| e["event"] == "command.completed")
        .unwrap_or(Value::Null);
    assert_eq!(out["properties"]["stdout"], "me\n", "same inputs");
    assert_error(
        &s.post("/api/v1/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/retry", ""),
        404,
    );
}

const MANAGER: &str = r#"digraph m {
  start [shape=Mdiamond]; exit [shape=Msquare]
  mgr [shape=house, manager.poll_interval=50ms, stack.child_dot_source="digraph c { start [shape=Mdiamond]; exit [shape=Msquare]; work [shape=parallelogram, script=\"echo ran >> child.txt\"]; start -> work -> exit }"]
  start -> mgr -> exit
}"#;

/// The child run the manager stage of `parent` created (from `stage.child.created`).
fn child_of(s: &Server, parent: &str) -> String {
    wait_for(30, "the child run", || {
        run_events(s, parent)
            .iter()
            .find(|e| e["event"] == "stage.child.created")
            .and_then(|e| e["properties"]["child_run_id"].as_str().map(String::from))
    })
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn manager_children_are_runs_that_wait_for_approval() {
    require(Tool::Git);
    let s = Server::with(Opts {
        settings: Some(
            "[server.auth]\nmethods = [\"dev-token\"]\n[run]\nchild_approval = \"required\"\n",
        ),
        ..Opts::default()
    });
    let parent = create_run(
        &s,
        &json!({"workflow": package(MANAGER), "goal": "parent goal"}),
    );
    start_run(&s, &parent);
    let child = child_of(&s, &parent);
    assert_eq!(wait_kind(&s, &child, &["pending"]), "pending");
    let c = s.get(&format!("/api/v1/runs/{child}")).json();
    assert_eq!(c["parent_id"], parent.as_str());
    assert_eq!(c["lifecycle"]["status"]["reason"], "approval_required");
    assert_eq!(c["lifecycle"]["approval"]["state"], "pending");
    assert_eq!(c["goal"], "parent goal");
    let p = s.get(&format!("/api/v1/runs/{parent}")).json();
    assert_eq!(p["children_count"], 1);
    assert_eq!(p["lifecycle"]["status"]["kind"], "running");
    let dir = scratch(&s, &parent);
    assert_eq!(lines(&dir.join("child.txt")), 0, "the child waits");

    // Approve: the child runs, the manager stage and the parent succeed.
    let a = s.post(&format!("/api/v1/runs/{child}/approve"), "");
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        wait_kind(&s, &parent, &["succeeded", "failed"]),
        "succeeded"
    );
    assert_eq!(wait_kind(&s, &child, &["succeeded", "failed"]), "succeeded");
    assert_eq!(lines(&dir.join("child.txt")), 1);
    let c = s.get(&format!("/api/v1/runs/{child}")).json();
    assert_eq!(c["lifecycle"]["approval"]["state"], "approved");
    // The child's stream holds its stages (node ids relative to it); the parent's has
    // them too, as `mgr/<node>`.
    let own = run_events(&s, &child);
    assert!(
        own.iter()
            .any(|e| e["event"] == "stage.completed" && e["node_id"] == "work"),
        "{own:?}"
    );
    assert!(run_events(&s, &parent)
        .iter()
        .any(|e| e["event"] == "stage.completed" && e["node_id"] == "mgr/work"));
    let st = s.get(&format!("/api/v1/runs/{child}/stages/work"));
    assert_eq!(st.status, 200, "{}", st.text());
    let visit = &st.json()["visits"][0];
    assert_eq!(visit["outcome"], "succeeded");
    assert_eq!(visit["command"]["exit_code"], 0);

    // Deny: the manager stage fails with the reason.
    let parent = create_run(&s, &run_body(MANAGER));
    start_run(&s, &parent);
    let child = child_of(&s, &parent);
    wait_kind(&s, &child, &["pending"]);
    let d = s.post(
        &format!("/api/v1/runs/{child}/deny"),
        &json!({"reason": "not this week"}).to_string(),
    );
    assert_eq!(d.status, 200, "{}", d.text());
    assert_eq!(wait_kind(&s, &parent, &["succeeded", "failed"]), "failed");
    let p = s.get(&format!("/api/v1/runs/{parent}")).json();
    let err = p["lifecycle"]["error"]["message"].as_str().unwrap_or("");
    assert!(err.contains("approval denied: not this week"), "{err}");
    let c = s.get(&format!("/api/v1/runs/{child}")).json();
    assert_eq!(c["lifecycle"]["status"]["reason"], "approval_denied");
    assert_eq!(lines(&scratch(&s, &parent).join("child.txt")), 0);
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_child_workflow_from_a_package_dependency_runs() {
    require(Tool::Git);
    let s = Server::start();
    let child = "digraph lib { start [shape=Mdiamond]; exit [shape=Msquare]; work [shape=parallelogram, script=\"echo from-dependency >> dep.txt\"]; start -> work -> exit }";
    let r = s.post(
        "/api/v1/workflow-versions",
        &json!({"entrypoint": "lib/child.dot", "files": {"lib/child.dot": child}}).to_string(),
    );
    assert!(r.status == 201 || r.status == 200, "{}", r.text());
    let dep = r.json()["id"].as_str().unwrap_or("").to_string();
    for named in [dep.as_str(), "lib/child.dot"] {
        let dot = format!(
            "digraph p {{ start [shape=Mdiamond]; exit [shape=Msquare]; mgr [shape=house, manager.poll_interval=50ms, stack.child_workflow=\"{named}\"]; start -> mgr -> exit }}"
        );
        let pkg =
            json!({"entrypoint": "main.dot", "files": {"main.dot": dot}, "dependencies": [dep]});
        let id = run_to_end(&s, &json!({"workflow": pkg}));
        let run = s.get(&format!("/api/v1/runs/{id}")).json();
        assert_eq!(
            run["lifecycle"]["status"]["kind"], "succeeded",
            "{named}: {run}"
        );
        assert_eq!(
            std::fs::read_to_string(scratch(&s, &id).join("dep.txt")).unwrap_or_default(),
            "from-dependency\n"
        );
        assert_eq!(run["children_count"], 1);
    }
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_continued_full_thread_records_only_the_new_message() {
    require(Tool::Git);
    let llm = always("noted");
    let s = served_anthropic(&llm.base, "");
    let dot = r#"digraph t {
  goal="thread goal"
  start [shape=Mdiamond]; exit [shape=Msquare]
  a [shape=tab, fidelity="full", thread_id="t", prompt="First: $goal"]
  b [shape=tab, fidelity="full", thread_id="t", prompt="Second"]
  c [shape=tab, fidelity="truncate", prompt="Third"]
  start -> a -> b -> c -> exit
}"#;
    let id = run_to_end(&s, &run_body(dot));
    let evs = run_events(&s, &id);
    let prompts: Vec<&Value> = of_kind(&evs, "stage.prompt")
        .into_iter()
        .map(|e| &e["properties"])
        .collect();
    assert_eq!(prompts.len(), 3, "{evs:?}");
    // The first call of a thread has nothing to continue: a preamble, then the prompt.
    assert_eq!(prompts[0]["continued"], false);
    assert_eq!(prompts[0]["fidelity"], "full");
    let first = prompts[0]["text"].as_str().unwrap_or("");
    assert!(
        first.contains("Goal: thread goal") && first.ends_with("First: thread goal"),
        "{first}"
    );
    // The second continues it: the model gets the earlier messages and this text alone.
    assert_eq!(prompts[1]["continued"], true);
    assert_eq!(prompts[1]["text"], "Second");
    let reqs = llm.requests();
    let seen = support::llm::user_texts(Provider::Anthropic, &reqs[1].body);
    assert_eq!(seen.first().map(String::as_str), Some(first));
    assert_eq!(seen.last().map(String::as_str), Some("Second"));
    // truncate: goal and nothing else before the prompt.
    assert_eq!(prompts[2]["fidelity"], "truncate");
    let third = prompts[2]["text"].as_str().unwrap_or("");
    assert!(
        third.ends_with("Third") && third.contains("thread goal"),
        "{third}"
    );
    assert!(!third.contains("First"), "{third}");
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_child_whose_parent_ended_cannot_be_approved_and_is_dead() {
    require(Tool::Git);
    let settings =
        "[server.auth]\nmethods = [\"dev-token\"]\n[run]\nchild_approval = \"required\"\n";
    let s = Server::with(Opts {
        settings: Some(settings),
        ..Opts::default()
    });
    let parent = create_run(&s, &run_body(MANAGER));
    start_run(&s, &parent);
    let child = child_of(&s, &parent);
    wait_kind(&s, &child, &["pending"]);
    // The server stops while the child waits, and the next start does not resume
    // interrupted runs: the parent fails, nobody waits for the child.
    let dir = s.kill();
    std::fs::write(
        dir.path().join("settings.toml"),
        format!("{settings}[server.recovery]\nresume_interrupted = false\n"),
    )
    .expect("settings");
    let s = Server::with(Opts {
        dir: Some(dir),
        ..Opts::default()
    });
    assert_eq!(wait_kind(&s, &parent, &["failed", "dead"]), "failed");
    let c = s.get(&format!("/api/v1/runs/{child}")).json();
    assert_eq!(c["lifecycle"]["status"]["kind"], "dead", "{c}");
    assert!(c["lifecycle"]["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains(&parent));
    let r = s.post(&format!("/api/v1/runs/{child}/approve"), "");
    assert_error(&r, 409);
}

/// With crash recovery on, the interrupted parent resumes and its manager stage runs again,
/// asking approval for a new child; the child that waited before the crash is `dead` (its
/// engine is gone), and approving the new one lets the parent finish.
#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_resumed_manager_asks_again_with_a_new_child() {
    require(Tool::Git);
    let settings =
        "[server.auth]\nmethods = [\"dev-token\"]\n[run]\nchild_approval = \"required\"\n";
    let s = Server::with(Opts {
        settings: Some(settings),
        ..Opts::default()
    });
    let parent = create_run(&s, &run_body(MANAGER));
    start_run(&s, &parent);
    let old = child_of(&s, &parent);
    wait_kind(&s, &old, &["pending"]);
    let dir = s.kill();
    let s = Server::with(Opts {
        dir: Some(dir),
        ..Opts::default()
    });
    let c = s.get(&format!("/api/v1/runs/{old}")).json();
    assert_eq!(c["lifecycle"]["status"]["kind"], "dead", "{c}");
    let new = wait_for(30, "a new child run", || {
        run_events(&s, &parent)
            .iter()
            .filter(|e| e["event"] == "stage.child.created")
            .filter_map(|e| e["properties"]["child_run_id"].as_str().map(String::from))
            .find(|id| *id != old)
    });
    wait_kind(&s, &new, &["pending"]);
    assert_eq!(
        s.post(&format!("/api/v1/runs/{new}/approve"), "").status,
        200
    );
    assert_eq!(
        wait_kind(&s, &parent, &["succeeded", "failed"]),
        "succeeded"
    );
}
