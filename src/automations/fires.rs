//! Firing: turning a due schedule, an API call, a signed delivery or a code-host event into
//! a run, with every fire on record.
//!
//! **The fire protocol** (a restart neither loses nor doubles a fire):
//! 1. Decide the outcome (policies), choose the run's id (a ULID) and, for a schedule,
//!    commit the fire row (`pending`, naming that run id) and the schedule's advance in one
//!    transaction ([`AutomationTables::record_scheduled_fire`]); other triggers commit the
//!    fire row alone (a delivery id already recorded writes nothing: a replay).
//! 2. Create the run with that id and start it ([`Launcher::launch`], idempotent: a run that
//!    exists is only started if it has not been).
//! 3. Settle the fire: `created`, or `failed` with the error.
//!
//! A crash before 1 leaves the due time due (it fires after the restart, or counts as missed
//! under the misfire policy); after 1, [`Dispatcher::recover`] finishes every `pending` fire
//! by repeating 2 and 3, which finds the run if it was already made.
//!
//! **Policies**. Misfire: a schedule due time more than [`MISFIRE_GRACE_MS`] in the past when
//! the scheduler reaches it fell due while the server was down (or stalled); `skip` records
//! one `skipped` fire (policy `misfire`) for all of them, `fire_once` fires once for the
//! latest; either way the schedule goes on from now. Overlap, when the automation's latest
//! run is still active: `allow` fires; `skip` records a `skipped` fire (policy `overlap`);
//! `queue_one` records the fire `queued` (its run starts when the active one ends), and
//! skips any further fire while one is queued.
//!
//! Owns: [`Dispatcher`], fires' records and their JSON. Must not touch: HTTP, SQL, how a run
//! is made (the [`Launcher`] the server hands in).

use super::codehost;
use super::mapping;
use super::model::{
    Automation, Automations, Misfire, Overlap, Target, Trigger, TriggerKind, TriggerSpec,
};
use crate::base::clock::{format_millis, new_ulid, Clock};
use crate::catalog::{Catalog, ChangeKind};
use crate::store::{Advance, AutomationTables, FireRow, ScheduleRow, StoreError};
use hmac::{Hmac, Mac};
use parking_lot::{Condvar, Mutex};
use serde_json::{json, Map, Value};
use sha2::Sha256;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How late a schedule due time may be reached before it counts as missed.
pub const MISFIRE_GRACE_MS: i64 = 60_000;

/// How often the scheduler looks at queued fires while any wait (their runs' ends).
const QUEUED_POLL_MS: i64 = 1_000;

/// At most this many missed due times are counted for a misfire's record.
const MAX_COUNTED_MISSES: usize = 100_000;

/// What a fire asks of the server to make its run.
#[derive(Debug)]
pub struct LaunchRequest<'a> {
    /// The run's id, chosen by the fire (the run may already exist: then only start it).
    pub run_id: &'a str,
    pub automation: &'a Automation,
    pub trigger_id: &'a str,
    /// The trigger's inputs (mapped from a delivery), over the automation's own.
    pub inputs: Map<String, Value>,
    /// The run's `created_by` principal.
    pub created_by: &'a Value,
}

/// Makes runs for fires (the server's run service).
pub trait Launcher: Send + Sync {
    /// Creates the run `req.run_id` (if it does not exist) and starts it (if it has not
    /// started). The error says why the fire failed (workflow missing, clone failed,
    /// invalid workflow, ...).
    fn launch(&self, req: &LaunchRequest<'_>) -> Result<(), String>;
    /// Whether the run is still going (exists and has not ended).
    fn is_active(&self, run_id: &str) -> bool;
}

/// Why a hook delivery was refused (nothing recorded).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Disabled(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Store(String),
}

/// Why an API fire did not make a run.
#[derive(Debug, thiserror::Error)]
pub enum ApiFireError {
    #[error("no automation with id `{0}`")]
    NotFound(String),
    #[error("automation `{0}` has no enabled api trigger")]
    Disabled(String),
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// What a delivery did.
#[derive(Debug, Clone)]
pub enum Delivered {
    /// A fire was recorded (whatever its outcome).
    Fired(FireRow),
    /// The delivery id was seen before: this is its fire; nothing new happened.
    Replayed(FireRow),
    /// A code-host event the trigger does not listen to, or its filter refuses.
    Ignored(String),
}

/// A delivery's headers that matter.
#[derive(Debug, Default, Clone)]
pub struct DeliveryHeaders {
    /// `X-Svc-Signature-256` (or GitHub's `X-Hub-Signature-256`): `sha256=<hex>`.
    pub signature: Option<String>,
    /// `X-Svc-Delivery` (or `X-GitHub-Delivery`).
    pub delivery_id: Option<String>,
    /// `X-GitHub-Event` (or `X-Svc-Event`): code-host triggers only.
    pub event: Option<String>,
}

/// A schedule in memory: its row and parsed schedule.
struct Due {
    row: ScheduleRow,
}

#[derive(Default)]
struct Index {
    /// (next due, automation, trigger), earliest first.
    queue: BTreeSet<(i64, String, String)>,
    /// By (automation, trigger): an automation's rows are one range.
    rows: BTreeMap<(String, String), Due>,
    /// Automations with fires `queued` behind an active run.
    queued: usize,
}

impl Index {
    /// The schedule rows of automation `id`, by trigger id.
    fn rows_of(&self, id: &str) -> Vec<ScheduleRow> {
        self.rows
            .range((id.to_string(), String::new())..)
            .take_while(|((a, _), _)| a == id)
            .map(|(_, d)| d.row.clone())
            .collect()
    }
}

/// Fires automations: the scheduler's work, API fires and deliveries.
pub struct Dispatcher {
    catalog: Arc<Catalog<Automations>>,
    tables: Arc<dyn AutomationTables>,
    launcher: Arc<dyn Launcher>,
    clock: Arc<dyn Clock>,
    index: Mutex<Index>,
    /// Typed automations by id, with the revision they were read at.
    typed_cache: Mutex<std::collections::HashMap<String, (String, Arc<Automation>)>>,
    /// Serialises fires of one process: decisions (overlap) see every earlier fire.
    firing: Mutex<()>,
    wake: Mutex<bool>,
    woken: Condvar,
    stop: AtomicBool,
}

type HmacSha256 = Hmac<Sha256>;

/// `sha256=<hex HMAC-SHA256 of body with secret>`, compared in constant time.
pub fn signature_ok(secret: &str, body: &[u8], header: &str) -> bool {
    let Some(hex) = header.trim().strip_prefix("sha256=") else {
        return false;
    };
    let Some(sig) = decode_hex(hex) else {
        return false;
    };
    let Ok(mut mac) = HmacSha256::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&sig).is_ok()
}

/// The header value a sender puts on `body` (tests, clients).
pub fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(body);
    format!("sha256={}", crate::base::hex(&mac.finalize().into_bytes()))
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A fire's JSON (`GET /automations/{id}/fires`).
pub fn fire_json(f: &FireRow) -> Value {
    json!({
        "id": f.id,
        "automation_id": f.automation_id,
        "trigger_id": f.trigger_id,
        "trigger_kind": f.trigger_kind,
        "due_at": f.due_at,
        "fired_at": f.fired_at,
        "outcome": f.outcome,
        "policy": f.policy,
        "error": f.error,
        "detail": f.detail,
        "run_id": f.run_id,
        "delivery_id": f.delivery_id,
    })
}

/// What the policies decided for a fire about to be recorded.
enum Decision {
    Run,
    Queue,
    Skip(&'static str, String),
}

impl Dispatcher {
    pub fn new(
        catalog: Arc<Catalog<Automations>>,
        tables: Arc<dyn AutomationTables>,
        launcher: Arc<dyn Launcher>,
        clock: Arc<dyn Clock>,
    ) -> Arc<Dispatcher> {
        Arc::new(Dispatcher {
            catalog,
            tables,
            launcher,
            clock,
            index: Mutex::new(Index::default()),
            typed_cache: Mutex::new(std::collections::HashMap::new()),
            firing: Mutex::new(()),
            wake: Mutex::new(false),
            woken: Condvar::new(),
            stop: AtomicBool::new(false),
        })
    }

    /// Loads the schedules, brings them in line with the catalog, finishes the fires a
    /// crash left `pending`, and listens to catalog writes. Call once at startup, before
    /// [`Dispatcher::start`].
    pub fn recover(self: &Arc<Self>) -> Result<usize, StoreError> {
        {
            let mut idx = self.index.lock();
            for row in self.tables.schedules()? {
                idx.queue.insert((
                    row.next_due_ms,
                    row.automation_id.clone(),
                    row.trigger_id.clone(),
                ));
                idx.rows.insert(
                    (row.automation_id.clone(), row.trigger_id.clone()),
                    Due { row },
                );
            }
        }
        let mut known: BTreeSet<String> =
            self.catalog.list().iter().map(|i| i.id.clone()).collect();
        for row in self.tables.schedules()? {
            known.insert(row.automation_id);
        }
        for id in &known {
            self.reconcile(id)?;
        }
        let mut finished = 0;
        let open = self.tables.open_fires()?;
        self.index.lock().queued = open.iter().filter(|f| f.outcome == "queued").count();
        for fire in open.into_iter().filter(|f| f.outcome == "pending") {
            let _g = self.firing.lock();
            self.launch_and_settle(fire);
            finished += 1;
        }
        let me = Arc::downgrade(self);
        self.catalog.on_change(move |id, _change: ChangeKind| {
            if let Some(d) = me.upgrade() {
                if let Err(e) = d.reconcile(id) {
                    log::error!("automation {id}: cannot update its schedules: {e}");
                }
                d.wake();
            }
        });
        Ok(finished)
    }

    /// Brings automation `id`'s schedule rows in line with its definition: a new or changed
    /// schedule trigger is due next after now; an unchanged one keeps its next due time
    /// (a restart sees what it missed); a removed or disabled one, or a deleted automation,
    /// loses its row (a deleted automation its fires too).
    pub fn reconcile(&self, id: &str) -> Result<(), StoreError> {
        let automation = self.typed(id);
        let now = self.clock.now_ms();
        let wanted: Vec<(String, String, String, i64)> = automation
            .as_ref()
            .map(|a| {
                a.triggers
                    .iter()
                    .filter(|t| t.enabled)
                    .filter_map(|t| match &t.spec {
                        TriggerSpec::Schedule {
                            expression,
                            timezone,
                            schedule,
                        } => Some((
                            t.id.clone(),
                            expression.clone(),
                            timezone.clone(),
                            schedule.next_after(now).unwrap_or(i64::MAX),
                        )),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut idx = self.index.lock();
        let existing: Vec<ScheduleRow> = idx.rows_of(id);
        for old in &existing {
            if !wanted.iter().any(|w| w.0 == old.trigger_id) {
                self.tables.drop_schedule(id, &old.trigger_id)?;
                idx.queue.remove(&(
                    old.next_due_ms,
                    old.automation_id.clone(),
                    old.trigger_id.clone(),
                ));
                idx.rows
                    .remove(&(old.automation_id.clone(), old.trigger_id.clone()));
            }
        }
        for (trigger_id, expression, timezone, next) in wanted {
            let old = existing.iter().find(|o| o.trigger_id == trigger_id);
            if old.is_some_and(|o| o.expression == expression && o.timezone == timezone) {
                continue;
            }
            let row = ScheduleRow {
                automation_id: id.to_string(),
                trigger_id: trigger_id.clone(),
                expression,
                timezone,
                next_due_ms: next,
                last_due_ms: old.and_then(|o| o.last_due_ms),
                last_fired_at: old.and_then(|o| o.last_fired_at.clone()),
            };
            self.tables.put_schedule(&row)?;
            if let Some(o) = old {
                idx.queue
                    .remove(&(o.next_due_ms, o.automation_id.clone(), o.trigger_id.clone()));
            }
            idx.queue.insert((next, id.to_string(), trigger_id.clone()));
            idx.rows.insert((id.to_string(), trigger_id), Due { row });
        }
        drop(idx);
        if automation.is_none() {
            self.typed_cache.lock().remove(id);
            self.tables.forget_automation(id)?;
        }
        Ok(())
    }

    /// The automation `id` in its typed form, read once per revision.
    fn typed(&self, id: &str) -> Option<Arc<Automation>> {
        let item = self.catalog.get(id).ok()?;
        if let Some((rev, a)) = self.typed_cache.lock().get(id) {
            if *rev == item.revision {
                return Some(Arc::clone(a));
            }
        }
        match self.catalog.kind().typed(id, &item.definition) {
            Ok(a) => {
                let a = Arc::new(a);
                self.typed_cache
                    .lock()
                    .insert(id.to_string(), (item.revision.clone(), Arc::clone(&a)));
                Some(a)
            }
            Err(e) => {
                log::error!("automation {id} is stored but does not read back: {e:?}");
                None
            }
        }
    }

    /// An automation's fires, newest first.
    pub fn fires_of(
        &self,
        id: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<FireRow>, StoreError> {
        self.tables.fires_of(id, offset, limit)
    }

    /// The schedule rows of automation `id` (next due, last fired), for views.
    pub fn schedules_of(&self, id: &str) -> Vec<ScheduleRow> {
        let idx = self.index.lock();
        idx.rows_of(id)
    }

    /// Fires everything due at the clock's now; returns when to look again (Unix ms).
    pub fn tick(&self) -> Option<i64> {
        let now = self.clock.now_ms();
        loop {
            let next = self.index.lock().queue.iter().next().cloned();
            match next {
                Some((due, a, t)) if due <= now => self.fire_schedule(&a, &t, due, now),
                _ => break,
            }
        }
        if self.index.lock().queued > 0 {
            self.release_queued();
        }
        let idx = self.index.lock();
        let next = idx.queue.iter().next().map(|(d, _, _)| *d);
        if idx.queued > 0 {
            let poll = now + QUEUED_POLL_MS;
            return Some(next.map_or(poll, |n| n.min(poll)));
        }
        next
    }

    /// One due schedule trigger (see the module docs for the misfire rule).
    fn fire_schedule(&self, automation_id: &str, trigger_id: &str, due: i64, now: i64) {
        let _g = self.firing.lock();
        let key = (automation_id.to_string(), trigger_id.to_string());
        let automation = self.typed(automation_id);
        let schedule = automation
            .as_ref()
            .and_then(|a| match a.trigger(trigger_id) {
                Some(Trigger {
                    enabled: true,
                    spec: TriggerSpec::Schedule { schedule, .. },
                    ..
                }) => Some(schedule.clone()),
                _ => None,
            });
        let (Some(a), Some(schedule)) = (automation, schedule) else {
            // Gone or changed under us: the catalog listener reconciles; drop the stale entry.
            let mut idx = self.index.lock();
            idx.queue.remove(&(due, key.0.clone(), key.1.clone()));
            idx.rows.remove(&key);
            drop(idx);
            let _ = self.tables.drop_schedule(automation_id, trigger_id);
            return;
        };
        let late = now - due > MISFIRE_GRACE_MS;
        let (fired_due, next, detail) = if late {
            let mut last = due;
            let mut n = 1usize;
            while let Some(x) = schedule.next_after(last) {
                if x > now || n >= MAX_COUNTED_MISSES {
                    break;
                }
                last = x;
                n += 1;
            }
            let detail = if n == 1 {
                format!("{} fell due while the server was down", format_millis(due))
            } else {
                format!(
                    "{n} due times from {} to {} fell due while the server was down",
                    format_millis(due),
                    format_millis(last)
                )
            };
            (last, schedule.next_after(now), Some(detail))
        } else {
            (due, schedule.next_after(due), None)
        };
        let next = next.unwrap_or(i64::MAX);
        let created_by = json!({"kind": "system", "system_kind": "engine"});
        let mut fire = self.new_fire(
            &a,
            trigger_id,
            TriggerKind::Schedule,
            Map::new(),
            &created_by,
            None,
        );
        fire.due_at = Some(format_millis(fired_due));
        fire.detail = detail;
        if late && a.misfire == Misfire::Skip {
            skip(&mut fire, "misfire");
        } else {
            self.apply_overlap(&a, &mut fire);
        }
        let advance = Advance {
            next_due_ms: next,
            last_due_ms: fired_due,
            last_fired_at: fire.fired_at.clone(),
        };
        if let Err(e) = self.tables.record_scheduled_fire(&fire, &advance) {
            // Nothing was written: the due time stays due; try again on the next wake.
            log::error!("automation {automation_id}: cannot record a fire of {trigger_id}: {e}");
            return;
        }
        {
            let mut idx = self.index.lock();
            idx.queue.remove(&(due, key.0.clone(), key.1.clone()));
            idx.queue.insert((next, key.0.clone(), key.1.clone()));
            if let Some(d) = idx.rows.get_mut(&key) {
                d.row.next_due_ms = next;
                d.row.last_due_ms = Some(fired_due);
                d.row.last_fired_at = Some(advance.last_fired_at.clone());
            }
            if fire.outcome == "queued" {
                idx.queued += 1;
            }
        }
        if fire.outcome == "pending" {
            // The end-to-end test of the protocol kills the server here: the fire and the
            // schedule's advance are committed, the run does not exist yet.
            #[cfg(feature = "test-support")]
            crate::base::test_hooks::pause_point_for_tests(
                "fire_recorded",
                fire.run_id.as_deref().unwrap_or_default(),
            );
            self.launch_and_settle(fire);
        }
    }

    fn new_fire(
        &self,
        a: &Automation,
        trigger_id: &str,
        kind: TriggerKind,
        inputs: Map<String, Value>,
        created_by: &Value,
        delivery_id: Option<&str>,
    ) -> FireRow {
        FireRow {
            id: new_ulid(),
            automation_id: a.id.clone(),
            trigger_id: trigger_id.to_string(),
            trigger_kind: kind.name().to_string(),
            due_at: None,
            fired_at: format_millis(self.clock.now_ms()),
            outcome: "pending".into(),
            policy: None,
            error: None,
            detail: None,
            run_id: Some(new_ulid()),
            delivery_id: delivery_id.map(str::to_string),
            request: json!({"inputs": inputs, "created_by": created_by}).to_string(),
        }
    }

    /// Sets `fire`'s outcome by the overlap policy (it stays `pending` when it may run).
    fn apply_overlap(&self, a: &Automation, fire: &mut FireRow) {
        match self.decide_overlap(a) {
            Decision::Run => {}
            Decision::Queue => fire.outcome = "queued".into(),
            Decision::Skip(policy, detail) => {
                skip(fire, policy);
                fire.detail = Some(match fire.detail.take() {
                    Some(d) => format!("{d}; {detail}"),
                    None => detail,
                });
            }
        }
    }

    fn decide_overlap(&self, a: &Automation) -> Decision {
        if a.overlap == Overlap::Allow {
            return Decision::Run;
        }
        let open: Vec<FireRow> = self
            .tables
            .open_fires()
            .unwrap_or_default()
            .into_iter()
            .filter(|f| f.automation_id == a.id && f.outcome == "queued")
            .collect();
        let active = self
            .tables
            .latest_run(&a.id)
            .ok()
            .flatten()
            .filter(|r| self.launcher.is_active(r));
        match (a.overlap, active, open.first()) {
            (Overlap::QueueOne, _, Some(q)) => Decision::Skip(
                "overlap",
                format!("fire {} is already queued behind the active run", q.id),
            ),
            (_, None, _) => Decision::Run,
            (Overlap::Skip, Some(run), _) => {
                Decision::Skip("overlap", format!("run {run} is still active"))
            }
            (Overlap::QueueOne, Some(_), None) => Decision::Queue,
            (Overlap::Allow, Some(_), _) => Decision::Run,
        }
    }

    /// Starts the runs of queued fires whose automation has no active run any more.
    fn release_queued(&self) {
        let _g = self.firing.lock();
        let open = self.tables.open_fires().unwrap_or_default();
        let mut queued = 0;
        for mut fire in open.into_iter().filter(|f| f.outcome == "queued") {
            let active = self
                .tables
                .latest_run(&fire.automation_id)
                .ok()
                .flatten()
                .is_some_and(|r| self.launcher.is_active(&r));
            if active {
                queued += 1;
                continue;
            }
            fire.outcome = "pending".into();
            if let Err(e) = self.tables.settle_fire(&fire) {
                log::error!("fire {}: cannot release it: {e}", fire.id);
                queued += 1;
                continue;
            }
            self.launch_and_settle(fire);
        }
        self.index.lock().queued = queued;
    }

    /// Steps 2 and 3 of the protocol for a `pending` fire.
    fn launch_and_settle(&self, mut fire: FireRow) -> FireRow {
        let request: Value = serde_json::from_str(&fire.request).unwrap_or(Value::Null);
        let inputs = request
            .get("inputs")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let created_by = request.get("created_by").cloned().unwrap_or(Value::Null);
        let result = match (self.typed(&fire.automation_id), fire.run_id.clone()) {
            (Some(a), Some(run_id)) => self.launcher.launch(&LaunchRequest {
                run_id: &run_id,
                automation: &a,
                trigger_id: &fire.trigger_id,
                inputs,
                created_by: &created_by,
            }),
            (None, _) => Err("the automation was deleted before its run was made".into()),
            (_, None) => Err("the fire names no run".into()),
        };
        // ... and here: the run exists (and started), the fire is still `pending`.
        #[cfg(feature = "test-support")]
        if result.is_ok() {
            crate::base::test_hooks::pause_point_for_tests(
                "fire_launched",
                fire.run_id.as_deref().unwrap_or_default(),
            );
        }
        match result {
            Ok(()) => fire.outcome = "created".into(),
            Err(e) => {
                fire.outcome = "failed".into();
                fire.error = Some(e);
                fire.run_id = None;
            }
        }
        if let Err(e) = self.tables.settle_fire(&fire) {
            // It stays `pending`: the next start finishes it (the launch is idempotent).
            log::error!("fire {}: cannot record its outcome: {e}", fire.id);
        }
        fire
    }

    /// `POST /automations/{id}/runs`: fires the `api` trigger now, for `principal`.
    pub fn fire_api(&self, id: &str, principal: &Value) -> Result<FireRow, ApiFireError> {
        let a = self
            .typed(id)
            .ok_or_else(|| ApiFireError::NotFound(id.to_string()))?;
        let trigger = a
            .api_trigger()
            .ok_or_else(|| ApiFireError::Disabled(id.to_string()))?
            .id
            .clone();
        let _g = self.firing.lock();
        let mut fire = self.new_fire(&a, &trigger, TriggerKind::Api, Map::new(), principal, None);
        self.apply_overlap(&a, &mut fire);
        self.record(fire)
    }

    /// Records a non-schedule fire and, when it may run, makes its run.
    fn record(&self, fire: FireRow) -> Result<FireRow, ApiFireError> {
        self.tables.record_fire(&fire)?;
        Ok(self.after_record(fire))
    }

    fn after_record(&self, fire: FireRow) -> FireRow {
        match fire.outcome.as_str() {
            "pending" => self.launch_and_settle(fire),
            "queued" => {
                self.index.lock().queued += 1;
                self.wake();
                fire
            }
            _ => fire,
        }
    }

    /// `POST /automations/{id}/hooks/{trigger_id}`: a delivery to a webhook or code-host
    /// trigger. The signature is checked before anything else is read.
    pub fn deliver(
        &self,
        automation_id: &str,
        trigger_id: &str,
        headers: &DeliveryHeaders,
        body: &[u8],
    ) -> Result<Delivered, HookError> {
        let not_found = || {
            HookError::NotFound(format!(
                "No webhook or code-host trigger `{trigger_id}` on automation `{automation_id}`."
            ))
        };
        let a = self.typed(automation_id).ok_or_else(not_found)?;
        let trigger = a.trigger(trigger_id).ok_or_else(not_found)?.clone();
        let secret = match &trigger.spec {
            TriggerSpec::Webhook { secret, .. } => secret.clone(),
            TriggerSpec::Codehost { secret: Some(s), .. } => s.clone(),
            TriggerSpec::Codehost { secret: None, .. } => {
                return Err(HookError::Unauthorized(format!(
                    "Trigger `{trigger_id}` has no secret: it takes events from the code-host integration only."
                )))
            }
            _ => return Err(not_found()),
        };
        let signature = headers.signature.as_deref().ok_or_else(|| {
            HookError::Unauthorized(
                "Missing X-Svc-Signature-256 (sha256=<hex HMAC-SHA256 of the body>).".into(),
            )
        })?;
        if !signature_ok(&secret, body, signature) {
            return Err(HookError::Unauthorized(
                "X-Svc-Signature-256 does not match the body and the trigger's secret.".into(),
            ));
        }
        if !trigger.enabled {
            return Err(HookError::Disabled(format!(
                "Trigger `{trigger_id}` of automation `{automation_id}` is disabled."
            )));
        }
        let delivery = headers
            .delivery_id
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty() && d.len() <= 200)
            .ok_or_else(|| {
                HookError::BadRequest(
                    "Missing X-Svc-Delivery: a unique id per delivery (replays are recognised by it)."
                        .into(),
                )
            })?;
        let payload: Value = serde_json::from_slice(body)
            .map_err(|e| HookError::BadRequest(format!("Malformed JSON in the delivery: {e}")))?;
        self.fire_delivery(&a, &trigger, delivery, headers.event.as_deref(), &payload)
    }

    /// A verified delivery to one trigger.
    fn fire_delivery(
        &self,
        a: &Automation,
        trigger: &Trigger,
        delivery: &str,
        event: Option<&str>,
        payload: &Value,
    ) -> Result<Delivered, HookError> {
        let store = |e: StoreError| HookError::Store(e.to_string());
        let _g = self.firing.lock();
        if let Some(seen) = self
            .tables
            .fire_of_delivery(&a.id, &trigger.id, delivery)
            .map_err(store)?
        {
            return Ok(Delivered::Replayed(seen));
        }
        let mapping = match &trigger.spec {
            TriggerSpec::Webhook { inputs, .. } => inputs,
            TriggerSpec::Codehost {
                inputs,
                events,
                filter,
                ..
            } => {
                let Some(name) = event.and_then(|e| codehost::event_name(e, payload)) else {
                    return Ok(Delivered::Ignored(format!(
                        "event `{}` is not one a code-host trigger listens to",
                        event.unwrap_or("")
                    )));
                };
                if !events.contains(&name) {
                    return Ok(Delivered::Ignored(format!(
                        "trigger `{}` does not listen to `{name}`",
                        trigger.id
                    )));
                }
                if let Err(why) = codehost::matches(filter, &name, payload) {
                    return Ok(Delivered::Ignored(why));
                }
                inputs
            }
            _ => return Err(HookError::NotFound("not a hook trigger".into())),
        };
        let created_by = json!({"kind": "webhook", "delivery_id": delivery});
        let mut fire = self.new_fire(
            a,
            &trigger.id,
            trigger.kind(),
            Map::new(),
            &created_by,
            Some(delivery),
        );
        match mapping::apply(mapping, payload) {
            Ok(inputs) => {
                fire.request = json!({"inputs": inputs, "created_by": created_by}).to_string();
                self.apply_overlap(a, &mut fire);
            }
            Err(e) => {
                fire.outcome = "failed".into();
                fire.error = Some(format!("input mapping failed: {e}"));
                fire.run_id = None;
            }
        }
        if !self.tables.record_fire(&fire).map_err(store)? {
            let seen = self
                .tables
                .fire_of_delivery(&a.id, &trigger.id, delivery)
                .map_err(store)?
                .ok_or_else(|| HookError::Store("a replayed delivery has no fire".into()))?;
            return Ok(Delivered::Replayed(seen));
        }
        Ok(Delivered::Fired(self.after_record(fire)))
    }

    /// A code-host event from the integrations endpoint (which has verified it): fires every
    /// enabled `codehost` trigger of every automation that listens to it. `event` is the
    /// `X-GitHub-Event` header; `delivery_id` dedupes per trigger.
    pub fn codehost_event(&self, event: &str, delivery_id: &str, payload: &Value) -> Vec<FireRow> {
        let mut fired = Vec::new();
        for item in self.catalog.list() {
            let Some(a) = self.typed(&item.id) else {
                continue;
            };
            for t in a
                .triggers
                .iter()
                .filter(|t| t.enabled && t.kind() == TriggerKind::Codehost)
            {
                match self.fire_delivery(&a, t, delivery_id, Some(event), payload) {
                    Ok(Delivered::Fired(f)) => fired.push(f),
                    Ok(_) => {}
                    Err(e) => log::error!("automation {}: a code-host event: {e}", a.id),
                }
            }
        }
        fired
    }

    /// Wakes the scheduler thread (a catalog write, a fire queued).
    pub fn wake(&self) {
        *self.wake.lock() = true;
        self.woken.notify_one();
    }

    /// Starts the scheduler thread: it fires what is due, then sleeps until the next due
    /// time (or a wake). Its clock only decides what is due; sleeping is real time.
    pub fn start(self: &Arc<Self>) -> std::io::Result<()> {
        let me = Arc::clone(self);
        std::thread::Builder::new()
            .name("automations".into())
            .spawn(move || me.run())?;
        Ok(())
    }

    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake();
    }

    fn run(&self) {
        while !self.stop.load(Ordering::SeqCst) {
            let next = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.tick()))
            {
                Ok(n) => n,
                Err(_) => {
                    log::error!("automations: a tick panicked; looking again in a second");
                    Some(self.clock.now_ms() + 1_000)
                }
            };
            let mut woken = self.wake.lock();
            if !*woken {
                match next {
                    Some(at) => {
                        let ms = (at - self.clock.now_ms()).clamp(0, 3_600_000);
                        if ms > 0 {
                            self.woken
                                .wait_for(&mut woken, Duration::from_millis(ms as u64));
                        }
                    }
                    None => self.woken.wait(&mut woken),
                }
            }
            *woken = false;
        }
    }

    /// The target a view shows for the automation's runs (for messages).
    pub fn describe_target(t: &Target) -> String {
        match t {
            Target::Version { id } => format!("workflow version {id}"),
            Target::Repository {
                origin_url,
                reference,
                workflow,
            } => format!("{workflow} in {origin_url} at {reference}"),
        }
    }
}

fn skip(fire: &mut FireRow, policy: &str) {
    fire.outcome = "skipped".into();
    fire.policy = Some(policy.to_string());
    fire.run_id = None;
}

#[cfg(test)]
mod tests;
