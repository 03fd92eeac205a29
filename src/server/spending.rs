//! `GET /api/v1/usage`: LLM tokens and cost across every run (and completion) for a time
//! range, in total and by model, workflow, automation and UTC day, read from the store's
//! usage ledger (`store::usage`), so the figures survive restarts and pruned runs; plus the
//! daily cap and today's spend.
//!
//! Owns: the route's query parameters and shape. Must not touch: SQL.

use super::error::ApiError;
use super::http::Reply;
use super::router::Ctx;
use super::runs::store_error;
use super::App;
use crate::base::clock;
use crate::store::{UsageGroup, UsageGrouping};
use serde_json::{json, Value};

/// The default range: the last 30 days.
const DEFAULT_DAYS: i64 = 30;

/// A `since`/`until` value: RFC 3339 UTC, or a day `YYYY-MM-DD` (its start).
fn bound(ctx: &Ctx<'_, '_>, name: &str, default_ms: i64) -> Result<(String, i64), ApiError> {
    let Some(v) = ctx.inc.query(name).filter(|v| !v.is_empty()) else {
        return Ok((clock::format_millis(default_ms), default_ms));
    };
    let text = if v.len() == 10 {
        format!("{v}T00:00:00.000Z")
    } else {
        v.clone()
    };
    let ms = clock::parse_ts(&text).ok_or_else(|| {
        ApiError::bad_request(format!(
            "`{name}` must be a time such as 2026-11-01 or 2026-11-01T00:00:00Z, not `{v}`."
        ))
        .with_code("invalid_parameter")
    })?;
    Ok((clock::format_millis(ms), ms))
}

fn groups(rows: Vec<UsageGroup>, key: &str) -> Vec<Value> {
    rows.into_iter()
        .map(|g| {
            let mut v = serde_json::to_value(&g.sums).unwrap_or(Value::Null);
            v[key] = json!(g.key);
            if let Some(p) = g.provider {
                v["provider"] = json!(p);
            }
            v
        })
        .collect()
}

pub fn get(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let now = clock::parse_ts(&clock::now()).unwrap_or(0);
    let (until, until_ms) = bound(ctx, "until", now + 1)?;
    let (since, since_ms) = bound(ctx, "since", until_ms - DEFAULT_DAYS * 86_400_000)?;
    if since_ms >= until_ms {
        return Err(
            ApiError::bad_request("`since` must be before `until`.").with_code("invalid_parameter")
        );
    }
    let ledger = &app.ledger;
    let total = ledger
        .usage_sums(&since, &until, None)
        .map_err(store_error)?
        .into_iter()
        .next()
        .map(|g| serde_json::to_value(g.sums).unwrap_or(Value::Null))
        .unwrap_or(Value::Null);
    let by = |g: UsageGrouping, key: &str| -> Result<Vec<Value>, ApiError> {
        Ok(groups(
            ledger
                .usage_sums(&since, &until, Some(g))
                .map_err(store_error)?,
            key,
        ))
    };
    let cap = app
        .runs
        .daily_cap()
        .map_err(store_error)?
        .map(|c| c.to_json());
    Ok(Reply::json(
        200,
        &json!({
            "since": since,
            "until": until,
            "totals": total,
            "by_model": by(UsageGrouping::Model, "model")?,
            "by_workflow": by(UsageGrouping::Workflow, "workflow")?,
            "by_automation": by(UsageGrouping::Automation, "automation_id")?,
            "by_day": by(UsageGrouping::Day, "day")?,
            "daily_cap": cap,
        }),
    ))
}
