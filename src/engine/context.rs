//! The run context: a flat JSON key/value map, the engine's own keys (engine.md 5.1), the
//! seed written at start and on loop restart, `$goal`/`$context.x`/`$inputs.x` expansion,
//! and the `SVC_*` environment given to commands.
//! Must not touch: routing, events or the store.

use crate::workflow::Workflow;
use serde_json::{Map, Value};

pub type Context = Map<String, Value>;

pub const GRAPH_GOAL: &str = "graph.goal";
/// Keys under this prefix are the engine's bookkeeping (see [`command_env`]).
pub const INTERNAL_PREFIX: &str = "internal.";
pub const RUN_ID: &str = "internal.run_id";
pub const WORK_DIR: &str = "internal.work_dir";
pub const CURRENT_NODE: &str = "current_node";
pub const VISIT_COUNT: &str = "internal.node_visit_count";
pub const OUTCOME: &str = "outcome";
pub const FAILURE_CLASS: &str = "failure_class";
pub const FAILURE_SIGNATURE: &str = "failure_signature";
pub const PREFERRED_LABEL: &str = "preferred_label";
pub const RETRY_COUNT_PREFIX: &str = "internal.retry_count.";
pub const LAST_STAGE: &str = "last_stage";
pub const LAST_RESPONSE: &str = "last_response";
pub const RESPONSE_PREFIX: &str = "response.";
pub const COMMAND_OUTPUT: &str = "command.output";
pub const COMMAND_STDERR: &str = "command.stderr";
pub const GATE_SELECTED: &str = "human.gate.selected";
pub const GATE_LABEL: &str = "human.gate.label";
pub const GATE_TEXT: &str = "human.gate.text";
pub const PARALLEL_RESULTS: &str = "parallel.results";
pub const OUTPUT_PREFIX: &str = "output.";

/// Values larger than this are not exported to commands as environment variables (the
/// kernel refuses single environment strings over 128 KiB).
pub const ENV_VALUE_LIMIT: usize = 64 * 1024;

/// `key` starts with [`INTERNAL_PREFIX`], compared as one fixed-size array (no `memcmp`
/// call): a long run holds a retry count per visited node, and every command stage's
/// environment skips them all.
fn is_internal(key: &str) -> bool {
    const PREFIX: [u8; 9] = *b"internal.";
    const _: () = assert!(INTERNAL_PREFIX.len() == PREFIX.len());
    key.as_bytes()
        .first_chunk::<9>()
        .is_some_and(|head| *head == PREFIX)
}

/// Keys the engine writes for its own bookkeeping: never propagated out of a child workflow
/// and never reported as a parallel branch's output.
pub fn is_engine_key(key: &str) -> bool {
    key.starts_with(INTERNAL_PREFIX)
        || key.starts_with("graph.")
        || key.starts_with("thread.")
        || key.starts_with("current")
        || matches!(
            key,
            OUTCOME | FAILURE_CLASS | FAILURE_SIGNATURE | PREFERRED_LABEL | LAST_STAGE
        )
}

/// `graph.goal`, `graph.<attr>` for every graph attribute, `internal.run_id` and
/// `internal.work_dir`.
pub fn seed(ctx: &mut Context, wf: &Workflow, run_id: &str, work_dir: &str) {
    for (k, v) in wf.graph.attrs.iter() {
        ctx.insert(format!("graph.{k}"), Value::String(v.to_text()));
    }
    ctx.insert(GRAPH_GOAL.into(), Value::String(wf.goal().to_string()));
    ctx.insert(RUN_ID.into(), Value::String(run_id.to_string()));
    ctx.insert(WORK_DIR.into(), Value::String(work_dir.to_string()));
}

/// A value as text: strings as they are, everything else as compact JSON, null as "".
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Expands `$goal`, `$context.<key>` and `$inputs.<key>` (also inside `${...}`). A missing
/// context or input key expands to the empty string; any other `$name` is left as written.
pub fn expand(text: &str, goal: &str, ctx: &Context, inputs: &Context) -> String {
    if !text.contains('$') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        match expand_one(after, goal, ctx, inputs) {
            Some((value, used)) => {
                out.push_str(&value);
                rest = &after[used..];
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The expansion of the variable at the start of `s` (just after a `$`) and how many bytes
/// of `s` it used; `None` when it is not one of ours.
fn expand_one(s: &str, goal: &str, ctx: &Context, inputs: &Context) -> Option<(String, usize)> {
    let braced = s.starts_with('{');
    let body = if braced { &s[1..] } else { s };
    let len = body
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(body.len());
    let name = body[..len].trim_end_matches('.');
    let used = if braced {
        if body[len..].starts_with('}') && name.len() == len {
            len + 2
        } else {
            return None;
        }
    } else {
        name.len()
    };
    let value = if name == "goal" {
        goal.to_string()
    } else if let Some(key) = name.strip_prefix("context.").filter(|k| !k.is_empty()) {
        ctx.get(key).map(value_text).unwrap_or_default()
    } else if let Some(key) = name.strip_prefix("inputs.").filter(|k| !k.is_empty()) {
        inputs.get(key).map(value_text).unwrap_or_default()
    } else {
        return None;
    };
    Some((value, used))
}

/// `KEY` uppercased with every non-alphanumeric character turned into `_`.
pub fn env_name(prefix: &str, key: &str) -> String {
    let mut name = String::with_capacity(prefix.len() + key.len());
    name.push_str(prefix);
    name.extend(key.chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c.to_ascii_uppercase()
        } else {
            '_'
        }
    }));
    name
}

/// `SVC_CONTEXT_<KEY>`, `SVC_INPUT_<KEY>`, `SVC_RUN_ID`, `SVC_NODE_ID`, `SVC_GOAL`.
/// The engine's `internal.*` bookkeeping (retry counts, one per visited node, the run id
/// and work directory again) is not exported: it would grow every command's environment
/// with the run's length, and copying it is most of a spawn's cost in long runs.
pub fn command_env(
    ctx: &Context,
    inputs: &Context,
    run_id: &str,
    node_id: &str,
    goal: &str,
) -> Vec<(String, String)> {
    let mut env = Vec::with_capacity(ctx.len() + inputs.len() + 3);
    let mut export = |prefix: &str, map: &Context| {
        for (k, v) in map {
            if is_internal(k) {
                continue;
            }
            let text = value_text(v);
            if text.len() <= ENV_VALUE_LIMIT && !text.contains('\0') {
                env.push((env_name(prefix, k), text));
            }
        }
    };
    export("SVC_CONTEXT_", ctx);
    export("SVC_INPUT_", inputs);
    env.push(("SVC_RUN_ID".into(), run_id.to_string()));
    env.push(("SVC_NODE_ID".into(), node_id.to_string()));
    env.push(("SVC_GOAL".into(), goal.to_string()));
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Context {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn expands_our_variables_only() {
        let ctx = map(json!({"a.b": "x", "n": 3}));
        let inputs = map(json!({"who": "bob"}));
        let e = |t: &str| expand(t, "ship it", &ctx, &inputs);
        assert_eq!(e("goal: $goal."), "goal: ship it.");
        assert_eq!(e("${goal}!"), "ship it!");
        assert_eq!(e("$context.a.b and $context.n."), "x and 3.");
        assert_eq!(e("${context.a.b}"), "x");
        assert_eq!(e("hi $inputs.who"), "hi bob");
        assert_eq!(e("missing [$context.zzz]"), "missing []");
        assert_eq!(e("$HOME ${PATH} $goals $1 $"), "$HOME ${PATH} $goals $1 $");
    }

    #[test]
    fn env_names_are_shell_safe() {
        assert_eq!(
            env_name("SVC_CONTEXT_", "human.gate-label"),
            "SVC_CONTEXT_HUMAN_GATE_LABEL"
        );
        let ctx = map(
            json!({"k": {"a": 1}, "internal.retry_count.a": 0, "outcome": "x",
                             "internal": "kept", "internals.x": "kept", "internal.": 1}),
        );
        let env = command_env(&ctx, &Context::new(), "R", "n", "g");
        assert!(env.contains(&("SVC_CONTEXT_INTERNAL".into(), "kept".into())));
        assert!(env.contains(&("SVC_CONTEXT_INTERNALS_X".into(), "kept".into())));
        assert!(env.contains(&("SVC_CONTEXT_K".into(), "{\"a\":1}".into())));
        assert!(env.contains(&("SVC_CONTEXT_OUTCOME".into(), "x".into())));
        assert!(
            !env.iter()
                .any(|(k, _)| k.starts_with("SVC_CONTEXT_INTERNAL_")),
            "engine bookkeeping stays out of the environment: {env:?}"
        );
        assert!(env.contains(&("SVC_NODE_ID".into(), "n".into())));
    }

    #[test]
    fn engine_keys() {
        assert!(is_engine_key("internal.retry_count.x"));
        assert!(is_engine_key("current_node"));
        assert!(is_engine_key("outcome"));
        assert!(!is_engine_key("command.output"));
        assert!(!is_engine_key("result"));
    }
}
