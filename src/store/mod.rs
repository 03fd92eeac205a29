//! TEMPORARY STAND-IN for the `store` branch (replaced wholesale when it is merged): the
//! subset of the run store API the engine codes against, with an in-memory implementation.
//! Must not grow beyond what the real store offers.

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

pub const BLOB_THRESHOLD: usize = 100 * 1024;
const BLOB_REF_PREFIX: &str = "blob://sha256/";

pub fn blob_ref(hex: &str) -> String {
    format!("{BLOB_REF_PREFIX}{hex}")
}

pub fn parse_blob_ref(reference: &str) -> Option<&str> {
    reference
        .strip_prefix(BLOB_REF_PREFIX)
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

pub fn default_state_dir() -> PathBuf {
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".local/state/svc"),
        None => PathBuf::from(".svc-state"),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("run {run_id} not found")]
    NotFound { run_id: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub seq: u64,
    pub id: String,
    pub ts: String,
    pub run_id: String,
    pub event: String,
    pub properties: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_group_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_branch_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EventDraft {
    pub event: String,
    pub properties: Value,
    pub node_id: Option<String>,
    pub parallel_group_id: Option<String>,
    pub parallel_branch_id: Option<String>,
}

impl EventDraft {
    pub fn new(kind: &str, properties: Value) -> Self {
        EventDraft {
            event: kind.to_string(),
            properties: if properties.is_null() {
                Value::Object(Map::new())
            } else {
                properties
            },
            node_id: None,
            parallel_group_id: None,
            parallel_branch_id: None,
        }
    }
    pub fn node(mut self, id: &str) -> Self {
        self.node_id = Some(id.to_string());
        self
    }
    pub fn parallel(mut self, group_id: &str, branch_id: &str) -> Self {
        self.parallel_group_id = Some(group_id.to_string());
        self.parallel_branch_id = Some(branch_id.to_string());
        self
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkflowMeta {
    pub name: Option<String>,
    pub slug: Option<String>,
    pub graph_name: Option<String>,
    pub node_count: i64,
    pub edge_count: i64,
    pub source: String,
    pub path: Option<String>,
    pub version_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewRun {
    pub id: Option<String>,
    pub title: String,
    pub goal: String,
    pub labels: BTreeMap<String, String>,
    pub workflow: WorkflowMeta,
    pub working_dir: Option<String>,
    pub inputs: Value,
    pub parent_id: Option<String>,
    pub extra: Value,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunStatus {
    Submitted,
    Running,
    Blocked { blocked_reason: String },
    Succeeded { reason: String },
    Failed { reason: String },
}

impl RunStatus {
    pub fn is_terminal(&self) -> bool {
        matches!(self, RunStatus::Succeeded { .. } | RunStatus::Failed { .. })
    }
    pub fn name(&self) -> &'static str {
        match self {
            RunStatus::Submitted => "submitted",
            RunStatus::Running => "running",
            RunStatus::Blocked { .. } => "blocked",
            RunStatus::Succeeded { .. } => "succeeded",
            RunStatus::Failed { .. } => "failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub id: String,
    pub workflow: WorkflowMeta,
    pub status: RunStatus,
    pub error: Option<String>,
    pub last_seq: u64,
    pub working_dir: Option<String>,
    pub inputs: Value,
    pub checkpoint: Option<Value>,
}

pub trait RunStore: Send + Sync {
    fn create_run(&self, new: NewRun) -> Result<RunRow, StoreError>;
    fn append(&self, run_id: &str, draft: EventDraft) -> Result<Event, StoreError>;
    fn get_run(&self, run_id: &str) -> Result<Option<RunRow>, StoreError>;
    fn events(&self, run_id: &str, since_seq: u64, limit: usize) -> Result<Vec<Event>, StoreError>;
    fn put_blob(&self, bytes: &[u8]) -> Result<String, StoreError>;
    fn get_blob(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError>;
    fn hub(&self) -> &Hub;
}

#[derive(Debug, Default)]
pub struct Hub {
    subs: Mutex<HashMap<String, Vec<crossbeam_channel::Sender<Arc<Event>>>>>,
}

pub struct Subscription {
    rx: crossbeam_channel::Receiver<Arc<Event>>,
}

impl Subscription {
    pub fn recv(&self) -> Result<Arc<Event>, crossbeam_channel::RecvError> {
        self.rx.recv()
    }
    pub fn recv_timeout(
        &self,
        t: std::time::Duration,
    ) -> Result<Arc<Event>, crossbeam_channel::RecvTimeoutError> {
        self.rx.recv_timeout(t)
    }
}

impl Hub {
    pub fn subscribe(&self, run_id: &str) -> Subscription {
        let (tx, rx) = crossbeam_channel::unbounded();
        self.subs
            .lock()
            .entry(run_id.to_string())
            .or_default()
            .push(tx);
        Subscription { rx }
    }
    fn publish(&self, e: &Arc<Event>) {
        if let Some(list) = self.subs.lock().get_mut(&e.run_id) {
            list.retain(|tx| tx.send(e.clone()).is_ok());
        }
    }
}

#[derive(Debug, Default)]
pub struct MemoryStore {
    runs: Mutex<HashMap<String, (RunRow, Vec<Event>)>>,
    blobs: Mutex<HashMap<String, Vec<u8>>>,
    hub: Hub,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }
}

fn fold(row: &mut RunRow, e: &Event) {
    let reason = || {
        e.properties
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    match e.event.as_str() {
        "run.running" | "run.started" | "run.unblocked" => row.status = RunStatus::Running,
        "run.blocked" => {
            row.status = RunStatus::Blocked {
                blocked_reason: "human_input_required".into(),
            }
        }
        "run.completed" => row.status = RunStatus::Succeeded { reason: reason() },
        "run.failed" => {
            row.status = RunStatus::Failed { reason: reason() };
            row.error = e
                .properties
                .get("error")
                .and_then(Value::as_str)
                .map(String::from);
        }
        "checkpoint.completed" => row.checkpoint = Some(e.properties.clone()),
        _ => {}
    }
    row.last_seq = e.seq;
}

impl RunStore for MemoryStore {
    fn create_run(&self, new: NewRun) -> Result<RunRow, StoreError> {
        let id = new
            .id
            .clone()
            .unwrap_or_else(|| ulid::Ulid::new().to_string());
        let row = RunRow {
            id: id.clone(),
            workflow: new.workflow,
            status: RunStatus::Submitted,
            error: None,
            last_seq: 1,
            working_dir: new.working_dir,
            inputs: new.inputs,
            checkpoint: None,
        };
        let created = Event {
            seq: 1,
            id: ulid::Ulid::new().to_string(),
            ts: String::new(),
            run_id: id.clone(),
            event: "run.created".into(),
            properties: Value::Object(Map::new()),
            node_id: None,
            parallel_group_id: None,
            parallel_branch_id: None,
        };
        self.runs.lock().insert(id, (row.clone(), vec![created]));
        Ok(row)
    }

    fn append(&self, run_id: &str, d: EventDraft) -> Result<Event, StoreError> {
        let mut runs = self.runs.lock();
        let (row, events) = runs.get_mut(run_id).ok_or_else(|| StoreError::NotFound {
            run_id: run_id.to_string(),
        })?;
        let e = Event {
            seq: row.last_seq + 1,
            id: ulid::Ulid::new().to_string(),
            ts: String::new(),
            run_id: run_id.to_string(),
            event: d.event,
            properties: d.properties,
            node_id: d.node_id,
            parallel_group_id: d.parallel_group_id,
            parallel_branch_id: d.parallel_branch_id,
        };
        fold(row, &e);
        events.push(e.clone());
        self.hub.publish(&Arc::new(e.clone()));
        Ok(e)
    }

    fn get_run(&self, run_id: &str) -> Result<Option<RunRow>, StoreError> {
        Ok(self.runs.lock().get(run_id).map(|(r, _)| r.clone()))
    }

    fn events(&self, run_id: &str, since: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let runs = self.runs.lock();
        let (_, events) = runs.get(run_id).ok_or_else(|| StoreError::NotFound {
            run_id: run_id.to_string(),
        })?;
        Ok(events
            .iter()
            .filter(|e| e.seq >= since)
            .take(limit)
            .cloned()
            .collect())
    }

    fn put_blob(&self, bytes: &[u8]) -> Result<String, StoreError> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        bytes.hash(&mut h);
        let id = format!("{:016x}", h.finish()).repeat(4);
        self.blobs.lock().insert(id.clone(), bytes.to_vec());
        Ok(id)
    }

    fn get_blob(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.blobs.lock().get(id).cloned())
    }

    fn hub(&self) -> &Hub {
        &self.hub
    }
}
