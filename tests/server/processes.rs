//! Nothing a run starts outlives the run (issue 32), with both providers, through the real
//! server: each run's processes live in its pid namespace (its holder, `sandbox::holder`),
//! so a background job started by one stage runs on through the next stages (a dev server
//! is previewable while a later human gate waits) and is gone when the run ends, whatever
//! the ending: completed, failed, cancelled, deleted while running, or the server killed
//! with SIGKILL. Every check reads `/proc` for the processes' command lines (each run's
//! background job carries a marker of its own). Needs git (every run's workspace) and
//! bubblewrap able to make namespaces (the holder); reported as ignored without them,
//! required under `SVC_REQUIRE_*=1` (`svc::internal::test_tools`).

use crate::support::server::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use svc::internal::test_tools::{require, Tool};

/// Stage `bg` leaves a background loop carrying `marker` (as its `$0`), in a session of its
/// own (`setsid`: out of reach of the stage's process group), and writes its pid;
/// stage `hold` checks that loop still runs, then runs `hold` (a script).
fn background_flow(marker: &str, hold: &str) -> String {
    let bg = format!(
        "setsid sh -c 'while :; do sleep 0.05; done' {marker} >/dev/null 2>&1 </dev/null &\necho $! > bg.pid"
    );
    let hold =
        format!("kill -0 \"$(cat bg.pid)\" || {{ echo job-$((1+1))-missing; exit 9; }}\n{hold}");
    format!(
        "digraph p {{ start [shape=Mdiamond]; exit [shape=Msquare];\n\
         bg [shape=parallelogram, script={}];\n\
         hold [shape=parallelogram, script={}];\n\
         start -> bg -> hold -> exit }}",
        serde_json::to_string(&bg).unwrap(),
        serde_json::to_string(&hold).unwrap()
    )
}

/// Whether the run's stage `node` has started.
fn stage_started(s: &Server, id: &str, node: &str) -> bool {
    run_events(s, id)
        .iter()
        .any(|e| e["event"] == "stage.started" && e["node_id"] == node)
}

/// Waits until no process carries `marker`; how long that took after `since`.
fn gone(marker: &str, since: Instant, what: &str) -> Duration {
    wait_for(
        10,
        &format!("the background job to be gone after {what}"),
        || processes_with(marker).is_empty().then_some(()),
    );
    since.elapsed()
}

/// One run per ending, all on one server, then the server killed under the last one.
fn every_ending_ends_the_runs_processes(provider: &str) {
    let s = Server::with(Opts {
        settings: Some("[server.scheduler]\nmax_concurrent_runs = 8\n"),
        ..Opts::default()
    });
    let tag = format!("svc-bg-{provider}-{}", std::process::id());
    let endings = ["completed", "failed", "cancelled", "deleted", "killed"];
    let mut runs = Vec::new();
    for ending in endings {
        let marker = format!("{tag}-{ending}");
        let hold = match ending {
            "completed" => "sleep 0.2",
            "failed" => "sleep 0.2; exit 3",
            _ => "sleep 1000",
        };
        let id = create_run(
            &s,
            &json!({"workflow": package(&background_flow(&marker, hold)),
                    "sandbox": {"provider": provider}}),
        );
        start_run(&s, &id);
        runs.push((ending, marker, id));
    }
    // Every run's background job runs on into its second stage.
    for (ending, marker, id) in &runs {
        wait_for(60, &format!("{ending}: the second stage"), || {
            stage_started(&s, id, "hold").then_some(())
        });
        if matches!(*ending, "cancelled" | "deleted" | "killed") {
            assert!(
                !processes_with(marker).is_empty(),
                "{ending}: the background job of the first stage died before the run ended"
            );
        }
    }
    let mut took = Vec::new();
    for (ending, marker, id) in &runs {
        let since = Instant::now();
        match *ending {
            "completed" | "failed" => {
                let run = wait_run_end(&s, id);
                let want = if *ending == "completed" {
                    "succeeded"
                } else {
                    "failed"
                };
                assert_eq!(run["lifecycle"]["status"]["kind"], want, "{run}");
                if *ending == "failed" {
                    // It failed on its own exit code, not because the job was gone (the
                    // script's text is in the events; its output `job-2-missing` is not).
                    let events = Value::Array(run_events(&s, id)).to_string();
                    assert!(
                        !events.contains("job-2-missing"),
                        "the background job died before the second stage: {events}"
                    );
                }
            }
            "cancelled" => {
                assert_eq!(s.post(&format!("/api/v1/runs/{id}/cancel"), "").status, 200);
            }
            "deleted" => {
                let r = s.call("DELETE", &format!("/api/v1/runs/{id}?force=true"), None);
                assert!(r.status < 300, "{}", r.text());
            }
            _ => continue,
        }
        took.push((*ending, gone(marker, since, ending)));
    }
    let (_, marker, _) = &runs[4];
    let since = Instant::now();
    let _dir = s.kill();
    took.push(("killed", gone(marker, since, "kill -9 of the server")));
    // The target: gone within 1 s (printed, not asserted: machines are noisy).
    for (ending, d) in took {
        eprintln!("{provider}: background job gone {d:?} after the run was {ending}");
    }
}

#[test]
#[cfg_attr(
    not(all(has_git, has_bwrap)),
    ignore = "needs git and bubblewrap able to create namespaces: apt-get install git; apt-get install bubblewrap"
)]
fn local_runs_leave_no_process_behind_whatever_the_ending() {
    require(Tool::Git);
    require(Tool::Bwrap);
    every_ending_ends_the_runs_processes("local");
}

#[test]
#[cfg_attr(
    not(all(has_git, has_bwrap)),
    ignore = "needs git and bubblewrap able to create namespaces: apt-get install git; apt-get install bubblewrap"
)]
fn container_runs_leave_no_process_behind_whatever_the_ending() {
    require(Tool::Git);
    require(Tool::Bwrap);
    every_ending_ends_the_runs_processes("container");
}

/// A stage starts a dev server in the background and ends; a human gate then waits: the
/// server answers a preview while the gate waits, and is gone once the run has ended.
fn a_dev_server_outlives_its_stage_until_the_run_ends(provider: &str) {
    let src = outside_tmp();
    std::fs::write(
        src.path().join("index.html"),
        format!("served-by-{provider}\n"),
    )
    .unwrap();
    let s = Server::start();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let marker = format!("svc-dev-{provider}-{}", std::process::id());
    let serve = format!(
        "nohup python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 </dev/null &\n\
         echo {marker} > started"
    );
    // The marker goes into the server's command line through its directory argument.
    let serve = serve.replace(
        "--bind 127.0.0.1",
        &format!("--bind 127.0.0.1 --directory ./{marker}/.."),
    );
    std::fs::create_dir(src.path().join(&marker)).unwrap();
    let flow = format!(
        "digraph d {{ start [shape=Mdiamond]; exit [shape=Msquare];\n\
         serve [shape=parallelogram, script={}];\n\
         ask [shape=hexagon, label=\"Looks right?\"];\n\
         start -> serve -> ask; ask -> exit [label=\"[Y] Yes\"] }}",
        serde_json::to_string(&serve).unwrap()
    );
    let id = create_run(
        &s,
        &json!({"workflow": package(&flow), "sandbox": {"provider": provider},
                "source_directory": src.path().display().to_string()}),
    );
    start_run(&s, &id);
    let qs = s
        .get(&format!("/api/v1/runs/{id}/questions?wait=30s"))
        .json();
    let qid = qs["data"][0]["id"]
        .as_str()
        .expect("the gate's question")
        .to_string();
    // The first stage has ended; its server still runs, and answers through a preview.
    assert!(
        !processes_with(&marker).is_empty(),
        "the dev server died with its stage"
    );
    let made = s.post(
        &format!("/api/v1/runs/{id}/preview"),
        &json!({"port": port, "expires_in_secs": 600, "signed": true}).to_string(),
    );
    assert_eq!(made.status, 201, "{}", made.text());
    let url = made.json()["url"].as_str().unwrap().to_string();
    let path = url[url.find("/preview/").unwrap()..].to_string();
    let page = wait_for(30, "the dev server through the preview", || {
        let r = s.raw("GET", &format!("{path}index.html"), &[], None);
        (r.status == 200).then_some(r)
    });
    assert_eq!(page.text(), format!("served-by-{provider}\n"));
    let ok = s.post(
        &format!("/api/v1/runs/{id}/questions/{qid}/answer"),
        "{\"selected_option_key\":\"Y\"}",
    );
    assert_eq!(ok.status, 204, "{}", ok.text());
    let since = Instant::now();
    wait_status(&s, &id, "succeeded", 30);
    let d = gone(&marker, since, "the run ended");
    eprintln!("{provider}: dev server gone {d:?} after the answer that ended the run");
}

#[test]
#[cfg_attr(
    not(all(has_git, has_bwrap)),
    ignore = "needs git and bubblewrap able to create namespaces: apt-get install git; apt-get install bubblewrap"
)]
fn a_local_dev_server_is_previewable_in_a_later_stage() {
    require(Tool::Git);
    require(Tool::Bwrap);
    a_dev_server_outlives_its_stage_until_the_run_ends("local");
}

#[test]
#[cfg_attr(
    not(all(has_git, has_bwrap)),
    ignore = "needs git and bubblewrap able to create namespaces: apt-get install git; apt-get install bubblewrap"
)]
fn a_container_dev_server_is_previewable_in_a_later_stage() {
    require(Tool::Git);
    require(Tool::Bwrap);
    a_dev_server_outlives_its_stage_until_the_run_ends("container");
}

/// The open question of run `id` other than `not` (one already answered), once its gate
/// asks one.
fn question(s: &Server, id: &str, not: &str) -> String {
    wait_for(30, &format!("a new question of run {id}"), || {
        let qs = s
            .get(&format!("/api/v1/runs/{id}/questions?wait=5s"))
            .json();
        qs["data"]
            .as_array()?
            .iter()
            .filter_map(|q| q["id"].as_str())
            .find(|q| *q != not)
            .map(str::to_string)
    })
}

fn answer_yes(s: &Server, id: &str, qid: &str) {
    let ok = s.post(
        &format!("/api/v1/runs/{id}/questions/{qid}/answer"),
        "{\"selected_option_key\":\"Y\"}",
    );
    assert_eq!(ok.status, 204, "{}", ok.text());
}

/// A `local` run holds no process until it starts one (waiting on a person costs nothing
/// but its row); its first process may come from a parallel branch, whose thread ends with
/// the branch, and a background job started there still lives on, through the fan-in and a
/// later gate, until the run ends.
#[test]
#[cfg_attr(
    not(all(has_git, has_bwrap)),
    ignore = "needs git and bubblewrap able to create namespaces: apt-get install git; apt-get install bubblewrap"
)]
fn a_local_run_holds_no_process_until_its_first_even_from_a_parallel_branch() {
    require(Tool::Git);
    require(Tool::Bwrap);
    let s = Server::start();
    let marker = format!("svc-lazy-{}", std::process::id());
    let bg = format!(
        "setsid sh -c 'while :; do sleep 0.05; done' {marker} >/dev/null 2>&1 </dev/null &"
    );
    let flow = format!(
        "digraph l {{ start [shape=Mdiamond]; exit [shape=Msquare];\n\
         first [shape=hexagon, label=\"Begin?\"]; again [shape=hexagon, label=\"Done?\"];\n\
         fork [shape=component]; join [shape=tripleoctagon];\n\
         bg [shape=parallelogram, script={}]; other [shape=parallelogram, script=\"true\"];\n\
         start -> first; first -> fork [label=\"[Y] Yes\"];\n\
         fork -> bg; fork -> other; bg -> join; other -> join;\n\
         join -> again; again -> exit [label=\"[Y] Yes\"] }}",
        serde_json::to_string(&bg).unwrap()
    );
    let id = create_run(
        &s,
        &json!({"workflow": package(&flow), "sandbox": {"provider": "local"}}),
    );
    start_run(&s, &id);
    let first = question(&s, &id, "");
    // Every process of a run carries its workspace (named after the run) on its command
    // line: the holder's `--chdir`, each `nsenter`'s `--wdns`.
    assert_eq!(
        processes_with(&id),
        Vec::<String>::new(),
        "a run waiting on a person before any process holds processes"
    );
    answer_yes(&s, &id, &first);
    let again = question(&s, &id, &first);
    assert!(
        !processes_with(&marker).is_empty(),
        "the background job died with its parallel branch: {}",
        Value::Array(run_events(&s, &id))
    );
    assert!(
        !processes_with(&id).is_empty(),
        "the run's holder is not running while its background job does"
    );
    answer_yes(&s, &id, &again);
    let since = Instant::now();
    wait_status(&s, &id, "succeeded", 30);
    gone(&marker, since, "the run ended");
    wait_for(10, "the run's holder to be gone", || {
        processes_with(&id).is_empty().then_some(())
    });
}
