//! `GET /api/v1/runs/{id}/usage` (SPEC 2.8): a run's stage events turned into
//! [`StageRecord`]s, one per stage visit that reported LLM usage, and summed by
//! [`crate::llm::UsageRollup`] into `{stages, totals, by_model}`.
//!
//! Owns: reading the engine's `stage.started` / `stage.failed` / `stage.completed` events into
//! visits (attempts of one visit summed). Must not touch: pricing or the rollup arithmetic
//! (`llm::cost`), SQL (through `RunStore` only), or the run row's totals (`store::fold`).

use super::store_error;
use crate::base::event_kind;
use crate::llm::{Cost, CostSource, PricedUsage, Provider, Speed, StageRecord, Timing, Usage};
use crate::server::error::ApiError;
use crate::server::http::Reply;
use crate::server::router::Ctx;
use crate::server::App;
use crate::store::Event;
use serde_json::Value;
use std::collections::HashMap;

/// Events read per store call while rolling a run up.
const PAGE: usize = 512;

/// One stage visit being read: its attempts so far.
struct Visit {
    node_id: String,
    started_at: String,
    state: &'static str,
    priced: Option<PricedUsage>,
    provider: Option<Provider>,
    model: String,
    speed: Speed,
    timing: Timing,
}

impl Visit {
    fn add_attempt(&mut self, p: &Value) {
        self.timing.wall_time_ms += p.get("duration_ms").and_then(Value::as_u64).unwrap_or(0);
        let Some(u) = p.get("usage").filter(|u| u.is_object()) else {
            return;
        };
        let int = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        let t = u.get("tokens").cloned().unwrap_or(Value::Null);
        let tokens = Usage {
            input: int(&t, "input"),
            output: int(&t, "output"),
            reasoning: int(&t, "reasoning"),
            cache_read: int(&t, "cache_read"),
            cache_write: int(&t, "cache_write"),
        };
        let cost = Cost {
            usd_micros: u
                .pointer("/cost/usd_micros")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            source: u
                .pointer("/cost/source")
                .and_then(Value::as_str)
                .and_then(CostSource::parse)
                .unwrap_or(CostSource::Unpriced),
        };
        let attempt = PricedUsage { tokens, cost };
        match &mut self.priced {
            Some(acc) => acc.add(&attempt),
            None => self.priced = Some(attempt),
        }
        if let Some(m) = u.get("model").and_then(Value::as_str) {
            self.model = m.to_string();
        }
        self.provider = u
            .get("provider")
            .and_then(Value::as_str)
            .and_then(Provider::parse)
            .or(self.provider);
        self.speed = Speed::parse(u.get("speed").and_then(Value::as_str).unwrap_or(""));
        self.timing.inference_time_ms += int(u, "inference_time_ms");
        self.timing.tool_time_ms += int(u, "tool_time_ms");
    }

    /// The visit as a rollup record, when it reported usage.
    fn record(self, name: String) -> Option<StageRecord> {
        let priced = self.priced?;
        Some(StageRecord {
            stage_id: self.node_id,
            stage_name: name,
            provider: self.provider,
            model: self.model,
            speed: self.speed,
            tokens: priced.tokens,
            timing: self.timing,
            started_at: self.started_at,
            state: self.state.to_string(),
            cost: Some(priced.cost),
        })
    }
}

/// Reads stage events into visits. A visit starts at `stage.started` with `attempt` 1 and
/// ends at `stage.completed` or a final `stage.failed`; attempts in between (a
/// `stage.failed` with `will_retry`) are summed into it.
#[derive(Default)]
pub struct Visits {
    /// Open visits by (node id, parallel branch id).
    open: HashMap<(String, Option<String>), Visit>,
    /// Visits that reported usage, in the order they ended.
    done: Vec<Visit>,
}

impl Visits {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, e: &Event) {
        let Some(node) = &e.node_id else { return };
        let key = (node.clone(), e.parallel_branch_id.clone());
        let p = &e.properties;
        match e.event.as_str() {
            event_kind::STAGE_STARTED => {
                let first = p.get("attempt").and_then(Value::as_u64).unwrap_or(1) <= 1;
                match self.open.get_mut(&key) {
                    Some(v) if !first => v.state = "running",
                    _ => {
                        let v = Visit {
                            node_id: node.clone(),
                            started_at: e.ts.clone(),
                            state: "running",
                            priced: None,
                            provider: None,
                            model: String::new(),
                            speed: Speed::Standard,
                            timing: Timing::default(),
                        };
                        if let Some(old) = self.open.insert(key, v) {
                            self.finish(old);
                        }
                    }
                }
            }
            event_kind::STAGE_FAILED | event_kind::STAGE_COMPLETED => {
                let Some(mut v) = self.open.remove(&key) else {
                    return;
                };
                v.add_attempt(p);
                let retrying = e.event == event_kind::STAGE_FAILED
                    && p.get("will_retry").and_then(Value::as_bool) == Some(true);
                if retrying {
                    v.state = "retrying";
                    self.open.insert(key, v);
                    return;
                }
                v.state = match p.get("status").and_then(Value::as_str) {
                    _ if e.event == event_kind::STAGE_FAILED => "failed",
                    Some("succeeded") => "succeeded",
                    Some("partially_succeeded") => "partially_succeeded",
                    Some("skipped") => "skipped",
                    Some("failed") => "failed",
                    _ => "succeeded",
                };
                self.finish(v);
            }
            _ => {}
        }
    }

    fn finish(&mut self, v: Visit) {
        if v.priced.is_some() {
            self.done.push(v);
        }
    }

    /// The visits that reported usage, as rollup records. Visits still open keep their
    /// last state (`running` / `retrying`), or become `cancelled` when the run has ended.
    pub fn records(self, run_ended: bool, name_of: impl Fn(&str) -> String) -> Vec<StageRecord> {
        let Visits { open, mut done } = self;
        let mut open: Vec<Visit> = open.into_values().collect();
        open.sort_by(|a, b| a.started_at.cmp(&b.started_at));
        for mut v in open {
            if run_ended {
                v.state = "cancelled";
            }
            if v.priced.is_some() {
                done.push(v);
            }
        }
        done.into_iter()
            .filter_map(|v| {
                let name = name_of(&v.node_id);
                v.record(name)
            })
            .collect()
    }
}

/// Node id → label (the id when unlabelled) of a run's workflow source. Nodes of child
/// workflows (`manager/node`) are not in it and keep their id.
fn labels(source: &str) -> HashMap<String, String> {
    let Ok(loaded) = crate::workflow::load(source, &crate::workflow::NoFiles) else {
        return HashMap::new();
    };
    let wf = &loaded.workflow;
    wf.graph
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.to_string(), wf.label(i).to_string()))
        .collect()
}

/// `GET /api/v1/runs/{id}/usage`.
pub fn get(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let row = app.runs.row(ctx.param("id"))?;
    let mut visits = Visits::new();
    let mut since = 1;
    loop {
        let page = app
            .runs
            .store
            .events(&row.id, since, PAGE)
            .map_err(store_error)?;
        for e in &page {
            visits.add(e);
        }
        match page.last() {
            Some(last) if page.len() == PAGE => since = last.seq + 1,
            _ => break,
        }
    }
    let names = labels(&row.workflow.source);
    let records = visits.records(row.status.is_terminal(), |id| {
        names.get(id).cloned().unwrap_or_else(|| id.to_string())
    });
    let mut rollup = crate::llm::UsageRollup::new();
    for r in &records {
        rollup.add(r);
    }
    Ok(Reply::json(200, &rollup.to_json()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::EventDraft;
    use serde_json::json;

    fn usage(input: u64, usd_micros: i64) -> Value {
        json!({"tokens": {"input": input, "output": 10, "reasoning": 2, "cache_read": 0, "cache_write": 0},
               "cost": {"usd_micros": usd_micros, "source": "catalog"},
               "model": "claude-sonnet-4-6", "provider": "anthropic", "speed": "standard",
               "inference_time_ms": 30, "tool_time_ms": 4})
    }

    fn events(list: &[(&str, &str, Value)]) -> Vec<Event> {
        list.iter()
            .enumerate()
            .map(|(i, (kind, node, p))| {
                EventDraft::new(kind, p.clone()).node(node).into_event(
                    "R",
                    i as u64 + 2,
                    format!("E{i}"),
                    format!("t{i:02}"),
                )
            })
            .collect()
    }

    fn roll(evs: &[Event], ended: bool) -> Value {
        let mut v = Visits::new();
        for e in evs {
            v.add(e);
        }
        let mut r = crate::llm::UsageRollup::new();
        for rec in v.records(ended, |id| format!("Label {id}")) {
            r.add(&rec);
        }
        r.to_json()
    }

    #[test]
    fn attempts_of_a_visit_are_summed_and_visits_counted() {
        let evs = events(&[
            ("stage.started", "plan", json!({"attempt": 1})),
            (
                "stage.failed",
                "plan",
                json!({"will_retry": true, "duration_ms": 100, "usage": usage(100, 1_000)}),
            ),
            ("stage.started", "plan", json!({"attempt": 2})),
            (
                "stage.completed",
                "plan",
                json!({"status": "succeeded", "duration_ms": 50, "usage": usage(200, 2_000)}),
            ),
            ("stage.started", "build", json!({"attempt": 1})),
            (
                "stage.completed",
                "build",
                json!({"status": "succeeded", "duration_ms": 9}),
            ),
            ("stage.started", "plan", json!({"attempt": 1})),
            (
                "stage.failed",
                "plan",
                json!({"will_retry": false, "duration_ms": 5, "usage": usage(1, 3)}),
            ),
        ]);
        let j = roll(&evs, true);
        // The command stage has no usage and is left out.
        assert_eq!(j["stages"].as_array().map(Vec::len), Some(1), "{j}");
        let plan = &j["stages"][0];
        assert_eq!(plan["stage"], json!({"id": "plan", "name": "Label plan"}));
        assert_eq!(plan["usage"]["tokens"]["input"], 301);
        assert_eq!(plan["usage"]["cost"]["usd_micros"], 3_003);
        assert_eq!(plan["timing"]["wall_time_ms"], 155);
        assert_eq!(plan["timing"]["inference_time_ms"], 90);
        assert_eq!(plan["timing"]["active_time_ms"], 102);
        // State and start come from the latest visit.
        assert_eq!(plan["state"], "failed");
        assert_eq!(plan["started_at"], "t06");
        // Two visits used the model.
        assert_eq!(j["by_model"][0]["stages"], 2);
        assert_eq!(j["totals"]["usage"]["cost"]["usd_micros"], 3_003);
    }

    #[test]
    fn open_visits_keep_their_usage() {
        let evs = events(&[
            ("stage.started", "ask", json!({"attempt": 1})),
            (
                "stage.failed",
                "ask",
                json!({"will_retry": true, "duration_ms": 10, "usage": usage(7, 70)}),
            ),
        ]);
        assert_eq!(roll(&evs, false)["stages"][0]["state"], "retrying");
        assert_eq!(roll(&evs, true)["stages"][0]["state"], "cancelled");
        assert_eq!(roll(&evs, true)["totals"]["usage"]["tokens"]["input"], 7);
    }
}
