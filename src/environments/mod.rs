//! The environments catalog (`/api/v1/environments`, opgroups 2): named sandbox
//! configurations a run chooses by id, on the shared catalog piece (`crate::catalog`). An
//! environment is `{description, provider, network, resources {cpu, memory, pids, disk}, env,
//! lifecycle {retention_hours, stop_on_terminal}, labels, image, snapshot}`; every field a
//! provider cannot honour is refused with a 422 naming the field, the provider and the fix
//! ([`problems_for`]), and [`preflight`] says the same per provider. [`resolve`] turns an
//! environment plus a run's sparse override into the sandbox plan frozen into the run;
//! [`freeze`] does it for a new run (the server's and `svc run`'s), and [`run_variables`]
//! gives the run's processes its variables.
//!
//! `default` is seeded once by the migration that makes the table (an ordinary entry:
//! editable and deletable, never brought back); `local` is reserved.
//! Must not start sandboxes or enforce anything (`sandbox::limits` does), nor know HTTP.

use crate::catalog::fields::type_name;
use crate::catalog::{Errors, Invalid, Kind, Obj, Secret, Shape};
use crate::sandbox::limits::{self, Resources, Runtime};
use crate::sandbox::ProviderKind;
use crate::store::CatalogTable;
use serde_json::{json, Map, Value};

/// The catalog's rules.
#[derive(Debug, Default)]
pub struct Environments;

/// The id no environment may take: the host provider's own name.
pub const RESERVED_ID: &str = "local";

/// The fields of a definition, in the order a reader sees them.
const FIELDS: [&str; 9] = [
    "description",
    "provider",
    "network",
    "resources",
    "env",
    "lifecycle",
    "labels",
    "image",
    "snapshot",
];

impl Kind for Environments {
    const TABLE: &'static CatalogTable = &crate::store::catalog::ENVIRONMENTS;
    const NOUN: &'static str = "environment";
    /// `env` is write-only (read back as `env_keys`): a value may be a literal token.
    const SECRETS: &'static [Secret] = &[Secret {
        path: "env",
        shape: Shape::Map,
    }];

    fn validate(&self, id: &str, def: &Map<String, Value>) -> Result<Map<String, Value>, Errors> {
        let mut errs = Vec::new();
        if id == RESERVED_ID {
            errs.push(Invalid::new(
                "id",
                "`local` is reserved for the host provider; choose another id",
            ));
        }
        let out = normalise(def, &mut errs);
        if let Some(out) = &out {
            errs.extend(problems_for(out, Runtime::host()));
        }
        match out {
            Some(out) if errs.is_empty() => Ok(out),
            _ => Err(errs),
        }
    }
}

/// The definition with every field written out (defaults filled in), or `None` when its
/// shape is too broken to read on (then `errs` says why).
fn normalise(def: &Map<String, Value>, errs: &mut Errors) -> Option<Map<String, Value>> {
    let o = Obj::root(def);
    o.only(&FIELDS, errs);
    let description = o.opt_string("description", errs).map(str::to_string);
    let provider = match o.string("provider", errs) {
        Some(p) => match ProviderKind::parse(p) {
            Some(k) => Some(k),
            None => {
                errs.push(Invalid::new(
                    "provider",
                    format!("`{p}` is not a provider: use local, container or hosted"),
                ));
                None
            }
        },
        None => None,
    };
    let network = match o.get("network") {
        None | Some(Value::Null) => "allow",
        Some(Value::String(s)) if s == "allow" || s == "block" => s.as_str(),
        Some(v) => {
            errs.push(Invalid::new(
                "network",
                format!("must be \"allow\" or \"block\", not {}", describe(v)),
            ));
            "allow"
        }
    };
    let resources = resources_of(&o, errs);
    let env = o.string_map("env", errs).unwrap_or_default();
    check_env(&env, errs);
    let labels = o.string_map("labels", errs).unwrap_or_default();
    let lifecycle = lifecycle_of(&o, errs);
    let image = o.opt_string("image", errs).map(str::to_string);
    let snapshot = o.opt_string("snapshot", errs).map(str::to_string);
    let provider = provider?;
    let Value::Object(out) = json!({
        "description": description,
        "provider": provider.as_str(),
        "network": network,
        "resources": resources,
        "env": env,
        "lifecycle": lifecycle,
        "labels": labels,
        "image": image,
        "snapshot": snapshot,
    }) else {
        return None;
    };
    Some(out)
}

/// Names a process environment can hold, not the server's own (`procs::env::NEVER`) nor
/// the run's `SVC_*` (which would win anyway), and values whose `{{ ... }}` references are
/// vault secrets a run may be given (never one the server keeps for itself).
fn check_env(env: &std::collections::BTreeMap<String, String>, errs: &mut Errors) {
    for (k, v) in env {
        let field = format!("env.{k}");
        if !is_env_name(k) {
            errs.push(Invalid::new(
                field,
                "must be a variable name: a letter or `_`, then letters, digits or `_`",
            ));
            continue;
        }
        if k.starts_with("SVC_") || crate::procs::NEVER_PASSED.contains(&k.as_str()) {
            errs.push(Invalid::new(
                field,
                format!("`{k}` is the server's own variable; choose another name"),
            ));
            continue;
        }
        if let Err(e) = crate::mcp::spec::check_references(v) {
            errs.push(Invalid::new(field, e.to_string()));
            continue;
        }
        for name in crate::mcp::spec::secret_names(v) {
            if crate::base::SERVER_OWNED_SECRETS.contains(&name.as_str()) {
                errs.push(Invalid::new(
                    field.clone(),
                    format!("`{name}` is a secret the server keeps for itself and is never given to a run"),
                ));
            }
        }
    }
}

fn is_env_name(k: &str) -> bool {
    let b = k.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

fn describe(v: &Value) -> String {
    match v {
        Value::String(s) => format!("\"{s}\""),
        other => type_name(other).to_string(),
    }
}

/// `resources`, each member checked and kept as written (sizes as strings or bytes).
fn resources_of(o: &Obj<'_>, errs: &mut Errors) -> Value {
    let mut out = json!({"cpu": null, "memory": null, "pids": null, "disk": null});
    let Some(m) = o.opt_object("resources", errs) else {
        return out;
    };
    let r = Obj::at(m, "resources");
    r.only(&["cpu", "memory", "pids", "disk"], errs);
    let count = |key: &str, min: u64, max: u64, errs: &mut Errors| match r.get(key) {
        None | Some(Value::Null) => Value::Null,
        Some(v) => match v.as_u64() {
            Some(n) if (min..=max).contains(&n) => json!(n),
            Some(n) if n < min => {
                errs.push(Invalid::new(
                    r.field(key),
                    format!("{n} is below what a sandbox can start with (at least {min})"),
                ));
                Value::Null
            }
            _ => {
                errs.push(Invalid::new(
                    r.field(key),
                    format!(
                        "must be a whole number from {min} to {max}, not {}",
                        describe(v)
                    ),
                ));
                Value::Null
            }
        },
    };
    let size = |key: &str, min: u64, errs: &mut Errors| match r.get(key) {
        None | Some(Value::Null) => Value::Null,
        Some(v) => {
            let bytes = match v {
                Value::String(s) => limits::parse_bytes(s),
                Value::Number(n) => n.as_u64(),
                _ => None,
            };
            match bytes {
                Some(b) if b >= min => v.clone(),
                Some(_) => {
                    errs.push(Invalid::new(
                        r.field(key),
                        format!(
                            "{} is below what a sandbox can start with (at least {})",
                            describe(v),
                            limits::format_bytes(min)
                        ),
                    ));
                    Value::Null
                }
                None => {
                    errs.push(Invalid::new(
                        r.field(key),
                        format!(
                            "must be a size such as \"512MB\", \"4GB\" or a number of bytes, not {}",
                            describe(v)
                        ),
                    ));
                    Value::Null
                }
            }
        }
    };
    out["cpu"] = count("cpu", 1, 1024, errs);
    out["memory"] = size("memory", limits::MIN_MEMORY, errs);
    out["pids"] = count("pids", u64::from(limits::MIN_PIDS), 4_194_304, errs);
    out["disk"] = size("disk", limits::MIN_DISK, errs);
    out
}

fn lifecycle_of(o: &Obj<'_>, errs: &mut Errors) -> Value {
    let mut out = json!({"retention_hours": null, "stop_on_terminal": false});
    let Some(m) = o.opt_object("lifecycle", errs) else {
        return out;
    };
    let l = Obj::at(m, "lifecycle");
    l.only(&["retention_hours", "stop_on_terminal"], errs);
    match l.get("retention_hours") {
        None | Some(Value::Null) => {}
        Some(v) => match v.as_u64() {
            Some(n) => out["retention_hours"] = json!(n),
            None => errs.push(Invalid::new(
                l.field("retention_hours"),
                format!("must be a whole number of hours, not {}", describe(v)),
            )),
        },
    }
    if let Some(b) = l.opt_bool("stop_on_terminal", errs) {
        out["stop_on_terminal"] = json!(b);
    }
    if out["stop_on_terminal"] == json!(true) && !out["retention_hours"].is_null() {
        errs.push(Invalid::new(
            l.field("retention_hours"),
            "a sandbox stopped when its run ends is removed then, not kept: \
             drop `retention_hours` or set `stop_on_terminal` to false",
        ));
    }
    out
}

/// What `provider` cannot honour in a normalised definition on a host enforcing limits with
/// `runtime`: one entry per field, each naming the provider and the fix.
pub fn problems_for(def: &Map<String, Value>, runtime: &Runtime) -> Errors {
    let mut errs = Vec::new();
    let provider = def
        .get("provider")
        .and_then(Value::as_str)
        .and_then(ProviderKind::parse)
        .unwrap_or(ProviderKind::Local);
    let p = provider.as_str();
    if provider == ProviderKind::Hosted {
        errs.push(Invalid::new(
            "provider",
            "the `hosted` provider is not configured on this server; use `container` \
             (bubblewrap on this host) or `local`",
        ));
        return errs;
    }
    for key in ["image", "snapshot"] {
        if let Some(v) = def.get(key).and_then(Value::as_str) {
            errs.push(Invalid::new(
                key,
                format!(
                    "the `{p}` provider runs on this host's file system and has no {key}s \
                     (`{v}`); remove `{key}`"
                ),
            ));
        }
    }
    if provider == ProviderKind::Local
        && def.get("network").and_then(Value::as_str) == Some("block")
    {
        errs.push(Invalid::new(
            "network",
            "the `local` provider cannot block the network (its processes run on the host); \
             use provider `container` or network `allow`",
        ));
    }
    let r = resources(def);
    if let Some(why) = runtime.refuses(&r) {
        errs.push(Invalid::new("resources.pids", why));
    }
    errs
}

/// The resources of a normalised definition, sizes in bytes.
pub fn resources(def: &Map<String, Value>) -> Resources {
    let r = def.get("resources");
    let get = |k: &str| r.and_then(|r| r.get(k));
    let size = |k: &str| match get(k) {
        Some(Value::String(s)) => limits::parse_bytes(s),
        Some(v) => v.as_u64(),
        None => None,
    };
    Resources {
        cpu: get("cpu")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok()),
        memory: size("memory"),
        pids: get("pids")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok()),
        disk: size("disk"),
    }
}

/// `GET /api/v1/environments/{id}/preflight`: for each provider, whether it would honour
/// this definition and what it would refuse (field, why), and how this host enforces limits.
pub fn preflight(id: &str, def: &Map<String, Value>) -> Value {
    let runtime = Runtime::host();
    let providers: Vec<Value> = ProviderKind::ALL
        .iter()
        .map(|p| {
            let mut d = def.clone();
            d.insert("provider".into(), json!(p.as_str()));
            let refused: Vec<Value> = problems_for(&d, runtime)
                .into_iter()
                .map(|e| json!({"field": e.field, "reason": e.message}))
                .collect();
            json!({"provider": p.as_str(), "ok": refused.is_empty(), "refused": refused})
        })
        .collect();
    json!({
        "id": id,
        "provider": def.get("provider"),
        "limits": runtime.name(),
        "providers": providers,
    })
}

/// What a run gets from an environment: the sandbox plan frozen into `run.created`, and the
/// environment variables its processes get (values unexpanded, `{{ secrets.NAME }}` kept:
/// they are frozen apart from the plan, which shows only their names as `env_keys`).
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub plan: Value,
    pub env: std::collections::BTreeMap<String, String>,
}

/// The sandbox a run gets from environment `id` (`def`) with the run's sparse `override`
/// (members replace the environment's; `resources`, `env`, `labels` and `lifecycle` merge
/// by key): the `run.created` `sandbox` object (`{environment, provider, image, snapshot,
/// network, resources, lifecycle, labels, env_keys}`, resources in bytes) and its `env`, or
/// the override's problems (422s naming `environment.<field>`).
pub fn resolve(
    id: &str,
    def: &Map<String, Value>,
    over: Option<&Map<String, Value>>,
) -> Result<Resolved, Errors> {
    let mut merged = def.clone();
    if let Some(over) = over {
        for (k, v) in over {
            if k == "id" {
                continue;
            }
            match (merged.get_mut(k), v) {
                (Some(Value::Object(base)), Value::Object(add))
                    if matches!(k.as_str(), "resources" | "env" | "labels" | "lifecycle") =>
                {
                    for (kk, vv) in add {
                        base.insert(kk.clone(), vv.clone());
                    }
                }
                _ => {
                    merged.insert(k.clone(), v.clone());
                }
            }
        }
    }
    let mut errs = Vec::new();
    let norm = normalise(&merged, &mut errs);
    if let Some(n) = &norm {
        errs.extend(problems_for(n, Runtime::host()));
    }
    let prefix = |e: Invalid| Invalid::new(format!("environment.{}", e.field), e.message);
    let norm = match norm {
        Some(n) if errs.is_empty() => n,
        _ => return Err(errs.into_iter().map(prefix).collect()),
    };
    let res = resources(&norm);
    let env: std::collections::BTreeMap<String, String> = norm
        .get("env")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let plan = json!({
        "environment": id,
        "provider": norm["provider"],
        "image": norm["image"],
        "snapshot": norm["snapshot"],
        "network": norm["network"] == "allow",
        "resources": if res.is_empty() { Value::Null } else { json!(res) },
        "lifecycle": norm["lifecycle"],
        "labels": norm["labels"],
        "env_keys": env.keys().collect::<Vec<_>>(),
    });
    Ok(Resolved { plan, env })
}

/// A run's environment choice resolved and frozen at creation ([`freeze`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Frozen {
    /// `run.created` property `sandbox` (see [`resolve`]).
    pub plan: Value,
    /// `run.created` property `sandbox_env`: the blob reference of its variables
    /// (unexpanded), when it has any.
    pub env_blob: Option<String>,
}

/// Why a run's environment choice could not be frozen.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FreezeError {
    /// Not an id nor `{id, ...override}` (a 400 on the API).
    #[error("{0}")]
    Malformed(String),
    /// An unknown id or an override the provider cannot honour (a 422 naming each field).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Errors),
    /// The variables could not be stored.
    #[error("cannot store the environment's variables: {0}")]
    Store(String),
}

/// A run's environment `choice` (an id, or `{id, ...override}`) resolved now against the
/// catalog (`lookup` gives an id's definition) and frozen, so later edits of the
/// environment change neither the run nor its resumes. Its `env` (values unexpanded,
/// possibly literal tokens) is stored as a blob, never in an event: the plan names only its
/// keys. The server's `POST /api/v1/runs` and `svc run --environment` both freeze here.
pub fn freeze(
    choice: &Value,
    lookup: &dyn Fn(&str) -> Option<Map<String, Value>>,
    store: &dyn crate::store::RunStore,
) -> Result<Frozen, FreezeError> {
    let (id, over) = match choice {
        Value::String(id) => (id.as_str(), None),
        Value::Object(m) => match m.get("id").and_then(Value::as_str) {
            Some(id) => (id, Some(m)),
            None => {
                return Err(FreezeError::Malformed(
                    "`environment` as an object needs its `id`.".into(),
                ))
            }
        },
        _ => {
            return Err(FreezeError::Malformed(
                "`environment` is an environment id or `{id, ...override}`.".into(),
            ))
        }
    };
    let def = lookup(id).ok_or_else(|| {
        FreezeError::Invalid(vec![Invalid::new(
            "environment",
            format!("no environment with id `{id}`"),
        )])
    })?;
    let resolved = resolve(id, &def, over).map_err(FreezeError::Invalid)?;
    if resolved.env.is_empty() {
        return Ok(Frozen {
            plan: resolved.plan,
            env_blob: None,
        });
    }
    let text =
        serde_json::to_string(&resolved.env).map_err(|e| FreezeError::Store(e.to_string()))?;
    let blob = store
        .put_blob(text.as_bytes())
        .map_err(|e| FreezeError::Store(e.to_string()))?;
    Ok(Frozen {
        plan: resolved.plan,
        env_blob: Some(crate::store::blob_ref(&blob)),
    })
}

/// The variables a run's processes get from its environment: the ones frozen for it
/// ([`thaw_env`]) with their secrets expanded by `lookup` now ([`expand_env`]). Keep the
/// result out of anything recorded.
pub fn run_variables(
    created_meta: &Map<String, Value>,
    store: &dyn crate::store::RunStore,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, String> {
    let env = thaw_env(created_meta, store)?;
    expand_env(&env, lookup).map_err(|e| e.to_string())
}

/// Why a run's environment variables could not be given to its processes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("its environment's variable `{name}` cannot be set: {reason}")]
pub struct EnvError {
    pub name: String,
    pub reason: String,
}

/// A run's environment variables with every `{{ secrets.NAME }}` replaced by `lookup(NAME)`,
/// just before its processes start: a missing secret, or one the server keeps for itself,
/// fails (never an empty value). Keep the result out of anything recorded.
pub fn expand_env(
    env: &std::collections::BTreeMap<String, String>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, EnvError> {
    let guarded = |n: &str| {
        if crate::base::SERVER_OWNED_SECRETS.contains(&n) {
            None
        } else {
            lookup(n)
        }
    };
    env.iter()
        .map(|(k, v)| {
            crate::mcp::spec::expand_secrets(v, &guarded)
                .map(|x| (k.clone(), x))
                .map_err(|e| EnvError {
                    name: k.clone(),
                    reason: e.to_string(),
                })
        })
        .collect()
}

/// The environment variables frozen for a run (`run.created` property `sandbox_env`, a blob
/// reference), unexpanded; none: empty.
pub fn thaw_env(
    created_meta: &Map<String, Value>,
    store: &dyn crate::store::RunStore,
) -> Result<std::collections::BTreeMap<String, String>, String> {
    let Some(reference) = created_meta.get("sandbox_env").and_then(Value::as_str) else {
        return Ok(Default::default());
    };
    let id = crate::store::parse_blob_ref(reference).ok_or_else(|| {
        format!("its environment variables are recorded as `{reference}`, not a blob")
    })?;
    let bytes = store
        .get_blob(id)
        .map_err(|e| format!("cannot read its environment variables: {e}"))?
        .ok_or_else(|| "its environment variables are missing from the store".to_string())?;
    serde_json::from_slice(&bytes)
        .map_err(|e| format!("its environment variables do not parse: {e}"))
}

/// The `default` environment the migration seeds (`store::schema`, migration 10): a
/// container with 2 CPUs and 4 GB, network allowed.
pub fn seeded_default() -> Value {
    json!({
        "description": "Seeded at install: a bubblewrap container on this host with 2 CPUs and 4 GB.",
        "provider": "container",
        "network": "allow",
        "resources": {"cpu": 2, "memory": "4GB", "pids": null, "disk": null},
        "env": {},
        "lifecycle": {"retention_hours": null, "stop_on_terminal": false},
        "labels": {},
        "image": null,
        "snapshot": null,
    })
}

#[cfg(test)]
mod tests;
