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

/// Property tests: what holds for every value, not only the rows above. Case counts are kept
/// small (each property runs in milliseconds) so `cargo test` does not notice them.
pub(crate) mod props {
    use super::*;
    use proptest::prelude::*;

    /// Cases per property here: enough to meet every escape and nesting shape in a few runs.
    pub(crate) const CASES: u32 = 96;

    /// Strings that exercise every escaping rule: the HTML set Go escapes, U+2028/U+2029,
    /// controls, quotes, backslashes, non-BMP characters, and plain text.
    pub(crate) fn tricky_string() -> impl Strategy<Value = String> {
        let pieces = prop_oneof![
            Just("<".to_owned()),
            Just(">".to_owned()),
            Just("&".to_owned()),
            Just("\u{2028}".to_owned()),
            Just("\u{2029}".to_owned()),
            Just("\"".to_owned()),
            Just("\\".to_owned()),
            Just("/".to_owned()),
            Just("\u{7f}".to_owned()),
            Just("😀".to_owned()),
            Just("\u{ff61}".to_owned()),
            (0u32..0x20).prop_map(|c| char::from_u32(c).unwrap().to_string()),
            "[a-zé ]{0,6}",
        ];
        prop::collection::vec(pieces, 0..6).prop_map(|p| p.concat())
    }

    /// Integer-only JSON values, a few levels deep.
    pub(crate) fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            tricky_string().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(tricky_string(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn contains_go_escaped(v: &Value) -> bool {
        match v {
            Value::String(s) => s.contains(['<', '>', '&', '\u{2028}', '\u{2029}']),
            Value::Array(a) => a.iter().any(contains_go_escaped),
            Value::Object(m) => m.iter().any(|(k, v)| {
                contains_go_escaped(&Value::String(k.clone())) || contains_go_escaped(v)
            }),
            _ => false,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(CASES))]

        /// Writing then reading gives the value back, and the canonical form is a fixed point.
        #[test]
        fn canonical_text_round_trips(v in json_value()) {
            let canonical = to_canonical(&v).unwrap();
            prop_assert_eq!(parse_closed(&canonical).unwrap(), v);
            prop_assert_eq!(canonicalize(&canonical).unwrap(), canonical);
        }

        /// Formatting does not matter: pretty-printed text of a value canonicalises to the
        /// value's canonical bytes.
        #[test]
        fn whitespace_and_order_do_not_change_the_bytes(v in json_value()) {
            let pretty = serde_json::to_vec_pretty(&v).unwrap();
            prop_assert_eq!(canonicalize(&pretty).unwrap(), to_canonical(&v).unwrap());
        }

        /// The legacy Go form denotes the same value, and differs from RFC 8785 exactly when a
        /// string holds one of the characters Go escapes.
        #[test]
        fn the_legacy_form_is_the_same_value(v in json_value()) {
            let legacy = to_canonical_legacy_go(&v).unwrap();
            let rfc = to_canonical(&v).unwrap();
            prop_assert_eq!(parse_closed(&legacy).unwrap(), v.clone());
            prop_assert_eq!(canonicalize(&legacy).unwrap(), rfc.clone());
            prop_assert_eq!(legacy != rfc, contains_go_escaped(&v));
            // The legacy text never holds the raw characters it escapes.
            let text = String::from_utf8(legacy).unwrap();
            let raw = ['<', '>', '&', '\u{2028}', '\u{2029}'];
            prop_assert!(!text.contains(raw), "raw escaped character in {}", text);
        }

        /// Whatever the bytes, the closed parser answers without panicking, and what it accepts
        /// it can write.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(v) = parse_closed(&bytes) {
                prop_assert!(to_canonical(&v).is_ok());
            }
        }
    }
}
