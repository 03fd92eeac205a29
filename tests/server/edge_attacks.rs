//! Attacks on the HTTP edge of the real binary over loopback, made the way a client without a
//! token could: oversize declared bodies, huge headers, slowloris, descriptor exhaustion.
//! Each checks what the server answered, that its descriptors and memory stay bounded (from
//! /proc/<pid>/fd and VmHWM), and that `/health` answers again afterwards. Loops are bounded;
//! the only time limits are generous liveness deadlines.
//!
//! Each test prints one `edge figure:` line (what was sent, what was answered, peak RSS and
//! descriptors, time until `/health` answered again); see them with
//! `cargo test --test server edge_attacks -- --nocapture --test-threads=1`.

use crate::support::server::{proc_stats, Addr, Opts, ProcStats, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Peak resident memory the server may reach in any of these attacks. An idle debug-build
/// server sits at about 15 MiB; 500 connection threads add a few MiB more.
const PEAK_RSS_BOUND_KIB: u64 = 192 * 1024;

fn addr(s: &Server) -> String {
    match &s.addr {
        Addr::Tcp(a) => a.clone(),
        Addr::Unix(_) => unreachable!("these attacks run over TCP"),
    }
}

fn connect(addr: &str) -> TcpStream {
    let c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(20))).ok();
    c.set_write_timeout(Some(Duration::from_secs(20))).ok();
    c
}

/// Raises this test process's own soft descriptor limit to the hard one (the attacks hold
/// hundreds of sockets); returns the hard limit.
fn raise_own_nofile() -> u64 {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a valid rlimit; the new soft limit stays within the hard one.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
        rl.rlim_cur = rl.rlim_max.min(1 << 20);
        libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
    }
    rl.rlim_max
}

/// Everything the peer sends until it closes, fails or stays silent for the read timeout.
fn read_until_close(c: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = c.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

/// Status, head and body of a raw response.
fn parse(raw: &[u8]) -> Option<(u16, String, String)> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.get(9..12)?.parse().ok()?;
    Some((status, head.to_string(), body.to_string()))
}

/// Asserts an error response of `status` in the API's error shape, ending the connection.
fn assert_edge_error(raw: &[u8], status: u16) -> (String, serde_json::Value) {
    let (got, head, body) =
        parse(raw).unwrap_or_else(|| panic!("no response: {:?}", String::from_utf8_lossy(raw)));
    assert_eq!(got, status, "{head}\n\n{body}");
    let v: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("error body ({e}): {body}"));
    assert_eq!(v["errors"][0]["status"], status.to_string(), "{body}");
    let rid = v["request_id"].as_str().expect("request_id").to_string();
    assert!(head.contains(&format!("x-request-id: {rid}")), "{head}");
    assert!(head.contains("Connection: close"), "{head}");
    (head, v)
}

/// One `GET /health` on a fresh connection: its status, or None when it failed or took
/// longer than `patience`.
fn health(addr: &str, patience: Duration) -> Option<u16> {
    let mut c = TcpStream::connect_timeout(&addr.parse().ok()?, patience).ok()?;
    c.set_read_timeout(Some(patience)).ok()?;
    c.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .ok()?;
    parse(&read_until_close(&mut c)).map(|(s, _, _)| s)
}

/// Polls `/health` until it answers 200; panics after `deadline`. Returns the time it took.
fn health_again(addr: &str, deadline: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if health(addr, Duration::from_secs(2)) == Some(200) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < deadline,
            "/health did not answer 200 within {deadline:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the server holds at most `fds` descriptors; panics after `deadline`.
fn fds_back_to(s: &Server, fds: usize, deadline: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let now = s.proc_stats().fds;
        if now <= fds {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < deadline,
            "the server still holds {now} descriptors (at most {fds} expected)"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Samples the server's descriptors every 10 ms while an attack runs.
struct Sampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<usize>,
}

impl Sampler {
    fn start(s: &Server) -> Sampler {
        let pid = s.child.id();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let mut max_fds = 0;
            while !flag.load(Ordering::SeqCst) {
                max_fds = max_fds.max(proc_stats(pid).fds);
                std::thread::sleep(Duration::from_millis(10));
            }
            max_fds
        });
        Sampler { stop, handle }
    }

    /// The most descriptors seen, and the server's stats now (VmHWM is the peak RSS).
    fn finish(self, s: &Server) -> (usize, ProcStats) {
        self.stop.store(true, Ordering::SeqCst);
        let max_fds = self.handle.join().expect("sampler");
        let now = s.proc_stats();
        (max_fds.max(now.fds), now)
    }
}

fn assert_memory_bounded(stats: &ProcStats) {
    assert!(
        stats.hwm_kib < PEAK_RSS_BOUND_KIB,
        "peak RSS {} KiB is over the bound of {PEAK_RSS_BOUND_KIB} KiB",
        stats.hwm_kib
    );
}

#[test]
fn oversize_declared_bodies_are_refused_and_their_descriptors_released() {
    let hard = raise_own_nofile();
    let s = Server::start();
    let addr = addr(&s);
    assert_eq!(health(&addr, Duration::from_secs(10)), Some(200));
    let base = s.proc_stats();
    let sampler = Sampler::start(&s);
    let started = Instant::now();
    // 1,000 requests declaring 1 GiB or 1 TB, without a token; the client keeps every socket
    // open and reads only every other answer. (300 when this process may not hold 1,000.)
    let n = if hard >= 2048 { 1000 } else { 300 };
    let mut held = Vec::with_capacity(n);
    let mut answered = 0;
    for i in 0..n {
        let mut c = connect(&addr);
        let len: u64 = if i % 2 == 0 { 1 << 30 } else { 999_999_999_999 };
        let head = format!(
            "POST /api/v1/workflow-versions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n"
        );
        c.write_all(head.as_bytes()).expect("write head");
        if i % 4 == 0 {
            // Some body bytes too, which the server must not wait for.
            let _ = c.write_all(&[b'x'; 4096]);
        }
        if i % 2 == 0 {
            let raw = read_until_close(&mut c);
            let (_, v) = assert_edge_error(&raw, 413);
            assert_eq!(v["errors"][0]["code"], "payload_too_large");
            answered += 1;
        }
        held.push(c);
    }
    let sent_for = started.elapsed();
    // The server closed its side of every connection though the client holds them all.
    let released_in = fds_back_to(&s, base.fds + 8, Duration::from_secs(30));
    let (max_fds, stats) = sampler.finish(&s);
    let back_in = health_again(&addr, Duration::from_secs(30));
    drop(held);
    assert_memory_bounded(&stats);
    println!(
        "edge figure: oversize bodies | sent {n} POSTs declaring 1 GiB / 1 TB (no token, sockets kept open) in {sent_for:?} | answered 413 + Connection: close ({answered} read by the client) | peak RSS {} KiB (idle {} KiB), descriptors {} at most (idle {}) | descriptors released {released_in:?} after the last request, /health 200 after {back_in:?}",
        stats.hwm_kib, base.hwm_kib, max_fds, base.fds
    );
}

/// Sends a request whose head is `head_len` bytes of one header, in pieces, until the server
/// stops taking it; returns what the server answered.
fn send_huge_header(addr: &str, head_len: usize) -> Vec<u8> {
    let mut c = connect(addr);
    c.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ")
        .expect("write");
    let piece = vec![b'a'; 64 * 1024];
    let mut sent = 0;
    while sent < head_len {
        if c.write_all(&piece).is_err() {
            break;
        }
        sent += piece.len();
    }
    let _ = c.write_all(b"\r\n\r\n");
    read_until_close(&mut c)
}

#[test]
fn huge_heads_get_431_without_memory_growth() {
    let s = Server::start();
    let addr = addr(&s);
    assert_eq!(health(&addr, Duration::from_secs(10)), Some(200));
    let base = s.proc_stats();
    let sampler = Sampler::start(&s);
    // One header of 100 MiB (the client stops when the server hangs up), ten of 1 MiB.
    let mut answers = Vec::new();
    answers.push(send_huge_header(&addr, 100 << 20));
    for _ in 0..10 {
        answers.push(send_huge_header(&addr, 1 << 20));
    }
    let mut got_431 = 0;
    for raw in &answers {
        // The answer is written before the server closes; the client may still be writing,
        // so it can also see the connection reset first.
        if !raw.is_empty() {
            let (_, v) = assert_edge_error(raw, 431);
            assert_eq!(v["errors"][0]["code"], "header_too_large");
            got_431 += 1;
        }
    }
    assert!(got_431 >= 1, "no 431 seen");
    // Too many headers, and a request line alone over the limit.
    let mut c = connect(&addr);
    let mut req = String::from("GET /health HTTP/1.1\r\nHost: x\r\n");
    for i in 0..200 {
        req.push_str(&format!("X-{i}: {i}\r\n"));
    }
    req.push_str("\r\n");
    c.write_all(req.as_bytes()).expect("write");
    assert_edge_error(&read_until_close(&mut c), 431);
    let mut c = connect(&addr);
    let line = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70_000));
    let _ = c.write_all(line.as_bytes());
    assert_edge_error(&read_until_close(&mut c), 431);

    // A chunked body (with a token, so it is read) whose chunk-size line never ends.
    let mut c = connect(&addr);
    let head = format!(
        "POST /api/v1/workflow-versions HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
        s.auth()
    );
    c.write_all(head.as_bytes()).expect("write");
    let zeros = vec![b'0'; 64 * 1024];
    for _ in 0..(100 << 20) / zeros.len() {
        if c.write_all(&zeros).is_err() {
            break;
        }
    }
    let (_, v) = assert_edge_error(&read_until_close(&mut c), 400);
    assert!(
        v["errors"][0]["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("request body"),
        "{v}"
    );

    let back_in = health_again(&addr, Duration::from_secs(30));
    let (max_fds, stats) = sampler.finish(&s);
    assert_memory_bounded(&stats);
    let growth = stats.hwm_kib.saturating_sub(base.hwm_kib);
    assert!(
        growth < 16 * 1024,
        "peak RSS grew by {growth} KiB for heads cut off at 64 KiB"
    );
    println!(
        "edge figure: huge headers | sent one 100 MiB header, ten 1 MiB headers, 200 headers, a 70 KB request line, and (with a token) a chunked body whose size line runs up to 100 MiB | answered 431 + Connection: close ({got_431} of 11 oversize heads read back before the reset; all others 431), the chunked body 400 + Connection: close | peak RSS {} KiB (before {} KiB, growth {growth} KiB), descriptors {} at most (idle {}) | /health 200 {back_in:?} after",
        stats.hwm_kib, base.hwm_kib, max_fds, base.fds
    );
}

#[test]
fn slowloris_500_connections_while_health_answers() {
    let hard = raise_own_nofile();
    if hard < 4096 {
        println!("note: slowloris test skipped: descriptor hard limit {hard} < 4096");
        return;
    }
    let s = Server::with(Opts {
        settings: Some(
            "[server.http]\nhead_timeout_secs = 3\nread_timeout_secs = 3\nmax_connections = 2000\n[server.auth]\nmethods = [\"dev-token\"]\n",
        ),
        ..Opts::default()
    });
    let addr = addr(&s);
    assert_eq!(health(&addr, Duration::from_secs(10)), Some(200));
    let base = s.proc_stats();
    let sampler = Sampler::start(&s);
    let n = 500;
    let mut slow: Vec<TcpStream> = (0..n)
        .map(|_| {
            let mut c = connect(&addr);
            c.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
                .expect("write");
            c
        })
        .collect();
    // Slow bodies: without a token the body is never read (401, closed at once); with one,
    // the body must arrive within read_timeout_secs.
    let body_head = |auth: &str| {
        format!(
            "POST /api/v1/workflow-versions HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{"
        )
    };
    let mut anonymous = connect(&addr);
    anonymous
        .write_all(body_head("").as_bytes())
        .expect("write");
    assert_edge_error(&read_until_close(&mut anonymous), 401);
    let auth = format!("Authorization: {}\r\n", s.auth());
    let mut slow_bodies: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut c = connect(&addr);
            c.write_all(body_head(&auth).as_bytes()).expect("write");
            c
        })
        .collect();
    // One more header line per connection every half second (each read is quick, so only a
    // deadline on the whole head stops them), while /health is asked every 100 ms.
    let start = Instant::now();
    let mut health_ok = 0;
    let mut health_calls = 0;
    let mut slowest = Duration::ZERO;
    let mut next_drip = Instant::now();
    let mut drips = 0;
    while start.elapsed() < Duration::from_secs(6) {
        if Instant::now() >= next_drip {
            for c in &mut slow {
                let _ = c.write_all(b"X-Slow: 1\r\n");
            }
            for c in &mut slow_bodies {
                let _ = c.write_all(b" ");
            }
            drips += 1;
            next_drip += Duration::from_millis(500);
        }
        let t = Instant::now();
        let status = health(&addr, Duration::from_secs(10));
        slowest = slowest.max(t.elapsed());
        health_calls += 1;
        assert_eq!(status, Some(200), "/health during the attack");
        health_ok += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    // Every slow connection was cut off with 408.
    let mut got_408 = 0;
    for c in &mut slow {
        let raw = read_until_close(c);
        let (_, v) = assert_edge_error(&raw, 408);
        assert_eq!(v["errors"][0]["code"], "request_timeout");
        got_408 += 1;
    }
    for c in &mut slow_bodies {
        let (_, v) = assert_edge_error(&read_until_close(c), 408);
        assert_eq!(v["errors"][0]["code"], "request_timeout");
    }
    let released_in = fds_back_to(&s, base.fds + 8, Duration::from_secs(30));
    let (max_fds, stats) = sampler.finish(&s);
    let back_in = health_again(&addr, Duration::from_secs(30));
    drop(slow);
    drop(slow_bodies);
    assert_memory_bounded(&stats);
    println!(
        "edge figure: slowloris | {n} connections sending one header line per 500 ms ({drips} rounds), head timeout 3 s; 20 authenticated bodies sent a byte per 500 ms, body timeout 3 s (one without a token: 401 at once, body never read) | {got_408}/{n} heads and 20/20 bodies answered 408 + closed; /health answered 200 {health_ok}/{health_calls} times during it (slowest {slowest:?}) | peak RSS {} KiB (idle {} KiB), descriptors {} at most (idle {}), {} threads after | descriptors released {released_in:?} after the reads, /health 200 {back_in:?} after",
        stats.hwm_kib, base.hwm_kib, max_fds, base.fds, stats.threads
    );
}

/// Opens `n` connections that send nothing; returns them.
fn hold(addr: &str, n: usize) -> Vec<TcpStream> {
    (0..n).map(|_| connect(addr)).collect()
}

#[test]
fn beyond_the_derived_cap_connections_get_503_without_exhausting_descriptors() {
    raise_own_nofile();
    // Under `ulimit -n 256` the derived cap is 96 connections.
    let s = Server::with(Opts {
        settings: Some(
            "[server.http]\nhead_timeout_secs = 60\nidle_timeout_secs = 60\n[server.auth]\nmethods = [\"dev-token\"]\n",
        ),
        nofile: Some(256),
        ..Opts::default()
    });
    let addr = addr(&s);
    assert_eq!(health(&addr, Duration::from_secs(10)), Some(200));
    let base = s.proc_stats();
    let sampler = Sampler::start(&s);
    let n = 300;
    let mut held = hold(&addr, n);
    // The refused ones were answered by the accept thread as it got to them; the ones within
    // the cap stay silent (their head timeout is a minute).
    let cap = 96;
    let mut answered = vec![false; n];
    let mut refused = 0;
    let start = Instant::now();
    while refused < n - cap && start.elapsed() < Duration::from_secs(20) {
        for (c, done) in held.iter_mut().zip(answered.iter_mut()) {
            if *done {
                continue;
            }
            c.set_read_timeout(Some(Duration::from_millis(20))).ok();
            let raw = read_until_close(c);
            if !raw.is_empty() {
                let (head, v) = assert_edge_error(&raw, 503);
                assert!(head.contains("Retry-After: 1"), "{head}");
                assert_eq!(v["errors"][0]["code"], "unavailable");
                refused += 1;
                *done = true;
            }
        }
    }
    // While the attacker holds its connections, /health is refused the same way, quickly.
    let during = health(&addr, Duration::from_secs(10));
    assert_eq!(during, Some(503), "/health while the cap is reached");
    let (max_fds, stats) = sampler.finish(&s);
    assert!(max_fds < 256, "{max_fds} descriptors under a limit of 256");
    assert!(
        refused >= n - cap - 4,
        "{refused} of {n} refused with a cap of {cap}"
    );
    let released = Instant::now();
    drop(held);
    let back_in = health_again(&addr, Duration::from_secs(30));
    let _ = released;
    assert_memory_bounded(&stats);
    println!(
        "edge figure: connection cap (ulimit -n 256, derived cap 96) | {n} idle connections held | {refused} answered 503 + Retry-After by the accept thread, /health 503 while held | peak RSS {} KiB, descriptors {} at most (idle {}) | /health 200 {back_in:?} after the attacker let go",
        stats.hwm_kib, max_fds, base.fds
    );
}

#[test]
fn descriptor_exhaustion_is_survived_and_health_answers_once_descriptors_free_up() {
    raise_own_nofile();
    // A cap above what `ulimit -n 256` allows: the process really runs out of descriptors.
    let s = Server::with(Opts {
        settings: Some(
            "[server.http]\nhead_timeout_secs = 60\nidle_timeout_secs = 60\nmax_connections = 1000\n[server.auth]\nmethods = [\"dev-token\"]\n",
        ),
        nofile: Some(256),
        ..Opts::default()
    });
    let addr = addr(&s);
    assert_eq!(health(&addr, Duration::from_secs(10)), Some(200));
    let base = s.proc_stats();
    let sampler = Sampler::start(&s);
    let n = 300;
    let held = hold(&addr, n);
    // Wait until the server is out of descriptors.
    let start = Instant::now();
    while s.proc_stats().fds < 250 && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let during = health(&addr, Duration::from_secs(2));
    std::thread::sleep(Duration::from_secs(1));
    let (max_fds, stats) = sampler.finish(&s);
    assert!(
        max_fds >= 250,
        "the attack did not exhaust descriptors ({max_fds})"
    );
    drop(held);
    let back_in = health_again(&addr, Duration::from_secs(30));
    // And again: the listener keeps surviving.
    let held = hold(&addr, n);
    std::thread::sleep(Duration::from_secs(1));
    drop(held);
    let back_again_in = health_again(&addr, Duration::from_secs(30));
    assert_memory_bounded(&stats);
    println!(
        "edge figure: descriptor exhaustion (ulimit -n 256, cap set to 1000) | {n} idle connections held, twice | /health during: {} | peak RSS {} KiB, descriptors {} at most (idle {}) | /health 200 {back_in:?} after the attacker let go ({back_again_in:?} the second time)",
        during.map_or("no answer within 2 s".to_string(), |st| format!("{st}")),
        stats.hwm_kib, max_fds, base.fds
    );
}
