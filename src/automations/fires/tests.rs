//! The dispatcher with a manual clock (no test sleeps), a real SQLite file (a restart is a
//! new dispatcher on the same file) and a launcher that records what it was asked.
//! Must not: sleep, or reach the network (deliveries are signed and checked in process).

use super::*;
use crate::base::clock::ManualClock;
use crate::store::SqliteStore;
use std::collections::HashSet;
use std::sync::atomic::AtomicUsize;

const V: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

#[derive(Default)]
struct FakeRuns {
    /// Runs made, in order (a second launch of one run id makes nothing).
    made: Mutex<Vec<String>>,
    launches: AtomicUsize,
    active: Mutex<HashSet<String>>,
    /// Every run made stays active until `finish`.
    slow: AtomicBool,
    /// The next launch makes its run, then dies (as a `kill -9` right there would).
    die_after_making: AtomicBool,
    fail: Mutex<Option<String>>,
}

impl FakeRuns {
    fn made(&self) -> Vec<String> {
        self.made.lock().clone()
    }
    fn finish_all(&self) {
        self.active.lock().clear();
    }
}

impl Launcher for FakeRuns {
    fn launch(&self, req: &LaunchRequest<'_>) -> Result<(), String> {
        self.launches.fetch_add(1, Ordering::SeqCst);
        if let Some(e) = self.fail.lock().clone() {
            return Err(e);
        }
        let mut made = self.made.lock();
        if !made.iter().any(|r| r == req.run_id) {
            made.push(req.run_id.to_string());
            if self.slow.load(Ordering::SeqCst) {
                self.active.lock().insert(req.run_id.to_string());
            }
        }
        drop(made);
        if self.die_after_making.swap(false, Ordering::SeqCst) {
            panic!("the process dies here");
        }
        Ok(())
    }
    fn is_active(&self, run_id: &str) -> bool {
        self.active.lock().contains(run_id)
    }
}

struct World {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    clock: Arc<ManualClock>,
}

fn ms(s: &str) -> i64 {
    crate::base::clock::parse_ts(s).unwrap()
}

impl World {
    fn new(start: &str) -> World {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("svc.db");
        World {
            _dir: dir,
            path,
            clock: Arc::new(ManualClock::at(ms(start))),
        }
    }

    /// A server start: the store, the catalog and a dispatcher over the same file.
    fn start(
        &self,
        runs: &Arc<FakeRuns>,
    ) -> (Arc<SqliteStore>, Arc<Catalog<Automations>>, Arc<Dispatcher>) {
        let store = Arc::new(SqliteStore::open(&self.path).unwrap());
        let catalog = Arc::new(
            Catalog::open(Automations::new(|id| id == V), Arc::clone(&store) as _).unwrap(),
        );
        let d = Dispatcher::new(
            Arc::clone(&catalog),
            Arc::clone(&store) as _,
            Arc::clone(runs) as _,
            Arc::clone(&self.clock) as _,
        );
        d.recover().unwrap();
        (store, catalog, d)
    }

    fn at(&self, t: &str) {
        self.clock.set(ms(t));
    }
}

fn create(c: &Catalog<Automations>, body: Value) {
    c.create(body.to_string().as_bytes()).unwrap();
}

fn scheduled(id: &str, expr: &str, tz: &str, policies: Value) -> Value {
    json!({"id": id, "name": id, "target": {"workflow_version_id": V},
           "triggers": [{"id": "s", "kind": "schedule", "expression": expr, "timezone": tz}],
           "policies": policies})
}

fn fires(store: &SqliteStore, id: &str) -> Vec<FireRow> {
    let mut f = store.fires_of(id, 0, 1000).unwrap();
    f.reverse();
    f
}

#[test]
fn a_schedule_fires_on_time_across_a_daylight_saving_change() {
    let w = World::new("2026-03-27T12:00:00Z");
    let runs = Arc::new(FakeRuns::default());
    let (store, catalog, d) = w.start(&runs);
    create(
        &catalog,
        scheduled("daily", "30 2 * * *", "Europe/Berlin", json!({})),
    );
    // Walk the clock through four days in 10-minute steps, ticking as the thread would.
    let end = ms("2026-03-31T00:00:00Z");
    while w.clock.now_ms() < end {
        d.tick();
        w.clock.advance(600_000);
    }
    let due: Vec<String> = fires(&store, "daily")
        .iter()
        .map(|f| f.due_at.clone().unwrap())
        .collect();
    assert_eq!(
        due,
        [
            "2026-03-28T01:30:00.000Z", // 02:30 CET
            "2026-03-29T01:00:00.000Z", // 02:30 does not exist: 03:00 CEST
            "2026-03-30T00:30:00.000Z", // 02:30 CEST
        ]
    );
    assert!(fires(&store, "daily")
        .iter()
        .all(|f| f.outcome == "created"));
    assert_eq!(runs.made().len(), 3);
    // The principal of a scheduled run.
    let req: Value = serde_json::from_str(&fires(&store, "daily")[0].request).unwrap();
    assert_eq!(
        req["created_by"],
        json!({"kind": "system", "system_kind": "engine"})
    );
}

#[test]
fn fires_missed_while_stopped_follow_the_misfire_policy() {
    for (policy, outcome) in [("skip", "skipped"), ("fire_once", "created")] {
        let w = World::new("2026-05-01T10:00:30Z");
        let runs = Arc::new(FakeRuns::default());
        let (store, catalog, d) = w.start(&runs);
        create(
            &catalog,
            scheduled("hourly", "0 * * * *", "UTC", json!({"misfire": policy})),
        );
        w.at("2026-05-01T11:00:00Z");
        d.tick();
        assert_eq!(fires(&store, "hourly").len(), 1);
        // The server stops at 11:05 and comes back at 14:20: 12:00, 13:00, 14:00 were missed.
        drop((d, catalog, store));
        w.at("2026-05-01T14:20:00Z");
        let (store, _catalog, d) = w.start(&runs);
        d.tick();
        let f = fires(&store, "hourly");
        assert_eq!(f.len(), 2, "{policy}: one record for the three missed");
        let missed = &f[1];
        assert_eq!(missed.outcome, outcome, "{policy}");
        assert_eq!(missed.due_at.as_deref(), Some("2026-05-01T14:00:00.000Z"));
        let detail = missed.detail.clone().unwrap();
        assert!(
            detail.starts_with("3 due times from 2026-05-01T12:00:00.000Z"),
            "{detail}"
        );
        if policy == "skip" {
            assert_eq!(missed.policy.as_deref(), Some("misfire"));
            assert_eq!(runs.made().len(), 1);
        } else {
            assert_eq!(runs.made().len(), 2);
        }
        // Then on schedule again from now.
        assert_eq!(d.tick(), Some(ms("2026-05-01T15:00:00Z")));
        assert_eq!(
            store.schedules_of("hourly").unwrap()[0].next_due_ms,
            ms("2026-05-01T15:00:00Z")
        );
    }
}

#[test]
fn a_slow_run_under_each_overlap_policy() {
    for policy in ["allow", "skip", "queue_one"] {
        let w = World::new("2026-05-01T10:00:30Z");
        let runs = Arc::new(FakeRuns::default());
        runs.slow.store(true, Ordering::SeqCst);
        let (store, catalog, d) = w.start(&runs);
        create(
            &catalog,
            scheduled("often", "*/5 * * * *", "UTC", json!({"overlap": policy})),
        );
        for t in ["10:05", "10:10", "10:15"] {
            w.at(&format!("2026-05-01T{t}:00Z"));
            d.tick();
        }
        let outcomes: Vec<String> = fires(&store, "often")
            .iter()
            .map(|f| f.outcome.clone())
            .collect();
        match policy {
            "allow" => assert_eq!(outcomes, ["created", "created", "created"]),
            "skip" => assert_eq!(outcomes, ["created", "skipped", "skipped"]),
            _ => assert_eq!(outcomes, ["created", "queued", "skipped"]),
        }
        // The slow run ends: a queued fire starts its run on the next look.
        runs.finish_all();
        w.at("2026-05-01T10:16:00Z");
        d.tick();
        let f = fires(&store, "often");
        if policy == "queue_one" {
            assert_eq!(f[1].outcome, "created");
            assert_eq!(runs.made().len(), 2);
            assert_eq!(runs.made()[1], f[1].run_id.clone().unwrap());
            assert_eq!(f[2].policy.as_deref(), Some("overlap"));
        }
        if policy == "skip" {
            assert!(f[1].detail.clone().unwrap().contains("is still active"));
        }
    }
}

#[test]
fn a_crash_between_the_fire_and_its_run_neither_loses_nor_doubles_it() {
    for made_before_crash in [false, true] {
        let w = World::new("2026-05-01T10:00:30Z");
        let runs = Arc::new(FakeRuns::default());
        let (store, catalog, d) = w.start(&runs);
        create(
            &catalog,
            scheduled("nightly", "0 11 * * *", "UTC", json!({})),
        );
        w.at("2026-05-01T11:00:00Z");
        if made_before_crash {
            runs.die_after_making.store(true, Ordering::SeqCst);
        } else {
            *runs.fail.lock() = Some("the process died".into());
            // A failure would be settled; a death is not: simulate it by not settling.
        }
        if made_before_crash {
            let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| d.tick()));
            assert!(died.is_err());
        } else {
            // Record the fire the way `tick` does, and die before the launch.
            let a = d.typed("nightly").unwrap();
            let mut fire = d.new_fire(
                &a,
                "s",
                TriggerKind::Schedule,
                Map::new(),
                &json!({"kind": "system", "system_kind": "engine"}),
                None,
            );
            fire.due_at = Some("2026-05-01T11:00:00.000Z".into());
            store
                .record_scheduled_fire(
                    &fire,
                    &Advance {
                        next_due_ms: ms("2026-05-02T11:00:00Z"),
                        last_due_ms: ms("2026-05-01T11:00:00Z"),
                        last_fired_at: fire.fired_at.clone(),
                    },
                )
                .unwrap();
            *runs.fail.lock() = None;
        }
        let before = runs.made();
        drop((d, catalog, store));
        // Restart a little later.
        w.at("2026-05-01T11:00:05Z");
        let (store, _c, d) = w.start(&runs);
        d.tick();
        let f = fires(&store, "nightly");
        assert_eq!(f.len(), 1, "not doubled");
        assert_eq!(f[0].outcome, "created", "not lost");
        let made = runs.made();
        assert_eq!(made.len(), 1);
        assert_eq!(made[0], f[0].run_id.clone().unwrap());
        assert_eq!(before.len(), usize::from(made_before_crash));
        assert_eq!(
            store.schedules_of("nightly").unwrap()[0].next_due_ms,
            ms("2026-05-02T11:00:00Z")
        );
    }
}

#[test]
fn webhook_deliveries_valid_forged_and_replayed() {
    let w = World::new("2026-05-01T10:00:00Z");
    let runs = Arc::new(FakeRuns::default());
    let (store, catalog, d) = w.start(&runs);
    let secret = "0123456789abcdef-secret";
    create(
        &catalog,
        json!({"id": "hooked", "name": "Hooked", "target": {"workflow_version_id": V},
        "triggers": [{"id": "in", "kind": "webhook", "secret": secret,
                      "inputs": {"pr": "$.pull_request.number", "env": "prod"}}]}),
    );
    let body = br#"{"pull_request": {"number": 42}}"#;
    let headers = |sig: Option<String>, id: &str| DeliveryHeaders {
        signature: sig,
        delivery_id: Some(id.into()),
        event: None,
    };
    // Forged and unsigned: refused, nothing recorded.
    let forged = sign("another-secret-entirely", body);
    assert!(matches!(
        d.deliver("hooked", "in", &headers(Some(forged), "d1"), body),
        Err(HookError::Unauthorized(_))
    ));
    assert!(matches!(
        d.deliver("hooked", "in", &headers(None, "d1"), body),
        Err(HookError::Unauthorized(_))
    ));
    let tampered = br#"{"pull_request": {"number": 43}}"#;
    assert!(matches!(
        d.deliver(
            "hooked",
            "in",
            &headers(Some(sign(secret, body)), "d1"),
            tampered
        ),
        Err(HookError::Unauthorized(_))
    ));
    assert!(fires(&store, "hooked").is_empty());
    // Valid: a run with the mapped inputs, by the webhook principal.
    let Delivered::Fired(f) = d
        .deliver(
            "hooked",
            "in",
            &headers(Some(sign(secret, body)), "d1"),
            body,
        )
        .unwrap()
    else {
        panic!("not fired")
    };
    assert_eq!(f.outcome, "created");
    let req: Value = serde_json::from_str(&f.request).unwrap();
    assert_eq!(req["inputs"], json!({"pr": 42, "env": "prod"}));
    assert_eq!(
        req["created_by"],
        json!({"kind": "webhook", "delivery_id": "d1"})
    );
    // Replayed: acknowledged with the first fire, nothing started.
    let again = d
        .deliver(
            "hooked",
            "in",
            &headers(Some(sign(secret, body)), "d1"),
            body,
        )
        .unwrap();
    assert!(matches!(again, Delivered::Replayed(ref r) if r.id == f.id));
    assert_eq!(runs.made().len(), 1);
    // A mapping that finds nothing: a failed fire naming the input.
    let empty = br#"{"issue": {}}"#;
    let Delivered::Fired(f) = d
        .deliver(
            "hooked",
            "in",
            &headers(Some(sign(secret, empty)), "d2"),
            empty,
        )
        .unwrap()
    else {
        panic!("not recorded")
    };
    assert_eq!(f.outcome, "failed");
    assert!(
        f.error.clone().unwrap().contains("input `pr`"),
        "{:?}",
        f.error
    );
    assert_eq!(runs.made().len(), 1);
}

#[test]
fn a_failed_fire_keeps_the_schedule() {
    let w = World::new("2026-05-01T10:00:30Z");
    let runs = Arc::new(FakeRuns::default());
    let (store, catalog, d) = w.start(&runs);
    create(&catalog, scheduled("broken", "0 * * * *", "UTC", json!({})));
    *runs.fail.lock() = Some("invalid workflow: `main.dot` does not parse".into());
    w.at("2026-05-01T11:00:00Z");
    d.tick();
    *runs.fail.lock() = None;
    w.at("2026-05-01T12:00:00Z");
    d.tick();
    let f = fires(&store, "broken");
    assert_eq!(f[0].outcome, "failed");
    assert!(f[0].error.clone().unwrap().contains("does not parse"));
    assert_eq!(f[0].run_id, None);
    assert_eq!(f[1].outcome, "created");
}

#[test]
fn catalog_writes_reschedule_and_deleting_forgets() {
    let w = World::new("2026-05-01T10:00:30Z");
    let runs = Arc::new(FakeRuns::default());
    let (store, catalog, d) = w.start(&runs);
    create(&catalog, scheduled("x", "0 * * * *", "UTC", json!({})));
    assert_eq!(d.tick(), Some(ms("2026-05-01T11:00:00Z")));
    let item = catalog.get("x").unwrap();
    let changed = scheduled("x", "30 * * * *", "UTC", json!({}));
    catalog
        .replace("x", Some(&item.revision), changed.to_string().as_bytes())
        .unwrap();
    assert_eq!(d.tick(), Some(ms("2026-05-01T10:30:00Z")));
    let item = catalog.get("x").unwrap();
    catalog.delete("x", Some(&item.revision)).unwrap();
    assert_eq!(d.tick(), None);
    assert!(store.schedules().unwrap().is_empty());
}
