//! Changing `settings.toml` while the server runs (`PATCH /api/v1/settings`): which keys may
//! change live ([`LIVE_KEYS`]) and which need a restart ([`RESTART_KEYS`]), the file's
//! revision (SHA-256 of its bytes), a JSON merge patch (RFC 7396) applied to the file's TOML,
//! validated like any edit, and written atomically.
//!
//! The written file is what the live reload reads; the caller swaps the parsed settings in at
//! once too, so the answer and the next request agree (the watcher then sees no change).
//! Comments in the file are not kept: the file is written back from its parsed form.
//!
//! Owns: the settings file's revision and its patching. Must not touch: HTTP, the vault, or
//! the watcher.

use super::Settings;
use parking_lot::Mutex;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::path::Path;

/// Keys a patch may change (a `*` segment matches any name; a key covers what is below it).
/// Each is read per run or per decision, so a change applies to the next run, scheduling
/// decision or model call without a restart.
pub const LIVE_KEYS: [&str; 5] = [
    "run",
    "server.scheduler.max_concurrent_runs",
    "server.max_usd_per_day",
    "server.object_store",
    "llm.providers.*.base_url",
];

/// Keys read once at startup: a patch naming one is refused with a message saying so.
pub const RESTART_KEYS: [&str; 4] = [
    "_version",
    "server.listen",
    "server.http",
    "server.preview.listen",
];

/// Why a patch was refused.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("the patch must be a JSON object of settings keys")]
    NotObject,
    #[error("`{key}` is not a settings key")]
    Unknown { key: String },
    #[error(
        "`{key}` is read only at startup: edit settings.toml and restart the server to change it"
    )]
    RestartOnly { key: String },
    #[error("`{key}` cannot be changed over HTTP (keys that can: {}); edit settings.toml on the server", LIVE_KEYS.join(", "))]
    NotLive { key: String },
    #[error("invalid settings after the patch: {0}")]
    Invalid(String),
    #[error(
        "If-Match is required: send the settings' current revision (ETag of GET /api/v1/settings)"
    )]
    PreconditionRequired,
    #[error("the settings file changed since revision {given}; the current revision is {current}")]
    Stale { given: String, current: String },
    #[error("cannot write {path}: {message}")]
    Io { path: String, message: String },
}

/// The revision of the settings file's bytes (a missing file is empty).
pub fn revision(bytes: &[u8]) -> String {
    crate::base::hex(&Sha256::digest(bytes))
}

/// The file's bytes (empty when it does not exist) and their revision.
pub fn read(path: &Path) -> Result<(Vec<u8>, String), PatchError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(io_error(path, &e)),
    };
    let rev = revision(&bytes);
    Ok((bytes, rev))
}

fn io_error(path: &Path, e: &dyn std::fmt::Display) -> PatchError {
    PatchError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// One patch at a time: read, compare, write must not interleave.
static WRITE_LOCK: Mutex<()> = Mutex::new(());

/// Applies `patch` to the file at `path` if its revision is `if_match`; the new settings and
/// revision.
pub fn patch_file(
    path: &Path,
    if_match: Option<&str>,
    patch: &Value,
) -> Result<(Settings, String), PatchError> {
    let given = if_match
        .map(|s| {
            s.trim()
                .trim_start_matches("W/")
                .trim_matches('"')
                .to_string()
        })
        .ok_or(PatchError::PreconditionRequired)?;
    let _guard = WRITE_LOCK.lock();
    let (bytes, current) = read(path)?;
    if given != current {
        return Err(PatchError::Stale { given, current });
    }
    let text = String::from_utf8(bytes).map_err(|e| PatchError::Invalid(e.to_string()))?;
    let (new_text, settings) = apply(&text, patch)?;
    super::vault::write_private_atomic(path, new_text.as_bytes())
        .map_err(|e| io_error(path, &e))?;
    Ok((settings, revision(new_text.as_bytes())))
}

/// The file text after `patch`, and the settings it holds.
pub fn apply(text: &str, patch: &Value) -> Result<(String, Settings), PatchError> {
    let Value::Object(patch) = patch else {
        return Err(PatchError::NotObject);
    };
    let mut table: toml::Table =
        toml::from_str(text).map_err(|e| PatchError::Invalid(e.to_string()))?;
    let mut keys = Vec::new();
    leaf_keys(patch, "", &mut keys);
    for key in &keys {
        check_key(&table, key, patch)?;
    }
    merge(&mut table, patch)?;
    let new_text = toml::to_string(&table).map_err(|e| PatchError::Invalid(e.to_string()))?;
    let settings = Settings::parse(&new_text).map_err(|e| PatchError::Invalid(e.to_string()))?;
    Ok((new_text, settings))
}

/// Whether `key` is `pattern` or below it (`*` matches one segment).
fn covered_by(key: &str, pattern: &str) -> bool {
    let mut k = key.split('.');
    for p in pattern.split('.') {
        match k.next() {
            Some(s) if p == "*" || p == s => {}
            _ => return false,
        }
    }
    true
}

fn is_live(key: &str) -> bool {
    LIVE_KEYS.iter().any(|p| covered_by(key, p))
}

fn is_restart_only(key: &str) -> bool {
    RESTART_KEYS.iter().any(|p| covered_by(key, p))
}

/// The dotted keys a patch names: objects are descended until a live or restart-only key.
fn leaf_keys(obj: &Map<String, Value>, prefix: &str, out: &mut Vec<String>) {
    for (k, v) in obj {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Object(inner)
                if !is_live(&key) && !is_restart_only(&key) && !inner.is_empty() =>
            {
                leaf_keys(inner, &key, out)
            }
            _ => out.push(key),
        }
    }
}

/// Refuses a key that needs a restart, one that is not live, and one svc does not know.
fn check_key(table: &toml::Table, key: &str, patch: &Map<String, Value>) -> Result<(), PatchError> {
    if is_restart_only(key) {
        return Err(PatchError::RestartOnly { key: key.into() });
    }
    if is_live(key) {
        return Ok(());
    }
    // Known or not: apply this key alone to the file and see whether svc's reader knows it.
    let mut probe = table.clone();
    let parts: Vec<&str> = key.split('.').collect();
    let single = nest(&parts, value_at(patch, &parts));
    let unknown = merge(&mut probe, &single)
        .ok()
        .and_then(|()| toml::to_string(&probe).ok())
        .and_then(|t| toml::from_str::<Settings>(&t).err())
        .is_some_and(|e| e.to_string().contains("unknown field"));
    if unknown {
        Err(PatchError::Unknown { key: key.into() })
    } else {
        Err(PatchError::NotLive { key: key.into() })
    }
}

/// The value a patch gives the dotted path `parts` (null when it gives none).
fn value_at(patch: &Map<String, Value>, parts: &[&str]) -> Value {
    match parts {
        [] => Value::Null,
        [last] => patch.get(*last).cloned().unwrap_or(Value::Null),
        [first, rest @ ..] => match patch.get(*first) {
            Some(Value::Object(inner)) => value_at(inner, rest),
            _ => Value::Null,
        },
    }
}

/// `{a: {b: v}}` for the path `a.b`.
fn nest(parts: &[&str], v: Value) -> Map<String, Value> {
    let mut m = Map::new();
    match parts {
        [] => {}
        [last] => {
            m.insert((*last).to_string(), v);
        }
        [first, rest @ ..] => {
            m.insert((*first).to_string(), Value::Object(nest(rest, v)));
        }
    }
    m
}

/// RFC 7396 on a TOML table: objects merge, `null` removes, anything else replaces.
fn merge(table: &mut toml::Table, patch: &Map<String, Value>) -> Result<(), PatchError> {
    for (k, v) in patch {
        match v {
            Value::Null => {
                table.remove(k);
            }
            Value::Object(inner) => {
                let slot = table
                    .entry(k.clone())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                if !slot.is_table() {
                    *slot = toml::Value::Table(toml::Table::new());
                }
                if let toml::Value::Table(t) = slot {
                    merge(t, inner)?;
                }
            }
            other => {
                let tv: toml::Value = serde_json::from_value(other.clone())
                    .map_err(|e| PatchError::Invalid(format!("`{k}`: {e}")))?;
                table.insert(k.clone(), tv);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn live_keys_change_and_the_rest_is_refused_with_its_reason() {
        let text = "[server.scheduler]\nmax_concurrent_runs = 2\n[run]\ngoal = \"a\"\n";
        let (out, s) = apply(
            text,
            &json!({"server": {"scheduler": {"max_concurrent_runs": 7}}, "run": {"goal": null, "metadata": {"team": "x"}}}),
        )
        .unwrap();
        assert_eq!(s.server.scheduler.max_concurrent_runs, 7);
        assert_eq!(s.run.goal, None);
        assert_eq!(s.run.metadata["team"], "x");
        assert!(Settings::parse(&out).is_ok());
        let err = |p: Value| apply(text, &p).unwrap_err();
        assert!(
            matches!(err(json!({"server": {"listen": {"type": "tcp", "address": "0.0.0.0:1"}}})), PatchError::RestartOnly { key } if key == "server.listen")
        );
        assert!(matches!(
            err(json!({"server": {"http": {"max_body_bytes": 5}}})),
            PatchError::RestartOnly { .. }
        ));
        assert!(
            matches!(err(json!({"server": {"auth": {"methods": ["codehost"]}}})), PatchError::NotLive { key } if key == "server.auth.methods")
        );
        assert!(
            matches!(err(json!({"server": {"nope": 1}})), PatchError::Unknown { key } if key == "server.nope")
        );
        assert!(matches!(
            err(json!({"run": {"bogus": 1}})),
            PatchError::Invalid(_)
        ));
        assert!(matches!(
            err(json!({"server": {"scheduler": {"max_concurrent_runs": "many"}}})),
            PatchError::Invalid(_)
        ));
        assert!(matches!(
            err(json!({"server": {"scheduler": {"max_concurrent_runs": 0}}})),
            PatchError::Invalid(_)
        ));
        assert!(matches!(err(json!([1])), PatchError::NotObject));
        let (_, s) = apply(
            "",
            &json!({"llm": {"providers": {"openai": {"base_url": "http://127.0.0.1:9/v1"}}}}),
        )
        .unwrap();
        assert!(s.llm.providers.contains_key("openai"));
    }

    #[test]
    fn the_revision_guards_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.toml");
        let (_, r0) = read(&path).unwrap();
        assert!(matches!(
            patch_file(&path, None, &json!({})),
            Err(PatchError::PreconditionRequired)
        ));
        let (s, r1) = patch_file(
            &path,
            Some(&format!("\"{r0}\"")),
            &json!({"run": {"goal": "g"}}),
        )
        .unwrap();
        assert_eq!(s.run.goal.as_deref(), Some("g"));
        assert_eq!(read(&path).unwrap().1, r1);
        assert!(matches!(
            patch_file(&path, Some(&r0), &json!({"run": {"goal": "h"}})),
            Err(PatchError::Stale { .. })
        ));
    }
}
