//! `svc backup` (a snapshot of the state directory's database to its object store, now) and
//! `svc restore` (a snapshot into a state directory without a database).
//!
//! Owns: these commands' arguments and output. Must not touch: how snapshots are taken,
//! checked or stored (`backup`).

use super::Format;
use crate::backup::{self, Source};
use crate::store::default_state_dir;
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct BackupArgs {
    /// State directory (default: $XDG_STATE_HOME/svc or ~/.local/state/svc).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

#[derive(Args)]
pub struct RestoreArgs {
    /// A snapshot file, an http(s) URL, or a key of the state directory's own object store
    /// (`backups/svc-....db`, or `latest`).
    source: String,
    /// The state directory to restore into: it must have no database (its settings.toml
    /// and vault may be there already, for an object-store key).
    #[arg(long)]
    state_dir: PathBuf,
}

pub fn backup(args: BackupArgs) -> i32 {
    let dir = args.state_dir.unwrap_or_else(default_state_dir);
    let settings = match crate::settings::Settings::load(&dir.join(crate::settings::SETTINGS_FILE))
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: cannot read the settings: {e}");
            return 2;
        }
    };
    backup::lower_priority();
    let result = backup::store_of(&settings, &dir)
        .and_then(|store| backup::take(&dir, &store, settings.server.backup.keep));
    match result {
        Ok(t) => {
            match args.format {
                Format::Json => println!("{}", serde_json::json!(t)),
                Format::Text => {
                    println!(
                        "backup: {} ({} bytes, {} runs, {} events)",
                        t.key, t.size, t.runs, t.events
                    );
                    for k in &t.pruned {
                        println!("removed: {k}");
                    }
                }
            }
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

pub fn restore(args: RestoreArgs) -> i32 {
    match backup::restore(&Source::parse(&args.source), &args.state_dir) {
        Ok(r) => {
            println!(
                "restored {} ({} runs, {} events, schema {})",
                r.db_path.display(),
                r.info.runs,
                r.info.events,
                r.info.schema_version
            );
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}
