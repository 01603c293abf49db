//! Canonical JSON: forms, escapes, key order, and every refusal with its offset.

use super::*;

fn canon(text: &str) -> Result<String, CanonicalError> {
    canonicalize(text.as_bytes()).map(|b| String::from_utf8(b).expect("canonical is UTF-8"))
}

fn legacy(text: &str) -> Result<String, CanonicalError> {
    canonicalize_legacy_go(text.as_bytes())
        .map(|b| String::from_utf8(b).expect("canonical is UTF-8"))
}

#[test]
fn canonical_forms() {
    let check = |input: &str, expected: &str| {
        assert_eq!(canon(input).as_deref(), Ok(expected), "input {input:?}");
    };
    check("null", "null");
    check(" true ", "true");
    check("false", "false");
    check("0", "0");
    check("-0", "0");
    check("-1", "-1");
    check("18446744073709551615", "18446744073709551615");
    check("-9223372036854775808", "-9223372036854775808");
    check(r#"{ "b" : 1 , "a" : [ 1 , 2 ] }"#, r#"{"a":[1,2],"b":1}"#);
    check(
        r#"{"b":{"d":1,"c":2},"a":{}}"#,
        r#"{"a":{},"b":{"c":2,"d":1}}"#,
    );
    check("[]", "[]");
    check(r#""\u0041\/""#, r#""A/""#);
    check(r#""\"\\""#, r#""\"\\""#);
    check(
        r#""\b\f\n\r\t\u0000\u001f\u007f""#,
        "\"\\b\\f\\n\\r\\t\\u0000\\u001f\u{7f}\"",
    );
    check(r#""\u00e9\ud83d\ude00""#, "\"é😀\"");
    check("\"<>&\u{2028}\u{2029}\"", "\"<>&\u{2028}\u{2029}\"");
    check(r#""\u001B""#, r#""\u001b""#);
}

#[test]
fn keys_sort_by_utf16_code_units() {
    // U+FF61 (one UTF-16 unit 0xFF61) sorts AFTER U+1F600 (surrogates 0xD83D..) in UTF-16,
    // but BEFORE it in UTF-8 byte order. JCS wants UTF-16.
    let text = "{\"\u{ff61}\":1,\"\u{1f600}\":2,\"a\":3,\"\u{e9}\":4}";
    assert_eq!(
        canon(text).as_deref(),
        Ok("{\"a\":3,\"\u{e9}\":4,\"\u{1f600}\":2,\"\u{ff61}\":1}")
    );
    assert_eq!(cmp_keys("\u{1f600}", "\u{ff61}"), std::cmp::Ordering::Less);
}

#[test]
fn legacy_go_escapes_only_the_html_set() {
    let check = |input: &str, expected: &str| {
        assert_eq!(legacy(input).as_deref(), Ok(expected), "input {input:?}");
    };
    check(
        "\"<a> & \u{2028}\u{2029}\"",
        r#""\u003ca\u003e \u0026 \u2028\u2029""#,
    );
    check("\"é😀\\n\"", "\"é😀\\n\"");
    check(r#"{"<":"&"}"#, r#"{"\u003c":"\u0026"}"#);
    check("1", "1");
}

#[test]
fn refusals() {
    use CanonicalError::*;
    let check = |input: &[u8], expected: CanonicalError| {
        assert_eq!(
            parse_closed(input),
            Err(expected),
            "input {:?}",
            String::from_utf8_lossy(input)
        );
    };
    check(b"1.0", Float { offset: 0 });
    check(b"1e2", Float { offset: 0 });
    check(b"[1E+2]", Float { offset: 1 });
    check(b"-0.5", Float { offset: 0 });
    check(br#"{"a":{"b":[0.1]}}"#, Float { offset: 11 });
    check(b"18446744073709551616", IntegerRange { offset: 0 });
    check(b"-9223372036854775809", IntegerRange { offset: 0 });
    check(br#"{"a":1,"a":2}"#, DuplicateKey { offset: 7 });
    check(br#"{"a":1,"\u0061":2}"#, DuplicateKey { offset: 7 });
    check(br#""\ud800""#, LoneSurrogate { offset: 1 });
    check(br#""\udc00""#, LoneSurrogate { offset: 1 });
    check(br#""\ud800\u0041""#, LoneSurrogate { offset: 1 });
    check(b"\"\xff\"", InvalidUtf8 { offset: 1 });
    check(
        b"01",
        Malformed {
            offset: 1,
            expected: "no leading zero",
        },
    );
    check(
        b"",
        Malformed {
            offset: 0,
            expected: "a JSON value",
        },
    );
    check(
        b"[1,]",
        Malformed {
            offset: 3,
            expected: "a JSON value",
        },
    );
    check(
        b"{\"a\":1,}",
        Malformed {
            offset: 7,
            expected: "an object key",
        },
    );
    check(
        b"1 2",
        Malformed {
            offset: 2,
            expected: "end of input",
        },
    );
    check(
        b"\"a\nb\"",
        Malformed {
            offset: 2,
            expected: "no raw control character in a string",
        },
    );
    check(
        b"\"\\x\"",
        Malformed {
            offset: 1,
            expected: "a valid escape",
        },
    );
    check(
        b"\"abc",
        Malformed {
            offset: 4,
            expected: "'\"' closing the string",
        },
    );
    check(
        b"nul",
        Malformed {
            offset: 0,
            expected: "null",
        },
    );
    check(
        b"1.",
        Malformed {
            offset: 2,
            expected: "a digit after '.'",
        },
    );
    check(
        b"-",
        Malformed {
            offset: 1,
            expected: "a digit",
        },
    );
    check(
        b"\xef\xbb\xbf{}",
        Malformed {
            offset: 0,
            expected: "a JSON value",
        },
    );
}

#[test]
fn depth_is_bounded_at_the_edge() {
    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert!(parse_closed(nested(DEPTH_MAX).as_bytes()).is_ok());
    assert_eq!(
        parse_closed(nested(DEPTH_MAX + 1).as_bytes()),
        Err(CanonicalError::TooDeep {
            offset: DEPTH_MAX,
            depth_max: DEPTH_MAX
        })
    );
    let mut v = Value::Null;
    for _ in 0..DEPTH_MAX {
        v = Value::Array(vec![v]);
    }
    assert!(to_canonical(&v).is_ok());
    let v = Value::Array(vec![v]);
    assert!(matches!(
        to_canonical(&v),
        Err(CanonicalError::TooDeep { .. })
    ));
}

#[test]
fn float_values_built_in_code_are_refused() {
    assert_eq!(
        to_canonical(&serde_json::json!({"a": 1.5})),
        Err(CanonicalError::FloatValue)
    );
    assert_eq!(
        to_canonical(&serde_json::json!({"a": 2})),
        Ok(b"{\"a\":2}".to_vec())
    );
}

#[test]
fn canonical_output_is_a_fixed_point() {
    let text = "{\"z\":[{\"y\":\"\\u2028<&>\u{1f600}\",\"x\":-5}],\"\u{e9}\":null}";
    let once = canonicalize(text.as_bytes()).expect("valid");
    assert_eq!(canonicalize(&once), Ok(once.clone()));
    let go = canonicalize_legacy_go(text.as_bytes()).expect("valid");
    assert_eq!(canonicalize_legacy_go(&go), Ok(go.clone()));
    // Both forms parse back to the same value.
    assert_eq!(parse_closed(&once), parse_closed(&go));
}
