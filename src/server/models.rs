//! The Models routes: `GET /api/v1/models` (the compiled-in catalog, api.md 5.3) and
//! `POST /api/v1/providers/test` (one probe per provider, never failing as a whole).
//!
//! Owns: these handlers' request and response shapes. Keys come only from the state
//! directory's vault and endpoints from `settings.toml`, through
//! [`crate::agent::backend::client_from_settings`]. Must not touch: the catalog or the probes
//! themselves (`llm::models`), runs, or the process environment.

use super::error::ApiError;
use super::http::Reply;
use super::router::Ctx;
use super::App;
use crate::base::cancel::CancelToken;
use crate::llm::{HttpOptions, RetryPolicy};
use crate::settings::vault::Vault;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// How long a probe may take: a provider test should answer promptly, so probes are not
/// retried and a silent provider is reported as an error after these limits.
const PROBE_HTTP: HttpOptions = HttpOptions {
    connect_timeout: Duration::from_secs(10),
    read_timeout: Duration::from_secs(30),
    call_timeout: Duration::from_secs(60),
};

/// A page of the catalog filtered by `provider` and `query`.
pub fn page_of_models(
    ctx: &Ctx<'_, '_>,
    creds: &dyn crate::llm::Credentials,
) -> Result<Value, ApiError> {
    let (limit, offset) = super::runs::page(ctx)?;
    let provider = ctx.inc.query("provider");
    let query = ctx.inc.query("query");
    let all = crate::llm::models::list_models(provider.as_deref(), query.as_deref(), creds)
        .map_err(|e| ApiError::bad_request(format!("Query parameter provider: {e}.")))?;
    let data: Vec<Value> = all.iter().skip(offset).take(limit).cloned().collect();
    Ok(json!({"data": data, "meta": {"has_more": offset + data.len() < all.len()}}))
}

/// `GET /api/v1/models`: `configured` is true when the vault holds the provider's key.
pub fn list(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let vault = Vault::in_state_dir(&app.state_dir);
    Ok(Reply::json(200, &page_of_models(ctx, &vault)?))
}

/// `POST /api/v1/providers/test`: `{data: [{provider, model_id, status, error_message,
/// latency_ms}]}`, status `ok`, `error` or `skip` (no key stored).
pub fn test_providers(app: &App, _: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let settings = app.settings.get();
    let creds = Arc::new(Vault::in_state_dir(&app.state_dir));
    let client = crate::agent::backend::client_from_settings(&settings, creds)
        .map_err(|e| ApiError::internal(format!("Cannot build the provider client: {e}")))?
        .with_http(PROBE_HTTP)
        .with_retry(RetryPolicy::none());
    let results = crate::llm::models::test_providers(&client, &CancelToken::new());
    Ok(Reply::json(200, &json!({"data": results})))
}
