//! Creating a run: from a workflow version and a [`RunSpec`] (what the API's create body,
//! an automation or a pull-request trigger asks for), with the `[run]` defaults filled in.
//!
//! Owns: the `run.created` payload of server runs. Must not touch: versions' storage or
//! format (`server::versions`), scheduling (a created run waits for `start`).

use super::{actor_of, exec, store_error, Runs};
use crate::server::error::ApiError;
use crate::server::http::{parse_json, Reply};
use crate::server::router::Ctx;
use crate::server::versions::{GraphSummary, Package, Version};
use crate::server::App;
use crate::store::{NewRun, RunRow, WorkflowMeta};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The model a run asks for (`model` in the create body).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelReq {
    #[serde(default)]
    pub provider: Option<String>,
    pub name: String,
}

/// The sandbox a run asks for (`sandbox` in the create body).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxReq {
    /// `local`, `container` or `hosted`.
    pub provider: String,
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default)]
    pub snapshot: Option<String>,
    /// Container processes may use the network (default `[run.sandbox] network`).
    #[serde(default)]
    pub network: Option<bool>,
}

/// The repository a run clones (`repository` in the create body).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepositoryReq {
    pub origin_url: String,
    #[serde(default)]
    pub branch: Option<String>,
}

/// The API's create body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateRun {
    #[serde(default)]
    workflow: Option<Package>,
    #[serde(default)]
    workflow_version_id: Option<String>,
    #[serde(default)]
    goal: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    inputs: Option<Map<String, Value>>,
    #[serde(default)]
    model: Option<ModelReq>,
    #[serde(default)]
    sandbox: Option<SandboxReq>,
    #[serde(default)]
    repository: Option<RepositoryReq>,
    #[serde(default)]
    source_directory: Option<String>,
    /// Work in `source_directory` itself instead of a copy (explicit opt-in).
    #[serde(default)]
    in_place: bool,
    /// The run's MCP servers: catalog ids or inline definitions (`[run.agent] mcp_servers`
    /// when absent; `[]` for none).
    #[serde(default)]
    mcp_servers: Option<Vec<Value>>,
    /// The run's LLM budget in USD (`[run] max_usd` when absent).
    #[serde(default)]
    budget_usd: Option<f64>,
    /// This run's `[run.pull_request]` (not the Run's `pull_request` link).
    #[serde(default)]
    pull_request_options: Option<crate::integrations::publish::PullRequestOptions>,
    /// The environment the sandbox is made from: its id, or `{id, ...sparse override}`
    /// (`[run] environment` when absent).
    #[serde(default)]
    environment: Option<Value>,
    /// This run's `[run.notifications]` (chat).
    #[serde(default)]
    notifications: Option<crate::integrations::chat::NotificationOptions>,
    /// Workspace files kept at the end of each stage (globs; `[run] artifacts` when absent,
    /// `[]` for none).
    #[serde(default)]
    artifacts: Option<Vec<String>>,
}

/// What a caller asks of a new run besides its workflow version; every `None` or empty
/// field takes the `[run]` default (goal: the graph's `goal`; title: from the goal).
///
/// ```text
/// let version = app.versions.get(&id)?.ok_or(...)?;
/// let mut spec = RunSpec::new(principal.to_json(), json!({"kind": "automation", "automation_id": a}));
/// spec.inputs.insert("ticket".into(), json!("T-1"));
/// let row = app.runs.create(&version, spec)?;
/// let row = app.runs.start(&row.id, false, &actor)?;
/// ```
#[derive(Debug, Clone, Default)]
pub struct RunSpec {
    pub goal: Option<String>,
    pub title: Option<String>,
    /// Added to (and overriding) `[run] metadata`.
    pub labels: BTreeMap<String, String>,
    /// Added to (and overriding) `[run] inputs`.
    pub inputs: Map<String, Value>,
    pub model: Option<ModelReq>,
    pub sandbox: Option<SandboxReq>,
    /// At most one of `repository` and `source_directory`; neither: `[run] repository`, else
    /// a scratch workspace.
    pub repository: Option<RepositoryReq>,
    pub source_directory: Option<String>,
    /// Work in `source_directory` itself instead of a copy.
    pub in_place: bool,
    /// Overrides `[run.pull_request]` for this run.
    pub pull_request_options: Option<crate::integrations::publish::PullRequestOptions>,
    /// Overrides `[run.notifications]` for this run.
    pub notifications: Option<crate::integrations::chat::NotificationOptions>,
    /// The principal creating the run, as JSON (`auth::Principal::to_json`).
    pub created_by: Value,
    /// Where the request came from: `{"kind": "api"}` for the API.
    pub origin: Value,
    /// The run's id, chosen by the caller (a ULID; an automation's fire names its run before
    /// creating it, so creating it again finds it); `None`: a fresh one.
    pub id: Option<String>,
    /// `Run.automation` (AutomationRef `{id, name, trigger_id}`) of a run an automation fired.
    pub automation: Option<Value>,
    /// MCP servers: catalog ids (strings) or inline definitions (objects); `None`: `[run.agent]
    /// mcp_servers`.
    pub mcp_servers: Option<Vec<Value>>,
    /// The run's LLM budget in USD; `None`: `[run] max_usd`.
    pub budget_usd: Option<f64>,
    /// The environment: an id or `{id, ...override}`; `None`: `[run] environment`, else
    /// `sandbox` / `[run.sandbox]`.
    pub environment: Option<Value>,
    /// Artifact patterns; `None`: `[run] artifacts`.
    pub artifacts: Option<Vec<String>>,
}

impl RunSpec {
    /// A spec with every choice left to the defaults.
    pub fn new(created_by: Value, origin: Value) -> RunSpec {
        RunSpec {
            created_by,
            origin,
            ..RunSpec::default()
        }
    }
}

/// The `run.created` keys `workspace` (where the files come from), `repository`
/// (RepositoryRef) and the source directory, from the request or `[run] repository`.
fn workspace_request(
    repository: Option<RepositoryReq>,
    source_directory: Option<String>,
    in_place: bool,
    defaults: &crate::settings::RunDefaults,
) -> Result<(Value, Value, Option<String>), ApiError> {
    if in_place && source_directory.is_none() {
        return Err(ApiError::bad_request(
            "`in_place` needs a `source_directory` to work in.",
        ));
    }
    let repository = repository.or_else(|| {
        if source_directory.is_some() {
            return None;
        }
        defaults.repository.as_ref().map(|r| RepositoryReq {
            origin_url: r.origin_url.clone(),
            branch: r.branch.clone(),
        })
    });
    match (repository, source_directory) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "Send at most one of `repository` and `source_directory`.",
        )),
        (Some(r), None) => {
            let origin = r.origin_url.trim().to_string();
            if origin.is_empty() || origin.starts_with('-') {
                return Err(ApiError::bad_request(
                    "repository.origin_url is empty or invalid.",
                ));
            }
            if r.branch
                .as_deref()
                .is_some_and(|b| b.trim().is_empty() || b.starts_with('-'))
            {
                return Err(ApiError::bad_request(
                    "repository.branch is empty or invalid.",
                ));
            }
            let (name, provider) = crate::workspace::repository_name(&origin);
            Ok((
                json!({"kind": "repository", "origin_url": origin, "branch": r.branch}),
                json!({"name": name, "origin_url": origin, "provider": provider}),
                None,
            ))
        }
        (None, Some(dir)) => {
            let path = std::path::Path::new(&dir);
            if !path.is_absolute() {
                return Err(ApiError::bad_request(format!(
                    "source_directory `{dir}` is not an absolute path."
                )));
            }
            if !path.is_dir() {
                return Err(ApiError::bad_request(format!(
                    "source_directory `{dir}` is not a directory on the server host."
                )));
            }
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "unknown".into());
            let provider = if crate::workspace::Git::is_repository(path) {
                "git"
            } else {
                "unknown"
            };
            Ok((
                json!({"kind": "directory", "path": dir, "in_place": in_place}),
                json!({"name": name, "origin_url": null, "provider": provider}),
                Some(dir),
            ))
        }
        (None, None) => Ok((json!({"kind": "scratch"}), Value::Null, None)),
    }
}

/// Title from a goal: first line, decoration stripped, at most 100 chars (97 + `...`).
fn title_from(goal: &str) -> String {
    let line = goal
        .lines()
        .map(|l| {
            l.trim()
                .trim_start_matches(['#', '*', '-', '>', ' '])
                .trim()
        })
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if line.chars().count() <= 100 {
        line.to_string()
    } else {
        format!("{}...", line.chars().take(97).collect::<String>())
    }
}

fn workflow_meta(v: &Arc<Version>) -> Result<(WorkflowMeta, String), ApiError> {
    let summary = match v.summary.get() {
        Some(s) => s.clone(),
        None => {
            let s = summarize(v)?;
            let _ = v.summary.set(s.clone());
            s
        }
    };
    let entry = &v.package.entrypoint;
    let slug = std::path::Path::new(entry)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned());
    Ok((
        WorkflowMeta {
            name: Some(summary.name.clone()),
            slug,
            graph_name: Some(summary.name),
            node_count: summary.node_count,
            edge_count: summary.edge_count,
            source: v.source().to_string(),
            path: Some(entry.clone()),
            version_id: Some(v.id.clone()),
        },
        summary.goal,
    ))
}

/// Parses a version's entry graph for its name, goal and size.
fn summarize(v: &Arc<Version>) -> Result<GraphSummary, ApiError> {
    let files = exec::VersionFiles {
        version: Arc::clone(v),
        deps: Vec::new(),
    };
    let loaded = crate::workflow::load(v.source(), &files).map_err(|e| {
        ApiError::unprocessable(format!("The workflow does not parse: {}", e.message))
    })?;
    let wf = &loaded.workflow;
    Ok(GraphSummary {
        name: wf.name().to_string(),
        goal: wf.goal().to_string(),
        node_count: wf.graph.nodes.len() as i64,
        edge_count: wf.graph.edges.len() as i64,
    })
}

/// `POST /api/v1/runs`: registers or finds the version, then [`Runs::create`].
pub fn create(app: &App, ctx: &mut Ctx<'_, '_>) -> Result<Reply, ApiError> {
    let body: CreateRun = parse_json(ctx.inc.body()?)?;
    let version = match (body.workflow, body.workflow_version_id) {
        (Some(pkg), None) => app.versions.register(pkg)?.0,
        (None, Some(id)) => app
            .versions
            .get(&id)?
            .ok_or_else(|| ApiError::not_found(format!("No workflow version with id `{id}`.")))?,
        _ => {
            return Err(ApiError::bad_request(
                "Send exactly one of `workflow` (a package) or `workflow_version_id`.",
            ))
        }
    };
    let spec = RunSpec {
        goal: body.goal,
        title: body.title,
        labels: body.labels.unwrap_or_default(),
        inputs: body.inputs.unwrap_or_default(),
        model: body.model,
        sandbox: body.sandbox,
        repository: body.repository,
        source_directory: body.source_directory,
        in_place: body.in_place,
        pull_request_options: body.pull_request_options,
        notifications: body.notifications,
        created_by: actor_of(ctx),
        origin: json!({"kind": "api"}),
        id: None,
        automation: None,
        mcp_servers: body.mcp_servers,
        budget_usd: body.budget_usd,
        environment: body.environment,
        artifacts: body.artifacts,
    };
    let row = app.runs.create(&version, spec)?;
    Ok(app.runs.run_reply(201, &row))
}

impl Runs {
    /// Creates a run (status `submitted`) of `version` as `spec` asks, with the `[run]`
    /// defaults filled in; [`Runs::start`] queues it. Errors are the API's: 400 for a bad
    /// choice, 422 for a workflow that does not parse.
    pub fn create(&self, version: &Arc<Version>, spec: RunSpec) -> Result<RunRow, ApiError> {
        if let Some(sb) = &spec.sandbox {
            if !matches!(sb.provider.as_str(), "local" | "container" | "hosted") {
                return Err(ApiError::bad_request(format!(
                    "sandbox.provider `{}` is not local, container or hosted.",
                    sb.provider
                )));
            }
        }
        if spec
            .model
            .as_ref()
            .is_some_and(|m| m.name.trim().is_empty())
        {
            return Err(ApiError::bad_request("model.name is empty."));
        }
        if let Some(o) = &spec.pull_request_options {
            o.validate().map_err(ApiError::bad_request)?;
        }
        if let Some(o) = &spec.notifications {
            o.validate().map_err(ApiError::bad_request)?;
        }
        let settings = self.settings.get();
        let defaults = &settings.run;
        let (mut workflow, graph_goal) = workflow_meta(version)?;
        // The engine runs the version's own text; the event users read shows it redacted.
        if let std::borrow::Cow::Owned(hidden) =
            crate::base::redact::Redact::redact(self.redactor.as_ref(), &workflow.source)
        {
            workflow.source = hidden;
        }
        let goal = spec
            .goal
            .or_else(|| defaults.goal.clone())
            .unwrap_or(graph_goal);
        let title = spec
            .title
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| {
                let t = title_from(&goal);
                if t.is_empty() {
                    workflow.name.clone().unwrap_or_else(|| "unnamed".into())
                } else {
                    t
                }
            });
        let mut labels = defaults.metadata.clone();
        labels.extend(spec.labels);
        let mut inputs: Map<String, Value> = defaults
            .inputs
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), serde_json::to_value(v).ok()?)))
            .collect();
        inputs.extend(spec.inputs);
        let model = spec
            .model
            .map(|m| json!({"provider": m.provider, "name": m.name}))
            .or_else(|| {
                defaults
                    .model
                    .as_ref()
                    .map(|m| json!({"provider": m.provider, "name": m.name}))
            });
        let (workspace, mut repository, source_directory) = workspace_request(
            spec.repository,
            spec.source_directory,
            spec.in_place,
            defaults,
        )?;
        let mcp = self.frozen_mcp_servers(spec.mcp_servers, &defaults.agent)?;
        // An origin on the configured code host is that host's repository, whatever its name.
        let web_url = &settings.server.integrations.codehost.web_url;
        let on_codehost = repository
            .get("origin_url")
            .and_then(Value::as_str)
            .and_then(|o| crate::integrations::codehost::repo_of_origin(web_url, o));
        if let Some(repo) = on_codehost {
            repository["name"] = json!(repo.slug());
            repository["provider"] = json!("codehost");
        }
        let sandbox_defaults = defaults
            .sandbox
            .clone()
            .unwrap_or_else(crate::settings::SandboxDefault::defaults);
        let environment =
            match (spec.environment, &spec.sandbox) {
                (Some(_), Some(_)) => return Err(ApiError::bad_request(
                    "Send at most one of `environment` and `sandbox`: an environment's override \
                     goes in `environment: {id, ...}`.",
                )),
                (Some(e), None) => Some(e),
                (None, None) => defaults.environment.clone().map(Value::String),
                (None, Some(_)) => None,
            };
        // Every server run has a sandbox: the environment's (resolved and frozen now), else
        // the request's, else `[run.sandbox]`, else local.
        let mut sandbox_env = None;
        let sandbox = Some(match (environment, spec.sandbox) {
            (Some(e), _) => {
                let (plan, env) = self.frozen_environment(&e)?;
                sandbox_env = env;
                plan
            }
            (None, Some(s)) => {
                json!({"provider": s.provider, "image": s.image, "snapshot": s.snapshot,
                              "network": s.network.unwrap_or(sandbox_defaults.network)})
            }
            (None, None) => {
                json!({"provider": sandbox_defaults.provider, "image": sandbox_defaults.image,
                           "snapshot": sandbox_defaults.snapshot, "network": sandbox_defaults.network})
            }
        });
        let mut extra = json!({
            "created_by": spec.created_by,
            "origin": spec.origin,
            "models": model.map(|m| vec![m]).unwrap_or_default(),
            "sandbox": sandbox,
            "workspace": workspace,
            "repository": repository,
            "pull_request_options": spec.pull_request_options,
            "notifications": spec.notifications,
        });
        if let Some(a) = spec.automation {
            extra["automation"] = a;
        }
        if let Some(blob) = sandbox_env {
            extra["sandbox_env"] = Value::String(blob);
        }
        if let Some(b) = budget(spec.budget_usd, defaults.max_usd)? {
            extra["budget"] = b;
        }
        let artifacts = spec.artifacts.unwrap_or_else(|| defaults.artifacts.clone());
        crate::artifacts::check_patterns(&artifacts).map_err(ApiError::bad_request)?;
        if !artifacts.is_empty() {
            extra["artifacts"] = json!(artifacts);
        }
        if let Some((views, blob)) = mcp {
            extra["mcp_servers"] = views;
            extra["mcp_definitions"] = Value::String(blob);
        }
        let new = NewRun {
            id: spec.id,
            title,
            goal,
            labels,
            workflow,
            working_dir: source_directory,
            inputs: Value::Object(inputs),
            parent_id: None,
            extra,
        };
        self.store.create_run(new).map_err(store_error)
    }

    /// The environments catalog runs choose their sandbox from (the server sets it at start).
    pub fn set_environments(
        &self,
        catalog: Arc<crate::catalog::Catalog<crate::environments::Environments>>,
    ) {
        let _ = self.environments.set(catalog);
    }

    /// The sandbox plan of environment `e` (an id, or `{id, ...override}`) and the blob
    /// reference of its variables, frozen now (`environments::freeze`): 400 for a malformed
    /// choice, 422 for an unknown id or an override the provider cannot honour.
    fn frozen_environment(&self, e: &Value) -> Result<(Value, Option<String>), ApiError> {
        let catalog = self.environments.get();
        let lookup = |id: &str| Some(catalog?.get(id).ok()?.definition.clone());
        use crate::environments::FreezeError;
        match crate::environments::freeze(e, &lookup, self.store.as_ref()) {
            Ok(f) => Ok((f.plan, f.env_blob)),
            Err(FreezeError::Malformed(m)) => Err(ApiError::bad_request(m)),
            Err(FreezeError::Invalid(errs)) => Err(crate::server::catalog::error(
                crate::catalog::CatalogError::Invalid(errs),
            )),
            Err(e @ FreezeError::Store(_)) => Err(ApiError::internal(e.to_string())),
        }
    }

    /// The MCP servers catalog runs name servers from (the server sets it at start).
    pub fn set_mcp_catalog(
        &self,
        catalog: Arc<crate::catalog::Catalog<crate::mcp::catalog::McpServers>>,
    ) {
        let _ = self.mcp_catalog.set(catalog);
    }

    /// The run's MCP servers, resolved now and frozen: their views (no `env`/`headers`
    /// values) for `run.created`, and a blob reference to the full definitions (the
    /// executor reads them; `{{ secrets.NAME }}` stays unexpanded). `None`: no servers.
    fn frozen_mcp_servers(
        &self,
        requested: Option<Vec<Value>>,
        defaults: &crate::settings::AgentDefaults,
    ) -> Result<Option<(Value, String)>, ApiError> {
        let (refs, field) = match requested {
            Some(r) => (r, "mcp_servers"),
            None => (defaults.mcp_refs(), "settings: run.agent.mcp_servers"),
        };
        if refs.is_empty() {
            return Ok(None);
        }
        let catalog = self.mcp_catalog.get();
        let lookup = |id: &str| {
            let item = catalog?.get(id).ok()?;
            crate::mcp::catalog::server_of(id, &item.definition).ok()
        };
        let servers = crate::mcp::catalog::resolve(&refs, field, &lookup)
            .map_err(|e| crate::server::catalog::error(crate::catalog::CatalogError::Invalid(e)))?;
        crate::mcp::catalog::freeze(&servers, self.store.as_ref())
            .map(Some)
            .map_err(ApiError::internal)
    }
}

/// `run.created` property `budget`: `{usd_micros, source: request|settings}`, from the
/// request's `budget_usd`, else `[run] max_usd`; none when neither names one.
fn budget(requested: Option<f64>, default: Option<f64>) -> Result<Option<Value>, ApiError> {
    let (usd, source) = match (requested, default) {
        (Some(u), _) => (u, "request"),
        (None, Some(u)) => (u, "settings"),
        (None, None) => return Ok(None),
    };
    if !(usd.is_finite() && usd > 0.0 && usd < 1e9) {
        return Err(ApiError::bad_request(format!(
            "`budget_usd` must be a positive number of US dollars, not {usd}."
        ))
        .with_code("invalid_budget"));
    }
    Ok(Some(
        json!({"usd_micros": (usd * 1e6).round() as i64, "source": source}),
    ))
}
