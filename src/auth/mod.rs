//! Authentication (SPEC 5): who is calling. Strategies come from `server.auth.methods` and
//! are tried in order, the first success winning: the dev token ([`devtoken`]), and for
//! `codehost` the Ed25519 JWT bearer ([`jwt`]); a browser's private session cookie
//! `__svc_session` ([`session`]) is used only when no `Authorization` header is sent.
//! Code-host sign-in ([`oauth`], GitHub's web flow and wire format) ends in such a session.
//!
//! Every accepted credential becomes a [`Principal`] (SPEC 2.6). An authenticated user whose
//! login is not in `[server.auth.codehost].allowed_usernames` is [`AuthError::Forbidden`]
//! (403); everything else that fails is [`AuthError::Unauthorized`] (401).
//!
//! Crypto comes from well-kept crates only (HKDF-SHA256, XChaCha20-Poly1305, Ed25519,
//! `subtle` for constant-time comparisons, `getrandom`); no primitive is written here.
//! Tokens, cookies and secrets are never logged or put in an event or error message.
//!
//! Owns: credentials and their checks, session cookies, the revocation list, the OAuth
//! client. Must not touch: HTTP routing or responses (the server maps [`AuthError`] to its
//! error body), the run store, or settings files (it reads a [`Settings`] snapshot).

pub mod devtoken;
pub mod jwt;
pub mod oauth;
pub mod redirect;
pub mod session;

use crate::settings::{AuthMethod, Settings};
use serde_json::{json, Value};
use std::path::Path;

pub use devtoken::{
    is_dev_token, load_or_create_dev_session_secret, load_or_create_dev_token, TokenError,
    DEV_SESSION_SECRET_FILE, DEV_TOKEN_FILE,
};
pub use session::{SessionClaims, Sessions, SESSION_COOKIE};

/// The prefix of every dev token.
pub const DEV_TOKEN_PREFIX: &str = "svc_dev_";

/// How a user authenticated (SPEC 2.6 `auth_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    DevToken,
    Codehost,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::DevToken => "dev_token",
            Method::Codehost => "codehost",
        }
    }

    fn setting(self) -> AuthMethod {
        match self {
            Method::DevToken => AuthMethod::DevToken,
            Method::Codehost => AuthMethod::Codehost,
        }
    }
}

/// An authenticated user (SPEC 2.6, kind `user`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub login: String,
    pub method: Method,
    pub issuer: String,
    pub subject: String,
    pub avatar_url: Option<String>,
}

impl Principal {
    /// The dev token's user.
    pub fn dev() -> Principal {
        Principal {
            login: "dev".into(),
            method: Method::DevToken,
            issuer: "svc:dev".into(),
            subject: "dev".into(),
            avatar_url: None,
        }
    }

    /// The wire form (`created_by`).
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "kind": "user",
            "identity": {"issuer": self.issuer, "subject": self.subject},
            "login": self.login,
            "auth_method": self.method.as_str(),
        });
        if let Some(a) = &self.avatar_url {
            v["avatar_url"] = json!(a);
        }
        v
    }
}

/// Which credential carried the request; cookie-authenticated state changes must pass the
/// server's `Origin` check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Bearer,
    Cookie,
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// 401: no credential, a wrong one, or an expired or revoked one.
    Unauthorized {
        detail: &'static str,
        code: &'static str,
    },
    /// 403: a real user who is not allowed in.
    Forbidden { login: String },
}

impl AuthError {
    fn unauthorized(detail: &'static str, code: &'static str) -> AuthError {
        AuthError::Unauthorized { detail, code }
    }
}

/// What a request presents.
#[derive(Debug, Clone, Copy, Default)]
pub struct Credentials<'a> {
    /// The `Authorization` header, as sent.
    pub authorization: Option<&'a str>,
    /// The value of the `__svc_session` cookie.
    pub session_cookie: Option<&'a str>,
}

/// The server's credential checker, built once at startup.
pub struct Authenticator {
    dev_token: Option<String>,
    /// Present when the web UI is enabled (SESSION_SECRET known).
    pub sessions: Option<Sessions>,
    jwt: Option<jwt::JwtVerifier>,
    /// Tokens whose signature, issuer and subject were verified, with their claims: an
    /// Ed25519 verification costs more than the request it guards, and a client sends the
    /// same token until it expires. Only `exp` is checked again (times only move forward).
    verified: parking_lot::RwLock<std::collections::HashMap<Box<str>, jwt::Claims>>,
}

/// At most this many verified JWTs are remembered (the map is cleared when full).
const VERIFIED_CAP: usize = 4096;

impl Authenticator {
    pub fn new(
        dev_token: Option<String>,
        sessions: Option<Sessions>,
        jwt: Option<jwt::JwtVerifier>,
    ) -> Authenticator {
        Authenticator {
            dev_token,
            sessions,
            jwt,
            verified: Default::default(),
        }
    }

    /// Checks `c` against the methods `s` enables; `now` is Unix seconds.
    pub fn authenticate(
        &self,
        s: &Settings,
        c: Credentials<'_>,
        now: u64,
    ) -> Result<(Principal, Via), AuthError> {
        if let Some(h) = c.authorization {
            let token = bearer(h).ok_or(AuthError::unauthorized(
                "The Authorization header must be `Bearer <token>`.",
                "unauthorized",
            ))?;
            return self.bearer(s, token, now).map(|p| (p, Via::Bearer));
        }
        if let Some(cookie) = c.session_cookie {
            let sessions = self.sessions.as_ref().ok_or(AuthError::unauthorized(
                "Session cookies are not accepted: the web UI is disabled.",
                "unauthorized",
            ))?;
            let claims = sessions.open(cookie, now).ok_or(AuthError::unauthorized(
                "The session is missing, expired or signed out; sign in again.",
                "session_invalid",
            ))?;
            let p = claims.principal();
            if !s.has_auth(p.method.setting()) {
                return Err(AuthError::unauthorized(
                    "The session's sign-in method is no longer enabled; sign in again.",
                    "session_invalid",
                ));
            }
            check_allowed(s, &p)?;
            return Ok((p, Via::Cookie));
        }
        Err(AuthError::unauthorized(
            "Authentication required: send `Authorization: Bearer <token>` or sign in.",
            "unauthorized",
        ))
    }

    /// The bearer strategies, in the order of `server.auth.methods`.
    fn bearer(&self, s: &Settings, token: &str, now: u64) -> Result<Principal, AuthError> {
        let mut err =
            AuthError::unauthorized("The access token is invalid.", "access_token_invalid");
        for m in &s.server.auth.methods {
            match m {
                AuthMethod::DevToken => {
                    if self.dev_token_matches(token) {
                        return Ok(Principal::dev());
                    }
                }
                AuthMethod::Codehost => {
                    let Some(v) = &self.jwt else { continue };
                    if !jwt::looks_like_jwt(token) {
                        continue;
                    }
                    match self.verify_jwt(v, token, now) {
                        Ok(claims) => {
                            // Checked on every request (not remembered): the settings are live.
                            let web_url = &s.server.auth.codehost.web_url;
                            if claims.lifetime() > s.server.auth.jwt_max_lifetime_secs {
                                err = AuthError::unauthorized(
                                    "The access token lives longer (exp - iat) than server.auth.jwt_max_lifetime_secs allows.",
                                    "access_token_invalid",
                                );
                                continue;
                            }
                            let Some(login) = claims.login_on(web_url) else {
                                err = AuthError::unauthorized(
                                    "The access token's `sub` is not a user's URL on the configured code host (server.auth.codehost.web_url).",
                                    "access_token_invalid",
                                );
                                continue;
                            };
                            let p = claims.principal(login, web_url);
                            check_allowed(s, &p)?;
                            return Ok(p);
                        }
                        Err(jwt::JwtError::Expired) => {
                            err = AuthError::unauthorized(
                                "The access token has expired.",
                                "access_token_expired",
                            )
                        }
                        Err(_) => {}
                    }
                }
            }
        }
        Err(err)
    }

    /// [`jwt::JwtVerifier::verify`], remembering tokens that passed.
    fn verify_jwt(
        &self,
        v: &jwt::JwtVerifier,
        token: &str,
        now: u64,
    ) -> Result<jwt::Claims, jwt::JwtError> {
        if let Some(c) = self.verified.read().get(token) {
            if c.exp.saturating_add(jwt::LEEWAY_SECS) <= now {
                return Err(jwt::JwtError::Expired);
            }
            return Ok(c.clone());
        }
        let c = v.verify(token, now)?;
        let mut m = self.verified.write();
        if m.len() >= VERIFIED_CAP {
            m.clear();
        }
        m.insert(token.into(), c.clone());
        Ok(c)
    }

    /// Constant-time comparison with the dev token.
    pub fn dev_token_matches(&self, token: &str) -> bool {
        self.dev_token
            .as_deref()
            .is_some_and(|t| constant_time_eq(token.as_bytes(), t.as_bytes()))
    }
}

/// 403 for a code-host user outside `allowed_usernames` (the dev token is always allowed).
pub fn check_allowed(s: &Settings, p: &Principal) -> Result<(), AuthError> {
    if p.method == Method::Codehost && !s.server.auth.codehost.allows(&p.login) {
        return Err(AuthError::Forbidden {
            login: p.login.clone(),
        });
    }
    Ok(())
}

fn bearer(h: &str) -> Option<&str> {
    let (scheme, rest) = h.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| rest.trim())
        .filter(|t| !t.is_empty())
}

/// Byte comparison whose time depends only on the lengths (`subtle`).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// Fills `buf` from the OS CSPRNG.
pub fn random_bytes(buf: &mut [u8]) -> std::io::Result<()> {
    getrandom::getrandom(buf).map_err(std::io::Error::other)
}

/// Unix seconds now.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The server's own secret values that live outside the vault, for redaction (a vault
/// value is hidden by the vault's redactor already): the dev token of `state_dir` (when
/// one was made) and `SESSION_SECRET` from the environment. Never given to a run
/// (`procs::env`), and hidden wherever run data is shown should a workflow find them.
pub fn server_secret_values(state_dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(t) = std::fs::read_to_string(state_dir.join(DEV_TOKEN_FILE)) {
        let t = t.trim();
        if is_dev_token(t) {
            out.push(t.to_string());
        }
    }
    if let Ok(s) = std::env::var("SESSION_SECRET") {
        out.push(s);
    }
    out
}

/// The redactor for everything a run records or a user reads of it: every vault value,
/// the dev token and the session secret (`settings::vault::VaultRedactor`).
pub fn redactor(state_dir: &Path) -> crate::settings::vault::VaultRedactor {
    crate::settings::vault::VaultRedactor::with_fixed(
        crate::settings::vault::Vault::in_state_dir(state_dir),
        server_secret_values(state_dir),
    )
}

/// Reads `SESSION_SECRET` from the environment, else the vault entry of the same name
/// (install writes it there). `None` when absent.
pub fn session_secret(state_dir: &Path) -> Option<String> {
    if let Ok(s) = std::env::var("SESSION_SECRET") {
        return Some(s);
    }
    crate::settings::vault::Vault::in_state_dir(state_dir)
        .get("SESSION_SECRET")
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine as _;
    use ed25519_dalek::pkcs8::EncodePublicKey;
    use ed25519_dalek::{Signer, SigningKey};

    #[test]
    fn remembered_jwts_still_expire_and_forgeries_are_not_remembered() {
        let key = SigningKey::from_bytes(&[5u8; 32]);
        let pem = key
            .verifying_key()
            .to_public_key_pem(Default::default())
            .unwrap();
        let v = jwt::JwtVerifier::from_pem_or_base64(&pem).unwrap();
        let a = Authenticator::new(None, None, Some(v));
        let mut s = Settings::default();
        s.server.auth.methods = vec![AuthMethod::Codehost];
        s.server.auth.codehost.allowed_usernames = vec!["alice".into()];
        let h = URL_SAFE_NO_PAD.encode(r#"{"alg":"EdDSA"}"#);
        let p = URL_SAFE_NO_PAD
            .encode(r#"{"iss":"svc-web","sub":"https://github.com/alice","iat":1000,"exp":2000}"#);
        let sig = URL_SAFE_NO_PAD.encode(key.sign(format!("{h}.{p}").as_bytes()).to_bytes());
        let tok = format!("Bearer {h}.{p}.{sig}");
        let c = Credentials {
            authorization: Some(&tok),
            session_cookie: None,
        };
        assert_eq!(a.authenticate(&s, c, 1500).unwrap().0.login, "alice");
        assert_eq!(a.authenticate(&s, c, 1500).unwrap().0.login, "alice");
        assert!(matches!(
            a.authenticate(&s, c, 3000),
            Err(AuthError::Unauthorized {
                code: "access_token_expired",
                ..
            })
        ));
        let forged = format!("Bearer {h}.{p}.{}", URL_SAFE_NO_PAD.encode([0u8; 64]));
        let f = Credentials {
            authorization: Some(&forged),
            session_cookie: None,
        };
        assert!(a.authenticate(&s, f, 1500).is_err());
        assert!(a.authenticate(&s, f, 1500).is_err());
        assert_eq!(a.verified.read().len(), 1);
        // The allowed list is checked on every request, remembered or not.
        s.server.auth.codehost.allowed_usernames = vec!["bob".into()];
        assert!(matches!(
            a.authenticate(&s, c, 1500),
            Err(AuthError::Forbidden { .. })
        ));
    }

    #[test]
    fn ct_eq_and_bearer() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert_eq!(bearer("Bearer x"), Some("x"));
        assert_eq!(bearer("bearer  x "), Some("x"));
        assert_eq!(bearer("Basic x"), None);
        assert_eq!(bearer("Bearer "), None);
    }
}
