//! The compiled-in model catalog (engine.md 13.5): ids, aliases, provider, limits, prices.
//! Owns the table and the exact (case-sensitive) lookup by id or alias. Must not price
//! usage (`llm::cost`), resolve credentials or endpoints (`llm::provider`), or do I/O.

/// Prices in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    pub cached_input: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Model {
    pub id: &'static str,
    pub aliases: &'static [&'static str],
    pub provider: &'static str,
    pub context_window: u64,
    pub max_output: u64,
    pub price: Option<Price>,
    /// The provider's default model.
    pub default: bool,
    pub reasoning: bool,
}

const fn p(input: f64, output: f64, cached: f64) -> Option<Price> {
    Some(Price {
        input,
        output,
        cached_input: if cached > 0.0 { Some(cached) } else { None },
    })
}

macro_rules! m {
    ($id:expr, [$($a:expr),*], $prov:expr, $ctx:expr, $out:expr, $price:expr, $def:expr, $reason:expr) => {
        Model { id: $id, aliases: &[$($a),*], provider: $prov, context_window: $ctx, max_output: $out, price: $price, default: $def, reasoning: $reason }
    };
}

pub const MODELS: &[Model] = &[
    m!(
        "claude-opus-4-7",
        ["opus", "claude-opus"],
        "anthropic",
        1_000_000,
        128_000,
        p(5.0, 25.0, 0.5),
        false,
        true
    ),
    m!(
        "claude-opus-4-6",
        [],
        "anthropic",
        1_000_000,
        128_000,
        p(5.0, 25.0, 0.5),
        false,
        true
    ),
    m!(
        "claude-sonnet-4-6",
        ["sonnet", "claude-sonnet"],
        "anthropic",
        200_000,
        64_000,
        p(3.0, 15.0, 0.3),
        true,
        true
    ),
    m!(
        "claude-sonnet-4-5",
        [],
        "anthropic",
        200_000,
        64_000,
        p(3.0, 15.0, 0.3),
        false,
        true
    ),
    m!(
        "claude-haiku-4-5",
        ["haiku", "claude-haiku"],
        "anthropic",
        200_000,
        8_192,
        p(0.8, 4.0, 0.08),
        false,
        false
    ),
    m!(
        "gpt-5.4",
        ["gpt54", "gpt-54"],
        "openai",
        1_047_576,
        128_000,
        p(2.5, 15.0, 0.25),
        true,
        true
    ),
    m!(
        "gpt-5.5",
        ["gpt55", "gpt-55"],
        "openai",
        1_050_000,
        128_000,
        p(5.0, 30.0, 0.5),
        false,
        true
    ),
    m!(
        "gpt-5.5-pro",
        ["gpt55-pro", "gpt-55-pro"],
        "openai",
        1_050_000,
        128_000,
        p(30.0, 180.0, 3.0),
        false,
        true
    ),
    m!(
        "gpt-5.4-pro",
        ["gpt54-pro", "gpt-54-pro"],
        "openai",
        1_047_576,
        128_000,
        p(30.0, 180.0, 3.0),
        false,
        true
    ),
    m!(
        "gpt-5.4-mini",
        ["gpt54-mini", "gpt-54-mini"],
        "openai",
        400_000,
        128_000,
        p(0.75, 4.5, 0.075),
        false,
        true
    ),
    m!(
        "gpt-5.2",
        ["gpt5"],
        "openai",
        1_047_576,
        128_000,
        p(1.75, 14.0, 0.175),
        false,
        true
    ),
    m!(
        "gpt-5.2-codex",
        [],
        "openai",
        1_047_576,
        128_000,
        p(1.75, 14.0, 0.175),
        false,
        true
    ),
    m!(
        "gpt-5.3-codex",
        ["codex"],
        "openai",
        1_047_576,
        128_000,
        p(1.75, 14.0, 0.175),
        false,
        true
    ),
    m!(
        "gpt-5.3-codex-spark",
        ["codex-spark"],
        "openai",
        131_072,
        128_000,
        None,
        false,
        true
    ),
    m!(
        "gpt-5-mini",
        ["gpt5-mini"],
        "openai",
        1_047_576,
        128_000,
        p(0.25, 2.0, 0.025),
        false,
        true
    ),
    m!(
        "gemini-3.1-pro-preview",
        ["gemini-pro"],
        "gemini",
        1_048_576,
        65_536,
        p(2.0, 12.0, 0.5),
        true,
        true
    ),
    m!(
        "gemini-3.1-pro-preview-customtools",
        ["gemini-customtools"],
        "gemini",
        1_048_576,
        65_536,
        p(2.0, 12.0, 0.5),
        false,
        true
    ),
    m!(
        "gemini-3-flash-preview",
        ["gemini-flash"],
        "gemini",
        1_048_576,
        65_536,
        p(0.5, 3.0, 0.125),
        false,
        true
    ),
    m!(
        "gemini-3.1-flash-lite-preview",
        ["gemini-flash-lite"],
        "gemini",
        1_048_576,
        65_536,
        p(0.25, 1.5, 0.0625),
        false,
        true
    ),
    m!(
        "kimi-k2.5",
        ["kimi"],
        "kimi",
        262_144,
        16_000,
        p(0.6, 3.0, 0.0),
        true,
        false
    ),
    m!(
        "glm-4.7",
        ["glm", "glm4"],
        "zai",
        202_752,
        16_384,
        p(0.6, 2.2, 0.0),
        true,
        false
    ),
    m!(
        "minimax-m2.5",
        ["minimax"],
        "minimax",
        196_608,
        16_384,
        p(0.3, 1.2, 0.0),
        true,
        false
    ),
    m!(
        "mercury-2",
        ["mercury"],
        "inception",
        131_072,
        50_000,
        p(0.25, 0.75, 0.0),
        true,
        true
    ),
];

/// Exact, case-sensitive lookup by id or alias.
pub fn lookup(name: &str) -> Option<&'static Model> {
    MODELS
        .iter()
        .find(|m| m.id == name || m.aliases.contains(&name))
}

pub const DEFAULT_MODEL: &str = "claude-sonnet-4-6";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_by_id_and_alias() {
        assert_eq!(lookup("sonnet").map(|m| m.id), Some("claude-sonnet-4-6"));
        assert_eq!(lookup("gpt-5.2").map(|m| m.provider), Some("openai"));
        assert!(lookup("Sonnet").is_none());
        assert!(lookup(DEFAULT_MODEL).is_some());
    }
}
