//! Tool hooks (`tool_hooks.pre` / `tool_hooks.post`): shell commands an agent session runs
//! in its sandbox directory before and after every tool call, with the call in the
//! environment (`SVC_TOOL_NAME`, `SVC_TOOL_CALL_ID`, `SVC_TOOL_ARGUMENTS` as JSON; the post
//! hook also gets `SVC_TOOL_IS_ERROR`). A pre hook that fails (non-zero exit, killed, timed
//! out, or cannot start) refuses the call: the tool does not run and the model is told why.
//! A failing post hook changes nothing the model sees; both failures are reported as
//! `agent.tool_hook.failed` events. Must not know about stages or workflows.

use std::time::Duration;

use serde_json::Value;

use super::tools::shell::{self, Termination};
use super::AgentEvent;
use crate::base::cancel::CancelToken;
use crate::engine::services::ToolHooks;
use crate::sandbox::Sandbox;

/// How long one hook may run before it is killed (and counts as failed).
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// Bytes of a failing hook's output kept for the model and the event.
const TAIL: usize = 2000;

/// The tool call a hook runs around.
pub struct Call<'a> {
    pub tool_name: &'a str,
    pub tool_call_id: &'a str,
    pub arguments: &'a Value,
}

/// A hook that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookFailure {
    pub hook: &'static str,
    pub exit_code: Option<i32>,
    /// What went wrong: the end of its output, or why it did not finish.
    pub output: String,
}

impl HookFailure {
    /// The refusal the model reads in place of the tool's result.
    pub fn for_model(&self) -> String {
        let how = match self.exit_code {
            Some(c) => format!("exited with code {c}"),
            None => "did not finish".to_string(),
        };
        let mut s = format!(
            "the call was refused by the tool_hooks.{} hook, which {how}",
            self.hook
        );
        if !self.output.is_empty() {
            s.push_str(": ");
            s.push_str(&self.output);
        }
        s
    }

    pub fn event(&self, call: &Call<'_>) -> AgentEvent {
        AgentEvent::ToolHookFailed {
            hook: self.hook,
            tool_name: call.tool_name.to_string(),
            tool_call_id: call.tool_call_id.to_string(),
            exit_code: self.exit_code,
            output: self.output.clone(),
        }
    }
}

/// Runs the pre hook, if any; `Some` means the call is refused.
pub fn pre(
    hooks: &ToolHooks,
    call: &Call<'_>,
    sb: &Sandbox,
    cancel: &CancelToken,
) -> Option<HookFailure> {
    let command = hooks.pre.as_deref()?;
    run("pre", command, &env(call, None), sb, cancel)
}

/// Runs the post hook, if any; `Some` when it failed.
pub fn post(
    hooks: &ToolHooks,
    call: &Call<'_>,
    is_error: bool,
    sb: &Sandbox,
    cancel: &CancelToken,
) -> Option<HookFailure> {
    let command = hooks.post.as_deref()?;
    run("post", command, &env(call, Some(is_error)), sb, cancel)
}

fn env(call: &Call<'_>, is_error: Option<bool>) -> Vec<(&'static str, String)> {
    let mut v = vec![
        ("SVC_TOOL_NAME", call.tool_name.to_string()),
        ("SVC_TOOL_CALL_ID", call.tool_call_id.to_string()),
        ("SVC_TOOL_ARGUMENTS", call.arguments.to_string()),
    ];
    if let Some(e) = is_error {
        v.push(("SVC_TOOL_IS_ERROR", e.to_string()));
    }
    v
}

fn run(
    hook: &'static str,
    command: &str,
    env: &[(&'static str, String)],
    sb: &Sandbox,
    cancel: &CancelToken,
) -> Option<HookFailure> {
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = match shell::run_with_env(sb, command, &pairs, HOOK_TIMEOUT, cancel) {
        Ok(o) => o,
        Err(why) => {
            return Some(HookFailure {
                hook,
                exit_code: None,
                output: why,
            })
        }
    };
    let exit_code = match out.termination {
        Termination::Exited(0) => return None,
        Termination::Exited(c) => Some(c),
        _ => None,
    };
    let text = if out.stderr.trim().is_empty() {
        &out.stdout
    } else {
        &out.stderr
    };
    let output = match &out.termination {
        Termination::TimedOut => format!("timed out after {} s", HOOK_TIMEOUT.as_secs()),
        Termination::Cancelled => "cancelled".to_string(),
        Termination::Signaled(s) => format!("killed by signal {s}"),
        Termination::Exited(_) => tail(text.trim()),
    };
    Some(HookFailure {
        hook,
        exit_code,
        output,
    })
}

/// The last [`TAIL`] bytes, cut at a character boundary.
fn tail(s: &str) -> String {
    if s.len() <= TAIL {
        return s.to_string();
    }
    let mut start = s.len() - TAIL;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &s[start..])
}
