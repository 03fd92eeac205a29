//! Agent and prompt handlers: build the request (prompt or label, expanded; the walker's
//! preamble and `full` thread; `reasoning_effort` defaulting to `high`), call the
//! [`LlmBackend`](crate::engine::services::LlmBackend), apply the structured-output rules
//! (routing directive, custom schema with repair turns) and record the response keys.
//! Must not touch: providers or sessions (the backend owns those).

use super::{HandlerResult, Interrupt, StageCtx};
use crate::base::event_kind;
use crate::engine::context::{LAST_RESPONSE, OUTPUT_PREFIX, RESPONSE_PREFIX, VISIT_COUNT};
use crate::engine::failure::StageStatus;
use crate::engine::options::ModelChoice;
use crate::engine::outcome::{Failure, StageOutcome};
use crate::engine::output::{self, StructuredOutput};
use crate::engine::services::{LlmBackend, LlmMode, LlmRequest, LlmStop, LlmUsage};
use crate::llm::{PricedUsage, Timing};
use crate::workflow::HandlerKind;
use serde_json::{json, Value};

const DEFAULT_OUTPUT_RETRIES: i64 = 2;
/// SPEC 2.13: `reasoning_effort` defaults to `high`.
pub(crate) const DEFAULT_REASONING_EFFORT: &str = "high";
const LAST_RESPONSE_BYTES: usize = 200;

pub(super) fn run(cx: &StageCtx<'_, '_>) -> HandlerResult {
    let v = cx.view();
    let prompt = v
        .nonempty("prompt")
        .unwrap_or_else(|| cx.wf().label(cx.node));
    let schema_attr = v.nonempty("output_schema").map(String::from);
    let schema = match &schema_attr {
        Some(attr) => {
            let files = cx.scope().files.clone();
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
    let acp = match cx.kind {
        HandlerKind::Prompt => None, // prompt nodes are API-only (validation says so)
        _ => match crate::workflow::acp::launch(&v, cx.scope().files.as_ref()) {
            Ok(l) => l,
            Err(e) => {
                return Ok(StageOutcome::failed(Failure::deterministic(format!(
                    "stage `{}`: {e}",
                    cx.scoped_id()
                ))))
            }
        },
    };
    let mcp_servers = match cx.kind {
        HandlerKind::Prompt => Vec::new(),
        _ => match mcp_servers(cx, v.text("mcp_servers")) {
            Ok(l) => l,
            Err(why) => return Ok(StageOutcome::failed(Failure::deterministic(why))),
        },
    };
    let plan = cx.plan();
    // The node's own model (attribute or stylesheet), else the run's.
    let model = match v.nonempty("model") {
        Some(name) => Some(ModelChoice {
            provider: None,
            name: name.to_string(),
        }),
        None => cx.options().model.clone(),
    };
    let mut req = LlmRequest {
        node_id: cx.scoped_id(),
        mode: if cx.kind == HandlerKind::Prompt {
            LlmMode::Prompt
        } else {
            LlmMode::Agent
        },
        prompt: cx.expand(prompt),
        model: model.as_ref().map(|m| m.name.clone()),
        provider: v
            .nonempty("provider")
            .map(String::from)
            .or_else(|| model.as_ref().and_then(|m| m.provider.clone())),
        reasoning_effort: Some(
            v.nonempty("reasoning_effort")
                .unwrap_or(DEFAULT_REASONING_EFFORT)
                .to_string(),
        ),
        max_tokens: v.int("max_tokens"),
        max_turns: v
            .int("max_turns")
            .map(|n| u32::try_from(n.max(0)).unwrap_or(u32::MAX)),
        workdir: cx.options().workdir.clone(),
        isolation: cx.services().isolation.clone(),
        env: cx.services().stage_env.clone(),
        feedback: Vec::new(),
        output_schema: schema_attr,
        project_memory: v.bool("project_memory").unwrap_or(true),
        acp,
        preamble: plan.and_then(|p| p.preamble.clone()),
        thread: plan.and_then(|p| p.conversation.clone()),
        tool_hooks: tool_hooks(cx),
        mcp_servers,
        budget_left_usd_micros: None,
    };
    let repairs = v
        .int("output_retries")
        .unwrap_or(DEFAULT_OUTPUT_RETRIES)
        .max(0);
    let backend = cx.services().llm.clone();
    let result = converse(cx, backend.as_ref(), &mut req, schema.as_ref(), repairs);
    backend.finish(&req.node_id);
    result
}

/// The run's MCP servers the stage uses: all of them, or those the node's `mcp_servers`
/// attribute names (each must be one of the run's).
fn mcp_servers(
    cx: &StageCtx<'_, '_>,
    attr: Option<&str>,
) -> Result<Vec<crate::mcp::ServerDef>, String> {
    let run = &cx.options().mcp_servers;
    let Some(text) = attr else {
        return Ok(run.clone());
    };
    let names = crate::mcp::spec::parse_server_list(text).map_err(|word| {
        format!(
            "stage `{}`: mcp_servers names `{word}`, which is not an MCP server id",
            cx.scoped_id()
        )
    })?;
    names
        .iter()
        .map(|n| {
            run.iter().find(|s| &s.id == n).cloned().ok_or_else(|| {
                let have: Vec<&str> = run.iter().map(|s| s.id.as_str()).collect();
                format!(
                    "stage `{}` names the MCP server `{n}`, which this run does not have \
                     (its servers: {})",
                    cx.scoped_id(),
                    if have.is_empty() {
                        "none".to_string()
                    } else {
                        have.join(", ")
                    }
                )
            })
        })
        .collect()
}

/// The node's `tool_hooks.pre` / `.post`, else the graph's (a blank node value turns the
/// graph's hook off for that node).
fn tool_hooks(cx: &StageCtx<'_, '_>) -> crate::engine::services::ToolHooks {
    let wf = cx.wf();
    let pick = |key: &str| {
        let own = wf.node_view(cx.node).text(key);
        own.or_else(|| wf.graph_view().text(key))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    crate::engine::services::ToolHooks {
        pre: pick("tool_hooks.pre"),
        post: pick("tool_hooks.post"),
    }
}

/// The calls of one attempt: the first, then a repair turn per invalid structured reply.
fn converse(
    cx: &StageCtx<'_, '_>,
    backend: &dyn LlmBackend,
    req: &mut LlmRequest,
    schema: Option<&output::OutputSchema>,
    repairs: i64,
) -> HandlerResult {
    let mut spent = Spent::default();
    loop {
        if cx.cancel.is_cancelled() {
            return Err(Interrupt::Cancelled);
        }
        req.budget_left_usd_micros = check_budget(cx, spent.usd_micros())?;
        let mut store_error = None;
        let visit = cx
            .context()
            .get(VISIT_COUNT)
            .cloned()
            .unwrap_or(Value::from(1));
        let result = backend.complete(req, cx.cancel, &mut |kind, mut props| {
            if let Value::Object(m) = &mut props {
                m.entry("visit").or_insert_with(|| visit.clone());
                if kind == event_kind::STAGE_PROMPT {
                    describe_prompt(cx, req, m);
                }
            }
            if store_error.is_none() {
                store_error = cx.emit(kind, props).err();
            }
        });
        if let Some(e) = store_error {
            return Err(Interrupt::Store(e));
        }
        let response = match result {
            Ok(r) => r,
            Err(_) if cx.cancel.is_cancelled() => return Err(Interrupt::Cancelled),
            Err(e) if e.retryable => {
                let class = crate::engine::failure::classify(&e.message);
                return Ok(spent.apply(StageOutcome::failed(Failure::retryable(e.message, class))));
            }
            Err(e) => {
                return Ok(spent.apply(StageOutcome::failed(Failure::deterministic(e.message))))
            }
        };
        if let Some(u) = &response.usage {
            spent.add(u);
        }
        if response.stop == LlmStop::BudgetSpent {
            return budget_spent_inside(cx, spent, response.text);
        }
        let mut o = StageOutcome::succeeded();
        if response.stop == LlmStop::TurnLimit {
            o.status = StageStatus::PartiallySucceeded;
            o.notes = Some(match req.max_turns.filter(|n| *n > 0) {
                Some(n) => format!("the agent stopped at its turn limit (max_turns={n}) while it still wanted tools"),
                None => "the agent stopped at its turn limit while it still wanted tools".into(),
            });
        }
        record_response(cx, &mut o, &response.text);
        let structured = match (schema, response.simulated) {
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
                return Ok(spent.apply(failed));
            }
        }
        return Ok(spent.apply(o));
    }
}

/// The run's recorded LLM cost (micro-USD, from the run row's stage usage).
fn recorded_cost(cx: &StageCtx<'_, '_>) -> Result<i64, Interrupt> {
    let run_id = &cx.options().run_id;
    Ok(cx
        .services()
        .store
        .get_run(run_id)?
        .map_or(0, |row| row.usage.usd_micros))
}

fn usd(micros: i64) -> String {
    format!("${:.4}", micros as f64 / 1e6)
}

/// An agent session stopped between turns because the run's budget was spent: the stage
/// fails with the usage of the turns it made (so they are recorded and billed), an
/// `llm.budget_exceeded` event says so, and the outcome stops the run `budget_exceeded`
/// once the stage's end is recorded ([`StageOutcome::budget_spent`]).
fn budget_spent_inside(cx: &StageCtx<'_, '_>, spent: Spent, text: String) -> HandlerResult {
    let budget = cx.options().budget_usd_micros.unwrap_or(0);
    let total = recorded_cost(cx)? + spent.usd_micros();
    let message = format!(
        "the run's LLM budget of {} is spent ({} with this stage): agent stage `{}` stopped before its next turn",
        usd(budget),
        usd(total),
        cx.scoped_id()
    );
    cx.emit(
        "llm.budget_exceeded",
        json!({"budget_usd_micros": budget, "spent_usd_micros": total, "message": message,
               "during_stage": true}),
    )?;
    let mut failed = StageOutcome::failed(Failure::deterministic(message.clone()));
    failed.budget_spent = Some(message);
    if !text.trim().is_empty() {
        failed.response = Some(text);
    }
    Ok(spent.apply(failed))
}

/// Refuses the next model call once the run's recorded LLM cost (plus `pending`, what this
/// attempt spent and has not recorded yet) has reached its budget: an
/// `llm.budget_exceeded` event on the stage, then the run stops `budget_exceeded`. Else
/// what the call may still spend (`None` without a budget).
fn check_budget(cx: &StageCtx<'_, '_>, pending: i64) -> Result<Option<i64>, Interrupt> {
    let Some(budget) = cx.options().budget_usd_micros else {
        return Ok(None);
    };
    let spent = recorded_cost(cx)? + pending;
    if spent < budget {
        return Ok(Some(budget - spent));
    }
    let message = format!(
        "the run's LLM budget of {} is spent ({} recorded): stage `{}` made no model call",
        usd(budget),
        usd(spent),
        cx.scoped_id()
    );
    cx.emit(
        "llm.budget_exceeded",
        json!({"budget_usd_micros": budget, "spent_usd_micros": spent, "message": message}),
    )?;
    Err(Interrupt::BudgetExceeded(message))
}

/// Usage summed over an attempt's calls (repair turns included).
#[derive(Default)]
struct Spent {
    priced: Option<PricedUsage>,
    provider: String,
    model: String,
    files_touched: Vec<String>,
    timing: Timing,
}

impl Spent {
    /// The cost of the calls so far (0 when unpriced).
    fn usd_micros(&self) -> i64 {
        self.priced.as_ref().map_or(0, |p| p.cost.usd_micros)
    }

    fn add(&mut self, u: &LlmUsage) {
        let p = PricedUsage {
            tokens: u.tokens,
            cost: u.cost,
        };
        match &mut self.priced {
            Some(acc) => acc.add(&p),
            None => self.priced = Some(p),
        }
        self.provider = u.provider.clone();
        self.model = u.model.clone();
        for f in &u.files_touched {
            if !self.files_touched.contains(f) {
                self.files_touched.push(f.clone());
            }
        }
        self.timing.add(&Timing {
            wall_time_ms: 0,
            inference_time_ms: u.inference_time.as_millis() as u64,
            tool_time_ms: u.tool_time.as_millis() as u64,
        });
    }

    /// Puts the usage (`usage` = tokens, cost, model, provider, timing) on the outcome.
    fn apply(self, mut o: StageOutcome) -> StageOutcome {
        if let Some(p) = self.priced {
            let mut u = p.to_json();
            if let Value::Object(m) = &mut u {
                m.insert("model".into(), Value::String(self.model));
                m.insert("provider".into(), Value::String(self.provider));
                m.insert("speed".into(), Value::String("standard".into()));
                m.insert(
                    "inference_time_ms".into(),
                    self.timing.inference_time_ms.into(),
                );
                m.insert("tool_time_ms".into(), self.timing.tool_time_ms.into());
            }
            o.usage = Some(u);
        }
        o.files_touched = self.files_touched;
        o
    }
}

/// `stage.prompt` also says how the text was put together: the stage's mode, fidelity,
/// thread, and the preamble and expanded prompt it was made of.
fn describe_prompt(
    cx: &StageCtx<'_, '_>,
    req: &LlmRequest,
    m: &mut serde_json::Map<String, Value>,
) {
    let mode = match req.mode {
        LlmMode::Agent => "agent",
        LlmMode::Prompt => "prompt",
    };
    m.insert("mode".into(), Value::from(mode));
    if let Some(plan) = cx.plan() {
        m.insert("fidelity".into(), Value::from(plan.fidelity.as_str()));
        m.insert("thread_id".into(), Value::from(plan.thread.clone()));
    }
    m.insert(
        "preamble".into(),
        req.preamble.clone().map_or(Value::Null, Value::from),
    );
    m.insert("prompt".into(), Value::from(req.prompt.clone()));
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
