//! Lexical attribute values. Typing by attribute (a `timeout` is a duration, a `label` is
//! text) happens in `workflow`; here a value only remembers how it was written.
//! Must not: type values by attribute (that is `workflow::attrs`).

use super::Text;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A double-quoted string, escapes already resolved.
    Str(Text),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// A duration literal as written (`900s`, `250ms`).
    Duration(Text),
    /// A bare string (`gpt-5.2`) or identifier (`LR`, `box`).
    Bare(Text),
}

impl Value {
    /// The value as the text a user wrote (without quotes). Numbers and booleans print in
    /// their canonical form.
    pub fn as_text(&self) -> &str {
        match self {
            Value::Str(s) | Value::Duration(s) | Value::Bare(s) => s,
            Value::Bool(true) => "true",
            Value::Bool(false) => "false",
            // Numbers are rare in text positions; callers that need them use `to_text`.
            Value::Int(_) | Value::Float(_) => "",
        }
    }

    /// The text of any value, numbers included, borrowed unless it is a number.
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Value::Int(i) => std::borrow::Cow::Owned(i.to_string()),
            Value::Float(f) => std::borrow::Cow::Owned(format_float(*f)),
            other => std::borrow::Cow::Borrowed(other.as_text()),
        }
    }

    /// Owned text of any value, numbers included.
    pub fn to_text(&self) -> String {
        self.text().into_owned()
    }

    pub fn is_quoted(&self) -> bool {
        matches!(self, Value::Str(_))
    }
}

/// Floats print in plain decimal (the grammar has no exponent) with a decimal point, so
/// that they read back as the same float.
pub fn format_float(f: f64) -> String {
    let s = f.to_string();
    if s.contains('.') || !f.is_finite() {
        s
    } else {
        s + ".0"
    }
}

/// Parses `<digits><unit>` with units ms, s, m, h, d. Whole numbers only; no sign.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit())?;
    if digits_end == 0 {
        return None;
    }
    let n: u64 = t[..digits_end].parse().ok()?;
    let ms_per_unit: u64 = match &t[digits_end..] {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    Some(Duration::from_millis(n.checked_mul(ms_per_unit)?))
}

/// Resolves the escapes of a quoted string: `\"`, `\\`, `\n`, `\t`; a backslash before a
/// newline is a line continuation (both removed, as Graphviz does); any other backslash is
/// kept as written.
pub fn unescape(body: &str) -> String {
    if !body.contains('\\') {
        return body.to_string();
    }
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('\n') => {}
            Some('\r') => {
                chars.next();
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                continue;
            }
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => {
                out.push('\\');
                continue;
            }
        }
        chars.next();
    }
    out
}

/// The inverse of [`unescape`] for printing.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out
}
