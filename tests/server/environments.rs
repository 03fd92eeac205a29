//! Environments through the real server: the catalog over HTTP (the seeded `default`, the
//! reserved `local`, refusals naming the field and the fix, preflight), a run choosing one
//! whose limits are frozen into it and enforced on real processes (a memory hog fails its
//! stage with the limit named, a fork bomb is held at the process limit, the server keeps
//! serving), the board showing the run's limits, an environment's `env` reaching a command
//! stage (a vault secret expanded just before start, never in an event, the log, a command
//! line or the environment's GET), and its `lifecycle` (removed at the end, or kept); and
//! `svc run` choosing one from the state directory's catalog (`--environment`, else
//! `[run] environment`).

use crate::support::server::{
    assert_error, bin, create_run_json, everything_readable, run_events, start_run, store_key,
    wait_kind, watch_command_lines, Opts, Resp, Server,
};
use serde_json::{json, Value};
use svc::internal::test_tools::{require, Tool};

fn put(s: &Server, path: &str, if_match: &str, body: &Value) -> Resp {
    let auth = s.auth();
    let headers = vec![("Authorization", auth.as_str()), ("If-Match", if_match)];
    s.raw("PUT", path, &headers, Some(body.to_string().as_bytes()))
}

fn workflow(script: &str) -> Value {
    let dot = format!(
        "digraph w {{ start [shape=Mdiamond]; exit [shape=Msquare]; \
         work [shape=parallelogram, script={}]; start -> work -> exit }}",
        serde_json::to_string(script).unwrap()
    );
    json!({"entrypoint": "w.dot", "files": {"w.dot": dot}})
}

/// The run's stage failure text (every `stage.failed` error, joined).
fn failures(s: &Server, id: &str) -> String {
    run_events(s, id)
        .iter()
        .filter(|e| e["event"] == "stage.failed" || e["event"] == "command.completed")
        .map(|e| e["properties"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_catalog_over_http() {
    let s = Server::start();
    let list = s.get("/api/v1/environments").json();
    assert_eq!(list["meta"]["total"], 1, "{list}");
    let default = &list["data"][0];
    assert_eq!(default["id"], "default");
    assert_eq!(default["provider"], "container");
    assert_eq!(default["resources"]["cpu"], 2);
    // Refusals name the field, the provider and the fix; all at once.
    let r = s.post(
        "/api/v1/environments",
        &json!({"id": "bad", "provider": "local", "network": "block", "image": "debian:12",
                "resources": {"memory": "1MB"}})
        .to_string(),
    );
    let e = assert_error(&r, 422);
    let text = e.to_string();
    for field in ["resources.memory", "network", "image"] {
        assert!(text.contains(&format!("\"field\":\"{field}\"")), "{text}");
    }
    let r = s.post(
        "/api/v1/environments",
        &json!({"id": "bad", "provider": "local", "network": "block", "image": "debian:12"})
            .to_string(),
    );
    let text = assert_error(&r, 422).to_string();
    assert!(text.contains("\"field\":\"network\""), "{text}");
    assert!(text.contains("\"field\":\"image\""), "{text}");
    assert!(text.contains("use provider `container`"), "{text}");
    let r = s.post(
        "/api/v1/environments",
        &json!({"id": "local", "provider": "local"}).to_string(),
    );
    assert!(assert_error(&r, 422).to_string().contains("reserved"));
    let r = s.post("/api/v1/environments", "{not json");
    assert_error(&r, 400);
    // Create, read, preflight, replace with the revision.
    let r = s.post(
        "/api/v1/environments",
        &json!({"id": "small", "provider": "container", "network": "block",
                "resources": {"cpu": 1, "memory": "256MB"}})
        .to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let etag = r.header("ETag").unwrap().to_string();
    let p = s.get("/api/v1/environments/small/preflight").json();
    let local = p["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["provider"] == "local")
        .unwrap()
        .clone();
    assert_eq!(local["ok"], false, "{p}");
    assert_eq!(local["refused"][0]["field"], "network", "{p}");
    assert!(["cgroup-v2", "cgroup-v1", "rlimits"].contains(&p["limits"].as_str().unwrap()));
    let r = put(
        &s,
        "/api/v1/environments/small",
        &etag,
        &json!({"provider": "container", "resources": {"cpu": 2}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["resources"]["cpu"], 2);
    assert_error(
        &put(
            &s,
            "/api/v1/environments/small",
            &etag,
            &json!({"provider": "local"}),
        ),
        409,
    );
    assert_error(&s.get("/api/v1/environments/nope"), 404);
    assert_error(&s.get("/api/v1/environments/Not_A_Slug"), 400);
    // A run naming an unknown environment, or overriding it into something refused: 422.
    let r = s.post(
        "/api/v1/runs",
        &json!({"workflow": workflow("true"), "environment": "nope"}).to_string(),
    );
    assert_error(&r, 422);
    let r = s.post(
        "/api/v1/runs",
        &json!({"workflow": workflow("true"),
                "environment": {"id": "small", "provider": "local", "network": "block"}})
        .to_string(),
    );
    let text = assert_error(&r, 422).to_string();
    assert!(text.contains("environment.network"), "{text}");
}

#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
#[test]
fn limits_are_frozen_into_the_run_and_enforced_on_its_processes() {
    require(Tool::Git);
    let s = Server::start();
    let p = {
        let r = s.post(
            "/api/v1/environments",
            &json!({"id": "tight", "provider": "local",
                    "resources": {"memory": "64MB", "pids": 32, "cpu": 1}})
            .to_string(),
        );
        if r.status == 422 {
            // Only where nothing can hold a process limit (root without a cgroup), and said so.
            let text = r.text();
            assert!(text.contains("RLIMIT_NPROC"), "{text}");
            return;
        }
        assert_eq!(r.status, 201, "{}", r.text());
        s.get("/api/v1/environments/tight/preflight").json()
    };
    let cgroup = p["limits"] != "rlimits";
    // A memory hog: 300 MB in one shell variable.
    let hog = create_run_json(
        &s,
        &json!({"workflow": workflow("x=$(head -c 300000000 /dev/zero | tr -c a a); echo ${#x}"),
                "environment": "tight"}),
    );
    let id = hog["id"].as_str().unwrap().to_string();
    // Frozen: editing the environment now changes nothing for this run.
    let etag = s
        .get("/api/v1/environments/tight")
        .header("ETag")
        .unwrap()
        .to_string();
    let r = put(
        &s,
        "/api/v1/environments/tight",
        &etag,
        &json!({"provider": "local"}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    start_run(&s, &id);
    let end = wait_kind(&s, &id, &["succeeded", "failed", "dead"]);
    assert_eq!(end, "failed", "{:#?}", run_events(&s, &id));
    let why = failures(&s, &id);
    if cgroup {
        assert!(why.contains("out of memory (limit 64 MiB)"), "{why}");
    }
    let run = s.get(&format!("/api/v1/runs/{id}")).json();
    let runtime = &run["sandbox"]["instance"]["runtime"];
    assert_eq!(runtime["limits"], p["limits"], "{run}");
    assert_eq!(runtime["resources"]["memory"], 64u64 << 20, "{run}");
    // The server is unaffected.
    assert_eq!(s.get("/api/v1/environments").status, 200);
    // The board shows the run's limits, not the host's.
    let board = s.get("/api/v1/runs").json();
    let item = board["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(
        item["sandbox"]["resources"]["memory"],
        64u64 << 20,
        "{item}"
    );
    assert_eq!(item["sandbox"]["resources"]["cpu"], 1, "{item}");
    assert_eq!(item["sandbox"]["resources"]["pids"], 32, "{item}");

    // A fork bomb, bounded so it ends: 100 sleepers against a limit of 32.
    let bomb = create_run_json(
        &s,
        &json!({"workflow": workflow("for i in $(seq 1 100); do sleep 20 >/dev/null 2>&1 & done; echo forked"),
                "environment": {"id": "tight", "resources": {"pids": 32, "memory": null}}}),
    );
    let id = bomb["id"].as_str().unwrap().to_string();
    start_run(&s, &id);
    let end = wait_kind(&s, &id, &["succeeded", "failed", "dead"]);
    let why = failures(&s, &id);
    assert!(
        why.contains("fork"),
        "the shell could not fork past the limit: {end} {why}"
    );
    assert_eq!(s.get("/api/v1/environments").status, 200);
}

/// The run's command stages' stdout, joined.
fn stdout(s: &Server, id: &str) -> String {
    run_events(s, id)
        .iter()
        .filter(|e| e["event"] == "command.completed")
        .filter_map(|e| e["properties"]["stdout"].as_str().map(str::to_string))
        .collect()
}

#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
#[test]
fn env_reaches_the_process_and_its_secret_nothing_else() {
    require(Tool::Git);
    let s = Server::start();
    let secret = "tok-env-5b1d9e77c0a3";
    store_key(&s, "API_TOKEN", secret);
    let r = s.post(
        "/api/v1/environments",
        &json!({"id": "with-env", "provider": "local",
                "env": {"GREETING": "hello from the environment",
                        "TOKEN": "Bearer {{ secrets.API_TOKEN }}"}})
        .to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    // The GET shows the names only: neither values nor references.
    let got = s.get("/api/v1/environments/with-env");
    let view = got.json();
    assert_eq!(view["env_keys"], json!(["GREETING", "TOKEN"]), "{view}");
    assert!(view.get("env").is_none(), "{view}");
    assert!(!got.text().contains("secrets."), "{}", got.text());
    // A view sent back keeps the variables; a run's override adds one by key.
    let etag = got.header("ETag").unwrap().to_string();
    let r = put(&s, "/api/v1/environments/with-env", &etag, &view);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["env_keys"], json!(["GREETING", "TOKEN"]));
    let script = "echo greeting=$GREETING; echo token=$TOKEN; \
                  echo length=${#TOKEN} extra=$EXTRA; sleep 1";
    let run = create_run_json(
        &s,
        &json!({"workflow": workflow(script),
                "environment": {"id": "with-env", "env": {"EXTRA": "from the run"}}}),
    );
    let id = run["id"].as_str().unwrap().to_string();
    // Every command line on the machine while the run goes: the secret is in none.
    let leaks = watch_command_lines(secret);
    start_run(&s, &id);
    let end = wait_kind(&s, &id, &["succeeded", "failed", "dead"]);
    let leaked = leaks();
    assert_eq!(end, "succeeded", "{:#?}", run_events(&s, &id));
    assert!(leaked.is_empty(), "a secret in a process list: {leaked:?}");
    let out = stdout(&s, &id);
    assert!(out.contains("greeting=hello from the environment"), "{out}");
    assert!(out.contains("extra=from the run"), "{out}");
    // The process saw the expanded value (its length), the output shows it redacted.
    let len = "Bearer ".len() + secret.len();
    assert!(out.contains(&format!("length={len}")), "{out}");
    assert!(out.contains("token=Bearer [REDACTED]"), "{out}");
    let all = Value::Array(run_events(&s, &id)).to_string();
    assert!(!all.contains(secret), "a vault secret reached an event");
    assert!(
        !all.contains("secrets.API_TOKEN"),
        "a reference reached an event"
    );
    let created = s.get(&format!("/api/v1/runs/{id}")).json();
    assert!(!created.to_string().contains(secret));
    assert!(
        !s.stderr().contains(secret),
        "a vault secret reached the log"
    );

    // Frozen at creation: a later edit does not change this run's variables.
    let evs = run_events(&s, &id);
    let plan = &evs.iter().find(|e| e["event"] == "run.created").unwrap()["properties"]["sandbox"];
    assert_eq!(
        plan["env_keys"],
        json!(["EXTRA", "GREETING", "TOKEN"]),
        "{plan}"
    );
    // A rewind to the stage runs it again with the same variables, the secret expanded.
    let r = s.post(&format!("/api/v1/runs/{id}/rewind"), r#"{"to": "work"}"#);
    assert_eq!(r.status, 201, "{}", r.text());
    let again = r.json()["id"].as_str().unwrap_or_default().to_string();
    assert_eq!(
        wait_kind(&s, &again, &["succeeded", "failed", "dead"]),
        "succeeded",
        "{:#?}",
        run_events(&s, &again)
    );
    let out = stdout(&s, &again);
    assert!(out.contains("greeting=hello from the environment"), "{out}");
    assert!(out.contains(&format!("length={len}")), "{out}");

    // A secret the vault lacks fails the run before anything starts, naming the variable.
    let run = create_run_json(
        &s,
        &json!({"workflow": workflow("echo never"),
                "environment": {"id": "with-env", "env": {"MISSING": "{{ secrets.NOT_SET }}"}}}),
    );
    let id = run["id"].as_str().unwrap().to_string();
    start_run(&s, &id);
    assert_eq!(
        wait_kind(&s, &id, &["succeeded", "failed", "dead"]),
        "failed"
    );
    let st = s.get(&format!("/api/v1/runs/{id}")).json();
    let text = st["lifecycle"]["error"].to_string();
    assert!(text.contains("MISSING") && text.contains("NOT_SET"), "{st}");
    assert!(stdout(&s, &id).is_empty());
    // Names the server keeps for itself are refused at create time.
    let r = s.post(
        "/api/v1/environments",
        &json!({"id": "greedy", "provider": "local",
                "env": {"S": "{{ secrets.SESSION_SECRET }}", "SVC_RUN_ID": "x"}})
        .to_string(),
    );
    let text = assert_error(&r, 422).to_string();
    assert!(
        text.contains("env.S") && text.contains("env.SVC_RUN_ID"),
        "{text}"
    );
}

#[cfg_attr(
    not(all(has_git, has_bwrap)),
    ignore = "needs git and bubblewrap able to create namespaces: apt-get install git; apt-get install bubblewrap"
)]
#[test]
fn env_reaches_a_container_process_and_its_secret_nothing_else() {
    require(Tool::Git);
    require(Tool::Bwrap);
    let s = Server::start();
    let secret = "tok-box-71c4e0a9d2f6";
    store_key(&s, "BOX_TOKEN", secret);
    let r = s.post(
        "/api/v1/environments",
        &json!({"id": "boxed", "provider": "container", "network": "block",
                "resources": {"memory": "256MB", "disk": "64MB"},
                "env": {"TOKEN": "{{ secrets.BOX_TOKEN }}", "MODE": "boxed"}})
        .to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    // Inside the container: the variable is written to a file of the workspace and read
    // back there, its digest and length printed (the test compares them with the secret's),
    // then the value itself printed, which the API must show redacted.
    let script = "printf %s \"$TOKEN\" > token.txt; test \"$(cat token.txt)\" = \"$TOKEN\"                   && echo file=ok; echo digest=$(sha256sum < token.txt | cut -c1-64)                   length=${#TOKEN} mode=$MODE home=$HOME; echo token=$TOKEN; rm token.txt; sleep 1";
    let run = create_run_json(
        &s,
        &json!({"workflow": workflow(script), "environment": "boxed"}),
    );
    let id = run["id"].as_str().unwrap().to_string();
    let leaks = watch_command_lines(secret);
    start_run(&s, &id);
    let end = wait_kind(&s, &id, &["succeeded", "failed", "dead"]);
    let leaked = leaks();
    assert_eq!(end, "succeeded", "{:#?}", run_events(&s, &id));
    assert!(leaked.is_empty(), "a secret in a process list: {leaked:?}");
    let events = run_events(&s, &id);
    let init = events
        .iter()
        .find(|e| e["event"] == "sandbox.initialized")
        .expect("sandbox.initialized");
    assert_eq!(init["properties"]["provider"], "container", "{init}");
    let out = stdout(&s, &id);
    use sha2::Digest;
    let digest = svc::internal::base::hex(&sha2::Sha256::digest(secret.as_bytes()));
    assert!(out.contains("file=ok"), "{out}");
    assert!(out.contains(&format!("digest={digest}")), "{out}");
    assert!(
        out.contains(&format!("length={} mode=boxed home=/tmp", secret.len())),
        "{out}"
    );
    assert!(out.contains("token=[REDACTED]"), "{out}");
    // Nothing a user can read of the run holds the secret or its reference: the events, the
    // stage's details and output, the run, its files.
    let all = everything_readable(&s, &id);
    assert!(
        all.contains("token=[REDACTED]"),
        "the stage output is served"
    );
    assert!(!all.contains(secret), "a vault secret reached the API");
    assert!(
        !all.contains("secrets.BOX_TOKEN"),
        "a reference reached the API"
    );
    assert!(
        !s.stderr().contains(secret),
        "a vault secret reached the log"
    );
}

#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
#[test]
fn svc_run_uses_an_environment_from_the_catalog() {
    require(Tool::Git);
    let secret = "tok-cli-3e9a51f07b28";
    // The catalog is the state directory's: filled through a server, then used without one.
    let dir = {
        let s = Server::start();
        store_key(&s, "CLI_TOKEN", secret);
        let r = s.post(
            "/api/v1/environments",
            &json!({"id": "cli-env", "provider": "local", "resources": {"disk": "1MB"},
                    "env": {"TOKEN": "{{ secrets.CLI_TOKEN }}", "GREETING": "from cli-env"}})
            .to_string(),
        );
        assert_eq!(r.status, 201, "{}", r.text());
        s.kill()
    };
    let state = dir.path();
    let work = tempfile::tempdir().unwrap();
    let flow = work.path().join("flow.dot");
    let script = "echo greeting=$GREETING length=${#TOKEN} fsize=$(ulimit -f) > result.txt";
    std::fs::write(
        &flow,
        format!(
            "digraph w {{ start [shape=Mdiamond]; exit [shape=Msquare]; \
             work [shape=parallelogram, script={}]; start -> work -> exit }}",
            serde_json::to_string(script).unwrap()
        ),
    )
    .unwrap();
    let svc_run = |extra: &[&str]| {
        let _ = std::fs::remove_file(work.path().join("result.txt"));
        let out = std::process::Command::new(bin())
            .arg("run")
            .arg(&flow)
            .arg("--state-dir")
            .arg(state)
            .arg("--workdir")
            .arg(work.path())
            .args(extra)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !text.contains(secret),
            "a vault secret reached svc's output"
        );
        (out.status.code(), text)
    };
    // The flag: the environment's variables (the secret expanded) and its disk limit
    // (RLIMIT_FSIZE, 1 MiB in 512-byte blocks) reach the stage, in the working directory.
    let want = format!("greeting=from cli-env length={} fsize=2048\n", secret.len());
    let (code, text) = svc_run(&["--environment", "cli-env"]);
    assert_eq!(code, Some(0), "{text}");
    let got = std::fs::read_to_string(work.path().join("result.txt")).unwrap();
    assert_eq!(got, want, "{text}");
    // Without the flag and without the setting: no environment, as before.
    let (code, text) = svc_run(&[]);
    assert_eq!(code, Some(0), "{text}");
    let got = std::fs::read_to_string(work.path().join("result.txt")).unwrap();
    assert!(
        got.starts_with("greeting= length=0 fsize=unlimited"),
        "{got}"
    );
    // `[run] environment` is the default.
    let settings = state.join("settings.toml");
    let mut text = std::fs::read_to_string(&settings).unwrap_or_default();
    text.push_str("\n[run]\nenvironment = \"cli-env\"\n");
    std::fs::write(&settings, text).unwrap();
    let (code, text) = svc_run(&[]);
    assert_eq!(code, Some(0), "{text}");
    let got = std::fs::read_to_string(work.path().join("result.txt")).unwrap();
    assert_eq!(got, want, "{text}");
    // An unknown id is refused before anything runs, naming it.
    let (code, text) = svc_run(&["--environment", "nope"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("no environment with id `nope`"), "{text}");
    assert!(!work.path().join("result.txt").exists());
    // The secret was never stored: not in the run store, whatever it recorded.
    for entry in std::fs::read_dir(state).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("svc.db") {
            let bytes = std::fs::read(entry.path()).unwrap();
            let found = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
            assert!(!found, "the secret is in {name}");
        }
    }
}

/// The run's `sandbox.cleanup.completed` reason, once it has one (waits up to `secs`).
fn cleanup_reason(s: &Server, id: &str, secs: u64) -> Value {
    crate::support::server::wait_for(secs, &format!("run {id}'s sandbox to be removed"), || {
        run_events(s, id)
            .iter()
            .find(|e| e["event"] == "sandbox.cleanup.completed")
            .map(|e| e["properties"]["reason"].clone())
    })
}

#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
#[test]
fn lifecycle_stops_the_sandbox_at_the_end_or_keeps_it_for_its_retention() {
    require(Tool::Git);
    let s = Server::start();
    for (id, lifecycle) in [
        ("ephemeral", json!({"stop_on_terminal": true})),
        ("brief", json!({"retention_hours": 0})),
        ("kept", json!({})),
    ] {
        let r = s.post(
            "/api/v1/environments",
            &json!({"id": id, "provider": "local", "lifecycle": lifecycle}).to_string(),
        );
        assert_eq!(r.status, 201, "{}", r.text());
    }
    // Both at once contradict each other: refused, naming the field and the fix.
    let r = s.post(
        "/api/v1/environments",
        &json!({"id": "both", "provider": "local",
                "lifecycle": {"stop_on_terminal": true, "retention_hours": 2}})
        .to_string(),
    );
    let text = assert_error(&r, 422).to_string();
    assert!(text.contains("lifecycle.retention_hours"), "{text}");
    let workspace = |id: &str| s.path().join("workspaces").join(id);
    let run = |env: &str, script: &str| {
        let r = create_run_json(
            &s,
            &json!({"workflow": workflow(script), "environment": env}),
        );
        let id = r["id"].as_str().unwrap().to_string();
        start_run(&s, &id);
        id
    };
    // stop_on_terminal: removed as soon as the run ends, succeeded or failed.
    let ok = run("ephemeral", "echo made > made.txt");
    let failed = run("ephemeral", "exit 3");
    let brief = run("brief", "echo made > made.txt");
    let kept = run("kept", "echo made > made.txt");
    assert_eq!(wait_kind(&s, &ok, &["succeeded", "failed"]), "succeeded");
    assert_eq!(wait_kind(&s, &failed, &["succeeded", "failed"]), "failed");
    assert_eq!(cleanup_reason(&s, &ok, 10), "stop_on_terminal");
    assert_eq!(cleanup_reason(&s, &failed, 10), "stop_on_terminal");
    assert!(!workspace(&ok).exists());
    let view = s.get(&format!("/api/v1/runs/{ok}")).json();
    assert!(view["sandbox"]["removed"].is_object(), "{view}");
    // retention_hours 0: the next sweep (every 5 s) removes it.
    assert_eq!(wait_kind(&s, &brief, &["succeeded", "failed"]), "succeeded");
    assert_eq!(cleanup_reason(&s, &brief, 20), "retention");
    assert!(!workspace(&brief).exists());
    // No lifecycle: kept for [run.sandbox] retention_hours (a day by default), files there.
    assert_eq!(wait_kind(&s, &kept, &["succeeded", "failed"]), "succeeded");
    assert!(workspace(&kept).join("made.txt").exists());
    assert!(run_events(&s, &kept)
        .iter()
        .all(|e| e["event"] != "sandbox.cleanup.completed"));
}

/// What the web UI's chooser and run page read: the list names the environment a run
/// naming none gets (`meta.run_default`, from `[run] environment`, else null), and a run's
/// `sandbox.plan.environment` names the environment its plan was frozen from.
#[test]
fn the_list_names_the_run_default_and_the_run_names_its_environment() {
    let plain = Server::start();
    let list = plain.get("/api/v1/environments").json();
    assert_eq!(list["meta"]["run_default"], Value::Null, "{list}");
    let r = plain.post(
        "/api/v1/environments",
        &json!({"id": "small", "provider": "local", "resources": {"cpu": 1}}).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let run = create_run_json(
        &plain,
        &json!({"workflow": workflow("true"), "environment": "small"}),
    );
    assert_eq!(run["sandbox"]["plan"]["environment"], "small", "{run}");
    assert_eq!(run["sandbox"]["plan"]["provider"], "local", "{run}");
    let run = create_run_json(
        &plain,
        &json!({"workflow": workflow("true"), "sandbox": {"provider": "local"}}),
    );
    assert_eq!(run["sandbox"]["plan"]["environment"], Value::Null, "{run}");

    let configured = Server::with(Opts {
        settings: Some("[run]\nenvironment = \"default\"\n"),
        ..Opts::default()
    });
    let list = configured.get("/api/v1/environments").json();
    assert_eq!(list["meta"]["run_default"], "default", "{list}");
    assert_eq!(list["meta"]["total"], 1, "{list}");
    let run = create_run_json(&configured, &json!({"workflow": workflow("true")}));
    assert_eq!(run["sandbox"]["plan"]["environment"], "default", "{run}");
    let fetched = configured
        .get(&format!("/api/v1/runs/{}", run["id"].as_str().unwrap()))
        .json();
    assert_eq!(
        fetched["sandbox"]["plan"]["environment"], "default",
        "{fetched}"
    );
}
