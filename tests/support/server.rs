//! Test helpers: start the real `svc` binary on a free loopback port or a Unix socket, and a
//! tiny HTTP/1.1 client over std sockets (Content-Length and chunked bodies, SSE reading).

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub enum Addr {
    Tcp(String),
    Unix(PathBuf),
}

pub struct Server {
    pub child: Child,
    pub addr: Addr,
    pub dir: tempfile::TempDir,
    pub token: String,
    pub stderr_path: PathBuf,
    /// Lines the server printed before `svc: listening on` (install URL and token, ...).
    pub banner: Vec<String>,
}

pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    /// Every value of header `name` (e.g. several `Set-Cookie`).
    pub fn headers_named(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The value a `Set-Cookie` header gives cookie `name` (`None` when not set).
    pub fn set_cookie(&self, name: &str) -> Option<String> {
        self.headers_named("set-cookie").into_iter().find_map(|c| {
            let (k, rest) = c.split_once('=')?;
            (k == name).then(|| rest.split(';').next().unwrap_or("").to_string())
        })
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub struct Opts<'a> {
    pub unix: bool,
    pub settings: Option<&'a str>,
    pub dev: bool,
    pub dir: Option<tempfile::TempDir>,
    /// Start the server under this descriptor limit (soft and hard), as `ulimit -n` would.
    pub nofile: Option<u64>,
    /// The server's umask (default: inherited).
    pub umask: Option<u32>,
    /// Extra environment variables for the server process (e.g. `SESSION_SECRET`).
    pub env: Vec<(&'a str, String)>,
}

impl Default for Opts<'_> {
    fn default() -> Self {
        Opts {
            unix: false,
            settings: None,
            dev: true,
            dir: None,
            nofile: None,
            umask: None,
            env: Vec::new(),
        }
    }
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_svc")
}

impl Server {
    pub fn start() -> Server {
        Server::with(Opts::default())
    }

    pub fn with(o: Opts<'_>) -> Server {
        let dir = o
            .dir
            .unwrap_or_else(|| tempfile::tempdir().expect("tempdir"));
        if let Some(s) = o.settings {
            std::fs::write(dir.path().join("settings.toml"), s).expect("settings");
        }
        let listen = if o.unix {
            format!("unix:{}", dir.path().join("svc.sock").display())
        } else {
            "127.0.0.1:0".to_string()
        };
        let stderr_path = dir
            .path()
            .join(format!("stderr-{}.log", std::process::id()));
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut cmd = Command::new(bin());
        cmd.args(["server", "start", "--state-dir"])
            .arg(dir.path())
            .args(["--listen", &listen])
            .env("RUST_LOG", "warn,tiny_http=off")
            .stdout(Stdio::piped())
            .stderr(stderr);
        if o.dev {
            cmd.arg("--dev");
        }
        if let Some(mask) = o.umask {
            use std::os::unix::process::CommandExt;
            // SAFETY: umask is async-signal-safe and allocates nothing.
            unsafe {
                cmd.pre_exec(move || {
                    libc::umask(mask as libc::mode_t);
                    Ok(())
                });
            }
        }
        if let Some(n) = o.nofile {
            use std::os::unix::process::CommandExt;
            // SAFETY: only setrlimit, which is async-signal-safe, runs between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let rl = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        for (k, v) in &o.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn svc");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut addr = None;
        let mut banner = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            match lines.next() {
                Some(Ok(l)) => {
                    if let Some(a) = l.strip_prefix("svc: listening on ") {
                        addr = Some(if let Some(p) = a.strip_prefix("unix:") {
                            Addr::Unix(PathBuf::from(p))
                        } else {
                            Addr::Tcp(a.trim_start_matches("http://").to_string())
                        });
                        break;
                    }
                    banner.push(l);
                }
                _ => break,
            }
        }
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let addr = addr.unwrap_or_else(|| {
            let _ = child.kill();
            panic!(
                "server did not start: {}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            )
        });
        let token = std::fs::read_to_string(dir.path().join("dev-token"))
            .map(|t| t.trim().to_string())
            .unwrap_or_default();
        Server {
            child,
            addr,
            dir,
            token,
            stderr_path,
            banner,
        }
    }

    /// The TCP port the server listens on (panics on a Unix socket).
    pub fn tcp_port(&self) -> u16 {
        match &self.addr {
            Addr::Tcp(a) => a
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse().ok())
                .expect("a port"),
            Addr::Unix(p) => panic!("{} is a Unix socket", p.display()),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Stops the server (SIGKILL, as a crash would) and returns its state directory.
    pub fn kill(mut self) -> tempfile::TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::replace(&mut self.dir, tempfile::tempdir().expect("tempdir"))
    }

    pub fn connect(&self) -> Box<dyn ReadWrite> {
        match &self.addr {
            Addr::Tcp(a) => {
                let s = TcpStream::connect(a).expect("connect");
                s.set_read_timeout(Some(Duration::from_secs(30))).ok();
                Box::new(s)
            }
            Addr::Unix(p) => {
                let s = UnixStream::connect(p).expect("connect unix");
                s.set_read_timeout(Some(Duration::from_secs(30))).ok();
                Box::new(s)
            }
        }
    }

    pub fn auth(&self) -> String {
        format!("Bearer {}", self.token)
    }

    /// A request with the dev token.
    pub fn call(&self, method: &str, path: &str, body: Option<&str>) -> Resp {
        let auth = self.auth();
        self.raw(
            method,
            path,
            &[("Authorization", auth.as_str())],
            body.map(str::as_bytes),
        )
    }

    pub fn get(&self, path: &str) -> Resp {
        self.call("GET", path, None)
    }

    pub fn post(&self, path: &str, body: &str) -> Resp {
        self.call("POST", path, Some(body))
    }

    pub fn raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Resp {
        let mut s = self.connect();
        // A `Host` among `headers` replaces the default one (there is only ever one).
        let host = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("host"))
            .map_or("localhost", |(_, v)| *v);
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
        for (k, v) in headers
            .iter()
            .filter(|(k, _)| !k.eq_ignore_ascii_case("host"))
        {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(b) = body {
            req.push_str(&format!("Content-Length: {}\r\n", b.len()));
            if !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            {
                req.push_str("Content-Type: application/json\r\n");
            }
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).expect("write");
        if let Some(b) = body {
            let _ = s.write_all(b);
        }
        read_response(&mut BufReader::new(s))
    }

    /// Opens an SSE stream; returns the status, headers and a reader positioned at the body.
    pub fn sse(&self, path: &str, headers: &[(&str, &str)]) -> Sse {
        let mut s = self.connect();
        let auth = self.auth();
        let mut req =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: {auth}\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).expect("write");
        let mut r = BufReader::new(s);
        let (status, headers) = read_head(&mut r);
        let chunked = headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
        Sse {
            status,
            headers,
            reader: r,
            chunked,
            buf: Vec::new(),
            done: false,
        }
    }

    /// The server's open descriptors, peak and current resident memory (KiB) and threads, from
    /// /proc.
    pub fn proc_stats(&self) -> ProcStats {
        proc_stats(self.child.id())
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct ProcStats {
    pub fds: usize,
    pub hwm_kib: u64,
    pub rss_kib: u64,
    pub threads: u64,
}

pub fn proc_stats(pid: u32) -> ProcStats {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    ProcStats {
        fds,
        hwm_kib: field("VmHWM:"),
        rss_kib: field("VmRSS:"),
        threads: field("Threads:"),
    }
}

pub trait ReadWrite: Read + Write + Send {}
impl<T: Read + Write + Send> ReadWrite for T {}

fn read_head(r: &mut impl BufRead) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    r.read_line(&mut line).expect("status line");
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        if r.read_line(&mut l).expect("header") == 0 {
            break;
        }
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    (status, headers)
}

pub fn read_response(r: &mut impl BufRead) -> Resp {
    let (status, headers) = read_head(r);
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if get("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).expect("chunk size");
            let n = usize::from_str_radix(size.trim(), 16).expect("chunk size hex");
            if n == 0 {
                let mut end = String::new();
                let _ = r.read_line(&mut end);
                break;
            }
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).expect("chunk");
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(n, 0);
        r.read_exact(&mut body).expect("body");
    } else {
        let _ = r.read_to_end(&mut body);
    }
    Resp {
        status,
        headers,
        body,
    }
}

pub struct Sse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    reader: BufReader<Box<dyn ReadWrite>>,
    chunked: bool,
    buf: Vec<u8>,
    pub done: bool,
}

/// One SSE frame: its `id:` (if any) and its `data:` JSON.
#[derive(Debug)]
pub struct Frame {
    pub id: Option<u64>,
    pub data: Value,
}

impl Sse {
    fn fill(&mut self) -> bool {
        if self.done {
            return false;
        }
        if self.chunked {
            let mut size = String::new();
            if self.reader.read_line(&mut size).unwrap_or(0) == 0 {
                self.done = true;
                return false;
            }
            let n = match usize::from_str_radix(size.trim(), 16) {
                Ok(n) => n,
                Err(_) => {
                    self.done = true;
                    return false;
                }
            };
            if n == 0 {
                self.done = true;
                return false;
            }
            let mut chunk = vec![0; n + 2];
            if self.reader.read_exact(&mut chunk).is_err() {
                self.done = true;
                return false;
            }
            self.buf.extend_from_slice(&chunk[..n]);
            true
        } else {
            let mut tmp = [0u8; 4096];
            match self.reader.read(&mut tmp) {
                Ok(0) | Err(_) => {
                    self.done = true;
                    false
                }
                Ok(n) => {
                    self.buf.extend_from_slice(&tmp[..n]);
                    true
                }
            }
        }
    }

    /// The next event frame (comments skipped); `None` when the stream ended.
    pub fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(pos) = find(&self.buf, b"\n\n") {
                let raw: Vec<u8> = self.buf.drain(..pos + 2).collect();
                let text = String::from_utf8_lossy(&raw);
                let mut id = None;
                let mut data = None;
                for line in text.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        id = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data = serde_json::from_str(v).ok();
                    }
                }
                if let Some(data) = data {
                    return Some(Frame { id, data });
                }
                continue;
            }
            if !self.fill() {
                return None;
            }
        }
    }

    /// Frames until the stream ends.
    pub fn collect(&mut self) -> Vec<Frame> {
        let mut v = Vec::new();
        while let Some(f) = self.next() {
            v.push(f);
        }
        v
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// Polls `f` every 20 ms until it returns `Some`, or panics after `secs`.
pub fn wait_for<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every process on the machine whose command line contains `marker`, as `pid: cmdline`
/// (read from `/proc`; a process that ends while it is read is left out).
pub fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(marker) {
                found.push(format!("{name}: {cmd}"));
            }
        }
    }
    found
}

/// A temporary directory a container can see: not under /tmp, which the container replaces
/// with its own (`CARGO_TARGET_TMPDIR` is under /tmp when the clone is): /var/tmp where it
/// exists.
pub fn outside_tmp() -> tempfile::TempDir {
    let var_tmp = Path::new("/var/tmp");
    let base = if var_tmp.is_dir() {
        var_tmp.to_path_buf()
    } else {
        PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
    };
    tempfile::tempdir_in(base).expect("a temporary directory under /var/tmp")
}

/// A package body for a single-file workflow.
pub fn package(dot: &str) -> Value {
    serde_json::json!({"entrypoint": "main.dot", "files": {"main.dot": dot}})
}

pub const HELLO: &str =
    "digraph hello { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }";

/// Asserts the SPEC 2.7 error shape with `status`, and that the body's request id equals
/// the `x-request-id` header.
pub fn assert_error(r: &Resp, status: u16) -> Value {
    assert_eq!(r.status, status, "body: {}", r.text());
    let b = r.json();
    let rid = r.header("x-request-id").expect("x-request-id").to_string();
    assert_eq!(rid.len(), 36, "uuid");
    assert_eq!(b["request_id"], rid.as_str());
    let e = &b["errors"][0];
    assert_eq!(e["status"], status.to_string().as_str());
    assert!(e["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(e["detail"].as_str().is_some_and(|t| !t.is_empty()));
    assert_eq!(e["request_id"], rid.as_str());
    b
}

/// `(pid, command line)` of every process that can be read (to check no secret is in one).
pub fn command_lines() -> Vec<(String, String)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().into_owned();
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            Some((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")))
        })
        .collect()
}

/// Watches every command line on the machine (every 20 ms, from a thread) for `needle` until
/// the returned closure is called, which returns `pid: command line` of each that held it.
pub fn watch_command_lines(needle: &str) -> impl FnOnce() -> Vec<String> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let watcher = {
        let (done, needle) = (done.clone(), needle.to_string());
        std::thread::spawn(move || {
            let mut leaked = Vec::new();
            while !done.load(Ordering::SeqCst) {
                for (pid, cmd) in command_lines() {
                    if cmd.contains(&needle) {
                        leaked.push(format!("{pid}: {cmd}"));
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            leaked
        })
    };
    move || {
        done.store(true, Ordering::SeqCst);
        watcher.join().expect("the process watcher")
    }
}

/// Everything a user can read of run `id` through the API, as one text: the run, its
/// events, stages (each stage's details), files, graph source and checkpoint.
pub fn everything_readable(s: &Server, id: &str) -> String {
    let mut all = String::new();
    for path in [
        format!("/api/v1/runs/{id}"),
        format!("/api/v1/runs/{id}/events?limit=1000"),
        format!("/api/v1/runs/{id}/stages"),
        format!("/api/v1/runs/{id}/files"),
        format!("/api/v1/runs/{id}/graph/source"),
        format!("/api/v1/runs/{id}/checkpoint"),
    ] {
        let r = s.get(&path);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        all.push_str(&r.text());
    }
    let stages = s.get(&format!("/api/v1/runs/{id}/stages")).json();
    for st in stages["data"].as_array().cloned().unwrap_or_default() {
        if let Some(node) = st["node_id"].as_str().or(st["id"].as_str()) {
            all.push_str(&s.get(&format!("/api/v1/runs/{id}/stages/{node}")).text());
        }
    }
    all
}

/// Stores a provider key in the server's vault with `svc secrets set`, as a user would.
pub fn store_key(s: &Server, name: &str, value: &str) {
    let o = Command::new(bin())
        .args(["secrets", "set", name, value, "--state-dir"])
        .arg(s.path())
        .output()
        .expect("svc secrets set");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Settings with dev-token auth and each `(provider, base_url)` pointed at a test server.
pub fn settings_with(providers: &[(&str, &str)]) -> String {
    let mut s = "[server.auth]\nmethods = [\"dev-token\"]\n".to_string();
    for (name, url) in providers {
        s.push_str(&format!("[llm.providers.{name}]\nbase_url = \"{url}\"\n"));
    }
    s
}

/// A dev server whose Anthropic endpoint is `base` (a scripted test server), with a key in
/// its vault and `extra` appended to its settings.
pub fn served_anthropic(base: &str, extra: &str) -> Server {
    let settings = settings_with(&[("anthropic", base)]) + extra;
    let s = Server::with(Opts {
        settings: Some(&settings),
        ..Opts::default()
    });
    store_key(&s, "ANTHROPIC_API_KEY", "served-key");
    s
}

/// The create-run request body for a workflow source: `{"workflow": <package>}`.
pub fn run_body(dot: &str) -> Value {
    serde_json::json!({ "workflow": package(dot) })
}

/// The run's status (`lifecycle.status`: its kind and what goes with it).
pub fn run_status(s: &Server, id: &str) -> Value {
    s.get(&format!("/api/v1/runs/{id}")).json()["lifecycle"]["status"].clone()
}

/// The run's status kind (`lifecycle.status.kind`).
pub fn status_kind(s: &Server, id: &str) -> Value {
    run_status(s, id)["kind"].clone()
}

/// Waits (up to `secs`) until the run's status kind is `kind`; the status then.
pub fn wait_status(s: &Server, id: &str, kind: &str, secs: u64) -> Value {
    wait_for(secs, &format!("run {id} to be {kind}"), || {
        let st = run_status(s, id);
        (st["kind"] == kind).then_some(st)
    })
}

/// Waits (up to 60 s) until the run's status kind is one of `kinds`.
pub fn wait_kind(s: &Server, id: &str, kinds: &[&str]) -> Value {
    wait_for(60, &format!("run {id} to be one of {kinds:?}"), || {
        let k = status_kind(s, id);
        kinds.iter().any(|w| k == *w).then_some(k)
    })
}

/// Every event of a run (first 1,000).
pub fn run_events(s: &Server, id: &str) -> Vec<Value> {
    s.get(&format!("/api/v1/runs/{id}/events?limit=1000"))
        .json()["data"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Creates a run from a full request body (`POST /api/v1/runs`, expecting 201); the run.
pub fn create_run_json(s: &Server, body: &Value) -> Value {
    let r = s.post("/api/v1/runs", &body.to_string());
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()
}

/// Like [`create_run_json`]; the run's id.
pub fn create_run(s: &Server, body: &Value) -> String {
    create_run_json(s, body)["id"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Starts a created run (expecting 200). Every server run versions its workspace with git,
/// so a test that starts one needs git (and its `cfg_attr`); without it this fails saying so.
pub fn start_run(s: &Server, id: &str) {
    svc::internal::test_tools::require(svc::internal::test_tools::Tool::Git);
    let r = s.post(&format!("/api/v1/runs/{id}/start"), "{}");
    assert_eq!(r.status, 200, "{}", r.text());
}

/// Creates a run from `body`, starts it and waits (up to 60 s) until it ended (succeeded,
/// failed or dead); its id.
pub fn run_to_end(s: &Server, body: &Value) -> String {
    let id = create_run(s, body);
    start_run(s, &id);
    wait_kind(s, &id, &["succeeded", "failed", "dead"]);
    id
}

/// The run resource (`GET /api/v1/runs/{id}`).
pub fn run_json(s: &Server, id: &str) -> Value {
    s.get(&format!("/api/v1/runs/{id}")).json()
}

/// Waits (up to 60 s) until the run succeeded or failed; the run resource then.
pub fn wait_run_end(s: &Server, id: &str) -> Value {
    wait_for(60, &format!("run {id} to end"), || {
        let r = run_json(s, id);
        matches!(
            r["lifecycle"]["status"]["kind"].as_str(),
            Some("succeeded" | "failed")
        )
        .then_some(r)
    })
}
