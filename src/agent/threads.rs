//! Conversations kept for fidelity `full` (engine.md §5.3): a thread key maps to the
//! conversation of the last successful agent session or prompt call on that thread, so the
//! next node on the same thread continues it ([`text_only`] for calls without tools).
//! Stored only after success; dropped on failure. In memory only; a conversation is plain
//! serde data, so the engine may persist it. Must not decide fidelity or thread keys (the
//! engine does).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::llm::{Message, Part, Provider};

/// One kept conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thread {
    pub provider: Provider,
    pub model: String,
    pub messages: Vec<Message>,
}

/// The thread cache of one run (cheap to clone; clones share it).
#[derive(Debug, Clone, Default)]
pub struct Threads {
    inner: Arc<Mutex<HashMap<String, Thread>>>,
}

impl Threads {
    pub fn new() -> Self {
        Self::default()
    }

    /// The conversation to continue, if the thread has one for the same provider (a
    /// conversation is provider-specific: opaque reasoning blocks only round-trip there).
    pub fn get(&self, key: &str, provider: Provider) -> Option<Thread> {
        self.inner
            .lock()
            .get(key)
            .filter(|t| t.provider == provider)
            .cloned()
    }

    /// Keeps a successful session's conversation.
    pub fn store(&self, key: &str, thread: Thread) {
        self.inner.lock().insert(key.to_string(), thread);
    }

    /// Forgets a thread (after a failed session).
    pub fn remove(&self, key: &str) {
        self.inner.lock().remove(key);
    }

    pub fn len(&self) -> usize {
        self.inner.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.lock().is_empty()
    }
}

/// A conversation as plain text turns, for a call without tools (a prompt stage continuing
/// an agent's thread): tool calls, tool results and provider-specific blocks are left out,
/// turns left empty are dropped and same-role neighbours are merged.
pub fn text_only(messages: Vec<Message>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    for m in messages {
        let text = m.text();
        if text.trim().is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.role == m.role => {
                if let Some(Part::Text { text: t }) = last.parts.last_mut() {
                    t.push_str("\n\n");
                    t.push_str(&text);
                }
            }
            _ => out.push(Message {
                role: m.role,
                parts: vec![Part::text(text)],
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_get_remove_and_round_trip() {
        let t = Threads::new();
        let th = Thread {
            provider: Provider::Anthropic,
            model: "claude-sonnet-4-6".into(),
            messages: vec![Message::user("hi"), Message::assistant("hello")],
        };
        t.store("main", th.clone());
        assert_eq!(t.get("main", Provider::Anthropic), Some(th.clone()));
        assert_eq!(t.get("main", Provider::OpenAi), None);
        let json = serde_json::to_string(&th).unwrap_or_default();
        let back: Option<Thread> = serde_json::from_str(&json).ok();
        assert_eq!(back, Some(th));
        t.remove("main");
        assert!(t.is_empty());
    }

    #[test]
    fn text_only_keeps_the_words_of_an_agent_conversation() {
        use crate::llm::ToolCall;
        let call = Part::ToolCall(ToolCall {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: serde_json::json!({"file_path": "a"}),
            signature: None,
        });
        let result = Part::ToolResult {
            id: "c1".into(),
            name: "read_file".into(),
            content: "file body".into(),
            is_error: false,
        };
        let msgs = vec![
            Message::user("Fix the bug"),
            Message {
                role: crate::llm::Role::Assistant,
                parts: vec![Part::text("Looking."), call],
            },
            Message {
                role: crate::llm::Role::User,
                parts: vec![result],
            },
            Message::assistant("Fixed it."),
        ];
        let plain = text_only(msgs);
        assert_eq!(
            plain,
            vec![
                Message::user("Fix the bug"),
                Message::assistant("Looking.\n\nFixed it."),
            ]
        );
    }
}
