//! A manager stage's child as a first-class run: its run record (`parent_id` = the run the
//! manager stage belongs to: the top run, or a child run for a nested manager), the approval wait (`[run] child_approval`), and
//! its lifecycle events (`run.started`, `run.running`, `run.completed` / `run.failed`). The
//! child's stage events reach its stream through the walker's scope mirrors.
//! Must not touch: running the child workflow (the manager handler does).

use super::StageCtx;
use crate::base::event_kind;
use crate::engine::options::ChildApproval;
use crate::store::{EventDraft, NewRun, RunStatus, StoreError, WorkflowMeta};
use crate::workflow::Workflow;
use serde_json::{json, Value};
use std::time::Duration;

/// How often an approval wait looks at the child's row.
const APPROVAL_POLL: Duration = Duration::from_millis(100);

/// Why the child may not run.
pub(super) enum Refused {
    /// Denied over HTTP (with the reason given), or approval cannot be asked for.
    Denied(String),
    /// The manager's stage was cancelled while waiting.
    Cancelled,
    Store(StoreError),
}

impl From<StoreError> for Refused {
    fn from(e: StoreError) -> Refused {
        Refused::Store(e)
    }
}

/// The child's run record.
pub(super) struct ChildRun {
    pub id: String,
}

/// Creates the child run and, when approval is required, waits for it.
pub(super) fn open(
    cx: &StageCtx<'_, '_>,
    child: &Workflow,
    source: &str,
    path: Option<String>,
) -> Result<ChildRun, Refused> {
    let store = &cx.services().store;
    let options = cx.options();
    // The run this manager stage belongs to: a nested manager's child links to its child.
    let parent = cx
        .scope()
        .run_id()
        .map_or_else(|| options.run_id.clone(), String::from);
    let goal = match child.goal() {
        "" => cx.goal().to_string(),
        g => g.to_string(),
    };
    let new = NewRun {
        title: format!("{} (child of {})", child.name(), cx.scoped_id()),
        goal,
        workflow: WorkflowMeta {
            name: Some(child.name().to_string()),
            graph_name: Some(child.name().to_string()),
            node_count: child.graph.nodes.len() as i64,
            edge_count: child.graph.edges.len() as i64,
            source: source.to_string(),
            path,
            ..WorkflowMeta::default()
        },
        working_dir: Some(options.workdir.display().to_string()),
        inputs: Value::Object(options.inputs.clone()),
        ..NewRun::default()
    };
    let row = store.create_run(NewRun {
        parent_id: Some(parent.clone()),
        extra: json!({
            "created_by": {"kind": "worker", "run_id": parent},
            "origin": {"kind": "api", "manager": {"run_id": parent, "node_id": cx.scoped_id()}},
        }),
        ..new
    })?;
    let run = ChildRun { id: row.id };
    cx.emit(
        event_kind::STAGE_CHILD_CREATED,
        json!({"child_run_id": run.id, "approval": approval_name(options.child_approval)}),
    )?;
    match options.child_approval {
        ChildApproval::Automatic => {}
        ChildApproval::Unavailable => {
            let why = "child runs need approval ([run] child_approval = \"required\") and nobody can approve here: pass --auto-approve, or run the workflow on the server";
            end(cx, &run, Err(("approval_denied", why)))?;
            return Err(Refused::Denied(why.into()));
        }
        ChildApproval::Required => wait_for_approval(cx, &run)?,
    }
    append(
        cx,
        &run,
        event_kind::RUN_STARTED,
        json!({"name": child.name(), "goal": row.goal}),
    )?;
    append(cx, &run, event_kind::RUN_RUNNING, Value::Null)?;
    Ok(run)
}

fn approval_name(a: ChildApproval) -> &'static str {
    match a {
        ChildApproval::Automatic => "automatic",
        ChildApproval::Required => "required",
        ChildApproval::Unavailable => "unavailable",
    }
}

/// `run.pending{approval_required}`, then sleeps until the child is approved (its approval
/// state turns `approved`) or denied (it fails with `approval_denied`), without counting
/// as a stall.
fn wait_for_approval(cx: &StageCtx<'_, '_>, run: &ChildRun) -> Result<(), Refused> {
    let services = cx.services();
    append(
        cx,
        run,
        event_kind::RUN_PENDING,
        json!({"reason": "approval_required"}),
    )?;
    let _quiet = cx.quiet();
    loop {
        let row = services.store.get_run(&run.id)?;
        let Some(row) = row else {
            return Err(Refused::Denied(format!("child run {} was deleted", run.id)));
        };
        let state = row
            .approval
            .as_ref()
            .and_then(|a| a.get("state"))
            .and_then(Value::as_str);
        match (&row.status, state) {
            (_, Some("approved")) => return Ok(()),
            (RunStatus::Failed { .. } | RunStatus::Dead, _) | (_, Some("denied")) => {
                let reason = row
                    .approval
                    .as_ref()
                    .and_then(|a| a.get("denial_reason"))
                    .and_then(Value::as_str)
                    .or(row.error.as_deref())
                    .unwrap_or("no reason given")
                    .to_string();
                return Err(Refused::Denied(reason));
            }
            _ => {}
        }
        if services.clock.sleep(APPROVAL_POLL, cx.cancel) {
            end(
                cx,
                run,
                Err(("cancelled", "the manager stage was cancelled")),
            )?;
            return Err(Refused::Cancelled);
        }
    }
}

/// The child's terminal event: `run.completed` or `run.failed {reason, error}`.
pub(super) fn end(
    cx: &StageCtx<'_, '_>,
    run: &ChildRun,
    result: Result<(), (&str, &str)>,
) -> Result<(), StoreError> {
    let (kind, props) = match result {
        Ok(()) => (
            event_kind::RUN_COMPLETED,
            json!({"status": "succeeded", "reason": "completed"}),
        ),
        Err((reason, error)) => (
            event_kind::RUN_FAILED,
            json!({"reason": reason, "error": error, "causes": []}),
        ),
    };
    append(cx, run, kind, props)
}

fn append(
    cx: &StageCtx<'_, '_>,
    run: &ChildRun,
    kind: &str,
    props: Value,
) -> Result<(), StoreError> {
    let mut draft = EventDraft::new(kind, props);
    crate::base::redact::redact_json(cx.services().redactor.as_ref(), &mut draft.properties);
    cx.services().store.append(&run.id, draft).map(|_| ())
}
