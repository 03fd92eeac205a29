//! Chat: telling a team about its runs and taking answers to their questions, in Slack's Web
//! API wire format. [`Chat`] owns `[server.integrations.chat]` (`enabled`, `api_url`) with the
//! vault's `CHAT_BOT_TOKEN` and `CHAT_SIGNING_SECRET`, the per-run opt-in
//! (`[run.notifications] enabled, channel, events` under the create body's `notifications`),
//! one worker thread that posts and updates messages ([`api`], [`message`]), and the
//! interactivity callback ([`interact`]): a signed click on an answer button answers the
//! run's question through an [`Answerer`] the server provides.
//!
//! A run never waits for chat: committed events are handed to the worker through a channel
//! ([`Chat::observe`] only filters and queues), and a message that cannot be sent is recorded
//! on the run as `chat.failed` (and in the status entry), never failing or blocking it. A
//! call that failed for a passing reason (5xx, 429, a timeout, a refused connection) is
//! tried again after 2, 8 and 30 s (a 429's `Retry-After` when longer), without holding back
//! the calls queued meanwhile; a question's message is not posted late once it closed.
//!
//! Owns: chat's behaviour. Must not touch: HTTP routing (the server maps [`InteractError`]),
//! SQL, engine internals. The bot token and signing secret never reach an event, a log line
//! or an error.

pub mod api;
pub mod interact;
pub mod message;

use super::status::{IntegrationStatus, Provider, State};
use crate::base::event_kind;
use crate::settings::vault::Vault;
use crate::settings::{NotifyEvent, Settings, SettingsHandle};
use crate::store::{Event, EventDraft, RunRow, RunStore};
use api::{Http, Posted};
use crossbeam_channel::{unbounded, Receiver, Sender};
use message::Message;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Vault entry holding the bot token (`xoxb-...`) svc posts with.
pub const BOT_TOKEN_KEY: &str = "CHAT_BOT_TOKEN";
/// Vault entry holding the signing secret interactivity callbacks are signed with.
pub const SIGNING_SECRET_KEY: &str = "CHAT_SIGNING_SECRET";

/// Run event kinds chat appends.
pub mod kinds {
    /// A message was posted: `{event, channel, ts, question_id?}`.
    pub const POSTED: &str = "chat.posted";
    /// A question's message was updated once it closed: `{question_id, channel, ts}`.
    pub const UPDATED: &str = "chat.updated";
    /// Chat could not be told (an outage, a refusal, no channel or token): `{event, method,
    /// error, question_id?}`. The run goes on.
    pub const FAILED: &str = "chat.failed";
}

/// The committed events chat acts on.
const WATCHED: [&str; 6] = [
    event_kind::RUN_COMPLETED,
    event_kind::RUN_FAILED,
    event_kind::INTERVIEW_STARTED,
    event_kind::INTERVIEW_COMPLETED,
    event_kind::INTERVIEW_TIMEOUT,
    event_kind::INTERVIEW_INTERRUPTED,
];

/// The create body's `notifications` (every field optional; `[run.notifications]` fills
/// the rest).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<NotifyEvent>>,
}

impl NotificationOptions {
    /// A channel is a Slack channel id or `#name`: non-empty, at most 80 characters, no
    /// spaces or control characters.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(c) = &self.channel {
            validate_channel(c).map_err(|e| format!("notifications.channel {e}"))?;
        }
        Ok(())
    }
}

pub use crate::settings::validate_chat_channel as validate_channel;

/// A run's notifications: `[run.notifications]` with its `notifications` over it.
#[derive(Debug, Clone, PartialEq)]
pub struct Notifications {
    pub enabled: bool,
    pub channel: Option<String>,
    pub events: Vec<NotifyEvent>,
}

impl Notifications {
    pub fn of(settings: &Settings, row: &RunRow) -> Notifications {
        let d = &settings.run.notifications;
        let o: NotificationOptions = row
            .created_meta
            .get("notifications")
            .filter(|v| !v.is_null())
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default();
        Notifications {
            enabled: o.enabled.unwrap_or(d.enabled),
            channel: o.channel.or_else(|| d.channel.clone()),
            events: o.events.unwrap_or_else(|| d.events.clone()),
        }
    }

    pub fn wants(&self, e: NotifyEvent) -> bool {
        self.enabled && self.events.contains(&e)
    }
}

/// What answering a question from chat came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerOutcome {
    /// The answer was taken; the chosen option's label.
    Answered { label: String },
    /// The question was answered before (or closed): the first answer won.
    AlreadyAnswered(String),
    /// The answer was not taken (unknown run or option, a paused run...): why.
    Refused(String),
}

/// Answers a run's question as `by` (the server's questions API).
pub trait Answerer: Send + Sync {
    fn answer(&self, run_id: &str, question_id: &str, key: &str, by: &Value) -> AnswerOutcome;
}

/// Why a callback was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InteractError {
    /// Missing, wrong or stale signature, or no signing secret (401).
    Signature(String),
    /// Not a form with a JSON `payload` (400).
    BadRequest(String),
}

/// How long the worker waits before trying a call again after a passing failure (an outage:
/// 5xx, 429, a timeout, a refused connection): three more tries over about 40 s, then the
/// message is given up (each failed try is a `chat.failed` event on the run).
const RETRY_DELAYS: [Duration; 3] = [
    Duration::from_secs(2),
    Duration::from_secs(8),
    Duration::from_secs(30),
];
/// The longest wait a 429's `Retry-After` may ask for.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(60);

/// The Web API methods svc calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    PostMessage,
    Update,
    PostEphemeral,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::PostMessage => "chat.postMessage",
            Method::Update => "chat.update",
            Method::PostEphemeral => "chat.postEphemeral",
        }
    }
}

/// One Web API call for a run, as the worker sends (and re-sends) it.
struct Call {
    run_id: String,
    /// The notification it belongs to: `run.completed`, `run.failed` or `run.blocked`.
    event: &'static str,
    method: Method,
    body: Value,
    question_id: Option<String>,
    /// A question's message, kept once posted so it can be updated when the question closes.
    message: Option<Message>,
    /// Tries made so far.
    attempt: usize,
}

enum Job {
    Event {
        run_id: String,
        kind: String,
        props: Value,
    },
    Call(Call),
    #[cfg(test)]
    Flush(Sender<()>),
}

/// The chat service (see the module docs).
pub struct Chat {
    settings: SettingsHandle,
    vault: Vault,
    store: Arc<dyn RunStore>,
    pub http: Http,
    tx: Sender<Job>,
    rx: Receiver<Job>,
    started: std::sync::Once,
    answerer: Mutex<Option<Arc<dyn Answerer>>>,
    last_error: Mutex<Option<(String, String)>>,
    /// Questions whose message is up: (run, question) → where, and what it says. A server
    /// restart forgets it; the run's `chat.posted` event is read back then.
    posted: Mutex<HashMap<(String, String), (Posted, Message)>>,
}

impl Chat {
    pub fn new(settings: SettingsHandle, vault: Vault, store: Arc<dyn RunStore>) -> Arc<Chat> {
        let (tx, rx) = unbounded();
        Arc::new(Chat {
            settings,
            vault,
            store,
            http: Http::default(),
            tx,
            rx,
            started: std::sync::Once::new(),
            answerer: Mutex::new(None),
            last_error: Mutex::new(None),
            posted: Mutex::new(HashMap::new()),
        })
    }

    /// Starts the worker thread (once).
    pub fn start(self: &Arc<Self>) {
        let me = Arc::clone(self);
        self.started.call_once(move || {
            let spawned = std::thread::Builder::new()
                .name("svc-chat".into())
                .spawn(move || me.work());
            if let Err(e) = spawned {
                log::error!("chat: cannot start its worker thread: {e}");
            }
        });
    }

    /// Where answers from chat go (the server's questions API).
    pub fn set_answerer(&self, a: Arc<dyn Answerer>) {
        *self.answerer.lock() = Some(a);
    }

    /// Told of every committed event (on the committing thread): queues those chat acts
    /// on while chat is enabled. Never blocks.
    pub fn observe(&self, e: &Event) {
        if !WATCHED.contains(&e.event.as_str()) {
            return;
        }
        if !self.settings.get().server.integrations.chat.enabled {
            return;
        }
        let _ = self.tx.send(Job::Event {
            run_id: e.run_id.clone(),
            kind: e.event.clone(),
            props: e.properties.clone(),
        });
    }

    /// The worker: events and calls in order, and the calls an outage put off when their
    /// time comes (they never hold back what is queued meanwhile).
    fn work(&self) {
        let mut later: Vec<(Instant, Call)> = Vec::new();
        loop {
            let next = later.iter().map(|(at, _)| *at).min();
            let job = match next {
                None => match self.rx.recv() {
                    Ok(job) => Some(job),
                    Err(_) => return,
                },
                Some(at) => {
                    match self
                        .rx
                        .recv_timeout(at.saturating_duration_since(Instant::now()))
                    {
                        Ok(job) => Some(job),
                        Err(crossbeam_channel::RecvTimeoutError::Timeout) => None,
                        Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
                    }
                }
            };
            match job {
                Some(Job::Event {
                    run_id,
                    kind,
                    props,
                }) => {
                    for call in self.on_event(&run_id, &kind, &props) {
                        self.send(call, &mut later);
                    }
                }
                Some(Job::Call(call)) => self.send(call, &mut later),
                #[cfg(test)]
                Some(Job::Flush(done)) => {
                    let _ = done.send(());
                }
                None => {}
            }
            let now = Instant::now();
            let (due, wait): (Vec<_>, Vec<_>) = later.drain(..).partition(|(at, _)| *at <= now);
            later = wait;
            for (_, call) in due {
                self.send(call, &mut later);
            }
        }
    }

    /// The calls a committed event asks for.
    fn on_event(&self, run_id: &str, kind: &str, props: &Value) -> Vec<Call> {
        let settings = self.settings.get();
        let Ok(Some(row)) = self.store.get_run(run_id) else {
            return Vec::new();
        };
        let n = Notifications::of(&settings, &row);
        let run_link = super::text::run_link(&settings, run_id);
        let qid = props
            .get("question_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let post = |event: &'static str, m: Message, question: bool| -> Vec<Call> {
            let Some(channel) = n.channel.as_deref() else {
                self.failed(
                    run_id,
                    event,
                    Method::PostMessage,
                    "no channel to post to: set [run.notifications] channel or the run's notifications.channel",
                    question.then_some(qid.as_str()),
                    1,
                    None,
                );
                return Vec::new();
            };
            vec![Call {
                run_id: run_id.to_string(),
                event,
                method: Method::PostMessage,
                body: m.post_body(channel),
                question_id: question.then(|| qid.clone()),
                message: question.then_some(m),
                attempt: 0,
            }]
        };
        match kind {
            event_kind::RUN_COMPLETED if n.wants(NotifyEvent::Completed) => post(
                event_kind::RUN_COMPLETED,
                message::run_ended(&row, &run_link),
                false,
            ),
            event_kind::RUN_FAILED if n.wants(NotifyEvent::Failed) => post(
                event_kind::RUN_FAILED,
                message::run_ended(&row, &run_link),
                false,
            ),
            event_kind::INTERVIEW_STARTED if n.wants(NotifyEvent::Blocked) && !qid.is_empty() => {
                let link = question_link(&settings, run_id, &qid);
                let m = message::question(&row, props, &run_link, &link);
                post(event_kind::RUN_BLOCKED, m, true)
            }
            event_kind::INTERVIEW_COMPLETED
            | event_kind::INTERVIEW_TIMEOUT
            | event_kind::INTERVIEW_INTERRUPTED => {
                // A freeform reply that matched no option leaves the question open.
                if props.get("accepted").and_then(Value::as_bool) == Some(false) {
                    return Vec::new();
                }
                let Some((at, m)) = self.take_posted(&row, &qid, &run_link) else {
                    return Vec::new();
                };
                let closed = message::closed(&m.blocks, &m.text, &closed_outcome(kind, props));
                vec![Call {
                    run_id: run_id.to_string(),
                    event: event_kind::RUN_BLOCKED,
                    method: Method::Update,
                    body: closed.update_body(&at.channel, &at.ts),
                    question_id: Some(qid),
                    message: None,
                    attempt: 0,
                }]
            }
            _ => Vec::new(),
        }
    }

    /// The message of question `qid` when one was posted and not yet closed: kept in
    /// memory, else read back from the run's `chat.posted` and `interview.started` events
    /// (after a restart).
    fn take_posted(&self, row: &RunRow, qid: &str, run_link: &str) -> Option<(Posted, Message)> {
        if let Some(kept) = self
            .posted
            .lock()
            .remove(&(row.id.clone(), qid.to_string()))
        {
            return Some(kept);
        }
        const PAGE: usize = 1000;
        let of_q = |e: &Event| e.properties.get("question_id").and_then(Value::as_str) == Some(qid);
        let (mut at, mut asked, mut since) = (None, None, 1);
        loop {
            let page = self.store.events(&row.id, since, PAGE).ok()?;
            for e in page.iter().filter(|e| of_q(e)) {
                match e.event.as_str() {
                    kinds::POSTED => at = Posted::of(&e.properties),
                    // Already updated once: nothing more to say.
                    kinds::UPDATED => return None,
                    event_kind::INTERVIEW_STARTED => asked = Some(e.properties.clone()),
                    _ => {}
                }
            }
            match page.last() {
                Some(last) if page.len() == PAGE => since = last.seq + 1,
                _ => break,
            }
        }
        let settings = self.settings.get();
        let link = question_link(&settings, &row.id, qid);
        Some((at?, message::question(row, &asked?, run_link, &link)))
    }

    fn api_url(&self) -> String {
        self.settings.get().server.integrations.chat.api_url.clone()
    }

    fn token(&self) -> Result<String, String> {
        match self.vault.get(BOT_TOKEN_KEY) {
            Ok(Some(t)) if !t.trim().is_empty() => Ok(t.trim().to_string()),
            Ok(_) => Err(format!("{BOT_TOKEN_KEY} is not in the vault")),
            Err(e) => Err(format!("the vault cannot be read: {e}")),
        }
    }

    /// Whether question `qid` of run `run_id` is still waiting for an answer.
    fn question_open(&self, run_id: &str, qid: &str) -> bool {
        matches!(self.store.get_run(run_id), Ok(Some(row))
            if row.questions.iter().any(|q| q.get("question_id").and_then(Value::as_str) == Some(qid)))
    }

    /// Makes `call` once; records what came of it on the run, and puts it in `later` when
    /// it failed for a passing reason and may be tried again.
    fn send(&self, mut call: Call, later: &mut Vec<(Instant, Call)>) {
        // A question's message put off by an outage is not posted once the question closed.
        if call.attempt > 0 && call.method == Method::PostMessage {
            if let Some(q) = call.question_id.as_deref() {
                if !self.question_open(&call.run_id, q) {
                    log::info!(
                        "chat: question {q} of run {} closed before chat came back; not posted",
                        call.run_id
                    );
                    return;
                }
            }
        }
        call.attempt += 1;
        let answer = self.token().map_err(|e| (e, None)).and_then(|token| {
            self.http
                .call(&self.api_url(), call.method.name(), &token, &call.body)
                .map_err(|e| (e.to_string(), e.retry_after()))
        });
        let (error, retry) = match answer {
            Ok(answer) => return self.sent(call, &answer),
            Err(e) => e,
        };
        let wait = retry.and_then(|asked| {
            let least = *RETRY_DELAYS.get(call.attempt - 1)?;
            Some(asked.unwrap_or(least).clamp(least, MAX_RETRY_WAIT))
        });
        self.failed(
            &call.run_id,
            call.event,
            call.method,
            &error,
            call.question_id.as_deref(),
            call.attempt,
            wait,
        );
        if let Some(wait) = wait {
            later.push((Instant::now() + wait, call));
        }
    }

    /// Records a call that succeeded.
    fn sent(&self, call: Call, answer: &Value) {
        self.succeeded();
        match call.method {
            Method::PostMessage => {
                let Some(at) = Posted::of(answer) else {
                    let e = "chat.postMessage answered without `channel` and `ts`";
                    let q = call.question_id.as_deref();
                    return self.failed(
                        &call.run_id,
                        call.event,
                        call.method,
                        e,
                        q,
                        call.attempt,
                        None,
                    );
                };
                let mut p = json!({"event": call.event, "channel": at.channel, "ts": at.ts});
                if let Some(q) = &call.question_id {
                    p["question_id"] = json!(q);
                }
                self.append(&call.run_id, kinds::POSTED, p);
                if let (Some(q), Some(m)) = (call.question_id, call.message) {
                    self.posted.lock().insert((call.run_id, q), (at, m));
                }
            }
            Method::Update => {
                let s = |k: &str| call.body.get(k).cloned().unwrap_or(Value::Null);
                self.append(
                    &call.run_id,
                    kinds::UPDATED,
                    json!({"question_id": call.question_id, "channel": s("channel"), "ts": s("ts")}),
                );
            }
            Method::PostEphemeral => {}
        }
    }

    fn succeeded(&self) {
        let mut last = self.last_error.lock();
        if last.is_some() {
            *last = None;
        }
    }

    /// Records a failed try: a `chat.failed` event on the run (never a secret: the errors
    /// are the service's codes and the transport's words), a warning, the status entry.
    #[allow(clippy::too_many_arguments)]
    fn failed(
        &self,
        run_id: &str,
        event: &str,
        method: Method,
        error: &str,
        question_id: Option<&str>,
        attempt: usize,
        retry_in: Option<Duration>,
    ) {
        let method = method.name();
        match retry_in {
            Some(w) => log::warn!(
                "chat: {method} for run {run_id} ({event}) failed (try {attempt}), retrying in {} s: {error}",
                w.as_secs()
            ),
            None => log::warn!(
                "chat: {method} for run {run_id} ({event}) failed (try {attempt}), given up: {error}"
            ),
        }
        *self.last_error.lock() = Some((crate::base::clock::now(), error.to_string()));
        let mut p = json!({"event": event, "method": method, "error": error,
                           "attempt": attempt, "retry_in_secs": retry_in.map(|w| w.as_secs())});
        if let Some(q) = question_id {
            p["question_id"] = json!(q);
        }
        self.append(run_id, kinds::FAILED, p);
    }

    fn append(&self, run_id: &str, kind: &str, props: Value) {
        if let Err(e) = self.store.append(run_id, EventDraft::new(kind, props)) {
            log::warn!("chat: cannot record {kind} on run {run_id}: {e}");
        }
    }

    /// The interactivity callback: verifies it, then answers the question its button names
    /// as principal `chat {team_id, user_id, user_name}`. The message is updated (who
    /// answered what) when the run records the answer; a click that came too late or was
    /// refused is told so privately. Chat calls are the worker's: the callback is answered
    /// at once.
    pub fn interact(
        &self,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
    ) -> Result<Value, InteractError> {
        let secret = match self.vault.get(SIGNING_SECRET_KEY) {
            Ok(Some(s)) if !s.trim().is_empty() => s,
            Ok(_) => {
                return Err(InteractError::Signature(format!(
                    "No chat signing secret is configured (vault {SIGNING_SECRET_KEY}): no callback can be verified."
                )))
            }
            Err(e) => {
                return Err(InteractError::Signature(format!(
                    "The chat signing secret cannot be read: {e}"
                )))
            }
        };
        interact::verify(
            secret.trim().as_bytes(),
            timestamp,
            signature,
            body,
            unix_now(),
        )
        .map_err(InteractError::Signature)?;
        let payload = interact::payload(body).map_err(InteractError::BadRequest)?;
        let Some(click) = interact::click(&payload) else {
            return Ok(json!({"outcome": "ignored"}));
        };
        let answerer = self.answerer.lock().clone();
        let Some(answerer) = answerer else {
            return Ok(json!({"outcome": "ignored", "detail": "no run service"}));
        };
        let b = &click.button;
        let outcome = answerer.answer(&b.run_id, &b.question_id, &b.key, &click.principal());
        let (name, detail) = match outcome {
            AnswerOutcome::Answered { label } => {
                return Ok(json!({"outcome": "answered", "run_id": b.run_id,
                                 "question_id": b.question_id, "answer": label}))
            }
            AnswerOutcome::AlreadyAnswered(why) => ("already_answered", why),
            AnswerOutcome::Refused(why) => ("refused", format!("Your answer was not taken: {why}")),
        };
        if let Some(channel) = &click.channel {
            let _ = self.tx.send(Job::Call(Call {
                run_id: b.run_id.clone(),
                event: event_kind::RUN_BLOCKED,
                method: Method::PostEphemeral,
                body: json!({"channel": channel, "user": click.user_id, "text": detail}),
                question_id: Some(b.question_id.clone()),
                message: None,
                attempt: 0,
            }));
        }
        Ok(json!({"outcome": name, "run_id": b.run_id,
                  "question_id": b.question_id, "detail": detail}))
    }

    /// The `chat` entry of `GET /api/v1/system/integrations`.
    pub fn status(&self) -> IntegrationStatus {
        let settings = self.settings.get();
        let c = &settings.server.integrations.chat;
        let present = |k: &str| {
            self.vault
                .get(k)
                .ok()
                .flatten()
                .is_some_and(|v| !v.trim().is_empty())
        };
        let missing: Vec<String> = [BOT_TOKEN_KEY, SIGNING_SECRET_KEY]
            .into_iter()
            .filter(|k| !present(k))
            .map(str::to_string)
            .collect();
        let mut metadata = Map::new();
        metadata.insert("api_url".into(), json!(c.api_url));
        metadata.insert(
            "interactivity_url".into(),
            json!(settings
                .server
                .api
                .url
                .as_deref()
                .map(|u| format!("{}/webhooks/chat", u.trim_end_matches('/')))),
        );
        metadata.insert("bot_token_set".into(), json!(present(BOT_TOKEN_KEY)));
        metadata.insert(
            "signing_secret_set".into(),
            json!(present(SIGNING_SECRET_KEY)),
        );
        let last_error = self
            .last_error
            .lock()
            .clone()
            .map(|(at, message)| json!({"at": at, "message": message}));
        let status = if !c.enabled {
            State::Disabled
        } else if !missing.is_empty() {
            State::MissingCredentials
        } else if last_error.is_some() {
            State::Error
        } else {
            State::Configured
        };
        IntegrationStatus {
            provider: Provider::Chat,
            enabled: c.enabled,
            configured: missing.is_empty(),
            status,
            missing_credentials: if c.enabled { missing } else { Vec::new() },
            last_error,
            metadata,
        }
    }

    /// Waits until the worker handled everything queued before (tests).
    #[cfg(test)]
    fn flush(&self) {
        let (tx, rx) = crossbeam_channel::bounded(1);
        if self.tx.send(Job::Flush(tx)).is_ok() {
            let _ = rx.recv_timeout(std::time::Duration::from_secs(30));
        }
    }
}

/// What the closed question's message says happened: who answered what (from the
/// `interview.completed` principal `answered_by`), or why it closed unanswered.
fn closed_outcome(kind: &str, props: &Value) -> String {
    let s = |k: &str| props.get(k).and_then(Value::as_str).unwrap_or("");
    match kind {
        event_kind::INTERVIEW_COMPLETED => {
            let answer = message::escape(s("answer"));
            match props.get("answered_by").filter(|v| v.is_object()) {
                Some(by) if by.get("kind").and_then(Value::as_str) == Some("chat") => format!(
                    "Answered *{answer}* by {}",
                    message::escape(&message::principal_name(by))
                ),
                Some(by) => format!(
                    "Answered *{answer}* in svc by {}",
                    message::escape(&message::principal_name(by))
                ),
                None => format!("Answered *{answer}* in svc"),
            }
        }
        event_kind::INTERVIEW_TIMEOUT => "No answer in time: the question closed".to_string(),
        _ => format!("The question closed: {}", message::escape(s("reason"))),
    }
}

/// Where a question is on the run page (`#question-<id>`), else where the run is.
pub fn question_link(settings: &Settings, run_id: &str, question_id: &str) -> String {
    match settings.run_web_url(run_id) {
        Some(u) => format!("{u}#question-{question_id}"),
        None => super::text::run_link(settings, run_id),
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
