//! The model stylesheet's tests: parsing, selectors and specificity, resolution per node,
//! the canonical text form, and the diagnostics.
//! Must not: touch node attributes or the model catalog beyond what the stylesheet reads.

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
    let src = "/* head */ * /* s */ { /* a */ model: /* b */ m /* c */ ; /* d */ provider: p }\n\
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
        "*", ".", "#", "box", "a", "model", ":", ";", "{", "}", " ", "\n", "\"", "/*", "*/", ",",
        ">", "x y", "-", "_", "é", "gpt-5.2",
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
