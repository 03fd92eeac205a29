//! The condition language's tests: parsing, the plain-words syntax errors, legacy outcome
//! names, and evaluation against outcomes and contexts.
//! Must not: depend on the engine (a condition is evaluated against plain maps here).

use super::*;
use serde_json::json;

fn ctx(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("test context must be an object"),
    }
}

fn eval_with(src: &str, outcome: &str, label: &str, context: Value) -> bool {
    let map = ctx(context);
    let env = MapEnv {
        outcome,
        preferred_label: label,
        context: &map,
    };
    Condition::parse(src)
        .unwrap_or_else(|e| panic!("{src:?} should parse: {e} at {}", e.offset))
        .eval(&env)
}

fn eval_ctx(src: &str, context: Value) -> bool {
    eval_with(src, "succeeded", "", context)
}

fn err(src: &str) -> ConditionError {
    match Condition::parse(src) {
        Ok(c) => panic!("{src:?} should not parse, got {c:?}"),
        Err(e) => e,
    }
}

/// Messages are in words: never a pest rule dump.
fn assert_plain(e: &ConditionError) {
    for raw in [
        "expected [",
        "Rule::",
        "positives",
        "EOI",
        "and_op",
        "or_op",
        "-->",
    ] {
        assert!(
            !e.message.contains(raw),
            "raw grammar text in {:?}",
            e.message
        );
    }
}

// --- Grammar rules -------------------------------------------------------------------

#[test]
fn blank_expression_is_always_true() {
    for src in ["", "   ", "\n\t"] {
        let c = Condition::parse(src).unwrap();
        assert!(c.is_empty());
        assert!(eval_with(src, "failed", "", json!({})));
        assert!(c.keys().is_empty());
    }
    assert!(!Condition::parse("outcome=failed").unwrap().is_empty());
}

#[test]
fn source_and_display_keep_the_text() {
    let c = Condition::parse("  outcome = fail ").unwrap();
    assert_eq!(c.source(), "  outcome = fail ");
    assert_eq!(c.to_string(), "  outcome = fail ");
}

#[test]
fn or_is_true_when_any_side_is_true() {
    assert!(eval_ctx("a=1 || b=2", json!({"a": "0", "b": "2"})));
    assert!(!eval_ctx("a=1 || b=2", json!({"a": "0", "b": "0"})));
}

#[test]
fn and_is_true_only_when_both_sides_are_true() {
    assert!(eval_ctx("a=1 && b=2", json!({"a": "1", "b": "2"})));
    assert!(!eval_ctx("a=1 && b=2", json!({"a": "1", "b": "3"})));
}

#[test]
fn not_negates_and_repeats() {
    assert!(eval_ctx("!a", json!({"a": ""})));
    assert!(!eval_ctx("!a", json!({"a": "yes"})));
    assert!(eval_ctx("!!a", json!({"a": "yes"})));
    assert!(!eval_ctx("! ! !a", json!({"a": "yes"})));
    assert!(eval_ctx("!outcome=failed", json!({})));
    assert!(!eval_ctx("!outcome=succeeded", json!({})));
}

#[test]
fn deep_negation_does_not_overflow() {
    let src = format!("{}a", "!".repeat(100_000));
    assert!(eval_ctx(&src, json!({"a": "1"})));
}

#[test]
fn precedence_not_then_and_then_or() {
    // a || (b && c)
    assert!(eval_ctx("a || b && c", json!({"a": "1", "b": "", "c": ""})));
    assert!(!eval_ctx(
        "a || b && c",
        json!({"a": "", "b": "1", "c": ""})
    ));
    assert!(eval_ctx(
        "a || b && c",
        json!({"a": "", "b": "1", "c": "1"})
    ));
    // (a && b) || c
    assert!(eval_ctx("a && b || c", json!({"a": "", "b": "", "c": "1"})));
    // (!a) && b, not !(a && b)
    assert!(!eval_ctx("!a && b", json!({"a": "", "b": ""})));
    assert!(eval_ctx("!a && b", json!({"a": "", "b": "1"})));
}

#[test]
fn whitespace_between_tokens_is_optional_and_free() {
    assert!(eval_ctx("outcome=succeeded&&a", json!({"a": "1"})));
    assert!(eval_ctx(" \t outcome \n = \r succeeded || x ", json!({})));
    assert!(eval_ctx("!  a", json!({"a": ""})));
}

#[test]
fn keys_accept_dots_dashes_underscores_digits() {
    let c = Condition::parse("_a.b-c_9 = 1 && human.gate.label=x && internal.retry_count.x > 1")
        .unwrap();
    assert_eq!(
        c.keys(),
        ["_a.b-c_9", "human.gate.label", "internal.retry_count.x"]
    );
    assert!(eval_ctx("_a.b-c_9 = 1", json!({"_a.b-c_9": 1})));
}

#[test]
fn keys_are_reported_once_in_order() {
    let c =
        Condition::parse("outcome=failed || context.x && outcome=succeeded && !preferred_label")
            .unwrap();
    assert_eq!(c.keys(), ["outcome", "context.x", "preferred_label"]);
}

#[test]
fn quoted_values_keep_spaces_and_unescape_only_quote_and_backslash() {
    assert!(eval_with(
        r#"preferred_label="Approve it""#,
        "succeeded",
        "Approve it",
        json!({})
    ));
    assert!(!eval_with(
        r#"preferred_label="Approve it""#,
        "succeeded",
        "Approve",
        json!({})
    ));
    assert!(eval_ctx(r#"a = "say \"hi\"""#, json!({"a": "say \"hi\""})));
    assert!(eval_ctx(
        r#"a = "back\\slash""#,
        json!({"a": "back\\slash"})
    ));
    assert!(eval_ctx(
        r#"a = "keep \d \n""#,
        json!({"a": "keep \\d \\n"})
    ));
    // Operators and parentheses inside quotes are plain text.
    assert!(eval_ctx(
        r#"a = "x && (y || z) != 1""#,
        json!({"a": "x && (y || z) != 1"})
    ));
    assert!(eval_ctx(r#"a = """#, json!({"a": ""})));
}

#[test]
fn bare_values_stop_at_whitespace_and_operator_characters() {
    assert!(eval_ctx(
        "a=x.y/z-1:2&&b",
        json!({"a": "x.y/z-1:2", "b": "1"})
    ));
    assert!(eval_ctx("a = -3.5", json!({"a": -3.5})));
}

#[test]
fn trailing_equals_compares_against_empty() {
    assert!(eval_ctx("a=", json!({})));
    assert!(eval_ctx("a=", json!({"a": ""})));
    assert!(!eval_ctx("a=", json!({"a": "x"})));
    assert!(eval_ctx("a!=", json!({"a": "x"})));
    assert!(!eval_ctx("a!=", json!({})));
    assert!(eval_ctx("a= && b", json!({"b": "1"})));
}

// --- Operators -----------------------------------------------------------------------

#[test]
fn equals_is_exact_and_case_sensitive() {
    assert!(eval_ctx("a=Yes", json!({"a": "Yes"})));
    assert!(!eval_ctx("a=yes", json!({"a": "Yes"})));
    assert!(!eval_ctx("a=5.0", json!({"a": 5})));
    assert!(eval_ctx("a=5", json!({"a": 5})));
    assert!(eval_ctx("a=true", json!({"a": true})));
    assert!(eval_ctx(r#"a="[1,\"x\"]""#, json!({"a": [1, "x"]})));
    assert!(eval_ctx(r#"a="{\"k\":1}""#, json!({"a": {"k": 1}})));
    assert!(eval_ctx("a=[1,2]", json!({"a": [1, 2]})));
}

#[test]
fn not_equals() {
    assert!(eval_ctx("a!=b", json!({"a": "c"})));
    assert!(!eval_ctx("a!=b", json!({"a": "b"})));
    assert!(eval_ctx("missing!=b", json!({})));
}

#[test]
fn numeric_comparisons() {
    let c = json!({"n": 3, "s": "3", "f": 2.5, "w": " 4\n", "word": "three"});
    assert!(eval_ctx("n > 2", c.clone()));
    assert!(!eval_ctx("n > 3", c.clone()));
    assert!(eval_ctx("n >= 3", c.clone()));
    assert!(!eval_ctx("n >= 3.5", c.clone()));
    assert!(eval_ctx("s < 10", c.clone()));
    assert!(!eval_ctx("s < 3", c.clone()));
    assert!(eval_ctx("f <= 2.5", c.clone()));
    assert!(!eval_ctx("f <= 2.4", c.clone()));
    assert!(eval_ctx("w > 3", c.clone()));
    assert!(eval_ctx("n > -1e3", c.clone()));
}

#[test]
fn numeric_comparison_with_a_non_number_is_false() {
    let c = json!({"word": "three", "n": 3});
    for src in [
        "word > 1",
        "word < 1",
        "word >= 1",
        "word <= 1",
        "n > x",
        "n <= x",
        "missing < 1",
    ] {
        assert!(!eval_ctx(src, c.clone()), "{src}");
    }
    // Negating a false clause is true: the clause is false, not an error.
    assert!(eval_ctx("!word > 1", c));
}

#[test]
fn contains_on_strings_is_a_substring_test() {
    assert!(eval_ctx(
        r#"context.review contains "LGTM""#,
        json!({"context.review": "looks good, LGTM!"})
    ));
    assert!(!eval_ctx(
        r#"context.review contains "LGTM""#,
        json!({"context.review": "lgtm"})
    ));
    assert!(eval_ctx("n contains 2", json!({"n": 123})));
}

#[test]
fn contains_on_arrays_matches_whole_elements() {
    let c = json!({"tags": ["fast", "slow", 3, true]});
    assert!(eval_ctx("tags contains fast", c.clone()));
    assert!(eval_ctx("tags contains 3", c.clone()));
    assert!(eval_ctx("tags contains true", c.clone()));
    assert!(!eval_ctx("tags contains fas", c.clone()));
    assert!(!eval_ctx(r#"tags contains "\"fast\"""#, c));
}

#[test]
fn matches_is_an_unanchored_regex_search() {
    let c = json!({"branch": "feat/x", "n": 42});
    assert!(eval_ctx(r#"branch matches "^feat/.*""#, c.clone()));
    assert!(!eval_ctx(r#"branch matches "^fix/""#, c.clone()));
    assert!(eval_ctx("branch matches at/", c.clone()));
    assert!(eval_ctx(r#"branch matches "fix|feat""#, c.clone()));
    assert!(eval_ctx(r#"n matches "^\d+$""#, c.clone()));
    assert!(!eval_ctx("missing matches .", c));
}

#[test]
fn invalid_regex_is_a_parse_error_naming_it() {
    let e = err(r#"branch matches "feat[""#);
    assert!(e.message.contains("invalid regex `feat[`"), "{}", e.message);
    assert!(
        e.message.contains("unclosed character class"),
        "{}",
        e.message
    );
    assert_eq!(e.offset, 15);
    let e = err("a matches (?=x)");
    assert_eq!(e.message, PAREN_MESSAGE);
    let e = err(r#"a matches "(?=x)""#);
    assert!(e.message.contains("invalid regex `(?=x)`"), "{}", e.message);
}

#[test]
fn word_operators_need_surrounding_space() {
    // `containsx` is not an operator...
    let e = err("x containsy");
    assert!(
        e.message.contains("`contains` needs a space after it"),
        "{}",
        e.message
    );
    assert_eq!(e.offset, 10);
    // ...and a key that merely looks like one is a key.
    assert!(eval_ctx("xcontains", json!({"xcontains": "1"})));
    assert!(eval_ctx(r#"x contains"y""#, json!({"x": "xyz"})));
}

#[test]
fn bare_key_truthiness() {
    for (value, truthy) in [
        (json!(""), false),
        (json!("false"), false),
        (json!("0"), false),
        (json!(0), false),
        (json!(false), false),
        (Value::Null, false),
        (json!("no"), true),
        (json!("False"), true),
        (json!("0.0"), true),
        (json!(1), true),
        (json!(true), true),
        (json!([]), true),
    ] {
        assert_eq!(
            eval_ctx("k", json!({ "k": value.clone() })),
            truthy,
            "{value}"
        );
    }
    assert!(!eval_ctx("k", json!({})));
}

// --- Key resolution ------------------------------------------------------------------

#[test]
fn outcome_and_preferred_label_come_from_the_env() {
    assert!(eval_with(
        "outcome=skipped",
        "skipped",
        "",
        json!({"outcome": "succeeded"})
    ));
    assert!(eval_with("preferred_label=Yes", "failed", "Yes", json!({})));
    assert!(!eval_with(
        "preferred_label",
        "failed",
        "",
        json!({"preferred_label": "x"})
    ));
}

#[test]
fn context_prefix_falls_back_to_the_bare_key() {
    assert!(eval_ctx(
        "context.tests_passed=true",
        json!({"tests_passed": true})
    ));
    assert!(eval_ctx(
        "context.x=full",
        json!({"context.x": "full", "x": "short"})
    ));
    assert!(!eval_ctx(
        "context.x=short",
        json!({"context.x": "full", "x": "short"})
    ));
    assert!(!eval_ctx("context.x", json!({})));
    // Other keys are read exactly as written, without a fallback.
    assert!(!eval_ctx("internal.x", json!({"x": "1"})));
    assert!(eval_ctx("internal.x", json!({"internal.x": "1"})));
}

// --- Legacy names --------------------------------------------------------------------

#[test]
fn legacy_outcome_names_are_rewritten_and_reported() {
    let c = Condition::parse(
        "outcome=success || outcome != fail || outcome=partial_success || outcome=fail",
    )
    .unwrap();
    assert_eq!(
        c.legacy_outcome_names(),
        ["success", "fail", "partial_success"]
    );
    let env_map = serde_json::Map::new();
    let env = |outcome| MapEnv {
        outcome,
        preferred_label: "",
        context: &env_map,
    };
    assert!(Condition::parse("outcome=success")
        .unwrap()
        .eval(&env("succeeded")));
    assert!(Condition::parse("outcome=\"fail\"")
        .unwrap()
        .eval(&env("failed")));
    assert!(Condition::parse("outcome=partial_success")
        .unwrap()
        .eval(&env("partially_succeeded")));
    assert!(!Condition::parse("outcome=success")
        .unwrap()
        .eval(&env("failed")));
}

#[test]
fn legacy_names_elsewhere_are_left_alone() {
    let c =
        Condition::parse("outcome=succeeded && context.outcome=success && outcome matches fail")
            .unwrap();
    assert!(c.legacy_outcome_names().is_empty());
    assert!(eval_ctx(
        "context.outcome=success",
        json!({"outcome": "success"})
    ));
}

// --- Errors --------------------------------------------------------------------------

#[test]
fn parentheses_are_a_clear_error() {
    for (src, offset) in [
        ("(a)", 0),
        ("a && (b || c)", 5),
        ("a = b)", 5),
        ("a = (b)", 4),
        ("a=1 || b(", 8),
    ] {
        let e = err(src);
        assert_eq!(e.message, PAREN_MESSAGE, "{src}");
        assert_eq!(e.offset, offset, "{src}");
    }
}

#[test]
fn double_equals_suggests_single() {
    let e = err("outcome == succeeded");
    assert_plain(&e);
    assert!(
        e.message.contains("`==`") && e.message.contains("use `=`"),
        "{}",
        e.message
    );
    assert_eq!(e.offset, 8);
}

#[test]
fn lone_ampersand_and_pipe_are_errors() {
    let e = err("a & b");
    assert!(
        e.message.contains("single `&`") && e.message.contains("`&&`"),
        "{}",
        e.message
    );
    assert_eq!(e.offset, 2);
    let e = err("a=1 | b");
    assert!(
        e.message.contains("single `|`") && e.message.contains("`||`"),
        "{}",
        e.message
    );
    assert_eq!(e.offset, 4);
    let e = err("a matches x|y");
    assert!(
        e.message.contains("single `|`") && e.message.contains("quote"),
        "{}",
        e.message
    );
    assert_eq!(e.offset, 11);
}

#[test]
fn negated_word_operator_suggests_negating_the_clause() {
    let e = err("x !contains y");
    assert_plain(&e);
    assert!(e.message.contains("`!x contains ...`"), "{}", e.message);
    assert_eq!(e.offset, 2);
    let e = err("branch !matches y");
    assert!(e.message.contains("`!branch matches ...`"), "{}", e.message);
}

#[test]
fn unterminated_string_names_its_start() {
    let e = err(r#"a = "abc"#);
    assert_eq!(e.message, "unterminated string starting at offset 4");
    assert_eq!(e.offset, 4);
    let e = err(r#"a = "ends with escaped quote\""#);
    assert_eq!(e.message, "unterminated string starting at offset 4");
    // An earlier mistake is reported first.
    let e = err(r#"a == "abc"#);
    assert!(e.message.contains("`==`"), "{}", e.message);
}

#[test]
fn missing_value_after_an_operator() {
    for (src, op, offset) in [
        ("a >", ">", 3),
        ("a < && b", "<", 3),
        ("a >=", ">=", 4),
        ("a <=", "<=", 4),
        ("a contains", "contains", 10),
        ("a matches || b", "matches", 9),
    ] {
        let e = err(src);
        assert_eq!(e.message, format!("expected a value after `{op}`"), "{src}");
        assert_eq!(e.offset, offset, "{src}");
    }
    let e = err("a > = 1");
    assert_eq!(e.message, "expected a value after `>`, found `=`");
    assert_eq!(e.offset, 4);
}

#[test]
fn trailing_garbage_after_a_key() {
    let e = err("outcome succeeded");
    assert_plain(&e);
    assert_eq!(
        e.message,
        "expected a comparison operator, `&&` or `||` after `outcome`, found `succeeded`"
    );
    assert_eq!(e.offset, 8);
    let e = err("a !b");
    assert!(
        e.message.starts_with("expected a comparison operator"),
        "{}",
        e.message
    );
}

#[test]
fn trailing_garbage_after_a_value() {
    let e = err("preferred_label = Approve it");
    assert_plain(&e);
    assert!(
        e.message
            .starts_with("expected `&&` or `||` after `Approve`, found `it`"),
        "{}",
        e.message
    );
    assert!(e.message.contains("double quotes"), "{}", e.message);
    assert_eq!(e.offset, 26);
    let e = err(r#"a = "x" y"#);
    assert_eq!(e.message, "expected `&&` or `||` after `\"x\"`, found `y`");
    assert_eq!(e.offset, 8);
    let e = err("a = b c");
    assert_eq!(e.offset, 6);
}

#[test]
fn missing_key() {
    let e = err("&& a");
    assert_plain(&e);
    assert!(
        e.message.contains("expected a key") && e.message.contains("at the start"),
        "{}",
        e.message
    );
    assert_eq!(e.offset, 0);
    let e = err("a &&");
    assert_eq!(
        e.message,
        "expected a key such as `outcome` or `context.name` after `&&`, found the end of the condition"
    );
    assert_eq!(e.offset, 4);
    let e = err("a || !");
    assert!(e.message.contains("after `!`"), "{}", e.message);
    assert_eq!(e.offset, 6);
    let e = err("1abc = x");
    assert!(e.message.contains("found `1abc`"), "{}", e.message);
    let e = err("= x");
    assert!(e.message.contains("expected a key"), "{}", e.message);
    let e = err(r#""outcome" = x"#);
    assert!(e.message.contains("expected a key"), "{}", e.message);
}

#[test]
fn invalid_key_character_is_named() {
    let e = err("a/b = x");
    assert_eq!(
        e.message,
        "invalid character `/` in key `a/b`; keys may contain only letters, digits, `_`, `.` and `-`"
    );
    assert_eq!(e.offset, 1);
}

#[test]
fn long_tokens_are_shortened_in_messages() {
    let src = format!("a = b {}", "x".repeat(200));
    let e = err(&src);
    assert!(e.message.len() < 150, "{}", e.message);
}

#[test]
fn errors_are_plain_words_everywhere() {
    for src in [
        "a == b",
        "&&",
        "||",
        "!",
        "a &",
        "a |",
        "a = b c",
        "a b",
        "a >",
        "(",
        ")",
        "\"",
        "a=1 &&& b",
        "a ||| b",
        "a = !b",
        "x !matches y",
    ] {
        let e = err(src);
        assert_plain(&e);
        assert!(e.offset <= src.len(), "{src}: offset {}", e.offset);
        assert!(!e.message.is_empty());
    }
}

// --- Real conditions -----------------------------------------------------------------

#[test]
fn real_conditions_parse_and_evaluate() {
    let c = json!({
        "context.retries": 1,
        "tool.output": "done",
        "failure_class": "transient_infra",
        "review": "LGTM, ship it",
        "context.branch": "feat/login",
    });
    assert!(eval_with("outcome=succeeded", "succeeded", "", c.clone()));
    assert!(eval_with(
        "outcome!=succeeded && context.retries < 3",
        "failed",
        "",
        c.clone()
    ));
    assert!(!eval_with(
        "outcome!=succeeded && context.retries < 3",
        "succeeded",
        "",
        c.clone()
    ));
    assert!(eval_with("context.tool.output", "succeeded", "", c.clone()));
    // Another engine's key reads our command output when it is not set itself.
    let ours = json!({"command.output": "done"});
    assert!(eval_with(
        "context.tool.output=done",
        "succeeded",
        "",
        ours.clone()
    ));
    assert!(eval_with("tool.output", "succeeded", "", ours));
    assert!(!eval_with(
        "context.tool.output",
        "succeeded",
        "",
        json!({})
    ));
    assert!(eval_with(
        r#"preferred_label="Approve""#,
        "succeeded",
        "Approve",
        c.clone()
    ));
    assert!(eval_with(
        "context.failure_class=transient_infra || outcome=partially_succeeded",
        "failed",
        "",
        c.clone()
    ));
    assert!(eval_with(
        r#"context.review contains "LGTM""#,
        "succeeded",
        "",
        c.clone()
    ));
    assert!(eval_with(
        r#"context.branch matches "^feat/.*""#,
        "succeeded",
        "",
        c
    ));
}
