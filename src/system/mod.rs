//! System housekeeping's rules (issue 29): what `POST /api/v1/system/prune` may remove (its
//! filters, their validation, which runs match), and the bytes a directory tree takes on
//! disk (workspaces, sandboxes, backups for `system/df`).
//!
//! Prune never removes a run that is not finished (succeeded, failed or dead): active,
//! queued, blocked, paused and submitted runs are out of its reach whatever the filters say.
//! Without an age filter it removes only runs that ended more than 24 hours ago.
//!
//! Owns: the prune filter and matching, directory sizes. Must not touch: the store's SQL,
//! HTTP, or deleting runs (the server deletes through the runs service's tombstone path).

use crate::store::RunRow;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The statuses prune may remove.
pub const PRUNABLE: [&str; 3] = ["succeeded", "failed", "dead"];

/// The default age when a prune names none: 24 hours.
pub const DEFAULT_OLDER_THAN_MS: i64 = 24 * 3600 * 1000;

/// A prune request as sent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PruneRequest {
    /// Only report (the default); `false` removes.
    pub dry_run: Option<bool>,
    /// Runs that ended more than this long ago (`90m`, `24h`, `7d`).
    pub older_than: Option<String>,
    /// Runs that ended before this time (RFC 3339, or a `YYYY-MM-DD` day, UTC).
    pub before: Option<String>,
    /// Only these statuses (a subset of succeeded, failed, dead).
    pub status: Option<Vec<String>>,
    /// Only runs carrying every one of these labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Only runs this automation created.
    pub automation: Option<String>,
    /// Only runs no automation created.
    pub manual_only: Option<bool>,
}

/// A validated prune filter.
#[derive(Debug, Clone, PartialEq)]
pub struct PruneFilter {
    pub dry_run: bool,
    /// Runs must have ended before this (ms since the epoch).
    pub ended_before_ms: i64,
    pub statuses: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub automation: Option<String>,
    pub manual_only: bool,
}

/// Why a prune request is refused (422), naming the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FilterError {
    pub field: &'static str,
    pub message: String,
}

fn refuse(field: &'static str, message: impl Into<String>) -> FilterError {
    FilterError {
        field,
        message: message.into(),
    }
}

/// `90m`, `24h`, `7d`, `3600s` in milliseconds.
pub fn parse_age(s: &str) -> Option<i64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = s.split_at(split);
    let n: i64 = n.parse().ok()?;
    let per = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        _ => return None,
    };
    n.checked_mul(per)
}

/// RFC 3339 UTC (`...Z`) or a day `YYYY-MM-DD` (its start, UTC), in milliseconds.
fn parse_time(s: &str) -> Option<i64> {
    if s.len() == 10 {
        return crate::base::clock::parse_ts(&format!("{s}T00:00:00.000Z"));
    }
    crate::base::clock::parse_ts(s)
}

impl PruneRequest {
    /// The filter, or why it is refused (contradictory or malformed filters).
    pub fn validate(self, now_ms: i64) -> Result<PruneFilter, FilterError> {
        let ended_before_ms = match (&self.older_than, &self.before) {
            (Some(_), Some(_)) => {
                return Err(refuse(
                    "older_than",
                    "give older_than or before, not both (they contradict each other)",
                ))
            }
            (Some(age), None) => {
                let ms = parse_age(age).ok_or_else(|| {
                    refuse(
                        "older_than",
                        format!("`{age}` is not an age such as 90m, 24h or 7d"),
                    )
                })?;
                now_ms - ms
            }
            (None, Some(t)) => parse_time(t).ok_or_else(|| {
                refuse(
                    "before",
                    format!("`{t}` is not a time (2026-11-01 or 2026-11-01T00:00:00Z)"),
                )
            })?,
            (None, None) => now_ms - DEFAULT_OLDER_THAN_MS,
        };
        if ended_before_ms > now_ms {
            return Err(refuse(
                "before",
                "a time in the future: no run has ended then",
            ));
        }
        let statuses = match self.status {
            None => PRUNABLE.iter().map(|s| s.to_string()).collect(),
            Some(list) if list.is_empty() => {
                return Err(refuse(
                    "status",
                    "an empty list matches nothing; leave it out for every finished status",
                ))
            }
            Some(list) => {
                for s in &list {
                    if !PRUNABLE.contains(&s.as_str()) {
                        return Err(refuse(
                            "status",
                            format!("`{s}`: prune removes only finished runs (succeeded, failed, dead), never active, queued or blocked ones"),
                        ));
                    }
                }
                list
            }
        };
        let manual_only = self.manual_only.unwrap_or(false);
        if manual_only && self.automation.is_some() {
            return Err(refuse(
                "manual_only",
                "manual_only and automation contradict each other",
            ));
        }
        Ok(PruneFilter {
            dry_run: self.dry_run.unwrap_or(true),
            ended_before_ms,
            statuses,
            labels: self.labels,
            automation: self.automation,
            manual_only,
        })
    }
}

impl PruneFilter {
    /// Whether prune removes `row` (finished, and every filter matches).
    pub fn matches(&self, row: &RunRow) -> bool {
        let automation_id = row.automation_id();
        if !row.status.is_terminal() || !self.statuses.iter().any(|s| s == row.status.name()) {
            return false;
        }
        let ended = row.completed_at.as_deref().unwrap_or(&row.updated_at);
        let Some(ended_ms) = crate::base::clock::parse_ts(ended) else {
            return false;
        };
        if ended_ms >= self.ended_before_ms {
            return false;
        }
        if !self
            .labels
            .iter()
            .all(|(k, v)| row.labels.get(k) == Some(v))
        {
            return false;
        }
        match (&self.automation, automation_id) {
            (Some(want), Some(got)) if want == got => {}
            (Some(_), _) => return false,
            (None, Some(_)) if self.manual_only => return false,
            _ => {}
        }
        true
    }
}

/// Bytes of regular files under `path` (symlinks are not followed; a missing path is 0).
pub fn dir_bytes(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if meta.is_file() {
        return meta.len();
    }
    if !meta.is_dir() {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries.flatten().map(|e| dir_bytes(&e.path())).sum()
}

/// Bytes of the file at `path` (0 when missing).
pub fn file_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    fn req(v: serde_json::Value) -> Result<PruneFilter, FilterError> {
        serde_json::from_value::<PruneRequest>(v)
            .unwrap()
            .validate(NOW)
    }

    #[test]
    fn filters_default_safely_and_contradictions_are_refused() {
        let f = req(serde_json::json!({})).unwrap();
        assert!(f.dry_run);
        assert_eq!(f.ended_before_ms, NOW - DEFAULT_OLDER_THAN_MS);
        assert_eq!(f.statuses, PRUNABLE);
        assert_eq!(
            req(serde_json::json!({"older_than": "7d"}))
                .unwrap()
                .ended_before_ms,
            NOW - 7 * 86_400_000
        );
        assert!(req(serde_json::json!({"before": "2026-01-01"})).is_ok());
        for (bad, field) in [
            (
                serde_json::json!({"older_than": "1d", "before": "2026-01-01"}),
                "older_than",
            ),
            (serde_json::json!({"older_than": "soon"}), "older_than"),
            (serde_json::json!({"before": "2999-01-01"}), "before"),
            (serde_json::json!({"status": ["running"]}), "status"),
            (serde_json::json!({"status": []}), "status"),
            (
                serde_json::json!({"manual_only": true, "automation": "nightly"}),
                "manual_only",
            ),
        ] {
            assert_eq!(req(bad.clone()).unwrap_err().field, field, "{bad}");
        }
    }
}
