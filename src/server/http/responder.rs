//! One request from head to written response: request ids, the body limit, panic
//! containment, and writing a response whole (one `write`) or streamed in chunks.
//!
//! Owns: the HTTP wire format of responses. Must not touch: sockets (`listener`) or
//! routing decisions (the [`Handler`]).

use super::pool::BatchScheduling;
use super::{
    percent_decode, too_large, ChunkWriter, Handler, HttpOptions, Incoming, Reply, StreamReply,
};
use crate::server::error::ApiError;
use crate::server::ids;
use std::io::{self, Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Handles one request from start to finish. Never panics.
pub(super) fn serve_one(handler: &dyn Handler, mut rq: tiny_http::Request, opts: &HttpOptions) {
    let request_id = ids::request_id();
    let url = rq.url().to_string();
    let (raw_path, raw_query) = url.split_once('?').unwrap_or((url.as_str(), ""));
    let headers: Vec<(String, String)> = rq
        .headers()
        .iter()
        .map(|h| (h.field.as_str().to_string(), h.value.as_str().to_string()))
        .collect();
    let method = rq.method().as_str().to_string();
    let http10 = rq.http_version() == &tiny_http::HTTPVersion(1, 0);
    let content_length = rq.body_length();
    let path = percent_decode(raw_path);

    if content_length.is_some_and(|n| n > opts.max_body_bytes) {
        // Refused before the handler (and auth) runs; the body is never read and the
        // connection closes after the answer.
        let reply = Reply::error(&too_large(opts.max_body_bytes), &request_id);
        log::debug!("{request_id} {method} {url} -> 413 (declared {content_length:?})");
        if let Reply::Full(resp) = reply {
            let head_only = method.eq_ignore_ascii_case("HEAD");
            if let Err(e) = respond_whole(rq, resp, &request_id, head_only, true) {
                log::debug!("{request_id}: client went away: {e}");
            }
        }
        return;
    }

    let (reply, unread) = {
        let mut inc = Incoming {
            request_id: request_id.clone(),
            method: method.clone(),
            path,
            raw_path: raw_path.to_string(),
            raw_query: raw_query.to_string(),
            headers,
            http10,
            max_body: opts.max_body_bytes,
            content_length,
            rq: &mut rq,
            body: None,
            body_touched: false,
        };
        let reply = match catch_unwind(AssertUnwindSafe(|| handler.handle(&mut inc))) {
            Ok(r) => r,
            Err(p) => {
                let msg = panic_message(&p);
                log::error!("request {request_id} {method} {url} panicked: {msg}");
                Reply::error(
                    &ApiError::internal(format!("Internal server error: {msg}")),
                    &request_id,
                )
            }
        };
        let unread = inc.body_left_unread();
        (reply, unread)
    };
    log::debug!("{request_id} {method} {url} -> {}", reply.status());

    match reply {
        Reply::Full(resp) => {
            let head_only = method.eq_ignore_ascii_case("HEAD");
            // A body left unread (whole or in part) ends the connection: tiny_http closes it
            // instead of draining.
            let close = unread || wants_close(&rq, http10);
            if let Err(e) = respond_whole(rq, resp, &request_id, head_only, close) {
                log::debug!("{request_id}: client went away: {e}");
            }
        }
        Reply::Stream(s) => stream(rq, s, &request_id, http10),
        Reply::Upgrade(u) => upgrade(rq, u, &request_id),
    }
}

/// Answers `101 Switching Protocols` and hands both halves of the connection to the relay,
/// which runs on this thread until the protocol ends.
fn upgrade(rq: tiny_http::Request, u: super::UpgradeReply, request_id: &str) {
    let mut headers: Vec<tiny_http::Header> = u
        .headers
        .iter()
        .filter(|(k, _)| {
            !k.eq_ignore_ascii_case("upgrade") && !k.eq_ignore_ascii_case("connection")
        })
        .filter_map(|(k, v)| header(k, v))
        .collect();
    headers.extend(header("x-request-id", request_id));
    let resp = tiny_http::Response::new(
        tiny_http::StatusCode(101),
        headers,
        io::empty(),
        Some(0),
        None,
    );
    match rq.upgrade_split(&u.protocol, resp, u.read_timeout) {
        Ok((reader, writer)) => (u.relay)(reader, writer),
        Err(e) => log::debug!("{request_id}: client went away before the upgrade: {e}"),
    }
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

pub(super) fn header(name: &str, value: &str) -> Option<tiny_http::Header> {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).ok()
}

fn to_tiny_parts(
    status: u16,
    resp_headers: &[(
        std::borrow::Cow<'static, str>,
        std::borrow::Cow<'static, str>,
    )],
    reader: Box<dyn Read + Send>,
    size: Option<usize>,
    request_id: &str,
    close: bool,
) -> tiny_http::Response<Box<dyn Read + Send>> {
    let mut headers: Vec<tiny_http::Header> = resp_headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("content-length"))
        .filter_map(|(k, v)| header(k, v))
        .collect();
    headers.extend(header("x-request-id", request_id));
    if close {
        headers.extend(header("Connection", "close"));
    }
    tiny_http::Response::new(tiny_http::StatusCode(status), headers, reader, size, None)
}

/// Bodies up to this size are answered in one `send`; larger ones (or bodies of unknown size)
/// are streamed by tiny_http.
const WHOLE_MAX: usize = 256 * 1024;

/// True when the connection ends after this response: the client asked for it, or spoke
/// HTTP/1.0 without keep-alive (tiny_http then stops reading the connection).
fn wants_close(rq: &tiny_http::Request, http10: bool) -> bool {
    let conn = rq
        .headers()
        .iter()
        .find(|h| h.field.equiv("Connection"))
        .map(|h| h.value.as_str().to_ascii_lowercase());
    match conn {
        Some(v) if v.contains("close") => true,
        Some(v) => http10 && !v.contains("keep-alive"),
        None => http10,
    }
}

/// Writes the status line, headers and body with one `write` on the connection.
///
/// Why: tiny_http prints the head into its 1 KiB connection buffer and then copies the
/// body; a body larger than that buffer (a Run is about 1 KiB) left as two `send`s, and the
/// client woke up twice. Taking the writer keeps the connection's order and keep-alive (the
/// writer signals the connection's next request when dropped, as `respond` does).
fn respond_whole(
    rq: tiny_http::Request,
    resp: rouille::Response,
    request_id: &str,
    head_only: bool,
    close: bool,
) -> io::Result<()> {
    let status = resp.status_code;
    let (mut reader, size) = resp.data.into_reader_and_size();
    if size.is_none_or(|n| n > WHOLE_MAX) {
        let r = to_tiny_parts(status, &resp.headers, reader, size, request_id, close);
        return rq.respond(r);
    }
    let mut body = Vec::with_capacity(size.unwrap_or(0));
    reader.read_to_end(&mut body)?;
    let version = if rq.http_version() == &tiny_http::HTTPVersion(1, 0) {
        "1.0"
    } else {
        "1.1"
    };
    let mut out = Vec::with_capacity(256 + body.len());
    write_head(&mut out, version, status, &resp.headers, request_id, close);
    // 1xx, 204 and 304 carry no body; HEAD gets the length without it.
    let bodiless = matches!(status, 100..=199 | 204 | 304);
    if !bodiless {
        out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    if !bodiless && !head_only {
        out.extend_from_slice(&body);
    }
    let mut w = rq.into_writer();
    w.write_all(&out)?;
    w.flush()
}

/// The status line and headers (without `Content-Length` and the blank line) of a response.
fn write_head(
    out: &mut Vec<u8>,
    version: &str,
    status: u16,
    headers: &[(
        std::borrow::Cow<'static, str>,
        std::borrow::Cow<'static, str>,
    )],
    request_id: &str,
    close: bool,
) {
    use std::io::Write as _;
    let _ = write!(
        out,
        "HTTP/{version} {status} {}\r\nServer: svc\r\nDate: {}\r\nx-request-id: {request_id}\r\n",
        crate::server::error::reason_phrase(status),
        http_date()
    );
    for (k, v) in headers {
        let clean = !k.contains(['\r', '\n']) && !v.contains(['\r', '\n']);
        if clean && !k.eq_ignore_ascii_case("content-length") {
            let _ = write!(out, "{k}: {v}\r\n");
        }
    }
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
}

/// The current time as an HTTP date (`Sun, 22 Nov 2026 01:10:00 GMT`), formatted once per
/// second per thread.
fn http_date() -> String {
    use std::cell::RefCell;
    thread_local! {
        static CACHE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.0 != secs {
            *c = (secs, format_http_date(secs));
        }
        c.1.clone()
    })
}

/// IMF-fixdate (RFC 9110 section 5.6.7) of `secs` since the Unix epoch.
pub(super) fn format_http_date(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = (secs / 86_400) as i64;
    let sod = secs % 86_400;
    let (y, m, d) = crate::base::clock::civil_from_days(days);
    format!(
        "{}, {d:02} {} {y:04} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[(m - 1) as usize],
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

fn stream(rq: tiny_http::Request, s: StreamReply, request_id: &str, http10: bool) {
    let mut w = rq.into_writer();
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nx-request-id: {request_id}\r\n",
        s.status,
        crate::server::error::reason_phrase(s.status)
    );
    for (k, v) in &s.headers {
        if !k.contains(['\r', '\n']) && !v.contains(['\r', '\n']) {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    if http10 {
        head.push_str("Connection: close\r\n\r\n");
    } else {
        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
    }
    if w.write_all(head.as_bytes())
        .and_then(|_| w.flush())
        .is_err()
    {
        return;
    }
    let _batch = BatchScheduling::enter();
    let mut cw = ChunkWriter {
        inner: &mut *w,
        chunked: !http10,
    };
    let body = s.body;
    match catch_unwind(AssertUnwindSafe(|| body(&mut cw))) {
        Ok(Ok(())) => {
            let _ = cw.finish();
        }
        Ok(Err(e)) => log::debug!("{request_id}: stream ended: {e}"),
        Err(p) => {
            log::error!("{request_id}: stream panicked: {}", panic_message(&p));
            let _ = cw.finish();
        }
    }
}
