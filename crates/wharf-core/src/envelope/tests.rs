//! Envelope decoding: every bound of SPEC §3.1 at its edge, every reason string.

use super::*;
use serde_json::json;

/// 64 zero bytes, standard base64.
const ZERO_SIGNATURE: &str =
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==";

fn base() -> Value {
    json!({
        "schema_version": 1,
        "event_type": "installation",
        "tenant_id": "acme",
        "project_id": "web.app:prod-1",
        "event_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "producer_sequence": 1,
        "occurred_at": "2025-01-02T03:04:05Z",
        "idempotency_key": "install-1",
        "producer_version": "cli/1.2.3",
        "payload": {"installation_id": "i-1"},
        "integrity": {"algorithm": "Ed25519", "key_id": "k1", "signature": ZERO_SIGNATURE},
    })
}

fn with(pointer: &str, value: Value) -> Vec<u8> {
    let mut v = base();
    *v.pointer_mut(pointer).expect("pointer exists") = value;
    serde_json::to_vec(&v).expect("serialises")
}

fn without(field: &str) -> Vec<u8> {
    let mut v = base();
    let (parent, key) = field.rsplit_once('/').expect("has a slash");
    let parent = if parent.is_empty() {
        &mut v
    } else {
        v.pointer_mut(parent).expect("exists")
    };
    parent.as_object_mut().expect("object").remove(key);
    serde_json::to_vec(&v).expect("serialises")
}

fn reason(bytes: &[u8]) -> &'static str {
    match decode_envelope(bytes) {
        Ok(_) => "ok",
        Err(e) => e.reason(),
    }
}

fn s(text: &str) -> Value {
    Value::String(text.to_owned())
}

#[test]
fn the_base_envelope_decodes() {
    let env = decode_envelope(&serde_json::to_vec(&base()).expect("json")).expect("valid");
    assert_eq!(env.tenant_id, "acme");
    assert_eq!(env.producer_sequence, 1);
    assert_eq!(env.signature_bytes(), Ok([0u8; 64]));
}

#[test]
fn every_field_bound_at_its_edge() {
    let check = |pointer: &str, value: Value, expected: &str| {
        assert_eq!(
            reason(&with(pointer, value.clone())),
            expected,
            "{pointer} = {value}"
        );
    };
    let a = |n: usize| "a".repeat(n);

    // tenant_id / project_id: 1..=128, identity shape.
    for field in ["/tenant_id", "/project_id"] {
        check(field, s(&a(1)), "ok");
        check(field, s(&a(IDENTITY_BYTES_MAX)), "ok");
        check(field, s(&a(IDENTITY_BYTES_MAX + 1)), "bounds");
        check(field, s(""), "bounds");
        check(field, s("A0._:-z"), "ok");
        check(field, s(".a"), "identity");
        check(field, s("-a"), "identity");
        check(field, s("a/b"), "identity");
        check(field, s("a b"), "identity");
        check(field, s("é"), "identity");
        check(field, json!(7), "malformed");
    }

    // event_id: ULID, 26 uppercase Crockford, first char 0..=7.
    check("/event_id", s("7ZZZZZZZZZZZZZZZZZZZZZZZZZ"), "ok");
    check("/event_id", s("00000000000000000000000000"), "ok");
    check("/event_id", s("8ZZZZZZZZZZZZZZZZZZZZZZZZZ"), "identity");
    check("/event_id", s("01ARZ3NDEKTSV4RRFFQ69G5FA"), "identity");
    check("/event_id", s("01ARZ3NDEKTSV4RRFFQ69G5FAVV"), "identity");
    check("/event_id", s("01arz3ndektsv4rrffq69g5fav"), "identity");
    for bad in ['I', 'L', 'O', 'U'] {
        check(
            "/event_id",
            s(&format!("01ARZ3NDEKTSV4RRFFQ69G5FA{bad}")),
            "identity",
        );
    }

    // event_type: 1..=64 of [a-z0-9_], starting with a letter.
    check("/event_type", s(&a(EVENT_TYPE_BYTES_MAX)), "ok");
    check("/event_type", s(&a(EVENT_TYPE_BYTES_MAX + 1)), "bounds");
    check("/event_type", s(""), "bounds");
    check("/event_type", s("task_proposal2"), "ok");
    check("/event_type", s("2task"), "identity");
    check("/event_type", s("Task"), "identity");

    // producer_sequence: 1..=u64::MAX.
    check("/producer_sequence", json!(1), "ok");
    check("/producer_sequence", json!(u64::MAX), "ok");
    check("/producer_sequence", json!(0), "bounds");
    check("/producer_sequence", json!(-1), "bounds");
    check("/producer_sequence", s("1"), "malformed");

    // idempotency_key: 1..=256 bytes (bytes, not characters), printable.
    check("/idempotency_key", s(&a(1)), "ok");
    check("/idempotency_key", s(&a(IDEMPOTENCY_KEY_BYTES_MAX)), "ok");
    check(
        "/idempotency_key",
        s(&a(IDEMPOTENCY_KEY_BYTES_MAX + 1)),
        "bounds",
    );
    check("/idempotency_key", s(""), "bounds");
    check("/idempotency_key", s(&"é".repeat(128)), "ok");
    check(
        "/idempotency_key",
        s(&format!("{}a", "é".repeat(128))),
        "bounds",
    );
    check("/idempotency_key", s("a\u{0}b"), "identity");
    check("/idempotency_key", s("a\nb"), "identity");

    // producer_version: 1..=64 bytes, printable.
    check("/producer_version", s(&a(PRODUCER_VERSION_BYTES_MAX)), "ok");
    check(
        "/producer_version",
        s(&a(PRODUCER_VERSION_BYTES_MAX + 1)),
        "bounds",
    );
    check("/producer_version", s(""), "bounds");
    check("/producer_version", s("v\u{7f}"), "identity");

    // occurred_at: RFC 3339, at most 64 bytes.
    check(
        "/occurred_at",
        s("2025-01-02T03:04:05.123456789+05:30"),
        "ok",
    );
    check("/occurred_at", s("2025-01-02t03:04:05z"), "ok");
    check("/occurred_at", s("2025-01-02"), "timestamp");
    check("/occurred_at", s("2025-13-02T03:04:05Z"), "timestamp");
    check("/occurred_at", s("1735787045"), "timestamp");
    check("/occurred_at", s(""), "bounds");
    let prefix = "2025-01-02T03:04:05.";
    let fraction = |total: usize| format!("{prefix}{}Z", "1".repeat(total - prefix.len() - 1));
    check(
        "/occurred_at",
        s(&fraction(OCCURRED_AT_BYTES_MAX + 1)),
        "bounds",
    );
    assert_ne!(
        reason(&with("/occurred_at", s(&fraction(OCCURRED_AT_BYTES_MAX)))),
        "bounds"
    );

    // schema_version: any i64 decodes; the pipeline refuses != 1 after verification.
    check("/schema_version", json!(2), "ok");
    check("/schema_version", json!(i64::MIN), "ok");
    check("/schema_version", json!(u64::MAX), "integer-range");
    check("/schema_version", s("1"), "malformed");

    // integrity.
    check("/integrity/algorithm", s("ed25519"), "signature-algorithm");
    check("/integrity/key_id", s(&a(KEY_ID_BYTES_MAX)), "ok");
    check("/integrity/key_id", s(&a(KEY_ID_BYTES_MAX + 1)), "bounds");
    check("/integrity/key_id", s(""), "bounds");
    check("/integrity/key_id", s("k\u{1}"), "identity");
    check("/integrity", json!([]), "malformed");

    // payload must be an object.
    check("/payload", json!([]), "malformed");
    check("/payload", json!(null), "malformed");
    check("/payload", json!({}), "ok");
}

#[test]
fn signature_encoding() {
    use base64::Engine as _;
    let b64 = |n: usize| base64::engine::general_purpose::STANDARD.encode(vec![0xfbu8; n]);
    let check = |sig: String, expected: &str| {
        assert_eq!(
            reason(&with("/integrity/signature", s(&sig))),
            expected,
            "{sig}"
        );
    };
    check(b64(64), "ok");
    check(b64(63), "signature-encoding");
    check(b64(65), "signature-encoding");
    check(String::new(), "signature-encoding");
    check(
        b64(64).trim_end_matches('=').to_owned(),
        "signature-encoding",
    );
    check(
        b64(64).replace('+', "-").replace('/', "_"),
        "signature-encoding",
    );
    // Non-zero trailing bits: a second text for the same bytes is refused.
    check(
        format!("{}AB==", &ZERO_SIGNATURE[..84]),
        "signature-encoding",
    );
    check(format!(" {ZERO_SIGNATURE}"), "signature-encoding");
}

#[test]
fn closedness() {
    let mut v = base();
    v["extra"] = json!(1);
    assert_eq!(
        reason(&serde_json::to_vec(&v).expect("json")),
        "unknown-field"
    );
    let mut v = base();
    v["integrity"]["kid"] = json!("x");
    assert_eq!(
        reason(&serde_json::to_vec(&v).expect("json")),
        "unknown-field"
    );
    // Unknown payload members are the schema's business, not the envelope's.
    let mut v = base();
    v["payload"]["anything"] = json!({"deep": [1, 2]});
    assert_eq!(reason(&serde_json::to_vec(&v).expect("json")), "ok");

    for field in FIELDS {
        assert_eq!(
            reason(&without(&format!("/{field}"))),
            "missing-field",
            "{field}"
        );
    }
    for field in INTEGRITY_FIELDS {
        assert_eq!(
            reason(&without(&format!("/integrity/{field}"))),
            "missing-field",
            "{field}"
        );
    }

    // Raw-text refusals: duplicates and floats anywhere, including inside the payload.
    let text = String::from_utf8(serde_json::to_vec(&base()).expect("json")).expect("utf8");
    let check = |text: String, expected: &str| {
        assert_eq!(reason(text.as_bytes()), expected, "{text}");
    };
    check(
        text.replacen("{", "{\"tenant_id\":\"x\",", 1),
        "duplicate-key",
    );
    check(
        text.replace("\"installation_id\"", "\"a\":1,\"a\":2,\"installation_id\""),
        "duplicate-key",
    );
    check(
        text.replace("\"installation_id\"", "\"f\":1.0,\"installation_id\""),
        "float",
    );
    check(
        text.replace(
            "\"installation_id\"",
            "\"f\":[{\"g\":1e3}],\"installation_id\"",
        ),
        "float",
    );
    check(
        text.replace("\"schema_version\":1", "\"schema_version\":1.0"),
        "float",
    );
    check(
        text.replace(
            "\"installation_id\"",
            "\"n\":99999999999999999999,\"installation_id\"",
        ),
        "integer-range",
    );
    check(text.replacen("{", "[", 1), "malformed");
    check("[]".to_owned(), "malformed");
    check(format!("{text} x"), "malformed");
    check(text[..text.len() - 1].to_owned(), "malformed");
    check(format!("  {text}\n"), "ok");
}

#[test]
fn serde_model_is_closed_at_every_level() {
    let mut v = base();
    v["extra"] = json!(1);
    assert!(serde_json::from_value::<Envelope>(v).is_err());
    let mut v = base();
    v["integrity"]["extra"] = json!(1);
    assert!(serde_json::from_value::<Envelope>(v).is_err());
    assert!(serde_json::from_value::<Envelope>(base()).is_ok());
}

#[test]
fn payload_size_is_measured_canonically_at_the_edge() {
    // {"s":"…"} is the string plus 8 bytes of canonical framing.
    let payload = |n: usize| json!({ "s": "x".repeat(n - 8) });
    assert_eq!(reason(&with("/payload", payload(PAYLOAD_BYTES_MAX))), "ok");
    let err =
        decode_envelope(&with("/payload", payload(PAYLOAD_BYTES_MAX + 1))).expect_err("too big");
    assert_eq!(
        err,
        EnvelopeError::PayloadTooLarge {
            bytes: PAYLOAD_BYTES_MAX + 1,
            bytes_max: PAYLOAD_BYTES_MAX
        }
    );
    assert_eq!(err.reason(), "bounds");
    assert_eq!(err.field(), Some("payload"));

    // Whitespace and escapes in the sent text do not count: "\u0078" is one canonical byte.
    let mut text = String::from_utf8(with("/payload", payload(PAYLOAD_BYTES_MAX))).expect("utf8");
    text = text.replacen("xxxx", "\\u0078\\u0078\\u0078\\u0078", 1);
    assert_eq!(reason(text.as_bytes()), "ok");
}

#[test]
fn envelope_text_is_bounded_at_the_edge() {
    let text = serde_json::to_vec(&base()).expect("json");
    let mut padded = text.clone();
    padded.resize(ENVELOPE_BYTES_MAX, b' ');
    assert_eq!(reason(&padded), "ok");
    padded.push(b' ');
    assert_eq!(
        decode_envelope(&padded),
        Err(EnvelopeError::TooLarge {
            bytes: ENVELOPE_BYTES_MAX + 1,
            bytes_max: ENVELOPE_BYTES_MAX
        })
    );
}

#[test]
fn canonical_bytes_match_the_generic_writer() {
    let mut v = base();
    v["payload"] = json!({"z": "<é😀\u{2028}>", "a": [1, -2, {"y": null, "b": true}]});
    v["idempotency_key"] = json!("a&b");
    let env = decode_envelope(&serde_json::to_vec(&v).expect("json")).expect("valid");
    for form in [Form::Rfc8785, Form::LegacyGo] {
        assert_eq!(
            env.canonical_bytes(form, IntegrityPart::AsIs),
            canonical::to_form(&v, form),
            "{form:?}"
        );
        let mut unsigned = v.clone();
        unsigned["integrity"]["signature"] = json!("");
        assert_eq!(
            env.canonical_bytes(form, IntegrityPart::Signature("")),
            canonical::to_form(&unsigned, form)
        );
        let mut bare = v.clone();
        bare.as_object_mut().expect("object").remove("integrity");
        assert_eq!(
            env.canonical_bytes(form, IntegrityPart::Omit),
            canonical::to_form(&bare, form)
        );
    }
    assert_eq!(env.to_value(), v);
    assert_eq!(env.to_canonical_json(), canonical::to_canonical(&v));
}

#[test]
fn content_digest_ignores_integrity_only() {
    let env = decode_envelope(&serde_json::to_vec(&base()).expect("json")).expect("valid");
    let digest = env.content_digest().expect("digest");

    let mut rotated = env.clone();
    rotated.integrity.key_id = "k2".into();
    rotated.integrity.signature = "other".into();
    assert_eq!(rotated.content_digest(), Ok(digest));

    let mut changed = env.clone();
    changed.payload["installation_id"] = json!("i-2");
    assert_ne!(changed.content_digest(), Ok(digest));
    let mut changed = env.clone();
    changed.producer_sequence = 2;
    assert_ne!(changed.content_digest(), Ok(digest));
    let mut changed = env;
    changed.occurred_at = "2025-01-02T03:04:06Z".into();
    assert_ne!(changed.content_digest(), Ok(digest));
}

#[test]
fn event_id_digest_is_sha256_hex() {
    assert_eq!(
        event_id_digest_hex("01ARZ3NDEKTSV4RRFFQ69G5FAV"),
        "8eac53b3f14d71fe51a63af287b39e9987212e1bf5310a72056379e1f254c0c4"
    );
}

#[test]
fn unknown_field_names_are_cut_for_logs() {
    let mut v = base();
    v["é".repeat(40)] = json!(1);
    match decode_envelope(&serde_json::to_vec(&v).expect("json")) {
        Err(EnvelopeError::UnknownField { field, within }) => {
            assert_eq!(field, "é".repeat(32));
            assert_eq!(within, "envelope");
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// Property tests: decoding never panics, whatever the bytes, and every envelope it accepts
/// is within every bound; each string bound is enforced exactly at its edge.
mod props {
    use super::*;
    use crate::canonical::tests::props::CASES;
    use proptest::prelude::*;

    fn base_text() -> Vec<u8> {
        serde_json::to_vec(&base()).expect("json")
    }

    /// What an accepted envelope must satisfy, stated without the decoder's own code.
    fn within_bounds(e: &Envelope) -> Result<(), TestCaseError> {
        prop_assert!(is_identity(&e.tenant_id) && is_identity(&e.project_id));
        prop_assert!(e.tenant_id.len() <= IDENTITY_BYTES_MAX);
        prop_assert!(e.project_id.len() <= IDENTITY_BYTES_MAX);
        prop_assert_eq!(e.event_id.len(), EVENT_ID_BYTES);
        prop_assert!(e.producer_sequence >= PRODUCER_SEQUENCE_MIN);
        prop_assert!((1..=IDEMPOTENCY_KEY_BYTES_MAX).contains(&e.idempotency_key.len()));
        prop_assert!((1..=PRODUCER_VERSION_BYTES_MAX).contains(&e.producer_version.len()));
        prop_assert!((1..=KEY_ID_BYTES_MAX).contains(&e.integrity.key_id.len()));
        prop_assert!(e.payload.is_object());
        prop_assert!(e.payload_canonical().unwrap().len() <= PAYLOAD_BYTES_MAX);
        prop_assert!(e.signature_bytes().is_ok());
        prop_assert!(!e.idempotency_key.contains('\0'));
        Ok(())
    }

    /// One edit of a valid envelope's text: a byte replaced, inserted or removed.
    #[derive(Debug, Clone)]
    enum Edit {
        Replace(usize, u8),
        Insert(usize, u8),
        Remove(usize),
    }

    fn edit() -> impl Strategy<Value = Edit> {
        let interesting = prop_oneof![
            any::<u8>(),
            Just(b'"'),
            Just(b'\\'),
            Just(b'{'),
            Just(b'}'),
            Just(b','),
            Just(b'0'),
            Just(b'.'),
            Just(0u8),
            Just(0xff),
        ];
        prop_oneof![
            (any::<usize>(), interesting.clone()).prop_map(|(i, b)| Edit::Replace(i, b)),
            (any::<usize>(), interesting).prop_map(|(i, b)| Edit::Insert(i, b)),
            any::<usize>().prop_map(Edit::Remove),
        ]
    }

    fn apply(text: &mut Vec<u8>, edit: &Edit) {
        match *edit {
            Edit::Replace(i, b) if !text.is_empty() => {
                let i = i % text.len();
                text[i] = b;
            }
            Edit::Insert(i, b) => {
                let i = i % (text.len() + 1);
                text.insert(i, b);
            }
            Edit::Remove(i) if !text.is_empty() => {
                let i = i % text.len();
                text.remove(i);
            }
            _ => {}
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(CASES * 2))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(e) = decode_envelope(&bytes) {
                within_bounds(&e)?;
            }
        }

        #[test]
        fn edited_envelopes_never_panic_and_what_passes_is_bounded(
            edits in prop::collection::vec(edit(), 1..6),
        ) {
            let mut text = base_text();
            for e in &edits {
                apply(&mut text, e);
            }
            match decode_envelope(&text) {
                Ok(e) => within_bounds(&e)?,
                // Every refusal has a stable reason and names no value.
                Err(e) => prop_assert!(!e.reason().is_empty()),
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(CASES))]

        /// Each bounded string field is accepted exactly when its length is within its bound.
        #[test]
        fn string_bounds_hold_at_every_length(
            which in 0usize..3,
            len in 0usize..300,
        ) {
            let (pointer, max) = [
                ("/idempotency_key", IDEMPOTENCY_KEY_BYTES_MAX),
                ("/producer_version", PRODUCER_VERSION_BYTES_MAX),
                ("/integrity/key_id", KEY_ID_BYTES_MAX),
            ][which];
            let decoded = decode_envelope(&with(pointer, s(&"k".repeat(len))));
            prop_assert_eq!(decoded.is_ok(), (1..=max).contains(&len), "{} of {}", pointer, len);
        }

        /// The sequence is accepted exactly when it is at least 1; negative ones are refused.
        #[test]
        fn the_sequence_bound_holds(n in any::<i64>(), u in any::<u64>()) {
            let signed = decode_envelope(&with("/producer_sequence", json!(n)));
            prop_assert_eq!(signed.is_ok(), n >= 1);
            let unsigned = decode_envelope(&with("/producer_sequence", json!(u)));
            prop_assert_eq!(unsigned.is_ok(), u >= 1);
        }

        /// Identities are accepted exactly when they match the identity pattern.
        #[test]
        fn identities_follow_their_pattern(id in "[A-Za-z0-9._:\\- \u{0}é]{0,130}") {
            let expected = !id.is_empty()
                && id.len() <= IDENTITY_BYTES_MAX
                && id.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b));
            let decoded = decode_envelope(&with("/tenant_id", s(&id)));
            prop_assert_eq!(decoded.is_ok(), expected, "{:?}", id);
        }
    }
}
