//! Structured output (SPEC 2.13 "Structured output rules", engine.md 7): finding the last
//! JSON object in free text, routing directives, and `output_schema` loading and validation.
//!
//! Pure text-in, value-out. Must not touch the run context, events or the conversation:
//! the handlers decide what to do with a directive or a validation error (repair turns,
//! failing the stage, storing `output.<node_id>`).

use crate::engine::failure::StageStatus;
use serde_json::{Map, Value};

type Object = Map<String, Value>;

/// Every `{` starts a candidate ending at its matching `}` (string-aware: braces in "..."
/// ignored, `\` escapes); walk candidates from the last one back; return the first that
/// parses as a JSON object and satisfies `accept`.
pub fn last_json_object(text: &str, accept: impl Fn(&Object) -> bool) -> Option<Object> {
    let bytes = text.as_bytes();
    let mut ends = CandidateEnds::new(bytes);
    let starts: Vec<usize> = memchr_all(bytes, b'{');
    for &start in starts.iter().rev() {
        let Some(end) = ends.end_of(start) else {
            continue;
        };
        if let Ok(obj) = serde_json::from_str::<Object>(&text[start..=end]) {
            if accept(&obj) {
                return Some(obj);
            }
        }
    }
    None
}

fn memchr_all(bytes: &[u8], needle: u8) -> Vec<usize> {
    bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == needle)
        .map(|(i, _)| i)
        .collect()
}

/// Matching-brace search with memoisation. Candidates are resolved from the last `{` back,
/// so when a scan meets a later `{` outside a string it can jump over that candidate's
/// known extent: scanning is linear on ordinary (and adversarial `{{{{…`) text.
struct CandidateEnds<'a> {
    bytes: &'a [u8],
    /// For each resolved `{`: `Some(Some(end))`, `Some(None)` when unterminated.
    memo: std::collections::HashMap<usize, Option<usize>>,
}

impl<'a> CandidateEnds<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        CandidateEnds {
            bytes,
            memo: std::collections::HashMap::new(),
        }
    }

    fn end_of(&mut self, start: usize) -> Option<usize> {
        if let Some(known) = self.memo.get(&start) {
            return *known;
        }
        let end = self.scan(start);
        self.memo.insert(start, end);
        end
    }

    fn scan(&self, start: usize) -> Option<usize> {
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        let mut i = start;
        while i < self.bytes.len() {
            let b = self.bytes[i];
            if in_string {
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_string = false,
                    _ => {}
                }
            } else {
                match b {
                    b'"' => in_string = true,
                    b'{' if i > start => match self.memo.get(&i) {
                        Some(Some(end)) => i = *end,
                        Some(None) => return None,
                        None => depth += 1,
                    },
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i);
                        }
                    }
                    _ => {}
                }
            }
            i += 1;
        }
        None
    }
}

/// Keys of a routing directive; a routing object has at least one of them.
pub const ROUTING_KEYS: &[&str] = &[
    "preferred_next_label",
    "outcome",
    "failure_reason",
    "suggested_next_ids",
    "context_updates",
];

pub fn has_routing_key(obj: &Object) -> bool {
    ROUTING_KEYS.iter().any(|k| obj.contains_key(*k))
}

/// A routing directive, read leniently: fields of the wrong type are ignored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Directive {
    pub preferred_label: Option<String>,
    pub outcome: Option<StageStatus>,
    pub failure_reason: Option<String>,
    pub suggested_next_ids: Vec<String>,
    pub context_updates: Object,
}

/// `outcome` only if it names one of the 4 statuses (the legacy aliases `success`, `fail`,
/// `partial_success` included); non-string ids are ignored (a lone string counts as one id);
/// blank labels and reasons are ignored; `context_updates` only if it is an object.
pub fn parse_directive(obj: &Object) -> Directive {
    let text = |key: &str| {
        obj.get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let suggested_next_ids = match obj.get("suggested_next_ids") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Some(Value::String(s)) if !s.trim().is_empty() => vec![s.trim().to_string()],
        _ => Vec::new(),
    };
    Directive {
        preferred_label: text("preferred_next_label"),
        outcome: text("outcome").and_then(|s| s.parse().ok()),
        failure_reason: text("failure_reason"),
        suggested_next_ids,
        context_updates: match obj.get("context_updates") {
            Some(Value::Object(m)) => m.clone(),
            _ => Object::new(),
        },
    }
}

/// A node's `output_schema`.
pub enum OutputSchema {
    Routing,
    /// The compiled validator and the schema it was compiled from.
    Json(crate::workflow::schema::Schema, Value),
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OutputSchema::Routing => f.write_str("Routing"),
            OutputSchema::Json(_, schema) => f.debug_tuple("Json").field(schema).finish(),
        }
    }
}

/// `routing`, `@path` (read via `read_file`, relative to the workflow), or inline JSON
/// Schema text. The error says what is wrong in plain words.
pub fn load_schema(
    attr: &str,
    read_file: &dyn Fn(&str) -> Option<String>,
) -> Result<OutputSchema, String> {
    let attr = attr.trim();
    if attr == "routing" {
        return Ok(OutputSchema::Routing);
    }
    if let Some(path) = attr.strip_prefix('@') {
        let path = path.trim();
        let text =
            read_file(path).ok_or_else(|| format!("cannot read output schema file `{path}`"))?;
        return compile(&text).map_err(|e| format!("output schema file `{path}`: {e}"));
    }
    compile(attr).map_err(|e| format!("output_schema: {e}"))
}

fn compile(text: &str) -> Result<OutputSchema, String> {
    let schema: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON ({e})"))?;
    let validator = crate::workflow::schema::compile(&schema).map_err(|e| {
        if schema.is_object() || schema.is_boolean() {
            format!("not a valid JSON Schema ({e})")
        } else {
            e
        }
    })?;
    Ok(OutputSchema::Json(validator, schema))
}

/// The result of validating a node's output.
#[derive(Debug, Clone, PartialEq)]
pub enum StructuredOutput {
    Routing(Directive),
    Custom(Value),
}

/// Validation errors listed in a failure message.
const MAX_LISTED_ERRORS: usize = 3;

/// Command nodes: validate merged output after exit 0. Routing: last object containing a
/// routing key. Custom schema: last object that validates. The error says what was wrong
/// (for a custom schema, jsonschema's messages for the last JSON object, the first few).
pub fn extract_structured(text: &str, schema: &OutputSchema) -> Result<StructuredOutput, String> {
    match schema {
        OutputSchema::Routing => last_json_object(text, has_routing_key)
            .map(|obj| StructuredOutput::Routing(parse_directive(&obj)))
            .ok_or_else(|| {
                format!(
                    "no JSON object with a routing key ({}) found in the output",
                    ROUTING_KEYS.join(", ")
                )
            }),
        OutputSchema::Json(validator, _) => {
            let valid = |obj: &Object| validator.is_valid(&Value::Object(obj.clone()));
            if let Some(obj) = last_json_object(text, valid) {
                return Ok(StructuredOutput::Custom(Value::Object(obj)));
            }
            Err(explain_invalid(text, validator))
        }
    }
}

fn explain_invalid(text: &str, validator: &crate::workflow::schema::Schema) -> String {
    let Some(last) = last_json_object(text, |_| true) else {
        return "no JSON object found in the output".to_string();
    };
    let value = Value::Object(last);
    let errors = validator.errors(&value);
    let listed = errors
        .iter()
        .take(MAX_LISTED_ERRORS)
        .cloned()
        .collect::<Vec<_>>();
    let more = errors.len().saturating_sub(MAX_LISTED_ERRORS);
    let suffix = if more > 0 {
        format!(" (and {more} more)")
    } else {
        String::new()
    };
    format!(
        "no JSON object in the output matches the schema; the last one fails: {}{suffix}",
        listed.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn any(text: &str) -> Option<Value> {
        last_json_object(text, |_| true).map(Value::Object)
    }

    #[test]
    fn nested_braces_pick_the_last_candidate() {
        // the last `{` is the inner object; it parses, so it wins
        assert_eq!(any(r#"x {"a": {"b": 1}} y"#), Some(json!({"b": 1})));
        let outer = last_json_object(r#"x {"a": {"b": 1}} y"#, |m| m.contains_key("a"));
        assert_eq!(outer.map(Value::Object), Some(json!({"a": {"b": 1}})));
    }

    #[test]
    fn braces_inside_strings_are_ignored() {
        let t = r#"log {"msg": "a } b { c", "n": 2} end"#;
        assert_eq!(any(t), Some(json!({"msg": "a } b { c", "n": 2})));
    }

    #[test]
    fn escaped_quotes_inside_strings() {
        let t = r#"{"msg": "say \"}\" now", "k": "v\\"} trailing"#;
        assert_eq!(any(t), Some(json!({"msg": "say \"}\" now", "k": "v\\"})));
    }

    #[test]
    fn several_candidates_last_valid_wins() {
        let t = "first {\"outcome\": \"failed\"}\nthen {\"outcome\": \"succeeded\"}\n{not json}\n";
        let obj = last_json_object(t, has_routing_key).map(Value::Object);
        assert_eq!(obj, Some(json!({"outcome": "succeeded"})));
    }

    #[test]
    fn no_object() {
        assert_eq!(any("plain text, [1,2], {unterminated"), None);
        assert_eq!(any(""), None);
        assert_eq!(any("} {"), None);
    }

    #[test]
    fn adversarial_braces_stay_fast() {
        let t = format!("{}{}", "{".repeat(200_000), "{\"a\":1}");
        assert_eq!(any(&t), Some(json!({"a": 1})));
        assert!(last_json_object(&t, |m| m.contains_key("zzz")).is_none());
        let t = "{\"k\":".repeat(100_000);
        assert_eq!(any(&t), None);
        let t = "{\"a\":{}}".repeat(50_000);
        assert_eq!(any(&t), Some(json!({})));
        assert!(last_json_object(&t, |m| m.contains_key("zzz")).is_none());
    }

    #[test]
    fn directive_fields() {
        let obj = json!({
            "preferred_next_label": " Approve ",
            "outcome": "partial_success",
            "failure_reason": "",
            "suggested_next_ids": ["a", 3, "b"],
            "context_updates": {"k": 1}
        });
        let d = parse_directive(obj.as_object().unwrap());
        assert_eq!(d.preferred_label.as_deref(), Some("Approve"));
        assert_eq!(d.outcome, Some(StageStatus::PartiallySucceeded));
        assert_eq!(d.failure_reason, None);
        assert_eq!(d.suggested_next_ids, vec!["a", "b"]);
        assert_eq!(Value::Object(d.context_updates), json!({"k": 1}));
        let odd = json!({"outcome": "great", "context_updates": [1], "suggested_next_ids": "x"});
        let d = parse_directive(odd.as_object().unwrap());
        assert_eq!((d.outcome, d.context_updates.len()), (None, 0));
        assert_eq!(d.suggested_next_ids, vec!["x"]);
    }

    fn no_files(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn routing_schema() {
        let s = load_schema(" routing ", &no_files).unwrap();
        let out = "building...\n{\"outcome\": \"failed\", \"failure_reason\": \"tests\"}\n{\"other\": 1}\n";
        match extract_structured(out, &s).unwrap() {
            StructuredOutput::Routing(d) => {
                assert_eq!(d.outcome, Some(StageStatus::Failed));
                assert_eq!(d.failure_reason.as_deref(), Some("tests"));
            }
            other => panic!("{other:?}"),
        }
        let e = extract_structured("{\"other\": 1}", &s).unwrap_err();
        assert!(e.contains("routing key"), "{e}");
    }

    #[cfg(feature = "schema")]
    const SCHEMA: &str = r#"{"type":"object","required":["score"],"properties":{"score":{"type":"integer","minimum":0}}}"#;

    #[test]
    #[cfg(feature = "schema")]
    fn custom_schema_valid_and_invalid() {
        let s = load_schema(SCHEMA, &no_files).unwrap();
        let out = "{\"score\": 3, \"note\": \"x\"}\n{\"score\": \"high\"}";
        assert_eq!(
            extract_structured(out, &s).unwrap(),
            StructuredOutput::Custom(json!({"score": 3, "note": "x"}))
        );
        let e = extract_structured("{\"score\": -1}", &s).unwrap_err();
        assert!(e.contains("/score") && e.contains("minimum"), "{e}");
        let e = extract_structured("{\"other\": 1}", &s).unwrap_err();
        assert!(e.contains("score"), "{e}");
        let e = extract_structured("no json here", &s).unwrap_err();
        assert_eq!(e, "no JSON object found in the output");
    }

    #[test]
    #[cfg(feature = "schema")]
    fn schema_from_file() {
        let read = |p: &str| (p == "schemas/out.json").then(|| SCHEMA.to_string());
        let s = load_schema("@schemas/out.json", &read).unwrap();
        assert!(matches!(s, OutputSchema::Json(_, ref v) if v["required"] == json!(["score"])));
        let e = load_schema("@missing.json", &read).unwrap_err();
        assert_eq!(e, "cannot read output schema file `missing.json`");
        let bad = |_: &str| Some("{".to_string());
        let e = load_schema("@x.json", &bad).unwrap_err();
        assert!(
            e.starts_with("output schema file `x.json`: not valid JSON"),
            "{e}"
        );
    }

    #[test]
    fn invalid_schema_text() {
        let e = load_schema("{not json", &no_files).unwrap_err();
        assert!(e.contains("not valid JSON"), "{e}");
        let e = load_schema(r#"{"type": 12}"#, &no_files).unwrap_err();
        assert!(e.contains("not a valid JSON Schema"), "{e}");
        let e = load_schema("[1]", &no_files).unwrap_err();
        assert!(e.contains("must be an object"), "{e}");
    }
}
