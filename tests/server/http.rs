//! The HTTP foundation through the real binary: listeners (TCP and Unix socket), error
//! bodies and request ids, limits, auth, discovery, OpenAPI, settings live reload, workflow
//! versions, demo mode and the secrets CLI.

use crate::support::server::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

#[test]
fn discovery_and_errors_over_tcp_and_unix() {
    for unix in [false, true] {
        let s = Server::with(Opts {
            unix,
            ..Opts::default()
        });
        let h = s.raw("GET", "/health", &[], None);
        assert_eq!(h.status, 200);
        assert_eq!(h.json(), json!({"status": "ok"}));
        assert!(h.header("x-request-id").is_some());

        let root = s.raw("GET", "/", &[], None).json();
        for k in ["openapi_url", "current_user_url", "health_url"] {
            assert!(root["urls"][k].is_string(), "{k}");
        }
        assert!(root["urls"]["openapi_url"]
            .as_str()
            .unwrap()
            .ends_with("/api/v1/openapi.json"));

        let me = s.get("/api/v1/user");
        assert_eq!(me.status, 200);
        assert_eq!(
            me.json(),
            json!({"login": "dev", "auth_method": "dev_token"})
        );

        let nf = s.get("/api/v1/nope");
        assert_error(&nf, 404);
        let nf2 = s.get("/api/v1/nope");
        assert_ne!(nf.header("x-request-id"), nf2.header("x-request-id"));

        let m = s.call("DELETE", "/health", None);
        assert_error(&m, 405);
        assert_eq!(m.header("allow"), Some("GET"));

        let bad = s.post("/api/v1/workflow-versions", "{\"entrypoint\": ");
        let b = assert_error(&bad, 400);
        assert!(b["errors"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("Malformed JSON"));
        let shape = s.post("/api/v1/workflow-versions", "{\"entrypoint\": 3}");
        assert_error(&shape, 400);

        let noauth = s.raw("GET", "/api/v1/user", &[], None);
        assert_error(&noauth, 401);
        let wrong = s.raw(
            "GET",
            "/api/v1/user",
            &[(
                "Authorization",
                &format!("Bearer svc_dev_{}", "0".repeat(64)),
            )],
            None,
        );
        assert_error(&wrong, 401);
        let scheme = s.raw(
            "GET",
            "/api/v1/user",
            &[("Authorization", &format!("Basic {}", s.token))],
            None,
        );
        assert_error(&scheme, 401);
        let incoming = s.raw("GET", "/health", &[("X-Request-Id", "mine")], None);
        assert_ne!(incoming.header("x-request-id"), Some("mine"));
    }
}

#[test]
fn body_limit_read_timeout_and_stale_socket() {
    let dir = tempfile::tempdir().unwrap();
    // A stale socket file left by a dead server.
    let sock = dir.path().join("svc.sock");
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    let u = Server::with(Opts {
        unix: true,
        dir: Some(dir),
        ..Opts::default()
    });
    assert_eq!(u.raw("GET", "/health", &[], None).status, 200);
    drop(u);
    // Limits and read timeouts (the Unix socket is owner-only, mode 0600). The edge's attack
    // tests are in edge_attacks.rs.
    let s = Server::with(Opts {
        settings: Some(
            "[server.http]\nmax_body_bytes = 2048\nread_timeout_secs = 1\nhead_timeout_secs = 1\n[server.auth]\nmethods = [\"dev-token\"]\n",
        ),
        ..Opts::default()
    });
    let big = format!("{{\"entrypoint\": \"{}\"}}", "x".repeat(5000));
    let r = s.post("/api/v1/workflow-versions", &big);
    let b = assert_error(&r, 413);
    assert!(b["errors"][0]["detail"].as_str().unwrap().contains("2048"));
    // Declared beyond the limit: answered at once, before the body is read.
    let mut c = s.connect();
    c.write_all(
        format!(
            "POST /api/v1/workflow-versions HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Length: 100000\r\n\r\n",
            s.auth()
        )
        .as_bytes(),
    )
    .unwrap();
    let mut r = std::io::BufReader::new(c);
    assert_error(&read_response(&mut r), 413);
    // Declared absurdly large and never sent: still answered (the connection is closed, never
    // drained), and the server keeps serving.
    let mut c = std::net::TcpStream::connect(match &s.addr {
        Addr::Tcp(a) => a.as_str(),
        Addr::Unix(_) => unreachable!(),
    })
    .unwrap();
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    c.write_all(
        format!(
            "POST /api/v1/workflow-versions HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Length: 999999999999\r\n\r\n",
            s.auth()
        )
        .as_bytes(),
    )
    .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = c.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        if got.ends_with(b"}") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("\"status\":\"413\""), "{text}");
    assert_eq!(s.raw("GET", "/health", &[], None).status, 200);

    // A client that stops mid-headers is cut off by the head timeout.
    let mut c = s.connect();
    c.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n").unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let _ = c.read_to_end(&mut buf);
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");
    let text = String::from_utf8_lossy(&buf);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );
    // Still serving, also after the listener was idle for longer than the timeout.
    assert_eq!(s.raw("GET", "/health", &[], None).status, 200);
    std::thread::sleep(Duration::from_millis(3500));
    assert_eq!(s.raw("GET", "/health", &[], None).status, 200);
}

#[test]
fn openapi_document_describes_every_route() {
    let s = Server::start();
    let r = s.raw("GET", "/api/v1/openapi.json", &[], None);
    assert_eq!(r.status, 200);
    let doc = r.json();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], "0.1.0");
    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["BearerAuth"]["scheme"], "bearer");
    assert_eq!(schemes["SessionCookie"]["in"], "cookie");
    let paths = doc["paths"].as_object().unwrap();
    for (p, m) in [
        ("/", "get"),
        ("/health", "get"),
        ("/api/v1/runs", "post"),
        ("/api/v1/runs", "get"),
        ("/runs", "get"),
        ("/api/v1/runs/{id}/attach", "get"),
        ("/api/v1/runs/{id}/questions/{qid}/answer", "post"),
        ("/api/v1/workflow-versions", "post"),
        ("/api/v1/providers/test", "post"),
    ] {
        let op = &paths[p][m];
        assert!(op.is_object(), "{m} {p}");
        assert!(op["responses"].is_object());
    }
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            // Every documented route is routed: never 404/405 for its method.
            let concrete = path
                .replace("{id}", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
                .replace("{qid}", "q");
            let body = if method == "post" { Some("{}") } else { None };
            if concrete.ends_with("/attach") {
                continue;
            }
            let r = s.call(&method.to_uppercase(), &concrete, body);
            assert!(
                r.status != 405 && !(r.status == 404 && r.text().contains("No route")),
                "{method} {path}: {}",
                r.status
            );
            assert!(op["security"].is_array());
        }
    }
    // The unprefixed alias (SPEC 9.3) serves the same document, without credentials.
    let alias = s.raw("GET", "/openapi.json", &[], None);
    assert_eq!(alias.status, 200);
    assert_eq!(alias.json(), doc);
    // The sandbox inventory answers (no placeholder left).
    assert_eq!(s.get("/api/v1/sandboxes").status, 200);
    // The steer alias is routed: an unknown run is 404.
    assert_error(&s.post("/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/steer", "{}"), 404);
}

#[test]
fn settings_reload_live_and_invalid_edits_are_ignored() {
    // A configured server: `--dev` would keep dev-token sign-in on whatever the file says.
    let s = Server::with(Opts {
        dev: false,
        settings: Some("[server.auth]\nmethods = [\"dev-token\"]\n"),
        ..Opts::default()
    });
    let file = s.path().join("settings.toml");
    assert_eq!(s.get("/api/v1/user").status, 200);
    std::fs::write(
        &file,
        "[server.auth]\nmethods = [\"codehost\"]\n[server.auth.codehost]\nallowed_usernames = [\"alice\"]\n",
    )
    .unwrap();
    let t = Instant::now();
    wait_for(5, "auth change", || {
        (s.get("/api/v1/user").status == 401).then_some(())
    });
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    // Invalid: logged, previous settings kept.
    std::fs::write(&file, "[server.auth]\nmethods = [\"dev-token\"\n").unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(s.get("/api/v1/user").status, 401);
    assert!(
        s.stderr().contains("keeping the previous settings"),
        "{}",
        s.stderr()
    );
    std::fs::write(&file, "[server.auth]\nmethods = [\"dev-token\"]\n").unwrap();
    wait_for(5, "auth restored", || {
        (s.get("/api/v1/user").status == 200).then_some(())
    });
}

fn post_version(s: &Server, body: &Value) -> Resp {
    s.post("/api/v1/workflow-versions", &body.to_string())
}

#[test]
fn workflow_versions_are_content_addressed_and_validated() {
    let s = Server::start();
    let a = post_version(&s, &package(HELLO));
    assert_eq!(a.status, 201, "{}", a.text());
    let id = a.json()["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 64);
    let again = s.post(
        "/api/v1/workflow-versions",
        &format!(
            "{{ \"files\": {{\"main.dot\": {}}}, \"entrypoint\": \"main.dot\", \"dependencies\": [] }}",
            serde_json::to_string(HELLO).unwrap()
        ),
    );
    assert_eq!(again.status, 200);
    assert_eq!(again.json(), a.json());
    let got = s.get(&format!("/api/v1/workflow-versions/{id}"));
    assert_eq!(got.status, 200);
    assert_eq!(got.json()["files"]["main.dot"], HELLO);
    assert_error(
        &s.get(&format!("/api/v1/workflow-versions/{}", "a".repeat(64))),
        404,
    );

    // Child workflow in a dependency; dependency order does not change the id.
    let child = "digraph child { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }";
    let c1 = post_version(
        &s,
        &json!({"entrypoint": "child.dot", "files": {"child.dot": child}}),
    )
    .json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let parent = "digraph p { start [shape=Mdiamond]; m [shape=house, stack.child_workflow=\"child.dot\"]; exit [shape=Msquare]; start -> m -> exit }";
    let p1 = post_version(
        &s,
        &json!({"entrypoint": "p.dot", "files": {"p.dot": parent}, "dependencies": [c1, id]}),
    );
    assert_eq!(p1.status, 201, "{}", p1.text());
    let p2 = post_version(
        &s,
        &json!({"entrypoint": "p.dot", "files": {"p.dot": parent}, "dependencies": [id, c1, id]}),
    );
    assert_eq!(p2.status, 200);
    assert_eq!(p1.json()["id"], p2.json()["id"]);
    let missing = post_version(
        &s,
        &json!({"entrypoint": "p.dot", "files": {"p.dot": parent}}),
    );
    assert!(assert_error(&missing, 422)["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("child.dot"));
    let unknown = post_version(
        &s,
        &json!({"entrypoint": "main.dot", "files": {"main.dot": HELLO}, "dependencies": ["b".repeat(64)]}),
    );
    assert!(assert_error(&unknown, 422)["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("not a registered"));

    // Invalid workflow: 422 with diagnostics.
    let invalid = post_version(&s, &package("digraph x { a -> b }"));
    let b = assert_error(&invalid, 422);
    let d = b["errors"][0]["diagnostics"].as_array().unwrap();
    assert!(d.iter().any(|x| x["severity"] == "error"));
    let unparsable = post_version(&s, &package("digraph {"));
    assert_error(&unparsable, 422);
    // @file references resolve inside the package.
    let refs = "digraph r { start [shape=Mdiamond]; a [shape=box, prompt=\"@prompts/a.md\"]; exit [shape=Msquare]; start -> a -> exit }";
    assert_error(&post_version(&s, &package(refs)), 422);
    let ok = post_version(
        &s,
        &json!({"entrypoint": "main.dot", "files": {"main.dot": refs, "prompts/a.md": "hi"}}),
    );
    assert_eq!(ok.status, 201, "{}", ok.text());

    // Path rules and limits.
    for bad in ["/abs.dot", "a/../b.dot", "a//b.dot", "./a.dot", "dir/"] {
        let r = post_version(
            &s,
            &json!({"entrypoint": "main.dot", "files": {"main.dot": HELLO, bad: "x"}}),
        );
        assert_error(&r, 422);
    }
    assert_error(
        &post_version(
            &s,
            &json!({"entrypoint": "other.dot", "files": {"main.dot": HELLO}}),
        ),
        422,
    );
    let mut files = serde_json::Map::new();
    files.insert("main.dot".into(), json!(HELLO));
    for i in 0..512 {
        files.insert(format!("f{i}.txt"), json!("x"));
    }
    let r = post_version(&s, &json!({"entrypoint": "main.dot", "files": files}));
    assert!(assert_error(&r, 422)["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("512"));
    let r = post_version(
        &s,
        &json!({"entrypoint": "main.dot", "files": {"main.dot": HELLO, "big.txt": "x".repeat(512 * 1024 + 1)}}),
    );
    assert_error(&r, 422);
    let mut files = serde_json::Map::new();
    files.insert("main.dot".into(), json!(HELLO));
    for i in 0..5 {
        files.insert(format!("big{i}.txt"), json!("y".repeat(500 * 1024)));
    }
    let r = post_version(&s, &json!({"entrypoint": "main.dot", "files": files}));
    assert!(assert_error(&r, 422)["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("canonical"));
    let deps: Vec<String> = (0..513).map(|i| format!("{i:064x}")).collect();
    let r = post_version(
        &s,
        &json!({"entrypoint": "main.dot", "files": {"main.dot": HELLO}, "dependencies": deps}),
    );
    assert_error(&r, 422);
}

#[test]
fn demo_mode_serves_fixtures_without_auth_and_touches_nothing() {
    let s = Server::start();
    let demo = [("X-Svc-Demo", "1")];
    let list = s.raw("GET", "/api/v1/runs", &demo, None);
    assert_eq!(list.status, 200);
    assert_eq!(list.json()["data"].as_array().unwrap().len(), 7);
    let cookie = s.raw(
        "GET",
        "/runs?page[limit]=2",
        &[("Cookie", "a=b; svc-demo=1")],
        None,
    );
    assert_eq!(cookie.json()["data"].as_array().unwrap().len(), 2);
    assert_eq!(cookie.json()["meta"]["has_more"], true);
    let id = list.json()["data"][0]["id"].as_str().unwrap().to_string();
    let run = s.raw("GET", &format!("/api/v1/runs/{id}"), &demo, None);
    assert_eq!(run.status, 200);
    assert!(run.json()["lifecycle"]["status"]["kind"].is_string());
    let created = s.raw(
        "POST",
        "/api/v1/runs",
        &demo,
        Some(json!({"workflow": package(HELLO)}).to_string().as_bytes()),
    );
    assert_eq!(created.status, 201);
    assert_eq!(created.json()["id"], "demo-run-new");
    let q = s.raw("GET", &format!("/api/v1/runs/{id}/questions"), &demo, None);
    assert_eq!(q.json()["data"][0]["id"], "q-001");
    let ans = s.raw(
        "POST",
        &format!("/api/v1/runs/{id}/questions/q-001/answer"),
        &demo,
        Some(b"{\"value\":\"yes\"}"),
    );
    assert_eq!(ans.status, 204);
    let cancel = s.raw("POST", &format!("/api/v1/runs/{id}/cancel"), &demo, None);
    assert_eq!(cancel.json()["lifecycle"]["status"]["reason"], "cancelled");
    assert_eq!(
        s.raw("GET", &format!("/api/v1/runs/{id}/usage"), &demo, None)
            .status,
        200
    );
    let mut sse = s.sse(&format!("/api/v1/runs/{id}/attach"), &demo);
    assert_eq!(sse.status, 200);
    assert!(!sse.collect().is_empty());
    let v = s.raw(
        "POST",
        "/api/v1/workflow-versions",
        &demo,
        Some(package(HELLO).to_string().as_bytes()),
    );
    assert_eq!(v.status, 201);
    // Nothing real was touched.
    let real = s.get("/api/v1/runs");
    assert_eq!(real.json()["data"].as_array().unwrap().len(), 0);
    let vid = v.json()["id"].as_str().unwrap().to_string();
    assert_eq!(
        s.get(&format!("/api/v1/workflow-versions/{vid}")).status,
        404
    );
    // Unknown demo run: 404 error body.
    assert_error(
        &s.raw(
            "GET",
            "/api/v1/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV",
            &demo,
            None,
        ),
        404,
    );
}

#[test]
fn secrets_cli() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(bin())
            .args(["secrets"])
            .args(args)
            .arg("--state-dir")
            .arg(dir.path())
            .output()
            .unwrap()
    };
    assert!(run(&["set", "OPENAI_API_KEY", "sk-very-secret"])
        .status
        .success());
    assert!(run(&["set", "anthropic", "sk-2", "--type", "credential"])
        .status
        .success());
    let list = run(&["list"]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        text.contains("OPENAI_API_KEY") && text.contains("anthropic"),
        "{text}"
    );
    assert!(!text.contains("sk-very-secret"));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("secrets.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(run(&["rm", "OPENAI_API_KEY"]).status.success());
    assert_eq!(run(&["rm", "OPENAI_API_KEY"]).status.code(), Some(1));
    assert_eq!(run(&["set", "bad-name", "x"]).status.code(), Some(2));
    let list = run(&["list"]);
    assert!(!String::from_utf8_lossy(&list.stdout).contains("OPENAI_API_KEY"));
}

/// One GET /health on a new keep-alive connection, sent when `go` releases every client of the
/// burst at once; answers whether the response head arrived within `patience`, and gives the
/// connection back so that it stays open (as a browser's would) until the whole burst is done.
fn health_on_new_connection(
    port: u16,
    go: &std::sync::Barrier,
    patience: Duration,
) -> (bool, std::net::TcpStream) {
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    c.set_read_timeout(Some(patience)).ok();
    go.wait();
    let _ = c.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let mut head = [0u8; 12];
    let answered = c.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200");
    (answered, c)
}

/// How browsers connect: a few sockets opened ahead and left idle, keep-alive connections that
/// stay open after their answer, an SSE stream open beside them, then bursts of 2 to 16
/// requests at once, each on a new connection held open until the whole burst is answered.
/// tiny_http's connection pool queued two connections arriving together for one idle thread
/// and left the second unread until some other connection ended: with keep-alive connections
/// open that is up to the idle timeout (30 s), a page load stalled. (`patience` is a liveness
/// bound, not a timing target: a healthy server answers in about a millisecond.)
#[test]
fn bursts_of_new_connections_beside_idle_and_streaming_ones_are_all_answered() {
    let s = Server::start();
    let port = s.tcp_port();
    let created = s.post(
        "/api/v1/runs",
        &json!({"workflow": package(HELLO)}).to_string(),
    );
    assert_eq!(created.status, 201, "{}", created.text());
    let id = created.json()["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // The run is never started: its stream stays open, holding a thread.
    let stream = s.sse(&format!("/api/v1/runs/{id}/attach"), &[]);
    assert_eq!(stream.status, 200);
    let preconnected: Vec<_> = (0..4)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).expect("preconnect"))
        .collect();
    let mut kept_alive = Vec::new();
    for _ in 0..4 {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        c.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .expect("write");
        let mut r = std::io::BufReader::new(c.try_clone().expect("clone"));
        assert_eq!(read_response(&mut r).status, 200);
        kept_alive.push(c);
    }

    let patience = Duration::from_secs(3);
    let mut stalled = Vec::new();
    for round in 0..10 {
        for burst in [2usize, 3, 4, 6, 8, 16] {
            let go = std::sync::Arc::new(std::sync::Barrier::new(burst));
            let clients: Vec<_> = (0..burst)
                .map(|_| {
                    let go = std::sync::Arc::clone(&go);
                    std::thread::spawn(move || health_on_new_connection(port, &go, patience))
                })
                .collect();
            let results: Vec<_> = clients.into_iter().filter_map(|c| c.join().ok()).collect();
            let unanswered = results.iter().filter(|(ok, _)| !ok).count();
            if unanswered > 0 {
                stalled.push(format!(
                    "round {round}, burst of {burst}: {unanswered} unanswered"
                ));
            }
            drop(results);
        }
    }
    assert!(
        stalled.is_empty(),
        "requests on new connections left unanswered for {patience:?}: {stalled:?}"
    );
    drop((preconnected, kept_alive, stream));
}
