//! The server benches' shared part (`support::server`): an in-process server on a
//! throw-away state directory, `/health` throughput, create+start over keep-alive
//! connections, and SSE commit-to-client latency read by one epoll thread.
//!
//! Must not: print figures (each bench prints its own).

use super::{percentile, Client};
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};
use svc::internal::server::{self, http::Listen, ServerOptions};
use svc::internal::store::{EventDraft, NewRun};

/// Requests/s of `GET /health` over `threads` keep-alive connections for `secs` seconds.
pub fn health_rps(addr: &str, token: &str, threads: usize, secs: f64) -> f64 {
    let stop = Instant::now() + Duration::from_secs_f64(secs);
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let addr = addr.to_string();
            let token = token.to_string();
            std::thread::spawn(move || {
                let mut c = Client::new(&addr, &format!("Authorization: Bearer {token}"));
                let mut n = 0u64;
                while Instant::now() < stop {
                    let st = c.call("GET", "/health", "").status;
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

/// Creates `n` runs of `dot` over 4 connections, then starts them all; returns the seconds
/// each phase took.
pub fn create_start(addr: &str, token: &str, dot: &str, n: usize) -> (f64, f64) {
    let body = json!({"workflow": {"entrypoint": "h.dot", "files": {"h.dot": dot}}}).to_string();
    let per_thread = n / 4;
    let t0 = Instant::now();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (addr, token, body) = (addr.to_string(), token.to_string(), body.clone());
            std::thread::spawn(move || {
                let mut c = Client::new(&addr, &format!("Authorization: Bearer {token}"));
                let mut ids = Vec::new();
                for _ in 0..per_thread {
                    let created = c.call("POST", "/api/v1/runs", &body);
                    let (st, b) = (created.status, created.body);
                    assert_eq!(st, 201);
                    ids.push(run_id(&b));
                }
                ids
            })
        })
        .collect();
    let ids: Vec<Vec<String>> = handles
        .into_iter()
        .map(|h| h.join().unwrap_or_default())
        .collect();
    let create_secs = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let handles: Vec<_> = ids
        .into_iter()
        .map(|ids| {
            let (addr, token) = (addr.to_string(), token.to_string());
            std::thread::spawn(move || {
                let mut c = Client::new(&addr, &format!("Authorization: Bearer {token}"));
                for id in ids {
                    let st = c
                        .call("POST", &format!("/api/v1/runs/{id}/start"), "")
                        .status;
                    assert_eq!(st, 200);
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
    (create_secs, t1.elapsed().as_secs_f64())
}

/// The `id` of a Run body: the first `"id":"..."` (the Run's own id comes first). Cheaper
/// than parsing the whole JSON, which made the client threads compete with the server.
pub fn run_id(body: &[u8]) -> String {
    let text = std::str::from_utf8(body).expect("utf-8");
    let start = text.find("\"id\":\"").expect("an id") + 6;
    text[start..start + 26].to_string()
}

/// An in-process dev server on a fresh state directory: the directory, the server, its
/// address and its dev token.
pub fn boot() -> (tempfile::TempDir, server::RunningServer, String, String) {
    boot_with("")
}

/// [`boot`] with `settings` (TOML) written as the state directory's settings file.
pub fn boot_with(settings: &str) -> (tempfile::TempDir, server::RunningServer, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("settings.toml"), settings).expect("settings");
    let running = server::start(ServerOptions {
        state_dir: dir.path().to_path_buf(),
        settings_path: None,
        listen: Some(Listen::Tcp("127.0.0.1:0".into())),
        dev: true,
    })
    .expect("server");
    let addr = running.http.local_addr().to_string();
    let token = running.dev_token.clone().map(|t| t.0).unwrap_or_default();
    (dir, running, addr, token)
}

/// Creates and starts `n` runs of `dot` over `conns` keep-alive connections, each run created
/// and then started at once, as a client does it; the seconds it took.
pub fn create_then_start(addr: &str, token: &str, dot: &str, n: usize, conns: usize) -> f64 {
    let body = json!({"workflow": {"entrypoint": "w.dot", "files": {"w.dot": dot}}}).to_string();
    let t0 = Instant::now();
    let handles: Vec<_> = (0..conns)
        .map(|k| {
            let (addr, token, body) = (addr.to_string(), token.to_string(), body.clone());
            let mine = n / conns + usize::from(k < n % conns);
            std::thread::spawn(move || {
                let mut c = Client::new(&addr, &format!("Authorization: Bearer {token}"));
                for _ in 0..mine {
                    let created = c.call("POST", "/api/v1/runs", &body);
                    assert_eq!(created.status, 201);
                    let id = run_id(&created.body);
                    let st = c
                        .call("POST", &format!("/api/v1/runs/{id}/start"), "")
                        .status;
                    assert_eq!(st, 200);
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
    t0.elapsed().as_secs_f64()
}

/// Opens `subs` SSE streams on a fresh run, reads them all from one thread with epoll, appends
/// `events` events 20 ms apart and returns the sorted latencies (ms) from each append call to
/// each subscriber's receipt of it.
pub fn sse_epoll(
    addr: &str,
    token: &str,
    store: &dyn svc::internal::store::RunStore,
    subs: usize,
    events: u64,
) -> Vec<f64> {
    use std::os::fd::AsRawFd;
    let row = store
        .create_run(NewRun {
            title: "sse".into(),
            ..NewRun::default()
        })
        .expect("create");
    let mut socks = Vec::new();
    for _ in 0..subs {
        let mut s = TcpStream::connect(addr).expect("connect");
        write!(
            s,
            "GET /api/v1/runs/{}/attach HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer {token}\r\n\r\n",
            row.id
        )
        .expect("write");
        socks.push(s);
    }
    // SAFETY: plain epoll syscalls on descriptors owned by `socks`, which outlive the loop.
    let ep = unsafe { libc::epoll_create1(0) };
    assert!(ep >= 0, "epoll_create1");
    for (i, s) in socks.iter().enumerate() {
        s.set_nonblocking(true).expect("nonblocking");
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: i as u64,
        };
        let rc = unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, s.as_raw_fd(), &mut ev) };
        assert_eq!(rc, 0, "epoll_ctl");
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let want_total = subs * events as usize;
    let reader = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); socks.len()];
            let mut seen = vec![false; socks.len()];
            let mut got: Vec<(u64, Instant)> = Vec::with_capacity(want_total);
            let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
            let mut chunk = [0u8; 16384];
            while got.len() < want_total && !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let n = unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), evs.len() as i32, 100) };
                let now = Instant::now();
                for ev in evs.iter().take(n.max(0) as usize) {
                    let i = ev.u64 as usize;
                    // One read per readiness: epoll is level-triggered, so whatever is left
                    // is reported again (a second read would mostly return EAGAIN).
                    if let Ok(k) = (&socks[i]).read(&mut chunk) {
                        bufs[i].extend_from_slice(&chunk[..k]);
                    }
                    // Complete lines only; `id: N` marks a frame.
                    while let Some(pos) = bufs[i].iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = bufs[i].drain(..=pos).collect();
                        if let Some(rest) = line.strip_prefix(b"id: ") {
                            if let Ok(seq) = std::str::from_utf8(rest)
                                .unwrap_or("")
                                .trim()
                                .parse::<u64>()
                            {
                                seen[i] = true;
                                got.push((seq, now));
                            }
                        }
                    }
                }
            }
            unsafe { libc::close(ep) };
            let silent: Vec<String> = bufs
                .iter()
                .enumerate()
                .filter(|(i, _)| !seen[*i])
                .map(|(_, b)| String::from_utf8_lossy(&b[..b.len().min(60)]).into_owned())
                .collect();
            if !silent.is_empty() {
                eprintln!(
                    "sse: {} subscribers got no frame; first: {:?}",
                    silent.len(),
                    silent.first()
                );
            }
            got
        })
    };
    // Let every stream reach its live phase before the first append.
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.hub().subscriber_count() < subs && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    if store.hub().subscriber_count() < subs {
        eprintln!(
            "sse: only {} of {subs} streams subscribed after 30 s",
            store.hub().subscriber_count()
        );
    }
    let (committed, mut append_ms) = append_ticks(store, &row.id, events);
    append_ms.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    println!(
        "sse: the append call itself (commit + hand-off to {subs} subscribers) p50 {:.2} ms, max {:.2} ms",
        percentile(&append_ms, 0.5),
        append_ms.last().copied().unwrap_or(0.0)
    );
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let got = reader.join().unwrap_or_default();
    store
        .append(
            &row.id,
            EventDraft::new("run.failed", json!({"reason": "cancelled"})),
        )
        .ok();
    latencies(&got, &committed)
}

/// Appends `events` ticks to `run_id`, 20 ms apart; returns each one's seq with the moment
/// before its append call, and how long each call took (ms).
pub fn append_ticks(
    store: &dyn svc::internal::store::RunStore,
    run_id: &str,
    events: u64,
) -> (Vec<(u64, Instant)>, Vec<f64>) {
    let mut committed = Vec::new();
    let mut append_ms = Vec::new();
    for i in 0..events {
        let before = Instant::now();
        let e = store
            .append(run_id, EventDraft::new("bench.tick", json!({"i": i})))
            .expect("append");
        committed.push((e.seq, before));
        append_ms.push(before.elapsed().as_secs_f64() * 1000.0);
        std::thread::sleep(Duration::from_millis(20));
    }
    (committed, append_ms)
}

/// Sorted latencies (ms) from each append call to each receipt of that event.
pub fn latencies(got: &[(u64, Instant)], committed: &[(u64, Instant)]) -> Vec<f64> {
    let mut lat: Vec<f64> = got
        .iter()
        .filter_map(|(seq, at)| {
            let (_, c) = committed.iter().find(|(s, _)| s == seq)?;
            Some(at.saturating_duration_since(*c).as_secs_f64() * 1000.0)
        })
        .collect();
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    lat
}
