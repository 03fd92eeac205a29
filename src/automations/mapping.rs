//! Input mappings: how a webhook or code-host trigger turns a delivery's JSON payload into
//! run inputs.
//!
//! A trigger's `inputs` is an object `{input name: source}`. A source is:
//! - a **path** into the payload: a string starting with `$`: `$` is the whole payload,
//!   followed by steps: `.name` (a member; letters, digits, `_`, `-`), `[3]` (an array
//!   element), `["any name"]` (a member whose name needs quoting, as a JSON string).
//!   Example: `$.pull_request.head.ref`, `$.labels[0].name`, `$["x.y"]`.
//! - a **literal**: any other JSON value (a number, `true`, an object, a string not starting
//!   with `$`). A literal string that starts with `$` is written with `$$` (`"$$5"` is the
//!   text `$5`).
//!
//! A path that finds nothing (a missing member, an index past the end, or `null`) fails
//! the fire, naming the input and the path.
//!
//! Owns: the path syntax, parsing and applying mappings. Must not touch: anything else.

use serde_json::{Map, Value};

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Member(String),
    Index(usize),
}

/// Where an input's value comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Path(Vec<Step>),
    Literal(Value),
}

/// Parses one source (see the module docs).
pub fn parse_source(v: &Value) -> Result<Source, String> {
    let Some(s) = v.as_str() else {
        return Ok(Source::Literal(v.clone()));
    };
    if let Some(rest) = s.strip_prefix("$$") {
        return Ok(Source::Literal(Value::String(format!("${rest}"))));
    }
    if !s.starts_with('$') {
        return Ok(Source::Literal(v.clone()));
    }
    parse_path(s).map(Source::Path)
}

/// Parses a `$...` path.
pub fn parse_path(s: &str) -> Result<Vec<Step>, String> {
    let bad = |at: usize, why: &str| {
        format!("`{s}` is not a valid path at character {}: {why} (paths look like $.a.b[0][\"c d\"]; a literal text starting with $ is written $$...)", at + 1)
    };
    let b = s.as_bytes();
    if b.first() != Some(&b'$') {
        return Err(bad(0, "a path starts with $"));
    }
    let mut steps = Vec::new();
    let mut i = 1;
    while i < b.len() {
        match b[i] {
            b'.' => {
                let start = i + 1;
                let mut j = start;
                while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_' || b[j] == b'-')
                {
                    j += 1;
                }
                if j == start {
                    return Err(bad(i, "a member name must follow the dot"));
                }
                steps.push(Step::Member(s[start..j].to_string()));
                i = j;
            }
            b'[' => {
                let close = find_close(s, i + 1).ok_or_else(|| bad(i, "unclosed ["))?;
                let inner = &s[i + 1..close];
                if inner.starts_with('"') {
                    let name: String = serde_json::from_str(inner)
                        .map_err(|_| bad(i + 1, "a quoted member name must be a JSON string"))?;
                    steps.push(Step::Member(name));
                } else if !inner.is_empty() && inner.bytes().all(|c| c.is_ascii_digit()) {
                    let n = inner.parse().map_err(|_| bad(i + 1, "index too large"))?;
                    steps.push(Step::Index(n));
                } else {
                    return Err(bad(
                        i + 1,
                        "brackets hold an index (digits) or a quoted name",
                    ));
                }
                i = close + 1;
            }
            _ => return Err(bad(i, "expected . or [")),
        }
    }
    Ok(steps)
}

/// The `]` closing a bracket that starts at `from` (a quoted name may contain `]`).
fn find_close(s: &str, from: usize) -> Option<usize> {
    let b = s.as_bytes();
    if b.get(from) == Some(&b'"') {
        let mut j = from + 1;
        while j < b.len() {
            match b[j] {
                b'\\' => j += 2,
                b'"' => return (b.get(j + 1) == Some(&b']')).then_some(j + 1),
                _ => j += 1,
            }
        }
        None
    } else {
        s[from..].find(']').map(|k| from + k)
    }
}

/// What `steps` find in `payload` (`None`: nothing, or `null`).
pub fn lookup<'v>(payload: &'v Value, steps: &[Step]) -> Option<&'v Value> {
    let mut cur = payload;
    for step in steps {
        cur = match step {
            Step::Member(k) => cur.get(k.as_str())?,
            Step::Index(n) => cur.get(*n)?,
        };
    }
    (!cur.is_null()).then_some(cur)
}

/// Applies a trigger's mapping (`{name: source}` as stored) to a payload.
pub fn apply(mapping: &Map<String, Value>, payload: &Value) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (name, raw) in mapping {
        let value = match parse_source(raw)? {
            Source::Literal(v) => v,
            Source::Path(steps) => lookup(payload, &steps).cloned().ok_or_else(|| {
                format!(
                    "input `{name}`: the path {} found nothing in the delivery",
                    raw.as_str().unwrap_or("")
                )
            })?,
        };
        out.insert(name.clone(), value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_and_literals() {
        assert_eq!(
            parse_source(&json!("$.a.b_c[2][\"x.y]\"]")).unwrap(),
            Source::Path(vec![
                Step::Member("a".into()),
                Step::Member("b_c".into()),
                Step::Index(2),
                Step::Member("x.y]".into()),
            ])
        );
        assert_eq!(parse_source(&json!("$")).unwrap(), Source::Path(vec![]));
        assert_eq!(
            parse_source(&json!("main")).unwrap(),
            Source::Literal(json!("main"))
        );
        assert_eq!(
            parse_source(&json!("$$5")).unwrap(),
            Source::Literal(json!("$5"))
        );
        assert_eq!(parse_source(&json!(3)).unwrap(), Source::Literal(json!(3)));
        for bad in [
            "$.", "$..a", "$a", "$[x]", "$[1", "$[\"a]", "$.a b", "$[-1]",
        ] {
            assert!(parse_source(&json!(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn applying_names_the_input_that_found_nothing() {
        let payload =
            json!({"pull_request": {"number": 7, "labels": [{"name": "svc"}], "body": null}});
        let mapping = json!({"pr": "$.pull_request.number", "label": "$.pull_request.labels[0].name", "env": "prod"});
        let out = apply(mapping.as_object().unwrap(), &payload).unwrap();
        assert_eq!(
            Value::Object(out),
            json!({"pr": 7, "label": "svc", "env": "prod"})
        );
        for missing in [
            "$.pull_request.title",
            "$.pull_request.labels[1]",
            "$.pull_request.body",
        ] {
            let m = json!({"x": missing});
            let e = apply(m.as_object().unwrap(), &payload).unwrap_err();
            assert!(e.contains("input `x`") && e.contains(missing), "{e}");
        }
    }
}
