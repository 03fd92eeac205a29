//! The sandboxes this server keeps: one small JSON record per sandbox under
//! `<state-dir>/sandboxes/`, written when a run's sandbox becomes ready and removed with it,
//! so the list survives a restart and never needs the providers to remember anything.
//!
//! Owns: the record format and its files. Must not touch: workspaces' contents, runs.

use super::ProviderKind;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One sandbox (the listing's item, without the run's live state).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub id: String,
    pub provider: ProviderKind,
    pub run_id: String,
    pub working_directory: String,
    pub created_at: String,
    /// Whether the workspace belongs to the sandbox (removed with it) or is the user's own
    /// directory (`in_place`), which is never removed.
    #[serde(default)]
    pub owns_workspace: bool,
}

/// The directory of records.
#[derive(Debug, Clone)]
pub struct Inventory {
    dir: PathBuf,
}

impl Inventory {
    pub fn new(dir: impl Into<PathBuf>) -> Inventory {
        Inventory { dir: dir.into() }
    }

    /// The sandbox id of a run (`sbx-<run id, lowercase>`).
    pub fn id_for(run_id: &str) -> String {
        format!("sbx-{}", run_id.to_ascii_lowercase())
    }

    fn path(&self, id: &str) -> Option<PathBuf> {
        // Ids come from URLs: only our own shape may name a file.
        let ok = id.starts_with("sbx-")
            && id.len() < 64
            && id[4..].chars().all(|c| c.is_ascii_alphanumeric());
        ok.then(|| self.dir.join(format!("{id}.json")))
    }

    /// Writes (or replaces) a record, atomically.
    pub fn put(&self, rec: &Record) -> std::io::Result<()> {
        let Some(path) = self.path(&rec.id) else {
            return Err(std::io::Error::other(format!("bad sandbox id {}", rec.id)));
        };
        std::fs::create_dir_all(&self.dir)?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec(rec).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(tmp, path)
    }

    pub fn get(&self, id: &str) -> std::io::Result<Option<Record>> {
        let Some(path) = self.path(id) else {
            return Ok(None);
        };
        match std::fs::read(path) {
            Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every record of `provider`, by id.
    pub fn list(&self, provider: ProviderKind) -> std::io::Result<Vec<Record>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for entry in entries {
            let path = entry?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            if let Ok(rec) = serde_json::from_slice::<Record>(&bytes) {
                if rec.provider == provider {
                    out.push(rec);
                }
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// Removes the record and, when the sandbox owns it, its workspace.
    pub fn remove(&self, id: &str) -> std::io::Result<()> {
        let Some(rec) = self.get(id)? else {
            return Ok(());
        };
        if rec.owns_workspace {
            remove_dir(Path::new(&rec.working_directory))?;
        }
        if let Some(path) = self.path(id) {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Removes a directory tree; a missing one is fine.
pub fn remove_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_remove_their_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let inv = Inventory::new(dir.path().join("sandboxes"));
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("a")).unwrap();
        let rec = Record {
            id: Inventory::id_for("01ABC"),
            provider: ProviderKind::Container,
            run_id: "01ABC".into(),
            working_directory: ws.display().to_string(),
            created_at: "t".into(),
            owns_workspace: true,
        };
        inv.put(&rec).unwrap();
        assert_eq!(
            inv.list(ProviderKind::Container).unwrap(),
            vec![rec.clone()]
        );
        assert!(inv.list(ProviderKind::Local).unwrap().is_empty());
        assert_eq!(inv.get("sbx-../../etc").unwrap(), None);
        inv.remove(&rec.id).unwrap();
        assert!(!ws.exists());
        assert_eq!(inv.get(&rec.id).unwrap(), None);
    }
}
