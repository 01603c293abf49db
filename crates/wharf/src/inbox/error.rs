//! The inbox's error type for administration calls (tenants, credentials, keys, streams,
//! retention).
//!
//! Ingest never returns this type: every ingest request ends in a [`super::Response`] (an outcome,
//! 401, 429, 413 or 503), because the pipeline's answers are part of the protocol, not errors.

/// Why an inbox administration call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument breaks a rule (an identity that is not `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`,
    /// a public key that is not 32 bytes of a valid Ed25519 point, a batch bound above its
    /// maximum …). Retrying the same call never helps.
    #[error("invalid {what}: {why}")]
    Invalid {
        /// The argument.
        what: &'static str,
        /// The rule it breaks.
        why: String,
    },
    /// The named tenant, key or stream does not exist (in the given scope). Retrying helps only
    /// after it is created.
    #[error("{what} not found")]
    NotFound {
        /// What was looked for.
        what: &'static str,
    },
    /// The call conflicts with what is stored: the key id is taken, the key is already retired
    /// or revoked, a skip target is not ahead of the cursor, a floor would pass an unacknowledged
    /// gap. Retrying the same call never helps.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The database failed or could not be reached. Nothing was changed (every call is one
    /// transaction); a retry may help.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

impl Error {
    pub(crate) fn invalid(what: &'static str, why: impl Into<String>) -> Error {
        Error::Invalid {
            what,
            why: why.into(),
        }
    }
}
