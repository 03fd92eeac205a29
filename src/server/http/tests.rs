//! The HTTP layer's tests: listen addresses, dates, query decoding, and real connections.
//! Must not: assert on timing (the machines are noisy).

use super::responder::format_http_date;
use super::*;
use std::sync::Arc;

#[test]
fn listen_parse() {
    assert_eq!(
        Listen::parse("unix:/tmp/x.sock"),
        Ok(Listen::Unix("/tmp/x.sock".into()))
    );
    assert_eq!(
        Listen::parse("127.0.0.1:80"),
        Ok(Listen::Tcp("127.0.0.1:80".into()))
    );
    assert_eq!(
        Listen::parse("tcp:[::1]:80"),
        Ok(Listen::Tcp("[::1]:80".into()))
    );
    assert!(Listen::parse("nope").is_err());
    assert!(Listen::parse("unix:").is_err());
}

#[test]
fn http_dates_are_imf_fixdate() {
    assert_eq!(format_http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    assert_eq!(
        format_http_date(951_782_400),
        "Tue, 29 Feb 2000 00:00:00 GMT"
    );
    assert_eq!(
        format_http_date(1_795_308_600),
        "Sun, 22 Nov 2026 00:50:00 GMT"
    );
}

#[test]
fn query_decoding() {
    let q = parse_query("page%5Blimit%5D=5&page[offset]=10&x=a+b%21&flag");
    assert_eq!(
        q,
        vec![
            ("page[limit]".into(), "5".into()),
            ("page[offset]".into(), "10".into()),
            ("x".into(), "a b!".into()),
            ("flag".into(), "".into()),
        ]
    );
    assert_eq!(percent_decode("%zz%4"), "%zz%4");
}

struct Panicky;

impl Handler for Panicky {
    fn handle(&self, inc: &mut Incoming<'_>) -> Reply {
        if inc.path == "/boom" {
            panic!("boom at {}", inc.path);
        }
        Reply::json(200, &serde_json::json!({"ok": true}))
    }
}

/// Answers `/N` with N bytes of `x`.
struct Sized;

impl Handler for Sized {
    fn handle(&self, inc: &mut Incoming<'_>) -> Reply {
        let n: usize = inc.path[1..].parse().unwrap_or(0);
        Reply::Full(rouille::Response::text("x".repeat(n)))
    }
}

/// `/echo` answers with the body's length; any other path ignores the body.
struct Echo;

impl Handler for Echo {
    fn handle(&self, inc: &mut Incoming<'_>) -> Reply {
        if inc.path == "/echo" {
            return match inc.body() {
                Ok(b) => Reply::Full(rouille::Response::text(b.len().to_string())),
                Err(e) => Reply::error(&e, &inc.request_id),
            };
        }
        Reply::Full(rouille::Response::text("ignored"))
    }
}

#[test]
fn read_bodies_keep_the_connection_and_an_unread_body_closes_it() {
    let opts = HttpOptions::default();
    let server = HttpServer::bind(&Listen::Tcp("127.0.0.1:0".into()), &opts).unwrap();
    server.serve(Arc::new(Echo), opts).unwrap();
    let s = std::net::TcpStream::connect(server.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = std::io::BufReader::new(s);
    let big = "y".repeat(100_000);
    write!(
        w,
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{big}",
        big.len()
    )
    .unwrap();
    let (status, head, body) = read_response(&mut r, false);
    assert_eq!((status, body.as_slice()), (200, &b"100000"[..]), "{head}");
    assert!(!head.contains("Connection: close"), "{head}");
    write!(
        w,
        "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    )
    .unwrap();
    let (status, head, body) = read_response(&mut r, false);
    assert_eq!((status, body.as_slice()), (200, &b"5"[..]), "{head}");
    // A body the handler leaves unread is not drained: the connection ends.
    write!(
        w,
        "POST /other HTTP/1.1\r\nHost: x\r\nContent-Length: 50000\r\n\r\n{}",
        "z".repeat(2000)
    )
    .unwrap();
    let (status, head, _) = read_response(&mut r, false);
    assert_eq!(status, 200);
    assert!(head.contains("Connection: close"), "{head}");
    let mut rest = Vec::new();
    if let Err(e) = r.read_to_end(&mut rest) {
        let open = matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        );
        assert!(!open, "the connection was left open: {e}");
    }
    assert!(rest.is_empty());
}

#[test]
fn silent_connections_are_closed_without_an_answer_and_partial_heads_get_408() {
    let opts = HttpOptions {
        head_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(1),
        ..HttpOptions::default()
    };
    let server = HttpServer::bind(&Listen::Tcp("127.0.0.1:0".into()), &opts).unwrap();
    server.serve(Arc::new(Sized), opts).unwrap();
    let rest = |s: std::net::TcpStream| {
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut r = std::io::BufReader::new(s);
        let mut out = Vec::new();
        r.read_to_end(&mut out).expect("closed by the server");
        String::from_utf8_lossy(&out).into_owned()
    };
    // Kept alive after one request, then silent.
    let s = std::net::TcpStream::connect(server.local_addr()).unwrap();
    let mut w = s.try_clone().unwrap();
    write!(w, "GET /3 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let text = rest(s);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    // Only one answer: no 408 after it (a random request id may hold the digits 408).
    assert!(!text.contains("HTTP/1.1 408"), "{text}");
    // Never a byte.
    let s = std::net::TcpStream::connect(server.local_addr()).unwrap();
    assert_eq!(rest(s), "");
    // Half a head.
    let s = std::net::TcpStream::connect(server.local_addr()).unwrap();
    let mut w = s.try_clone().unwrap();
    write!(w, "GET /3 HTTP/1.1\r\nHost:").unwrap();
    let text = rest(s);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("Connection: close"), "{text}");
    assert!(text.contains("\"code\":\"request_timeout\""), "{text}");
}

/// Reads one response (status, head, body) by its Content-Length; `head_only` for HEAD.
fn read_response(
    r: &mut std::io::BufReader<std::net::TcpStream>,
    head_only: bool,
) -> (u16, String, Vec<u8>) {
    use std::io::BufRead;
    let mut head = String::new();
    loop {
        let mut line = String::new();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "connection closed early"
        );
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0);
    let mut body = vec![0; if head_only { 0 } else { len }];
    r.read_exact(&mut body).unwrap();
    (head[9..12].parse().unwrap(), head, body)
}

#[test]
fn keep_alive_serves_small_large_and_head_responses_in_order() {
    let opts = HttpOptions::default();
    let server = HttpServer::bind(&Listen::Tcp("127.0.0.1:0".into()), &opts).unwrap();
    server.serve(Arc::new(Sized), opts).unwrap();
    let s = std::net::TcpStream::connect(server.local_addr()).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = std::io::BufReader::new(s);
    // Pipelined: all requests written before any response is read.
    for (method, n) in [
        ("GET", 10),
        ("GET", 5000),
        ("HEAD", 7000),
        ("GET", 200_000),
        ("GET", 3),
    ] {
        write!(w, "{method} /{n} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    }
    for (head_only, n) in [
        (false, 10),
        (false, 5000),
        (true, 7000),
        (false, 200_000),
        (false, 3),
    ] {
        let (status, head, body) = read_response(&mut r, head_only);
        assert_eq!(status, 200);
        assert!(head.contains(&format!("Content-Length: {n}")), "{head}");
        assert!(head.contains("x-request-id: "), "{head}");
        assert!(head.contains(" GMT\r\n"), "a Date header: {head}");
        assert!(!head.contains("Connection: close"), "{head}");
        assert_eq!(body.len(), if head_only { 0 } else { n });
        assert!(body.iter().all(|b| *b == b'x'));
    }
}

#[test]
fn http10_and_connection_close_end_the_connection_after_the_response() {
    let opts = HttpOptions::default();
    let server = HttpServer::bind(&Listen::Tcp("127.0.0.1:0".into()), &opts).unwrap();
    server.serve(Arc::new(Sized), opts).unwrap();
    for req in [
        "GET /2000 HTTP/1.0\r\n\r\n",
        "GET /2000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ] {
        let mut s = std::net::TcpStream::connect(server.local_addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains("Connection: close"), "{head}");
        assert_eq!(body.len(), 2000);
    }
}

fn get(addr: &str, path: &str) -> (u16, String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    (status, head.to_string(), body.to_string())
}

#[test]
fn a_panicking_handler_gets_500_and_the_server_keeps_serving() {
    let opts = HttpOptions::default();
    let server = HttpServer::bind(&Listen::Tcp("127.0.0.1:0".into()), &opts).unwrap();
    server.serve(Arc::new(Panicky), opts).unwrap();
    let addr = server.local_addr().to_string();
    for _ in 0..3 {
        let (status, head, body) = get(&addr, "/boom");
        assert_eq!(status, 500);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert!(v["errors"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("boom at /boom"));
        let rid = v["request_id"].as_str().unwrap();
        assert!(head.contains(&format!("x-request-id: {rid}")));
        assert_eq!(get(&addr, "/ok").0, 200);
    }
}
