//! The edge condition language: parsing (`grammar/condition.pest`), compiling to a small
//! AST with regexes precompiled, plain-words syntax errors, and evaluation against an
//! outcome and a context.
//!
//! A condition is compiled once when a workflow is loaded and evaluated every time an edge
//! is considered, so evaluation avoids allocating in the common case. Deliberate choices
//! beyond SPEC 2.13 and `engine.md` §8:
//! - no parentheses: a `(` or `)` outside a quoted string is a syntax error that says so;
//! - legacy outcome names (`success`, `fail`, `partial_success`) compared with `=`, `!=` or
//!   `contains` against `outcome` are rewritten to the current names and reported, so a lint
//!   can suggest the new name (a `matches` pattern is left alone: it is a regex, not a name);
//! - numeric comparisons trim surrounding whitespace before parsing, so a context value
//!   captured from command output (`"3\n"`) still compares as a number.
//!
//! Must not: read anything but the outcome and the context it is given.

use std::borrow::Cow;
use std::fmt;

use pest::Parser as _;
use regex::Regex;
use serde_json::Value;

use grammar::{ConditionParser, Rule};

mod grammar {
    //! The generated pest parser, kept private so `Rule` is not part of the public API.
    #[derive(pest_derive::Parser)]
    #[grammar = "../grammar/condition.pest"]
    pub(super) struct ConditionParser;
}

type Pair<'i> = pest::iterators::Pair<'i, Rule>;

/// A compiled condition: parsed once at load, evaluated many times.
#[derive(Debug, Clone)]
pub struct Condition {
    source: String,
    /// `None` for a blank condition, which is always true.
    expr: Option<Expr>,
    /// Legacy outcome names found in the text, first appearance first, without repeats.
    legacy: Vec<String>,
}

/// A syntax error: plain words, and the byte offset in the condition text where it was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConditionError {
    pub message: String,
    pub offset: usize,
}

/// What a condition can read while an edge is being chosen.
pub trait ConditionEnv {
    /// `succeeded`, `failed`, `partially_succeeded` or `skipped`.
    fn outcome(&self) -> &str;
    /// The label chosen by a human gate or a routing directive; `""` when none.
    fn preferred_label(&self) -> &str;
    /// A context value by its full key.
    fn context(&self, key: &str) -> Option<&Value>;
}

/// A ready-made env over a JSON map (used by tests and the engine).
pub struct MapEnv<'a> {
    pub outcome: &'a str,
    pub preferred_label: &'a str,
    pub context: &'a serde_json::Map<String, Value>,
}

impl ConditionEnv for MapEnv<'_> {
    fn outcome(&self) -> &str {
        self.outcome
    }

    fn preferred_label(&self) -> &str {
        self.preferred_label
    }

    fn context(&self, key: &str) -> Option<&Value> {
        self.context.get(key)
    }
}

// ---------------------------------------------------------------------------------------
// AST
// ---------------------------------------------------------------------------------------

/// `||` of `&&` groups. The grammar has a fixed depth (no parentheses), so the AST is flat
/// and evaluation never recurses.
#[derive(Debug, Clone)]
struct Expr {
    any_of: Vec<Vec<Term>>,
}

#[derive(Debug, Clone)]
struct Term {
    /// An odd number of `!` in front of the clause.
    negated: bool,
    key: Key,
    test: Test,
}

#[derive(Debug, Clone)]
struct Key {
    name: String,
    lookup: Lookup,
    /// Read when the key is missing: our key for another engine's name
    /// ([`CONTEXT_ALIASES`]).
    alias: Option<&'static str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lookup {
    Outcome,
    PreferredLabel,
    /// `context.X`: the key as written, else `X` (the text after the 8-byte prefix).
    ContextPrefixed,
    /// Any other key: read from the context as written.
    Plain,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumOp {
    Gt,
    Lt,
    Ge,
    Le,
}

#[derive(Debug, Clone)]
enum Test {
    Truthy,
    Equals(String),
    NotEquals(String),
    /// The literal parsed once; `None` when it is not a number (the clause is then false).
    Numeric(NumOp, Option<f64>),
    Contains(String),
    Matches(Regex),
}

const CONTEXT_PREFIX: &str = "context.";

/// Context keys other engines write under another name (`theirs`, `ours`): a condition that
/// reads theirs and finds nothing reads ours (decisions.md; the lint warns, naming ours).
pub const CONTEXT_ALIASES: &[(&str, &str)] = &[("tool.output", "command.output")];

/// Our key for a condition key naming another engine's context key (`context.` optional).
pub fn context_alias(key: &str) -> Option<&'static str> {
    let bare = key.strip_prefix(CONTEXT_PREFIX).unwrap_or(key);
    CONTEXT_ALIASES
        .iter()
        .find(|(theirs, _)| *theirs == bare)
        .map(|(_, ours)| *ours)
}

// ---------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------

impl Condition {
    /// Parses and compiles a condition. Blank text is the always-true condition.
    pub fn parse(src: &str) -> Result<Condition, ConditionError> {
        let mut condition = Condition {
            source: src.to_string(),
            expr: None,
            legacy: Vec::new(),
        };
        if src.trim().is_empty() {
            return Ok(condition);
        }
        let pairs =
            ConditionParser::parse(Rule::condition, src).map_err(|e| syntax_error(src, &e))?;
        let mut compiler = Compiler::default();
        let mut expr = None;
        for pair in pairs.flatten().filter(|p| p.as_rule() == Rule::expr) {
            expr = Some(compiler.expr(pair)?);
        }
        condition.expr = expr;
        condition.legacy = compiler.legacy;
        Ok(condition)
    }

    /// The condition text exactly as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// True for blank text, which always evaluates to true.
    pub fn is_empty(&self) -> bool {
        self.expr.is_none()
    }

    /// Evaluates the condition. `!` binds tighter than `&&`, which binds tighter than `||`.
    pub fn eval(&self, env: &dyn ConditionEnv) -> bool {
        match &self.expr {
            None => true,
            Some(expr) => expr
                .any_of
                .iter()
                .any(|group| group.iter().all(|term| term.eval(env))),
        }
    }

    /// Legacy outcome names used in the text (`success`, `fail`, `partial_success`), for a
    /// lint warning. Each name once, in order of appearance.
    pub fn legacy_outcome_names(&self) -> Vec<String> {
        self.legacy.clone()
    }

    /// Keys read under another engine's name ([`CONTEXT_ALIASES`]), as written, with ours;
    /// in order of appearance, repeats included. Allocates nothing (linted on every edge).
    pub fn alias_keys(&self) -> impl Iterator<Item = (&str, &'static str)> {
        self.expr
            .iter()
            .flat_map(|e| e.any_of.iter().flatten())
            .filter_map(|t| t.key.alias.map(|ours| (t.key.name.as_str(), ours)))
    }

    /// Keys the condition reads, as written, in order of appearance, each once (for lints).
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        let terms = self.expr.iter().flat_map(|e| e.any_of.iter().flatten());
        for term in terms {
            if !keys.contains(&term.key.name) {
                keys.push(term.key.name.clone());
            }
        }
        keys
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

// ---------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------

/// A key's value before it is turned into text, so strings are never copied.
enum Resolved<'e> {
    Text(&'e str),
    Json(&'e Value),
    Missing,
}

impl<'e> Resolved<'e> {
    fn text(&self) -> Cow<'e, str> {
        match self {
            Resolved::Text(s) => Cow::Borrowed(s),
            Resolved::Json(v) => value_text(v),
            Resolved::Missing => Cow::Borrowed(""),
        }
    }

    fn number(&self) -> Option<f64> {
        match self {
            // Same value as parsing the number's JSON text, without building it.
            Resolved::Json(Value::Number(n)) => n.as_f64(),
            _ => parse_number(&self.text()),
        }
    }
}

/// Value to text: strings as-is, bools and numbers as JSON text, missing/null as "",
/// arrays and objects as compact JSON.
fn value_text(value: &Value) -> Cow<'_, str> {
    match value {
        Value::String(s) => Cow::Borrowed(s),
        Value::Null => Cow::Borrowed(""),
        Value::Bool(true) => Cow::Borrowed("true"),
        Value::Bool(false) => Cow::Borrowed("false"),
        Value::Number(n) => Cow::Owned(n.to_string()),
        Value::Array(_) | Value::Object(_) => Cow::Owned(value.to_string()),
    }
}

fn parse_number(text: &str) -> Option<f64> {
    text.trim().parse::<f64>().ok()
}

impl Key {
    fn resolve<'e>(&self, env: &'e dyn ConditionEnv) -> Resolved<'e> {
        let found = match self.lookup {
            Lookup::Outcome => return Resolved::Text(env.outcome()),
            Lookup::PreferredLabel => return Resolved::Text(env.preferred_label()),
            Lookup::Plain => env.context(&self.name),
            Lookup::ContextPrefixed => env
                .context(&self.name)
                .or_else(|| env.context(&self.name[CONTEXT_PREFIX.len()..])),
        };
        let found = match (found, self.alias) {
            (None, Some(ours)) => env.context(ours),
            (found, _) => found,
        };
        found.map_or(Resolved::Missing, Resolved::Json)
    }
}

impl Term {
    fn eval(&self, env: &dyn ConditionEnv) -> bool {
        self.test.holds(&self.key.resolve(env)) != self.negated
    }
}

impl Test {
    fn holds(&self, value: &Resolved<'_>) -> bool {
        match self {
            Test::Truthy => is_truthy(&value.text()),
            Test::Equals(lit) => value.text() == lit.as_str(),
            Test::NotEquals(lit) => value.text() != lit.as_str(),
            Test::Numeric(op, lit) => match (value.number(), lit) {
                (Some(lhs), Some(rhs)) => op.compare(lhs, *rhs),
                _ => false,
            },
            Test::Contains(lit) => contains(value, lit),
            Test::Matches(re) => re.is_match(&value.text()),
        }
    }
}

fn is_truthy(text: &str) -> bool {
    !text.is_empty() && text != "false" && text != "0"
}

/// A JSON array contains an element whose text equals the literal; anything else is a
/// substring test on its text.
fn contains(value: &Resolved<'_>, literal: &str) -> bool {
    match value {
        Resolved::Json(Value::Array(items)) => items.iter().any(|item| value_text(item) == literal),
        _ => value.text().contains(literal),
    }
}

impl NumOp {
    fn compare(self, lhs: f64, rhs: f64) -> bool {
        match self {
            NumOp::Gt => lhs > rhs,
            NumOp::Lt => lhs < rhs,
            NumOp::Ge => lhs >= rhs,
            NumOp::Le => lhs <= rhs,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Compilation: pest pairs -> AST
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct Compiler {
    legacy: Vec<String>,
}

impl Compiler {
    fn expr(&mut self, pair: Pair<'_>) -> Result<Expr, ConditionError> {
        let mut any_of = Vec::new();
        for and_expr in pair.into_inner().filter(|p| p.as_rule() == Rule::and_expr) {
            let mut group = Vec::new();
            for unary in and_expr.into_inner().filter(|p| p.as_rule() == Rule::unary) {
                group.push(self.unary(unary)?);
            }
            any_of.push(group);
        }
        Ok(Expr { any_of })
    }

    fn unary(&mut self, pair: Pair<'_>) -> Result<Term, ConditionError> {
        let mut negated = false;
        let mut clause = None;
        for inner in pair.clone().into_inner() {
            match inner.as_rule() {
                Rule::not_op => negated = !negated,
                Rule::clause => clause = Some(inner),
                _ => {}
            }
        }
        let clause = clause.ok_or_else(|| grammar_bug(&pair))?;
        self.clause(negated, clause)
    }

    fn clause(&mut self, negated: bool, pair: Pair<'_>) -> Result<Term, ConditionError> {
        let mut inner = pair.clone().into_inner();
        let key_pair = inner.next().ok_or_else(|| grammar_bug(&pair))?;
        let key = compile_key(key_pair.as_str());
        let test = match inner.next() {
            None => Test::Truthy,
            Some(op) => {
                let value = inner.next();
                self.test(&key, &op, value.as_ref())?
            }
        };
        Ok(Term { negated, key, test })
    }

    fn test(
        &mut self,
        key: &Key,
        op: &Pair<'_>,
        value: Option<&Pair<'_>>,
    ) -> Result<Test, ConditionError> {
        let op_text = op.as_str();
        let literal = match value {
            Some(v) => value_literal(v),
            // `key=` and `key!=` compare against "" for compatibility with older workflows.
            None if op_text == "=" || op_text == "!=" => String::new(),
            None => return Err(missing_value(op)),
        };
        let literal = self.rewrite_legacy(key, op_text, literal);
        let test = match op_text {
            "=" => Test::Equals(literal),
            "!=" => Test::NotEquals(literal),
            ">" => Test::Numeric(NumOp::Gt, parse_number(&literal)),
            "<" => Test::Numeric(NumOp::Lt, parse_number(&literal)),
            ">=" => Test::Numeric(NumOp::Ge, parse_number(&literal)),
            "<=" => Test::Numeric(NumOp::Le, parse_number(&literal)),
            "contains" => Test::Contains(literal),
            "matches" => Test::Matches(compile_regex(
                &literal,
                value.map_or(op.as_span().end(), |v| v.as_span().start()),
            )?),
            _ => return Err(grammar_bug(op)),
        };
        Ok(test)
    }

    /// `outcome=success` and friends predate the current outcome names; accept them and
    /// remember them for the lint.
    fn rewrite_legacy(&mut self, key: &Key, op: &str, literal: String) -> String {
        let name_compare = matches!(op, "=" | "!=" | "contains");
        if key.lookup != Lookup::Outcome || !name_compare {
            return literal;
        }
        let Some(current) = legacy_replacement(&literal) else {
            return literal;
        };
        if !self.legacy.contains(&literal) {
            self.legacy.push(literal);
        }
        current.to_string()
    }
}

fn legacy_replacement(name: &str) -> Option<&'static str> {
    match name {
        "success" => Some("succeeded"),
        "fail" => Some("failed"),
        "partial_success" => Some("partially_succeeded"),
        _ => None,
    }
}

fn compile_key(name: &str) -> Key {
    let lookup = match name {
        "outcome" => Lookup::Outcome,
        "preferred_label" => Lookup::PreferredLabel,
        // `context.` alone has nothing to fall back to, so it is read as written.
        _ if name.len() > CONTEXT_PREFIX.len() && name.starts_with(CONTEXT_PREFIX) => {
            Lookup::ContextPrefixed
        }
        _ => Lookup::Plain,
    };
    Key {
        name: name.to_string(),
        lookup,
        alias: match lookup {
            Lookup::Outcome | Lookup::PreferredLabel => None,
            _ => context_alias(name),
        },
    }
}

/// The literal text of a value: a bare word as written, a quoted string unescaped.
fn value_literal(value: &Pair<'_>) -> String {
    let quoted_inner = value
        .clone()
        .into_inner()
        .flatten()
        .find(|p| p.as_rule() == Rule::quoted_inner);
    match quoted_inner {
        Some(inner) => unescape(inner.as_str()),
        None => value.as_str().to_string(),
    }
}

/// Only `\"` and `\\` are escapes; any other backslash is kept, so regexes like `"\d+"`
/// can be written without doubling.
fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(&next @ ('"' | '\\')) = chars.peek() {
                out.push(next);
                chars.next();
                continue;
            }
        }
        out.push(c);
    }
    out
}

fn compile_regex(pattern: &str, offset: usize) -> Result<Regex, ConditionError> {
    Regex::new(pattern).map_err(|e| ConditionError {
        message: format!("invalid regex `{pattern}` after `matches`: {e}"),
        offset,
    })
}

fn missing_value(op: &Pair<'_>) -> ConditionError {
    ConditionError {
        message: format!("expected a value after `{}`", op.as_str()),
        offset: op.as_span().end(),
    }
}

/// The grammar guarantees the pair shapes the compiler walks; this only fires if the two
/// drift apart, and it is still reported rather than panicking.
fn grammar_bug(pair: &Pair<'_>) -> ConditionError {
    ConditionError {
        message: format!(
            "internal error: unexpected condition structure at `{}`",
            pair.as_str()
        ),
        offset: pair.as_span().start(),
    }
}

// ---------------------------------------------------------------------------------------
// Syntax errors in plain words
// ---------------------------------------------------------------------------------------

const PAREN_MESSAGE: &str =
    "parentheses are not supported in conditions; combine clauses with && and ||";

/// A coarse token, used only to describe what surrounds a syntax error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TokKind {
    Word,
    Quoted { closed: bool },
    Paren,
    Symbol,
}

#[derive(Debug, Clone, Copy)]
struct Tok {
    start: usize,
    end: usize,
    kind: TokKind,
}

/// What the parser was looking for where it stopped, read from pest's expected rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expecting {
    /// A key, possibly after `!` (start of the text, or after `&&`, `||`, `!`).
    Operand,
    /// An operator, `&&`, `||` or the end, after a key.
    AfterKey,
    /// A value after an operator.
    AfterOp,
    /// `&&`, `||` or the end, after a value.
    AfterValue,
}

/// Splits the text into words, quoted strings, parentheses and operator symbols. It never
/// fails: it is run on text that already failed to parse.
fn lex(src: &str) -> Vec<Tok> {
    let mut toks = Vec::new();
    let mut pos = 0;
    while let Some(c) = src[pos..].chars().next() {
        if c.is_whitespace() {
            pos += c.len_utf8();
            continue;
        }
        let (end, kind) = match c {
            '"' => lex_quoted(src, pos),
            '(' | ')' => (pos + 1, TokKind::Paren),
            '=' | '!' | '<' | '>' | '&' | '|' => (lex_symbol(src, pos), TokKind::Symbol),
            _ => (lex_word(src, pos), TokKind::Word),
        };
        toks.push(Tok {
            start: pos,
            end,
            kind,
        });
        pos = end;
    }
    toks
}

fn lex_quoted(src: &str, start: usize) -> (usize, TokKind) {
    let mut escaped = false;
    for (i, c) in src[start + 1..].char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return (start + 1 + i + 1, TokKind::Quoted { closed: true }),
            _ => {}
        }
    }
    (src.len(), TokKind::Quoted { closed: false })
}

fn lex_symbol(src: &str, start: usize) -> usize {
    const PAIRS: [&str; 6] = ["&&", "||", "!=", ">=", "<=", "=="];
    let rest = &src[start..];
    if PAIRS.iter().any(|p| rest.starts_with(p)) {
        start + 2
    } else {
        start + 1
    }
}

fn is_word_char(c: char) -> bool {
    !c.is_whitespace() && !matches!(c, '=' | '!' | '<' | '>' | '&' | '|' | '"' | '(' | ')')
}

fn lex_word(src: &str, start: usize) -> usize {
    src[start..]
        .char_indices()
        .find(|&(_, c)| !is_word_char(c))
        .map_or(src.len(), |(i, _)| start + i)
}

/// Turns a pest failure into one message in plain words.
fn syntax_error(src: &str, err: &pest::error::Error<Rule>) -> ConditionError {
    let pos = match err.location {
        pest::error::InputLocation::Pos(p) => p,
        pest::error::InputLocation::Span((start, _)) => start,
    };
    let expecting = match &err.variant {
        pest::error::ErrorVariant::ParsingError { positives, .. } => expecting_from(positives),
        pest::error::ErrorVariant::CustomError { .. } => Expecting::AfterValue,
    };
    let toks = lex(src);
    // A parenthesis or an unterminated string stops the parser at or before it; when it is
    // the first thing wrong, it is the clearest thing to report.
    let lexical = toks
        .iter()
        .find(|t| matches!(t.kind, TokKind::Paren | TokKind::Quoted { closed: false }));
    if let Some(tok) = lexical.filter(|t| t.start <= pos) {
        return lexical_error(tok);
    }
    describe(src, &toks, pos, expecting)
}

fn expecting_from(positives: &[Rule]) -> Expecting {
    let has = |r: Rule| positives.contains(&r);
    if has(Rule::value) {
        Expecting::AfterOp
    } else if has(Rule::op) {
        Expecting::AfterKey
    } else if positives.iter().any(|r| {
        matches!(
            r,
            Rule::condition
                | Rule::expr
                | Rule::and_expr
                | Rule::unary
                | Rule::clause
                | Rule::key
                | Rule::not_op
        )
    }) {
        Expecting::Operand
    } else {
        Expecting::AfterValue
    }
}

fn lexical_error(tok: &Tok) -> ConditionError {
    let message = match tok.kind {
        TokKind::Paren => PAREN_MESSAGE.to_string(),
        _ => format!("unterminated string starting at offset {}", tok.start),
    };
    ConditionError {
        message,
        offset: tok.start,
    }
}

/// Where a parse stopped: the token there, its neighbours, and what was expected.
struct Site<'s> {
    src: &'s str,
    pos: usize,
    expecting: Expecting,
    found: Option<Tok>,
    prev: Option<Tok>,
    next: Option<Tok>,
}

impl<'s> Site<'s> {
    fn new(src: &'s str, toks: &[Tok], pos: usize, expecting: Expecting) -> Site<'s> {
        let at = toks.iter().position(|t| t.end > pos);
        Site {
            src,
            pos,
            expecting,
            found: at.map(|i| toks[i]),
            prev: toks.iter().rev().find(|t| t.end <= pos).copied(),
            next: at.and_then(|i| toks.get(i + 1)).copied(),
        }
    }

    fn text(&self, tok: Option<Tok>) -> &'s str {
        tok.map_or("", |t| &self.src[t.start..t.end])
    }

    fn found_words(&self) -> String {
        match self.found {
            Some(_) => format!("`{}`", snippet(self.text(self.found))),
            None => "the end of the condition".to_string(),
        }
    }

    fn after_prev(&self) -> String {
        match self.prev {
            Some(_) => format!("after `{}`", snippet(self.text(self.prev))),
            None => "at the start of the condition".to_string(),
        }
    }

    fn error(&self, message: String, offset: usize) -> ConditionError {
        ConditionError { message, offset }
    }
}

fn describe(src: &str, toks: &[Tok], pos: usize, expecting: Expecting) -> ConditionError {
    let site = Site::new(src, toks, pos, expecting);
    special_case(&site).unwrap_or_else(|| generic_error(&site))
}

/// "expected X after Y, found Z", with X read from what the parser was looking for.
fn generic_error(site: &Site<'_>) -> ConditionError {
    let (place, found) = (site.after_prev(), site.found_words());
    let message = match site.expecting {
        Expecting::Operand => {
            format!("expected a key such as `outcome` or `context.name` {place}, found {found}")
        }
        Expecting::AfterKey => {
            format!("expected a comparison operator, `&&` or `||` {place}, found {found}")
        }
        Expecting::AfterOp if matches!(site.text(site.prev), "=" | "!=") => {
            format!("expected a value, `&&` or `||` {place}, found {found}")
        }
        Expecting::AfterOp => format!("expected a value {place}, found {found}"),
        Expecting::AfterValue => {
            // Two bare words in a row are almost always an unquoted value with a space.
            let words = [site.prev, site.found]
                .iter()
                .all(|t| t.is_some_and(|t| t.kind == TokKind::Word));
            let hint = if words {
                "; put a value that contains spaces in double quotes"
            } else {
                ""
            };
            format!("expected `&&` or `||` {place}, found {found}{hint}")
        }
    };
    let offset = site.found.map_or(site.src.len(), |t| t.start.max(site.pos));
    site.error(message, offset)
}

/// Mistakes common enough to deserve their own explanation.
fn special_case(site: &Site<'_>) -> Option<ConditionError> {
    let found = site.found?;
    let text = site.text(site.found);
    let message = match text {
        "==" => "`==` is not an operator; use `=` to compare",
        "&" => "a single `&` is not an operator; use `&&` (and quote a value that contains `&`)",
        "|" => "a single `|` is not an operator; use `||` (and quote a regex that contains `|`)",
        _ if site.expecting == Expecting::AfterKey => return after_key_mistake(site, found),
        _ => return None,
    };
    Some(site.error(message.to_string(), found.start))
}

/// Mistakes right after a key: `!contains`, a bad key character, `containsx`.
fn after_key_mistake(site: &Site<'_>, found: Tok) -> Option<ConditionError> {
    let text = site.text(Some(found));
    if text == "!" {
        if let word @ ("contains" | "matches") = site.text(site.next) {
            let key = site.text(site.prev);
            let message = format!(
                "`!{word}` is not an operator; negate the whole clause instead: `!{key} {word} ...`"
            );
            return Some(site.error(message, found.start));
        }
    }
    if found.kind != TokKind::Word {
        return None;
    }
    // The key rule stopped inside a word: the character there cannot be part of a key.
    if site.pos > found.start {
        let bad = site.src[site.pos..].chars().next().unwrap_or(' ');
        let message = format!(
            "invalid character `{bad}` in key `{text}`; keys may contain only letters, digits, `_`, `.` and `-`"
        );
        return Some(site.error(message, site.pos));
    }
    ["contains", "matches"]
        .into_iter()
        .find(|w| text.len() > w.len() && text.starts_with(w))
        .map(|w| {
            site.error(
                format!("`{w}` needs a space after it"),
                found.start + w.len(),
            )
        })
}

/// Long tokens are shortened so a message stays one readable line.
fn snippet(text: &str) -> Cow<'_, str> {
    const MAX_CHARS: usize = 40;
    match text.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => Cow::Owned(format!("{}...", &text[..cut])),
        None => Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod tests;
