//! Insights (issue 29): read-only SQL an admin runs over documented views of the store
//! (runs, stages, usage, events, automations), saved queries as a catalog, a few built-in
//! sample queries, and the CSV form of an answer.
//!
//! The query itself runs in the store ([`crate::store::InsightsDb`]: a read-only connection,
//! an authorizer that allows reading the views and nothing else, a time limit, row and byte
//! caps). Saved queries are a catalog ([`SavedQueries`], `/api/v1/insights/queries`, the
//! shared rules of `crate::catalog`): `{id, name, description, sql}`, whose SQL must pass the
//! same checks as a query when it is saved (it is compiled, not run).
//!
//! Owns: the limits insights run under, saved queries' rules, the samples, CSV. Must not
//! touch: SQL execution or the authorizer's policy (`store::insights`), HTTP
//! (`server::insights`).

use crate::catalog::{Catalog, CatalogError, Errors, Invalid, Kind, Obj};
use crate::store::catalog::INSIGHT_QUERIES;
use crate::store::{
    CatalogTable, CatalogTables, InsightAnswer, InsightError, InsightLimits, InsightsDb,
};
use serde_json::{Map, Value};
use std::sync::Arc;

/// The limits every insights query runs under: 10,000 rows, 8 MiB of values, 5 s, 64 KiB of
/// SQL (docs/decisions.md, "Insights").
pub fn limits() -> InsightLimits {
    InsightLimits::default()
}

/// A built-in query, offered by the insights page and `GET /api/v1/insights/schema`.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Sample {
    pub id: &'static str,
    pub name: &'static str,
    pub sql: &'static str,
}

/// The built-in queries. The first is the one the benchmark measures.
pub const SAMPLES: [Sample; 5] = [
    Sample {
        id: "runs-per-day-by-status",
        name: "Runs per day by status",
        sql: "SELECT substr(created_at, 1, 10) AS day, status, count(*) AS runs\n\
              FROM insights_runs\nGROUP BY day, status\nORDER BY day, status",
    },
    Sample {
        id: "cost-by-model-per-day",
        name: "Cost by model per day (USD)",
        sql: "SELECT day, model, round(sum(usd_micros) / 1e6, 4) AS usd\n\
              FROM insights_usage\nGROUP BY day, model\nORDER BY day, model",
    },
    Sample {
        id: "failure-rate-by-workflow",
        name: "Failure rate by workflow (finished runs)",
        sql: "SELECT workflow, count(*) AS runs,\n\
              round(100.0 * sum(status <> 'succeeded') / count(*), 1) AS failed_pct\n\
              FROM insights_runs\nWHERE status IN ('succeeded', 'failed', 'dead')\n\
              GROUP BY workflow\nORDER BY failed_pct DESC",
    },
    Sample {
        id: "slowest-stages",
        name: "Slowest stages (average duration)",
        sql: "SELECT node_id, count(*) AS visits, round(avg(duration_ms)) AS avg_ms,\n\
              max(duration_ms) AS max_ms\nFROM insights_stages\nGROUP BY node_id\n\
              ORDER BY avg_ms DESC\nLIMIT 20",
    },
    Sample {
        id: "spend-by-workflow",
        name: "Spend by workflow, last 30 days (USD)",
        sql: "SELECT COALESCE(workflow, origin) AS workflow, round(sum(usd_micros) / 1e6, 4) AS usd\n\
              FROM insights_usage\nWHERE ts >= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-30 days')\n\
              GROUP BY 1\nORDER BY usd DESC",
    },
];

/// Insights: the query connections, the limits they run under and the saved queries.
pub struct Insights {
    db: Arc<InsightsDb>,
    limits: InsightLimits,
    /// The saved queries' catalog.
    pub saved: Catalog<SavedQueries>,
}

impl Insights {
    /// Insights over `db`, saved queries in `tables`.
    pub fn open(
        db: Arc<InsightsDb>,
        tables: Arc<dyn CatalogTables>,
    ) -> Result<Insights, CatalogError> {
        let limits = limits();
        let kind = SavedQueries {
            db: Arc::clone(&db),
            limits,
        };
        Ok(Insights {
            db,
            limits,
            saved: Catalog::open(kind, tables)?,
        })
    }

    pub fn limits(&self) -> &InsightLimits {
        &self.limits
    }

    /// Runs `sql` (see [`InsightsDb::query`]).
    pub fn query(&self, sql: &str) -> Result<InsightAnswer, InsightError> {
        self.db.query(sql, &self.limits)
    }

    /// The views with their columns, in the documented order.
    pub fn views(&self) -> Result<Vec<(&'static str, Vec<String>)>, InsightError> {
        crate::store::insights::VIEWS
            .iter()
            .map(|v| {
                let cols = self.db.check(&format!("SELECT * FROM {v}"), &self.limits)?;
                Ok((*v, cols))
            })
            .collect()
    }
}

/// The saved queries catalog (`/api/v1/insights/queries`).
pub struct SavedQueries {
    db: Arc<InsightsDb>,
    limits: InsightLimits,
}

/// The longest saved query name.
const MAX_NAME: usize = 200;

impl Kind for SavedQueries {
    const TABLE: &'static CatalogTable = &INSIGHT_QUERIES;
    const NOUN: &'static str = "saved query";

    fn validate(&self, _id: &str, def: &Map<String, Value>) -> Result<Map<String, Value>, Errors> {
        let o = Obj::root(def);
        let mut errs = Errors::new();
        o.only(&["name", "description", "sql"], &mut errs);
        let name = o.non_blank("name", &mut errs);
        if name.is_some_and(|n| n.chars().count() > MAX_NAME) {
            errs.push(Invalid::new(
                "name",
                format!("must be at most {MAX_NAME} characters"),
            ));
        }
        let description = o.opt_string("description", &mut errs);
        if let Some(sql) = o.non_blank("sql", &mut errs) {
            if let Err(e) = self.db.check(sql, &self.limits) {
                errs.push(Invalid::new("sql", e.to_string()));
            }
        }
        if !errs.is_empty() {
            return Err(errs);
        }
        let mut out = def.clone();
        out.insert(
            "description".into(),
            description.map_or(Value::Null, |d| Value::String(d.to_string())),
        );
        Ok(out)
    }
}

/// An answer as CSV (RFC 4180): a header of column names, then one line per row; text is
/// quoted when it holds a comma, quote or line break; null is an empty field.
pub fn csv(answer: &InsightAnswer) -> String {
    let mut out = String::new();
    line(&mut out, answer.columns.iter().map(|c| c.as_str()));
    for row in &answer.rows {
        let cells: Vec<String> = row
            .iter()
            .map(|v| match v {
                Value::Null => String::new(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        line(&mut out, cells.iter().map(String::as_str));
    }
    out
}

fn line<'a>(out: &mut String, cells: impl Iterator<Item = &'a str>) {
    for (i, c) in cells.enumerate() {
        if i > 0 {
            out.push(',');
        }
        if c.contains([',', '"', '\n', '\r']) {
            out.push('"');
            out.push_str(&c.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(c);
        }
    }
    out.push_str("\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_what_needs_it_and_leaves_null_empty() {
        let a = InsightAnswer {
            columns: vec!["day".into(), "note".into(), "n".into()],
            rows: vec![
                vec![
                    Value::from("2026-11-01"),
                    Value::from("a, \"b\""),
                    Value::from(3),
                ],
                vec![Value::Null, Value::from("line\nbreak"), Value::from(1.5)],
            ],
            bytes: 0,
        };
        assert_eq!(
            csv(&a),
            "day,note,n\r\n2026-11-01,\"a, \"\"b\"\"\",3\r\n,\"line\nbreak\",1.5\r\n"
        );
    }

    #[test]
    fn every_sample_compiles_against_the_views() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("svc.db");
        let store = Arc::new(crate::store::SqliteStore::open(&path).unwrap());
        let insights = Insights::open(Arc::new(InsightsDb::new(&path)), store).unwrap();
        for s in SAMPLES {
            insights
                .query(s.sql)
                .unwrap_or_else(|e| panic!("{}: {e}", s.id));
        }
        let views = insights.views().unwrap();
        assert_eq!(views.len(), 5);
        assert!(views[0].1.contains(&"status".to_string()));
    }

    #[test]
    fn a_saved_query_must_name_itself_and_compile() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("svc.db");
        let store = Arc::new(crate::store::SqliteStore::open(&path).unwrap());
        let insights = Insights::open(Arc::new(InsightsDb::new(&path)), store).unwrap();
        let kind = insights.saved.kind();
        let def = |v: Value| v.as_object().unwrap().clone();
        let ok = kind
            .validate(
                "q",
                &def(serde_json::json!({"name": "n", "sql": "SELECT 1"})),
            )
            .unwrap();
        assert_eq!(ok["description"], Value::Null);
        let errs = kind
            .validate(
                "q",
                &def(serde_json::json!({"name": " ", "sql": "SELECT * FROM runs", "x": 1})),
            )
            .unwrap_err();
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["x", "name", "sql"]);
        assert!(errs[2].message.contains("`runs` is not one of them"));
    }
}
