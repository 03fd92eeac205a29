//! Previews (SPEC 2.9): `POST /api/v1/runs/{id}/preview` hands out a URL and a token for a
//! port inside the run's sandbox, and `/preview/{run}/{port}/{token}/...` proxies HTTP
//! requests (and WebSocket upgrades) there.
//!
//! Tokens are `{s|u}.{expiry}.{hmac}`: HMAC-SHA256, keyed by `<state-dir>/preview.key`
//! (32 random bytes, 0600, made on first use), over the kind, run, port and expiry (Unix
//! seconds). A signed (`s`) URL works without other credentials; an unsigned (`u`) one also
//! needs the normal API credentials. Expired or forged tokens get 401.
//!
//! Where previews are served ([`origin`]): on their own origin when `[server.preview] url`
//! or `listen` is set (never on the UI's then), else under the UI's origin, sandboxed. What
//! crosses the proxy ([`proxy`]): no credentials or svc headers upstream, no cookies or
//! site-wide headers downstream, a request line built from a checked path. Which port
//! ([`upstream`]): only the run's sandbox; for `local`, never svc's own or a denied port.
//!
//! Owns: tokens, serving previews. Must not touch: sandboxes' lifecycle, the store beyond
//! reading the run.

pub mod origin;
pub mod proxy;
pub mod upstream;

use super::error::ApiError;
use super::http::{parse_json, Incoming, Reply};
use super::router::Ctx;
use super::App;
use crate::store::SandboxKind;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::json;
use sha2::Sha256;
use std::io::{Read, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

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
    if !s.len().is_multiple_of(2) {
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
    ready_sandbox(&row)?;
    let s = app.settings.get();
    // A port no preview may reach gets no URL either.
    upstream::target(row.sandbox.instance.as_ref(), port, &s, &app.own_ports())?;
    let exp = now_secs() + body.expires_in_secs;
    let tok = token(&key(&app.state_dir)?, body.signed, &row.id, port, exp);
    let path = format!("{PREFIX}{}/{port}/{tok}/", row.id);
    // From the configured public URL (or the listener), never from the request's `Host`.
    let url = match origin::public_base(&s, &app.listeners()) {
        Some(base) => format!("{base}{path}"),
        None => path,
    };
    Ok(Reply::json(201, &json!({"url": url, "token": tok})))
}

/// 409 while the run has no ready sandbox, 410 once retention removed it.
fn ready_sandbox(row: &crate::store::RunRow) -> Result<(), ApiError> {
    if let Some(removed) = &row.sandbox.removed {
        return Err(ApiError::gone(format!(
            "The sandbox of run {} was removed ({}); there is nothing to preview.",
            row.id,
            removed
                .get("reason")
                .and_then(|r| r.as_str())
                .unwrap_or("retention")
        ))
        .with_code("sandbox_removed"));
    }
    if row.sandbox.kind != SandboxKind::Ready {
        return Err(
            ApiError::conflict(format!("Run {} has no ready sandbox to preview.", row.id))
                .with_code("sandbox_not_ready"),
        );
    }
    Ok(())
}

/// Serves one request under [`PREFIX`] (the caller decided this origin serves previews).
pub fn serve(app: &App, inc: &mut Incoming<'_>) -> Result<Reply, ApiError> {
    let raw = inc.raw_path.clone();
    let rest = raw.get(PREFIX.len()..).unwrap_or("");
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
    ready_sandbox(&row)?;
    let s = app.settings.get();
    let target = upstream::target(row.sandbox.instance.as_ref(), port, &s, &app.own_ports())?;
    let listeners = app.listeners();
    let opts = proxy::Options {
        own_host: origin::has_own_host(&s, &listeners),
        cookie_path: format!("{PREFIX}{run}/{port}/{tok}/"),
    };
    proxy::forward(inc, &target, &tail, &opts)
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
