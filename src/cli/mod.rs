//! Command-line interface: argument parsing and output formatting only. Every command is a
//! thin shell over the library; exit codes: 0 success, 1 failure, 2 usage or input errors.
//! Must not: contain logic the server would also need (that belongs to the library).

mod backup;
mod interview;
mod progress;
mod prune;
pub mod run;
pub mod runs;
mod server;
mod signals;
pub mod validate;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "svc",
    version,
    about = "Run AI workflows written as DOT graphs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check workflow files and report diagnostics (exit 1 when any file has an error).
    Validate(validate::ValidateArgs),
    /// Print a workflow after defaults, subgraph classes and the stylesheet, as JSON.
    Parse(validate::ParseArgs),
    /// Run a workflow to completion, showing progress (exit 0 succeeded, 1 failed).
    Run(run::RunArgs),
    /// Continue an interrupted run from its last checkpoint.
    Resume(run::ResumeArgs),
    /// Rerun a finished run from a node: a new run from the checkpoint before that node's
    /// latest visit (as `POST /api/v1/runs/{id}/rewind`), run here to its end.
    Rewind(run::RewindArgs),
    /// List runs in the state directory, newest first.
    Runs(runs::RunsArgs),
    /// Print a run's events.
    Events(runs::EventsArgs),
    /// Write runs in the portable export format (`runs/<id>/events.jsonl` + `blobs/`).
    Export(runs::ExportArgs),
    /// Import a portable export directory into the state directory.
    Import(runs::ImportArgs),
    /// Run the HTTP service (`svc server start --dev`).
    Server(server::ServerArgs),
    /// Manage the server's secret vault (values are never printed).
    Secrets(server::SecretsArgs),
    /// Snapshot the database to the object store now ([server.object_store]).
    Backup(backup::BackupArgs),
    /// Restore a snapshot into a state directory without a database.
    Restore(backup::RestoreArgs),
    /// Remove finished runs (a dry run unless --yes), as POST /api/v1/system/prune does.
    Prune(prune::PruneArgs),
}

/// Output formats shared by commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum Format {
    #[default]
    Text,
    Json,
}

pub fn main() -> i32 {
    // `svc validate FILE...` is the command scripts and editors run most, often on large
    // files: it skips clap, whose start-up touches enough code to show in peak memory.
    // Anything the short path does not recognise goes to clap, which has the last word.
    if let Some(args) = validate::plain_args(std::env::args_os().skip(1)) {
        return validate::validate(args);
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    match cli.command {
        Command::Validate(a) => validate::validate(a),
        Command::Parse(a) => validate::parse(a),
        Command::Run(a) => run::run(a),
        Command::Resume(a) => run::resume(a),
        Command::Rewind(a) => run::rewind(a),
        Command::Runs(a) => runs::runs(a),
        Command::Events(a) => runs::events(a),
        Command::Export(a) => runs::export(a),
        Command::Import(a) => runs::import(a),
        Command::Server(a) => server::server(a),
        Command::Secrets(a) => server::secrets(a),
        Command::Backup(a) => backup::backup(a),
        Command::Restore(a) => backup::restore(a),
        Command::Prune(a) => prune::prune(a),
    }
}
