//! Whether Ask can answer questions about a run now (`Run.ask_svc`, SPEC 2.3 `AskSvc`), by
//! the rules of opgroups 4.2 in order: no sandbox record → `no_sandbox`; a sandbox that is
//! not ready → `sandbox_not_ready`; no usable LLM provider → `llm_unconfigured`; else
//! available, with the model a session uses when it names none.
//!
//! Owns: the rules and the default model. Must not touch: the store, HTTP or the vault's
//! file (callers hand in [`Credentials`]).

use crate::llm::{Credentials, Provider, ProviderConfig};
use crate::settings::Settings;
use crate::store::{RunRow, SandboxKind};
use serde::Serialize;

/// Why Ask is unavailable on a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unavailable {
    NoSandbox,
    SandboxNotReady,
    LlmUnconfigured,
}

impl Unavailable {
    pub fn code(self) -> &'static str {
        match self {
            Unavailable::NoSandbox => "no_sandbox",
            Unavailable::SandboxNotReady => "sandbox_not_ready",
            Unavailable::LlmUnconfigured => "llm_unconfigured",
        }
    }

    /// The reason in words (error details, the run page).
    pub fn words(self) -> &'static str {
        match self {
            Unavailable::NoSandbox => "the run has no sandbox to inspect",
            Unavailable::SandboxNotReady => "the run's sandbox is not ready yet",
            Unavailable::LlmUnconfigured => {
                "no LLM provider is configured (store a provider key in the vault)"
            }
        }
    }
}

/// `AskSvc` on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Readiness {
    pub available: bool,
    pub unavailable_reason: Option<Unavailable>,
    pub default_model: Option<String>,
}

/// How the run's sandbox stands for Ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxFor {
    /// Ready: file tools read the live workspace.
    Live,
    /// Removed by retention: answers come from stored events and the diff only.
    Gone,
}

/// The sandbox side of the rules: `Ok` when Ask may run (live or gone), else the reason.
pub fn sandbox_for(row: &RunRow) -> Result<SandboxFor, Unavailable> {
    if !row
        .created_meta
        .get("sandbox")
        .is_some_and(|s| s.is_object())
    {
        return Err(Unavailable::NoSandbox);
    }
    match row.sandbox.kind {
        SandboxKind::Ready if row.sandbox.instance.is_some() => Ok(SandboxFor::Live),
        // Removed by retention: nothing will make it ready again, and Ask never restarts it;
        // the stored events and diff still answer (decisions.md "Ask").
        _ if row.sandbox.removed.is_some() => Ok(SandboxFor::Gone),
        _ => Err(Unavailable::SandboxNotReady),
    }
}

/// True when `provider` has a key and an endpoint.
pub fn usable(provider: Provider, settings: &Settings, creds: &dyn Credentials) -> bool {
    let base = settings
        .llm
        .providers
        .get(provider.id())
        .and_then(|p| p.base_url.as_deref());
    ProviderConfig::resolve(provider, base, creds).is_ok()
}

/// The model a session uses when it names none: `[run] model` when its provider is usable,
/// else the catalog default of the first usable provider (Anthropic, OpenAI, Gemini, then
/// the others). `None`: no usable provider has a model to offer.
pub fn default_model(settings: &Settings, creds: &dyn Credentials) -> Option<String> {
    default_choice(settings, creds).map(|(m, _)| m)
}

/// [`default_model`] with its provider.
pub fn default_choice(settings: &Settings, creds: &dyn Credentials) -> Option<(String, Provider)> {
    if let Some(m) = &settings.run.model {
        let explicit = m.provider.as_deref().and_then(Provider::parse);
        if let Ok(p) = crate::llm::provider::infer_provider(&m.name, explicit) {
            if usable(p, settings, creds) {
                return Some((m.name.clone(), p));
            }
        }
    }
    Provider::ALL
        .into_iter()
        .filter(|p| usable(*p, settings, creds))
        .find_map(|p| p.default_model().map(|m| (m.to_string(), p)))
}

/// `Run.ask_svc` for `row`.
pub fn readiness(row: &RunRow, settings: &Settings, creds: &dyn Credentials) -> Readiness {
    let default_model = default_model(settings, creds);
    let reason = match sandbox_for(row) {
        Err(r) => Some(r),
        Ok(_) if default_model.is_none() => Some(Unavailable::LlmUnconfigured),
        Ok(_) => None,
    };
    Readiness {
        available: reason.is_none(),
        unavailable_reason: reason,
        default_model,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::StaticCredentials;
    use serde_json::json;

    fn row(sandbox: bool) -> RunRow {
        let ev: crate::store::Event = serde_json::from_value(json!({
            "seq": 1, "id": "E", "ts": "2026-01-01T00:00:00.000Z", "run_id": "R",
            "event": "run.created",
            "properties": if sandbox { json!({"sandbox": {"provider": "local"}}) } else { json!({}) }
        }))
        .unwrap();
        RunRow::from_created(&ev)
    }

    fn ready(mut r: RunRow) -> RunRow {
        r.sandbox.kind = SandboxKind::Ready;
        r.sandbox.instance = Some(json!({"provider": "local"}));
        r
    }

    fn reason(r: &Readiness) -> Option<&'static str> {
        r.unavailable_reason.map(Unavailable::code)
    }

    #[test]
    fn rules_apply_in_order() {
        let s = Settings::default();
        let none = StaticCredentials::new();
        let key = StaticCredentials::new().with("ANTHROPIC_API_KEY", "k");

        // No sandbox wins over everything, even with no provider.
        assert_eq!(
            reason(&readiness(&row(false), &s, &none)),
            Some("no_sandbox")
        );
        // A planned sandbox is not ready, whether or not a provider is configured.
        assert_eq!(
            reason(&readiness(&row(true), &s, &none)),
            Some("sandbox_not_ready")
        );
        assert_eq!(
            reason(&readiness(&row(true), &s, &key)),
            Some("sandbox_not_ready")
        );
        // Ready sandbox, no key: llm_unconfigured.
        let r = readiness(&ready(row(true)), &s, &none);
        assert_eq!(reason(&r), Some("llm_unconfigured"));
        assert!(!r.available);
        assert_eq!(r.default_model, None);
        // Ready with a key: available with the provider's default model.
        let r = readiness(&ready(row(true)), &s, &key);
        assert!(r.available);
        assert_eq!(r.unavailable_reason, None);
        assert_eq!(
            r.default_model.as_deref(),
            Provider::Anthropic.default_model()
        );
        // A sandbox retention removed: Ask answers from stored events.
        let mut gone = row(true);
        gone.sandbox.removed = Some(json!({"reason": "retention"}));
        assert!(readiness(&gone, &s, &key).available);
        // A failed sandbox is not ready.
        let mut failed = row(true);
        failed.sandbox.kind = SandboxKind::Failed;
        assert_eq!(
            reason(&readiness(&failed, &s, &key)),
            Some("sandbox_not_ready")
        );
    }

    #[test]
    fn default_model_prefers_the_run_setting_when_its_provider_is_usable() {
        let mut s = Settings::default();
        s.run.model = Some(crate::settings::ModelDefault {
            provider: None,
            name: "gpt-5.4".into(),
        });
        let anthropic = StaticCredentials::new().with("ANTHROPIC_API_KEY", "k");
        // [run] model names an OpenAI model but only Anthropic has a key.
        assert_eq!(
            default_model(&s, &anthropic).as_deref(),
            Provider::Anthropic.default_model()
        );
        let openai = anthropic.with("OPENAI_API_KEY", "k");
        assert_eq!(default_model(&s, &openai).as_deref(), Some("gpt-5.4"));
        // An openai_compatible key without a base URL is not usable.
        let compat = StaticCredentials::new().with("OPENAI_COMPATIBLE_API_KEY", "k");
        assert_eq!(default_model(&Settings::default(), &compat), None);
    }
}
