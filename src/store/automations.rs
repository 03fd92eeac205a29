//! The automations' working tables (schema migration 5): each schedule trigger's next due
//! time (`automation_schedules`) and every fire (`automation_fires`).
//!
//! The fire protocol's durable step is [`AutomationTables::record_scheduled_fire`]: the fire
//! row (with the run id it will create) and the schedule's advance commit in one
//! transaction, so after a crash a due time has either not fired (the schedule still shows
//! it due) or fired exactly once (the fire row names the run to create, idempotently).
//! Deliveries are deduplicated by a unique index on (automation, trigger, delivery id).
//!
//! Owns: these tables' SQL. Must not touch: what an automation is, when it fires.

use super::error::StoreError;
use super::SqliteStore;
use rusqlite::{params, Connection, OptionalExtension};

/// One schedule trigger's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRow {
    pub automation_id: String,
    pub trigger_id: String,
    pub expression: String,
    pub timezone: String,
    /// Unix milliseconds.
    pub next_due_ms: i64,
    pub last_due_ms: Option<i64>,
    pub last_fired_at: Option<String>,
}

/// One fire, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireRow {
    /// A ULID (fires list newest first by id).
    pub id: String,
    pub automation_id: String,
    pub trigger_id: String,
    /// `api`, `schedule`, `webhook` or `codehost`.
    pub trigger_kind: String,
    /// When a schedule fire fell due.
    pub due_at: Option<String>,
    pub fired_at: String,
    /// `pending` (recorded, its run not yet confirmed), `queued` (waiting for the previous
    /// run: overlap `queue_one`), `created`, `skipped`, `failed`.
    pub outcome: String,
    /// What skipped it: `misfire` or `overlap`.
    pub policy: Option<String>,
    pub error: Option<String>,
    pub detail: Option<String>,
    /// The run this fire creates (chosen before it is created) or created.
    pub run_id: Option<String>,
    pub delivery_id: Option<String>,
    /// JSON: what the run is created from (inputs, principal).
    pub request: String,
}

/// A schedule advance committed with a fire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advance {
    pub next_due_ms: i64,
    pub last_due_ms: i64,
    pub last_fired_at: String,
}

/// Where automations keep their schedules and fires.
pub trait AutomationTables: Send + Sync {
    /// Every schedule row.
    fn schedules(&self) -> Result<Vec<ScheduleRow>, StoreError>;
    /// The schedule rows of one automation.
    fn schedules_of(&self, automation_id: &str) -> Result<Vec<ScheduleRow>, StoreError>;
    /// Inserts or replaces a schedule row.
    fn put_schedule(&self, row: &ScheduleRow) -> Result<(), StoreError>;
    /// Removes a schedule row.
    fn drop_schedule(&self, automation_id: &str, trigger_id: &str) -> Result<(), StoreError>;
    /// Records `fire` and advances its schedule, in one transaction.
    fn record_scheduled_fire(&self, fire: &FireRow, advance: &Advance) -> Result<(), StoreError>;
    /// Records `fire`; false (nothing written) when its delivery id was seen before.
    fn record_fire(&self, fire: &FireRow) -> Result<bool, StoreError>;
    /// Sets a fire's outcome (and its run id, policy, error).
    fn settle_fire(&self, fire: &FireRow) -> Result<(), StoreError>;
    /// One fire.
    fn fire(&self, id: &str) -> Result<Option<FireRow>, StoreError>;
    /// The fire of a delivery.
    fn fire_of_delivery(
        &self,
        automation_id: &str,
        trigger_id: &str,
        delivery_id: &str,
    ) -> Result<Option<FireRow>, StoreError>;
    /// An automation's fires, newest first.
    fn fires_of(
        &self,
        automation_id: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<FireRow>, StoreError>;
    /// Fires still `pending` or `queued`, oldest first.
    fn open_fires(&self) -> Result<Vec<FireRow>, StoreError>;
    /// The run of the automation's latest fire that has (or will have) one.
    fn latest_run(&self, automation_id: &str) -> Result<Option<String>, StoreError>;
    /// Forgets a deleted automation's schedules and fires.
    fn forget_automation(&self, automation_id: &str) -> Result<(), StoreError>;
}

fn err(op: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    StoreError::db_global(op)
}

const SCHEDULE_COLUMNS: &str =
    "automation_id, trigger_id, expression, timezone, next_due_ms, last_due_ms, last_fired_at";

fn schedule_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<ScheduleRow> {
    Ok(ScheduleRow {
        automation_id: r.get(0)?,
        trigger_id: r.get(1)?,
        expression: r.get(2)?,
        timezone: r.get(3)?,
        next_due_ms: r.get(4)?,
        last_due_ms: r.get(5)?,
        last_fired_at: r.get(6)?,
    })
}

const FIRE_COLUMNS: &str = "id, automation_id, trigger_id, trigger_kind, due_at, fired_at, \
                            outcome, policy, error, detail, run_id, delivery_id, request";

fn fire_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<FireRow> {
    Ok(FireRow {
        id: r.get(0)?,
        automation_id: r.get(1)?,
        trigger_id: r.get(2)?,
        trigger_kind: r.get(3)?,
        due_at: r.get(4)?,
        fired_at: r.get(5)?,
        outcome: r.get(6)?,
        policy: r.get(7)?,
        error: r.get(8)?,
        detail: r.get(9)?,
        run_id: r.get(10)?,
        delivery_id: r.get(11)?,
        request: r.get(12)?,
    })
}

fn insert_fire(conn: &Connection, f: &FireRow, or_ignore: bool) -> rusqlite::Result<usize> {
    conn.prepare_cached(&format!(
        "INSERT INTO automation_fires ({FIRE_COLUMNS}) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13){}",
        // Only uniqueness (a repeated delivery) is let through; CHECKs still refuse.
        if or_ignore {
            " ON CONFLICT DO NOTHING"
        } else {
            ""
        }
    ))?
    .execute(params![
        f.id,
        f.automation_id,
        f.trigger_id,
        f.trigger_kind,
        f.due_at,
        f.fired_at,
        f.outcome,
        f.policy,
        f.error,
        f.detail,
        f.run_id,
        f.delivery_id,
        f.request
    ])
}

fn fires_query(
    conn: &Connection,
    sql_tail: &str,
    args: impl rusqlite::Params,
) -> rusqlite::Result<Vec<FireRow>> {
    conn.prepare_cached(&format!(
        "SELECT {FIRE_COLUMNS} FROM automation_fires {sql_tail}"
    ))?
    .query_map(args, fire_of)?
    .collect()
}

impl AutomationTables for SqliteStore {
    fn schedules(&self) -> Result<Vec<ScheduleRow>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(&format!(
                "SELECT {SCHEDULE_COLUMNS} FROM automation_schedules"
            ))
            .and_then(|mut st| st.query_map([], schedule_of)?.collect())
            .map_err(err("reading schedules"))
        })
    }

    fn schedules_of(&self, automation_id: &str) -> Result<Vec<ScheduleRow>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(&format!(
                "SELECT {SCHEDULE_COLUMNS} FROM automation_schedules WHERE automation_id = ?1"
            ))
            .and_then(|mut st| st.query_map([automation_id], schedule_of)?.collect())
            .map_err(err("reading schedules"))
        })
    }

    fn put_schedule(&self, row: &ScheduleRow) -> Result<(), StoreError> {
        self.write("storing a schedule", |conn| {
            conn.prepare_cached(&format!(
                "INSERT OR REPLACE INTO automation_schedules ({SCHEDULE_COLUMNS}) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
            ))
            .and_then(|mut st| {
                st.execute(params![
                    row.automation_id,
                    row.trigger_id,
                    row.expression,
                    row.timezone,
                    row.next_due_ms,
                    row.last_due_ms,
                    row.last_fired_at
                ])
            })
            .map(|_| ())
            .map_err(err("storing a schedule"))
        })
    }

    fn drop_schedule(&self, automation_id: &str, trigger_id: &str) -> Result<(), StoreError> {
        self.write("removing a schedule", |conn| {
            conn.prepare_cached(
                "DELETE FROM automation_schedules WHERE automation_id = ?1 AND trigger_id = ?2",
            )
            .and_then(|mut st| st.execute([automation_id, trigger_id]))
            .map(|_| ())
            .map_err(err("removing a schedule"))
        })
    }

    fn record_scheduled_fire(&self, fire: &FireRow, advance: &Advance) -> Result<(), StoreError> {
        self.write("recording a fire", |conn| {
            insert_fire(conn, fire, false).map_err(err("recording a fire"))?;
            conn.prepare_cached(
                "UPDATE automation_schedules SET next_due_ms = ?3, last_due_ms = ?4, \
                 last_fired_at = ?5 WHERE automation_id = ?1 AND trigger_id = ?2",
            )
            .and_then(|mut st| {
                st.execute(params![
                    fire.automation_id,
                    fire.trigger_id,
                    advance.next_due_ms,
                    advance.last_due_ms,
                    advance.last_fired_at
                ])
            })
            .map(|_| ())
            .map_err(err("advancing a schedule"))
        })
    }

    fn record_fire(&self, fire: &FireRow) -> Result<bool, StoreError> {
        self.write("recording a fire", |conn| {
            insert_fire(conn, fire, true)
                .map(|n| n == 1)
                .map_err(err("recording a fire"))
        })
    }

    fn settle_fire(&self, f: &FireRow) -> Result<(), StoreError> {
        self.write("settling a fire", |conn| {
            conn.prepare_cached(
                "UPDATE automation_fires SET outcome = ?2, policy = ?3, error = ?4, detail = ?5, \
                 run_id = ?6 WHERE id = ?1",
            )
            .and_then(|mut st| {
                st.execute(params![
                    f.id, f.outcome, f.policy, f.error, f.detail, f.run_id
                ])
            })
            .map(|_| ())
            .map_err(err("settling a fire"))
        })
    }

    fn fire(&self, id: &str) -> Result<Option<FireRow>, StoreError> {
        self.read(|conn| {
            fires_query(conn, "WHERE id = ?1", [id])
                .map(|mut v| v.pop())
                .map_err(err("reading a fire"))
        })
    }

    fn fire_of_delivery(
        &self,
        automation_id: &str,
        trigger_id: &str,
        delivery_id: &str,
    ) -> Result<Option<FireRow>, StoreError> {
        self.read(|conn| {
            fires_query(
                conn,
                "WHERE automation_id = ?1 AND trigger_id = ?2 AND delivery_id = ?3",
                [automation_id, trigger_id, delivery_id],
            )
            .map(|mut v| v.pop())
            .map_err(err("reading a fire"))
        })
    }

    fn fires_of(
        &self,
        automation_id: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<FireRow>, StoreError> {
        let n = |x: usize| i64::try_from(x).unwrap_or(i64::MAX);
        self.read(|conn| {
            fires_query(
                conn,
                "WHERE automation_id = ?1 ORDER BY id DESC LIMIT ?2 OFFSET ?3",
                params![automation_id, n(limit), n(offset)],
            )
            .map_err(err("listing fires"))
        })
    }

    fn open_fires(&self) -> Result<Vec<FireRow>, StoreError> {
        self.read(|conn| {
            fires_query(
                conn,
                "WHERE outcome IN ('pending', 'queued') ORDER BY id",
                [],
            )
            .map_err(err("listing open fires"))
        })
    }

    fn latest_run(&self, automation_id: &str) -> Result<Option<String>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT run_id FROM automation_fires WHERE automation_id = ?1 \
                 AND outcome IN ('pending', 'created') ORDER BY id DESC LIMIT 1",
            )
            .and_then(|mut st| st.query_row([automation_id], |r| r.get(0)).optional())
            .map_err(err("reading an automation's latest run"))
        })
    }

    fn forget_automation(&self, automation_id: &str) -> Result<(), StoreError> {
        self.write("forgetting an automation", |conn| {
            conn.execute(
                "DELETE FROM automation_schedules WHERE automation_id = ?1",
                [automation_id],
            )
            .and_then(|_| {
                conn.execute(
                    "DELETE FROM automation_fires WHERE automation_id = ?1",
                    [automation_id],
                )
            })
            .map(|_| ())
            .map_err(err("forgetting an automation"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fire(id: &str, outcome: &str, delivery: Option<&str>) -> FireRow {
        FireRow {
            id: id.to_string(),
            automation_id: "a".into(),
            trigger_id: "t".into(),
            trigger_kind: "webhook".into(),
            due_at: None,
            fired_at: "2026-01-01T00:00:00.000Z".into(),
            outcome: outcome.into(),
            policy: (outcome == "skipped").then(|| "overlap".into()),
            error: (outcome == "failed").then(|| "boom".into()),
            detail: None,
            run_id: matches!(outcome, "pending" | "queued" | "created").then(|| format!("R{id}")),
            delivery_id: delivery.map(str::to_string),
            request: "{}".into(),
        }
    }

    #[test]
    fn fires_schedules_and_deliveries() {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("svc.db")).unwrap();
        let id = |n: u8| format!("{:0>26}", n);
        s.put_schedule(&ScheduleRow {
            automation_id: "a".into(),
            trigger_id: "t".into(),
            expression: "* * * * *".into(),
            timezone: "UTC".into(),
            next_due_ms: 60_000,
            last_due_ms: None,
            last_fired_at: None,
        })
        .unwrap();
        let mut f = fire(&id(1), "pending", None);
        f.trigger_kind = "schedule".into();
        s.record_scheduled_fire(
            &f,
            &Advance {
                next_due_ms: 120_000,
                last_due_ms: 60_000,
                last_fired_at: "x".into(),
            },
        )
        .unwrap();
        assert_eq!(s.schedules().unwrap()[0].next_due_ms, 120_000);
        assert_eq!(s.open_fires().unwrap().len(), 1);
        assert_eq!(s.latest_run("a").unwrap(), Some(format!("R{}", id(1))));
        // A repeated delivery id writes nothing.
        assert!(s.record_fire(&fire(&id(2), "pending", Some("d1"))).unwrap());
        assert!(!s.record_fire(&fire(&id(3), "pending", Some("d1"))).unwrap());
        assert_eq!(
            s.fire_of_delivery("a", "t", "d1").unwrap().unwrap().id,
            id(2)
        );
        let mut settled = fire(&id(2), "failed", Some("d1"));
        settled.run_id = None;
        s.settle_fire(&settled).unwrap();
        let listed: Vec<String> = s
            .fires_of("a", 0, 10)
            .unwrap()
            .into_iter()
            .map(|f| f.id)
            .collect();
        assert_eq!(listed, [id(2), id(1)]);
        assert_eq!(s.open_fires().unwrap().len(), 1);
        // The CHECKs: a skip names its policy, a failure its error.
        let mut bad = fire(&id(4), "skipped", None);
        bad.policy = None;
        assert!(s.record_fire(&bad).is_err());
        let mut bad = fire(&id(5), "failed", None);
        bad.error = None;
        assert!(s.record_fire(&bad).is_err());
        s.forget_automation("a").unwrap();
        assert!(s.schedules().unwrap().is_empty() && s.fires_of("a", 0, 10).unwrap().is_empty());
    }
}
