//! The outbox's admin endpoints (SPEC §4), behind the operator token:
//!
//! - `POST /v1/actions` — enqueue; 201 new, 200 existing (same key, same content), 409 conflict.
//! - `GET /v1/actions/{id}`, `POST /v1/actions/{id}/admit`, `POST /v1/actions/{id}/refuse`.
//! - `DELETE /v1/subjects/{account}/actions` — erasure.
//! - The operator actions of [`crate::operator`] (list, cancel, resolve, audit), merged in.
//!
//! Owns the JSON shapes of an action. Every decision is `wharf::outbox`'s.
//!
//! Every write runs in its own transaction, committed with [`wharf::commit::commit`], so a
//! database failure answers with what is known: `unavailable` (nothing was committed) when it
//! came before COMMIT was sent or the server refused, `outcome-unknown` (retry with the same
//! idempotency key) when the connection was lost while the COMMIT was in flight. The action an
//! answer shows is read inside that transaction, so a failure after the commit cannot turn a
//! committed enqueue into an error.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{delete, get, post};
use axum::{Extension, Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wharf::outbox::{self, ActionRequest, ActionView, Registry};

use crate::auth::OperatorToken;
use crate::error::{ApiError, CorrelationId, ErrorBody};
use crate::extract::{ApiBody, ApiPath, BodyLimit};

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
    let router = Router::new()
        .route("/v1/actions", post(enqueue))
        .route("/v1/actions/{id}", get(show))
        .route("/v1/actions/{id}/admit", post(admit))
        .route("/v1/actions/{id}/refuse", post(refuse))
        .route("/v1/subjects/{account}/actions", delete(erase))
        .with_state(Actions {
            pool: pool.clone(),
            registry: registry.clone(),
            token: token.clone(),
        })
        .merge(crate::operator::routes(pool, registry, token));
    BodyLimit::new(ENQUEUE_BODY_BYTES_MAX).on_router(router)
}

/// The body of `POST /v1/actions`: SPEC §2.1's fields, nothing else.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ActionRequest)]
struct EnqueueBody {
    /// A registered kind.
    kind: String,
    #[serde(default)]
    tenant_id: Option<String>,
    #[serde(default)]
    project_id: Option<String>,
    /// Actions of one lane never run at the same time, and run in id order.
    #[schema(min_length = 1, max_length = 256)]
    lane_key: String,
    /// Unique: the same key with the same content returns the first action.
    #[schema(min_length = 1, max_length = 256)]
    idempotency_key: String,
    /// JSON the adapter needs; at most 64 KiB by default.
    payload: Value,
    #[serde(default)]
    subject_account_id: Option<String>,
    #[serde(default)]
    #[schema(minimum = 1)]
    max_attempts: Option<u32>,
    #[serde(default)]
    expires_at: Option<DateTime<Utc>>,
    #[serde(default)]
    run_at: Option<DateTime<Utc>>,
    #[serde(default)]
    proposed: bool,
}

#[utoipa::path(
    post,
    path = "/v1/actions",
    operation_id = "enqueueAction",
    tag = "outbox",
    summary = "Enqueue an action",
    security(("operatorToken" = [])),
    request_body(content = EnqueueBody, content_type = "application/json"),
    responses(
        (status = 201, description = "created", body = ActionView),
        (status = 200, description = "an action with this idempotency key and the same content already exists; it is returned unchanged", body = ActionView),
        (status = 400, description = "a field breaks its rule, the kind is unknown, or the adapter refused the payload", body = ErrorBody),
        (status = 401, description = "no or a wrong operator token", body = ErrorBody),
        (status = 409, description = "idempotency conflict: the key exists with different content", body = ErrorBody),
        (status = 413, description = "the body is (or announces itself) larger than the limit; refused before it is read", body = ErrorBody),
        (status = 503, description = "the database failed. Code `unavailable`: nothing was committed, retry. Code `outcome-unknown`: the connection was lost while the write was committing, so it may exist; retry with the same idempotency key, which answers 200 with it if it does", body = ErrorBody),
    )
)]
async fn enqueue(
    State(actions): State<Actions>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    ApiBody(body): ApiBody,
) -> Result<(StatusCode, Json<ActionView>), ApiError> {
    actions.token.require(&headers, &correlation)?;
    let body: EnqueueBody = serde_json::from_slice(&body)
        .map_err(|e| ApiError::invalid(format!("invalid enqueue request: {e}"), &correlation))?;
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
    let mut tx = begin(&actions.pool, &correlation).await?;
    let enqueued = outbox::enqueue(&mut tx, &actions.registry, request)
        .await
        .map_err(|e| before_commit(e, &correlation))?;
    let view = find(&mut *tx, enqueued.id, &correlation).await?;
    commit(tx, &correlation).await?;
    let status = if enqueued.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view)))
}

#[utoipa::path(
    get,
    path = "/v1/actions/{id}",
    operation_id = "getAction",
    tag = "outbox",
    summary = "Show an action",
    security(("operatorToken" = [])),
    params(("id" = i64, Path, minimum = 1, description = "the action's id")),
    responses(
        (status = 200, description = "the action (an ended one has no payload)", body = ActionView),
        (status = 400, description = "the id is not an integer", body = ErrorBody),
        (status = 401, description = "no or a wrong operator token", body = ErrorBody),
        (status = 404, description = "no such action", body = ErrorBody),
        (status = 503, description = "`unavailable`: the database failed; nothing changed", body = ErrorBody),
    )
)]
async fn show(
    State(actions): State<Actions>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<ActionView>, ApiError> {
    actions.token.require(&headers, &correlation)?;
    Ok(Json(find(&actions.pool, id, &correlation).await?))
}

#[utoipa::path(
    post,
    path = "/v1/actions/{id}/admit",
    operation_id = "admitAction",
    tag = "outbox",
    summary = "Admit a PROPOSED action",
    security(("operatorToken" = [])),
    params(("id" = i64, Path, minimum = 1, description = "the action's id")),
    responses(
        (status = 200, description = "admitted", body = ActionView),
        (status = 400, description = "the id is not an integer", body = ErrorBody),
        (status = 401, description = "no or a wrong operator token", body = ErrorBody),
        (status = 404, description = "no such action", body = ErrorBody),
        (status = 409, description = "`not-proposed`: only a PROPOSED action can be admitted", body = ErrorBody),
        (status = 503, description = "`unavailable` or `outcome-unknown`, as for enqueue", body = ErrorBody),
    )
)]
async fn admit(
    State(actions): State<Actions>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<ActionView>, ApiError> {
    actions.token.require(&headers, &correlation)?;
    let mut tx = begin(&actions.pool, &correlation).await?;
    let view = outbox::admit_proposal(&mut tx, id)
        .await
        .map_err(|e| before_commit(e, &correlation))?;
    commit(tx, &correlation).await?;
    Ok(Json(view))
}

#[utoipa::path(
    post,
    path = "/v1/actions/{id}/refuse",
    operation_id = "refuseAction",
    tag = "outbox",
    summary = "Refuse a PROPOSED action (it ends CANCELLED / REFUSED)",
    security(("operatorToken" = [])),
    params(("id" = i64, Path, minimum = 1, description = "the action's id")),
    responses(
        (status = 200, description = "refused", body = ActionView),
        (status = 400, description = "the id is not an integer", body = ErrorBody),
        (status = 401, description = "no or a wrong operator token", body = ErrorBody),
        (status = 404, description = "no such action", body = ErrorBody),
        (status = 409, description = "`not-proposed`: only a PROPOSED action can be refused", body = ErrorBody),
        (status = 503, description = "`unavailable` or `outcome-unknown`, as for enqueue", body = ErrorBody),
    )
)]
async fn refuse(
    State(actions): State<Actions>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<ActionView>, ApiError> {
    actions.token.require(&headers, &correlation)?;
    let mut tx = begin(&actions.pool, &correlation).await?;
    let view = outbox::refuse_proposal(&mut tx, id)
        .await
        .map_err(|e| before_commit(e, &correlation))?;
    commit(tx, &correlation).await?;
    Ok(Json(view))
}

/// What an erasure did.
#[derive(Serialize, utoipa::ToSchema)]
struct Erased {
    /// How many actions were deleted.
    deleted: u64,
}

#[utoipa::path(
    delete,
    path = "/v1/subjects/{account}/actions",
    operation_id = "eraseSubject",
    tag = "outbox",
    summary = "Erase every action of a subject account",
    security(("operatorToken" = [])),
    params(("account" = String, Path, description = "the subject account id")),
    responses(
        (status = 200, description = "how many actions were deleted", body = Erased),
        (status = 400, description = "the account holds a NUL byte", body = ErrorBody),
        (status = 401, description = "no or a wrong operator token", body = ErrorBody),
        (status = 503, description = "`unavailable` or `outcome-unknown`, as for enqueue", body = ErrorBody),
    )
)]
async fn erase(
    State(actions): State<Actions>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    ApiPath(account): ApiPath<String>,
) -> Result<Json<Erased>, ApiError> {
    actions.token.require(&headers, &correlation)?;
    // No action can have such a subject (enqueue refuses it), and PostgreSQL would refuse the
    // parameter with an error a client would be told to retry.
    crate::extract::nul_free("account", &account, &correlation)?;
    let mut tx = begin(&actions.pool, &correlation).await?;
    let deleted = outbox::erase_subject(&mut *tx, &account)
        .await
        .map_err(|e| before_commit(e, &correlation))?;
    commit(tx, &correlation).await?;
    Ok(Json(Erased { deleted }))
}

/// A transaction for one admin write (also the console's). Failing to begin one committed
/// nothing.
pub(crate) async fn begin(
    pool: &sqlx::PgPool,
    correlation: &CorrelationId,
) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, ApiError> {
    pool.begin()
        .await
        .map_err(|e| ApiError::not_committed(&e, correlation))
}

/// Commits an admin write, answering a failure with what is known of its outcome.
pub(crate) async fn commit(
    tx: sqlx::Transaction<'static, sqlx::Postgres>,
    correlation: &CorrelationId,
) -> Result<(), ApiError> {
    wharf::commit::commit(tx)
        .await
        .map_err(|e| ApiError::commit(&e, correlation))
}

/// An error inside a transaction whose COMMIT was not sent (also the console's name for it).
pub(crate) use crate::error::outbox_not_committed as before_commit;

/// Reads one action, 404 when there is none. A read commits nothing, so a database failure is
/// `unavailable` (inside a write's transaction, that transaction is not committed yet either).
pub(crate) async fn find<'c>(
    executor: impl sqlx::PgExecutor<'c>,
    id: i64,
    correlation: &CorrelationId,
) -> Result<ActionView, ApiError> {
    outbox::get(executor, id)
        .await
        .map_err(|e| before_commit(e, correlation))?
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not-found",
                format!("no action {id}"),
                correlation,
            )
        })
}
