//! Slack's interactivity callbacks: the request check (`X-Slack-Signature: v0=<hex>`, the
//! HMAC-SHA256 of `v0:<X-Slack-Request-Timestamp>:<raw body>` under the signing secret,
//! compared in constant time, the timestamp within 5 minutes of now) and the payload
//! (`payload=<JSON>` form field; a `block_actions` click on one of svc's answer buttons).
//!
//! Owns: verifying and reading a callback. Must not touch: runs, questions, HTTP.

use hmac::{Hmac, Mac};
use serde_json::{json, Value};

/// How far a request's timestamp may be from now (Slack's own advice: 5 minutes).
pub const MAX_SKEW_SECS: i64 = 5 * 60;

/// Checks a callback's signature and age. `now` is the Unix time in seconds.
pub fn verify(
    secret: &[u8],
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), String> {
    let ts_text = timestamp
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or("The request has no X-Slack-Request-Timestamp header.")?;
    let ts: i64 = ts_text
        .parse()
        .map_err(|_| "X-Slack-Request-Timestamp is not a Unix time in seconds.")?;
    if (now - ts).abs() > MAX_SKEW_SECS {
        return Err(format!(
            "X-Slack-Request-Timestamp is {} s from now (at most {MAX_SKEW_SECS} s): a stale or replayed request.",
            (now - ts).abs()
        ));
    }
    let sig = signature
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or("The request has no X-Slack-Signature header.")?;
    let hex = sig
        .strip_prefix("v0=")
        .ok_or("X-Slack-Signature must be `v0=<hex digest>`.")?;
    let expected = decode_hex(hex).ok_or("X-Slack-Signature is not a SHA-256 hex digest.")?;
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret)
        .map_err(|_| "The signing secret cannot be used as an HMAC key.")?;
    mac.update(format!("v0:{ts_text}:").as_bytes());
    mac.update(body);
    mac.verify_slice(&expected).map_err(|_| {
        "X-Slack-Signature does not match the request: it was not signed with the signing secret."
            .to_string()
    })
}

/// `v0=<hex>` for `body` sent at `timestamp` (tests, benchmarks, the scripted service).
pub fn sign(secret: &[u8], timestamp: &str, body: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<sha2::Sha256>::new_from_slice(secret) else {
        return String::new();
    };
    mac.update(format!("v0:{timestamp}:").as_bytes());
    mac.update(body);
    format!("v0={}", crate::base::hex(&mac.finalize().into_bytes()))
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() != 64 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The JSON of the callback's `payload` form field.
pub fn payload(body: &[u8]) -> Result<Value, String> {
    let text = form_urlencoded::parse(body)
        .find(|(k, _)| k == "payload")
        .map(|(_, v)| v.into_owned())
        .ok_or("The callback has no `payload` form field (application/x-www-form-urlencoded).")?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| format!("The callback's `payload` is not JSON: {e}"))?;
    if !v.is_object() {
        return Err("The callback's `payload` is not a JSON object.".into());
    }
    Ok(v)
}

/// What an answer button carries in its `value`: the run, the question and the option key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ButtonValue {
    pub run_id: String,
    pub question_id: String,
    pub key: String,
}

impl ButtonValue {
    pub fn encode(&self) -> String {
        json!({"run": self.run_id, "question": self.question_id, "key": self.key}).to_string()
    }

    pub fn decode(value: &str) -> Option<ButtonValue> {
        let v: Value = serde_json::from_str(value).ok()?;
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Some(ButtonValue {
            run_id: s("run")?,
            question_id: s("question")?,
            key: s("key")?,
        })
    }
}

/// A click on one of svc's answer buttons, read from a `block_actions` payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Click {
    pub button: ButtonValue,
    /// Principal `chat {team_id, user_id, user_name}`.
    pub team_id: String,
    pub user_id: String,
    pub user_name: Option<String>,
    /// The message the button is on (to update it).
    pub channel: Option<String>,
    pub message_ts: Option<String>,
    /// The message's blocks as the service sent them.
    pub blocks: Vec<Value>,
    pub text: String,
}

impl Click {
    pub fn principal(&self) -> Value {
        json!({"kind": "chat", "team_id": self.team_id, "user_id": self.user_id,
               "user_name": self.user_name})
    }

    /// Who answered, for messages: the user's name, else `<@id>`.
    pub fn who(&self) -> String {
        match &self.user_name {
            Some(n) if !n.is_empty() => n.clone(),
            _ => format!("<@{}>", self.user_id),
        }
    }
}

/// The answer click in `payload`, or `None` when it is something else (another interaction
/// type, the "Open in svc" link button, an action that is not svc's).
pub fn click(payload: &Value) -> Option<Click> {
    if payload.get("type").and_then(Value::as_str) != Some("block_actions") {
        return None;
    }
    let action = payload.get("actions")?.as_array()?.iter().find(|a| {
        a.get("action_id")
            .and_then(Value::as_str)
            .is_some_and(|id| id.starts_with(super::message::ANSWER_ACTION_PREFIX))
    })?;
    let button = ButtonValue::decode(action.get("value")?.as_str()?)?;
    let s = |p: &str| {
        payload
            .pointer(p)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let user_id = s("/user/id")?;
    let team_id = s("/team/id").or_else(|| s("/user/team_id"))?;
    Some(Click {
        button,
        team_id,
        user_id,
        user_name: s("/user/username").or_else(|| s("/user/name")),
        channel: s("/container/channel_id").or_else(|| s("/channel/id")),
        message_ts: s("/container/message_ts").or_else(|| s("/message/ts")),
        blocks: payload
            .pointer("/message/blocks")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        text: s("/message/text").unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"8f742231b10e8888abcd99yyyzzz85a5";

    #[test]
    fn a_signed_fresh_request_passes_and_anything_else_is_refused() {
        let body = b"payload=%7B%7D";
        let sig = sign(SECRET, "1700000000", body);
        assert!(sig.starts_with("v0=") && sig.len() == 67, "{sig}");
        let now = 1_700_000_100;
        assert_eq!(
            verify(SECRET, Some("1700000000"), Some(&sig), body, now),
            Ok(())
        );
        // Another body, another secret, a changed timestamp: refused.
        assert!(verify(SECRET, Some("1700000000"), Some(&sig), b"payload=x", now).is_err());
        assert!(verify(b"other", Some("1700000000"), Some(&sig), body, now).is_err());
        let e = verify(SECRET, Some("1700000001"), Some(&sig), body, now).unwrap_err();
        assert!(e.contains("does not match"), "{e}");
        // Older (or newer) than 5 minutes: refused even when signed.
        let e = verify(SECRET, Some("1700000000"), Some(&sig), body, now + 301).unwrap_err();
        assert!(e.contains("stale"), "{e}");
        assert!(verify(
            SECRET,
            Some("1700000000"),
            Some(&sig),
            body,
            1_700_000_000 - 301
        )
        .is_err());
        // Missing or malformed headers.
        assert!(verify(SECRET, None, Some(&sig), body, now)
            .unwrap_err()
            .contains("Timestamp"));
        assert!(verify(SECRET, Some("1700000000"), None, body, now)
            .unwrap_err()
            .contains("no X-Slack-Signature"));
        assert!(verify(SECRET, Some("soon"), Some(&sig), body, now).is_err());
        assert!(verify(SECRET, Some("1700000000"), Some("sha256=00"), body, now).is_err());
        assert!(verify(SECRET, Some("1700000000"), Some("v0=zz"), body, now).is_err());
    }

    #[test]
    fn a_block_actions_payload_names_the_button_and_the_user() {
        let value = ButtonValue {
            run_id: "R1".into(),
            question_id: "Q1".into(),
            key: "Y".into(),
        };
        let p = json!({
            "type": "block_actions",
            "team": {"id": "T1", "domain": "acme"},
            "user": {"id": "U1", "username": "ada", "team_id": "T1"},
            "container": {"type": "message", "message_ts": "111.222", "channel_id": "C1"},
            "message": {"ts": "111.222", "text": "q", "blocks": [{"type": "section"}]},
            "actions": [{"action_id": "svc_answer_0", "value": value.encode(), "type": "button"}]
        });
        let c = click(&p).unwrap();
        assert_eq!(c.button, value);
        assert_eq!(
            c.principal(),
            json!({"kind": "chat", "team_id": "T1", "user_id": "U1", "user_name": "ada"})
        );
        assert_eq!(
            (c.channel.as_deref(), c.message_ts.as_deref()),
            (Some("C1"), Some("111.222"))
        );
        // The link button, another type, or a foreign action: not an answer.
        let mut open = p.clone();
        open["actions"] = json!([{"action_id": "svc_open", "type": "button"}]);
        assert!(click(&open).is_none());
        let mut other = p.clone();
        other["type"] = json!("view_submission");
        assert!(click(&other).is_none());
        // The form field.
        let body = format!(
            "payload={}",
            form_urlencoded::byte_serialize(p.to_string().as_bytes()).collect::<String>()
        );
        assert_eq!(payload(body.as_bytes()).unwrap(), p);
        assert!(payload(b"token=x").is_err());
        assert!(payload(b"payload=%7Bnot").is_err());
    }
}
