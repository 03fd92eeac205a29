//! Previews (SPEC 2.9): `POST /api/v1/runs/{id}/preview` hands out a URL and a token for a
//! port inside the run's sandbox, and `/preview/{run}/{port}/{token}/...` proxies HTTP
//! requests there (method, headers, body; the response streamed back as it arrives).
//!
//! Tokens are `{s|u}.{expiry}.{hmac}`: HMAC-SHA256, keyed by `<state-dir>/preview.key`
//! (32 random bytes, 0600, made on first use), over the kind, run, port and expiry (Unix
//! seconds). A signed (`s`) URL works without other credentials; an unsigned (`u`) one also
//! needs the normal API credentials. Expired or forged tokens get 401.
//!
//! Owns: tokens, the proxy. Must not touch: sandboxes' lifecycle, the store beyond reading
//! the run.

use super::error::ApiError;
use super::http::{parse_json, Incoming, Reply, StreamReply};
use super::router::Ctx;
use super::App;
use crate::store::SandboxKind;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::json;
use sha2::Sha256;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Longest preview lifetime (one day).
pub const MAX_EXPIRY_SECS: i64 = 86_400;

/// Where proxied requests enter.
pub const PREFIX: &str = "/preview/";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PreviewReq {
    port: i64,
    expires_in_secs: i64,
    #[serde(default)]
    signed: bool,
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The server's preview key, made on first use.
fn key(state_dir: &Path) -> Result<Vec<u8>, ApiError> {
    let path = state_dir.join("preview.key");
    if let Ok(k) = std::fs::read(&path) {
        if k.len() >= 32 {
            return Ok(k);
        }
    }
    let mut k = vec![0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut k))
        .map_err(|e| ApiError::internal(format!("Cannot make the preview key: {e}")))?;
    let tmp = path.with_extension("key.tmp");
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| ApiError::internal(format!("Cannot write the preview key: {e}")))?;
        f.write_all(&k)
            .map_err(|e| ApiError::internal(format!("Cannot write the preview key: {e}")))?;
    }
    // Two first uses at once: the rename makes one of them win, and both read it back.
    std::fs::rename(&tmp, &path)
        .map_err(|e| ApiError::internal(format!("Cannot write the preview key: {e}")))?;
    std::fs::read(&path)
        .map_err(|e| ApiError::internal(format!("Cannot read the preview key: {e}")))
}

type HmacSha256 = Hmac<Sha256>;

/// The MAC of one token's claims (HMAC-SHA256 from the RustCrypto `hmac` crate).
fn mac(key: &[u8], kind: char, run: &str, port: u16, exp: i64) -> HmacSha256 {
    // HMAC takes keys of any length: `new_from_slice` cannot fail for it.
    let mut m = HmacSha256::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    m.update(format!("{kind}:{run}:{port}:{exp}").as_bytes());
    m
}

/// A token for `run`'s `port` until `exp`.
pub fn token(key: &[u8], signed: bool, run: &str, port: u16, exp: i64) -> String {
    let kind = if signed { 's' } else { 'u' };
    let sig = mac(key, kind, run, port, exp).finalize().into_bytes();
    format!("{kind}.{exp}.{}", crate::base::hex(&sig))
}

/// Lowercase or uppercase hex to bytes; None if it is not hex.
fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Checks a token; `Ok(signed)` when it is genuine and unexpired.
pub fn verify(key: &[u8], tok: &str, run: &str, port: u16, now: i64) -> Result<bool, ApiError> {
    let bad = || ApiError::new(401, "The preview token is invalid or expired.".to_string());
    let mut it = tok.splitn(3, '.');
    let (Some(kind), Some(exp), Some(sig)) = (it.next(), it.next(), it.next()) else {
        return Err(bad());
    };
    let kind = match kind {
        "s" => 's',
        "u" => 'u',
        _ => return Err(bad()),
    };
    let exp: i64 = exp.parse().map_err(|_| bad())?;
    let sig = unhex(sig).ok_or_else(bad)?;
    // `verify_slice` compares in constant time: a forger learns nothing from timing.
    let same = mac(key, kind, run, port, exp).verify_slice(&sig).is_ok();
    if !same || now >= exp {
        return Err(bad());
    }
    Ok(kind == 's')
}

/// `POST /api/v1/runs/{id}/preview`.
pub fn create(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let body: PreviewReq = parse_json(ctx.inc.body()?)?;
    let id = ctx.param("id").to_string();
    let port = u16::try_from(body.port)
        .ok()
        .filter(|p| *p >= 1)
        .ok_or_else(|| ApiError::bad_request("`port` must be between 1 and 65535."))?;
    if !(1..=MAX_EXPIRY_SECS).contains(&body.expires_in_secs) {
        return Err(ApiError::bad_request(format!(
            "`expires_in_secs` must be between 1 and {MAX_EXPIRY_SECS}."
        )));
    }
    let row = app.runs.get_row(&id)?;
    if row.sandbox.kind != SandboxKind::Ready {
        return Err(ApiError::conflict(format!(
            "Run {id} has no ready sandbox to preview."
        )));
    }
    let exp = now_secs() + body.expires_in_secs;
    let tok = token(&key(&app.state_dir)?, body.signed, &row.id, port, exp);
    let path = format!("{PREFIX}{}/{port}/{tok}/", row.id);
    let url = match ctx.inc.header("host") {
        Some(h) => format!("http://{h}{path}"),
        None => path,
    };
    Ok(Reply::json(201, &json!({"url": url, "token": tok})))
}

/// Headers that belong to one connection and are not passed through.
const HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "host",
];

/// Serves one request under [`PREFIX`].
pub fn proxy(app: &App, inc: &mut Incoming<'_>) -> Result<Reply, ApiError> {
    let rest = &inc.path[PREFIX.len()..];
    let mut parts = rest.splitn(4, '/');
    let (Some(run), Some(port), Some(tok)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(ApiError::not_found("No such preview."));
    };
    let tail = parts.next().unwrap_or("").to_string();
    let port: u16 = port
        .parse()
        .map_err(|_| ApiError::not_found("No such preview."))?;
    let run = run.to_string();
    let signed = verify(&key(&app.state_dir)?, tok, &run, port, now_secs())?;
    if !signed {
        super::auth::authenticate(app, inc)?;
    }
    let row = app.runs.get_row(&run)?;
    if row.sandbox.kind != SandboxKind::Ready {
        return Err(ApiError::conflict(format!(
            "Run {run} has no ready sandbox to preview."
        )));
    }
    let runtime = row.sandbox.instance.as_ref().and_then(|i| i.get("runtime"));
    let isolated = row
        .sandbox
        .instance
        .as_ref()
        .and_then(|i| i.get("provider"))
        == Some(&json!("container"))
        && runtime.and_then(|r| r.get("network")) != Some(&json!(true));
    let netns_of = isolated
        .then(|| runtime.and_then(|r| r.get("working_directory")?.as_str()))
        .flatten()
        .map(std::path::PathBuf::from);
    forward(inc, port, &tail, netns_of.as_deref())
}

/// A process of the container whose workspace is `workdir`: one whose working directory is
/// inside it and whose network namespace is not ours.
fn sandbox_pid(workdir: &Path) -> Option<u32> {
    let own = std::fs::read_link("/proc/self/ns/net").ok()?;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let inside =
            std::fs::read_link(entry.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(workdir));
        if inside && std::fs::read_link(entry.path().join("ns/net")).is_ok_and(|ns| ns != own) {
            return Some(pid);
        }
    }
    None
}

/// Connects to `port` on the loopback of the container running in `workdir`: a short-lived
/// thread joins the container's network namespace (`setns`), connects, and ends; the
/// socket stays in that namespace.
fn connect_in_container(workdir: &Path, port: u16) -> std::io::Result<TcpStream> {
    use std::os::fd::AsRawFd;
    let pid = sandbox_pid(workdir)
        .ok_or_else(|| std::io::Error::other("no process is running in the container"))?;
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/net"))?;
    std::thread::spawn(move || {
        // SAFETY: setns changes only this thread's network namespace; the thread ends
        // right after connecting.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        connect_loopback(port)
    })
    .join()
    .map_err(|_| std::io::Error::other("the connecting thread panicked"))?
}

fn connect_loopback(port: u16) -> std::io::Result<TcpStream> {
    TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(5),
    )
}

fn upstream_error(port: u16, e: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        502,
        format!("Nothing answered on port {port} in the sandbox: {e}"),
    )
}

/// Sends the request to the port over HTTP/1.0 (so the answer is never chunked and ends
/// when the connection closes) and streams the answer back.
/// `netns_of`: the workspace of a container without network, whose loopback is its own.
fn forward(
    inc: &mut Incoming<'_>,
    port: u16,
    tail: &str,
    netns_of: Option<&Path>,
) -> Result<Reply, ApiError> {
    let body = inc.body()?.to_vec();
    let mut target = format!("/{tail}");
    if !inc.raw_query.is_empty() {
        target.push('?');
        target.push_str(&inc.raw_query);
    }
    let mut head = format!(
        "{} {target} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n",
        inc.method
    );
    for (k, v) in &inc.headers {
        let lower = k.to_ascii_lowercase();
        // svc's own credentials stay with svc.
        if HOP.contains(&lower.as_str()) || lower == "authorization" || lower == "content-length" {
            continue;
        }
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    let mut conn = match netns_of {
        Some(dir) => connect_in_container(dir, port),
        None => connect_loopback(port),
    }
    .map_err(|e| upstream_error(port, e))?;
    conn.set_read_timeout(Some(Duration::from_secs(300))).ok();
    conn.write_all(head.as_bytes())
        .and_then(|()| conn.write_all(&body))
        .map_err(|e| upstream_error(port, e))?;
    let mut reader = BufReader::new(conn);
    let mut status_line = String::new();
    reader
        .read_line(&mut status_line)
        .map_err(|e| upstream_error(port, e))?;
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| upstream_error(port, format!("not an HTTP answer: {status_line:?}")))?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        let n = reader
            .read_line(&mut line)
            .map_err(|e| upstream_error(port, e))?;
        let line = line.trim_end();
        if n == 0 || line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            let lower = k.trim().to_ascii_lowercase();
            if !HOP.contains(&lower.as_str()) && lower != "content-length" {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
    }
    Ok(Reply::Stream(StreamReply {
        status,
        headers,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_verify_only_for_their_run_port_and_time() {
        let k = [7u8; 32];
        let t = token(&k, true, "R", 8080, 1000);
        assert_eq!(verify(&k, &t, "R", 8080, 999).ok(), Some(true));
        assert!(verify(&k, &t, "R", 8080, 1000).is_err(), "expired");
        assert!(verify(&k, &t, "R", 8081, 999).is_err(), "other port");
        assert!(verify(&k, &t, "S", 8080, 999).is_err(), "other run");
        assert!(verify(&[8u8; 32], &t, "R", 8080, 999).is_err(), "other key");
        let forged = t.replacen("s.1000", "s.9999", 1);
        assert!(verify(&k, &forged, "R", 8080, 999).is_err());
        let u = token(&k, false, "R", 1, 50);
        assert_eq!(verify(&k, &u, "R", 1, 10).ok(), Some(false));
        assert!(verify(&k, &u.replacen('u', "s", 1), "R", 1, 10).is_err());
    }
}
