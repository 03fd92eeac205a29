//! TEMPORARY STAND-IN for the `blocks` branch (replaced when it is merged): stage statuses,
//! failure classes and signatures, retry backoff presets.
//! Must not touch: the engine loop.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How a stage ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageStatus {
    Succeeded,
    PartiallySucceeded,
    Failed,
    Skipped,
}

impl StageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            StageStatus::Succeeded => "succeeded",
            StageStatus::PartiallySucceeded => "partially_succeeded",
            StageStatus::Failed => "failed",
            StageStatus::Skipped => "skipped",
        }
    }
    pub fn parse(s: &str) -> Option<StageStatus> {
        Some(match s {
            "succeeded" | "success" => StageStatus::Succeeded,
            "partially_succeeded" | "partial_success" => StageStatus::PartiallySucceeded,
            "failed" | "fail" => StageStatus::Failed,
            "skipped" => StageStatus::Skipped,
            _ => return None,
        })
    }
}

/// Why a stage failed, for signatures and the loop_restart guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    TransientInfra,
    Deterministic,
    BudgetExhausted,
    CompilationLoop,
    Canceled,
    Structural,
}

impl FailureClass {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::TransientInfra => "transient_infra",
            FailureClass::Deterministic => "deterministic",
            FailureClass::BudgetExhausted => "budget_exhausted",
            FailureClass::CompilationLoop => "compilation_loop",
            FailureClass::Canceled => "canceled",
            FailureClass::Structural => "structural",
        }
    }
}

pub fn classify(msg: &str) -> FailureClass {
    let m = msg.to_lowercase();
    let any = |hints: &[&str]| hints.iter().any(|h| m.contains(h));
    if any(&["cancel", "interrupt"]) {
        FailureClass::Canceled
    } else if any(&[
        "timeout",
        "timed out",
        "rate limit",
        "connection refused",
        "connection reset",
        "service unavailable",
        "try again",
    ]) {
        FailureClass::TransientInfra
    } else if any(&["turn limit", "token limit", "budget", "quota exceeded"]) {
        FailureClass::BudgetExhausted
    } else {
        FailureClass::Deterministic
    }
}

/// `node|class|normalised message`.
pub fn signature(node: &str, class: FailureClass, msg: &str) -> String {
    let lower = msg.trim().to_lowercase();
    let words: Vec<String> = lower
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .map(|w| {
            if w.chars().all(|c| c.is_ascii_digit()) {
                "<n>".to_string()
            } else if w.len() >= 7 && w.len() <= 64 && w.chars().all(|c| c.is_ascii_hexdigit()) {
                "<hex>".to_string()
            } else {
                w.to_string()
            }
        })
        .collect();
    let mut reason = words.join(" ");
    if reason.len() > 240 {
        let mut cut = 240;
        while !reason.is_char_boundary(cut) {
            cut -= 1;
        }
        reason.truncate(cut);
    }
    if reason.is_empty() {
        reason = "unknown".into();
    }
    format!("{node}|{}|{reason}", class.as_str())
}

/// Attempts and delays of a retry policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub attempts: u32,
    pub initial: Duration,
    pub factor: f64,
}

/// The policy preset picks backoff and default attempts; explicit `max_retries` wins.
pub fn backoff(
    policy: Option<&str>,
    max_retries: Option<i64>,
    default_max_retries: Option<i64>,
) -> Backoff {
    let (attempts, initial_ms, factor) = match policy {
        Some("none") => (1, 200, 2.0),
        Some("aggressive") => (5, 500, 2.0),
        Some("linear") => (3, 500, 1.0),
        Some("patient") => (3, 2000, 3.0),
        Some("standard") => (5, 200, 2.0),
        _ => (default_max_retries.unwrap_or(0).max(0) as u32 + 1, 200, 2.0),
    };
    let attempts = match max_retries {
        Some(n) => n.max(0) as u32 + 1,
        None => attempts,
    };
    Backoff {
        attempts,
        initial: Duration::from_millis(initial_ms),
        factor,
    }
}

/// Delay before attempt `n + 1` after failed attempt `n` (1-based); `unit` in [0, 1).
pub fn delay(b: &Backoff, n: u32, unit: f64) -> Duration {
    let raw = b.initial.as_secs_f64() * b.factor.powi(n.saturating_sub(1) as i32);
    Duration::from_secs_f64(raw.min(60.0) * (0.5 + unit))
}
