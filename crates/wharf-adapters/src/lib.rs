//! wharf's built-in adapters, one module per kind family, each behind a feature:
//!
//! - `email` (feature `email`): the `email` kind over SMTP, or `.eml` files with no relay.
//! - `http` (feature `http`): the network sender, and the `webhook` and `envelope` kinds on it.
//!
//! Must not know: how actions are claimed, fenced or completed. An adapter receives an
//! `Attempt` from the executor, fences before the provider call, and returns an `Outcome`.

#[cfg(any(feature = "email", feature = "http"))]
mod deadline;
#[cfg(feature = "email")]
pub mod email;
#[cfg(feature = "http")]
pub mod http;
