//! The real `svc` binary as a bench drives it: a state directory with its settings and vault
//! secrets, `svc server start --dev` on a free port, its dev token, killed on drop.
//!
//! Must not: measure anything (the benches time what they drive through it).

use super::Client;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The `svc` binary this bench was built with.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_svc")
}

/// A fresh state directory holding `settings` as its `settings.toml` and each
/// `(name, value)` in its vault (`svc secrets set`).
pub fn state_dir(settings: &str, secrets: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("settings.toml"), settings).expect("settings");
    for (name, value) in secrets {
        let ok = Command::new(bin())
            .args(["secrets", "set", name, value, "--state-dir"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "svc secrets set {name}");
    }
    dir
}

/// The real server, its state directory and dev token; killed when dropped (and the state
/// directory removed, when it was a temporary one).
pub struct Svc {
    pub child: Child,
    pub addr: String,
    pub token: String,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Svc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Svc {
    /// Starts `cmd` (the binary, or it behind `taskset`) as `server start --dev` on `dir`
    /// and a free port; returns once it listens.
    pub fn start(cmd: Command, dir: tempfile::TempDir) -> Svc {
        let path = dir.path().to_path_buf();
        Svc::start_at(cmd, &path, Some(dir))
    }

    /// [`Svc::start`] on a state directory the caller keeps (a bench reusing a big store).
    pub fn start_in(cmd: Command, dir: &Path) -> Svc {
        Svc::start_at(cmd, dir, None)
    }

    fn start_at(mut cmd: Command, dir: &Path, owned: Option<tempfile::TempDir>) -> Svc {
        cmd.args(["server", "start", "--dev", "--state-dir"])
            .arg(dir)
            .args(["--listen", "127.0.0.1:0"])
            .env("RUST_LOG", "warn,tiny_http=off")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("spawn svc");
        let out = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(out).lines();
        let addr = loop {
            let l = lines.next().expect("svc output").expect("line");
            if let Some(a) = l.strip_prefix("svc: listening on http://") {
                break a.to_string();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        let token = dev_token(dir);
        Svc {
            child,
            addr,
            token,
            _dir: owned,
        }
    }

    /// A keep-alive client with the dev token.
    pub fn client(&self) -> Client {
        Client::new(&self.addr, &format!("Authorization: Bearer {}", self.token))
    }

    /// One request on a new connection: the status and the JSON body (`null` if not JSON).
    pub fn json(&self, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
        let r = self.client().call(method, path, body);
        (
            r.status,
            serde_json::from_slice(&r.body).unwrap_or(serde_json::Value::Null),
        )
    }
}

fn dev_token(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("dev-token"))
        .expect("dev token")
        .trim()
        .to_string()
}
