//! The object-store check of install mode for S3-compatible buckets: one signed `PUT` of a
//! small probe object and its `DELETE`, signed with AWS Signature Version 4
//! ([`crate::objects::sigv4`]).
//!
//! Owns: the probe. Must not touch: settings files or the vault.

use crate::base::hex;
use crate::objects::sigv4::{amz_date, authorization, sha256_hex, uri_encode, Signing};
use std::time::Duration;

/// What to reach and with which keys.
#[derive(Debug, Clone)]
pub struct Bucket<'a> {
    pub bucket: &'a str,
    pub region: &'a str,
    /// `https://s3.<region>.amazonaws.com` when `None`.
    pub endpoint: Option<&'a str>,
    pub path_style: bool,
    pub access_key_id: &'a str,
    pub secret_access_key: &'a str,
}

/// Writes and deletes a probe object; `Err` says what failed in words for the wizard.
pub fn check(b: &Bucket<'_>) -> Result<(), String> {
    let endpoint = b
        .endpoint
        .map(|e| e.trim_end_matches('/').to_string())
        .unwrap_or_else(|| format!("https://s3.{}.amazonaws.com", b.region));
    let (scheme, host) = endpoint
        .split_once("://")
        .ok_or_else(|| format!("endpoint `{endpoint}` is not an http(s) URL"))?;
    let mut rnd = [0u8; 8];
    crate::auth::random_bytes(&mut rnd).map_err(|e| e.to_string())?;
    let key = format!("svc-install-check-{}", hex(&rnd));
    let (host, path) = if b.path_style {
        (
            host.to_string(),
            format!("/{}/{key}", uri_encode(b.bucket, false)),
        )
    } else {
        (format!("{}.{host}", b.bucket), format!("/{key}"))
    };
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(20)))
            .build(),
    );
    let url = format!("{scheme}://{host}{path}");
    for (method, body) in [("PUT", &b"svc install check\n"[..]), ("DELETE", &b""[..])] {
        let date = amz_date(crate::auth::unix_now());
        let payload = sha256_hex(body);
        let auth = authorization(&Signing {
            method,
            path: &path,
            query: &[],
            headers: &[
                ("host", &host),
                ("x-amz-content-sha256", &payload),
                ("x-amz-date", &date),
            ],
            payload_sha256: &payload,
            region: b.region,
            service: "s3",
            access_key_id: b.access_key_id,
            secret_access_key: b.secret_access_key,
            amz_date: &date,
        });
        let req = ureq::http::Request::builder()
            .method(method)
            .uri(&url)
            .header("x-amz-content-sha256", &payload)
            .header("x-amz-date", &date)
            .header("authorization", &auth)
            .body(body.to_vec())
            .map_err(|e| e.to_string())?;
        let resp = agent.run(req).map_err(|e| format!("{method} {url}: {e}"))?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            let (_, body) = resp.into_parts();
            let text = body
                .into_with_config()
                .limit(64 * 1024)
                .lossy_utf8(true)
                .read_to_string()
                .unwrap_or_default();
            let code = text
                .split("<Code>")
                .nth(1)
                .and_then(|t| t.split("</Code>").next())
                .unwrap_or("");
            return Err(format!("{method} {url} answered {status} {code}")
                .trim()
                .to_string());
        }
    }
    Ok(())
}
