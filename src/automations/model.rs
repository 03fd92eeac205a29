//! The automation definition: its fields, their rules and defaults, and the typed form the
//! scheduler and the hooks work with.
//!
//! ```text
//! {name, description?, target, triggers[], inputs?, goal?, title?, labels?, sandbox?,
//! environment?, policies?}
//! target   = {workflow_version_id}
//!          | {repository: {origin_url, ref}, workflow: "path/in/repo.dot"}
//! trigger  = {id, kind: "api", enabled?}                                    (at most one)
//!          | {id, kind: "schedule", enabled?, expression, timezone? = "UTC"}
//!          | {id, kind: "webhook", enabled?, secret, inputs?}
//!          | {id, kind: "codehost", enabled?, events[], filter?, secret?, inputs?}
//! policies = {misfire: "skip" | "fire_once" = "fire_once", overlap: "allow" | "skip" | "queue_one" = "allow"}
//! ```
//!
//! Trigger ids: `^[a-z0-9][a-z0-9_-]{0,62}$`, unique within the automation. `secret` is
//! write-only. `inputs` of webhook and code-host triggers map run inputs to the delivery
//! ([`super::mapping`]). Code-host events: `push`, `pull_request.opened`,
//! `pull_request.labeled`, `issues.opened`, `issues.labeled`; `filter` narrows them by
//! `repositories` (`owner/name`), `branches` (push: the branch pushed; pull request: its
//! base) and `labels` (labelled: the label added; opened: any label of the item).
//!
//! Owns: [`Automations`] (the catalog [`Kind`]) and [`Automation`]. Must not touch: storage,
//! firing, HTTP.

use super::mapping;
use super::schedule::{Schedule, ScheduleError};
use crate::catalog::fields::{index, join, type_name};
use crate::catalog::{Errors, Invalid, Kind, Obj, Secret, Shape};
use crate::store::CatalogTable;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What happens to schedule fires that fell due while the server was down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misfire {
    /// Recorded as one `skipped` fire; the schedule goes on from now.
    Skip,
    /// One fire for the latest missed due time (however many were missed).
    FireOnce,
}

/// What a fire does while the automation's previous run is still active.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    /// Start another run.
    Allow,
    /// Record a `skipped` fire.
    Skip,
    /// Hold one fire (`queued`) until the active run ends; more are skipped.
    QueueOne,
}

impl Misfire {
    pub const DEFAULT: Misfire = Misfire::FireOnce;
    pub fn name(self) -> &'static str {
        match self {
            Misfire::Skip => "skip",
            Misfire::FireOnce => "fire_once",
        }
    }
    fn parse(s: &str) -> Option<Misfire> {
        [Misfire::Skip, Misfire::FireOnce]
            .into_iter()
            .find(|m| m.name() == s)
    }
}

impl Overlap {
    pub const DEFAULT: Overlap = Overlap::Allow;
    pub fn name(self) -> &'static str {
        match self {
            Overlap::Allow => "allow",
            Overlap::Skip => "skip",
            Overlap::QueueOne => "queue_one",
        }
    }
    fn parse(s: &str) -> Option<Overlap> {
        [Overlap::Allow, Overlap::Skip, Overlap::QueueOne]
            .into_iter()
            .find(|m| m.name() == s)
    }
}

/// The kinds of trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerKind {
    Api,
    Schedule,
    Webhook,
    Codehost,
}

impl TriggerKind {
    pub const ALL: [TriggerKind; 4] = [
        TriggerKind::Api,
        TriggerKind::Schedule,
        TriggerKind::Webhook,
        TriggerKind::Codehost,
    ];
    pub fn name(self) -> &'static str {
        match self {
            TriggerKind::Api => "api",
            TriggerKind::Schedule => "schedule",
            TriggerKind::Webhook => "webhook",
            TriggerKind::Codehost => "codehost",
        }
    }
    pub fn parse(s: &str) -> Option<TriggerKind> {
        TriggerKind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// The code-host events a `codehost` trigger can listen to.
pub const CODEHOST_EVENTS: [&str; 5] = [
    "push",
    "pull_request.opened",
    "pull_request.labeled",
    "issues.opened",
    "issues.labeled",
];

/// What a run of the automation runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A registered workflow version.
    Version { id: String },
    /// A workflow file read from a repository at fire time; the run works on that repository.
    Repository {
        origin_url: String,
        reference: String,
        workflow: String,
    },
}

/// Narrows a code-host trigger's events (empty lists match everything).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CodehostFilter {
    pub repositories: Vec<String>,
    pub branches: Vec<String>,
    pub labels: Vec<String>,
}

/// One trigger.
#[derive(Debug, Clone)]
pub struct Trigger {
    pub id: String,
    pub enabled: bool,
    pub spec: TriggerSpec,
}

#[derive(Debug, Clone)]
pub enum TriggerSpec {
    Api,
    Schedule {
        expression: String,
        timezone: String,
        schedule: Schedule,
    },
    Webhook {
        secret: String,
        inputs: Map<String, Value>,
    },
    Codehost {
        events: Vec<String>,
        filter: CodehostFilter,
        secret: Option<String>,
        inputs: Map<String, Value>,
    },
}

impl Trigger {
    pub fn kind(&self) -> TriggerKind {
        match self.spec {
            TriggerSpec::Api => TriggerKind::Api,
            TriggerSpec::Schedule { .. } => TriggerKind::Schedule,
            TriggerSpec::Webhook { .. } => TriggerKind::Webhook,
            TriggerSpec::Codehost { .. } => TriggerKind::Codehost,
        }
    }
}

/// A validated automation.
#[derive(Debug, Clone)]
pub struct Automation {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub target: Target,
    pub triggers: Vec<Trigger>,
    pub inputs: Map<String, Value>,
    pub goal: Option<String>,
    pub title: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub sandbox: Option<Value>,
    /// The environment its runs use: an id, or `{id, ...sparse override}` (as a run's
    /// create body takes it); resolved when a fire makes its run.
    pub environment: Option<Value>,
    pub misfire: Misfire,
    pub overlap: Overlap,
}

impl Automation {
    pub fn trigger(&self, id: &str) -> Option<&Trigger> {
        self.triggers.iter().find(|t| t.id == id)
    }

    /// The enabled `api` trigger, if any.
    pub fn api_trigger(&self) -> Option<&Trigger> {
        self.triggers
            .iter()
            .find(|t| t.kind() == TriggerKind::Api && t.enabled)
    }
}

/// True for a trigger id: `^[a-z0-9][a-z0-9_-]{0,62}$`.
pub fn is_trigger_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'_')
}

/// A relative path inside a repository: `/`-separated, no empty, `.` or `..` segments.
fn is_repo_path(s: &str) -> bool {
    s.len() <= 1024
        && !s.chars().any(|c| c.is_control() || c == '\\')
        && s.split('/').all(|seg| !matches!(seg, "" | "." | ".."))
}

fn is_version_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A safe git ref for `git fetch`: no leading `-`, no whitespace or control characters, no
/// `..`, at most 255 bytes.
fn is_safe_ref(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && !s.starts_with('-')
        && !s.contains("..")
        && !s
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "~^:?*[\\".contains(c))
}

/// The automations catalog: the rules of [`Automation`], with a way to ask whether a
/// workflow version is registered.
pub struct Automations {
    version_exists: Arc<dyn Fn(&str) -> bool + Send + Sync>,
}

impl Automations {
    pub fn new(version_exists: impl Fn(&str) -> bool + Send + Sync + 'static) -> Automations {
        Automations {
            version_exists: Arc::new(version_exists),
        }
    }

    /// Reads a stored (already validated) definition into its typed form.
    pub fn typed(&self, id: &str, def: &Map<String, Value>) -> Result<Automation, Errors> {
        parse(id, def, &|_| true)
    }
}

impl Kind for Automations {
    const TABLE: &'static CatalogTable = &crate::store::catalog::AUTOMATIONS;
    const NOUN: &'static str = "automation";
    const SECRETS: &'static [Secret] = &[Secret {
        path: "triggers/*/secret",
        shape: Shape::Value,
    }];

    fn validate(&self, id: &str, def: &Map<String, Value>) -> Result<Map<String, Value>, Errors> {
        let a = parse(id, def, self.version_exists.as_ref())?;
        Ok(normalised(&a))
    }
}

const FIELDS: [&str; 11] = [
    "name",
    "description",
    "target",
    "triggers",
    "inputs",
    "goal",
    "title",
    "labels",
    "sandbox",
    "environment",
    "policies",
];

/// Validates a definition into an [`Automation`], collecting every problem.
fn parse(
    id: &str,
    def: &Map<String, Value>,
    version_exists: &(dyn Fn(&str) -> bool + Send + Sync),
) -> Result<Automation, Errors> {
    let o = Obj::root(def);
    let mut errs = Vec::new();
    o.only(&FIELDS, &mut errs);
    let name = o.non_blank("name", &mut errs).map(str::to_string);
    let description = o.opt_string("description", &mut errs).map(str::to_string);
    let target = o
        .object("target", &mut errs)
        .and_then(|t| parse_target(t, version_exists, &mut errs));
    let triggers = o
        .array("triggers", &mut errs)
        .map(|ts| parse_triggers(ts, &mut errs))
        .unwrap_or_default();
    let inputs = o
        .opt_object("inputs", &mut errs)
        .cloned()
        .unwrap_or_default();
    let goal = o.opt_string("goal", &mut errs).map(str::to_string);
    let title = o.opt_string("title", &mut errs).map(str::to_string);
    let labels = o.string_map("labels", &mut errs).unwrap_or_default();
    let sandbox = o
        .opt_object("sandbox", &mut errs)
        .and_then(|s| parse_sandbox(s, &mut errs));
    let environment = parse_environment(o.get("environment"), &mut errs);
    if sandbox.is_some() && environment.is_some() {
        errs.push(Invalid::new(
            "environment",
            "set at most one of `sandbox` and `environment`: an environment's override goes in \
             `environment: {id, ...}`",
        ));
    }
    let (misfire, overlap) = parse_policies(&o, &mut errs);
    match (name, target) {
        (Some(name), Some(target)) if errs.is_empty() => Ok(Automation {
            id: id.to_string(),
            name,
            description,
            target,
            triggers,
            inputs,
            goal,
            title,
            labels,
            sandbox,
            environment,
            misfire,
            overlap,
        }),
        _ => Err(errs),
    }
}

fn parse_target(
    t: &Map<String, Value>,
    version_exists: &(dyn Fn(&str) -> bool + Send + Sync),
    errs: &mut Errors,
) -> Option<Target> {
    let o = Obj::at(t, "target");
    if t.contains_key("workflow_version_id") {
        o.only(&["workflow_version_id"], errs);
        let id = o.string("workflow_version_id", errs)?;
        if !is_version_id(id) {
            errs.push(Invalid::new(
                "target.workflow_version_id",
                format!("`{id}` is not a workflow version id (64 lowercase hex digits)"),
            ));
            return None;
        }
        if !version_exists(id) {
            errs.push(Invalid::new(
                "target.workflow_version_id",
                format!("`{id}` is not a registered workflow version (POST /api/v1/workflow-versions first)"),
            ));
            return None;
        }
        return Some(Target::Version { id: id.to_string() });
    }
    if !t.contains_key("repository") {
        errs.push(Invalid::new(
            "target",
            "needs `workflow_version_id`, or `repository` and `workflow`",
        ));
        return None;
    }
    o.only(&["repository", "workflow"], errs);
    let workflow = o.non_blank("workflow", errs);
    if let Some(w) = workflow {
        if !is_repo_path(w) {
            errs.push(Invalid::new(
                "target.workflow",
                format!("`{w}` is not a relative path inside the repository (no leading /, no `..`, no empty segments)"),
            ));
        }
    }
    let repo = o.object("repository", errs)?;
    let r = Obj::at(repo, "target.repository");
    r.only(&["origin_url", "ref"], errs);
    let origin = r.non_blank("origin_url", errs);
    if origin.is_some_and(|u| u.starts_with('-') || u.chars().any(char::is_control)) {
        errs.push(Invalid::new(
            "target.repository.origin_url",
            "is not a repository URL",
        ));
        return None;
    }
    let reference = r.opt_string("ref", errs).unwrap_or("main");
    if !is_safe_ref(reference) {
        errs.push(Invalid::new(
            "target.repository.ref",
            format!("`{reference}` is not a branch, tag or commit name"),
        ));
        return None;
    }
    Some(Target::Repository {
        origin_url: origin?.trim().to_string(),
        reference: reference.to_string(),
        workflow: workflow?.to_string(),
    })
}

fn parse_triggers(ts: &[Value], errs: &mut Errors) -> Vec<Trigger> {
    let mut out: Vec<Trigger> = Vec::new();
    let paths: Vec<String> = (0..ts.len()).map(|i| index("triggers", i)).collect();
    for (i, t) in ts.iter().enumerate() {
        let path = &paths[i];
        let Some(m) = t.as_object() else {
            errs.push(Invalid::new(
                path.clone(),
                format!("must be an object, not {}", type_name(t)),
            ));
            continue;
        };
        let Some(trigger) = parse_trigger(Obj::at(m, path), errs) else {
            continue;
        };
        if out.iter().any(|o| o.id == trigger.id) {
            errs.push(Invalid::new(
                join(path, "id"),
                format!(
                    "`{}` is the id of another trigger; trigger ids are unique",
                    trigger.id
                ),
            ));
            continue;
        }
        if trigger.kind() == TriggerKind::Api && out.iter().any(|o| o.kind() == TriggerKind::Api) {
            errs.push(Invalid::new(
                join(path, "kind"),
                "an automation has at most one api trigger",
            ));
            continue;
        }
        out.push(trigger);
    }
    out
}

fn parse_trigger(o: Obj<'_>, errs: &mut Errors) -> Option<Trigger> {
    let id = o.string("id", errs);
    if let Some(id) = id {
        if !is_trigger_id(id) {
            errs.push(Invalid::new(
                o.field("id"),
                format!("`{id}` is not a valid trigger id: expected ^[a-z0-9][a-z0-9_-]{{0,62}}$"),
            ));
        }
    }
    let enabled = o.opt_bool("enabled", errs).unwrap_or(true);
    let kind_name = o.string("kind", errs)?;
    let Some(kind) = TriggerKind::parse(kind_name) else {
        errs.push(Invalid::new(
            o.field("kind"),
            format!("`{kind_name}` is not a trigger kind: api, schedule, webhook or codehost"),
        ));
        return None;
    };
    let spec = match kind {
        TriggerKind::Api => {
            o.only(&["id", "kind", "enabled"], errs);
            Some(TriggerSpec::Api)
        }
        TriggerKind::Schedule => {
            o.only(&["id", "kind", "enabled", "expression", "timezone"], errs);
            let expression = o.non_blank("expression", errs);
            let timezone = o.opt_string("timezone", errs).unwrap_or("UTC");
            // The zone is checked on its own too, so both mistakes show at once.
            let zone_ok = match Schedule::check_timezone(timezone) {
                Ok(()) => true,
                Err(m) => {
                    errs.push(Invalid::new(o.field("timezone"), m));
                    false
                }
            };
            match expression.map(|e| {
                (
                    e,
                    Schedule::parse(e, if zone_ok { timezone } else { "UTC" }),
                )
            }) {
                Some((e, Ok(schedule))) if zone_ok => Some(TriggerSpec::Schedule {
                    expression: e.trim().to_string(),
                    timezone: timezone.to_string(),
                    schedule,
                }),
                Some((_, Err(ScheduleError::Expression(m)))) => {
                    errs.push(Invalid::new(o.field("expression"), m));
                    None
                }
                Some((_, Err(ScheduleError::Timezone(_)))) => None,
                _ => None,
            }
        }
        TriggerKind::Webhook => {
            o.only(&["id", "kind", "enabled", "secret", "inputs"], errs);
            let secret = secret_of(&o, true, errs);
            let inputs = inputs_of(&o, errs);
            Some(TriggerSpec::Webhook {
                secret: secret.flatten()?,
                inputs: inputs?,
            })
        }
        TriggerKind::Codehost => {
            o.only(
                &[
                    "id", "kind", "enabled", "events", "filter", "secret", "inputs",
                ],
                errs,
            );
            let events = events_of(&o, errs);
            let filter = filter_of(&o, errs);
            let secret = secret_of(&o, false, errs);
            let inputs = inputs_of(&o, errs);
            Some(TriggerSpec::Codehost {
                events: events?,
                filter: filter?,
                secret: secret?,
                inputs: inputs?,
            })
        }
    }?;
    Some(Trigger {
        id: id?.to_string(),
        enabled,
        spec,
    })
}

/// A trigger's `secret`: `Some(None)` when it is optional and absent.
fn secret_of(o: &Obj<'_>, required: bool, errs: &mut Errors) -> Option<Option<String>> {
    let s = if required {
        o.string("secret", errs)
    } else {
        match o.get("secret") {
            None => return Some(None),
            Some(_) => o.opt_string("secret", errs),
        }
    }?;
    if s.len() < 16 {
        errs.push(Invalid::new(
            o.field("secret"),
            "must be at least 16 characters (it signs deliveries with HMAC-SHA256)",
        ));
        return None;
    }
    Some(Some(s.to_string()))
}

fn inputs_of(o: &Obj<'_>, errs: &mut Errors) -> Option<Map<String, Value>> {
    if o.get("inputs").is_none() {
        return Some(Map::new());
    }
    let m = o.opt_object("inputs", errs)?;
    let mut ok = true;
    for (name, source) in m {
        if let Err(e) = mapping::parse_source(source) {
            errs.push(Invalid::new(format!("{}.{name}", o.field("inputs")), e));
            ok = false;
        }
    }
    ok.then(|| m.clone())
}

fn events_of(o: &Obj<'_>, errs: &mut Errors) -> Option<Vec<String>> {
    let list = o.array("events", errs)?;
    if list.is_empty() {
        errs.push(Invalid::new(
            o.field("events"),
            format!("must name at least one of {}", CODEHOST_EVENTS.join(", ")),
        ));
        return None;
    }
    let mut out = Vec::new();
    for (i, e) in list.iter().enumerate() {
        match e.as_str() {
            Some(name) if CODEHOST_EVENTS.contains(&name) => out.push(name.to_string()),
            _ => {
                errs.push(Invalid::new(
                    index(&o.field("events"), i),
                    format!(
                        "`{}` is not one of {}",
                        e.as_str().map_or(e.to_string(), str::to_string),
                        CODEHOST_EVENTS.join(", ")
                    ),
                ));
                return None;
            }
        }
    }
    Some(out)
}

fn filter_of(o: &Obj<'_>, errs: &mut Errors) -> Option<CodehostFilter> {
    let Some(m) = o.opt_object("filter", errs) else {
        return Some(CodehostFilter::default());
    };
    let path = o.field("filter");
    let f = Obj::at(m, &path);
    f.only(&["repositories", "branches", "labels"], errs);
    let list = |key: &str, errs: &mut Errors| -> Option<Vec<String>> {
        let Some(v) = f.get(key) else {
            return Some(Vec::new());
        };
        let strings: Option<Vec<String>> = v
            .as_array()
            .and_then(|a| a.iter().map(|s| s.as_str().map(str::to_string)).collect());
        if strings.is_none() {
            errs.push(Invalid::new(f.field(key), "must be an array of strings"));
        }
        strings
    };
    Some(CodehostFilter {
        repositories: list("repositories", errs)?,
        branches: list("branches", errs)?,
        labels: list("labels", errs)?,
    })
}

fn parse_sandbox(s: &Map<String, Value>, errs: &mut Errors) -> Option<Value> {
    let o = Obj::at(s, "sandbox");
    o.only(&["provider", "image", "snapshot", "network"], errs);
    let provider = o.string("provider", errs)?;
    if !matches!(provider, "local" | "container" | "hosted") {
        errs.push(Invalid::new(
            "sandbox.provider",
            format!("`{provider}` is not local, container or hosted"),
        ));
        return None;
    }
    let image = o.opt_string("image", errs);
    let snapshot = o.opt_string("snapshot", errs);
    let network = o.opt_bool("network", errs);
    Some(json!({"provider": provider, "image": image, "snapshot": snapshot, "network": network}))
}

/// `environment`: an environment id, or `{id, ...override}`. Only its shape is checked here:
/// the catalog may change, so the environment is resolved when a fire makes the run (an
/// unknown id then fails that fire, on record with the reason).
fn parse_environment(v: Option<&Value>, errs: &mut Errors) -> Option<Value> {
    let id = match v {
        None | Some(Value::Null) => return None,
        Some(Value::String(id)) => id.as_str(),
        Some(Value::Object(m)) if m.contains_key("env") => {
            // An automation's definition is shown to its readers; variables (which may be
            // literal tokens) belong in the environment, whose `env` is write-only.
            errs.push(Invalid::new(
                "environment.env",
                "set variables in the environment itself (its `env` is write-only), not in \
                 an automation's override",
            ));
            return None;
        }
        Some(Value::Object(m)) => match m.get("id") {
            Some(Value::String(id)) => id.as_str(),
            _ => {
                errs.push(Invalid::new(
                    "environment.id",
                    "an environment given as an object needs its `id`",
                ));
                return None;
            }
        },
        Some(other) => {
            errs.push(Invalid::new(
                "environment",
                format!(
                    "must be an environment id or `{{id, ...override}}`, not {}",
                    crate::catalog::fields::type_name(other)
                ),
            ));
            return None;
        }
    };
    if !crate::catalog::is_slug(id) || id == "local" {
        errs.push(Invalid::new(
            "environment",
            format!("`{id}` is not an environment id"),
        ));
        return None;
    }
    v.cloned()
}

fn parse_policies(o: &Obj<'_>, errs: &mut Errors) -> (Misfire, Overlap) {
    let Some(p) = o.opt_object("policies", errs) else {
        return (Misfire::DEFAULT, Overlap::DEFAULT);
    };
    let p = Obj::at(p, "policies");
    p.only(&["misfire", "overlap"], errs);
    let misfire = match p.opt_string("misfire", errs) {
        None => Misfire::DEFAULT,
        Some(s) => Misfire::parse(s).unwrap_or_else(|| {
            errs.push(Invalid::new(
                "policies.misfire",
                format!("`{s}` is not skip or fire_once"),
            ));
            Misfire::DEFAULT
        }),
    };
    let overlap = match p.opt_string("overlap", errs) {
        None => Overlap::DEFAULT,
        Some(s) => Overlap::parse(s).unwrap_or_else(|| {
            errs.push(Invalid::new(
                "policies.overlap",
                format!("`{s}` is not allow, skip or queue_one"),
            ));
            Overlap::DEFAULT
        }),
    };
    (misfire, overlap)
}

/// The stored form: every field written out, defaults included.
fn normalised(a: &Automation) -> Map<String, Value> {
    let target = match &a.target {
        Target::Version { id } => json!({"workflow_version_id": id}),
        Target::Repository {
            origin_url,
            reference,
            workflow,
        } => {
            json!({"repository": {"origin_url": origin_url, "ref": reference}, "workflow": workflow})
        }
    };
    let triggers: Vec<Value> = a.triggers.iter().map(trigger_json).collect();
    let mut m = Map::new();
    m.insert("name".into(), json!(a.name));
    m.insert("description".into(), json!(a.description));
    m.insert("target".into(), target);
    m.insert("triggers".into(), Value::Array(triggers));
    m.insert("inputs".into(), Value::Object(a.inputs.clone()));
    m.insert("goal".into(), json!(a.goal));
    m.insert("title".into(), json!(a.title));
    m.insert("labels".into(), json!(a.labels));
    m.insert("sandbox".into(), a.sandbox.clone().unwrap_or(Value::Null));
    m.insert(
        "environment".into(),
        a.environment.clone().unwrap_or(Value::Null),
    );
    m.insert(
        "policies".into(),
        json!({"misfire": a.misfire.name(), "overlap": a.overlap.name()}),
    );
    m
}

fn trigger_json(t: &Trigger) -> Value {
    let mut v = json!({"id": t.id, "kind": t.kind().name(), "enabled": t.enabled});
    match &t.spec {
        TriggerSpec::Api => {}
        TriggerSpec::Schedule {
            expression,
            timezone,
            ..
        } => {
            v["expression"] = json!(expression);
            v["timezone"] = json!(timezone);
        }
        TriggerSpec::Webhook { secret, inputs } => {
            v["secret"] = json!(secret);
            v["inputs"] = Value::Object(inputs.clone());
        }
        TriggerSpec::Codehost {
            events,
            filter,
            secret,
            inputs,
        } => {
            v["events"] = json!(events);
            v["filter"] = json!({"repositories": filter.repositories, "branches": filter.branches, "labels": filter.labels});
            if let Some(s) = secret {
                v["secret"] = json!(s);
            }
            v["inputs"] = Value::Object(inputs.clone());
        }
    }
    v
}

#[cfg(test)]
mod tests;
