//! The secret vault: `<state-dir>/secrets.json`, a JSON object `name → {value, type,
//! description?, created_at, updated_at}` (api.md 6.3), mode 0600, every write atomic
//! (temp file in the same directory, fsync, rename).
//!
//! Integration secrets (LLM keys and the like) live here only; the server never falls back to
//! process environment variables for them (SPEC 1.10). Values are never logged, never
//! printed by `list`, and never part of an error message.
//!
//! [`VaultRedactor`] feeds the engine's redactor with every stored value, so no secret is
//! recorded in a run's events.
//!
//! Owns: the vault file. Must not touch: settings, the dev token, or anything else.

use crate::base::redact::{Redact, Secrets};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

pub const VAULT_FILE: &str = "secrets.json";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SecretType {
    /// Env-style name (`OPENAI_API_KEY`), exposed to runs as an environment variable.
    #[default]
    Environment,
    /// An absolute file path as name; the value is the file content.
    File,
    /// Provider credential; the name is the provider id.
    Credential,
}

#[derive(Clone, Serialize, Deserialize, PartialEq)]
pub struct Secret {
    pub value: String,
    #[serde(rename = "type", default)]
    pub kind: SecretType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("value", &"<redacted>")
            .field("kind", &self.kind)
            .field("created_at", &self.created_at)
            .finish()
    }
}

/// What `list` shows: everything but the value.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SecretMeta {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: SecretType,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error("invalid secret name `{0}`: {1}")]
    BadName(String, &'static str),
    #[error("no secret named `{0}`")]
    NotFound(String),
    #[error("vault {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("vault {path} is not valid JSON: {message}")]
    Corrupt { path: PathBuf, message: String },
}

/// The vault at one path. Every call reads the file afresh, so concurrent processes (the CLI
/// and a running server) see each other's writes.
#[derive(Debug, Clone)]
pub struct Vault {
    path: PathBuf,
}

impl Vault {
    pub fn in_state_dir(dir: &Path) -> Vault {
        Vault {
            path: dir.join(VAULT_FILE),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: std::io::Error) -> VaultError {
        VaultError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn load(&self) -> Result<BTreeMap<String, Secret>, VaultError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| VaultError::Corrupt {
                path: self.path.clone(),
                message: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(self.io(e)),
        }
    }

    fn save(&self, all: &BTreeMap<String, Secret>) -> Result<(), VaultError> {
        let dir = self
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| self.io(e))?;
        let bytes = serde_json::to_vec_pretty(all).map_err(|e| VaultError::Corrupt {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        write_private_atomic(&self.path, &bytes).map_err(|e| self.io(e))
    }

    /// Creates or replaces a secret.
    pub fn set(&self, name: &str, value: &str, kind: SecretType) -> Result<(), VaultError> {
        validate_name(name, kind)?;
        let mut all = self.load()?;
        let now = crate::base::clock::now();
        let created_at = all
            .get(name)
            .map(|s| s.created_at.clone())
            .unwrap_or_else(|| now.clone());
        all.insert(
            name.to_string(),
            Secret {
                value: value.to_string(),
                kind,
                description: None,
                created_at,
                updated_at: now,
            },
        );
        self.save(&all)
    }

    pub fn get(&self, name: &str) -> Result<Option<String>, VaultError> {
        Ok(self.load()?.remove(name).map(|s| s.value))
    }

    /// Every value at once, read in one go (answers that consult many names).
    pub fn snapshot(&self) -> Result<crate::llm::StaticCredentials, VaultError> {
        Ok(crate::llm::StaticCredentials(
            self.load()?
                .into_iter()
                .map(|(k, s)| (k, s.value))
                .collect(),
        ))
    }

    pub fn remove(&self, name: &str) -> Result<(), VaultError> {
        let mut all = self.load()?;
        if all.remove(name).is_none() {
            return Err(VaultError::NotFound(name.to_string()));
        }
        self.save(&all)
    }

    /// Metadata of every secret, sorted by name; values are not included.
    pub fn list(&self) -> Result<Vec<SecretMeta>, VaultError> {
        Ok(self
            .load()?
            .into_iter()
            .map(|(name, s)| SecretMeta {
                name,
                kind: s.kind,
                description: s.description,
                created_at: s.created_at,
                updated_at: s.updated_at,
            })
            .collect())
    }
}

/// Every value a secret could show up as: each value and, for a credential holding JSON,
/// each string inside it (a tool may print one field).
fn exposed_values(all: &BTreeMap<String, Secret>) -> Vec<String> {
    fn leaves(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Array(a) => a.iter().for_each(|x| leaves(x, out)),
            serde_json::Value::Object(m) => m.values().for_each(|x| leaves(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for s in all.values() {
        out.push(s.value.clone());
        if s.kind == SecretType::Credential {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&s.value) {
                leaves(&v, &mut out);
            }
        }
    }
    out
}

/// How often [`VaultRedactor`] looks for a changed vault file.
const REDACTOR_RECHECK: Duration = Duration::from_secs(1);

/// The engine's redactor over a vault: hides every stored value (see
/// [`crate::base::redact`] for the forms matched). The file is read when the redactor is
/// made and again when it changes (checked at most once a second), so a secret stored while
/// a run is going is hidden from then on. A vault that cannot be read keeps the values read
/// before (logged).
pub struct VaultRedactor {
    vault: Vault,
    /// Values hidden besides the vault's: the server's own secrets (the dev token, the
    /// session secret), which do not live in the vault file.
    fixed: Vec<String>,
    state: Mutex<RedactorState>,
}

struct RedactorState {
    checked: Instant,
    /// (modified, length, inode) of the file last read; `None` when it did not exist.
    stamp: Option<(Option<SystemTime>, u64, u64)>,
    secrets: Arc<Secrets>,
}

impl VaultRedactor {
    pub fn new(vault: Vault) -> VaultRedactor {
        VaultRedactor::with_fixed(vault, Vec::new())
    }

    /// A redactor that also hides `fixed` (see `auth::server_secret_values`).
    pub fn with_fixed(vault: Vault, fixed: Vec<String>) -> VaultRedactor {
        // The fixed values are hidden even when the vault cannot be read.
        let secrets = Arc::new(Secrets::new(&fixed));
        let r = VaultRedactor {
            vault,
            fixed,
            state: Mutex::new(RedactorState {
                checked: Instant::now(),
                stamp: None,
                secrets,
            }),
        };
        r.reload(&mut r.state.lock());
        r
    }

    fn stamp(&self) -> Option<(Option<SystemTime>, u64, u64)> {
        std::fs::metadata(&self.vault.path)
            .ok()
            .map(|m| (m.modified().ok(), m.len(), m.ino()))
    }

    fn reload(&self, st: &mut RedactorState) {
        st.checked = Instant::now();
        st.stamp = self.stamp();
        match self.vault.load() {
            Ok(all) => {
                let mut values = exposed_values(&all);
                values.extend(self.fixed.iter().cloned());
                st.secrets = Arc::new(Secrets::new(values))
            }
            Err(e) => log::warn!("secret redaction keeps the values read before: {e}"),
        }
    }

    fn current(&self) -> Arc<Secrets> {
        let mut st = self.state.lock();
        if st.checked.elapsed() >= REDACTOR_RECHECK {
            if self.stamp() == st.stamp {
                st.checked = Instant::now();
            } else {
                self.reload(&mut st);
            }
        }
        Arc::clone(&st.secrets)
    }
}

impl Redact for VaultRedactor {
    fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.current().redact(text) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            Cow::Owned(s) => Cow::Owned(s),
        }
    }
}

/// API keys for LLM clients come straight from the vault (never the environment). A vault
/// that cannot be read counts as holding no key (the provider then reports itself not
/// configured) and is logged.
impl crate::llm::Credentials for Vault {
    fn get(&self, name: &str) -> Option<String> {
        match Vault::get(self, name) {
            Ok(v) => v,
            Err(e) => {
                log::warn!("cannot read credential {name}: {e}");
                None
            }
        }
    }
}

/// Env-style names `[A-Za-z_][A-Za-z0-9_]*` (credentials too: provider ids); file secrets
/// are absolute paths without `..`.
pub fn validate_name(name: &str, kind: SecretType) -> Result<(), VaultError> {
    let bad = |why| Err(VaultError::BadName(name.to_string(), why));
    match kind {
        SecretType::File => {
            if !name.starts_with('/') {
                return bad("a file secret's name is an absolute path");
            }
            if name.split('/').any(|s| s == "..") {
                return bad("`..` is not allowed");
            }
        }
        SecretType::Environment | SecretType::Credential => {
            let mut chars = name.chars();
            match chars.next() {
                Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
                _ => return bad("must start with a letter or `_`"),
            }
            if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return bad("only letters, digits and `_` are allowed");
            }
        }
    }
    Ok(())
}

/// Writes `bytes` to `path` with mode 0600: temp file in the same directory, fsync, rename.
pub fn write_private_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let mut rnd = [0u8; 6];
    crate::base::random::fill_random(&mut rnd)?;
    let tmp = dir.join(format!(".{name}.{}.tmp", crate::base::hex(&rnd)));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_list_remove() {
        let dir = tempfile::tempdir().unwrap();
        let v = Vault::in_state_dir(dir.path());
        assert!(v.list().unwrap().is_empty());
        v.set("OPENAI_API_KEY", "sk-1", SecretType::Environment)
            .unwrap();
        v.set("anthropic", "sk-2", SecretType::Credential).unwrap();
        assert_eq!(v.get("OPENAI_API_KEY").unwrap().as_deref(), Some("sk-1"));
        let mode = std::fs::metadata(v.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let names: Vec<_> = v.list().unwrap().into_iter().map(|m| m.name).collect();
        assert_eq!(names, ["OPENAI_API_KEY", "anthropic"]);
        let listed = serde_json::to_string(&v.list().unwrap()).unwrap();
        assert!(!listed.contains("sk-1"));
        v.set("OPENAI_API_KEY", "sk-3", SecretType::Environment)
            .unwrap();
        assert_eq!(v.get("OPENAI_API_KEY").unwrap().as_deref(), Some("sk-3"));
        v.remove("OPENAI_API_KEY").unwrap();
        assert!(matches!(
            v.remove("OPENAI_API_KEY"),
            Err(VaultError::NotFound(_))
        ));
        assert!(v.set("1BAD", "x", SecretType::Environment).is_err());
        assert!(v.set("a-b", "x", SecretType::Environment).is_err());
        assert!(v.set("rel/path", "x", SecretType::File).is_err());
        assert!(v.set("/a/../b", "x", SecretType::File).is_err());
        v.set("/etc/x.pem", "x", SecretType::File).unwrap();
        assert!(!format!(
            "{:?}",
            Secret {
                value: "topsecret".into(),
                kind: SecretType::File,
                description: None,
                created_at: String::new(),
                updated_at: String::new()
            }
        )
        .contains("topsecret"));
    }

    #[test]
    fn the_redactor_hides_every_stored_value_and_follows_changes() {
        let dir = tempfile::tempdir().unwrap();
        let v = Vault::in_state_dir(dir.path());
        v.set("API_TOKEN", "tok-0123456789", SecretType::Environment)
            .unwrap();
        v.set(
            "gemini",
            r#"{"api_key": "AIza-inner-value-42"}"#,
            SecretType::Credential,
        )
        .unwrap();
        v.set("PIN", "1234", SecretType::Environment).unwrap();
        let r = VaultRedactor::new(v.clone());
        assert_eq!(
            r.redact("a tok-0123456789 b AIza-inner-value-42 c 1234"),
            "a [REDACTED] b [REDACTED] c 1234"
        );
        v.set("LATER", "added-after-start", SecretType::Environment)
            .unwrap();
        r.state.lock().checked -= REDACTOR_RECHECK;
        assert_eq!(r.redact("x added-after-start"), "x [REDACTED]");
    }
}
