//! A scripted chat service for tests: a `tiny_http` server on a loopback port speaking
//! Slack's Web API wire format (`POST /api/<method>` with a bearer bot token and a JSON body;
//! HTTP 200 `{"ok": true, ...}` or `{"ok": false, "error": ...}`) for `chat.postMessage`,
//! `chat.update` and `chat.postEphemeral`. Every call is recorded (method, the
//! `Authorization` header, the body); it can be taken down (every call answered 503), and
//! it builds and signs interactivity callbacks (`block_actions` clicks, `X-Slack-Signature`
//! v0) the way Slack sends them to svc.

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// One call the service received.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub authorization: Option<String>,
    pub body: Value,
}

#[derive(Default)]
struct State {
    token: String,
    calls: Vec<Call>,
    down: bool,
    next_ts: u64,
}

pub struct Slack {
    /// The Web API base (`api_url` in `[server.integrations.chat]`).
    pub api_url: String,
    state: Arc<Mutex<State>>,
    server: Arc<tiny_http::Server>,
}

impl Drop for Slack {
    fn drop(&mut self) {
        self.server.unblock();
    }
}

impl Slack {
    /// A service accepting the bot token `token`.
    pub fn start(token: &str) -> Slack {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind"));
        let port = server.server_addr().to_ip().expect("ip").port();
        let state = Arc::new(Mutex::new(State {
            token: token.to_string(),
            next_ts: 1,
            ..State::default()
        }));
        for _ in 0..4 {
            let server = Arc::clone(&server);
            let state = Arc::clone(&state);
            std::thread::spawn(move || {
                while let Ok(req) = server.recv() {
                    handle(req, &state);
                }
            });
        }
        Slack {
            api_url: format!("http://127.0.0.1:{port}/api"),
            state,
            server,
        }
    }

    /// Every call answered HTTP 503 (`true`) or served again (`false`).
    pub fn set_down(&self, down: bool) {
        self.state.lock().unwrap().down = down;
    }

    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    /// Calls of `method` answered or not.
    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.method == method)
            .collect()
    }
}

fn handle(mut req: tiny_http::Request, state: &Arc<Mutex<State>>) {
    let method = req
        .url()
        .trim_start_matches("/api/")
        .split('?')
        .next()
        .unwrap_or("")
        .to_string();
    let authorization = req
        .headers()
        .iter()
        .find(|h| h.field.equiv("Authorization"))
        .map(|h| h.value.as_str().to_string());
    let mut text = String::new();
    let _ = std::io::Read::read_to_string(req.as_reader(), &mut text);
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let mut st = state.lock().unwrap();
    st.calls.push(Call {
        method: method.clone(),
        authorization: authorization.clone(),
        body: body.clone(),
    });
    if st.down {
        drop(st);
        let _ = req.respond(
            tiny_http::Response::from_string("<html>503 Service Unavailable</html>")
                .with_status_code(503),
        );
        return;
    }
    let answer = if authorization.as_deref() != Some(&format!("Bearer {}", st.token)) {
        json!({"ok": false, "error": "invalid_auth"})
    } else {
        match method.as_str() {
            "chat.postMessage" => match body["channel"].as_str() {
                Some(c) if c.starts_with('C') => {
                    let ts = format!("1700000000.{:06}", st.next_ts);
                    st.next_ts += 1;
                    json!({"ok": true, "channel": c, "ts": ts,
                           "message": {"text": body["text"], "ts": ts, "blocks": body["blocks"]}})
                }
                _ => json!({"ok": false, "error": "channel_not_found"}),
            },
            "chat.update" => json!({"ok": true, "channel": body["channel"], "ts": body["ts"],
                                    "text": body["text"]}),
            "chat.postEphemeral" => json!({"ok": true, "message_ts": "1700000099.000001"}),
            _ => json!({"ok": false, "error": "unknown_method"}),
        }
    };
    drop(st);
    let _ = req.respond(
        tiny_http::Response::from_string(answer.to_string()).with_header(
            "Content-Type: application/json; charset=utf-8"
                .parse::<tiny_http::Header>()
                .expect("header"),
        ),
    );
}

/// The `block_actions` payload Slack sends when `user` clicks the button labelled `label`
/// on the message `post` (a `chat.postMessage` call) that was posted as `ts`.
pub fn click(post: &Call, ts: &str, label: &str, user: (&str, &str)) -> Value {
    let button = post.body["blocks"]
        .as_array()
        .expect("blocks")
        .iter()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().cloned().unwrap_or_default())
        .find(|e| e["text"]["text"] == label)
        .unwrap_or_else(|| panic!("no button {label} in {}", post.body));
    json!({
        "type": "block_actions",
        "team": {"id": "T0TEAM", "domain": "acme"},
        "user": {"id": user.0, "username": user.1, "name": user.1, "team_id": "T0TEAM"},
        "api_app_id": "A0APP",
        "token": "deprecated-verification-token",
        "container": {"type": "message", "message_ts": ts,
                      "channel_id": post.body["channel"], "is_ephemeral": false},
        "trigger_id": "1.2.3",
        "channel": {"id": post.body["channel"], "name": "runs"},
        "message": {"type": "message", "ts": ts, "text": post.body["text"],
                    "blocks": post.body["blocks"]},
        "response_url": "https://hooks.slack.invalid/actions/T0TEAM/1/x",
        "actions": [{"action_id": button["action_id"], "block_id": "b",
                     "text": button["text"], "value": button["value"], "type": "button",
                     "action_ts": "1700000001.000001"}]
    })
}

/// The form body Slack posts: `payload=<url-encoded JSON>`.
pub fn form(payload: &Value) -> Vec<u8> {
    let mut s = String::from("payload=");
    s.extend(form_urlencoded::byte_serialize(
        payload.to_string().as_bytes(),
    ));
    s.into_bytes()
}

/// `X-Slack-Signature` of `body` sent at `timestamp` under `secret`.
pub fn signature(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(format!("v0:{timestamp}:").as_bytes());
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("v0={hex}")
}

/// Now, as Slack's `X-Slack-Request-Timestamp` (Unix seconds).
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64
}
