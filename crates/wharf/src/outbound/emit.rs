//! Emitting a signed `controlplane/v1` envelope through the outbox (SPEC §3.8).
//!
//! Owns: [`emit_envelope`] and its immutability rule (one idempotency key, one envelope,
//! forever), the request digest, the receiver stream's sequence and lane, the event id, and the
//! `envelope` action's payload ([`EnvelopeDelivery`]). Must not know: how the envelope is sent
//! (the network sender and the `envelope` adapter in `wharf-adapters`), where keys come from
//! (a [`SigningKeySource`]), or the receiving side.
//!
//! # One key, one envelope
//!
//! An envelope is signed over its event id, sequence and time, so signing the same request
//! twice gives two different envelopes. The emitted envelope is therefore stored, byte for
//! byte, in `wharf.outbound_envelopes` under its idempotency key, and that table decides before
//! anything else is written:
//!
//! 1. the key is looked up: the same request (digest of scope, event type, canonical payload and
//!    destination) answers the stored envelope, consuming no sequence; another request is
//!    [`Error::IdempotencyConflict`];
//! 2. otherwise, inside a savepoint: the receiver stream's sequence row is advanced (and stays
//!    locked until the caller commits), the envelope is built and signed, and the key is
//!    claimed with `INSERT … ON CONFLICT DO NOTHING`. If a concurrent emit of the same key
//!    committed first, the claim waits for it and finds it: the savepoint is rolled back (the
//!    sequence with it) and step 1 answers. Only the claim's winner enqueues, so the outbox
//!    never sees a second payload for one key.
//!
//! The outbox's own idempotency still guards the action: a key already used by a non-envelope
//! action is refused there, and the savepoint rolls the claim back.
//!
//! Callers should run at READ COMMITTED (PostgreSQL's default). Under REPEATABLE READ a racing
//! emit of the same key fails with a serialization error instead of answering the winner's
//! envelope; a retry then answers it.

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::{Acquire as _, PgConnection};
use wharf_core::canonical;
use wharf_core::envelope::{
    ALGORITHM, Envelope, IDEMPOTENCY_KEY_BYTES_MAX, Integrity, SCHEMA_VERSION, decode_envelope,
};
use wharf_core::schema::Catalog;

use super::error::Error;
use super::keys::SigningKeySource;
use super::scope::{Destination, Scope};
use crate::outbox::{self, ActionRequest, Registry};
use crate::store::outbound as store;

/// The outbox kind that delivers envelopes. Its adapter (in `wharf-adapters`) reads an
/// [`EnvelopeDelivery`] from the action's payload.
pub const ENVELOPE_KIND: &str = "envelope";

/// `producer_version` of every envelope this build emits.
pub const PRODUCER_VERSION: &str = concat!("wharf/", env!("CARGO_PKG_VERSION"));

/// The built-in v1 schemas, parsed once: parsing compiles every pattern, far too slow to
/// repeat per emit.
static CATALOG: LazyLock<Catalog> = LazyLock::new(Catalog::with_builtin);

/// What to emit. Build it with [`EmitRequest::new`].
#[derive(Debug, Clone, PartialEq)]
pub struct EmitRequest {
    /// The (tenant, project) the envelope is from.
    pub scope: Scope,
    /// A built-in v1 event type.
    pub event_type: String,
    /// The payload; must pass the event type's schema.
    pub payload: Value,
    /// The envelope's idempotency key, 1..=256 bytes without control characters, unique across
    /// the whole outbox (it is also the delivery action's key).
    pub idempotency_key: String,
    /// The receiver.
    pub destination: Destination,
}

impl EmitRequest {
    /// A request (checked by [`emit_envelope`]).
    pub fn new(
        scope: Scope,
        event_type: impl Into<String>,
        payload: Value,
        idempotency_key: impl Into<String>,
        destination: Destination,
    ) -> EmitRequest {
        EmitRequest {
            scope,
            event_type: event_type.into(),
            payload,
            idempotency_key: idempotency_key.into(),
            destination,
        }
    }
}

/// What an emit stands for.
#[derive(Debug, Clone, PartialEq)]
pub struct Emitted {
    /// The delivery action (an `envelope` action in the outbox).
    pub action_id: i64,
    /// The signed envelope, exactly as it is delivered.
    pub envelope: Envelope,
    /// False when the key was emitted before with the same request: the original envelope,
    /// nothing written.
    pub created: bool,
}

/// The `envelope` action's payload: where to deliver, and what.
///
/// Stored as `{"destination_url": …, "envelope": {…}}`. The adapter sends
/// [`EnvelopeDelivery::body`], the envelope's RFC 8785 canonical JSON, which is exactly the text
/// that was signed and stored, whatever the payload's JSON storage did to key order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvelopeDelivery {
    /// The receiver's ingest URL.
    pub destination_url: String,
    /// The signed envelope.
    pub envelope: Envelope,
}

impl EnvelopeDelivery {
    /// Reads an `envelope` action's payload. An error means the action was not enqueued by
    /// [`emit_envelope`]: the adapter should fail it (retrying cannot help).
    pub fn from_payload(payload: &Value) -> Result<EnvelopeDelivery, Error> {
        let delivery: EnvelopeDelivery = serde_json::from_value(payload.clone())
            .map_err(|e| Error::Corrupt(format!("envelope action payload: {e}")))?;
        delivery
            .envelope
            .validate()
            .map_err(|e| Error::Corrupt(format!("envelope action payload: {}", e.reason())))?;
        Ok(delivery)
    }

    /// The action payload.
    pub fn to_payload(&self) -> Value {
        serde_json::json!({
            "destination_url": self.destination_url,
            "envelope": self.envelope.to_value(),
        })
    }

    /// The request body: the envelope's canonical JSON.
    pub fn body(&self) -> Result<Vec<u8>, Error> {
        self.envelope
            .to_canonical_json()
            .map_err(|e| Error::Corrupt(format!("envelope has no canonical form: {e}")))
    }
}

/// Emits a signed envelope in the caller's transaction: it is delivered exactly when that
/// transaction commits. See the module docs for the rules; in short, same key and same request
/// ⇒ the original envelope (`created: false`), same key and another request ⇒
/// [`Error::IdempotencyConflict`], and a failed emit leaves the transaction as it found it.
///
/// `registry` must have an adapter for [`ENVELOPE_KIND`]. Emits into one receiver stream
/// (scope and destination) wait for each other's transactions: the stream's sequence row stays
/// locked until commit, which is what keeps the receiver's sequence gap-free and in commit
/// order. Keep emitting transactions short.
///
/// ```no_run
/// # async fn example(pool: sqlx::PgPool, registry: wharf::outbox::Registry,
/// #                  server_key: wharf::outbound::ServerKey) -> Result<(), wharf::outbound::Error> {
/// use wharf::outbound::{emit_envelope, Destination, EmitRequest, SealedKeySource, Scope};
/// let keys = SealedKeySource::new(server_key);
/// let mut tx = pool.begin().await?;
/// let request = EmitRequest::new(
///     Scope::new("acme", "web"),
///     "sync_cursor",
///     serde_json::json!({"producer_id": "srv-1", "acknowledged_sequence": 7,
///                        "acknowledged_event_id": null, "version": 1}),
///     "cursor:srv-1:7",
///     Destination::new("https://b.example/v1/tenants/acme/projects/web/envelopes"),
/// );
/// let emitted = emit_envelope(&mut tx, &registry, &keys, &request).await?;
/// tx.commit().await?;
/// # let _ = emitted; Ok(()) }
/// ```
pub async fn emit_envelope(
    conn: &mut PgConnection,
    registry: &Registry,
    keys: &dyn SigningKeySource,
    request: &EmitRequest,
) -> Result<Emitted, Error> {
    let digest = check(request)?;
    let key = request.idempotency_key.as_str();
    if let Some(existing) = store::envelope_by_key(&mut *conn, key).await? {
        return answer_existing(existing, &digest);
    }
    let signing = keys.current(&mut *conn, &request.scope).await?;

    let mut savepoint = conn.begin().await?;
    match emit_new(&mut savepoint, registry, request, &digest, &signing).await {
        Ok(Some(emitted)) => {
            savepoint.commit().await?;
            Ok(emitted)
        }
        Ok(None) => {
            // A concurrent emit of this key committed first: give our sequence number back
            // and answer with what it stored.
            savepoint.rollback().await?;
            match store::envelope_by_key(&mut *conn, key).await? {
                Some(existing) => answer_existing(existing, &digest),
                None => Err(Error::Database(sqlx::Error::Protocol(format!(
                    "idempotency key {key:?} was taken, but its holder is not visible"
                )))),
            }
        }
        Err(e) => {
            savepoint.rollback().await?;
            Err(e)
        }
    }
}

/// Signs, claims the key and enqueues; `None` when the key was taken meanwhile (nothing of
/// this call should be kept).
async fn emit_new(
    conn: &mut PgConnection,
    registry: &Registry,
    request: &EmitRequest,
    digest: &[u8; 32],
    signing: &super::keys::CurrentKey,
) -> Result<Option<Emitted>, Error> {
    let scope = &request.scope;
    let url = request.destination.url.as_str();
    let (sequence, now) =
        store::sequence_next(&mut *conn, &scope.tenant, &scope.project, url).await?;
    let unsigned = Envelope {
        schema_version: SCHEMA_VERSION,
        event_type: request.event_type.clone(),
        tenant_id: scope.tenant.clone(),
        project_id: scope.project.clone(),
        event_id: new_event_id(now.timestamp_millis(), rand::random::<u128>()),
        producer_sequence: u64::try_from(sequence)
            .map_err(|_| Error::Corrupt(format!("stream sequence {sequence} is not positive")))?,
        occurred_at: now.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        idempotency_key: request.idempotency_key.clone(),
        producer_version: PRODUCER_VERSION.to_owned(),
        payload: request.payload.clone(),
        integrity: Integrity {
            algorithm: ALGORITHM.to_owned(),
            key_id: signing.key_id.clone(),
            signature: String::new(),
        },
    };
    let envelope = wharf_core::sign::sign(&unsigned, &signing.key, &signing.key_id)?;
    let text = envelope
        .to_canonical_json()
        .map_err(|e| Error::invalid("payload", format!("has no canonical form: {e}")))?;
    let text = String::from_utf8(text)
        .map_err(|_| Error::Corrupt("canonical JSON is not UTF-8".to_owned()))?;
    let claimed = store::envelope_insert(
        &mut *conn,
        store::NewEnvelope {
            idempotency_key: &request.idempotency_key,
            request_digest: digest,
            tenant_id: &scope.tenant,
            project_id: &scope.project,
            destination_url: url,
            event_type: &request.event_type,
            event_id: &envelope.event_id,
            producer_sequence: sequence,
            key_id: &signing.key_id,
            envelope: &text,
        },
    )
    .await?;
    if !claimed {
        return Ok(None);
    }
    let delivery = EnvelopeDelivery {
        destination_url: url.to_owned(),
        envelope,
    };
    let mut action = ActionRequest::new(
        ENVELOPE_KIND,
        lane_key(scope, &request.destination),
        request.idempotency_key.clone(),
        delivery.to_payload(),
    )
    .tenant(scope.tenant.clone());
    action.project_id = Some(scope.project.clone());
    action.max_attempts = request.destination.max_attempts;
    let enqueued = outbox::enqueue(&mut *conn, registry, action).await?;
    if !store::envelope_set_action(&mut *conn, &request.idempotency_key, enqueued.id).await? {
        return Err(Error::Corrupt(format!(
            "envelope {:?} lost its row before its action was recorded",
            request.idempotency_key
        )));
    }
    Ok(Some(Emitted {
        action_id: enqueued.id,
        envelope: delivery.envelope,
        created: true,
    }))
}

/// The answer for a key that holds an envelope already.
fn answer_existing(existing: store::EnvelopeRow, digest: &[u8; 32]) -> Result<Emitted, Error> {
    if existing.request_digest.as_slice() != digest.as_slice() {
        return Err(Error::IdempotencyConflict {
            key: existing.idempotency_key,
        });
    }
    let envelope = decode_envelope(existing.envelope.as_bytes()).map_err(|e| {
        Error::Corrupt(format!(
            "stored envelope {:?} does not decode: {}",
            existing.idempotency_key,
            e.reason()
        ))
    })?;
    let action_id = existing.action_id.ok_or_else(|| {
        Error::Corrupt(format!(
            "stored envelope {:?} has no delivery action",
            existing.idempotency_key
        ))
    })?;
    Ok(Emitted {
        action_id,
        envelope,
        created: false,
    })
}

/// Checks everything that needs no database and returns the request digest.
fn check(request: &EmitRequest) -> Result<[u8; 32], Error> {
    request.scope.validate()?;
    request.destination.validate()?;
    let key = &request.idempotency_key;
    if key.is_empty() || key.len() > IDEMPOTENCY_KEY_BYTES_MAX {
        return Err(Error::invalid(
            "idempotency_key",
            format!(
                "must be 1..={IDEMPOTENCY_KEY_BYTES_MAX} bytes, is {}",
                key.len()
            ),
        ));
    }
    if key.chars().any(char::is_control) {
        return Err(Error::invalid(
            "idempotency_key",
            "must not contain control characters",
        ));
    }
    if let Some(0) = request.destination.max_attempts {
        return Err(Error::invalid("max_attempts", "must be at least 1"));
    }
    CATALOG.validate(&request.event_type, &request.payload)?;
    let payload = canonical::to_canonical(&request.payload)
        .map_err(|e| Error::invalid("payload", format!("has no canonical form: {e}")))?;
    Ok(request_digest(
        &request.scope,
        &request.event_type,
        &payload,
        &request.destination,
    ))
}

/// SHA-256 over what makes two emit requests the same: scope, event type, canonical payload
/// (RFC 8785) and destination URL, each tagged and length-prefixed so no two requests share an
/// encoding. Not the attempts: they shape delivery, not the envelope.
pub fn request_digest(
    scope: &Scope,
    event_type: &str,
    canonical_payload: &[u8],
    destination: &Destination,
) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"wharf.outbound.request.v1");
    for part in [
        scope.tenant.as_bytes(),
        scope.project.as_bytes(),
        event_type.as_bytes(),
        canonical_payload,
        destination.url.as_bytes(),
    ] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    h.finalize().into()
}

/// The lane of a receiver stream: every envelope of one (tenant, project, destination) is
/// delivered one at a time, in emit order, so the receiver's cursor advances without waiting
/// for gaps to fill. A digest rather than the parts themselves: two 128-byte identities and a
/// 2 KiB URL do not fit the outbox's 256-byte lane key.
pub fn lane_key(scope: &Scope, destination: &Destination) -> String {
    let mut h = Sha256::new();
    h.update(b"wharf.outbound.lane.v1");
    for part in [
        scope.tenant.as_bytes(),
        scope.project.as_bytes(),
        destination.url.as_bytes(),
    ] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    format!("{ENVELOPE_KIND}:{}", hex::encode(h.finalize()))
}

/// A ULID (26 characters of Crockford base32): 48 bits of Unix milliseconds, then 80 random
/// bits. Time first, so event ids sort roughly by emission; the random part makes two ids of
/// one millisecond distinct (2^-80 per pair).
pub(crate) fn new_event_id(unix_ms: i64, random: u128) -> String {
    const DIGITS: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let ms = u128::from(u64::try_from(unix_ms).unwrap_or(0)) & ((1 << 48) - 1);
    let value = (ms << 80) | (random & ((1 << 80) - 1));
    (0..26)
        .map(|i| {
            // The first character carries the top 3 bits (130 bits of text for 128 of value).
            let shift = 125 - 5 * i;
            char::from(DIGITS[((value >> shift) & 31) as usize])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wharf_core::envelope::is_ulid;

    #[test]
    fn event_ids_are_ulids() {
        // The ULID specification's example: 1469918176385 ms is "01ARYZ6S41".
        let id = new_event_id(1_469_918_176_385, 0);
        assert_eq!(id, "01ARYZ6S410000000000000000");
        assert_eq!(new_event_id(0, 0), "0".repeat(26));
        assert_eq!(
            new_event_id((1 << 48) - 1, u128::MAX),
            "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"
        );
        for (ms, r) in [(0, 1), (1_700_000_000_000, 12345), (-5, u128::MAX)] {
            let id = new_event_id(ms, r);
            assert!(is_ulid(&id), "{id}");
        }
        assert!(new_event_id(1, 0) < new_event_id(2, 0), "ids sort by time");
    }

    #[test]
    fn digest_covers_each_request_field() {
        let scope = Scope::new("acme", "web");
        let dest = Destination::new("https://b.example/in");
        let base = request_digest(&scope, "sync_cursor", b"{}", &dest);
        assert_eq!(
            base,
            request_digest(&scope, "sync_cursor", b"{}", &dest.clone().max_attempts(3)),
            "attempts are not content"
        );
        let others = [
            request_digest(&Scope::new("acme2", "web"), "sync_cursor", b"{}", &dest),
            request_digest(&Scope::new("acme", "web2"), "sync_cursor", b"{}", &dest),
            request_digest(&scope, "approval", b"{}", &dest),
            request_digest(&scope, "sync_cursor", b"{\"a\":1}", &dest),
            request_digest(
                &scope,
                "sync_cursor",
                b"{}",
                &Destination::new("https://c.example/in"),
            ),
            // Bytes moved between fields are another request.
            request_digest(&Scope::new("acm", "eweb"), "sync_cursor", b"{}", &dest),
        ];
        for (i, other) in others.iter().enumerate() {
            assert_ne!(*other, base, "change {i}");
        }
    }

    #[test]
    fn lanes_are_per_receiver_stream_and_fit_the_outbox() {
        let a = Destination::new("https://b.example/in");
        let b = Destination::new("https://c.example/in");
        let s = Scope::new("acme", "web");
        assert_eq!(lane_key(&s, &a), lane_key(&s, &a));
        assert_ne!(lane_key(&s, &a), lane_key(&s, &b));
        assert_ne!(lane_key(&s, &a), lane_key(&Scope::new("acme", "app"), &a));
        let long = Destination::new(format!("https://h/{}", "a".repeat(2000)));
        let big = Scope::new("t".repeat(128), "p".repeat(128));
        assert!(lane_key(&big, &long).len() <= crate::outbox::LANE_KEY_BYTES_MAX);
    }

    #[test]
    fn requests_are_checked_before_any_io() {
        let ok = EmitRequest::new(
            Scope::new("acme", "web"),
            "sync_cursor",
            serde_json::json!({"producer_id": "p", "acknowledged_sequence": 1,
                               "acknowledged_event_id": null, "version": 1}),
            "k",
            Destination::new("https://b.example/in"),
        );
        assert!(check(&ok).is_ok());
        let bad = |change: &dyn Fn(&mut EmitRequest), field: &str| {
            let mut r = ok.clone();
            change(&mut r);
            match check(&r) {
                Err(Error::Invalid { field: f, .. }) => assert_eq!(f, field),
                Err(Error::Payload(_)) => assert_eq!("payload-schema", field),
                other => panic!("{field}: {other:?}"),
            }
        };
        bad(&|r| r.scope.tenant = String::new(), "tenant");
        bad(&|r| r.scope.project = "a/b".into(), "project");
        bad(&|r| r.idempotency_key = String::new(), "idempotency_key");
        bad(&|r| r.idempotency_key = "k".repeat(257), "idempotency_key");
        bad(&|r| r.idempotency_key = "a\nb".into(), "idempotency_key");
        bad(
            &|r| r.destination = Destination::new("mailto:x@y"),
            "destination",
        );
        bad(
            &|r| r.destination = Destination::new("https://b.example/").max_attempts(0),
            "max_attempts",
        );
        bad(&|r| r.event_type = "no_such_type".into(), "payload-schema");
        bad(
            &|r| r.payload = serde_json::json!({"producer_id": "p"}),
            "payload-schema",
        );
        let mut long_key = ok.clone();
        long_key.idempotency_key = "k".repeat(256);
        assert!(check(&long_key).is_ok());
    }
}
