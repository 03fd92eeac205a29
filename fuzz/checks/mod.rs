//! The properties each fuzz target checks, one function per target. Shared by the libFuzzer
//! targets in `fuzz/fuzz_targets/` (nightly, `cargo fuzz`) and by `tests/language/fuzz_replay.rs`,
//! which replays the committed corpora on the stable toolchain in every `cargo test`.
//! A violated property panics; anything the parser refuses is simply skipped.
#![allow(dead_code)] // each fuzz target uses one of these

use serde_json::{json, Map, Value};
use svc::internal::dot;
use svc::internal::workflow::condition::{Condition, MapEnv};
use svc::internal::workflow::stylesheet::Stylesheet;
use svc::internal::workflow::{self, NoFiles};

/// `parse_dot` (fast): the DOT parser never panics, and a parsed graph printed with
/// `to_dot` parses again to the same model. No lint: this target is the parser alone.
pub fn parse_dot(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(g) = dot::parse(src) else {
        return;
    };
    let printed = dot::to_dot(&g);
    let again = match dot::parse(&printed) {
        Ok(a) => a,
        Err(e) => panic!("printed graph does not parse: {e}\n--- printed ---\n{printed}"),
    };
    assert!(
        g.same_model(&again),
        "printed graph parses to a different model\n--- printed ---\n{printed}"
    );
}

/// `load_dot` (full): everything `parse_dot` checks, then loading (stylesheet, `@path`
/// references, handler resolution, conditions, lint) never panics.
pub fn load_dot(data: &[u8]) {
    parse_dot(data);
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    // NoFiles: `@path` references must not make the fuzzer read the disk.
    let _ = workflow::load(src, &NoFiles);
}

/// `parse_condition`: parsing and evaluating never panic; the printed condition parses
/// again and evaluates the same.
pub fn parse_condition(data: &[u8]) {
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
    let again = reparse(&c);
    assert_eq!(again.eval(&env), verdict, "{c}");
    assert_eq!(again.eval(&env_full), verdict_full, "{c}");
    assert_eq!(again.keys(), c.keys(), "{c}");
}

/// `eval_condition`: run-time evaluation against contexts generated from the input. The
/// first line is the condition; the remaining bytes drive the outcome, the preferred label
/// and a value for every key the condition reads (strings, numbers as text and as JSON
/// numbers, booleans, null, arrays and objects, with text taken from the condition's own
/// literals so comparisons can come out true). Checks: evaluation never panics, is
/// deterministic, agrees with the reprinted condition, and depends only on the keys the
/// condition reads (unrelated context keys change nothing).
pub fn eval_condition(data: &[u8]) {
    let split = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
    let Ok(src) = std::str::from_utf8(&data[..split]) else {
        return;
    };
    let Ok(c) = Condition::parse(src) else {
        return;
    };
    let mut bytes = Bytes(data.get(split + 1..).unwrap_or(&[]), 0);
    let words = literals(src);
    let outcome =
        ["succeeded", "failed", "partially_succeeded", "skipped", ""][bytes.next() as usize % 5];
    let label = bytes.word(&words);
    let mut context = Map::new();
    for key in c.keys() {
        let value = bytes.value(&words);
        match bytes.next() % 3 {
            // As written (`context.x`), under the bare name (`x`), or both.
            0 => {
                context.insert(key, value);
            }
            1 => {
                let bare = key.strip_prefix("context.").unwrap_or(&key).to_string();
                context.insert(bare, value);
            }
            _ => {
                let bare = key.strip_prefix("context.").unwrap_or(&key).to_string();
                context.insert(bare, bytes.value(&words));
                context.insert(key, value);
            }
        }
    }
    let env = MapEnv {
        outcome,
        preferred_label: &label,
        context: &context,
    };
    let verdict = c.eval(&env);
    assert_eq!(
        c.eval(&env),
        verdict,
        "evaluation is not deterministic: {c}"
    );
    assert_eq!(reparse(&c).eval(&env), verdict, "reprinted differs: {c}");
    let mut wider = context.clone();
    for i in 0..4 {
        let key = format!("unrelated.{i}");
        if !c.keys().iter().any(|k| k.ends_with(&key)) {
            wider.insert(key, json!("succeeded"));
        }
    }
    let env_wider = MapEnv {
        outcome,
        preferred_label: &label,
        context: &wider,
    };
    assert_eq!(c.eval(&env_wider), verdict, "an unread key changed: {c}");
}

/// `parse_stylesheet`: parsing never panics, and the canonical text (Display) parses back
/// to the same stylesheet; resolving never panics.
pub fn parse_stylesheet(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(sheet) = Stylesheet::parse(src) else {
        return;
    };
    let text = sheet.to_string();
    let again = match Stylesheet::parse(&text) {
        Ok(a) => a,
        Err(e) => panic!("printed stylesheet does not parse: {e}\n--- printed ---\n{text}"),
    };
    assert_eq!(again, sheet, "--- printed ---\n{text}");
    let _ = sheet.resolve("n", "box", &["c".to_string()]);
}

fn reparse(c: &Condition) -> Condition {
    let text = c.to_string();
    match Condition::parse(&text) {
        Ok(a) => a,
        Err(e) => panic!("printed condition {text:?} does not parse: {e}"),
    }
}

/// The words and quoted literals of a condition's text, as candidate values.
fn literals(src: &str) -> Vec<String> {
    let mut out: Vec<String> = src
        .split(|ch: char| ch.is_whitespace() || "=!<>&|".contains(ch))
        .map(|w| w.trim_matches('"').to_string())
        .filter(|w| !w.is_empty())
        .collect();
    out.extend(["succeeded", "3", "-1.5", "", " 7 \n"].map(String::from));
    out
}

/// The input's bytes after the condition, read one at a time (zeros once used up).
struct Bytes<'a>(&'a [u8], usize);

impl Bytes<'_> {
    fn next(&mut self) -> u8 {
        let b = self.0.get(self.1).copied().unwrap_or(0);
        self.1 += 1;
        b
    }

    fn word(&mut self, words: &[String]) -> String {
        let i = self.next() as usize % words.len().max(1);
        words.get(i).cloned().unwrap_or_default()
    }

    fn value(&mut self, words: &[String]) -> Value {
        match self.next() % 8 {
            0 => Value::String(self.word(words)),
            1 => json!(self.next() as i64 - 128),
            2 => json!(f64::from(self.next()) / 7.0),
            3 => json!(self.next().is_multiple_of(2)),
            4 => Value::Null,
            5 => json!([self.word(words), self.next()]),
            6 => json!({ "k": self.word(words) }),
            _ => Value::String(format!("{}{}", self.word(words), self.word(words))),
        }
    }
}
