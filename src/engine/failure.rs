//! Stage statuses, failure classes, failure signatures and retry backoff presets
//! (engine.md 4.2 and 4.5, decisions.md "Retries and limits").
//!
//! Pure functions only: this file decides *what* a failure is and *how long* to wait, never
//! whether the engine retries (that depends on where the failure came from) and never sleeps.
//! Must not touch processes, the store or the workflow model.

use crate::engine::command::CommandResult;
use crate::procs::Termination;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The outcome of one stage visit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageStatus {
    Succeeded,
    PartiallySucceeded,
    Failed,
    Skipped,
}

impl StageStatus {
    pub const ALL: [StageStatus; 4] = [
        StageStatus::Succeeded,
        StageStatus::PartiallySucceeded,
        StageStatus::Failed,
        StageStatus::Skipped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StageStatus::Succeeded => "succeeded",
            StageStatus::PartiallySucceeded => "partially_succeeded",
            StageStatus::Failed => "failed",
            StageStatus::Skipped => "skipped",
        }
    }

    /// Succeeded or partially succeeded (what a goal gate requires).
    pub fn is_success(self) -> bool {
        matches!(
            self,
            StageStatus::Succeeded | StageStatus::PartiallySucceeded
        )
    }
}

impl fmt::Display for StageStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status name that is neither one of the four statuses nor a legacy alias.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown status `{0}` (expected succeeded, partially_succeeded, failed or skipped)")]
pub struct UnknownStatus(pub String);

impl FromStr for StageStatus {
    type Err = UnknownStatus;

    /// The four names, plus the legacy `success`, `fail` and `partial_success`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "succeeded" | "success" => Ok(StageStatus::Succeeded),
            "partially_succeeded" | "partial_success" => Ok(StageStatus::PartiallySucceeded),
            "failed" | "fail" => Ok(StageStatus::Failed),
            "skipped" => Ok(StageStatus::Skipped),
            other => Err(UnknownStatus(other.to_string())),
        }
    }
}

/// Why a stage failed, as far as retries, the loop breaker and `loop_restart` care.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
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

    /// Classes the loop breaker counts (engine.md 4.6).
    pub fn counts_for_loop_breaker(self) -> bool {
        matches!(self, FailureClass::Deterministic | FailureClass::Structural)
    }
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

const CANCEL_HINTS: &[&str] = &["cancel", "interrupt"];

const TRANSIENT_HINTS: &[&str] = &[
    "timeout",
    "timed out",
    "time out",
    "rate limit",
    "rate-limit",
    "ratelimit",
    "rate_limit",
    "connection refused",
    "connection reset",
    "connection closed",
    "connection aborted",
    "econnrefused",
    "econnreset",
    "etimedout",
    "too many requests",
    "service unavailable",
    "bad gateway",
    "internal server error",
    "broken pipe",
    "try again",
    "temporarily unavailable",
    "temporary failure",
    "overloaded",
    "network is unreachable",
];

/// HTTP statuses that hint at a transient failure; matched as whole numbers only, so
/// `5000 tokens` is not a 500.
const TRANSIENT_CODES: &[&str] = &["429", "500", "502", "503", "504"];

const BUDGET_HINTS: &[&str] = &[
    "turn limit",
    "token limit",
    "context length",
    "context window",
    "maximum context",
    "budget",
    "quota exceeded",
    "insufficient_quota",
    "max tokens",
    "max_tokens",
];

const STRUCTURAL_HINTS: &[&str] = &[
    "scope violation",
    "scope_violation",
    "out of scope",
    "outside the allowed",
    "outside allowed",
];

/// engine.md 4.5 heuristics, in order, on the lowercased message: canceled, transient
/// infrastructure, budget exhausted, structural, else deterministic.
pub fn classify(message: &str) -> FailureClass {
    let m = message.to_lowercase();
    let has = |hints: &[&str]| hints.iter().any(|h| m.contains(h));
    if has(CANCEL_HINTS) {
        FailureClass::Canceled
    } else if has(TRANSIENT_HINTS) || has_number_word(&m, TRANSIENT_CODES) {
        FailureClass::TransientInfra
    } else if has(BUDGET_HINTS) {
        FailureClass::BudgetExhausted
    } else if has(STRUCTURAL_HINTS) {
        FailureClass::Structural
    } else {
        FailureClass::Deterministic
    }
}

fn has_number_word(text: &str, numbers: &[&str]) -> bool {
    text.split(|c: char| !c.is_ascii_digit())
        .any(|w| numbers.contains(&w))
}

/// The class of a failed command stage. A timeout is transient and a cancellation is
/// canceled; for a non-zero exit the heuristics read only the last non-blank line of stderr
/// (else of stdout) — the error the command ended with — so a build log that merely
/// mentions "timeout" somewhere is not taken for an infrastructure failure (engine.md 4.5 ⚠).
pub fn classify_command(result: &CommandResult) -> FailureClass {
    match result.termination {
        Termination::TimedOut => FailureClass::TransientInfra,
        Termination::Cancelled => FailureClass::Canceled,
        Termination::Exited => {
            let line = last_line(&result.stderr).or_else(|| last_line(&result.stdout));
            line.map_or(FailureClass::Deterministic, classify)
        }
    }
}

fn last_line(text: &str) -> Option<&str> {
    text.lines().rev().map(str::trim).find(|l| !l.is_empty())
}

/// Longest normalised reason kept in a signature, in bytes.
pub const SIGNATURE_REASON_MAX: usize = 240;

/// `node|class|reason` with the reason normalised (engine.md 4.5): trim and lowercase; hex
/// words of 7-64 characters become `<hex>`; digit words become `<n>`; runs of commas and
/// whitespace become one space; cut to 240 bytes; empty becomes `unknown`.
pub fn signature(node_id: &str, class: FailureClass, message: &str) -> String {
    format!("{node_id}|{class}|{}", normalize_reason(message))
}

/// The reason part of a [`signature`].
pub fn normalize_reason(message: &str) -> String {
    let lowered = message.trim().to_lowercase();
    let replaced = replace_words(&lowered);
    let collapsed = collapse_separators(&replaced);
    let cut = cut_at_boundary(collapsed.trim(), SIGNATURE_REASON_MAX).trim_end();
    if cut.is_empty() {
        "unknown".to_string()
    } else {
        cut.to_string()
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Replaces hex words and digit words (word = maximal run of letters, digits, `_`).
fn replace_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let is_word = is_word_char(c);
        let end = rest
            .find(|ch: char| is_word_char(ch) != is_word)
            .unwrap_or(rest.len());
        let (chunk, tail) = rest.split_at(end);
        out.push_str(if is_word { word_token(chunk) } else { chunk });
        rest = tail;
    }
    out
}

fn word_token(word: &str) -> &str {
    let len = word.len();
    if (7..=64).contains(&len) && word.bytes().all(|b| b.is_ascii_hexdigit()) {
        "<hex>"
    } else if word.bytes().all(|b| b.is_ascii_digit()) {
        "<n>"
    } else {
        word
    }
}

fn collapse_separators(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_sep = false;
    for c in text.chars() {
        if c == ',' || c.is_whitespace() {
            if !in_sep {
                out.push(' ');
            }
            in_sep = true;
        } else {
            out.push(c);
            in_sep = false;
        }
    }
    out
}

/// The longest prefix of at most `max` bytes that ends on a character boundary.
fn cut_at_boundary(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// How many attempts a stage gets and how long to wait between them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub attempts: u32,
    pub initial: Duration,
    pub factor: f64,
}

/// Longest delay before jitter.
pub const MAX_DELAY: Duration = Duration::from_secs(60);

const STANDARD: Backoff = Backoff {
    attempts: 5,
    initial: Duration::from_millis(200),
    factor: 2.0,
};

/// The named presets of decisions.md. `none` keeps the standard timing in case an explicit
/// `max_retries` gives it more than one attempt.
pub fn preset(name: &str) -> Option<Backoff> {
    let b = |attempts, initial_ms, factor| Backoff {
        attempts,
        initial: Duration::from_millis(initial_ms),
        factor,
    };
    Some(match name {
        "none" => Backoff {
            attempts: 1,
            ..STANDARD
        },
        "standard" => STANDARD,
        "aggressive" => b(5, 500, 2.0),
        "linear" => b(3, 500, 1.0),
        "patient" => b(3, 2000, 3.0),
        _ => return None,
    })
}

/// decisions.md presets: none 1; standard 5/200ms/2; aggressive 5/500ms/2; linear 3/500ms/1;
/// patient 3/2s/3. No (or an unknown) preset -> standard timing with attempts =
/// `max_retries + 1`, else graph `default_max_retries + 1` (minimum 1). An explicit
/// `max_retries` overrides a preset's attempt count. Negative retry counts count as 0.
pub fn backoff(
    policy: Option<&str>,
    max_retries: Option<i64>,
    default_max_retries: Option<i64>,
) -> Backoff {
    let from_retries = |n: i64| u32::try_from(n.max(0)).unwrap_or(u32::MAX - 1) + 1;
    match (policy.map(str::trim).and_then(preset), max_retries) {
        (Some(p), None) => p,
        (Some(p), Some(n)) => Backoff {
            attempts: from_retries(n),
            ..p
        },
        (None, explicit) => Backoff {
            attempts: from_retries(explicit.or(default_max_retries).unwrap_or(0)),
            ..STANDARD
        },
    }
}

/// Delay before attempt n+1 after failed attempt `n` (1-based):
/// `min(initial * factor^(n-1), 60s) * jitter`, jitter = 0.5 + `unit` (`unit` in [0,1)).
/// Jitter applies after the cap, so a delay may reach 90 s (engine.md 4.2).
pub fn delay(b: &Backoff, n: u32, unit: f64) -> Duration {
    let exp = i32::try_from(n.saturating_sub(1)).unwrap_or(i32::MAX);
    let raw = b.initial.as_secs_f64() * b.factor.max(0.0).powi(exp);
    let capped = if raw.is_finite() {
        raw.min(MAX_DELAY.as_secs_f64())
    } else {
        MAX_DELAY.as_secs_f64()
    };
    let capped_nanos = (capped * 1e9) as u128;
    // jitter in millionths, in [500_000, 1_499_999]: integer math keeps 1.5x exclusive
    let unit = if unit.is_nan() {
        0.5
    } else {
        unit.clamp(0.0, 1.0)
    };
    let jitter = (((0.5 + unit) * 1e6) as u128).min(1_499_999);
    let nanos = capped_nanos * jitter / 1_000_000;
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn status_names_and_legacy_aliases() {
        for s in StageStatus::ALL {
            assert_eq!(s.as_str().parse::<StageStatus>(), Ok(s));
            assert_eq!(
                serde_json::to_value(s).unwrap(),
                serde_json::json!(s.as_str())
            );
        }
        assert_eq!("success".parse(), Ok(StageStatus::Succeeded));
        assert_eq!("fail".parse(), Ok(StageStatus::Failed));
        assert_eq!(
            "partial_success".parse(),
            Ok(StageStatus::PartiallySucceeded)
        );
        assert!("done".parse::<StageStatus>().is_err());
        assert!("Succeeded".parse::<StageStatus>().is_err());
    }

    #[test]
    fn class_names() {
        let c: FailureClass = serde_json::from_str("\"transient_infra\"").unwrap();
        assert_eq!(c, FailureClass::TransientInfra);
        assert_eq!(
            FailureClass::CompilationLoop.to_string(),
            "compilation_loop"
        );
    }

    #[test]
    fn every_preset() {
        let p = |name| backoff(Some(name), None, None);
        assert_eq!(p("none").attempts, 1);
        assert_eq!(
            p("standard"),
            Backoff {
                attempts: 5,
                initial: ms(200),
                factor: 2.0
            }
        );
        assert_eq!(
            p("aggressive"),
            Backoff {
                attempts: 5,
                initial: ms(500),
                factor: 2.0
            }
        );
        assert_eq!(
            p("linear"),
            Backoff {
                attempts: 3,
                initial: ms(500),
                factor: 1.0
            }
        );
        assert_eq!(
            p("patient"),
            Backoff {
                attempts: 3,
                initial: ms(2000),
                factor: 3.0
            }
        );
    }

    #[test]
    fn no_preset_uses_retry_counts() {
        assert_eq!(
            backoff(None, None, None),
            Backoff {
                attempts: 1,
                ..STANDARD
            }
        );
        assert_eq!(backoff(None, Some(2), Some(7)).attempts, 3);
        assert_eq!(backoff(None, None, Some(4)).attempts, 5);
        assert_eq!(backoff(None, Some(-3), None).attempts, 1);
        assert_eq!(backoff(None, None, Some(-1)).attempts, 1);
        assert_eq!(
            backoff(Some("bogus"), Some(1), None),
            Backoff {
                attempts: 2,
                ..STANDARD
            }
        );
    }

    #[test]
    fn explicit_max_retries_overrides_preset_count() {
        let b = backoff(Some("patient"), Some(0), None);
        assert_eq!(
            b,
            Backoff {
                attempts: 1,
                initial: ms(2000),
                factor: 3.0
            }
        );
        assert_eq!(backoff(Some("none"), Some(2), None).attempts, 3);
        // the graph default does not override a preset
        assert_eq!(backoff(Some("linear"), None, Some(9)).attempts, 3);
    }

    #[test]
    fn delay_grows_caps_and_jitters() {
        let b = backoff(Some("standard"), None, None);
        assert_eq!(delay(&b, 1, 0.5), ms(200));
        assert_eq!(delay(&b, 2, 0.5), ms(400));
        assert_eq!(delay(&b, 3, 0.5), ms(800));
        assert_eq!(delay(&b, 1, 0.0), ms(100));
        assert!(delay(&b, 1, 0.999_999) < ms(300));
        assert!(delay(&b, 1, 7.0) < ms(300));
        let p = backoff(Some("patient"), None, None);
        assert_eq!(delay(&p, 3, 0.5), Duration::from_secs(18));
        assert_eq!(delay(&p, 40, 0.5), MAX_DELAY);
        assert_eq!(delay(&p, u32::MAX, 0.0), Duration::from_secs(30));
        assert!(delay(&p, 40, 0.999_999) < Duration::from_secs(90));
        assert!(delay(&p, 40, 0.999_999) > Duration::from_secs(89));
        let l = backoff(Some("linear"), None, None);
        assert_eq!(delay(&l, 3, 0.5), ms(500));
    }

    #[test]
    fn classification_examples() {
        use FailureClass::*;
        assert_eq!(classify("Operation cancelled by user"), Canceled);
        assert_eq!(classify("Interrupted while waiting"), Canceled);
        assert_eq!(classify("request timed out after 30s"), TransientInfra);
        assert_eq!(classify("HTTP 503 Service Unavailable"), TransientInfra);
        assert_eq!(classify("status 429"), TransientInfra);
        assert_eq!(classify("Rate limit exceeded"), TransientInfra);
        assert_eq!(classify("read: connection reset by peer"), TransientInfra);
        assert_eq!(classify("used 5000 tokens"), Deterministic);
        assert_eq!(classify("context length exceeded"), BudgetExhausted);
        assert_eq!(classify("Turn limit reached"), BudgetExhausted);
        assert_eq!(classify("scope violation: wrote /etc/passwd"), Structural);
        assert_eq!(classify("assertion failed: left == right"), Deterministic);
        assert_eq!(classify(""), Deterministic);
    }

    fn result(termination: Termination, stdout: &str, stderr: &str) -> CommandResult {
        CommandResult {
            exit_code: Some(1),
            stdout: stdout.into(),
            stderr: stderr.into(),
            merged: String::new(),
            stdout_bytes: 0,
            stderr_bytes: 0,
            truncated: false,
            signal: None,
            termination,
            duration: Duration::ZERO,
            limit: None,
        }
    }

    #[test]
    fn command_classes_read_only_the_final_error_line() {
        use FailureClass::*;
        let log = "test_timeout_handling ... FAILED\nassertion failed\n\n";
        assert_eq!(
            classify_command(&result(Termination::Exited, "", log)),
            Deterministic
        );
        let net = "fetching\ncurl: (7) Connection refused\n";
        assert_eq!(
            classify_command(&result(Termination::Exited, "", net)),
            TransientInfra
        );
        let out = "build\nerror: request timed out";
        assert_eq!(
            classify_command(&result(Termination::Exited, out, " \n")),
            TransientInfra
        );
        assert_eq!(
            classify_command(&result(Termination::Exited, "", "")),
            Deterministic
        );
        assert_eq!(
            classify_command(&result(Termination::TimedOut, "", "")),
            TransientInfra
        );
        assert_eq!(
            classify_command(&result(Termination::Cancelled, "", "")),
            Canceled
        );
    }

    #[test]
    fn signature_normalisation() {
        let s = signature(
            "build",
            FailureClass::Deterministic,
            "  Exit 3 at 0xdeadbeef, Commit DEADBEEF12\n\tretry  ",
        );
        assert_eq!(
            s,
            "build|deterministic|exit <n> at 0xdeadbeef commit <hex> retry"
        );
        assert_eq!(normalize_reason("abc1234 x"), "<hex> x");
        assert_eq!(normalize_reason("abc123 x"), "abc123 x");
        assert_eq!(normalize_reason("line 42,,  col 7"), "line <n> col <n>");
        assert_eq!(normalize_reason("v1.2.3"), "v1.<n>.<n>");
        assert_eq!(normalize_reason(" \n "), "unknown");
        assert_eq!(normalize_reason(""), "unknown");
        let long = "é".repeat(200);
        let cut = normalize_reason(&long);
        assert!(cut.len() <= SIGNATURE_REASON_MAX);
        assert_eq!(cut.len(), 240);
        let words = "word ".repeat(100);
        let cut = normalize_reason(&words);
        assert!(cut.len() <= SIGNATURE_REASON_MAX && !cut.ends_with(' '));
        assert_eq!(
            signature("n", FailureClass::TransientInfra, "x"),
            signature("n", FailureClass::TransientInfra, "X")
        );
    }
}
