//! The one place where errors become HTTP responses.
//!
//! Every error answer is `{"code", "reason", "correlation_id"}`. Internal failures answer an
//! opaque 500 (or 503 where a retry is safe and useful) and log the detail under the same
//! correlation id, so an operator can find it and a client learns nothing it should not.

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// The header that carries a request's correlation id, in and out.
pub const CORRELATION_HEADER: &str = "x-correlation-id";

/// Bytes a caller-supplied correlation id may have; longer ones are replaced.
pub const CORRELATION_ID_BYTES_MAX: usize = 64;

/// A request's correlation id: the caller's `x-correlation-id` when it is sane, else a new ULID.
#[derive(Debug, Clone)]
pub struct CorrelationId(pub String);

impl CorrelationId {
    fn from_header(value: Option<&HeaderValue>) -> CorrelationId {
        let supplied = value
            .and_then(|v| v.to_str().ok())
            .filter(|v| {
                !v.is_empty()
                    && v.len() <= CORRELATION_ID_BYTES_MAX
                    && v.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
            })
            .map(str::to_owned);
        CorrelationId(supplied.unwrap_or_else(|| ulid::Ulid::new().to_string()))
    }
}

/// Middleware: gives every request a correlation id (as an extension) and echoes it back.
pub async fn correlate(mut request: Request, next: Next) -> Response {
    let id = CorrelationId::from_header(request.headers().get(CORRELATION_HEADER));
    request.extensions_mut().insert(id.clone());
    let mut response = next.run(request).await;
    if let Ok(value) = HeaderValue::from_str(&id.0) {
        response.headers_mut().insert(CORRELATION_HEADER, value);
    }
    response
}

/// An error answer.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable machine-readable code (`unauthorized`, `not-found`, …).
    pub code: &'static str,
    /// A short human-readable reason. Never an internal detail.
    pub reason: String,
    /// The request's correlation id.
    pub correlation_id: String,
}

#[derive(Serialize)]
struct Body<'a> {
    code: &'a str,
    reason: &'a str,
    correlation_id: &'a str,
}

impl ApiError {
    /// An error with a status, a stable code and a reason.
    pub fn new(
        status: StatusCode,
        code: &'static str,
        reason: impl Into<String>,
        correlation: &CorrelationId,
    ) -> ApiError {
        ApiError {
            status,
            code,
            reason: reason.into(),
            correlation_id: correlation.0.clone(),
        }
    }

    /// An opaque internal failure: the detail goes to the log, never to the client.
    pub fn internal(detail: &dyn std::fmt::Display, correlation: &CorrelationId) -> ApiError {
        tracing::error!(correlation_id = %correlation.0, error = %detail, "internal error");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; quote the correlation id",
            correlation,
        )
    }

    /// The database or another dependency is unavailable; nothing was committed, so a retry
    /// is safe.
    pub fn unavailable(detail: &dyn std::fmt::Display, correlation: &CorrelationId) -> ApiError {
        tracing::warn!(correlation_id = %correlation.0, error = %detail, "unavailable");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "temporarily unavailable; nothing was committed, retry",
            correlation,
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Body {
            code: self.code,
            reason: &self.reason,
            correlation_id: &self.correlation_id,
        };
        (self.status, axum::Json(body)).into_response()
    }
}
