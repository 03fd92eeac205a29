//! The Ask sessions service: creating sessions on a run, reading them back from the run's
//! event log, and running turns. One turn per session at a time (the active-turn map); each
//! turn runs on its own thread and appends its events to the run's log as they happen, so
//! every reader (the turn's own stream, attach, the events route) sees them only after
//! their commit. Interrupt cancels the turn's token, which the agent loop checks between
//! stream chunks and tool calls.
//!
//! Budget: a turn makes at most [`MAX_MODEL_CALLS`] model calls and spends at most
//! [`TOKEN_BUDGET`] input + output tokens; each model call's usage is recorded on its
//! `run.session.assistant_message` and counts in the run's usage totals.
//!
//! Owns: session lifecycle and turn execution. Must not touch: HTTP, SQL (the store's
//! `RunStore` and `SessionIndex`), or anything but reading the run (tools are [`AskTools`]).

use super::events::{self as ev, FailCode, Session};
use super::readiness::{self, SandboxFor, Unavailable};
use super::tools::AskTools;
use crate::agent::{AgentConfig, AgentError, AgentEvent};
use crate::base::cancel::CancelToken;
use crate::base::redact::Redact;
use crate::llm::{Credentials, Message, Provider};
use crate::sandbox::Sandbox;
use crate::settings::vault::Vault;
use crate::settings::SettingsHandle;
use crate::store::{Event, EventDraft, RunRow, RunStore, SessionIndex, StoreError};
use crossbeam_channel::{bounded, Receiver, Sender};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Model calls one turn may make (tool rounds + the answer).
pub const MAX_MODEL_CALLS: u32 = 12;
/// Input + output tokens one turn may spend before it stops.
pub const TOKEN_BUDGET: u64 = 400_000;
/// The longest question a turn takes, in bytes.
pub const MAX_INPUT: usize = 16 * 1024;
/// The longest session title, in characters.
pub const MAX_TITLE: usize = 200;
/// How long an interrupt waits for the turn to record its end.
const INTERRUPT_WAIT: Duration = Duration::from_secs(20);

/// Why a session request was refused.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    /// The model (or its provider) cannot be used.
    #[error("{0}")]
    BadModel(String),
    #[error("Ask is unavailable on this run: {}.", .0.words())]
    Unavailable(Unavailable),
    #[error("Turn {active_turn} of this session is still running; wait for it or interrupt it.")]
    Busy { active_turn: String },
    #[error("Turn {0} is not running.")]
    TurnNotActive(String),
    #[error("Run store failure: {0}")]
    Store(#[from] StoreError),
}

/// A turn running now.
struct ActiveTurn {
    id: String,
    cancel: CancelToken,
    done: Receiver<Event>,
}

/// What starting a turn hands the caller: where its events begin, to stream them.
pub struct StartedTurn {
    pub run_id: String,
    pub turn_id: String,
    /// The seq of `run.session.turn.started`.
    pub first_seq: u64,
    /// Subscribed before the first append: nothing of the turn is missed.
    pub subscription: crate::store::Subscription,
}

/// Ask sessions over a run store.
pub struct Sessions {
    store: Arc<dyn RunStore>,
    index: Arc<dyn SessionIndex>,
    settings: SettingsHandle,
    state_dir: PathBuf,
    redactor: Arc<dyn Redact>,
    active: Mutex<HashMap<String, Arc<ActiveTurn>>>,
}

/// A session's model and provider as created.
struct ModelChoice {
    model: String,
    provider: Provider,
}

impl Sessions {
    pub fn new(
        store: Arc<dyn RunStore>,
        index: Arc<dyn SessionIndex>,
        settings: SettingsHandle,
        state_dir: PathBuf,
        redactor: Arc<dyn Redact>,
    ) -> Arc<Sessions> {
        Arc::new(Sessions {
            store,
            index,
            settings,
            state_dir,
            redactor,
            active: Mutex::new(HashMap::new()),
        })
    }

    fn creds(&self) -> Arc<dyn Credentials> {
        Arc::new(Vault::in_state_dir(&self.state_dir))
    }

    fn run(&self, run_id: &str) -> Result<RunRow, AskError> {
        match self.store.get_run(run_id)? {
            Some(r) => Ok(r),
            None => Err(AskError::NotFound(format!("No run with id {run_id}."))),
        }
    }

    /// The model a session uses: the one asked for (its provider usable), else the default.
    fn choose_model(
        &self,
        model: Option<&str>,
        provider: Option<&str>,
    ) -> Result<ModelChoice, AskError> {
        let settings = self.settings.get();
        let creds = self.creds();
        let explicit = match provider {
            Some(p) => Some(Provider::parse(p).ok_or_else(|| {
                AskError::BadRequest(format!("provider `{p}` is not a known LLM provider."))
            })?),
            None => None,
        };
        let (model, explicit) = match model {
            Some(m) => (m.to_string(), explicit),
            None => {
                let (m, p) = readiness::default_choice(&settings, &*creds)
                    .ok_or(AskError::Unavailable(Unavailable::LlmUnconfigured))?;
                (m, explicit.or(Some(p)))
            }
        };
        let provider = crate::llm::provider::infer_provider(&model, explicit).map_err(|_| {
            AskError::BadModel(format!(
                "model `{model}` is not in the catalog; name its provider too."
            ))
        })?;
        if !readiness::usable(provider, &settings, &*creds) {
            return Err(AskError::BadModel(format!(
                "model `{model}` is not available: LLM provider {provider} is not configured \
                 (no key in the vault, or no base URL)."
            )));
        }
        Ok(ModelChoice { model, provider })
    }

    /// Creates a session on `run_id` (`run.session.created`); its record.
    pub fn create(
        &self,
        run_id: &str,
        title: Option<&str>,
        model: Option<&str>,
        provider: Option<&str>,
        actor: Value,
    ) -> Result<Value, AskError> {
        let row = self.run(run_id)?;
        if let Some(t) = title {
            if t.chars().count() > MAX_TITLE {
                return Err(AskError::BadRequest(format!(
                    "title is longer than {MAX_TITLE} characters."
                )));
            }
        }
        readiness::sandbox_for(&row).map_err(AskError::Unavailable)?;
        let choice = self.choose_model(model, provider)?;
        let id = crate::base::clock::new_ulid();
        let mut draft = EventDraft::new(
            ev::CREATED,
            json!({"session_id": id, "title": title, "model": choice.model,
                   "provider": choice.provider.id()}),
        );
        draft.actor = Some(actor);
        let e = self.store.append(run_id, draft)?;
        self.index.put_session(&id, run_id, &e.ts)?;
        let s = self.find(&id)?;
        Ok(s.record(None))
    }

    /// The id of the turn of `session_id` running now, if any.
    pub fn live_turn(&self, session_id: &str) -> Option<String> {
        self.active.lock().get(session_id).map(|t| t.id.clone())
    }

    /// Every session of a run, newest first (by creation or, with `by_update`, last event).
    pub fn list(&self, run_id: &str, by_update: bool) -> Result<Vec<Value>, AskError> {
        self.run(run_id)?;
        let events = crate::stages::run_events(&*self.store, run_id)?;
        let mut all = ev::sessions(run_id, &events);
        if by_update {
            all.sort_by_key(|s| std::cmp::Reverse(s.last_seq));
        } else {
            all.reverse();
        }
        Ok(all
            .iter()
            .map(|s| s.record(self.live_turn(&s.id).as_deref()))
            .collect())
    }

    /// The session `id`, folded from its run's log.
    pub fn find(&self, id: &str) -> Result<Session, AskError> {
        let unknown = || AskError::NotFound(format!("No Ask session with id {id}."));
        if !crate::base::clock::is_canonical_ulid(id) {
            return Err(unknown());
        }
        let run_id = self.index.session_run(id)?.ok_or_else(unknown)?;
        if self.store.get_run(&run_id)?.is_none() {
            return Err(AskError::NotFound(format!(
                "The run of Ask session {id} ({run_id}) was deleted."
            )));
        }
        let events = self.store.events(&run_id, 1, usize::MAX)?;
        ev::sessions(&run_id, &events)
            .into_iter()
            .find(|s| s.id == id)
            .ok_or_else(unknown)
    }

    /// SessionDetail of `id`.
    pub fn detail(&self, id: &str) -> Result<Value, AskError> {
        let s = self.find(id)?;
        Ok(s.detail(self.live_turn(id).as_deref()))
    }

    /// The session's events with `seq >= since`, at most `limit`; whether more follow.
    pub fn events(
        &self,
        id: &str,
        since: u64,
        limit: usize,
    ) -> Result<(Vec<Event>, bool), AskError> {
        let s = self.find(id)?;
        let mut out = Vec::new();
        for e in self.store.events(&s.run_id, since.max(1), usize::MAX)? {
            if ev::session_of(&e) == Some(id) {
                if out.len() == limit {
                    return Ok((out, true));
                }
                out.push(e);
            }
        }
        Ok((out, false))
    }

    /// Starts a turn: checks the input, takes the session's one active-turn slot, records
    /// `turn.started` and `user_message`, and runs the agent on a thread of its own.
    pub fn start_turn(
        self: &Arc<Self>,
        session_id: &str,
        input: &str,
        turn_id: Option<&str>,
    ) -> Result<StartedTurn, AskError> {
        if input.trim().is_empty() {
            return Err(AskError::BadRequest("input must not be empty.".into()));
        }
        if input.len() > MAX_INPUT {
            return Err(AskError::BadRequest(format!(
                "input is {} bytes; a question may be at most {MAX_INPUT} bytes.",
                input.len()
            )));
        }
        let turn_id = match turn_id {
            Some(t) if crate::base::clock::is_canonical_ulid(t) => t.to_string(),
            Some(t) => {
                return Err(AskError::BadRequest(format!(
                    "turn_id `{t}` is not a ULID."
                )))
            }
            None => crate::base::clock::new_ulid(),
        };
        let session = self.find(session_id)?;
        let (done_tx, done_rx) = bounded(1);
        let cancel = CancelToken::new();
        {
            let mut active = self.active.lock();
            if let Some(t) = active.get(session_id) {
                return Err(AskError::Busy {
                    active_turn: t.id.clone(),
                });
            }
            active.insert(
                session_id.to_string(),
                Arc::new(ActiveTurn {
                    id: turn_id.clone(),
                    cancel: cancel.clone(),
                    done: done_rx,
                }),
            );
        }
        let release = |s: &Sessions| {
            s.active.lock().remove(session_id);
        };
        let run_id = session.run_id.clone();
        let subscription = self.store.hub().subscribe(&run_id);
        let mut drafts = Vec::new();
        if let Some(dangling) = session.open_turn() {
            // Cut short by a restart: recorded as interrupted before the next turn.
            drafts.push(EventDraft::new(
                ev::TURN_INTERRUPTED,
                json!({"session_id": session_id, "turn_id": dangling.id,
                       "error": "the server stopped during this turn"}),
            ));
        }
        drafts.push(EventDraft::new(
            ev::TURN_STARTED,
            json!({"session_id": session_id, "turn_id": turn_id, "input": input}),
        ));
        drafts.push(EventDraft::new(
            ev::USER_MESSAGE,
            json!({"session_id": session_id, "turn_id": turn_id, "text": input}),
        ));
        let last = match self.store.append_all(&run_id, drafts) {
            Ok(last) => last.unwrap_or(1),
            Err(e) => {
                release(self);
                return Err(e.into());
            }
        };
        // `turn.started` is the draft before the last (`user_message`).
        let first_seq = last.saturating_sub(1).max(1);
        let me = Arc::clone(self);
        let job = TurnJob {
            session,
            turn_id: turn_id.clone(),
            input: input.to_string(),
            cancel,
            done: done_tx,
        };
        let spawned = std::thread::Builder::new()
            .name("ask-turn".into())
            .spawn(move || me.run_turn(job));
        if let Err(e) = spawned {
            release(self);
            return Err(AskError::BadRequest(format!("cannot start the turn: {e}")));
        }
        Ok(StartedTurn {
            run_id,
            turn_id,
            first_seq,
            subscription,
        })
    }

    /// Interrupts the running turn `turn_id`; the recorded `turn.interrupted` event.
    pub fn interrupt(&self, session_id: &str, turn_id: &str) -> Result<Event, AskError> {
        self.find(session_id)?;
        let turn = self
            .active
            .lock()
            .get(session_id)
            .filter(|t| t.id == turn_id)
            .cloned()
            .ok_or_else(|| AskError::TurnNotActive(turn_id.to_string()))?;
        turn.cancel.cancel("interrupted by the user");
        match turn.done.recv_timeout(INTERRUPT_WAIT) {
            Ok(e) if e.event == ev::TURN_INTERRUPTED => Ok(e),
            // It ended on its own before the interrupt reached it.
            _ => Err(AskError::TurnNotActive(turn_id.to_string())),
        }
    }

    fn run_turn(self: Arc<Self>, job: TurnJob) {
        let sid = job.session.id.clone();
        let run_id = job.session.run_id.clone();
        let end = self.turn_body(&job);
        let draft = match end {
            Ok((text, stop)) => EventDraft::new(
                ev::TURN_SUCCEEDED,
                json!({"session_id": sid, "turn_id": job.turn_id, "output": text, "stop": stop}),
            ),
            Err(TurnEnd::Interrupted) => EventDraft::new(
                ev::TURN_INTERRUPTED,
                json!({"session_id": sid, "turn_id": job.turn_id,
                       "error": "interrupted by the user"}),
            ),
            Err(TurnEnd::Failed(code, error)) => EventDraft::new(
                ev::TURN_FAILED,
                json!({"session_id": sid, "turn_id": job.turn_id, "error": error,
                       "code": code.as_str(), "retryable": code.retryable()}),
            ),
        };
        // Free the slot first: a client that saw the end may post the next turn at once.
        self.active.lock().remove(&sid);
        match self.store.append(&run_id, draft) {
            Ok(e) => {
                let _ = job.done.try_send(e);
            }
            Err(e) => log::warn!(
                "Ask turn {} of run {run_id}: cannot record its end: {e}",
                job.turn_id
            ),
        }
    }

    /// Runs the agent for one turn; the answer and why the agent stopped.
    fn turn_body(&self, job: &TurnJob) -> Result<(String, &'static str), TurnEnd> {
        let run_id = &job.session.run_id;
        let row = match self.store.get_run(run_id) {
            Ok(Some(r)) => r,
            _ => {
                return Err(TurnEnd::Failed(
                    FailCode::AgentError,
                    format!("run {run_id} no longer exists"),
                ))
            }
        };
        let live = match readiness::sandbox_for(&row) {
            Ok(s) => s,
            Err(Unavailable::NoSandbox) => {
                return Err(TurnEnd::Failed(
                    FailCode::NoSandbox,
                    Unavailable::NoSandbox.words().into(),
                ))
            }
            Err(u) => {
                return Err(TurnEnd::Failed(
                    FailCode::SandboxUnavailable,
                    u.words().into(),
                ))
            }
        };
        let choice = self
            .choose_model(
                job.session.model.as_deref(),
                job.session.provider.as_deref(),
            )
            .map_err(|e| {
                let code = match e {
                    AskError::Unavailable(_) => FailCode::LlmUnconfigured,
                    _ => FailCode::ModelUnavailable,
                };
                TurnEnd::Failed(code, e.to_string())
            })?;
        let workspace = match live {
            SandboxFor::Live => Some(
                workspace_dir(&row)
                    .and_then(|d| Sandbox::new(d).ok())
                    .ok_or_else(|| {
                        TurnEnd::Failed(
                            FailCode::SandboxUnavailable,
                            "the run's workspace cannot be opened".into(),
                        )
                    })?,
            ),
            SandboxFor::Gone => None,
        };
        let tools = AskTools::new(
            run_id,
            Arc::clone(&self.store),
            workspace.clone(),
            self.state_dir.clone(),
            Arc::clone(&self.redactor),
        );
        let settings = self.settings.get();
        let client = crate::agent::backend::client_from_settings(&settings, self.creds())
            .map_err(|e| TurnEnd::Failed(FailCode::LlmUnconfigured, e.to_string()))?;
        let mut config = AgentConfig::new(&choice.model);
        config.provider = Some(choice.provider);
        config.max_turns = MAX_MODEL_CALLS;
        config.project_memory = false;
        let session_root = workspace
            .clone()
            .map(Ok)
            .unwrap_or_else(|| Sandbox::new(&self.state_dir))
            .map_err(|e| TurnEnd::Failed(FailCode::AgentError, e.to_string()))?;
        let events = crate::stages::run_events(&*self.store, run_id).unwrap_or_default();
        let snapshot = super::snapshot::text(&row, &events);
        let mut agent = crate::agent::Session::new(config, session_root)
            .map_err(|e| TurnEnd::Failed(FailCode::ModelUnavailable, e.to_string()))?
            .with_toolset(Box::new(tools))
            .with_system_prompt(super::snapshot::system_prompt(run_id, live))
            .with_redactor(Arc::clone(&self.redactor))
            .with_token_budget(TOKEN_BUDGET)
            .with_history(history(&job.session));
        let input = format!("{snapshot}\n\nQuestion:\n{}", job.input);
        let mut sink = Sink::new(self, job);
        let result = agent.run(&client, &input, &job.cancel, &mut |e| sink.on(e));
        sink.flush();
        match result {
            Ok(o) => Ok((o.text, o.stop.as_str())),
            Err(AgentError::Cancelled { .. }) if sink.lost.is_some() => Err(TurnEnd::Failed(
                FailCode::AgentError,
                sink.lost.take().unwrap_or_default(),
            )),
            Err(AgentError::Cancelled { .. }) => Err(TurnEnd::Interrupted),
            Err(AgentError::Llm(e)) => {
                let code = match e {
                    crate::llm::LlmError::ProviderNotConfigured { .. } => FailCode::LlmUnconfigured,
                    _ => FailCode::AgentError,
                };
                Err(TurnEnd::Failed(
                    code,
                    self.redactor.redact(&e.to_string()).into_owned(),
                ))
            }
        }
    }
}

/// The host directory of a ready sandbox's workspace.
fn workspace_dir(row: &RunRow) -> Option<PathBuf> {
    row.sandbox
        .instance
        .as_ref()?
        .pointer("/runtime/working_directory")?
        .as_str()
        .map(PathBuf::from)
}

/// Earlier turns as a conversation: each question and its answer (tool rounds are not
/// replayed; the answer carries what they found).
fn history(s: &Session) -> Vec<Message> {
    let mut out = Vec::new();
    for t in &s.turns {
        if let Some(a) = t
            .answer
            .as_deref()
            .filter(|_| t.ended.as_deref() == Some(ev::TURN_SUCCEEDED))
        {
            out.push(Message::user(t.input.clone()));
            out.push(Message::assistant(a.to_string()));
        }
    }
    out
}

struct TurnJob {
    session: Session,
    turn_id: String,
    input: String,
    cancel: CancelToken,
    done: Sender<Event>,
}

enum TurnEnd {
    Interrupted,
    Failed(FailCode, String),
}

/// A streamed delta is recorded once this much text is pending...
const DELTA_BYTES: usize = 512;
/// ...or this long after the last delta event (the first one at once).
const DELTA_INTERVAL: Duration = Duration::from_millis(100);

/// Records a turn's agent events in the run's log as they come.
struct Sink<'a> {
    sessions: &'a Sessions,
    job: &'a TurnJob,
    pending: String,
    last_delta: Option<Instant>,
    /// Set when an append failed (the run was deleted): the turn is cancelled.
    lost: Option<String>,
}

impl<'a> Sink<'a> {
    fn new(sessions: &'a Sessions, job: &'a TurnJob) -> Self {
        Sink {
            sessions,
            job,
            pending: String::new(),
            last_delta: None,
            lost: None,
        }
    }

    fn append(&mut self, kind: &str, mut props: Value) {
        if self.lost.is_some() {
            return;
        }
        props["session_id"] = json!(self.job.session.id);
        props["turn_id"] = json!(self.job.turn_id);
        if let Err(e) = self
            .sessions
            .store
            .append(&self.job.session.run_id, EventDraft::new(kind, props))
        {
            self.lost = Some(format!("cannot record the turn: {e}"));
            self.job.cancel.cancel("the run's record is gone");
        }
    }

    fn flush(&mut self) {
        if !self.pending.is_empty() {
            let delta = std::mem::take(&mut self.pending);
            self.last_delta = Some(Instant::now());
            self.append(ev::ASSISTANT_DELTA, json!({ "delta": delta }));
        }
    }

    fn on(&mut self, e: AgentEvent) {
        let redact = |s: &str| self.sessions.redactor.redact(s).into_owned();
        match e {
            AgentEvent::TextDelta { text } => {
                self.pending.push_str(&text);
                let due = self.pending.len() >= DELTA_BYTES
                    || self
                        .last_delta
                        .is_none_or(|t| t.elapsed() >= DELTA_INTERVAL);
                if due {
                    self.flush();
                }
            }
            AgentEvent::Message {
                text,
                model,
                tool_call_count,
                usage,
                cost,
            } => {
                self.flush();
                let provider = self.job.session.provider.clone();
                let u = json!({
                    "tokens": {"input": usage.input, "output": usage.output,
                               "reasoning": usage.reasoning, "cache_read": usage.cache_read,
                               "cache_write": usage.cache_write},
                    "cost": cost.to_json(),
                    "model": model, "provider": provider,
                });
                self.append(
                    ev::ASSISTANT_MESSAGE,
                    json!({"text": text, "model": model, "tool_call_count": tool_call_count, "usage": u}),
                );
            }
            AgentEvent::ToolStarted {
                tool_name,
                tool_call_id,
                arguments,
            } => {
                self.flush();
                self.append(
                    ev::TOOL_STARTED,
                    json!({"tool_name": tool_name, "tool_call_id": tool_call_id, "arguments": arguments}),
                );
            }
            AgentEvent::ToolCompleted {
                tool_name,
                tool_call_id,
                output,
                is_error,
            } => {
                let output = redact(&output);
                let output =
                    crate::store::offload_text(&*self.sessions.store, &output).unwrap_or_default();
                self.append(
                    ev::TOOL_COMPLETED,
                    json!({"tool_name": tool_name, "tool_call_id": tool_call_id,
                           "output": output, "is_error": is_error}),
                );
            }
            _ => {}
        }
    }
}
