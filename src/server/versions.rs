//! Immutable workflow versions (SPEC 2.12 "workflow version package", SPEC 8 limits):
//! validating a package and deriving its content identifier; the store keeps them
//! (`store::VersionTable`, the `workflow_versions` table of `<state-dir>/svc.db`).
//!
//! A package is `{"entrypoint": path, "files": {path: text}, "dependencies": [version ids]}`.
//!
//! **Identifier.** The lowercase hex SHA-256 of this canonical serialisation (`\0` is a NUL
//! byte, numbers are ASCII decimal, files sorted by path bytes, dependencies sorted and
//! deduplicated):
//!
//! ```text
//! svc-package-v1\n
//! entrypoint\0<entrypoint>\0
//! files\0<file count>\0
//!   for each file: <path>\0<byte length>\0<exact bytes>
//! dependencies\0<dependency count>\0
//!   for each dependency: <id>\0
//! ```
//!
//! Paths contain no NUL and every length is explicit, so two different packages never share
//! a serialisation; the same package always gets the same id (JSON key order, whitespace and
//! dependency order do not matter). Registering a known id again answers 200 with the same
//! body; the first registration answers 201.
//!
//! **Rules** (each violation is 422 with a precise message): at most 512 files, 512
//! dependencies, 512 KiB per file, 2 MiB of canonical bytes; paths are relative UTF-8 with
//! `/` separators, no empty, `.` or `..` segments, no backslash or control characters; the
//! entrypoint is one of the files and loads without error diagnostics (they are returned as
//! `diagnostics`); every `@file` reference resolves (relative to the referring workflow's
//! directory) to a file of the package or, failing that, the same path in a listed dependency;
//! a manager loop's `stack.child_workflow` names a package file (which must itself load
//! cleanly), a listed dependency id, or a listed dependency's entrypoint path; every
//! dependency is a registered version.
//!
//! Owns: the package format, its validation and the cache of recent versions. Must not
//! touch: SQL (the table is the store's), runs, or HTTP details beyond building
//! [`ApiError`]s.

use super::error::ApiError;
use crate::store::{
    MemoryVersions, StoreError, VersionHead, VersionRecord, VersionTable, WorkflowEntry,
};
use crate::workflow::{self, Diagnostic, FileSource, HandlerKind, Severity};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

pub const MAX_FILES: usize = 512;
pub const MAX_DEPENDENCIES: usize = 512;
pub const MAX_FILE_BYTES: usize = 512 * 1024;
pub const MAX_CANONICAL_BYTES: usize = 2 * 1024 * 1024;
const MAX_CHILD_DEPTH: usize = 16;

/// A workflow package as submitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Package {
    pub entrypoint: String,
    pub files: BTreeMap<String, String>,
    #[serde(default)]
    pub dependencies: Vec<String>,
}

/// A registered version: the normalised package plus its id.
#[derive(Debug, Clone, PartialEq)]
pub struct Version {
    pub id: String,
    pub package: Package,
    pub created_at: String,
    /// What runs of this version record about its entry graph, worked out once (a version
    /// is immutable) by the first run created from it.
    pub summary: std::sync::OnceLock<GraphSummary>,
}

/// Name, goal and size of a version's entry graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphSummary {
    pub name: String,
    pub goal: String,
    pub node_count: i64,
    pub edge_count: i64,
}

impl Version {
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "entrypoint": self.package.entrypoint,
            "files": self.package.files,
            "dependencies": self.package.dependencies,
            "created_at": self.created_at,
        })
    }

    /// The name the workflow catalog lists this version under: the entry graph's name, else
    /// the entry file's stem (as a run records it, [`crate::store::WorkflowMeta::catalog_name`]).
    pub fn catalog_name(&self) -> String {
        let graph = crate::dot::parse(self.source())
            .map(|g| g.name)
            .unwrap_or_default();
        if !graph.is_empty() {
            return graph;
        }
        std::path::Path::new(&self.package.entrypoint)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.package.entrypoint.clone())
    }

    /// The entrypoint's source text.
    pub fn source(&self) -> &str {
        self.package
            .files
            .get(&self.package.entrypoint)
            .map(String::as_str)
            .unwrap_or("")
    }
}

/// The canonical serialisation (see the module docs). `package.dependencies` must already be
/// sorted and deduplicated.
pub fn canonical_bytes(package: &Package) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"svc-package-v1\n");
    out.extend_from_slice(b"entrypoint\0");
    out.extend_from_slice(package.entrypoint.as_bytes());
    out.push(0);
    out.extend_from_slice(format!("files\0{}\0", package.files.len()).as_bytes());
    for (path, text) in &package.files {
        out.extend_from_slice(path.as_bytes());
        out.push(0);
        out.extend_from_slice(text.len().to_string().as_bytes());
        out.push(0);
        out.extend_from_slice(text.as_bytes());
    }
    out.extend_from_slice(format!("dependencies\0{}\0", package.dependencies.len()).as_bytes());
    for d in &package.dependencies {
        out.extend_from_slice(d.as_bytes());
        out.push(0);
    }
    out
}

pub fn package_id(package: &Package) -> String {
    crate::base::hex(&Sha256::digest(canonical_bytes(package)))
}

fn invalid(detail: String) -> ApiError {
    ApiError::unprocessable(detail).with_code("invalid_package")
}

/// Checks one package path against the path rules.
pub fn check_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("a file path is empty".into());
    }
    if path.len() > 1024 {
        return Err(format!(
            "file path `{}…` is longer than 1024 bytes",
            &path[..32]
        ));
    }
    if path.starts_with('/') {
        return Err(format!(
            "file path `{path}` is absolute; paths are relative to the package"
        ));
    }
    if path.contains('\\') {
        return Err(format!("file path `{path}` contains a backslash; use `/`"));
    }
    if path.chars().any(char::is_control) {
        return Err(format!("file path {path:?} contains a control character"));
    }
    for seg in path.split('/') {
        match seg {
            "" => return Err(format!("file path `{path}` has an empty segment")),
            "." | ".." => return Err(format!("file path `{path}` contains a `{seg}` segment")),
            _ => {}
        }
    }
    Ok(())
}

fn is_version_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Resolves `rel` against the directory of `from` inside a package; `None` when it is
/// absolute, home-relative or escapes the package root.
pub fn resolve(from: &str, rel: &str) -> Option<String> {
    if rel.starts_with('/') || rel.starts_with('~') || rel.is_empty() {
        return None;
    }
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for seg in rel.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}

/// Files of a package (and its dependencies), as a workflow file inside it sees them.
pub struct PackageFiles<'a> {
    /// The referring workflow's path inside the package.
    pub from: String,
    pub files: &'a BTreeMap<String, String>,
    pub deps: &'a [Arc<Version>],
}

impl PackageFiles<'_> {
    fn lookup(&self, path: &str) -> Option<&str> {
        self.files.get(path).map(String::as_str).or_else(|| {
            self.deps
                .iter()
                .find_map(|d| d.package.files.get(path).map(String::as_str))
        })
    }
}

impl FileSource for PackageFiles<'_> {
    /// A path of the package (relative to the referring file), else the same path in a
    /// dependency; a dependency's id or entry path reads that dependency's entry workflow
    /// (how `stack.child_workflow` names a dependency).
    fn read(&self, rel: &str) -> Option<String> {
        let p = resolve(&self.from, rel);
        if let Some(found) = p.as_deref().and_then(|p| self.files.get(p)) {
            return Some(found.clone());
        }
        let trimmed = rel.trim();
        if let Some(dep) = self
            .deps
            .iter()
            .find(|d| d.id == trimmed || d.package.entrypoint == trimmed)
        {
            return Some(dep.source().to_string());
        }
        self.lookup(&p?).map(str::to_string)
    }
    fn describe(&self, rel: &str) -> String {
        resolve(&self.from, rel).unwrap_or_else(|| rel.to_string())
    }
}

/// Loads `path` of the package and checks it, its `@file` references and its child
/// workflows. Returns the diagnostics of the first failing file.
fn check_workflow(
    path: &str,
    files: &BTreeMap<String, String>,
    deps: &[Arc<Version>],
    seen: &mut BTreeSet<String>,
    depth: usize,
) -> Result<(), ApiError> {
    if !seen.insert(path.to_string()) {
        return Ok(());
    }
    if depth > MAX_CHILD_DEPTH {
        return Err(invalid(format!(
            "child workflows nest deeper than {MAX_CHILD_DEPTH} levels at `{path}`"
        )));
    }
    let src = files
        .get(path)
        .ok_or_else(|| invalid(format!("workflow `{path}` is not in the package")))?;
    let source = PackageFiles {
        from: path.to_string(),
        files,
        deps,
    };
    let loaded = match workflow::load(src, &source) {
        Ok(l) => l,
        Err(e) => {
            let d = json!([{
                "rule": "parse",
                "severity": "error",
                "message": e.message,
                "line": e.pos.line,
                "column": e.pos.col,
                "file": path,
            }]);
            return Err(ApiError::unprocessable(format!(
                "`{path}` does not parse: {} (line {}, column {})",
                e.message, e.pos.line, e.pos.col
            ))
            .with_extra(json!({ "diagnostics": d })));
        }
    };
    let errors: Vec<&Diagnostic> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    if let Some(first) = errors.first() {
        let diags: Vec<Value> = loaded
            .diagnostics
            .iter()
            .map(|d| {
                let mut v = serde_json::to_value(d).unwrap_or(Value::Null);
                v["file"] = json!(path);
                v
            })
            .collect();
        return Err(ApiError::unprocessable(format!(
            "`{path}` has {} error{}: {}",
            errors.len(),
            if errors.len() == 1 { "" } else { "s" },
            first.message
        ))
        .with_extra(json!({ "diagnostics": diags })));
    }
    let wf = &loaded.workflow;
    for (i, node) in wf.graph.nodes.iter().enumerate() {
        if wf.handlers.get(i).copied().flatten() != Some(HandlerKind::ManagerLoop) {
            continue;
        }
        let Some(child) = node.attrs.text("stack.child_workflow").map(str::trim) else {
            continue;
        };
        if child.is_empty() {
            continue;
        }
        if deps
            .iter()
            .any(|d| d.id == child || d.package.entrypoint == child)
        {
            continue;
        }
        match resolve(path, child) {
            Some(p) if files.contains_key(&p) => {
                check_workflow(&p, files, deps, seen, depth + 1)?;
            }
            _ => {
                return Err(invalid(format!(
                    "child workflow `{child}` of node `{}` in `{path}` is neither a file of the package nor a listed dependency",
                    node.id
                )))
            }
        }
    }
    Ok(())
}

/// Validates a package and normalises it (dependencies sorted and deduplicated); returns
/// the package and its id. `lookup` finds registered versions by id.
pub fn validate(
    mut package: Package,
    lookup: &dyn Fn(&str) -> Option<Arc<Version>>,
) -> Result<(Package, String), ApiError> {
    if package.files.is_empty() {
        return Err(invalid("the package has no files".into()));
    }
    if package.files.len() > MAX_FILES {
        return Err(invalid(format!(
            "the package has {} files; the limit is {MAX_FILES}",
            package.files.len()
        )));
    }
    if package.dependencies.len() > MAX_DEPENDENCIES {
        return Err(invalid(format!(
            "the package lists {} dependencies; the limit is {MAX_DEPENDENCIES}",
            package.dependencies.len()
        )));
    }
    for (path, text) in &package.files {
        check_path(path).map_err(invalid)?;
        if text.len() > MAX_FILE_BYTES {
            return Err(invalid(format!(
                "file `{path}` is {} bytes; the limit is {MAX_FILE_BYTES} bytes (512 KiB)",
                text.len()
            )));
        }
    }
    if !package.files.contains_key(&package.entrypoint) {
        return Err(invalid(format!(
            "entrypoint `{}` is not one of the package's files",
            package.entrypoint
        )));
    }
    package.dependencies.sort();
    package.dependencies.dedup();
    let canonical = canonical_bytes(&package);
    let canonical_len = canonical.len();
    if canonical_len > MAX_CANONICAL_BYTES {
        return Err(invalid(format!(
            "the package is {canonical_len} bytes in canonical form; the limit is {MAX_CANONICAL_BYTES} bytes (2 MiB)"
        )));
    }
    let mut deps = Vec::with_capacity(package.dependencies.len());
    for d in &package.dependencies {
        if !is_version_id(d) {
            return Err(invalid(format!(
                "dependency `{d}` is not a workflow version id (64 lowercase hex digits)"
            ))
            .with_code("unknown_dependency"));
        }
        match lookup(d) {
            Some(v) => deps.push(v),
            None => {
                return Err(invalid(format!(
                    "dependency `{d}` is not a registered workflow version"
                ))
                .with_code("unknown_dependency"))
            }
        }
    }
    let id = crate::base::hex(&Sha256::digest(&canonical));
    // The same bytes were checked when that version was registered: an identical package
    // (same id) cannot fail now, so re-submitting a workflow skips parsing and linting.
    if lookup(&id).is_none() {
        let mut seen = BTreeSet::new();
        check_workflow(&package.entrypoint, &package.files, &deps, &mut seen, 0)?;
    }
    Ok((package, id))
}

/// Registered versions: validation here, storage in the store's `workflow_versions` table
/// ([`VersionTable`]), with a small cache of recently used versions.
pub struct VersionStore {
    table: Arc<dyn VersionTable>,
    cache: Mutex<HashMap<String, Arc<Version>>>,
}

const CACHE_MAX: usize = 256;

impl VersionStore {
    /// Versions kept in `table` (the server's: its `SqliteStore`).
    pub fn new(table: Arc<dyn VersionTable>) -> VersionStore {
        VersionStore {
            table,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Versions kept in memory (tests, embedding).
    pub fn in_memory() -> VersionStore {
        VersionStore::new(Arc::new(MemoryVersions::default()))
    }

    pub fn get(&self, id: &str) -> Result<Option<Arc<Version>>, ApiError> {
        if let Some(v) = self.cache.lock().get(id) {
            return Ok(Some(Arc::clone(v)));
        }
        let Some(record) = self.table.get_version(id).map_err(db_err)? else {
            return Ok(None);
        };
        let package: Package = serde_json::from_str(&record.package).map_err(|e| {
            ApiError::internal(format!("stored workflow version {id} is unreadable: {e}"))
        })?;
        let v = Arc::new(Version {
            id: id.to_string(),
            package,
            created_at: record.created_at,
            summary: Default::default(),
        });
        self.remember(&v);
        Ok(Some(v))
    }

    fn remember(&self, v: &Arc<Version>) {
        let mut c = self.cache.lock();
        if c.len() >= CACHE_MAX {
            c.clear();
        }
        c.insert(v.id.clone(), Arc::clone(v));
    }

    /// Validates and stores a package. Returns the version and whether it was new.
    pub fn register(&self, package: Package) -> Result<(Arc<Version>, bool), ApiError> {
        let lookup = |id: &str| self.get(id).ok().flatten();
        let (package, id) = validate(package, &lookup)?;
        if let Some(v) = self.get(&id)? {
            return Ok((v, false));
        }
        let created_at = crate::base::clock::now();
        let text = serde_json::to_string(&package)
            .map_err(|e| ApiError::internal(format!("cannot encode the package: {e}")))?;
        let v = Arc::new(Version {
            id,
            package,
            created_at,
            summary: Default::default(),
        });
        let record = VersionRecord {
            id: v.id.clone(),
            package: text,
            created_at: v.created_at.clone(),
            name: Some(v.catalog_name()),
        };
        let inserted = self.table.insert_version(&record).map_err(db_err)?;
        if !inserted {
            // Registered concurrently by another request: answer with the stored one.
            if let Some(v) = self.get(&record.id)? {
                return Ok((v, false));
            }
        }
        self.remember(&v);
        Ok((v, true))
    }

    /// Names the versions stored before the catalog kept names (once, at start); returns
    /// how many were named.
    pub fn name_unnamed(&self) -> Result<usize, ApiError> {
        let unnamed = self.table.unnamed_versions().map_err(db_err)?;
        for record in &unnamed {
            let Some(v) = self.get(&record.id)? else {
                continue;
            };
            self.table
                .name_version(&v.id, &v.catalog_name())
                .map_err(db_err)?;
        }
        Ok(unnamed.len())
    }

    /// Every workflow name with its newest version and version count, sorted by name.
    pub fn workflows(&self) -> Result<Vec<WorkflowEntry>, ApiError> {
        self.table.workflows().map_err(db_err)
    }

    /// The versions of workflow `name`, newest first (empty when there is none).
    pub fn versions_named(&self, name: &str) -> Result<Vec<VersionHead>, ApiError> {
        self.table.versions_named(name).map_err(db_err)
    }
}

fn db_err(e: StoreError) -> ApiError {
    ApiError::internal(format!("workflow version storage failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELLO: &str =
        "digraph hello { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }";

    fn pkg(files: &[(&str, &str)], entry: &str) -> Package {
        Package {
            entrypoint: entry.into(),
            files: files
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            dependencies: vec![],
        }
    }

    #[test]
    fn same_package_same_id() {
        let s = VersionStore::in_memory();
        let (a, new_a) = s.register(pkg(&[("main.dot", HELLO)], "main.dot")).unwrap();
        let (b, new_b) = s.register(pkg(&[("main.dot", HELLO)], "main.dot")).unwrap();
        assert!(new_a && !new_b);
        assert_eq!(a.id, b.id);
        assert_eq!(a.id.len(), 64);
        let (c, _) = s
            .register(pkg(&[("main.dot", HELLO), ("x.md", "x")], "main.dot"))
            .unwrap();
        assert_ne!(a.id, c.id);
    }

    /// A version stored before names were kept is named once, from its entry graph.
    #[test]
    fn older_versions_are_named_from_their_graph() {
        let table = Arc::new(MemoryVersions::default());
        let package = pkg(&[("main.dot", HELLO)], "main.dot");
        table
            .insert_version(&VersionRecord {
                id: package_id(&package),
                package: serde_json::to_string(&package).unwrap(),
                created_at: "2026-01-01T00:00:00.000Z".into(),
                name: None,
            })
            .unwrap();
        let s = VersionStore::new(Arc::clone(&table) as _);
        assert!(s.workflows().unwrap().is_empty());
        assert_eq!(s.name_unnamed().unwrap(), 1);
        assert_eq!(s.name_unnamed().unwrap(), 0);
        let w = s.workflows().unwrap();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].name, "hello");
        assert_eq!(w[0].latest_version_id, package_id(&package));
    }

    #[test]
    fn canonical_form_is_unambiguous() {
        let a = pkg(&[("a", "b\0c")], "a");
        let b = pkg(&[("a\0b", "c")], "a");
        assert_ne!(canonical_bytes(&a), canonical_bytes(&b));
        assert!(canonical_bytes(&a).starts_with(b"svc-package-v1\n"));
    }

    #[test]
    fn path_rules() {
        for bad in [
            "", "/abs", "a/../b", "./a", "a//b", "a/", "..", "a\\b", "a\u{1}b",
        ] {
            assert!(check_path(bad).is_err(), "accepted {bad:?}");
        }
        for good in ["a", "a/b.dot", "prompts/x y.md", "é/ü.md"] {
            assert!(check_path(good).is_ok(), "refused {good:?}");
        }
        assert_eq!(
            resolve("flows/main.dot", "p/a.md").as_deref(),
            Some("flows/p/a.md")
        );
        assert_eq!(
            resolve("flows/main.dot", "../a.md").as_deref(),
            Some("a.md")
        );
        assert_eq!(resolve("main.dot", "../a.md"), None);
        assert_eq!(resolve("main.dot", "/etc/passwd"), None);
    }

    #[test]
    fn file_refs_resolve_inside_the_package() {
        let s = VersionStore::in_memory();
        let src = r#"digraph g { start [shape=Mdiamond]; a [prompt="@prompts/a.md"]; exit [shape=Msquare]; start -> a -> exit }"#;
        let err = s
            .register(pkg(&[("main.dot", src)], "main.dot"))
            .unwrap_err();
        assert_eq!(err.status, 422);
        assert!(err.extra.is_some());
        s.register(pkg(
            &[("main.dot", src), ("prompts/a.md", "do it")],
            "main.dot",
        ))
        .unwrap();
    }
}
