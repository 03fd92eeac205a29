//! Write-only fields: a catalog declares where secret values sit in its definitions
//! ([`Secret`]); the catalog stores them, never shows them, and mixes a salted digest of them
//! into the revision.
//!
//! A secret's `path` is `/`-separated member names, where `*` stands for every element of an
//! array or every value of an object, e.g. `triggers/*/secret` or `transport/env`. Its last
//! segment is the field's name. What a reader sees instead:
//! - [`Shape::Value`] (one secret string): the field is left out and `<name>_set: true` says
//!   it has a value;
//! - [`Shape::Map`] (an object of secret strings, e.g. environment variables): the field is
//!   left out and `<name>_keys` lists its key names, sorted (a plural name is made singular:
//!   `headers` shows as `header_keys`, `env` as `env_keys`).
//!
//! On replace, a secret field the body leaves out keeps its stored value (array elements are
//! matched by their `id` member, else by position), and the `<name>_set` / `<name>_keys`
//! members of a view sent back are ignored, so a client can GET, edit and PUT without
//! re-entering secrets. Sending the field replaces the value; sending `null` clears it.
//!
//! Owns: locating, hiding, carrying over and digesting secret fields. Must not touch: storage.

use serde_json::{Map, Value};

/// How a secret field looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One secret string.
    Value,
    /// An object whose values are secret strings; its keys are shown.
    Map,
}

/// A write-only field of a catalog's definitions.
#[derive(Debug, Clone, Copy)]
pub struct Secret {
    pub path: &'static str,
    pub shape: Shape,
}

impl Secret {
    fn segments(&self) -> (Vec<&'static str>, &'static str) {
        let mut parts: Vec<&'static str> = self.path.split('/').collect();
        let name = parts.pop().unwrap_or("");
        (parts, name)
    }

    /// The member a view shows instead of the value.
    pub fn shown_as(&self) -> String {
        let (_, name) = self.segments();
        match self.shape {
            Shape::Value => format!("{name}_set"),
            Shape::Map => format!("{}_keys", name.strip_suffix('s').unwrap_or(name)),
        }
    }
}

/// Calls `f` with every object that holds (or may hold) a secret field `name`, walking
/// `parents` from `root`.
fn for_each_holder(v: &mut Value, parents: &[&str], f: &mut dyn FnMut(&mut Map<String, Value>)) {
    match parents.split_first() {
        None => {
            if let Some(m) = v.as_object_mut() {
                f(m)
            }
        }
        Some((&"*", rest)) => match v {
            Value::Array(a) => a.iter_mut().for_each(|e| for_each_holder(e, rest, f)),
            Value::Object(m) => m.values_mut().for_each(|e| for_each_holder(e, rest, f)),
            _ => {}
        },
        Some((key, rest)) => {
            if let Some(child) = v.get_mut(*key) {
                for_each_holder(child, rest, f)
            }
        }
    }
}

/// The definition as readers see it: each secret field replaced by what [`Secret::shown_as`]
/// names.
pub fn redact(def: &Map<String, Value>, secrets: &[Secret]) -> Map<String, Value> {
    let mut v = Value::Object(def.clone());
    for s in secrets {
        let (parents, name) = s.segments();
        let shown = s.shown_as();
        for_each_holder(&mut v, &parents, &mut |m| {
            let Some(value) = m.remove(name) else { return };
            match s.shape {
                Shape::Value => {
                    if !value.is_null() {
                        m.insert(shown.clone(), Value::Bool(true));
                    }
                }
                Shape::Map => {
                    let mut keys: Vec<Value> = value
                        .as_object()
                        .map(|o| o.keys().cloned().map(Value::String).collect())
                        .unwrap_or_default();
                    keys.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
                    m.insert(shown.clone(), Value::Array(keys));
                }
            }
        });
    }
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// Drops the view-only members (`<name>_set`, `<name>_keys`) a client may send back.
pub fn strip_shown(def: &mut Map<String, Value>, secrets: &[Secret]) {
    let mut v = Value::Object(std::mem::take(def));
    for s in secrets {
        let (parents, _) = s.segments();
        let shown = s.shown_as();
        for_each_holder(&mut v, &parents, &mut |m| {
            m.remove(&shown);
        });
    }
    if let Value::Object(m) = v {
        *def = m;
    }
}

/// Copies into `new` the secret values of `old` that `new` leaves out (see the module docs).
pub fn carry_over(old: &Map<String, Value>, new: &mut Map<String, Value>, secrets: &[Secret]) {
    let old = Value::Object(old.clone());
    for s in secrets {
        let (parents, name) = s.segments();
        carry_at(&old, new, &parents, name);
    }
}

fn carry_at(old: &Value, new: &mut Map<String, Value>, parents: &[&str], name: &str) {
    match parents.split_first() {
        None => {
            if !new.contains_key(name) {
                if let Some(v) = old.get(name) {
                    new.insert(name.to_string(), v.clone());
                }
            }
        }
        Some((&"*", _)) => {}
        Some((key, rest)) => {
            let Some(old_child) = old.get(*key) else {
                return;
            };
            let Some(new_child) = new.get_mut(*key) else {
                return;
            };
            match rest.split_first() {
                Some((&"*", after)) => carry_elements(old_child, new_child, after, name),
                _ => {
                    if let Some(m) = new_child.as_object_mut() {
                        carry_at(old_child, m, rest, name)
                    }
                }
            }
        }
    }
}

/// `*` below `key`: array elements matched by `id` (else position), object values by key.
fn carry_elements(old: &Value, new: &mut Value, after: &[&str], name: &str) {
    match (old, new) {
        (Value::Array(olds), Value::Array(news)) => {
            for (i, n) in news.iter_mut().enumerate() {
                let id = n.get("id").and_then(Value::as_str).map(str::to_string);
                let o = match &id {
                    Some(id) => olds
                        .iter()
                        .find(|o| o.get("id").and_then(Value::as_str) == Some(id)),
                    None => olds.get(i),
                };
                if let (Some(o), Some(m)) = (o, n.as_object_mut()) {
                    carry_at(o, m, after, name);
                }
            }
        }
        (Value::Object(olds), Value::Object(news)) => {
            for (k, n) in news.iter_mut() {
                if let (Some(o), Some(m)) = (olds.get(k), n.as_object_mut()) {
                    carry_at(o, m, after, name);
                }
            }
        }
        _ => {}
    }
}

/// The secret values of `def` in a stable order (path, then value), for the revision digest.
pub fn values(def: &Map<String, Value>, secrets: &[Secret]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut v = Value::Object(def.clone());
    for s in secrets {
        let (parents, name) = s.segments();
        for_each_holder(&mut v, &parents, &mut |m| {
            if let Some(x) = m.get(name).filter(|x| !x.is_null()) {
                out.push(Value::Array(vec![Value::String(s.path.into()), x.clone()]));
            }
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRETS: &[Secret] = &[
        Secret {
            path: "triggers/*/secret",
            shape: Shape::Value,
        },
        Secret {
            path: "transport/env",
            shape: Shape::Map,
        },
    ];

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn views_show_names_never_values() {
        let def = obj(json!({
            "triggers": [{"id": "a", "secret": "s3cret"}, {"id": "b"}],
            "transport": {"env": {"Z": "1", "A": "2"}}
        }));
        let view = redact(&def, SECRETS);
        assert_eq!(
            Value::Object(view.clone()),
            json!({"triggers": [{"id": "a", "secret_set": true}, {"id": "b"}],
                   "transport": {"env_keys": ["A", "Z"]}})
        );
        assert!(!Value::Object(view).to_string().contains("s3cret"));
        assert_eq!(values(&def, SECRETS).len(), 2);
    }

    #[test]
    fn a_round_trip_keeps_secrets() {
        let old = obj(json!({
            "triggers": [{"id": "a", "secret": "one"}, {"id": "b", "secret": "two"}],
            "transport": {"env": {"K": "v"}}
        }));
        // A client sends back the view, reordered, with one secret replaced.
        let mut new = obj(json!({
            "triggers": [{"id": "b", "secret_set": true}, {"id": "a", "secret": "new"}, {"id": "c"}],
            "transport": {"env_keys": ["K"]}
        }));
        strip_shown(&mut new, SECRETS);
        carry_over(&old, &mut new, SECRETS);
        assert_eq!(
            Value::Object(new),
            json!({"triggers": [{"id": "b", "secret": "two"}, {"id": "a", "secret": "new"}, {"id": "c"}],
                   "transport": {"env": {"K": "v"}}})
        );
    }
}
