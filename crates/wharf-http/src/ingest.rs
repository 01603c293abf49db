//! The inbox's ingest endpoints (SPEC §4), authenticated by the producer's own bearer credential:
//!
//! - `POST /v1/tenants/{tenant}/projects/{project}/envelopes` — one envelope.
//! - `POST /v1/tenants/{tenant}/projects/{project}/envelopes:batch` — `{"envelopes": [ … ]}`,
//!   many envelopes of one stream.
//!
//! Owns: the body limit ([`BodyLimit`]: refused from `Content-Length` before a byte is read, and
//! reading stops at the limit otherwise), the peer address and the JSON shapes; the status codes
//! are [`crate::error`]'s. Every rule — limits, authentication, routes, keys, outcomes — is
//! [`wharf::inbox::Inbox`]'s; a handler passes the raw body through untouched, because the
//! signature covers the bytes as sent.
//!
//! Answers:
//! - decided: `{"outcome", "reason", "correlation_id", "acknowledged_sequence", "original"?}`
//!   with the outcome's status (200, 409, 422);
//! - batch decided: 200 `{"correlation_id", "acknowledged_sequence", "results": [{"index",
//!   "outcome", "reason", "event_id"?, "producer_sequence"?, "original"?}]}`;
//! - not decided: `{"code", "reason", "correlation_id"}` through [`ApiError`], with 401
//!   (`WWW-Authenticate: Bearer`), 413, 429 (`Retry-After`) or 503 (`ApiError::from_inbox`).
//!   The inbox's database failures answer `outcome-unknown` (retry the same envelope: a committed one answers
//!   `ignore-duplicate`), since the inbox does not yet say whether its commit was sent; the
//!   inbox can answer `unavailable` through [`ApiError::unavailable`] once it knows. Both endpoints answer a limited request the same way:
//!   429 `identity-limited` with `Retry-After`. A batch costs the identity limiter one token per
//!   envelope, so it is 429 when the bucket cannot cover all of it (nothing decided, nothing
//!   spent), and 413 `batch-over-burst` when it holds more envelopes than the burst, which no
//!   wait can cover (see `wharf::inbox`).
//!
//! The peer is the TCP peer (serve with `into_make_service_with_connect_info::<SocketAddr>()`).
//! `X-Forwarded-For` is not trusted: behind a proxy every client shares the proxy's bucket, so
//! size the peer limit for that or limit at the proxy.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::State;
use axum::extract::connect_info::ConnectInfo;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use serde::Serialize;
use wharf::inbox::{BatchResponse, Inbox, Original, Response as Answer, Route, Status};

use crate::error::{ApiError, CorrelationId, ErrorBody, inbox_status};
use crate::extract::{ApiBody, ApiPath, BodyLimit};
use crate::openapi::{BatchRequestSchema, EnvelopeSchema, Identity};

/// The single-envelope route.
pub const SINGLE_PATH: &str = "/v1/tenants/{tenant}/projects/{project}/envelopes";
/// The batch route.
pub const BATCH_PATH: &str = "/v1/tenants/{tenant}/projects/{project}/envelopes:batch";

/// The ingest routes on `inbox`. Body limits come from its configuration.
pub fn routes(inbox: Arc<Inbox>) -> Router {
    let single_max = inbox.config().body_bytes_max;
    let batch_max = inbox.config().batch_body_bytes_max;
    Router::new()
        .route(SINGLE_PATH, BodyLimit::new(single_max).on(post(single)))
        .route(BATCH_PATH, BodyLimit::new(batch_max).on(post(batch)))
        .with_state(inbox)
}

/// For `ignore-duplicate`: the acceptance this answer repeats.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Original)]
struct OriginalJson<'a> {
    #[schema(value_type = wharf_core::inbox::Outcome)]
    outcome: &'a str,
    correlation_id: &'a str,
}

impl<'a> OriginalJson<'a> {
    fn of(original: &'a Option<Original>) -> Option<OriginalJson<'a>> {
        original.as_ref().map(|o| OriginalJson {
            outcome: o.outcome.as_str(),
            correlation_id: &o.correlation_id,
        })
    }
}

/// A decided envelope: its outcome, the stable reason, and the stream's contiguous cursor.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = IngestResponse)]
struct DecidedJson<'a> {
    #[schema(value_type = wharf_core::inbox::Outcome)]
    outcome: &'a str,
    reason: &'a str,
    correlation_id: &'a str,
    /// The stream's contiguous cursor.
    acknowledged_sequence: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    original: Option<OriginalJson<'a>>,
}

/// One envelope's outcome in a batch, by its index in the request.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = BatchItem)]
struct ItemJson<'a> {
    index: usize,
    #[schema(value_type = wharf_core::inbox::Outcome)]
    outcome: &'a str,
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    event_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    producer_sequence: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    original: Option<OriginalJson<'a>>,
}

/// A decided batch: one outcome per envelope, and the stream's acknowledged sequence.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = BatchResponse)]
struct BatchJson<'a> {
    correlation_id: &'a str,
    acknowledged_sequence: u64,
    results: Vec<ItemJson<'a>>,
}

/// The HTTP answer for an inbox answer that is not a batch's per-item list.
fn answer(a: &Answer) -> Response {
    match (a.status, a.acknowledged_sequence) {
        (Status::Outcome(outcome), Some(acknowledged_sequence)) => (
            inbox_status(a.status),
            Json(DecidedJson {
                outcome: outcome.as_str(),
                reason: a.reason,
                correlation_id: &a.correlation_id,
                acknowledged_sequence,
                original: OriginalJson::of(&a.original),
            }),
        )
            .into_response(),
        _ => ApiError::from_inbox(a).into_response(),
    }
}

fn peer(connect: Option<Extension<ConnectInfo<SocketAddr>>>) -> IpAddr {
    // Without connect info (a router served without it) every client shares one bucket: limited
    // too much rather than not at all.
    connect.map_or(
        IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        |Extension(ConnectInfo(a))| a.ip(),
    )
}

#[utoipa::path(
    post,
    path = SINGLE_PATH,
    operation_id = "ingestEnvelope",
    tag = "inbox",
    summary = "Ingest one signed controlplane/v1 envelope",
    security(("tenantCredential" = [])),
    params(
        ("tenant" = Identity, Path, description = "must be the credential's and the envelope's tenant"),
        ("project" = Identity, Path, description = "must be the envelope's project"),
    ),
    request_body(content = EnvelopeSchema, content_type = "application/json"),
    responses(
        (status = 200, description = "accept-delayed, accept-reordered or ignore-duplicate (acknowledged: committed)", body = DecidedJson),
        (status = 409, description = "refuse-replay", body = DecidedJson),
        (status = 422, description = "refuse-tampered or refuse-incompatible", body = DecidedJson),
        (status = 401, description = "no or an unknown credential (`WWW-Authenticate: Bearer`); nothing audited", body = ErrorBody),
        (status = 413, description = "the body is (or announces itself) larger than the limit; refused before it is read", body = ErrorBody),
        (status = 429, description = "rate limited; see Retry-After", body = ErrorBody,
            headers(("Retry-After" = u64, description = "seconds to wait"))),
        (status = 503, description = "unavailable: nothing was acknowledged; retry the same envelope (a committed one answers ignore-duplicate)", body = ErrorBody),
    )
)]
async fn single(
    State(inbox): State<Arc<Inbox>>,
    ApiPath((tenant, project)): ApiPath<(String, String)>,
    Extension(correlation): Extension<CorrelationId>,
    connect: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    ApiBody(body): ApiBody,
) -> Response {
    let bearer = crate::auth::bearer(&headers).unwrap_or_default();
    let a = inbox
        .ingest_correlated(
            correlation.0.clone(),
            peer(connect),
            bearer,
            Route::new(tenant, project),
            &body,
        )
        .await;
    answer(&a)
}

#[utoipa::path(
    post,
    path = BATCH_PATH,
    operation_id = "ingestBatch",
    tag = "inbox",
    summary = "Ingest many envelopes of one stream in one transaction",
    security(("tenantCredential" = [])),
    params(
        ("tenant" = Identity, Path, description = "must be the credential's and the envelopes' tenant"),
        ("project" = Identity, Path, description = "must be the envelopes' project"),
    ),
    request_body(content = BatchRequestSchema, content_type = "application/json"),
    responses(
        (status = 200, description = "one outcome per envelope, and the stream's acknowledged sequence", body = BatchJson),
        (status = 422, description = "the body is not a list of envelopes: one refusal for the whole request", body = DecidedJson),
        (status = 401, description = "no or an unknown credential (`WWW-Authenticate: Bearer`); nothing audited", body = ErrorBody),
        (status = 413, description = "body too large, or more envelopes than the identity limiter's burst (`batch-over-burst`: no wait can cover it)", body = ErrorBody),
        (status = 429, description = "rate limited (a batch costs one identity token per envelope); see Retry-After", body = ErrorBody,
            headers(("Retry-After" = u64, description = "seconds to wait"))),
        (status = 503, description = "unavailable: nothing was acknowledged; retry the same batch", body = ErrorBody),
    )
)]
async fn batch(
    State(inbox): State<Arc<Inbox>>,
    ApiPath((tenant, project)): ApiPath<(String, String)>,
    Extension(correlation): Extension<CorrelationId>,
    connect: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    ApiBody(body): ApiBody,
) -> Response {
    let bearer = crate::auth::bearer(&headers).unwrap_or_default();
    let b: BatchResponse = inbox
        .ingest_batch_correlated(
            correlation.0.clone(),
            peer(connect),
            bearer,
            Route::new(tenant, project),
            &body,
        )
        .await;
    if b.head.status != Status::Decided {
        return answer(&b.head);
    }
    let results = b
        .items
        .iter()
        .map(|item| ItemJson {
            index: item.index,
            outcome: item.outcome.as_str(),
            reason: item.reason,
            event_id: item.event_id.as_deref(),
            producer_sequence: item.producer_sequence,
            original: OriginalJson::of(&item.original),
        })
        .collect();
    (
        inbox_status(b.head.status),
        Json(BatchJson {
            correlation_id: &b.head.correlation_id,
            acknowledged_sequence: b.head.acknowledged_sequence.unwrap_or_default(),
            results,
        }),
    )
        .into_response()
}
