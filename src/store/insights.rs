//! Insights' SQL (issue 29): read-only queries an admin writes over documented views of the
//! store, run on connections of their own that can read those views and nothing else.
//!
//! Each connection is opened read-only (`SQLITE_OPEN_READ_ONLY`), gets the views as TEMP
//! views ([`VIEWS`], defined by [`view_sql`]: nothing is added to the database file, and a
//! new svc changes them without a migration), then `PRAGMA query_only`, then an authorizer
//! that allows only: `SELECT`, reading columns of the views (and the tables the views
//! themselves read, seen through SQLite's accessor, which names the view), the functions
//! of [`FUNCTIONS`] (no `load_extension`, no `zeroblob`/`randomblob`, nothing that touches a
//! file), and recursive CTEs. Everything else (writes, DDL, `ATTACH`, `PRAGMA`,
//! transactions, reading a table directly, such as a catalog whose definitions hold
//! secret values) is refused when the statement is prepared, with the reason kept for the
//! error. A progress handler stops a statement past its time limit; rows and bytes are
//! counted as they are read and a statement past either cap is stopped; SQLite's own length
//! limits bound a single value and the SQL text.
//!
//! Owns: the views, the authorizer's policy, the limits' enforcement and the connections
//! (a small pool; a query past [`InsightsDb::MAX_RUNNING`] at once is refused, not queued).
//! Must not touch: saved queries (the `insights` catalog), HTTP, what the results mean.

use super::error::StoreError;
use parking_lot::Mutex;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The views insights may read, in the order the documentation lists them.
pub const VIEWS: [&str; 5] = [
    "insights_runs",
    "insights_stages",
    "insights_usage",
    "insights_events",
    "insights_automations",
];

/// The tables the views read.
const VIEWED_TABLES: [&str; 4] = ["runs", "events", "usage_ledger", "automations"];

/// The views' definitions, created TEMP on each insights connection under the names of
/// [`VIEWS`] followed by `_` and the connection's secret (see [`view_sql`]). Columns are
/// documented in docs/insights.md; a change here is a change there.
const VIEW_SQL: &str = "
CREATE TEMP VIEW insights_runs_{secret} AS
SELECT r.id AS run_id,
       r.status AS status,
       COALESCE(json_extract(r.state, '$.status.reason'),
                json_extract(r.state, '$.status.blocked_reason')) AS reason,
       (SELECT json_extract(c.payload, '$.properties.title')
          FROM events c WHERE c.key = (r.num << 32) + 1) AS title,
       r.workflow AS workflow,
       (SELECT json_extract(c.payload, '$.properties.labels')
          FROM events c WHERE c.key = (r.num << 32) + 1) AS labels,
       r.automation_id AS automation_id,
       r.parent_id AS parent_id,
       r.archived AS archived,
       r.created_at AS created_at,
       json_extract(r.state, '$.started_at') AS started_at,
       json_extract(r.state, '$.completed_at') AS completed_at,
       CAST(round((julianday(json_extract(r.state, '$.completed_at'))
                   - julianday(json_extract(r.state, '$.started_at'))) * 86400000) AS INTEGER)
           AS duration_ms,
       json_extract(r.state, '$.usage.usd_micros') AS usd_micros,
       json_extract(r.state, '$.error') AS error,
       r.last_seq AS events
FROM runs r;
CREATE TEMP VIEW insights_stages_{secret} AS
SELECT e.run_id AS run_id,
       json_extract(e.payload, '$.node_id') AS node_id,
       e.ts AS ts,
       CASE e.kind WHEN 'stage.completed' THEN json_extract(e.payload, '$.properties.status')
                   ELSE 'fail' END AS status,
       json_extract(e.payload, '$.properties.attempt') AS attempt,
       COALESCE(json_extract(e.payload, '$.properties.will_retry'), 0) AS will_retry,
       json_extract(e.payload, '$.properties.duration_ms') AS duration_ms,
       json_extract(e.payload, '$.properties.failure.class') AS failure_class,
       json_extract(e.payload, '$.properties.failure.message') AS failure_message,
       json_extract(e.payload, '$.properties.usage.provider') AS provider,
       json_extract(e.payload, '$.properties.usage.model') AS model,
       json_extract(e.payload, '$.properties.usage.tokens.input') AS input_tokens,
       json_extract(e.payload, '$.properties.usage.tokens.output') AS output_tokens,
       json_extract(e.payload, '$.properties.usage.cost.usd_micros') AS usd_micros
FROM events e
WHERE e.kind IN ('stage.completed', 'stage.failed');
CREATE TEMP VIEW insights_usage_{secret} AS
SELECT ts, day, origin, run_id, node_id, workflow, automation_id, provider, model,
       input_tokens, output_tokens, reasoning_tokens, cache_read_tokens, cache_write_tokens,
       usd_micros, priced
FROM usage_ledger;
CREATE TEMP VIEW insights_events_{secret} AS
SELECT run_id, seq, kind, ts, json_extract(payload, '$.node_id') AS node_id, payload
FROM events;
CREATE TEMP VIEW insights_automations_{secret} AS
SELECT id AS automation_id,
       json_extract(definition, '$.name') AS name,
       json_extract(definition, '$.description') AS description,
       json_extract(definition, '$.target.repository') AS repository,
       json_extract(definition, '$.target.workflow') AS workflow,
       json_array_length(definition, '$.triggers') AS triggers,
       created_at, updated_at
FROM automations;
";

/// The TEMP views of a connection whose secret is `secret`: the definitions under
/// `<view>_<secret>`, and each public view a `SELECT *` of its inner one.
///
/// Why two levels: SQLite's authorizer names the view through which a table is read (the
/// accessor), but a CTE is named the same way, so `WITH insights_runs AS (SELECT * FROM
/// mcp_servers) ...` would pass for the view. Only the inner views read tables, and their
/// names carry a random secret no query can guess or read (the schema tables, `EXPLAIN` and
/// `PRAGMA` are refused).
pub fn view_sql(secret: &str) -> String {
    let mut sql = VIEW_SQL.replace("{secret}", secret);
    for v in VIEWS {
        sql.push_str(&format!(
            "CREATE TEMP VIEW {v} AS SELECT * FROM {v}_{secret};\n"
        ));
    }
    sql
}

/// The SQL functions a query may call: SQLite's core scalar, aggregate, date, JSON and
/// window functions, minus those that touch files, load code or make large values from
/// nothing (`load_extension`, `readfile`, `zeroblob`, `randomblob`, `fts3_tokenizer`, ...).
pub const FUNCTIONS: &[&str] = &[
    "abs",
    "avg",
    "ceil",
    "ceiling",
    "char",
    "coalesce",
    "concat",
    "concat_ws",
    "count",
    "cume_dist",
    "date",
    "datetime",
    "dense_rank",
    "exp",
    "first_value",
    "floor",
    "format",
    "glob",
    "group_concat",
    "hex",
    "ifnull",
    "iif",
    "instr",
    "json",
    "json_array",
    "json_array_length",
    "json_each",
    "json_extract",
    "json_group_array",
    "json_group_object",
    "json_object",
    "json_quote",
    "json_tree",
    "json_type",
    "json_valid",
    "julianday",
    "lag",
    "last_value",
    "lead",
    "length",
    "like",
    "likelihood",
    "ln",
    "log",
    "log10",
    "log2",
    "lower",
    "ltrim",
    "max",
    "min",
    "mod",
    "nth_value",
    "ntile",
    "nullif",
    "octet_length",
    "percent_rank",
    "pi",
    "pow",
    "power",
    "printf",
    "quote",
    "rank",
    "replace",
    "round",
    "row_number",
    "rtrim",
    "sign",
    "sqrt",
    "strftime",
    "string_agg",
    "substr",
    "substring",
    "sum",
    "time",
    "timediff",
    "total",
    "trim",
    "typeof",
    "unhex",
    "unicode",
    "unixepoch",
    "upper",
];

/// What a query may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InsightLimits {
    /// Rows a result may have; one more stops the statement.
    pub max_rows: usize,
    /// Bytes of cell values (text as its length, other values as 8) a result may have.
    pub max_bytes: usize,
    /// How long a statement may run.
    pub timeout: Duration,
    /// Bytes of SQL text.
    pub max_sql_bytes: usize,
}

impl Default for InsightLimits {
    fn default() -> Self {
        InsightLimits {
            max_rows: 10_000,
            max_bytes: 8 * 1024 * 1024,
            timeout: Duration::from_secs(5),
            max_sql_bytes: 64 * 1024,
        }
    }
}

/// A query's answer: column names and rows of JSON values (integers, reals, text, null;
/// a blob as lowercase hex).
#[derive(Debug, Clone, PartialEq)]
pub struct InsightAnswer {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
    /// The cells' bytes as counted against [`InsightLimits::max_bytes`].
    pub bytes: usize,
}

/// Why a query gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum InsightError {
    #[error("the SQL is {len} bytes; insights queries are limited to {max} bytes")]
    SqlTooLong { len: usize, max: usize },
    #[error("the SQL is empty")]
    Empty,
    #[error("one statement per query: remove everything after the first `;`")]
    MultipleStatements,
    /// The SQL does not compile (syntax, unknown column, ...).
    #[error("the SQL does not compile: {0}")]
    Invalid(String),
    /// The authorizer refused part of the statement; the text says what and why.
    #[error("{0}")]
    Refused(String),
    #[error("the query ran past its time limit of {} ms and was stopped", .0.as_millis())]
    Timeout(Duration),
    #[error("the query returned more than {0} rows; add a LIMIT or aggregate")]
    TooManyRows(usize),
    #[error("the query's result passed {0} bytes; select fewer columns or rows")]
    TooLarge(usize),
    #[error("the query failed while running: {0}")]
    Failed(String),
    #[error("{0} insights queries are already running; retry in a moment")]
    Busy(usize),
    #[error("opening the insights connection failed: {0}")]
    Store(#[from] StoreError),
}

/// What the authorizer and the progress handler of one connection share with the query
/// that is running on it.
#[derive(Default)]
struct Guard {
    /// The inner views' names (`<view>_<secret>`).
    inner: Vec<String>,
    deadline: Mutex<Option<Instant>>,
    timed_out: AtomicBool,
    /// The first refusal of the statement being prepared.
    refused: Mutex<Option<String>>,
}

struct Reader {
    conn: Connection,
    guard: Arc<Guard>,
}

/// The insights connections over one database file.
pub struct InsightsDb {
    path: PathBuf,
    idle: Mutex<Vec<Reader>>,
    running: AtomicUsize,
}

impl InsightsDb {
    /// Queries that may run at once; one more is refused ([`InsightError::Busy`]) so that
    /// insights never take every core from the runs.
    pub const MAX_RUNNING: usize = 2;

    /// Insights over the database at `path` (opened lazily, per query).
    pub fn new(path: &Path) -> InsightsDb {
        InsightsDb {
            path: path.to_path_buf(),
            idle: Mutex::new(Vec::new()),
            running: AtomicUsize::new(0),
        }
    }

    /// Runs `sql` under `limits`.
    pub fn query(&self, sql: &str, limits: &InsightLimits) -> Result<InsightAnswer, InsightError> {
        self.with_reader(sql, limits, |reader| run(reader, sql, limits))
    }

    /// Checks that `sql` would be accepted (it compiles and the authorizer allows it)
    /// without running it; its column names.
    pub fn check(&self, sql: &str, limits: &InsightLimits) -> Result<Vec<String>, InsightError> {
        self.with_reader(sql, limits, |reader| {
            prepare(reader, sql).map(|st| st.column_names().into_iter().map(String::from).collect())
        })
    }

    fn with_reader<T>(
        &self,
        sql: &str,
        limits: &InsightLimits,
        f: impl FnOnce(&Reader) -> Result<T, InsightError>,
    ) -> Result<T, InsightError> {
        if sql.len() > limits.max_sql_bytes {
            return Err(InsightError::SqlTooLong {
                len: sql.len(),
                max: limits.max_sql_bytes,
            });
        }
        if sql.trim().trim_end_matches(';').trim().is_empty() {
            return Err(InsightError::Empty);
        }
        let before = self.running.fetch_add(1, Ordering::SeqCst);
        let _slot = Slot(&self.running);
        if before >= Self::MAX_RUNNING {
            return Err(InsightError::Busy(Self::MAX_RUNNING));
        }
        let reader = match self.idle.lock().pop() {
            Some(r) => r,
            None => open(&self.path, limits)?,
        };
        let result = f(&reader);
        // A connection goes back unless the statement broke it (SQLite reports that as a
        // failure, and a fresh connection costs a millisecond).
        if !matches!(result, Err(InsightError::Failed(_))) {
            self.idle.lock().push(reader);
        }
        result
    }
}

/// Releases a running-query slot when dropped.
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn open(path: &Path, limits: &InsightLimits) -> Result<Reader, InsightError> {
    let err = StoreError::db_global("opening the insights connection");
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(&err)?;
    conn.busy_timeout(Duration::from_secs(2)).map_err(&err)?;
    let mut bytes = [0u8; 16];
    crate::base::random::fill_random(&mut bytes).map_err(|e| {
        err(rusqlite::Error::InvalidParameterName(format!(
            "no random bytes: {e}"
        )))
    })?;
    let secret = crate::base::hex(&bytes);
    conn.execute_batch(&view_sql(&secret)).map_err(&err)?;
    conn.execute_batch("PRAGMA query_only = ON;")
        .map_err(&err)?;
    // One value at most 1 MiB (no `printf('%.*c', 1e9, 'x')`), SQL text within the cap,
    // no ATTACH at all (belt and braces: the authorizer refuses it first).
    let one_value = (limits.max_bytes.min(1 << 20)) as i32;
    conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, one_value)
        .map_err(&err)?;
    conn.set_limit(
        Limit::SQLITE_LIMIT_SQL_LENGTH,
        limits.max_sql_bytes.min(i32::MAX as usize) as i32,
    )
    .map_err(&err)?;
    conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)
        .map_err(&err)?;
    let guard = Arc::new(Guard {
        inner: VIEWS.iter().map(|v| format!("{v}_{secret}")).collect(),
        ..Guard::default()
    });
    let g = Arc::clone(&guard);
    conn.authorizer(Some(move |ctx: AuthContext<'_>| authorize(&g, ctx)));
    let g = Arc::clone(&guard);
    conn.progress_handler(
        1_000,
        Some(move || {
            let late = g.deadline.lock().is_some_and(|d| Instant::now() >= d);
            if late {
                g.timed_out.store(true, Ordering::SeqCst);
            }
            late
        }),
    );
    Ok(Reader { conn, guard })
}

/// The authorizer's policy (see the module docs); a refusal records its reason.
fn authorize(guard: &Guard, ctx: AuthContext<'_>) -> Authorization {
    let refusal = match ctx.action {
        AuthAction::Select | AuthAction::Recursive => None,
        AuthAction::Read {
            table_name,
            column_name,
        } => {
            let inner = |name: &str| guard.inner.iter().any(|i| i == name);
            let through_view = ctx.accessor.is_some_and(inner)
                && ctx.database_name == Some("main")
                && VIEWED_TABLES.contains(&table_name);
            // `count(*)` over a view (or a CTE) is computed from the table under it, which
            // SQLite authorizes as a read of no column, naming no view: a row count of a
            // table a view shows anyway (or of the CTE's own rows).
            let counted = column_name.is_empty()
                && (VIEWED_TABLES.contains(&table_name) || ctx.database_name.is_none());
            let allowed = through_view
                || counted
                || VIEWS.contains(&table_name)
                || inner(table_name)
                || table_name == "json_each"
                || table_name == "json_tree";
            (!allowed).then(|| {
                format!(
                    "insights can read only the views {}; `{table_name}` is not one of them",
                    VIEWS.join(", ")
                )
            })
        }
        AuthAction::Function { function_name } => {
            let name = function_name.to_ascii_lowercase();
            (!FUNCTIONS.contains(&name.as_str())).then(|| {
                format!("the function `{function_name}` is not allowed in insights queries")
            })
        }
        AuthAction::Pragma { pragma_name, .. } => Some(format!(
            "PRAGMA is not allowed in insights queries (`{pragma_name}`)"
        )),
        AuthAction::Attach { .. } => {
            Some("ATTACH is not allowed in insights queries: only the store's views".into())
        }
        AuthAction::Detach { .. } => Some("DETACH is not allowed in insights queries".into()),
        AuthAction::Transaction { .. } | AuthAction::Savepoint { .. } => {
            Some("transactions are not allowed in insights queries".into())
        }
        AuthAction::Insert { table_name }
        | AuthAction::Delete { table_name }
        | AuthAction::Update { table_name, .. } => Some(format!(
            "insights queries are read-only: writing `{table_name}` is refused"
        )),
        other => Some(format!(
            "insights queries are read-only SELECTs: {} is refused",
            action_name(&other)
        )),
    };
    match refusal {
        None => Authorization::Allow,
        Some(why) => {
            let mut first = guard.refused.lock();
            if first.is_none() {
                *first = Some(why);
            }
            Authorization::Deny
        }
    }
}

fn action_name(a: &AuthAction<'_>) -> &'static str {
    match a {
        AuthAction::CreateIndex { .. } | AuthAction::CreateTempIndex { .. } => "CREATE INDEX",
        AuthAction::CreateTable { .. } | AuthAction::CreateTempTable { .. } => "CREATE TABLE",
        AuthAction::CreateTrigger { .. } | AuthAction::CreateTempTrigger { .. } => "CREATE TRIGGER",
        AuthAction::CreateView { .. } | AuthAction::CreateTempView { .. } => "CREATE VIEW",
        AuthAction::CreateVtable { .. } => "CREATE VIRTUAL TABLE",
        AuthAction::DropIndex { .. }
        | AuthAction::DropTable { .. }
        | AuthAction::DropTrigger { .. }
        | AuthAction::DropView { .. }
        | AuthAction::DropTempIndex { .. }
        | AuthAction::DropTempTable { .. }
        | AuthAction::DropTempTrigger { .. }
        | AuthAction::DropTempView { .. }
        | AuthAction::DropVtable { .. } => "DROP",
        AuthAction::AlterTable { .. } => "ALTER TABLE",
        AuthAction::Reindex { .. } => "REINDEX",
        AuthAction::Analyze { .. } => "ANALYZE",
        _ => "this statement",
    }
}

/// The statement, compiled under the authorizer, if it is one read-only `SELECT`.
fn prepare<'c>(reader: &'c Reader, sql: &str) -> Result<rusqlite::Statement<'c>, InsightError> {
    let guard = &reader.guard;
    *guard.refused.lock() = None;
    guard.timed_out.store(false, Ordering::SeqCst);
    let st = match reader.conn.prepare(sql) {
        Ok(st) => st,
        Err(e) => return Err(prepare_error(guard, e)),
    };
    if st.is_explain() != 0 {
        return Err(InsightError::Refused(
            "EXPLAIN is not allowed in insights queries".into(),
        ));
    }
    if !st.readonly() {
        return Err(InsightError::Refused(
            "insights queries are read-only SELECTs".into(),
        ));
    }
    Ok(st)
}

fn run(reader: &Reader, sql: &str, limits: &InsightLimits) -> Result<InsightAnswer, InsightError> {
    let guard = &reader.guard;
    let mut st = prepare(reader, sql)?;
    let columns: Vec<String> = st.column_names().into_iter().map(String::from).collect();
    let width = columns.len();
    *guard.deadline.lock() = Some(Instant::now() + limits.timeout);
    let answer = read_rows(&mut st, width, limits).map_err(|e| match e {
        Stop::Limit(e) => e,
        Stop::Sql(_) if guard.timed_out.load(Ordering::SeqCst) => {
            InsightError::Timeout(limits.timeout)
        }
        Stop::Sql(e) if is_too_big(&e) => InsightError::TooLarge(limits.max_bytes.min(1 << 20)),
        Stop::Sql(e) => InsightError::Failed(e.to_string()),
    });
    *guard.deadline.lock() = None;
    answer.map(|(rows, bytes)| InsightAnswer {
        columns,
        rows,
        bytes,
    })
}

enum Stop {
    Limit(InsightError),
    Sql(rusqlite::Error),
}

fn read_rows(
    st: &mut rusqlite::Statement<'_>,
    width: usize,
    limits: &InsightLimits,
) -> Result<(Vec<Vec<Value>>, usize), Stop> {
    let mut rows = Vec::new();
    let mut bytes = 0usize;
    let mut it = st.raw_query();
    while let Some(row) = it.next().map_err(Stop::Sql)? {
        if rows.len() == limits.max_rows {
            return Err(Stop::Limit(InsightError::TooManyRows(limits.max_rows)));
        }
        let mut out = Vec::with_capacity(width);
        for i in 0..width {
            let v = row.get_ref(i).map_err(Stop::Sql)?;
            let (cell, size) = cell(v);
            bytes += size;
            out.push(cell);
        }
        if bytes > limits.max_bytes {
            return Err(Stop::Limit(InsightError::TooLarge(limits.max_bytes)));
        }
        rows.push(out);
    }
    Ok((rows, bytes))
}

/// A value as JSON and what it counts against the byte cap.
fn cell(v: ValueRef<'_>) -> (Value, usize) {
    match v {
        ValueRef::Null => (Value::Null, 4),
        ValueRef::Integer(i) => (Value::from(i), 8),
        ValueRef::Real(f) => (
            serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
            8,
        ),
        ValueRef::Text(t) => (
            Value::String(String::from_utf8_lossy(t).into_owned()),
            t.len(),
        ),
        ValueRef::Blob(b) => (Value::String(crate::base::hex(b)), b.len() * 2),
    }
}

fn is_too_big(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::TooBig)
}

fn prepare_error(guard: &Guard, e: rusqlite::Error) -> InsightError {
    if let Some(why) = guard.refused.lock().take() {
        return InsightError::Refused(why);
    }
    match e {
        rusqlite::Error::MultipleStatement => InsightError::MultipleStatements,
        e if is_too_big(&e) => InsightError::Invalid(e.to_string()),
        e => InsightError::Invalid(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::new_run;
    use crate::store::{RunStore, SqliteStore};

    fn store() -> (tempfile::TempDir, SqliteStore, InsightsDb) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("svc.db");
        let store = SqliteStore::open(&path).unwrap();
        new_run(&store, "first");
        new_run(&store, "second");
        let db = InsightsDb::new(&path);
        (dir, store, db)
    }

    fn q(db: &InsightsDb, sql: &str) -> Result<InsightAnswer, InsightError> {
        db.query(sql, &InsightLimits::default())
    }

    #[test]
    fn the_views_answer_and_their_columns_are_named() {
        let (_d, _s, db) = store();
        let a = q(
            &db,
            "SELECT title, status FROM insights_runs ORDER BY title",
        )
        .unwrap();
        assert_eq!(a.columns, ["title", "status"]);
        assert_eq!(a.rows[0][0], "first");
        assert_eq!(a.rows[1][0], "second");
        for v in VIEWS {
            q(&db, &format!("SELECT * FROM {v}")).unwrap();
        }
        let a = q(&db, "SELECT count(*) AS n FROM insights_events").unwrap();
        assert_eq!(a.rows[0][0], 2);
    }

    #[test]
    fn tables_writes_and_schema_changes_are_refused_naming_why() {
        let (_d, s, db) = store();
        for (sql, says) in [
            ("SELECT * FROM runs", "`runs` is not one of them"),
            ("SELECT definition FROM mcp_servers", "`mcp_servers`"),
            ("SELECT * FROM sqlite_master", "`sqlite_master`"),
            (
                "WITH insights_runs AS (SELECT * FROM runs) SELECT * FROM insights_runs",
                "`runs`",
            ),
            (
                "WITH insights_automations AS (SELECT definition FROM automations) \
                 SELECT * FROM insights_automations, temp.insights_automations",
                "`automations`",
            ),
            (
                "SELECT * FROM (SELECT definition FROM mcp_servers) AS insights_runs",
                "`mcp",
            ),
            ("SELECT sql FROM sqlite_temp_master", "`sqlite_temp_master`"),
            ("EXPLAIN QUERY PLAN SELECT * FROM insights_runs", "EXPLAIN"),
            ("DELETE FROM runs", "read-only"),
            ("UPDATE runs SET status = 'x'", "read-only"),
            ("INSERT INTO tombstones VALUES ('a', 'b')", "read-only"),
            ("DROP TABLE runs", "read-only"),
            ("CREATE TEMP TABLE t (x)", "read-only"),
            ("ATTACH 'x.db' AS x", "ATTACH"),
            ("PRAGMA journal_mode = DELETE", "PRAGMA"),
            ("PRAGMA table_info(runs)", "PRAGMA"),
            ("BEGIN", "transactions"),
            ("SELECT zeroblob(1000000000)", "`zeroblob`"),
            ("SELECT 1; DELETE FROM runs", "read-only"),
        ] {
            match q(&db, sql) {
                Err(InsightError::Refused(why)) => {
                    assert!(why.contains(says), "{sql}: {why}")
                }
                other => panic!("{sql}: {:?}", other.map(|a| a.rows)),
            }
        }
        // This build has no extension loading at all; either way, an error naming it.
        let e = q(&db, "SELECT load_extension('/tmp/x.so')").unwrap_err();
        assert!(e.to_string().contains("load_extension"), "{e}");
        assert!(matches!(
            q(&db, "SELECT 1; SELECT 2"),
            Err(InsightError::MultipleStatements)
        ));
        // Nothing changed, and the store still writes.
        assert_eq!(s.list_runs(0, 10).unwrap().len(), 2);
        new_run(&s, "third");
        assert_eq!(q(&db, "SELECT * FROM insights_runs").unwrap().rows.len(), 3);
    }

    #[test]
    fn limits_stop_a_query_and_the_connection_serves_the_next() {
        let (_d, _s, db) = store();
        let limits = InsightLimits {
            timeout: Duration::from_millis(200),
            max_rows: 100,
            max_bytes: 10_000,
            ..InsightLimits::default()
        };
        let forever = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
                       SELECT count(*) FROM c";
        let started = Instant::now();
        let r = db.query(forever, &limits);
        assert!(matches!(r, Err(InsightError::Timeout(_))), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(30));
        let many = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1000) \
                    SELECT x FROM c";
        assert!(matches!(
            db.query(many, &limits),
            Err(InsightError::TooManyRows(100))
        ));
        let wide = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 50) \
                    SELECT printf('%.*c', 1000, 'x') FROM c";
        assert!(matches!(
            db.query(wide, &limits),
            Err(InsightError::TooLarge(10_000))
        ));
        let huge = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 10000) \
                    SELECT group_concat(printf('%.*c', 1000, 'x'), '') FROM c";
        let r = q(&db, huge);
        assert!(matches!(r, Err(InsightError::TooLarge(_))), "{r:?}");
        let long = format!("SELECT 1 {}", " ".repeat(70_000));
        assert!(matches!(
            q(&db, &long),
            Err(InsightError::SqlTooLong { .. })
        ));
        assert!(matches!(q(&db, "SELEC 1"), Err(InsightError::Invalid(_))));
        assert!(matches!(q(&db, " ; "), Err(InsightError::Empty)));
        assert_eq!(
            q(&db, "SELECT 1 + 1").unwrap().rows,
            vec![vec![Value::from(2)]]
        );
    }
}
