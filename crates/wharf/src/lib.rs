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
//! this crate's `sql/` folder, called from one small function in [`store`].
//!
//! A write that fails says what is known of its outcome ([`commit`]): nothing committed, or
//! unknown (retry with the same idempotency key).
//!
//! The rules themselves (lifecycle, backoff, canonical JSON, the inbox decision) live in the
//! IO-free `wharf-core` crate, re-exported as [`core`].

pub use wharf_core as core;

pub mod commit;
pub mod console;
pub mod inbox;
pub mod migrate;
pub mod outbound;
pub mod outbox;
pub mod store;
pub use store::verify;
