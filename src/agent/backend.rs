//! The engine's real LLM backend: an [`LlmBackend`] over [`StageBackend`] and an
//! [`LlmClient`] whose keys come from the state directory's secret vault and whose endpoints
//! come from `settings.toml` (`[llm.providers.<name>] base_url`, else the provider default).
//! Used by `svc run`, `svc resume` and the server's executor. Maps stage requests, replies,
//! `agent.*` events and errors between the engine and the agent layer (streamed text is
//! coalesced into `agent.message.delta` events by `Deltas`); `backend=acp` agent
//! stages go to the ACP client ([`super::acp::run_stage`]) instead. [`client_from_settings`]
//! is the one place a provider client is built from settings and credentials.
//! Must not read the process environment for keys, validate structured output, or route.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::stage::StageBackend;
use super::{AgentEvent, Steering};
use crate::base::cancel::CancelToken;
use crate::base::event_kind;
use crate::engine::services::{
    LlmBackend, LlmError, LlmEvents, LlmRequest, LlmResponse, LlmStop, LlmUsage,
};
use crate::llm::{Credentials, LlmClient, Provider};
use crate::settings::vault::Vault;
use crate::settings::{ModelDefault, Settings, SettingsError, SETTINGS_FILE};

/// Why the backend could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("{0}")]
    Settings(#[from] SettingsError),
    #[error("settings.toml: unknown LLM provider `{0}` in [llm.providers]")]
    UnknownProvider(String),
}

/// The provider client every caller shares (stages, `POST /providers/test`): keys from
/// `creds`, endpoints from `[llm.providers.<name>] base_url`, else the provider default.
pub fn client_from_settings(
    settings: &Settings,
    creds: Arc<dyn Credentials>,
) -> Result<LlmClient, BackendError> {
    let mut client = LlmClient::new(creds);
    for (name, p) in &settings.llm.providers {
        let provider =
            Provider::parse(name).ok_or_else(|| BackendError::UnknownProvider(name.clone()))?;
        if let Some(url) = p.base_url.as_deref() {
            client = client.with_base_url(provider, url);
        }
    }
    Ok(client)
}

fn llm_stop(stop: super::AgentStop) -> LlmStop {
    match stop {
        super::AgentStop::Completed => LlmStop::Completed,
        super::AgentStop::TurnLimit | super::AgentStop::TokenBudget => LlmStop::TurnLimit,
        super::AgentStop::MaxTokens => LlmStop::MaxTokens,
        super::AgentStop::UsdBudget => LlmStop::BudgetSpent,
    }
}

/// A delta event is recorded once this much streamed text is pending...
const DELTA_BYTES: usize = 2048;
/// ...or when a fragment arrives this long after the last delta event.
const DELTA_INTERVAL: Duration = Duration::from_millis(200);

/// Coalesces streamed text fragments into `agent.message.delta` events: one event per
/// fragment would flood the store, none would leave live viewers without text until the
/// turn ends. The first fragment is recorded at once; later ones when [`DELTA_BYTES`] are
/// pending or [`DELTA_INTERVAL`] has passed since the last delta event; whatever is pending
/// is recorded before any other event (so before `agent.message`) and when the call ends.
/// The deltas of a turn concatenate to its text.
#[derive(Debug, Default)]
struct Deltas {
    pending: String,
    last: Option<Instant>,
}

impl Deltas {
    /// Adds a fragment; returns the text of a delta event when one is due.
    fn push(&mut self, text: &str, now: Instant) -> Option<String> {
        self.pending.push_str(text);
        let due = self.pending.len() >= DELTA_BYTES
            || self
                .last
                .is_none_or(|t| now.saturating_duration_since(t) >= DELTA_INTERVAL);
        if due {
            self.flush(now)
        } else {
            None
        }
    }

    /// Everything pending, if anything is.
    fn flush(&mut self, now: Instant) -> Option<String> {
        if self.pending.is_empty() {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.pending))
    }

    /// Forwards an agent event to `events`, coalescing text deltas.
    fn forward(&mut self, events: &mut dyn FnMut(&str, serde_json::Value), ev: AgentEvent) {
        let now = Instant::now();
        let due = match &ev {
            AgentEvent::TextDelta { text } => self.push(text, now),
            _ => self.flush(now),
        };
        if let Some(text) = due {
            let d = AgentEvent::TextDelta { text };
            events(d.kind(), d.properties());
        }
        if !matches!(ev, AgentEvent::TextDelta { .. }) {
            events(ev.kind(), ev.properties());
        }
    }

    /// Records whatever is pending (the call ended).
    fn finish(&mut self, events: &mut dyn FnMut(&str, serde_json::Value)) {
        if let Some(text) = self.flush(Instant::now()) {
            let d = AgentEvent::TextDelta { text };
            events(d.kind(), d.properties());
        }
    }
}

/// Agent and prompt stages against real providers.
pub struct ProviderBackend {
    stage: StageBackend,
    /// `[run] model` of the settings: used when a node names no model.
    default_model: Option<ModelDefault>,
}

impl ProviderBackend {
    /// The backend of a state directory: keys from its vault, endpoints from its
    /// `settings.toml` (absent file = defaults).
    pub fn from_state_dir(dir: &Path) -> Result<ProviderBackend, BackendError> {
        let path = dir.join(SETTINGS_FILE);
        let settings = if path.exists() {
            Settings::load(&path)?
        } else {
            Settings::default()
        };
        ProviderBackend::new(&settings, Arc::new(Vault::in_state_dir(dir)))
    }

    /// A backend over explicit settings and credentials.
    pub fn new(
        settings: &Settings,
        creds: Arc<dyn Credentials>,
    ) -> Result<ProviderBackend, BackendError> {
        let client = client_from_settings(settings, Arc::clone(&creds))?;
        Ok(ProviderBackend {
            stage: StageBackend::new(Arc::new(client), creds),
            default_model: settings.run.model.clone(),
        })
    }

    /// Uses a steering queue the server pushes `/steer` guidance into.
    pub fn with_steering(mut self, s: Steering) -> Self {
        self.stage = self.stage.with_steering(s);
        self
    }

    /// Hides secret values in everything sent to models and ACP agents.
    pub fn with_redactor(mut self, r: Arc<dyn crate::base::redact::Redact>) -> Self {
        self.stage = self.stage.with_redactor(r);
        self
    }
}

impl LlmBackend for ProviderBackend {
    fn complete(
        &self,
        req: &LlmRequest,
        cancel: &CancelToken,
        events: LlmEvents<'_>,
    ) -> Result<LlmResponse, LlmError> {
        if let Some(launch) = &req.acp {
            return self.complete_acp(req, launch, cancel, events);
        }
        let (model, provider) = match (&req.model, &self.default_model) {
            (None, Some(d)) => (
                Some(d.name.clone()),
                req.provider.clone().or_else(|| d.provider.clone()),
            ),
            _ => (req.model.clone(), req.provider.clone()),
        };
        let stage_req = LlmRequest {
            model,
            provider,
            ..req.clone()
        };
        let mut deltas = Deltas::default();
        let result = self.stage.complete(&stage_req, cancel, &mut |ev| {
            deltas.forward(&mut *events, ev)
        });
        deltas.finish(events);
        let reply = result.map_err(|e| match e.not_configured {
                Some(p) => LlmError {
                    message: format!(
                        "no LLM provider is configured for stage `{}`: {}; store its key with `svc secrets set {} VALUE` or use --dry-run to simulate LLM stages",
                        req.node_id,
                        e.message,
                        p.key_names().first().copied().unwrap_or("KEY_NAME"),
                    ),
                    retryable: false,
                },
                None => LlmError {
                    message: e.message,
                    retryable: e.retryable,
                },
            })?;
        Ok(LlmResponse {
            text: reply.text,
            stop: llm_stop(reply.stop),
            simulated: false,
            usage: Some(LlmUsage {
                provider: reply.provider.id().to_string(),
                model: reply.model,
                tokens: reply.usage,
                cost: reply.cost,
                files_touched: reply.files_touched,
                inference_time: reply.inference_time,
                tool_time: reply.tool_time,
            }),
        })
    }

    fn finish(&self, node_id: &str) {
        self.stage.finish(node_id);
    }
}

impl ProviderBackend {
    /// An MCP server for an ACP agent: its `env` or `headers` with secrets expanded.
    fn acp_mcp_server(
        &self,
        def: &crate::mcp::ServerDef,
    ) -> Result<super::acp::AcpMcpServer, String> {
        let lookup = |n: &str| self.stage.secret(n);
        let raw = match &def.transport {
            crate::mcp::Transport::Stdio { env, .. } => env,
            crate::mcp::Transport::Http { headers, .. } => headers,
        };
        let mut values = Vec::with_capacity(raw.len());
        for (k, v) in raw {
            let value =
                crate::mcp::spec::expand_secrets(v, &lookup).map_err(|e| format!("{k}: {e}"))?;
            values.push((k.clone(), value));
        }
        Ok(super::acp::AcpMcpServer {
            def: def.clone(),
            values,
        })
    }

    /// A `backend=acp` agent stage: the external agent runs in the stage's work directory;
    /// no provider, key or model is involved. Usage reports provider `acp`, the agent's
    /// name as the model, no tokens and an unpriced cost (the agent does not tell), plus the
    /// files it wrote through the client and the time the stage took.
    fn complete_acp(
        &self,
        req: &LlmRequest,
        launch: &crate::workflow::acp::AcpLaunch,
        cancel: &CancelToken,
        events: LlmEvents<'_>,
    ) -> Result<LlmResponse, LlmError> {
        let sandbox = crate::sandbox::Sandbox::new(&req.workdir)
            .map_err(|e| LlmError {
                message: format!("stage `{}`: {e}", req.node_id),
                retryable: false,
            })?
            .with_isolation(req.isolation.clone())
            .with_env(req.env.clone());
        let mut mcp_servers = Vec::with_capacity(req.mcp_servers.len());
        for def in &req.mcp_servers {
            match self.acp_mcp_server(def) {
                Ok(s) => mcp_servers.push(s),
                Err(error) => {
                    let ev = AgentEvent::McpFailed {
                        server: def.id.clone(),
                        error: error.clone(),
                        required: def.required,
                        transient: false,
                    };
                    events(ev.kind(), ev.properties());
                    if def.required {
                        return Err(LlmError {
                            message: format!(
                                "stage `{}`: the required MCP server `{}` failed: {error}",
                                req.node_id, def.id
                            ),
                            retryable: false,
                        });
                    }
                }
            }
        }
        let config = super::acp::AcpConfig {
            env: launch.env.clone(),
            mcp_servers,
            ..super::acp::AcpConfig::new(&launch.command)
        };
        let started = std::time::Instant::now();
        let prompt = self.stage.redactor().redact(&req.prompt).into_owned();
        events(
            event_kind::STAGE_PROMPT,
            serde_json::json!({"text": prompt, "provider": "acp", "model": launch.command,
                               "continued": false}),
        );
        let mut deltas = Deltas::default();
        let result = super::acp::run_stage(
            config,
            sandbox,
            &prompt,
            self.stage.steering(),
            cancel,
            &mut |ev| deltas.forward(&mut *events, ev),
        );
        deltas.finish(events);
        let out = result.map_err(|e| LlmError {
            message: format!("stage `{}`: {e}", req.node_id),
            retryable: e.failure_class() == "transient_infra",
        })?;
        let stop = match out.stop_reason.as_str() {
            "max_turn_requests" => LlmStop::TurnLimit,
            "max_tokens" => LlmStop::MaxTokens,
            _ => LlmStop::Completed,
        };
        Ok(LlmResponse {
            text: out.text,
            stop,
            simulated: false,
            usage: Some(LlmUsage {
                provider: "acp".into(),
                model: out.agent_name.unwrap_or_default(),
                tokens: crate::llm::Usage::default(),
                cost: crate::llm::Cost {
                    usd_micros: 0,
                    source: crate::llm::CostSource::Unpriced,
                },
                files_touched: out.files_touched,
                inference_time: started.elapsed(),
                tool_time: std::time::Duration::ZERO,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_are_coalesced_by_size_and_time_and_concatenate_to_the_text() {
        let t0 = Instant::now();
        let mut d = Deltas::default();
        // The first fragment shows at once; the next ones wait.
        assert_eq!(d.push("Hel", t0).as_deref(), Some("Hel"));
        assert_eq!(d.push("lo ", t0 + Duration::from_millis(10)), None);
        assert_eq!(d.push("wor", t0 + Duration::from_millis(20)), None);
        // 200 ms after the last delta event, the pending text goes out.
        assert_eq!(
            d.push("ld", t0 + DELTA_INTERVAL).as_deref(),
            Some("lo world")
        );
        // 2 KiB pending goes out at once.
        let big = "x".repeat(DELTA_BYTES);
        let at = t0 + DELTA_INTERVAL + Duration::from_millis(1);
        assert_eq!(d.push(&big, at).map(|t| t.len()), Some(DELTA_BYTES));
        assert_eq!(d.push("tail", at), None);
        assert_eq!(d.flush(at).as_deref(), Some("tail"));
        assert_eq!(d.flush(at), None);
    }

    #[test]
    fn pending_text_is_recorded_before_the_next_event() {
        let mut d = Deltas::default();
        let mut seen: Vec<(String, serde_json::Value)> = Vec::new();
        let mut sink = |k: &str, p: serde_json::Value| seen.push((k.to_string(), p));
        for t in ["a", "b", "c"] {
            d.forward(&mut sink, AgentEvent::TextDelta { text: t.into() });
        }
        d.forward(
            &mut sink,
            AgentEvent::LoopDetected {
                pattern_length: 1,
                repeats: 3,
            },
        );
        d.finish(&mut sink);
        let kinds: Vec<&str> = seen.iter().map(|(k, _)| k.as_str()).collect();
        let (last, before) = kinds.split_last().unwrap_or((&"", &[]));
        assert_eq!(*last, "agent.loop.detected", "{kinds:?}");
        assert!(
            before.iter().all(|k| *k == "agent.message.delta"),
            "{kinds:?}"
        );
        let text: String = seen
            .iter()
            .filter(|(k, _)| k == "agent.message.delta")
            .filter_map(|(_, p)| p["text"].as_str().map(String::from))
            .collect();
        assert_eq!(text, "abc");
    }
}
