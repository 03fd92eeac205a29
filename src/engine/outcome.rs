//! What one stage produced: its status, why it failed, where it would like to go next, and
//! the context keys it wrote. Handlers build these; the stage loop post-processes them.
//! Must not touch: routing or events.

use super::context::{self, Context, COMMAND_OUTPUT, COMMAND_STDERR};
use super::failure::{FailureClass, StageStatus};
use super::output::Directive;
use crate::workflow::HandlerKind;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Why a stage failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub message: String,
    pub class: FailureClass,
    /// Another attempt may succeed (non-zero exit, timeout, transient errors); false for
    /// deterministic failures (validation, configuration, refused answers, explicit
    /// `outcome: failed`).
    pub retryable: bool,
}

impl Failure {
    /// A failure that retrying cannot fix.
    pub fn deterministic(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            class: FailureClass::Deterministic,
            retryable: false,
        }
    }

    /// A failure another attempt may not repeat.
    pub fn retryable(message: impl Into<String>, class: FailureClass) -> Failure {
        Failure {
            message: message.into(),
            class,
            retryable: true,
        }
    }

    /// A stage attempt that ran out of time (retryable, transient infrastructure).
    pub fn timeout(message: impl Into<String>) -> Failure {
        Failure::retryable(message, FailureClass::TransientInfra)
    }

    pub fn to_json(&self, signature: Option<&str>) -> Value {
        json!({
            "message": self.message,
            "class": self.class.as_str(),
            "retryable": self.retryable,
            "signature": signature,
        })
    }
}

/// The result of one stage attempt (and, after post-processing, of the stage).
#[derive(Debug, Clone, PartialEq)]
pub struct StageOutcome {
    pub status: StageStatus,
    pub failure: Option<Failure>,
    pub preferred_label: Option<String>,
    pub suggested_next_ids: Vec<String>,
    /// Every context key the stage writes (handler keys and directive updates), flat.
    pub context_updates: Context,
    /// The text an LLM stage answered.
    pub response: Option<String>,
    /// Go straight to this node instead of selecting an edge (parallel fork → join).
    pub jump_to: Option<String>,
    /// What became of a failure that `allow_partial` or `auto_status` turned into success.
    pub notes: Option<String>,
    /// Stage visits made inside this stage (parallel branches), folded into the run state.
    pub nested: Option<Box<Nested>>,
    /// LLM usage of the stage (`usage` object of `stage.completed` / `stage.failed`).
    pub usage: Option<Value>,
    /// Files an agent wrote or edited, relative to the work directory.
    pub files_touched: Vec<String>,
    /// The run's LLM budget was spent inside this stage (an agent stopped between turns):
    /// once the stage's end is recorded, the run stops `budget_exceeded` with this message.
    pub budget_spent: Option<String>,
}

/// Stage visits made inside a parallel stage's branches, in fork-edge order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Nested {
    pub path: Vec<String>,
    pub completed: Vec<String>,
    pub outcomes: Vec<(String, StageStatus)>,
    pub retries: Vec<(String, u32)>,
    /// Preamble details of the branch stages' latest visits.
    pub notes: Vec<(String, StageNote)>,
    /// Visits added per node.
    pub visits: BTreeMap<String, u32>,
    /// Failures added per signature.
    pub signatures: BTreeMap<String, u32>,
}

impl StageOutcome {
    pub fn succeeded() -> StageOutcome {
        StageOutcome {
            status: StageStatus::Succeeded,
            failure: None,
            preferred_label: None,
            suggested_next_ids: Vec::new(),
            context_updates: Context::new(),
            response: None,
            jump_to: None,
            notes: None,
            nested: None,
            usage: None,
            files_touched: Vec::new(),
            budget_spent: None,
        }
    }

    pub fn failed(failure: Failure) -> StageOutcome {
        StageOutcome {
            status: StageStatus::Failed,
            failure: Some(failure),
            ..StageOutcome::succeeded()
        }
    }

    pub fn is_failed(&self) -> bool {
        self.status == StageStatus::Failed
    }

    pub fn write(&mut self, key: &str, value: impl Into<Value>) {
        self.context_updates.insert(key.to_string(), value.into());
    }

    /// Applies a routing directive: label, suggestions and context updates; an explicit
    /// `outcome: failed` becomes a deterministic failure with the directive's reason.
    pub fn apply_directive(&mut self, d: Directive) {
        if d.preferred_label.is_some() {
            self.preferred_label = d.preferred_label;
        }
        if !d.suggested_next_ids.is_empty() {
            self.suggested_next_ids = d.suggested_next_ids;
        }
        self.context_updates.extend(d.context_updates);
        match d.outcome {
            Some(StageStatus::Failed) => {
                let reason = d
                    .failure_reason
                    .filter(|r| !r.trim().is_empty())
                    .unwrap_or_else(|| "the stage reported outcome `failed`".into());
                self.status = StageStatus::Failed;
                self.failure = Some(Failure::deterministic(reason));
            }
            Some(status) => {
                self.status = status;
                self.failure = None;
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_failed_directive_is_deterministic() {
        let mut o = StageOutcome::succeeded();
        o.apply_directive(Directive {
            outcome: Some(StageStatus::Failed),
            failure_reason: Some("bad input".into()),
            ..Directive::default()
        });
        assert!(o.is_failed());
        let f = o.failure.unwrap_or_else(|| Failure::timeout("none"));
        assert!(!f.retryable);
        assert_eq!(f.message, "bad input");
    }
}

/// Output lines kept per stream of a command stage (the summary:high entry shows them all).
pub const HIGH_TAIL_LINES: usize = 50;
/// Bytes kept of each stream's tail (long lines would otherwise defeat the line limit).
pub const TAIL_BYTES: usize = 4096;
/// Characters kept of a failure message.
const FAILURE_CHARS: usize = 2000;

/// Details of a node's latest visit that the preamble shows and the run state does not
/// otherwise keep. Empty fields are left out of checkpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StageNote {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_in: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_out: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// The last [`HIGH_TAIL_LINES`] lines (at most [`TAIL_BYTES`]) of a command's stdout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
}

impl StageNote {
    /// What a finished stage leaves for later preambles.
    pub fn of(kind: HandlerKind, o: &StageOutcome) -> StageNote {
        let usage = o.usage.as_ref();
        let stream = |key: &str| {
            (kind == HandlerKind::Command)
                .then(|| o.context_updates.get(key))
                .flatten()
                .map(|v| tail(&context::value_text(v), HIGH_TAIL_LINES).to_string())
        };
        StageNote {
            notes: o.notes.clone(),
            failure: o
                .failure
                .as_ref()
                .filter(|_| o.is_failed())
                .map(|f| clip(&f.message, FAILURE_CHARS)),
            model: usage
                .and_then(|u| u.get("model"))
                .and_then(Value::as_str)
                .map(String::from),
            tokens_in: usage.and_then(|u| u.pointer("/tokens/input")?.as_u64()),
            tokens_out: usage.and_then(|u| u.pointer("/tokens/output")?.as_u64()),
            files: o.files_touched.clone(),
            stdout: stream(COMMAND_OUTPUT),
            stderr: stream(COMMAND_STDERR),
        }
    }

    pub fn is_empty(&self) -> bool {
        self == &StageNote::default()
    }
}

/// The last `n` lines of `text` (a trailing newline does not count as a line), at most
/// [`TAIL_BYTES`] of them (cut at a character boundary).
pub fn tail(text: &str, n: usize) -> &str {
    let body = text.strip_suffix('\n').unwrap_or(text);
    let mut start = body.len();
    for _ in 0..n {
        match body[..start].rfind('\n') {
            Some(i) => start = i,
            None => {
                start = 0;
                break;
            }
        }
    }
    let mut from = if start == 0 { 0 } else { start + 1 };
    if body.len() - from > TAIL_BYTES {
        from = body.len() - TAIL_BYTES;
        while !body.is_char_boundary(from) {
            from += 1;
        }
    }
    &body[from..]
}

/// At most `max` characters of `text`, with a marker saying how many were left out.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((cut, _)) => {
            let rest = text[cut..].chars().count();
            format!("{}… [{rest} more characters]", &text[..cut])
        }
    }
}
