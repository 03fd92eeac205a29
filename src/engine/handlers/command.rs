//! The command handler: runs the node's `script` (shell or python) in the run's working
//! directory with the `SVC_*` environment, kills its process group at the node `timeout`,
//! maps the exit code to an outcome, and applies the `output_schema` (routing directive or
//! custom JSON stored at `output.<node_id>`).
//! Must not touch: process management details (see `procs`).

use super::{HandlerResult, Interrupt, StageCtx};
use crate::base::event_kind;
use crate::engine::command::{start_command, CommandResult, CommandSpec, Language};
use crate::engine::context::{self, COMMAND_OUTPUT, COMMAND_STDERR, OUTPUT_PREFIX};
use crate::engine::failure::classify_command;
use crate::engine::outcome::{Failure, StageOutcome};
use crate::engine::output::{self, OutputSchema, StructuredOutput};
use crate::engine::timing::millis;
use crate::procs::Termination;
use serde_json::{json, Value};
use std::time::Duration;

pub(super) fn run(cx: &StageCtx<'_, '_>) -> HandlerResult {
    let v = cx.view();
    let Some(script) = v.nonempty("script") else {
        return deterministic(cx, "has no `script` to run");
    };
    let script = cx.expand(script);
    let Some(language) = Language::from_attr(v.text("language")) else {
        let other = v.text("language").unwrap_or("");
        return deterministic(
            cx,
            &format!("has unknown language `{other}` (use shell or python)"),
        );
    };
    let schema = match load_schema(cx) {
        Ok(s) => s,
        Err(why) => return deterministic(cx, &why),
    };
    let timeout = v.duration("timeout").filter(|d| !d.is_zero());
    let language_name = if language == Language::Python {
        "python"
    } else {
        "shell"
    };
    let spec = CommandSpec {
        script: &script,
        language,
        workdir: &cx.options().workdir,
        env: context::command_env(
            cx.context(),
            cx.inputs(),
            &cx.options().run_id,
            &cx.scoped_id(),
            cx.goal(),
        ),
        base_env: cx.base_env(),
        timeout,
        isolation: &cx.services().isolation,
        pipe_grace: crate::engine::command::PIPE_GRACE,
    };
    // `command.started` is committed once the process is on its way, so the commit and
    // the program's start-up overlap instead of following each other.
    let started = start_command(&spec, cx.cancel);
    cx.emit(
        event_kind::COMMAND_STARTED,
        json!({"script": script, "language": language_name,
               "timeout_ms": timeout.map(millis)}),
    )?;
    let mut result = match started.and_then(|s| s.wait(timeout, cx.cancel)) {
        Ok(r) => CommandResult::from(r),
        Err(e) => return deterministic(cx, &format!("could not start: {e}")),
    };
    result.note_limit(&cx.services().isolation);
    emit_completed(cx, &result)?;
    match result.termination {
        Termination::Cancelled => Err(Interrupt::Cancelled),
        Termination::TimedOut => Ok(StageOutcome::failed(Failure::timeout(format!(
            "{} and was killed",
            result.summary(timeout)
        )))),
        Termination::Exited => Ok(exited(cx, result, schema.as_ref(), timeout)),
    }
}

fn deterministic(cx: &StageCtx<'_, '_>, what: &str) -> HandlerResult {
    Ok(StageOutcome::failed(Failure::deterministic(format!(
        "command stage `{}` {what}",
        cx.scoped_id()
    ))))
}

fn load_schema(cx: &StageCtx<'_, '_>) -> Result<Option<OutputSchema>, String> {
    let Some(attr) = cx.view().nonempty("output_schema") else {
        return Ok(None);
    };
    let files = cx.scope().files.clone();
    output::load_schema(attr, &|path: &str| files.read(path))
        .map(Some)
        .map_err(|e| format!("has an unusable output_schema: {e}"))
}

/// Committed with the stage's end: nothing but the outcome's making comes in between.
fn emit_completed(cx: &StageCtx<'_, '_>, r: &CommandResult) -> Result<(), Interrupt> {
    cx.hold(
        event_kind::COMMAND_COMPLETED,
        json!({
            "stdout": r.stdout,
            "stderr": r.stderr,
            "exit_code": r.exit_code,
            "duration_ms": millis(r.duration),
            "termination": termination_name(r.termination),
            "stdout_bytes": r.stdout_bytes,
            "stderr_bytes": r.stderr_bytes,
            "truncated": r.truncated,
            "limit": r.limit,
        }),
    )?;
    Ok(())
}

fn termination_name(t: Termination) -> &'static str {
    match t {
        Termination::Exited => "exited",
        Termination::TimedOut => "timed_out",
        Termination::Cancelled => "cancelled",
    }
}

/// Exit 0 → succeeded (then the schema), anything else → a retryable failure quoting the
/// end of the output, classed by the line the command ended with.
fn exited(
    cx: &StageCtx<'_, '_>,
    r: CommandResult,
    schema: Option<&OutputSchema>,
    timeout: Option<Duration>,
) -> StageOutcome {
    let mut o = StageOutcome::succeeded();
    if !r.succeeded() {
        let failure = Failure::retryable(r.failure_message(timeout), classify_command(&r));
        o = StageOutcome::failed(failure);
    } else if let Some(schema) = schema {
        match output::extract_structured(&r.merged, schema) {
            Ok(StructuredOutput::Routing(d)) => o.apply_directive(d),
            Ok(StructuredOutput::Custom(v)) => o.write(&format!("{OUTPUT_PREFIX}{}", cx.id()), v),
            Err(why) => {
                o = StageOutcome::failed(Failure::deterministic(format!(
                    "output of command stage `{}` does not match its output_schema: {why}",
                    cx.scoped_id()
                )));
            }
        }
    }
    // Directive updates win over nothing; the command keys are always written.
    let mut updates = serde_json::Map::new();
    updates.insert(COMMAND_OUTPUT.into(), Value::String(r.stdout));
    updates.insert(COMMAND_STDERR.into(), Value::String(r.stderr));
    updates.extend(std::mem::take(&mut o.context_updates));
    o.context_updates = updates;
    o
}
