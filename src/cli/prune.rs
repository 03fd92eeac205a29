//! `svc prune`: removes finished runs from the state directory with the same filters, safe
//! defaults and answer as `POST /api/v1/system/prune` (a dry run unless `--yes`; only
//! succeeded, failed and dead runs; 24 h by default).
//!
//! It works on the state directory itself, so it refuses while a server holds it (prune
//! through the server's route then). Each run goes through the store's tombstone path
//! (`delete_run`), re-read just before so a run resumed meanwhile is kept, and its sandbox
//! and workspace (and its artifacts) are removed after.
//!
//! Owns: the command's arguments and output. Must not touch: which runs match
//! (`system::PruneFilter`) or the walk (`server::housekeeping::prune_runs`).

use super::Format;
use crate::server::error::ApiError;
use crate::server::housekeeping::{prune_filter, prune_runs};
use crate::store::{default_state_dir, RunStore, SqliteStore, DB_FILE};
use crate::system::PruneRequest;
use clap::Args;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct PruneArgs {
    /// Runs that ended more than this long ago (`90m`, `24h`, `7d`, `2w`; default 24h).
    #[arg(long)]
    older_than: Option<String>,
    /// Runs that ended before this time (`2026-11-01` or RFC 3339 UTC); not with --older-than.
    #[arg(long)]
    before: Option<String>,
    /// Only runs with this status (succeeded, failed or dead); repeatable.
    #[arg(long = "status")]
    statuses: Vec<String>,
    /// Only runs carrying this label (`key=value`); repeatable, all must match.
    #[arg(long = "label")]
    labels: Vec<String>,
    /// Only runs this automation created.
    #[arg(long)]
    automation: Option<String>,
    /// Only runs no automation created.
    #[arg(long)]
    manual_only: bool,
    /// Remove the runs (without it: only list what would be removed).
    #[arg(long)]
    yes: bool,
    /// State directory (default: $XDG_STATE_HOME/svc or ~/.local/state/svc).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

const USAGE: i32 = 2;
const FAILURE: i32 = 1;

fn request(args: &PruneArgs) -> Result<PruneRequest, String> {
    let mut labels = BTreeMap::new();
    for l in &args.labels {
        let (k, v) = l
            .split_once('=')
            .ok_or_else(|| format!("--label `{l}` is not key=value"))?;
        labels.insert(k.to_string(), v.to_string());
    }
    Ok(PruneRequest {
        dry_run: Some(!args.yes),
        older_than: args.older_than.clone(),
        before: args.before.clone(),
        status: (!args.statuses.is_empty()).then(|| args.statuses.clone()),
        labels,
        automation: args.automation.clone(),
        manual_only: args.manual_only.then_some(true),
    })
}

pub fn prune(args: PruneArgs) -> i32 {
    let filter = match request(&args)
        .map_err(|e| e.to_string())
        .and_then(|r| prune_filter(r).map_err(|e| e.detail))
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("svc prune: {e}");
            return USAGE;
        }
    };
    let dir = args.state_dir.clone().unwrap_or_else(default_state_dir);
    if !dir.join(DB_FILE).exists() {
        eprintln!(
            "svc prune: no database in {}: nothing to prune",
            dir.display()
        );
        return FAILURE;
    }
    let _lock = match crate::store::StateLock::take(
        &dir,
        crate::store::lock::Role::Command("svc prune"),
    ) {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "svc prune: {e}\n  (with the server running, prune through it: POST /api/v1/system/prune)"
            );
            return FAILURE;
        }
    };
    let store = match SqliteStore::activate(&dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("svc prune: {e}");
            return FAILURE;
        }
    };
    let mut delete = |id: &str| -> Result<bool, ApiError> {
        let finished = matches!(store.get_run(id), Ok(Some(row)) if row.status.is_terminal());
        if !finished {
            return Ok(false);
        }
        store
            .delete_run(id)
            .map_err(|e| ApiError::internal(format!("removing run {id}: {e}")))?;
        if let Err(e) = crate::sandbox::lifecycle::remove(&dir, id) {
            eprintln!("svc prune: run {id}: its sandbox could not be removed: {e}");
        }
        if let Err(e) = remove_artifacts(&dir, id) {
            eprintln!("svc prune: run {id}: its artifacts could not be removed: {e}");
        }
        Ok(true)
    };
    let answer = match prune_runs(&store, &store, &dir, &filter, &mut delete) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("svc prune: {}", e.detail);
            return FAILURE;
        }
    };
    match args.format {
        Format::Json => println!("{answer}"),
        Format::Text => print_text(&answer),
    }
    0
}

fn print_text(a: &Value) {
    let dry = a["dry_run"].as_bool().unwrap_or(true);
    for r in a["runs"].as_array().into_iter().flatten() {
        let verb = if dry {
            "would remove"
        } else if r["removed"].as_bool() == Some(true) {
            "removed"
        } else {
            "kept (no longer finished)"
        };
        println!(
            "{verb} {} {} {} ended {} {} bytes",
            r["run_id"].as_str().unwrap_or(""),
            r["status"].as_str().unwrap_or(""),
            r["workflow"].as_str().unwrap_or("-"),
            r["ended_at"].as_str().unwrap_or(""),
            r["size_bytes"]
        );
    }
    if dry {
        println!(
            "dry run: {} run(s), {} bytes would be freed; pass --yes to remove them",
            a["total_count"], a["total_size_bytes"]
        );
    } else {
        println!(
            "removed {} run(s), freed {} bytes",
            a["deleted_count"], a["freed_bytes"]
        );
        if let Some(advice) = a["advice"].as_str() {
            println!("{advice}");
        }
    }
}

/// Removes run `id`'s artifacts from the object store the state directory's settings name
/// (`<state-dir>/objects` when none).
fn remove_artifacts(dir: &std::path::Path, id: &str) -> Result<usize, String> {
    let settings = crate::settings::Settings::load(&dir.join(crate::settings::SETTINGS_FILE))
        .map_err(|e| format!("cannot read the settings: {e}"))?;
    let store = crate::artifacts::store_for(&settings, dir).map_err(|e| e.0)?;
    crate::artifacts::delete_run(&store, id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: PruneArgs,
    }

    fn req(args: &[&str]) -> Result<PruneRequest, String> {
        let cli = Cli::try_parse_from(std::iter::once("prune").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        request(&cli.args)
    }

    #[test]
    fn flags_become_the_routes_request() {
        let r = req(&[
            "--older-than",
            "7d",
            "--status",
            "failed",
            "--status",
            "dead",
            "--label",
            "team=a=b",
            "--yes",
        ])
        .unwrap();
        assert_eq!(r.dry_run, Some(false));
        assert_eq!(r.older_than.as_deref(), Some("7d"));
        assert_eq!(
            r.status,
            Some(vec!["failed".to_string(), "dead".to_string()])
        );
        assert_eq!(r.labels.get("team").map(String::as_str), Some("a=b"));
        let r = req(&[]).unwrap();
        assert_eq!(r.dry_run, Some(true));
        assert!(r.status.is_none() && r.manual_only.is_none());
        assert!(req(&["--label", "novalue"])
            .unwrap_err()
            .contains("key=value"));
    }
}
