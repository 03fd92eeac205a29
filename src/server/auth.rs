//! Authentication (SPEC 5): the dev token (`svc_dev_` + 64 lowercase hex, kept in
//! `<state-dir>/dev-token`, mode 0600) checked in constant time against
//! `Authorization: Bearer …`; the Authorization header wins over a session cookie.
//!
//! Owns: the dev-token file and credential checks. Must not touch: routing, settings files
//! or resources. Tokens are never logged.

use super::error::ApiError;
use super::http::Incoming;
use crate::settings::{AuthMethod, Settings};
use serde_json::{json, Value};
use std::path::Path;

pub const DEV_TOKEN_FILE: &str = "dev-token";
pub const DEV_TOKEN_PREFIX: &str = "svc_dev_";
pub const SESSION_COOKIE: &str = "__svc_session";

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot read or write {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "{path} does not hold a dev token (expected svc_dev_ followed by 64 lowercase hex digits)"
    )]
    Malformed { path: String },
}

pub fn is_dev_token(s: &str) -> bool {
    s.strip_prefix(DEV_TOKEN_PREFIX).is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Reads `<state-dir>/dev-token`, creating it (32 bytes from /dev/urandom, hex) when absent.
/// Returns the token and whether it was created. A malformed file is an error, never
/// silently replaced.
pub fn load_or_create_dev_token(state_dir: &Path) -> Result<(String, bool), TokenError> {
    let path = state_dir.join(DEV_TOKEN_FILE);
    let shown = path.display().to_string();
    let io = |source| TokenError::Io {
        path: shown.clone(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let t = text.trim();
            if is_dev_token(t) {
                Ok((t.to_string(), false))
            } else {
                Err(TokenError::Malformed { path: shown })
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut raw = [0u8; 32];
            super::ids::urandom(&mut raw).map_err(io)?;
            let token = format!("{DEV_TOKEN_PREFIX}{}", super::ids::hex(&raw));
            std::fs::create_dir_all(state_dir).map_err(io)?;
            crate::settings::vault::write_private_atomic(&path, format!("{token}\n").as_bytes())
                .map_err(io)?;
            Ok((token, true))
        }
        Err(e) => Err(io(e)),
    }
}

/// Byte comparison whose time depends only on the lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

/// The principal of a dev-token caller (SPEC 2.6).
pub fn dev_principal() -> Value {
    json!({
        "kind": "user",
        "identity": {"issuer": "svc:dev", "subject": "dev"},
        "login": "dev",
        "auth_method": "dev_token",
    })
}

/// Checks the caller's credential against the enabled methods.
pub fn authenticate(
    settings: &Settings,
    dev_token: Option<&str>,
    inc: &Incoming<'_>,
) -> Result<Value, ApiError> {
    if let Some(h) = inc.header("authorization") {
        let token = h
            .strip_prefix("Bearer ")
            .or_else(|| h.strip_prefix("bearer "))
            .map(str::trim)
            .ok_or_else(|| {
                ApiError::unauthorized("The Authorization header must be `Bearer <token>`.")
            })?;
        if settings.has_auth(AuthMethod::DevToken) {
            if let Some(expected) = dev_token {
                if constant_time_eq(token.as_bytes(), expected.as_bytes()) {
                    return Ok(dev_principal());
                }
            }
        }
        return Err(ApiError::unauthorized("The access token is invalid.")
            .with_code("access_token_invalid"));
    }
    if inc.cookie(SESSION_COOKIE).is_some() {
        return Err(ApiError::unauthorized(
            "The session is missing or expired; sign in again.",
        ));
    }
    Err(ApiError::unauthorized(
        "Authentication required: send `Authorization: Bearer <token>`.",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn token_file_is_created_once_private() {
        let dir = tempfile::tempdir().unwrap();
        let (t, created) = load_or_create_dev_token(dir.path()).unwrap();
        assert!(created && is_dev_token(&t));
        let mode = std::fs::metadata(dir.path().join(DEV_TOKEN_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let (t2, created2) = load_or_create_dev_token(dir.path()).unwrap();
        assert_eq!((t2, created2), (t, false));
        std::fs::write(dir.path().join(DEV_TOKEN_FILE), "junk").unwrap();
        assert!(load_or_create_dev_token(dir.path()).is_err());
    }

    #[test]
    fn ct_eq() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
