//! The one place where errors become HTTP responses.
//!
//! Every error answer is `{"code", "reason", "correlation_id"}` — a handler's refusal, an
//! extractor's rejection ([`crate::extract`]), a body over its limit, an unknown route (404) and
//! a wrong method (405) alike. Internal failures answer an opaque 500 and log the detail under
//! the same correlation id, so an operator can find it and a client learns nothing it should not.
//!
//! Every library error an HTTP answer can come from is mapped here, once: the outbox's
//! (`outbox_error`, `outbox_not_committed`), the outbound side's (`outbound_not_committed`),
//! the inbox administration's (`inbox_not_committed`), the console's (`console_not_committed`)
//! and the inbox's answers that decided nothing (`ApiError::from_inbox`), with the status of
//! every inbox answer (`inbox_status`). Handlers call these; none holds a status table of its
//! own.
//!
//! A database failure answers 503 and says only what is known of the write
//! ([`wharf::commit`]): `unavailable` — nothing was committed, a retry is safe — when it provably
//! was not (the failure came before COMMIT was sent, or the server refused the statement), else
//! `outcome-unknown` — it may have committed; retry with the same idempotency key, which answers
//! with the committed result if there is one.

use std::convert::Infallible;

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use wharf::commit::{CommitError, Committed};
use wharf::inbox::{Response as InboxAnswer, Status as InboxStatus};
use wharf::{console, inbox, outbound, outbox};

/// The header that carries a request's correlation id, in and out.
pub const CORRELATION_HEADER: &str = "x-correlation-id";

/// Bytes a caller-supplied correlation id may have; longer ones are replaced.
pub const CORRELATION_ID_BYTES_MAX: usize = 64;

/// The code of a 503 after which nothing was committed: retrying is safe.
pub const CODE_UNAVAILABLE: &str = "unavailable";
/// The code of a 503 after which the write may have committed: retry with the same
/// idempotency key (or the same envelope) to learn the outcome.
pub const CODE_OUTCOME_UNKNOWN: &str = "outcome-unknown";
/// The reason of a [`CODE_UNAVAILABLE`] answer.
pub const REASON_NOT_COMMITTED: &str = "temporarily unavailable; nothing was committed, retry";
/// The reason of a [`CODE_OUTCOME_UNKNOWN`] answer.
pub const REASON_OUTCOME_UNKNOWN: &str = "temporarily unavailable; the outcome is unknown (it may have been committed), retry with the same idempotency key";

/// A request's correlation id: the caller's `x-correlation-id` when it is sane, else a new ULID.
///
/// Also an extractor: a handler (or a fallback) that takes it gets the id [`correlate`] chose,
/// or a fresh one when the router was served without that layer — never a rejection.
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

    /// The request's id: the one [`correlate`] stored, else one from its header.
    pub fn of(parts: &Parts) -> CorrelationId {
        parts
            .extensions
            .get::<CorrelationId>()
            .cloned()
            .unwrap_or_else(|| CorrelationId::from_header(parts.headers.get(CORRELATION_HEADER)))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for CorrelationId {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(CorrelationId::of(parts))
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
    /// Headers the answer carries besides the JSON content type (`Retry-After`,
    /// `WWW-Authenticate`). A list, not a `HeaderMap`: most answers carry none, and a small
    /// error keeps every `Result<_, ApiError>` small.
    headers: Vec<(HeaderName, HeaderValue)>,
}

// Also the `Error` schema of the OpenAPI document: the document describes this very type, so it
// cannot drift from what clients receive. Its doc comment is the schema's description.
/// The body of every error answer.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub(crate) struct Body<'a> {
    /// A stable machine-readable code (`unauthorized`, `not-found`, `unavailable`, …).
    code: &'a str,
    /// A short human-readable reason; never an internal detail.
    reason: &'a str,
    /// The request's correlation id, also in the `x-correlation-id` header.
    correlation_id: &'a str,
}

/// [`Body`] as the document names it in a response (`body = ErrorBody`).
pub(crate) type ErrorBody = Body<'static>;

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
            headers: Vec::new(),
        }
    }

    /// The same answer with one more header.
    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> ApiError {
        self.headers.retain(|(n, _)| *n != name);
        self.headers.push((name, value));
        self
    }

    /// The headers set with [`ApiError::with_header`].
    pub fn headers(&self) -> &[(HeaderName, HeaderValue)] {
        &self.headers
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

    /// The database is unavailable and provably nothing was committed (a read, or a failure
    /// before COMMIT was sent, or a statement the server refused): 503 `unavailable`, a retry is
    /// safe.
    pub fn not_committed(detail: &dyn std::fmt::Display, correlation: &CorrelationId) -> ApiError {
        tracing::warn!(correlation_id = %correlation.0, error = %detail, "unavailable; nothing was committed");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            CODE_UNAVAILABLE,
            REASON_NOT_COMMITTED,
            correlation,
        )
    }

    /// The database failed while a write may have been committing (the connection was lost
    /// during or after COMMIT, or nobody can tell): 503 `outcome-unknown`, retry with the same
    /// idempotency key.
    pub fn outcome_unknown(
        detail: &dyn std::fmt::Display,
        correlation: &CorrelationId,
    ) -> ApiError {
        tracing::warn!(correlation_id = %correlation.0, error = %detail, "unavailable; the outcome is unknown");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            CODE_OUTCOME_UNKNOWN,
            REASON_OUTCOME_UNKNOWN,
            correlation,
        )
    }

    /// The 503 that says what `committed` knows: [`ApiError::not_committed`] or
    /// [`ApiError::outcome_unknown`]. The inbox's answers use this with their own knowledge.
    pub fn unavailable(
        committed: Committed,
        detail: &dyn std::fmt::Display,
        correlation: &CorrelationId,
    ) -> ApiError {
        match committed {
            Committed::No => ApiError::not_committed(detail, correlation),
            _ => ApiError::outcome_unknown(detail, correlation),
        }
    }

    /// A failed commit as an answer.
    pub fn commit(error: &CommitError, correlation: &CorrelationId) -> ApiError {
        ApiError::unavailable(error.committed(), error, correlation)
    }

    /// 413: the body is (or announces itself) larger than `bytes_max`.
    pub fn too_large(reason: impl Into<String>, correlation: &CorrelationId) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload-too-large",
            reason,
            correlation,
        )
    }

    /// 400 with the rule the request broke.
    pub fn invalid(reason: impl Into<String>, correlation: &CorrelationId) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid-request",
            reason,
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
        let mut response = (self.status, axum::Json(body)).into_response();
        for (name, value) in self.headers {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

/// The HTTP status of an inbox answer. The table (SPEC §3.5 and §4) is the library's
/// ([`InboxStatus::http_status`]): the JetStream transport reports the same number in its
/// `Wharf-Status` header, so it cannot live in this crate alone. This is the one place the HTTP
/// layer reads it.
pub(crate) fn inbox_status(status: InboxStatus) -> StatusCode {
    StatusCode::from_u16(status.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

impl ApiError {
    /// An inbox answer that decided nothing (401, 413, 429, 503), in the one error shape, with
    /// its `Retry-After` and `WWW-Authenticate` headers.
    pub(crate) fn from_inbox(answer: &InboxAnswer) -> ApiError {
        let correlation = CorrelationId(answer.correlation_id.clone());
        if answer.status == InboxStatus::Unavailable {
            // The inbox logged the detail under this correlation id. It does not say (yet)
            // whether the failure came before its COMMIT was sent, so the answer may not claim
            // that nothing was committed.
            return ApiError::unavailable(Committed::Unknown, &answer.reason, &correlation);
        }
        let mut error = ApiError::new(
            inbox_status(answer.status),
            answer.status.as_str(),
            answer.reason,
            &correlation,
        );
        if let Some(seconds) = answer.retry_after_s {
            error = error.with_header(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if answer.status == InboxStatus::Unauthenticated {
            error = bearer_challenge(error);
        }
        error
    }
}

/// The outbox's errors as answers: the caller's mistakes are 4xx with the rule named;
/// everything else is opaque. A database error here is `outcome-unknown`, since this function
/// cannot tell whether it came before a commit; callers that know use
/// `outbox_not_committed`.
pub(crate) fn outbox_error(error: outbox::Error, correlation: &CorrelationId) -> ApiError {
    match error {
        outbox::Error::UnknownKind(kind) => ApiError::new(
            StatusCode::BAD_REQUEST,
            "unknown-kind",
            format!("no adapter is registered for kind {kind:?}"),
            correlation,
        ),
        outbox::Error::Invalid { field, rule } => ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid-request",
            format!("{field}: {rule}"),
            correlation,
        ),
        outbox::Error::PayloadRefused { kind, reason } => ApiError::new(
            StatusCode::BAD_REQUEST,
            "payload-refused",
            format!("the {kind} adapter refused the payload: {reason}"),
            correlation,
        ),
        outbox::Error::IdempotencyConflict { existing_id, .. } => ApiError::new(
            StatusCode::CONFLICT,
            "idempotency-conflict",
            format!("the idempotency key belongs to action {existing_id} with different content"),
            correlation,
        ),
        outbox::Error::NotFound(id) => ApiError::new(
            StatusCode::NOT_FOUND,
            "not-found",
            format!("no action {id}"),
            correlation,
        ),
        e @ outbox::Error::NotProposed { .. } => ApiError::new(
            StatusCode::CONFLICT,
            "not-proposed",
            e.to_string(),
            correlation,
        ),
        e @ outbox::Error::NotCancellable { .. } => ApiError::new(
            StatusCode::CONFLICT,
            "not-cancellable",
            e.to_string(),
            correlation,
        ),
        e @ outbox::Error::NotInDoubt { .. } => ApiError::new(
            StatusCode::CONFLICT,
            "not-in-doubt",
            e.to_string(),
            correlation,
        ),
        outbox::Error::Database(e) => ApiError::outcome_unknown(&e, correlation),
        other => ApiError::internal(&other, correlation),
    }
}

/// An outbox error from a read, or from inside a write's transaction before its COMMIT was
/// sent: a database failure there committed nothing (`unavailable`); every other error maps as
/// `outbox_error` says.
pub(crate) fn outbox_not_committed(error: outbox::Error, correlation: &CorrelationId) -> ApiError {
    match error {
        outbox::Error::Database(e) => ApiError::commit(&CommitError::before_commit(e), correlation),
        other => outbox_error(other, correlation),
    }
}

/// An outbound error (dead letters, signing keys, redrive) from a read, or from inside a
/// write's transaction before its COMMIT was sent: a database failure there committed nothing.
pub(crate) fn outbound_not_committed(
    error: outbound::Error,
    correlation: &CorrelationId,
) -> ApiError {
    match error {
        e @ (outbound::Error::Invalid { .. } | outbound::Error::InvalidCursor) => {
            ApiError::invalid(e.to_string(), correlation)
        }
        outbound::Error::Outbox(e) => outbox_not_committed(e, correlation),
        outbound::Error::Database(e) => {
            ApiError::commit(&CommitError::before_commit(e), correlation)
        }
        other => ApiError::internal(&other, correlation),
    }
}

/// An inbox administration error (keys, credentials, streams, settings) from a read, or from
/// inside a write's transaction before its COMMIT was sent: a database failure there committed
/// nothing.
pub(crate) fn inbox_not_committed(error: inbox::Error, correlation: &CorrelationId) -> ApiError {
    match error {
        inbox::Error::Invalid { .. } => ApiError::invalid(error.to_string(), correlation),
        inbox::Error::NotFound { .. } => ApiError::new(
            StatusCode::NOT_FOUND,
            "not-found",
            error.to_string(),
            correlation,
        ),
        inbox::Error::Conflict(_) => ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            error.to_string(),
            correlation,
        ),
        // Inside the transaction, before its COMMIT: nothing was committed.
        inbox::Error::Database(e) => ApiError::commit(&CommitError::before_commit(e), correlation),
        other => ApiError::internal(&other, correlation),
    }
}

/// A console error (its audit trail, sign-in records) from inside a transaction before its
/// COMMIT was sent: a database failure there committed nothing.
pub(crate) fn console_not_committed(
    error: console::Error,
    correlation: &CorrelationId,
) -> ApiError {
    match error {
        console::Error::Invalid { .. } => ApiError::invalid(error.to_string(), correlation),
        console::Error::Database(e) => {
            ApiError::commit(&CommitError::before_commit(e), correlation)
        }
        other => ApiError::internal(&other, correlation),
    }
}

/// The router's answer for a path no route matches: 404 in the one shape.
pub async fn not_found(correlation: CorrelationId) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not-found",
        "no such route; see /openapi.json",
        &correlation,
    )
}

/// The router's answer for a known path with a method it does not serve: 405 in the one shape
/// (the router adds the `Allow` header).
pub async fn method_not_allowed(correlation: CorrelationId) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        "this route does not serve that method; see the Allow header",
        &correlation,
    )
}

/// `WWW-Authenticate: Bearer`, for 401 answers to bearer-authenticated routes.
pub fn bearer_challenge(error: ApiError) -> ApiError {
    error.with_header(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_answer_has_the_one_shape_and_its_headers() {
        let correlation = CorrelationId("c-1".into());
        let error = ApiError::too_large("body-too-large", &correlation)
            .with_header(header::RETRY_AFTER, HeaderValue::from(3u64));
        let response = error.into_response();
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "3");
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"code": "payload-too-large", "reason": "body-too-large",
                               "correlation_id": "c-1"})
        );
    }

    #[test]
    fn a_503_says_only_what_is_known() {
        let correlation = CorrelationId("c".into());
        let unknown = ApiError::unavailable(Committed::Unknown, &"reset", &correlation);
        assert_eq!(
            (unknown.status, unknown.code),
            (StatusCode::SERVICE_UNAVAILABLE, CODE_OUTCOME_UNKNOWN)
        );
        assert!(unknown.reason.contains("outcome is unknown"));
        assert!(unknown.reason.contains("same idempotency key"));
        assert!(!unknown.reason.contains("nothing was committed"));
        let not = ApiError::unavailable(Committed::No, &"refused", &correlation);
        assert_eq!(
            (not.status, not.code),
            (StatusCode::SERVICE_UNAVAILABLE, CODE_UNAVAILABLE)
        );
        assert!(not.reason.contains("nothing was committed"));
    }
}
