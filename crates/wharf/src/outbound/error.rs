//! The outbound module's one error type.
//!
//! Owns: what can go wrong when emitting an envelope, handling the server's signing keys and
//! reading dead letters, and whether retrying helps. Must not know: HTTP status codes (the HTTP
//! layer maps these) or how a delivery attempt ends (that is an outbox `Outcome`, never an
//! error).
//!
//! No variant carries a payload, a private key, a signature or a server key: errors are logged.

use wharf_core::schema::SchemaError;
use wharf_core::sign::SignError;

use crate::outbox;

/// Why an outbound call failed. Unless a variant says otherwise, nothing was written: a failed
/// [`emit_envelope`](super::emit_envelope) rolls back its own savepoint, so the caller's
/// transaction is as it was before the call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument breaks a rule: a scope that is not an identity, an empty or over-long
    /// idempotency key, a destination that is not an `http(s)` URL, a page limit outside
    /// 1..=100 … The argument and the rule are named. Retrying the same call never helps.
    #[error("invalid {field}: {rule}")]
    Invalid {
        /// The argument.
        field: &'static str,
        /// The rule it breaks.
        rule: String,
    },
    /// The payload does not pass the schema of its event type (or the event type is not in the
    /// catalog). Retrying the same payload never helps.
    #[error("payload refused: {0}")]
    Payload(#[from] SchemaError),
    /// The envelope would break a bound of SPEC §3.1 once built (its payload is over 1 MiB
    /// canonical, say). Retrying the same request never helps.
    #[error(transparent)]
    Envelope(#[from] SignError),
    /// The idempotency key already stands for a different request (another scope, event type,
    /// payload or destination), or for an action that is not an envelope. Nothing was written;
    /// retrying never helps: use another key.
    #[error("idempotency key {key:?} is taken by a different request")]
    IdempotencyConflict {
        /// The key.
        key: String,
    },
    /// The scope has no current signing key: generate one first
    /// ([`generate_signing_key`](super::generate_signing_key)). Retrying helps only after that.
    #[error("no signing key for {tenant}/{project}")]
    NoSigningKey {
        /// The tenant.
        tenant: String,
        /// The project.
        project: String,
    },
    /// The named signing key does not exist in that scope.
    #[error("signing key {key_id:?} not found in {tenant}/{project}")]
    KeyNotFound {
        /// The tenant.
        tenant: String,
        /// The project.
        project: String,
        /// The key id.
        key_id: String,
    },
    /// The key was sealed under a different server key than the one configured (a changed or
    /// lost `server.key`). Retrying never helps; configure the server key it was sealed with.
    #[error("signing key {key_id:?} was sealed under another server key")]
    ServerKeyMismatch {
        /// The key id.
        key_id: String,
    },
    /// The sealed key does not open under this server key in this scope: it was altered, or
    /// copied to another tenant, project or key id. Retrying never helps; rotate the key.
    #[error("signing key {key_id:?} does not open in this scope (altered or moved)")]
    SealBroken {
        /// The key id.
        key_id: String,
    },
    /// Two rotations of one scope ran at the same moment and this one lost. Nothing was
    /// written; retrying helps (and makes a newer key current).
    #[error("another signing key rotation of {tenant}/{project} ran concurrently")]
    ConcurrentRotation {
        /// The tenant.
        tenant: String,
        /// The project.
        project: String,
    },
    /// A deployment's injected key source failed. Whether retrying helps is the source's to say.
    #[error("signing key source: {0}")]
    KeySource(String),
    /// A dead-letter cursor that this module did not hand out (or a different version of it).
    /// Retrying the same cursor never helps; start from the first page.
    #[error("invalid dead-letter cursor")]
    InvalidCursor,
    /// The outbox refused the delivery action (the envelope is bigger than the registry's
    /// payload bound, the `envelope` kind is not registered …). Retrying the same request never
    /// helps, except for [`outbox::Error::Database`].
    #[error("outbox: {0}")]
    Outbox(outbox::Error),
    /// A stored row is not what this module writes (a stored envelope that no longer decodes,
    /// a key with a wrong length). Someone edited the table by hand; retrying never helps.
    #[error("stored outbound data is corrupt: {0}")]
    Corrupt(String),
    /// The database failed or refused a statement. A connection loss or a serialization failure
    /// (under REPEATABLE READ or SERIALIZABLE callers) may succeed on retry.
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

impl Error {
    pub(crate) fn invalid(field: &'static str, rule: impl Into<String>) -> Error {
        Error::Invalid {
            field,
            rule: rule.into(),
        }
    }
}

impl From<outbox::Error> for Error {
    fn from(e: outbox::Error) -> Error {
        match e {
            outbox::Error::Database(e) => Error::Database(e),
            outbox::Error::IdempotencyConflict { key, .. } => Error::IdempotencyConflict { key },
            other => Error::Outbox(other),
        }
    }
}
