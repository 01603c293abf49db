//! Extractors and the body limit, answering every rejection in the one error shape.
//!
//! Owns: how a path, a query and a body are read, and the body limit of SPEC §3.4 step 0:
//!
//! - [`BodyLimit`] refuses a request whose `Content-Length` announces more than the limit
//!   *before a byte of its body is read* (413 at once, even when the client sends nothing
//!   after its headers), and makes every body read stop at the limit otherwise (a chunked body
//!   gets its 413 as soon as it passes the limit, not when it ends).
//! - [`ApiBody`], [`ApiPath`], [`ApiQuery`] read what axum's `Bytes`, `Path` and `Query` read,
//!   but reject with [`ApiError`]: `invalid-request` naming the parameter, or
//!   `payload-too-large`.
//!
//! Must not know: any route's meaning.

use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{
    DefaultBodyLimit, FromRequest, FromRequestParts, Path, Query, RawPathParams, Request, State,
};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, CorrelationId};

/// The reason of every 413 for a body over its limit.
pub const REASON_BODY_TOO_LARGE: &str = "body-too-large";
/// The reason of a 400 for a body the client stopped sending or sent broken.
pub const REASON_BODY_UNREADABLE: &str = "body-unreadable";

/// A route's body limit, in bytes. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimit {
    /// The largest body accepted.
    pub bytes_max: usize,
}

impl BodyLimit {
    /// A limit of `bytes_max` bytes.
    pub fn new(bytes_max: usize) -> BodyLimit {
        BodyLimit { bytes_max }
    }

    /// `router` with this limit on every method it serves.
    pub fn on<S: Clone + Send + Sync + 'static>(self, router: MethodRouter<S>) -> MethodRouter<S> {
        router
            .layer::<_, Infallible>(axum::middleware::from_fn_with_state(self, refuse_announced))
            .layer::<_, Infallible>(DefaultBodyLimit::max(self.bytes_max))
    }

    /// `router` with this limit on every route it has (its fallback excluded: the application's
    /// 404 and 405 read no body).
    pub fn on_router<S: Clone + Send + Sync + 'static>(
        self,
        router: axum::Router<S>,
    ) -> axum::Router<S> {
        router
            .route_layer(axum::middleware::from_fn_with_state(self, refuse_announced))
            .route_layer(DefaultBodyLimit::max(self.bytes_max))
    }

    /// Whether `headers` announce a body larger than the limit. An unparsable length is left to
    /// the HTTP server, which refuses it before any handler runs.
    pub fn announced_too_large(&self, headers: &axum::http::HeaderMap) -> bool {
        headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|len| len > self.bytes_max as u64)
    }
}

/// The middleware behind [`BodyLimit`]: runs before every extractor of the route, so before the
/// body is polled at all.
async fn refuse_announced(
    State(limit): State<BodyLimit>,
    request: Request,
    next: Next,
) -> Response {
    if limit.announced_too_large(request.headers()) {
        let (parts, _body) = request.into_parts();
        // The body is dropped unread: the server answers now and closes the connection
        // instead of draining gigabytes nobody wants.
        return ApiError::too_large(REASON_BODY_TOO_LARGE, &CorrelationId::of(&parts))
            .into_response();
    }
    next.run(request).await
}

/// A rejected body as an answer: 413 past the limit, 400 when it could not be read.
pub fn body_rejection(rejection: &BytesRejection, correlation: &CorrelationId) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::too_large(REASON_BODY_TOO_LARGE, correlation)
    } else {
        // The client went away or sent a broken stream: nothing to decide, nothing stored.
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad-request",
            REASON_BODY_UNREADABLE,
            correlation,
        )
    }
}

/// The raw body, read up to the route's limit.
#[derive(Debug, Clone)]
pub struct ApiBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for ApiBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let (parts, body) = request.into_parts();
        let correlation = CorrelationId::of(&parts);
        Bytes::from_request(Request::from_parts(parts, body), state)
            .await
            .map(ApiBody)
            .map_err(|rejection| body_rejection(&rejection, &correlation))
    }
}

/// Refuses a decoded path value that PostgreSQL could not store (its text cannot hold U+0000),
/// for a handler that passes it to the database without a library check of its own.
pub(crate) fn nul_free(
    what: &str,
    value: &str,
    correlation: &CorrelationId,
) -> Result<(), ApiError> {
    if value.contains('\0') {
        return Err(ApiError::invalid(
            format!("{what} must not contain U+0000 (NUL)"),
            correlation,
        ));
    }
    Ok(())
}

/// The path parameters, deserialized as `T`.
#[derive(Debug, Clone)]
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let correlation = CorrelationId::of(parts);
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(ApiPath(value)),
            Err(rejection) => {
                // A lone parameter's error does not name it; the raw parameters do.
                let only_key = match RawPathParams::from_request_parts(parts, state).await {
                    Ok(raw) if raw.iter().count() == 1 => {
                        raw.iter().next().map(|(k, _)| k.to_owned())
                    }
                    _ => None,
                };
                Err(path_rejection(
                    &rejection,
                    only_key.as_deref(),
                    &correlation,
                ))
            }
        }
    }
}

fn path_rejection(
    rejection: &PathRejection,
    only_key: Option<&str>,
    correlation: &CorrelationId,
) -> ApiError {
    use axum::extract::path::ErrorKind;
    let reason = match rejection {
        PathRejection::FailedToDeserializePathParams(e) => match e.kind() {
            ErrorKind::ParseErrorAtKey {
                key, expected_type, ..
            } => format!("path parameter `{key}` must be {}", expected(expected_type)),
            ErrorKind::ParseErrorAtIndex {
                index,
                expected_type,
                ..
            } => format!("path parameter {index} must be {}", expected(expected_type)),
            ErrorKind::ParseError { expected_type, .. } => match only_key {
                Some(key) => format!("path parameter `{key}` must be {}", expected(expected_type)),
                None => format!("the path parameter must be {}", expected(expected_type)),
            },
            ErrorKind::InvalidUtf8InPathParam { key } => {
                format!("path parameter `{key}` is not valid UTF-8")
            }
            _ => "the path parameters are not valid for this route".to_owned(),
        },
        _ => "the path parameters are not valid for this route".to_owned(),
    };
    ApiError::invalid(reason, correlation)
}

/// What a path parameter of `type_name` must be, in words.
fn expected(type_name: &str) -> String {
    match type_name {
        "i64" => "an integer from -9223372036854775808 to 9223372036854775807".to_owned(),
        "u64" => "an integer from 0 to 18446744073709551615".to_owned(),
        "u32" => "an integer from 0 to 4294967295".to_owned(),
        other => format!("a valid {other}"),
    }
}

/// The query string, deserialized as `T`.
#[derive(Debug, Clone)]
pub struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let correlation = CorrelationId::of(parts);
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(value)| ApiQuery(value))
            .map_err(|rejection| ApiError::invalid(rejection.body_text(), &correlation))
    }
}
