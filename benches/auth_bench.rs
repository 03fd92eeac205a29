//! Authentication benchmark (harness = false; `cargo bench --bench auth_bench`): requests/s
//! of an authenticated `GET /api/v1/runs/{id}` over keep-alive loopback connections with each
//! credential (dev token, session cookie, Ed25519 JWT), and each one's ratio to the dev
//! token. Many short rounds alternate the methods so a noisy machine hurts them alike.
//! `SVC_BENCH_SECS` (default 0.25) sets each measurement's length, `SVC_BENCH_ROUNDS`
//! (default 16) the rounds, `SVC_BENCH_CONNS` (default 4) the connections.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ed25519_dalek::pkcs8::EncodePublicKey;
use ed25519_dalek::{Signer, SigningKey};
use serde_json::json;
use std::time::{Duration, Instant};
use support::Client;
use svc::internal::server::{self, http::Listen, ServerOptions};

mod support;

/// A keep-alive client sending `header` and a same-origin `Origin` with every request.
fn client(addr: &str, header: &str) -> Client {
    Client::new(addr, &format!("Origin: http://bench.test\r\n{header}"))
}

fn rps(addr: &str, header: &str, path: &str, conns: usize, secs: f64) -> f64 {
    let stop = Instant::now() + Duration::from_secs_f64(secs);
    let handles: Vec<_> = (0..conns)
        .map(|_| {
            let (addr, header, path) = (addr.to_string(), header.to_string(), path.to_string());
            std::thread::spawn(move || {
                let mut c = client(&addr, &header);
                let mut n = 0u64;
                while Instant::now() < stop {
                    let st = c.call("GET", &path, "").status;
                    assert_eq!(st, 200);
                    n += 1;
                }
                n
            })
        })
        .collect();
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    total as f64 / secs
}

fn main() {
    let secs = support::env_or("SVC_BENCH_SECS", 0.25);
    let rounds = support::env_or("SVC_BENCH_ROUNDS", 16.0) as usize;
    let conns = support::env_or("SVC_BENCH_CONNS", 4.0) as usize;
    let key = SigningKey::from_bytes(&[42u8; 32]);
    let pem = key
        .verifying_key()
        .to_public_key_pem(Default::default())
        .expect("pem");
    // Set before any thread starts; the server reads both once at startup.
    std::env::set_var("SESSION_SECRET", "b".repeat(64));
    std::env::set_var("SVC_JWT_PUBLIC_KEY", pem);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("settings.toml"),
        "[server.web]\nenabled = true\nurl = \"http://bench.test\"\n[server.auth]\nmethods = [\"dev-token\", \"codehost\"]\n[server.auth.codehost]\nallowed_usernames = [\"alice\"]\n",
    )
    .expect("settings");
    let running = server::start(ServerOptions {
        state_dir: dir.path().to_path_buf(),
        settings_path: None,
        listen: Some(Listen::Tcp("127.0.0.1:0".into())),
        dev: false,
    })
    .expect("server");
    let addr = running.http.local_addr().to_string();
    let token = running.dev_token.clone().map(|t| t.0).unwrap_or_default();
    let dev = format!("Authorization: Bearer {token}");

    let mut c = client(&addr, &dev);
    let body = json!({"workflow": {"entrypoint": "h.dot", "files": {"h.dot": "digraph h { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }"}}}).to_string();
    let created = c.call("POST", "/api/v1/runs", &body);
    assert_eq!(created.status, 201);
    let text = String::from_utf8(created.body).expect("utf-8");
    let start = text.find("\"id\":\"").expect("id") + 6;
    let path = format!("/api/v1/runs/{}", &text[start..start + 26]);

    let mut f = client(&addr, "Content-Type: application/x-www-form-urlencoded");
    let signed_in = f.call("POST", "/auth/dev-token", &format!("token={token}"));
    assert_eq!(signed_in.status, 303, "dev-token sign-in");
    let cookie = signed_in.session_cookie.expect("a session cookie");
    let cookie = format!("Cookie: {cookie}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let h = URL_SAFE_NO_PAD.encode(json!({"alg": "EdDSA", "typ": "JWT"}).to_string());
    let p = URL_SAFE_NO_PAD.encode(
        json!({"iss": "svc-web", "sub": "https://github.com/alice", "iat": now, "exp": now + 3600})
            .to_string(),
    );
    let sig = key.sign(format!("{h}.{p}").as_bytes());
    let jwt = format!(
        "Authorization: Bearer {h}.{p}.{}",
        URL_SAFE_NO_PAD.encode(sig.to_bytes())
    );

    let methods = [("dev token", dev), ("cookie", cookie), ("jwt", jwt)];
    // Warm-up, and a check that every credential works.
    for (_, header) in &methods {
        rps(&addr, header, &path, conns, 0.2);
    }
    let mut totals = [0f64; 3];
    for _ in 0..rounds {
        for (i, (_, header)) in methods.iter().enumerate() {
            totals[i] += rps(&addr, header, &path, conns, secs);
        }
    }
    for (i, (name, _)) in methods.iter().enumerate() {
        let r = totals[i] / rounds as f64;
        println!(
            "auth GET /api/v1/runs/{{id}} {name}: {r:.0} req/s, ratio to dev token {:.3}",
            totals[i] / totals[0]
        );
    }
}
