//! The environments catalog (`/api/v1/environments`, opgroups 2): named sandbox
//! configurations a run chooses by id, on the shared catalog piece (`crate::catalog`). An
//! environment is `{description, provider, network, resources {cpu, memory, pids, disk}, env,
//! lifecycle {retention_hours, stop_on_terminal}, labels, image, snapshot}`; every field a
//! provider cannot honour is refused with a 422 naming the field, the provider and the fix
//! ([`problems_for`]), and [`preflight`] says the same per provider. [`resolve`] turns an
//! environment plus a run's sparse override into the sandbox plan frozen into the run.
//!
//! `default` is seeded once by the migration that makes the table (an ordinary entry:
//! editable and deletable, never brought back); `local` is reserved.
//! Must not start sandboxes or enforce anything (`sandbox::limits` does), nor know HTTP.

use crate::catalog::fields::type_name;
use crate::catalog::{Errors, Invalid, Kind, Obj};
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
    if !env.is_empty() {
        // Refused rather than stored and ignored, until the sandbox gives them to processes.
        errs.push(Invalid::new(
            "env",
            "environment variables in an environment are not given to sandboxes yet; \
             use `[run] secrets` (vault values) or `[run] pass_env` in settings",
        ));
    }
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

/// The sandbox a run gets from environment `id` (`def`) with the run's sparse `override`
/// (members replace the environment's; `resources`, `env`, `labels` and `lifecycle` merge
/// by key): the `run.created` `sandbox` object (`{environment, provider, image, snapshot,
/// network, resources}`, resources in bytes), or the override's problems (422s naming
/// `environment.<field>`).
pub fn resolve(
    id: &str,
    def: &Map<String, Value>,
    over: Option<&Map<String, Value>>,
) -> Result<Value, Errors> {
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
    Ok(json!({
        "environment": id,
        "provider": norm["provider"],
        "image": norm["image"],
        "snapshot": norm["snapshot"],
        "network": norm["network"] == "allow",
        "resources": if res.is_empty() { Value::Null } else { json!(res) },
        "lifecycle": norm["lifecycle"],
        "labels": norm["labels"],
    }))
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
