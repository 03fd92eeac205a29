//! The server's executor runs prompt stages against a real provider client: the key comes
//! from the state directory's vault (stored with `svc secrets set` while the server runs)
//! and the endpoint from `settings.toml`.

mod llm_common;
mod server_support;

use llm_common::{reply, text, Recorded, ScriptedServer};
use serde_json::{json, Value};
use server_support::*;
use svc::llm::{Provider, Usage};

#[test]
fn server_runs_prompt_stages_with_vault_keys() {
    let llm = ScriptedServer::start_with(|n, r: &Recorded| {
        let stream = r.body["stream"].as_bool().unwrap_or(false);
        let usage = Usage {
            input: 10,
            output: 5,
            ..Usage::default()
        };
        match n {
            0 => reply(Provider::Anthropic, &text("served answer"), usage, stream),
            _ => llm_common::Reply::error(500, json!({"error": {"message": "exhausted"}})),
        }
    });
    let settings = format!(
        "[server.auth]\nmethods = [\"dev-token\"]\n[llm.providers.anthropic]\nbase_url = \"{}\"\n",
        llm.base
    );
    let s = Server::with(Opts {
        settings: Some(&settings),
        ..Opts::default()
    });
    let o = std::process::Command::new(bin())
        .args([
            "secrets",
            "set",
            "ANTHROPIC_API_KEY",
            "served-key",
            "--state-dir",
        ])
        .arg(s.path())
        .output()
        .expect("svc secrets set");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let dot = r#"digraph p {
  start [shape=Mdiamond]; exit [shape=Msquare]
  ask [shape=tab, prompt="Answer"]
  start -> ask -> exit
}"#;
    let r = s.post(
        "/api/v1/runs",
        &json!({"workflow": package(dot)}).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap_or("").to_string();
    let started = s.post(&format!("/api/v1/runs/{id}/start"), "");
    assert_eq!(started.status, 200, "{}", started.text());
    wait_for(30, "the run to finish", || {
        let st = s.get(&format!("/api/v1/runs/{id}")).json()["lifecycle"]["status"]["kind"].clone();
        (st == "succeeded" || st == "failed").then_some(())
    });
    let evs = s
        .get(&format!("/api/v1/runs/{id}/events?limit=1000"))
        .json();
    let done = evs["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["event"] == "stage.completed" && e["node_id"] == "ask")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(done["properties"]["response"], "served answer", "{evs}");
    assert_eq!(done["properties"]["usage"]["tokens"]["input"], 10, "{done}");
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].header("x-api-key"), Some("served-key"));
}
