//! Run workspaces through the real binary: a bare origin cloned by `file://` on a run
//! branch, per-stage checkpoints, `/files` and `Run.diff` checked against
//! `git diff --numstat`, the origin untouched, source directories copied or used in place,
//! sandbox lifecycle folded into `Run.sandbox`, `/sandboxes`, deletion removing the
//! workspace, resume restoring the workspace, and the bubblewrap container's isolation for
//! command stages, an agent stage's shell tool (scripted Anthropic server) and an ACP agent
//! (a Python script), each checked against a local run that can escape. Every test needs git,
//! the container ones bubblewrap too: where the build did not find them they are reported as
//! ignored with the install command, under `SVC_REQUIRE_*=1` they must run
//! (`svc::internal::test_tools`).

use crate::support;
use crate::support::llm::{text, tool_results, tools, ScriptedServer};
use crate::support::server::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use svc::internal::test_tools::{require, Tool};

fn sh(dir: &Path, script: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A bare origin (`origin.git`) with `main` (a.txt, b.txt, logo.bin) and `dev`.
fn origin(root: &Path) -> PathBuf {
    sh(
        root,
        "git init -q -b main src && cd src && printf 'one\\ntwo\\nthree\\n' > a.txt && echo b > b.txt \
         && printf '\\000\\001\\002' > logo.bin && git add . && git commit -qm one \
         && git checkout -qb dev && echo dev > d.txt && git add . && git commit -qm dev \
         && git checkout -q main && cd .. && git clone -q --bare src origin.git",
    );
    root.join("origin.git")
}

fn command_flow(stages: &[(&str, &str)]) -> String {
    let mut dot = String::from("digraph w { start [shape=Mdiamond]; exit [shape=Msquare];\n");
    let mut prev = "start".to_string();
    for (id, script) in stages {
        dot.push_str(&format!(
            "  {id} [shape=parallelogram, script={}];\n  {prev} -> {id};\n",
            serde_json::to_string(script).unwrap()
        ));
        prev = id.to_string();
    }
    dot.push_str(&format!("  {prev} -> exit\n}}"));
    dot
}

fn numstat(dir: &Path, range: &str) -> (u64, u64, u64) {
    let out = sh(dir, &format!("git diff --numstat {range}"));
    let mut t = (0, 0, 0);
    for l in out.lines() {
        let mut it = l.split('\t');
        t.0 += 1;
        t.1 += it.next().unwrap().parse::<u64>().unwrap_or(0);
        t.2 += it.next().unwrap().parse::<u64>().unwrap_or(0);
    }
    t
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_repository_run_works_on_a_clone_and_shows_its_changes() {
    require(Tool::Git);
    let tmp = tempfile::tempdir().unwrap();
    let origin = origin(tmp.path());
    let refs_before = sh(&origin, "git show-ref");
    let s = Server::start();
    let flow = command_flow(&[
        (
            "edit",
            "printf 'one\\n2\\nthree\\nfour\\n' > a.txt && echo new > new.txt && rm b.txt",
        ),
        ("look", "cat a.txt > /dev/null"),
        (
            "bin",
            "printf '\\000\\377' > logo.bin && mkdir -p docs && echo doc > docs/r.md",
        ),
    ]);
    let url = format!("file://{}", origin.display());
    let run = create_run_json(
        &s,
        &json!({"workflow": package(&flow), "repository": {"origin_url": url, "branch": "dev"}}),
    );
    let id = run["id"].as_str().unwrap().to_string();
    assert_eq!(
        run["repository"],
        json!({"name": "origin", "origin_url": url, "provider": "git"})
    );
    assert_eq!(run["sandbox"]["kind"], "planned");
    assert_eq!(run["diff"], Value::Null);
    start_run(&s, &id);
    let done = wait_run_end(&s, &id);
    assert_eq!(done["lifecycle"]["status"]["kind"], "succeeded", "{done}");

    // Run.sandbox: ready, with what really happened.
    let sb = &done["sandbox"];
    assert_eq!(sb["kind"], "ready");
    assert_eq!(sb["failure"], Value::Null);
    let rt = &sb["instance"]["runtime"];
    assert_eq!(sb["instance"]["provider"], "local");
    assert_eq!(rt["repo_cloned"], true);
    assert_eq!(rt["clone_origin_url"], url.as_str());
    assert_eq!(rt["clone_branch"], "dev");
    let wd = PathBuf::from(rt["working_directory"].as_str().unwrap());
    assert!(wd.starts_with(s.path().canonicalize().unwrap()), "{wd:?}");
    assert_eq!(
        sh(&wd, "git rev-parse --abbrev-ref HEAD").trim(),
        format!("svc/run/{}", id.to_lowercase())
    );

    // Lifecycle events, in order, before the run started.
    let evs = run_events(&s, &id);
    let kinds: Vec<&str> = evs.iter().filter_map(|e| e["event"].as_str()).collect();
    let pos = |k: &str| kinds.iter().position(|x| *x == k).unwrap_or(usize::MAX);
    assert!(pos("sandbox.initializing") < pos("sandbox.initialized"));
    assert!(pos("sandbox.initialized") < pos("run.started"));
    let init = &evs[pos("sandbox.initialized")]["properties"];
    assert_eq!(init["provider"], "local");
    assert_eq!(init["working_directory"], wd.display().to_string().as_str());

    // One checkpoint per stage that changed files, with its commit id, none for `look`.
    let cps: Vec<&Value> = evs
        .iter()
        .filter(|e| e["event"] == "workspace.checkpoint")
        .collect();
    let stages: Vec<&str> = cps.iter().filter_map(|e| e["node_id"].as_str()).collect();
    assert_eq!(stages, vec!["edit", "bin"]);
    let base = rt["base_commit"].as_str().unwrap().to_string();
    let last = cps[1]["properties"]["checkpoint_id"].as_str().unwrap();
    assert_eq!(sh(&wd, "git rev-parse HEAD").trim(), last);
    assert_eq!(
        sh(&wd, "git log -1 --format=%an:%s").trim(),
        "svc:svc: checkpoint after stage bin"
    );

    // Run.diff and /files against git's own figures.
    let (files, adds, dels) = numstat(&wd, &format!("{base} HEAD"));
    assert_eq!(
        done["diff"],
        json!({"files_changed": files, "additions": adds, "deletions": dels})
    );
    let all = s.get(&format!("/api/v1/runs/{id}/files"));
    assert_eq!(all.status, 200, "{}", all.text());
    let all = all.json();
    let names: Vec<&str> = all["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["new_file"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["a.txt", "b.txt", "docs/r.md", "logo.bin", "new.txt"]
    );
    assert_eq!(names.len() as u64, files);
    let by = |n: &str| {
        all["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["new_file"]["name"] == n)
            .cloned()
            .unwrap()
    };
    assert_eq!(by("a.txt")["old_file"]["contents"], "one\ntwo\nthree\n");
    assert_eq!(by("a.txt")["new_file"]["contents"], "one\n2\nthree\nfour\n");
    assert_eq!(by("new.txt")["old_file"]["contents"], "");
    assert_eq!(by("b.txt")["new_file"]["contents"], "");
    assert_eq!(by("b.txt")["old_file"]["contents"], "b\n");
    assert_eq!(by("logo.bin")["new_file"]["contents"], "");
    assert_eq!(all["meta"]["has_more"], false);

    // Paging, the unprefixed alias and one checkpoint.
    let p = s
        .get(&format!("/runs/{id}/files?page[limit]=2&page[offset]=2"))
        .json();
    assert_eq!(p["data"].as_array().unwrap().len(), 2);
    assert_eq!(p["data"][0]["new_file"]["name"], "docs/r.md");
    assert_eq!(p["meta"]["has_more"], true);
    let first = cps[0]["properties"]["checkpoint_id"].as_str().unwrap();
    let one = s
        .get(&format!("/api/v1/runs/{id}/files?checkpoint={first}"))
        .json();
    let one_names: Vec<&str> = one["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["old_file"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(one_names, vec!["a.txt", "b.txt", "new.txt"]);
    assert_error(
        &s.get(&format!("/api/v1/runs/{id}/files?checkpoint={base}")),
        404,
    );
    assert_error(
        &s.get(&format!("/api/v1/runs/{id}/files?page[limit]=x")),
        400,
    );

    // The origin never saw the run.
    assert_eq!(sh(&origin, "git show-ref"), refs_before);

    // Board and /sandboxes.
    let board = s.get("/api/v1/runs").json();
    let item = board["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id.as_str())
        .cloned()
        .unwrap();
    assert_eq!(item["repository"]["name"], "origin");
    let sbx_id = rt["id"].as_str().unwrap().to_string();
    assert_eq!(item["sandbox"]["id"], sbx_id.as_str());
    let list = s.get("/api/v1/sandboxes").json();
    let listed: Vec<&Value> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["run_id"] == id.as_str())
        .collect();
    assert_eq!(listed.len(), 1, "{list}");
    assert_eq!(listed[0]["provider"], "local");
    assert_eq!(listed[0]["state"], "idle");
    let one = s.get(&format!("/api/v1/sandboxes/{sbx_id}"));
    assert_eq!(one.status, 200);
    assert_eq!(
        one.json()["working_directory"],
        wd.display().to_string().as_str()
    );
    assert_error(&s.get("/api/v1/sandboxes/sbx-nope"), 404);

    // Deleting the run removes its sandbox and workspace.
    assert_eq!(
        s.call("DELETE", &format!("/api/v1/runs/{id}"), None).status,
        204
    );
    wait_for(20, "the workspace to be removed", || {
        (!wd.exists()).then_some(())
    });
    assert_error(&s.get(&format!("/api/v1/sandboxes/{sbx_id}")), 404);
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn source_directories_are_copied_or_used_in_place() {
    require(Tool::Git);
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("plain");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("keep.txt"), "mine\n").unwrap();
    let s = Server::start();
    let flow = command_flow(&[("edit", "echo changed > keep.txt")]);
    let copied = create_run_json(
        &s,
        &json!({"workflow": package(&flow), "source_directory": src.display().to_string()}),
    );
    let id = copied["id"].as_str().unwrap();
    assert_eq!(
        copied["source_directory"],
        src.display().to_string().as_str()
    );
    assert_eq!(copied["repository"]["name"], "plain");
    assert_eq!(copied["repository"]["provider"], "unknown");
    start_run(&s, id);
    let done = wait_run_end(&s, id);
    assert_eq!(done["lifecycle"]["status"]["kind"], "succeeded", "{done}");
    assert_eq!(done["sandbox"]["instance"]["runtime"]["repo_cloned"], false);
    assert_eq!(
        std::fs::read_to_string(src.join("keep.txt")).unwrap(),
        "mine\n"
    );
    assert!(!src.join(".git").exists());
    assert_eq!(done["diff"]["files_changed"], 1);

    let inplace = create_run_json(
        &s,
        &json!({"workflow": package(&flow), "source_directory": src.display().to_string(), "in_place": true}),
    );
    let id2 = inplace["id"].as_str().unwrap();
    start_run(&s, id2);
    let done = wait_run_end(&s, id2);
    assert_eq!(done["lifecycle"]["status"]["kind"], "succeeded", "{done}");
    assert_eq!(
        std::fs::read_to_string(src.join("keep.txt")).unwrap(),
        "changed\n"
    );
    assert!(
        !src.join(".git").exists(),
        "svc's history lives outside the directory"
    );
    let files = s.get(&format!("/api/v1/runs/{id2}/files")).json();
    assert_eq!(files["data"][0]["old_file"]["contents"], "mine\n");
    // Deleting an in-place run never removes the user's directory.
    assert_eq!(
        s.call("DELETE", &format!("/api/v1/runs/{id2}"), None)
            .status,
        204
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(src.join("keep.txt").exists());

    // Bad requests.
    for body in [
        json!({"workflow": package(&flow), "source_directory": "relative/dir"}),
        json!({"workflow": package(&flow), "source_directory": "/nonexistent/svc-dir"}),
        json!({"workflow": package(&flow), "in_place": true}),
        json!({"workflow": package(&flow), "repository": {"origin_url": ""}}),
        json!({"workflow": package(&flow), "repository": {"origin_url": "x"}, "source_directory": src.display().to_string()}),
    ] {
        assert_error(&s.post("/api/v1/runs", &body.to_string()), 400);
    }
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_sandbox_that_cannot_start_fails_the_run_clearly() {
    require(Tool::Git);
    let s = Server::start();
    let flow = command_flow(&[("edit", "true")]);
    for (body, needle) in [
        (
            json!({"workflow": package(&flow), "sandbox": {"provider": "hosted"}}),
            "not configured",
        ),
        (
            json!({"workflow": package(&flow), "sandbox": {"provider": "local", "image": "debian:12"}}),
            "image",
        ),
        (
            json!({"workflow": package(&flow), "repository": {"origin_url": "file:///nonexistent/svc.git"}}),
            "cannot clone",
        ),
    ] {
        let id = create_run(&s, &body);
        start_run(&s, &id);
        let done = wait_run_end(&s, &id);
        assert_eq!(
            done["lifecycle"]["status"],
            json!({"kind": "failed", "reason": "sandbox_init_failed"})
        );
        let f = &done["sandbox"]["failure"];
        assert_eq!(done["sandbox"]["kind"], "failed");
        assert!(f["error"].as_str().unwrap().contains(needle), "{f}");
        assert!(!f["causes"].as_array().unwrap().is_empty(), "{f}");
        assert!(f["duration_ms"].is_u64());
        assert!(done["lifecycle"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains(needle));
        assert!(!s.path().join("workspaces").join(&id).exists());
    }
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn resume_restores_the_workspace_to_its_checkpoint() {
    require(Tool::Git);
    let flag_dir = tempfile::tempdir().unwrap();
    let flag = flag_dir.path().join("go");
    let s = Server::start();
    // `half` leaves a file behind, then waits; rerun after a resume, it must not find it.
    let flow = command_flow(&[
        ("first", "echo kept > kept.txt"),
        (
            "half",
            &format!(
                "if [ -e half.txt ]; then echo dirty; exit 3; fi; echo x > half.txt; \
                 while [ ! -e {} ]; do sleep 0.05; done",
                flag.display()
            ),
        ),
    ]);
    let id = create_run(&s, &json!({"workflow": package(&flow)}));
    start_run(&s, &id);
    let wd = wait_for(30, "half.txt", || {
        let r = run_json(&s, &id);
        let wd = PathBuf::from(r["sandbox"]["instance"]["runtime"]["working_directory"].as_str()?);
        wd.join("half.txt").exists().then_some(wd)
    });
    let dir = s.kill();
    std::fs::write(&flag, "").unwrap();
    // The restarted server resumes the interrupted run by itself (crash recovery).
    let s = Server::with(Opts {
        dir: Some(dir),
        ..Opts::default()
    });
    let done = wait_run_end(&s, &id);
    assert_eq!(done["lifecycle"]["status"]["kind"], "succeeded", "{done}");
    assert!(
        wd.join("kept.txt").exists(),
        "the checkpointed work is kept"
    );
    assert_eq!(done["diff"]["files_changed"], 2);
}

#[test]
#[cfg_attr(
    not(all(has_git, has_bwrap)),
    ignore = "needs git and bubblewrap able to create namespaces: apt-get install git; apt-get install bubblewrap"
)]
fn a_container_stage_is_confined_to_its_workspace() {
    require(Tool::Git);
    require(Tool::Bwrap);
    // Outside the workspace and outside /tmp (which the container replaces).
    let outside = outside_tmp();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let host_tmp = std::env::temp_dir().join(format!("svc-host-tmp-{}", std::process::id()));
    std::fs::write(&host_tmp, "host").unwrap();
    let script = format!(
        "touch {out}/escaped 2>/dev/null && echo WROTE-OUTSIDE; \
         python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=2)' 2>/dev/null && echo REACHED-NETWORK; \
         echo inside > inside.txt; echo pid=$$; test -e {host_tmp} && echo SAW-HOST-TMP; true",
        out = outside.path().display(),
        host_tmp = host_tmp.display()
    );
    let s = Server::start();
    let flow = command_flow(&[("probe", &script)]);
    let id = create_run(
        &s,
        &json!({"workflow": package(&flow), "sandbox": {"provider": "container"}}),
    );
    start_run(&s, &id);
    let done = wait_run_end(&s, &id);
    assert_eq!(done["lifecycle"]["status"]["kind"], "succeeded", "{done}");
    assert_eq!(done["sandbox"]["instance"]["provider"], "container");
    let out = run_events(&s, &id)
        .into_iter()
        .find(|e| e["event"] == "command.completed")
        .map(|e| e["properties"]["stdout"].as_str().unwrap_or("").to_string())
        .unwrap();
    assert!(!out.contains("WROTE-OUTSIDE"), "{out}");
    assert!(!out.contains("REACHED-NETWORK"), "{out}");
    // The run's own pid namespace (its holder is pid 1 and 2, the sandbox's probe 3): the
    // stage's pid counts from there.
    let pid: u32 = out
        .split("pid=")
        .nth(1)
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .expect("the stage's pid");
    assert!(pid <= 10, "own pid namespace: {out}");
    assert!(!out.contains("SAW-HOST-TMP"), "a private /tmp: {out}");
    let _ = std::fs::remove_file(&host_tmp);
    assert!(!outside.path().join("escaped").exists());
    assert!(
        listener.accept().is_err(),
        "nothing connected from the container"
    );
    let files = s.get(&format!("/api/v1/runs/{id}/files")).json();
    assert_eq!(files["data"][0]["new_file"]["name"], "inside.txt");
}

/// What an agent stage's shell tool printed, in a run of `provider` against a scripted
/// Anthropic server: the tool result the agent sent back to the model.
fn agent_shell_output(provider: &str, script: &str) -> String {
    let llm = ScriptedServer::turns(
        svc::internal::llm::Provider::Anthropic,
        vec![
            tools(&[("t1", "shell", json!({"command": script}))]),
            text("done"),
        ],
        support::llm::SMALL_USAGE,
    );
    let s = served_anthropic(&llm.base, "");
    let flow = r#"digraph a {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [shape=box, prompt="Probe the sandbox"]
  start -> work -> exit
}"#;
    let id = create_run(
        &s,
        &json!({"workflow": package(flow), "sandbox": {"provider": provider}}),
    );
    start_run(&s, &id);
    let done = wait_run_end(&s, &id);
    assert_eq!(done["lifecycle"]["status"]["kind"], "succeeded", "{done}");
    assert_eq!(done["sandbox"]["instance"]["provider"], provider);
    let requests = llm.requests();
    assert_eq!(requests.len(), 2, "the tool call and the final answer");
    let results = tool_results(svc::internal::llm::Provider::Anthropic, &requests[1].body);
    assert_eq!(results.len(), 1, "{results:?}");
    let files = s.get(&format!("/api/v1/runs/{id}/files")).json();
    assert_eq!(files["data"][0]["new_file"]["name"], "agent.txt", "{files}");
    results[0].1.clone()
}

#[test]
#[cfg_attr(
    not(all(has_git, has_bwrap)),
    ignore = "needs git and bubblewrap able to create namespaces: apt-get install git; apt-get install bubblewrap"
)]
fn an_agent_stages_shell_tool_runs_inside_the_container() {
    require(Tool::Git);
    require(Tool::Bwrap);
    // Outside the workspace and outside /tmp (which the container replaces).
    let outside = outside_tmp();
    let host_tmp = std::env::temp_dir().join(format!("svc-agent-host-tmp-{}", std::process::id()));
    std::fs::write(&host_tmp, "host").unwrap();
    let script = |name: &str| {
        format!(
            "touch {out}/{name} 2>/dev/null && echo WROTE-OUTSIDE; \
             test -e {host_tmp} && echo SAW-HOST-TMP; echo agent > agent.txt; echo pid=$$",
            out = outside.path().display(),
            host_tmp = host_tmp.display()
        )
    };
    let contained = agent_shell_output("container", &script("from-container"));
    assert!(!contained.contains("WROTE-OUTSIDE"), "{contained}");
    assert!(
        !contained.contains("SAW-HOST-TMP"),
        "a private /tmp: {contained}"
    );
    assert!(!outside.path().join("from-container").exists());
    // The same tool call in a local run reaches both: the probe can tell them apart.
    let local = agent_shell_output("local", &script("from-local"));
    let _ = std::fs::remove_file(&host_tmp);
    assert!(local.contains("WROTE-OUTSIDE"), "{local}");
    assert!(local.contains("SAW-HOST-TMP"), "{local}");
    assert!(outside.path().join("from-local").exists());
}

/// A minimal ACP agent (JSON-RPC over stdio): on its prompt it tries to write `argv[1]`
/// (outside the workspace) and to see `argv[2]` (a file in the host's /tmp), and writes
/// what happened to `probe.txt` in its working directory.
const PROBE_AGENT: &str = r#"
import sys, json, os
def send(m):
    sys.stdout.write(json.dumps(m) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line)
    meth = m.get("method")
    if meth == "initialize":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}})
    elif meth == "session/new":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"sessionId": "s1"}})
    elif meth == "session/prompt":
        seen = []
        try:
            with open(sys.argv[1], "w") as f:
                f.write("escaped")
            seen.append("WROTE-OUTSIDE")
        except OSError:
            pass
        if os.path.exists(sys.argv[2]):
            seen.append("SAW-HOST-TMP")
        seen.append("HOME=" + os.environ.get("HOME", ""))
        with open("probe.txt", "w") as f:
            f.write(" ".join(seen) + "\n")
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"stopReason": "end_turn"}})
"#;

/// What the probe agent found in a run of `provider`.
fn acp_probe(provider: &str, script: &Path, escape: &Path, host_tmp: &Path) -> String {
    // The script reaches the container the only way host files do: copied into the
    // workspace (a `source_directory`); the container sees nothing else of the host.
    let cmd = format!(
        "python3 {} {} {}",
        script.file_name().unwrap().to_string_lossy(),
        escape.display(),
        host_tmp.display()
    );
    let flow = format!(
        r#"digraph acp {{
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [shape=box, backend=acp, acp.command={}, prompt="Probe"]
  start -> work -> exit
}}"#,
        serde_json::to_string(&cmd).unwrap()
    );
    let s = Server::start();
    let id = create_run(
        &s,
        &json!({"workflow": package(&flow), "sandbox": {"provider": provider},
                "source_directory": script.parent().unwrap().display().to_string()}),
    );
    start_run(&s, &id);
    let done = wait_run_end(&s, &id);
    assert_eq!(done["lifecycle"]["status"]["kind"], "succeeded", "{done}");
    assert_eq!(done["sandbox"]["instance"]["provider"], provider);
    std::fs::read_to_string(s.path().join("workspaces").join(&id).join("probe.txt"))
        .expect("probe.txt in the workspace")
}

#[test]
#[cfg_attr(
    not(all(has_git, has_bwrap)),
    ignore = "needs git and bubblewrap able to create namespaces: apt-get install git; apt-get install bubblewrap"
)]
fn an_acp_agent_runs_inside_the_container() {
    require(Tool::Git);
    require(Tool::Bwrap);
    // The ACP agent is a Python script: python3 is assumed like in every ACP test.
    // The script and the escape target outside /tmp, which the container replaces.
    let outside = outside_tmp();
    let script = outside.path().join("probe_agent.py");
    std::fs::write(&script, PROBE_AGENT).unwrap();
    let host_tmp = std::env::temp_dir().join(format!("svc-acp-host-tmp-{}", std::process::id()));
    std::fs::write(&host_tmp, "host").unwrap();
    let contained = acp_probe(
        "container",
        &script,
        &outside.path().join("from-container"),
        &host_tmp,
    );
    assert!(!contained.contains("WROTE-OUTSIDE"), "{contained}");
    assert!(
        !contained.contains("SAW-HOST-TMP"),
        "a private /tmp: {contained}"
    );
    assert!(!outside.path().join("from-container").exists());
    // Its home is the container's private /tmp (the host's is not in the container).
    assert!(contained.contains("HOME=/tmp"), "{contained}");
    // The same agent in a local run reaches both.
    let local = acp_probe(
        "local",
        &script,
        &outside.path().join("from-local"),
        &host_tmp,
    );
    let _ = std::fs::remove_file(&host_tmp);
    assert!(local.contains("WROTE-OUTSIDE"), "{local}");
    assert!(local.contains("SAW-HOST-TMP"), "{local}");
}

#[test]
#[cfg_attr(
    not(all(has_git, has_bwrap)),
    ignore = "needs git and bubblewrap able to create namespaces: apt-get install git; apt-get install bubblewrap"
)]
fn killing_the_server_leaves_no_container_process_alive() {
    require(Tool::Git);
    require(Tool::Bwrap);
    let s = Server::start();
    let marker = format!("svc-marker-{}", std::process::id());
    let flow = command_flow(&[(
        "hang",
        &format!("sh -c 'while :; do echo {marker} >> log.txt; sleep 0.05; done' & sleep 1000 # {marker}"),
    )]);
    let id = create_run(
        &s,
        &json!({"workflow": package(&flow), "sandbox": {"provider": "container"}}),
    );
    start_run(&s, &id);
    // Wait for the loop itself, not just bwrap: bwrap's outer and inner processes carry the
    // marker from the fork on, and an inner one killed before it has armed --die-with-parent
    // is a bwrap race the startup sweep (not this test) covers.
    wait_for(30, "the stage's processes", || {
        processes_with(&marker)
            .iter()
            .any(|p| p.contains(": sh -c while"))
            .then_some(())
    });
    let _dir = s.kill();
    wait_for(10, "every stage process to die", || {
        processes_with(&marker).is_empty().then_some(())
    });
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn svc_run_with_repo_works_on_a_clone() {
    require(Tool::Git);
    let tmp = tempfile::tempdir().unwrap();
    let origin = origin(tmp.path());
    let refs_before = sh(&origin, "git show-ref");
    let flow = tmp.path().join("flow.dot");
    std::fs::write(&flow, command_flow(&[("edit", "echo more >> d.txt")])).unwrap();
    let state = tmp.path().join("state");
    let out = Command::new(bin())
        .arg("run")
        .arg(&flow)
        .args(["--format", "json", "--state-dir"])
        .arg(&state)
        .arg("--repo")
        .arg(&origin)
        .args(["--branch", "dev"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = report["run_id"].as_str().unwrap();
    let ws = state.join("workspaces").join(id);
    assert_eq!(
        std::fs::read_to_string(ws.join("d.txt")).unwrap(),
        "dev\nmore\n"
    );
    assert_eq!(
        sh(&ws, "git log -1 --format=%s").trim(),
        "svc: checkpoint after stage edit"
    );
    assert_eq!(sh(&origin, "git show-ref"), refs_before);
    // The report says where the work went: the workspace, the run branch, what changed and
    // how to look at it; the command it gives works.
    let work = &report["workspace"];
    assert_eq!(work["path"], ws.display().to_string(), "{report}");
    assert_eq!(
        work["branch"],
        format!("svc/run/{}", id.to_ascii_lowercase())
    );
    assert_eq!(work["commits"], 1);
    assert_eq!(
        work["diff"],
        json!({"files_changed": 1, "additions": 1, "deletions": 0})
    );
    assert_eq!(work["files"][0]["path"], "d.txt");
    let look = work["look"].as_str().unwrap();
    let shown = sh(tmp.path(), look);
    assert!(
        shown.contains("svc: checkpoint after stage edit") && shown.contains("d.txt"),
        "{look}: {shown}"
    );
    // In text mode the same, as the last lines on stderr.
    let out = Command::new(bin())
        .arg("run")
        .arg(&flow)
        .arg("--state-dir")
        .arg(&state)
        .arg("--repo")
        .arg(&origin)
        .args(["--branch", "dev"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    let tail: Vec<&str> = text.lines().rev().take(5).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    assert!(
        tail[0].starts_with("workspace: ") && tail[0].contains("/workspaces/"),
        "{text}"
    );
    assert!(
        tail[1].starts_with("branch:    svc/run/") && tail[1].contains("1 commit on top of"),
        "{text}"
    );
    assert_eq!(tail[2], "changes:   1 file changed, +1 -0", "{text}");
    assert_eq!(tail[3], "  d.txt +1 -0", "{text}");
    assert!(tail[4].starts_with("look at it: git -C "), "{text}");
    // A branch the origin lacks: the run fails saying so.
    let out = Command::new(bin())
        .arg("run")
        .arg(&flow)
        .arg("--state-dir")
        .arg(&state)
        .arg("--repo")
        .arg(&origin)
        .args(["--branch", "nope"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot clone"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn retention_removes_a_finished_runs_sandbox() {
    require(Tool::Git);
    let s = Server::with(Opts {
        settings: Some("[run.sandbox]\nretention_hours = 0\n"),
        ..Opts::default()
    });
    let flow = command_flow(&[("edit", "echo x > x.txt")]);
    let id = create_run(&s, &json!({"workflow": package(&flow)}));
    start_run(&s, &id);
    let done = wait_run_end(&s, &id);
    let wd = PathBuf::from(
        done["sandbox"]["instance"]["runtime"]["working_directory"]
            .as_str()
            .unwrap(),
    );
    wait_for(30, "retention to remove the workspace", || {
        (!wd.exists()).then_some(())
    });
    wait_for(10, "sandbox.cleanup.completed", || {
        run_events(&s, &id)
            .iter()
            .any(|e| e["event"] == "sandbox.cleanup.completed")
            .then_some(())
    });
    assert_error(&s.get(&format!("/api/v1/runs/{id}/files")), 404);
    // The run says so: no longer `ready`, no instance, and why.
    let run = run_json(&s, &id);
    assert_eq!(run["sandbox"]["kind"], "planned", "{run}");
    assert_eq!(run["sandbox"]["instance"], Value::Null);
    assert_eq!(run["sandbox"]["removed"]["reason"], "retention");
    // A preview of a removed sandbox is gone, not handed out.
    let p = s.post(
        &format!("/api/v1/runs/{id}/preview"),
        &json!({"port": 8000, "expires_in_secs": 60, "signed": true}).to_string(),
    );
    assert_eq!(
        assert_error(&p, 410)["errors"][0]["code"],
        "sandbox_removed"
    );
    let list = s.get("/api/v1/sandboxes").json();
    assert!(list["data"].as_array().unwrap().is_empty(), "{list}");
    assert!(!s.path().join("workspaces").join(&id).exists());
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_provider_that_cannot_answer_is_reported_while_others_list() {
    require(Tool::Git);
    let s = Server::with(Opts {
        settings: Some("[run.sandbox]\nbwrap = \"/nonexistent/bwrap\"\n"),
        ..Opts::default()
    });
    let flow = command_flow(&[("edit", "true")]);
    let id = create_run(&s, &json!({"workflow": package(&flow)}));
    start_run(&s, &id);
    wait_run_end(&s, &id);
    let list = s.get("/api/v1/sandboxes").json();
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["data"][0]["run_id"], id.as_str());
    assert_eq!(list["meta"]["failures"][0]["provider"], "container");
    assert!(list["meta"]["failures"][0]["error"]
        .as_str()
        .unwrap()
        .contains("bubblewrap"));
}

/// A free loopback port (bound and released; a race with another process is unlikely).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A Python HTTP server (serves files; echoes POST bodies with status 201 and `X-Seen`),
/// written into `dir`; run it as `python3 <path> <port>`.
fn serve_script(dir: &Path) -> PathBuf {
    let script = dir.join("serve.py");
    std::fs::write(
        &script,
        r#"import http.server, sys
class H(http.server.SimpleHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(n)
        self.send_response(201)
        self.send_header('X-Seen', self.headers.get('X-Custom', ''))
        self.end_headers()
        self.wfile.write(b'got:' + body)
http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
"#,
    )
    .unwrap();
    script
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn previews_proxy_to_a_server_started_by_a_stage() {
    require(Tool::Git);
    let s = Server::start();
    let port = free_port();
    // A stage serves the workspace over HTTP (echoing POST bodies) until the run is cancelled.
    let py = tempfile::tempdir().unwrap();
    let script = serve_script(py.path());
    let server = format!(
        "echo hello-preview > index.html; exec python3 {} {port}",
        script.display()
    );
    let flow = command_flow(&[("serve", &server)]);
    let id = create_run(&s, &json!({"workflow": package(&flow)}));
    // Not ready yet: 409; unknown run: 404; bad bounds: 400.
    let body = |p: i64, e: i64, signed: bool| {
        json!({"port": p, "expires_in_secs": e, "signed": signed}).to_string()
    };
    assert_error(
        &s.post(
            &format!("/api/v1/runs/{id}/preview"),
            &body(port as i64, 60, true),
        ),
        409,
    );
    assert_error(
        &s.post(
            "/api/v1/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/preview",
            &body(80, 60, true),
        ),
        404,
    );
    for (p, e) in [(0, 60), (70000, 60), (80, 0), (80, 86_401)] {
        assert_error(
            &s.post(&format!("/api/v1/runs/{id}/preview"), &body(p, e, true)),
            400,
        );
    }
    start_run(&s, &id);
    wait_for(30, "the sandbox to be ready", || {
        (run_json(&s, &id)["sandbox"]["kind"] == "ready").then_some(())
    });
    let made = s.post(
        &format!("/api/v1/runs/{id}/preview"),
        &body(port as i64, 600, true),
    );
    assert_eq!(made.status, 201, "{}", made.text());
    let made = made.json();
    let url = made["url"].as_str().unwrap();
    let path = &url[url.find("/preview/").unwrap()..];
    assert!(path.contains(made["token"].as_str().unwrap()));
    // A signed URL works without credentials.
    let page = wait_for(30, "the stage's server", || {
        let r = s.raw("GET", &format!("{path}index.html"), &[], None);
        (r.status == 200).then_some(r)
    });
    assert_eq!(page.text(), "hello-preview\n");
    let posted = s.raw(
        "POST",
        &format!("{path}echo?x=1"),
        &[("X-Custom", "yes"), ("Content-Type", "text/plain")],
        Some(b"payload"),
    );
    assert_eq!(posted.status, 201, "{}", posted.text());
    assert_eq!(posted.text(), "got:payload");
    assert_eq!(posted.header("x-seen"), Some("yes"));
    // Forged tokens: 401.
    let forged = path.replacen("/s.", "/s.9", 1);
    assert_error(&s.raw("GET", &forged, &[], None), 401);
    // Unsigned: needs the API credentials as well.
    let unsigned = s
        .post(
            &format!("/api/v1/runs/{id}/preview"),
            &body(port as i64, 600, false),
        )
        .json();
    let upath = {
        let u = unsigned["url"].as_str().unwrap();
        u[u.find("/preview/").unwrap()..].to_string()
    };
    assert_error(&s.raw("GET", &format!("{upath}index.html"), &[], None), 401);
    let auth = s.auth();
    let ok = s.raw(
        "GET",
        &format!("{upath}index.html"),
        &[("Authorization", auth.as_str())],
        None,
    );
    assert_eq!(ok.status, 200);
    // Expired: 401.
    let short = s
        .post(
            &format!("/api/v1/runs/{id}/preview"),
            &body(port as i64, 1, true),
        )
        .json();
    let spath = {
        let u = short["url"].as_str().unwrap();
        u[u.find("/preview/").unwrap()..].to_string()
    };
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_error(&s.raw("GET", &spath, &[], None), 401);
    s.post(&format!("/api/v1/runs/{id}/cancel"), "");
    wait_run_end(&s, &id);
}

#[test]
#[cfg_attr(
    not(all(has_git, has_bwrap)),
    ignore = "needs git and bubblewrap able to create namespaces: apt-get install git; apt-get install bubblewrap"
)]
fn previews_reach_a_container_without_network() {
    require(Tool::Git);
    require(Tool::Bwrap);
    // The script reaches the container copied into its workspace (`source_directory`):
    // the container sees nothing of the host's files beyond its system directories.
    let py = outside_tmp();
    serve_script(py.path());
    let s = Server::start();
    let port = free_port();
    let flow = command_flow(&[(
        "serve",
        &format!("echo from-the-container > index.html; exec python3 serve.py {port}"),
    )]);
    let id = create_run(
        &s,
        &json!({"workflow": package(&flow), "sandbox": {"provider": "container"},
                "source_directory": py.path().display().to_string()}),
    );
    start_run(&s, &id);
    wait_for(30, "the sandbox to be ready", || {
        (run_json(&s, &id)["sandbox"]["kind"] == "ready").then_some(())
    });
    // The host's loopback does not have it: the server listens in the container's own.
    let made = s
        .post(
            &format!("/api/v1/runs/{id}/preview"),
            &json!({"port": port, "expires_in_secs": 600, "signed": true}).to_string(),
        )
        .json();
    let url = made["url"].as_str().unwrap();
    let path = url[url.find("/preview/").unwrap()..].to_string();
    let page = wait_for(30, "the container's server", || {
        let r = s.raw("GET", &format!("{path}index.html"), &[], None);
        (r.status == 200).then_some(r)
    });
    assert_eq!(page.text(), "from-the-container\n");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the port is not on the host's loopback"
    );
    s.post(&format!("/api/v1/runs/{id}/cancel"), "");
    wait_run_end(&s, &id);
}
