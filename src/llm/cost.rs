//! Pricing token usage from the catalog (api.md §5.2), the per-stage / per-model usage
//! rollup in the shape of SPEC §2.8, and the run size bucket. Pure arithmetic: must not do
//! I/O or know how usage was recorded.

use serde::Serialize;
use serde_json::{json, Value};

use super::catalog;
use super::provider::Provider;
use super::types::Usage;

/// Where a cost figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CostSource {
    /// Every part priced from the compiled-in catalog.
    Catalog,
    /// No price known (unknown model or a model without a price): `usd_micros` is 0.
    Unpriced,
    /// A sum in which some parts were priced and some were not.
    Partial,
}

impl CostSource {
    pub fn as_str(self) -> &'static str {
        match self {
            CostSource::Catalog => "catalog",
            CostSource::Unpriced => "unpriced",
            CostSource::Partial => "partial",
        }
    }

    /// The inverse of [`CostSource::as_str`]; `None` for anything else.
    pub fn parse(s: &str) -> Option<CostSource> {
        match s {
            "catalog" => Some(CostSource::Catalog),
            "unpriced" => Some(CostSource::Unpriced),
            "partial" => Some(CostSource::Partial),
            _ => None,
        }
    }

    fn combine(self, o: CostSource) -> CostSource {
        if self == o {
            self
        } else {
            CostSource::Partial
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Cost {
    pub usd_micros: i64,
    pub source: CostSource,
}

impl Cost {
    pub fn to_json(&self) -> Value {
        json!({"usd_micros": self.usd_micros, "source": self.source.as_str()})
    }
}

/// Billing speed (api.md §4): only Opus 4.6/4.7 have a `fast` price, 6× every rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Speed {
    #[default]
    Standard,
    Fast,
}

impl Speed {
    pub fn as_str(self) -> &'static str {
        match self {
            Speed::Standard => "standard",
            Speed::Fast => "fast",
        }
    }

    /// `fast` is fast; anything else is standard.
    pub fn parse(s: &str) -> Speed {
        if s == "fast" {
            Speed::Fast
        } else {
            Speed::Standard
        }
    }
}

/// USD per million tokens → integer micro-USD per million tokens (rounded).
fn micros_per_mtok(usd: f64) -> i64 {
    (usd * 1_000_000.0).round() as i64
}

fn part(tokens: u64, micros_per_mtok: i64) -> i64 {
    ((tokens as i128 * micros_per_mtok as i128) / 1_000_000) as i64
}

/// Prices one usage record. `input` is non-cached input (see [`Usage`]); cache reads use
/// the cached-input price (the input price when the catalog has none); cache writes are
/// Anthropic's 5-minute writes at 1.25× input; output and reasoning use the output price.
pub fn cost_of(model: &str, usage: &Usage, speed: Speed) -> Cost {
    let Some(price) = catalog::lookup(model).and_then(|m| m.price) else {
        return Cost {
            usd_micros: 0,
            source: CostSource::Unpriced,
        };
    };
    let fast =
        speed == Speed::Fast && matches!(model_id(model), "claude-opus-4-6" | "claude-opus-4-7");
    let mult = if fast { 6.0 } else { 1.0 };
    let input = micros_per_mtok(price.input * mult);
    let output = micros_per_mtok(price.output * mult);
    let cached = micros_per_mtok(price.cached_input.unwrap_or(price.input) * mult);
    let write = micros_per_mtok(price.input * 1.25 * mult);
    let usd_micros = part(usage.input, input)
        + part(usage.output + usage.reasoning, output)
        + part(usage.cache_read, cached)
        + part(usage.cache_write, write);
    Cost {
        usd_micros,
        source: CostSource::Catalog,
    }
}

fn model_id(model: &str) -> &str {
    catalog::lookup(model).map(|m| m.id).unwrap_or(model)
}

/// Usage with its cost (SPEC §2.8 `usage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PricedUsage {
    pub tokens: Usage,
    pub cost: Cost,
}

impl Default for PricedUsage {
    fn default() -> Self {
        Self {
            tokens: Usage::default(),
            cost: Cost {
                usd_micros: 0,
                source: CostSource::Unpriced,
            },
        }
    }
}

impl PricedUsage {
    pub fn new(model: &str, tokens: Usage, speed: Speed) -> Self {
        Self {
            tokens,
            cost: cost_of(model, &tokens, speed),
        }
    }

    /// Adds another priced record; an empty accumulator takes the other's source.
    pub fn add(&mut self, o: &PricedUsage) {
        let was_empty = self.tokens.is_zero() && self.cost.usd_micros == 0;
        self.tokens.add(&o.tokens);
        self.cost.usd_micros += o.cost.usd_micros;
        self.cost.source = if was_empty {
            o.cost.source
        } else {
            self.cost.source.combine(o.cost.source)
        };
    }

    pub fn to_json(&self) -> Value {
        let t = &self.tokens;
        json!({
            "tokens": {"input": t.input, "output": t.output, "reasoning": t.reasoning,
                       "cache_read": t.cache_read, "cache_write": t.cache_write},
            "cost": self.cost.to_json(),
        })
    }
}

/// Stage timing (SPEC §2.8 `timing`); `active_time_ms` is derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timing {
    pub wall_time_ms: u64,
    pub inference_time_ms: u64,
    pub tool_time_ms: u64,
}

impl Timing {
    pub fn add(&mut self, o: &Timing) {
        self.wall_time_ms += o.wall_time_ms;
        self.inference_time_ms += o.inference_time_ms;
        self.tool_time_ms += o.tool_time_ms;
    }

    pub fn to_json(&self) -> Value {
        json!({
            "wall_time_ms": self.wall_time_ms,
            "inference_time_ms": self.inference_time_ms,
            "tool_time_ms": self.tool_time_ms,
            "active_time_ms": self.inference_time_ms + self.tool_time_ms,
        })
    }
}

/// One stage visit's usage, as recorded by the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct StageRecord {
    pub stage_id: String,
    pub stage_name: String,
    pub provider: Option<Provider>,
    pub model: String,
    pub speed: Speed,
    pub tokens: Usage,
    pub timing: Timing,
    pub started_at: String,
    pub state: String,
    /// The cost recorded with the usage when it was spent; `None` prices `tokens` from
    /// the catalog now. Recorded costs are what the run was billed, so a later catalog
    /// change does not rewrite history.
    pub cost: Option<Cost>,
}

#[derive(Debug, Clone)]
struct StageRow {
    id: String,
    name: String,
    provider: String,
    model: String,
    speed: Speed,
    usage: PricedUsage,
    timing: Timing,
    started_at: String,
    state: String,
}

/// Sums usage per stage (visits of one stage summed; `started_at` and `state` from the
/// latest visit), per model, and in total — the body of `GET /runs/{id}/usage`.
#[derive(Debug, Clone, Default)]
pub struct UsageRollup {
    stages: Vec<StageRow>,
    /// (provider, model id, speed) → (stage visits with usage, usage).
    by_model: Vec<((String, String, Speed), u64, PricedUsage)>,
    totals: PricedUsage,
    timing: Timing,
}

impl UsageRollup {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, r: &StageRecord) {
        let model_id = model_id(&r.model).to_string();
        let provider = r
            .provider
            .map(|p| p.id().to_string())
            .or_else(|| catalog::lookup(&r.model).map(|m| m.provider.to_string()))
            .unwrap_or_default();
        let priced = match r.cost {
            Some(cost) => PricedUsage {
                tokens: r.tokens,
                cost,
            },
            None => PricedUsage::new(&r.model, r.tokens, r.speed),
        };
        match self.stages.iter_mut().find(|s| s.id == r.stage_id) {
            Some(row) => {
                row.usage.add(&priced);
                row.timing.add(&r.timing);
                row.started_at = r.started_at.clone();
                row.state = r.state.clone();
                if !r.model.is_empty() {
                    row.model = model_id.clone();
                    row.provider = provider.clone();
                    row.speed = r.speed;
                }
            }
            None => self.stages.push(StageRow {
                id: r.stage_id.clone(),
                name: r.stage_name.clone(),
                provider: provider.clone(),
                model: model_id.clone(),
                speed: r.speed,
                usage: priced,
                timing: r.timing,
                started_at: r.started_at.clone(),
                state: r.state.clone(),
            }),
        }
        self.totals.add(&priced);
        self.timing.add(&r.timing);
        if !r.tokens.is_zero() {
            let key = (provider, model_id, r.speed);
            match self.by_model.iter_mut().find(|(k, _, _)| *k == key) {
                Some((_, n, u)) => {
                    *n += 1;
                    u.add(&priced);
                }
                None => self.by_model.push((key, 1, priced)),
            }
        }
    }

    pub fn total(&self) -> PricedUsage {
        self.totals
    }

    /// The SPEC §2.8 document: `{stages, totals, by_model}`.
    pub fn to_json(&self) -> Value {
        let model =
            |p: &str, m: &str, s: Speed| json!({"provider": p, "model_id": m, "speed": s.as_str()});
        json!({
            "stages": self.stages.iter().map(|s| json!({
                "stage": {"id": s.id, "name": s.name},
                "model": model(&s.provider, &s.model, s.speed),
                "usage": s.usage.to_json(),
                "timing": s.timing.to_json(),
                "started_at": s.started_at,
                "state": s.state,
            })).collect::<Vec<_>>(),
            "totals": {"timing": self.timing.to_json(), "usage": self.totals.to_json()},
            "by_model": self.by_model.iter().map(|((p, m, s), n, u)| json!({
                "model": model(p, m, *s), "stages": n, "usage": u.to_json(),
            })).collect::<Vec<_>>(),
        })
    }
}

/// Size thresholds in micro-USD (upper bounds, exclusive): XS < $0.10 ≤ S < $1 ≤ M < $5
/// ≤ L < $25 ≤ XL.
pub const SIZE_THRESHOLDS: [(i64, &str); 4] = [
    (100_000, "XS"),
    (1_000_000, "S"),
    (5_000_000, "M"),
    (25_000_000, "L"),
];

/// The run size bucket (SPEC §2.3 `RunSize`) from the billed total.
pub fn size_bucket(total_usd_micros: i64) -> &'static str {
    SIZE_THRESHOLDS
        .iter()
        .find(|(limit, _)| total_usd_micros < *limit)
        .map(|(_, b)| *b)
        .unwrap_or("XL")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_cost_math() {
        // sonnet: 3 / 15 / 0.3 per MTok.
        let u = Usage {
            input: 1_000_000,
            output: 100_000,
            reasoning: 100_000,
            cache_read: 1_000_000,
            cache_write: 1_000_000,
        };
        let c = cost_of("sonnet", &u, Speed::Standard);
        // 3.00 + 0.2M*15 = 3.00 + 0.30 + 3.75
        assert_eq!(c.usd_micros, 3_000_000 + 3_000_000 + 300_000 + 3_750_000);
        assert_eq!(c.source, CostSource::Catalog);
        let fast = cost_of(
            "opus",
            &Usage {
                input: 1_000_000,
                ..Default::default()
            },
            Speed::Fast,
        );
        assert_eq!(fast.usd_micros, 30_000_000);
    }

    #[test]
    fn unpriced_models() {
        let u = Usage {
            input: 10,
            ..Default::default()
        };
        assert_eq!(
            cost_of("codex-spark", &u, Speed::Standard).source,
            CostSource::Unpriced
        );
        assert_eq!(cost_of("nope", &u, Speed::Standard).usd_micros, 0);
    }

    #[test]
    fn integer_division_per_part() {
        // gpt-5-mini input 0.25/MTok: 3 tokens → 0.75 micros → 0.
        let u = Usage {
            input: 3,
            ..Default::default()
        };
        assert_eq!(cost_of("gpt-5-mini", &u, Speed::Standard).usd_micros, 0);
    }

    #[test]
    fn buckets() {
        assert_eq!(size_bucket(0), "XS");
        assert_eq!(size_bucket(99_999), "XS");
        assert_eq!(size_bucket(100_000), "S");
        assert_eq!(size_bucket(4_999_999), "M");
        assert_eq!(size_bucket(5_000_000), "L");
        assert_eq!(size_bucket(25_000_000), "XL");
    }

    #[test]
    fn recorded_cost_wins_over_the_catalog() {
        let mut r = UsageRollup::new();
        let tokens = Usage {
            input: 1_000_000,
            ..Default::default()
        };
        r.add(&StageRecord {
            stage_id: "a".into(),
            stage_name: "a".into(),
            provider: None,
            model: "sonnet".into(),
            speed: Speed::Standard,
            tokens,
            timing: Timing::default(),
            started_at: String::new(),
            state: "succeeded".into(),
            cost: Some(Cost {
                usd_micros: 123,
                source: CostSource::Catalog,
            }),
        });
        assert_eq!(r.total().cost.usd_micros, 123);
        assert_eq!(CostSource::parse("partial"), Some(CostSource::Partial));
        assert_eq!(CostSource::parse("nope"), None);
        assert_eq!(Speed::parse("fast"), Speed::Fast);
        assert_eq!(Speed::parse(""), Speed::Standard);
    }

    #[test]
    fn rollup_groups_stages_and_models() {
        let mut r = UsageRollup::new();
        let rec = |id: &str, model: &str, input: u64, state: &str| StageRecord {
            stage_id: id.into(),
            stage_name: id.into(),
            provider: None,
            model: model.into(),
            speed: Speed::Standard,
            tokens: Usage {
                input,
                output: 10,
                ..Default::default()
            },
            timing: Timing {
                wall_time_ms: 100,
                inference_time_ms: 60,
                tool_time_ms: 20,
            },
            started_at: format!("t-{state}"),
            state: state.into(),
            cost: None,
        };
        r.add(&rec("plan", "sonnet", 1000, "failed"));
        r.add(&rec("plan", "sonnet", 1000, "succeeded"));
        r.add(&rec("code", "gpt-5.2", 500, "succeeded"));
        r.add(&rec("probe", "mystery-model", 5, "succeeded"));
        let j = r.to_json();
        assert_eq!(j["stages"].as_array().map(Vec::len), Some(3));
        assert_eq!(j["stages"][0]["usage"]["tokens"]["input"], 2000);
        assert_eq!(j["stages"][0]["state"], "succeeded");
        assert_eq!(j["stages"][0]["model"]["model_id"], "claude-sonnet-4-6");
        assert_eq!(j["stages"][0]["model"]["provider"], "anthropic");
        assert_eq!(j["stages"][0]["timing"]["active_time_ms"], 160);
        assert_eq!(j["by_model"][0]["stages"], 2);
        assert_eq!(j["totals"]["usage"]["tokens"]["input"], 2505);
        assert_eq!(j["totals"]["usage"]["cost"]["source"], "partial");
        assert_eq!(j["stages"][2]["usage"]["cost"]["source"], "unpriced");
    }
}
