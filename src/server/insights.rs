//! The insights routes (admins only): `POST /api/v1/insights/query` (an answer as JSON, or
//! CSV with `Accept: text/csv`), `GET /api/v1/insights/schema` (the views, their columns,
//! the built-in samples and the limits) and the saved queries' catalog routes
//! (`/api/v1/insights/queries`, through [`super::catalog`]).
//!
//! Owns: these routes' shapes and the statuses of [`InsightError`]. Must not touch: SQL or
//! the authorizer (`store::insights`), saved queries' rules (`crate::insights`).

use super::catalog::Served;
use super::error::ApiError;
use super::http::Reply;
use super::router::Ctx;
use super::App;
use crate::catalog::Catalog;
use crate::insights::SavedQueries;
use crate::store::InsightError;
use serde_json::json;
use std::time::Instant;

impl Served for SavedQueries {
    fn catalog(app: &App) -> &Catalog<SavedQueries> {
        &app.insights.saved
    }
}

/// The body of `POST /api/v1/insights/query`: SQL, or a saved query's id.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryRequest {
    sql: Option<String>,
    query_id: Option<String>,
}

/// The API error of a query that gave no answer.
pub fn error(e: InsightError) -> ApiError {
    let detail = e.to_string();
    match e {
        InsightError::Empty | InsightError::MultipleStatements | InsightError::Invalid(_) => {
            ApiError::bad_request(detail).with_code("invalid_sql")
        }
        InsightError::SqlTooLong { .. } => {
            ApiError::unprocessable(detail).with_code("sql_too_long")
        }
        InsightError::Refused(_) => ApiError::unprocessable(detail).with_code("query_refused"),
        InsightError::Timeout(_) => ApiError::unprocessable(detail).with_code("query_timeout"),
        InsightError::TooManyRows(_) => {
            ApiError::unprocessable(detail).with_code("row_limit_exceeded")
        }
        InsightError::TooLarge(_) => ApiError::unprocessable(detail).with_code("result_too_large"),
        InsightError::Failed(_) => ApiError::unprocessable(detail).with_code("query_failed"),
        InsightError::Busy(_) => ApiError::new(429, detail)
            .with_code("insights_busy")
            .with_header("Retry-After", "1".into()),
        InsightError::Store(_) => ApiError::internal(detail),
    }
}

/// `POST /api/v1/insights/query`.
pub fn query(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let req: QueryRequest = ctx.inc.json()?;
    let (sql, query_id) = match (req.sql, req.query_id) {
        (Some(sql), None) => (sql, None),
        (None, Some(id)) => {
            let item = app.insights.saved.get(&id).map_err(super::catalog::error)?;
            let sql = item.definition["sql"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            (sql, Some(id))
        }
        _ => {
            return Err(ApiError::bad_request(
                "Send either `sql` (the query) or `query_id` (a saved query's id).",
            )
            .with_code("invalid_body"))
        }
    };
    let started = Instant::now();
    let answer = app.insights.query(&sql).map_err(error)?;
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    let wants_csv = ctx
        .inc
        .header("accept")
        .is_some_and(|a| a.to_ascii_lowercase().contains("text/csv"));
    if wants_csv {
        return Ok(Reply::Full(rouille::Response {
            status_code: 200,
            headers: vec![("Content-Type".into(), "text/csv; charset=utf-8".into())],
            data: rouille::ResponseBody::from_string(crate::insights::csv(&answer)),
            upgrade: None,
        }));
    }
    Ok(Reply::json(
        200,
        &json!({
            "columns": answer.columns,
            "rows": answer.rows,
            "row_count": answer.rows.len(),
            "elapsed_ms": (elapsed_ms * 1000.0).round() / 1000.0,
            "query_id": query_id,
        }),
    ))
}

/// `GET /api/v1/insights/schema`.
pub fn schema(app: &App, _ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let views = app.insights.views().map_err(error)?;
    let limits = app.insights.limits();
    Ok(Reply::json(
        200,
        &json!({
            "views": views.into_iter().map(|(name, columns)| json!({"name": name, "columns": columns})).collect::<Vec<_>>(),
            "samples": crate::insights::SAMPLES,
            "limits": {
                "max_rows": limits.max_rows,
                "max_bytes": limits.max_bytes,
                "timeout_ms": limits.timeout.as_millis() as u64,
                "max_sql_bytes": limits.max_sql_bytes,
            },
        }),
    ))
}
