//! Declared types of the attributes of SPEC 2.13 and their conversion from lexical values.
//!
//! Typed attributes accept quoted and unquoted forms (`max_retries=3` and `"3"` are the
//! same); a value that does not convert is an error naming the attribute, the value and the
//! expected type (decisions.md). Unknown keys are kept raw and never typed.
//!
//! Must not: read files or know what a handler does with an attribute.

use crate::dot::{Attrs, Value};
use std::time::Duration;

/// Where an attribute may appear.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Graph,
    Node,
    Edge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttrType {
    Text,
    Int,
    Bool,
    Duration,
    /// A duration, or `0` (written as an integer) meaning "off".
    DurationOrZero,
    OneOf(&'static [&'static str]),
    Fidelity,
}

impl AttrType {
    pub fn describe(&self) -> String {
        match self {
            AttrType::Text => "text".into(),
            AttrType::Int => "an integer".into(),
            AttrType::Bool => "a boolean (true or false)".into(),
            AttrType::Duration => "a duration like 30s, 500ms, 5m, 2h or 1d".into(),
            AttrType::DurationOrZero => "a duration like 30s, or 0 to disable".into(),
            AttrType::OneOf(opts) => format!("one of {}", opts.join(", ")),
            AttrType::Fidelity => format!("one of {}", FIDELITIES.join(", ")),
        }
    }
}

pub const FIDELITIES: &[&str] = &[
    "compact",
    "full",
    "truncate",
    "summary:high",
    "summary:medium",
    "summary:low",
];
/// How much of the run's history an LLM stage is given (SPEC 2.13 `fidelity`; the
/// preamble of each mode is built by `engine::fidelity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fidelity {
    /// Goal, every completed stage with its key details, then the context (the default).
    Compact,
    /// Continue the conversation of the stage's thread.
    Full,
    /// Goal and run id only.
    Truncate,
    SummaryHigh,
    SummaryMedium,
    SummaryLow,
}

impl Fidelity {
    pub const ALL: [Fidelity; 6] = [
        Fidelity::Compact,
        Fidelity::Full,
        Fidelity::Truncate,
        Fidelity::SummaryHigh,
        Fidelity::SummaryMedium,
        Fidelity::SummaryLow,
    ];

    /// The attribute value (`compact`, `full`, `truncate`, `summary:high|medium|low`).
    pub fn parse(text: &str) -> Option<Fidelity> {
        Fidelity::ALL.into_iter().find(|f| f.as_str() == text)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Fidelity::Compact => "compact",
            Fidelity::Full => "full",
            Fidelity::Truncate => "truncate",
            Fidelity::SummaryHigh => "summary:high",
            Fidelity::SummaryMedium => "summary:medium",
            Fidelity::SummaryLow => "summary:low",
        }
    }
}

pub const RETRY_POLICIES: &[&str] = &["none", "standard", "aggressive", "linear", "patient"];
pub const QUESTION_TYPES: &[&str] = &[
    "yes_no",
    "confirmation",
    "multiple_choice",
    "multi_select",
    "freeform",
];

use AttrType::*;
use Scope::*;

/// Every attribute SPEC 2.13 names, with its scope and declared type.
pub const SCHEMA: &[(Scope, &str, AttrType)] = &[
    (Graph, "goal", Text),
    (Graph, "label", Text),
    (Graph, "rankdir", Text),
    (Graph, "model_stylesheet", Text),
    (Graph, "default_max_retries", Int),
    (Graph, "retry_target", Text),
    (Graph, "fallback_retry_target", Text),
    (Graph, "default_fidelity", AttrType::Fidelity),
    (Graph, "default_thread", Text),
    (Graph, "max_node_visits", Int),
    (Graph, "stall_timeout", DurationOrZero),
    (Graph, "loop_restart_signature_limit", Int),
    (Node, "label", Text),
    (Node, "shape", Text),
    (Node, "type", Text),
    (Node, "class", Text),
    (Node, "timeout", Duration),
    (Node, "max_visits", Int),
    (Node, "max_retries", Int),
    (Node, "retry_policy", OneOf(RETRY_POLICIES)),
    (Node, "retry_target", Text),
    (Node, "fallback_retry_target", Text),
    (Node, "goal_gate", Bool),
    (Node, "auto_status", Bool),
    (Node, "allow_partial", Bool),
    (Node, "selection", OneOf(&["deterministic", "random"])),
    (Node, "prompt", Text),
    (Node, "reasoning_effort", OneOf(&["low", "medium", "high"])),
    (Node, "max_tokens", Int),
    // Ours (SPEC names none): model calls an API agent may make; < 1 = unlimited.
    (Node, "max_turns", Int),
    (Node, "fidelity", AttrType::Fidelity),
    (Node, "thread_id", Text),
    (Node, "model", Text),
    (Node, "provider", Text),
    (Node, "project_memory", Bool),
    (Node, "output_schema", Text),
    (Node, "output_retries", Int),
    (Node, "backend", OneOf(&["api", "acp"])),
    (Node, "acp.command", Text),
    (Node, "acp.config", Text),
    (Node, "script", Text),
    (Node, "language", OneOf(&["shell", "python"])),
    (Node, "max_parallel", Int),
    (Node, "duration", Duration),
    (Node, "question_type", OneOf(QUESTION_TYPES)),
    (Node, "human.default_choice", Text),
    (Node, "stack.child_workflow", Text),
    (Node, "stack.child_dot_source", Text),
    (Node, "manager.poll_interval", Duration),
    (Node, "manager.max_cycles", Int),
    (Node, "manager.stop_condition", Text),
    // Ours: `type="pull_request"` stages (docs/decisions.md, "Pull requests in a workflow").
    (Node, "pull_request.wait_checks", Bool),
    (Node, "pull_request.checks_timeout", Duration),
    (Node, "pull_request.checks_grace", Duration),
    (Node, "pull_request.draft", Bool),
    (Edge, "label", Text),
    (Edge, "condition", Text),
    (Edge, "weight", Int),
    (Edge, "fidelity", AttrType::Fidelity),
    (Edge, "thread_id", Text),
    (Edge, "loop_restart", Bool),
    (Edge, "freeform", Bool),
];

/// Attributes we read that SPEC 2.13 does not name (decisions.md, Workflow language).
pub const EXTRA: &[(Scope, &str)] = &[
    // Shell commands run before/after every tool call of an agent stage (graph default,
    // node override).
    (Graph, "tool_hooks.pre"),
    (Graph, "tool_hooks.post"),
    (Node, "tool_hooks.pre"),
    (Node, "tool_hooks.post"),
    // The run's MCP servers an agent node uses (ids, comma- or space-separated; empty =
    // none); absent = all of them.
    (Node, "mcp_servers"),
];

/// Attribute names other engines use for ours: `(scope, theirs, ours, manager-only)`. The
/// workflow model copies their value to ours when ours is not set; the lint warns, naming
/// ours. Manager-only aliases are aliases on manager-loop nodes and unknown elsewhere.
pub const ALIASES: &[(Scope, &str, &str, bool)] = &[
    (Graph, "default_max_retry", "default_max_retries", false),
    (Node, "tool_command", "script", false),
    (Node, "llm_model", "model", false),
    (Node, "llm_provider", "provider", false),
    (Node, "stack.child_dotfile", "stack.child_workflow", false),
    (Node, "max_cycles", "manager.max_cycles", true),
    (Node, "stop_condition", "manager.stop_condition", true),
    (Node, "poll_interval", "manager.poll_interval", true),
];

/// Graphviz's own attributes (layout and display). Workflows drawn with Graphviz use them
/// freely; they mean nothing to the engine and are never reported as unknown.
pub const GRAPHVIZ: &[&str] = &[
    "arrowhead",
    "arrowsize",
    "arrowtail",
    "bgcolor",
    "center",
    "charset",
    "class",
    "clusterrank",
    "color",
    "colorscheme",
    "comment",
    "compound",
    "concentrate",
    "constraint",
    "decorate",
    "dir",
    "distortion",
    "dpi",
    "edgeURL",
    "edgehref",
    "edgetooltip",
    "esep",
    "fillcolor",
    "fixedsize",
    "fontcolor",
    "fontname",
    "fontnames",
    "fontpath",
    "fontsize",
    "forcelabels",
    "gradientangle",
    "group",
    "headURL",
    "headclip",
    "headhref",
    "headlabel",
    "headport",
    "headtooltip",
    "height",
    "href",
    "id",
    "image",
    "imagepos",
    "imagescale",
    "label",
    "labelURL",
    "labelangle",
    "labeldistance",
    "labelfloat",
    "labelfontcolor",
    "labelfontname",
    "labelfontsize",
    "labelhref",
    "labeljust",
    "labelloc",
    "labeltooltip",
    "landscape",
    "layer",
    "layers",
    "layout",
    "lhead",
    "lp",
    "ltail",
    "margin",
    "mclimit",
    "minlen",
    "newrank",
    "nodesep",
    "nojustify",
    "ordering",
    "orientation",
    "outputorder",
    "overlap",
    "pad",
    "page",
    "pagedir",
    "pencolor",
    "penwidth",
    "peripheries",
    "pos",
    "quantum",
    "rank",
    "rankdir",
    "ranksep",
    "ratio",
    "regular",
    "remincross",
    "rotate",
    "samehead",
    "sametail",
    "searchsize",
    "sep",
    "shape",
    "sides",
    "size",
    "skew",
    "splines",
    "style",
    "stylesheet",
    "tailURL",
    "tailclip",
    "tailhref",
    "taillabel",
    "tailport",
    "tailtooltip",
    "target",
    "tooltip",
    "truecolor",
    "URL",
    "width",
    "xlabel",
    "xlp",
];

/// What an attribute key means on an element of `scope` (`manager`: the node is a manager
/// loop, which reads the unprefixed manager aliases).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// One of ours (or a Graphviz display attribute).
    Known,
    /// Another engine's name for ours.
    Alias(&'static str),
    Unknown,
}

pub fn key_kind(scope: Scope, key: &str, manager: bool) -> KeyKind {
    if declared_type(scope, key).is_some()
        || EXTRA.iter().any(|(s, k)| *s == scope && *k == key)
        || GRAPHVIZ.contains(&key)
    {
        return KeyKind::Known;
    }
    match alias_of(scope, key, manager) {
        Some(ours) => KeyKind::Alias(ours),
        None => KeyKind::Unknown,
    }
}

/// Our name for another engine's attribute name, if it is an alias on this element.
pub fn alias_of(scope: Scope, key: &str, manager: bool) -> Option<&'static str> {
    ALIASES
        .iter()
        .find(|(s, k, _, m)| *s == scope && *k == key && (manager || !m))
        .map(|(_, _, ours, _)| *ours)
}

/// Every name that is ours in a scope, for did-you-mean suggestions.
pub fn our_names(scope: Scope) -> impl Iterator<Item = &'static str> {
    SCHEMA
        .iter()
        .filter(move |(s, _, _)| *s == scope)
        .map(|(_, k, _)| *k)
        .chain(
            EXTRA
                .iter()
                .filter(move |(s, _)| *s == scope)
                .map(|(_, k)| *k),
        )
}

pub fn declared_type(scope: Scope, key: &str) -> Option<AttrType> {
    SCHEMA
        .iter()
        .find(|(s, k, _)| *s == scope && *k == key)
        .map(|(_, _, t)| *t)
}

/// A value that does not convert to its attribute's declared type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("attribute `{key}` has value `{value}`, expected {expected}")]
pub struct AttrError {
    pub key: String,
    pub value: String,
    pub expected: String,
}

/// A converted attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum Typed {
    Text(String),
    Int(i64),
    Bool(bool),
    Duration(Duration),
}

pub fn convert(key: &str, value: &Value, ty: AttrType) -> Result<Typed, AttrError> {
    let text = value.text();
    let fail = || AttrError {
        key: key.to_string(),
        value: text.to_string(),
        expected: ty.describe(),
    };
    match ty {
        Text => Ok(Typed::Text(text.to_string())),
        Int => match value {
            Value::Int(i) => Ok(Typed::Int(*i)),
            Value::Str(s) => s.trim().parse().map(Typed::Int).map_err(|_| fail()),
            _ => Err(fail()),
        },
        Bool => match value {
            Value::Bool(b) => Ok(Typed::Bool(*b)),
            Value::Str(s) if &**s == "true" => Ok(Typed::Bool(true)),
            Value::Str(s) if &**s == "false" => Ok(Typed::Bool(false)),
            _ => Err(fail()),
        },
        Duration => crate::dot::parse_duration(&text)
            .map(Typed::Duration)
            .ok_or_else(fail),
        DurationOrZero => {
            if text.trim() == "0" {
                return Ok(Typed::Duration(std::time::Duration::ZERO));
            }
            crate::dot::parse_duration(&text)
                .map(Typed::Duration)
                .ok_or_else(fail)
        }
        OneOf(opts) => {
            if opts.contains(&&*text) {
                Ok(Typed::Text(text.to_string()))
            } else {
                Err(fail())
            }
        }
        AttrType::Fidelity => {
            if Fidelity::parse(&text).is_some() {
                Ok(Typed::Text(text.to_string()))
            } else {
                Err(fail())
            }
        }
    }
}

/// Typed reads of one element's attributes. Reads of invalid values give `None` (the
/// validator reports them); reads of absent values give `None` too.
pub struct View<'a> {
    pub scope: Scope,
    pub attrs: &'a Attrs,
}

impl<'a> View<'a> {
    pub fn text(&self, key: &str) -> Option<&'a str> {
        self.attrs.text(key)
    }
    /// Text that is present and not blank.
    pub fn nonempty(&self, key: &str) -> Option<&'a str> {
        self.text(key).map(str::trim).filter(|s| !s.is_empty())
    }
    fn typed(&self, key: &str) -> Option<Typed> {
        let v = self.attrs.get(key)?;
        let ty = declared_type(self.scope, key).unwrap_or(AttrType::Text);
        convert(key, v, ty).ok()
    }
    pub fn int(&self, key: &str) -> Option<i64> {
        match self.typed(key)? {
            Typed::Int(i) => Some(i),
            _ => None,
        }
    }
    pub fn bool(&self, key: &str) -> Option<bool> {
        match self.typed(key)? {
            Typed::Bool(b) => Some(b),
            _ => None,
        }
    }
    pub fn flag(&self, key: &str) -> bool {
        self.bool(key).unwrap_or(false)
    }
    /// A fidelity attribute (`fidelity`, `default_fidelity`); invalid values give `None`.
    pub fn fidelity(&self, key: &str) -> Option<Fidelity> {
        self.nonempty(key).and_then(Fidelity::parse)
    }
    pub fn duration(&self, key: &str) -> Option<Duration> {
        match self.typed(key)? {
            Typed::Duration(d) => Some(d),
            _ => None,
        }
    }
}

/// Checks every declared attribute of one element; unknown keys are not checked.
pub fn type_errors(scope: Scope, attrs: &Attrs) -> Vec<AttrError> {
    attrs
        .iter()
        .filter_map(|(k, v)| match declared_type(scope, k)? {
            // Any text is valid text: no conversion (and no copy of a long prompt).
            AttrType::Text => None,
            ty => convert(k, v, ty).err(),
        })
        .collect()
}

/// The attribute as a JSON value typed by its declaration (for `svc parse`): numbers and
/// booleans as such, durations as the text written, `class` as an array.
pub fn to_json(scope: Scope, key: &str, value: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    if key == "class" {
        return J::Array(
            crate::dot::split_classes(&value.to_text())
                .into_iter()
                .map(J::String)
                .collect(),
        );
    }
    let typed = declared_type(scope, key).and_then(|ty| convert(key, value, ty).ok());
    match (typed, value) {
        (Some(Typed::Int(i)), _) => J::from(i),
        (Some(Typed::Bool(b)), _) => J::Bool(b),
        (_, Value::Int(i)) => J::from(*i),
        (_, Value::Float(f)) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
        (_, Value::Bool(b)) => J::Bool(*b),
        _ => J::String(value.to_text()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(v: Value, ty: AttrType) -> Result<Typed, AttrError> {
        convert("k", &v, ty)
    }

    #[test]
    fn quoted_and_unquoted_forms_are_equal() {
        assert_eq!(conv(Value::Int(3), Int), conv(Value::Str("3".into()), Int));
        assert_eq!(
            conv(Value::Bool(true), Bool),
            conv(Value::Str("true".into()), Bool)
        );
        assert_eq!(
            conv(Value::Duration("900s".into()), Duration),
            conv(Value::Str("900s".into()), Duration)
        );
    }

    #[test]
    fn bad_values_name_attribute_value_and_type() {
        let e = convert("max_retries", &Value::Str("three".into()), Int).unwrap_err();
        assert_eq!(
            e.to_string(),
            "attribute `max_retries` has value `three`, expected an integer"
        );
        assert!(conv(Value::Int(900), Duration).is_err());
        assert!(conv(Value::Bare("yes".into()), Bool).is_err());
        assert!(conv(Value::Str("summary".into()), AttrType::Fidelity).is_err());
        assert!(conv(Value::Str("summary:high".into()), AttrType::Fidelity).is_ok());
    }

    #[test]
    fn every_listed_fidelity_parses_and_prints_back() {
        for text in FIDELITIES {
            assert_eq!(Fidelity::parse(text).map(Fidelity::as_str), Some(*text));
        }
        assert_eq!(Fidelity::ALL.len(), FIDELITIES.len());
        assert_eq!(Fidelity::parse("summary"), None);
    }

    #[test]
    fn stall_timeout_zero_forms() {
        for v in [
            Value::Int(0),
            Value::Str("0".into()),
            Value::Duration("0s".into()),
        ] {
            assert_eq!(
                conv(v, DurationOrZero),
                Ok(Typed::Duration(std::time::Duration::ZERO))
            );
        }
        assert!(conv(Value::Int(5), DurationOrZero).is_err());
    }

    #[test]
    fn labels_stay_text() {
        let j = to_json(Scope::Node, "label", &Value::Str("5m".into()));
        assert_eq!(j, serde_json::json!("5m"));
        let j = to_json(Scope::Node, "timeout", &Value::Duration("900s".into()));
        assert_eq!(j, serde_json::json!("900s"));
        let j = to_json(Scope::Node, "max_retries", &Value::Str("3".into()));
        assert_eq!(j, serde_json::json!(3));
        let j = to_json(Scope::Node, "class", &Value::Str("a, b".into()));
        assert_eq!(j, serde_json::json!(["a", "b"]));
    }
}
