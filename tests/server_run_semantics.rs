//! Run semantics over the real server: the run's goal and model are what the engine uses,
//! every LLM call's exact text is recorded (`stage.prompt`) and shown per stage, and the
//! lifecycle rules of issue 14 (resume, retry, children, dead runs, pending controls).

mod llm_common;
mod server_support;

use llm_common::{reply, text, Recorded, ScriptedServer};
use serde_json::{json, Value};
use server_support::*;
use svc::llm::{Provider, Usage};

const SMALL: Usage = Usage {
    input: 10,
    output: 5,
    reasoning: 0,
    cache_read: 0,
    cache_write: 0,
};

/// A scripted Anthropic endpoint answering every call with `answer`.
fn always(answer: &'static str) -> ScriptedServer {
    ScriptedServer::start_with(move |_, r: &Recorded| {
        reply(
            Provider::Anthropic,
            &text(answer),
            SMALL,
            llm_common::streamed(r),
        )
    })
}

fn create(s: &Server, body: Value) -> String {
    let r = s.post("/api/v1/runs", &body.to_string());
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()["id"].as_str().unwrap_or("").to_string()
}

fn start(s: &Server, id: &str, body: &str) -> Resp {
    s.post(&format!("/api/v1/runs/{id}/start"), body)
}

fn run_to_end(s: &Server, body: Value) -> String {
    let id = create(s, body);
    let r = start(s, &id, "");
    assert_eq!(r.status, 200, "{}", r.text());
    wait_kind(s, &id, &["succeeded", "failed", "dead"]);
    id
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
fn the_runs_goal_and_model_are_what_the_engine_uses() {
    let llm = always("done");
    let s = served_anthropic(
        &llm.base,
        "[run]\ngoal = \"the settings goal\"\n[run.model]\nname = \"claude-opus-4-6\"\n",
    );
    // Create body goal and model win over the graph's goal and `[run]` defaults.
    let id = run_to_end(
        &s,
        json!({"workflow": package(GOAL_FLOW), "goal": "the body goal",
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
    let user = llm_common::user_texts(Provider::Anthropic, &reqs[0].body);
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
    let id = run_to_end(&s, json!({"workflow": package(GOAL_FLOW)}));
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
