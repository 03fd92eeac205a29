//! The code-host OAuth client (GitHub's web application flow and wire format): the
//! authorize URL (`<web_url>/login/oauth/authorize`), the code exchange
//! (`POST <web_url>/login/oauth/access_token`, form-encoded, answered in JSON or form
//! encoding; errors come back as 200 with an `error` member, as GitHub does) and the user
//! (`GET <api_url>/user`).
//!
//! Owns: these three calls. Must not touch: sessions, settings files, HTTP serving. The
//! client secret and access token never appear in an error message.

use crate::settings::CodehostAuthSettings;
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// The code host refused the code (expired, reused, wrong redirect URI, bad secret).
    #[error("the code host refused the sign-in: {0}")]
    Refused(String),
    /// The code host could not be reached or answered nonsense.
    #[error("the code host failed: {0}")]
    Upstream(String),
}

/// The user as the code host's `/user` describes them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CodehostUser {
    pub login: String,
    pub id: u64,
    #[serde(default)]
    pub avatar_url: Option<String>,
}

fn agent() -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .user_agent(concat!("svc/", env!("CARGO_PKG_VERSION")))
        .build();
    ureq::Agent::new_with_config(config)
}

/// Where the browser is sent to sign in.
pub fn authorize_url(
    cfg: &CodehostAuthSettings,
    client_id: &str,
    redirect_uri: &str,
    state: &str,
) -> String {
    let q = form_urlencoded::Serializer::new(String::new())
        .append_pair("client_id", client_id)
        .append_pair("redirect_uri", redirect_uri)
        .append_pair("state", state)
        .append_pair("allow_signup", "false")
        .finish();
    format!(
        "{}/login/oauth/authorize?{q}",
        cfg.web_url.trim_end_matches('/')
    )
}

/// Exchanges the callback's `code` for an access token.
pub fn exchange_code(
    cfg: &CodehostAuthSettings,
    client_id: &str,
    client_secret: &str,
    code: &str,
    redirect_uri: &str,
) -> Result<String, OAuthError> {
    let url = format!(
        "{}/login/oauth/access_token",
        cfg.web_url.trim_end_matches('/')
    );
    let resp = agent()
        .post(&url)
        .header("Accept", "application/json")
        .send_form([
            ("client_id", client_id),
            ("client_secret", client_secret),
            ("code", code),
            ("redirect_uri", redirect_uri),
        ])
        .map_err(|e| OAuthError::Upstream(format!("POST {url}: {e}")))?;
    let status = resp.status().as_u16();
    let text = read_body(resp)?;
    let fields: Vec<(String, String)> = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Object(m)) => m
            .into_iter()
            .filter_map(|(k, v)| v.as_str().map(|s| (k, s.to_string())))
            .collect(),
        _ => form_urlencoded::parse(text.as_bytes())
            .into_owned()
            .collect(),
    };
    let get = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    if let Some(err) = get("error") {
        let why = get("error_description").unwrap_or_default();
        return Err(OAuthError::Refused(
            format!("{err} {why}").trim().to_string(),
        ));
    }
    if !(200..300).contains(&status) {
        return Err(OAuthError::Upstream(format!(
            "POST {url} answered {status}"
        )));
    }
    get("access_token")
        .filter(|t| !t.is_empty())
        .ok_or_else(|| OAuthError::Upstream(format!("POST {url} returned no access_token")))
}

/// The signed-in user.
pub fn fetch_user(cfg: &CodehostAuthSettings, token: &str) -> Result<CodehostUser, OAuthError> {
    let url = format!("{}/user", cfg.api_url.trim_end_matches('/'));
    let resp = agent()
        .get(&url)
        .header("Accept", "application/vnd.github+json")
        .header("Authorization", &format!("Bearer {token}"))
        .call()
        .map_err(|e| OAuthError::Upstream(format!("GET {url}: {e}")))?;
    let status = resp.status().as_u16();
    let text = read_body(resp)?;
    if status == 401 || status == 403 {
        return Err(OAuthError::Refused(format!("GET {url} answered {status}")));
    }
    if !(200..300).contains(&status) {
        return Err(OAuthError::Upstream(format!("GET {url} answered {status}")));
    }
    serde_json::from_str(&text)
        .map_err(|e| OAuthError::Upstream(format!("GET {url}: unexpected user JSON: {e}")))
}

fn read_body(resp: ureq::http::Response<ureq::Body>) -> Result<String, OAuthError> {
    let (_, body) = resp.into_parts();
    body.into_with_config()
        .limit(1024 * 1024)
        .lossy_utf8(true)
        .read_to_string()
        .map_err(|e| OAuthError::Upstream(e.to_string()))
}
