//! The code-host integration's tables (schema migration 4): `pull_requests` (each run's pull
//! request as last seen on the host, found by run, by number or by head commit),
//! `pr_creations` (one creation job per run) and `webhook_deliveries` (every delivery, by
//! its id, newest first).
//!
//! Owns: the tables' SQL, and [`MemoryCodehost`], the in-memory twin. Must not touch: what
//! the JSON columns mean (`integrations` writes and reads them).

use super::error::StoreError;
use super::SqliteStore;
use parking_lot::Mutex;
use rusqlite::{params, OptionalExtension, Row};
use std::collections::BTreeMap;

/// A run's pull request as kept: where it is, its head commit, and `state` (JSON the
/// integration owns: link, details, checks, comments, options).
#[derive(Debug, Clone, PartialEq)]
pub struct PullRequestRecord {
    pub run_id: String,
    pub owner: String,
    pub repo: String,
    pub number: u64,
    pub head_sha: Option<String>,
    pub state: serde_json::Value,
    /// When the host was last asked about it (ms since the epoch; 0 = never).
    pub refreshed_at_ms: i64,
    pub updated_at: String,
}

/// A creation job (`status`: `pending`, `succeeded`, `failed`); `record` is the
/// PullRequestCreation JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct CreationRecord {
    pub run_id: String,
    pub id: String,
    pub status: String,
    pub record: serde_json::Value,
}

/// One webhook delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRecord {
    pub delivery_id: String,
    pub event: String,
    pub action: Option<String>,
    pub repository: Option<String>,
    pub outcome: String,
    pub detail: Option<String>,
    pub received_at: String,
}

/// Where the integration keeps its state.
pub trait CodehostTable: Send + Sync {
    fn pull_request(&self, run_id: &str) -> Result<Option<PullRequestRecord>, StoreError>;
    /// The records of those of `run_ids` that have one (any order).
    fn pull_requests_of(&self, run_ids: &[&str]) -> Result<Vec<PullRequestRecord>, StoreError>;
    /// Records of pull request `number` of `owner/repo` (several runs may link one).
    fn pull_requests_by_number(
        &self,
        owner: &str,
        repo: &str,
        number: u64,
    ) -> Result<Vec<PullRequestRecord>, StoreError>;
    /// Records of `owner/repo` whose head commit is `sha`.
    fn pull_requests_by_head(
        &self,
        owner: &str,
        repo: &str,
        sha: &str,
    ) -> Result<Vec<PullRequestRecord>, StoreError>;
    /// Up to `limit` records in run id order, after run `after` (`""`: from the first).
    fn pull_requests_after(
        &self,
        after: &str,
        limit: usize,
    ) -> Result<Vec<PullRequestRecord>, StoreError>;
    /// Creates or replaces the run's record.
    fn put_pull_request(&self, r: &PullRequestRecord) -> Result<(), StoreError>;
    /// Removes the run's record; true when there was one.
    fn delete_pull_request(&self, run_id: &str) -> Result<bool, StoreError>;

    fn creation(&self, run_id: &str) -> Result<Option<CreationRecord>, StoreError>;
    /// Stores `c` unless the run has a pending job: the pending one is returned then.
    fn begin_creation(&self, c: &CreationRecord) -> Result<Option<CreationRecord>, StoreError>;
    fn put_creation(&self, c: &CreationRecord) -> Result<(), StoreError>;
    fn pending_creations(&self) -> Result<Vec<CreationRecord>, StoreError>;

    /// Records a delivery; false when its id was recorded before (a replay).
    fn insert_delivery(&self, d: &DeliveryRecord) -> Result<bool, StoreError>;
    /// The recorded outcome of delivery `delivery_id`, if it was recorded.
    fn delivery_outcome(&self, delivery_id: &str) -> Result<Option<String>, StoreError>;
    fn set_delivery_outcome(
        &self,
        delivery_id: &str,
        outcome: &str,
        detail: Option<&str>,
    ) -> Result<(), StoreError>;
    /// Newest first.
    fn deliveries(&self, offset: usize, limit: usize) -> Result<Vec<DeliveryRecord>, StoreError>;
}

const PR_COLUMNS: &str = "run_id, owner, repo, number, head_sha, state, refreshed_at, updated_at";

fn pr_of(r: &Row<'_>) -> rusqlite::Result<PullRequestRecord> {
    let state: String = r.get(5)?;
    Ok(PullRequestRecord {
        run_id: r.get(0)?,
        owner: r.get(1)?,
        repo: r.get(2)?,
        number: r.get::<_, i64>(3)?.max(0) as u64,
        head_sha: r.get(4)?,
        state: serde_json::from_str(&state).unwrap_or(serde_json::Value::Null),
        refreshed_at_ms: r.get(6)?,
        updated_at: r.get(7)?,
    })
}

fn creation_of(r: &Row<'_>) -> rusqlite::Result<CreationRecord> {
    let record: String = r.get(3)?;
    Ok(CreationRecord {
        run_id: r.get(0)?,
        id: r.get(1)?,
        status: r.get(2)?,
        record: serde_json::from_str(&record).unwrap_or(serde_json::Value::Null),
    })
}

fn delivery_of(r: &Row<'_>) -> rusqlite::Result<DeliveryRecord> {
    Ok(DeliveryRecord {
        delivery_id: r.get(0)?,
        event: r.get(1)?,
        action: r.get(2)?,
        repository: r.get(3)?,
        outcome: r.get(4)?,
        detail: r.get(5)?,
        received_at: r.get(6)?,
    })
}

fn query_prs(
    conn: &rusqlite::Connection,
    sql: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<PullRequestRecord>, StoreError> {
    let op = "reading pull requests";
    let mut st = conn
        .prepare_cached(sql)
        .map_err(StoreError::db_global(op))?;
    let rows = st
        .query_map(args, pr_of)
        .map_err(StoreError::db_global(op))?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(StoreError::db_global(op))
}

fn put_creation_sql(conn: &rusqlite::Connection, c: &CreationRecord) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO pr_creations (run_id, id, status, record) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (run_id) DO UPDATE SET id = ?2, status = ?3, record = ?4",
    )
    .and_then(|mut st| st.execute(params![c.run_id, c.id, c.status, c.record.to_string()]))
    .map(|_| ())
    .map_err(StoreError::db_global("storing a pull request creation"))
}

impl CodehostTable for SqliteStore {
    fn pull_request(&self, run_id: &str) -> Result<Option<PullRequestRecord>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(&format!(
                "SELECT {PR_COLUMNS} FROM pull_requests WHERE run_id = ?1"
            ))
            .and_then(|mut st| st.query_row([run_id], pr_of).optional())
            .map_err(StoreError::db_global("reading a pull request"))
        })
    }

    fn pull_requests_of(&self, run_ids: &[&str]) -> Result<Vec<PullRequestRecord>, StoreError> {
        if run_ids.is_empty() {
            return Ok(Vec::new());
        }
        // One statement for a page of runs: the ids go in as a JSON array.
        let ids = serde_json::to_string(run_ids).unwrap_or_else(|_| "[]".into());
        self.read(|conn| {
            query_prs(
                conn,
                &format!(
                    "SELECT {PR_COLUMNS} FROM pull_requests \
                     WHERE run_id IN (SELECT value FROM json_each(?1))"
                ),
                [ids],
            )
        })
    }

    fn pull_requests_by_number(
        &self,
        owner: &str,
        repo: &str,
        number: u64,
    ) -> Result<Vec<PullRequestRecord>, StoreError> {
        self.read(|conn| {
            query_prs(
                conn,
                &format!(
                    "SELECT {PR_COLUMNS} FROM pull_requests \
                     WHERE owner = ?1 COLLATE NOCASE AND repo = ?2 COLLATE NOCASE AND number = ?3"
                ),
                params![owner, repo, number as i64],
            )
        })
    }

    fn pull_requests_by_head(
        &self,
        owner: &str,
        repo: &str,
        sha: &str,
    ) -> Result<Vec<PullRequestRecord>, StoreError> {
        self.read(|conn| {
            query_prs(
                conn,
                &format!(
                    "SELECT {PR_COLUMNS} FROM pull_requests WHERE head_sha = ?3 \
                     AND owner = ?1 COLLATE NOCASE AND repo = ?2 COLLATE NOCASE"
                ),
                params![owner, repo, sha],
            )
        })
    }

    fn pull_requests_after(
        &self,
        after: &str,
        limit: usize,
    ) -> Result<Vec<PullRequestRecord>, StoreError> {
        self.read(|conn| {
            query_prs(
                conn,
                &format!(
                    "SELECT {PR_COLUMNS} FROM pull_requests WHERE run_id > ?1 \
                     ORDER BY run_id LIMIT ?2"
                ),
                params![after, limit as i64],
            )
        })
    }

    fn put_pull_request(&self, r: &PullRequestRecord) -> Result<(), StoreError> {
        self.write("storing a pull request", |conn| {
            conn.prepare_cached(&format!(
                "INSERT OR REPLACE INTO pull_requests ({PR_COLUMNS}) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
            ))
            .and_then(|mut st| {
                st.execute(params![
                    r.run_id,
                    r.owner,
                    r.repo,
                    r.number as i64,
                    r.head_sha,
                    r.state.to_string(),
                    r.refreshed_at_ms,
                    r.updated_at
                ])
            })
            .map(|_| ())
            .map_err(StoreError::db_global("storing a pull request"))
        })
    }

    fn delete_pull_request(&self, run_id: &str) -> Result<bool, StoreError> {
        self.write("removing a pull request", |conn| {
            conn.prepare_cached("DELETE FROM pull_requests WHERE run_id = ?1")
                .and_then(|mut st| st.execute([run_id]))
                .map(|n| n > 0)
                .map_err(StoreError::db_global("removing a pull request"))
        })
    }

    fn creation(&self, run_id: &str) -> Result<Option<CreationRecord>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT run_id, id, status, record FROM pr_creations WHERE run_id = ?1",
            )
            .and_then(|mut st| st.query_row([run_id], creation_of).optional())
            .map_err(StoreError::db_global("reading a pull request creation"))
        })
    }

    fn begin_creation(&self, c: &CreationRecord) -> Result<Option<CreationRecord>, StoreError> {
        self.write("starting a pull request creation", |conn| {
            let pending = conn
                .prepare_cached(
                    "SELECT run_id, id, status, record FROM pr_creations \
                     WHERE run_id = ?1 AND status = 'pending'",
                )
                .and_then(|mut st| st.query_row([&c.run_id], creation_of).optional())
                .map_err(StoreError::db_global("reading a pull request creation"))?;
            if pending.is_some() {
                return Ok(pending);
            }
            put_creation_sql(conn, c)?;
            Ok(None)
        })
    }

    fn put_creation(&self, c: &CreationRecord) -> Result<(), StoreError> {
        self.write("storing a pull request creation", |conn| {
            put_creation_sql(conn, c)
        })
    }

    fn pending_creations(&self) -> Result<Vec<CreationRecord>, StoreError> {
        self.read(|conn| {
            let op = "reading pending pull request creations";
            let mut st = conn
                .prepare_cached(
                    "SELECT run_id, id, status, record FROM pr_creations \
                     WHERE status = 'pending' ORDER BY id",
                )
                .map_err(StoreError::db_global(op))?;
            let rows = st
                .query_map([], creation_of)
                .map_err(StoreError::db_global(op))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
                .map_err(StoreError::db_global(op))
        })
    }

    fn insert_delivery(&self, d: &DeliveryRecord) -> Result<bool, StoreError> {
        self.write("recording a webhook delivery", |conn| {
            conn.prepare_cached(
                "INSERT OR IGNORE INTO webhook_deliveries \
                 (delivery_id, event, action, repository, outcome, detail, received_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .and_then(|mut st| {
                st.execute(params![
                    d.delivery_id,
                    d.event,
                    d.action,
                    d.repository,
                    d.outcome,
                    d.detail,
                    d.received_at
                ])
            })
            .map(|n| n == 1)
            .map_err(StoreError::db_global("recording a webhook delivery"))
        })
    }

    fn delivery_outcome(&self, delivery_id: &str) -> Result<Option<String>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached("SELECT outcome FROM webhook_deliveries WHERE delivery_id = ?1")
                .and_then(|mut st| st.query_row([delivery_id], |r| r.get(0)).optional())
                .map_err(StoreError::db_global("reading a webhook delivery"))
        })
    }

    fn set_delivery_outcome(
        &self,
        delivery_id: &str,
        outcome: &str,
        detail: Option<&str>,
    ) -> Result<(), StoreError> {
        self.write("recording a webhook delivery's outcome", |conn| {
            conn.prepare_cached(
                "UPDATE webhook_deliveries SET outcome = ?2, detail = ?3 WHERE delivery_id = ?1",
            )
            .and_then(|mut st| st.execute(params![delivery_id, outcome, detail]))
            .map(|_| ())
            .map_err(StoreError::db_global(
                "recording a webhook delivery's outcome",
            ))
        })
    }

    fn deliveries(&self, offset: usize, limit: usize) -> Result<Vec<DeliveryRecord>, StoreError> {
        self.read(|conn| {
            let op = "listing webhook deliveries";
            let mut st = conn
                .prepare_cached(
                    "SELECT delivery_id, event, action, repository, outcome, detail, received_at \
                     FROM webhook_deliveries ORDER BY rowid DESC LIMIT ?1 OFFSET ?2",
                )
                .map_err(StoreError::db_global(op))?;
            let rows = st
                .query_map(params![limit as i64, offset as i64], delivery_of)
                .map_err(StoreError::db_global(op))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
                .map_err(StoreError::db_global(op))
        })
    }
}

/// The tables in memory (tests, embedding without a database file).
#[derive(Debug, Default)]
pub struct MemoryCodehost {
    prs: Mutex<BTreeMap<String, PullRequestRecord>>,
    creations: Mutex<BTreeMap<String, CreationRecord>>,
    deliveries: Mutex<Vec<DeliveryRecord>>,
}

fn same(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

impl CodehostTable for MemoryCodehost {
    fn pull_request(&self, run_id: &str) -> Result<Option<PullRequestRecord>, StoreError> {
        Ok(self.prs.lock().get(run_id).cloned())
    }

    fn pull_requests_of(&self, run_ids: &[&str]) -> Result<Vec<PullRequestRecord>, StoreError> {
        let prs = self.prs.lock();
        Ok(run_ids
            .iter()
            .filter_map(|id| prs.get(*id).cloned())
            .collect())
    }

    fn pull_requests_by_number(
        &self,
        owner: &str,
        repo: &str,
        number: u64,
    ) -> Result<Vec<PullRequestRecord>, StoreError> {
        Ok(self
            .prs
            .lock()
            .values()
            .filter(|r| same(&r.owner, owner) && same(&r.repo, repo) && r.number == number)
            .cloned()
            .collect())
    }

    fn pull_requests_by_head(
        &self,
        owner: &str,
        repo: &str,
        sha: &str,
    ) -> Result<Vec<PullRequestRecord>, StoreError> {
        Ok(self
            .prs
            .lock()
            .values()
            .filter(|r| {
                same(&r.owner, owner) && same(&r.repo, repo) && r.head_sha.as_deref() == Some(sha)
            })
            .cloned()
            .collect())
    }

    fn pull_requests_after(
        &self,
        after: &str,
        limit: usize,
    ) -> Result<Vec<PullRequestRecord>, StoreError> {
        use std::ops::Bound::{Excluded, Unbounded};
        Ok(self
            .prs
            .lock()
            .range::<str, _>((Excluded(after), Unbounded))
            .take(limit)
            .map(|(_, r)| r.clone())
            .collect())
    }

    fn put_pull_request(&self, r: &PullRequestRecord) -> Result<(), StoreError> {
        self.prs.lock().insert(r.run_id.clone(), r.clone());
        Ok(())
    }

    fn delete_pull_request(&self, run_id: &str) -> Result<bool, StoreError> {
        Ok(self.prs.lock().remove(run_id).is_some())
    }

    fn creation(&self, run_id: &str) -> Result<Option<CreationRecord>, StoreError> {
        Ok(self.creations.lock().get(run_id).cloned())
    }

    fn begin_creation(&self, c: &CreationRecord) -> Result<Option<CreationRecord>, StoreError> {
        let mut all = self.creations.lock();
        if let Some(p) = all.get(&c.run_id).filter(|p| p.status == "pending") {
            return Ok(Some(p.clone()));
        }
        all.insert(c.run_id.clone(), c.clone());
        Ok(None)
    }

    fn put_creation(&self, c: &CreationRecord) -> Result<(), StoreError> {
        self.creations.lock().insert(c.run_id.clone(), c.clone());
        Ok(())
    }

    fn pending_creations(&self) -> Result<Vec<CreationRecord>, StoreError> {
        let mut v: Vec<CreationRecord> = self
            .creations
            .lock()
            .values()
            .filter(|c| c.status == "pending")
            .cloned()
            .collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(v)
    }

    fn insert_delivery(&self, d: &DeliveryRecord) -> Result<bool, StoreError> {
        let mut all = self.deliveries.lock();
        if all.iter().any(|x| x.delivery_id == d.delivery_id) {
            return Ok(false);
        }
        all.push(d.clone());
        Ok(true)
    }

    fn delivery_outcome(&self, delivery_id: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .deliveries
            .lock()
            .iter()
            .find(|d| d.delivery_id == delivery_id)
            .map(|d| d.outcome.clone()))
    }

    fn set_delivery_outcome(
        &self,
        delivery_id: &str,
        outcome: &str,
        detail: Option<&str>,
    ) -> Result<(), StoreError> {
        if let Some(d) = self
            .deliveries
            .lock()
            .iter_mut()
            .find(|d| d.delivery_id == delivery_id)
        {
            d.outcome = outcome.to_string();
            d.detail = detail.map(str::to_string);
        }
        Ok(())
    }

    fn deliveries(&self, offset: usize, limit: usize) -> Result<Vec<DeliveryRecord>, StoreError> {
        Ok(self
            .deliveries
            .lock()
            .iter()
            .rev()
            .skip(offset)
            .take(limit)
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pr(run: &str, number: u64, head: &str) -> PullRequestRecord {
        PullRequestRecord {
            run_id: run.into(),
            owner: "Acme".into(),
            repo: "app".into(),
            number,
            head_sha: Some(head.into()),
            state: json!({"checks": []}),
            refreshed_at_ms: 5,
            updated_at: "t".into(),
        }
    }

    fn delivery(id: &str) -> DeliveryRecord {
        DeliveryRecord {
            delivery_id: id.into(),
            event: "check_run".into(),
            action: Some("completed".into()),
            repository: Some("acme/app".into()),
            outcome: "applied".into(),
            detail: None,
            received_at: "t".into(),
        }
    }

    fn exercise(t: &dyn CodehostTable) {
        t.put_pull_request(&pr("R1", 7, "aaa")).unwrap();
        t.put_pull_request(&pr("R2", 8, "bbb")).unwrap();
        assert_eq!(t.pull_request("R1").unwrap().unwrap().number, 7);
        let mut of: Vec<String> = t
            .pull_requests_of(&["R1", "R2", "R3"])
            .unwrap()
            .into_iter()
            .map(|r| r.run_id)
            .collect();
        of.sort();
        assert_eq!(of, ["R1", "R2"]);
        assert_eq!(
            t.pull_requests_by_number("acme", "APP", 8).unwrap()[0].run_id,
            "R2"
        );
        assert_eq!(
            t.pull_requests_by_head("acme", "app", "aaa").unwrap()[0].run_id,
            "R1"
        );
        assert!(t
            .pull_requests_by_head("other", "app", "aaa")
            .unwrap()
            .is_empty());
        t.put_pull_request(&pr("R3", 9, "ccc")).unwrap();
        let ids = |after: &str, limit: usize| -> Vec<String> {
            t.pull_requests_after(after, limit)
                .unwrap()
                .into_iter()
                .map(|r| r.run_id)
                .collect()
        };
        assert_eq!(ids("", 2), ["R1", "R2"]);
        assert_eq!(ids("R2", 2), ["R3"]);
        assert!(ids("R3", 2).is_empty());
        assert!(t.delete_pull_request("R3").unwrap());
        assert!(t.delete_pull_request("R1").unwrap());
        assert!(!t.delete_pull_request("R1").unwrap());

        let job = |id: &str, status: &str| CreationRecord {
            run_id: "R2".into(),
            id: id.into(),
            status: status.into(),
            record: json!({"id": id}),
        };
        assert_eq!(t.begin_creation(&job("J1", "pending")).unwrap(), None);
        assert_eq!(
            t.begin_creation(&job("J2", "pending")).unwrap().unwrap().id,
            "J1"
        );
        assert_eq!(t.pending_creations().unwrap().len(), 1);
        t.put_creation(&job("J1", "failed")).unwrap();
        assert!(t.pending_creations().unwrap().is_empty());
        assert_eq!(t.begin_creation(&job("J3", "pending")).unwrap(), None);
        assert_eq!(t.creation("R2").unwrap().unwrap().id, "J3");

        assert!(t.insert_delivery(&delivery("d1")).unwrap());
        assert!(t.insert_delivery(&delivery("d2")).unwrap());
        assert!(!t.insert_delivery(&delivery("d1")).unwrap());
        t.set_delivery_outcome("d1", "ignored", Some("no run"))
            .unwrap();
        let list = t.deliveries(0, 10).unwrap();
        assert_eq!(list[0].delivery_id, "d2");
        assert_eq!(list[1].outcome, "ignored");
        assert_eq!(t.deliveries(1, 10).unwrap().len(), 1);
    }

    #[test]
    fn sqlite_and_memory_tables_agree() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("svc.db");
        exercise(&SqliteStore::open(&path).unwrap());
        exercise(&MemoryCodehost::default());
        // Kept across a reopen.
        let s = SqliteStore::open(&path).unwrap();
        assert_eq!(
            s.pull_request("R2").unwrap().unwrap().state["checks"],
            json!([])
        );
        assert_eq!(s.deliveries(0, 10).unwrap().len(), 2);
    }
}
