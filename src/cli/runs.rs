//! `svc runs`, `svc events`, `svc export` and `svc import`: the store's command-line surface.
//!
//! Owns: the clap argument structs of these four commands, their output formats and exit
//! codes (0 success, 1 failure, 2 usage error; messages on stderr).
//! Must not touch: the store's internals (only `crate::store`'s public API) or any other
//! command; the top-level `svc` parser wires these in.

use crate::base::clock::is_canonical_ulid;
use crate::store::portable::{export_runs, import_dir};
use crate::store::{
    default_state_dir, RunQuery, RunRow, RunStore, SqliteStore, StoreError, DB_FILE,
};
use clap::{Args, ValueEnum};
use serde_json::{json, Value};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Output format of `svc runs`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    #[default]
    Text,
    Json,
}

/// Output format of `svc events`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum EventsFormat {
    /// One event JSON object per line, exactly as stored.
    #[default]
    Jsonl,
    Text,
}

/// List runs, newest first.
#[derive(Debug, Clone, Args)]
pub struct RunsArgs {
    /// State directory [default: $XDG_STATE_HOME/svc, else ~/.local/state/svc]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = ListFormat::Text)]
    pub format: ListFormat,
    /// Show at most this many runs
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

/// Print a run's events.
#[derive(Debug, Clone, Args)]
pub struct EventsArgs {
    /// The run's id (a ULID)
    #[arg(value_name = "RUN_ID")]
    pub run_id: String,
    /// First sequence number to print
    #[arg(long, value_name = "SEQ", default_value_t = 1)]
    pub since: u64,
    #[arg(long, value_enum, default_value_t = EventsFormat::Jsonl)]
    pub format: EventsFormat,
    /// State directory [default: $XDG_STATE_HOME/svc, else ~/.local/state/svc]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

/// Export runs (all when none are named) and the blobs they reference to a directory in the
/// portable format (`runs/<id>/events.jsonl`, `blobs/<sha256>`).
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// State directory [default: $XDG_STATE_HOME/svc, else ~/.local/state/svc]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Directory to write (created if missing; existing runs in it are not overwritten)
    #[arg(value_name = "OUT_DIR", required_unless_present = "stages")]
    pub out_dir: Option<PathBuf>,
    /// Runs to export [default: all]
    #[arg(value_name = "RUN_ID")]
    pub run_ids: Vec<String>,
    /// Instead, write one run's stage logs to DIR (`svc export --stages DIR RUN_ID`): the
    /// layout of `svc run --logs DIR`
    #[arg(long, value_name = "DIR")]
    pub stages: Option<PathBuf>,
}

/// Import a directory in the portable format, verifying every run byte for byte.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// Directory to import (runs/ID/events.jsonl, blobs/SHA256)
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// State directory [default: $XDG_STATE_HOME/svc, else ~/.local/state/svc]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

const FAILURE: i32 = 1;
const USAGE: i32 = 2;

fn fail(message: impl std::fmt::Display) -> i32 {
    eprintln!("svc: {message}");
    FAILURE
}

fn state_dir(arg: &Option<PathBuf>) -> PathBuf {
    arg.clone().unwrap_or_else(default_state_dir)
}

/// The store of `state_dir` for reading, `None` when no database exists there yet.
fn open_for_reading(state_dir: &Path) -> Result<Option<SqliteStore>, String> {
    let db = state_dir.join(DB_FILE);
    if !db.exists() {
        return Ok(None);
    }
    SqliteStore::open(&db).map(Some).map_err(|e| e.to_string())
}

/// Ends output quietly when the reader went away (`svc events X | head`).
fn finish_output(result: io::Result<()>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => 0,
        Err(e) => fail(format!("cannot write output: {e}")),
    }
}

fn run_summary(row: &RunRow) -> Value {
    json!({
        "id": row.id,
        "title": row.title,
        "goal": row.goal,
        "status": row.status.name(),
        "status_detail": row.status,
        "pending_control": row.pending_control,
        "archived": row.archived,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "started_at": row.started_at,
        "completed_at": row.completed_at,
        "last_seq": row.last_seq,
        "labels": row.labels,
        "workflow": {
            "name": row.workflow.name,
            "slug": row.workflow.slug,
            "graph_name": row.workflow.graph_name,
        },
        "parent_id": row.parent_id,
        "error": row.error,
    })
}

fn write_runs(out: &mut impl Write, rows: &[RunRow], format: ListFormat) -> io::Result<()> {
    match format {
        ListFormat::Json => {
            let data: Vec<Value> = rows.iter().map(run_summary).collect();
            writeln!(out, "{}", json!({ "data": data }))?;
        }
        ListFormat::Text => {
            writeln!(
                out,
                "{:<26}  {:<20}  {:<24}  TITLE",
                "ID", "STATUS", "CREATED"
            )?;
            for row in rows {
                let status = if row.archived {
                    format!("{} (archived)", row.status.name())
                } else {
                    row.status.name().to_string()
                };
                writeln!(
                    out,
                    "{:<26}  {:<20}  {:<24}  {}",
                    row.id, status, row.created_at, row.title
                )?;
            }
        }
    }
    out.flush()
}

/// `svc runs`: lists runs newest first. Exit code 0, or 1 on failure.
pub fn runs(args: RunsArgs) -> i32 {
    let dir = state_dir(&args.state_dir);
    let store = match open_for_reading(&dir) {
        Ok(Some(store)) => store,
        Ok(None) => return finish_output(write_runs(&mut io::stdout().lock(), &[], args.format)),
        Err(e) => return fail(e),
    };
    let wanted = args.limit.unwrap_or(usize::MAX);
    let mut rows = Vec::new();
    while rows.len() < wanted {
        let limit = (wanted - rows.len()).min(500);
        match store.query_runs(&RunQuery {
            offset: rows.len(),
            limit,
            ..RunQuery::default()
        }) {
            Ok(page) => {
                let done = page.len() < limit;
                rows.extend(page);
                if done {
                    break;
                }
            }
            Err(e) => return fail(e),
        }
    }
    finish_output(write_runs(
        &mut BufWriter::new(io::stdout().lock()),
        &rows,
        args.format,
    ))
}

fn event_text_line(json: &str) -> String {
    let v: Value = serde_json::from_str(json).unwrap_or(Value::Null);
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let mut props = v
        .get("properties")
        .map(Value::to_string)
        .unwrap_or_default();
    if props.chars().count() > 120 {
        props = props.chars().take(117).collect::<String>() + "...";
    }
    format!(
        "{:>6}  {:<24}  {:<28}  {:<16}  {props}",
        v.get("seq").and_then(Value::as_u64).unwrap_or(0),
        s("ts"),
        s("event"),
        s("node_id"),
    )
}

/// `svc events RUN_ID`: prints the run's events from `--since`. Exit 0, 1 on failure (unknown
/// or deleted run), 2 for a malformed run id.
pub fn events(args: EventsArgs) -> i32 {
    if !is_canonical_ulid(&args.run_id) {
        eprintln!(
            "svc: invalid run id {:?}: expected a ULID (26 uppercase characters)",
            args.run_id
        );
        return USAGE;
    }
    let dir = state_dir(&args.state_dir);
    let store = match open_for_reading(&dir) {
        Ok(Some(store)) => store,
        Ok(None) => {
            return fail(StoreError::NotFound {
                run_id: args.run_id,
            })
        }
        Err(e) => return fail(e),
    };
    const PAGE: usize = 1000;
    let mut out = BufWriter::new(io::stdout().lock());
    let mut since = args.since.max(1);
    loop {
        let page = match store.events_raw(&args.run_id, since, PAGE) {
            Ok(page) => page,
            Err(e) => return fail(e),
        };
        let written: io::Result<()> = page.iter().try_for_each(|raw| match args.format {
            EventsFormat::Jsonl => writeln!(out, "{}", raw.json),
            EventsFormat::Text => writeln!(out, "{}", event_text_line(&raw.json)),
        });
        if written.is_err() || page.len() < PAGE {
            return finish_output(written.and_then(|_| out.flush()));
        }
        since = page.last().map_or(since, |r| r.seq + 1);
    }
}

/// `svc export OUT_DIR [RUN_ID...]`. Exit 0, or 1 on failure.
pub fn export(args: ExportArgs) -> i32 {
    if let Some(logs) = &args.stages {
        // `--stages DIR RUN_ID`: the one positional is the run id.
        let ids: Vec<String> = args
            .out_dir
            .iter()
            .map(|p| p.display().to_string())
            .chain(args.run_ids.iter().cloned())
            .collect();
        return export_stages(&args.state_dir, logs, &ids);
    }
    let Some(out_dir) = args.out_dir.clone() else {
        eprintln!("svc: export needs OUT_DIR (or --stages DIR RUN_ID)");
        return USAGE;
    };
    if let Some(bad) = args.run_ids.iter().find(|id| !is_canonical_ulid(id)) {
        eprintln!("svc: invalid run id {bad:?}: expected a ULID (26 uppercase characters)");
        return USAGE;
    }
    let dir = state_dir(&args.state_dir);
    let store = match open_for_reading(&dir) {
        Ok(Some(store)) => store,
        Ok(None) => {
            return fail(format!(
                "no svc database at {}",
                dir.join(DB_FILE).display()
            ))
        }
        Err(e) => return fail(e),
    };
    match export_runs(&store, &out_dir, &args.run_ids) {
        Ok(s) => {
            println!(
                "exported {} run(s), {} event(s), {} blob(s) to {}",
                s.runs,
                s.events,
                s.blobs,
                out_dir.display()
            );
            0
        }
        Err(e) => fail(format!("export failed: {e}")),
    }
}

/// `svc export --stages DIR RUN_ID`: the run's stage logs (see `crate::stages`).
fn export_stages(state: &Option<PathBuf>, logs: &Path, ids: &[String]) -> i32 {
    let [run_id] = ids else {
        eprintln!("svc: export --stages DIR takes exactly one RUN_ID");
        return USAGE;
    };
    if !is_canonical_ulid(run_id) {
        eprintln!("svc: invalid run id {run_id:?}: expected a ULID (26 uppercase characters)");
        return USAGE;
    }
    let dir = state_dir(state);
    let store = match open_for_reading(&dir) {
        Ok(Some(store)) => store,
        Ok(None) => {
            return fail(StoreError::NotFound {
                run_id: run_id.clone(),
            })
        }
        Err(e) => return fail(e),
    };
    match store.get_run(run_id) {
        Ok(Some(_)) => {}
        Ok(None) => {
            return fail(StoreError::NotFound {
                run_id: run_id.clone(),
            })
        }
        Err(e) => return fail(e),
    }
    match crate::stages::write_logs(&store, run_id, logs) {
        Ok(()) => {
            println!("wrote the stage logs of run {run_id} to {}", logs.display());
            0
        }
        Err(e) => fail(format!("export failed: {e}")),
    }
}

/// `svc import DIR`: activates the state directory (creating it if needed), imports DIR,
/// verifies it byte for byte and runs a full integrity check. Exit 0, or 1 on failure.
pub fn import(args: ImportArgs) -> i32 {
    let dir = state_dir(&args.state_dir);
    // Not beside a server (`store::lock`); held until the import is verified.
    let lock = crate::base::perms::private_dir(&dir)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            crate::store::StateLock::take(&dir, crate::store::lock::Role::Command("svc import"))
                .map_err(|e| e.to_string())
        });
    let _lock = match lock {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    let store = match SqliteStore::activate(&dir) {
        Ok(store) => store,
        Err(e) => return fail(e),
    };
    let summary = match import_dir(&store, &args.dir) {
        Ok(summary) => summary,
        Err(e) => return fail(format!("import failed: {e}")),
    };
    match store.integrity_problems(true) {
        Ok(problems) if problems.is_empty() => {}
        Ok(problems) => {
            return fail(format!(
                "integrity check of {} failed after the import: {}",
                store.path().display(),
                problems.join("; ")
            ))
        }
        Err(e) => return fail(e),
    }
    println!(
        "imported {} run(s) ({} already present), {} event(s), {} blob(s) from {}; verified",
        summary.runs_imported,
        summary.runs_present,
        summary.events,
        summary.blobs,
        args.dir.display()
    );
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{EventDraft, NewRun};
    use clap::{CommandFactory, Parser, Subcommand};

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: Cmd,
    }

    #[derive(Debug, Subcommand)]
    enum Cmd {
        Runs(RunsArgs),
        Events(EventsArgs),
        Export(ExportArgs),
        Import(ImportArgs),
    }

    fn parse(args: &[&str]) -> Result<Cmd, clap::Error> {
        Cli::try_parse_from(std::iter::once("svc").chain(args.iter().copied())).map(|c| c.cmd)
    }

    #[test]
    fn argument_definitions_parse() {
        Cli::command().debug_assert();
        match parse(&["runs", "--state-dir", "/s", "--format", "json"]) {
            Ok(Cmd::Runs(a)) => {
                assert_eq!(a.state_dir, Some(PathBuf::from("/s")));
                assert_eq!(a.format, ListFormat::Json);
            }
            other => panic!("{other:?}"),
        }
        match parse(&[
            "events",
            "01JD0000000000000000000000",
            "--since",
            "5",
            "--format",
            "text",
        ]) {
            Ok(Cmd::Events(a)) => {
                assert_eq!((a.since, a.format), (5, EventsFormat::Text));
            }
            other => panic!("{other:?}"),
        }
        match parse(&["export", "--state-dir", "/s", "/out", "A", "B"]) {
            Ok(Cmd::Export(a)) => {
                assert_eq!(a.out_dir, Some(PathBuf::from("/out")));
                assert_eq!(a.run_ids, vec!["A".to_string(), "B".to_string()]);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse(&["import", "/in"]), Ok(Cmd::Import(_))));
        let usage = parse(&["events"]).map(|_| ()).unwrap_err();
        assert_eq!(usage.exit_code(), 2);
        assert!(parse(&["runs", "--format", "yaml"]).is_err());
    }

    #[test]
    fn list_output_formats() {
        let store = crate::store::MemoryStore::new();
        let r = store
            .create_run(NewRun {
                title: "Fix it".into(),
                ..NewRun::default()
            })
            .unwrap_or_else(|e| panic!("{e}"));
        store
            .append(
                &r.id,
                EventDraft::new("run.archived", serde_json::Value::Null),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let rows = store.list_runs(0, 10).unwrap_or_default();
        let mut text = Vec::new();
        write_runs(&mut text, &rows, ListFormat::Text).unwrap_or_default();
        let text = String::from_utf8(text).unwrap_or_default();
        assert!(text.starts_with("ID "), "{text}");
        assert!(
            text.contains("submitted (archived)") && text.contains("Fix it"),
            "{text}"
        );
        let mut out = Vec::new();
        write_runs(&mut out, &rows, ListFormat::Json).unwrap_or_default();
        let v: Value = serde_json::from_slice(&out).unwrap_or_default();
        assert_eq!(v["data"][0]["id"], r.id.as_str());
        assert_eq!(v["data"][0]["status"], "submitted");
        assert_eq!(v["data"][0]["archived"], true);
        let line = event_text_line(
            r#"{"seq":3,"id":"x","ts":"2026-01-01T00:00:00.000Z","run_id":"R","event":"stage.started","properties":{"a":1},"node_id":"plan"}"#,
        );
        assert!(
            line.contains("stage.started") && line.contains("plan") && line.contains(r#"{"a":1}"#)
        );
    }

    #[test]
    fn commands_end_to_end() {
        let Ok(tmp) = tempfile::tempdir() else {
            panic!("tempdir")
        };
        let state = tmp.path().join("state");
        // Nothing there yet: an empty list, not an error.
        let list = |dir: &Path| {
            runs(RunsArgs {
                state_dir: Some(dir.to_path_buf()),
                format: ListFormat::Json,
                limit: None,
            })
        };
        assert_eq!(list(&state), 0);
        let ids: Vec<String> = {
            let store = SqliteStore::activate(&state).unwrap_or_else(|e| panic!("{e}"));
            (0..3)
                .map(|i| {
                    let r = store
                        .create_run(NewRun {
                            title: format!("r{i}"),
                            ..NewRun::default()
                        })
                        .unwrap_or_else(|e| panic!("{e}"));
                    store
                        .append(&r.id, EventDraft::new("run.queued", serde_json::json!({})))
                        .unwrap_or_else(|e| panic!("{e}"));
                    r.id
                })
                .collect()
        };
        assert_eq!(list(&state), 0);
        let ev = |run_id: &str, format| {
            events(EventsArgs {
                run_id: run_id.to_string(),
                since: 2,
                format,
                state_dir: Some(state.clone()),
            })
        };
        assert_eq!(ev(&ids[0], EventsFormat::Jsonl), 0);
        assert_eq!(ev(&ids[0], EventsFormat::Text), 0);
        assert_eq!(ev("nope", EventsFormat::Jsonl), 2);
        assert_eq!(ev(&crate::base::clock::new_ulid(), EventsFormat::Jsonl), 1);

        let out = tmp.path().join("export");
        let code = export(ExportArgs {
            state_dir: Some(state.clone()),
            out_dir: Some(out.clone()),
            run_ids: vec![ids[1].clone()],
            stages: None,
        });
        assert_eq!(code, 0);
        assert!(out
            .join("runs")
            .join(&ids[1])
            .join("events.jsonl")
            .is_file());
        assert!(!out.join("runs").join(&ids[0]).exists());
        let bad = export(ExportArgs {
            state_dir: Some(state.clone()),
            out_dir: Some(tmp.path().join("x")),
            run_ids: vec![crate::base::clock::new_ulid()],
            stages: None,
        });
        assert_eq!(bad, 1);

        let other = tmp.path().join("other-state");
        let import_into = |dir: &Path| {
            import(ImportArgs {
                dir: out.clone(),
                state_dir: Some(dir.to_path_buf()),
            })
        };
        assert_eq!(import_into(&other), 0);
        assert_eq!(import_into(&other), 0, "importing twice is harmless");
        let store = SqliteStore::open(&other.join(DB_FILE)).unwrap_or_else(|e| panic!("{e}"));
        let rows = store.list_runs(0, 10).unwrap_or_default();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].id, ids[1]);
        // A broken directory fails with exit code 1.
        std::fs::write(out.join("stray.txt"), "x").unwrap_or_default();
        assert_eq!(import_into(&other), 1);
    }
}
