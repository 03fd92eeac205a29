//! Issue 29's insights over the real binary: read-only SQL over the store's views as JSON
//! and CSV, saved queries as a catalog, and hostile queries refused or stopped with a clear
//! error while the server, its store and other requests carry on.

use crate::support::server::*;
use serde_json::{json, Value};
use std::time::Duration;

fn query(s: &Server, sql: &str) -> Resp {
    s.post("/api/v1/insights/query", &json!({ "sql": sql }).to_string())
}

/// Asserts a refusal: the status, SPEC 2.7 shape, the code and words of the detail.
fn refused(r: &Resp, status: u16, code: &str, says: &str) {
    let b = assert_error(r, status);
    let e = &b["errors"][0];
    assert_eq!(e["code"], code, "{b}");
    let detail = e["detail"].as_str().unwrap_or("");
    assert!(detail.contains(says), "{detail} should say {says}");
}

#[test]
fn runs_per_day_by_status_as_json_and_csv() {
    let s = Server::start();
    let ids: Vec<String> = (0..3).map(|_| create_run(&s, &run_body(HELLO))).collect();
    let r = s.post(&format!("/api/v1/runs/{}/cancel", ids[0]), "{}");
    assert_eq!(r.status, 200, "{}", r.text());
    wait_kind(&s, &ids[0], &["failed"]);

    let schema = s.get("/api/v1/insights/schema");
    assert_eq!(schema.status, 200, "{}", schema.text());
    let schema = schema.json();
    let views: Vec<&str> = schema["views"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        views,
        [
            "insights_runs",
            "insights_stages",
            "insights_usage",
            "insights_events",
            "insights_automations"
        ]
    );
    let sample = schema["samples"][0]["sql"].as_str().unwrap().to_string();
    assert_eq!(schema["samples"][0]["id"], "runs-per-day-by-status");

    let r = query(&s, &sample);
    assert_eq!(r.status, 200, "{}", r.text());
    let a = r.json();
    assert_eq!(a["columns"], json!(["day", "status", "runs"]));
    let rows = a["rows"].as_array().unwrap();
    let count = |status: &str| {
        rows.iter()
            .filter(|row| row[1] == status)
            .map(|row| row[2].as_i64().unwrap())
            .sum::<i64>()
    };
    assert_eq!(count("submitted"), 2, "{a}");
    assert_eq!(count("failed"), 1, "{a}");
    assert_eq!(a["row_count"], rows.len());

    // The same question as CSV, and the cancelled run's reason through the view.
    let auth = s.auth();
    let csv = s.raw(
        "POST",
        "/api/v1/insights/query",
        &[("Authorization", auth.as_str()), ("Accept", "text/csv")],
        Some(
            json!({"sql": "SELECT run_id, status, reason FROM insights_runs WHERE status = 'failed'"})
                .to_string()
                .as_bytes(),
        ),
    );
    assert_eq!(csv.status, 200, "{}", csv.text());
    assert!(csv.header("content-type").unwrap().starts_with("text/csv"));
    assert_eq!(
        csv.text(),
        format!("run_id,status,reason\r\n{},failed,cancelled\r\n", ids[0])
    );

    // Events are there too, one `run.created` per run.
    let r = query(
        &s,
        "SELECT kind, count(*) AS n FROM insights_events WHERE kind = 'run.created' GROUP BY kind",
    );
    assert_eq!(r.json()["rows"], json!([["run.created", 3]]));
}

#[test]
fn hostile_queries_get_clear_errors_and_harm_nothing() {
    let s = Server::start();
    let id = create_run(&s, &run_body(HELLO));
    for (sql, code, says) in [
        ("DELETE FROM runs", "query_refused", "read-only"),
        ("UPDATE runs SET status = 'succeeded'", "query_refused", "read-only"),
        ("DROP TABLE events", "query_refused", "read-only"),
        ("ATTACH 'secrets.json' AS s", "query_refused", "ATTACH"),
        ("PRAGMA writable_schema = ON", "query_refused", "PRAGMA"),
        ("SELECT * FROM mcp_servers", "query_refused", "`mcp_servers` is not one of them"),
        ("SELECT definition FROM automations", "query_refused", "`automations`"),
        (
            "WITH insights_runs AS (SELECT definition FROM mcp_servers) SELECT * FROM insights_runs",
            "query_refused",
            "`mcp_servers`",
        ),
        ("SELECT * FROM sqlite_master", "query_refused", "`sqlite_master`"),
        ("SELECT zeroblob(1000000000)", "query_refused", "`zeroblob`"),
        ("SELECT load_extension('/tmp/evil.so')", "invalid_sql", "load_extension"),
        ("SELECT 1; SELECT 2", "invalid_sql", "one statement"),
        ("SELEKT 1", "invalid_sql", "does not compile"),
    ] {
        let r = query(&s, sql);
        let status = if code == "invalid_sql" { 400 } else { 422 };
        refused(&r, status, code, says);
    }

    // A recursive CTE that never ends is stopped at the time limit; meanwhile the server
    // answers others.
    let forever = std::thread::scope(|scope| {
        let t = scope.spawn(|| {
            query(
                &s,
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
                 SELECT count(*) FROM c",
            )
        });
        std::thread::sleep(Duration::from_millis(300));
        let r = s.get(&format!("/api/v1/runs/{id}"));
        assert_eq!(r.status, 200, "{}", r.text());
        t.join().unwrap()
    });
    refused(&forever, 422, "query_timeout", "time limit");

    // A cross join of millions of rows: cut at the row cap, or at the time limit when
    // only counted.
    let numbers = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n LIMIT 3000) ";
    let r = query(&s, &format!("{numbers} SELECT a.x, b.x FROM n a, n b"));
    refused(&r, 422, "row_limit_exceeded", "more than 10000 rows");
    let r = query(&s, &format!("{numbers} SELECT count(*) FROM n a, n b, n c"));
    refused(&r, 422, "query_timeout", "time limit");
    let r = query(
        &s,
        &format!("{numbers} SELECT group_concat(printf('%.*c', 1000, 'x'), '') FROM n"),
    );
    refused(&r, 422, "result_too_large", "bytes");

    // 1 MB of SQL is over the insights cap; 10 MB is over the server's body limit.
    let long = format!("SELECT 1 /* {} */", "x".repeat(1 << 20));
    refused(
        &query(&s, &long),
        422,
        "sql_too_long",
        "limited to 65536 bytes",
    );
    let huge = format!("SELECT 1 /* {} */", "x".repeat(10 << 20));
    assert_error(&query(&s, &huge), 413);

    // Nothing was harmed: the run is there, the store writes, insights still answer.
    assert_eq!(status_kind(&s, &id), "submitted");
    let again = create_run(&s, &run_body(HELLO));
    let r = query(&s, "SELECT count(*) AS n FROM insights_runs");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["rows"], json!([[2]]));
    assert_eq!(status_kind(&s, &again), "submitted");
}

#[test]
fn saved_queries_are_a_catalog_and_run_by_id() {
    let s = Server::start();
    create_run(&s, &run_body(HELLO));
    let body = json!({"id": "by-status", "name": "Runs by status",
                      "sql": "SELECT status, count(*) AS n FROM insights_runs GROUP BY status"});
    let r = s.post("/api/v1/insights/queries", &body.to_string());
    assert_eq!(r.status, 201, "{}", r.text());
    let saved = r.json();
    let etag = r.header("etag").unwrap().to_string();
    assert_eq!(etag, format!("\"{}\"", saved["revision"].as_str().unwrap()));
    assert_eq!(saved["description"], Value::Null);
    assert_error(&s.post("/api/v1/insights/queries", &body.to_string()), 409);

    let r = s.post(
        "/api/v1/insights/query",
        &json!({"query_id": "by-status"}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["rows"], json!([["submitted", 1]]));
    assert_eq!(r.json()["query_id"], "by-status");
    assert_error(
        &s.post(
            "/api/v1/insights/query",
            &json!({"query_id": "nope"}).to_string(),
        ),
        404,
    );
    assert_error(
        &s.post(
            "/api/v1/insights/query",
            &json!({"query_id": "by-status", "sql": "SELECT 1"}).to_string(),
        ),
        400,
    );

    // SQL the query route would refuse cannot be saved: 422 naming the field.
    let bad = json!({"id": "bad", "name": "x", "sql": "SELECT * FROM runs"});
    let b = assert_error(&s.post("/api/v1/insights/queries", &bad.to_string()), 422);
    assert_eq!(b["errors"][0]["field"], "sql");

    // Replace needs the current revision.
    let auth = s.auth();
    let put = |if_match: Option<&str>, sql: &str| {
        let mut h = vec![("Authorization", auth.as_str())];
        if let Some(m) = if_match {
            h.push(("If-Match", m));
        }
        s.raw(
            "PUT",
            "/api/v1/insights/queries/by-status",
            &h,
            Some(
                json!({"name": "Runs by status", "sql": sql})
                    .to_string()
                    .as_bytes(),
            ),
        )
    };
    let new_sql = "SELECT status FROM insights_runs";
    assert_error(&put(None, new_sql), 428);
    let r = put(Some(&etag), new_sql);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_error(&put(Some(&etag), new_sql), 409);
    let list = s.get("/api/v1/insights/queries").json();
    assert_eq!(list["meta"]["total"], 1);
    assert_eq!(list["data"][0]["sql"], new_sql);
    let current = r.header("etag").unwrap().to_string();
    let del = s.raw(
        "DELETE",
        "/api/v1/insights/queries/by-status",
        &[("Authorization", auth.as_str()), ("If-Match", &current)],
        None,
    );
    assert_eq!(del.status, 204, "{}", del.text());
    assert_error(&s.get("/api/v1/insights/queries/by-status"), 404);
}
