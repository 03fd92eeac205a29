//! Human questions over HTTP: each live run has a [`RunHandle`] (its cancel token, its
//! open questions and its agent steering queue). The engine's interviewer call registers the question and blocks on a
//! channel; `POST …/questions/{qid}/answer` validates the answer against the question
//! (400 for an unknown option) and hands it over exactly once (409 when the question is not
//! open).
//!
//! Owns: open-question bookkeeping and answer validation. Must not touch: the store, events
//! (the engine emits `interview.*`), or routing.

use super::super::error::ApiError;
use crate::base::cancel::{CancelHook, CancelToken};
use crate::engine::handlers::human::question::{self, Answer, Question};
use crossbeam_channel::{bounded, Receiver, Sender};
use parking_lot::{Condvar, Mutex};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A live run as the server sees it while an engine thread works on it.
#[derive(Default)]
pub struct RunHandle {
    pub cancel: CancelToken,
    /// `/steer` guidance for the run's agent sessions; also says whether one runs now.
    pub steering: crate::agent::Steering,
    open: Mutex<HashMap<String, Open>>,
    registered: Condvar,
}

struct Open {
    question: Question,
    tx: Sender<(Answer, Option<Value>)>,
}

/// Why an ask ended without an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskEnd {
    Cancelled,
    Timeout,
}

/// `POST …/answer` body: at least one field; precedence: key, keys, value.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitAnswer {
    pub value: Option<String>,
    pub selected_option_key: Option<String>,
    pub selected_option_keys: Option<Vec<String>>,
}

impl RunHandle {
    pub fn new() -> RunHandle {
        RunHandle::default()
    }

    /// Registers `q` and blocks until it is answered, its timeout passes, or the run is
    /// cancelled. Pausing does not interrupt a question.
    /// The answer comes with who gave it, when the answering side said.
    pub fn ask(
        &self,
        q: &Question,
        cancel: &CancelToken,
    ) -> Result<(Answer, Option<Value>), AskEnd> {
        type Given = (Answer, Option<Value>);
        let (tx, rx): (Sender<Given>, Receiver<Given>) = bounded(1);
        {
            let mut open = self.open.lock();
            open.insert(
                q.id.clone(),
                Open {
                    question: q.clone(),
                    tx,
                },
            );
            self.registered.notify_all();
        }
        let deadline = q
            .timeout_seconds
            .filter(|s| *s > 0)
            .map(|s| Instant::now() + Duration::from_secs(s));
        // Cancelling the stage or the run wakes the wait below at once: no polling.
        let (woken_tx, woken_rx) = bounded::<()>(1);
        let hook: CancelHook = Arc::new(move || {
            let _ = woken_tx.try_send(());
        });
        cancel.on_cancel(&hook);
        self.cancel.on_cancel(&hook);
        let result = loop {
            if cancel.is_cancelled() || self.cancel.is_cancelled() {
                break Err(AskEnd::Cancelled);
            }
            let wait = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break Err(AskEnd::Timeout);
                    }
                    left
                }
                None => Duration::from_secs(3600),
            };
            crossbeam_channel::select! {
                recv(rx) -> a => match a {
                    Ok(a) => break Ok(a),
                    Err(_) => break Err(AskEnd::Cancelled),
                },
                recv(woken_rx) -> _ => {}
                default(wait) => {}
            }
        };
        self.open.lock().remove(&q.id);
        result
    }

    /// Ids of the questions currently waiting for an answer.
    pub fn open_ids(&self) -> Vec<String> {
        self.open.lock().keys().cloned().collect()
    }

    /// Validates `body` against question `qid` and delivers it with `by` (who answered).
    /// `listed` says whether the run's row lists the question as pending (the engine
    /// records `interview.started` just before it asks, so a listed question is waited for
    /// briefly). The chosen option's label (or the text) when taken.
    pub fn answer(
        &self,
        qid: &str,
        body: &SubmitAnswer,
        listed: bool,
        by: Option<Value>,
    ) -> Result<String, ApiError> {
        let mut open = self.open.lock();
        if listed && !open.contains_key(qid) {
            let deadline = Instant::now() + Duration::from_secs(2);
            while !open.contains_key(qid) {
                if self.registered.wait_until(&mut open, deadline).timed_out() {
                    break;
                }
            }
        }
        let Some(entry) = open.get(qid) else {
            return Err(ApiError::conflict(format!(
                "Question {qid} no longer exists or was already answered."
            )));
        };
        let answer = match_answer(&entry.question, body)?;
        let Some(entry) = open.remove(qid) else {
            return Err(ApiError::conflict(format!(
                "Question {qid} was answered concurrently."
            )));
        };
        let label = match &answer {
            Answer::Option { label, .. } => label.clone(),
            Answer::Options(list) => list
                .iter()
                .map(|o| o.label.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            Answer::Freeform { text, .. } => text.clone(),
        };
        entry
            .tx
            .try_send((answer, by))
            .map(|()| label)
            .map_err(|_| ApiError::conflict(format!("Question {qid} is no longer being asked.")))
    }
}

/// The API's answer rules (api.md 2): a key must be an option's key; keys (multi_select)
/// must all exist; a value matches a key or label, or goes to the freeform edge.
pub fn match_answer(q: &Question, body: &SubmitAnswer) -> Result<Answer, ApiError> {
    let refused = |e: question::AnswerError| {
        ApiError::bad_request(format!("Invalid answer: {e}")).with_code("invalid_answer")
    };
    if let Some(key) = &body.selected_option_key {
        if q.options.is_empty() {
            return Err(ApiError::bad_request(
                "This question has no options; send `value`.",
            ));
        }
        return question::match_key(q, key).map_err(refused);
    }
    if let Some(keys) = &body.selected_option_keys {
        return question::match_keys(q, keys).map_err(refused);
    }
    match &body.value {
        Some(v) if !v.trim().is_empty() => question::match_answer(q, v).map_err(refused),
        Some(_) => Err(ApiError::bad_request("The answer `value` is empty.")),
        None => Err(ApiError::bad_request(
            "Send one of `selected_option_key`, `selected_option_keys` or `value`.",
        )),
    }
}
