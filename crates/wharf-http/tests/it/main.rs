//! The HTTP layer's one integration-test binary: real axum servers on loopback, real PostgreSQL.

mod actions;
mod openapi;
mod support;
