//! The durable state of a run between stages ([`RunState`]) and the checkpoint written as a
//! `checkpoint.completed` event after every stage; resume reads it back ([`restore`]).
//!
//! A checkpoint is either **full** (every field of the state) or a **delta** (only what
//! changed since the previous checkpoint, plus `base_seq`, the event seq of the full
//! checkpoint it builds on). A full one is written first, after a loop restart, and then
//! once at least [`FULL_EVERY`] deltas have been written since the last full one *and* those
//! deltas together hold at least as many entries as it did. So a checkpoint costs what
//! the stage changed rather than the size of the whole history, even when the history is
//! large (a 20,000-stage loop: the path alone has 20,000 entries; a full one every 64 stages
//! made each stage cost 0.6 ms), and resume replays a bounded number of deltas: at least
//! [`FULL_EVERY`], at most about as many as the state has entries.
//! `current_node`, `next_node_id` and `stage_index` are in every checkpoint.
//! Must not touch: the store beyond reading the run's checkpoint events.

use super::context::Context;
use super::events::resolve_blobs;
use super::failure::StageStatus;
use super::outcome::StageNote;
use crate::base::event_kind;
use crate::store::RunStore;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// A full checkpoint at least this often.
pub const FULL_EVERY: u32 = 64;

/// What a run remembers between stages. Mutations go through its methods, which note what
/// changed for the next delta checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunState {
    #[serde(rename = "context_values")]
    pub context: Context,
    /// Node ids in completion order, with repeats; cleared by a loop restart.
    #[serde(rename = "completed_nodes")]
    pub completed: Vec<String>,
    /// Latest outcome per node; cleared by a loop restart.
    #[serde(rename = "node_outcomes")]
    pub outcomes: BTreeMap<String, StageStatus>,
    /// Retries used by each node's latest visit; cleared by a loop restart.
    #[serde(rename = "node_retries")]
    pub retries: BTreeMap<String, u32>,
    /// Entries per node; kept across loop restarts.
    #[serde(rename = "node_visits")]
    pub visits: BTreeMap<String, u32>,
    /// Failures per signature; kept across loop restarts.
    #[serde(rename = "loop_failure_signatures")]
    pub signatures: BTreeMap<String, u32>,
    /// What preambles show of each node's latest visit (only nodes with something to
    /// show); cleared by a loop restart.
    #[serde(rename = "stage_notes")]
    pub notes: BTreeMap<String, StageNote>,
    /// Every stage visit whose handler ran, in order (never cleared).
    pub path: Vec<String>,
    /// Loop restarts taken so far.
    pub restarts: u32,
    #[serde(skip)]
    dirty: Dirty,
}

/// Changes since the last checkpoint.
#[derive(Debug, Clone, Default, PartialEq)]
struct Dirty {
    keys: BTreeSet<String>,
    nodes: BTreeSet<String>,
    signatures: BTreeSet<String>,
    path_len: usize,
    completed_len: usize,
    /// A restart (or nothing checkpointed yet): the next checkpoint must be full.
    needs_full: bool,
    since_full: u32,
    base_seq: Option<u64>,
    /// Entries of the last full checkpoint, and of the deltas written since.
    full_entries: usize,
    delta_entries: usize,
}

impl RunState {
    pub fn set(&mut self, key: impl Into<String>, value: Value) {
        let key = key.into();
        // A value set again unchanged (the thread and fidelity of most stages) is not a
        // change: the next delta checkpoint does not repeat it.
        if self.context.get(&key) == Some(&value) {
            return;
        }
        self.dirty.keys.insert(key.clone());
        self.context.insert(key, value);
    }

    pub fn remove(&mut self, key: &str) {
        if self.context.remove(key).is_some() {
            self.dirty.keys.insert(key.to_string());
        }
    }

    /// One more entry of `node`; returns the visit count.
    pub fn visit(&mut self, node: &str) -> u32 {
        self.dirty.nodes.insert(node.to_string());
        let v = self.visits.entry(node.to_string()).or_insert(0);
        *v += 1;
        *v
    }

    /// Adds visits made elsewhere (parallel branches).
    pub fn add_visits(&mut self, node: &str, n: u32) {
        self.dirty.nodes.insert(node.to_string());
        *self.visits.entry(node.to_string()).or_insert(0) += n;
    }

    /// A finished stage visit: path, completed nodes, outcome and retries.
    pub fn complete(&mut self, node: &str, status: StageStatus, retries: u32) {
        self.dirty.nodes.insert(node.to_string());
        self.path.push(node.to_string());
        self.completed.push(node.to_string());
        self.outcomes.insert(node.to_string(), status);
        if retries > 0 {
            self.retries.insert(node.to_string(), retries);
        } else {
            self.retries.remove(node);
        }
    }

    /// The details of `node`'s latest visit, for preambles.
    pub fn note(&mut self, node: &str, note: StageNote) {
        self.dirty.nodes.insert(node.to_string());
        if note.is_empty() {
            self.notes.remove(node);
        } else {
            self.notes.insert(node.to_string(), note);
        }
    }

    /// One more failure with this signature; returns the count.
    pub fn count_signature(&mut self, sig: &str, n: u32) -> u32 {
        self.dirty.signatures.insert(sig.to_string());
        let c = self.signatures.entry(sig.to_string()).or_insert(0);
        *c += n;
        *c
    }

    /// Loop restart: empty context, history cleared (visits, signatures and path kept).
    pub fn restart(&mut self) {
        self.restarts += 1;
        self.context = Context::new();
        self.completed.clear();
        self.outcomes.clear();
        self.retries.clear();
        self.notes.clear();
        self.dirty.needs_full = true;
    }

    /// The payload of the next `checkpoint.completed` and whether it is full. Call
    /// [`RunState::checkpointed`] with the committed event's seq afterwards.
    pub fn checkpoint_payload(
        &self,
        current: &str,
        next: Option<&str>,
        stage_index: u64,
    ) -> Result<(Value, bool), serde_json::Error> {
        let d = &self.dirty;
        let full = d.needs_full
            || d.base_seq.is_none()
            || (d.since_full + 1 >= FULL_EVERY && d.delta_entries >= d.full_entries);
        let mut m = if full {
            match serde_json::to_value(self)? {
                Value::Object(m) => m,
                _ => Map::new(),
            }
        } else {
            self.delta()
        };
        m.insert("kind".into(), json!(if full { "full" } else { "delta" }));
        m.insert("current_node".into(), json!(current));
        m.insert("next_node_id".into(), json!(next));
        m.insert("stage_index".into(), json!(stage_index));
        if !full {
            m.insert("base_seq".into(), json!(d.base_seq));
        }
        Ok((Value::Object(m), full))
    }

    fn delta(&self) -> Map<String, Value> {
        let d = &self.dirty;
        let mut context = Map::new();
        let mut removed = Vec::new();
        for k in &d.keys {
            match self.context.get(k) {
                Some(v) => {
                    context.insert(k.clone(), v.clone());
                }
                None => removed.push(k.clone()),
            }
        }
        let pick = |map: &dyn Fn(&str) -> Option<Value>| -> Map<String, Value> {
            d.nodes
                .iter()
                .map(|n| (n.clone(), map(n).unwrap_or(Value::Null)))
                .collect()
        };
        let outcomes = pick(&|n| self.outcomes.get(n).map(|s| json!(s)));
        let retries = pick(&|n| self.retries.get(n).map(|r| json!(r)));
        let visits = pick(&|n| self.visits.get(n).map(|v| json!(v)));
        let notes = pick(&|n| self.notes.get(n).map(|v| json!(v)));
        let signatures: Map<String, Value> = d
            .signatures
            .iter()
            .map(|s| {
                (
                    s.clone(),
                    json!(self.signatures.get(s).copied().unwrap_or(0)),
                )
            })
            .collect();
        let mut m = Map::new();
        m.insert("context_values".into(), Value::Object(context));
        m.insert("context_removed".into(), json!(removed));
        m.insert(
            "completed_nodes".into(),
            json!(self.completed.get(d.completed_len..).unwrap_or(&[])),
        );
        m.insert("node_outcomes".into(), Value::Object(outcomes));
        m.insert("node_retries".into(), Value::Object(retries));
        m.insert("node_visits".into(), Value::Object(visits));
        m.insert("stage_notes".into(), Value::Object(notes));
        m.insert("loop_failure_signatures".into(), Value::Object(signatures));
        m.insert(
            "path".into(),
            json!(self.path.get(d.path_len..).unwrap_or(&[])),
        );
        m.insert("restarts".into(), json!(self.restarts));
        m
    }

    /// The checkpoint was committed as event `seq`: start the next delta from here.
    pub fn checkpointed(&mut self, seq: u64, full: bool) {
        let entries = if full {
            self.entries()
        } else {
            self.delta_entries()
        };
        let d = &mut self.dirty;
        d.keys.clear();
        d.nodes.clear();
        d.signatures.clear();
        d.path_len = self.path.len();
        d.completed_len = self.completed.len();
        d.needs_full = false;
        if full {
            d.base_seq = Some(seq);
            d.since_full = 0;
            d.full_entries = entries;
            d.delta_entries = 0;
        } else {
            d.since_full += 1;
            d.delta_entries += entries;
        }
    }

    /// Entries a full checkpoint holds (context keys, list items, per-node map entries).
    fn entries(&self) -> usize {
        self.context.len()
            + self.completed.len()
            + self.outcomes.len()
            + self.retries.len()
            + self.visits.len()
            + self.signatures.len()
            + self.notes.len()
            + self.path.len()
    }

    /// Entries the next delta holds (an upper bound: a changed node may touch fewer maps).
    fn delta_entries(&self) -> usize {
        let d = &self.dirty;
        d.keys.len()
            + 4 * d.nodes.len()
            + d.signatures.len()
            + self.path.len().saturating_sub(d.path_len)
            + self.completed.len().saturating_sub(d.completed_len)
    }

    /// Applies a delta checkpoint's changes (`null` in a per-node map means "absent").
    fn apply(&mut self, delta: &Value) {
        let obj = |k: &str| delta.get(k).and_then(Value::as_object);
        let strings = |k: &str| -> Vec<String> {
            delta
                .get(k)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default()
        };
        if let Some(c) = obj("context_values") {
            self.context.extend(c.clone());
        }
        for k in strings("context_removed") {
            self.context.remove(&k);
        }
        self.completed.extend(strings("completed_nodes"));
        self.path.extend(strings("path"));
        if let Some(m) = obj("node_outcomes") {
            for (n, v) in m {
                match serde_json::from_value::<StageStatus>(v.clone()) {
                    Ok(s) => self.outcomes.insert(n.clone(), s),
                    Err(_) => self.outcomes.remove(n),
                };
            }
        }
        if let Some(m) = obj("stage_notes") {
            for (n, v) in m {
                match serde_json::from_value::<StageNote>(v.clone()) {
                    Ok(note) if !v.is_null() => self.notes.insert(n.clone(), note),
                    _ => self.notes.remove(n),
                };
            }
        }
        let apply_counts = |target: &mut BTreeMap<String, u32>, m: Option<&Map<String, Value>>| {
            for (n, v) in m.into_iter().flatten() {
                match v.as_u64() {
                    Some(c) => target.insert(n.clone(), c as u32),
                    None => target.remove(n),
                };
            }
        };
        apply_counts(&mut self.retries, obj("node_retries"));
        apply_counts(&mut self.visits, obj("node_visits"));
        apply_counts(&mut self.signatures, obj("loop_failure_signatures"));
        if let Some(r) = delta.get("restarts").and_then(Value::as_u64) {
            self.restarts = r as u32;
        }
    }
}

/// A run's position and state as of its latest checkpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Restored {
    pub current_node: String,
    pub next_node_id: Option<String>,
    pub stage_index: u64,
    pub state: RunState,
}

/// Reads the run's latest checkpoint (replaying deltas over their full checkpoint), with
/// blob references resolved. `None` when the run has no checkpoint yet.
pub fn restore(store: &dyn RunStore, run_id: &str) -> Result<Option<Restored>, String> {
    let row = store
        .get_run(run_id)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("run {run_id} not found"))?;
    let Some(latest) = row.checkpoint else {
        return Ok(None);
    };
    let mut chain = vec![latest.clone()];
    if latest.get("kind").and_then(Value::as_str) == Some("delta") {
        let base = latest
            .get("base_seq")
            .and_then(Value::as_u64)
            .ok_or("the run's checkpoint has no base_seq")?;
        chain = checkpoints_since(store, run_id, base, u64::MAX)?;
    }
    fold_chain(store, chain).map(Some)
}

/// The run's position and state as of its checkpoint event `seq` (a rewind starts there).
pub fn restore_at(store: &dyn RunStore, run_id: &str, seq: u64) -> Result<Restored, String> {
    let event = store
        .events(run_id, seq, 1)
        .map_err(|e| e.to_string())?
        .into_iter()
        .next()
        .filter(|e| e.seq == seq && e.event == event_kind::CHECKPOINT_COMPLETED)
        .ok_or_else(|| format!("event {seq} of run {run_id} is not a checkpoint"))?;
    let chain = match event.properties.get("kind").and_then(Value::as_str) {
        Some("delta") => {
            let base = event
                .properties
                .get("base_seq")
                .and_then(Value::as_u64)
                .ok_or("the checkpoint has no base_seq")?;
            checkpoints_since(store, run_id, base, seq)?
        }
        _ => vec![event.properties],
    };
    fold_chain(store, chain)
}

/// Folds a full checkpoint and the deltas after it.
fn fold_chain(store: &dyn RunStore, chain: Vec<Value>) -> Result<Restored, String> {
    let mut restored: Option<Restored> = None;
    for mut cp in chain {
        resolve_blobs(store, &mut cp).map_err(|e| e.to_string())?;
        let full = cp.get("kind").and_then(Value::as_str) != Some("delta");
        let r = restored.get_or_insert_with(Restored::default);
        if full {
            r.state = serde_json::from_value(cp.clone())
                .map_err(|e| format!("the run's checkpoint is unreadable: {e}"))?;
        } else {
            r.state.apply(&cp);
        }
        r.current_node = cp
            .get("current_node")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        r.next_node_id = cp
            .get("next_node_id")
            .and_then(Value::as_str)
            .map(String::from);
        r.stage_index = cp.get("stage_index").and_then(Value::as_u64).unwrap_or(0);
    }
    let mut restored = restored.ok_or("the run's checkpoints are missing")?;
    restored.state.dirty.needs_full = true;
    Ok(restored)
}

/// The `checkpoint.completed` payloads from seq `base` to seq `upto`, in order.
fn checkpoints_since(
    store: &dyn RunStore,
    run_id: &str,
    base: u64,
    upto: u64,
) -> Result<Vec<Value>, String> {
    const PAGE: usize = 1000;
    let mut out = Vec::new();
    let mut since = base;
    loop {
        let page = store
            .events(run_id, since, PAGE)
            .map_err(|e| e.to_string())?;
        let Some(last) = page.last().map(|e| e.seq) else {
            break;
        };
        out.extend(
            page.into_iter()
                .filter(|e| e.event == event_kind::CHECKPOINT_COMPLETED && e.seq <= upto)
                .map(|e| e.properties),
        );
        if last >= upto {
            break;
        }
        since = last + 1;
    }
    match out.first() {
        Some(first) if first.get("kind").and_then(Value::as_str) != Some("delta") => Ok(out),
        _ => Err(format!("the full checkpoint at event {base} is missing")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{EventDraft, MemoryStore, NewRun};

    /// Writes `state`'s next checkpoint; true when it was a full one.
    fn commit(store: &MemoryStore, run: &str, state: &mut RunState, node: &str) -> bool {
        let (payload, full) = state
            .checkpoint_payload(node, Some("next"), 1)
            .unwrap_or_default();
        let seq = store
            .append(run, EventDraft::new("checkpoint.completed", payload))
            .map(|e| e.seq)
            .unwrap_or(0);
        state.checkpointed(seq, full);
        full
    }

    fn new_run(store: &MemoryStore) -> String {
        store
            .create_run(NewRun::default())
            .map(|r| r.id)
            .unwrap_or_default()
    }

    #[test]
    fn a_value_set_again_unchanged_is_not_repeated_in_the_next_delta() {
        let store = MemoryStore::new();
        let run = new_run(&store);
        let mut s = RunState::default();
        s.set("internal.thread_id", json!("main"));
        s.set("a", json!(1));
        assert!(commit(&store, &run, &mut s, "n0"));
        s.set("internal.thread_id", json!("main"));
        s.set("a", json!(2));
        let (delta, full) = s.checkpoint_payload("n1", None, 2).unwrap_or_default();
        assert!(!full);
        assert_eq!(delta["context_values"], json!({"a": 2}));
    }

    #[test]
    fn deltas_replay_to_the_same_state() {
        let store = MemoryStore::new();
        let run = new_run(&store);
        let mut s = RunState::default();
        s.set("a", json!(1));
        s.visit("n0");
        s.complete("n0", StageStatus::Succeeded, 0);
        commit(&store, &run, &mut s, "n0");
        for i in 1..(FULL_EVERY + 10) {
            let id = format!("n{i}");
            s.set(format!("k{i}"), json!(i));
            s.remove("a");
            s.visit(&id);
            s.complete(&id, StageStatus::Failed, i % 2);
            let failure = (i % 3 != 0).then(|| format!("failure {i}"));
            s.note(
                &id,
                StageNote {
                    failure,
                    ..StageNote::default()
                },
            );
            s.count_signature("sig", 1);
            commit(&store, &run, &mut s, &id);
        }
        // A revisit with nothing to show drops the node's earlier note.
        s.note("n1", StageNote::default());
        commit(&store, &run, &mut s, "n1");
        assert!(!s.notes.contains_key("n1"));
        let row = store.get_run(&run).ok().flatten();
        let latest = row.and_then(|r| r.checkpoint).unwrap_or_default();
        assert_eq!(
            latest["kind"], "delta",
            "a delta after the periodic full one"
        );
        let back = restore(&store, &run).ok().flatten().unwrap_or_default();
        let mut expected = s.clone();
        expected.dirty = back.state.dirty.clone();
        assert_eq!(back.state, expected);
        assert_eq!(back.next_node_id.as_deref(), Some("next"));
    }

    #[test]
    fn a_large_history_is_written_in_full_rarely_and_still_restores() {
        let store = MemoryStore::new();
        let run = new_run(&store);
        let mut s = RunState::default();
        let mut fulls = 0;
        // A loop over five nodes: the path and completed list grow by one entry per stage.
        let stages = 10_000;
        for i in 0..stages {
            let id = format!("n{}", i % 5);
            s.visit(&id);
            s.complete(&id, StageStatus::Succeeded, 0);
            s.set("i", json!(i));
            fulls += usize::from(commit(&store, &run, &mut s, &id));
        }
        // Each delta holds ~7 entries and the state grows by 2 per stage, so the fulls come
        // at stages growing by a factor of about 9/7: ~20 of them, not one per 64 (156), and
        // all of them together hold about as many entries as all the deltas.
        assert!(fulls <= 40, "{fulls} full checkpoints in {stages} stages");
        let back = restore(&store, &run).unwrap().unwrap();
        let mut expected = s.clone();
        expected.dirty = back.state.dirty.clone();
        assert_eq!(back.state, expected);
        assert_eq!(back.state.path.len(), stages);
    }

    #[test]
    fn full_checkpoint_uses_api_field_names() {
        let mut s = RunState::default();
        s.complete("a", StageStatus::PartiallySucceeded, 0);
        let (v, full) = s.checkpoint_payload("a", Some("b"), 3).unwrap_or_default();
        assert!(full);
        assert_eq!(v["completed_nodes"][0], "a");
        assert_eq!(v["node_outcomes"]["a"], "partially_succeeded");
        assert_eq!(v["next_node_id"], "b");
        assert_eq!(v["kind"], "full");
    }
}
