//! The dev token (SPEC 5.3): `svc_dev_` + 64 lowercase hex (32 random bytes), kept in
//! `<state-dir>/dev-token`, mode 0600.
//!
//! Owns: the dev-token file. Must not touch: requests (see [`super::Authenticator`]).

use super::DEV_TOKEN_PREFIX;
use std::path::Path;

pub const DEV_TOKEN_FILE: &str = "dev-token";

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
    #[error("{path} does not hold a session secret (expected 64 hex digits); remove it to get a new one")]
    MalformedSecret { path: String },
}

pub fn is_dev_token(s: &str) -> bool {
    s.strip_prefix(DEV_TOKEN_PREFIX).is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A fresh dev token from the OS CSPRNG.
pub fn new_dev_token() -> std::io::Result<String> {
    let mut raw = [0u8; 32];
    super::random_bytes(&mut raw)?;
    Ok(format!("{DEV_TOKEN_PREFIX}{}", crate::base::hex(&raw)))
}

/// Reads `<state-dir>/dev-token`, creating it when absent. Returns the token and whether it
/// was created. A malformed file is an error, never silently replaced.
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
            let token = new_dev_token().map_err(io)?;
            std::fs::create_dir_all(state_dir).map_err(io)?;
            crate::settings::vault::write_private_atomic(&path, format!("{token}\n").as_bytes())
                .map_err(io)?;
            Ok((token, true))
        }
        Err(e) => Err(io(e)),
    }
}

/// Where `--dev` keeps the session secret it generated (when neither the environment nor the
/// vault holds `SESSION_SECRET`): 64 lowercase hex digits, mode 0600.
pub const DEV_SESSION_SECRET_FILE: &str = "dev-session-secret";

/// Reads `<state-dir>/dev-session-secret`, creating it (32 random bytes as hex) when absent,
/// so browser sessions survive a restart of a dev server. A file holding anything but 64 hex
/// digits is an error, never silently replaced.
pub fn load_or_create_dev_session_secret(state_dir: &Path) -> Result<String, TokenError> {
    let path = state_dir.join(DEV_SESSION_SECRET_FILE);
    let shown = path.display().to_string();
    let io = |source| TokenError::Io {
        path: shown.clone(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let t = text.trim();
            if t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
                Ok(t.to_string())
            } else {
                Err(TokenError::MalformedSecret { path: shown })
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut raw = [0u8; 32];
            super::random_bytes(&mut raw).map_err(io)?;
            let secret = crate::base::hex(&raw);
            std::fs::create_dir_all(state_dir).map_err(io)?;
            crate::settings::vault::write_private_atomic(&path, format!("{secret}\n").as_bytes())
                .map_err(io)?;
            Ok(secret)
        }
        Err(e) => Err(io(e)),
    }
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
        let secret = load_or_create_dev_session_secret(dir.path()).unwrap();
        assert_eq!(secret.len(), 64);
        let file = dir.path().join(DEV_SESSION_SECRET_FILE);
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            load_or_create_dev_session_secret(dir.path()).unwrap(),
            secret
        );
        std::fs::write(&file, "short").unwrap();
        assert!(load_or_create_dev_session_secret(dir.path()).is_err());
    }
}
