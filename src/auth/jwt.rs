//! Ed25519 JWT bearer tokens (SPEC 5.7): `alg` `EdDSA`, no `crit` header (svc understands no
//! extension, so a token that demands one is refused), claims `iss` = `svc-web`, `iat` and
//! `exp` (Unix seconds, checked with [`LEEWAY_SECS`] of clock skew), `sub` the user's URL on
//! the configured code host: `<web_url>/<login>` exactly, one path segment
//! ([`Claims::login_on`]); the caller also caps the lifetime `exp - iat`
//! ([`Claims::lifetime`], `[server.auth] jwt_max_lifetime_secs`). The key comes from
//! `SVC_JWT_PUBLIC_KEY` (a PEM public key, or that PEM base64-encoded).
//!
//! Owns: parsing and verifying tokens. Must not touch: settings (the caller checks
//! `allowed_usernames`), HTTP.

use super::{Method, Principal};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use ed25519_dalek::pkcs8::DecodePublicKey;
use ed25519_dalek::{Signature, VerifyingKey};
use serde::Deserialize;

/// The only accepted issuer.
pub const ISSUER: &str = "svc-web";
/// Clock skew tolerated on `iat` and `exp`.
pub const LEEWAY_SECS: u64 = 60;
/// The environment variable holding the verification key.
pub const KEY_ENV: &str = "SVC_JWT_PUBLIC_KEY";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    #[error("not a JWT")]
    Malformed,
    #[error("unsupported algorithm")]
    Algorithm,
    #[error("bad signature")]
    Signature,
    #[error("wrong issuer")]
    Issuer,
    #[error("expired")]
    Expired,
    #[error("issued in the future")]
    NotYetValid,
    #[error("no username in sub")]
    Subject,
    #[error("a critical header extension svc does not understand")]
    Critical,
}

#[derive(Debug, Deserialize)]
struct Header {
    alg: String,
    /// RFC 7515 4.1.11: extensions the verifier must understand. svc understands none.
    #[serde(default)]
    crit: Option<serde_json::Value>,
}

/// Longest login accepted in `sub`.
const MAX_LOGIN_CHARS: usize = 100;

/// The claims of a verified token.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub sub: String,
    pub iat: u64,
    pub exp: u64,
}

impl Claims {
    /// The login when `sub` is a user's URL on the code host at `web_url`: that URL's
    /// scheme and host (compared ignoring case) and path, then exactly one more path
    /// segment of letters, digits, `-`, `_` or `.` (`https://github.com/alice`). No query,
    /// fragment, user info, other port or second segment: `https://evil.example/x/alice`
    /// and `https://github.com/bob?u=/alice` name nobody.
    pub fn login_on(&self, web_url: &str) -> Option<&str> {
        let base = web_url.trim_end_matches('/');
        let (scheme, rest) = base.split_once("://")?;
        let (host, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        let (sub_scheme, sub_rest) = self.sub.split_once("://")?;
        if !sub_scheme.eq_ignore_ascii_case(scheme) {
            return None;
        }
        let sub_host = sub_rest.get(..host.len())?;
        if !sub_host.eq_ignore_ascii_case(host) {
            return None;
        }
        let login = sub_rest[host.len()..]
            .strip_prefix(path)?
            .strip_prefix('/')?;
        let ok = !login.is_empty()
            && login.len() <= MAX_LOGIN_CHARS
            && login
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric())
            && login
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        ok.then_some(login)
    }

    /// `exp - iat` in seconds.
    pub fn lifetime(&self) -> u64 {
        self.exp.saturating_sub(self.iat)
    }

    /// The principal for `login` (from [`Claims::login_on`]), with the code host's web URL
    /// as issuer.
    pub fn principal(&self, login: &str, codehost_web_url: &str) -> Principal {
        Principal {
            login: login.to_string(),
            method: Method::Codehost,
            issuer: codehost_web_url.trim_end_matches('/').to_string(),
            subject: self.sub.clone(),
            avatar_url: None,
        }
    }
}

/// A verifier for one public key.
pub struct JwtVerifier {
    key: VerifyingKey,
}

#[derive(Debug, thiserror::Error)]
#[error("{KEY_ENV} is not an Ed25519 public key in PEM (or base64-encoded PEM): {0}")]
pub struct KeyError(String);

impl JwtVerifier {
    /// From PEM text or base64-encoded PEM.
    pub fn from_pem_or_base64(text: &str) -> Result<JwtVerifier, KeyError> {
        let t = text.trim();
        let pem = if t.starts_with("-----BEGIN") {
            t.to_string()
        } else {
            let compact: String = t.split_whitespace().collect();
            let raw = STANDARD
                .decode(compact)
                .map_err(|e| KeyError(e.to_string()))?;
            String::from_utf8(raw).map_err(|e| KeyError(e.to_string()))?
        };
        let key =
            VerifyingKey::from_public_key_pem(pem.trim()).map_err(|e| KeyError(e.to_string()))?;
        Ok(JwtVerifier { key })
    }

    /// From the environment; `Ok(None)` when the variable is unset or empty.
    pub fn from_env() -> Result<Option<JwtVerifier>, KeyError> {
        match std::env::var(KEY_ENV) {
            Ok(v) if !v.trim().is_empty() => Self::from_pem_or_base64(&v).map(Some),
            _ => Ok(None),
        }
    }

    /// Verifies signature, issuer and times; `now` is Unix seconds.
    pub fn verify(&self, token: &str, now: u64) -> Result<Claims, JwtError> {
        let mut parts = token.split('.');
        let (Some(h), Some(p), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JwtError::Malformed);
        };
        let header: Header = decode_json(h)?;
        if header.alg != "EdDSA" {
            return Err(JwtError::Algorithm);
        }
        if header.crit.is_some() {
            return Err(JwtError::Critical);
        }
        let sig = URL_SAFE_NO_PAD.decode(s).map_err(|_| JwtError::Malformed)?;
        let sig = Signature::from_slice(&sig).map_err(|_| JwtError::Malformed)?;
        let signed = &token[..h.len() + 1 + p.len()];
        self.key
            .verify_strict(signed.as_bytes(), &sig)
            .map_err(|_| JwtError::Signature)?;
        let c: Claims = decode_json(p)?;
        if c.iss != ISSUER {
            return Err(JwtError::Issuer);
        }
        if c.exp.saturating_add(LEEWAY_SECS) <= now {
            return Err(JwtError::Expired);
        }
        if c.iat > now.saturating_add(LEEWAY_SECS) {
            return Err(JwtError::NotYetValid);
        }
        if c.exp <= c.iat {
            return Err(JwtError::Expired);
        }
        Ok(c)
    }
}

/// Three base64url parts: worth trying as a JWT.
pub fn looks_like_jwt(token: &str) -> bool {
    token.bytes().filter(|b| *b == b'.').count() == 2
}

fn decode_json<T: serde::de::DeserializeOwned>(part: &str) -> Result<T, JwtError> {
    let raw = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| JwtError::Malformed)?;
    serde_json::from_slice(&raw).map_err(|_| JwtError::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::pkcs8::EncodePublicKey;
    use ed25519_dalek::{Signer, SigningKey};
    use serde_json::json;

    fn sign(key: &SigningKey, header: &serde_json::Value, claims: &serde_json::Value) -> String {
        let h = URL_SAFE_NO_PAD.encode(header.to_string());
        let p = URL_SAFE_NO_PAD.encode(claims.to_string());
        let sig = key.sign(format!("{h}.{p}").as_bytes());
        format!("{h}.{p}.{}", URL_SAFE_NO_PAD.encode(sig.to_bytes()))
    }

    #[test]
    fn verify_rules() {
        let key = SigningKey::from_bytes(&[3u8; 32]);
        let pem = key
            .verifying_key()
            .to_public_key_pem(Default::default())
            .unwrap();
        let v = JwtVerifier::from_pem_or_base64(&pem).unwrap();
        let v64 = JwtVerifier::from_pem_or_base64(&STANDARD.encode(&pem)).unwrap();
        let hdr = json!({"alg": "EdDSA", "typ": "JWT"});
        let claims = |iss: &str, iat: u64, exp: u64| json!({"iss": iss, "sub": "https://github.com/alice", "iat": iat, "exp": exp});
        let ok = sign(&key, &hdr, &claims(ISSUER, 1000, 2000));
        assert!(looks_like_jwt(&ok));
        assert_eq!(
            v.verify(&ok, 1500).unwrap().login_on("https://github.com"),
            Some("alice")
        );
        assert!(v64.verify(&ok, 1500).is_ok());
        assert_eq!(v.verify(&ok, 2000 + LEEWAY_SECS), Err(JwtError::Expired));
        assert!(v.verify(&ok, 2000 + LEEWAY_SECS - 1).is_ok(), "leeway");
        assert!(v.verify(&ok, 1000 - LEEWAY_SECS).is_ok(), "leeway");
        assert_eq!(
            v.verify(&ok, 1000 - LEEWAY_SECS - 1),
            Err(JwtError::NotYetValid)
        );
        let bad_iss = sign(&key, &hdr, &claims("someone", 1000, 2000));
        assert_eq!(v.verify(&bad_iss, 1500), Err(JwtError::Issuer));
        let other = SigningKey::from_bytes(&[4u8; 32]);
        assert_eq!(
            v.verify(&sign(&other, &hdr, &claims(ISSUER, 1000, 2000)), 1500),
            Err(JwtError::Signature)
        );
        let none = sign(&key, &json!({"alg": "none"}), &claims(ISSUER, 1000, 2000));
        assert_eq!(v.verify(&none, 1500), Err(JwtError::Algorithm));
        // A payload swapped after signing fails.
        let parts: Vec<&str> = ok.split('.').collect();
        let forged = format!(
            "{}.{}.{}",
            parts[0],
            URL_SAFE_NO_PAD.encode(claims(ISSUER, 1000, 9999).to_string()),
            parts[2]
        );
        assert_eq!(v.verify(&forged, 1500), Err(JwtError::Signature));
        assert!(JwtVerifier::from_pem_or_base64("nope").is_err());
    }

    fn claims_with_sub(sub: &str) -> Claims {
        Claims {
            iss: ISSUER.into(),
            sub: sub.into(),
            iat: 0,
            exp: 1,
        }
    }

    #[test]
    fn sub_must_be_one_user_on_the_configured_code_host() {
        let gh = "https://github.com";
        for (sub, login) in [
            ("https://github.com/alice", Some("alice")),
            ("https://GitHub.com/alice", Some("alice")),
            ("HTTPS://github.com/a-l_i.ce", Some("a-l_i.ce")),
            ("https://evil.example/x/alice", None),
            ("https://github.com/bob?u=/alice", None),
            ("https://github.com/bob/alice", None),
            ("https://github.com/alice/", None),
            ("https://github.com/", None),
            ("https://github.com", None),
            ("http://github.com/alice", None),
            ("https://github.com:8443/alice", None),
            ("https://github.com.evil.example/alice", None),
            ("https://user@github.com/alice", None),
            ("https://github.com/alice#x", None),
            ("https://github.com/%61lice", None),
            ("https://github.com/-alice", None),
            ("github.com/alice", None),
            ("alice", None),
            ("", None),
        ] {
            assert_eq!(claims_with_sub(sub).login_on(gh), login, "{sub}");
        }
        // A code host under a path prefix (and a trailing slash in the setting).
        let gl = "https://code.example/gitlab/";
        assert_eq!(
            claims_with_sub("https://code.example/gitlab/alice").login_on(gl),
            Some("alice")
        );
        assert_eq!(
            claims_with_sub("https://code.example/alice").login_on(gl),
            None
        );
        assert_eq!(
            claims_with_sub("https://code.example/gitlabx/alice").login_on(gl),
            None
        );
    }

    #[test]
    fn crit_headers_and_inverted_times_are_refused() {
        let key = SigningKey::from_bytes(&[3u8; 32]);
        let pem = key
            .verifying_key()
            .to_public_key_pem(Default::default())
            .unwrap();
        let v = JwtVerifier::from_pem_or_base64(&pem).unwrap();
        let claims =
            json!({"iss": ISSUER, "sub": "https://github.com/alice", "iat": 1000, "exp": 2000});
        for crit in [json!(["exp"]), json!(["b64"]), json!([]), json!("x")] {
            let t = sign(&key, &json!({"alg": "EdDSA", "crit": crit}), &claims);
            assert_eq!(v.verify(&t, 1500), Err(JwtError::Critical), "{crit}");
        }
        let inverted =
            json!({"iss": ISSUER, "sub": "https://github.com/alice", "iat": 1500, "exp": 1400});
        let t = sign(&key, &json!({"alg": "EdDSA"}), &inverted);
        assert_eq!(v.verify(&t, 1450), Err(JwtError::Expired));
        let forever =
            json!({"iss": ISSUER, "sub": "https://github.com/alice", "iat": 0u64, "exp": u64::MAX});
        let t = sign(&key, &json!({"alg": "EdDSA"}), &forever);
        // Verified as a token; its lifetime is the caller's to refuse.
        assert_eq!(v.verify(&t, 1500).unwrap().lifetime(), u64::MAX);
    }
}
