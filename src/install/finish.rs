//! `POST /install/finish`: checks every step, then writes the vault (secrets only there),
//! the dev token (when `dev-token` is chosen) and last `settings.toml` (temp file + rename,
//! so it is either absent or whole); answers 202 and tells the process to exit 0. Any
//! failure restores the vault and removes a dev token it created, so the next start is
//! still in install mode; the 500 body lists `leftover_env_keys` and `removed_env_keys`
//! (SPEC 2.7), always empty because svc keeps no env file.
//!
//! Owns: the finish plan and its rollback. Must not touch: the run store.

use super::{Answers, ObjectStoreStep, Wizard};
use crate::server::error::ApiError;
use crate::server::http::{Listen, Reply};
use crate::settings::vault::{write_private_atomic, SecretType, Vault};
use crate::settings::{
    AuthMethod, CodehostAuthSettings, ListenSettings, ObjectStoreSettings, ProviderSettings,
    Settings,
};
use serde_json::json;
use std::sync::atomic::Ordering;

/// What finish will write.
#[derive(Debug)]
pub struct Plan {
    pub settings: Settings,
    pub settings_text: String,
    /// `(name, value)`, stored as credentials.
    pub secrets: Vec<(String, String)>,
    pub dev_token: bool,
    pub canonical_url: String,
}

fn incomplete(step: &str, why: &str) -> ApiError {
    ApiError::new(422, format!("install step '{step}' is incomplete{why}"))
        .with_code("install_incomplete")
}

/// Builds the settings and secrets from the answers; 422 names the first incomplete step.
pub fn plan(w: &Wizard, a: &Answers) -> Result<Plan, ApiError> {
    let server = a.server.as_ref().ok_or_else(|| incomplete("server", ""))?;
    let store = a
        .object_store
        .as_ref()
        .ok_or_else(|| incomplete("object_store", ""))?;
    let llm = a
        .llm
        .as_ref()
        .ok_or_else(|| incomplete("llm", " (save a key or skip it)"))?;
    let codehost = a
        .codehost
        .as_ref()
        .ok_or_else(|| incomplete("codehost", " (save the OAuth app or skip it)"))?;
    let wants_codehost = server.auth_methods.contains(&AuthMethod::Codehost);
    if wants_codehost && !codehost.as_ref().is_some_and(|c| c.has_sign_in()) {
        return Err(incomplete(
            "codehost",
            ": code-host sign-in was chosen but the OAuth app was skipped",
        ));
    }

    let mut s = Settings::default();
    s.server.listen = match &w.listen {
        Listen::Tcp(a) => ListenSettings::Tcp { address: a.clone() },
        Listen::Unix(p) => ListenSettings::Unix {
            path: Some(p.clone()),
        },
    };
    s.server.api.url = Some(format!("{}/api/v1", server.canonical_url));
    s.server.web.enabled = true;
    s.server.web.url = Some(server.canonical_url.clone());
    s.server.auth.methods = server.auth_methods.clone();
    let mut secrets = Vec::new();
    let mut raw = [0u8; 32];
    crate::auth::random_bytes(&mut raw).map_err(|e| ApiError::internal(e.to_string()))?;
    secrets.push(("SESSION_SECRET".to_string(), crate::base::hex(&raw)));
    if let Some(c) = codehost {
        let d = CodehostAuthSettings::default();
        let web_url = c.web_url.clone().unwrap_or(d.web_url);
        let api_url = c.api_url.clone().unwrap_or(d.api_url);
        if let (Some(id), Some(secret)) = (&c.client_id, &c.client_secret) {
            s.server.auth.codehost = CodehostAuthSettings {
                web_url: web_url.clone(),
                api_url: api_url.clone(),
                client_id: Some(id.trim().to_string()),
                allowed_usernames: c
                    .allowed_usernames
                    .iter()
                    .map(|u| u.trim().to_string())
                    .filter(|u| !u.is_empty())
                    .collect(),
            };
            secrets.push(("CODEHOST_CLIENT_SECRET".into(), secret.clone()));
        }
        if let Some(i) = &c.integration {
            use crate::integrations::codehost as ch;
            s.server.integrations.codehost = crate::settings::CodehostIntegrationSettings {
                enabled: true,
                api_url,
                web_url,
                strategy: i.strategy,
                app_id: i.app_id,
                app_url: i.app_url.clone(),
                ..Default::default()
            };
            for (name, value) in [
                (ch::TOKEN_KEY, &i.token),
                (ch::APP_KEY_KEY, &i.private_key),
                (ch::WEBHOOK_SECRET_KEY, &i.webhook_secret),
            ] {
                if let Some(v) = value.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
                    secrets.push((name.to_string(), v.to_string()));
                }
            }
        }
    }
    s.server.object_store = Some(match store {
        ObjectStoreStep::Local { root } => ObjectStoreSettings::Local { root: root.clone() },
        ObjectStoreStep::S3 {
            bucket,
            region,
            endpoint,
            path_style,
            access_key_id,
            secret_access_key,
        } => {
            secrets.push(("OBJECT_STORE_ACCESS_KEY_ID".into(), access_key_id.clone()));
            secrets.push((
                "OBJECT_STORE_SECRET_ACCESS_KEY".into(),
                secret_access_key.clone(),
            ));
            ObjectStoreSettings::S3 {
                bucket: bucket.clone(),
                region: region.clone(),
                endpoint: endpoint.clone(),
                path_style: *path_style,
                part_size_mib: None,
            }
        }
    });
    for k in llm {
        let p = crate::llm::Provider::parse(&k.provider)
            .ok_or_else(|| incomplete("llm", ": unknown provider"))?;
        secrets.push((p.key_names()[0].to_string(), k.api_key.trim().to_string()));
        if let Some(u) = &k.base_url {
            s.llm.providers.insert(
                p.id().to_string(),
                ProviderSettings {
                    base_url: Some(u.clone()),
                },
            );
        }
    }
    s.validate()
        .map_err(|e| ApiError::new(422, e.to_string()).with_code("install_incomplete"))?;
    let text = toml::to_string(&s)
        .map_err(|e| ApiError::internal(format!("cannot write the settings: {e}")))?;
    let text = format!("# Written by the svc install wizard.\n{text}");
    // What we write must read back as the same settings.
    if Settings::parse(&text).ok().as_ref() != Some(&s) {
        return Err(ApiError::internal(
            "the settings the wizard produced do not read back the same",
        ));
    }
    Ok(Plan {
        dev_token: s.has_auth(AuthMethod::DevToken),
        settings: s,
        settings_text: text,
        secrets,
        canonical_url: server.canonical_url.clone(),
    })
}

/// Writes the plan; on failure everything written is undone. Returns the dev token.
pub fn apply(w: &Wizard, p: &Plan) -> Result<Option<String>, String> {
    let vault = Vault::in_state_dir(&w.state_dir);
    let before = match std::fs::read(vault.path()) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot read the vault: {e}")),
    };
    let restore_vault = || {
        let r = match &before {
            Some(b) => write_private_atomic(vault.path(), b),
            None => match std::fs::remove_file(vault.path()) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            },
        };
        if let Err(e) = r {
            log::error!("install: cannot restore the vault after a failed finish: {e}");
        }
    };
    for (name, value) in &p.secrets {
        if let Err(e) = vault.set(name, value, SecretType::Credential) {
            restore_vault();
            return Err(format!("cannot store {name} in the vault: {e}"));
        }
    }
    let mut dev = None;
    if p.dev_token {
        match crate::auth::load_or_create_dev_token(&w.state_dir) {
            Ok(t) => dev = Some(t),
            Err(e) => {
                restore_vault();
                return Err(e.to_string());
            }
        }
    }
    let written = w
        .settings_path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| write_private_atomic(&w.settings_path, p.settings_text.as_bytes()));
    if let Err(e) = written {
        restore_vault();
        if let Some((_, true)) = dev {
            let _ = std::fs::remove_file(w.state_dir.join(crate::auth::DEV_TOKEN_FILE));
        }
        return Err(format!("cannot write {}: {e}", w.settings_path.display()));
    }
    Ok(dev.map(|(t, _)| t))
}

/// The finish request.
pub(super) fn handle(w: &Wizard, request_id: &str) -> Result<Reply, ApiError> {
    if w.finishing.swap(true, Ordering::SeqCst) {
        return Err(
            ApiError::conflict("Install is already finishing.").with_code("install_finishing")
        );
    }
    let answers = w.answers.lock().clone();
    let plan = match plan(w, &answers) {
        Ok(p) => p,
        Err(e) => {
            w.finishing.store(false, Ordering::SeqCst);
            return Err(e);
        }
    };
    match apply(w, &plan) {
        Ok(dev_token) => {
            log::info!(
                "install finished: wrote {}; exiting",
                w.settings_path.display()
            );
            w.signal_done();
            let mut body = json!({"status": "completing", "restart_url": plan.canonical_url});
            if let Some(t) = dev_token {
                body["dev_token"] = json!(t);
            }
            Ok(Reply::json(202, &body))
        }
        Err(msg) => {
            w.finishing.store(false, Ordering::SeqCst);
            let e = ApiError::internal(format!("Install could not finish: {msg}. Nothing was kept; fix the cause and finish again."))
                .with_code("install_failed");
            log::error!("install finish failed: {msg}");
            let mut body = e.body(request_id);
            body["leftover_env_keys"] = json!([]);
            body["removed_env_keys"] = json!([]);
            Ok(Reply::json(500, &body))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{LlmKey, ServerStep};
    use super::*;

    fn err(r: Result<Reply, ApiError>) -> ApiError {
        match r {
            Ok(r) => panic!("expected an error, got {}", r.status()),
            Err(e) => e,
        }
    }

    fn wizard(dir: &std::path::Path) -> (Wizard, crossbeam_channel::Receiver<()>) {
        let (tx, rx) = crossbeam_channel::bounded(1);
        (
            Wizard {
                state_dir: dir.to_path_buf(),
                settings_path: dir.join("settings.toml"),
                listen: Listen::Tcp("127.0.0.1:4000".into()),
                token: "t".into(),
                answers: Default::default(),
                finishing: Default::default(),
                done: tx,
                guesses: Default::default(),
            },
            rx,
        )
    }

    #[test]
    fn incomplete_steps_then_finish_once() {
        let dir = tempfile::tempdir().unwrap();
        let (w, rx) = wizard(dir.path());
        let e = err(handle(&w, "rid"));
        assert_eq!(e.status, 422);
        assert!(e.detail.contains("'server'"), "{}", e.detail);
        {
            let mut a = w.answers.lock();
            a.server = Some(ServerStep {
                canonical_url: "https://svc.example.com".into(),
                auth_methods: vec![AuthMethod::DevToken, AuthMethod::Codehost],
            });
            a.object_store = Some(ObjectStoreStep::Local {
                root: dir.path().join("objects"),
            });
            a.llm = Some(vec![LlmKey {
                provider: "anthropic".into(),
                api_key: "sk-ant-0123456789".into(),
                base_url: None,
            }]);
            a.codehost = Some(None);
        }
        let e = err(handle(&w, "rid"));
        assert!(e.detail.contains("'codehost'"), "{}", e.detail);
        assert!(!dir.path().join("settings.toml").exists());
        w.answers.lock().server.as_mut().unwrap().auth_methods = vec![AuthMethod::DevToken];
        let r = handle(&w, "rid").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.status(), 202);
        assert!(rx.try_recv().is_ok());
        assert_eq!(err(handle(&w, "rid")).status, 409);
        let s = Settings::load(&dir.path().join("settings.toml")).unwrap();
        assert!(s.server.web.enabled);
        assert_eq!(
            s.server.api.url.as_deref(),
            Some("https://svc.example.com/api/v1")
        );
        let text = std::fs::read_to_string(dir.path().join("settings.toml")).unwrap();
        assert!(!text.contains("sk-ant"), "no secret in settings");
        let v = Vault::in_state_dir(dir.path());
        assert_eq!(
            v.get("ANTHROPIC_API_KEY").unwrap().as_deref(),
            Some("sk-ant-0123456789")
        );
        assert_eq!(v.get("SESSION_SECRET").unwrap().unwrap().len(), 64);
    }

    #[test]
    fn a_failed_write_keeps_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (w, _rx) = wizard(dir.path());
        {
            let mut a = w.answers.lock();
            a.server = Some(ServerStep {
                canonical_url: "http://127.0.0.1:4000".into(),
                auth_methods: vec![AuthMethod::DevToken],
            });
            a.object_store = Some(ObjectStoreStep::Local {
                root: dir.path().join("objects"),
            });
            a.llm = Some(Vec::new());
            a.codehost = Some(None);
        }
        // The settings path is a directory: the final rename fails.
        std::fs::create_dir(dir.path().join("settings.toml")).unwrap();
        let r = handle(&w, "rid").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.status(), 500);
        assert!(!dir.path().join("secrets.json").exists(), "vault restored");
        assert!(!dir.path().join("dev-token").exists(), "dev token removed");
        assert!(
            !w.finishing.load(Ordering::SeqCst),
            "finish may be tried again"
        );
    }
}
