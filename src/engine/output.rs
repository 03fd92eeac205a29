//! TEMPORARY STAND-IN for the `blocks` branch (replaced when it is merged): structured
//! output of stages (routing directives, custom JSON Schemas).
//! Must not touch: the engine loop.

use super::failure::StageStatus;
use serde_json::{Map, Value};

/// Routing keys of SPEC 2.13.
pub const DIRECTIVE_KEYS: [&str; 5] = [
    "preferred_next_label",
    "outcome",
    "failure_reason",
    "suggested_next_ids",
    "context_updates",
];

/// The last `{...}` in `text` that parses as a JSON object accepted by `accept`.
pub fn last_json_object(
    text: &str,
    accept: &dyn Fn(&Map<String, Value>) -> bool,
) -> Option<Map<String, Value>> {
    let starts: Vec<usize> = text.match_indices('{').map(|(i, _)| i).collect();
    for &s in starts.iter().rev() {
        if let Some(end) = matching_brace(&text[s..]) {
            if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(&text[s..s + end]) {
                if accept(&m) {
                    return Some(m);
                }
            }
        }
    }
    None
}

fn matching_brace(t: &str) -> Option<usize> {
    let (mut depth, mut in_str, mut esc) = (0i32, false, false);
    for (i, c) in t.char_indices() {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Directive {
    pub preferred_next_label: Option<String>,
    pub outcome: Option<StageStatus>,
    pub failure_reason: Option<String>,
    pub suggested_next_ids: Vec<String>,
    pub context_updates: Map<String, Value>,
}

pub fn is_directive(m: &Map<String, Value>) -> bool {
    DIRECTIVE_KEYS.iter().any(|k| m.contains_key(*k))
}

pub fn parse_directive(m: &Map<String, Value>) -> Directive {
    Directive {
        preferred_next_label: m
            .get("preferred_next_label")
            .and_then(Value::as_str)
            .map(String::from),
        outcome: m
            .get("outcome")
            .and_then(Value::as_str)
            .and_then(StageStatus::parse),
        failure_reason: m
            .get("failure_reason")
            .and_then(Value::as_str)
            .map(String::from),
        suggested_next_ids: m
            .get("suggested_next_ids")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default(),
        context_updates: m
            .get("context_updates")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    }
}

#[derive(Debug, Clone)]
pub enum OutputSchema {
    Routing,
    Json(Value),
}

#[derive(Debug, Clone)]
pub enum StructuredOutput {
    Routing(Directive),
    Custom(Value),
}

pub fn load_schema(
    attr: &str,
    read_file: &dyn Fn(&str) -> Option<String>,
) -> Result<OutputSchema, String> {
    let attr = attr.trim();
    if attr == "routing" {
        return Ok(OutputSchema::Routing);
    }
    let text = match attr.strip_prefix('@') {
        Some(path) => {
            read_file(path.trim()).ok_or_else(|| format!("cannot read schema file {path}"))?
        }
        None => attr.to_string(),
    };
    serde_json::from_str(&text)
        .map(OutputSchema::Json)
        .map_err(|e| format!("schema is not JSON: {e}"))
}

pub fn extract_structured(text: &str, schema: &OutputSchema) -> Result<StructuredOutput, String> {
    match schema {
        OutputSchema::Routing => last_json_object(text, &is_directive)
            .map(|m| StructuredOutput::Routing(parse_directive(&m)))
            .ok_or_else(|| "no JSON object with a routing key (preferred_next_label, outcome, failure_reason, suggested_next_ids, context_updates) found in the output".to_string()),
        OutputSchema::Json(s) => {
            let v = jsonschema::validator_for(s).map_err(|e| e.to_string())?;
            let mut last_err = "no JSON object found in the output".to_string();
            let starts: Vec<usize> = text.match_indices('{').map(|(i, _)| i).collect();
            for &st in starts.iter().rev() {
                if let Some(end) = matching_brace(&text[st..]) {
                    if let Ok(val @ Value::Object(_)) = serde_json::from_str::<Value>(&text[st..st + end]) {
                        match v.validate(&val) {
                            Ok(()) => return Ok(StructuredOutput::Custom(val)),
                            Err(e) => last_err = e.to_string(),
                        }
                    }
                }
            }
            Err(last_err)
        }
    }
}
