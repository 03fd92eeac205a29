//! The environments catalog's tests: validation naming each field, provider refusals, the
//! seeded default's stored revision, run overrides and preflight.
//! Must not: start sandboxes (the server tests run real ones).

use super::*;
use crate::catalog::{Catalog, CatalogError};
use std::sync::Arc;

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => panic!("not an object"),
    }
}

fn fields(e: &Errors) -> Vec<&str> {
    e.iter().map(|i| i.field.as_str()).collect()
}

#[test]
fn the_seeded_default_is_valid_and_its_stored_revision_is_its_own() {
    let def = obj(seeded_default());
    let normal = Environments.validate("default", &def).unwrap();
    assert_eq!(Value::Object(normal.clone()), seeded_default());
    // The migration (store::schema, 10) stores this revision literally (worked out before
    // `env` became write-only; an entry's revision is only worked out again when it is
    // written, so the stored one stays current until then).
    let rev = crate::catalog::revision(&normal, &[], "");
    let dir = tempfile::tempdir().unwrap();
    let store = crate::store::SqliteStore::open(&dir.path().join("svc.db")).unwrap();
    let c = Catalog::open(Environments, Arc::new(store) as _).unwrap();
    let item = c.get("default").unwrap();
    assert_eq!(item.revision, rev);
    assert_eq!(Value::Object(item.definition.clone()), seeded_default());
}

#[test]
fn each_bad_field_is_named_with_its_fix() {
    let e = Environments
        .validate(
            "local",
            &obj(
                json!({"provider": "local", "network": "block", "image": "debian:12",
                        "resources": {"cpu": 0, "memory": "1MB", "pids": 2, "disk": "lots"},
                        "lifecycle": {"retention_hours": -1}, "labels": {"a": 1}, "colour": "red"}),
            ),
        )
        .unwrap_err();
    let f = fields(&e);
    for want in [
        "id",
        "colour",
        "resources.cpu",
        "resources.memory",
        "resources.pids",
        "resources.disk",
        "lifecycle.retention_hours",
        "labels.a",
    ] {
        assert!(f.contains(&want), "{want} missing from {e:?}");
    }
    // Provider problems are checked once the shape reads.
    let e = Environments
        .validate(
            "x",
            &obj(json!({"provider": "local", "network": "block", "image": "debian:12"})),
        )
        .unwrap_err();
    assert_eq!(fields(&e), ["image", "network"], "{e:?}");
    assert!(e[1].message.contains("use provider `container`"), "{e:?}");
    let e = Environments
        .validate("x", &obj(json!({"provider": "hosted"})))
        .unwrap_err();
    assert!(e[0].message.contains("not configured"), "{e:?}");
    let e = Environments.validate("x", &obj(json!({}))).unwrap_err();
    assert_eq!(fields(&e), ["provider"]);
}

#[test]
fn a_run_override_merges_by_key_and_is_checked() {
    let def = Environments
        .validate(
            "small",
            &obj(
                json!({"provider": "container", "resources": {"cpu": 1, "memory": "256MB"},
                        "labels": {"team": "a"}}),
            ),
        )
        .unwrap();
    let plan = resolve(
        "small",
        &def,
        Some(&obj(json!({"resources": {"memory": "1GB"}}))),
    )
    .unwrap()
    .plan;
    assert_eq!(plan["environment"], "small");
    assert_eq!(plan["provider"], "container");
    assert_eq!(plan["network"], true);
    assert_eq!(plan["resources"]["cpu"], 1);
    assert_eq!(plan["resources"]["memory"], 1u64 << 30);
    assert_eq!(plan["labels"]["team"], "a");
    let e = resolve(
        "small",
        &def,
        Some(&obj(json!({"provider": "local", "network": "block"}))),
    )
    .unwrap_err();
    assert_eq!(fields(&e), ["environment.network"]);
    let plain = resolve("small", &obj(json!({"provider": "local"})), None)
        .unwrap()
        .plan;
    assert_eq!(plain["resources"], Value::Null);
}

#[test]
fn preflight_lists_what_each_provider_would_refuse() {
    let def = Environments
        .validate(
            "blocked",
            &obj(json!({"provider": "container", "network": "block"})),
        )
        .unwrap();
    let p = preflight("blocked", &def);
    let by = |name: &str| {
        p["providers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["provider"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(by("container")["ok"], true);
    assert_eq!(by("local")["ok"], false);
    assert_eq!(by("local")["refused"][0]["field"], "network");
    assert_eq!(by("hosted")["ok"], false);
    assert_eq!(p["limits"], Runtime::host().name());
}

#[test]
fn local_cannot_be_created() {
    let c = Catalog::open(
        Environments,
        Arc::new(crate::store::MemoryCatalogs::default()) as _,
    )
    .unwrap();
    let e = c
        .create(br#"{"id": "local", "provider": "local"}"#)
        .unwrap_err();
    assert!(
        matches!(e, CatalogError::Invalid(ref v) if v[0].field == "id"),
        "{e:?}"
    );
    c.create(br#"{"id": "host", "provider": "local"}"#).unwrap();
}

#[test]
fn env_names_and_secret_references_are_checked_and_merged_by_key() {
    let e = Environments
        .validate(
            "x",
            &obj(json!({"provider": "local", "env": {
                "1BAD": "a", "SVC_RUN_ID": "b", "SESSION_SECRET": "c",
                "OPEN": "{{ secrets.A", "OTHER": "{{ env.HOME }}",
                "OWNED": "{{ secrets.CODEHOST_TOKEN }}", "FINE": "x {{ secrets.TOKEN }}"}})),
        )
        .unwrap_err();
    let f = fields(&e);
    for want in [
        "env.1BAD",
        "env.SVC_RUN_ID",
        "env.SESSION_SECRET",
        "env.OPEN",
        "env.OTHER",
        "env.OWNED",
    ] {
        assert!(f.contains(&want), "{want} missing from {e:?}");
    }
    assert!(!f.contains(&"env.FINE"), "{e:?}");
    let def = Environments
        .validate(
            "x",
            &obj(json!({"provider": "local",
                        "env": {"A": "1", "TOKEN": "{{ secrets.API_TOKEN }}"}})),
        )
        .unwrap();
    let r = resolve("x", &def, Some(&obj(json!({"env": {"A": "2", "B": "3"}})))).unwrap();
    assert_eq!(r.plan["env_keys"], json!(["A", "B", "TOKEN"]));
    assert!(!r.plan.to_string().contains("API_TOKEN"), "{}", r.plan);
    assert_eq!(r.env["A"], "2");
    assert_eq!(r.env["TOKEN"], "{{ secrets.API_TOKEN }}");
    // Expanded just before start, failing closed.
    let vault = |n: &str| (n == "API_TOKEN").then(|| "s3cret".to_string());
    let given = expand_env(&r.env, &vault).unwrap();
    assert!(
        given.contains(&("TOKEN".into(), "s3cret".into())),
        "{given:?}"
    );
    let mut missing = r.env.clone();
    missing.insert("M".into(), "{{ secrets.NOPE }}".into());
    let err = expand_env(&missing, &vault).unwrap_err();
    assert_eq!(err.name, "M");
    assert!(err.reason.contains("NOPE"), "{err}");
    let owned = std::collections::BTreeMap::from([(
        "K".to_string(),
        "{{ secrets.SESSION_SECRET }}".to_string(),
    )]);
    assert!(expand_env(&owned, &|_| Some("leak".into())).is_err());
}

#[test]
fn stop_on_terminal_and_a_retention_contradict() {
    let e = Environments
        .validate(
            "x",
            &obj(json!({"provider": "local",
                        "lifecycle": {"stop_on_terminal": true, "retention_hours": 5}})),
        )
        .unwrap_err();
    assert_eq!(fields(&e), ["lifecycle.retention_hours"]);
    Environments
        .validate(
            "x",
            &obj(json!({"provider": "local", "lifecycle": {"stop_on_terminal": true}})),
        )
        .unwrap();
}
