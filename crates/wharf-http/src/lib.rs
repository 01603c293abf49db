//! wharf's HTTP API as axum routers.
//!
//! Owns: routing, request and response shapes, status codes, the body limit, the operator-token
//! check, and the one mapping from errors to responses ([`error`]). Every route module exposes a
//! `routes(...) -> Router` that carries its own state; the binary merges them with [`app`].
//!
//! Must not know: any business rule. A handler parses, calls one library function of the
//! `wharf` crate, and maps the result. It never writes SQL.

pub mod actions;
pub mod auth;
pub mod dead_letters;
pub mod error;
pub mod health;
pub mod ingest;
pub mod openapi;
pub mod webhook_keys;

use axum::Router;

/// Merges route modules into one application, with the layers every route shares.
pub fn app(routers: impl IntoIterator<Item = Router>) -> Router {
    routers
        .into_iter()
        .fold(Router::new(), Router::merge)
        .layer(axum::middleware::from_fn(error::correlate))
}
