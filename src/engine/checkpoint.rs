//! The durable state of a run between stages ([`RunState`]) and the checkpoint written as a
//! `checkpoint.completed` event after every stage ([`Checkpoint`]); resume reads it back.
//! Must not touch: the store (the walker writes checkpoints through its emitter).

use super::context::Context;
use super::failure::StageStatus;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a run remembers between stages.
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
    /// Every stage visit whose handler ran, in order (never cleared).
    pub path: Vec<String>,
    /// Loop restarts taken so far.
    pub restarts: u32,
}

/// The `checkpoint.completed` payload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Checkpoint {
    pub current_node: String,
    /// Where the run continues; resume starts here.
    pub next_node_id: Option<String>,
    /// Stage visits started so far (the next stage's `index`).
    pub stage_index: u64,
    #[serde(flatten)]
    pub state: RunState,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_api_field_names() {
        let mut c = Checkpoint {
            current_node: "a".into(),
            next_node_id: Some("b".into()),
            stage_index: 3,
            ..Checkpoint::default()
        };
        c.state.completed.push("a".into());
        c.state
            .outcomes
            .insert("a".into(), StageStatus::PartiallySucceeded);
        let v = serde_json::to_value(&c).unwrap_or_default();
        assert_eq!(v["completed_nodes"][0], "a");
        assert_eq!(v["node_outcomes"]["a"], "partially_succeeded");
        let back: Checkpoint = serde_json::from_value(v).unwrap_or_default();
        assert_eq!(back, c);
    }
}
