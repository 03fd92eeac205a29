//! Helpers shared by the store test binaries: a seeded RNG, legacy-directory fixtures and the
//! "row equals fold of events" check.

use std::fs;
use std::path::Path;
use svc::internal::store::{replay, sha256_hex, RunStore};

/// xorshift64*: deterministic, seedable, good enough for test choices.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
}

/// Asserts that the stored row of `run_id` equals the fold of its stored events and that its
/// seqs run 1..=last_seq.
pub fn assert_row_is_fold(store: &dyn RunStore, run_id: &str) {
    let events = store.events(run_id, 1, usize::MAX).unwrap();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "run {run_id}: seq gap");
    }
    let row = store.get_run(run_id).unwrap();
    assert_eq!(row, replay(&events), "run {run_id}: row is not the fold");
}

/// Writes a legacy directory with `runs` runs in the portable format; returns the run ids.
/// The event lines deliberately use formatting serde would not reproduce (spaces, key order,
/// `1.50`, escaped unicode, an unknown envelope key) so byte preservation is tested, and
/// some reference blobs.
pub fn legacy_fixture(dir: &Path, runs: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    let runs_dir = dir.join("runs");
    let blobs_dir = dir.join("blobs");
    fs::create_dir_all(&runs_dir).unwrap();
    fs::create_dir_all(&blobs_dir).unwrap();
    let mut ids = Vec::new();
    for r in 0..runs {
        let id = svc::internal::base::clock::new_ulid();
        let mut lines = vec![format!(
            r#"{{"seq":1,"id":"{}","ts":"2026-01-02T03:04:05.006Z","run_id":"{id}","event":"run.created","properties":{{"title":"legacy run {r}","goal":"g \u00e9","labels":{{"team":"core"}},"workflow":{{"name":"w","slug":"w","source":"digraph w {{ start -> exit }}","node_count":2,"edge_count":1}},"inputs":{{}}}}}}"#,
            svc::internal::base::clock::new_ulid()
        )];
        let n = rng.range(1, 30);
        for k in 0..n {
            let seq = lines.len() + 1;
            let ev = svc::internal::base::clock::new_ulid();
            let line = match rng.range(0, 6) {
                0 => format!(
                    r#"{{ "seq": {seq}, "id": "{ev}", "ts": "2026-01-02T03:04:06.000Z", "run_id": "{id}", "event": "stage.started", "properties": {{ "index": {k}, "cost": 1.50 }}, "node_id": "n{k}" }}"#
                ),
                1 => format!(
                    r#"{{"properties":{{"current_node":"n{k}","context_values":{{"x":"✓"}}}},"event":"checkpoint.completed","run_id":"{id}","ts":"2026-01-02T03:04:07.000Z","id":"{ev}","seq":{seq}}}"#
                ),
                2 => {
                    let bytes = format!("stdout of run {r} step {k}: {}", rng.next()).into_bytes();
                    let hex = sha256_hex(&bytes);
                    fs::write(blobs_dir.join(&hex), &bytes).unwrap();
                    format!(
                        r#"{{"seq":{seq},"id":"{ev}","ts":"2026-01-02T03:04:08.000Z","run_id":"{id}","event":"command.completed","properties":{{"stdout":"blob://sha256/{hex}","exit_code":0}},"session_id":"s-{r}"}}"#
                    )
                }
                3 => format!(
                    r#"{{"seq":{seq},"id":"{ev}","ts":"2026-01-02T03:04:09.000Z","run_id":"{id}","event":"interview.started","properties":{{"question_id":"q{k}","question":"ok?"}}}}"#
                ),
                4 => format!(
                    r#"{{"seq":{seq},"id":"{ev}","ts":"2026-01-02T03:04:10.000Z","run_id":"{id}","event":"run.running","properties":{{}}}}"#
                ),
                _ => format!(
                    r#"{{"seq":{seq},"id":"{ev}","ts":"2026-01-02T03:04:11.000Z","run_id":"{id}","event":"agent.message","properties":{{"text":"line\nbreak \"quoted\" \u2603"}},"actor":{{"kind":"system","system_kind":"engine"}}}}"#
                ),
            };
            lines.push(line);
        }
        if r % 3 == 0 {
            let seq = lines.len() + 1;
            lines.push(format!(
                r#"{{"seq":{seq},"id":"{}","ts":"2026-01-02T03:05:00.000Z","run_id":"{id}","event":"run.failed","properties":{{"reason":"terminated","error":"server restarted"}}}}"#,
                svc::internal::base::clock::new_ulid()
            ));
        }
        let run_dir = runs_dir.join(&id);
        fs::create_dir_all(&run_dir).unwrap();
        let mut text = lines.join("\n");
        text.push('\n');
        fs::write(run_dir.join("events.jsonl"), text).unwrap();
        ids.push(id);
    }
    ids
}

/// Every file under `dir`, as (relative path, bytes), sorted.
pub fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .to_string();
                out.push((rel, fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}
