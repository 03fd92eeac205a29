//! The usage ledger (schema migration 7): LLM spend across runs and completions, for
//! `GET /api/v1/usage`, the daily cap and budgets' dashboards. Stage usage comes in through
//! the table's trigger on `events` (same transaction as the event); completions are written
//! here.
//!
//! Owns: the ledger's SQL. Must not touch: what a spend limit decides (callers compare).

use super::error::StoreError;
use super::SqliteStore;
use rusqlite::params;

/// Token and cost sums of a set of ledger rows.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct UsageSums {
    /// Stage attempts and completions counted.
    pub records: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub usd_micros: i64,
    /// Of `records`, those whose cost was priced.
    pub priced_records: u64,
}

/// One group of a usage report: its key and sums.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UsageGroup {
    pub key: Option<String>,
    /// The provider, for groups by model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(flatten)]
    pub sums: UsageSums,
}

/// What to group a report by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageGrouping {
    Model,
    Workflow,
    Automation,
    Day,
}

impl UsageGrouping {
    fn column(self) -> &'static str {
        match self {
            UsageGrouping::Model => "model",
            UsageGrouping::Workflow => "workflow",
            UsageGrouping::Automation => "automation_id",
            UsageGrouping::Day => "day",
        }
    }
}

/// A completion's usage, written by the completions route.
#[derive(Debug, Clone, Default)]
pub struct CompletionUsage {
    pub ts: String,
    pub provider: String,
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub usd_micros: i64,
    pub priced: bool,
}

/// The ledger.
pub trait UsageLedger: Send + Sync {
    /// Sums over `[since, until)` (RFC 3339 UTC), in total and per group of `by`.
    fn usage_sums(
        &self,
        since: &str,
        until: &str,
        by: Option<UsageGrouping>,
    ) -> Result<Vec<UsageGroup>, StoreError>;
    /// Micro-USD recorded on one UTC day (`YYYY-MM-DD`).
    fn spent_on_day(&self, day: &str) -> Result<i64, StoreError>;
    /// Records a completion's usage.
    fn record_completion(&self, u: &CompletionUsage) -> Result<(), StoreError>;
}

const SUMS: &str = "COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), \
    COALESCE(SUM(reasoning_tokens), 0), COALESCE(SUM(cache_read_tokens), 0), \
    COALESCE(SUM(cache_write_tokens), 0), COALESCE(SUM(usd_micros), 0), COALESCE(SUM(priced), 0)";

fn sums_at(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<UsageSums> {
    let u = |i: usize| r.get::<_, i64>(at + i).map(|v| v.max(0) as u64);
    Ok(UsageSums {
        records: u(0)?,
        input_tokens: u(1)?,
        output_tokens: u(2)?,
        reasoning_tokens: u(3)?,
        cache_read_tokens: u(4)?,
        cache_write_tokens: u(5)?,
        usd_micros: r.get(at + 6)?,
        priced_records: u(7)?,
    })
}

impl UsageLedger for SqliteStore {
    fn usage_sums(
        &self,
        since: &str,
        until: &str,
        by: Option<UsageGrouping>,
    ) -> Result<Vec<UsageGroup>, StoreError> {
        // The day range uses the index; the ts bounds make it exact.
        let day_from = since.get(..10).unwrap_or(since);
        let day_to = until.get(..10).unwrap_or(until);
        let range = "day >= ?1 AND day <= ?2 AND ts >= ?3 AND ts < ?4";
        let sql = match by {
            None => format!("SELECT NULL, NULL, {SUMS} FROM usage_ledger WHERE {range}"),
            Some(UsageGrouping::Model) => format!(
                "SELECT model, provider, {SUMS} FROM usage_ledger WHERE {range} \
                 GROUP BY model, provider ORDER BY 9 DESC, 1"
            ),
            Some(g) => format!(
                "SELECT {c}, NULL, {SUMS} FROM usage_ledger WHERE {range} GROUP BY {c} ORDER BY {order}",
                c = g.column(),
                order = if g == UsageGrouping::Day { "1" } else { "9 DESC, 1" }
            ),
        };
        self.read(|conn| {
            let mut st = conn
                .prepare_cached(&sql)
                .map_err(StoreError::db_global("reading usage"))?;
            let rows = st
                .query_map(params![day_from, day_to, since, until], |r| {
                    Ok(UsageGroup {
                        key: r.get(0)?,
                        provider: r.get(1)?,
                        sums: sums_at(r, 2)?,
                    })
                })
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(StoreError::db_global("reading usage"))?;
            Ok(rows)
        })
    }

    fn spent_on_day(&self, day: &str) -> Result<i64, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT COALESCE(SUM(usd_micros), 0) FROM usage_ledger WHERE day = ?1",
            )
            .and_then(|mut st| st.query_row([day], |r| r.get(0)))
            .map_err(StoreError::db_global("reading today's spend"))
        })
    }

    fn record_completion(&self, u: &CompletionUsage) -> Result<(), StoreError> {
        self.write("recording a completion's usage", |conn| {
            conn.prepare_cached(
                "INSERT INTO usage_ledger (ts, day, origin, provider, model, input_tokens, \
                 output_tokens, usd_micros, priced) VALUES (?1, substr(?1, 1, 10), 'completion', \
                 ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .and_then(|mut st| {
                st.execute(params![
                    u.ts,
                    u.provider,
                    u.model,
                    u.input_tokens as i64,
                    u.output_tokens as i64,
                    u.usd_micros,
                    u.priced
                ])
            })
            .map(|_| ())
            .map_err(StoreError::db_global("recording a completion's usage"))
        })
    }
}
