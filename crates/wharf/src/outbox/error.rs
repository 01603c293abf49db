//! The outbox's one error type.
//!
//! Owns: what can go wrong in enqueue, admission, the store calls and executor setup, and
//! whether retrying helps. Must not know: HTTP status codes (the HTTP layer maps these).
//! Adapter failures are never errors: they are [`Outcome`](super::Outcome)s.

/// Why an outbox call failed. Validation variants mean nothing was written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request names a kind no adapter is registered for. Retrying cannot help.
    #[error("unknown action kind {0:?}")]
    UnknownKind(String),
    /// A request field breaks a rule of SPEC §2.1 (the field and the rule are named). Nothing
    /// was written; retrying the same request cannot help.
    #[error("invalid action request: {field}: {rule}")]
    Invalid {
        /// The offending field, as named in [`ActionRequest`](super::ActionRequest).
        field: &'static str,
        /// The rule it breaks.
        rule: String,
    },
    /// The kind's adapter refused the payload (`Adapter::validate`). Nothing was written;
    /// retrying the same payload cannot help.
    #[error("payload refused by the {kind} adapter: {reason}")]
    PayloadRefused {
        /// The kind.
        kind: String,
        /// The adapter's reason (a short, payload-free explanation).
        reason: String,
    },
    /// The idempotency key is taken by an action with different content (kind, scope, lane,
    /// payload or subject). Nothing was written; retrying cannot help: use another key.
    #[error("idempotency key {key:?} belongs to action {existing_id} with different content")]
    IdempotencyConflict {
        /// The key.
        key: String,
        /// The action that holds it.
        existing_id: i64,
    },
    /// An operator action named an action that does not exist (never enqueued, erased, or
    /// deleted by retention). Nothing was written; retrying cannot help.
    #[error("no action {0}")]
    NotFound(i64),
    /// An operator asked to admit or refuse an action that is not PROPOSED (already decided,
    /// or never a proposal). Nothing was written; retrying cannot help, and admitting twice is
    /// harmless, but the caller should know.
    #[error("action {id} is {state} and cannot be {asked}; only a PROPOSED action can")]
    NotProposed {
        /// The action.
        id: i64,
        /// Its state when asked.
        state: wharf_core::action::ActionState,
        /// What was asked: `admitted` or `refused`.
        asked: &'static str,
    },
    /// An operator asked to cancel an action that is not PROPOSED or ADMITTED. Nothing was
    /// written. An EXECUTING action's attempt may be at its provider: cancelling cannot take
    /// the effect back, so it is refused; retrying after the attempt ends finds it ADMITTED
    /// again (cancellable) or ended (nothing to cancel).
    #[error(
        "action {id} is {state} and cannot be cancelled; only a PROPOSED or ADMITTED action can"
    )]
    NotCancellable {
        /// The action.
        id: i64,
        /// Its state when asked.
        state: wharf_core::action::ActionState,
    },
    /// An operator tried to resolve an action that is not UNCERTAIN. Nothing was written;
    /// retrying cannot help.
    #[error("action {id} is {state}, not UNCERTAIN; only an in-doubt action is resolved")]
    NotInDoubt {
        /// The action.
        id: i64,
        /// Its state when asked.
        state: wharf_core::action::ActionState,
    },
    /// A kind or executor setting is out of its bounds, or two adapters claim one kind. A
    /// programming error; retrying cannot help.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The database failed or refused a statement. A connection loss or a serialization
    /// failure may succeed on retry; a guard refusal (SQLSTATE class `WH`) will not.
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}
