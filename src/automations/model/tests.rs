//! Automation definitions: what validation accepts and refuses, naming the field.
//! Must not: touch the store or a clock.

use super::*;

const V: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

fn kind() -> Automations {
    Automations::new(|id| id == V)
}

fn check(def: Value) -> Result<Map<String, Value>, Errors> {
    kind().validate("nightly", def.as_object().unwrap())
}

fn fields(def: Value) -> Vec<String> {
    check(def)
        .unwrap_err()
        .into_iter()
        .map(|e| e.field)
        .collect()
}

#[test]
fn defaults_are_written_out() {
    let out = check(json!({
        "name": "Nightly",
        "target": {"workflow_version_id": V},
        "triggers": [{"id": "t", "kind": "schedule", "expression": "0 2 * * 2"}]
    }))
    .unwrap();
    assert_eq!(
        out["policies"],
        json!({"misfire": "fire_once", "overlap": "allow"})
    );
    assert_eq!(out["triggers"][0]["timezone"], "UTC");
    assert_eq!(out["triggers"][0]["enabled"], true);
    assert_eq!(out["description"], Value::Null);
    assert_eq!(out["inputs"], json!({}));
    // Validating the stored form again changes nothing.
    assert_eq!(check(Value::Object(out.clone())).unwrap(), out);
}

#[test]
fn repository_targets() {
    let out = check(json!({
        "name": "From the repo",
        "target": {"repository": {"origin_url": "https://example.com/o/r.git"}, "workflow": "flows/review.dot"},
        "triggers": []
    }))
    .unwrap();
    assert_eq!(out["target"]["repository"]["ref"], "main");
    assert_eq!(
        fields(
            json!({"name": "x", "target": {"repository": {"origin_url": "u", "ref": "--upload-pack=x"}, "workflow": "../a.dot"}, "triggers": []})
        ),
        ["target.workflow", "target.repository.ref"]
    );
}

#[test]
fn each_bad_field_is_named() {
    let cases = [
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [{"id": "t", "kind": "schedule", "expression": "0 0 2 * * 2"}]}),
            "triggers[0].expression",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [{"id": "t", "kind": "schedule", "expression": "not cron"}]}),
            "triggers[0].expression",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [{"id": "t", "kind": "schedule", "expression": "* * * * *", "timezone": "Europe/Atlantis"}]}),
            "triggers[0].timezone",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": "b".repeat(64)}, "triggers": []}),
            "target.workflow_version_id",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [{"id": "a", "kind": "api"}, {"id": "a", "kind": "schedule", "expression": "* * * * *"}]}),
            "triggers[1].id",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [{"id": "a", "kind": "api"}, {"id": "b", "kind": "api"}]}),
            "triggers[1].kind",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [{"id": "Bad Id", "kind": "api"}]}),
            "triggers[0].id",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [{"id": "h", "kind": "webhook", "secret": "0123456789abcdef", "inputs": {"pr": "$.pull_request..number"}}]}),
            "triggers[0].inputs.pr",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [{"id": "h", "kind": "webhook", "secret": "short"}]}),
            "triggers[0].secret",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [{"id": "h", "kind": "webhook"}]}),
            "triggers[0].secret",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [{"id": "c", "kind": "codehost", "events": ["push", "fork"]}]}),
            "triggers[0].events[1]",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [{"id": "c", "kind": "cron"}]}),
            "triggers[0].kind",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [], "policies": {"overlap": "queue"}}),
            "policies.overlap",
        ),
        (
            json!({"name": " ", "target": {"workflow_version_id": V}, "triggers": []}),
            "name",
        ),
        (json!({"name": "x", "target": {}, "triggers": []}), "target"),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [], "sandbox": {"provider": "docker"}}),
            "sandbox.provider",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [], "colour": "red"}),
            "colour",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [], "environment": 3}),
            "environment",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [], "environment": "Not_A_Slug"}),
            "environment",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [], "environment": {"resources": {}}}),
            "environment.id",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [], "environment": {"id": "small", "env": {"T": "x"}}}),
            "environment.env",
        ),
        (
            json!({"name": "x", "target": {"workflow_version_id": V}, "triggers": [],
                   "environment": "small", "sandbox": {"provider": "local"}}),
            "environment",
        ),
    ];
    for (def, field) in cases {
        assert_eq!(fields(def.clone()), [field], "{def}");
    }
}

#[test]
fn the_typed_form() {
    let k = kind();
    let def = check(json!({
        "name": "All kinds",
        "target": {"workflow_version_id": V},
        "triggers": [
            {"id": "manual", "kind": "api", "enabled": false},
            {"id": "tue", "kind": "schedule", "expression": "0 2 * * 2", "timezone": "Europe/Berlin"},
            {"id": "hook", "kind": "webhook", "secret": "0123456789abcdef", "inputs": {"n": "$.n", "env": "prod"}},
            {"id": "prs", "kind": "codehost", "events": ["pull_request.opened"], "filter": {"labels": ["svc"]}}
        ],
        "policies": {"misfire": "skip", "overlap": "queue_one"}
    }))
    .unwrap();
    let a = k.typed("nightly", &def).unwrap();
    assert_eq!(a.misfire, Misfire::Skip);
    assert_eq!(a.overlap, Overlap::QueueOne);
    assert!(a.api_trigger().is_none(), "the api trigger is disabled");
    let kinds: Vec<TriggerKind> = a.triggers.iter().map(Trigger::kind).collect();
    assert_eq!(kinds, TriggerKind::ALL);
    assert!(
        matches!(&a.trigger("prs").unwrap().spec, TriggerSpec::Codehost { filter, .. } if filter.labels == ["svc"])
    );
}
