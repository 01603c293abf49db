//! wharf's pure core.
//!
//! Everything here is a plain function over plain data: no IO, no sqlx, no tokio, no clock.
//! Time is always passed in. The store, the executor and the inbox service in the `wharf` crate
//! ask this crate what is allowed and what happens next, and only then touch the database.
//!
//! - [`action`]: the outbox lifecycle — states, the one transition table, stop reasons, kinds.
//! - [`backoff`]: retry delays (exponential, capped, bounded jitter).
//! - [`bucket`]: the one token bucket behind every rate limit (inbox limiters, outbound
//!   delivery), with debt and Retry-After arithmetic.
//! - [`canonical`]: canonical JSON (RFC 8785 restricted to integers) and the legacy Go escaping.
//! - [`envelope`]: the closed `controlplane/v1` envelope model and its bounded identities.
//! - [`sign`]: Ed25519 signing and strict verification of envelopes.
//! - [`schema`]: the closed payload-schema catalog and validation.
//! - [`inbox`]: the inbox decision — given a stream's state and an incoming envelope, the outcome.

pub mod action;
pub mod backoff;
pub mod bucket;
pub mod canonical;
pub mod envelope;
pub mod inbox;
#[cfg(feature = "openapi")]
pub mod openapi;
pub mod schema;
pub mod sign;
