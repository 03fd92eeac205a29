//! Big stores for the benches that measure one: finished runs written as event lines (the
//! store's import format) and imported thousands to a transaction
//! (`SqliteStore::import_runs`), so 100,000 runs take seconds, not the minutes a commit per
//! run costs; and the pieces of a run's lines (ids at a chosen time, one event line).
//!
//! Must not: measure anything, or start a server (the benches do, on the filled directory).

use std::time::Instant;
use svc::internal::store::SqliteStore;

/// Runs imported per transaction.
const BATCH: usize = 5_000;

/// Imports `runs` runs into `store`, run `r` being `make(r)` (its id and event lines), in
/// transactions of [`BATCH`] runs; prints progress every 20,000 runs. Returns the events
/// written.
pub fn import(
    store: &SqliteStore,
    runs: usize,
    mut make: impl FnMut(usize) -> (String, Vec<String>),
) -> usize {
    let t = Instant::now();
    let mut events = 0;
    let mut batch = Vec::with_capacity(BATCH);
    for r in 0..runs {
        let (id, lines) = make(r);
        events += lines.len();
        batch.push((id, lines));
        if batch.len() == BATCH || r + 1 == runs {
            store.import_runs(&batch).expect("import runs");
            batch.clear();
        }
        if (r + 1) % 20_000 == 0 {
            println!(
                "  filled {} runs ({events} events) in {:.1} s",
                r + 1,
                t.elapsed().as_secs_f64()
            );
        }
    }
    events
}

/// A ULID (run or event id) whose time part is `ms`, unique by `n`.
pub fn ulid_at(ms: i64, n: u64) -> String {
    ulid::Ulid::from_parts(ms.max(0) as u64, (u128::from(n) << 16) | 0x5eed).to_string()
}

/// One event line: `properties` is JSON text; `node` the stage's node id, if any.
pub fn event_line(
    run_id: &str,
    seq: usize,
    id: &str,
    ts: &str,
    kind: &str,
    properties: &str,
    node: Option<&str>,
) -> String {
    let node = node.map_or(String::new(), |n| format!(r#","node_id":"{n}""#));
    format!(
        r#"{{"seq":{seq},"id":"{id}","ts":"{ts}","run_id":"{run_id}","event":"{kind}","properties":{properties}{node}}}"#
    )
}

/// A small deterministic generator (xorshift), so every bench run seeds the same store.
pub struct Dice(u64);

impl Dice {
    pub fn new(seed: u64) -> Dice {
        Dice(seed | 1)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}
