//! The usage ledger (schema migration 8): LLM spend across runs and completions, for
//! `GET /api/v1/usage`, the daily cap and budgets' dashboards. Stage usage comes in through
//! the table's trigger on `events` (same transaction as the event); completions are written
//! here. Reports read whole days from the ledger's day sums (`usage_daily`, migration 14,
//! kept by a trigger on the ledger) and only a range's first and last day from the ledger.
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

const SUMS: &str = "COALESCE(SUM(records), 0), COALESCE(SUM(input_tokens), 0), \
    COALESCE(SUM(output_tokens), 0), COALESCE(SUM(reasoning_tokens), 0), \
    COALESCE(SUM(cache_read_tokens), 0), COALESCE(SUM(cache_write_tokens), 0), \
    COALESCE(SUM(usd_micros), 0), COALESCE(SUM(priced), 0)";

/// The ledger rows of `[?3, ?4)` as day sums: whole days strictly between the range's first
/// (`?1`) and last (`?2`) day from `usage_daily` (migration 14), those two days from the
/// ledger itself with the exact time bounds. A 30-day report reads about a thirtieth of the
/// rows it sums.
const IN_RANGE: &str = "(
    SELECT origin, NULLIF(provider, '') AS provider, NULLIF(model, '') AS model,
           NULLIF(workflow, '') AS workflow, NULLIF(automation_id, '') AS automation_id, day,
           records, input_tokens, output_tokens, reasoning_tokens, cache_read_tokens,
           cache_write_tokens, usd_micros, priced
      FROM usage_daily WHERE day > ?1 AND day < ?2
    UNION ALL
    SELECT origin, provider, model, workflow, automation_id, day, 1, input_tokens,
           output_tokens, reasoning_tokens, cache_read_tokens, cache_write_tokens, usd_micros,
           priced
      FROM usage_ledger WHERE day IN (?1, ?2) AND ts >= ?3 AND ts < ?4
)";

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
        let day_from = since.get(..10).unwrap_or(since);
        let day_to = until.get(..10).unwrap_or(until);
        let sql = match by {
            None => format!("SELECT NULL, NULL, {SUMS} FROM {IN_RANGE}"),
            Some(UsageGrouping::Model) => format!(
                "SELECT model, provider, {SUMS} FROM {IN_RANGE} \
                 GROUP BY model, provider ORDER BY 9 DESC, 1"
            ),
            Some(g) => format!(
                "SELECT {c}, NULL, {SUMS} FROM {IN_RANGE} GROUP BY {c} ORDER BY {order}",
                c = g.column(),
                order = if g == UsageGrouping::Day {
                    "1"
                } else {
                    "9 DESC, 1"
                }
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
                "SELECT COALESCE(SUM(usd_micros), 0) FROM usage_daily WHERE day = ?1",
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Imports a run of workflow `wf` made by `automation` with two LLM stages on
    /// 2026-11-`day` (09:15 and 21:45): its usage reaches the ledger through the events'
    /// trigger.
    fn import_for_tests(s: &SqliteStore, day: u64, automation: &str) {
        let id = crate::base::clock::new_ulid();
        let line = |seq: u64, ts: &str, kind: &str, props: String, node: &str| {
            format!(
                r#"{{"seq":{seq},"id":"{}","ts":"2026-11-{day:02}T{ts}.000Z","run_id":"{id}","event":"{kind}","properties":{props}{node}}}"#,
                crate::base::clock::new_ulid()
            )
        };
        let usage = |n: u64| {
            format!(
                r#"{{"status":"succeeded","usage":{{"provider":"gemini","model":"gemini-2.5-pro","tokens":{{"input":{n},"output":7,"reasoning":3,"cache_read":2,"cache_write":1}},"cost":{{"usd_micros":{n},"source":"catalog"}}}}}}"#
            )
        };
        let lines = vec![
            line(
                1,
                "09:00:00",
                "run.created",
                format!(
                    r#"{{"title":"t","workflow":{{"name":"wf{}"}},"automation":{{"id":"{automation}"}}}}"#,
                    day % 2
                ),
                "",
            ),
            line(
                2,
                "09:15:00",
                "stage.completed",
                usage(day),
                r#","node_id":"a""#,
            ),
            line(
                3,
                "21:45:00",
                "stage.completed",
                usage(10 * day),
                r#","node_id":"b""#,
            ),
        ];
        s.import_runs(&[(id, lines)]).unwrap();
    }

    /// The report as the ledger alone answers it (the queries before `usage_daily`): the
    /// oracle the day sums must match.
    fn from_ledger_alone(
        s: &SqliteStore,
        since: &str,
        until: &str,
        by: Option<UsageGrouping>,
    ) -> Vec<UsageGroup> {
        let sums = "COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), \
            COALESCE(SUM(reasoning_tokens), 0), COALESCE(SUM(cache_read_tokens), 0), \
            COALESCE(SUM(cache_write_tokens), 0), COALESCE(SUM(usd_micros), 0), \
            COALESCE(SUM(priced), 0)";
        let range = "ts >= ?1 AND ts < ?2";
        let sql = match by {
            None => format!("SELECT NULL, NULL, {sums} FROM usage_ledger WHERE {range}"),
            Some(UsageGrouping::Model) => format!(
                "SELECT model, provider, {sums} FROM usage_ledger WHERE {range} \
                 GROUP BY model, provider ORDER BY 9 DESC, 1"
            ),
            Some(g) => format!(
                "SELECT {c}, NULL, {sums} FROM usage_ledger WHERE {range} GROUP BY {c} ORDER BY {o}",
                c = g.column(),
                o = if g == UsageGrouping::Day { "1" } else { "9 DESC, 1" }
            ),
        };
        s.read(|conn| {
            let mut st = conn.prepare(&sql).unwrap();
            let rows = st
                .query_map(params![since, until], |r| {
                    Ok(UsageGroup {
                        key: r.get(0)?,
                        provider: r.get(1)?,
                        sums: sums_at(r, 2)?,
                    })
                })
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            Ok(rows)
        })
        .unwrap()
    }

    const GROUPINGS: [Option<UsageGrouping>; 5] = [
        None,
        Some(UsageGrouping::Model),
        Some(UsageGrouping::Workflow),
        Some(UsageGrouping::Automation),
        Some(UsageGrouping::Day),
    ];

    /// Ranges with whole days inside, cut days at both ends, one day, part of one day.
    const RANGES: [(&str, &str); 5] = [
        ("2026-11-01T00:00:00.000Z", "2026-11-09T00:00:00.000Z"),
        ("2026-11-02T06:00:00.000Z", "2026-11-06T18:00:00.001Z"),
        ("2026-11-03T00:00:00.000Z", "2026-11-04T00:00:00.000Z"),
        ("2026-11-03T10:00:00.000Z", "2026-11-03T14:00:00.000Z"),
        ("2026-10-01T00:00:00.000Z", "2026-12-01T00:00:00.000Z"),
    ];

    fn assert_reports_match(s: &SqliteStore) {
        for (since, until) in RANGES {
            for by in GROUPINGS {
                assert_eq!(
                    s.usage_sums(since, until, by).unwrap(),
                    from_ledger_alone(s, since, until, by),
                    "{since} .. {until} by {by:?}"
                );
            }
        }
    }

    /// Completions and stage usage over a week, at every hour, on two models, some of a run
    /// an automation made: every report (each grouping, ranges cutting days at both ends or
    /// inside one day) equals the ledger's own sums, before and after migration 14 builds the
    /// day sums of an existing ledger; the daily cap's day spend too.
    #[test]
    fn day_sums_answer_what_the_ledger_alone_answers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("svc.db");
        {
            let s = SqliteStore::open(&path).unwrap();
            for day in 1..=7 {
                for hour in (0..24).step_by(5) {
                    let (provider, model) = if hour % 2 == 0 {
                        ("openai", "gpt-5")
                    } else {
                        ("anthropic", "claude-sonnet-4-5")
                    };
                    s.record_completion(&CompletionUsage {
                        ts: format!("2026-11-{day:02}T{hour:02}:30:00.000Z"),
                        provider: provider.into(),
                        model: model.into(),
                        input_tokens: 100 * day + hour,
                        output_tokens: 10 * hour,
                        usd_micros: (1_000 * day + hour) as i64,
                        priced: hour % 3 != 0,
                    })
                    .unwrap();
                }
                import_for_tests(&s, day, "nightly");
            }
            assert_reports_match(&s);
            assert_eq!(
                s.spent_on_day("2026-11-03").unwrap(),
                from_ledger_alone(
                    &s,
                    "2026-11-03T00:00:00.000Z",
                    "2026-11-04T00:00:00.000Z",
                    None
                )[0]
                .sums
                .usd_micros
            );
        }
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch(
                "DROP TRIGGER usage_daily_from_ledger; DROP TABLE usage_daily;
                 DELETE FROM schema_version WHERE version >= 14;",
            )
            .unwrap();
        let s = SqliteStore::open(&path).unwrap();
        assert_reports_match(&s);
        let week = s
            .usage_sums(RANGES[4].0, RANGES[4].1, Some(UsageGrouping::Automation))
            .unwrap();
        assert!(week.iter().any(|g| g.key.as_deref() == Some("nightly")));
        assert!(week.iter().any(|g| g.key.is_none()));
    }
}
