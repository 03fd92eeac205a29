//! Unit tests of the integration service over in-memory tables and store.
//! Must not reach a real code host or chat service: the scripted servers of `tests/` do that.

use super::*;
use crate::store::{MemoryCodehost, MemoryStore, NewRun};
use serde_json::json;

struct NoWorkspaces;
impl WorkspaceLocator for NoWorkspaces {
    fn locate(&self, _: &RunRow) -> Option<(crate::workspace::Git, String)> {
        None
    }
}

fn service(dir: &std::path::Path) -> (Arc<Integrations>, Arc<dyn RunStore>) {
    let store: Arc<dyn RunStore> = Arc::new(MemoryStore::new());
    let i = Integrations::new(
        SettingsHandle::new(Settings::default()),
        dir.to_path_buf(),
        Arc::new(MemoryCodehost::default()),
        Arc::clone(&store),
        Arc::new(NoWorkspaces),
    );
    (i, store)
}

#[test]
fn linking_checks_from_webhooks_and_unlinking() {
    let dir = tempfile::tempdir().unwrap();
    let (i, store) = service(dir.path());
    i.vault()
        .set(
            codehost::WEBHOOK_SECRET_KEY,
            "whsec",
            crate::settings::vault::SecretType::Environment,
        )
        .unwrap();
    let row = store.create_run(NewRun::default()).unwrap();
    let user = json!({"kind": "user"});
    assert!(matches!(
        i.link(&row, "https://gitlab.com/a/b/pull/1", &user),
        Err(Error::Precondition {
            code: "unsupported_host",
            ..
        })
    ));
    assert!(matches!(
        i.link(&row, "https://github.com/a/b/issues/1", &user),
        Err(Error::Precondition {
            code: "invalid_pull_request_url",
            ..
        })
    ));
    let link = i
        .link(&row, "https://github.com/acme/app/pull/12", &user)
        .unwrap();
    assert_eq!(link.number, 12);
    let row = store.get_run(&row.id).unwrap().unwrap();
    assert_eq!(row.pull_request.as_ref().unwrap()["number"], 12);

    // A pull_request delivery sets the details and the head; a check on that head counts.
    let deliver = |id: &str, event: &str, body: Value| {
        let bytes = body.to_string().into_bytes();
        let sig = webhooks::sign(b"whsec", &bytes);
        i.receive(webhooks::Delivery {
            event: Some(event),
            delivery_id: Some(id),
            signature: Some(&sig),
            body: &bytes,
        })
    };
    let repo = json!({"name": "app", "full_name": "acme/app", "owner": {"login": "acme"}});
    let pr = json!({"action": "synchronize", "repository": repo, "pull_request": {
        "number": 12, "state": "open", "draft": false, "merged": false, "additions": 5,
        "deletions": 2, "comments": 1, "review_comments": 2, "head": {"sha": "h1", "ref": "svc/run/x"},
        "base": {"ref": "main"}, "user": {"login": "svc"}}});
    let r = deliver("d1", "pull_request", pr.clone()).unwrap();
    assert_eq!((r.outcome.as_str(), r.runs.len()), ("applied", 1));
    let check = |status: &str, conclusion: Option<&str>| {
        json!({"action": "completed", "repository": repo,
        "check_run": {"name": "test", "status": status, "conclusion": conclusion, "head_sha": "h1",
                      "started_at": "2026-01-01T00:00:00Z", "completed_at": "2026-01-01T00:01:30Z",
                      "output": {"title": "1 failed", "summary": "test_x broke"}, "pull_requests": []}})
    };
    deliver("d2", "check_run", check("completed", Some("failure"))).unwrap();
    let (kept, head, _) = i.kept(&row.id).unwrap().unwrap();
    assert_eq!(head.as_deref(), Some("h1"));
    assert_eq!(kept.comments, 3);
    assert_eq!(pulls::Verdict::of(&kept.checks), pulls::Verdict::Failed);
    assert_eq!(
        kept.board_json()["checks"],
        json!([{"name": "test", "status": "failure", "duration_secs": 90}])
    );
    // A replay does nothing; a forged delivery is refused.
    assert_eq!(
        deliver("d2", "check_run", check("completed", Some("success")))
            .unwrap()
            .outcome,
        "duplicate"
    );
    let forged = i.receive(webhooks::Delivery {
        event: Some("check_run"),
        delivery_id: Some("d9"),
        signature: Some(&webhooks::sign(b"wrong", b"{}")),
        body: b"{}",
    });
    assert!(matches!(forged, Err(webhooks::WebhookError::Signature(_))));
    deliver("d3", "check_run", check("completed", Some("success"))).unwrap();
    let (kept, _, _) = i.kept(&row.id).unwrap().unwrap();
    assert_eq!(pulls::Verdict::of(&kept.checks), pulls::Verdict::Passed);
    // Closed and merged on the host: recorded once, as the webhook.
    let mut merged = pr.clone();
    merged["action"] = json!("closed");
    merged["pull_request"]["state"] = json!("closed");
    merged["pull_request"]["merged"] = json!(true);
    deliver("d4", "pull_request", merged.clone()).unwrap();
    deliver("d5", "pull_request", merged).unwrap();
    let events = store.events(&row.id, 1, 100).unwrap();
    let merged: Vec<_> = events.iter().filter(|e| e.event == kinds::MERGED).collect();
    assert_eq!(merged.len(), 1);
    assert_eq!(merged[0].actor.as_ref().unwrap()["delivery_id"], "d4");
    assert_eq!(i.deliveries(0, 10).unwrap().len(), 5);

    let row = store.get_run(&row.id).unwrap().unwrap();
    i.unlink(&row, &user).unwrap();
    let row = store.get_run(&row.id).unwrap().unwrap();
    assert!(row.pull_request.is_none());
    assert!(i.kept(&row.id).unwrap().is_none());
}

#[test]
fn the_watch_follows_pull_requests_that_await_auto_merge() {
    let dir = tempfile::tempdir().unwrap();
    let table = Arc::new(MemoryCodehost::default());
    let store: Arc<dyn RunStore> = Arc::new(MemoryStore::new());
    let link = |n: u64| pulls::Link {
        owner: "acme".into(),
        repo: "app".into(),
        number: n,
        html_url: format!("https://github.com/acme/app/pull/{n}"),
    };
    let record = |run: &str, kept: &pulls::Kept| crate::store::PullRequestRecord {
        run_id: run.into(),
        owner: "acme".into(),
        repo: "app".into(),
        number: kept.link.number,
        head_sha: Some("h".into()),
        state: serde_json::to_value(kept).unwrap(),
        refreshed_at_ms: 0,
        updated_at: "t".into(),
    };
    let mut waiting = pulls::Kept::new(link(1));
    waiting.options.auto_merge = true;
    let plain = pulls::Kept::new(link(2));
    let mut merged = waiting.clone();
    merged.details = Some(json!({"state": "closed", "merged": true}));
    table.put_pull_request(&record("R1", &waiting)).unwrap();
    table.put_pull_request(&record("R2", &plain)).unwrap();
    table.put_pull_request(&record("R3", &merged)).unwrap();
    let i = Integrations::new(
        SettingsHandle::new(Settings::default()),
        dir.path().to_path_buf(),
        table,
        store,
        Arc::new(NoWorkspaces),
    );
    // At startup: only the open one with auto_merge.
    assert_eq!(i.start_watch().unwrap(), 1);
    assert_eq!(i.watched(), ["R1"]);
    // Stored merged: no longer watched; a new one with auto_merge is.
    let mut now_merged = waiting.clone();
    now_merged.details = Some(json!({"state": "closed", "merged": true}));
    i.put_kept("R1", &now_merged, None, 0).unwrap();
    i.put_kept("R4", &waiting, None, 0).unwrap();
    assert_eq!(i.watched(), ["R4"]);
    // The integration is off: a pass asks nothing and keeps watching.
    i.watch_once();
    assert_eq!(i.watched(), ["R4"]);
    assert_eq!(i.http.calls(), 0);
}
