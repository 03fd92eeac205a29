//! The threat model's tests (docs/decisions.md "Threat model"): workflow code never sees the
//! server's secrets (environment, state directory), and what users read of a run hides
//! them. Real server binary, real child processes, real bubblewrap (a test that needs git
//! or bubblewrap is ignored, with the install command, where the build did not find them;
//! `svc::internal::test_tools`).

use crate::support::server::*;
use serde_json::{json, Value};
use std::io::Write;
use std::process::Command;
use svc::internal::test_tools::{require, Tool};

const SESSION_SECRET: &str = "session-secret-0123456789abcdef0123456789abcdef";
const UNGIVEN: &str = "ungiven-vault-value-7f3a9c";
const GIVEN: &str = "given-vault-value-5d21e8";

/// `svc secrets set NAME VALUE` on a state directory before its server starts.
fn vault_set(dir: &std::path::Path, name: &str, value: &str) {
    let o = Command::new(bin())
        .args(["secrets", "set", name, value, "--state-dir"])
        .arg(dir)
        .output()
        .expect("svc secrets set");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A dev server whose process environment holds `SESSION_SECRET` and another variable of
/// its own, whose vault holds one value given to runs (`[run] secrets`) and one not.
fn server_with_secrets() -> Server {
    let dir = tempfile::tempdir().unwrap();
    vault_set(dir.path(), "UNGIVEN_TOKEN", UNGIVEN);
    vault_set(dir.path(), "GIVEN_TOKEN", GIVEN);
    let settings = "[server.auth]\nmethods = [\"dev-token\"]\n[run]\nsecrets = [\"GIVEN_TOKEN\"]\n";
    Server::with(Opts {
        dir: Some(dir),
        settings: Some(settings),
        env: vec![
            ("SESSION_SECRET", SESSION_SECRET.to_string()),
            ("SVC_SERVER_ONLY_VARIABLE", "server-only".to_string()),
        ],
        ..Opts::default()
    })
}

fn command_flow(script: &str) -> String {
    format!(
        "digraph w {{ start [shape=Mdiamond]; exit [shape=Msquare];\n  probe [shape=parallelogram, script={}];\n  start -> probe -> exit\n}}",
        serde_json::to_string(script).unwrap()
    )
}

fn command_stdout(s: &Server, id: &str) -> String {
    run_events(s, id)
        .into_iter()
        .find(|e| e["event"] == "command.completed")
        .map(|e| e["properties"]["stdout"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

/// One run of the probe under `provider`: what it printed, and everything readable.
fn probe(s: &Server, provider: &str) -> (String, String, Value) {
    let state = s.path().display().to_string();
    let script = format!(
        "env | sort; echo ---; \
         cat {state}/dev-token && echo READ-DEV-TOKEN; \
         cat {state}/secrets.json >/dev/null && echo READ-VAULT; \
         echo STATE-LISTING $(ls {state} 2>/dev/null) END; \
         ls $HOME >/dev/null 2>&1; \
         test \"$GIVEN_TOKEN\" = {GIVEN} && echo GIVEN-ARRIVED; \
         echo \"$GIVEN_TOKEN\" > given.txt; \
         cat {state}/dev-token > copied-token.txt 2>/dev/null; \
         echo literal-{UNGIVEN} > literal.txt; true"
    );
    let id = create_run(
        s,
        &json!({"workflow": package(&command_flow(&script)), "sandbox": {"provider": provider}}),
    );
    start_run(s, &id);
    let done = wait_run_end(s, &id);
    assert_eq!(done["lifecycle"]["status"]["kind"], "succeeded", "{done}");
    (command_stdout(s, &id), everything_readable(s, &id), done)
}

fn assert_no_server_secret(s: &Server, what: &str, text: &str) {
    for secret in [SESSION_SECRET, UNGIVEN, GIVEN, s.token.as_str()] {
        assert!(!text.contains(secret), "{what} shows a secret: {text}");
    }
    assert!(!text.contains("SESSION_SECRET="), "{what}: {text}");
    assert!(!text.contains("SVC_SERVER_ONLY_VARIABLE"), "{what}: {text}");
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn workflow_code_never_sees_the_servers_secrets_in_a_local_run() {
    require(Tool::Git);
    let s = server_with_secrets();
    let (out, readable, done) = probe(&s, "local");
    // The environment is the allowlist plus the run's variables and the given secret.
    let env: Vec<&str> = out.split("---").next().unwrap_or("").lines().collect();
    assert!(env.iter().any(|l| l.starts_with("PATH=")), "{out}");
    assert!(out.contains("GIVEN-ARRIVED"), "{out}");
    for line in &env {
        let name = line.split('=').next().unwrap_or("");
        assert!(
            svc::internal::procs::STAGE_ENV_ALLOWED.contains(&name)
                || name.starts_with("LC_")
                || name.starts_with("SVC_")
                || matches!(name, "GIVEN_TOKEN" | "PWD" | "SHLVL" | "_" | "OLDPWD"),
            "`{name}` reached the stage from the server: {out}"
        );
    }
    // `local` runs as the server's user: the state directory can be read (documented), but
    // what it reads is hidden wherever the run is shown.
    assert!(out.contains("READ-DEV-TOKEN"), "{out}");
    assert!(out.contains("secrets.json"), "{out}");
    assert!(out.contains("[REDACTED]"), "{out}");
    assert_no_server_secret(&s, "a local run", &readable);
    assert!(
        readable.contains("literal-[REDACTED]"),
        "the workflow source and the written file show the vault value hidden"
    );
    let id = done["id"].as_str().unwrap().to_string();
    let exported = exported_text(&s, &id);
    assert_no_server_secret(&s, "svc export and its stage logs", &exported);
    assert!(exported.contains("[REDACTED]"), "{exported}");
}

/// Every file `svc export OUT ID` and `svc export --stages DIR ID` (the layout of
/// `svc run --logs`) write for run `id` of the running server's state directory, as one
/// text.
fn exported_text(s: &Server, id: &str) -> String {
    let out = tempfile::tempdir().unwrap();
    let (runs, stages) = (out.path().join("export"), out.path().join("stages"));
    for args in [
        vec![runs.to_str().unwrap(), id],
        vec!["--stages", stages.to_str().unwrap(), id],
    ] {
        let o = Command::new(bin())
            .arg("export")
            .args(&args)
            .arg("--state-dir")
            .arg(s.path())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let mut all = String::new();
    let mut dirs = vec![out.path().to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                all.push_str(&String::from_utf8_lossy(&std::fs::read(&p).unwrap()));
            }
        }
    }
    assert!(!all.is_empty(), "nothing exported");
    all
}

#[test]
#[cfg_attr(
    not(all(has_git, has_bwrap)),
    ignore = "needs git and bubblewrap able to create namespaces: apt-get install git; apt-get install bubblewrap"
)]
fn workflow_code_never_sees_the_servers_secrets_in_a_container() {
    require(Tool::Git);
    require(Tool::Bwrap);
    let s = server_with_secrets();
    let (out, readable, done) = probe(&s, "container");
    assert_eq!(done["sandbox"]["instance"]["provider"], "container");
    assert!(out.contains("GIVEN-ARRIVED"), "{out}");
    for refused in ["READ-DEV-TOKEN", "READ-VAULT", "svc.db", "secrets.json"] {
        assert!(!out.contains(refused), "{refused}: {out}");
    }
    // Only the mount point of the workspace exists where the state directory is.
    assert!(out.contains("STATE-LISTING workspaces END"), "{out}");
    assert!(out.contains("HOME=/tmp"), "{out}");
    assert_no_server_secret(&s, "a container run", &readable);
    let stderr = run_events(&s, done["id"].as_str().unwrap_or(""))
        .into_iter()
        .find(|e| e["event"] == "command.completed")
        .map(|e| e["properties"]["stderr"].as_str().unwrap_or("").to_string())
        .unwrap_or_default();
    assert!(stderr.contains("No such file or directory"), "{stderr}");
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_secret_named_in_run_secrets_that_the_vault_lacks_fails_the_run_closed() {
    require(Tool::Git);
    let settings = "[server.auth]\nmethods = [\"dev-token\"]\n[run]\nsecrets = [\"NOT_THERE\"]\n";
    let s = Server::with(Opts {
        settings: Some(settings),
        ..Opts::default()
    });
    let id = create_run(&s, &json!({"workflow": package(&command_flow("echo hi"))}));
    start_run(&s, &id);
    let done = wait_run_end(&s, &id);
    assert_eq!(done["lifecycle"]["status"]["kind"], "failed", "{done}");
    let text = run_events(&s, &id)
        .iter()
        .map(Value::to_string)
        .collect::<String>();
    assert!(text.contains("NOT_THERE"), "{text}");
    assert!(!text.contains("command.started"), "nothing ran: {text}");
}

#[test]
fn the_servers_own_credentials_cannot_be_given_to_runs() {
    for settings in [
        "[run]\nsecrets = [\"SESSION_SECRET\"]\n",
        "[run]\npass_env = [\"SESSION_SECRET\"]\n",
        "[run]\nsecrets = [\"CODEHOST_CLIENT_SECRET\"]\n",
        "[run]\nsecrets = [\"not a name\"]\n",
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("settings.toml"), settings).unwrap();
        let o = Command::new(bin())
            .args([
                "server",
                "start",
                "--dev",
                "--listen",
                "127.0.0.1:0",
                "--state-dir",
            ])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(!o.status.success(), "{settings}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("run."), "{settings}: {err}");
    }
}

// ---------------------------------------------------------------------------------------
// Previews: nothing crosses the proxy that should not.

/// A server for the sandbox: any request is answered with its own request line and headers
/// as JSON, plus headers a hostile page would send (cookies for svc's origin,
/// `Clear-Site-Data`, `Service-Worker-Allowed: /`); `GET /ws` with an upgrade is a
/// WebSocket echo (text frames of up to 125 bytes, enough for the test).
const ECHO_SERVER: &str = r#"
import base64, hashlib, http.server, json, socketserver, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def log_message(self, *a): pass
    def answer(self):
        if self.headers.get('Upgrade', '').lower() == 'websocket':
            return self.websocket()
        n = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(n).decode()
        out = json.dumps({'line': self.requestline, 'headers': [[k, v] for k, v in self.headers.items()], 'body': body}).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Set-Cookie', '__svc_session=planted; Path=/; HttpOnly')
        self.send_header('Set-Cookie', 'svc-demo=1; Path=/; Domain=127.0.0.1')
        self.send_header('Clear-Site-Data', '"cookies"')
        self.send_header('Strict-Transport-Security', 'max-age=31536000')
        self.send_header('Service-Worker-Allowed', '/')
        self.send_header('Content-Length', str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    do_GET = do_POST = do_PUT = do_DELETE = answer
    def websocket(self):
        key = self.headers['Sec-WebSocket-Key']
        accept = base64.b64encode(hashlib.sha1((key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').encode()).digest()).decode()
        self.send_response(101)
        self.send_header('Upgrade', 'websocket')
        self.send_header('Connection', 'Upgrade')
        self.send_header('Sec-WebSocket-Accept', accept)
        self.end_headers()
        self.wfile.flush()
        while True:
            head = self.rfile.read(2)
            if len(head) < 2: return
            op, n = head[0] & 0x0f, head[1] & 0x7f
            mask = self.rfile.read(4) if head[1] & 0x80 else b'\0\0\0\0'
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if op == 8:
                self.wfile.write(b'\x88\x00'); self.wfile.flush(); return
            reply = b'echo:' + data
            self.wfile.write(bytes([0x81, len(reply)]) + reply)
            self.wfile.flush()
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
S(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
"#;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A run whose only stage serves [`ECHO_SERVER`] on `port` until cancelled; returns its id
/// once the sandbox is ready and the server answers on the host's loopback.
fn echo_run(s: &Server, dir: &std::path::Path, port: u16) -> String {
    let script = dir.join("echo_server.py");
    std::fs::write(&script, ECHO_SERVER).unwrap();
    let flow = command_flow(&format!("exec python3 {} {port}", script.display()));
    let id = create_run(s, &json!({"workflow": package(&flow)}));
    start_run(s, &id);
    wait_for(30, "the echo server", || {
        std::net::TcpStream::connect(("127.0.0.1", port))
            .ok()
            .map(|_| ())
    });
    id
}

/// `POST /api/v1/runs/{id}/preview` for `port`; the response.
fn make_preview(s: &Server, id: &str, port: u16, signed: bool) -> Resp {
    s.post(
        &format!("/api/v1/runs/{id}/preview"),
        &json!({"port": port, "expires_in_secs": 600, "signed": signed}).to_string(),
    )
}

/// The path part of a preview URL.
fn preview_path(made: &Resp) -> String {
    let url = made.json()["url"].as_str().unwrap_or("").to_string();
    url[url.find("/preview/").expect("a preview URL")..].to_string()
}

/// What the echo server saw: its request line and header names (lowercase) and values.
fn seen(r: &Resp) -> (String, Vec<(String, String)>) {
    let v = r.json();
    let headers = v["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h[0].as_str().unwrap().to_ascii_lowercase(),
                h[1].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (v["line"].as_str().unwrap().to_string(), headers)
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn the_preview_proxy_passes_nothing_it_should_not() {
    require(Tool::Git);
    let settings = "[server.auth]\nmethods = [\"dev-token\"]\n[server.api]\nurl = \"https://svc.example.com/api/v1\"\n[server.preview]\ndeny_ports = [2222]\n";
    let s = Server::with(Opts {
        settings: Some(settings),
        ..Opts::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let id = echo_run(&s, dir.path(), port);

    // The URL comes from the configured public URL, never from the request's Host.
    let auth = s.auth();
    let made = s.raw(
        "POST",
        &format!("/api/v1/runs/{id}/preview"),
        &[("Authorization", &auth), ("Host", "evil.example")],
        Some(
            json!({"port": port, "expires_in_secs": 600, "signed": true})
                .to_string()
                .as_bytes(),
        ),
    );
    assert_eq!(made.status, 201, "{}", made.text());
    let url = made.json()["url"].as_str().unwrap().to_string();
    assert!(url.starts_with("https://svc.example.com/preview/"), "{url}");
    let path = preview_path(&made);

    // Credentials and svc's headers stay with svc.
    let r = s.raw(
        "POST",
        &format!("{path}echo?q=1"),
        &[
            ("Cookie", "__svc_session=the-users-session; svc-demo=1"),
            ("Authorization", &auth),
            ("Proxy-Authorization", "Basic eDp5"),
            ("X-Svc-Demo", "1"),
            ("X-Install-Token", "t"),
            ("X-App", "kept"),
            ("Content-Type", "text/plain"),
        ],
        Some(b"payload"),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let (line, headers) = seen(&r);
    assert_eq!(line, "POST /echo?q=1 HTTP/1.0");
    let names: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
    for private in [
        "cookie",
        "authorization",
        "proxy-authorization",
        "x-svc-demo",
        "x-install-token",
    ] {
        assert!(
            !names.contains(&private),
            "{private} reached the sandbox: {names:?}"
        );
    }
    assert!(
        headers.contains(&("x-app".into(), "kept".into())),
        "{headers:?}"
    );
    assert_eq!(r.json()["body"], "payload");
    assert!(
        !r.text().contains(&s.token),
        "the dev token reached the sandbox"
    );

    // Cookies and site-wide headers do not come back; every answer is sandboxed.
    assert!(r.headers_named("set-cookie").is_empty(), "{:?}", r.headers);
    assert_eq!(r.header("clear-site-data"), None);
    assert_eq!(r.header("strict-transport-security"), None);
    assert_eq!(r.header("service-worker-allowed"), None);
    let csp = r.header("content-security-policy").expect("CSP");
    assert!(csp.starts_with("sandbox "), "{csp}");
    assert!(!csp.contains("allow-same-origin"), "{csp}");
    assert_eq!(r.header("referrer-policy"), Some("no-referrer"));

    // Header injection through the path: 400, and nothing reaches the sandbox.
    for evil in [
        "x%20HTTP/1.0%0d%0aX-Injected:%20yes%0d%0aY:%20",
        "a%0aX-Injected:%20yes",
        "a%0d%0a%0d%0aGET%20/smuggled",
        "a%09b",
        "a%00b",
    ] {
        let r = s.raw("GET", &format!("{path}{evil}"), &[], None);
        assert_eq!(
            assert_error(&r, 400)["errors"][0]["code"],
            "invalid_preview_path",
            "{evil}"
        );
    }
    // An encoded path is passed on as sent.
    let r = s.raw("GET", &format!("{path}a%2Fb%3Fc"), &[], None);
    assert_eq!(seen(&r).0, "GET /a%2Fb%3Fc HTTP/1.0");

    // svc's own port and a denied port: no URL, and no proxying with a URL made anyway.
    let own = s.tcp_port();
    let key = std::fs::read(s.path().join("preview.key")).unwrap();
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        + 600;
    for p in [own, 2222] {
        let r = make_preview(&s, &id, p, true);
        assert_eq!(
            assert_error(&r, 403)["errors"][0]["code"],
            "port_not_previewable",
            "{p}"
        );
        let tok = svc::internal::server::preview::token(&key, true, &id, p, exp);
        for path in ["health", "api/v1/user"] {
            let r = s.raw("GET", &format!("/preview/{id}/{p}/{tok}/{path}"), &[], None);
            assert_eq!(
                assert_error(&r, 403)["errors"][0]["code"],
                "port_not_previewable"
            );
        }
    }

    s.post(&format!("/api/v1/runs/{id}/cancel"), "");
    wait_run_end(&s, &id);
}

/// Reads one HTTP response head from `r` (status and lowercase headers).
fn read_head(r: &mut impl std::io::BufRead) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    (status, headers)
}

/// A masked WebSocket text frame (client to server) of up to 125 bytes.
fn ws_frame(text: &str) -> Vec<u8> {
    let mask = [0x12u8, 0x34, 0x56, 0x78];
    let mut f = vec![0x81, 0x80 | text.len() as u8];
    f.extend_from_slice(&mask);
    f.extend(text.bytes().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

/// One unmasked frame from the server: (opcode, payload).
fn ws_read(r: &mut impl std::io::Read) -> (u8, String) {
    let mut head = [0u8; 2];
    r.read_exact(&mut head).unwrap();
    let mut data = vec![0u8; (head[1] & 0x7f) as usize];
    r.read_exact(&mut data).unwrap();
    (head[0] & 0x0f, String::from_utf8_lossy(&data).into_owned())
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_websocket_in_the_sandbox_is_reached_through_the_preview_both_ways() {
    require(Tool::Git);
    let s = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let id = echo_run(&s, dir.path(), port);
    let made = make_preview(&s, &id, port, true);
    assert_eq!(made.status, 201, "{}", made.text());
    let path = preview_path(&made);
    let mut conn = s.connect();
    write!(
        conn,
        "GET {path}ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
         Cookie: __svc_session=s\r\n\r\n"
    )
    .unwrap();
    let mut r = std::io::BufReader::new(conn);
    let (status, headers) = read_head(&mut r);
    assert_eq!(status, 101, "{headers:?}");
    let get = |k: &str| {
        headers
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    // RFC 6455's example key: the sandbox's accept value comes through unchanged.
    assert_eq!(
        get("sec-websocket-accept"),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
    assert_eq!(
        get("upgrade").map(str::to_ascii_lowercase).as_deref(),
        Some("websocket")
    );
    for text in ["hello", "second message", &"x".repeat(100)] {
        r.get_mut().write_all(&ws_frame(text)).unwrap();
        assert_eq!(ws_read(&mut r), (1, format!("echo:{text}")));
    }
    // A close from the browser reaches the sandbox, whose close comes back.
    r.get_mut().write_all(&[0x88, 0x80, 1, 2, 3, 4]).unwrap();
    assert_eq!(ws_read(&mut r).0, 8);
    s.post(&format!("/api/v1/runs/{id}/cancel"), "");
    wait_run_end(&s, &id);
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_server_started_in_the_background_by_one_stage_answers_a_preview_in_a_later_one() {
    require(Tool::Git);
    let s = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("echo_server.py");
    std::fs::write(&script, ECHO_SERVER).unwrap();
    let port = free_port();
    let flow = format!(
        "digraph w {{ start [shape=Mdiamond]; exit [shape=Msquare];\n\
         serve [shape=parallelogram, script={}];\n\
         review [shape=hexagon, label=\"Looks right?\"];\n\
         start -> serve -> review; review -> exit [label=\"[Y] Yes\"]\n}}",
        serde_json::to_string(&format!(
            "nohup python3 {} {port} >/dev/null 2>&1 &",
            script.display()
        ))
        .unwrap()
    );
    let id = create_run(&s, &json!({"workflow": package(&flow)}));
    start_run(&s, &id);
    wait_kind(&s, &id, &["blocked"]);
    let path = preview_path(&make_preview(&s, &id, port, true));
    let page = wait_for(30, "the background server", || {
        let r = s.raw("GET", &format!("{path}page"), &[], None);
        (r.status == 200).then_some(r)
    });
    assert_eq!(seen(&page).0, "GET /page HTTP/1.0");
    s.post(&format!("/api/v1/runs/{id}/cancel"), "");
    wait_run_end(&s, &id);
    // The background server is the `local` provider's to leave behind (docs/decisions.md):
    // stop it by its pid.
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmd).contains(&script.display().to_string()) {
            if let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() {
                // SAFETY: a signal to the test's own child process, found by its script.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn previews_on_their_own_listener_are_never_served_on_the_uis_origin() {
    require(Tool::Git);
    let settings =
        "[server.auth]\nmethods = [\"dev-token\"]\n[server.preview]\nlisten = \"127.0.0.1:0\"\n";
    let s = Server::with(Opts {
        settings: Some(settings),
        ..Opts::default()
    });
    let base = s
        .banner
        .iter()
        .find_map(|l| l.strip_prefix("svc: previews on "))
        .unwrap_or_else(|| panic!("no preview listener in {:?}", s.banner))
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let id = echo_run(&s, dir.path(), port);
    let made = make_preview(&s, &id, port, true);
    let url = made.json()["url"].as_str().unwrap().to_string();
    assert!(
        url.starts_with(&format!("{base}/preview/")),
        "{url} vs {base}"
    );
    let path = preview_path(&made);
    // The UI's origin does not serve it.
    let r = s.raw("GET", &format!("{path}page"), &[], None);
    assert_error(&r, 404);
    // The preview listener does, and serves nothing else.
    let addr = base.trim_start_matches("http://").to_string();
    let get = |p: &str, headers: &[(&str, &str)]| {
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        let mut head = format!("GET {p} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        c.write_all(head.as_bytes()).unwrap();
        let r = read_response(&mut std::io::BufReader::new(c));
        let csp = r.header("content-security-policy").map(String::from);
        (r.status, csp)
    };
    let (status, csp) = get(&format!("{path}page"), &[]);
    assert_eq!(status, 200);
    // Another port of the same host shares cookies: pages stay without an origin.
    assert!(!csp.unwrap_or_default().contains("allow-same-origin"));
    let auth = s.auth();
    assert_eq!(get("/api/v1/user", &[("Authorization", &auth)]).0, 404);
    assert_eq!(get("/health", &[]).0, 404);
    // Its own port is one of svc's: never a preview target.
    let preview_port: u16 = base.rsplit_once(':').unwrap().1.parse().unwrap();
    assert_error(&make_preview(&s, &id, preview_port, true), 403);
    s.post(&format!("/api/v1/runs/{id}/cancel"), "");
    wait_run_end(&s, &id);
}

#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn previews_on_their_own_host_keep_an_origin_and_their_cookies_only() {
    require(Tool::Git);
    let settings = "[server.auth]\nmethods = [\"dev-token\"]\n[server.api]\nurl = \"http://svc.test/api/v1\"\n[server.preview]\nurl = \"http://preview.test\"\n";
    let s = Server::with(Opts {
        settings: Some(settings),
        ..Opts::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let id = echo_run(&s, dir.path(), port);
    let made = make_preview(&s, &id, port, true);
    let url = made.json()["url"].as_str().unwrap().to_string();
    assert!(url.starts_with("http://preview.test/preview/"), "{url}");
    let path = preview_path(&made);
    // On the UI's host: not served.
    assert_error(
        &s.raw("GET", &format!("{path}page"), &[("Host", "svc.test")], None),
        404,
    );
    // On the preview host: served with an origin of its own, cookies kept to itself; the
    // app's own cookies come back to it, svc's names and credentials never.
    let auth = s.auth();
    let r = s.raw(
        "GET",
        &format!("{path}page"),
        &[
            ("Host", "preview.test"),
            ("Cookie", "app=1; __svc_session=s; svc-demo=1; theme=dark"),
            ("Authorization", &auth),
        ],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let (_, upstream) = seen(&r);
    let cookies: Vec<&str> = upstream
        .iter()
        .filter(|(k, _)| k == "cookie")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(cookies, ["app=1; theme=dark"], "{upstream:?}");
    assert!(!upstream.iter().any(|(k, _)| k == "authorization"));
    let csp = r.header("content-security-policy").unwrap();
    assert!(csp.contains("allow-same-origin"), "{csp}");
    let cookies = r.headers_named("set-cookie");
    assert_eq!(cookies.len(), 2, "{cookies:?}");
    for c in cookies {
        assert!(c.ends_with(&format!("; Path={path}")), "{c}");
        assert!(!c.to_ascii_lowercase().contains("domain="), "{c}");
    }
    assert_eq!(r.header("clear-site-data"), None);
    // A service worker's scope stays below the preview's own path: one preview on the
    // shared host cannot intercept another's pages.
    assert_eq!(r.header("service-worker-allowed"), None);
    // The preview host serves nothing but previews, credentials or not.
    let api = s.raw(
        "GET",
        "/api/v1/user",
        &[("Host", "preview.test"), ("Authorization", &auth)],
        None,
    );
    assert_error(&api, 404);
    s.post(&format!("/api/v1/runs/{id}/cancel"), "");
    wait_run_end(&s, &id);
}

/// A preview host under the UI's parent domain is a separate origin but not a separate
/// cookie jar: a page with an origin there could set `svc-demo=1; domain=example.test` for
/// the UI. So it is served as the fallback is: sandboxed without `allow-same-origin`, no
/// `Set-Cookie` passed on, no cookie passed upstream.
#[test]
#[cfg_attr(not(has_git), ignore = "needs git: apt-get install git")]
fn a_preview_host_sharing_the_uis_parent_domain_keeps_no_origin() {
    require(Tool::Git);
    let settings = "[server.auth]\nmethods = [\"dev-token\"]\n[server.api]\nurl = \"http://svc.example.test/api/v1\"\n[server.preview]\nurl = \"http://preview.example.test\"\n";
    let s = Server::with(Opts {
        settings: Some(settings),
        ..Opts::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let id = echo_run(&s, dir.path(), port);
    let made = make_preview(&s, &id, port, true);
    let url = made.json()["url"].as_str().unwrap().to_string();
    assert!(
        url.starts_with("http://preview.example.test/preview/"),
        "{url}"
    );
    let path = preview_path(&made);
    let r = s.raw(
        "GET",
        &format!("{path}page"),
        &[("Host", "preview.example.test"), ("Cookie", "app=1")],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let csp = r.header("content-security-policy").unwrap();
    assert!(csp.starts_with("sandbox "), "{csp}");
    assert!(!csp.contains("allow-same-origin"), "{csp}");
    assert!(r.headers_named("set-cookie").is_empty(), "{:?}", r.headers);
    let (_, upstream) = seen(&r);
    assert!(!upstream.iter().any(|(k, _)| k == "cookie"), "{upstream:?}");
    s.post(&format!("/api/v1/runs/{id}/cancel"), "");
    wait_run_end(&s, &id);
}
