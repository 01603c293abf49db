//! The crate's one error type.
//!
//! Owns: what can go wrong between wharf and a NATS server, and whether a retry can help. Must
//! not know: an inbox outcome (those are answers, not errors: see `ingest.rs`).

/// Errors of the JetStream consumer and publisher.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is refused: `field` names it. Nothing was started; retrying with
    /// the same configuration fails the same way.
    #[error("invalid {field}: {reason}")]
    Config {
        /// The key (e.g. `ack_wait_ms`).
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// The credentials file could not be read. Retrying helps once the file is in place.
    #[error("cannot read the NATS credentials file {path}: {source}")]
    Credentials {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The server could not be reached, or refused the connection (authorization included). A
    /// retry may help: the consumer retries with backoff until stopped.
    #[error("cannot connect to NATS at {url}: {reason}")]
    Connect {
        /// The server URL.
        url: String,
        /// The client's reason.
        reason: String,
    },
    /// A JetStream request (stream or consumer set-up, a fetch) failed. A retry may help.
    #[error("JetStream {what} failed: {reason}")]
    JetStream {
        /// What was asked.
        what: &'static str,
        /// The client's reason.
        reason: String,
    },
    /// A publish was not acknowledged by a stream. `sent` says whether the message may have
    /// reached the stream (a timeout after sending): a retry with the same `Nats-Msg-Id` is
    /// deduplicated by the stream within its duplicate window either way.
    #[error("JetStream publish failed ({kind}): {reason}")]
    Publish {
        /// A stable code: `no_stream`, `timeout`, `too_large`, `connection`, `refused`.
        kind: &'static str,
        /// Whether the message may have reached the server.
        sent: bool,
        /// The client's reason.
        reason: String,
    },
}

impl Error {
    pub(crate) fn config(field: &'static str, reason: impl Into<String>) -> Error {
        Error::Config {
            field,
            reason: reason.into(),
        }
    }

    pub(crate) fn jetstream(what: &'static str, e: impl std::fmt::Display) -> Error {
        Error::JetStream {
            what,
            reason: e.to_string(),
        }
    }
}
