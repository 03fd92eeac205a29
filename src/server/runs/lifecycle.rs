//! Run status rules (SPEC 3, api.md 1.4): which runs hold a scheduler slot, and which events
//! each control (start, cancel, pause, unpause, archive, approve, deny) appends from which
//! status. Pure: decides, never appends.
//!
//! Owns: the transition table. Must not touch: the store, tokens, HTTP.

use super::super::error::ApiError;
use crate::base::event_kind;
use crate::store::{Control, EventDraft, RunRow, RunStatus};
use serde_json::{json, Value};

/// THE slot rule, used by the scheduler, the API (queue positions) and the board: a run
/// holds one of the `max_concurrent_runs` slots from the moment the scheduler promotes it
/// (`starting`) until it ends; waiting for a human (`blocked`) or paused still holds it,
/// because its engine thread is alive.
pub fn holds_slot(status: &RunStatus) -> bool {
    matches!(
        status,
        RunStatus::Starting
            | RunStatus::Running
            | RunStatus::Blocked { .. }
            | RunStatus::Paused { .. }
            | RunStatus::Removing
    )
}

/// Status names that hold a slot (for store queries).
pub const SLOT_STATUSES: [&str; 5] = ["starting", "running", "blocked", "paused", "removing"];

/// What a control does: events to append now, and what to tell the live engine.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub events: Vec<EventDraft>,
    pub signal: Option<Signal>,
    /// The scheduler should look again (a run became runnable or left a slot).
    pub wake: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Cancel,
    Pause,
    Unpause,
}

fn ev(kind: &str, props: Value, actor: &Value) -> EventDraft {
    EventDraft::new(kind, props).actor(actor.clone())
}

fn conflict(row: &RunRow, what: &str) -> ApiError {
    ApiError::conflict(format!(
        "Run {} cannot be {what}: it is {}{}.",
        row.id,
        row.status.name(),
        if row.archived { " and archived" } else { "" }
    ))
}

/// `POST start {resume}`.
pub fn start(row: &RunRow, resume: bool, actor: &Value) -> Result<Plan, ApiError> {
    if row.archived {
        return Err(conflict(row, "started"));
    }
    let queued = |resume: bool| ev(event_kind::RUN_QUEUED, json!({"resume": resume}), actor);
    match &row.status {
        RunStatus::Submitted if row.parent_id.is_some() => Ok(Plan {
            events: vec![ev(
                event_kind::RUN_PENDING,
                json!({"reason": "approval_required"}),
                actor,
            )],
            ..Plan::default()
        }),
        RunStatus::Submitted => Ok(Plan {
            events: vec![queued(false)],
            wake: true,
            ..Plan::default()
        }),
        // The one resume rule (`RunStatus::resume_refusal`); this server's active runs are
        // live, never orphaned.
        _ if resume => match row.status.resume_refusal(false) {
            None => Ok(Plan {
                events: vec![queued(true)],
                wake: true,
                ..Plan::default()
            }),
            Some(why) => Err(ApiError::conflict(format!(
                "Run {} cannot be resumed: {why}.",
                row.id
            ))),
        },
        _ => Err(conflict(row, "started")),
    }
}

/// `POST cancel`.
pub fn cancel(row: &RunRow, actor: &Value) -> Result<Plan, ApiError> {
    let requested = ev(
        event_kind::RUN_CANCEL_REQUESTED,
        json!({"action": "cancel"}),
        actor,
    );
    match &row.status {
        RunStatus::Submitted | RunStatus::Pending { .. } | RunStatus::Runnable => Ok(Plan {
            events: vec![
                requested,
                ev(
                    event_kind::RUN_FAILED,
                    json!({"reason": "cancelled", "error": "cancelled before it started", "causes": [], "duration_ms": 0}),
                    actor,
                ),
            ],
            wake: true,
            ..Plan::default()
        }),
        s if holds_slot(s) => {
            if row.pending_control == Some(Control::Cancel) {
                return Err(ApiError::conflict(format!(
                    "Run {} is already being cancelled.",
                    row.id
                )));
            }
            Ok(Plan {
                events: vec![requested],
                signal: Some(Signal::Cancel),
                ..Plan::default()
            })
        }
        _ => Err(conflict(row, "cancelled")),
    }
}

/// `POST pause`: a running run holds before its next stage; a blocked one is paused at once.
pub fn pause(row: &RunRow, actor: &Value) -> Result<Plan, ApiError> {
    if row.pending_control.is_some() {
        return Err(ApiError::conflict(format!(
            "Run {} already has a pending {:?} request.",
            row.id, row.pending_control
        )));
    }
    let requested = ev(
        event_kind::RUN_PAUSE_REQUESTED,
        json!({"action": "pause"}),
        actor,
    );
    match &row.status {
        // The engine records `run.paused` when it holds, before its next stage; until then
        // `pending_control` shows `pause`.
        RunStatus::Running => Ok(Plan {
            events: vec![requested],
            signal: Some(Signal::Pause),
            ..Plan::default()
        }),
        RunStatus::Blocked { blocked_reason } => Ok(Plan {
            events: vec![
                requested,
                ev(
                    event_kind::RUN_PAUSED,
                    json!({"prior_block": blocked_reason}),
                    actor,
                ),
            ],
            signal: Some(Signal::Pause),
            ..Plan::default()
        }),
        _ => Err(conflict(row, "paused")),
    }
}

/// `POST unpause`: back to the block it paused from, else running.
pub fn unpause(row: &RunRow, actor: &Value) -> Result<Plan, ApiError> {
    if row.pending_control.is_some() {
        return Err(ApiError::conflict(format!(
            "Run {} already has a pending {:?} request.",
            row.id, row.pending_control
        )));
    }
    let requested = ev(
        event_kind::RUN_UNPAUSE_REQUESTED,
        json!({"action": "unpause"}),
        actor,
    );
    match &row.status {
        RunStatus::Paused {
            prior_block: Some(b),
        } => Ok(Plan {
            events: vec![
                requested,
                ev(event_kind::RUN_BLOCKED, json!({"blocked_reason": b}), actor),
            ],
            signal: Some(Signal::Unpause),
            ..Plan::default()
        }),
        RunStatus::Paused { prior_block: None } => Ok(Plan {
            events: vec![requested, ev(event_kind::RUN_UNPAUSED, json!({}), actor)],
            signal: Some(Signal::Unpause),
            ..Plan::default()
        }),
        _ => Err(conflict(row, "unpaused")),
    }
}

/// `POST archive` (terminal runs only; idempotent).
pub fn archive(row: &RunRow, actor: &Value) -> Result<Plan, ApiError> {
    if !row.status.is_terminal() {
        return Err(conflict(row, "archived"));
    }
    Ok(Plan {
        events: if row.archived {
            vec![]
        } else {
            vec![ev(event_kind::RUN_ARCHIVED, json!({}), actor)]
        },
        ..Plan::default()
    })
}

/// `POST unarchive` (idempotent).
pub fn unarchive(row: &RunRow, actor: &Value) -> Result<Plan, ApiError> {
    Ok(Plan {
        events: if row.archived {
            vec![ev(event_kind::RUN_UNARCHIVED, json!({}), actor)]
        } else {
            vec![]
        },
        ..Plan::default()
    })
}

fn awaiting_approval(row: &RunRow) -> bool {
    matches!(&row.status, RunStatus::Pending { reason } if reason == "approval_required")
}

/// `POST approve`: pending approval → runnable.
pub fn approve(row: &RunRow, actor: &Value) -> Result<Plan, ApiError> {
    if !awaiting_approval(row) {
        return Err(conflict(row, "approved (it is not awaiting approval)"));
    }
    // A manager stage's child (created by a worker) is run by its parent's engine, which
    // waits for the approval: it is not queued for the scheduler.
    if is_managed_child(row) {
        return Ok(Plan {
            events: vec![ev(event_kind::RUN_APPROVED, json!({}), actor)],
            ..Plan::default()
        });
    }
    Ok(Plan {
        events: vec![
            ev(event_kind::RUN_APPROVED, json!({}), actor),
            ev(event_kind::RUN_QUEUED, json!({"resume": false}), actor),
        ],
        wake: true,
        ..Plan::default()
    })
}

/// Created by a parent run's manager stage (its creator is a `worker` principal).
fn is_managed_child(row: &RunRow) -> bool {
    row.parent_id.is_some()
        && row
            .created_meta
            .get("created_by")
            .and_then(|c| c.get("kind"))
            .and_then(Value::as_str)
            == Some("worker")
}

/// `POST deny {reason}`: pending approval → failed(approval_denied).
pub fn deny(row: &RunRow, reason: Option<&str>, actor: &Value) -> Result<Plan, ApiError> {
    if !awaiting_approval(row) {
        return Err(conflict(row, "denied (it is not awaiting approval)"));
    }
    Ok(Plan {
        events: vec![
            ev(
                event_kind::RUN_DENIED,
                json!({"denial_reason": reason}),
                actor,
            ),
            ev(
                event_kind::RUN_FAILED,
                json!({"reason": "approval_denied", "error": reason.unwrap_or("approval denied"), "causes": [], "duration_ms": 0}),
                actor,
            ),
        ],
        ..Plan::default()
    })
}

/// What startup does with a run found holding a slot (its engine died with the server).
#[derive(Debug, PartialEq)]
pub struct Recovery {
    /// Appended at once: `run.interrupted`, then `run.starting` or `run.failed`.
    pub events: Vec<EventDraft>,
    /// A worker resumes it from its last checkpoint.
    pub resume: bool,
    /// It was paused: it resumes paused.
    pub paused: bool,
}

/// The plan for a run found active at startup: resumed (unless `resume` is off, a cancel was
/// pending or it was being removed), else failed with reason `terminated` (`cancelled`).
pub fn interrupted(row: &RunRow, resume: bool) -> Recovery {
    let cancelling = row.pending_control == Some(Control::Cancel);
    let resumable = resume && !cancelling && row.status != RunStatus::Removing;
    // A pause the engine had not honoured yet (`pending_control`) counts too: the user asked
    // for it, and the resumed run must not start a stage before being unpaused.
    let paused = matches!(row.status, RunStatus::Paused { .. })
        || row.pending_control == Some(Control::Pause);
    let action = if resumable { "resume" } else { "fail" };
    let mut events = vec![EventDraft::new(
        event_kind::RUN_INTERRUPTED,
        json!({
            "status": row.status.name(),
            "action": action,
            "message": format!(
                "the server stopped while the run was {}; {}",
                row.status.name(),
                if resumable {
                    "it resumes from its last checkpoint (the stage in flight runs again)"
                } else if cancelling {
                    "its pending cancel completes"
                } else {
                    "it is failed (server.recovery.resume_interrupted = false)"
                }
            ),
            "resume_from": row.checkpoint.as_ref().and_then(|c| c.get("next_node_id")).cloned(),
        }),
    )
    .actor(engine_actor())];
    if resumable {
        events.push(
            EventDraft::new(event_kind::RUN_STARTING, json!({"recovery": true}))
                .actor(engine_actor()),
        );
    } else {
        events.push(terminated(row));
    }
    Recovery {
        events,
        resume: resumable,
        paused: resumable && paused,
    }
}

fn engine_actor() -> Value {
    json!({"kind": "system", "system_kind": "engine"})
}

/// The event that ends a run found active at startup that is not resumed.
pub fn terminated(row: &RunRow) -> EventDraft {
    let reason = if row.pending_control == Some(Control::Cancel) {
        "cancelled"
    } else {
        "terminated"
    };
    EventDraft::new(
        event_kind::RUN_FAILED,
        json!({
            "reason": reason,
            "error": "the server stopped while the run was active; start it with {\"resume\": true} to continue from its last checkpoint",
            "causes": [],
            "duration_ms": 0,
        }),
    )
    .actor(engine_actor())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{fold, Event, NewRun};

    fn row(status: RunStatus) -> RunRow {
        let ev = Event {
            seq: 1,
            id: "e".into(),
            ts: "t".into(),
            run_id: "R".into(),
            event: "run.created".into(),
            properties: json!({"title": "x"}),
            node_id: None,
            node_label: None,
            stage_id: None,
            parallel_group_id: None,
            parallel_branch_id: None,
            actor: None,
        };
        let _ = NewRun::default();
        let mut r = RunRow::from_created(&ev);
        r.status = status;
        r
    }

    fn after(r: RunRow, plan: &Plan) -> RunRow {
        plan.events.iter().enumerate().fold(r, |r, (i, d)| {
            let e = Event {
                seq: 10 + i as u64,
                id: "e".into(),
                ts: "t".into(),
                run_id: "R".into(),
                event: d.event.clone(),
                properties: d.properties.clone(),
                node_id: None,
                node_label: None,
                stage_id: None,
                parallel_group_id: None,
                parallel_branch_id: None,
                actor: None,
            };
            fold(r, &e)
        })
    }

    #[test]
    fn slot_statuses_are_the_statuses_that_hold_a_slot() {
        let s = |r: &str| r.to_string();
        let all = [
            RunStatus::Submitted,
            RunStatus::Pending { reason: s("x") },
            RunStatus::Runnable,
            RunStatus::Starting,
            RunStatus::Running,
            RunStatus::Blocked {
                blocked_reason: s("x"),
            },
            RunStatus::Paused { prior_block: None },
            RunStatus::Removing,
            RunStatus::Succeeded { reason: s("x") },
            RunStatus::Failed { reason: s("x") },
            RunStatus::Dead,
        ];
        for st in &all {
            assert_eq!(
                holds_slot(st),
                SLOT_STATUSES.contains(&st.name()),
                "{}",
                st.name()
            );
        }
    }

    #[test]
    fn slots() {
        assert!(!holds_slot(&RunStatus::Runnable));
        assert!(!holds_slot(&RunStatus::Submitted));
        assert!(holds_slot(&RunStatus::Starting));
        assert!(holds_slot(&RunStatus::Paused { prior_block: None }));
        assert!(!holds_slot(&RunStatus::Dead));
    }

    #[test]
    fn transitions() {
        let a = json!({"kind": "user"});
        let r = row(RunStatus::Submitted);
        let r2 = after(r.clone(), &start(&r, false, &a).unwrap());
        assert_eq!(r2.status, RunStatus::Runnable);
        assert_eq!(start(&r2, false, &a).unwrap_err().status, 409);
        let c = after(r2.clone(), &cancel(&r2, &a).unwrap());
        assert_eq!(c.status.name(), "failed");
        assert_eq!(cancel(&c, &a).unwrap_err().status, 409);
        let resumed = after(c.clone(), &start(&c, true, &a).unwrap());
        assert_eq!(resumed.status, RunStatus::Runnable);

        let running = row(RunStatus::Running);
        // The request alone: the engine records `run.paused` when it holds.
        let requested = after(running.clone(), &pause(&running, &a).unwrap());
        assert_eq!(requested.status, RunStatus::Running);
        assert_eq!(requested.pending_control, Some(Control::Pause));
        assert_eq!(pause(&requested, &a).unwrap_err().status, 409);
        let p = fold(
            requested,
            &EventDraft::new("run.paused", json!({"prior_block": null})).into_event(
                "R",
                99,
                "E".into(),
                "t".into(),
            ),
        );
        assert_eq!(p.status, RunStatus::Paused { prior_block: None });
        assert_eq!(p.pending_control, None);
        let u = after(p.clone(), &unpause(&p, &a).unwrap());
        assert_eq!(u.status, RunStatus::Running);
        let blocked = row(RunStatus::Blocked {
            blocked_reason: "human_input_required".into(),
        });
        let pb = after(blocked.clone(), &pause(&blocked, &a).unwrap());
        let ub = after(pb.clone(), &unpause(&pb, &a).unwrap());
        assert_eq!(ub.status, blocked.status);
        assert_eq!(
            pause(&row(RunStatus::Runnable), &a).unwrap_err().status,
            409
        );
        let cr = cancel(&running, &a).unwrap();
        assert_eq!(cr.signal, Some(Signal::Cancel));
        assert_eq!(
            after(running.clone(), &cr).pending_control,
            Some(Control::Cancel)
        );

        let mut child = row(RunStatus::Submitted);
        child.parent_id = Some("P".into());
        let pend = after(child.clone(), &start(&child, false, &a).unwrap());
        assert_eq!(pend.status.name(), "pending");
        let appr = after(pend.clone(), &approve(&pend, &a).unwrap());
        assert_eq!(appr.status, RunStatus::Runnable);
        let den = after(pend.clone(), &deny(&pend, Some("no"), &a).unwrap());
        assert_eq!(
            den.status,
            RunStatus::Failed {
                reason: "approval_denied".into()
            }
        );
        assert_eq!(den.approval.clone().unwrap()["denial_reason"], "no");
        assert_eq!(archive(&running, &a).unwrap_err().status, 409);
        let arch = after(den.clone(), &archive(&den, &a).unwrap());
        assert!(arch.archived);
        assert!(archive(&arch, &a).unwrap().events.is_empty());
        assert_eq!(start(&arch, true, &a).unwrap_err().status, 409);
    }

    #[test]
    fn interrupted_runs_resume_unless_told_otherwise() {
        let running = row(RunStatus::Running);
        let plan = interrupted(&running, true);
        assert!(plan.resume && !plan.paused);
        let kinds: Vec<&str> = plan.events.iter().map(|d| d.event.as_str()).collect();
        assert_eq!(kinds, ["run.interrupted", "run.starting"]);
        assert_eq!(
            after(
                running.clone(),
                &Plan {
                    events: plan.events,
                    ..Plan::default()
                }
            )
            .status,
            RunStatus::Starting
        );

        let off = interrupted(&running, false);
        assert!(!off.resume);
        let failed = after(
            running.clone(),
            &Plan {
                events: off.events,
                ..Plan::default()
            },
        );
        assert_eq!(
            failed.status,
            RunStatus::Failed {
                reason: "terminated".into()
            }
        );

        let paused = interrupted(&row(RunStatus::Paused { prior_block: None }), true);
        assert!(paused.resume && paused.paused);

        let mut cancelling = row(RunStatus::Running);
        cancelling.pending_control = Some(Control::Cancel);
        let c = interrupted(&cancelling, true);
        assert!(!c.resume);
        let ended = after(
            cancelling,
            &Plan {
                events: c.events,
                ..Plan::default()
            },
        );
        assert_eq!(
            ended.status,
            RunStatus::Failed {
                reason: "cancelled".into()
            }
        );
        assert!(!interrupted(&row(RunStatus::Removing), true).resume);
    }
}
