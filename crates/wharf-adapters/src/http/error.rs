//! The network sender's one error type: what can go wrong while setting it up.
//!
//! Owns: configuration and construction failures. Must not know: delivery results. A refused,
//! failed or ambiguous delivery is never an error here: it is a [`Verdict`](super::Verdict),
//! which the adapters turn into an outbox `Outcome`.

/// Why a network sender (or an adapter on it) could not be built. Every variant is a
/// deployment mistake: retrying with the same configuration cannot help.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A key of the `[http]` configuration is out of its bounds or unreadable (the key and the
    /// rule are named). Fix the configuration.
    #[error("invalid [http] configuration: {field}: {rule}")]
    Config {
        /// The offending key, as spelled in `wharf.toml`.
        field: &'static str,
        /// The rule it breaks.
        rule: String,
    },
    /// rustls refused the TLS configuration (for example, no protocol version in common with
    /// the ring provider). A build problem, not a runtime one.
    #[error("cannot build the TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    /// reqwest could not build its client from a valid configuration.
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

impl Error {
    pub(crate) fn config(field: &'static str, rule: impl Into<String>) -> Error {
        Error::Config {
            field,
            rule: rule.into(),
        }
    }
}
