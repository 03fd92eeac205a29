//! MCP servers for tests: the real ones `.ci/mcp-servers.sh` installs from PyPI and npm
//! (found under `.mcp-servers/` or `$SVC_MCP_SERVERS_DIR`), the scripted ones in
//! `tests/mcp/` (Python), HTTP servers as child processes that die with their guard, and the
//! checks that nothing was left behind (processes by group, threads by name).
//!
//! A test of a real server needs [`Tool::McpServers`](svc::internal::test_tools::Tool): where the build
//! did not find them it is reported as ignored with the install command; under
//! `SVC_REQUIRE_MCP=1` (set by `.ci/run` after installing them) it runs and fails when they
//! are missing. The scripted servers need only `python3`.
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where the real servers are installed.
pub fn servers_dir() -> PathBuf {
    svc::internal::test_tools::mcp_servers_dir()
}

/// `tests/mcp/<name>`.
pub fn script(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp")
        .join(name)
        .display()
        .to_string()
}

/// `python3` for the scripted servers (they need only the standard library).
pub fn python() -> String {
    let ok = Command::new("python3")
        .arg("-c")
        .arg("import json, http.server")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "the scripted MCP servers need python3 (apt-get install python3)"
    );
    "python3".into()
}

/// An executable of the installed servers: `venv/bin/<name>` or `npm/node_modules/.bin/<name>`.
/// For a test that starts with `require(Tool::McpServers)`.
pub fn installed(name: &str) -> String {
    let dir = servers_dir();
    [
        dir.join("venv/bin").join(name),
        dir.join("npm/node_modules/.bin").join(name),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .map(|p| p.display().to_string())
    .unwrap_or_else(|| panic!("the MCP server `{name}` is not in {}", dir.display()))
}

/// The virtualenv's Python (it has the `mcp` SDK).
pub fn sdk_python() -> String {
    installed("python")
}

/// A free loopback port (bound and released: good enough for a test server started next).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A server process killed (with its group) and reaped when dropped.
pub struct ServerProc {
    pub child: Child,
    pub port: u16,
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let pid = self.child.id() as i32;
        // SAFETY: test cleanup of our own child's group.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `cmd` in its own group; waits until `port` accepts connections (at most 20 s).
pub fn start_http(mut cmd: Command, port: u16) -> ServerProc {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = cmd.spawn().expect("start the HTTP MCP server");
    let p = ServerProc { child, port };
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the server never listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    p
}

/// Starts `tests/mcp/http_server.py MODE LOG` and reads the port it prints.
pub fn scripted_http(python: &str, mode: &str, log: &Path) -> ServerProc {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(python)
        .arg(script("http_server.py"))
        .arg(mode)
        .arg(log)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the scripted HTTP server");
    let mut line = String::new();
    let out = child.stdout.take().expect("stdout");
    std::io::BufReader::new(out)
        .read_line(&mut line)
        .expect("the port line");
    let port = line.trim().parse().expect("a port number");
    ServerProc { child, port }
}

/// The JSON lines a scripted server logged.
pub fn logged(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Waits until `f` holds (at most `secs` seconds).
pub fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Threads of this process whose name starts with `mcp-` (the client's readers).
pub fn mcp_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.starts_with("mcp-"))
                })
                .count()
        })
        .unwrap_or(0)
}

/// Whether any process of group `pgid` still runs (zombies do not count).
pub fn group_alive(pgid: i32) -> bool {
    svc::internal::procs::group_running(pgid)
}

/// Tests that count the client's threads take this lock, so no other client runs meanwhile.
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
