//! The `wharf` crate's one integration-test binary: real PostgreSQL, one fresh database per test.

mod inbox;
mod migrate;
mod outbound;
mod outbox;
