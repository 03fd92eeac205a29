//! The human handler: builds the question from the node's edges, opens it (ref-counted
//! `run.blocked`), asks the interviewer with the node `timeout` as the question timeout,
//! and turns the answer into routing (`preferred_label`, `suggested_next_ids`) and the
//! `human.gate.*` keys. Refused answers fail deterministically; a timeout takes
//! `human.default_choice` or fails retryably. Waiting does not count toward the watchdog.
//! Must not touch: how questions are shown or answered (the interviewer owns that).

pub mod question;

use super::{HandlerResult, Interrupt, StageCtx};
use crate::base::event_kind;
use crate::engine::context::{self, GATE_LABEL, GATE_SELECTED, GATE_TEXT};
use crate::engine::failure::FailureClass;
use crate::engine::outcome::{Failure, StageOutcome};
use crate::engine::services::{InterviewError, Reply};
use crate::engine::timing::{describe_duration, millis, start_timer, TIMED_OUT};
use question::{build_question, default_answer, match_answer, Answer, Question};
use serde_json::{json, Value};
use std::time::Instant;

pub(super) fn run(cx: &StageCtx<'_, '_>) -> HandlerResult {
    let mut q = build_question(cx.wf(), cx.node, context_display(cx));
    q.stage = cx.scoped_id();
    if cx.wf().node_view(cx.node).nonempty("prompt").is_some() {
        q.text = cx.expand(&q.text);
    }
    if q.options.is_empty() && q.freeform_target.is_none() {
        return Ok(StageOutcome::failed(Failure::deterministic(format!(
            "human stage `{}` has no options and no freeform edge",
            q.stage
        ))));
    }
    cx.emit(event_kind::INTERVIEW_STARTED, started_props(&q))?;
    let started = Instant::now();
    let reply = ask(cx, &q)?;
    let waited = millis(started.elapsed());
    match reply {
        Ok(Reply::Answer(a)) => {
            completed(cx, &q, &answer_text(&a), waited, None).map(|()| chosen(a, None))
        }
        Ok(Reply::AnswerBy(a, by)) => {
            completed(cx, &q, &answer_text(&a), waited, Some(by)).map(|()| chosen(a, None))
        }
        Ok(Reply::Text(text)) => match match_answer(&q, &text) {
            Ok(a) => completed(cx, &q, &text, waited, None).map(|()| chosen(a, Some(text))),
            Err(why) => {
                cx.emit(
                    event_kind::INTERVIEW_COMPLETED,
                    json!({"question_id": q.id, "question": q.text, "answer": text,
                           "duration_ms": waited, "accepted": false}),
                )?;
                Ok(refused(&q, &format!("answer `{text}` was refused: {why}")))
            }
        },
        Err(InterviewError::Timeout) => timed_out(cx, &q, waited),
        Err(InterviewError::Cancelled) => {
            interrupted(cx, &q, "cancelled", waited)?;
            Err(Interrupt::Cancelled)
        }
        Err(InterviewError::Refused(why)) => {
            interrupted(cx, &q, &why, waited)?;
            Ok(refused(&q, &format!("the answer was refused: {why}")))
        }
        Err(InterviewError::Unavailable(why)) => {
            interrupted(cx, &q, &why, waited)?;
            Ok(StageOutcome::failed(Failure::deterministic(why)))
        }
    }
}

/// The previous stage's response, shown with the question.
fn context_display(cx: &StageCtx<'_, '_>) -> Option<String> {
    let ctx = cx.context();
    let last = ctx.get(context::LAST_STAGE)?.as_str()?;
    let key = format!("{}{last}", context::RESPONSE_PREFIX);
    ctx.get(&key).and_then(Value::as_str).map(String::from)
}

fn started_props(q: &Question) -> Value {
    let options: Vec<Value> = q
        .options
        .iter()
        .map(|o| json!({"key": o.key, "label": o.label}))
        .collect();
    let mut p = json!({
        "question_id": q.id,
        "question": q.text,
        "stage": q.stage,
        "question_type": q.question_type,
        "options": options,
        "allow_freeform": q.allow_freeform,
        "timeout_seconds": q.timeout_seconds,
    });
    if let (Some(d), Value::Object(m)) = (&q.context_display, &mut p) {
        m.insert("context_display".into(), Value::String(d.clone()));
    }
    p
}

/// Asks with the run blocked and the watchdog quiet; the node `timeout` cancels the ask.
fn ask(cx: &StageCtx<'_, '_>, q: &Question) -> Result<Result<Reply, InterviewError>, Interrupt> {
    let _quiet = cx.quiet();
    cx.block()?;
    let token = cx.cancel.child();
    let timeout = cx.view().duration("timeout").filter(|d| !d.is_zero());
    let timer = timeout.map(|t| start_timer(&token, t));
    let reply = cx.services().interviewer.ask(q, &token);
    let timed_out = token.reason().as_deref() == Some(TIMED_OUT) && !cx.cancel.is_cancelled();
    token.cancel("question closed");
    if let Some(t) = timer {
        let _ = t.join();
    }
    cx.unblock()?;
    Ok(match reply {
        Err(InterviewError::Cancelled) if timed_out => Err(InterviewError::Timeout),
        other => other,
    })
}

fn answer_text(a: &Answer) -> String {
    match a {
        Answer::Option { label, .. } => label.clone(),
        Answer::Options(list) => list
            .iter()
            .map(|o| o.label.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        Answer::Freeform { text, .. } => text.clone(),
    }
}

fn completed(
    cx: &StageCtx<'_, '_>,
    q: &Question,
    answer: &str,
    waited: u64,
    by: Option<Value>,
) -> Result<(), Interrupt> {
    let mut p = json!({"question_id": q.id, "question": q.text, "answer": answer,
                       "duration_ms": waited});
    if let Some(by) = by {
        p["answered_by"] = by;
    }
    cx.emit(event_kind::INTERVIEW_COMPLETED, p)?;
    Ok(())
}

fn interrupted(
    cx: &StageCtx<'_, '_>,
    q: &Question,
    reason: &str,
    waited: u64,
) -> Result<(), Interrupt> {
    cx.emit(
        event_kind::INTERVIEW_INTERRUPTED,
        json!({"question_id": q.id, "question": q.text, "stage": q.stage,
               "reason": reason, "duration_ms": waited}),
    )?;
    Ok(())
}

/// The chosen option(s) or free text as routing and `human.gate.*` keys.
fn chosen(a: Answer, typed: Option<String>) -> StageOutcome {
    let mut o = StageOutcome::succeeded();
    match a {
        Answer::Option { key, label, target } => {
            o.write(GATE_SELECTED, key);
            o.write(GATE_LABEL, label.clone());
            o.write(GATE_TEXT, typed.unwrap_or_else(|| label.clone()));
            o.preferred_label = Some(label);
            o.suggested_next_ids = vec![target];
        }
        Answer::Options(list) => {
            let keys: Vec<&str> = list.iter().map(|x| x.key.as_str()).collect();
            let labels: Vec<&str> = list.iter().map(|x| x.label.as_str()).collect();
            o.write(GATE_SELECTED, keys.join(","));
            o.write(GATE_LABEL, labels.join(", "));
            o.write(GATE_TEXT, typed.unwrap_or_else(|| labels.join(", ")));
            o.preferred_label = list.first().map(|x| x.label.clone());
            o.suggested_next_ids = list.into_iter().map(|x| x.target).collect();
        }
        Answer::Freeform { text, target } => {
            o.write(GATE_SELECTED, "freeform");
            o.write(GATE_LABEL, text.clone());
            o.write(GATE_TEXT, text);
            o.suggested_next_ids = vec![target];
        }
    }
    o
}

fn refused(q: &Question, why: &str) -> StageOutcome {
    StageOutcome::failed(Failure::deterministic(format!(
        "human stage `{}`: {why}",
        q.stage
    )))
}

/// `human.default_choice` if it names an option, else a retryable failure.
fn timed_out(cx: &StageCtx<'_, '_>, q: &Question, waited: u64) -> HandlerResult {
    cx.emit(
        event_kind::INTERVIEW_TIMEOUT,
        json!({"question_id": q.id, "question": q.text, "stage": q.stage,
               "duration_ms": waited, "default_choice": q.default_choice}),
    )?;
    if let Some(a) = default_answer(q) {
        let mut o = chosen(a, None);
        o.notes = Some("question timed out; took human.default_choice".into());
        return Ok(o);
    }
    let after = cx
        .view()
        .duration("timeout")
        .map(describe_duration)
        .unwrap_or_else(|| "its timeout".into());
    match &q.default_choice {
        Some(d) => Ok(StageOutcome::failed(Failure::deterministic(format!(
            "human stage `{}` timed out after {after} and its human.default_choice `{d}` matches no option",
            q.stage
        )))),
        None => Ok(StageOutcome::failed(Failure::retryable(
            format!("human stage `{}` got no answer within {after}", q.stage),
            FailureClass::Deterministic,
        ))),
    }
}
