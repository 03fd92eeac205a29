//! Unit tests of the chat service: which runs notify, the status entry, a chat outage
//! recorded on the run, and callbacks refused before anything is answered. (Posting and
//! answering through a scripted chat service over HTTP: `tests/server/chat.rs`.)
//! Must not: reach a real chat service (the only address used refuses connections).

use super::*;
use crate::settings::vault::SecretType;
use crate::store::{MemoryStore, NewRun};

fn chat(settings: Settings, dir: &std::path::Path) -> (Arc<Chat>, Arc<dyn RunStore>) {
    let store: Arc<dyn RunStore> = Arc::new(MemoryStore::new());
    let c = Chat::new(
        SettingsHandle::new(settings),
        Vault::in_state_dir(dir),
        Arc::clone(&store),
    );
    (c, store)
}

fn enabled(api_url: &str) -> Settings {
    let mut s = Settings::default();
    s.server.integrations.chat.enabled = true;
    s.server.integrations.chat.api_url = api_url.to_string();
    s
}

#[test]
fn run_options_override_the_settings_field_by_field() {
    let store = MemoryStore::new();
    let mut s = Settings::default();
    s.run.notifications.enabled = true;
    s.run.notifications.channel = Some("C-team".into());
    let row = crate::store::test_support::new_run(&store, "r");
    let n = Notifications::of(&s, &row);
    assert_eq!(n.channel.as_deref(), Some("C-team"));
    assert!(n.wants(NotifyEvent::Blocked) && n.wants(NotifyEvent::Failed));
    let mut row = row;
    row.created_meta.insert(
        "notifications".into(),
        json!({"channel": "C-run", "events": ["run.failed"]}),
    );
    let n = Notifications::of(&s, &row);
    assert_eq!(n.channel.as_deref(), Some("C-run"));
    assert!(n.wants(NotifyEvent::Failed) && !n.wants(NotifyEvent::Blocked));
    row.created_meta
        .insert("notifications".into(), json!({"enabled": false}));
    assert!(!Notifications::of(&s, &row).wants(NotifyEvent::Failed));
    assert!(NotificationOptions {
        channel: Some("two words".into()),
        ..Default::default()
    }
    .validate()
    .is_err());
}

#[test]
fn the_status_entry_names_what_is_missing_and_never_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let (c, _) = chat(Settings::default(), dir.path());
    assert_eq!(c.status().status, State::Disabled);
    let (c, _) = chat(enabled("http://127.0.0.1:9/api"), dir.path());
    let st = c.status();
    assert_eq!(st.status, State::MissingCredentials);
    assert_eq!(st.missing_credentials, [BOT_TOKEN_KEY, SIGNING_SECRET_KEY]);
    c.vault
        .set(BOT_TOKEN_KEY, "xoxb-secret-1", SecretType::Environment)
        .unwrap();
    c.vault
        .set(SIGNING_SECRET_KEY, "sign-secret-2", SecretType::Environment)
        .unwrap();
    let st = c.status();
    assert_eq!((st.status, st.configured), (State::Configured, true));
    let text = serde_json::to_string(&st).unwrap();
    assert!(!text.contains("xoxb-secret-1") && !text.contains("sign-secret-2"));
}

#[test]
fn a_chat_outage_is_recorded_on_the_run_and_in_the_status() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on port 9 of loopback: every call fails at once.
    let mut s = enabled("http://127.0.0.1:9/api");
    s.run.notifications.enabled = true;
    s.run.notifications.channel = Some("C1".into());
    let (c, store) = chat(s, dir.path());
    c.vault
        .set(BOT_TOKEN_KEY, "xoxb-secret-1", SecretType::Environment)
        .unwrap();
    c.start();
    let row = store.create_run(NewRun::default()).unwrap();
    let ev = store
        .append(&row.id, EventDraft::new("run.completed", json!({})))
        .unwrap();
    c.observe(&ev);
    c.flush();
    let events = store.events(&row.id, 1, 100).unwrap();
    let failed = events.iter().find(|e| e.event == kinds::FAILED).unwrap();
    assert_eq!(failed.properties["event"], "run.completed");
    assert_eq!(failed.properties["method"], "chat.postMessage");
    assert!(!failed.properties.to_string().contains("xoxb-secret-1"));
    let st = c.status();
    assert_eq!(st.status, State::MissingCredentials); // no signing secret yet
    assert!(st.last_error.is_some());
    // Events chat does not act on are not even queued.
    let other = store
        .append(&row.id, EventDraft::new("stage.started", json!({})))
        .unwrap();
    c.observe(&other);
    c.flush();
    assert_eq!(
        store
            .events(&row.id, 1, 100)
            .unwrap()
            .iter()
            .filter(|e| e.event.starts_with("chat."))
            .count(),
        1
    );
}

#[test]
fn callbacks_without_a_valid_signature_answer_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (c, _) = chat(enabled("http://127.0.0.1:9/api"), dir.path());
    let body = b"payload=%7B%7D";
    let now = unix_now().to_string();
    // No secret configured: nothing can be verified.
    assert!(matches!(
        c.interact(Some(&now), Some("v0=00"), body),
        Err(InteractError::Signature(_))
    ));
    c.vault
        .set(SIGNING_SECRET_KEY, "sign-secret-2", SecretType::Environment)
        .unwrap();
    let good = interact::sign(b"sign-secret-2", &now, body);
    let forged = interact::sign(b"guess", &now, body);
    assert!(matches!(
        c.interact(Some(&now), Some(&forged), body),
        Err(InteractError::Signature(_))
    ));
    let old = (unix_now() - 600).to_string();
    let old_sig = interact::sign(b"sign-secret-2", &old, body);
    assert!(matches!(
        c.interact(Some(&old), Some(&old_sig), body),
        Err(InteractError::Signature(_))
    ));
    // Signed, but not an answer click: acknowledged, nothing done.
    assert_eq!(
        c.interact(Some(&now), Some(&good), body).unwrap()["outcome"],
        "ignored"
    );
    let junk = b"payload=%7Bnope";
    let junk_sig = interact::sign(b"sign-secret-2", &now, junk);
    assert!(matches!(
        c.interact(Some(&now), Some(&junk_sig), junk),
        Err(InteractError::BadRequest(_))
    ));
}

#[test]
fn after_a_restart_a_question_message_is_found_again_from_the_run_events() {
    let dir = tempfile::tempdir().unwrap();
    let (c, store) = chat(enabled("http://127.0.0.1:9/api"), dir.path());
    let row = store.create_run(NewRun::default()).unwrap();
    let qid = "01JNDEM0000000000000000004";
    let asked = json!({"question_id": qid, "question": "Ship it?", "stage": "ask",
                       "options": [{"key": "Y", "label": "Yes"}, {"key": "N", "label": "No"}]});
    store
        .append(
            &row.id,
            EventDraft::new(event_kind::INTERVIEW_STARTED, asked),
        )
        .unwrap();
    // Nothing was posted for it: nothing to update.
    assert!(c.take_posted(&row, qid, "svc run R").is_none());
    store
        .append(
            &row.id,
            EventDraft::new(
                kinds::POSTED,
                json!({"event": "run.blocked", "channel": "C1", "ts": "1700000000.000001",
                       "question_id": qid}),
            ),
        )
        .unwrap();
    // This Chat never posted it (a new process): the events say where and what.
    let (at, m) = c.take_posted(&row, qid, "svc run R").unwrap();
    assert_eq!(
        (at.channel.as_str(), at.ts.as_str()),
        ("C1", "1700000000.000001")
    );
    assert!(m.text.contains("Ship it? [Yes / No]"), "{}", m.text);
    assert!(m.blocks.iter().any(|b| b["type"] == "actions"));
    // Once updated, it is not updated again.
    store
        .append(
            &row.id,
            EventDraft::new(kinds::UPDATED, json!({"question_id": qid, "channel": "C1"})),
        )
        .unwrap();
    assert!(c.take_posted(&row, qid, "svc run R").is_none());
}

#[test]
fn the_settings_refuse_a_bad_channel_or_api_url() {
    let mut s = Settings::default();
    s.run.notifications.channel = Some("two words".into());
    assert!(s
        .validate()
        .unwrap_err()
        .to_string()
        .contains("run.notifications.channel"));
    let mut s = Settings::default();
    s.server.integrations.chat.api_url = "slack.com/api".into();
    assert!(s.validate().unwrap_err().to_string().contains("api_url"));
    let mut s = Settings::default();
    s.run.notifications.channel = Some("#runs".into());
    assert!(s.validate().is_ok());
}
