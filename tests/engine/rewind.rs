//! `svc rewind RUN --to NODE` end to end on a directory run: the new run starts from the
//! checkpoint before the node (the stages before it do not run again), runs to its end on
//! this process, says where it came from, and the old run is marked superseded; the start
//! node means a fresh run of the same inputs; a node the run never reached, a node not in
//! the workflow and an unknown run are clear usage errors that create nothing.

use crate::support::cli::Sandbox;
use serde_json::Value;

/// `svc events RUN` as JSON lines.
fn events(s: &Sandbox, run: &str) -> Vec<Value> {
    let out = s.command(&["events", run]).output().expect("svc events");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn event<'a>(evs: &'a [Value], kind: &str) -> Option<&'a Value> {
    evs.iter().rev().find(|e| e["event"] == kind)
}

/// How many runs `svc runs` lists.
fn run_count(s: &Sandbox) -> usize {
    let out = s
        .command(&["runs", "--format", "json"])
        .output()
        .expect("svc runs");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    v.as_array()
        .or_else(|| v["data"].as_array())
        .map_or(0, Vec::len)
}

#[test]
fn rewind_reruns_a_node_and_what_follows_and_supersedes_the_old_run() {
    let s = Sandbox::new();
    let old = s.run("rewind.dot", &["--input", "who=team"]);
    assert_eq!(old.code, 0, "{}", old.stderr);
    let old_id = old.run_id();
    assert_eq!(
        (s.lines("a.txt"), s.lines("b.txt"), s.lines("c.txt")),
        (1, 1, 1)
    );

    let r = s.finish(s.command(&["rewind", &old_id, "--to", "b", "--format", "json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.status(), "succeeded");
    let new_id = r.run_id();
    assert_ne!(new_id, old_id);
    assert!(
        r.stderr.contains(&format!("new run {new_id}")),
        "{}",
        r.stderr
    );
    // a did not run again; b and c did, once each.
    assert_eq!(
        (s.lines("a.txt"), s.lines("b.txt"), s.lines("c.txt")),
        (1, 2, 2)
    );
    assert_eq!(s.lines("repair.txt"), 0);

    let new_evs = events(&s, &new_id);
    let rewound = event(&new_evs, "run.rewound").expect("run.rewound");
    assert_eq!(rewound["properties"]["from_run_id"], old_id.as_str());
    assert_eq!(rewound["properties"]["to_node"], "b");
    assert!(
        rewound["properties"]["checkpoint_seq"].is_u64(),
        "{rewound}"
    );
    let started: Vec<&str> = new_evs
        .iter()
        .filter(|e| e["event"] == "stage.started")
        .filter_map(|e| e["node_id"].as_str())
        .collect();
    assert!(!started.contains(&"a"), "{started:?}");
    assert!(
        started.contains(&"b") && started.contains(&"c"),
        "{started:?}"
    );
    let created = event(&new_evs, "run.created").expect("run.created");
    assert_eq!(created["properties"]["inputs"]["who"], "team", "{created}");
    let old_evs = events(&s, &old_id);
    let sup = event(&old_evs, "run.superseded_by").expect("run.superseded_by");
    assert_eq!(sup["properties"]["new_run_id"], new_id.as_str());
    // The old run keeps its history and outcome.
    assert!(event(&old_evs, "run.succeeded").is_some() || old.status() == "succeeded");

    // The start node: a fresh run of the same inputs (every stage runs again).
    let r = s.finish(s.command(&["rewind", &old_id, "--to", "start", "--format", "json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        (s.lines("a.txt"), s.lines("b.txt"), s.lines("c.txt")),
        (2, 3, 3)
    );
    let fresh = events(&s, &r.run_id());
    let rewound = event(&fresh, "run.rewound").expect("run.rewound");
    assert_eq!(rewound["properties"]["to_node"], "start");
    assert_eq!(rewound["properties"]["checkpoint_seq"], Value::Null);
    let sup = event(&events(&s, &old_id), "run.superseded_by").cloned();
    assert_eq!(
        sup.expect("superseded")["properties"]["new_run_id"],
        r.run_id().as_str()
    );

    // Refused, with the reason, and nothing made: a node the run never reached, a node not
    // in the workflow, an unknown run.
    let runs_before = run_count(&s);
    assert_eq!(runs_before, 3, "the run and its two rewinds");
    let never = s.finish(s.command(&["rewind", &old_id, "--to", "repair"]));
    assert_eq!(never.code, 2);
    assert!(never.stderr.contains("never ran"), "{}", never.stderr);
    let unknown = s.finish(s.command(&["rewind", &old_id, "--to", "nope"]));
    assert_eq!(unknown.code, 2);
    assert!(
        unknown.stderr.contains("`nope` is not in run"),
        "{}",
        unknown.stderr
    );
    let missing = s.finish(s.command(&["rewind", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "--to", "b"]));
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.contains("not found"), "{}", missing.stderr);
    let empty = s.finish(s.command(&["rewind", &old_id, "--to", " "]));
    assert_eq!(empty.code, 2);
    assert_eq!(
        run_count(&s),
        runs_before,
        "a refused rewind creates no run"
    );
    assert_eq!(s.lines("repair.txt"), 0);
}
