//! Chat through the real binary against a scripted chat service in Slack's Web API wire format
//! (`support::slack`): a run that opted into notifications posts its blocked question with a
//! button per option and a link to the question; a signed interactivity callback answers it
//! (principal `chat`), the message shows who answered what, a second click is told it was
//! already answered, and the run goes on to post its outcome; forged, unsigned and old
//! callbacks get 401; a chat service that is down never fails or blocks a run.

use crate::support::server::*;
use crate::support::slack::{self, Slack};
use serde_json::{json, Value};
use svc::internal::test_tools::{require, Tool};

const BOT: &str = "xoxb-test-bot-token-9c1e";
const SIGNING: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const ORIGIN: &str = "http://svc.example";

const GATE: &str = r#"digraph gate {
  goal="Ship the fix"
  start [shape=Mdiamond]
  ask [shape=hexagon, label="Ship it?"]
  shipped [shape=parallelogram, script="echo shipped"]
  held [shape=parallelogram, script="echo held"]
  exit [shape=Msquare]
  start -> ask
  ask -> shipped [label="Yes"]
  ask -> held [label="No"]
  shipped -> exit
  held -> exit
}"#;

/// A server whose chat integration talks to `slack`, with the web UI's URL set so links
/// open the run page, and the bot token and signing secret in its vault.
fn server_for(slack: &Slack, extra: &str) -> Server {
    let settings = format!(
        "[server.web]\nenabled = true\nurl = \"{ORIGIN}\"\n\
         [server.auth]\nmethods = [\"dev-token\"]\n\
         [server.integrations.chat]\nenabled = true\napi_url = \"{}\"\n{extra}",
        slack.api_url
    );
    let s = Server::with(Opts {
        settings: Some(&settings),
        env: vec![(
            "SESSION_SECRET",
            "a-session-secret-of-at-least-32-bytes!!".to_string(),
        )],
        ..Opts::default()
    });
    store_key(&s, "CHAT_BOT_TOKEN", BOT);
    store_key(&s, "CHAT_SIGNING_SECRET", SIGNING);
    s
}

fn gate_run(s: &Server, notifications: Value) -> String {
    let id = create_run(
        s,
        &json!({"workflow": package(GATE), "notifications": notifications}),
    );
    start_run(s, &id);
    id
}

/// Posts a callback signed with `secret` at `timestamp`.
fn callback(s: &Server, payload: &Value, secret: &str, timestamp: i64) -> Resp {
    let body = slack::form(payload);
    let ts = timestamp.to_string();
    let sig = slack::signature(secret, &ts, &body);
    s.raw(
        "POST",
        "/api/v1/webhooks/chat",
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("X-Slack-Request-Timestamp", ts.as_str()),
            ("X-Slack-Signature", sig.as_str()),
        ],
        Some(&body),
    )
}

/// The id of the run's open question (waiting for it to be asked).
fn open_question(s: &Server, id: &str) -> String {
    let qs = s
        .get(&format!("/api/v1/runs/{id}/questions?wait=30s"))
        .json();
    qs["data"][0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no open question: {qs}"))
        .to_string()
}

fn wait_calls(slack: &Slack, method: &str, n: usize) -> Vec<slack::Call> {
    wait_for(30, &format!("{n} {method} call(s)"), || {
        let c = slack.calls_of(method);
        (c.len() >= n).then_some(c)
    })
}

fn kinds(s: &Server, id: &str) -> Vec<String> {
    run_events(s, id)
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_blocked_run_posts_its_question_and_a_signed_button_click_answers_it() {
    require(Tool::Git);
    let slack = Slack::start(BOT);
    let s = server_for(&slack, "");
    let id = gate_run(
        &s,
        json!({"enabled": true, "channel": "C0RUNS", "events": ["run.blocked", "run.completed"]}),
    );

    // The question, posted with the bot token: its text, stage, one button per option
    // (each its own action id) and a link that opens the run page at the question.
    let post = wait_calls(&slack, "chat.postMessage", 1).remove(0);
    assert_eq!(
        post.authorization.as_deref(),
        Some(format!("Bearer {BOT}").as_str())
    );
    assert_eq!(post.body["channel"], "C0RUNS");
    let qid = open_question(&s, &id);
    let text = post.body["text"].as_str().unwrap();
    assert!(
        text.contains("Ship it?") && text.contains("Yes / No"),
        "{text}"
    );
    let all = post.body["blocks"].to_string();
    assert!(all.contains("Stage `ask`"), "{all}");
    let elements: Vec<Value> = post.body["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().cloned().unwrap())
        .collect();
    let labels: Vec<&str> = elements
        .iter()
        .map(|e| e["text"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["Yes", "No", "Open in svc"]);
    let ids: std::collections::HashSet<&str> = elements
        .iter()
        .map(|e| e["action_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "each button has its own action id");
    assert_eq!(
        elements[2]["url"],
        format!("{ORIGIN}/runs/{id}#question-{qid}").as_str()
    );
    wait_for(30, "chat.posted", || {
        kinds(&s, &id)
            .contains(&"chat.posted".to_string())
            .then_some(())
    });

    // Ada clicks "No": a signed callback answers the question as principal chat.
    let ts = "1700000000.000001";
    let click = slack::click(&post, ts, "No", ("U0ADA", "ada"));
    let r = callback(&s, &click, SIGNING, slack::now());
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["outcome"], "answered", "{}", r.text());
    assert_eq!(r.json()["answer"], "No");
    let run = wait_run_end(&s, &id);
    assert_eq!(run["lifecycle"]["status"]["kind"], "succeeded", "{run}");
    let events = run_events(&s, &id);
    let answered = events
        .iter()
        .find(|e| e["event"] == "interview.completed")
        .unwrap();
    assert_eq!(answered["properties"]["answer"], "No");
    assert_eq!(
        answered["properties"]["answered_by"],
        json!({"kind": "chat", "team_id": "T0TEAM", "user_id": "U0ADA", "user_name": "ada"})
    );
    // The run went the way Ada chose.
    let k = kinds(&s, &id);
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "stage.completed" && e["node_id"] == "held"),
        "{k:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| e["event"] == "stage.started" && e["node_id"] == "shipped"),
        "{k:?}"
    );

    // The API is too late as well: 409 naming the first answer and who gave it.
    let r = s.post(
        &format!("/api/v1/runs/{id}/questions/{qid}/answer"),
        r#"{"selected_option_key": "Y"}"#,
    );
    let b = assert_error(&r, 409);
    assert_eq!(b["errors"][0]["code"], "question_already_answered", "{b}");
    let detail = b["errors"][0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("by ada in chat") && detail.contains("\"No\""),
        "{detail}"
    );

    // The message now says who answered what, without buttons.
    let update = wait_calls(&slack, "chat.update", 1).remove(0);
    assert_eq!(
        (update.body["channel"].as_str(), update.body["ts"].as_str()),
        (Some("C0RUNS"), Some(ts))
    );
    let shown = update.body.to_string();
    assert!(shown.contains("Answered *No* by ada"), "{shown}");
    assert!(!update.body["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["type"] == "actions"));

    // Bob clicks "Yes" too late: told it was already answered; nothing changes.
    let late = slack::click(&post, ts, "Yes", ("U0BOB", "bob"));
    let r = callback(&s, &late, SIGNING, slack::now());
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["outcome"], "already_answered", "{}", r.text());
    let told = wait_calls(&slack, "chat.postEphemeral", 1).remove(0);
    assert_eq!(told.body["user"], "U0BOB");
    assert!(
        told.body["text"]
            .as_str()
            .unwrap()
            .contains("already answered"),
        "{}",
        told.body
    );

    // The outcome is posted too, naming the run and linking it.
    let posts = wait_calls(&slack, "chat.postMessage", 2);
    let done = posts[1].body.to_string();
    assert!(
        done.contains("succeeded") && done.contains(&format!("{ORIGIN}/runs/{id}")),
        "{done}"
    );

    // The bot token is in no event.
    assert!(!s
        .get(&format!("/api/v1/runs/{id}/events?limit=1000"))
        .text()
        .contains(BOT));
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn forged_unsigned_and_old_callbacks_get_401_and_answer_nothing() {
    require(Tool::Git);
    let slack = Slack::start(BOT);
    let s = server_for(
        &slack,
        "[run.notifications]\nenabled = true\nchannel = \"C0RUNS\"\n",
    );
    // The channel and events come from [run.notifications].
    let id = gate_run(&s, Value::Null);
    let post = wait_calls(&slack, "chat.postMessage", 1).remove(0);
    let click = slack::click(&post, "1700000000.000001", "Yes", ("U0EVE", "eve"));

    // Signed with another secret.
    let r = callback(&s, &click, "not-the-signing-secret", slack::now());
    let b = assert_error(&r, 401);
    assert!(
        b["errors"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("X-Slack-Signature"),
        "{b}"
    );
    // Signed, but six minutes old (a replay).
    let r = callback(&s, &click, SIGNING, slack::now() - 360);
    let b = assert_error(&r, 401);
    assert!(
        b["errors"][0]["detail"].as_str().unwrap().contains("stale"),
        "{b}"
    );
    // No signature at all.
    let body = slack::form(&click);
    let r = s.raw(
        "POST",
        "/api/v1/webhooks/chat",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        Some(&body),
    );
    assert_error(&r, 401);
    // A signed body that is not a callback: 400.
    let junk = b"payload=%7Bnot-json".to_vec();
    let now = slack::now().to_string();
    let sig = slack::signature(SIGNING, &now, &junk);
    let r = s.raw(
        "POST",
        "/api/v1/webhooks/chat",
        &[
            ("X-Slack-Request-Timestamp", now.as_str()),
            ("X-Slack-Signature", sig.as_str()),
        ],
        Some(&junk),
    );
    assert_error(&r, 400);

    // The question is still open; the API answers it.
    assert_eq!(status_kind(&s, &id), "blocked");
    let qid = open_question(&s, &id);
    let r = s.post(
        &format!("/api/v1/runs/{id}/questions/{qid}/answer"),
        r#"{"value": "Yes"}"#,
    );
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(
        wait_run_end(&s, &id)["lifecycle"]["status"]["kind"],
        "succeeded"
    );
    // Answered in svc: the chat message says so and loses its buttons.
    let update = wait_calls(&slack, "chat.update", 1).remove(0);
    assert!(
        update.body.to_string().contains("Answered *Yes* in svc"),
        "{}",
        update.body
    );
    // A click after the API's answer: the first answer stands, the clicker is told.
    let r = callback(&s, &click, SIGNING, slack::now());
    assert_eq!(r.json()["outcome"], "already_answered", "{}", r.text());
    let told = wait_calls(&slack, "chat.postEphemeral", 1).remove(0);
    assert_eq!(told.body["user"], "U0EVE");
    let answers: Vec<Value> = run_events(&s, &id)
        .into_iter()
        .filter(|e| e["event"] == "interview.completed")
        .collect();
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["properties"]["answered_by"]["kind"], "user");
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_chat_service_that_is_down_never_fails_or_blocks_a_run() {
    require(Tool::Git);
    let slack = Slack::start(BOT);
    slack.set_down(true);
    let s = server_for(&slack, "");
    let id = gate_run(&s, json!({"enabled": true, "channel": "C0RUNS"}));
    wait_calls(&slack, "chat.postMessage", 1);
    let qid = open_question(&s, &id);
    let r = s.post(
        &format!("/api/v1/runs/{id}/questions/{qid}/answer"),
        r#"{"value": "Yes"}"#,
    );
    assert_eq!(r.status, 204, "{}", r.text());
    let run = wait_run_end(&s, &id);
    assert_eq!(run["lifecycle"]["status"]["kind"], "succeeded", "{run}");
    // Each failed try is on the run's record, with the service's answer and when it is
    // tried again.
    let failed = |event: &str| {
        run_events(&s, &id)
            .into_iter()
            .find(|e| e["event"] == "chat.failed" && e["properties"]["event"] == event)
    };
    let blocked = wait_for(30, "chat.failed for the question", || failed("run.blocked"));
    let ended = wait_for(30, "chat.failed for the outcome", || {
        failed("run.completed")
    });
    for f in [&blocked, &ended] {
        let p = &f["properties"];
        assert_eq!(p["method"], "chat.postMessage", "{f}");
        assert!(p["error"].as_str().unwrap().contains("503"), "{f}");
        assert_eq!(
            (p["attempt"].as_u64(), p["retry_in_secs"].as_u64()),
            (Some(1), Some(2)),
            "{f}"
        );
    }
    // The status entry shows the error; no secret anywhere.
    let chat = chat_entry(&s);
    assert_eq!(chat["status"], "error", "{chat}");
    assert!(chat["last_error"]["message"]
        .as_str()
        .unwrap()
        .contains("503"));
    assert_eq!(chat["metadata"]["bot_token_set"], true);
    let list = s.get("/api/v1/system/integrations").text();
    assert!(!list.contains(BOT) && !list.contains(SIGNING));
    let events = s
        .get(&format!("/api/v1/runs/{id}/events?limit=1000"))
        .text();
    assert!(!events.contains(BOT) && !events.contains(SIGNING));
    // The failures are in the server's log, the token is not.
    let log = s.stderr();
    assert!(log.contains("chat.postMessage"), "{log}");
    assert!(!log.contains(BOT) && !log.contains(SIGNING));

    // Back up: the outcome is delivered by a later try; the question, answered meanwhile,
    // is not posted late; the status clears.
    slack.set_down(false);
    let posted = wait_for(60, "the outcome posted by a retry", || {
        run_events(&s, &id)
            .into_iter()
            .find(|e| e["event"] == "chat.posted")
    });
    assert_eq!(posted["properties"]["event"], "run.completed", "{posted}");
    let up: Vec<slack::Call> = slack
        .calls_of("chat.postMessage")
        .into_iter()
        .filter(|c| {
            c.body["text"]
                .as_str()
                .is_some_and(|t| t.contains("succeeded"))
        })
        .collect();
    assert!(!up.is_empty());
    assert_eq!(chat_entry(&s)["status"], "configured");
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(
        !run_events(&s, &id)
            .iter()
            .any(|e| e["event"] == "chat.posted" && e["properties"]["event"] == "run.blocked"),
        "a closed question was posted late"
    );
}

fn chat_entry(s: &Server) -> Value {
    let list = s.get("/api/v1/system/integrations").json();
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["provider"] == "chat")
        .unwrap_or_else(|| panic!("no chat entry: {list}"))
        .clone()
}

#[test]
fn the_chat_entry_says_what_is_missing_and_bad_notifications_are_refused() {
    let slack = Slack::start(BOT);
    let settings = format!(
        "[server.auth]\nmethods = [\"dev-token\"]\n\
         [server.integrations.chat]\nenabled = true\napi_url = \"{}\"\n",
        slack.api_url
    );
    let s = Server::with(Opts {
        settings: Some(&settings),
        ..Opts::default()
    });
    let entry = || {
        s.get("/api/v1/system/integrations").json()["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["provider"] == "chat")
            .unwrap()
            .clone()
    };
    let e = entry();
    assert_eq!(e["status"], "missing_credentials", "{e}");
    assert_eq!(
        e["missing_credentials"],
        json!(["CHAT_BOT_TOKEN", "CHAT_SIGNING_SECRET"])
    );
    assert_eq!(e["metadata"]["api_url"], slack.api_url.as_str());
    store_key(&s, "CHAT_BOT_TOKEN", BOT);
    store_key(&s, "CHAT_SIGNING_SECRET", SIGNING);
    let e = entry();
    assert_eq!(
        (e["status"].as_str(), e["configured"].as_bool()),
        (Some("configured"), Some(true)),
        "{e}"
    );

    for bad in [
        json!({"channel": "two words"}),
        json!({"events": ["run.started"]}),
        json!({"enabled": "yes"}),
        json!({"webhook": "x"}),
    ] {
        let r = s.post(
            "/api/v1/runs",
            &json!({"workflow": package(HELLO), "notifications": bad}).to_string(),
        );
        assert_error(&r, 400);
    }
}
