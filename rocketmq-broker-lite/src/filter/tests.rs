//! The grammar and evaluation suite. Cases marked "Java:" are ported from Apache RocketMQ
//! 4.9.8's `ExpressionTest` / `ParserTest`; the others follow from reading its expression
//! classes (noted where the behaviour surprises).

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;

fn props(kv: &[(&str, &str)]) -> HashMap<String, String> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn compile(s: &str) -> SqlFilter {
    SqlFilter::compile(s).unwrap_or_else(|e| panic!("{s:?} should compile: {e}"))
}

/// `expr` evaluated over `kv` gives `want` (None: NULL).
fn check(expr: &str, kv: &[(&str, &str)], want: Option<bool>) {
    let f = compile(expr);
    let got = f.evaluate(&props(kv));
    assert_eq!(got, Ok(want), "{expr} over {kv:?}");
    assert_eq!(f.matches(&props(kv)), want == Some(true));
}

/// `expr` fails to evaluate over `kv` (Java throws; the message does not match).
fn check_error(expr: &str, kv: &[(&str, &str)]) {
    let f = compile(expr);
    assert!(f.evaluate(&props(kv)).is_err(), "{expr} over {kv:?}");
    assert!(!f.matches(&props(kv)));
}

fn refused(expr: &str) {
    assert!(
        SqlFilter::compile(expr).is_err(),
        "{expr:?} should not compile"
    );
}

const AND: &str = "a=3 and b<>4 And c>5 AND d<=4";
const OR: &str = "a=3 or b<>4 Or c>5 OR d<=4";

#[test]
fn java_parser_test_valid_and_invalid() {
    // Java: ParserTest.testParse_valid (`now` is a property name).
    for e in [
        AND,
        OR,
        "a in ('3', '4', '5')",
        "(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))",
        "(a between 2 and 10) AND (b not between 6 and 9)",
        "a is null",
        "a is not null",
        "a <= now",
    ] {
        compile(e);
    }
    // Java: testParse_invalid, testParse_decimalOverFlow, testParse_illegalBetween.
    refused("a and between 2 and 10");
    refused("a > 100000000000000000000000");
    refused(" a between 10 and 0");
    // Java: testEquals: blanks do not matter.
    assert_eq!(
        compile(AND).to_string(),
        compile("a=3  and    b<>4 And c>5 AND d<=4").to_string()
    );
    assert_ne!(compile(AND).to_string(), compile(OR).to_string());
}

#[test]
fn java_expression_test_and_or() {
    // Java: testEvaluate_andTrue / andFalse (string values are read as ints).
    check(
        AND,
        &[("a", "3"), ("b", "5"), ("c", "6"), ("d", "1")],
        Some(true),
    );
    check(
        AND,
        &[("a", "4"), ("b", "5"), ("c", "6"), ("d", "1")],
        Some(false),
    );
    // Java: testEvaluate_orTrue, each disjunct in turn.
    check(OR, &[("a", "3")], Some(true));
    check(OR, &[("a", "4"), ("b", "5")], Some(true));
    check(OR, &[("a", "4"), ("b", "4"), ("c", "6")], Some(true));
    check(
        OR,
        &[("a", "4"), ("b", "4"), ("c", "3"), ("d", "2")],
        Some(true),
    );
    // Java: testEvaluate_orFalse.
    check(
        OR,
        &[("a", "4"), ("b", "4"), ("c", "3"), ("d", "10")],
        Some(false),
    );
}

#[test]
fn java_expression_test_in_between_null() {
    let inx = "a in ('3', '4', '5')";
    for v in ["3", "4", "5"] {
        check(inx, &[("a", v)], Some(true));
        check("a not in ('3', '4', '5')", &[("a", v)], Some(false));
    }
    check(inx, &[("a", "8")], Some(false));
    check("a not in ('3', '4', '5')", &[("a", "8")], Some(true));
    check(inx, &[], None);
    check("a not in ('3', '4', '5')", &[], None);

    let b = "a between 2 and 10";
    let nb = "a not between 2 and 10";
    for v in ["2", "10", "3"] {
        check(b, &[("a", v)], Some(true));
        check(nb, &[("a", v)], Some(false));
    }
    for v in ["1", "11"] {
        check(b, &[("a", v)], Some(false));
        check(nb, &[("a", v)], Some(true));
    }
    check(b, &[], None);

    check("a is null", &[("abc", "2")], Some(true));
    check("a is null", &[("a", "2")], Some(false));
    check("a is not null", &[("a", "2")], Some(true));
    check("a is not null", &[("abc", "2")], Some(false));
}

#[test]
fn java_expression_test_strings_booleans_numbers() {
    // Java: testEvaluate_equal, nullOr, boolean, stringHasString.
    check("a is not null and a='hello'", &[("a", "hello")], Some(true));
    check("a is not null and a='hello'", &[], Some(false));
    let null_or = "a is null OR a='hello'";
    check(null_or, &[], Some(true));
    check(null_or, &[("a", "hello")], Some(true));
    check(null_or, &[("a", "abc")], Some(false));
    check(
        "a=TRUE OR b=FALSE",
        &[("a", "true"), ("b", "false")],
        Some(true),
    );
    check(
        "a=TRUE OR b=FALSE",
        &[("a", "false"), ("b", "true")],
        Some(false),
    );
    check(
        "TAGS is not null and TAGS='''''tag'''''",
        &[("TAGS", "''tag''")],
        Some(true),
    );
    // Java: testEvaluate_exponent, floatNumber, twoVariable(Gt).
    check("a > 3.1E10", &[("a", "3.1415E10")], Some(true));
    check("a > 3.14", &[("a", "3.1415")], Some(true));
    check("a > b", &[("a", "10"), ("b", "20")], Some(false));
    check("a > b", &[("a", "20"), ("b", "10")], Some(true));
    // Java: testEvaluate_stringCompare.
    check("a between up and low", &[("a", "3.14")], None);
    check_error(
        "a between up and low",
        &[("a", "3.14"), ("up", "up"), ("low", "low")],
    );
    check_error(
        "key is not null and key between 0 and 100",
        &[("key", "con")],
    );
    check_error("a between 0 and 100", &[("a", "abc")]);
    check("a=b", &[("a", "3.14"), ("b", "3.14")], Some(true));
    check("a<>b", &[("a", "3.14"), ("b", "3.14")], Some(false));
    check("a<>b", &[("a", "3.14"), ("b", "3.141")], Some(true));
}

#[test]
fn missing_properties_are_null() {
    check("a = 'x'", &[], None);
    check("a <> 'x'", &[], None);
    check("a > 1", &[], None);
    check("NOT (a > 1)", &[], None);
    check("a > 1 AND b = 'y'", &[("b", "y")], None);
    check("a > 1 AND b = 'y'", &[("b", "n")], Some(false));
    check("a > 1 OR b = 'y'", &[("b", "y")], Some(true));
    check("a > 1 OR b = 'y'", &[("b", "n")], None);
    // Java's `=` answers FALSE (not NULL) when only the right side is NULL.
    check("'x' = a", &[], Some(false));
    check("'x' <> a", &[], Some(true));
    // Two missing properties are equal.
    check("a = b", &[], Some(true));
    // A negated missing property is NULL.
    check("-a < 0", &[], None);
}

#[test]
fn type_conversions_follow_java() {
    // int against a string: Integer.valueOf.
    check("a = 3", &[("a", "3")], Some(true));
    check("a = 3", &[("a", "+3")], Some(true));
    check_error("a = 3", &[("a", "3.0")]);
    check_error("a = 3", &[("a", "x")]);
    check_error("a <> 3", &[("a", "x")]);
    check_error("a > 1 OR b = 'y'", &[("a", "one"), ("b", "y")]);
    // long against a string, and int/long promotion.
    check("a = 3000000000", &[("a", "3000000000")], Some(true));
    check_error("a = 3", &[("a", "3000000000")]);
    // The literal's type decides: 2147483647 is an int, so the string must read as an int.
    check_error("a > 2147483647", &[("a", "3000000000")]);
    check("a > 2147483648", &[("a", "3000000000")], Some(true));
    // double against a string: Double.valueOf (suffixes, NaN, Infinity, blanks).
    check("a = 1.5", &[("a", "1.5d")], Some(true));
    check("a = 1.5", &[("a", " 1.5 ")], Some(true));
    check("a > 1.5", &[("a", "NaN")], Some(true));
    check("a > 1.5", &[("a", "-Infinity")], Some(false));
    check_error("a > 1.5", &[("a", "inf")]);
    check_error("a > 1.5", &[("a", "++2")]);
    // int widened to double.
    check("a > 1.5", &[("a", "2")], Some(true));
    check("2 > 1.5", &[], Some(true));
    check("3000000000 > 1.5", &[], Some(true));
    check("1 = 1.0", &[], Some(true));
    check("1 < 2L", &[], Some(true));
    // Two strings under <, >: both read as doubles.
    check("a < b", &[("a", "9"), ("b", "10")], Some(true));
    check_error("a < b", &[("a", "x"), ("b", "10")]);
    // Strings compare for equality as strings.
    check("a = b", &[("a", "1"), ("b", "1.0")], Some(false));
    // A string against a boolean: "true" in any case is TRUE, anything else FALSE.
    check("a = TRUE", &[("a", "TrUe")], Some(true));
    check("a = FALSE", &[("a", "yes")], Some(true));
    // Java casts a boolean on the left to String and fails.
    check_error("TRUE = a", &[("a", "true")]);
    // Numbers and booleans never meet: -1.
    check("1 = TRUE", &[], Some(false));
    // A property alone is a boolean cast: a string is never TRUE.
    check("a", &[("a", "true")], Some(false));
    check("a", &[], None);
    check("NOT a", &[("a", "x")], Some(true));
    // Negation: numbers only.
    check("-a < 0", &[("a", "3")], None);
    check("-3 < 0", &[], Some(true));
    check("- -3 > 0", &[], Some(true));
    check("+3 = 3", &[], Some(true));
    check("-2147483648 = -2147483648", &[], Some(true));
}

/// Java's `Integer.valueOf` / `Long.valueOf` read any Unicode decimal digit of the BMP
/// (`Character.digit(c, 10)`), `Double.valueOf` only ASCII ones.
#[test]
fn integer_conversions_read_unicode_digits_as_java() {
    // Full-width (CJK input), Arabic-Indic, Devanagari.
    check("level > 2", &[("level", "\u{ff13}")], Some(true));
    check("a = 3", &[("a", "\u{663}")], Some(true));
    check("a = 42", &[("a", "\u{96a}\u{968}")], Some(true));
    check("a = -12", &[("a", "-\u{ff11}\u{ff12}")], Some(true));
    check("a = 12", &[("a", "+\u{ff11}2")], Some(true));
    check("a = 3000000000", &[("a", "\u{ff13}000000000")], Some(true));
    check("a <> 5", &[("a", "\u{ff13}")], Some(true));
    // Still an int: out of range, a sign alone, a full-width sign, a second sign.
    check_error("a = 3", &[("a", "\u{ff13}000000000")]);
    check_error("a = 3", &[("a", "-")]);
    check_error("a = 3", &[("a", "")]);
    check_error("a = 3", &[("a", "\u{ff0b}3")]);
    check_error("a = 3", &[("a", "+-3")]);
    // A digit outside the BMP is two UTF-16 units to Java, neither a digit.
    check_error("a = 3", &[("a", "\u{1d7d1}")]);
    // Not decimal digits: superscripts, Roman numerals.
    check_error("a = 3", &[("a", "\u{b3}")]);
    check_error("a = 3", &[("a", "\u{2162}")]);
    // Double.valueOf is ASCII only.
    check_error("a = 1.5", &[("a", "\u{ff11}.5")]);
    check_error("a > 2", &[("a", "\u{ff13}.0")]);
}

#[test]
fn constants_and_literals() {
    check("TRUE", &[], Some(true));
    check("FALSE", &[], Some(false));
    check("NULL", &[], None);
    check("NOT TRUE", &[], Some(false));
    check("NOT NULL", &[], None);
    check("TRUE OR NULL", &[], Some(true));
    check("FALSE AND NULL", &[], Some(false));
    check("TRUE AND NULL", &[], None);
    check("a = 'it''s'", &[("a", "it's")], Some(true));
    check("a = ''", &[("a", "")], Some(true));
    check("a = 'multi\nline'", &[("a", "multi\nline")], Some(true));
    check("a = 10L", &[("a", "10")], Some(true));
    check("a > .5", &[("a", "0.6")], Some(true));
    check("a > 5.", &[("a", "6")], Some(true));
    check("a < 1E3", &[("a", "999")], Some(true));
    check("a = 'é'", &[("a", "é")], Some(true));
    check("a IN ('é', 'x')", &[("a", "é")], Some(true));
    // Keywords in any case; property names are case sensitive.
    check("a iS nOt NuLl", &[("a", "1")], Some(true));
    check("A = '1'", &[("a", "1")], None);
    check("$x_1 = 'v'", &[("$x_1", "v")], Some(true));
    // Comments.
    check("a = 1 -- one\n", &[("a", "1")], Some(true));
    check("/* c */ a = 1", &[("a", "1")], Some(true));
}

#[test]
fn precedence_follows_the_grammar() {
    // AND binds tighter than OR.
    check("a = 1 OR a = 2 AND b = 3", &[("a", "1")], Some(true));
    check(
        "(a = 1 OR a = 2) AND b = 3",
        &[("a", "1"), ("b", "4")],
        Some(false),
    );
    // BETWEEN's AND belongs to it.
    check(
        "a BETWEEN 1 AND 3 AND b = 'x'",
        &[("a", "2"), ("b", "x")],
        Some(true),
    );
    // NOT is a prefix of the operand, tighter than comparisons: `NOT a = 1` is
    // `(NOT a) = 1`, a boolean against an int, never TRUE.
    check("NOT a = 1", &[("a", "2")], Some(false));
    check("NOT (a = 1)", &[("a", "2")], Some(true));
    check("NOT NOT (a = 1)", &[("a", "1")], Some(true));
    // Comparisons chain on the boolean result (`=` accepts booleans).
    check("a = 1 = TRUE", &[("a", "1")], Some(true));
}

#[test]
fn java_refuses_these() {
    for e in [
        "",
        "   ",
        "a =",
        "a = 1 AND",
        "(a = 1",
        "a IN ()",
        "a IN (1, 2)",
        "a IN 'x'",
        "1 IN ('x')",
        "a NOT LIKE 'x'",
        "a NOT 1",
        "a IS 1",
        "a IS NOT 1",
        "a = NULL",
        "NULL = a",
        "a <> NULL",
        "TRUE = 1",
        "TRUE = 'x'",
        "a > 'x'",
        "'x' < a",
        "a > TRUE",
        "a > NULL",
        "(a > 1) > 2",
        "NOT a > 1",
        "a BETWEEN 'a' AND 'b'",
        "a BETWEEN 1 AND NULL",
        "a BETWEEN 2 AND 1",
        "a BETWEEN 1 AND TRUE",
        "a > 0.0",
        "a > 0.",
        "a > 1e400",
        "a > 1e-400",
        "9223372036854775808",
        "a > 9223372036854775808",
        "a = -9223372036854775808",
        "1",
        "'x'",
        "-a",
        "a = 1 AND 2",
        "2 OR a = 1",
        "NOT 1",
        "a != 1",
        "a.b = 1",
        "a = \"x\"",
        "a = 'open",
        "a = 1 /* open",
        "a = 1 !",
    ] {
        refused(e);
    }
}

#[test]
fn java_accepts_these() {
    // Bounds that are not constants are not checked for order.
    check("a BETWEEN -1 AND -5", &[("a", "-3")], Some(false));
    check("a BETWEEN 1 AND 1", &[("a", "1")], Some(true));
    check("a BETWEEN 1 AND 2.5", &[("a", "2")], Some(true));
    check("a NOT BETWEEN 2 AND 1", &[("a", "3")], Some(true));
    check("a > 9223372036854775807", &[("a", "1")], Some(false));
    check("a = -2147483649", &[("a", "-2147483649")], Some(true));
    // IS NULL takes anything.
    check("1 IS NULL", &[], Some(false));
    check("(a > 1) IS NULL", &[], Some(true));
    check("NULL IS NULL", &[], Some(true));
    // Text after a complete expression is ignored, as Java's parser does.
    let f = compile("a = 1 b = 2");
    assert_eq!(f.ignored_from(), Some(6));
    assert!(f.matches(&props(&[("a", "1")])));
    assert_eq!(compile("a = 1)").ignored_from(), Some(5));
    assert_eq!(compile("a = 1").ignored_from(), None);
    assert_eq!(compile("a = 1 -- note\n").ignored_from(), None);
    // Hence these, which read as `a = 0`, `a = 1` and `a = 1`.
    assert_eq!(compile("a = 0x1F").ignored_from(), Some(5));
    assert_eq!(compile("a = 1e").ignored_from(), Some(5));
    assert!(compile("a = 1 -- no newline").ignored_from().is_some());
    // A parenthesised property is still a property.
    check("(a) IN ('x')", &[("a", "x")], Some(true));
}

#[test]
fn bounds() {
    let long = format!("a IN ({})", vec!["'x'"; MAX_EXPRESSION_LEN / 4].join(","));
    assert!(matches!(
        SqlFilter::compile(&long),
        Err(FilterError::TooLong { .. })
    ));
    let ok = format!(
        "{}a = 1{}",
        "(".repeat(MAX_DEPTH - 2),
        ")".repeat(MAX_DEPTH - 2)
    );
    compile(&ok);
    let deep = format!(
        "{}a = 1{}",
        "(".repeat(MAX_DEPTH + 1),
        ")".repeat(MAX_DEPTH + 1)
    );
    assert_eq!(
        SqlFilter::compile(&deep).unwrap_err(),
        FilterError::TooDeep { max: MAX_DEPTH }
    );
    let prefixes = format!("{}1 = 1", "- ".repeat(MAX_DEPTH + 1));
    assert_eq!(
        SqlFilter::compile(&prefixes).unwrap_err(),
        FilterError::TooDeep { max: MAX_DEPTH }
    );
    let nots = format!("{}TRUE", "NOT ".repeat(MAX_DEPTH + 1));
    assert!(SqlFilter::compile(&nots).is_err());
    // A long chain of ORs is flat, not deep.
    let chain = vec!["a = 'x'"; 1000].join(" OR ");
    let f = compile(&chain);
    assert!(f.matches(&props(&[("a", "x")])));
}

#[test]
fn errors_name_the_place() {
    match SqlFilter::compile("a = 1 AND AND") {
        Err(FilterError::Syntax { pos, .. }) => assert_eq!(pos, 10),
        other => panic!("{other:?}"),
    }
    match SqlFilter::compile("a ! 1") {
        Err(FilterError::Lexical { pos, .. }) => assert_eq!(pos, 2),
        other => panic!("{other:?}"),
    }
    let e = SqlFilter::compile("a > 'x'").unwrap_err();
    assert_eq!(e.to_string(), "Value ''x'' cannot be compared.");
}

#[test]
fn string_map_properties() {
    let m = rocketmq_remoting::protocol::message::decode_properties(
        "TAGS\u{1}TagA\u{2}price\u{1}12\u{2}price\u{1}15",
    );
    let f = compile("TAGS = 'TagA' AND price > 14");
    assert!(f.matches(&m));
    let slice: &[(&str, &str)] = &[("price", "1"), ("price", "20")];
    assert!(compile("price > 14").matches(slice));
}

fn arb_props() -> impl Strategy<Value = HashMap<String, String>> {
    proptest::collection::hash_map(
        prop_oneof![Just("a".to_string()), Just("b".to_string()), "[a-c]{1,2}"],
        prop_oneof![
            Just("1".to_string()),
            Just("-2.5".to_string()),
            Just("true".to_string()),
            Just("NaN".to_string()),
            ".{0,6}",
        ],
        0..4,
    )
}

/// Expressions built from the grammar's pieces, most of them compile.
fn arb_expr() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just("'x'".to_string()),
        Just("1".to_string()),
        Just("2.5".to_string()),
        Just("TRUE".to_string()),
        Just("NULL".to_string()),
        Just("3000000000".to_string()),
    ];
    atom.prop_recursive(6, 64, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(l, r)| format!("{l} = {r}")),
            (inner.clone(), inner.clone()).prop_map(|(l, r)| format!("{l} <> {r}")),
            (inner.clone(), inner.clone()).prop_map(|(l, r)| format!("{l} > {r}")),
            (inner.clone(), inner.clone()).prop_map(|(l, r)| format!("{l} <= {r}")),
            (inner.clone(), inner.clone()).prop_map(|(l, r)| format!("({l}) AND ({r})")),
            (inner.clone(), inner.clone()).prop_map(|(l, r)| format!("({l}) OR ({r})")),
            inner.clone().prop_map(|e| format!("NOT ({e})")),
            inner.clone().prop_map(|e| format!("-{e}")),
            inner.clone().prop_map(|e| format!("{e} IS NOT NULL")),
            inner.clone().prop_map(|e| format!("{e} BETWEEN 1 AND 2")),
            inner.clone().prop_map(|e| format!("{e} IN ('x', '1')")),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_text_never_panics(s in ".{0,80}", p in arb_props()) {
        if let Ok(f) = SqlFilter::compile(&s) {
            prop_assert!(f.height() <= MAX_DEPTH);
            let _ = f.evaluate(&p);
            let _ = f.to_string();
        }
    }

    #[test]
    fn grammar_shaped_text_never_panics(s in arb_expr(), p in arb_props()) {
        if let Ok(f) = SqlFilter::compile(&s) {
            prop_assert!(f.height() <= MAX_DEPTH);
            let r = f.evaluate(&p);
            // NOT flips TRUE and FALSE and keeps NULL and errors.
            let neg = SqlFilter::compile(&format!("NOT ({s})")).map(|n| n.evaluate(&p));
            if let Ok(neg) = neg {
                match (r, neg) {
                    (Ok(v), Ok(n)) => prop_assert_eq!(v.map(|b| !b), n),
                    (Err(_), Err(_)) => {}
                    (a, b) => prop_assert!(false, "{:?} vs {:?}", a, b),
                }
            }
        }
    }

    #[test]
    fn token_soup_never_panics(
        parts in proptest::collection::vec(
            prop_oneof![
                Just("a"), Just("'s'"), Just("1"), Just(".5"), Just("("), Just(")"),
                Just("="), Just("<>"), Just("<"), Just(">="), Just("AND"), Just("OR"),
                Just("NOT"), Just("IN"), Just("BETWEEN"), Just("IS"), Just("NULL"),
                Just(","), Just("-"), Just("+"), Just("TRUE"), Just("--"), Just("\n"),
            ],
            0..40,
        ),
        p in arb_props(),
    ) {
        let s = parts.join(" ");
        if let Ok(f) = SqlFilter::compile(&s) {
            prop_assert!(f.height() <= MAX_DEPTH);
            let _ = f.evaluate(&p);
        }
    }
}

/// Compiles `expr` on a thread with a small stack, formats the outcome, evaluates it and
/// drops it there. Before chains counted toward [`MAX_DEPTH`], a chain as long as the
/// expression allows built a tree about 10,000 levels deep, and formatting, evaluating or
/// dropping it recursed once per level: a stack overflow, which aborts the whole broker.
/// (A debug build's parser takes about 17 KiB of stack per level of parentheses, so this
/// stack is only for expressions with few of them.)
fn compile_on_small_stack(expr: String) -> Result<usize, FilterError> {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let compiled = SqlFilter::compile(&expr);
            match &compiled {
                Ok(f) => {
                    let _ = f.to_string();
                    let _ = f.evaluate(&props(&[("a", "1")]));
                }
                Err(e) => {
                    let message = e.to_string();
                    assert!(message.len() < 1024, "{} bytes of error", message.len());
                }
            }
            compiled.map(|f| f.height())
        })
        .expect("spawn")
        .join()
        .expect("the compile thread panicked")
}

#[test]
fn left_nested_chains_count_toward_the_depth_bound() {
    let too_deep = Err(FilterError::TooDeep { max: MAX_DEPTH });
    let longest = |unit: &str, fixed: usize| (MAX_EXPRESSION_LEN - fixed) / unit.len();
    // The review's case: `>` refuses the `<>` chain, and its error message showed the tree.
    let ne_then_gt = format!("(a{})>1", "<>a".repeat(longest("<>a", "(a)>1".len())));
    assert!(ne_then_gt.len() > 16_000);
    assert_eq!(compile_on_small_stack(ne_then_gt), too_deep);
    // Valid chains, which would be evaluated for every message.
    for unit in ["<>a", "=a", " IS NULL", " IS NOT NULL", ">a"] {
        let chain = format!("a{}", unit.repeat(longest(unit, 1)));
        let got = compile_on_small_stack(chain);
        if unit == ">a" {
            // Java's operand checks end an ordering chain at once.
            assert!(matches!(got, Err(FilterError::Invalid { .. })), "{got:?}");
        } else {
            assert_eq!(got, too_deep, "{unit}");
        }
    }
    // The bound is exact: each `=` is one level, each `<>` two (NOT of `=`).
    let eq = |n: usize| format!("a{}", "=a".repeat(n));
    assert_eq!(compile_on_small_stack(eq(MAX_DEPTH)), Ok(MAX_DEPTH));
    assert_eq!(compile_on_small_stack(eq(MAX_DEPTH + 1)), too_deep);
    let ne = |n: usize| format!("a{}", "<>a".repeat(n));
    assert_eq!(compile_on_small_stack(ne(MAX_DEPTH / 2)), Ok(MAX_DEPTH));
    assert_eq!(compile_on_small_stack(ne(MAX_DEPTH / 2 + 1)), too_deep);
    // Chains in parentheses in chains add up (on this thread's larger stack: the parser
    // recurses once per level of parentheses).
    let height = |e: String| SqlFilter::compile(&e).map(|f| f.height());
    let nested =
        |levels: usize| (0..levels).fold("a".to_string(), |e, _| format!("({e}<>a<>a<>a) = a"));
    assert_eq!(height(nested(9)), Ok(63));
    assert_eq!(height(nested(10)), too_deep);
    // So do AND and OR lists, BETWEEN and prefixes (each level here: an OR and an AND).
    let lists =
        |levels: usize| (0..levels).fold("a".to_string(), |e, _| format!("({e} OR b) AND c"));
    assert_eq!(height(lists(20)), Ok(41));
    // 40 levels of parentheses are within the bound, the 81 levels of the tree are not.
    assert_eq!(height(lists(40)), too_deep);
    let prefixed_between = |levels: usize| {
        let low = (0..levels).fold("1".to_string(), |e, _| format!("-{e}"));
        format!("a BETWEEN {low} AND 2")
    };
    assert_eq!(height(prefixed_between(MAX_DEPTH - 2)), Ok(MAX_DEPTH));
    assert_eq!(height(prefixed_between(MAX_DEPTH - 1)), too_deep);
    // A chain within the bound evaluates as Java's left-nested tree.
    check("a = 1 = TRUE", &[("a", "1")], Some(true));
    check("a = 1 = TRUE", &[("a", "2")], Some(false));
    check("a IS NULL IS NULL", &[], Some(false));
}

#[test]
fn error_messages_are_bounded() {
    // A wide tree (a flat OR) in an error message is cut short.
    let wide = format!("({}) > 1", vec!["a = 'x'"; 1000].join(" OR "));
    let e = SqlFilter::compile(&wide).unwrap_err();
    let message = e.to_string();
    assert!(message.len() < 1024, "{} bytes", message.len());
    assert!(
        message.starts_with("Value '((a = 'x') OR (a = 'x')") && message.contains("...'"),
        "{message}"
    );
}

#[test]
fn copies_of_between_operands_count_toward_the_size_bound() {
    // `BETWEEN` puts its value operand in both of its comparisons: nested ones double the
    // tree, and 400 bytes made 2^21 nodes (seconds to compile, 50 MB to show).
    let doubling = |levels: usize| {
        let e = (0..levels).fold("a".to_string(), |e, _| format!("-({e} BETWEEN 1 AND 2)"));
        format!("{e} > 0")
    };
    let f = compile(&doubling(12));
    assert_eq!(f.height(), 37);
    assert!(f.to_string().len() > 100_000);
    for levels in [13, 21] {
        assert_eq!(
            SqlFilter::compile(&doubling(levels)).unwrap_err(),
            FilterError::TooLarge { max: MAX_NODES },
            "{levels}"
        );
    }
    // Wide expressions as long as allowed stay well within the bound.
    let wide = vec!["a = 'x'"; MAX_EXPRESSION_LEN / 12].join(" OR ");
    compile(&wide);
    let wide = vec!["a <> 1"; MAX_EXPRESSION_LEN / 11].join(" AND ");
    compile(&wide);
    let wide = vec!["a IS NOT NULL"; MAX_EXPRESSION_LEN / 18].join(" OR ");
    compile(&wide);
}
