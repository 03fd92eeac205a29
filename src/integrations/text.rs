//! A run's pull request title and body: written by the run's model when an LLM provider is
//! configured (from the goal, the stages with their outcomes and summaries, and the diff
//! stat; the title cut to 72 characters), else from a template of the same facts. Either
//! way the body ends with a link to the run. A model that fails or answers nothing usable
//! falls back to the template: a pull request never waits on a model.
//!
//! Owns: the wording. Must not touch: the code host, the store beyond reading events.

use crate::llm::{ChatModel, Provider};
use crate::settings::vault::Vault;
use crate::settings::Settings;
use crate::stages::StageVisit;
use crate::store::RunRow;
use crate::workspace::{diff, Git};
use serde_json::Value;
use std::sync::Arc;

/// A pull request title is at most this many characters.
pub const MAX_TITLE_CHARS: usize = 72;

/// What the title and body are written from.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub run_id: String,
    pub run_title: String,
    pub goal: String,
    /// (node, outcome, summary), in the order they ran (last visit of each).
    pub stages: Vec<(String, String, Option<String>)>,
    /// (path, additions, deletions).
    pub files: Vec<(String, u64, u64)>,
    pub additions: u64,
    pub deletions: u64,
    /// A link to the run (its web page, else its API resource).
    pub run_link: String,
}

/// Where a run can be looked at: the web page when the web UI has a URL, else the API.
pub fn run_link(settings: &Settings, run_id: &str) -> String {
    if let Some(u) = settings.run_web_url(run_id) {
        return u;
    }
    match &settings.server.api.url {
        Some(api) => format!("{}/runs/{run_id}", api.trim_end_matches('/')),
        None => format!("svc run {run_id}"),
    }
}

/// Gathers the facts of `row` (its events and its diff `base..head`).
pub fn facts(
    settings: &Settings,
    store: &dyn crate::store::RunStore,
    row: &RunRow,
    git: &Git,
    base: &str,
    head: &str,
) -> Facts {
    let events = crate::stages::run_events(store, &row.id).unwrap_or_default();
    let visits: Vec<StageVisit> = crate::stages::collect(&events);
    let mut stages: Vec<(String, String, Option<String>)> = Vec::new();
    for v in visits {
        let summary = v
            .response
            .as_deref()
            .or(v.notes.as_deref())
            .or(v.failure_reason.as_deref())
            .map(|s| one_line(s, 160));
        stages.retain(|(n, _, _)| *n != v.node_id);
        stages.push((v.node_id.clone(), v.outcome.clone(), summary));
    }
    let changes = diff::changes(git, base, head).unwrap_or_default();
    let files: Vec<(String, u64, u64)> = changes
        .iter()
        .map(|c| (c.path.clone(), c.additions, c.deletions))
        .collect();
    Facts {
        run_id: row.id.clone(),
        run_title: row.title.clone(),
        goal: row.goal.clone(),
        additions: files.iter().map(|f| f.1).sum(),
        deletions: files.iter().map(|f| f.2).sum(),
        stages,
        files,
        run_link: run_link(settings, &row.id),
    }
}

fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    cut(&flat, max)
}

/// At most `max` characters, `...` marking a cut.
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(3)).collect();
    out = out.trim_end().to_string();
    out.push_str("...");
    out
}

/// The diff stat lines (`path +a -d`), at most 50 files.
fn diff_stat(f: &Facts) -> String {
    let mut out = format!(
        "{} file(s) changed, +{} -{}\n",
        f.files.len(),
        f.additions,
        f.deletions
    );
    for (path, a, d) in f.files.iter().take(50) {
        out.push_str(&format!("- `{path}` +{a} -{d}\n"));
    }
    if f.files.len() > 50 {
        out.push_str(&format!("- ... and {} more\n", f.files.len() - 50));
    }
    out
}

fn footer(f: &Facts) -> String {
    format!(
        "\n---\nOpened by svc from run [{}]({}).",
        f.run_id, f.run_link
    )
}

/// The template: the goal's first line as the title; goal, stages, diff stat in the body.
pub fn template(f: &Facts) -> (String, String) {
    let first = f
        .goal
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or(f.run_title.as_str());
    let title = if first.trim().is_empty() {
        format!("svc run {}", f.run_id)
    } else {
        cut(
            first.trim_start_matches(['#', '*', '-', '>', ' ']),
            MAX_TITLE_CHARS,
        )
    };
    let mut body = String::new();
    if !f.goal.trim().is_empty() {
        body.push_str("## Goal\n\n");
        body.push_str(f.goal.trim());
        body.push_str("\n\n");
    }
    if !f.stages.is_empty() {
        body.push_str("## Stages\n\n");
        for (node, outcome, summary) in &f.stages {
            body.push_str(&format!("- `{node}`: {outcome}"));
            if let Some(s) = summary.as_deref().filter(|s| !s.is_empty()) {
                body.push_str(&format!(" — {s}"));
            }
            body.push('\n');
        }
        body.push('\n');
    }
    body.push_str("## Changes\n\n");
    body.push_str(&diff_stat(f));
    body.push_str(&footer(f));
    (title, body)
}

/// The prompt the model gets.
fn prompt(f: &Facts) -> String {
    let mut p = String::from(
        "Write the title and description of a pull request for the change below.\n\
         Answer with the title alone on the first line (at most 72 characters, no quotes, no \
         prefix), then a blank line, then the description in Markdown: what changed and why, \
         in a few short paragraphs or bullets. Do not invent changes.\n\n",
    );
    p.push_str(&format!("Goal:\n{}\n\n", f.goal.trim()));
    if !f.stages.is_empty() {
        p.push_str("Stages (in order, with outcome):\n");
        for (node, outcome, summary) in &f.stages {
            p.push_str(&format!("- {node}: {outcome}"));
            if let Some(s) = summary {
                p.push_str(&format!(" ({s})"));
            }
            p.push('\n');
        }
        p.push('\n');
    }
    p.push_str("Diff stat:\n");
    p.push_str(&diff_stat(f));
    p
}

/// The provider and model to write with: the run's model (the first it used, else the one
/// it asked for), else the first configured provider's default; `None` without a
/// configured provider.
fn model_of(row: &RunRow, client: &crate::llm::LlmClient) -> Option<(Option<Provider>, String)> {
    let named = row
        .models_used
        .first()
        .or_else(|| {
            row.created_meta
                .get("models")
                .and_then(Value::as_array)
                .and_then(|a| a.first())
        })
        .and_then(|m| {
            let name = m.get("name")?.as_str()?.to_string();
            let provider = m
                .get("provider")
                .and_then(Value::as_str)
                .and_then(Provider::parse);
            Some((provider, name))
        });
    if let Some((p, name)) = named {
        let provider = crate::llm::provider::infer_provider(&name, p).ok()?;
        return client
            .is_configured(provider)
            .then_some((Some(provider), name));
    }
    let p = Provider::ALL
        .iter()
        .copied()
        .find(|p| client.is_configured(*p))?;
    Some((Some(p), p.default_model()?.to_string()))
}

/// The model's title and body and the model that wrote them, or `None` when no provider
/// is configured or the call failed (logged).
pub fn with_model(
    settings: &Settings,
    vault: &Vault,
    row: &RunRow,
    f: &Facts,
    model: Option<&str>,
) -> Option<(String, String, String)> {
    let client = crate::agent::backend::client_from_settings(settings, Arc::new(vault.clone()))
        .ok()?
        .with_http(crate::llm::HttpOptions {
            connect_timeout: std::time::Duration::from_secs(10),
            read_timeout: std::time::Duration::from_secs(60),
            call_timeout: std::time::Duration::from_secs(90),
        })
        .with_retry(crate::llm::RetryPolicy::none());
    let (provider, model) = match model.filter(|m| !m.trim().is_empty()) {
        Some(m) => {
            let p = crate::llm::provider::infer_provider(m, None).ok()?;
            if !client.is_configured(p) {
                return None;
            }
            (Some(p), m.to_string())
        }
        None => model_of(row, &client)?,
    };
    let call = crate::llm::prompt::PromptCall {
        model: model.clone(),
        provider,
        system: Some("You write concise, accurate pull request titles and descriptions.".into()),
        prompt: prompt(f),
        max_tokens: Some(1024),
        reasoning_effort: None,
        project_memory: false,
        cwd: None,
    };
    let cancel = crate::base::cancel::CancelToken::new();
    let reply = match crate::llm::prompt::run_prompt(
        &client as &dyn ChatModel,
        &call,
        &cancel,
        &mut |_| {},
    ) {
        Ok(r) => r.text,
        Err(e) => {
            log::warn!(
                "run {}: the model could not write the pull request text ({e}); using the template",
                row.id
            );
            return None;
        }
    };
    let reply = reply.trim();
    let (title, body) = reply.split_once('\n').unwrap_or((reply, ""));
    let title = title
        .trim()
        .trim_start_matches('#')
        .trim()
        .trim_start_matches("Title:")
        .trim()
        .trim_matches(['"', '`', '*']);
    if title.is_empty() {
        return None;
    }
    let mut body = body.trim().to_string();
    if body.is_empty() {
        body = template(f).1;
    } else {
        body.push_str("\n\n## Changes\n\n");
        body.push_str(&diff_stat(f));
        body.push_str(&footer(f));
    }
    Some((cut(title, MAX_TITLE_CHARS), body, model))
}

/// A pull request's title and body as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub title: String,
    pub body: String,
    /// The model that wrote them; `None`: the template did.
    pub model: Option<String>,
}

/// The title and body: the model's, else the template's.
pub fn write(
    settings: &Settings,
    vault: &Vault,
    row: &RunRow,
    f: &Facts,
    model: Option<&str>,
) -> Written {
    match with_model(settings, vault, row, f, model) {
        Some((title, body, model)) => Written {
            title,
            body,
            model: Some(model),
        },
        None => {
            let (title, body) = template(f);
            Written {
                title,
                body,
                model: None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        Facts {
            run_id: "01RUN".into(),
            run_title: "t".into(),
            goal: "# Fix the parser so that quoted identifiers with escaped quotes round-trip exactly\nMore.".into(),
            stages: vec![
                ("plan".into(), "succeeded".into(), Some("made a plan".into())),
                ("test".into(), "failed".into(), None),
            ],
            files: vec![("src/a.rs".into(), 3, 1)],
            additions: 3,
            deletions: 1,
            run_link: "https://svc.example.com/runs/01RUN".into(),
        }
    }

    #[test]
    fn the_template_names_goal_stages_diff_and_ends_with_the_run_link() {
        let (title, body) = template(&facts());
        assert!(title.chars().count() <= MAX_TITLE_CHARS, "{title}");
        assert!(title.starts_with("Fix the parser") && title.ends_with("..."));
        assert!(body.contains("- `plan`: succeeded — made a plan"));
        assert!(body.contains("- `test`: failed"));
        assert!(body.contains("1 file(s) changed, +3 -1") && body.contains("`src/a.rs` +3 -1"));
        assert!(body
            .trim_end()
            .ends_with("(https://svc.example.com/runs/01RUN)."));
    }
}
