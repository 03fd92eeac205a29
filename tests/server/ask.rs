//! Ask (opgroups 4): `Run.ask_svc` readiness as a run's sandbox goes from planned to ready and
//! as a provider key comes and goes.

use crate::support::server::*;
use serde_json::{json, Value};
use svc::test_tools::{require, Tool};

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
        svc::llm::Provider::Anthropic.default_model()
    );
    // The create response and the start response carry it too (every Run response).
    let created = create_run_json(&s, &run_body(HELLO_FLOW));
    assert_eq!(
        created["ask_svc"]["unavailable_reason"],
        "sandbox_not_ready"
    );
}
