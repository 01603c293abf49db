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
//!
//! # Quick start
//!
//! ```
//! use wharf_core::action::{ActionState, StopReason};
//! use wharf_core::backoff::Backoff;
//! use wharf_core::canonical::canonicalize;
//!
//! // The one transition table: a claim moves ADMITTED to EXECUTING; nothing leaves DONE.
//! assert!(ActionState::Admitted.can_transition(ActionState::Executing));
//! assert!(!ActionState::Done.can_transition(ActionState::Admitted));
//! assert_eq!(StopReason::AttemptsExhausted.state(), ActionState::Failed);
//!
//! // Retry delays: exponential, capped, with bounded jitter (the draw is passed in; no clock,
//! // no random source inside the core).
//! let backoff = Backoff::default();
//! assert!(backoff.delay_ms(2, 0.5) >= backoff.delay_ms(1, 0.5));
//!
//! // Canonical JSON, the bytes an envelope's signature covers.
//! assert_eq!(canonicalize(br#"{"b": 1, "a": [true, null]}"#).unwrap(), br#"{"a":[true,null],"b":1}"#);
//! ```

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
