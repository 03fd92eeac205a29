//! The README's set-up and shell examples, run as written against the real binary, so they
//! cannot rot: the server command of "Set-up" (its arguments after `cargo run --`), then every
//! ```sh block of that section, in order, in one bash with `set -euo pipefail`. A line whose
//! comment shows a result (`# {"kind":"runnable"}`, `# 204`, or a `#   {...}` line under it)
//! must find that text in the output.
//!
//! The examples talk to `127.0.0.1:32276` and read `~/.local/state/svc/dev-token`, as a
//! newcomer's would: the test runs them in a private network namespace (bubblewrap), where that
//! port is free whatever else runs on this machine, with `HOME` in a temporary directory.
//! Needs bwrap, curl and jq: ignored (saying so) when one is missing, required under
//! `SVC_REQUIRE_BWRAP=1` and `SVC_REQUIRE_CURL=1` (set by `.ci/run`, which installs them).

use crate::support::server::bin;
use std::path::Path;
use std::process::Command;
use svc::internal::test_tools::{require, Tool};

/// README.md's "Set-up" section, up to the next heading.
fn setup_section() -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let start = readme.find("\n## Set-up").expect("a Set-up section");
    readme[start + 1..]
        .lines()
        .enumerate()
        .take_while(|(i, l)| *i == 0 || !(l.starts_with("## ") || l.starts_with("### ")))
        .map(|(_, l)| format!("{l}\n"))
        .collect()
}

/// The indented (4-space) command lines and the ```sh blocks of a section.
fn commands_and_blocks(section: &str) -> (Vec<String>, Vec<String>) {
    let mut commands = Vec::new();
    let mut blocks = Vec::new();
    let mut block: Option<String> = None;
    for line in section.lines() {
        match &mut block {
            Some(b) if line.trim_end() == "```" => {
                blocks.push(std::mem::take(b));
                block = None;
            }
            Some(b) => {
                b.push_str(line);
                b.push('\n');
            }
            None if line.trim_end() == "```sh" => block = Some(String::new()),
            None => {
                if let Some(c) = line.strip_prefix("    ") {
                    commands.push(c.trim().to_string());
                }
            }
        }
    }
    (commands, blocks)
}

/// What the comments of a block say its output holds: `cmd   # RESULT` when RESULT is JSON or
/// a status code, and `#   RESULT` lines of their own (without `...`, which stands for
/// anything).
fn expected_results(block: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in block.lines() {
        let comment = match line.trim_start().strip_prefix('#') {
            Some(own) => own.trim(),
            None => match line.rsplit_once("   # ") {
                Some((_, c)) => c.trim(),
                None => continue,
            },
        };
        let looks_like_result = comment.starts_with('{')
            || (comment.len() == 3 && comment.bytes().all(|b| b.is_ascii_digit()));
        if looks_like_result && !comment.contains("...") {
            out.push(comment.to_string());
        }
    }
    out
}

#[test]
fn the_readme_setup_names_the_measured_commands() {
    let (commands, blocks) = commands_and_blocks(&setup_section());
    assert_eq!(
        commands[..3],
        [
            "cargo run -- server start --dev",
            "cargo test",
            "cargo install --locked --path ."
        ],
        "the set-up commands changed: measure them again (benches/first_hour.sh) and update the figures"
    );
    assert_eq!(blocks.len(), 2, "the walkthrough and the human gate");
    assert!(!expected_results(&blocks[1]).is_empty());
}

/// The dependency crates a cargo build with these edges resolves, with their features:
/// `"name version" -> "features"` (svc itself left out).
fn resolved(edges: &str) -> std::collections::BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["tree", "--offline", "--prefix", "none", "-e", edges])
        .args(["-f", "{p}|{f}", "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (p, f) = l.trim_end_matches(" (*)").split_once('|')?;
            let mut words = p.split_whitespace();
            let key = format!("{} {}", words.next()?, words.next()?);
            (!key.starts_with("svc ")).then(|| (key, f.trim().to_string()))
        })
        .collect()
}

/// The set-up's two commands compile the dependency tree once: every crate `cargo run`
/// builds, `cargo test` builds with the same features (it adds its dev-dependencies, but a
/// feature one of them turns on in a shared crate would rebuild that crate and everything
/// above it: the `bitflags` entry in Cargo.toml is there for that).
#[test]
fn building_and_testing_share_one_build_of_the_dependencies() {
    let build = resolved("normal,build");
    let test = resolved("normal,build,dev");
    assert!(build.len() > 100, "{} crates", build.len());
    let changed: Vec<String> = build
        .iter()
        .filter(|(k, f)| test.get(*k) != Some(f))
        .map(|(k, f)| {
            format!(
                "{k}: [{f}] for cargo run, [{}] for cargo test",
                test.get(k).map_or("", |s| s)
            )
        })
        .collect();
    assert!(
        changed.is_empty(),
        "cargo test would compile these again (ask for the same features in [dependencies]):\n{}",
        changed.join("\n")
    );
}

#[test]
#[cfg_attr(
    not(all(has_bwrap, has_curl)),
    ignore = "needs bubblewrap able to create namespaces and curl and jq: apt-get install bubblewrap; apt-get install curl jq"
)]
fn readme_examples_work_when_pasted() {
    require(Tool::Bwrap);
    require(Tool::Curl);
    let (commands, blocks) = commands_and_blocks(&setup_section());
    let server_args = commands[0]
        .strip_prefix("cargo run -- ")
        .expect("the server command is `cargo run -- ...`");
    let home = tempfile::tempdir().unwrap();
    let mut script = String::from(
        "set -euo pipefail\n\
         \"$SVC\" ",
    );
    script.push_str(server_args);
    script.push_str(
        " >\"$HOME/server.out\" 2>\"$HOME/server.err\" &\n\
         server=$!\n\
         trap 'kill $server 2>/dev/null' EXIT\n\
         for _ in $(seq 1 300); do grep -q '^svc: board:' \"$HOME/server.out\" && break; sleep 0.1; done\n\
         cat \"$HOME/server.out\"\n",
    );
    for (i, b) in blocks.iter().enumerate() {
        script.push_str(&format!("echo '=== block {}'\n", i + 1));
        script.push_str(b);
    }
    let out = Command::new("bwrap")
        .args(["--dev-bind", "/", "/", "--unshare-net", "--unshare-pid"])
        .args(["--die-with-parent", "--chdir"])
        .arg(home.path())
        .args(["bash", "-c", &script])
        .env("HOME", home.path())
        .env("SVC", bin())
        .env_remove("XDG_STATE_HOME")
        .env_remove("SESSION_SECRET")
        .output()
        .expect("run bwrap");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let server_err = std::fs::read_to_string(home.path().join("server.err")).unwrap_or_default();
    assert!(
        out.status.success(),
        "the README's examples failed:\n--- stdout\n{stdout}\n--- stderr\n{}\n--- server\n{server_err}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("svc: board: open http://127.0.0.1:32276/"),
        "{stdout}"
    );
    assert!(stdout.contains("\"event\":\"run.completed\""), "{stdout}");
    for block in &blocks {
        for want in expected_results(block) {
            // A status code is a line of its own; JSON is found anywhere.
            let found = if want.starts_with('{') {
                stdout.contains(&want)
            } else {
                stdout.lines().any(|l| l.trim() == want)
            };
            assert!(
                found,
                "the README says `{want}`, the output does not:\n{stdout}"
            );
        }
    }
}
