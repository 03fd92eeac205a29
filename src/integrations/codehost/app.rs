//! App authentication: the RS256 JWT an app signs to speak as itself (`iss` = app id,
//! `iat` 60 s in the past against clock skew, `exp` 9 minutes ahead, under the host's
//! 10-minute cap), signed with RustCrypto's `rsa` (PKCS#1 v1.5, SHA-256; constant-time big
//! integers). The private key is read from PEM, PKCS#1 (`BEGIN RSA PRIVATE KEY`, what
//! GitHub hands out) or PKCS#8 (`BEGIN PRIVATE KEY`).
//!
//! Owns: the JWT. Must not touch: HTTP (see [`super::auth`] for minting installation
//! tokens with it), the vault. The key never appears in an error.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::DecodePrivateKey;
use rsa::signature::{SignatureEncoding, Signer};

/// A parsed app key, ready to sign.
pub struct AppKey {
    signer: rsa::pkcs1v15::SigningKey<rsa::sha2::Sha256>,
}

/// Why the app key cannot be used (never quoting it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("CODEHOST_APP_PRIVATE_KEY is not an RSA private key in PEM (PKCS#1 or PKCS#8)")]
    NotPem,
    #[error("the app JWT could not be signed: {0}")]
    Sign(String),
}

impl AppKey {
    pub fn from_pem(pem: &str) -> Result<AppKey, KeyError> {
        let pem = pem.trim();
        let key = rsa::PrivateKey::from_pkcs1_pem(pem)
            .or_else(|_| rsa::PrivateKey::from_pkcs8_pem(pem))
            .map_err(|_| KeyError::NotPem)?;
        Ok(AppKey {
            signer: rsa::pkcs1v15::SigningKey::new(key),
        })
    }

    /// The JWT of app `app_id` at `now` (Unix seconds).
    pub fn jwt(&self, app_id: u64, now: u64) -> Result<String, KeyError> {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
        let claims = serde_json::json!({
            "iat": now.saturating_sub(60),
            "exp": now + 540,
            "iss": app_id.to_string(),
        });
        let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
        let input = format!("{header}.{claims}");
        let sig = self
            .signer
            .try_sign(input.as_bytes())
            .map_err(|e| KeyError::Sign(e.to_string()))?;
        Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.to_vec())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rsa::signature::Verifier;

    /// A test-only key (also the scripted code host's in `tests/support/codehost.rs`).
    const KEY: &str = include_str!("../../../tests/support/codehost_app_key.pem");

    #[test]
    fn the_jwt_verifies_with_the_public_key_and_carries_the_claims() {
        let key = AppKey::from_pem(KEY).unwrap();
        let jwt = key.jwt(1234, 1_700_000_000).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iss"], "1234");
        assert_eq!(claims["iat"], 1_700_000_000 - 60);
        assert_eq!(claims["exp"], 1_700_000_000 + 540);
        let private = rsa::PrivateKey::from_pkcs1_pem(KEY.trim()).unwrap();
        let public = rsa::pkcs1v15::VerifyingKey::<rsa::sha2::Sha256>::new(private.to_public_key());
        let sig = rsa::pkcs1v15::Signature::try_from(
            URL_SAFE_NO_PAD.decode(parts[2]).unwrap().as_slice(),
        )
        .unwrap();
        let input = format!("{}.{}", parts[0], parts[1]);
        assert!(public.verify(input.as_bytes(), &sig).is_ok());
        assert!(public.verify(b"tampered", &sig).is_err());
    }

    #[test]
    fn a_bad_key_is_refused_without_quoting_it() {
        let e = AppKey::from_pem(
            "-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0\n-----END RSA PRIVATE KEY-----",
        )
        .err()
        .unwrap();
        assert!(!e.to_string().contains("c2VjcmV0"));
        assert!(AppKey::from_pem("not a key").is_err());
    }
}
