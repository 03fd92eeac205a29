//! What svc says in chat, as Slack Block Kit messages with a plain `text` fallback: a run
//! that succeeded or failed (its title linked to the run, its outcome, its pull request),
//! a question a run is blocked on (the question, its stage, its options as one button each
//! with its own `action_id`, and a link that opens the run page at the question), and the
//! question's message once answered (the buttons replaced by who answered what).
//!
//! Owns: message content. Must not touch: sending, runs' state, secrets.

use super::interact::ButtonValue;
use crate::store::{RunRow, RunStatus};
use serde_json::{json, Value};

/// `action_id` prefix of the answer buttons (`svc_answer_<n>`: each button its own id,
/// as Slack refuses a message whose buttons share one).
pub const ANSWER_ACTION_PREFIX: &str = "svc_answer_";
/// `action_id` of the link button.
pub const OPEN_ACTION: &str = "svc_open";
/// Slack allows 25 elements per actions block; one is the link.
const MAX_BUTTONS: usize = 24;
/// Slack's limit for a button's text.
const MAX_BUTTON_TEXT: usize = 75;

/// A message: the fallback `text` and its `blocks`.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub text: String,
    pub blocks: Vec<Value>,
}

impl Message {
    /// The body of `chat.postMessage` to `channel`.
    pub fn post_body(&self, channel: &str) -> Value {
        json!({"channel": channel, "text": self.text, "blocks": self.blocks,
               "unfurl_links": false})
    }

    /// The body of `chat.update` of message `ts` in `channel`.
    pub fn update_body(&self, channel: &str, ts: &str) -> Value {
        json!({"channel": channel, "ts": ts, "text": self.text, "blocks": self.blocks})
    }
}

/// Escapes text for Slack's mrkdwn (`&`, `<`, `>`).
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Who a principal (as recorded in `answered_by`) is, for people: a chat user's name
/// (else their `<@id>` mention), a user's login, else the principal's kind.
pub fn principal_name(p: &Value) -> String {
    let s = |k: &str| p.get(k).and_then(Value::as_str).filter(|v| !v.is_empty());
    match s("kind") {
        Some("chat") => match (s("user_name"), s("user_id")) {
            (Some(name), _) => name.to_string(),
            (None, Some(id)) => format!("<@{id}>"),
            (None, None) => "someone in chat".into(),
        },
        Some("user") => s("login")
            .or_else(|| p.pointer("/identity/subject").and_then(Value::as_str))
            .unwrap_or("a user")
            .to_string(),
        Some(kind) => kind.to_string(),
        None => "someone".into(),
    }
}

/// `<url|text>` when `link` is a URL, else the text and the link beside it.
fn linked(text: &str, link: &str) -> String {
    if link.starts_with("http://") || link.starts_with("https://") {
        format!("<{}|{}>", link.replace('|', "%7C"), escape(text))
    } else {
        format!("{} ({})", escape(text), escape(link))
    }
}

fn run_name(row: &RunRow) -> String {
    if row.title.trim().is_empty() {
        row.id.clone()
    } else {
        row.title.clone()
    }
}

fn section(mrkdwn: String) -> Value {
    json!({"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn}})
}

/// The pull request line of a run that has one.
fn pull_request_line(row: &RunRow) -> Option<String> {
    let pr = row.pull_request.as_ref()?;
    let url = pr.get("html_url")?.as_str()?;
    let name = format!(
        "{}/{}#{}",
        pr.get("owner").and_then(Value::as_str).unwrap_or(""),
        pr.get("repo").and_then(Value::as_str).unwrap_or(""),
        pr.get("number").map(Value::to_string).unwrap_or_default()
    );
    Some(format!("Pull request: {}", linked(&name, url)))
}

/// A run that ended: `run.completed` or `run.failed`.
pub fn run_ended(row: &RunRow, run_link: &str) -> Message {
    let name = run_name(row);
    let (icon, verb, reason) = match &row.status {
        RunStatus::Succeeded { reason } => (":white_check_mark:", "succeeded", reason.clone()),
        RunStatus::Failed { reason } => (":x:", "failed", reason.clone()),
        other => (":grey_question:", other.name(), String::new()),
    };
    let mut lines = vec![format!(
        "{icon} Run *{}* {verb}{}",
        linked(&name, run_link),
        if reason.is_empty() || reason == "completed" {
            String::new()
        } else {
            format!(" (`{}`)", escape(&reason))
        }
    )];
    if let Some(e) = row.error.as_deref().filter(|e| !e.is_empty()) {
        let cut: String = e.chars().take(500).collect();
        lines.push(format!("> {}", escape(&cut).replace('\n', "\n> ")));
    }
    let pr = pull_request_line(row);
    if let Some(p) = &pr {
        lines.push(p.clone());
    }
    let mut text = format!("Run {name} {verb}");
    if !reason.is_empty() && reason != "completed" {
        text.push_str(&format!(" ({reason})"));
    }
    if let Some(url) = row
        .pull_request
        .as_ref()
        .and_then(|p| p.get("html_url"))
        .and_then(Value::as_str)
    {
        text.push_str(&format!("; pull request {url}"));
    }
    Message {
        text,
        blocks: vec![section(lines.join("\n"))],
    }
}

/// A question the run is blocked on (`interview.started` properties `q`); `question_link`
/// opens the run page at the question.
pub fn question(row: &RunRow, q: &Value, run_link: &str, question_link: &str) -> Message {
    let s = |k: &str| q.get(k).and_then(Value::as_str).unwrap_or("");
    let qid = s("question_id");
    let name = run_name(row);
    let options: Vec<(String, String)> = q
        .get("options")
        .and_then(Value::as_array)
        .map(|o| {
            o.iter()
                .filter_map(|x| {
                    Some((
                        x.get("key")?.as_str()?.to_string(),
                        x.get("label")?.as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut blocks = vec![section(format!(
        ":raised_hand: Run *{}* is waiting for an answer",
        linked(&name, run_link)
    ))];
    let mut body = format!("*{}*", escape(s("question")));
    if !s("stage").is_empty() {
        body.push_str(&format!("\nStage `{}`", escape(s("stage"))));
    }
    if !options.is_empty() {
        let labels: Vec<String> = options.iter().map(|(_, l)| escape(l)).collect();
        body.push_str(&format!("\nOptions: {}", labels.join(" · ")));
    }
    blocks.push(section(body));
    let mut elements: Vec<Value> = options
        .iter()
        .take(MAX_BUTTONS)
        .enumerate()
        .map(|(i, (key, label))| {
            let value = ButtonValue {
                run_id: row.id.clone(),
                question_id: qid.to_string(),
                key: key.clone(),
            };
            json!({"type": "button", "action_id": format!("{ANSWER_ACTION_PREFIX}{i}"),
                   "text": {"type": "plain_text", "text": cut(label, MAX_BUTTON_TEXT)},
                   "value": value.encode()})
        })
        .collect();
    if question_link.starts_with("http://") || question_link.starts_with("https://") {
        elements.push(json!({"type": "button", "action_id": OPEN_ACTION,
                             "text": {"type": "plain_text", "text": "Open in svc"},
                             "url": question_link}));
    } else {
        blocks.push(section(format!("Answer in svc: {}", escape(question_link))));
    }
    if !elements.is_empty() {
        blocks.push(
            json!({"type": "actions", "block_id": format!("svc_q_{qid}"),
                           "elements": elements}),
        );
    }
    let labels: Vec<&str> = options.iter().map(|(_, l)| l.as_str()).collect();
    let mut text = format!("Run {name} is waiting for an answer: {}", s("question"));
    if !labels.is_empty() {
        text.push_str(&format!(" [{}]", labels.join(" / ")));
    }
    text.push_str(&format!(" {question_link}"));
    Message { text, blocks }
}

/// The question's message once it is no longer open: its blocks without the buttons, and
/// what happened (`outcome`, already in mrkdwn).
pub fn closed(blocks: &[Value], text: &str, outcome: &str) -> Message {
    let mut kept: Vec<Value> = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) != Some("actions"))
        .cloned()
        .collect();
    kept.push(json!({"type": "context", "elements": [{"type": "mrkdwn", "text": outcome}]}));
    let mut t = text.to_string();
    if !t.is_empty() {
        t.push_str(" — ");
    }
    t.push_str(outcome);
    Message {
        text: t,
        blocks: kept,
    }
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(status: RunStatus) -> RunRow {
        let store = crate::store::MemoryStore::new();
        let mut r = crate::store::test_support::new_run(&store, "Fix <the> greeting");
        r.status = status;
        r
    }

    #[test]
    fn an_ended_run_names_its_outcome_and_pull_request() {
        let mut r = row(RunStatus::Failed {
            reason: "publish_failed".into(),
        });
        r.error = Some("push refused".into());
        r.pull_request = Some(json!({"owner": "acme", "repo": "app", "number": 7,
                                     "html_url": "https://github.com/acme/app/pull/7"}));
        let m = run_ended(&r, "https://svc.example/runs/R");
        let b = m.blocks[0]["text"]["text"].as_str().unwrap();
        assert!(
            b.contains("<https://svc.example/runs/R|Fix &lt;the&gt; greeting>"),
            "{b}"
        );
        assert!(
            b.contains("failed (`publish_failed`)") && b.contains("> push refused"),
            "{b}"
        );
        assert!(
            b.contains("<https://github.com/acme/app/pull/7|acme/app#7>"),
            "{b}"
        );
        assert!(m.text.contains("failed (publish_failed)") && m.text.contains("pull/7"));
        let ok = run_ended(
            &row(RunStatus::Succeeded {
                reason: "completed".into(),
            }),
            "svc run R",
        );
        assert!(ok.text.ends_with("succeeded"), "{}", ok.text);
        assert!(ok.blocks[0]["text"]["text"]
            .as_str()
            .unwrap()
            .contains("(svc run R)"));
    }

    #[test]
    fn a_question_has_a_button_per_option_with_its_own_id_and_a_link_to_it() {
        let r = row(RunStatus::Blocked {
            blocked_reason: "human_input_required".into(),
        });
        let q = json!({"question_id": "Q1", "question": "Ship it?", "stage": "ask",
                       "options": [{"key": "Y", "label": "Yes"}, {"key": "N", "label": "No"}]});
        let link = "https://svc.example/runs/R#question-Q1";
        let m = question(&r, &q, "https://svc.example/runs/R", link);
        let actions = m.blocks.iter().find(|b| b["type"] == "actions").unwrap();
        let els = actions["elements"].as_array().unwrap();
        assert_eq!(els.len(), 3);
        let ids: Vec<&str> = els
            .iter()
            .map(|e| e["action_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["svc_answer_0", "svc_answer_1", "svc_open"]);
        assert_eq!(els[1]["text"]["text"], "No");
        let v = ButtonValue::decode(els[1]["value"].as_str().unwrap()).unwrap();
        assert_eq!((v.question_id.as_str(), v.key.as_str()), ("Q1", "N"));
        assert_eq!(els[2]["url"], link);
        assert!(
            m.text.contains("Ship it? [Yes / No]") && m.text.contains(link),
            "{}",
            m.text
        );
        // Answered: the buttons go, who answered what is said.
        let c = closed(&m.blocks, &m.text, "Answered *Yes* by ada");
        assert!(c.blocks.iter().all(|b| b["type"] != "actions"));
        assert_eq!(
            c.blocks.last().unwrap()["elements"][0]["text"],
            "Answered *Yes* by ada"
        );
    }
}
