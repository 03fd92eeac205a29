//! Reading a JSON definition member by member, each error naming its field: the 422s of
//! every catalog come from here, so they all read alike (`triggers[1].expression: ...`).
//!
//! Owns: [`Invalid`] and [`Obj`], the path-aware readers. Must not touch: what any field means.

use serde_json::{Map, Value};

/// One domain validation failure: the field (`a.b[2].c`; empty for the whole body) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub field: String,
    pub message: String,
}

impl Invalid {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Invalid {
        Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// The errors found so far; validation goes on after the first so a form can show them all.
pub type Errors = Vec<Invalid>;

/// A JSON object being validated, with its path from the body's root.
#[derive(Debug, Clone, Copy)]
pub struct Obj<'a> {
    pub map: &'a Map<String, Value>,
    path: &'a str,
}

/// The JSON type name a message uses.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `parent.key` (or `key` at the root).
pub fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

impl<'a> Obj<'a> {
    /// The body's root object.
    pub fn root(map: &'a Map<String, Value>) -> Obj<'a> {
        Obj { map, path: "" }
    }

    /// An object found at `path` (e.g. `triggers[0]`); `path` must outlive the reader.
    pub fn at(map: &'a Map<String, Value>, path: &'a str) -> Obj<'a> {
        Obj { map, path }
    }

    /// The path of member `key`.
    pub fn field(&self, key: &str) -> String {
        join(self.path, key)
    }

    /// The path of this object.
    pub fn path(&self) -> &str {
        self.path
    }

    /// Refuses members not in `allowed`.
    pub fn only(&self, allowed: &[&str], errs: &mut Errors) {
        for k in self.map.keys() {
            if !allowed.contains(&k.as_str()) {
                errs.push(Invalid::new(
                    self.field(k),
                    format!("unknown field; expected one of {}", allowed.join(", ")),
                ));
            }
        }
    }

    /// The member, `None` when absent or null.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// A required string.
    pub fn string(&self, key: &str, errs: &mut Errors) -> Option<&'a str> {
        match self.get(key) {
            None => {
                errs.push(Invalid::new(self.field(key), "is required"));
                None
            }
            Some(v) => self.as_str(key, v, errs),
        }
    }

    /// A required string that is not blank.
    pub fn non_blank(&self, key: &str, errs: &mut Errors) -> Option<&'a str> {
        let s = self.string(key, errs)?;
        if s.trim().is_empty() {
            errs.push(Invalid::new(self.field(key), "must not be blank"));
            return None;
        }
        Some(s)
    }

    /// An optional string (absent or null: `None`).
    pub fn opt_string(&self, key: &str, errs: &mut Errors) -> Option<&'a str> {
        self.get(key).and_then(|v| self.as_str(key, v, errs))
    }

    fn as_str(&self, key: &str, v: &'a Value, errs: &mut Errors) -> Option<&'a str> {
        match v.as_str() {
            Some(s) => Some(s),
            None => {
                errs.push(Invalid::new(
                    self.field(key),
                    format!("must be a string, not {}", type_name(v)),
                ));
                None
            }
        }
    }

    /// An optional boolean.
    pub fn opt_bool(&self, key: &str, errs: &mut Errors) -> Option<bool> {
        let v = self.get(key)?;
        match v.as_bool() {
            Some(b) => Some(b),
            None => {
                errs.push(Invalid::new(
                    self.field(key),
                    format!("must be true or false, not {}", type_name(v)),
                ));
                None
            }
        }
    }

    /// An optional object.
    pub fn opt_object(&self, key: &str, errs: &mut Errors) -> Option<&'a Map<String, Value>> {
        let v = self.get(key)?;
        match v.as_object() {
            Some(m) => Some(m),
            None => {
                errs.push(Invalid::new(
                    self.field(key),
                    format!("must be an object, not {}", type_name(v)),
                ));
                None
            }
        }
    }

    /// A required object.
    pub fn object(&self, key: &str, errs: &mut Errors) -> Option<&'a Map<String, Value>> {
        if self.get(key).is_none() {
            errs.push(Invalid::new(self.field(key), "is required"));
            return None;
        }
        self.opt_object(key, errs)
    }

    /// A required array.
    pub fn array(&self, key: &str, errs: &mut Errors) -> Option<&'a Vec<Value>> {
        let Some(v) = self.get(key) else {
            errs.push(Invalid::new(self.field(key), "is required"));
            return None;
        };
        match v.as_array() {
            Some(a) => Some(a),
            None => {
                errs.push(Invalid::new(
                    self.field(key),
                    format!("must be an array, not {}", type_name(v)),
                ));
                None
            }
        }
    }

    /// An optional object of string values (labels, environment variables, ...).
    pub fn string_map(
        &self,
        key: &str,
        errs: &mut Errors,
    ) -> Option<std::collections::BTreeMap<String, String>> {
        let m = self.opt_object(key, errs)?;
        let mut out = std::collections::BTreeMap::new();
        for (k, v) in m {
            match v.as_str() {
                Some(s) => {
                    out.insert(k.clone(), s.to_string());
                }
                None => errs.push(Invalid::new(
                    format!("{}.{k}", self.field(key)),
                    format!("must be a string, not {}", type_name(v)),
                )),
            }
        }
        Some(out)
    }
}

/// The path of element `i` of the array at `path`.
pub fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_name_their_fields() {
        let v = json!({"name": " ", "n": 3, "t": [1], "m": {"a": "x", "b": 2}, "x": 1});
        let root = Obj::root(v.as_object().unwrap());
        let mut errs = Vec::new();
        assert_eq!(root.non_blank("name", &mut errs), None);
        assert_eq!(root.string("n", &mut errs), None);
        assert_eq!(root.string("missing", &mut errs), None);
        assert!(root.opt_string("absent", &mut errs).is_none());
        assert!(root.array("t", &mut errs).is_some());
        let m = root.string_map("m", &mut errs).unwrap();
        assert_eq!(m.len(), 1);
        root.only(&["name", "n", "t", "m"], &mut errs);
        let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "name: must not be blank",
                "n: must be a string, not a number",
                "missing: is required",
                "m.b: must be a string, not a number",
                "x: unknown field; expected one of name, n, t, m",
            ]
        );
        let inner = json!({"e": true});
        let path = index("triggers", 2);
        let o = Obj::at(inner.as_object().unwrap(), &path);
        assert_eq!(o.field("e"), "triggers[2].e");
    }
}
