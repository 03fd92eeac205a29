//! `svc server start` and `svc secrets set|list|rm`: argument parsing and output only; the
//! server lives in [`crate::server`], the vault in [`crate::settings::vault`].
//!
//! Must not touch: request handling, run logic, or secret values in output (`list` prints
//! names and metadata only).

use crate::server::{self, http::Listen, ServerOptions};
use crate::settings::vault::{SecretType, Vault};
use clap::{Args, Subcommand, ValueEnum};
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct ServerArgs {
    #[command(subcommand)]
    command: ServerCommand,
}

#[derive(Subcommand)]
enum ServerCommand {
    /// Start the HTTP service in the foreground.
    Start(StartArgs),
}

#[derive(Args)]
struct StartArgs {
    /// `unix:PATH` or `HOST:PORT` (overrides server.listen; default `unix:<state-dir>/svc.sock`).
    #[arg(long)]
    listen: Option<String>,
    /// State directory (default: $XDG_STATE_HOME/svc or ~/.local/state/svc).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Settings file (default: `<state-dir>/settings.toml`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Boot configured with throw-away defaults, dev-token sign-in and the web UI, on
    /// loopback (127.0.0.1:32276 unless --listen says otherwise); print the dev token and the
    /// board's URL.
    #[arg(long)]
    dev: bool,
}

#[derive(Args)]
pub struct SecretsArgs {
    #[command(subcommand)]
    command: SecretsCommand,
    /// State directory (default: $XDG_STATE_HOME/svc or ~/.local/state/svc).
    #[arg(long, global = true)]
    state_dir: Option<PathBuf>,
}

#[derive(Subcommand)]
enum SecretsCommand {
    /// Create or replace a secret: the value as an argument, or read from a file (`-`:
    /// standard input) so it never appears in a process list (a PEM key, a token).
    Set {
        name: String,
        #[arg(required_unless_present = "from_file", conflicts_with = "from_file")]
        value: Option<String>,
        /// Read the value from this file (`-` for standard input); one trailing newline is
        /// dropped.
        #[arg(long = "from-file", value_name = "PATH")]
        from_file: Option<PathBuf>,
        #[arg(long = "type", value_enum, default_value_t = CliSecretType::Environment)]
        kind: CliSecretType,
    },
    /// List secret names and metadata (never values).
    List,
    /// Remove a secret.
    Rm { name: String },
}

#[derive(Clone, Copy, ValueEnum)]
enum CliSecretType {
    Environment,
    File,
    Credential,
}

fn state_dir(arg: Option<PathBuf>) -> PathBuf {
    arg.unwrap_or_else(crate::store::default_state_dir)
}

pub fn server(args: ServerArgs) -> i32 {
    match args.command {
        ServerCommand::Start(a) => start(a),
    }
}

fn start(a: StartArgs) -> i32 {
    let _ = env_logger::Builder::from_env(
        env_logger::Env::default().default_filter_or("info,tiny_http=off"),
    )
    .try_init();
    let listen = match a.listen.as_deref().map(Listen::parse).transpose() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: --listen: {e}");
            return 2;
        }
    };
    let dir = state_dir(a.state_dir.clone());
    let settings_path = a
        .config
        .clone()
        .unwrap_or_else(|| dir.join(crate::settings::SETTINGS_FILE));
    if !a.dev && !settings_path.exists() {
        // The wizard writes the state directory too: one server per directory here as well.
        let lock = crate::base::perms::private_dir(&dir)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                crate::store::StateLock::take(&dir, crate::store::lock::Role::Server)
                    .map_err(|e| e.to_string())
            });
        let _lock = match lock {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: {e}");
                return 1;
            }
        };
        return install(dir, settings_path, listen);
    }
    let opts = ServerOptions {
        state_dir: state_dir(a.state_dir),
        settings_path: a.config,
        listen,
        dev: a.dev,
    };
    let running = match server::start(opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return e.exit_code();
        }
    };
    let mut out = std::io::stdout().lock();
    if let Some(p) = running.preview_url() {
        let _ = writeln!(out, "svc: previews on {p}");
    }
    let _ = writeln!(out, "svc: listening on {}", running.url());
    if let Some((token, created)) = &running.dev_token {
        if a.dev {
            let _ = writeln!(
                out,
                "svc: dev token{}: {token}",
                if *created { " (new)" } else { "" }
            );
            let _ = writeln!(out, "{}", board_line(&running, &dir));
        }
    }
    let _ = out.flush();
    drop(out);
    loop {
        std::thread::park();
    }
}

/// Where a `--dev` server's board is and how to sign in to it.
fn board_line(running: &server::RunningServer, state_dir: &std::path::Path) -> String {
    let token_file = state_dir.join(crate::auth::DEV_TOKEN_FILE);
    match running.http.listen() {
        Listen::Tcp(_) => format!(
            "svc: board: open {}/ in a browser and sign in with the dev token above (also in {})",
            running.url(),
            token_file.display()
        ),
        Listen::Unix(_) => format!(
            "svc: board: a browser cannot open a Unix socket; start with --listen {} to use the web UI",
            server::DEV_LISTEN
        ),
    }
}

/// Install mode: serve the wizard until `finish` has written the settings, then exit 0.
fn install(state_dir: PathBuf, settings_path: PathBuf, listen: Option<Listen>) -> i32 {
    let inst = match crate::install::start(state_dir, settings_path.clone(), listen) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "svc: install mode: {} does not exist; set this server up in a browser",
        settings_path.display()
    );
    let _ = writeln!(out, "svc: install URL: {}", inst.install_url());
    let _ = writeln!(out, "svc: install token: {}", inst.token());
    let _ = writeln!(out, "svc: listening on {}", inst.base);
    let _ = out.flush();
    drop(out);
    if inst.done.recv().is_err() {
        return 1;
    }
    // Let the finish response reach the browser before the listener goes away.
    std::thread::sleep(std::time::Duration::from_millis(500));
    inst.http.shutdown();
    println!(
        "svc: install complete: wrote {}; start the server again to boot configured",
        settings_path.display()
    );
    0
}

/// A secret's value from a file or (`-`) standard input, without one trailing newline.
fn read_value(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    if path.as_os_str() == "-" {
        std::io::stdin().read_to_string(&mut text)?;
    } else {
        text = std::fs::read_to_string(path)?;
    }
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    Ok(text)
}

pub fn secrets(args: SecretsArgs) -> i32 {
    let vault = Vault::in_state_dir(&state_dir(args.state_dir));
    let result = match args.command {
        SecretsCommand::Set {
            name,
            value,
            from_file,
            kind,
        } => {
            let value = match (value, from_file) {
                (Some(v), _) => v,
                (None, Some(path)) => match read_value(&path) {
                    Ok(v) => v,
                    Err(e) => {
                        eprintln!("error: cannot read the value from {}: {e}", path.display());
                        return 1;
                    }
                },
                (None, None) => {
                    eprintln!("error: give the value or --from-file");
                    return 2;
                }
            };
            let kind = match kind {
                CliSecretType::Environment => SecretType::Environment,
                CliSecretType::File => SecretType::File,
                CliSecretType::Credential => SecretType::Credential,
            };
            vault.set(&name, &value, kind).map(|_| {
                println!("saved secret {name}");
            })
        }
        SecretsCommand::List => vault.list().map(|list| {
            for m in list {
                let kind = serde_json::to_value(m.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                println!("{}\t{kind}\tupdated {}", m.name, m.updated_at);
            }
        }),
        SecretsCommand::Rm { name } => vault.remove(&name).map(|_| {
            println!("removed secret {name}");
        }),
    };
    match result {
        Ok(()) => 0,
        Err(e @ crate::settings::vault::VaultError::BadName(..)) => {
            eprintln!("error: {e}");
            2
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}
