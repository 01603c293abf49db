//! Decoding one envelope and the envelope half of the route check (SPEC §3.4 step 4), and which
//! of the two answers when both fail. Pure: bytes and the verified route in, an envelope or a
//! refusal out.
//!
//! Owns: the order between "these bytes are not a closed envelope" and "this envelope is for
//! another tenant or project", and the one envelope [`wharf_core::envelope::decode_envelope`]
//! cannot represent (a `schema_version` above `i64`). Must not know keys, streams, the database
//! or HTTP; which refusal a decoding error is comes from `wharf_core::inbox`.
//!
//! # Route before decoding, where the route can be known
//!
//! SPEC §3.4 checks the route (step 4) before the signature (5) and before the payload (6), so a
//! body for another tenant or project is refused as `route` even when it would also fail to
//! decode. The happy path decodes first and compares after, which costs nothing extra; only a
//! body that fails to decode is asked for its route ([`peek_route`]), with a lenient read of just
//! `tenant_id` and `project_id`. The route is known when the body is one JSON object whose top
//! level holds each of them exactly once, as a string. A body that is not JSON, not an object,
//! or whose `tenant_id`/`project_id` is missing, repeated or not a string has no route to
//! compare — a repeated key is ambiguous by design, since readers disagree on which one wins —
//! so it gets its decoding refusal (`payload`, or `route` for a malformed identity, or
//! `signature-invalid` for a malformed integrity member). A float or a repeated key elsewhere
//! does not hide the route: the lenient read skips over them.
//!
//! # A `schema_version` above `i64`
//!
//! SPEC §3.4 step 6 answers any version other than 1 `refuse-incompatible` / `schema`, after the
//! signature. The envelope model holds the version as an `i64`, so decoding refuses
//! `9223372036854775808..=18446744073709551615` ([`EnvelopeError::SchemaVersionRange`]). Such a
//! body is decoded again with the version replaced by [`VERSION_OUT_OF_RANGE`] (which is not 1,
//! so step 6 refuses it as `schema`), and the signature is checked over the canonical bytes of
//! what was sent ([`SignedAsSent`]), never over the stand-in. An integer beyond `u64` has no
//! canonical form at all (`wharf_core::canonical` refuses it anywhere in an envelope, so no
//! signature over it can be checked); it stays a `payload` refusal, after the route.

use ed25519_dalek::{Signature, VerifyingKey};
use serde::Deserialize;
use serde_json::Value;
use wharf_core::canonical::{self, Form};
use wharf_core::envelope::{Envelope, EnvelopeError, SCHEMA_VERSION, decode_envelope};
use wharf_core::inbox::{self as rules, Refusal};
use wharf_core::sign;

/// The version a decoded envelope carries in place of one above `i64`. Any value other than
/// [`SCHEMA_VERSION`] would do; the largest `i64` is the nearest true statement ("at least this").
pub const VERSION_OUT_OF_RANGE: i64 = i64::MAX;
const _: () = assert!(VERSION_OUT_OF_RANGE != SCHEMA_VERSION);

/// The route a request came in on, after the URL half of step 4 passed: the tenant is the
/// credential's and both are identities.
#[derive(Debug, Clone, Copy)]
pub struct VerifiedRoute<'a> {
    /// The URL's tenant, equal to the credential's.
    pub tenant: &'a str,
    /// The URL's project.
    pub project: &'a str,
}

/// An envelope that decoded and whose route matches.
#[derive(Debug)]
pub struct Decoded {
    /// The envelope. Its `schema_version` is [`VERSION_OUT_OF_RANGE`] when `signed_as_sent` is
    /// set.
    pub envelope: Envelope,
    /// For a version above `i64` only: the bytes its signature covers.
    pub signed_as_sent: Option<Box<SignedAsSent>>,
}

/// A refusal met while decoding or routing, with the envelope when it decoded (its event id and
/// sequence go to the audit).
#[derive(Debug)]
pub struct Undecoded {
    /// The refusal.
    pub refusal: Refusal,
    /// The envelope, when only its route was wrong.
    pub envelope: Option<Box<Envelope>>,
}

impl Undecoded {
    fn bare(refusal: Refusal) -> Undecoded {
        Undecoded {
            refusal,
            envelope: None,
        }
    }
}

/// The signing bytes of an envelope as sent (its `integrity.signature` set to `""`), in both
/// accepted forms: what `wharf_core::sign::verify` computes from an [`Envelope`], for the one
/// envelope the model cannot hold.
#[derive(Debug)]
pub struct SignedAsSent {
    rfc8785: Vec<u8>,
    legacy_go: Vec<u8>,
}

impl SignedAsSent {
    fn of(mut sent: Value) -> Option<SignedAsSent> {
        *sent.get_mut("integrity")?.get_mut("signature")? = Value::String(String::new());
        Some(SignedAsSent {
            rfc8785: canonical::to_form(&sent, Form::Rfc8785).ok()?,
            legacy_go: canonical::to_form(&sent, Form::LegacyGo).ok()?,
        })
    }
}

/// Checks `decoded`'s signature under `key` exactly as `wharf_core::sign::verify` does (strict
/// Ed25519, the RFC 8785 form, then the legacy Go form when it differs), over the bytes as sent.
pub fn verify(decoded: &Decoded, key: &VerifyingKey) -> Result<(), Refusal> {
    let Some(sent) = &decoded.signed_as_sent else {
        return sign::verify(&decoded.envelope, key)
            .map(drop)
            .map_err(|e| rules::refusal_for_signature_error(&e));
    };
    // Decoding checked the algorithm and the signature's encoding.
    let raw = decoded
        .envelope
        .signature_bytes()
        .map_err(|_| Refusal::SignatureInvalid)?;
    let signature = Signature::from_bytes(&raw);
    let verifies = |bytes: &[u8]| key.verify_strict(bytes, &signature).is_ok();
    if verifies(&sent.rfc8785) || (sent.legacy_go != sent.rfc8785 && verifies(&sent.legacy_go)) {
        Ok(())
    } else {
        Err(Refusal::SignatureInvalid)
    }
}

/// Decodes `body` and checks its tenant and project against `route` (see the module docs for the
/// order when both fail).
pub fn decode_and_route(route: VerifiedRoute<'_>, body: &[u8]) -> Result<Decoded, Undecoded> {
    let decoded = match decode_envelope(body) {
        Ok(envelope) => Decoded {
            envelope,
            signed_as_sent: None,
        },
        Err(EnvelopeError::SchemaVersionRange) => decode_version_out_of_range(route, body)?,
        Err(e) => return Err(undecodable(route, body, &e)),
    };
    let e = &decoded.envelope;
    match rules::check_route(
        route.tenant,
        route.project,
        route.tenant,
        &e.tenant_id,
        &e.project_id,
    ) {
        Ok(()) => Ok(decoded),
        Err(refusal) => Err(Undecoded {
            refusal,
            envelope: Some(Box::new(decoded.envelope)),
        }),
    }
}

/// The refusal for a body that failed to decode with `error`: `route` when its route can be read
/// and is wrong, else the error's own refusal.
fn undecodable(route: VerifiedRoute<'_>, body: &[u8], error: &EnvelopeError) -> Undecoded {
    // The detailed reason (float, unknown-field, …) helps whoever debugs a producer; the audit
    // keeps the pipeline's reason from the one table.
    tracing::debug!(
        detail = error.reason(),
        field = error.field(),
        "envelope refused at decoding"
    );
    let wrong_route = peek_route(body).is_some_and(|peeked| {
        rules::check_route(
            route.tenant,
            route.project,
            route.tenant,
            &peeked.tenant_id,
            &peeked.project_id,
        )
        .is_err()
    });
    if wrong_route {
        Undecoded::bare(Refusal::Route)
    } else {
        Undecoded::bare(rules::refusal_for_envelope_error(error))
    }
}

/// Just the route of an envelope body. Fields of the struct, so a repeated one is an error
/// (serde refuses duplicate struct fields); every other member is skipped unread.
#[derive(Deserialize)]
struct PeekedRoute {
    tenant_id: String,
    project_id: String,
}

/// The route `body` names, when it can be known (module docs): one JSON object with exactly one
/// string `tenant_id` and one string `project_id` at its top level.
fn peek_route(body: &[u8]) -> Option<PeekedRoute> {
    // serde would also read a struct from a JSON array (`["acme", "web"]`); only an object
    // names its fields.
    if body.trim_ascii_start().first() != Some(&b'{') {
        return None;
    }
    serde_json::from_slice(body).ok()
}

/// A body whose `schema_version` is above `i64`: decoded with the stand-in version, signed bytes
/// as sent.
fn decode_version_out_of_range(
    route: VerifiedRoute<'_>,
    body: &[u8],
) -> Result<Decoded, Undecoded> {
    let range = || undecodable(route, body, &EnvelopeError::SchemaVersionRange);
    // Decoding parsed this far before it met the version, so the closed parse succeeds.
    let Ok(sent) = canonical::parse_closed(body) else {
        return Err(range());
    };
    let mut stand_in = sent.clone();
    let Some(version) = stand_in.get_mut("schema_version") else {
        return Err(range());
    };
    *version = Value::from(VERSION_OUT_OF_RANGE);
    let Ok(stand_in) = canonical::to_canonical(&stand_in) else {
        return Err(range());
    };
    // Every other member is checked as usual; its failure is the envelope's answer.
    let envelope = decode_envelope(&stand_in).map_err(|e| undecodable(route, body, &e))?;
    let Some(signed_as_sent) = SignedAsSent::of(sent) else {
        return Err(range());
    };
    Ok(Decoded {
        envelope,
        signed_as_sent: Some(Box::new(signed_as_sent)),
    })
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use ed25519_dalek::SigningKey;
    use serde_json::json;
    use wharf_core::envelope::Integrity;

    use super::*;

    const ROUTE: VerifiedRoute<'static> = VerifiedRoute {
        tenant: "acme",
        project: "web",
    };

    fn key() -> SigningKey {
        SigningKey::from_bytes(&[7; 32])
    }

    fn envelope() -> Envelope {
        Envelope {
            schema_version: 1,
            event_type: "sync_cursor".into(),
            tenant_id: "acme".into(),
            project_id: "web".into(),
            event_id: "01HZZZZZZZZZZZZZZZZZZZZZZZ".into(),
            producer_sequence: 1,
            occurred_at: "2025-06-01T12:00:00Z".into(),
            idempotency_key: "k-1".into(),
            producer_version: "t/1".into(),
            payload: json!({"producer_id": "p", "acknowledged_sequence": 0,
                            "acknowledged_event_id": null, "version": 1}),
            integrity: Integrity {
                algorithm: String::new(),
                key_id: String::new(),
                signature: String::new(),
            },
        }
    }

    /// A signed envelope as a JSON value, edited after signing by `f`.
    fn signed_then(f: impl FnOnce(&mut Value)) -> Vec<u8> {
        let signed = sign::sign(&envelope(), &key(), "k").unwrap();
        let mut v = signed.to_value();
        f(&mut v);
        serde_json::to_vec(&v).unwrap()
    }

    /// A body with `schema_version` set to `version` (any JSON integer text), signed over exactly
    /// that, as a producer whose model holds a u64 would.
    fn signed_with_version(version: &str, tenant: &str) -> Vec<u8> {
        let mut e = envelope();
        e.tenant_id = tenant.into();
        e.integrity = Integrity {
            algorithm: "Ed25519".into(),
            key_id: "k".into(),
            signature: String::new(),
        };
        let text = serde_json::to_string(&e.to_value()).unwrap().replace(
            "\"schema_version\":1",
            &format!("\"schema_version\":{version}"),
        );
        // Beyond u64 nothing is canonical, so nothing could verify: sign the text as it is.
        let signing =
            canonical::canonicalize(text.as_bytes()).unwrap_or_else(|_| text.clone().into_bytes());
        use ed25519_dalek::Signer as _;
        let signature =
            base64::engine::general_purpose::STANDARD.encode(key().sign(&signing).to_bytes());
        text.replace(
            "\"signature\":\"\"",
            &format!("\"signature\":\"{signature}\""),
        )
        .into_bytes()
    }

    fn refusal(body: &[u8]) -> Option<Refusal> {
        decode_and_route(ROUTE, body).err().map(|u| u.refusal)
    }

    #[test]
    fn a_wrong_route_wins_over_a_decoding_failure_when_it_can_be_read() {
        let other = |v: &mut Value| v["tenant_id"] = "globex".into();
        // (what, body, refusal)
        let rows: Vec<(&str, Vec<u8>, Option<Refusal>)> = vec![
            ("valid", signed_then(|_| {}), None),
            ("other tenant", signed_then(other), Some(Refusal::Route)),
            (
                "other project",
                signed_then(|v| v["project_id"] = "api".into()),
                Some(Refusal::Route),
            ),
            (
                "unknown field, right route",
                signed_then(|v| v["extra"] = 1.into()),
                Some(Refusal::Payload),
            ),
            (
                "unknown field, other tenant",
                signed_then(|v| {
                    other(v);
                    v["extra"] = 1.into();
                }),
                Some(Refusal::Route),
            ),
            (
                "float in payload, other project",
                signed_then(|v| {
                    v["project_id"] = "api".into();
                    v["payload"]["n"] = json!(1.5);
                }),
                Some(Refusal::Route),
            ),
            (
                "bad signature encoding, other tenant",
                signed_then(|v| {
                    other(v);
                    v["integrity"]["signature"] = "!".into();
                }),
                Some(Refusal::Route),
            ),
            (
                "bad signature encoding, right route",
                signed_then(|v| v["integrity"]["signature"] = "!".into()),
                Some(Refusal::SignatureInvalid),
            ),
            (
                "missing field, other tenant",
                signed_then(|v| {
                    other(v);
                    v.as_object_mut().unwrap().remove("occurred_at");
                }),
                Some(Refusal::Route),
            ),
            (
                "duplicate key in payload, other tenant",
                String::from_utf8(signed_then(other))
                    .unwrap()
                    .replacen("\"version\":1", "\"version\":1,\"version\":2", 1)
                    .into_bytes(),
                Some(Refusal::Route),
            ),
            // No route to read: the decoding refusal answers.
            (
                "not JSON",
                b"{\"tenant_id\":\"globex\",".to_vec(),
                Some(Refusal::Payload),
            ),
            (
                "an array",
                br#"["globex", "web"]"#.to_vec(),
                Some(Refusal::Payload),
            ),
            (
                "tenant missing, unknown field",
                signed_then(|v| {
                    v.as_object_mut().unwrap().remove("tenant_id");
                    v["project_id"] = "api".into();
                    v["extra"] = 1.into();
                }),
                Some(Refusal::Payload),
            ),
            (
                "tenant not a string, unknown field",
                signed_then(|v| {
                    v["tenant_id"] = 7.into();
                    v["project_id"] = "api".into();
                    v["extra"] = 1.into();
                }),
                Some(Refusal::Payload),
            ),
            // A missing or mistyped identity is the route's own refusal (wharf_core::inbox).
            (
                "tenant missing",
                signed_then(|v| {
                    v.as_object_mut().unwrap().remove("tenant_id");
                }),
                Some(Refusal::Route),
            ),
            (
                "tenant repeated",
                String::from_utf8(signed_then(|v| v["project_id"] = "api".into()))
                    .unwrap()
                    .replacen(
                        "\"tenant_id\":\"acme\"",
                        "\"tenant_id\":\"acme\",\"tenant_id\":\"acme\"",
                        1,
                    )
                    .into_bytes(),
                Some(Refusal::Payload),
            ),
        ];
        for (what, body, expected) in rows {
            assert_eq!(refusal(&body), expected, "{what}");
        }
    }

    #[test]
    fn a_version_above_i64_is_decoded_for_step_6_and_verified_as_sent() {
        let k = key().verifying_key();
        let check = |body: &[u8]| -> Result<i64, Refusal> {
            let decoded = decode_and_route(ROUTE, body).map_err(|u| u.refusal)?;
            verify(&decoded, &k)?;
            rules::check_schema_version(decoded.envelope.schema_version)?;
            Ok(decoded.envelope.schema_version)
        };
        // (what, body, answer after decoding, the signature and the version check)
        let rows: Vec<(&str, Vec<u8>, Result<i64, Refusal>)> = vec![
            ("version 1", signed_with_version("1", "acme"), Ok(1)),
            (
                "version 2",
                signed_with_version("2", "acme"),
                Err(Refusal::Schema),
            ),
            (
                "version -1",
                signed_with_version("-1", "acme"),
                Err(Refusal::Schema),
            ),
            (
                "i64::MAX + 1",
                signed_with_version("9223372036854775808", "acme"),
                Err(Refusal::Schema),
            ),
            (
                "u64::MAX",
                signed_with_version("18446744073709551615", "acme"),
                Err(Refusal::Schema),
            ),
            (
                "u64::MAX, re-signed by nobody",
                String::from_utf8(signed_with_version("18446744073709551615", "acme"))
                    .unwrap()
                    .replace("\"k-1\"", "\"k-2\"")
                    .into_bytes(),
                Err(Refusal::SignatureInvalid),
            ),
            (
                "u64::MAX, other tenant",
                signed_with_version("18446744073709551615", "globex"),
                Err(Refusal::Route),
            ),
            // The stand-in is never what is verified: a body that sends it is signed over it.
            (
                "the stand-in itself",
                signed_with_version(&VERSION_OUT_OF_RANGE.to_string(), "acme"),
                Err(Refusal::Schema),
            ),
            // Beyond u64 there is no canonical form: refused at decoding, after the route.
            (
                "u64::MAX + 1",
                signed_with_version("18446744073709551616", "acme"),
                Err(Refusal::Payload),
            ),
            (
                "u64::MAX + 1, other tenant",
                signed_with_version("18446744073709551616", "globex"),
                Err(Refusal::Route),
            ),
        ];
        for (what, body, expected) in rows {
            assert_eq!(check(&body), expected, "{what}");
        }
        // Other members are still checked when the version is out of range.
        let body = String::from_utf8(signed_with_version("9223372036854775808", "acme"))
            .unwrap()
            .replace("\"t/1\"", "\"\"");
        assert_eq!(refusal(body.as_bytes()), Some(Refusal::Payload));
    }
}
