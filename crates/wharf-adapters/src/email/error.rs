//! The email module's one error type, for the calls an application makes: building the adapter,
//! enqueueing an email, and editing the suppression list.
//!
//! Owns: what can go wrong in those calls and whether retrying helps. Must not know: HTTP. What
//! happens during an attempt is never an error: it is an [`Outcome`](wharf::outbox::Outcome).

/// Why an email call failed. Validation variants mean nothing was written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The `[email]` configuration or the adapter's set-up is invalid (a bad `from`, a timeout
    /// out of bounds, two notices with one name). A configuration error; retrying cannot help.
    #[error("invalid email configuration: {0}")]
    Config(String),
    /// The payload does not name a notice registered with this adapter, or is not
    /// `{"notice": …, "event": …}`. Nothing was written; retrying cannot help.
    #[error("unknown or malformed notice: {0}")]
    UnknownNotice(String),
    /// The notice refused the event, or the message it prepared from it is malformed. Nothing
    /// was written; retrying the same event cannot help.
    #[error("notice {notice} refused the event: {reason}")]
    InvalidEvent {
        /// The notice.
        notice: String,
        /// Why (short, without event content).
        reason: String,
    },
    /// The string given to a suppression call is not an email address. Retrying cannot help.
    #[error("not an email address")]
    InvalidAddress,
    /// The outbox refused or failed the enqueue (see its variants for whether a retry helps).
    #[error(transparent)]
    Outbox(#[from] wharf::outbox::Error),
    /// The database failed (a notice's look-up, the suppression list). A connection loss may
    /// succeed on retry.
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}
