//! The inbox decision (SPEC §3.4–§3.5) as pure functions: given what the store found, the outcome.
//!
//! This module owns the public v1 outcome terms, their HTTP statuses, every stable reason string,
//! the identity/replay/sequence rules and the contiguous-cursor walk. It must not know SQL, locks,
//! keys, HTTP bodies or time: the inbox service locks the stream, looks the envelope's identities
//! up, calls [`decide`], and commits what the [`Decision`] says in one transaction.
//!
//! The order of the pipeline stays the caller's, but each refusal it can meet before the stream
//! lock has a [`Refusal`] here, so the outcome and reason of every step come from one table:
//!
//! | step | refusal | outcome | reason |
//! |---|---|---|---|
//! | envelope shape / route identities ([`refusal_for_envelope_error`], [`check_route`]) | `Route` | refuse-tampered | `route` |
//! | key not found in the verified scope | `SignatureUnknownKey` | refuse-tampered | `signature-unknown-key` |
//! | key revoked | `SignatureRevokedKey` | refuse-tampered | `signature-revoked-key` |
//! | key retired and past its verification window | `SignatureRetiredKey` | refuse-tampered | `signature-retired-key` |
//! | signature does not verify / bad encoding | `SignatureInvalid` | refuse-tampered | `signature-invalid` |
//! | `schema_version != 1` ([`check_schema_version`]) | `Schema` | refuse-incompatible | `schema` |
//! | event type not in the catalog | `EventType` | refuse-incompatible | `event-type` |
//! | payload breaks its schema, or the envelope is malformed | `Payload` | refuse-tampered | `payload` |
//!
//! A batch (many envelopes on one locked stream) is decided envelope by envelope by
//! [`StreamRun`], so it answers as the same envelopes sent one at a time would.
//!
//! The four `signature-*` reasons are the audit reasons SPEC §3.4 asks for; a deployment that
//! does not want to tell a producer *why* its key failed answers [`Decision::response_reason`],
//! which folds them into `signature`.

use crate::envelope::EnvelopeError;
use crate::schema::SchemaError;
use crate::sign::SignatureError;

mod run;

pub use run::{Identity, Known, RunDecision, StreamRun};

/// Every stable reason string. They are public API: audit rows, metrics and producers match on
/// them, so a meaning never changes; add a new one instead.
pub mod reason {
    /// accept-delayed: the next sequence after the cursor.
    pub const IN_ORDER: &str = "in-order";
    /// accept-delayed: a sequence beyond a gap; stored, the cursor waits for the gap.
    pub const GAP: &str = "gap";
    /// accept-reordered: a new identity at or below the cursor (after an operator skip).
    pub const REORDERED: &str = "reordered";
    /// ignore-duplicate: the same identity with the same content digest.
    pub const DUPLICATE: &str = "duplicate";
    /// refuse-replay: below the replay floor, and not a duplicate.
    pub const REPLAY: &str = "replay";
    /// refuse-tampered: same event id, idempotency key or sequence with different content.
    pub const IDENTITY_CONFLICT: &str = "identity-conflict";
    /// refuse-tampered: URL, credential and envelope disagree on tenant/project, or an envelope
    /// identity is malformed.
    pub const ROUTE: &str = "route";
    /// The public form of every `signature-*` reason ([`super::Decision::response_reason`]).
    pub const SIGNATURE: &str = "signature";
    /// refuse-tampered: no key with this id in the verified scope.
    pub const SIGNATURE_UNKNOWN_KEY: &str = "signature-unknown-key";
    /// refuse-tampered: the key was revoked.
    pub const SIGNATURE_REVOKED_KEY: &str = "signature-revoked-key";
    /// refuse-tampered: the key was retired and its verification window has passed.
    pub const SIGNATURE_RETIRED_KEY: &str = "signature-retired-key";
    /// refuse-tampered: the signature does not verify (or is not 64 bytes of base64).
    pub const SIGNATURE_INVALID: &str = "signature-invalid";
    /// refuse-tampered: the payload breaks its schema, or the envelope is not closed/bounded.
    pub const PAYLOAD: &str = "payload";
    /// refuse-incompatible: `schema_version` is not 1.
    pub const SCHEMA: &str = "schema";
    /// refuse-incompatible: no schema is registered for the event type.
    pub const EVENT_TYPE: &str = "event-type";
}

/// The public v1 outcomes (SPEC §3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// New identity with sequence above the cursor. Stored.
    AcceptDelayed,
    /// New identity with `floor <= sequence <= cursor`. Stored.
    AcceptReordered,
    /// Same identity and content as a retained one. Not stored again; audited, then answered.
    IgnoreDuplicate,
    /// Below the replay floor and not a duplicate.
    RefuseReplay,
    /// A schema version (or event type) this server does not speak.
    RefuseIncompatible,
    /// Route, signature, payload, or identity conflict.
    RefuseTampered,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 6] = [
        Outcome::AcceptDelayed,
        Outcome::AcceptReordered,
        Outcome::IgnoreDuplicate,
        Outcome::RefuseReplay,
        Outcome::RefuseIncompatible,
        Outcome::RefuseTampered,
    ];

    /// The public v1 term.
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::AcceptDelayed => "accept-delayed",
            Outcome::AcceptReordered => "accept-reordered",
            Outcome::IgnoreDuplicate => "ignore-duplicate",
            Outcome::RefuseReplay => "refuse-replay",
            Outcome::RefuseIncompatible => "refuse-incompatible",
            Outcome::RefuseTampered => "refuse-tampered",
        }
    }

    /// Whether the producer may forget the envelope (it is acknowledged).
    pub const fn is_acknowledged(self) -> bool {
        matches!(
            self,
            Outcome::AcceptDelayed | Outcome::AcceptReordered | Outcome::IgnoreDuplicate
        )
    }
}

impl std::str::FromStr for Outcome {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Outcome::ALL.into_iter().find(|o| o.as_str() == s).ok_or(())
    }
}

/// What to do with one envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// The public outcome.
    pub outcome: Outcome,
    /// The stable reason ([`reason`]); audited as is.
    pub reason: &'static str,
    /// Whether to commit the identity, the payload and the cursor advance. Only the two accepts
    /// store; every outcome still appends its audit event.
    pub store: bool,
}

impl Decision {
    const fn new(outcome: Outcome, reason: &'static str, store: bool) -> Decision {
        Decision {
            outcome,
            reason,
            store,
        }
    }

    /// The reason to put in a response: the audit reason, except that the `signature-*` family
    /// folds into `signature` (SPEC §3.4 asks for distinct *audit* reasons only).
    pub fn response_reason(&self) -> &'static str {
        if self.reason.starts_with("signature") {
            reason::SIGNATURE
        } else {
            self.reason
        }
    }
}

/// A refusal met before the stream lock. See the module docs for the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// The route or an envelope identity is wrong.
    Route,
    /// No key with the envelope's key id in the verified scope.
    SignatureUnknownKey,
    /// The key was revoked.
    SignatureRevokedKey,
    /// The key was retired and is past its verification window.
    SignatureRetiredKey,
    /// The signature does not verify.
    SignatureInvalid,
    /// `schema_version` is not 1.
    Schema,
    /// The event type has no schema.
    EventType,
    /// The payload (or the envelope's shape) is refused.
    Payload,
}

impl Refusal {
    /// The decision for this refusal. Nothing is stored.
    pub const fn decision(self) -> Decision {
        let (outcome, reason) = match self {
            Refusal::Route => (Outcome::RefuseTampered, reason::ROUTE),
            Refusal::SignatureUnknownKey => {
                (Outcome::RefuseTampered, reason::SIGNATURE_UNKNOWN_KEY)
            }
            Refusal::SignatureRevokedKey => {
                (Outcome::RefuseTampered, reason::SIGNATURE_REVOKED_KEY)
            }
            Refusal::SignatureRetiredKey => {
                (Outcome::RefuseTampered, reason::SIGNATURE_RETIRED_KEY)
            }
            Refusal::SignatureInvalid => (Outcome::RefuseTampered, reason::SIGNATURE_INVALID),
            Refusal::Schema => (Outcome::RefuseIncompatible, reason::SCHEMA),
            Refusal::EventType => (Outcome::RefuseIncompatible, reason::EVENT_TYPE),
            Refusal::Payload => (Outcome::RefuseTampered, reason::PAYLOAD),
        };
        Decision::new(outcome, reason, false)
    }
}

/// Which pipeline refusal an envelope decoding error is.
///
/// The identities (tenant, project, event id, idempotency key, producer sequence) are the
/// route's "identities bounded" check ⇒ `Route`; the integrity member ⇒ `SignatureInvalid` (a signature
/// that cannot even be decoded cannot verify); everything else (malformed JSON, unknown or missing
/// fields, floats, duplicate keys, an oversized payload) ⇒ `Payload`. The detailed
/// [`EnvelopeError::reason`] is worth logging next to it.
pub fn refusal_for_envelope_error(error: &EnvelopeError) -> Refusal {
    match error.field() {
        Some("tenant_id" | "project_id" | "event_id" | "idempotency_key" | "producer_sequence") => {
            Refusal::Route
        }
        Some(f) if f.starts_with("integrity") => Refusal::SignatureInvalid,
        _ => Refusal::Payload,
    }
}

/// Which pipeline refusal a signature error is. Every [`SignatureError`] means "this key did not
/// sign these bytes"; key lookup failures are the caller's and have their own refusals.
pub fn refusal_for_signature_error(_error: &SignatureError) -> Refusal {
    Refusal::SignatureInvalid
}

/// Which pipeline refusal a schema error is.
pub fn refusal_for_schema_error(error: &SchemaError) -> Refusal {
    match error {
        SchemaError::UnknownEventType => Refusal::EventType,
        _ => Refusal::Payload,
    }
}

/// SPEC §3.4 step 6, first half: only version 1 is spoken. Checked after the signature, so a
/// forged envelope never learns which versions exist.
pub fn check_schema_version(schema_version: i64) -> Result<(), Refusal> {
    if schema_version == crate::envelope::SCHEMA_VERSION {
        Ok(())
    } else {
        Err(Refusal::Schema)
    }
}

/// SPEC §3.4 step 4: the URL's tenant, the credential's tenant and the envelope's tenant agree,
/// and the URL's and the envelope's project agree. Exact, case-sensitive comparison: identities
/// are ASCII and two spellings are two tenants.
pub fn check_route(
    url_tenant: &str,
    url_project: &str,
    credential_tenant: &str,
    envelope_tenant: &str,
    envelope_project: &str,
) -> Result<(), Refusal> {
    if url_tenant == credential_tenant
        && url_tenant == envelope_tenant
        && url_project == envelope_project
    {
        Ok(())
    } else {
        Err(Refusal::Route)
    }
}

/// The locked stream's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamState {
    /// The contiguous cursor: every sequence `1..=acknowledged_sequence` is retained or was
    /// skipped by an operator. 0 means nothing yet.
    pub acknowledged_sequence: u64,
    /// Sequences below this are refused unless they are duplicates. Only an operator moves it.
    pub replay_floor: u64,
}

/// A retained identity the store found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retained {
    /// Its [`crate::envelope::Envelope::content_digest`].
    pub content_digest: [u8; 32],
    /// Its producer sequence.
    pub producer_sequence: u64,
}

/// What the store found for the incoming envelope's three identities, in its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Found {
    /// The retained identity with the same event id, if any.
    pub by_event_id: Option<Retained>,
    /// The retained identity with the same idempotency key, if any.
    pub by_idempotency_key: Option<Retained>,
    /// The content digest of the retained identity at the same producer sequence, if any.
    pub by_sequence: Option<[u8; 32]>,
}

/// The incoming envelope, as far as sequencing cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Incoming {
    /// Its producer sequence (≥ 1, checked by decoding).
    pub producer_sequence: u64,
    /// Its content digest.
    pub content_digest: [u8; 32],
}

/// SPEC §3.5: the outcome for a verified, schema-valid envelope in a locked stream.
///
/// Order, and why:
/// 1. A conflict on any identity (same event id, idempotency key or sequence, different content)
///    is `refuse-tampered` / `identity-conflict`, even below the floor: a second meaning for a
///    retained identity is never a replay to shrug off.
/// 2. A match with the same content is `ignore-duplicate`, even below the floor: identities
///    outlive payload retention, so a retried old envelope still gets its acknowledgement.
/// 3. Below the floor: `refuse-replay`.
/// 4. At or below the cursor: `accept-reordered` (the cursor passed it by an operator skip).
/// 5. Above the cursor: `accept-delayed` (`in-order` for cursor + 1, `gap` beyond).
pub fn decide(stream: &StreamState, incoming: &Incoming, found: &Found) -> Decision {
    let digest = incoming.content_digest;
    let matches = [
        found.by_event_id.map(|r| r.content_digest),
        found.by_idempotency_key.map(|r| r.content_digest),
        found.by_sequence,
    ];
    if matches.iter().flatten().any(|d| *d != digest) {
        return Decision::new(Outcome::RefuseTampered, reason::IDENTITY_CONFLICT, false);
    }
    if matches.iter().any(Option::is_some) {
        return Decision::new(Outcome::IgnoreDuplicate, reason::DUPLICATE, false);
    }
    let seq = incoming.producer_sequence;
    if seq < stream.replay_floor {
        return Decision::new(Outcome::RefuseReplay, reason::REPLAY, false);
    }
    if seq <= stream.acknowledged_sequence {
        return Decision::new(Outcome::AcceptReordered, reason::REORDERED, true);
    }
    if Some(seq) == stream.acknowledged_sequence.checked_add(1) {
        Decision::new(Outcome::AcceptDelayed, reason::IN_ORDER, true)
    } else {
        Decision::new(Outcome::AcceptDelayed, reason::GAP, true)
    }
}

/// The new contiguous cursor: walks from `cursor` through every retained sequence that is now
/// contiguous, and stops at the first gap.
///
/// `retained_above_cursor` must be ascending (the store's `ORDER BY`) and should include the
/// sequence just stored; values at or below `cursor` and repeats are ignored. The walk is bounded
/// by the slice's length, so the caller bounds the work by how many rows it reads: if it reads
/// at most N and the cursor moved N, it should read again.
pub fn advance_cursor(cursor: u64, retained_above_cursor: &[u64]) -> u64 {
    debug_assert!(
        retained_above_cursor.windows(2).all(|w| w[0] <= w[1]),
        "retained sequences must be ascending"
    );
    let mut cursor = cursor;
    for &seq in retained_above_cursor {
        if seq <= cursor {
            continue;
        }
        if Some(seq) != cursor.checked_add(1) {
            break;
        }
        cursor = seq;
    }
    cursor
}

#[cfg(test)]
mod tests;
