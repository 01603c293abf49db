//! Signing round trips, strict verification, both forms, and the published test vectors.

use super::*;
use crate::canonical;
use crate::envelope::decode_envelope;
use serde_json::{Value, json};

/// RFC 8032 §7.1 TEST 1 secret key: the documented seed of `testdata/vectors.json`.
const SEED_HEX: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const PUBLIC_HEX: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
const KEY_ID: &str = "wharf-test-vector-key-1";
const VECTORS_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/vectors.json");

fn key() -> SigningKey {
    let seed: [u8; 32] = hex::decode(SEED_HEX)
        .expect("hex")
        .try_into()
        .expect("32 bytes");
    SigningKey::from_bytes(&seed)
}

fn unsigned(
    event_type: &str,
    event_id: &str,
    sequence: u64,
    idempotency_key: &str,
    payload: Value,
) -> Envelope {
    Envelope {
        schema_version: 1,
        event_type: event_type.into(),
        tenant_id: "tenant-acme".into(),
        project_id: "project.web:prod".into(),
        event_id: event_id.into(),
        producer_sequence: sequence,
        occurred_at: "2025-06-01T12:00:00Z".into(),
        idempotency_key: idempotency_key.into(),
        producer_version: "wharf-vectors/1".into(),
        payload,
        integrity: Integrity {
            algorithm: ALGORITHM.into(),
            key_id: KEY_ID.into(),
            signature: String::new(),
        },
    }
}

/// The envelopes of the published vectors. Each is a valid v1 payload of its type.
pub(crate) fn vector_envelopes() -> Vec<(&'static str, Envelope)> {
    vec![
        (
            "plain-ascii",
            unsigned(
                "installation",
                "01JXA0000000000000000000A1",
                1,
                "installation-1",
                json!({
                    "installation_id": "inst-1",
                    "account_id": "acct-1",
                    "provider": "github",
                    "state": "active",
                    "version": 1
                }),
            ),
        ),
        (
            "html-and-unicode",
            unsigned(
                "task_proposal",
                "01JXA0000000000000000000A2",
                2,
                "proposal<1>&2",
                json!({
                    "proposal_id": "p-1",
                    "proposed_by": "dev<ops>",
                    "title": "Fix <b> & \"quotes\" \u{2014} caf\u{e9} \u{1f600}\u{2028}next\u{2029}end",
                    "base_version": 0,
                    "acceptance": ["a < b", "x & y", "\u{fc}n\u{ef}c\u{f6}d\u{e9}"]
                }),
            ),
        ),
        (
            "escapes-and-controls",
            unsigned(
                "event_summary",
                "01JXA0000000000000000000A3",
                3,
                "summary-3",
                json!({
                    "summary_id": "s-1",
                    "object_id": "o-1",
                    "event_kind": "tab\there \\ slash / quote \" bell \u{7} del \u{7f}",
                    "status": "line1\nline2\r\u{8}\u{c}",
                    "object_type": "task",
                    "occurred_at": "2025-06-01T11:59:59.5+02:00",
                    "version": 2
                }),
            ),
        ),
        (
            "large-integers",
            unsigned(
                "budget_state",
                "01JXA0000000000000000000A4",
                9_007_199_254_740_991,
                "budget-4",
                json!({
                    "budget_id": "b-1",
                    "scope_id": "team-1",
                    "scope_type": "team",
                    "period_start": "2025-06-01T00:00:00Z",
                    "period_end": "2025-07-01T00:00:00Z",
                    "unit": "usd_micros",
                    "limit": 9_007_199_254_740_991_u64,
                    "consumed": 0,
                    "state": "available",
                    "version": 2_147_483_647
                }),
            ),
        ),
    ]
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).expect("canonical JSON is UTF-8")
}

/// The vectors document, as a value.
fn vectors_value() -> Value {
    let key = key();
    let vectors: Vec<Value> = vector_envelopes()
        .into_iter()
        .map(|(name, draft)| {
            let signed = sign(&draft, &key, KEY_ID).expect("vector envelopes are valid");
            let rfc = signing_bytes_in(&signed, Form::Rfc8785).expect("canonical");
            let go = signing_bytes_in(&signed, Form::LegacyGo).expect("canonical");
            json!({
                "name": name,
                "envelope": signed.to_value(),
                "signing_bytes_rfc8785": text(rfc),
                "signing_bytes_legacy_go": text(go),
                "signature_rfc8785": signed.integrity.signature,
                "signature_legacy_go": sign_legacy_go(&signed, &key).expect("canonical"),
                "content_digest_hex": hex::encode(signed.content_digest().expect("digest")),
                "event_id_sha256_hex": signed.event_id_digest_hex(),
            })
        })
        .collect();
    json!({
        "description": "wharf controlplane/v1 envelope test vectors. Signing bytes are the canonical JSON of the whole envelope with integrity.signature set to \"\": RFC 8785 restricted to integers (rfc8785), and the legacy Go producer's form that also escapes <, >, &, U+2028, U+2029 (legacy_go). Signatures are Ed25519 (RFC 8032), standard base64. content_digest_hex is SHA-256 of the RFC 8785 canonical JSON of the envelope without its integrity member. Generated by crates/wharf-core/src/sign/tests.rs; do not edit by hand.",
        "key": {
            "algorithm": "Ed25519",
            "key_id": KEY_ID,
            "seed_hex": SEED_HEX,
            "seed_source": "RFC 8032 section 7.1, TEST 1 secret key. A published test key: never use it for anything real.",
            "public_key_hex": hex::encode(key.verifying_key().to_bytes()),
        },
        "vectors": vectors,
    })
}

/// A deterministic pretty printer: keys in JCS order, two-space indent, strings escaped as in
/// RFC 8785 (so non-ASCII stays readable). Written here rather than using serde_json's so the file
/// does not depend on whether some other crate turned on serde_json's `preserve_order`.
fn pretty(value: &Value, indent: usize, out: &mut Vec<u8>) {
    let pad = |out: &mut Vec<u8>, n: usize| out.extend(std::iter::repeat_n(b' ', n));
    match value {
        Value::Array(items) if !items.is_empty() => {
            out.extend_from_slice(b"[\n");
            for (i, item) in items.iter().enumerate() {
                pad(out, indent + 2);
                pretty(item, indent + 2, out);
                out.extend_from_slice(if i + 1 < items.len() { b",\n" } else { b"\n" });
            }
            pad(out, indent);
            out.push(b']');
        }
        Value::Object(map) if !map.is_empty() => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|(a, _), (b, _)| canonical::cmp_keys(a, b));
            out.extend_from_slice(b"{\n");
            for (i, (k, v)) in entries.iter().enumerate() {
                pad(out, indent + 2);
                canonical::write_string(out, k, Form::Rfc8785);
                out.extend_from_slice(b": ");
                pretty(v, indent + 2, out);
                out.extend_from_slice(if i + 1 < entries.len() { b",\n" } else { b"\n" });
            }
            pad(out, indent);
            out.push(b'}');
        }
        other => canonical::write_value(out, other, Form::Rfc8785).expect("integers only"),
    }
}

fn vectors_text() -> String {
    let mut out = Vec::new();
    pretty(&vectors_value(), 0, &mut out);
    out.push(b'\n');
    text(out)
}

#[test]
fn published_vectors_match_the_code() {
    let generated = vectors_text();
    if std::env::var_os("WHARF_WRITE_VECTORS").is_some() {
        std::fs::write(VECTORS_PATH, &generated).expect("write vectors");
    }
    let published = std::fs::read_to_string(VECTORS_PATH).expect("testdata/vectors.json exists");
    assert!(
        published == generated,
        "testdata/vectors.json drifted from the code; if the change is deliberate, regenerate \
         with WHARF_WRITE_VECTORS=1 cargo test -p wharf-core sign::"
    );
}

#[test]
fn published_vectors_verify_from_the_file_alone() {
    // Read the file as another implementation would: only the file, no generator.
    let published = std::fs::read_to_string(VECTORS_PATH).expect("vectors exist");
    let doc = canonical::parse_closed(published.as_bytes()).expect("vectors are closed JSON");
    let public: [u8; 32] = hex::decode(doc["key"]["public_key_hex"].as_str().expect("hex"))
        .expect("hex")
        .try_into()
        .expect("32 bytes");
    assert_eq!(hex::encode(public), PUBLIC_HEX);
    let vk = VerifyingKey::from_bytes(&public).expect("valid key");
    let vectors = doc["vectors"].as_array().expect("array");
    assert_eq!(vectors.len(), 4);
    let mut legacy_differs = 0;
    for v in vectors {
        let envelope_text = canonical::to_canonical(&v["envelope"]).expect("canonical");
        let env = decode_envelope(&envelope_text).expect("published envelopes decode");
        assert_eq!(verify(&env, &vk), Ok(Form::Rfc8785), "{}", v["name"]);
        assert_eq!(
            text(signing_bytes(&env).expect("bytes")),
            v["signing_bytes_rfc8785"].as_str().expect("str")
        );
        assert_eq!(
            text(signing_bytes_in(&env, Form::LegacyGo).expect("bytes")),
            v["signing_bytes_legacy_go"].as_str().expect("str")
        );
        let mut legacy = env.clone();
        legacy.integrity.signature = v["signature_legacy_go"].as_str().expect("str").to_owned();
        let rfc_is_legacy = v["signing_bytes_rfc8785"] == v["signing_bytes_legacy_go"];
        let expected = if rfc_is_legacy {
            Form::Rfc8785
        } else {
            Form::LegacyGo
        };
        assert_eq!(verify(&legacy, &vk), Ok(expected), "{}", v["name"]);
        if !rfc_is_legacy {
            legacy_differs += 1;
        }
    }
    // The vectors must exercise the difference, or the legacy path is untested.
    assert!(legacy_differs >= 1);
}

#[test]
fn vector_strings_differ_exactly_where_go_escapes() {
    let (_, env) = &vector_envelopes()[1];
    let rfc = text(signing_bytes_in(env, Form::Rfc8785).expect("bytes"));
    let go = text(signing_bytes_in(env, Form::LegacyGo).expect("bytes"));
    assert!(
        rfc.contains(
            "Fix <b> & \\\"quotes\\\" \u{2014} caf\u{e9} \u{1f600}\u{2028}next\u{2029}end"
        )
    );
    assert!(go.contains("Fix \\u003cb\\u003e \\u0026 \\\"quotes\\\" \u{2014} caf\u{e9} \u{1f600}\\u2028next\\u2029end"));
    assert_eq!(
        go.replace("\\u003c", "<")
            .replace("\\u003e", ">")
            .replace("\\u0026", "&")
            .replace("\\u2028", "\u{2028}")
            .replace("\\u2029", "\u{2029}"),
        rfc
    );
}

#[test]
fn sign_then_verify_round_trips_through_the_wire() {
    let key = key();
    for (name, draft) in vector_envelopes() {
        let signed = sign(&draft, &key, KEY_ID).expect("valid");
        let wire = signed.to_canonical_json().expect("canonical");
        let decoded = decode_envelope(&wire).expect("decodes");
        assert_eq!(decoded, signed, "{name}");
        assert_eq!(
            verify(&decoded, &key.verifying_key()),
            Ok(Form::Rfc8785),
            "{name}"
        );
    }
}

#[test]
fn verification_refusals() {
    let key = key();
    let (_, draft) = vector_envelopes().remove(1);
    let signed = sign(&draft, &key, KEY_ID).expect("valid");
    let vk = key.verifying_key();
    let check = |env: &Envelope, expected: Result<Form, SignatureError>| {
        assert_eq!(verify(env, &vk), expected);
    };
    check(&signed, Ok(Form::Rfc8785));

    // Any change of content, including the key id, breaks the signature.
    let mut e = signed.clone();
    e.payload["title"] = json!("Fix");
    check(&e, Err(SignatureError::Invalid));
    let mut e = signed.clone();
    e.integrity.key_id = "another".into();
    check(&e, Err(SignatureError::Invalid));
    let mut e = signed.clone();
    e.producer_sequence += 1;
    check(&e, Err(SignatureError::Invalid));

    // Another key.
    let other = SigningKey::from_bytes(&[7u8; 32]);
    assert_eq!(
        verify(&signed, &other.verifying_key()),
        Err(SignatureError::Invalid)
    );

    // Encoding and algorithm.
    let mut e = signed.clone();
    e.integrity.signature = "AAAA".into();
    check(&e, Err(SignatureError::Encoding));
    let mut e = signed.clone();
    e.integrity.algorithm = "RSA".into();
    check(&e, Err(SignatureError::Algorithm));
    assert_eq!(SignatureError::Invalid.reason(), "signature-invalid");
    assert_eq!(SignatureError::Encoding.reason(), "signature-encoding");
    assert_eq!(SignatureError::Algorithm.reason(), "signature-algorithm");

    // A float built in code has no canonical form.
    let mut e = signed.clone();
    e.payload["x"] = json!(1.5);
    check(
        &e,
        Err(SignatureError::Canonical(CanonicalError::FloatValue)),
    );
}

#[test]
fn strict_verification_refuses_a_malleated_signature() {
    // Adding the group order L to S gives a signature that lax verifiers accept; verify_strict
    // (and dalek 2's from_bytes check) must not.
    const L: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde,
        0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];
    let key = key();
    let (_, draft) = vector_envelopes().remove(0);
    let signed = sign(&draft, &key, KEY_ID).expect("valid");
    let mut raw = signed.signature_bytes().expect("64 bytes");
    let mut carry = 0u16;
    for i in 0..32 {
        let sum = u16::from(raw[32 + i]) + u16::from(L[i]) + carry;
        raw[32 + i] = sum as u8;
        carry = sum >> 8;
    }
    let mut e = signed;
    e.integrity.signature = base64::engine::general_purpose::STANDARD.encode(raw);
    assert_eq!(
        verify(&e, &key.verifying_key()),
        Err(SignatureError::Invalid)
    );
}

#[test]
fn signing_refuses_what_a_receiver_would_refuse() {
    let key = key();
    let (_, draft) = vector_envelopes().remove(0);
    let check = |key_id: &str, expected: Option<&str>| {
        let got = sign(&draft, &key, key_id)
            .err()
            .map(|SignError::Envelope(e)| e.reason());
        assert_eq!(got, expected, "{key_id:?}");
    };
    check(&"k".repeat(crate::envelope::KEY_ID_BYTES_MAX), None);
    check(
        &"k".repeat(crate::envelope::KEY_ID_BYTES_MAX + 1),
        Some("bounds"),
    );
    check("", Some("bounds"));
    let mut bad = draft.clone();
    bad.producer_sequence = 0;
    assert!(sign(&bad, &key, KEY_ID).is_err());
    let mut float = draft;
    float.payload["f"] = json!(0.5);
    assert_eq!(
        sign(&float, &key, KEY_ID)
            .err()
            .map(|SignError::Envelope(e)| e.reason()),
        Some("float")
    );
}

#[test]
fn signing_ignores_an_incoming_signature_and_key_id() {
    let key = key();
    let (_, mut draft) = vector_envelopes().remove(0);
    let clean = sign(&draft, &key, KEY_ID).expect("valid");
    draft.integrity.signature = "garbage".into();
    draft.integrity.key_id = "old".into();
    assert_eq!(sign(&draft, &key, KEY_ID), Ok(clean));
}

/// Property: verification accepts the legacy Go form of the same value, whatever the payload
/// strings hold, and nothing else.
mod props {
    use super::*;
    use crate::canonical::tests::props::{CASES, tricky_string};
    use proptest::prelude::*;

    fn envelope(strings: &[String]) -> Envelope {
        unsigned(
            "sync_cursor",
            "01ARZ3NDEKTSV4RRFFQ69G5FAV",
            7,
            "key-1",
            serde_json::json!({ "notes": strings }),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(CASES / 2))]

        #[test]
        fn the_legacy_form_of_the_same_value_verifies(
            strings in prop::collection::vec(tricky_string(), 1..4),
            other in tricky_string(),
        ) {
            let key = key();
            let mut env = envelope(&strings);
            env.integrity.signature = sign_legacy_go(&env, &key).unwrap();
            let expected = if signing_bytes_in(&env, Form::LegacyGo).unwrap()
                == signing_bytes_in(&env, Form::Rfc8785).unwrap()
            {
                Form::Rfc8785
            } else {
                Form::LegacyGo
            };
            prop_assert_eq!(verify(&env, &key.verifying_key()), Ok(expected));
            // The RFC 8785 signature always verifies as such.
            let signed = sign(&envelope(&strings), &key, KEY_ID).unwrap();
            prop_assert_eq!(verify(&signed, &key.verifying_key()), Ok(Form::Rfc8785));
            // Another value under the legacy signature does not.
            let mut changed = strings.clone();
            changed.push(other);
            let mut forged = envelope(&changed);
            forged.integrity.signature = env.integrity.signature.clone();
            prop_assert_eq!(
                verify(&forged, &key.verifying_key()),
                Err(SignatureError::Invalid)
            );
        }
    }
}
