//! `/openapi.json`: the OpenAPI 3.1 document for every route wharf serves.
//!
//! The document is data (`openapi.json` beside this crate's manifest), written by hand and
//! checked by a test against the routes the server really answers.

use axum::Router;
use axum::http::header;
use axum::routing::get;

/// The document, as served.
pub const DOCUMENT: &str = include_str!("../openapi.json");

/// `GET /openapi.json`.
pub fn routes() -> Router {
    Router::new().route(
        "/openapi.json",
        get(|| async { ([(header::CONTENT_TYPE, "application/json")], DOCUMENT) }),
    )
}
