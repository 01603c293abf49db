//! wharf: a durable outbox for side effects and a signed-envelope inbox, on PostgreSQL.
//!
//! - The **outbox** ([`outbox`]): record an effect in the same transaction as the change that
//!   causes it with [`outbox::enqueue`], and let an [`outbox::Executor`] carry it out on any
//!   number of replicas, in lane order, fenced against stale workers.
//! - The **inbox** ([`inbox`]): verify, deduplicate, sequence and audit signed
//!   `controlplane/v1` envelopes, acknowledging only after commit.
//!
//! Everything lives in the PostgreSQL schema `wharf` (see [`migrate`]), so wharf can share an
//! application's database without touching its tables. Every SQL statement is a `.sql` file in
//! this crate's `sql/` folder, called from one small function in `store` (private to the crate).
//!
//! A write that fails says what is known of its outcome ([`commit`]): nothing committed, or
//! unknown (retry with the same idempotency key).
//!
//! The rules themselves (lifecycle, backoff, canonical JSON, the inbox decision) live in the
//! IO-free `wharf-core` crate, re-exported as [`core`].
//!
//! An adapter needs nothing but this crate: [`async_trait`](macro@async_trait) and [`sqlx`] are re-exported, so an
//! application's versions always match wharf's.
//!
//! ```no_run
//! use std::sync::Arc;
//! use wharf::outbox::{Adapter, Attempt, Backoff, Executor, ExecutorConfig, KindSpec, Outcome, Registry};
//!
//! struct Log;
//!
//! #[wharf::async_trait]
//! impl Adapter for Log {
//!     fn spec(&self) -> KindSpec {
//!         KindSpec {
//!             name: "log",
//!             at_most_once: false,
//!             instance_level: true,
//!             max_attempts_default: 3,
//!             backoff: Backoff::default(),
//!             call_timeout_ms: 10_000,
//!         }
//!     }
//!     async fn execute(&self, attempt: &mut Attempt) -> Outcome {
//!         if attempt.fence().begin_write().await.is_err() {
//!             return Outcome::Abandoned;
//!         }
//!         println!("action {}: {}", attempt.action_id(), attempt.payload());
//!         Outcome::Done { readback_ref: None }
//!     }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let pool = wharf::sqlx::PgPool::connect("postgres://localhost/app").await?;
//! wharf::migrate::run(&pool).await?;
//! let mut registry = Registry::new();
//! registry.register(Arc::new(Log))?;
//! let executor = Executor::new(pool, Arc::new(registry), ExecutorConfig::default())?;
//! executor.run(std::future::pending()).await?;
//! # Ok(())
//! # }
//! ```

pub use wharf_core as core;

/// The attribute an [`outbox::Adapter`] implementation needs (`#[wharf::async_trait]`), so an
/// application does not have to depend on the crate itself at a matching version.
pub use async_trait::async_trait;
/// The sqlx wharf's API takes (pools, connections, transactions): use this one, and an
/// application's sqlx can never be a different version from wharf's.
pub use sqlx;

pub mod commit;
pub mod console;
mod held;
pub mod inbox;
pub mod migrate;
pub mod outbound;
pub mod outbox;
// Private: a claim or completion outside the executor would skip the epoch fence every write
// after a claim must carry. What others need is re-exported below.
mod store;
pub use store::ping;
pub use store::verify;

/// Single statements of the outbox (claims, fences, completions) without the executor, for
/// wharf's own tests and the adapters' tests that set up a state by hand. They skip the
/// executor's fencing, so they exist only with the `testing` feature, which those crates enable
/// as a dev-dependency; no binary has them.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing {
    pub use crate::store::outbox;
    /// How the inbox's group commit starts its transaction, so a test can make plans under the
    /// same settings.
    pub const INBOX_GROUP_BEGIN: &str = crate::inbox::GROUP_BEGIN;
}
