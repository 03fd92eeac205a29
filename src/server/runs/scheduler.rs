//! The scheduler and the engine workers: promoting `runnable` runs into free slots (oldest
//! first), handing them to worker threads, ending a run whose engine stopped without ending
//! it, and sweeping sandboxes past their retention.
//!
//! Owns: slots, the job channel and the worker threads. Must not touch: lifecycle rules
//! ([`super::lifecycle`]) or what a worker does with a job ([`super::exec`]).

use super::exec::Job;
use super::{lifecycle, system_actor, RunHandle, Runs};
use crate::base::event_kind;
use crate::sandbox::lifecycle as sandbox;
use crate::store::{EventDraft, RunQuery, RunRow, StoreError};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How often the scheduler removes sandboxes past their retention.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

impl Runs {
    /// Starts the scheduler thread.
    pub fn start_scheduler(self: &Arc<Self>) -> std::io::Result<()> {
        let me = Arc::clone(self);
        std::thread::Builder::new()
            .name("scheduler".into())
            .spawn(move || me.scheduler_loop())?;
        self.wake();
        Ok(())
    }

    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Asks the scheduler to look again (coalesced).
    pub fn wake(&self) {
        let _ = self.wake_tx.try_send(());
    }

    /// Wakes the scheduler unless every slot is held. Why that is enough: a promotion needs
    /// a free slot, and whatever frees one (a run ending, a delete, a cancel before the run
    /// started, a higher limit) wakes the scheduler itself after its commit. Skipping the wake
    /// spares a thread switch and a gate acquisition on every start while the slots are full.
    pub(super) fn wake_if_slot_free(&self) {
        let max = self.settings.get().server.scheduler.max_concurrent_runs;
        if self.slot_holders().map_or(true, |held| held < max) {
            self.wake();
        }
    }

    fn scheduler_loop(self: Arc<Self>) {
        let mut last_sweep: Option<std::time::Instant> = None;
        loop {
            crossbeam_channel::select! {
                recv(self.wake_rx) -> _ => {}
                default(Duration::from_secs(1)) => {}
            }
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.promote())) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => log::error!("scheduler: {e}"),
                Err(_) => log::error!("scheduler: promotion panicked; retrying on the next wake"),
            }
            if last_sweep.is_none_or(|t| t.elapsed() >= SWEEP_EVERY) {
                last_sweep = Some(std::time::Instant::now());
                let defaults = self.settings.get().sandbox_defaults();
                let now = crate::base::clock::parse_ts(&crate::base::clock::now()).unwrap_or(0);
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    sandbox::sweep(self.gated.as_ref(), &self.state_dir, &defaults, now)
                }));
            }
        }
    }

    /// Number of runs holding a slot: an indexed count over [`lifecycle::SLOT_STATUSES`],
    /// the status names [`lifecycle::holds_slot`] accepts (a unit test keeps them equal).
    pub fn slot_holders(&self) -> Result<usize, StoreError> {
        self.store.count_runs(&RunQuery {
            statuses: lifecycle::SLOT_STATUSES
                .iter()
                .map(|s| s.to_string())
                .collect(),
            ..RunQuery::default()
        })
    }

    fn promote(&self) -> Result<(), StoreError> {
        let max = self.settings.get().server.scheduler.max_concurrent_runs;
        let _g = self.gate.lock();
        let holders = self.slot_holders()?;
        if holders >= max {
            return Ok(());
        }
        let cap = self.daily_cap()?.filter(|c| c.reached());
        // Under a reached daily cap runs with LLM stages wait: look further down the queue
        // for runs without any.
        let want = max - holders;
        let rows = self.store.query_runs(&RunQuery {
            statuses: vec!["runnable".into()],
            oldest_first: true,
            limit: if cap.is_some() { want + 200 } else { want },
            ..RunQuery::default()
        })?;
        let rows = rows
            .into_iter()
            .filter(|r| cap.is_none() || !super::has_llm_stages(r))
            .take(want);
        for row in rows {
            let row = self
                .store
                .append(
                    &row.id,
                    EventDraft::new(event_kind::RUN_STARTING, json!({})).actor(system_actor()),
                )
                .and_then(|_| self.store.get_run(&row.id))?;
            let Some(row) = row else { continue };
            self.launch(row, max);
        }
        Ok(())
    }

    fn launch(&self, row: RunRow, max: usize) {
        self.launch_with(row, max, false, false)
    }

    /// Hands a `starting` run to a worker (growing the pool to `max`). `recovery`: it was
    /// interrupted by the last stop; `paused`: it was paused then, and resumes paused.
    pub(super) fn launch_with(&self, row: RunRow, max: usize, recovery: bool, paused: bool) {
        let handle = Arc::new(RunHandle::new());
        // Called in promotion order: the ticket that orders `run.running` (`turns`).
        self.turns.issue(&row.id);
        if paused {
            handle.cancel.pause();
        }
        self.active
            .lock()
            .insert(row.id.clone(), Arc::clone(&handle));
        let version = row
            .workflow
            .version_id
            .as_deref()
            .and_then(|id| self.versions.get(id).ok().flatten());
        let workdir = sandbox::workspaces_dir(&self.state_dir).join(&row.id);
        // Run data: private to the owner (the workspaces directory 0700; each run's
        // workspace is made inside it when its sandbox starts).
        if let Err(e) = crate::base::perms::private_dir(&sandbox::workspaces_dir(&self.state_dir)) {
            log::warn!(
                "run {}: cannot create the workspaces directory: {e}",
                row.id
            );
        }
        while self.workers.load(Ordering::SeqCst) < max {
            let rx = self.jobs_rx.clone();
            let me = self.me.clone();
            self.workers.fetch_add(1, Ordering::SeqCst);
            let spawned = std::thread::Builder::new()
                .name("engine-worker".into())
                .spawn(move || {
                    for job in rx.iter() {
                        match me.upgrade() {
                            Some(runs) => runs.run_job(job),
                            None => return,
                        }
                    }
                });
            if let Err(e) = spawned {
                self.workers.fetch_sub(1, Ordering::SeqCst);
                log::error!("cannot start an engine worker: {e}");
                break;
            }
        }
        // Registered dependencies: child workflows named by their id or entry path.
        let deps = version
            .as_ref()
            .map(|v| {
                v.package
                    .dependencies
                    .iter()
                    .filter_map(|d| self.versions.get(d).ok().flatten())
                    .collect()
            })
            .unwrap_or_default();
        let job = Job {
            row,
            version,
            deps,
            handle,
            workdir,
            store: Arc::clone(&self.gated),
            recovery,
            turns: Arc::clone(&self.turns),
        };
        if let Err(e) = self.jobs_tx.send(job) {
            self.turns.release(&e.0.row.id);
            log::error!("cannot dispatch a run: {e}");
        }
    }

    fn run_job(&self, job: Job) {
        let id = job.row.id.clone();
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.executor.execute(&job)));
        // However the job ended, the runs promoted after it no longer wait for it.
        self.turns.release(&id);
        let problem = match &result {
            Ok(()) => "the engine stopped without finishing the run".to_string(),
            Err(p) => format!(
                "the engine panicked: {}",
                p.downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default()
            ),
        };
        // A run that ended and was started again (a resume) before this worker got here is
        // another job's now: its new handle, or `runnable` while it waits for a slot.
        let ours = |active: &std::collections::HashMap<String, Arc<RunHandle>>| {
            active.get(&id).is_some_and(|h| Arc::ptr_eq(h, &job.handle))
        };
        {
            let _g = self.gate.lock();
            let mine = ours(&self.active.lock());
            if let (true, Ok(Some(row))) = (mine, self.store.get_run(&id)) {
                if !row.status.is_terminal()
                    && !matches!(row.status, crate::store::RunStatus::Runnable)
                {
                    let _ = self.store.append(
                        &id,
                        EventDraft::new(
                            event_kind::RUN_FAILED,
                            json!({"reason": "workflow_error", "error": problem, "causes": [], "duration_ms": 0}),
                        )
                        .actor(system_actor()),
                    );
                }
            }
        }
        {
            let mut active = self.active.lock();
            if ours(&active) {
                active.remove(&id);
            }
        }
        self.wake();
    }

    /// Removes a deleted run's sandbox, workspace and artifacts: at once when no engine runs it, else
    /// once its worker lets go of it (a cancelled stage is killed within seconds).
    pub(super) fn remove_sandbox_when_idle(&self, run_id: &str) {
        let Some(me) = self.me.upgrade() else { return };
        let id = run_id.to_string();
        let spawned = std::thread::Builder::new()
            .name("sandbox-remove".into())
            .spawn(move || {
                for _ in 0..600 {
                    if me.handle(&id).is_none() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                if let Err(e) = sandbox::remove(&me.state_dir, &id) {
                    log::warn!("run {id}: cannot remove its sandbox: {e}");
                }
                // Its artifacts go with it, once no stage can keep another.
                let removed = crate::artifacts::store_for(&me.settings.get(), &me.state_dir)
                    .map_err(|e| e.0)
                    .and_then(|store| crate::artifacts::delete_run(&store, &id));
                if let Err(e) = removed {
                    log::warn!("run {id}: cannot remove its artifacts: {e}");
                }
            });
        if let Err(e) = spawned {
            log::warn!("run {run_id}: cannot start the sandbox removal: {e}");
        }
    }
}
