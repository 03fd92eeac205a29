//! Edge conditions: parsing and evaluating never panic, and the printed text parses again
//! to a condition that behaves the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map};
use svc::workflow::condition::{Condition, MapEnv};

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(c) = Condition::parse(src) else {
        return;
    };
    let empty = Map::new();
    let env = MapEnv {
        outcome: "",
        preferred_label: "",
        context: &empty,
    };
    let verdict = c.eval(&env);
    // Every key the condition reads, set to values of each JSON kind, so the numeric,
    // contains and regex paths run too.
    let mut full = Map::new();
    for (i, key) in c.keys().into_iter().enumerate() {
        let v = match i % 4 {
            0 => json!("3"),
            1 => json!(2.5),
            2 => json!(true),
            _ => json!({"a": [1, "x"]}),
        };
        full.insert(
            key.strip_prefix("context.").unwrap_or(&key).to_string(),
            v.clone(),
        );
        full.insert(key, v);
    }
    let env_full = MapEnv {
        outcome: "succeeded",
        preferred_label: "[A] Approve",
        context: &full,
    };
    let verdict_full = c.eval(&env_full);

    let text = c.to_string();
    let again = match Condition::parse(&text) {
        Ok(a) => a,
        Err(e) => panic!("printed condition {text:?} does not parse: {e}"),
    };
    assert_eq!(again.eval(&env), verdict, "{text:?}");
    assert_eq!(again.eval(&env_full), verdict_full, "{text:?}");
    assert_eq!(again.keys(), c.keys(), "{text:?}");
});
