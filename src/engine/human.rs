//! TEMPORARY STAND-IN for the `blocks` branch (replaced when it is merged): human gate
//! questions built from a node's edges, answer matching and label normalisation.
//! Must not touch: the engine loop.

use crate::workflow::Workflow;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuestionOption {
    pub key: String,
    pub label: String,
    pub target: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Question {
    pub id: String,
    pub text: String,
    pub stage: String,
    pub question_type: String,
    pub options: Vec<QuestionOption>,
    pub allow_freeform: bool,
    pub freeform_target: Option<String>,
    pub timeout_seconds: Option<u64>,
    pub default_choice: Option<String>,
    pub context_display: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Option {
        key: String,
        label: String,
        target: String,
    },
    Options(Vec<QuestionOption>),
    Freeform {
        text: String,
        target: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    #[error("answer `{answer}` matches no option (options: {options})")]
    NoMatch { answer: String, options: String },
    #[error("an empty answer is not accepted")]
    Empty,
}

/// Trim, lowercase, strip an accelerator prefix `[K] `, `K) ` or `K - `.
pub fn normalize_label(label: &str) -> String {
    let l = label.trim().to_lowercase();
    if let Some(rest) = l.strip_prefix('[') {
        if let Some(end) = rest.find(']') {
            return rest[end + 1..].trim_start().to_string();
        }
    }
    for sep in [")", " - "] {
        if let Some(pos) = l.find(sep) {
            let k = &l[..pos];
            if (1..=3).contains(&k.len()) && k.chars().all(|c| c.is_ascii_alphanumeric()) {
                return l[pos + sep.len()..].trim_start().to_string();
            }
        }
    }
    l
}

fn key_of(label: &str) -> String {
    let t = label.trim();
    if let Some(rest) = t.strip_prefix('[') {
        if let Some(end) = rest.find(']') {
            if end > 0 {
                return rest[..end].to_string();
            }
        }
    }
    for sep in [")", " - "] {
        if let Some(pos) = t.find(sep) {
            let k = &t[..pos];
            if (1..=3).contains(&k.len()) && k.chars().all(|c| c.is_ascii_alphanumeric()) {
                return k.to_string();
            }
        }
    }
    t.chars().next().map(|c| c.to_string()).unwrap_or_default()
}

pub fn build_question(wf: &Workflow, node: usize, context_display: Option<String>) -> Question {
    let v = wf.node_view(node);
    let mut options = Vec::new();
    let mut freeform_target = None;
    for &e in &wf.out_edges[node] {
        let edge = wf.edge(e);
        if wf.edge_view(e).flag("freeform") {
            freeform_target = Some(edge.to.clone());
            continue;
        }
        let label = wf
            .edge_view(e)
            .nonempty("label")
            .unwrap_or(&edge.to)
            .to_string();
        options.push(QuestionOption {
            key: key_of(&label),
            label,
            target: edge.to.clone(),
        });
    }
    let question_type = v
        .nonempty("question_type")
        .map(String::from)
        .unwrap_or_else(|| {
            if options.is_empty() {
                "freeform"
            } else {
                "multiple_choice"
            }
            .into()
        });
    Question {
        id: ulid::Ulid::new().to_string(),
        text: wf.label(node).to_string(),
        stage: wf.node(node).id.clone(),
        question_type,
        allow_freeform: freeform_target.is_some(),
        freeform_target,
        options,
        timeout_seconds: v.duration("timeout").map(|d| d.as_secs().max(1)),
        default_choice: v.nonempty("human.default_choice").map(String::from),
        context_display,
    }
}

pub fn match_answer(q: &Question, text: &str) -> Result<Answer, AnswerError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(AnswerError::Empty);
    }
    let norm = normalize_label(t);
    let found = q
        .options
        .iter()
        .find(|o| o.key.eq_ignore_ascii_case(t))
        .or_else(|| q.options.iter().find(|o| normalize_label(&o.label) == norm));
    if let Some(o) = found {
        return Ok(Answer::Option {
            key: o.key.clone(),
            label: o.label.clone(),
            target: o.target.clone(),
        });
    }
    if let Some(target) = &q.freeform_target {
        return Ok(Answer::Freeform {
            text: t.to_string(),
            target: target.clone(),
        });
    }
    Err(AnswerError::NoMatch {
        answer: t.to_string(),
        options: q
            .options
            .iter()
            .map(|o| format!("{} ({})", o.label, o.key))
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// The option `human.default_choice` names (by target node id or label).
pub fn default_answer(q: &Question) -> Option<Answer> {
    let d = q.default_choice.as_deref()?;
    let norm = normalize_label(d);
    q.options
        .iter()
        .find(|o| o.target == d)
        .or_else(|| q.options.iter().find(|o| normalize_label(&o.label) == norm))
        .map(|o| Answer::Option {
            key: o.key.clone(),
            label: o.label.clone(),
            target: o.target.clone(),
        })
}
