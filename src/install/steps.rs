//! The wizard's JSON API (api.md 7): one function per step request, called by
//! `super::dispatch`.
//!
//! | request | body | answer |
//! |---|---|---|
//! | `GET /install/session` | – | what is saved (secrets redacted), `completed_steps`, `prefill` |
//! | `PUT /install/server` | `{canonical_url, auth_methods?}` | 204; 422 |
//! | `POST /install/object-store/test`, `PUT /install/object-store` | `{provider: local, root?}` or `{provider: s3, bucket, region, endpoint?, path_style?, access_key_id, secret_access_key}` | 200 `{ok}` / 204; 422 (PUT checks too) |
//! | `POST /install/llm/test` | `{provider, api_key, base_url?}` | 200 `{ok, model, latency_ms}`; 422 |
//! | `PUT /install/llm` | `{providers: [{provider, api_key, base_url?}]}` or `{skip: true}` | 204; 422 |
//! | `PUT /install/codehost` | `{client_id?, client_secret?, allowed_usernames, web_url?, api_url?, integration?: {strategy: token\|app, token?, app_id?, private_key?, app_url?, webhook_secret?}}` or `{skip: true}` | 204; 422 |
//! | `POST /install/finish` | – | 202 `{status, restart_url, dev_token?}`; 409; 422; 500 |
//!
//! Owns: validating and recording answers. Must not touch: files (see [`super::finish`]).

use super::{CodehostStep, IntegrationStep, LlmKey, ObjectStoreStep, ServerStep, Wizard};
use crate::server::error::ApiError;
use crate::server::http::{Incoming, Reply};
use crate::settings::AuthMethod;
use serde::Deserialize;
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

fn invalid(detail: impl Into<String>) -> ApiError {
    ApiError::new(422, detail).with_code("invalid_install_step")
}

fn is_http_url(u: &str) -> bool {
    (u.starts_with("http://") || u.starts_with("https://"))
        && u.split_once("://")
            .is_some_and(|(_, r)| !r.is_empty() && !r.contains(' '))
}

pub(super) fn session(w: &Wizard, inc: &Incoming<'_>) -> serde_json::Value {
    let a = w.answers.lock().clone();
    let mut done = Vec::new();
    if a.server.is_some() {
        done.push("server");
    }
    if a.object_store.is_some() {
        done.push("object_store");
    }
    if a.llm.is_some() {
        done.push("llm");
    }
    if a.codehost.is_some() {
        done.push("codehost");
    }
    let prefill_url = inc
        .header("host")
        .filter(|h| !h.contains(['/', ' ']))
        .map(|h| format!("http://{h}"));
    json!({
        "completed_steps": done,
        "server": a.server.as_ref().map(|s| json!({"canonical_url": s.canonical_url, "auth_methods": s.auth_methods})),
        "object_store": a.object_store.as_ref().map(|o| match o {
            ObjectStoreStep::Local { root } => json!({"provider": "local", "root": root}),
            ObjectStoreStep::S3 { bucket, region, endpoint, path_style, .. } => json!({
                "provider": "s3", "bucket": bucket, "region": region, "endpoint": endpoint,
                "path_style": path_style, "manual_credentials_saved": true,
            }),
        }),
        "llm": a.llm.as_ref().map(|keys| json!({
            "skipped": keys.is_empty(),
            "providers": keys.iter().map(|k| json!({"provider": k.provider, "configured": true, "base_url": k.base_url})).collect::<Vec<_>>(),
        })),
        "codehost": a.codehost.as_ref().map(|c| match c {
            None => json!({"skipped": true}),
            Some(c) => json!({"skipped": false, "client_id": c.client_id, "allowed_usernames": c.allowed_usernames,
                              "client_secret_saved": c.client_secret.is_some(),
                              "integration": c.integration.as_ref().map(|i| json!({
                                  "strategy": i.strategy, "app_id": i.app_id, "app_url": i.app_url,
                                  "token_saved": i.token.is_some(), "private_key_saved": i.private_key.is_some(),
                                  "webhook_secret_saved": i.webhook_secret.is_some(),
                              }))}),
        }),
        "prefill": {
            "canonical_url": prefill_url,
            "object_store_local_root": w.state_dir.join("objects"),
        },
        "finishing": w.finishing.load(Ordering::SeqCst),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerBody {
    canonical_url: String,
    #[serde(default)]
    auth_methods: Option<Vec<AuthMethod>>,
}

pub(super) fn put_server(w: &Wizard, inc: &mut Incoming<'_>) -> Result<Reply, ApiError> {
    let b: ServerBody = inc.json()?;
    let url = b.canonical_url.trim().trim_end_matches('/').to_string();
    if !is_http_url(&url) {
        return Err(invalid(format!(
            "canonical_url `{}` is not an absolute http(s) URL.",
            b.canonical_url
        )));
    }
    let methods = b.auth_methods.unwrap_or_else(|| vec![AuthMethod::DevToken]);
    if methods.is_empty() {
        return Err(invalid("auth_methods must name at least one method."));
    }
    w.answers.lock().server = Some(ServerStep {
        canonical_url: url,
        auth_methods: methods,
    });
    Ok(Reply::empty(204))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ObjectStoreBody {
    provider: String,
    #[serde(default)]
    root: Option<PathBuf>,
    #[serde(default)]
    bucket: Option<String>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    endpoint: Option<String>,
    #[serde(default)]
    path_style: bool,
    #[serde(default)]
    access_key_id: Option<String>,
    #[serde(default)]
    secret_access_key: Option<String>,
}

pub(super) fn object_store_body(
    w: &Wizard,
    inc: &mut Incoming<'_>,
) -> Result<ObjectStoreStep, ApiError> {
    let b: ObjectStoreBody = inc.json()?;
    let need = |v: Option<String>, name: &str| {
        v.filter(|s| !s.trim().is_empty())
            .ok_or_else(|| invalid(format!("{name} is required for an s3 object store.")))
    };
    match b.provider.as_str() {
        "local" => {
            let root = b.root.unwrap_or_else(|| w.state_dir.join("objects"));
            if !root.is_absolute() {
                return Err(invalid("root must be an absolute path."));
            }
            Ok(ObjectStoreStep::Local { root })
        }
        "s3" => {
            let endpoint = b.endpoint.filter(|e| !e.trim().is_empty());
            if let Some(e) = &endpoint {
                if !is_http_url(e) {
                    return Err(invalid(format!("endpoint `{e}` is not an http(s) URL.")));
                }
            }
            Ok(ObjectStoreStep::S3 {
                bucket: need(b.bucket, "bucket")?,
                region: need(b.region, "region")?,
                endpoint,
                path_style: b.path_style,
                access_key_id: need(b.access_key_id, "access_key_id")?,
                secret_access_key: need(b.secret_access_key, "secret_access_key")?,
            })
        }
        other => Err(invalid(format!("provider `{other}` is not local or s3."))),
    }
}

/// Local: the root can be created, written, read and cleaned. S3: a signed PUT and DELETE.
pub(super) fn test_object_store(step: &ObjectStoreStep) -> Result<(), ApiError> {
    match step {
        ObjectStoreStep::Local { root } => {
            let probe = root.join(".svc-install-check");
            let r = std::fs::create_dir_all(root)
                .and_then(|_| std::fs::write(&probe, b"ok"))
                .and_then(|_| std::fs::read(&probe))
                .and_then(|_| std::fs::remove_file(&probe));
            r.map_err(|e| {
                invalid(format!(
                    "cannot use {} as the object store: {e}",
                    root.display()
                ))
            })
        }
        ObjectStoreStep::S3 {
            bucket,
            region,
            endpoint,
            path_style,
            access_key_id,
            secret_access_key,
        } => super::s3::check(&super::s3::Bucket {
            bucket,
            region,
            endpoint: endpoint.as_deref(),
            path_style: *path_style,
            access_key_id,
            secret_access_key,
        })
        .map_err(|e| invalid(format!("the bucket check failed: {e}"))),
    }
}

fn provider_of(key: &LlmKey) -> Result<crate::llm::Provider, ApiError> {
    let p = crate::llm::Provider::parse(&key.provider)
        .ok_or_else(|| invalid(format!("unknown LLM provider `{}`.", key.provider)))?;
    if key.api_key.trim().is_empty() {
        return Err(invalid("api_key is empty."));
    }
    if let Some(u) = &key.base_url {
        if !is_http_url(u) {
            return Err(invalid(format!("base_url `{u}` is not an http(s) URL.")));
        }
    }
    Ok(p)
}

/// One real call to the provider with the given key.
pub(super) fn test_llm(key: &LlmKey) -> Result<(String, u64), ApiError> {
    use crate::llm::{HttpOptions, LlmClient, RetryPolicy, StaticCredentials};
    use std::time::Duration;
    let p = provider_of(key)?;
    let Some(model) = crate::llm::models::probe_model(p) else {
        return Err(invalid(format!(
            "provider `{}` has no default model to test with.",
            key.provider
        )));
    };
    let creds = StaticCredentials::new().with(p.key_names()[0], key.api_key.trim());
    let mut client = LlmClient::new(std::sync::Arc::new(creds))
        .with_http(HttpOptions {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
        })
        .with_retry(RetryPolicy::none());
    if let Some(u) = &key.base_url {
        client = client.with_base_url(p, u);
    }
    let r = crate::llm::models::test_model(
        &client,
        model,
        Some(p),
        crate::llm::models::TestMode::Basic,
        &crate::base::cancel::CancelToken::new(),
    );
    match r.error_message {
        None => Ok((r.model_id, r.latency_ms)),
        Some(e) => Err(invalid(format!(
            "the {} key test failed: {e}",
            key.provider
        ))),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LlmBody {
    #[serde(default)]
    providers: Vec<LlmKey>,
    #[serde(default)]
    skip: bool,
}

pub(super) fn put_llm(w: &Wizard, inc: &mut Incoming<'_>) -> Result<Reply, ApiError> {
    let b: LlmBody = inc.json()?;
    if b.skip {
        if !b.providers.is_empty() {
            return Err(invalid("skip and providers exclude each other."));
        }
    } else {
        if b.providers.is_empty() {
            return Err(invalid(
                "providers must name at least one provider (or send {\"skip\": true}).",
            ));
        }
        for k in &b.providers {
            provider_of(k)?;
        }
    }
    w.answers.lock().llm = Some(b.providers);
    Ok(Reply::empty(204))
}

pub(super) fn put_codehost(w: &Wizard, inc: &mut Incoming<'_>) -> Result<Reply, ApiError> {
    let v: serde_json::Value = inc.json()?;
    if v.get("skip").and_then(|s| s.as_bool()) == Some(true) {
        w.answers.lock().codehost = Some(None);
        return Ok(Reply::empty(204));
    }
    let mut c: CodehostStep =
        serde_json::from_value(v).map_err(|e| invalid(format!("invalid code-host step: {e}")))?;
    let blank = |o: &Option<String>| o.as_deref().is_none_or(|s| s.trim().is_empty());
    if blank(&c.client_id) && blank(&c.client_secret) && c.allowed_usernames.is_empty() {
        c.client_id = None;
        c.client_secret = None;
    } else {
        if blank(&c.client_id) || blank(&c.client_secret) {
            return Err(invalid(
                "client_id and client_secret are required for sign-in.",
            ));
        }
        if c.allowed_usernames.iter().all(|u| u.trim().is_empty()) {
            return Err(invalid("allowed_usernames must name at least one user."));
        }
    }
    if c.client_id.is_none() && c.integration.is_none() {
        return Err(invalid(
            "give the OAuth app (sign-in), the integration, or both (or send {\"skip\": true}).",
        ));
    }
    for u in [&c.web_url, &c.api_url].into_iter().flatten() {
        if !is_http_url(u) {
            return Err(invalid(format!("`{u}` is not an http(s) URL.")));
        }
    }
    if let Some(i) = &c.integration {
        check_integration(i)?;
    }
    w.answers.lock().codehost = Some(Some(c));
    Ok(Reply::empty(204))
}

/// The integration's credentials are present and usable (an app key must parse).
fn check_integration(i: &IntegrationStep) -> Result<(), ApiError> {
    use crate::settings::CodehostStrategy;
    let blank = |o: &Option<String>| o.as_deref().is_none_or(|s| s.trim().is_empty());
    match i.strategy {
        CodehostStrategy::Token => {
            if blank(&i.token) {
                return Err(invalid(
                    "integration.token is required with strategy token.",
                ));
            }
        }
        CodehostStrategy::App => {
            if i.app_id.is_none() {
                return Err(invalid("integration.app_id is required with strategy app."));
            }
            let key = i.private_key.as_deref().unwrap_or("");
            crate::integrations::codehost::app::AppKey::from_pem(key)
                .map_err(|e| invalid(format!("integration.private_key: {e}.")))?;
        }
    }
    if let Some(u) = &i.app_url {
        if !is_http_url(u) {
            return Err(invalid(format!("`{u}` is not an http(s) URL.")));
        }
    }
    Ok(())
}
