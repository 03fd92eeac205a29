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
mod tests {
    use super::*;

    /// From the corpus: `test__styled.fabro`.
    const STYLED: &str = "
            * { model: claude-sonnet-4-5;}
            .code { model: claude-opus-4-6; }
            #critical_review { model: gpt-5.2;reasoning_effort: high; }
        ";

    /// From the corpus: `test__docs__workflows__stylesheets__example.fabro`.
    const EXAMPLE: &str = "
            *        { model: claude-haiku-4-5;}
            .coding  { model: claude-sonnet-4-5; reasoning_effort: high; }
            #review  { model: gemini-3.1-pro-preview;}
        ";

    fn parse(src: &str) -> Stylesheet {
        match Stylesheet::parse(src) {
            Ok(sheet) => sheet,
            Err(e) => panic!("{src:?} should parse: {e} at {}", e.offset),
        }
    }

    fn parse_err(src: &str) -> StylesheetError {
        match Stylesheet::parse(src) {
            Ok(sheet) => panic!("{src:?} should fail, got {sheet:?}"),
            Err(e) => e,
        }
    }

    /// Asserts the error message and offset, and that no pest wording leaked.
    fn assert_err(src: &str, message: &str, offset: usize) {
        let err = parse_err(src);
        assert_eq!(err.message, message, "message for {src:?}");
        assert_eq!(err.offset, offset, "offset for {src:?}");
        assert!(
            !err.message.contains("expected ["),
            "pest dump in {}",
            err.message
        );
        assert!(!err.message.contains("EOI") && !err.message.contains("positives"));
    }

    fn decl(property: &str, value: &str) -> Declaration {
        Declaration {
            property: property.to_string(),
            value: value.to_string(),
        }
    }

    fn only_rule(src: &str) -> StyleRule {
        let sheet = parse(src);
        assert_eq!(sheet.rules.len(), 1, "{src:?}");
        sheet.rules[0].clone()
    }

    fn classes(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn resolved(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn assert_round_trip(src: &str) {
        let sheet = parse(src);
        let text = sheet.to_string();
        assert_eq!(parse(&text), sheet, "round trip of {src:?} via {text:?}");
    }

    // ---- whole stylesheet ----------------------------------------------------------------

    #[test]
    fn blank_stylesheets_have_no_rules() {
        for src in [
            "",
            "   ",
            "\n\t\r\n",
            "/* nothing */",
            " /* a */ /* b */ \n",
        ] {
            assert_eq!(parse(src), Stylesheet { rules: vec![] }, "{src:?}");
        }
    }

    #[test]
    fn corpus_stylesheets_parse() {
        let sheet = parse(STYLED);
        assert_eq!(
            sheet.rules,
            vec![
                StyleRule {
                    selector: Selector::Universal,
                    declarations: vec![decl("model", "claude-sonnet-4-5")],
                },
                StyleRule {
                    selector: Selector::Class("code".into()),
                    declarations: vec![decl("model", "claude-opus-4-6")],
                },
                StyleRule {
                    selector: Selector::Id("critical_review".into()),
                    declarations: vec![decl("model", "gpt-5.2"), decl("reasoning_effort", "high")],
                },
            ]
        );
        assert_eq!(parse(EXAMPLE).rules.len(), 3);
    }

    #[test]
    fn stray_closing_brace_is_an_error() {
        assert_err(
            "* { model: x } }",
            "expected a selector (`*`, a shape name, `.class` or `#id`), found `}`",
            15,
        );
    }

    // ---- selectors -------------------------------------------------------------------------

    #[test]
    fn universal_selector() {
        assert_eq!(only_rule("* { a: b }").selector, Selector::Universal);
        assert_err("** { a: b }", "combined selectors are not supported: `**` must be a single selector (`*`, a shape name, `.class` or `#id`)", 1);
    }

    #[test]
    fn shape_selector() {
        assert_eq!(
            only_rule("box { a: b }").selector,
            Selector::Shape("box".into())
        );
        assert_eq!(
            only_rule("Mdiamond{a:b}").selector,
            Selector::Shape("Mdiamond".into())
        );
        assert_err(
            "bo$x { a: b }",
            "expected `{` after selector `bo`, found `$`",
            2,
        );
    }

    #[test]
    fn class_selector() {
        assert_eq!(
            only_rule(".Fast_lane-2 { a: b }").selector,
            Selector::Class("Fast_lane-2".into())
        );
        assert_err(
            ". { a: b }",
            "expected a class name after `.`, found `{`",
            0,
        );
        assert_err(
            "* { a: b }\n.!x { a: b }",
            "expected a class name after `.`, found `!`",
            11,
        );
    }

    #[test]
    fn id_selector() {
        assert_eq!(
            only_rule("#critical_review { a: b }").selector,
            Selector::Id("critical_review".into())
        );
        assert_err("# { a: b }", "expected a node id after `#`, found `{`", 0);
    }

    #[test]
    fn missing_selector_is_an_error() {
        assert_err("{ model: x }", "missing selector before `{`", 0);
        assert_err(
            "; * { a: b }",
            "expected a selector (`*`, a shape name, `.class` or `#id`), found `;`",
            0,
        );
    }

    #[test]
    fn selector_lists_are_rejected() {
        assert_err(
            ".a, .b { model: x }",
            "selector lists are not supported: `.a, .b` has a `,`; write one rule per selector",
            2,
        );
    }

    #[test]
    fn combinators_are_rejected() {
        let cases = [
            (".a .b { x: y }", "`.a .b`", 3),
            (".a > .b { x: y }", "`.a > .b`", 3),
            ("box.a { x: y }", "`box.a`", 3),
            ("#a+#b { x: y }", "`#a+#b`", 2),
        ];
        for (src, quoted, offset) in cases {
            let err = parse_err(src);
            assert!(
                err.message
                    .starts_with("combined selectors are not supported"),
                "{}",
                err.message
            );
            assert!(err.message.contains(quoted), "{}", err.message);
            assert_eq!(err.offset, offset, "{src:?}");
        }
    }

    #[test]
    fn specificity_order() {
        let selectors = [
            Selector::Universal,
            Selector::Shape("box".into()),
            Selector::Class("c".into()),
            Selector::Id("n".into()),
        ];
        let specificities: Vec<u8> = selectors.iter().map(Selector::specificity).collect();
        assert_eq!(specificities, vec![0, 1, 2, 3]);
    }

    #[test]
    fn selector_matching() {
        let cls = classes(&["code", "fast"]);
        assert!(Selector::Universal.matches("n", "box", &[]));
        assert!(Selector::Shape("box".into()).matches("n", "box", &[]));
        assert!(!Selector::Shape("box".into()).matches("n", "tab", &[]));
        assert!(Selector::Class("fast".into()).matches("n", "box", &cls));
        assert!(!Selector::Class("Fast".into()).matches("n", "box", &cls));
        assert!(!Selector::Class("slow".into()).matches("n", "box", &cls));
        assert!(Selector::Id("n".into()).matches("n", "box", &cls));
        assert!(!Selector::Id("N".into()).matches("n", "box", &cls));
    }

    // ---- declarations ----------------------------------------------------------------------

    #[test]
    fn multiple_declarations_in_order() {
        let rule = only_rule("* { model: m; provider: p; reasoning_effort: low; }");
        assert_eq!(
            rule.declarations,
            vec![
                decl("model", "m"),
                decl("provider", "p"),
                decl("reasoning_effort", "low")
            ]
        );
    }

    #[test]
    fn last_semicolon_is_optional_and_stray_ones_are_ignored() {
        let expected = vec![decl("model", "m"), decl("provider", "p")];
        assert_eq!(
            only_rule("* { model: m; provider: p }").declarations,
            expected
        );
        assert_eq!(only_rule("*{model:m;provider:p}").declarations, expected);
        assert_eq!(
            only_rule("* { ; model: m;; provider: p;; }").declarations,
            expected
        );
    }

    #[test]
    fn empty_rule_body() {
        assert_eq!(only_rule("* {}").declarations, vec![]);
        assert_eq!(only_rule("* { ; }").declarations, vec![]);
    }

    #[test]
    fn multi_line_layout() {
        let rule = only_rule("#review\n{\n  model:\n    gpt-5.2 ;\n  provider : openai\n}\n");
        assert_eq!(
            rule.declarations,
            vec![decl("model", "gpt-5.2"), decl("provider", "openai")]
        );
    }

    #[test]
    fn property_names() {
        let rule = only_rule("* { acp.config: x; _private-key: y; Model2: z }");
        let names: Vec<&str> = rule
            .declarations
            .iter()
            .map(|d| d.property.as_str())
            .collect();
        assert_eq!(names, vec!["acp.config", "_private-key", "Model2"]);
        assert_err(
            "* { 1model: x }",
            "expected a property name or `}` in rule `*`, found `1model`",
            4,
        );
        assert_err(
            "* { : x }",
            "expected a property name or `}` in rule `*`, found `:`",
            4,
        );
    }

    #[test]
    fn unknown_properties_are_kept() {
        let sheet = parse("* { model: m; speed: fast; backend: acp }");
        assert_eq!(sheet.rules[0].declarations.len(), 3);
        let unknown: Vec<&str> = sheet
            .unknown_declarations()
            .map(|d| d.property.as_str())
            .collect();
        assert_eq!(unknown, vec!["speed", "backend"]);
        assert!(sheet.rules[0].declarations[0].is_known());
    }

    #[test]
    fn missing_colon_is_an_error() {
        assert_err(
            ".a { model gpt; }",
            "expected `:` after property `model`, found `gpt`",
            11,
        );
        assert_err(
            ".a { model; }",
            "expected `:` after property `model`, found `;`",
            10,
        );
    }

    #[test]
    fn missing_separator_between_declarations_is_an_error() {
        assert_err(
            "* { model: x\n provider: y }",
            "expected `;` or `}` after the value of property `model`, found `provider`",
            14,
        );
    }

    // ---- values ----------------------------------------------------------------------------

    #[test]
    fn bare_values_are_trimmed_raw_text() {
        let rule = only_rule("* { model:   gpt-5.2  ; label: two words\t; x: a\"b }");
        assert_eq!(
            rule.declarations,
            vec![
                decl("model", "gpt-5.2"),
                decl("label", "two words"),
                decl("x", "a\"b")
            ]
        );
    }

    /// Regression (fuzz crash): a quoted value after non-ASCII whitespace (form feed, NBSP)
    /// was read as a bare value that kept its quotes, and printing it gave text that does not
    /// parse. Any Unicode whitespace now separates tokens, so the quotes are stripped.
    #[test]
    fn unicode_whitespace_before_a_quoted_value() {
        let rule = only_rule(".fa { wwwwwwl: \"+a;b\";wodel:\u{c}\"a\" }");
        assert_eq!(
            rule.declarations,
            vec![decl("wwwwwwl", "+a;b"), decl("wodel", "a")]
        );
        let rule = only_rule("*\u{a0}{\u{a0}model:\u{a0}\"gpt-5.2\"\u{2003}}");
        assert_eq!(rule.declarations, vec![decl("model", "gpt-5.2")]);
        let sheet = Stylesheet::parse(".fa { wwwwwwl: \"+a;b\";wodel:\u{c}\"a\" }").unwrap();
        assert_eq!(Stylesheet::parse(&sheet.to_string()).unwrap(), sheet);
    }

    #[test]
    fn quoted_values_lose_their_quotes() {
        let rule = only_rule(r#"* { model: "gpt-5.2"; note: "a; {b} /* c */"; pad: " x " }"#);
        assert_eq!(
            rule.declarations,
            vec![
                decl("model", "gpt-5.2"),
                decl("note", "a; {b} /* c */"),
                decl("pad", " x ")
            ]
        );
    }

    #[test]
    fn empty_values_are_errors() {
        assert_err(".fast { model: ; }", "empty value for property `model`", 15);
        assert_err(".fast { model:}", "empty value for property `model`", 14);
        assert_err(r#"* { model: "" }"#, "empty value for property `model`", 11);
        assert_err(
            r#"* { model: "  " }"#,
            "empty value for property `model`",
            11,
        );
    }

    #[test]
    fn unclosed_quote_is_an_error() {
        assert_err(
            "* { model: \"abc; }",
            "unclosed quote in the value of property `model`",
            11,
        );
        assert_err(
            "* { model: \"abc\n\"; }",
            "unclosed quote in the value of property `model`",
            11,
        );
    }

    #[test]
    fn text_after_a_quoted_value_is_an_error() {
        assert_err(
            r#"* { model: "a" b; }"#,
            "expected `;` or `}` after the value of property `model`, found `b`",
            15,
        );
    }

    #[test]
    fn opening_brace_inside_a_bare_value_is_an_error() {
        assert_err(
            "* { model: a{b} }",
            "expected `;` or `}` after the value of property `model`, found `{`",
            12,
        );
    }

    // ---- braces ----------------------------------------------------------------------------

    #[test]
    fn missing_opening_brace_is_an_error() {
        assert_err(
            ".fast model: x; }",
            "expected `{` after selector `.fast`, found `model`",
            5,
        );
        assert_err(
            ".fast",
            "expected `{` after selector `.fast`, found the end of the stylesheet",
            5,
        );
        assert_err(
            "* { a: b }\n#n\n",
            "expected `{` after selector `#n`, found the end of the stylesheet",
            14,
        );
    }

    #[test]
    fn missing_closing_brace_is_an_error() {
        assert_err(".a { model: x;", "unclosed rule `.a`: expected `}`", 14);
        assert_err(".a { model: x", "unclosed rule `.a`: expected `}`", 13);
        assert_err("* { a: b }\n.b {\n", "unclosed rule `.b`: expected `}`", 16);
        assert_err(
            ".a { model: x; \n .b { model: y }",
            "expected a property name or `}` in rule `.a`, found `.b`",
            17,
        );
        assert_err(
            ".a { model: x \n .b { model: y }",
            "expected `;` or `}` after the value of property `model`, found `.b`",
            16,
        );
    }

    // ---- comments --------------------------------------------------------------------------

    #[test]
    fn comments_between_rules_and_declarations() {
        let src =
            "/* head */ * /* s */ { /* a */ model: /* b */ m /* c */ ; /* d */ provider: p }\n\
                   /* multi\n line */ .c { model: n }";
        let sheet = parse(src);
        assert_eq!(
            sheet.rules[0].declarations,
            vec![decl("model", "m"), decl("provider", "p")]
        );
        assert_eq!(sheet.rules[1].selector, Selector::Class("c".into()));
    }

    #[test]
    fn unclosed_comment_is_an_error() {
        assert_err("/* unclosed", "unclosed comment: expected `*/`", 0);
        assert_err(
            "* { model: x /* oops",
            "unclosed comment: expected `*/`",
            13,
        );
        assert_err("* { a: b } /* x", "unclosed comment: expected `*/`", 11);
    }

    // ---- resolution ------------------------------------------------------------------------

    #[test]
    fn specificity_beats_text_order() {
        let sheet = parse("#n { m: id } .c { m: class } box { m: shape } * { m: any }");
        let cls = classes(&["c"]);
        assert_eq!(sheet.resolve("n", "box", &cls), resolved(&[("m", "id")]));
        assert_eq!(sheet.resolve("x", "box", &cls), resolved(&[("m", "class")]));
        assert_eq!(sheet.resolve("x", "box", &[]), resolved(&[("m", "shape")]));
        assert_eq!(sheet.resolve("x", "tab", &[]), resolved(&[("m", "any")]));
    }

    #[test]
    fn later_rule_wins_a_tie() {
        let sheet = parse(".a { m: first } .b { m: second } .a { x: 1 }");
        let both = classes(&["b", "a"]);
        assert_eq!(
            sheet.resolve("n", "box", &both),
            resolved(&[("m", "second"), ("x", "1")])
        );
        let sheet = parse("* { m: first; m: second }");
        assert_eq!(sheet.resolve("n", "box", &[]), resolved(&[("m", "second")]));
    }

    #[test]
    fn resolution_is_per_property() {
        let sheet = parse("* { model: base; provider: anthropic } .code { model: opus }");
        assert_eq!(
            sheet.resolve("n", "box", &classes(&["code"])),
            resolved(&[("model", "opus"), ("provider", "anthropic")])
        );
    }

    #[test]
    fn no_matching_rule_resolves_nothing() {
        let sheet = parse("#other { model: m } .c { model: n }");
        assert!(sheet.resolve("n", "box", &[]).is_empty());
        assert!(parse("").resolve("n", "box", &[]).is_empty());
    }

    #[test]
    fn corpus_resolution() {
        let sheet = parse(STYLED);
        let code = classes(&["code"]);
        let model = |id: &str, cls: &[String]| sheet.resolve(id, "box", cls)["model"].clone();
        assert_eq!(model("plan", &classes(&["planning"])), "claude-sonnet-4-5");
        assert_eq!(model("implement", &code), "claude-opus-4-6");
        assert_eq!(
            sheet.resolve("critical_review", "box", &code),
            resolved(&[("model", "gpt-5.2"), ("reasoning_effort", "high")])
        );
        let sheet = parse(EXAMPLE);
        assert_eq!(
            sheet.resolve("test", "box", &classes(&["coding"])),
            resolved(&[("model", "claude-sonnet-4-5"), ("reasoning_effort", "high")])
        );
        assert_eq!(
            sheet.resolve("review", "box", &[]),
            resolved(&[("model", "gemini-3.1-pro-preview")])
        );
    }

    // ---- canonical text --------------------------------------------------------------------

    #[test]
    fn display_is_canonical() {
        let sheet = parse(STYLED);
        assert_eq!(
            sheet.to_string(),
            "* { model: claude-sonnet-4-5; }\n\
             .code { model: claude-opus-4-6; }\n\
             #critical_review { model: gpt-5.2; reasoning_effort: high; }\n"
        );
        assert_eq!(parse("box{}").to_string(), "box { }\n");
        assert_eq!(parse("").to_string(), "");
    }

    #[test]
    fn display_quotes_values_that_need_it() {
        let sheet = parse(r#"* { a: "x; y"; b: " pad"; c: "{}"; d: "/* no */"; e: plain text }"#);
        assert_eq!(
            sheet.to_string(),
            "* { a: \"x; y\"; b: \" pad\"; c: \"{}\"; d: \"/* no */\"; e: plain text; }\n"
        );
    }

    #[test]
    fn display_round_trips() {
        for src in [
            STYLED,
            EXAMPLE,
            "",
            "box {}",
            "/* c */ #n { model: \"gpt-5.2\"; x.y: \"a;b\"; z: a\"b } .k { p: \" q \" }",
            "* { model: m; provider: p } tab { reasoning_effort: low; } .c-1 { speed: fast }",
        ] {
            assert_round_trip(src);
        }
    }

    #[test]
    fn error_line_and_column() {
        let src = "* { a: b }\n.x { a: }";
        let err = parse_err(src);
        assert_eq!(err.line_col(src), (2, 9));
    }

    /// Deterministic fuzz: any input either parses and round-trips, or fails with a
    /// plain-word message and an offset inside the text.
    #[test]
    fn arbitrary_input_never_panics() {
        const PIECES: &[&str] = &[
            "*", ".", "#", "box", "a", "model", ":", ";", "{", "}", " ", "\n", "\"", "/*", "*/",
            ",", ">", "x y", "-", "_", "é", "gpt-5.2",
        ];
        let mut seed: u64 = 0x5eed;
        for _ in 0..5000 {
            let mut src = String::new();
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            for _ in 0..((seed >> 40) % 24) {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                src.push_str(PIECES[(seed >> 33) as usize % PIECES.len()]);
            }
            match Stylesheet::parse(&src) {
                Ok(sheet) => assert_eq!(parse(&sheet.to_string()), sheet, "{src:?}"),
                Err(err) => {
                    assert!(err.offset <= src.len(), "{src:?}: {err:?}");
                    assert!(!err.message.contains("EOI"), "{src:?}: {err:?}");
                    assert!(!err.message.starts_with("unexpected"), "{src:?}: {err:?}");
                    let _ = err.line_col(&src);
                }
            }
        }
    }
}
