//! The one support module of every benchmark (`mod support;`): knobs read from the
//! environment, a keep-alive HTTP/1.1 client for the server benches, the statistics the
//! benches print (median, percentile) and CPU clocks; and the integration tests' scripted
//! LLM provider for the agent bench.
//!
//! Must not: measure or print anything itself; each bench says what it measures.

// Each bench uses the part of the support it needs; the rest is dead code there.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The integration tests' scripted provider (`tests/support/llm.rs`).
#[cfg(feature = "llm")]
#[path = "../../tests/support/llm.rs"]
pub mod llm;

/// The integration tests' scripted code host (`tests/support/codehost.rs`).
#[cfg(feature = "cli")]
#[path = "../../tests/support/codehost.rs"]
pub mod codehost;

/// The real `svc` binary started as a server (`support/binary.rs`).
#[cfg(feature = "cli")]
pub mod binary;

/// Big stores filled fast (`support/seed.rs`).
pub mod seed;

/// The server benches' in-process server and clients (`support/server.rs`).
#[cfg(feature = "cli")]
pub mod server;

/// The number in environment variable `name`, or `default` when it is unset or not a number.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The middle value (the upper one of an even count); sorts `v`.
pub fn median<T: PartialOrd + Copy>(v: &mut [T]) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

/// The value at fraction `p` (0.0-1.0) of an already sorted slice; 0 when it is empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// User + system CPU time of `who` (`libc::RUSAGE_SELF`, `RUSAGE_CHILDREN`) so far.
pub fn rusage(who: i32) -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(who, &mut u) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// One answer read by [`Client::call`].
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
    /// The `__svc_session=...` pair of a `Set-Cookie` header, if the answer set one.
    pub session_cookie: Option<String>,
}

/// One keep-alive connection that sends the same extra header lines with every request
/// (for example `Authorization: Bearer <token>`), and reads Content-Length bodies.
pub struct Client {
    r: BufReader<TcpStream>,
    w: TcpStream,
    headers: String,
}

impl Client {
    /// Connects to `addr`; `headers` are header lines (without the final CRLF) sent with
    /// every request.
    pub fn new(addr: &str, headers: &str) -> Client {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_nodelay(true).ok();
        Client {
            r: BufReader::new(s.try_clone().expect("clone")),
            w: s,
            headers: headers.to_string(),
        }
    }

    /// Sends one request and reads its answer.
    pub fn call(&mut self, method: &str, path: &str, body: &str) -> Reply {
        self.call_with(method, path, "", body)
    }

    /// [`Client::call`] with more header lines for this request only (each ending `\r\n`).
    pub fn call_with(&mut self, method: &str, path: &str, extra: &str, body: &str) -> Reply {
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: b\r\n{}\r\n{extra}Content-Length: {}\r\n\r\n{body}",
            self.headers,
            body.len()
        );
        self.w.write_all(req.as_bytes()).expect("write");
        let mut line = String::new();
        self.r.read_line(&mut line).expect("status");
        let status: u16 = line[9..12].parse().expect("status code");
        let mut len = 0usize;
        let mut session_cookie = None;
        loop {
            let mut h = String::new();
            self.r.read_line(&mut h).expect("header");
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
                if k.eq_ignore_ascii_case("set-cookie") && v.trim().starts_with("__svc_session=") {
                    session_cookie = Some(v.trim().split(';').next().unwrap_or("").to_string());
                }
            }
        }
        let mut body = vec![0; len];
        self.r.read_exact(&mut body).expect("body");
        Reply {
            status,
            body,
            session_cookie,
        }
    }
}
