//! Hiding secret values: the [`Redact`] trait the engine applies to every event property
//! string it records (and the agent to every text it sends a model), [`Secrets`] (a fixed
//! set of values, matched in one pass), and [`NoRedaction`] (the default).
//!
//! Rules: a value shorter than [`MIN_SECRET_CHARS`] characters is not matched (it would
//! mangle ordinary text); a value is also matched trimmed, JSON-escaped (as it appears in
//! `secrets.json` itself), and, when it spans several lines, line by line (lines of at
//! least [`MIN_SECRET_CHARS`] characters), so `head -1 key.pem` is hidden too. Longer values
//! win over values they contain. Every match becomes [`REDACTED`].
//! Owns: matching and replacing. Must not touch: where the values come from (the CLI and the
//! server feed it from the vault) or where events go.

use regex::Regex;
use serde_json::Value;
use std::borrow::Cow;

/// What a secret value is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Values shorter than this (in characters) are never matched.
pub const MIN_SECRET_CHARS: usize = 8;

/// Replaces secret values in text.
pub trait Redact: Send + Sync {
    /// `text` with every secret value replaced by [`REDACTED`] (borrowed when nothing
    /// matched).
    fn redact<'a>(&self, text: &'a str) -> Cow<'a, str>;
}

/// Hides nothing.
pub struct NoRedaction;

impl Redact for NoRedaction {
    fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        Cow::Borrowed(text)
    }
}

/// A fixed set of secret values.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    /// One alternation of every matched form, longest first; `None` when there is none.
    pattern: Option<Regex>,
}

impl Secrets {
    /// The matcher of `values` (see the module doc for the forms matched).
    pub fn new<I, S>(values: I) -> Secrets
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut forms: Vec<String> = Vec::new();
        let mut add = |s: &str| {
            if s.chars().count() >= MIN_SECRET_CHARS && !forms.iter().any(|f| f == s) {
                forms.push(s.to_string());
            }
        };
        for v in values {
            let v = v.as_ref();
            add(v);
            add(v.trim());
            if let Ok(quoted) = serde_json::to_string(v) {
                add(&quoted[1..quoted.len() - 1]);
            }
            if v.trim().contains('\n') {
                for line in v.lines() {
                    add(line.trim());
                }
            }
        }
        // Leftmost-first alternation: the longest form wins where forms overlap.
        forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        let alternation = forms
            .iter()
            .map(|f| regex::escape(f))
            .collect::<Vec<_>>()
            .join("|");
        let pattern = if forms.is_empty() {
            None
        } else {
            match regex::RegexBuilder::new(&alternation)
                .size_limit(64 << 20)
                .build()
            {
                Ok(r) => Some(r),
                Err(e) => {
                    // Cannot happen for escaped literals within the size limit; never
                    // leave secrets visible silently.
                    log::error!(
                        "cannot build the secret matcher ({} values): {e}",
                        forms.len()
                    );
                    None
                }
            }
        };
        Secrets { pattern }
    }

    /// True when no value is long enough to be matched.
    pub fn is_empty(&self) -> bool {
        self.pattern.is_none()
    }
}

impl Redact for Secrets {
    fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match &self.pattern {
            Some(p) => p.replace_all(text, REDACTED),
            None => Cow::Borrowed(text),
        }
    }
}

/// Redacts every string inside `v` (object keys are left alone: they are names, not data).
/// Returns true if anything was replaced.
pub fn redact_json(r: &dyn Redact, v: &mut Value) -> bool {
    match v {
        Value::String(s) => match r.redact(s) {
            Cow::Owned(hidden) => {
                *s = hidden;
                true
            }
            Cow::Borrowed(_) => false,
        },
        Value::Array(items) => {
            let mut hit = false;
            for item in items {
                hit |= redact_json(r, item);
            }
            hit
        }
        Value::Object(map) => {
            let mut hit = false;
            for item in map.values_mut() {
                hit |= redact_json(r, item);
            }
            hit
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_replaced_wherever_they_appear() {
        let s = Secrets::new(["sk-live-0123456789", "hunter2-but-longer"]);
        let out = s.redact("key=sk-live-0123456789; pw hunter2-but-longer!sk-live-0123456789");
        assert_eq!(out, "key=[REDACTED]; pw [REDACTED]![REDACTED]");
        assert!(matches!(s.redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn short_values_are_not_matched() {
        let s = Secrets::new(["abc", "1234567", ""]);
        assert!(s.is_empty());
        assert_eq!(s.redact("abc 1234567"), "abc 1234567");
        let eight = Secrets::new(["12345678"]);
        assert_eq!(eight.redact("pin 12345678"), "pin [REDACTED]");
    }

    #[test]
    fn the_longest_value_wins_over_one_it_contains() {
        let s = Secrets::new(["token-abcdefgh", "token-abcdefgh-extended"]);
        assert_eq!(s.redact("t=token-abcdefgh-extended"), "t=[REDACTED]");
        assert_eq!(s.redact("t=token-abcdefgh."), "t=[REDACTED].");
    }

    #[test]
    fn trimmed_escaped_and_multi_line_forms_are_matched() {
        let s = Secrets::new(["  padded-secret-value\n"]);
        assert_eq!(s.redact("v=padded-secret-value"), "v=[REDACTED]");
        // As `cat secrets.json` shows a value with a quote in it.
        let q = Secrets::new([r#"pa"ss\word-123"#]);
        assert_eq!(
            q.redact(r#"{"value": "pa\"ss\\word-123"}"#),
            r#"{"value": "[REDACTED]"}"#
        );
        let pem = Secrets::new(["-----BEGIN KEY-----\nMIIEvQIBADANBgkq\nab\n-----END KEY-----\n"]);
        assert_eq!(pem.redact("line: MIIEvQIBADANBgkq"), "line: [REDACTED]");
        // Lines shorter than the minimum are not matched on their own.
        assert_eq!(pem.redact("ab"), "ab");
    }

    #[test]
    fn json_strings_are_redacted_at_any_depth() {
        let s = Secrets::new(["sk-live-0123456789"]);
        let mut v = json!({"output": "sk-live-0123456789", "n": 1,
                           "nested": [{"arguments": {"cmd": "echo sk-live-0123456789"}}]});
        assert!(redact_json(&s, &mut v));
        assert_eq!(v["output"], REDACTED);
        assert_eq!(v["nested"][0]["arguments"]["cmd"], "echo [REDACTED]");
        assert_eq!(v["n"], 1);
        assert!(!redact_json(&s, &mut v));
        assert!(!redact_json(
            &NoRedaction,
            &mut json!({"a": "sk-live-0123456789"})
        ));
    }
}
