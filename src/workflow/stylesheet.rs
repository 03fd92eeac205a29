//! Model stylesheet: the CSS-like `model_stylesheet` graph attribute that assigns `model`,
//! `provider` and `reasoning_effort` (or any other property) to nodes by selector.
//!
//! Owns `grammar/stylesheet.pest`: parsing stylesheet text into a [`Stylesheet`], turning pest
//! failures into plain-word [`StylesheetError`]s with byte offsets, selector matching and
//! specificity, per-node resolution ([`Stylesheet::resolve`]) and the canonical text form
//! (`Display`). It must not touch node attributes, the model catalog or the file system:
//! deciding which resolved properties to apply (only keys a node lacks) and validating model
//! names belong to the caller.
//!
//! # Language
//!
//! ```text
//! *           { model: claude-sonnet-4-5; provider: anthropic }
//! box         { reasoning_effort: medium; }
//! .code       { model: "claude-opus-4-6"; }
//! #review     { model: gpt-5.2; reasoning_effort: high; }
//! ```
//!
//! - A stylesheet is a sequence of rules `selector { property: value; ... }`. A blank
//!   stylesheet is valid and has no rules; a rule may have no declarations.
//! - One selector per rule: `*` (specificity 0), a bare shape name such as `box` (1), `.class`
//!   (2) or `#id` (3). Names use ASCII letters, digits, `_` and `-`, and match case-sensitively.
//!   Selector lists (`.a, .b`) and combinators (`.a .b`, `.a > .b`, `box.a`) are errors.
//! - Declarations are `property: value`, separated by `;`; the last `;` is optional and stray
//!   extra `;` are ignored. Property names are `[A-Za-z_][A-Za-z0-9_.-]*`. Properties outside
//!   [`KNOWN_PROPERTIES`] are kept and resolve like any other; the caller decides what to apply.
//! - A bare value is the trimmed raw text up to `;`, `}`, a line break or a comment (`{` is not
//!   allowed in it). A value wrapped in double quotes has the quotes stripped and its inner
//!   text kept verbatim; it may contain `;` and braces but no `"` and no line break.
//!   **Decision:** one reference keeps the quotes, so `model: "gpt-5.2"` there means the
//!   model `"gpt-5.2"`, which can never match the catalog. Here it means `gpt-5.2`, which is
//!   what the author meant.
//! - An empty (or all-whitespace) value is an error.
//! - **Decision:** `/* ... */` comments are allowed wherever whitespace is allowed: between
//!   rules, around selectors, braces, `:` and `;`, and after a value (a comment ends a bare
//!   value). Inside a quoted value `/*` is literal text. There are no line comments.
//!
//! # Resolution
//!
//! [`Stylesheet::resolve`] works per property: among the rules whose selector matches the
//! node, the highest specificity wins, and between equal specificities the later declaration
//! wins. So `* { provider: p }` still supplies `provider` when `.code { model: m }` supplies
//! `model`.

use std::collections::BTreeMap;
use std::fmt;

use pest::error::{ErrorVariant, InputLocation};
use pest::iterators::Pair;
use pest::Parser as _;

use self::grammar::{Rule, StylesheetParser};

/// The properties the engine applies to nodes. Other properties are parsed and resolved too.
pub const KNOWN_PROPERTIES: &[&str] = &["model", "provider", "reasoning_effort"];

/// Other engines' property names for ours (`theirs`, `ours`): applied as ours when the
/// stylesheet does not set ours for the node; the lint warns, naming ours.
pub const ALIASES: &[(&str, &str)] = &[("llm_model", "model"), ("llm_provider", "provider")];

mod grammar {
    #[derive(pest_derive::Parser)]
    #[grammar = "grammar/stylesheet.pest"]
    pub(super) struct StylesheetParser;
}

/// A parsed model stylesheet: its rules in source order.
#[derive(Debug, Clone, PartialEq)]
pub struct Stylesheet {
    pub rules: Vec<StyleRule>,
}

/// One `selector { declarations }` rule.
#[derive(Debug, Clone, PartialEq)]
pub struct StyleRule {
    pub selector: Selector,
    pub declarations: Vec<Declaration>,
}

/// One `property: value` pair; `value` is trimmed and has surrounding quotes removed.
#[derive(Debug, Clone, PartialEq)]
pub struct Declaration {
    pub property: String,
    pub value: String,
}

/// The single selector of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// `*`: every node.
    Universal,
    /// A bare word: nodes whose shape equals it.
    Shape(String),
    /// `.class`: nodes carrying that class.
    Class(String),
    /// `#id`: the node with that id.
    Id(String),
}

/// A stylesheet that does not parse: a plain-word message and the byte offset it refers to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct StylesheetError {
    pub message: String,
    /// Byte offset in the stylesheet text.
    pub offset: usize,
}

impl StylesheetError {
    fn new(message: impl Into<String>, offset: usize) -> Self {
        StylesheetError {
            message: message.into(),
            offset,
        }
    }

    /// 1-based line and column (in characters) of [`StylesheetError::offset`] within `src`.
    pub fn line_col(&self, src: &str) -> (usize, usize) {
        let before = src.get(..self.offset).unwrap_or(src);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        (line, column)
    }
}

impl Selector {
    /// 0 for `*`, 1 for a shape, 2 for a class, 3 for an id.
    pub fn specificity(&self) -> u8 {
        match self {
            Selector::Universal => 0,
            Selector::Shape(_) => 1,
            Selector::Class(_) => 2,
            Selector::Id(_) => 3,
        }
    }

    /// Whether the selector matches a node. `shape` is the node's shape (the caller passes
    /// `box` when the node has none); all comparisons are case-sensitive.
    pub fn matches(&self, node_id: &str, shape: &str, classes: &[String]) -> bool {
        match self {
            Selector::Universal => true,
            Selector::Shape(s) => s == shape,
            Selector::Class(c) => classes.iter().any(|class| class == c),
            Selector::Id(id) => id == node_id,
        }
    }
}

impl Declaration {
    /// Whether the property is one of [`KNOWN_PROPERTIES`].
    pub fn is_known(&self) -> bool {
        KNOWN_PROPERTIES.contains(&self.property.as_str())
    }
}

impl Stylesheet {
    /// Parses stylesheet text. See the module documentation for the language.
    pub fn parse(src: &str) -> Result<Stylesheet, StylesheetError> {
        let pairs =
            StylesheetParser::parse(Rule::stylesheet, src).map_err(|e| diagnose(src, &e))?;
        let rules = pairs
            .flat_map(|top| top.into_inner())
            .filter(|pair| pair.as_rule() == Rule::style_rule)
            .map(build_rule)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Stylesheet { rules })
    }

    /// Winning value of every property for one node: highest specificity wins, a later rule
    /// wins a tie. `shape` is `box` for a node without a shape.
    pub fn resolve(
        &self,
        node_id: &str,
        shape: &str,
        classes: &[String],
    ) -> BTreeMap<String, String> {
        let mut winners: BTreeMap<&str, (u8, &str)> = BTreeMap::new();
        let matching = self
            .rules
            .iter()
            .filter(|rule| rule.selector.matches(node_id, shape, classes));
        for rule in matching {
            let specificity = rule.selector.specificity();
            for decl in &rule.declarations {
                let beaten = winners
                    .get(decl.property.as_str())
                    .is_none_or(|(best, _)| specificity >= *best);
                if beaten {
                    winners.insert(&decl.property, (specificity, &decl.value));
                }
            }
        }
        winners
            .into_iter()
            .map(|(property, (_, value))| (property.to_string(), value.to_string()))
            .collect()
    }

    /// Declarations whose property is not in [`KNOWN_PROPERTIES`], in source order.
    pub fn unknown_declarations(&self) -> impl Iterator<Item = &Declaration> {
        self.rules
            .iter()
            .flat_map(|rule| &rule.declarations)
            .filter(|decl| !decl.is_known())
    }
}

// ---- building the model from the parse tree ------------------------------------------------

fn build_rule(pair: Pair<'_, Rule>) -> Result<StyleRule, StylesheetError> {
    let mut selector = None;
    let mut declarations = Vec::new();
    for part in pair.into_inner() {
        match part.as_rule() {
            Rule::selector_list => selector = Some(build_selector_list(part)?),
            Rule::declarations => declarations = build_declarations(part)?,
            _ => {}
        }
    }
    let selector = selector.ok_or_else(|| StylesheetError::new("rule without a selector", 0))?;
    Ok(StyleRule {
        selector,
        declarations,
    })
}

/// Accepts a list holding exactly one selector; lists and combinators are rejected here.
fn build_selector_list(list: Pair<'_, Rule>) -> Result<Selector, StylesheetError> {
    let text = list.as_str();
    let mut parts = list.into_inner();
    let first = parts
        .next()
        .ok_or_else(|| StylesheetError::new("expected a selector", 0))?;
    match parts.next() {
        None => Ok(build_selector(first)),
        Some(extra) => Err(multiple_selectors_error(text, &extra)),
    }
}

fn multiple_selectors_error(text: &str, extra: &Pair<'_, Rule>) -> StylesheetError {
    let offset = extra.as_span().start();
    if extra.as_str() == "," {
        let message = format!(
            "selector lists are not supported: `{text}` has a `,`; write one rule per selector"
        );
        return StylesheetError::new(message, offset);
    }
    let message = format!(
        "combined selectors are not supported: `{text}` must be a single selector \
         (`*`, a shape name, `.class` or `#id`)"
    );
    StylesheetError::new(message, offset)
}

fn build_selector(selector: Pair<'_, Rule>) -> Selector {
    let Some(kind) = selector.into_inner().next() else {
        return Selector::Universal;
    };
    match kind.as_rule() {
        Rule::class_sel => Selector::Class(name_of(kind)),
        Rule::id_sel => Selector::Id(name_of(kind)),
        Rule::shape_sel => Selector::Shape(name_of(kind)),
        _ => Selector::Universal,
    }
}

/// The `name` inside a `.class`, `#id` or shape selector.
fn name_of(selector: Pair<'_, Rule>) -> String {
    selector
        .into_inner()
        .next()
        .map(|name| name.as_str().to_string())
        .unwrap_or_default()
}

fn build_declarations(pair: Pair<'_, Rule>) -> Result<Vec<Declaration>, StylesheetError> {
    pair.into_inner()
        .filter(|part| part.as_rule() == Rule::declaration)
        .map(build_declaration)
        .collect()
}

fn build_declaration(pair: Pair<'_, Rule>) -> Result<Declaration, StylesheetError> {
    let mut property = "";
    let mut value = ("", 0);
    for part in pair.into_inner() {
        match part.as_rule() {
            Rule::property => property = part.as_str(),
            Rule::value => value = (value_text(&part), part.as_span().start()),
            _ => {}
        }
    }
    let (value, offset) = value;
    if value.trim().is_empty() {
        let message = format!("empty value for property `{property}`");
        return Err(StylesheetError::new(message, offset));
    }
    Ok(Declaration {
        property: property.to_string(),
        value: value.to_string(),
    })
}

/// A bare value trimmed, or a quoted value without its quotes.
fn value_text<'a>(value: &Pair<'a, Rule>) -> &'a str {
    let raw = value.as_str();
    let unquoted = raw
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'));
    unquoted.unwrap_or_else(|| raw.trim())
}

// ---- turning pest errors into plain words --------------------------------------------------

/// What was read of the rule that failed to parse, for error messages.
#[derive(Debug, Default)]
struct FailedRule<'a> {
    /// The first selector of the rule and the byte offset where it ends.
    selector: Option<(&'a str, usize)>,
    /// Whether the rule's selector list holds more than one selector.
    several_selectors: bool,
    /// The last property name that starts before the error offset.
    property: Option<&'a str>,
}

fn diagnose(src: &str, err: &pest::error::Error<Rule>) -> StylesheetError {
    let offset = match err.location {
        InputLocation::Pos(pos) => pos,
        InputLocation::Span((start, _)) => start,
    };
    let positives: &[Rule] = match &err.variant {
        ErrorVariant::ParsingError { positives, .. } => positives,
        ErrorVariant::CustomError { .. } => &[],
    };
    let failed = read_failed_rule(src, offset);
    describe(src, offset, positives, &failed)
}

/// Re-reads the text with the diagnostic entry points of the grammar to find the selector
/// and property that the failure belongs to.
fn read_failed_rule(src: &str, offset: usize) -> FailedRule<'_> {
    let start = complete_rules_end(src);
    let rest = src.get(start..).unwrap_or_default();
    let Ok(pairs) = StylesheetParser::parse(Rule::partial_rule, rest) else {
        return FailedRule::default();
    };
    let mut failed = FailedRule::default();
    for pair in pairs.flatten() {
        let span = pair.as_span();
        let (from, to) = (start + span.start(), start + span.end());
        match pair.as_rule() {
            Rule::selector if failed.selector.is_none() => {
                failed.selector = Some((pair.as_str(), to));
            }
            Rule::selector => failed.several_selectors = true,
            Rule::property if from < offset => failed.property = Some(pair.as_str()),
            _ => {}
        }
    }
    failed
}

/// Byte offset just after the last complete rule at the start of `src`.
fn complete_rules_end(src: &str) -> usize {
    StylesheetParser::parse(Rule::complete_rules, src)
        .ok()
        .and_then(|mut pairs| pairs.next())
        .map_or(0, |pair| pair.as_span().end())
}

fn describe(
    src: &str,
    offset: usize,
    positives: &[Rule],
    failed: &FailedRule<'_>,
) -> StylesheetError {
    let rest = src.get(offset..).unwrap_or_default();
    let expects = |expected: Rule| positives.contains(&expected);
    if rest.starts_with("/*") {
        return StylesheetError::new("unclosed comment: expected `*/`", offset);
    }
    if let Some(error) = missing_name(src, offset).filter(|_| expects(Rule::name)) {
        return error;
    }
    if expects(Rule::open_brace) {
        return missing_open_brace(src, offset, failed);
    }
    if expects(Rule::colon) {
        let property = failed.property.unwrap_or_default();
        let message = format!(
            "expected `:` after property `{property}`, found {}",
            found(rest)
        );
        return StylesheetError::new(message, offset);
    }
    if expects(Rule::close_brace) {
        return inside_rule_error(rest, offset, positives, failed);
    }
    if expects(Rule::value) || expects(Rule::quoted_value) || expects(Rule::bare_value) {
        let property = failed.property.unwrap_or_default();
        let message = format!("unclosed quote in the value of property `{property}`");
        return StylesheetError::new(message, offset);
    }
    if expects(Rule::selector) || expects(Rule::stylesheet) {
        return missing_selector(rest, offset);
    }
    StylesheetError::new(format!("unexpected {}", found(rest)), offset)
}

/// A `.` or `#` not followed by a name; `offset` is just after the marker.
fn missing_name(src: &str, offset: usize) -> Option<StylesheetError> {
    let marker_at = offset.checked_sub(1)?;
    let rest = src.get(offset..).unwrap_or_default();
    let message = match src.get(marker_at..offset)? {
        "." => format!("expected a class name after `.`, found {}", found(rest)),
        "#" => format!("expected a node id after `#`, found {}", found(rest)),
        _ => return None,
    };
    Some(StylesheetError::new(message, marker_at))
}

fn missing_open_brace(src: &str, offset: usize, failed: &FailedRule<'_>) -> StylesheetError {
    let Some((selector, end)) = failed.selector else {
        let message = format!(
            "expected `{{`, found {}",
            found(src.get(offset..).unwrap_or_default())
        );
        return StylesheetError::new(message, offset);
    };
    // `.fast model: x;` reads as the combinator `.fast model`: point at the first selector.
    let offset = if failed.several_selectors {
        end
    } else {
        offset
    };
    let rest = src.get(offset..).unwrap_or_default();
    let message = format!(
        "expected `{{` after selector `{selector}`, found {}",
        found(rest)
    );
    StylesheetError::new(message, offset)
}

/// Errors inside `{ ... }` where a `}` would have been accepted.
fn inside_rule_error(
    rest: &str,
    offset: usize,
    positives: &[Rule],
    failed: &FailedRule<'_>,
) -> StylesheetError {
    let selector = failed.selector.map_or("", |(selector, _)| selector);
    if rest.trim().is_empty() {
        let message = format!("unclosed rule `{selector}`: expected `}}`");
        return StylesheetError::new(message, offset);
    }
    if positives.contains(&Rule::property) {
        let message = format!(
            "expected a property name or `}}` in rule `{selector}`, found {}",
            found(rest)
        );
        return StylesheetError::new(message, offset);
    }
    let property = failed.property.unwrap_or_default();
    let message = format!(
        "expected `;` or `}}` after the value of property `{property}`, found {}",
        found(rest)
    );
    StylesheetError::new(message, offset)
}

fn missing_selector(rest: &str, offset: usize) -> StylesheetError {
    let message = if rest.starts_with('{') {
        "missing selector before `{`".to_string()
    } else {
        format!(
            "expected a selector (`*`, a shape name, `.class` or `#id`), found {}",
            found(rest)
        )
    };
    StylesheetError::new(message, offset)
}

/// Describes the text at an error position: a word, a single character or the end.
fn found(rest: &str) -> String {
    let rest = rest.trim_start();
    let word: String = rest
        .chars()
        .take_while(|c| is_name_char(*c) || *c == '.')
        .take(24)
        .collect();
    if !word.is_empty() {
        return format!("`{word}`");
    }
    match rest.chars().next() {
        None => "the end of the stylesheet".to_string(),
        Some(c) => format!("`{c}`"),
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

// ---- canonical text ------------------------------------------------------------------------

/// One rule per line: `selector { property: value; ... }`. A value is written bare when that
/// reads back unchanged, otherwise in double quotes. Values holding both a `"` and a character
/// that needs quoting (never produced by [`Stylesheet::parse`]) cannot be written faithfully.
impl fmt::Display for Stylesheet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for rule in &self.rules {
            writeln!(f, "{rule}")?;
        }
        Ok(())
    }
}

impl fmt::Display for StyleRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {{", self.selector)?;
        for decl in &self.declarations {
            write!(f, " {decl};")?;
        }
        write!(f, " }}")
    }
}

impl fmt::Display for Declaration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if needs_quotes(&self.value) {
            write!(f, "{}: \"{}\"", self.property, self.value)
        } else {
            write!(f, "{}: {}", self.property, self.value)
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Universal => write!(f, "*"),
            Selector::Shape(shape) => write!(f, "{shape}"),
            Selector::Class(class) => write!(f, ".{class}"),
            Selector::Id(id) => write!(f, "#{id}"),
        }
    }
}

/// Whether a value would not read back unchanged when written bare.
fn needs_quotes(value: &str) -> bool {
    value.is_empty()
        || value.trim() != value
        || value.starts_with('"')
        || value.contains([';', '{', '}', '\n', '\r'])
        || value.contains("/*")
}

#[cfg(test)]
mod tests;
