//! The web UI's HTTP side on the real binary (no browser): pages and assets with their
//! security headers, `/` answering browsers with the board, the UI off by default, and the
//! workflow graph as SVG. The browser itself is exercised by `web_browser.rs`.

use crate::support;
use crate::support::server::{assert_error, package, Opts, Server};

const SECRET: &str = "0123456789abcdef0123456789abcdef-web-pages";

fn web_server() -> Server {
    Server::with(Opts {
        settings: Some("[server.web]\nenabled = true\n"),
        env: vec![("SESSION_SECRET", SECRET.to_string())],
        ..Opts::default()
    })
}

fn page(s: &Server, path: &str) -> support::server::Resp {
    s.raw("GET", path, &[("Accept", "text/html,*/*")], None)
}

#[test]
fn pages_and_assets_carry_a_strict_csp_and_stay_small() {
    let s = web_server();
    for path in [
        "/",
        "/login",
        "/logout",
        "/runs/new",
        "/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "/settings",
        "/insights",
        "/environments",
    ] {
        let r = page(&s, path);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
        let csp = r.header("content-security-policy").expect("csp");
        assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"));
        assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"));
        assert_eq!(r.header("x-frame-options"), Some("DENY"));
        let html = r.text();
        assert!(html.contains("<main id=\"main\""), "{path}");
        // Every linked asset is served, as JS or CSS, under 100 KiB, with the same CSP.
        let mut total = html.len();
        for part in html.split("/assets/").skip(1) {
            let name: String = part.chars().take_while(|c| *c != '"').collect();
            let a = s.raw("GET", &format!("/assets/{name}"), &[], None);
            assert_eq!(a.status, 200, "{name}");
            let ct = a.header("content-type").unwrap_or_default();
            assert!(
                ct.starts_with("text/javascript") || ct.starts_with("text/css"),
                "{ct}"
            );
            assert!(a.header("content-security-policy").is_some());
            assert!(
                a.body.len() <= 100 * 1024,
                "{name} is {} bytes",
                a.body.len()
            );
            total += a.body.len();
        }
        assert!(total <= 150 * 1024, "{path} weighs {total} bytes");
    }
    assert_error(&s.raw("GET", "/assets/nope.js", &[], None), 404);
    // API clients still get discovery JSON at `/`.
    let root = s.raw("GET", "/", &[("Accept", "application/json")], None);
    assert!(root.json()["urls"]["openapi_url"].is_string());
}

#[test]
fn the_ui_is_off_unless_enabled() {
    let s = Server::with(Opts {
        dev: false,
        settings: Some("[server.auth]\nmethods = [\"dev-token\"]\n"),
        ..Opts::default()
    });
    let root = page(&s, "/");
    assert!(root.json()["urls"].is_object(), "discovery, not a page");
    let b = assert_error(&page(&s, "/runs/new"), 404);
    assert!(b["errors"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("server.web.enabled"));
    assert_error(&s.raw("GET", "/assets/app.css", &[], None), 404);
}

/// `--dev` with nothing configured: the board at its address, sign-in with the dev token,
/// the session secret made once and kept (0600), and the URL printed.
#[test]
fn dev_mode_serves_the_board_with_a_kept_session_secret() {
    use std::io::BufRead;
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let start = || {
        let mut child = std::process::Command::new(support::server::bin())
            .args([
                "server",
                "start",
                "--dev",
                "--listen",
                "127.0.0.1:0",
                "--state-dir",
            ])
            .arg(dir.path())
            .env_remove("SESSION_SECRET")
            .env("RUST_LOG", "warn,tiny_http=off")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let lines: Vec<String> = std::io::BufReader::new(child.stdout.take().unwrap())
            .lines()
            .map_while(Result::ok)
            .take_while(|l| !l.starts_with("svc: board:"))
            .chain(std::iter::once(String::new()))
            .collect();
        (child, lines)
    };
    let (mut child, lines) = start();
    let addr = lines
        .iter()
        .find_map(|l| l.strip_prefix("svc: listening on http://"))
        .unwrap_or_else(|| panic!("{lines:?}"))
        .to_string();
    let secret_file = dir.path().join("dev-session-secret");
    let secret = std::fs::read_to_string(&secret_file).unwrap();
    assert_eq!(secret.trim().len(), 64);
    assert_eq!(
        std::fs::metadata(&secret_file)
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    let token = std::fs::read_to_string(dir.path().join("dev-token")).unwrap();
    let get = |path: &str, cookie: Option<&str>| {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        let cookie = cookie
            .map(|c| format!("Cookie: {c}\r\n"))
            .unwrap_or_default();
        std::io::Write::write_all(
            &mut s,
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/html\r\n{cookie}Connection: close\r\n\r\n").as_bytes(),
        )
        .unwrap();
        let mut out = String::new();
        std::io::Read::read_to_string(&mut s, &mut out).unwrap();
        out
    };
    let board = get("/", None);
    assert!(board.starts_with("HTTP/1.1 200"), "{board}");
    assert!(board.contains("data-page=\"board\""), "{board}");
    // Signing in with the dev token gives a session cookie that opens the API.
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    let body = format!("{{\"token\":\"{}\"}}", token.trim());
    std::io::Write::write_all(
        &mut s,
        format!(
            "POST /auth/dev-token HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut s, &mut answer).unwrap();
    let cookie = answer
        .lines()
        .find_map(|l| {
            l.strip_prefix("Set-Cookie: ")
                .or_else(|| l.strip_prefix("set-cookie: "))
        })
        .and_then(|c| c.split(';').next())
        .unwrap_or_else(|| panic!("no session cookie: {answer}"))
        .to_string();
    let runs = get("/api/v1/runs", Some(&cookie));
    assert!(runs.starts_with("HTTP/1.1 200"), "{runs}");
    // A restart keeps the secret (sessions outlive a restart).
    let _ = child.kill();
    let _ = child.wait();
    let (mut again, _) = start();
    assert_eq!(std::fs::read_to_string(&secret_file).unwrap(), secret);
    let _ = again.kill();
    let _ = again.wait();
}

#[test]
fn the_graph_is_svg_with_one_group_per_node() {
    let s = Server::start();
    let dot = "digraph g { rankdir=LR; start [shape=Mdiamond]; work [shape=parallelogram, script=\"echo <hi>\"]; exit [shape=Msquare]; start -> work -> exit }";
    let body = serde_json::json!({"workflow": package(dot)}).to_string();
    let run = s.post("/api/v1/runs", &body).json();
    let id = run["id"].as_str().unwrap();
    let r = s.get(&format!("/api/v1/runs/{id}/graph"));
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("image/svg+xml; charset=utf-8")
    );
    let svg = r.text();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    for n in ["start", "work", "exit"] {
        assert!(svg.contains(&format!("data-node=\"{n}\"")), "{n}");
    }
    assert!(svg.contains("<desc>echo &lt;hi&gt;</desc>"));
    assert!(
        s.get(&format!("/api/v1/runs/{id}/graph?direction=tb"))
            .status
            == 200
    );
    assert_error(
        &s.get(&format!("/api/v1/runs/{id}/graph?direction=up")),
        400,
    );
    assert_error(&s.get("/api/v1/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/graph"), 404);
    // Demo mode draws its fixture graph without credentials.
    let demo = s.raw(
        "GET",
        "/api/v1/runs/01JNDEM0000000000000000004/graph",
        &[("Cookie", "svc-demo=1")],
        None,
    );
    assert_eq!(demo.status, 200);
    assert!(demo.text().contains("data-node=\"review\""));
}
