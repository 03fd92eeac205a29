//! Startup recovery: what happens to the runs a previous process left holding a slot
//! (resumed from their last checkpoint, or failed), and to their children waiting for approval.
//!
//! Owns: the decision's application at startup. Must not touch: the decision itself
//! ([`super::lifecycle::interrupted`]) or the scheduler's queue.

use super::{lifecycle, Runs};
use crate::base::event_kind;
use crate::store::{EventDraft, RunQuery, StoreError};
use serde_json::json;

/// What [`Runs::recover`] did with the runs the previous process left active.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    pub resumed: usize,
    pub failed: usize,
}

impl Runs {
    /// Deals with runs left holding a slot by a previous process (see the module docs):
    /// with `resume` they are resumed from their last checkpoint (oldest first, before the
    /// scheduler promotes anything queued), else failed with reason `terminated`. A run with a
    /// pending cancel, or one being removed, is failed either way.
    pub fn recover(&self, resume: bool) -> Result<Recovered, StoreError> {
        let rows = self.store.query_runs(&RunQuery {
            statuses: lifecycle::SLOT_STATUSES
                .iter()
                .map(|s| s.to_string())
                .collect(),
            oldest_first: true,
            limit: 1_000_000,
            ..RunQuery::default()
        })?;
        let mut done = Recovered::default();
        let mut launches = Vec::new();
        for row in &rows {
            let plan = lifecycle::interrupted(row, resume);
            for draft in plan.events {
                self.store.append(&row.id, draft)?;
            }
            self.orphan_waiting_children(&row.id)?;
            if !plan.resume {
                log::warn!(
                    "run {} was {} when the server stopped: failed",
                    row.id,
                    row.status.name()
                );
                done.failed += 1;
                continue;
            }
            log::warn!(
                "run {} was {} when the server stopped: resuming it from its last checkpoint",
                row.id,
                row.status.name()
            );
            if let Some(fresh) = self.store.get_run(&row.id)? {
                launches.push((fresh, plan.paused));
            }
        }
        let max = self.settings.get().server.scheduler.max_concurrent_runs;
        let workers = max.max(launches.len());
        for (row, paused) in launches {
            done.resumed += 1;
            self.launch_with(row, workers, true, paused);
        }
        Ok(done)
    }

    /// The children of an interrupted run that wait for approval can never run: the engine
    /// that waited for them is gone, and a resumed manager stage runs again from its start,
    /// creating (and asking approval for) a new child. They become `dead`, saying so.
    fn orphan_waiting_children(&self, parent: &str) -> Result<(), StoreError> {
        let children = self.store.query_runs(&RunQuery {
            statuses: vec!["pending".to_string()],
            parent_id: Some(parent.to_string()),
            limit: 1_000_000,
            ..RunQuery::default()
        })?;
        for child in children {
            let why = format!(
                "its parent run {parent} was interrupted by a server stop while it waited for \
                 approval (a resumed manager stage asks again with a new child run)"
            );
            self.store.append(
                &child.id,
                EventDraft::new(
                    event_kind::RUN_DEAD,
                    json!({"reason": "parent_ended", "error": why}),
                ),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::versions::VersionStore;
    use crate::settings::{Settings, SettingsHandle};
    use crate::store::{MemoryStore, NewRun, RunStatus, RunStore, WorkflowMeta};
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn an_interrupted_run_that_cannot_resume_fails_saying_why() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn RunStore> = Arc::new(MemoryStore::new());
        let settings = SettingsHandle::new(Settings::default());
        let runs = Runs::new(
            Arc::clone(&store),
            crate::server::executor(dir.path(), settings.clone()),
            settings,
            dir.path().to_path_buf(),
            Arc::new(VersionStore::in_memory()),
        );
        let row = store
            .create_run(NewRun {
                title: "broken".into(),
                workflow: WorkflowMeta {
                    source: "digraph { start -> ".into(),
                    ..WorkflowMeta::default()
                },
                ..NewRun::default()
            })
            .unwrap();
        for kind in ["run.queued", "run.starting", "run.running"] {
            store
                .append(&row.id, EventDraft::new(kind, json!({})))
                .unwrap();
        }
        let done = runs.recover(true).unwrap();
        assert_eq!(
            done,
            Recovered {
                resumed: 1,
                failed: 0
            }
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let row = loop {
            let r = store.get_run(&row.id).unwrap().unwrap();
            if r.status.is_terminal() || std::time::Instant::now() > deadline {
                break r;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(
            row.status,
            RunStatus::Failed {
                reason: "resume_failed".into()
            }
        );
        let error = row.error.unwrap_or_default();
        assert!(
            error.contains("cannot be resumed") && error.contains("does not parse"),
            "{error}"
        );
    }
}
