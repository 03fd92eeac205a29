//! Structured output (SPEC §2.13, engine.md §7): finding JSON objects in model text, the
//! `routing` and JSON-Schema validators, and the repair loop that sends validation errors
//! back into the same conversation for up to `output_retries` corrective turns. Works for
//! prompt calls and agent sessions alike through a turn closure; must not call providers
//! itself.

use serde_json::Value;

/// The keys a routing object needs at least one of.
pub const ROUTING_KEYS: [&str; 5] = [
    "preferred_next_label",
    "outcome",
    "failure_reason",
    "suggested_next_ids",
    "context_updates",
];

/// Every balanced `{…}` candidate in `text`, in order of their opening brace. The scan is
/// string-aware: braces inside `"…"` are ignored and `\` escapes the next character.
pub fn json_candidates(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    for (start, &b) in bytes.iter().enumerate() {
        if b != b'{' {
            continue;
        }
        let mut depth = 0usize;
        let mut in_str = false;
        let mut esc = false;
        for (i, &c) in bytes.iter().enumerate().skip(start) {
            if in_str {
                if esc {
                    esc = false;
                } else if c == b'\\' {
                    esc = true;
                } else if c == b'"' {
                    in_str = false;
                }
                continue;
            }
            match c {
                b'"' => in_str = true,
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push(&text[start..=i]);
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The routing object in a response: walking candidates from the last, the first that
/// parses as a JSON object containing any routing key (engine.md §7.2).
pub fn find_routing(text: &str) -> Option<Value> {
    json_candidates(text).into_iter().rev().find_map(|c| {
        let v: Value = serde_json::from_str(c).ok()?;
        let o = v.as_object()?;
        ROUTING_KEYS.iter().any(|k| o.contains_key(*k)).then_some(v)
    })
}

/// Validates routing output (SPEC §2.13): an object with at least one routing key, whose
/// known keys have the right types.
pub fn validate_routing(text: &str) -> Result<Value, String> {
    let v = find_routing(text).ok_or_else(|| {
        format!(
            "no JSON object with any of the keys {} was found in the reply",
            ROUTING_KEYS.join(", ")
        )
    })?;
    let o = v.as_object().ok_or("the routing output is not an object")?;
    let check = |k: &str, ok: fn(&Value) -> bool, want: &str| -> Result<(), String> {
        match o.get(k) {
            Some(x) if !ok(x) => Err(format!("`{k}` must be {want}")),
            _ => Ok(()),
        }
    };
    check("preferred_next_label", Value::is_string, "a string")?;
    check("failure_reason", Value::is_string, "a string")?;
    check("context_updates", Value::is_object, "an object")?;
    check(
        "suggested_next_ids",
        |x| x.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
        "an array of strings",
    )?;
    check(
        "outcome",
        |x| {
            matches!(
                x.as_str(),
                Some("succeeded" | "failed" | "partially_succeeded" | "skipped")
            )
        },
        "one of succeeded, failed, partially_succeeded, skipped",
    )?;
    Ok(v)
}

/// The JSON values a reply may carry, most likely first: the whole reply (also inside a
/// ```json fence), then the `{…}` candidates from the last one back.
fn json_values(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let t = text.trim();
    let unfenced = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .and_then(|r| r.trim_end().strip_suffix("```"))
        .unwrap_or(t);
    if let Ok(v) = serde_json::from_str::<Value>(unfenced.trim()) {
        out.push(v);
    }
    for c in json_candidates(text).into_iter().rev() {
        if let Ok(v) = serde_json::from_str::<Value>(c) {
            if !out.contains(&v) {
                out.push(v);
            }
        }
    }
    out
}

/// A compiled JSON Schema validator.
pub struct SchemaValidator {
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for SchemaValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SchemaValidator")
    }
}

impl SchemaValidator {
    /// Compiles a schema; the error says why it is not a valid schema.
    pub fn new(schema: &Value) -> Result<Self, String> {
        jsonschema::validator_for(schema)
            .map(|validator| Self { validator })
            .map_err(|e| format!("invalid JSON Schema: {e}"))
    }

    /// The first JSON value in the reply that satisfies the schema, or the errors of the
    /// most likely candidate.
    pub fn validate(&self, text: &str) -> Result<Value, String> {
        let values = json_values(text);
        let Some(first) = values.first() else {
            return Err("no JSON value was found in the reply".to_string());
        };
        if let Some(v) = values.iter().find(|v| self.validator.is_valid(v)) {
            return Ok(v.clone());
        }
        let errors: Vec<String> = self
            .validator
            .iter_errors(first)
            .take(5)
            .map(|e| {
                let path = e.instance_path().to_string();
                if path.is_empty() {
                    e.to_string()
                } else {
                    format!("at {path}: {e}")
                }
            })
            .collect();
        Err(format!(
            "the JSON does not match the schema: {}",
            errors.join("; ")
        ))
    }
}

/// The corrective message sent back to the model after a validation failure.
pub fn repair_message(error: &str) -> String {
    format!(
        "Your previous reply did not satisfy the required output format: {error}\n\
         Reply again with the complete output in the required format (a single JSON value), \
         and nothing that contradicts it."
    )
}

/// A validated output.
#[derive(Debug, Clone, PartialEq)]
pub struct Repaired<T> {
    pub value: T,
    /// The reply that validated.
    pub text: String,
    /// How many corrective turns were needed (0 = the first reply was valid).
    pub repair_turns: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum RepairError<E: std::error::Error + 'static> {
    #[error(transparent)]
    Turn(E),
    #[error("the output failed validation after {attempts} attempt(s): {error}")]
    Invalid {
        error: String,
        /// The last reply.
        text: String,
        attempts: u32,
    },
}

/// Runs `turn(first_input)`, validates the reply, and on failure sends
/// [`repair_message`] through `turn` again, up to `output_retries` times (negative = 0).
/// `turn` must continue the same conversation (a prompt conversation or agent session).
pub fn repair_loop<T, E: std::error::Error + 'static>(
    output_retries: i64,
    first_input: &str,
    mut turn: impl FnMut(&str) -> Result<String, E>,
    validate: impl Fn(&str) -> Result<T, String>,
) -> Result<Repaired<T>, RepairError<E>> {
    let retries = output_retries.max(0) as u32;
    let mut text = turn(first_input).map_err(RepairError::Turn)?;
    let mut repair_turns = 0;
    loop {
        match validate(&text) {
            Ok(value) => {
                return Ok(Repaired {
                    value,
                    text,
                    repair_turns,
                })
            }
            Err(error) if repair_turns >= retries => {
                return Err(RepairError::Invalid {
                    error,
                    text,
                    attempts: repair_turns + 1,
                })
            }
            Err(error) => {
                repair_turns += 1;
                text = turn(&repair_message(&error)).map_err(RepairError::Turn)?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn candidates_are_string_aware() {
        let t = r#"text {"a": "}{", "b": {"c": 1}} tail {"outcome": "succeeded"}"#;
        let c = json_candidates(t);
        assert_eq!(c[0], r#"{"a": "}{", "b": {"c": 1}}"#);
        assert_eq!(c[1], r#"{"c": 1}"#);
        assert_eq!(c[2], r#"{"outcome": "succeeded"}"#);
        assert_eq!(find_routing(t), Some(json!({"outcome": "succeeded"})));
    }

    #[test]
    fn routing_validation() {
        assert!(validate_routing("done").is_err());
        assert!(validate_routing(r#"{"outcome": "great"}"#).is_err());
        let v = validate_routing(
            r#"I pick {"preferred_next_label": "ship", "context_updates": {"a.b": 1}}"#,
        );
        assert_eq!(
            v.ok().map(|v| v["preferred_next_label"].clone()),
            Some(json!("ship"))
        );
    }

    #[test]
    fn schema_validation() {
        let s = SchemaValidator::new(&json!({"type": "object", "required": ["n"],
            "properties": {"n": {"type": "integer"}}}));
        let Ok(s) = s else { panic!("schema") };
        assert!(s.validate("```json\n{\"n\": 3}\n```").is_ok());
        let e = s.validate("{\"n\": \"x\"}").err().unwrap_or_default();
        assert!(e.contains("/n"), "{e}");
        assert!(s.validate("no json").is_err());
    }

    #[derive(Debug, thiserror::Error)]
    #[error("x")]
    struct X;

    #[test]
    fn repair_turns_are_bounded() {
        let mut inputs = Vec::new();
        let r = repair_loop(
            2,
            "go",
            |i: &str| -> Result<String, X> {
                inputs.push(i.to_string());
                Ok(if inputs.len() == 3 {
                    "{\"outcome\":\"succeeded\"}"
                } else {
                    "nope"
                }
                .into())
            },
            validate_routing,
        );
        assert_eq!(r.map(|r| r.repair_turns).ok(), Some(2));
        assert!(inputs[1].contains("did not satisfy"));
        let r = repair_loop(
            0,
            "go",
            |_: &str| -> Result<String, X> { Ok("bad".into()) },
            validate_routing,
        );
        assert!(matches!(r, Err(RepairError::Invalid { attempts: 1, .. })));
    }
}
