//! What is known about a write when the database call that would have committed it failed.
//!
//! Owns: the one rule that tells "nothing was committed" from "the outcome is unknown", and
//! [`commit`], which commits a transaction and answers in those terms. Must not know HTTP, any
//! table, or what was written.
//!
//! The rule, from what PostgreSQL guarantees:
//!
//! - **Before COMMIT was sent** on an explicit transaction, any failure leaves nothing
//!   committed: the server never commits a transaction whose COMMIT it did not receive, and a
//!   dropped connection aborts it. [`CommitError::before_commit`].
//! - **The server answered the COMMIT** (or an autocommit statement) **with an ERROR**: it rolled
//!   the transaction back, and the session goes on. Nothing was committed.
//! - **Anything else while the COMMIT was in flight** — the connection reset or timed out, TLS or
//!   protocol trouble, a FATAL (the backend was terminated, the server is shutting down) — the
//!   commit may have become durable before its answer was lost. The outcome is unknown; only a
//!   retry with the same idempotency key (or a read) can tell. [`classify_at_commit`].
//!
//! A FATAL is unknown even though the server sent it: `pg_terminate_backend` or a shutdown can
//! land after the commit record was flushed and before `CommandComplete` was written.

use sqlx::postgres::{PgDatabaseError, PgSeverity};

/// What is known about a failed write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Committed {
    /// Provably nothing was committed: a retry cannot duplicate anything.
    No,
    /// The write may or may not have been committed: retry with the same idempotency key.
    Unknown,
}

/// Why a write failed, with what is known of its outcome. Every variant may succeed on retry;
/// [`CommitError::OutcomeUnknown`] must be retried idempotently (the same key) to be safe.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// Nothing was committed: the failure came before COMMIT was sent, or the server refused
    /// the statement or the COMMIT itself with an ERROR. A retry is safe.
    #[error("nothing was committed: {0}")]
    NotCommitted(#[source] sqlx::Error),
    /// The connection failed while COMMIT (or an autocommit write) was in flight: the write may
    /// have committed. Retry with the same idempotency key to learn which.
    #[error("the outcome of the commit is unknown: {0}")]
    OutcomeUnknown(#[source] sqlx::Error),
}

impl CommitError {
    /// A failure of a statement inside an explicit transaction whose COMMIT was not sent yet.
    pub fn before_commit(error: sqlx::Error) -> CommitError {
        CommitError::NotCommitted(error)
    }

    /// A failure of COMMIT itself, or of an autocommit statement that writes.
    pub fn at_commit(error: sqlx::Error) -> CommitError {
        match classify_at_commit(&error) {
            Committed::No => CommitError::NotCommitted(error),
            Committed::Unknown => CommitError::OutcomeUnknown(error),
        }
    }

    /// What is known of the write's outcome.
    pub fn committed(&self) -> Committed {
        match self {
            CommitError::NotCommitted(_) => Committed::No,
            CommitError::OutcomeUnknown(_) => Committed::Unknown,
        }
    }

    /// The database error underneath.
    pub fn source_error(&self) -> &sqlx::Error {
        match self {
            CommitError::NotCommitted(e) | CommitError::OutcomeUnknown(e) => e,
        }
    }
}

/// What a failure of COMMIT (or of an autocommit write) says about the write: [`Committed::No`]
/// only when the server provably rolled it back or the statement was never sent, else
/// [`Committed::Unknown`].
pub fn classify_at_commit(error: &sqlx::Error) -> Committed {
    match error {
        sqlx::Error::Database(db) => match db.try_downcast_ref::<PgDatabaseError>() {
            // An ERROR ends the statement (and rolls the transaction back); the session lives on.
            Some(pg) if pg.severity() == PgSeverity::Error => Committed::No,
            // FATAL or PANIC: the session ends, possibly after the commit was durable.
            _ => Committed::Unknown,
        },
        // No connection was handed out, so nothing was sent.
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::BeginFailed => {
            Committed::No
        }
        // Refused on this side before anything went out.
        sqlx::Error::Configuration(_)
        | sqlx::Error::InvalidArgument(_)
        | sqlx::Error::Encode(_)
        | sqlx::Error::InvalidSavePointStatement => Committed::No,
        _ => Committed::Unknown,
    }
}

/// Commits `tx`, saying on failure what is known of the outcome.
pub async fn commit(tx: sqlx::Transaction<'_, sqlx::Postgres>) -> Result<(), CommitError> {
    tx.commit().await.map_err(CommitError::at_commit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_provably_sent_nothing_is_not_committed() {
        let check = |error: sqlx::Error, expected: Committed| {
            let shown = error.to_string();
            assert_eq!(classify_at_commit(&error), expected, "{shown}");
        };
        check(sqlx::Error::PoolTimedOut, Committed::No);
        check(sqlx::Error::PoolClosed, Committed::No);
        check(sqlx::Error::BeginFailed, Committed::No);
        check(
            sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
            Committed::Unknown,
        );
        check(
            sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::UnexpectedEof)),
            Committed::Unknown,
        );
        check(sqlx::Error::Protocol("garbled".into()), Committed::Unknown);
        check(sqlx::Error::WorkerCrashed, Committed::Unknown);
    }

    #[test]
    fn before_commit_is_never_committed() {
        let e = CommitError::before_commit(sqlx::Error::Io(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )));
        assert_eq!(e.committed(), Committed::No);
        let e = CommitError::at_commit(sqlx::Error::Io(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )));
        assert_eq!(e.committed(), Committed::Unknown);
    }
}
