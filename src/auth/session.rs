//! Browser sessions (SPEC 5.5): the private cookie `__svc_session`, encrypted and
//! authenticated with XChaCha20-Poly1305 under a key derived from `SESSION_SECRET` with
//! HKDF-SHA256, and a server-side revocation list so that signing out kills every copy of
//! the cookie.
//!
//! The cookie holds the whole session (login, method, identity, avatar, `iat`, `exp`, a
//! random session id), so checking one costs a decryption and a hash-set lookup, no I/O. The
//! revocation list (`<state-dir>/revoked-sessions`, one `sid exp` line each, mode 0600) is
//! read at startup, pruned of expired entries and appended to on sign-out.
//!
//! The code-host sign-in's `state` travels in a second private cookie
//! (`__svc_oauth_state`, sealed under its own derived key), which binds the flow to the
//! browser that started it.
//!
//! Owns: sealing and opening these cookies, and the revocation list. Must not touch: HTTP
//! headers (the server writes `Set-Cookie`), settings.

use super::{random_bytes, Method, Principal};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

pub const SESSION_COOKIE: &str = "__svc_session";
pub const STATE_COOKIE: &str = "__svc_oauth_state";
/// The revocation list's file name in the state directory.
pub const REVOKED_FILE: &str = "revoked-sessions";
/// The shortest accepted `SESSION_SECRET`, in bytes.
pub const MIN_SECRET_BYTES: usize = 32;
/// How long a code-host sign-in may take between `/auth/login` and the callback.
pub const STATE_LIFETIME_SECS: u64 = 600;
const NONCE_BYTES: usize = 24;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("SESSION_SECRET must be at least {MIN_SECRET_BYTES} bytes")]
    ShortSecret,
    #[error("cannot read or write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What a session cookie says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionClaims {
    pub v: u8,
    pub sid: String,
    pub login: String,
    pub method: Method,
    pub iss: String,
    pub sub: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avatar_url: Option<String>,
    pub iat: u64,
    pub exp: u64,
}

impl SessionClaims {
    pub fn principal(&self) -> Principal {
        Principal {
            login: self.login.clone(),
            method: self.method,
            issuer: self.iss.clone(),
            subject: self.sub.clone(),
            avatar_url: self.avatar_url.clone(),
        }
    }
}

/// The pending code-host sign-in carried by the state cookie.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthState {
    pub state: String,
    /// Where to go after signing in (a local path).
    pub next: String,
    pub exp: u64,
}

/// Session keys and the revocation list.
pub struct Sessions {
    cookie_key: XChaCha20Poly1305,
    state_key: XChaCha20Poly1305,
    revoked: RwLock<HashMap<String, u64>>,
    revoked_path: PathBuf,
}

impl Sessions {
    /// Derives the keys from `secret` (at least 32 bytes) and loads the revocation list
    /// from `state_dir`.
    pub fn new(secret: &[u8], state_dir: &Path, now: u64) -> Result<Sessions, SessionError> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(SessionError::ShortSecret);
        }
        let hk = hkdf::Hkdf::<sha2::Sha256>::new(Some(b"svc session v1"), secret);
        let derive = |label: &[u8]| {
            let mut k = [0u8; 32];
            // 32 bytes is far below HKDF-SHA256's limit (255 * 32), so expand cannot fail.
            let _ = hk.expand(label, &mut k);
            XChaCha20Poly1305::new(&k.into())
        };
        let revoked_path = state_dir.join(REVOKED_FILE);
        let revoked = load_revoked(&revoked_path, now)?;
        Ok(Sessions {
            cookie_key: derive(b"session cookie"),
            state_key: derive(b"oauth state cookie"),
            revoked: RwLock::new(revoked),
            revoked_path,
        })
    }

    /// A new session for `p`: the cookie value and its claims.
    pub fn issue(
        &self,
        p: &Principal,
        now: u64,
        lifetime_secs: u64,
    ) -> std::io::Result<(String, SessionClaims)> {
        let mut sid = [0u8; 16];
        random_bytes(&mut sid)?;
        let claims = SessionClaims {
            v: 1,
            sid: URL_SAFE_NO_PAD.encode(sid),
            login: p.login.clone(),
            method: p.method,
            iss: p.issuer.clone(),
            sub: p.subject.clone(),
            avatar_url: p.avatar_url.clone(),
            iat: now,
            exp: now.saturating_add(lifetime_secs),
        };
        let json = serde_json::to_vec(&claims).map_err(std::io::Error::other)?;
        Ok((seal(&self.cookie_key, SESSION_COOKIE, &json)?, claims))
    }

    /// The claims of a valid, unexpired, unrevoked session cookie.
    pub fn open(&self, value: &str, now: u64) -> Option<SessionClaims> {
        let json = open(&self.cookie_key, SESSION_COOKIE, value)?;
        let c: SessionClaims = serde_json::from_slice(&json).ok()?;
        if c.v != 1 || c.exp <= now || self.revoked.read().contains_key(&c.sid) {
            return None;
        }
        Some(c)
    }

    /// Revokes the session for good (until it would have expired anyway).
    pub fn revoke(&self, c: &SessionClaims) -> Result<(), SessionError> {
        self.revoked.write().insert(c.sid.clone(), c.exp);
        let io = |source| SessionError::Io {
            path: self.revoked_path.clone(),
            source,
        };
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode_private()
            .open(&self.revoked_path)
            .map_err(io)?;
        writeln!(f, "{} {}", c.sid, c.exp).map_err(io)?;
        f.sync_data().map_err(io)
    }

    pub fn seal_state(&self, s: &OAuthState) -> std::io::Result<String> {
        let json = serde_json::to_vec(s).map_err(std::io::Error::other)?;
        seal(&self.state_key, STATE_COOKIE, &json)
    }

    pub fn open_state(&self, value: &str, now: u64) -> Option<OAuthState> {
        let json = open(&self.state_key, STATE_COOKIE, value)?;
        let s: OAuthState = serde_json::from_slice(&json).ok()?;
        (s.exp > now).then_some(s)
    }
}

trait PrivateMode {
    fn mode_private(&mut self) -> &mut Self;
}

impl PrivateMode for std::fs::OpenOptions {
    fn mode_private(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.mode(0o600)
    }
}

/// `base64url(nonce || ciphertext)`; the cookie name is the associated data, so a value
/// sealed for one cookie never opens as another.
fn seal(key: &XChaCha20Poly1305, name: &str, plain: &[u8]) -> std::io::Result<String> {
    let mut nonce = [0u8; NONCE_BYTES];
    random_bytes(&mut nonce)?;
    let ct = key
        .encrypt(
            XNonce::from_slice(&nonce),
            Payload {
                msg: plain,
                aad: name.as_bytes(),
            },
        )
        .map_err(|_| std::io::Error::other("encryption failed"))?;
    let mut out = Vec::with_capacity(NONCE_BYTES + ct.len());
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&ct);
    Ok(URL_SAFE_NO_PAD.encode(out))
}

fn open(key: &XChaCha20Poly1305, name: &str, value: &str) -> Option<Vec<u8>> {
    if value.len() > 8192 {
        return None;
    }
    let raw = URL_SAFE_NO_PAD
        .decode(value.trim().trim_matches('"'))
        .ok()?;
    if raw.len() <= NONCE_BYTES {
        return None;
    }
    let (nonce, ct) = raw.split_at(NONCE_BYTES);
    key.decrypt(
        XNonce::from_slice(nonce),
        Payload {
            msg: ct,
            aad: name.as_bytes(),
        },
    )
    .ok()
}

/// Reads the revocation list, dropping expired entries (and rewriting the file if any were).
fn load_revoked(path: &Path, now: u64) -> Result<HashMap<String, u64>, SessionError> {
    let io = |source| SessionError::Io {
        path: path.to_path_buf(),
        source,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(io(e)),
    };
    let mut all = HashMap::new();
    let mut dropped = false;
    for line in text.lines() {
        let parsed = line
            .split_once(' ')
            .and_then(|(sid, exp)| Some((sid, exp.trim().parse::<u64>().ok()?)));
        match parsed {
            Some((sid, exp)) if exp > now => {
                all.insert(sid.to_string(), exp);
            }
            _ => dropped = true,
        }
    }
    if dropped {
        let mut text = String::new();
        for (sid, exp) in &all {
            text.push_str(&format!("{sid} {exp}\n"));
        }
        crate::settings::vault::write_private_atomic(path, text.as_bytes()).map_err(io)?;
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions(dir: &Path, secret: &[u8]) -> Sessions {
        Sessions::new(secret, dir, 1000).unwrap()
    }

    #[test]
    fn seal_open_tamper_expire_revoke() {
        let dir = tempfile::tempdir().unwrap();
        let secret = [7u8; 32];
        let s = sessions(dir.path(), &secret);
        let (cookie, claims) = s.issue(&Principal::dev(), 1000, 60).unwrap();
        assert!(!cookie.contains("dev"), "the cookie is encrypted");
        assert_eq!(s.open(&cookie, 1001), Some(claims.clone()));
        assert_eq!(s.open(&cookie, 1060), None, "expired");
        // Any flipped byte fails authentication.
        let mut raw = URL_SAFE_NO_PAD.decode(&cookie).unwrap();
        let last = raw.len() - 1;
        raw[last] ^= 1;
        assert_eq!(s.open(&URL_SAFE_NO_PAD.encode(&raw), 1001), None);
        // Another secret cannot open it, and a state cookie is not a session cookie.
        assert_eq!(sessions(dir.path(), &[8u8; 32]).open(&cookie, 1001), None);
        let st = s
            .seal_state(&OAuthState {
                state: "x".into(),
                next: "/".into(),
                exp: 2000,
            })
            .unwrap();
        assert_eq!(s.open(&st, 1001), None);
        assert_eq!(s.open_state(&st, 1001).unwrap().state, "x");
        assert!(s.open_state(&st, 2000).is_none());
        // Revocation survives a restart; expired entries are pruned.
        s.revoke(&claims).unwrap();
        assert_eq!(s.open(&cookie, 1001), None);
        let s2 = sessions(dir.path(), &secret);
        assert_eq!(s2.open(&cookie, 1001), None);
        let s3 = Sessions::new(&secret, dir.path(), 5000).unwrap();
        assert!(s3.revoked.read().is_empty());
        assert!(Sessions::new(&[1u8; 31], dir.path(), 0).is_err());
    }
}
