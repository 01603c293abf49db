//! The HTTP layer's one integration-test binary: real axum servers on loopback, real PostgreSQL.

mod actions;
mod dead_letters;
mod ingest;
mod openapi;
mod support;
mod webhook_keys;
