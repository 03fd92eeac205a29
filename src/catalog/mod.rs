//! Server-managed catalogs (opgroups 0.3): named, user-edited definitions the server keeps
//! (automations, MCP servers, environments, saved queries), all with one set of rules,
//! implemented once here.
//!
//! - **Ids** are caller-chosen slugs, `^[a-z0-9][a-z0-9-]{0,62}$` ([`is_slug`]). A create body
//!   carries `id`; a replace body may leave it out (the path's id is authoritative; a
//!   different one is refused).
//! - **Revision**: lowercase hex SHA-256 of the definition's canonical form ([`canonical`]:
//!   the definition as readers see it, object keys sorted, no whitespace), followed, when it
//!   has secret values, by `\nsecrets:` and a salted SHA-256 of them (so changing a secret
//!   changes the revision, and the revision reveals nothing about it). Served as `revision`
//!   and as the quoted `ETag`.
//! - **Optimistic concurrency**: replace and delete need `If-Match: "<revision>"` (quotes
//!   optional): missing → [`CatalogError::PreconditionRequired`] (428), malformed → 400,
//!   stale → 409. Creating an existing id → 409.
//! - **Bodies**: a view sent back is a valid body: `revision`, `created_at`, `updated_at`
//!   and the secrets' `_set`/`_keys` members are ignored.
//! - **Validation**: malformed JSON or a body that is not an object → 400; the catalog's own
//!   rules ([`Kind::validate`]) → 422 with one entry per field ([`Invalid`]).
//! - **Listing**: `{data: [...], meta: {total}}`, sorted by id, no paging.
//! - **Secrets**: [`Kind::SECRETS`] names write-only fields ([`secrets`]).
//! - **Storage**: one table per catalog in the store ([`crate::store::catalog`], created by a
//!   migration), with CHECKs
//!   mirroring these rules. The server process is the only writer, so each catalog keeps its
//!   entries in memory too (listing 10,000 of them serialises nothing twice).
//!
//! A new catalog: a migration creating its table and a `CatalogTable` naming it, a type implementing [`Kind`]
//! (noun, table, secrets, `validate`), a [`Catalog`] of it in the server's `App`, and its
//! five routes through `server::catalog` (see docs/decisions.md, "Catalogs").
//!
//! Owns: ids, revisions, conditional writes, secret hiding and the error vocabulary of every
//! catalog. Must not touch: HTTP (the server maps [`CatalogError`] to statuses), SQL (the
//! store's), or what a particular catalog's fields mean (its [`Kind`]).

pub mod fields;
pub mod secrets;

pub use fields::{Errors, Invalid, Obj};
pub use secrets::{Secret, Shape};

use crate::store::{CatalogRow, CatalogTable, CatalogTables, StoreError, WriteConflict};
use parking_lot::{Mutex, RwLock};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What one catalog is: its table, its noun, its secret fields and its rules.
pub trait Kind: Send + Sync + 'static {
    /// The table in the store (`store::catalog`).
    const TABLE: &'static CatalogTable;
    /// The singular noun messages use, e.g. `automation`.
    const NOUN: &'static str;
    /// Write-only fields (see [`secrets`]).
    const SECRETS: &'static [Secret] = &[];

    /// Checks a definition (the body without `id`, secrets included, carried-over secrets
    /// filled in) and returns it normalised (defaults written out), or every problem found,
    /// each naming its field. `id` is the entry's id.
    fn validate(&self, id: &str, def: &Map<String, Value>) -> Result<Map<String, Value>, Errors>;
}

/// True for a valid catalog id: `^[a-z0-9][a-z0-9-]{0,62}$`.
pub fn is_slug(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0] != b'-'
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// Why a catalog operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The body is not JSON, or not an object (400).
    #[error("{0}")]
    Malformed(String),
    /// A path id that cannot be an id (400).
    #[error("`{id}` is not a valid {noun} id: expected ^[a-z0-9][a-z0-9-]{{0,62}}$")]
    BadId { noun: &'static str, id: String },
    #[error("no {noun} with id `{id}`")]
    NotFound { noun: &'static str, id: String },
    #[error("a {noun} with id `{id}` already exists")]
    Exists { noun: &'static str, id: String },
    /// Replace/delete without `If-Match` (428).
    #[error("If-Match with the {noun}'s current revision is required to change or delete it")]
    PreconditionRequired { noun: &'static str },
    /// An `If-Match` that is not a revision (400).
    #[error("If-Match `{0}` is not a revision (64 lowercase hex digits, optionally quoted)")]
    BadPrecondition(String),
    /// The entry changed since the caller read it (409).
    #[error(
        "the {noun} `{id}` has changed: its revision is now {current}; read it again and retry"
    )]
    Stale {
        noun: &'static str,
        id: String,
        current: String,
    },
    /// Domain validation (422), one entry per field.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Errors),
    #[error("catalog storage failed: {0}")]
    Store(#[from] StoreError),
}

/// One stored entry.
#[derive(Debug, Clone)]
pub struct Item {
    pub id: String,
    pub revision: String,
    /// The full definition, secret values included: for the server's own use only.
    pub definition: Map<String, Value>,
    pub created_at: String,
    pub updated_at: String,
    salt: String,
    /// The entry as readers see it, serialised once.
    view: String,
}

impl Item {
    /// The JSON text readers get: `{id, revision, <definition, secrets hidden>, created_at,
    /// updated_at}`.
    pub fn view_json(&self) -> &str {
        &self.view
    }

    /// [`Item::view_json`] as a value.
    pub fn view(&self) -> Value {
        serde_json::from_str(&self.view).unwrap_or(Value::Null)
    }

    /// The quoted revision, for `ETag`.
    pub fn etag(&self) -> String {
        format!("\"{}\"", self.revision)
    }
}

/// What changed, told to [`Catalog::on_change`] listeners after the commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Created,
    Replaced,
    Deleted,
}

type Listener = Box<dyn Fn(&str, ChangeKind) + Send + Sync>;

/// One catalog: its rules ([`Kind`]), its table and the entries in memory.
pub struct Catalog<K: Kind> {
    kind: K,
    db: Arc<dyn CatalogTables>,
    items: RwLock<BTreeMap<String, Arc<Item>>>,
    /// Serialises writes so the table and the entries in memory change in the same order.
    write: Mutex<()>,
    listeners: RwLock<Vec<Listener>>,
}

impl<K: Kind> Catalog<K> {
    /// Loads the catalog from its table. An entry the current rules no longer accept is
    /// still loaded (and logged): it was valid when written, and dropping it would lose it.
    pub fn open(kind: K, db: Arc<dyn CatalogTables>) -> Result<Catalog<K>, CatalogError> {
        let mut items = BTreeMap::new();
        for row in db.catalog_list(K::TABLE)? {
            match item_of::<K>(row) {
                Ok(item) => {
                    items.insert(item.id.clone(), Arc::new(item));
                }
                Err(e) => log::error!("{} catalog: an unreadable entry is skipped: {e}", K::NOUN),
            }
        }
        Ok(Catalog {
            kind,
            db,
            items: RwLock::new(items),
            write: Mutex::new(()),
            listeners: RwLock::new(Vec::new()),
        })
    }

    pub fn kind(&self) -> &K {
        &self.kind
    }

    /// Calls `f(id, change)` after every committed write.
    pub fn on_change(&self, f: impl Fn(&str, ChangeKind) + Send + Sync + 'static) {
        self.listeners.write().push(Box::new(f));
    }

    /// Every entry, sorted by id.
    pub fn list(&self) -> Vec<Arc<Item>> {
        self.items.read().values().cloned().collect()
    }

    /// The list envelope, `{"data": [...], "meta": {"total": n}}`, as JSON text.
    pub fn list_json(&self) -> String {
        let items = self.items.read();
        let mut out =
            String::with_capacity(items.values().map(|i| i.view.len() + 1).sum::<usize>() + 40);
        out.push_str("{\"data\":[");
        for (i, item) in items.values().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&item.view);
        }
        out.push_str(&format!("],\"meta\":{{\"total\":{}}}}}", items.len()));
        out
    }

    /// The entry `id` (`BadId` for a malformed id, `NotFound` for an unknown one).
    pub fn get(&self, id: &str) -> Result<Arc<Item>, CatalogError> {
        check_path_id::<K>(id)?;
        self.items
            .read()
            .get(id)
            .cloned()
            .ok_or_else(|| CatalogError::NotFound {
                noun: K::NOUN,
                id: id.to_string(),
            })
    }

    /// Creates an entry from a create body (`{id, ...definition}`).
    pub fn create(&self, body: &[u8]) -> Result<Arc<Item>, CatalogError> {
        let mut def = parse_body(body)?;
        // The id's problem and the definition's are reported together.
        let (id, id_error) = match def.remove("id") {
            Some(Value::String(id)) if is_slug(&id) => (id, None),
            Some(Value::String(id)) => {
                let e = Invalid::new(
                    "id",
                    format!("`{id}` is not a valid id: expected ^[a-z0-9][a-z0-9-]{{0,62}}$ (lowercase letters, digits and dashes, not starting with a dash, at most 63)"),
                );
                (id, Some(e))
            }
            Some(other) => (
                String::new(),
                Some(Invalid::new(
                    "id",
                    format!("must be a string, not {}", fields::type_name(&other)),
                )),
            ),
            None => (String::new(), Some(Invalid::new("id", "is required"))),
        };
        strip_view_only::<K>(&mut def);
        let def = match (self.kind.validate(&id, &def), id_error) {
            (Ok(def), None) => def,
            (Ok(_), Some(e)) => return Err(CatalogError::Invalid(vec![e])),
            (Err(errs), e) => {
                return Err(CatalogError::Invalid(e.into_iter().chain(errs).collect()))
            }
        };
        let _w = self.write.lock();
        if self.items.read().contains_key(&id) {
            return Err(CatalogError::Exists { noun: K::NOUN, id });
        }
        let now = crate::base::clock::now();
        let item = build_item::<K>(id, def, fresh_salt(), now.clone(), now)?;
        match self.db.catalog_insert(K::TABLE, &row_of(&item)?)? {
            Ok(()) => {}
            Err(_) => {
                return Err(CatalogError::Exists {
                    noun: K::NOUN,
                    id: item.id,
                })
            }
        }
        Ok(self.commit(item, ChangeKind::Created))
    }

    /// Replaces entry `id` with a replace body, if `if_match` names its current revision.
    pub fn replace(
        &self,
        id: &str,
        if_match: Option<&str>,
        body: &[u8],
    ) -> Result<Arc<Item>, CatalogError> {
        check_path_id::<K>(id)?;
        let expected = precondition::<K>(if_match)?;
        let mut def = parse_body(body)?;
        match def.remove("id") {
            None => {}
            Some(Value::String(s)) if s == id => {}
            Some(other) => {
                return Err(CatalogError::Invalid(vec![Invalid::new(
                    "id",
                    format!(
                        "is set by the path (`{id}`) and cannot be changed; the body says {other}"
                    ),
                )]))
            }
        }
        let _w = self.write.lock();
        let old = self.get(id)?;
        check_revision::<K>(&old, &expected)?;
        strip_view_only::<K>(&mut def);
        secrets::carry_over(&old.definition, &mut def, K::SECRETS);
        let def = self
            .kind
            .validate(id, &def)
            .map_err(CatalogError::Invalid)?;
        let item = build_item::<K>(
            id.to_string(),
            def,
            old.salt.clone(),
            old.created_at.clone(),
            crate::base::clock::now(),
        )?;
        self.db
            .catalog_replace(K::TABLE, &row_of(&item)?, &old.revision)?
            .map_err(|c| conflict::<K>(id, c))?;
        Ok(self.commit(item, ChangeKind::Replaced))
    }

    /// Deletes entry `id`, if `if_match` names its current revision.
    pub fn delete(&self, id: &str, if_match: Option<&str>) -> Result<(), CatalogError> {
        check_path_id::<K>(id)?;
        let expected = precondition::<K>(if_match)?;
        let _w = self.write.lock();
        let old = self.get(id)?;
        check_revision::<K>(&old, &expected)?;
        self.db
            .catalog_delete(K::TABLE, id, &old.revision)?
            .map_err(|c| conflict::<K>(id, c))?;
        self.items.write().remove(id);
        self.tell(id, ChangeKind::Deleted);
        Ok(())
    }

    fn commit(&self, item: Item, change: ChangeKind) -> Arc<Item> {
        let item = Arc::new(item);
        self.items
            .write()
            .insert(item.id.clone(), Arc::clone(&item));
        self.tell(&item.id, change);
        item
    }

    fn tell(&self, id: &str, change: ChangeKind) {
        for l in self.listeners.read().iter() {
            l(id, change);
        }
    }
}

/// Drops what a view carries but a definition does not (the server's `revision` and
/// timestamps, the secrets' `_set`/`_keys`), so a client can send back what it read.
fn strip_view_only<K: Kind>(def: &mut Map<String, Value>) {
    for k in ["revision", "created_at", "updated_at"] {
        def.remove(k);
    }
    secrets::strip_shown(def, K::SECRETS);
}

fn check_path_id<K: Kind>(id: &str) -> Result<(), CatalogError> {
    if is_slug(id) {
        Ok(())
    } else {
        Err(CatalogError::BadId {
            noun: K::NOUN,
            id: id.to_string(),
        })
    }
}

/// The revision an `If-Match` header names.
fn precondition<K: Kind>(if_match: Option<&str>) -> Result<String, CatalogError> {
    let raw = if_match.ok_or(CatalogError::PreconditionRequired { noun: K::NOUN })?;
    let v = raw.trim();
    let v = v
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(v);
    if v.len() == 64
        && v.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(v.to_string())
    } else {
        Err(CatalogError::BadPrecondition(
            raw.chars().take(100).collect(),
        ))
    }
}

fn check_revision<K: Kind>(item: &Item, expected: &str) -> Result<(), CatalogError> {
    if item.revision == expected {
        Ok(())
    } else {
        Err(CatalogError::Stale {
            noun: K::NOUN,
            id: item.id.clone(),
            current: item.revision.clone(),
        })
    }
}

fn conflict<K: Kind>(id: &str, c: WriteConflict) -> CatalogError {
    match c {
        WriteConflict::Stale { current } => CatalogError::Stale {
            noun: K::NOUN,
            id: id.to_string(),
            current,
        },
        WriteConflict::NotFound => CatalogError::NotFound {
            noun: K::NOUN,
            id: id.to_string(),
        },
        WriteConflict::Exists => CatalogError::Exists {
            noun: K::NOUN,
            id: id.to_string(),
        },
    }
}

/// The body as a JSON object (400 otherwise).
fn parse_body(body: &[u8]) -> Result<Map<String, Value>, CatalogError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(CatalogError::Malformed(format!(
            "Invalid request body: expected a JSON object, found {}.",
            fields::type_name(&other)
        ))),
        Err(e) => Err(CatalogError::Malformed(format!(
            "Malformed JSON in request body: {e}"
        ))),
    }
}

fn fresh_salt() -> String {
    let mut b = [0u8; 16];
    if crate::base::random::fill_random(&mut b).is_err() {
        // Without kernel randomness the salt is only less secret: mix in the time.
        let t = crate::base::clock::now();
        b.copy_from_slice(&Sha256::digest(t.as_bytes())[..16]);
    }
    crate::base::hex(&b)
}

/// The canonical text of a JSON value: object keys sorted by their UTF-8 bytes, no
/// whitespace, strings and numbers as serde_json writes them. Equal values (whatever their
/// key order) have equal canonical texts.
pub fn canonical(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, e) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(e, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The revision of a definition (see the module docs).
pub fn revision(public: &Map<String, Value>, secret_values: &[Value], salt: &str) -> String {
    let mut h = Sha256::new();
    h.update(canonical(&Value::Object(public.clone())).as_bytes());
    if !secret_values.is_empty() {
        let mut s = Sha256::new();
        s.update(salt.as_bytes());
        s.update(canonical(&Value::Array(secret_values.to_vec())).as_bytes());
        h.update(b"\nsecrets:");
        h.update(crate::base::hex(&s.finalize()).as_bytes());
    }
    crate::base::hex(&h.finalize())
}

fn build_item<K: Kind>(
    id: String,
    definition: Map<String, Value>,
    salt: String,
    created_at: String,
    updated_at: String,
) -> Result<Item, CatalogError> {
    let public = secrets::redact(&definition, K::SECRETS);
    let rev = revision(&public, &secrets::values(&definition, K::SECRETS), &salt);
    let view = view_text(&id, &rev, &public, &created_at, &updated_at);
    Ok(Item {
        id,
        revision: rev,
        definition,
        created_at,
        updated_at,
        salt,
        view,
    })
}

fn view_text(
    id: &str,
    revision: &str,
    public: &Map<String, Value>,
    created_at: &str,
    updated_at: &str,
) -> String {
    let mut v = Map::new();
    v.insert("id".into(), Value::String(id.into()));
    v.insert("revision".into(), Value::String(revision.into()));
    for (k, x) in public {
        v.insert(k.clone(), x.clone());
    }
    v.insert("created_at".into(), Value::String(created_at.into()));
    v.insert("updated_at".into(), Value::String(updated_at.into()));
    Value::Object(v).to_string()
}

fn row_of(item: &Item) -> Result<CatalogRow, CatalogError> {
    Ok(CatalogRow {
        id: item.id.clone(),
        revision: item.revision.clone(),
        definition: Value::Object(item.definition.clone()).to_string(),
        salt: item.salt.clone(),
        created_at: item.created_at.clone(),
        updated_at: item.updated_at.clone(),
    })
}

/// A stored row back as an entry. Its revision is kept as stored (it was computed by the
/// rules of the svc that wrote it).
fn item_of<K: Kind>(row: CatalogRow) -> Result<Item, String> {
    let definition = match serde_json::from_str::<Value>(&row.definition) {
        Ok(Value::Object(m)) => m,
        Ok(_) => return Err(format!("{}: the definition is not an object", row.id)),
        Err(e) => return Err(format!("{}: {e}", row.id)),
    };
    let public = secrets::redact(&definition, K::SECRETS);
    Ok(Item {
        view: view_text(
            &row.id,
            &row.revision,
            &public,
            &row.created_at,
            &row.updated_at,
        ),
        id: row.id,
        revision: row.revision,
        definition,
        created_at: row.created_at,
        updated_at: row.updated_at,
        salt: row.salt,
    })
}

#[cfg(test)]
mod tests;
