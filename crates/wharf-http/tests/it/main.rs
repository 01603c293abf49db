//! The HTTP layer's one integration-test binary: real axum servers on loopback, real PostgreSQL.

mod actions;
mod catalog;
mod commit;
mod console;
mod dead_letters;
mod ingest;
mod limits;
mod openapi;
mod operator;
mod shape;
mod signing_keys;
mod support;
mod webhook_keys;
