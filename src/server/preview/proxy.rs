//! The preview proxy: one request (or one WebSocket) from the browser to the sandbox's port
//! and its answer back, with nothing crossing that should not.
//!
//! - **Upstream** the request line is the method and the path *as sent* (still
//!   percent-encoded) below the preview prefix, refused with 400 when it decodes to a
//!   control character or a space (it could otherwise split the request line or smuggle a
//!   header); `Host` is the sandbox's; hop-by-hop headers, `Cookie`, `Authorization`,
//!   `Proxy-Authorization`, `X-Install-Token` and every `X-Svc-*` header stay with svc. On
//!   a preview host of its own (see below) the browser's cookies there are the previews',
//!   so `Cookie` is passed on, less any of svc's own cookie names.
//! - **Downstream** hop-by-hop headers are dropped, and so are the headers that act on a
//!   whole site rather than one response (`Clear-Site-Data`, `Strict-Transport-Security`,
//!   `Alt-Svc`, `Public-Key-Pins*`, `Service-Worker-Allowed`); `Set-Cookie` is dropped
//!   unless previews have a host of their own that shares no cookies with the UI's, where
//!   it is kept for that host only (no `Domain`, `Path` the preview's own). Every answer carries the sandbox CSP of [`super::origin`],
//!   `Referrer-Policy: no-referrer` (the URL holds the token) and
//!   `Cross-Origin-Opener-Policy: same-origin` (no handle on the window that opened it).
//! - **WebSocket** upgrades (`Connection: Upgrade`, `Upgrade: websocket`) go upstream as
//!   HTTP/1.1 with the same header rules; a `101` from the sandbox is passed on and both
//!   directions are then relayed byte for byte, each read waiting at most
//!   [`READ_TIMEOUT`], like a proxied answer. Any other answer is passed on as a response.
//!
//! Limits: connecting takes at most `upstream::CONNECT_TIMEOUT`; the sandbox's answer head
//! at most [`MAX_HEAD_BYTES`] in [`MAX_HEADERS`] lines (502 beyond); [`READ_TIMEOUT`] of
//! silence ends an answer or a WebSocket.
//!
//! Owns: HTTP framing between browser and sandbox. Must not touch: tokens, origins or which
//! port (its callers decide).

use super::origin;
use super::upstream::{self, Target};
use crate::server::error::ApiError;
use crate::server::http::{Incoming, Reply, StreamReply, UpgradeReply};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

/// How long the sandbox may stay silent during an answer or a WebSocket (each direction).
pub const READ_TIMEOUT: Duration = Duration::from_secs(300);
/// The sandbox's status line and headers together, at most.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Header lines in the sandbox's answer, at most.
pub const MAX_HEADERS: usize = 100;

/// How one preview is served.
#[derive(Debug, Clone)]
pub struct Options {
    /// Previews have a host of their own: cookies set by the sandbox may stay there, and
    /// pages keep their origin.
    pub own_host: bool,
    /// The preview's own path (`/preview/<run>/<port>/<token>/`), for its cookies.
    pub cookie_path: String,
}

/// Headers of one connection, never passed on either way.
const HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "host",
    "content-length",
];

/// svc's credentials and headers: never sent to the sandbox.
const PRIVATE: [&str; 4] = [
    "cookie",
    "authorization",
    "proxy-authorization",
    "x-install-token",
];

/// Answer headers that act on the whole site (the UI's too) or that svc sets itself.
const SITE_WIDE: [&str; 9] = [
    "clear-site-data",
    // A service worker's scope stays below the preview's own path (its script's folder):
    // on a shared preview host, one preview must not intercept another's pages.
    "service-worker-allowed",
    "strict-transport-security",
    "alt-svc",
    "public-key-pins",
    "public-key-pins-report-only",
    "set-cookie2",
    "referrer-policy",
    "cross-origin-opener-policy",
];

fn bad_path() -> ApiError {
    ApiError::bad_request(
        "The preview path holds a control character or a space (after decoding); it is not passed on.",
    )
    .with_code("invalid_preview_path")
}

/// `%XX` escapes of `s` undone, as bytes.
fn decoded(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// A control character, a space or DEL.
fn unsafe_byte(b: u8) -> bool {
    b <= b' ' || b == 0x7f
}

/// The upstream request target: `/` + the tail as sent + `?` + the query as sent. 400 when
/// the tail has, or decodes to, a control character or a space, or the query has one.
pub fn request_target(raw_tail: &str, raw_query: &str) -> Result<String, ApiError> {
    if raw_tail.bytes().any(unsafe_byte)
        || decoded(raw_tail).into_iter().any(unsafe_byte)
        || raw_query.bytes().any(unsafe_byte)
    {
        return Err(bad_path());
    }
    let mut target = format!("/{raw_tail}");
    if !raw_query.is_empty() {
        target.push('?');
        target.push_str(raw_query);
    }
    Ok(target)
}

/// An HTTP token (method, header name).
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// True for a header that is svc's business, not the sandbox's.
fn private_request_header(lower: &str) -> bool {
    HOP.contains(&lower) || PRIVATE.contains(&lower) || lower.starts_with("x-svc-")
}

/// A WebSocket handshake.
fn is_websocket(inc: &Incoming<'_>) -> bool {
    let has = |name: &str, word: &str| {
        inc.headers.iter().any(|(k, v)| {
            k.eq_ignore_ascii_case(name)
                && v.split(',').any(|p| p.trim().eq_ignore_ascii_case(word))
        })
    };
    inc.method == "GET" && has("connection", "upgrade") && has("upgrade", "websocket")
}

/// svc's own cookie names: never passed on, even from a preview host of its own.
const SVC_COOKIES: [&str; 2] = [crate::auth::SESSION_COOKIE, "svc-demo"];

/// The `Cookie` header passed upstream from a preview host of its own (whose cookies are
/// the previews', the UI's never going there): every pair but svc's own names; `None`
/// when nothing is left.
pub fn app_cookies(header: &str) -> Option<String> {
    let kept: Vec<&str> = header
        .split(';')
        .map(str::trim)
        .filter(|pair| {
            let name = pair.split('=').next().unwrap_or("").trim();
            !pair.is_empty() && !SVC_COOKIES.contains(&name)
        })
        .collect();
    (!kept.is_empty()).then(|| kept.join("; "))
}

/// The request head sent upstream.
fn request_head(
    inc: &Incoming<'_>,
    target: &str,
    port: u16,
    ws: bool,
    body: usize,
    opts: &Options,
) -> String {
    let version = if ws { "HTTP/1.1" } else { "HTTP/1.0" };
    let mut head = format!(
        "{} {target} {version}\r\nHost: 127.0.0.1:{port}\r\n",
        inc.method
    );
    let clean = |v: &str| !v.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0);
    for (k, v) in &inc.headers {
        let lower = k.to_ascii_lowercase();
        if lower == "cookie" && opts.own_host && clean(v) {
            if let Some(c) = app_cookies(v) {
                head.push_str(&format!("Cookie: {c}\r\n"));
            }
            continue;
        }
        if private_request_header(&lower) || !is_token(k) || !clean(v) {
            continue;
        }
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if ws {
        head.push_str("Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
    } else {
        head.push_str(&format!(
            "Content-Length: {body}\r\nConnection: close\r\n\r\n"
        ));
    }
    head
}

fn upstream_error(port: u16, e: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        502,
        format!("Nothing answered on port {port} in the sandbox: {e}"),
    )
}

/// One line of the sandbox's answer head, within what is left of `budget`.
fn head_line(r: &mut impl BufRead, budget: &mut usize, port: u16) -> Result<String, ApiError> {
    let mut line = Vec::new();
    let n = r
        .take(*budget as u64 + 1)
        .read_until(b'\n', &mut line)
        .map_err(|e| upstream_error(port, e))?;
    if n > *budget {
        return Err(upstream_error(
            port,
            format!("its answer head is larger than {MAX_HEAD_BYTES} bytes"),
        ));
    }
    *budget -= n;
    Ok(String::from_utf8_lossy(&line).trim_end().to_string())
}

/// The status and headers of the sandbox's answer (interim `1xx` answers other than 101
/// skipped).
fn read_head(r: &mut impl BufRead, port: u16) -> Result<(u16, Vec<(String, String)>), ApiError> {
    let mut budget = MAX_HEAD_BYTES;
    loop {
        let status_line = head_line(r, &mut budget, port)?;
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .filter(|s| (100..=599).contains(s))
            .ok_or_else(|| upstream_error(port, format!("not an HTTP answer: {status_line:?}")))?;
        let mut headers = Vec::new();
        loop {
            let line = head_line(r, &mut budget, port)?;
            if line.is_empty() {
                break;
            }
            if headers.len() >= MAX_HEADERS {
                return Err(upstream_error(
                    port,
                    format!("its answer has more than {MAX_HEADERS} headers"),
                ));
            }
            if let Some((k, v)) = line.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        if (100..200).contains(&status) && status != 101 {
            continue;
        }
        return Ok((status, headers));
    }
}

/// A sandbox's `Set-Cookie` kept for the preview's own host: no `Domain` (host-only), the
/// preview's own `Path`.
pub fn rewrite_cookie(value: &str, path: &str) -> String {
    let mut parts = value.split(';');
    let mut out = parts.next().unwrap_or("").trim().to_string();
    for attr in parts {
        let a = attr.trim();
        let name = a
            .split('=')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if a.is_empty() || name == "domain" || name == "path" {
            continue;
        }
        out.push_str("; ");
        out.push_str(a);
    }
    out.push_str("; Path=");
    out.push_str(path);
    out
}

/// The sandbox's answer headers as passed to the browser (see the module documentation);
/// `page` adds svc's own (not on a `101`).
pub fn response_headers(
    upstream: Vec<(String, String)>,
    opts: &Options,
    page: bool,
) -> Vec<(String, String)> {
    let mut out = Vec::with_capacity(upstream.len() + 3);
    for (k, v) in upstream {
        let lower = k.to_ascii_lowercase();
        if HOP.contains(&lower.as_str()) || SITE_WIDE.contains(&lower.as_str()) {
            continue;
        }
        if lower == "set-cookie" {
            if opts.own_host {
                out.push((k, rewrite_cookie(&v, &opts.cookie_path)));
            }
            continue;
        }
        out.push((k, v));
    }
    if page {
        out.push((
            "Content-Security-Policy".into(),
            origin::sandbox_policy(opts.own_host).into(),
        ));
        out.push(("Referrer-Policy".into(), "no-referrer".into()));
        out.push(("Cross-Origin-Opener-Policy".into(), "same-origin".into()));
    }
    out
}

/// Sends `inc` to `target` (`raw_tail`: the path below the preview prefix, as sent) and
/// answers with what the sandbox answers.
pub fn forward(
    inc: &mut Incoming<'_>,
    target: &Target,
    raw_tail: &str,
    opts: &Options,
) -> Result<Reply, ApiError> {
    let path = request_target(raw_tail, &inc.raw_query)?;
    if !is_token(&inc.method) {
        return Err(ApiError::bad_request(
            "The request method is not an HTTP token.",
        ));
    }
    let port = target.port();
    let ws = is_websocket(inc);
    let body = if ws { Vec::new() } else { inc.body()?.to_vec() };
    let head = request_head(inc, &path, port, ws, body.len(), opts);
    let mut conn = upstream::connect(target).map_err(|e| upstream_error(port, e))?;
    conn.set_read_timeout(Some(READ_TIMEOUT)).ok();
    conn.set_write_timeout(Some(READ_TIMEOUT)).ok();
    conn.set_nodelay(true).ok();
    conn.write_all(head.as_bytes())
        .and_then(|()| conn.write_all(&body))
        .map_err(|e| upstream_error(port, e))?;
    let mut reader = BufReader::new(conn.try_clone().map_err(|e| upstream_error(port, e))?);
    let (status, headers) = read_head(&mut reader, port)?;
    if ws && status == 101 {
        return Ok(Reply::Upgrade(UpgradeReply {
            protocol: "websocket".into(),
            headers: response_headers(headers, opts, false),
            read_timeout: Some(READ_TIMEOUT),
            relay: Box::new(move |client_r, client_w| relay(reader, conn, client_r, client_w)),
        }));
    }
    Ok(Reply::Stream(StreamReply {
        status,
        headers: response_headers(headers, opts, true),
        body: Box::new(move |w| {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                let n = reader.read(&mut buf)?;
                if n == 0 {
                    return Ok(());
                }
                w.send(&buf[..n])?;
            }
        }),
    }))
}

/// Relays a WebSocket both ways until either side closes or stays silent for
/// [`READ_TIMEOUT`]: browser to sandbox on a thread of its own, sandbox to browser here
/// (what the answer's reader already buffered first).
fn relay(
    mut from_sandbox: BufReader<TcpStream>,
    mut to_sandbox: TcpStream,
    mut from_browser: Box<dyn Read + Send>,
    mut to_browser: Box<dyn Write + Send>,
) {
    let up = std::thread::Builder::new()
        .name("svc-preview-ws".into())
        .spawn(move || {
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(n) = from_browser.read(&mut buf) {
                if n == 0 || to_sandbox.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            // The browser is done (or gone): the sandbox sees the end of its input.
            let _ = to_sandbox.shutdown(Shutdown::Write);
        });
    if let Err(e) = up {
        log::warn!("preview WebSocket: cannot start the relay thread: {e}");
        return;
    }
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from_sandbox.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to_browser
            .write_all(&buf[..n])
            .and_then(|()| to_browser.flush())
            .is_err()
        {
            break;
        }
    }
    // The sandbox is done: closing our half tells the browser, which then closes its own,
    // which ends the other direction's thread.
    let _ = from_sandbox.get_ref().shutdown(Shutdown::Read);
    drop(to_browser);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_decode_to_controls_or_spaces_are_refused() {
        assert_eq!(request_target("a/b%20c", "").unwrap_err().status, 400);
        for bad in [
            "x%20HTTP/1.0%0d%0aX-Injected:%20yes%0d%0aY:%20",
            "a%0ab",
            "a%0db",
            "a%09b",
            "a%00b",
            "a%7fb",
            "a b",
        ] {
            assert_eq!(request_target(bad, "").unwrap_err().status, 400, "{bad}");
        }
        assert_eq!(request_target("", "q=a b").unwrap_err().status, 400);
        assert_eq!(
            request_target("assets/app%2Ejs", "v=1&x=%0A").unwrap(),
            "/assets/app%2Ejs?v=1&x=%0A"
        );
        assert_eq!(request_target("", "").unwrap(), "/");
    }

    #[test]
    fn cookies_stay_on_the_preview_and_site_wide_headers_are_dropped() {
        let up = vec![
            (
                "Set-Cookie".into(),
                "sid=1; Domain=example.com; Path=/; HttpOnly".into(),
            ),
            ("Clear-Site-Data".into(), "\"cookies\"".into()),
            ("Strict-Transport-Security".into(), "max-age=1".into()),
            ("Service-Worker-Allowed".into(), "/".into()),
            ("Content-Type".into(), "text/html".into()),
            ("Transfer-Encoding".into(), "chunked".into()),
        ];
        let shared = Options {
            own_host: false,
            cookie_path: "/preview/R/1/t/".into(),
        };
        let h = response_headers(up.clone(), &shared, true);
        let names: Vec<String> = h.iter().map(|(k, _)| k.to_ascii_lowercase()).collect();
        assert_eq!(
            names,
            [
                "content-type",
                "content-security-policy",
                "referrer-policy",
                "cross-origin-opener-policy"
            ]
        );
        let own = Options {
            own_host: true,
            ..shared
        };
        let h = response_headers(up, &own, true);
        let cookie = &h.iter().find(|(k, _)| k == "Set-Cookie").unwrap().1;
        assert_eq!(cookie, "sid=1; HttpOnly; Path=/preview/R/1/t/");
        let csp = &h
            .iter()
            .find(|(k, _)| k == "Content-Security-Policy")
            .unwrap()
            .1;
        assert!(csp.contains("allow-same-origin"));
    }

    #[test]
    fn only_the_apps_cookies_pass_from_a_host_of_its_own() {
        assert_eq!(
            app_cookies("app=1; __svc_session=s; svc-demo=1;theme=dark").as_deref(),
            Some("app=1; theme=dark")
        );
        assert_eq!(app_cookies("__svc_session=s; svc-demo=1"), None);
        assert_eq!(app_cookies(""), None);
    }

    #[test]
    fn answer_heads_are_bounded() {
        let long = format!(
            "HTTP/1.0 200 OK\r\nX: {}\r\n\r\n",
            "a".repeat(MAX_HEAD_BYTES)
        );
        let e = read_head(&mut long.as_bytes(), 1).unwrap_err();
        assert_eq!(e.status, 502);
        let many = format!(
            "HTTP/1.0 200 OK\r\n{}\r\n",
            "X: 1\r\n".repeat(MAX_HEADERS + 1)
        );
        assert_eq!(read_head(&mut many.as_bytes(), 1).unwrap_err().status, 502);
        let interim = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nA: b\r\n\r\n";
        let (status, headers) = read_head(&mut interim.as_bytes(), 1).unwrap();
        assert_eq!((status, headers.len()), (204, 1));
        assert_eq!(
            read_head(&mut "junk\r\n\r\n".as_bytes(), 1)
                .unwrap_err()
                .status,
            502
        );
    }
}
