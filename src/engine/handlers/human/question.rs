//! Human gate questions and answers (decisions.md "Human gates", api.md section 2): building
//! the question from a human node's outgoing edges, accelerator keys, label normalisation,
//! and matching an answer (or the timeout default) to an option.
//!
//! Pure: must not wait, emit events, touch the run context or route. The engine never picks
//! an option the human did not choose; everything here refuses rather than guesses.

use crate::workflow::attrs::QUESTION_TYPES;
use crate::workflow::Workflow;

/// One choice of a question: a non-freeform outgoing edge.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct QuestionOption {
    /// The accelerator key (`Y` of `[Y] Yes`), unique within the question.
    pub key: String,
    /// The edge's label without its key.
    pub label: String,
    /// The edge's target node id.
    pub target: String,
}

/// A human gate's question: what a human stage asks before the run goes on.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct Question {
    /// A ULID.
    pub id: String,
    /// The question (the node's label or prompt).
    pub text: String,
    /// The human node's id.
    pub stage: String,
    /// `multiple_choice`, `yes_no`, `confirmation`, `freeform` or `multi_select`.
    pub question_type: String,
    /// The choices, one per non-freeform outgoing edge, in declaration order.
    pub options: Vec<QuestionOption>,
    /// Whether free text is accepted (the node has a `freeform=true` edge).
    pub allow_freeform: bool,
    /// The node free text leads to.
    pub freeform_target: Option<String>,
    /// How long the question waits (`timeout` attribute), if it ever gives up.
    pub timeout_seconds: Option<u64>,
    /// The option taken when it times out (`default_choice` attribute).
    pub default_choice: Option<String>,
    /// Context shown beside the question (`context_display` attribute, rendered).
    pub context_display: Option<String>,
}

impl Question {
    /// False when there is nothing to answer with (no options, no freeform edge): the stage
    /// must fail without asking.
    pub fn is_answerable(&self) -> bool {
        !self.options.is_empty() || self.allow_freeform
    }

    fn is_yes_no(&self) -> bool {
        matches!(self.question_type.as_str(), "yes_no" | "confirmation")
    }
}

/// Options: one per non-freeform outgoing edge in declaration order (label = edge label or
/// target id); key from `[K] Label`, `K) Label`, `K - Label` (K = 1-3 letters/digits), else
/// the first character — a derived key already taken by another option becomes the next
/// unused letter or digit of its label (else its 1-based position), so keys are unique.
/// `question_type` attribute, default freeform when only a freeform edge exists, else
/// multiple_choice. The last freeform edge is the freeform target.
pub fn build_question(wf: &Workflow, node: usize, context_display: Option<String>) -> Question {
    let mut options = Vec::new();
    let mut freeform_target = None;
    for &e in &wf.out_edges[node] {
        let view = wf.edge_view(e);
        let target = wf.edge(e).to.to_string();
        if view.flag("freeform") {
            freeform_target = Some(target);
            continue;
        }
        let label = view.nonempty("label").unwrap_or(&target).to_string();
        options.push((label, target));
    }
    let options = assign_keys(options);
    let node_view = wf.node_view(node);
    let question_type = node_view
        .nonempty("question_type")
        .filter(|t| QUESTION_TYPES.contains(t))
        .map(str::to_string)
        .unwrap_or_else(|| default_type(&options, freeform_target.is_some()).to_string());
    Question {
        id: crate::base::clock::new_ulid(),
        text: question_text(wf, node).to_string(),
        stage: wf.node(node).id.to_string(),
        question_type,
        options,
        allow_freeform: freeform_target.is_some(),
        freeform_target,
        timeout_seconds: node_view.duration("timeout").map(ceil_secs),
        default_choice: node_view
            .nonempty("human.default_choice")
            .map(str::to_string),
        context_display,
    }
}

/// The question a gate asks: its `prompt` if set, else its `label`, else its id (decisions.md).
/// Variables in a prompt are the caller's to expand.
pub fn question_text(wf: &Workflow, node: usize) -> &str {
    wf.node_view(node)
        .nonempty("prompt")
        .unwrap_or_else(|| wf.label(node))
}

fn default_type(options: &[QuestionOption], has_freeform: bool) -> &'static str {
    if options.is_empty() && has_freeform {
        "freeform"
    } else {
        "multiple_choice"
    }
}

fn ceil_secs(d: std::time::Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// Explicit accelerators first (as written), then derived keys avoiding those taken.
fn assign_keys(options: Vec<(String, String)>) -> Vec<QuestionOption> {
    let explicit: Vec<Option<String>> = options.iter().map(|(l, _)| explicit_key(l)).collect();
    let mut taken: Vec<String> = explicit
        .iter()
        .flatten()
        .map(|k| k.to_lowercase())
        .collect();
    let mut out = Vec::with_capacity(options.len());
    for (i, ((label, target), key)) in options.into_iter().zip(explicit).enumerate() {
        let key = key.unwrap_or_else(|| {
            let k = derived_key(&label, i, &taken);
            taken.push(k.to_lowercase());
            k
        });
        out.push(QuestionOption { key, label, target });
    }
    out
}

fn derived_key(label: &str, index: usize, taken: &[String]) -> String {
    let free = |k: &str| !taken.contains(&k.to_lowercase());
    let first = accelerator_key(label);
    if free(&first) {
        return first;
    }
    let alnum = label.trim().chars().filter(|c| c.is_alphanumeric());
    if let Some(c) = alnum.map(String::from).find(|k| free(k)) {
        return c;
    }
    let position = (index + 1).to_string();
    if free(&position) {
        position
    } else {
        first
    }
}

/// The key of a label: `[K] Label`, `K) Label` or `K - Label` (K = 1-3 letters or digits),
/// else the first character of the trimmed label (empty for an empty label).
pub fn accelerator_key(label: &str) -> String {
    explicit_key(label).unwrap_or_else(|| {
        label
            .trim()
            .chars()
            .next()
            .map(String::from)
            .unwrap_or_default()
    })
}

fn is_accel(k: &str) -> bool {
    (1..=3).contains(&k.chars().count()) && k.chars().all(char::is_alphanumeric)
}

/// The accelerator written into the label, if any.
fn explicit_key(label: &str) -> Option<String> {
    let t = label.trim();
    if let Some(rest) = t.strip_prefix('[') {
        let (k, _) = rest.split_once(']')?;
        return is_accel(k).then(|| k.to_string());
    }
    let paren = t.split_once(')').map(|(k, _)| k);
    let dash = t.split_once(" - ").map(|(k, _)| k);
    [paren, dash]
        .into_iter()
        .flatten()
        .find(|k| is_accel(k))
        .map(str::to_string)
}

/// Trim, lowercase, strip an accelerator prefix `[K] `, `K) `, `K - ` (K 1-3 letters or
/// digits). The same normalisation routes preferred labels (decisions.md "Routing").
pub fn normalize_label(label: &str) -> String {
    let t = label.trim().to_lowercase();
    strip_accelerator(&t).trim().to_string()
}

fn strip_accelerator(t: &str) -> &str {
    if let Some(rest) = t.strip_prefix('[') {
        if let Some((k, after)) = rest.split_once("] ") {
            if is_accel(k) {
                return after;
            }
        }
        return t;
    }
    for sep in [") ", " - "] {
        if let Some((k, after)) = t.split_once(sep) {
            if is_accel(k) {
                return after;
            }
        }
    }
    t
}

/// What the human chose, matched against the question.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub enum Answer {
    /// One option.
    Option {
        /// Its key.
        key: String,
        /// Its label.
        label: String,
        /// The node it leads to.
        target: String,
    },
    /// multi_select: every chosen option, in the order given, without repeats.
    Options(Vec<QuestionOption>),
    /// Free text, on the freeform edge.
    Freeform {
        /// What the human wrote.
        text: String,
        /// The node the freeform edge leads to.
        target: String,
    },
}

impl Answer {
    fn from_option(o: &QuestionOption) -> Answer {
        Answer::Option {
            key: o.key.clone(),
            label: o.label.clone(),
            target: o.target.clone(),
        }
    }

    /// The chosen label (labels joined by ", " for several options; the text for freeform).
    pub fn label(&self) -> String {
        match self {
            Answer::Option { label, .. } => label.clone(),
            Answer::Options(opts) => opts
                .iter()
                .map(|o| o.label.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            Answer::Freeform { text, .. } => text.clone(),
        }
    }

    /// The chosen edge targets, in order.
    pub fn targets(&self) -> Vec<&str> {
        match self {
            Answer::Option { target, .. } | Answer::Freeform { target, .. } => vec![target],
            Answer::Options(opts) => opts.iter().map(|o| o.target.as_str()).collect(),
        }
    }
}

/// A refused answer; the message lists the valid choices.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct AnswerError(pub String);

/// An answer text matches an option when it equals the key (ignoring case) or the label
/// after [`normalize_label`]. No match -> the freeform edge if any, else an error listing
/// the valid choices. multi_select: comma-separated keys/labels, all must match (no
/// freeform fallback). yes_no/confirmation: also yes/no/y/n/true/false, mapped to the option
/// labelled yes/no, else the first/second option.
pub fn match_answer(q: &Question, text: &str) -> Result<Answer, AnswerError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(refusal(q, "an empty answer"));
    }
    if q.question_type == "multi_select" {
        return match_multi(q, t);
    }
    if let Some(o) = find_option(q, t)? {
        return Ok(Answer::from_option(o));
    }
    if let Some(o) = q.is_yes_no().then(|| yes_no_option(q, t)).flatten() {
        return Ok(Answer::from_option(o));
    }
    match &q.freeform_target {
        Some(target) => Ok(Answer::Freeform {
            text: t.to_string(),
            target: target.clone(),
        }),
        None => Err(refusal(q, &format!("`{t}`"))),
    }
}

/// An API `selected_option_key`: must be one option's key (ignoring case).
pub fn match_key(q: &Question, key: &str) -> Result<Answer, AnswerError> {
    let answer = by_key(q, key.trim())?.map(Answer::from_option);
    answer.ok_or_else(|| refusal(q, &format!("option key `{}`", key.trim())))
}

/// An API `selected_option_keys` list (multi_select): every key must exist.
pub fn match_keys(q: &Question, keys: &[String]) -> Result<Answer, AnswerError> {
    let mut chosen: Vec<QuestionOption> = Vec::new();
    for key in keys {
        let o = by_key(q, key.trim())?
            .ok_or_else(|| refusal(q, &format!("option key `{}`", key.trim())))?;
        push_unique(&mut chosen, o);
    }
    if chosen.is_empty() {
        return Err(refusal(q, "an empty selection"));
    }
    Ok(Answer::Options(chosen))
}

fn match_multi(q: &Question, t: &str) -> Result<Answer, AnswerError> {
    if let Some(o) = find_option(q, t)? {
        return Ok(Answer::Options(vec![o.clone()]));
    }
    let mut chosen: Vec<QuestionOption> = Vec::new();
    for part in t.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let o = find_option(q, part)?.ok_or_else(|| refusal(q, &format!("`{part}`")))?;
        push_unique(&mut chosen, o);
    }
    if chosen.is_empty() {
        return Err(refusal(q, "an empty selection"));
    }
    Ok(Answer::Options(chosen))
}

fn push_unique(chosen: &mut Vec<QuestionOption>, o: &QuestionOption) {
    if !chosen.contains(o) {
        chosen.push(o.clone());
    }
}

/// By key (unique), else by normalised label (first in declaration order).
fn find_option<'q>(q: &'q Question, t: &str) -> Result<Option<&'q QuestionOption>, AnswerError> {
    let key = by_key(q, t);
    if let Ok(Some(o)) = key {
        return Ok(Some(o));
    }
    let norm = normalize_label(t);
    if let Some(o) = q.options.iter().find(|o| normalize_label(&o.label) == norm) {
        return Ok(Some(o));
    }
    key
}

/// The option whose key equals `t` ignoring case; an error when several share it.
fn by_key<'q>(q: &'q Question, t: &str) -> Result<Option<&'q QuestionOption>, AnswerError> {
    let lower = t.to_lowercase();
    let mut hits = q.options.iter().filter(|o| o.key.to_lowercase() == lower);
    match (hits.next(), hits.next()) {
        (Some(_), Some(_)) => Err(refusal(q, &format!("the ambiguous key `{t}`"))),
        (hit, _) => Ok(hit),
    }
}

fn yes_no_option<'q>(q: &'q Question, t: &str) -> Option<&'q QuestionOption> {
    let (word, fallback) = match t.to_lowercase().as_str() {
        "yes" | "y" | "true" => ("yes", 0),
        "no" | "n" | "false" => ("no", 1),
        _ => return None,
    };
    q.options
        .iter()
        .find(|o| normalize_label(&o.label) == word)
        .or_else(|| q.options.get(fallback))
}

fn refusal(q: &Question, what: &str) -> AnswerError {
    if !q.is_answerable() {
        return AnswerError(format!(
            "{what} cannot be accepted: this question has no choices"
        ));
    }
    let mut choices: Vec<String> = q
        .options
        .iter()
        .map(|o| format!("{} ({})", o.key, o.label))
        .collect();
    if q.is_yes_no() && !q.options.is_empty() {
        choices.push("yes or no".to_string());
    }
    let list = choices.join(", ");
    let msg = match q.question_type.as_str() {
        "multi_select" => format!(
            "{what} is not among the choices; choose one or more (comma-separated) of: {list}"
        ),
        _ => format!("{what} is not one of the choices: {list}"),
    };
    AnswerError(msg)
}

/// The timeout default: `human.default_choice` names a target node id (first) or an option
/// label (normalised); naming the freeform edge's target gives an empty freeform answer.
/// `None` when unset or when it names nothing on this gate.
pub fn default_answer(q: &Question) -> Option<Answer> {
    let choice = q.default_choice.as_deref()?.trim();
    let norm = normalize_label(choice);
    let option = q
        .options
        .iter()
        .find(|o| o.target == choice)
        .or_else(|| q.options.iter().find(|o| normalize_label(&o.label) == norm));
    match (option, &q.freeform_target) {
        (Some(o), _) if q.question_type == "multi_select" => Some(Answer::Options(vec![o.clone()])),
        (Some(o), _) => Some(Answer::from_option(o)),
        (None, Some(target)) if target == choice => Some(Answer::Freeform {
            text: String::new(),
            target: target.clone(),
        }),
        (None, _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(body: &str) -> Question {
        let src = format!(
            "digraph g {{ start [shape=Mdiamond]; exit [shape=Msquare]; start -> gate; {body} }}"
        );
        let wf = crate::workflow::load(&src, &crate::workflow::NoFiles)
            .unwrap()
            .workflow;
        let gate = wf.node_index("gate").unwrap();
        build_question(&wf, gate, Some("previous output".into()))
    }

    const REVIEW: &str = r#"
        gate [shape=hexagon, label="Ship it?", timeout="90s", human.default_choice="fix"];
        gate -> approve [label="[A] Approve"];
        gate -> reject [label="R) Reject"];
        gate -> fix [label="F - Fix things"];
        gate -> later [label="later"];
        gate -> lint;
        approve -> exit; reject -> exit; fix -> exit; later -> exit; lint -> exit;
    "#;

    #[test]
    fn question_text_is_prompt_then_label_then_id() {
        let q = question(
            r#"gate [shape=hexagon, label="Ship?", prompt="Ship version 2 to production?"]; gate -> exit;"#,
        );
        assert_eq!(q.text, "Ship version 2 to production?");
        assert_eq!(
            question(r#"gate [shape=hexagon, label="Ship?"]; gate -> exit;"#).text,
            "Ship?"
        );
        assert_eq!(question("gate [shape=hexagon]; gate -> exit;").text, "gate");
        // A blank prompt does not hide the label.
        let q = question(r#"gate [shape=hexagon, label="Ship?", prompt=" "]; gate -> exit;"#);
        assert_eq!(q.text, "Ship?");
    }

    fn opt(q: &Question, i: usize) -> Answer {
        Answer::from_option(&q.options[i])
    }

    #[test]
    fn builds_options_keys_and_fields() {
        let q = question(REVIEW);
        let keys: Vec<_> = q.options.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys, ["A", "R", "F", "l", "i"]);
        let targets: Vec<_> = q.options.iter().map(|o| o.target.as_str()).collect();
        assert_eq!(targets, ["approve", "reject", "fix", "later", "lint"]);
        assert_eq!(q.options[4].label, "lint");
        assert_eq!(q.text, "Ship it?");
        assert_eq!(q.stage, "gate");
        assert_eq!(q.question_type, "multiple_choice");
        assert_eq!(q.timeout_seconds, Some(90));
        assert_eq!(q.default_choice.as_deref(), Some("fix"));
        assert_eq!(q.context_display.as_deref(), Some("previous output"));
        assert!(!q.allow_freeform && q.freeform_target.is_none());
        assert_eq!(q.id.len(), 26);
    }

    #[test]
    fn accelerator_keys_from_each_form() {
        assert_eq!(accelerator_key("[A] Approve"), "A");
        assert_eq!(accelerator_key("[Ok]Fine"), "Ok");
        assert_eq!(accelerator_key("y) Yes"), "y");
        assert_eq!(accelerator_key("12 - Twelve"), "12");
        assert_eq!(accelerator_key("  Reject"), "R");
        assert_eq!(accelerator_key("[long] label"), "[");
        assert_eq!(accelerator_key("a-b"), "a");
        assert_eq!(accelerator_key(""), "");
    }

    #[test]
    fn label_normalisation() {
        assert_eq!(normalize_label("  [A] Approve "), "approve");
        assert_eq!(normalize_label("Y) Yes"), "yes");
        assert_eq!(normalize_label("abc - Keep going"), "keep going");
        assert_eq!(normalize_label("Approve"), "approve");
        assert_eq!(normalize_label("[long] x"), "[long] x");
        assert_eq!(normalize_label("four - x"), "four - x");
        assert_eq!(normalize_label("[A]pprove"), "[a]pprove");
    }

    #[test]
    fn matching_by_key_label_and_case() {
        let q = question(REVIEW);
        for text in [
            "a",
            "A",
            "approve",
            " APPROVE ",
            "[A] Approve",
            "[a] approve",
        ] {
            assert_eq!(match_answer(&q, text), Ok(opt(&q, 0)), "{text}");
        }
        assert_eq!(match_answer(&q, "r"), Ok(opt(&q, 1)));
        assert_eq!(match_answer(&q, "fix things"), Ok(opt(&q, 2)));
        assert_eq!(match_answer(&q, "Later"), Ok(opt(&q, 3)));
        assert_eq!(match_answer(&q, "lint"), Ok(opt(&q, 4)));
        assert_eq!(match_key(&q, "f"), Ok(opt(&q, 2)));
        assert!(match_key(&q, "fix things").is_err());
    }

    #[test]
    fn refusal_lists_the_choices() {
        let q = question(REVIEW);
        let e = match_answer(&q, "maybe").unwrap_err();
        assert_eq!(
            e.0,
            "`maybe` is not one of the choices: A ([A] Approve), R (R) Reject), F (F - Fix things), l (later), i (lint)"
        );
        assert!(match_answer(&q, "   ")
            .unwrap_err()
            .0
            .starts_with("an empty answer"));
    }

    #[test]
    fn colliding_first_characters_get_distinct_keys() {
        let q = question(
            "gate [shape=hexagon]; gate -> a [label=Approve]; gate -> b [label=Abort]; \
             gate -> c [label=\"[B] Back\"]; a -> exit; b -> exit; c -> exit;",
        );
        let keys: Vec<_> = q.options.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys, ["A", "o", "B"]);
        assert_eq!(match_answer(&q, "o"), Ok(opt(&q, 1)));
        assert_eq!(match_answer(&q, "abort"), Ok(opt(&q, 1)));
    }

    const WITH_FREEFORM: &str = r#"
        gate [shape=hexagon];
        gate -> approve [label="Approve"];
        gate -> revise [label="Other", freeform=true];
        approve -> exit; revise -> exit;
    "#;

    #[test]
    fn unmatched_text_goes_to_the_freeform_edge() {
        let q = question(WITH_FREEFORM);
        assert!(q.allow_freeform);
        assert_eq!(q.options.len(), 1);
        assert_eq!(q.question_type, "multiple_choice");
        assert_eq!(match_answer(&q, "approve"), Ok(opt(&q, 0)));
        let a = match_answer(&q, " please add tests ").unwrap();
        assert_eq!(
            a,
            Answer::Freeform {
                text: "please add tests".into(),
                target: "revise".into()
            }
        );
        assert_eq!(a.targets(), ["revise"]);
    }

    #[test]
    fn freeform_only_gate_defaults_to_freeform_type() {
        let q = question("gate [shape=hexagon]; gate -> next [freeform=true]; next -> exit;");
        assert_eq!(q.question_type, "freeform");
        assert!(q.options.is_empty() && q.is_answerable());
        assert!(matches!(
            match_answer(&q, "anything"),
            Ok(Answer::Freeform { .. })
        ));
    }

    #[test]
    fn multi_select() {
        let q = question(
            "gate [shape=hexagon, question_type=multi_select]; gate -> a [label=\"Lint\"]; \
             gate -> b [label=\"Test\"]; gate -> c [label=\"Docs, too\"]; a -> exit; b -> exit; c -> exit;",
        );
        assert_eq!(q.question_type, "multi_select");
        let a = match_answer(&q, "l, TEST ,l").unwrap();
        assert_eq!(
            a,
            Answer::Options(vec![q.options[0].clone(), q.options[1].clone()])
        );
        assert_eq!(a.label(), "Lint, Test");
        assert_eq!(
            match_answer(&q, "docs, too"),
            Ok(Answer::Options(vec![q.options[2].clone()]))
        );
        let e = match_answer(&q, "lint, deploy").unwrap_err();
        assert!(e.0.starts_with("`deploy` is not among the choices"), "{e}");
        assert!(match_answer(&q, ",,").is_err());
        let keys = vec!["t".to_string(), "D".to_string()];
        assert_eq!(
            match_keys(&q, &keys),
            Ok(Answer::Options(vec![
                q.options[1].clone(),
                q.options[2].clone()
            ]))
        );
        assert!(match_keys(&q, &["x".to_string()]).is_err());
    }

    #[test]
    fn yes_no_words() {
        let q = question(
            "gate [shape=hexagon, question_type=yes_no]; gate -> n [label=\"[N] No\"]; \
             gate -> y [label=\"[Y] Yes\"]; n -> exit; y -> exit;",
        );
        for t in ["yes", "Y", "true"] {
            assert_eq!(match_answer(&q, t), Ok(opt(&q, 1)), "{t}");
        }
        for t in ["NO", "n", "false"] {
            assert_eq!(match_answer(&q, t), Ok(opt(&q, 0)), "{t}");
        }
        let e = match_answer(&q, "perhaps").unwrap_err();
        assert!(e.0.ends_with("yes or no"), "{e}");
        let c = question(
            "gate [shape=hexagon, question_type=confirmation]; gate -> go [label=Proceed]; \
             gate -> stop [label=Abort]; go -> exit; stop -> exit;",
        );
        assert_eq!(match_answer(&c, "yes"), Ok(opt(&c, 0)));
        assert_eq!(match_answer(&c, "false"), Ok(opt(&c, 1)));
    }

    #[test]
    fn default_choice_by_id_and_by_label() {
        let q = question(REVIEW);
        assert_eq!(default_answer(&q), Some(opt(&q, 2)));
        let mut by_label = q.clone();
        by_label.default_choice = Some("Approve".into());
        assert_eq!(default_answer(&by_label), Some(opt(&q, 0)));
        by_label.default_choice = Some("nowhere".into());
        assert_eq!(default_answer(&by_label), None);
        by_label.default_choice = None;
        assert_eq!(default_answer(&by_label), None);
        let f = question(WITH_FREEFORM);
        let mut f2 = f.clone();
        f2.default_choice = Some("revise".into());
        assert_eq!(
            default_answer(&f2),
            Some(Answer::Freeform {
                text: String::new(),
                target: "revise".into()
            })
        );
    }

    #[test]
    fn unanswerable_gate() {
        let q = Question {
            id: String::new(),
            text: String::new(),
            stage: "g".into(),
            question_type: "multiple_choice".into(),
            options: Vec::new(),
            allow_freeform: false,
            freeform_target: None,
            timeout_seconds: None,
            default_choice: None,
            context_display: None,
        };
        assert!(!q.is_answerable());
        assert!(match_answer(&q, "x").unwrap_err().0.contains("no choices"));
    }
}
