//! What one stage produced: its status, why it failed, where it would like to go next, and
//! the context keys it wrote. Handlers build these; the stage loop post-processes them.
//! Must not touch: routing or events.

use super::context::Context;
use super::failure::{FailureClass, StageStatus};
use super::output::Directive;
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
}

/// Stage visits made inside a parallel stage's branches, in fork-edge order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Nested {
    pub path: Vec<String>,
    pub completed: Vec<String>,
    pub outcomes: Vec<(String, StageStatus)>,
    pub retries: Vec<(String, u32)>,
    /// Preamble details of the branch stages' latest visits.
    pub notes: Vec<(String, crate::engine::fidelity::StageNote)>,
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
