//! Agent and prompt handlers: build the request (prompt or label, expanded), call the
//! [`LlmBackend`](crate::engine::services::LlmBackend), apply the structured-output rules
//! (routing directive, custom schema with repair turns) and record the response keys.
//! Must not touch: providers or sessions (the backend owns those).

use super::{HandlerResult, Interrupt, StageCtx};
use crate::engine::context::{LAST_RESPONSE, OUTPUT_PREFIX, RESPONSE_PREFIX};
use crate::engine::outcome::{Failure, StageOutcome};
use crate::engine::output::{self, StructuredOutput};
use crate::engine::services::{LlmMode, LlmRequest};
use crate::workflow::HandlerKind;
use serde_json::Value;

const DEFAULT_OUTPUT_RETRIES: i64 = 2;
const LAST_RESPONSE_BYTES: usize = 200;

pub(super) fn run(cx: &StageCtx<'_, '_>) -> HandlerResult {
    let v = cx.view();
    let prompt = v
        .nonempty("prompt")
        .unwrap_or_else(|| cx.walker.wf.label(cx.node));
    let schema_attr = v.nonempty("output_schema").map(String::from);
    let schema = match &schema_attr {
        Some(attr) => {
            let files = cx.walker.scope.files.clone();
            match output::load_schema(attr, &|p: &str| files.read(p)) {
                Ok(s) => Some(s),
                Err(e) => {
                    return Ok(StageOutcome::failed(Failure::deterministic(format!(
                        "stage `{}` has an unusable output_schema: {e}",
                        cx.scoped_id()
                    ))))
                }
            }
        }
        None => None,
    };
    let mut req = LlmRequest {
        node_id: cx.scoped_id(),
        mode: if cx.kind == HandlerKind::Prompt {
            LlmMode::Prompt
        } else {
            LlmMode::Agent
        },
        prompt: cx.expand(prompt),
        model: v.nonempty("model").map(String::from),
        provider: v.nonempty("provider").map(String::from),
        reasoning_effort: v.nonempty("reasoning_effort").map(String::from),
        max_tokens: v.int("max_tokens"),
        workdir: cx.walker.options().workdir.clone(),
        feedback: Vec::new(),
        output_schema: schema_attr,
    };
    let repairs = v
        .int("output_retries")
        .unwrap_or(DEFAULT_OUTPUT_RETRIES)
        .max(0);
    let backend = cx.walker.services().llm.clone();
    loop {
        if cx.cancel.is_cancelled() {
            return Err(Interrupt::Cancelled);
        }
        let response = match backend.complete(&req, cx.cancel) {
            Ok(r) => r,
            Err(_) if cx.cancel.is_cancelled() => return Err(Interrupt::Cancelled),
            Err(e) if e.retryable => {
                let class = crate::engine::failure::classify(&e.message);
                return Ok(StageOutcome::failed(Failure::retryable(e.message, class)));
            }
            Err(e) => return Ok(StageOutcome::failed(Failure::deterministic(e.message))),
        };
        let mut o = StageOutcome::succeeded();
        record_response(cx, &mut o, &response.text);
        let structured = match (&schema, response.simulated) {
            (Some(s), false) => output::extract_structured(&response.text, s).map(Some),
            _ => Ok(None),
        };
        match structured {
            Ok(Some(StructuredOutput::Routing(d))) => o.apply_directive(d),
            Ok(Some(StructuredOutput::Custom(v))) => {
                o.write(&format!("{OUTPUT_PREFIX}{}", cx.id()), v)
            }
            Ok(None) => apply_loose_directive(&mut o, &response.text, schema.is_some()),
            Err(why) if (req.feedback.len() as i64) < repairs => {
                req.feedback.push(why);
                continue;
            }
            Err(why) => {
                let mut failed = StageOutcome::failed(Failure::deterministic(format!(
                    "output of stage `{}` does not match its output_schema after {} repair turn{}: {why}",
                    cx.scoped_id(),
                    req.feedback.len(),
                    if req.feedback.len() == 1 { "" } else { "s" }
                )));
                failed.context_updates = o.context_updates;
                failed.response = o.response;
                return Ok(failed);
            }
        }
        return Ok(o);
    }
}

fn record_response(cx: &StageCtx<'_, '_>, o: &mut StageOutcome, text: &str) {
    let mut cut = text.len().min(LAST_RESPONSE_BYTES);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    o.write(LAST_RESPONSE, Value::String(text[..cut].to_string()));
    o.write(
        &format!("{RESPONSE_PREFIX}{}", cx.id()),
        Value::String(text.to_string()),
    );
    o.response = Some(text.to_string());
}

/// Without a schema, a routing directive in the reply is still honoured (engine.md 7.2);
/// a reply without one simply succeeds.
fn apply_loose_directive(o: &mut StageOutcome, text: &str, has_schema: bool) {
    if has_schema {
        return;
    }
    if let Some(m) = output::last_json_object(text, output::has_routing_key) {
        o.apply_directive(output::parse_directive(&m));
    }
}
