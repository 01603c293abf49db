//! wharf's HTTP API as axum routers.
//!
//! Owns: routing, request and response shapes, status codes, the body limit ([`extract`]), the
//! operator-token check, the start-up gate ([`health::Startup`]), and the one mapping from errors
//! to responses ([`error`]). Every route module exposes a `routes(...) -> Router` that carries
//! its own state; the binary merges them with [`app`], which answers unknown routes (404) and
//! wrong methods (405) in the same JSON shape as every other error.
//!
//! Must not know: any business rule. A handler parses, calls one library function of the
//! `wharf` crate, and maps the result. It never writes SQL.
//!
//! # Quick start: the outbox API and health checks on one port
//!
//! ```no_run
//! use std::sync::Arc;
//! use wharf::outbox::Registry;
//! use wharf_http::auth::OperatorToken;
//!
//! # async fn serve(registry: Registry) -> Result<(), Box<dyn std::error::Error>> {
//! let pool = wharf::sqlx::PgPool::connect("postgres://localhost/app").await?;
//! wharf::migrate::run(&pool).await?;
//! let registry = Arc::new(registry); // the kinds this deployment runs
//! let token = OperatorToken::new(std::env::var("WHARF_OPERATOR_TOKEN").ok());
//! let app = wharf_http::app([
//!     wharf_http::actions::routes(pool.clone(), registry.clone(), token.clone()),
//!     wharf_http::operator::routes(pool.clone(), registry, token),
//!     wharf_http::health::routes(pool, None), // /healthz, /readyz; no Prometheus handle
//!     wharf_http::openapi::routes(),          // /openapi.json
//! ]);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```

pub mod actions;
pub mod auth;
pub mod console;
pub mod dead_letters;
pub mod error;
pub mod extract;
pub mod health;
pub mod ingest;
pub mod openapi;
pub mod operator;
pub mod signing_keys;
pub mod webhook_keys;

use axum::Router;

/// Merges route modules into one application, with the fallbacks and layers every route shares.
pub fn app(routers: impl IntoIterator<Item = Router>) -> Router {
    routers
        .into_iter()
        .fold(Router::new(), Router::merge)
        // Both set after the merge: the 405 fallback reaches only the routes already present.
        .method_not_allowed_fallback(error::method_not_allowed)
        .fallback(error::not_found)
        .layer(axum::middleware::from_fn(error::correlate))
}
