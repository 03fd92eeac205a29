//! The threat model's tests (docs/decisions.md "Threat model"): workflow code never sees the
//! server's secrets (environment, state directory), and what users read of a run hides
//! them. Real server binary, real child processes, real bubblewrap (a test that needs git
//! or bubblewrap is ignored, with the install command, where the build did not find them;
//! `svc::test_tools`).

use crate::support::server::*;
use serde_json::{json, Value};
use std::process::Command;
use svc::test_tools::{require, Tool};

const SESSION_SECRET: &str = "session-secret-0123456789abcdef0123456789abcdef";
const UNGIVEN: &str = "ungiven-vault-value-7f3a9c";
const GIVEN: &str = "given-vault-value-5d21e8";

/// `svc secrets set NAME VALUE` on a state directory before its server starts.
fn vault_set(dir: &std::path::Path, name: &str, value: &str) {
    let o = Command::new(bin())
        .args(["secrets", "set", name, value, "--state-dir"])
        .arg(dir)
        .output()
        .expect("svc secrets set");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A dev server whose process environment holds `SESSION_SECRET` and another variable of
/// its own, whose vault holds one value given to runs (`[run] secrets`) and one not.
fn server_with_secrets() -> Server {
    let dir = tempfile::tempdir().unwrap();
    vault_set(dir.path(), "UNGIVEN_TOKEN", UNGIVEN);
    vault_set(dir.path(), "GIVEN_TOKEN", GIVEN);
    let settings = "[server.auth]\nmethods = [\"dev-token\"]\n[run]\nsecrets = [\"GIVEN_TOKEN\"]\n";
    Server::with(Opts {
        dir: Some(dir),
        settings: Some(settings),
        env: vec![
            ("SESSION_SECRET", SESSION_SECRET.to_string()),
            ("SVC_SERVER_ONLY_VARIABLE", "server-only".to_string()),
        ],
        ..Opts::default()
    })
}

fn command_flow(script: &str) -> String {
    format!(
        "digraph w {{ start [shape=Mdiamond]; exit [shape=Msquare];\n  probe [shape=parallelogram, script={}];\n  start -> probe -> exit\n}}",
        serde_json::to_string(script).unwrap()
    )
}

/// Everything a user can read of run `id` through the API, as one text.
fn everything_readable(s: &Server, id: &str) -> String {
    let mut all = String::new();
    for path in [
        format!("/api/v1/runs/{id}"),
        format!("/api/v1/runs/{id}/events?limit=1000"),
        format!("/api/v1/runs/{id}/stages"),
        format!("/api/v1/runs/{id}/files"),
        format!("/api/v1/runs/{id}/graph/source"),
        format!("/api/v1/runs/{id}/checkpoint"),
    ] {
        let r = s.get(&path);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        all.push_str(&r.text());
    }
    let stages = s.get(&format!("/api/v1/runs/{id}/stages")).json();
    for st in stages["data"].as_array().cloned().unwrap_or_default() {
        if let Some(node) = st["node_id"].as_str().or(st["id"].as_str()) {
            all.push_str(&s.get(&format!("/api/v1/runs/{id}/stages/{node}")).text());
        }
    }
    all
}

fn command_stdout(s: &Server, id: &str) -> String {
    run_events(s, id)
        .into_iter()
        .find(|e| e["event"] == "command.completed")
        .map(|e| e["properties"]["stdout"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

/// One run of the probe under `provider`: what it printed, and everything readable.
fn probe(s: &Server, provider: &str) -> (String, String, Value) {
    let state = s.path().display().to_string();
    let script = format!(
        "env | sort; echo ---; \
         cat {state}/dev-token && echo READ-DEV-TOKEN; \
         cat {state}/secrets.json >/dev/null && echo READ-VAULT; \
         echo STATE-LISTING $(ls {state} 2>/dev/null) END; \
         ls $HOME >/dev/null 2>&1; \
         test \"$GIVEN_TOKEN\" = {GIVEN} && echo GIVEN-ARRIVED; \
         echo \"$GIVEN_TOKEN\" > given.txt; \
         cat {state}/dev-token > copied-token.txt 2>/dev/null; \
         echo literal-{UNGIVEN} > literal.txt; true"
    );
    let id = create_run(
        s,
        &json!({"workflow": package(&command_flow(&script)), "sandbox": {"provider": provider}}),
    );
    start_run(s, &id);
    let done = wait_run_end(s, &id);
    assert_eq!(done["lifecycle"]["status"]["kind"], "succeeded", "{done}");
    (command_stdout(s, &id), everything_readable(s, &id), done)
}

fn assert_no_server_secret(s: &Server, what: &str, text: &str) {
    for secret in [SESSION_SECRET, UNGIVEN, GIVEN, s.token.as_str()] {
        assert!(!text.contains(secret), "{what} shows a secret: {text}");
    }
    assert!(!text.contains("SESSION_SECRET="), "{what}: {text}");
    assert!(!text.contains("SVC_SERVER_ONLY_VARIABLE"), "{what}: {text}");
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn workflow_code_never_sees_the_servers_secrets_in_a_local_run() {
    require(Tool::Git);
    let s = server_with_secrets();
    let (out, readable, _) = probe(&s, "local");
    // The environment is the allowlist plus the run's variables and the given secret.
    let env: Vec<&str> = out.split("---").next().unwrap_or("").lines().collect();
    assert!(env.iter().any(|l| l.starts_with("PATH=")), "{out}");
    assert!(out.contains("GIVEN-ARRIVED"), "{out}");
    for line in &env {
        let name = line.split('=').next().unwrap_or("");
        assert!(
            svc::procs::STAGE_ENV_ALLOWED.contains(&name)
                || name.starts_with("LC_")
                || name.starts_with("SVC_")
                || matches!(name, "GIVEN_TOKEN" | "PWD" | "SHLVL" | "_" | "OLDPWD"),
            "`{name}` reached the stage from the server: {out}"
        );
    }
    // `local` runs as the server's user: the state directory can be read (documented), but
    // what it reads is hidden wherever the run is shown.
    assert!(out.contains("READ-DEV-TOKEN"), "{out}");
    assert!(out.contains("secrets.json"), "{out}");
    assert!(out.contains("[REDACTED]"), "{out}");
    assert_no_server_secret(&s, "a local run", &readable);
    assert!(
        readable.contains("literal-[REDACTED]"),
        "the workflow source and the written file show the vault value hidden"
    );
}

#[test]
#[cfg_attr(
    not(all(has_git, has_bwrap)),
    ignore = "needs git and bubblewrap able to create namespaces: apt-get install git; apt-get install bubblewrap"
)]
fn workflow_code_never_sees_the_servers_secrets_in_a_container() {
    require(Tool::Git);
    require(Tool::Bwrap);
    let s = server_with_secrets();
    let (out, readable, done) = probe(&s, "container");
    assert_eq!(done["sandbox"]["instance"]["provider"], "container");
    assert!(out.contains("GIVEN-ARRIVED"), "{out}");
    for refused in ["READ-DEV-TOKEN", "READ-VAULT", "svc.db", "secrets.json"] {
        assert!(!out.contains(refused), "{refused}: {out}");
    }
    // Only the mount point of the workspace exists where the state directory is.
    assert!(out.contains("STATE-LISTING workspaces END"), "{out}");
    assert!(out.contains("HOME=/tmp"), "{out}");
    assert_no_server_secret(&s, "a container run", &readable);
    let stderr = run_events(&s, done["id"].as_str().unwrap_or(""))
        .into_iter()
        .find(|e| e["event"] == "command.completed")
        .map(|e| e["properties"]["stderr"].as_str().unwrap_or("").to_string())
        .unwrap_or_default();
    assert!(stderr.contains("No such file or directory"), "{stderr}");
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_secret_named_in_run_secrets_that_the_vault_lacks_fails_the_run_closed() {
    require(Tool::Git);
    let settings = "[server.auth]\nmethods = [\"dev-token\"]\n[run]\nsecrets = [\"NOT_THERE\"]\n";
    let s = Server::with(Opts {
        settings: Some(settings),
        ..Opts::default()
    });
    let id = create_run(&s, &json!({"workflow": package(&command_flow("echo hi"))}));
    start_run(&s, &id);
    let done = wait_run_end(&s, &id);
    assert_eq!(done["lifecycle"]["status"]["kind"], "failed", "{done}");
    let text = run_events(&s, &id)
        .iter()
        .map(Value::to_string)
        .collect::<String>();
    assert!(text.contains("NOT_THERE"), "{text}");
    assert!(!text.contains("command.started"), "nothing ran: {text}");
}

#[test]
fn the_servers_own_credentials_cannot_be_given_to_runs() {
    for settings in [
        "[run]\nsecrets = [\"SESSION_SECRET\"]\n",
        "[run]\npass_env = [\"SESSION_SECRET\"]\n",
        "[run]\nsecrets = [\"CODEHOST_CLIENT_SECRET\"]\n",
        "[run]\nsecrets = [\"not a name\"]\n",
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("settings.toml"), settings).unwrap();
        let o = Command::new(bin())
            .args([
                "server",
                "start",
                "--dev",
                "--listen",
                "127.0.0.1:0",
                "--state-dir",
            ])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(!o.status.success(), "{settings}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("run."), "{settings}: {err}");
    }
}
