//! The closed `controlplane/v1` envelope (SPEC §3.1): its model, its bounds, its decoder, its digests.
//!
//! This module owns what a well-formed envelope is. It must not know keys, signatures' validity,
//! payload schemas, streams or storage: [`decode_envelope`] says only "these bytes are a closed,
//! bounded envelope". Signature checks live in [`crate::sign`], payload schemas in
//! [`crate::schema`], sequencing in [`crate::inbox`].
//!
//! Decoding reads the bytes with [`crate::canonical::parse_closed`] first, so duplicate keys,
//! floats (anywhere, payload included), lone surrogates and absurd nesting are refused before any
//! field is looked at; then every field is checked against its bound. `schema_version` accepts any
//! `i64` here on purpose: SPEC §3.4 answers `refuse-incompatible` only *after* the signature is
//! verified, so the decoder must not refuse a version it does not speak.
//!
//! The payload is kept as the parsed [`Value`]. The closed parser is lossless for integer-only
//! JSON (strings are exact Unicode, integers exact), so the canonical bytes computed from it are
//! exactly the canonical bytes of what the producer sent: a signature is always checked over what
//! was sent, never over a re-interpretation of it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::canonical::{self, CanonicalError, Form};

/// The only `schema_version` this build speaks.
pub const SCHEMA_VERSION: i64 = 1;
/// The only `integrity.algorithm`.
pub const ALGORITHM: &str = "Ed25519";
/// Largest envelope text [`decode_envelope`] reads. A 1 MiB canonical payload plus the other
/// fields (about 1.5 KiB at their maxima) fits with room for whitespace and escapes; the HTTP body
/// limit must be at least this, or a legal envelope could be refused with 413.
pub const ENVELOPE_BYTES_MAX: usize = 2 * 1024 * 1024;
/// Largest payload, measured as its canonical JSON (SPEC §3.1), so the bound does not depend on
/// how a producer formatted or escaped it.
pub const PAYLOAD_BYTES_MAX: usize = 1024 * 1024;
/// `tenant_id` and `project_id`: 1..=128 bytes, `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`.
pub const IDENTITY_BYTES_MAX: usize = 128;
/// `event_id` is a ULID: exactly 26 characters.
pub const EVENT_ID_BYTES: usize = 26;
/// `event_type`: `^[a-z][a-z0-9_]{0,63}$`. Whether it is registered is the catalog's question.
pub const EVENT_TYPE_BYTES_MAX: usize = 64;
/// `idempotency_key`: 1..=256 bytes (SPEC §3.1, same bound as the outbox's).
pub const IDEMPOTENCY_KEY_BYTES_MAX: usize = 256;
/// `producer_version`: 1..=64 bytes.
pub const PRODUCER_VERSION_BYTES_MAX: usize = 64;
/// `integrity.key_id`: 1..=128 bytes.
pub const KEY_ID_BYTES_MAX: usize = 128;
/// `occurred_at`: an RFC 3339 timestamp. 64 bytes holds any real one (nanoseconds and an offset
/// take 35); the bound only stops a huge fraction from reaching the date parser.
pub const OCCURRED_AT_BYTES_MAX: usize = 64;
/// An Ed25519 signature is 64 bytes; its standard base64 text is 88 characters.
pub const SIGNATURE_BYTES: usize = 64;
/// `producer_sequence` starts at 1, so that 0 can mean "nothing acknowledged yet" in a cursor.
pub const PRODUCER_SEQUENCE_MIN: u64 = 1;

/// The envelope's top-level field names.
pub const FIELDS: [&str; 11] = [
    "schema_version",
    "event_type",
    "tenant_id",
    "project_id",
    "event_id",
    "producer_sequence",
    "occurred_at",
    "idempotency_key",
    "producer_version",
    "payload",
    "integrity",
];
/// The `integrity` object's field names.
pub const INTEGRITY_FIELDS: [&str; 3] = ["algorithm", "key_id", "signature"];

/// A `controlplane/v1` envelope.
///
/// Fields are public plain data; [`decode_envelope`] and [`Envelope::validate`] are what make one
/// trustworthy. The serde derives are closed at every level (`deny_unknown_fields`) so that a
/// caller who deserialises one directly still cannot smuggle a field through, but only
/// [`decode_envelope`] also refuses duplicate keys and floats and gives stable reasons.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// 1 for `controlplane/v1`; other values decode so they can be refused after verification.
    pub schema_version: i64,
    /// The payload's type, looked up in the schema catalog.
    pub event_type: String,
    /// The tenant the producer claims; must agree with the route and the credential.
    pub tenant_id: String,
    /// The project the producer claims; must agree with the route.
    pub project_id: String,
    /// A ULID, uppercase Crockford base32, unique per stream forever.
    pub event_id: String,
    /// The producer's sequence in its stream, from 1.
    pub producer_sequence: u64,
    /// When the producer says the event happened (RFC 3339, kept as sent so it signs as sent).
    pub occurred_at: String,
    /// The producer's idempotency key, unique per stream forever.
    pub idempotency_key: String,
    /// The producer's software version, for audit and diagnosis.
    pub producer_version: String,
    /// The event's payload: a JSON object, integers only, at most [`PAYLOAD_BYTES_MAX`] canonical.
    pub payload: Value,
    /// Who signed it and the signature.
    pub integrity: Integrity,
}

/// The envelope's `integrity` member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Integrity {
    /// Always [`ALGORITHM`].
    pub algorithm: String,
    /// The signing key's id in the tenant (and project) scope.
    pub key_id: String,
    /// Standard base64 (with padding) of the 64-byte Ed25519 signature; `""` while signing.
    pub signature: String,
}

/// Why bytes are not a well-formed envelope. Every variant is a property of the bytes, so
/// retrying the same bytes never helps; [`EnvelopeError::reason`] gives the stable reason string.
///
/// No variant carries field *values* (only names, lengths and offsets), so errors can be logged
/// and audited without leaking envelope content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvelopeError {
    /// The text is larger than [`ENVELOPE_BYTES_MAX`]. Reason `bounds`.
    #[error("envelope is {bytes} bytes, more than {bytes_max}")]
    TooLarge {
        /// The text's length.
        bytes: usize,
        /// [`ENVELOPE_BYTES_MAX`].
        bytes_max: usize,
    },
    /// The text is not strict JSON; see [`CanonicalError`]. Reason: `float` for a fraction or
    /// exponent, `duplicate-key`, `integer-range`, otherwise `malformed`.
    #[error("envelope JSON refused: {0}")]
    Json(#[from] CanonicalError),
    /// A member has the wrong JSON type (e.g. the envelope, `integrity` or `payload` is not an
    /// object, or a string field holds a number). Reason `malformed`.
    #[error("`{field}` must be {expected}")]
    WrongType {
        /// The member (`""` for the envelope itself).
        field: &'static str,
        /// The JSON type it must have.
        expected: &'static str,
    },
    /// A member the closed envelope does not define. Reason `unknown-field`.
    #[error("unknown field `{field}` in {within}")]
    UnknownField {
        /// The unknown name, cut to 64 bytes so a hostile name cannot flood a log.
        field: String,
        /// `envelope` or `integrity`.
        within: &'static str,
    },
    /// A required member is absent. Reason `missing-field`.
    #[error("missing field `{field}`")]
    MissingField {
        /// The member.
        field: &'static str,
    },
    /// `tenant_id`, `project_id`, `event_id`, `event_type`, or the text of `idempotency_key`,
    /// `producer_version` or `integrity.key_id` (which must hold no control character, since
    /// PostgreSQL text cannot store U+0000 and logs should not carry the rest) does not have
    /// its required shape. Reason `identity`.
    #[error("`{field}` does not have the required form: {rule}")]
    Identity {
        /// The member.
        field: &'static str,
        /// The rule it breaks.
        rule: &'static str,
    },
    /// A string member's length in bytes is outside its bound. Reason `bounds`.
    #[error("`{field}` is {len} bytes; must be {min}..={max}")]
    Length {
        /// The member.
        field: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The smallest length allowed.
        min: usize,
        /// The largest length allowed.
        max: usize,
    },
    /// `producer_sequence` is not an integer in `1..=u64::MAX`. Reason `bounds`.
    #[error("`producer_sequence` must be an integer from 1 to 18446744073709551615")]
    Sequence,
    /// `schema_version` is an integer outside `i64`. Reason `integer-range`.
    #[error("`schema_version` is outside the 64-bit signed range")]
    SchemaVersionRange,
    /// The payload's canonical JSON is longer than [`PAYLOAD_BYTES_MAX`]. Reason `bounds`.
    #[error("payload is {bytes} canonical bytes, more than {bytes_max}")]
    PayloadTooLarge {
        /// Its canonical length.
        bytes: usize,
        /// [`PAYLOAD_BYTES_MAX`].
        bytes_max: usize,
    },
    /// `occurred_at` is not an RFC 3339 timestamp. Reason `timestamp`.
    #[error("`occurred_at` is not an RFC 3339 timestamp")]
    Timestamp,
    /// `integrity.algorithm` is not `Ed25519`. Reason `signature-algorithm`.
    #[error("`integrity.algorithm` must be \"Ed25519\"")]
    Algorithm,
    /// `integrity.signature` is not standard padded base64 of exactly 64 bytes.
    /// Reason `signature-encoding`.
    #[error("`integrity.signature` must be standard base64 of exactly 64 bytes")]
    SignatureEncoding,
}

impl EnvelopeError {
    /// The stable reason string, for responses, audit and metrics. Never changes meaning.
    pub fn reason(&self) -> &'static str {
        match self {
            EnvelopeError::Json(CanonicalError::Float { .. } | CanonicalError::FloatValue) => {
                "float"
            }
            EnvelopeError::Json(CanonicalError::DuplicateKey { .. }) => "duplicate-key",
            EnvelopeError::Json(CanonicalError::IntegerRange { .. })
            | EnvelopeError::SchemaVersionRange => "integer-range",
            EnvelopeError::Json(_) | EnvelopeError::WrongType { .. } => "malformed",
            EnvelopeError::UnknownField { .. } => "unknown-field",
            EnvelopeError::MissingField { .. } => "missing-field",
            EnvelopeError::Identity { .. } => "identity",
            EnvelopeError::TooLarge { .. }
            | EnvelopeError::Length { .. }
            | EnvelopeError::Sequence
            | EnvelopeError::PayloadTooLarge { .. } => "bounds",
            EnvelopeError::Timestamp => "timestamp",
            EnvelopeError::Algorithm => "signature-algorithm",
            EnvelopeError::SignatureEncoding => "signature-encoding",
        }
    }

    /// The member the error is about, when it is about one (for mapping to SPEC §3.4 steps:
    /// route identities, signature, payload).
    pub fn field(&self) -> Option<&'static str> {
        match self {
            EnvelopeError::WrongType { field, .. }
            | EnvelopeError::MissingField { field }
            | EnvelopeError::Identity { field, .. }
            | EnvelopeError::Length { field, .. } => Some(field),
            EnvelopeError::Sequence => Some("producer_sequence"),
            EnvelopeError::SchemaVersionRange => Some("schema_version"),
            EnvelopeError::PayloadTooLarge { .. } => Some("payload"),
            EnvelopeError::Timestamp => Some("occurred_at"),
            EnvelopeError::Algorithm => Some("integrity.algorithm"),
            EnvelopeError::SignatureEncoding => Some("integrity.signature"),
            _ => None,
        }
    }
}

/// Whether `s` is a tenant/project identity: `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`.
///
/// Checked by hand with explicit ASCII classes: a Unicode-aware `\w` would admit non-ASCII
/// look-alikes, and two tenants that render the same must never exist.
pub fn is_identity(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= IDENTITY_BYTES_MAX
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'-'))
}

/// Whether `s` is a canonical ULID: 26 uppercase Crockford base32 characters (no I, L, O, U),
/// first character `0`..=`7` (anything above overflows 128 bits).
///
/// Lowercase is refused although Crockford decoding would accept it: the event id is compared as
/// text for uniqueness, and `01h…` and `01H…` must not be two identities for one ULID.
pub fn is_ulid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == EVENT_ID_BYTES
        && matches!(b[0], b'0'..=b'7')
        && b.iter()
            .all(|c| matches!(c, b'0'..=b'9' | b'A'..=b'H' | b'J' | b'K' | b'M' | b'N' | b'P'..=b'T' | b'V'..=b'Z'))
}

/// Whether `s` is an event type name: `^[a-z][a-z0-9_]{0,63}$`.
pub fn is_event_type(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= EVENT_TYPE_BYTES_MAX
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
}

/// SHA-256 hex of an event id: what audit records instead of the id itself (SPEC §3.6).
pub fn event_id_digest_hex(event_id: &str) -> String {
    hex::encode(Sha256::digest(event_id.as_bytes()))
}

/// Decodes and checks envelope bytes. See the module docs for what "closed" covers.
pub fn decode_envelope(bytes: &[u8]) -> Result<Envelope, EnvelopeError> {
    if bytes.len() > ENVELOPE_BYTES_MAX {
        return Err(EnvelopeError::TooLarge {
            bytes: bytes.len(),
            bytes_max: ENVELOPE_BYTES_MAX,
        });
    }
    let value = canonical::parse_closed(bytes)?;
    let Value::Object(mut top) = value else {
        return Err(EnvelopeError::WrongType {
            field: "",
            expected: "an object",
        });
    };
    refuse_unknown(&top, &FIELDS, "envelope")?;

    let schema_version = match take(&mut top, "schema_version")? {
        Value::Number(n) => match n.as_i64() {
            Some(v) => v,
            None if n.is_u64() => return Err(EnvelopeError::SchemaVersionRange),
            None => return Err(EnvelopeError::Json(CanonicalError::FloatValue)),
        },
        _ => return Err(wrong("schema_version", "an integer")),
    };
    let producer_sequence = match take(&mut top, "producer_sequence")? {
        Value::Number(n) => match n.as_u64() {
            Some(v) => v,
            None if n.is_i64() => return Err(EnvelopeError::Sequence),
            None => return Err(EnvelopeError::Json(CanonicalError::FloatValue)),
        },
        _ => return Err(wrong("producer_sequence", "an integer")),
    };
    let payload = take(&mut top, "payload")?;
    let Value::Object(mut integrity) = take(&mut top, "integrity")? else {
        return Err(wrong("integrity", "an object"));
    };
    refuse_unknown(&integrity, &INTEGRITY_FIELDS, "integrity")?;

    let envelope = Envelope {
        schema_version,
        event_type: take_string(&mut top, "event_type")?,
        tenant_id: take_string(&mut top, "tenant_id")?,
        project_id: take_string(&mut top, "project_id")?,
        event_id: take_string(&mut top, "event_id")?,
        producer_sequence,
        occurred_at: take_string(&mut top, "occurred_at")?,
        idempotency_key: take_string(&mut top, "idempotency_key")?,
        producer_version: take_string(&mut top, "producer_version")?,
        payload,
        integrity: Integrity {
            algorithm: take_string_in(&mut integrity, "algorithm", "integrity.algorithm")?,
            key_id: take_string_in(&mut integrity, "key_id", "integrity.key_id")?,
            signature: take_string_in(&mut integrity, "signature", "integrity.signature")?,
        },
    };
    envelope.validate()?;
    envelope.signature_bytes()?;
    Ok(envelope)
}

fn wrong(field: &'static str, expected: &'static str) -> EnvelopeError {
    EnvelopeError::WrongType { field, expected }
}

fn refuse_unknown(
    map: &Map<String, Value>,
    known: &[&str],
    within: &'static str,
) -> Result<(), EnvelopeError> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(field) => Err(EnvelopeError::UnknownField {
            field: truncate(field, 64).to_owned(),
            within,
        }),
        None => Ok(()),
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn take(map: &mut Map<String, Value>, field: &'static str) -> Result<Value, EnvelopeError> {
    map.remove(field)
        .ok_or(EnvelopeError::MissingField { field })
}

fn take_string(map: &mut Map<String, Value>, field: &'static str) -> Result<String, EnvelopeError> {
    take_string_in(map, field, field)
}

fn take_string_in(
    map: &mut Map<String, Value>,
    key: &'static str,
    field: &'static str,
) -> Result<String, EnvelopeError> {
    match map.remove(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(wrong(field, "a string")),
        None => Err(EnvelopeError::MissingField { field }),
    }
}

fn check_len(field: &'static str, s: &str, min: usize, max: usize) -> Result<(), EnvelopeError> {
    let len = s.len();
    if len < min || len > max {
        return Err(EnvelopeError::Length {
            field,
            len,
            min,
            max,
        });
    }
    Ok(())
}

/// Text fields that are not identities still must not hold control characters: PostgreSQL text
/// cannot store U+0000, and the rest would only corrupt logs and terminals.
fn check_printable(field: &'static str, s: &str) -> Result<(), EnvelopeError> {
    if s.chars().any(char::is_control) {
        return Err(EnvelopeError::Identity {
            field,
            rule: "no control characters",
        });
    }
    Ok(())
}

impl Envelope {
    /// Checks every bound of SPEC §3.1 except the signature's validity (that needs a key).
    ///
    /// [`decode_envelope`] calls it; [`crate::sign::sign`] calls it before signing, so wharf
    /// never signs an envelope a receiver would refuse. The signature's *encoding* is checked
    /// separately ([`Envelope::signature_bytes`]) because it is `""` while signing.
    pub fn validate(&self) -> Result<(), EnvelopeError> {
        // Route identities first: SPEC §3.4 checks the route before anything else.
        check_len("tenant_id", &self.tenant_id, 1, IDENTITY_BYTES_MAX)?;
        if !is_identity(&self.tenant_id) {
            return Err(EnvelopeError::Identity {
                field: "tenant_id",
                rule: "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$",
            });
        }
        check_len("project_id", &self.project_id, 1, IDENTITY_BYTES_MAX)?;
        if !is_identity(&self.project_id) {
            return Err(EnvelopeError::Identity {
                field: "project_id",
                rule: "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$",
            });
        }
        if !is_ulid(&self.event_id) {
            return Err(EnvelopeError::Identity {
                field: "event_id",
                rule: "a ULID: 26 uppercase Crockford base32 characters, the first 0-7",
            });
        }
        check_len("event_type", &self.event_type, 1, EVENT_TYPE_BYTES_MAX)?;
        if !is_event_type(&self.event_type) {
            return Err(EnvelopeError::Identity {
                field: "event_type",
                rule: "^[a-z][a-z0-9_]{0,63}$",
            });
        }
        if self.producer_sequence < PRODUCER_SEQUENCE_MIN {
            return Err(EnvelopeError::Sequence);
        }
        check_len(
            "idempotency_key",
            &self.idempotency_key,
            1,
            IDEMPOTENCY_KEY_BYTES_MAX,
        )?;
        check_printable("idempotency_key", &self.idempotency_key)?;
        check_len(
            "producer_version",
            &self.producer_version,
            1,
            PRODUCER_VERSION_BYTES_MAX,
        )?;
        check_printable("producer_version", &self.producer_version)?;
        check_len("occurred_at", &self.occurred_at, 1, OCCURRED_AT_BYTES_MAX)?;
        if chrono::DateTime::parse_from_rfc3339(&self.occurred_at).is_err() {
            return Err(EnvelopeError::Timestamp);
        }
        if self.integrity.algorithm != ALGORITHM {
            return Err(EnvelopeError::Algorithm);
        }
        check_len(
            "integrity.key_id",
            &self.integrity.key_id,
            1,
            KEY_ID_BYTES_MAX,
        )?;
        check_printable("integrity.key_id", &self.integrity.key_id)?;
        if !self.payload.is_object() {
            return Err(wrong("payload", "an object"));
        }
        let bytes = self.payload_canonical()?.len();
        if bytes > PAYLOAD_BYTES_MAX {
            return Err(EnvelopeError::PayloadTooLarge {
                bytes,
                bytes_max: PAYLOAD_BYTES_MAX,
            });
        }
        Ok(())
    }

    /// The decoded 64-byte signature, or [`EnvelopeError::SignatureEncoding`].
    pub fn signature_bytes(&self) -> Result<[u8; SIGNATURE_BYTES], EnvelopeError> {
        use base64::Engine as _;
        // STANDARD requires canonical padding and refuses trailing bits that are not zero, so
        // one signature has exactly one accepted text.
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(self.integrity.signature.as_bytes())
            .map_err(|_| EnvelopeError::SignatureEncoding)?;
        decoded
            .try_into()
            .map_err(|_| EnvelopeError::SignatureEncoding)
    }

    /// The payload's canonical JSON (RFC 8785).
    pub fn payload_canonical(&self) -> Result<Vec<u8>, EnvelopeError> {
        Ok(canonical::to_canonical(&self.payload)?)
    }

    /// The canonical JSON of the envelope in `form`. `signature` replaces
    /// `integrity.signature` when given (signing uses `Some("")`); `None` for `integrity`
    /// leaves the whole `integrity` member out (the content digest).
    pub fn canonical_bytes(
        &self,
        form: Form,
        integrity: IntegrityPart<'_>,
    ) -> Result<Vec<u8>, CanonicalError> {
        // Written field by field in JCS order rather than by building a `Value`, so a 1 MiB
        // payload is not cloned for every signature check. The order is asserted in a test
        // against the generic writer.
        let mut out = Vec::with_capacity(512);
        let s = |out: &mut Vec<u8>, key: &str, v: &str| {
            canonical::write_string(out, key, form);
            out.push(b':');
            canonical::write_string(out, v, form);
            out.push(b',');
        };
        out.push(b'{');
        s(&mut out, "event_id", &self.event_id);
        s(&mut out, "event_type", &self.event_type);
        s(&mut out, "idempotency_key", &self.idempotency_key);
        let signature = match integrity {
            IntegrityPart::Omit => None,
            IntegrityPart::AsIs => Some(self.integrity.signature.as_str()),
            IntegrityPart::Signature(sig) => Some(sig),
        };
        if let Some(signature) = signature {
            out.extend_from_slice(b"\"integrity\":{");
            s(&mut out, "algorithm", &self.integrity.algorithm);
            s(&mut out, "key_id", &self.integrity.key_id);
            canonical::write_string(&mut out, "signature", form);
            out.push(b':');
            canonical::write_string(&mut out, signature, form);
            out.extend_from_slice(b"},");
        }
        s(&mut out, "occurred_at", &self.occurred_at);
        out.extend_from_slice(b"\"payload\":");
        canonical::write_value(&mut out, &self.payload, form)?;
        out.push(b',');
        out.extend_from_slice(b"\"producer_sequence\":");
        out.extend_from_slice(self.producer_sequence.to_string().as_bytes());
        out.push(b',');
        s(&mut out, "producer_version", &self.producer_version);
        s(&mut out, "project_id", &self.project_id);
        out.extend_from_slice(b"\"schema_version\":");
        out.extend_from_slice(self.schema_version.to_string().as_bytes());
        out.push(b',');
        canonical::write_string(&mut out, "tenant_id", form);
        out.push(b':');
        canonical::write_string(&mut out, &self.tenant_id, form);
        out.push(b'}');
        Ok(out)
    }

    /// The envelope as sent on the wire: RFC 8785 canonical JSON with its signature.
    pub fn to_canonical_json(&self) -> Result<Vec<u8>, CanonicalError> {
        self.canonical_bytes(Form::Rfc8785, IntegrityPart::AsIs)
    }

    /// SHA-256 of the RFC 8785 canonical JSON of the envelope **without** its `integrity` member.
    ///
    /// This is the "content" that SPEC §3.5 compares for duplicates and conflicts. Integrity is
    /// left out on purpose: the same event re-signed after a key rotation (new `key_id`, new
    /// signature) is the same event and must answer `ignore-duplicate`, not `refuse-tampered`.
    /// Everything else — sequence, ids, time, payload — is in, so any change of meaning changes
    /// the digest.
    pub fn content_digest(&self) -> Result<[u8; 32], CanonicalError> {
        let bytes = self.canonical_bytes(Form::Rfc8785, IntegrityPart::Omit)?;
        Ok(Sha256::digest(&bytes).into())
    }

    /// SHA-256 hex of this envelope's event id (for audit).
    pub fn event_id_digest_hex(&self) -> String {
        event_id_digest_hex(&self.event_id)
    }

    /// The envelope as a JSON value (for callers that want to embed it in something else).
    pub fn to_value(&self) -> Value {
        serde_json::json!({
            "schema_version": self.schema_version,
            "event_type": self.event_type,
            "tenant_id": self.tenant_id,
            "project_id": self.project_id,
            "event_id": self.event_id,
            "producer_sequence": self.producer_sequence,
            "occurred_at": self.occurred_at,
            "idempotency_key": self.idempotency_key,
            "producer_version": self.producer_version,
            "payload": self.payload,
            "integrity": {
                "algorithm": self.integrity.algorithm,
                "key_id": self.integrity.key_id,
                "signature": self.integrity.signature,
            },
        })
    }
}

/// What [`Envelope::canonical_bytes`] writes for `integrity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntegrityPart<'a> {
    /// Leave the member out (content digest).
    Omit,
    /// Write it as it is (the wire form).
    AsIs,
    /// Write it with this signature text (signing bytes use `""`).
    Signature(&'a str),
}

#[cfg(test)]
mod tests;
