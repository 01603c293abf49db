//! The outbox's admin endpoints (SPEC §4), behind the operator token:
//!
//! - `POST /v1/actions` — enqueue; 201 new, 200 existing (same key, same content), 409 conflict.
//! - `GET /v1/actions/{id}`, `POST /v1/actions/{id}/admit`, `POST /v1/actions/{id}/refuse`.
//! - `DELETE /v1/subjects/{account}/actions` — erasure.
//!
//! Owns the JSON shapes of an action. Every decision is `wharf::outbox`'s.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{delete, get, post};
use axum::{Extension, Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wharf::outbox::{self, ActionRequest, ActionView, Registry};

use crate::auth::OperatorToken;
use crate::error::{ApiError, CorrelationId};

/// Bytes an enqueue request body may have: the largest payload the registry can allow (1 MiB)
/// plus room for the other fields. The registry's own, usually smaller, bound still applies.
pub const ENQUEUE_BODY_BYTES_MAX: usize = outbox::PAYLOAD_BYTES_LIMIT + 16 * 1024;

#[derive(Clone)]
struct Actions {
    pool: sqlx::PgPool,
    registry: Arc<Registry>,
    token: OperatorToken,
}

/// The outbox admin routes.
pub fn routes(pool: sqlx::PgPool, registry: Arc<Registry>, token: OperatorToken) -> Router {
    Router::new()
        .route("/v1/actions", post(enqueue))
        .route("/v1/actions/{id}", get(show))
        .route("/v1/actions/{id}/admit", post(admit))
        .route("/v1/actions/{id}/refuse", post(refuse))
        .route("/v1/subjects/{account}/actions", delete(erase))
        .layer(axum::extract::DefaultBodyLimit::max(ENQUEUE_BODY_BYTES_MAX))
        .with_state(Actions {
            pool,
            registry,
            token,
        })
}

/// The body of `POST /v1/actions`: SPEC §2.1's fields, nothing else.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnqueueBody {
    kind: String,
    #[serde(default)]
    tenant_id: Option<String>,
    #[serde(default)]
    project_id: Option<String>,
    lane_key: String,
    idempotency_key: String,
    payload: Value,
    #[serde(default)]
    subject_account_id: Option<String>,
    #[serde(default)]
    max_attempts: Option<u32>,
    #[serde(default)]
    expires_at: Option<DateTime<Utc>>,
    #[serde(default)]
    run_at: Option<DateTime<Utc>>,
    #[serde(default)]
    proposed: bool,
}

/// An action as the API shows it. An ended action has no payload.
#[derive(Debug, Serialize)]
pub struct ActionJson {
    id: i64,
    kind: String,
    tenant_id: Option<String>,
    project_id: Option<String>,
    lane_key: String,
    idempotency_key: String,
    state: &'static str,
    stop_reason: Option<&'static str>,
    attempt: u32,
    max_attempts: u32,
    epoch: i64,
    error_code: Option<String>,
    readback_ref: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<Value>,
    subject_account_id: Option<String>,
    run_at: DateTime<Utc>,
    expires_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    ended_at: Option<DateTime<Utc>>,
}

impl From<ActionView> for ActionJson {
    fn from(view: ActionView) -> ActionJson {
        ActionJson {
            id: view.id,
            kind: view.kind,
            tenant_id: view.tenant_id,
            project_id: view.project_id,
            lane_key: view.lane_key,
            idempotency_key: view.idempotency_key,
            state: view.state.as_str(),
            stop_reason: view.stop_reason.map(|r| r.as_str()),
            attempt: view.attempt,
            max_attempts: view.max_attempts,
            epoch: view.epoch,
            error_code: view.error_code,
            readback_ref: view.readback_ref,
            payload: view.payload,
            subject_account_id: view.subject_account_id,
            run_at: view.run_at,
            expires_at: view.expires_at,
            created_at: view.created_at,
            ended_at: view.ended_at,
        }
    }
}

async fn enqueue(
    State(actions): State<Actions>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<ActionJson>), ApiError> {
    actions.token.require(&headers, &correlation)?;
    let body: EnqueueBody = serde_json::from_slice(&body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid-request",
            format!("invalid enqueue request: {e}"),
            &correlation,
        )
    })?;
    let request = ActionRequest {
        kind: body.kind,
        tenant_id: body.tenant_id,
        project_id: body.project_id,
        lane_key: body.lane_key,
        idempotency_key: body.idempotency_key,
        payload: body.payload,
        subject_account_id: body.subject_account_id,
        max_attempts: body.max_attempts,
        expires_at: body.expires_at,
        run_at: body.run_at,
        proposed: body.proposed,
    };
    let mut conn = actions
        .pool
        .acquire()
        .await
        .map_err(|e| ApiError::unavailable(&e, &correlation))?;
    let enqueued = outbox::enqueue(&mut conn, &actions.registry, request)
        .await
        .map_err(|e| outbox_error(e, &correlation))?;
    drop(conn);
    let view = find(&actions, enqueued.id, &correlation).await?;
    let status = if enqueued.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view.into())))
}

async fn show(
    State(actions): State<Actions>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Result<Json<ActionJson>, ApiError> {
    actions.token.require(&headers, &correlation)?;
    Ok(Json(find(&actions, id, &correlation).await?.into()))
}

async fn admit(
    State(actions): State<Actions>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Result<Json<ActionJson>, ApiError> {
    actions.token.require(&headers, &correlation)?;
    let changed = outbox::admit(&actions.pool, id)
        .await
        .map_err(|e| outbox_error(e, &correlation))?;
    decided(&actions, id, changed, "admitted", &correlation).await
}

async fn refuse(
    State(actions): State<Actions>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Result<Json<ActionJson>, ApiError> {
    actions.token.require(&headers, &correlation)?;
    let changed = outbox::refuse(&actions.pool, id)
        .await
        .map_err(|e| outbox_error(e, &correlation))?;
    decided(&actions, id, changed, "refused", &correlation).await
}

#[derive(Serialize)]
struct Erased {
    deleted: u64,
}

async fn erase(
    State(actions): State<Actions>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    Path(account): Path<String>,
) -> Result<Json<Erased>, ApiError> {
    actions.token.require(&headers, &correlation)?;
    let deleted = outbox::erase_subject(&actions.pool, &account)
        .await
        .map_err(|e| outbox_error(e, &correlation))?;
    Ok(Json(Erased { deleted }))
}

/// After admit/refuse: the action as it is now, 404 when unknown, 409 when it was not a
/// proposal (admitting twice is not an error worth retrying, but the caller should know).
async fn decided(
    actions: &Actions,
    id: i64,
    changed: bool,
    verb: &str,
    correlation: &CorrelationId,
) -> Result<Json<ActionJson>, ApiError> {
    let view = find(actions, id, correlation).await?;
    if !changed {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "not-proposed",
            format!(
                "action {id} is {} and cannot be {verb}; only a PROPOSED action can",
                view.state
            ),
            correlation,
        ));
    }
    Ok(Json(view.into()))
}

async fn find(
    actions: &Actions,
    id: i64,
    correlation: &CorrelationId,
) -> Result<ActionView, ApiError> {
    outbox::get(&actions.pool, id)
        .await
        .map_err(|e| outbox_error(e, correlation))?
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not-found",
                format!("no action {id}"),
                correlation,
            )
        })
}

/// The outbox's errors as answers: the caller's mistakes are 4xx with the rule named;
/// everything else is opaque.
pub fn outbox_error(error: outbox::Error, correlation: &CorrelationId) -> ApiError {
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
        outbox::Error::Database(e) => ApiError::unavailable(&e, correlation),
        other => ApiError::internal(&other, correlation),
    }
}
