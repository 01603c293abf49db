//! Operator actions on the outbox over HTTP, behind the operator token:
//!
//! - `GET /v1/actions?state=&kind=&tenant=&after=&limit=` — the list `wharf actions list` shows,
//!   keyset pages of at most 100.
//! - `POST /v1/actions/{id}/cancel` — PROPOSED/ADMITTED ⇒ CANCELLED / `OPERATOR`; 409
//!   `not-cancellable` for an EXECUTING or ended action.
//! - `POST /v1/actions/{id}/resolve` — record a finding about an UNCERTAIN action, optionally
//!   resend it; 409 `not-in-doubt` otherwise.
//! - `GET /v1/actions/{id}/resolutions`, `GET /v1/audit?action_id=&after=&limit=`.
//! - `POST /v1/kinds/{kind}/pause`, `POST /v1/kinds/{kind}/resume` (`tenant` in the body: that
//!   tenant only), `GET /v1/pauses` — claims skip a paused kind; nothing running is stopped.
//! - `POST /v1/tenants/{tenant}/projects/{project}/dead-letters/redrive` — envelope dead letters
//!   delivered again, byte for byte; a dry run unless the body says `"dry_run": false`.
//!
//! The operator token is one shared secret, so it cannot say who holds it: the body's `actor`
//! names the person or tool (default `operator-token`), and the request's correlation id is
//! written to the audit with it. Owns the JSON shapes; every decision is `wharf::outbox`'s.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wharf::outbox::{
    self, ActionState, ActionView, AuditEntry, Finding, Operator, Registry, Resolution,
};

use crate::auth::OperatorToken;
use crate::error::{ApiError, CorrelationId, ErrorBody, outbox_error};
use crate::extract::{ApiBody, ApiPath, ApiQuery};
use crate::openapi::Identity;

/// The actor written to the audit when a request names none.
pub const DEFAULT_ACTOR: &str = "operator-token";

#[derive(Clone)]
struct Ops {
    pool: sqlx::PgPool,
    registry: Arc<Registry>,
    token: OperatorToken,
}

/// The operator routes. [`crate::actions::routes`] merges them in, so every server that
/// serves the outbox's admin routes serves these too.
pub fn routes(pool: sqlx::PgPool, registry: Arc<Registry>, token: OperatorToken) -> Router {
    Router::new()
        .route("/v1/actions", get(list))
        .route("/v1/actions/{id}/cancel", post(cancel))
        .route("/v1/actions/{id}/resolve", post(resolve))
        .route("/v1/actions/{id}/resolutions", get(resolutions))
        .route("/v1/audit", get(audit))
        .route("/v1/kinds/{kind}/pause", post(pause))
        .route("/v1/kinds/{kind}/resume", post(resume))
        .route("/v1/pauses", get(pauses))
        .route(
            "/v1/tenants/{tenant}/projects/{project}/dead-letters/redrive",
            post(redrive),
        )
        .with_state(Ops {
            pool,
            registry,
            token,
        })
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only this state.
    #[param(value_type = Option<ActionState>)]
    state: Option<String>,
    /// Only this kind.
    kind: Option<String>,
    /// Only this tenant.
    tenant: Option<String>,
    /// The `next_after` of the previous page.
    after: Option<i64>,
    /// Rows on the page; absent: 100.
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u32>,
}

/// A keyset page.
#[derive(Serialize, utoipa::ToSchema)]
struct Page<T> {
    /// At most 100.
    #[schema(max_items = 100)]
    items: Vec<T>,
    /// The `after` of the next page; absent on the last one.
    next_after: Option<i64>,
}

fn limit_of(limit: Option<u32>, max: u32, correlation: &CorrelationId) -> Result<u32, ApiError> {
    match limit {
        None => Ok(max),
        Some(l) if (1..=max).contains(&l) => Ok(l),
        Some(_) => Err(ApiError::invalid(
            format!("limit: must be 1..={max}"),
            correlation,
        )),
    }
}

#[utoipa::path(
    get,
    path = "/v1/actions",
    operation_id = "listActions",
    tag = "outbox",
    summary = "List actions in id order, a keyset page at a time",
    security(("operatorToken" = [])),
    params(ListQuery),
    responses(
        (status = 200, description = "a page", body = Page<ActionView>),
        (status = 400, description = "a bad filter, limit or query parameter", body = ErrorBody),
        (status = 401, description = "no or a wrong operator token", body = ErrorBody),
        (status = 503, description = "`unavailable`: the database failed; nothing changed", body = ErrorBody),
    )
)]
async fn list(
    State(ops): State<Ops>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    query: Result<ApiQuery<ListQuery>, ApiError>,
) -> Result<Json<Page<ActionView>>, ApiError> {
    ops.token.require(&headers, &correlation)?;
    let ApiQuery(query) = query?;
    let limit = limit_of(query.limit, outbox::LIST_LIMIT_MAX, &correlation)?;
    let state = query
        .state
        .as_deref()
        .map(str::parse::<ActionState>)
        .transpose()
        .map_err(|e| ApiError::invalid(format!("state: {e}"), &correlation))?;
    for (field, value) in [("kind", &query.kind), ("tenant", &query.tenant)] {
        if let Some(value) = value {
            crate::extract::nul_free(field, value, &correlation)?;
        }
    }
    let filter = outbox::ListFilter {
        state,
        kind: query.kind,
        tenant_id: query.tenant,
        after_id: query.after,
        limit,
    };
    let page = outbox::list(&ops.pool, &filter)
        .await
        .map_err(|e| before_commit(e, &correlation))?;
    let next_after = (page.len() as u32 == limit)
        .then(|| page.last().map(|v| v.id))
        .flatten();
    Ok(Json(Page {
        items: page,
        next_after,
    }))
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CancelRequest)]
struct CancelBody {
    /// Who, for the audit (default `operator-token`).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 256)]
    actor: Option<String>,
}

/// A cancelled action, the state it left, and its audit row.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Cancelled)]
struct CancelledJson {
    action: ActionView,
    /// PROPOSED or ADMITTED.
    #[schema(value_type = ActionState)]
    from: &'static str,
    audit_id: i64,
}

#[utoipa::path(
    post,
    path = "/v1/actions/{id}/cancel",
    operation_id = "cancelAction",
    tag = "outbox",
    summary = "Cancel a PROPOSED or ADMITTED action (CANCELLED / OPERATOR); EXECUTING and ended actions are refused (409 not-cancellable)",
    security(("operatorToken" = [])),
    params(("id" = i64, Path, minimum = 1, description = "the action's id")),
    request_body(content = Option<CancelBody>, description = "optional", content_type = "application/json"),
    responses(
        (status = 200, description = "cancelled", body = CancelledJson),
        (status = 400, description = "a bad id or body", body = ErrorBody),
        (status = 401, description = "no or a wrong operator token", body = ErrorBody),
        (status = 404, description = "no such action", body = ErrorBody),
        (status = 409, description = "`not-cancellable`: EXECUTING or ended", body = ErrorBody),
        (status = 503, description = "`unavailable` or `outcome-unknown`, as for enqueue", body = ErrorBody),
    )
)]
async fn cancel(
    State(ops): State<Ops>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    ApiPath(id): ApiPath<i64>,
    ApiBody(body): ApiBody,
) -> Result<Json<CancelledJson>, ApiError> {
    ops.token.require(&headers, &correlation)?;
    // An empty body is a cancel with the default actor.
    let body: CancelBody = if body.is_empty() {
        CancelBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::invalid(format!("invalid cancel request: {e}"), &correlation))?
    };
    let operator = operator(body.actor, &correlation);
    let mut tx = begin(&ops, &correlation).await?;
    let cancelled = outbox::cancel(&mut tx, &operator, id)
        .await
        .map_err(|e| before_commit(e, &correlation))?;
    let view = outbox::get(&mut *tx, id)
        .await
        .map_err(|e| before_commit(e, &correlation))?
        .ok_or_else(|| ApiError::internal(&"cancelled action vanished", &correlation))?;
    commit(tx, &correlation).await?;
    Ok(Json(CancelledJson {
        action: view,
        from: cancelled.from.as_str(),
        audit_id: cancelled.audit_id,
    }))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ResolveRequest)]
struct ResolveBody {
    #[schema(value_type = Finding)]
    finding: String,
    /// At most 512 bytes.
    #[serde(default)]
    #[schema(max_length = 512)]
    note: String,
    /// The payload to send again with (only with `not-delivered`).
    #[serde(default)]
    resend_payload: Option<Value>,
    /// Who, for the audit (default `operator-token`).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 256)]
    actor: Option<String>,
}

/// The resolution recorded, the resend if one was asked for, and the audit row.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Resolved)]
struct ResolvedJson {
    resolution: Resolution,
    /// The resend, when one was asked for.
    resent: Option<ActionView>,
    /// False when an earlier resolution already enqueued the same resend.
    resent_created: Option<bool>,
    audit_id: i64,
}

#[utoipa::path(
    post,
    path = "/v1/actions/{id}/resolve",
    operation_id = "resolveAction",
    tag = "outbox",
    summary = "Record what was found out about an UNCERTAIN action (it stays unchanged), optionally resending it as a new linked action (409 not-in-doubt otherwise)",
    security(("operatorToken" = [])),
    params(("id" = i64, Path, minimum = 1, description = "the action's id")),
    request_body(content = ResolveBody, content_type = "application/json"),
    responses(
        (status = 200, description = "recorded", body = ResolvedJson),
        (status = 400, description = "a bad id or body (a finding other than delivered / not-delivered, a note over 512 bytes, a resend with delivered)", body = ErrorBody),
        (status = 401, description = "no or a wrong operator token", body = ErrorBody),
        (status = 404, description = "no such action", body = ErrorBody),
        (status = 409, description = "`not-in-doubt`: only an UNCERTAIN action can be resolved", body = ErrorBody),
        (status = 503, description = "`unavailable` or `outcome-unknown`, as for enqueue", body = ErrorBody),
    )
)]
async fn resolve(
    State(ops): State<Ops>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    ApiPath(id): ApiPath<i64>,
    ApiBody(body): ApiBody,
) -> Result<Json<ResolvedJson>, ApiError> {
    ops.token.require(&headers, &correlation)?;
    let body: ResolveBody = serde_json::from_slice(&body)
        .map_err(|e| ApiError::invalid(format!("invalid resolve request: {e}"), &correlation))?;
    let finding: Finding = body
        .finding
        .parse()
        .map_err(|e| outbox_error(e, &correlation))?;
    let operator = operator(body.actor, &correlation);
    let ask = outbox::Resolve {
        finding,
        note: body.note,
        resend: body.resend_payload,
    };
    let mut tx = begin(&ops, &correlation).await?;
    let resolved = outbox::resolve(&mut tx, &ops.registry, &operator, id, ask)
        .await
        .map_err(|e| before_commit(e, &correlation))?;
    let resent = match resolved.resent {
        Some(r) => outbox::get(&mut *tx, r.id)
            .await
            .map_err(|e| before_commit(e, &correlation))?,
        None => None,
    };
    commit(tx, &correlation).await?;
    Ok(Json(ResolvedJson {
        resolution: resolved.resolution,
        resent,
        resent_created: resolved.resent.map(|r| r.created),
        audit_id: resolved.audit_id,
    }))
}

/// Every item.
#[derive(Serialize, utoipa::ToSchema)]
struct Items<T> {
    items: Vec<T>,
}

#[utoipa::path(
    get,
    path = "/v1/actions/{id}/resolutions",
    operation_id = "listResolutions",
    tag = "outbox",
    summary = "Every resolution of one action, oldest first",
    security(("operatorToken" = [])),
    params(("id" = i64, Path, minimum = 1, description = "the action's id")),
    responses(
        (status = 200, description = "resolutions", body = Items<Resolution>),
        (status = 400, description = "a bad id", body = ErrorBody),
        (status = 401, description = "no or a wrong operator token", body = ErrorBody),
        (status = 503, description = "`unavailable`: the database failed; nothing changed", body = ErrorBody),
    )
)]
async fn resolutions(
    State(ops): State<Ops>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<Items<Resolution>>, ApiError> {
    ops.token.require(&headers, &correlation)?;
    let items = outbox::resolutions(&ops.pool, id)
        .await
        .map_err(|e| before_commit(e, &correlation))?;
    Ok(Json(Items { items }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct AuditQuery {
    /// Only this action.
    action_id: Option<i64>,
    /// The `next_after` of the previous page.
    after: Option<i64>,
    /// Rows on the page; absent: 100.
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u32>,
}

#[utoipa::path(
    get,
    path = "/v1/audit",
    operation_id = "listAudit",
    tag = "outbox",
    summary = "The operator audit (cancel, resolve, redrive, pause, resume) in the order written, a keyset page at a time",
    security(("operatorToken" = [])),
    params(AuditQuery),
    responses(
        (status = 200, description = "a page", body = Page<AuditEntry>),
        (status = 400, description = "a bad limit or query parameter", body = ErrorBody),
        (status = 401, description = "no or a wrong operator token", body = ErrorBody),
        (status = 503, description = "`unavailable`: the database failed; nothing changed", body = ErrorBody),
    )
)]
async fn audit(
    State(ops): State<Ops>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    query: Result<ApiQuery<AuditQuery>, ApiError>,
) -> Result<Json<Page<AuditEntry>>, ApiError> {
    ops.token.require(&headers, &correlation)?;
    let ApiQuery(query) = query?;
    let limit = limit_of(query.limit, outbox::AUDIT_LIMIT_MAX, &correlation)?;
    let filter = outbox::AuditFilter {
        action_id: query.action_id,
        after_id: query.after,
        limit,
    };
    let items = outbox::audit(&ops.pool, &filter)
        .await
        .map_err(|e| before_commit(e, &correlation))?;
    let next_after = (items.len() as u32 == limit)
        .then(|| items.last().map(|e| e.audit_id))
        .flatten();
    Ok(Json(Page { items, next_after }))
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = PauseRequest)]
struct PauseBody {
    /// Only this tenant of the kind; absent: every tenant (its own pause, beside any tenant's).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 256)]
    tenant: Option<String>,
    /// Why (pause only), ≤ 512 bytes.
    #[serde(default)]
    #[schema(max_length = 512)]
    note: Option<String>,
    /// Who, for the audit (default `operator-token`).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 256)]
    actor: Option<String>,
}

/// The pause in force, whether this call wrote it, and its audit row.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Paused)]
struct PausedJson {
    pause: outbox::Pause,
    /// False when the pause was in force already (nothing was written).
    created: bool,
    audit_id: Option<i64>,
}

/// An empty body, or the JSON object `what` takes.
fn pause_body(body: &[u8], what: &str, correlation: &CorrelationId) -> Result<PauseBody, ApiError> {
    if body.is_empty() {
        return Ok(PauseBody::default());
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("invalid {what} request: {e}"), correlation))
}

#[utoipa::path(
    post,
    path = "/v1/kinds/{kind}/pause",
    operation_id = "pauseKind",
    tag = "outbox",
    summary = "Pause a kind (or one tenant of it): claims skip it from the executors' next refresh (at most 1 s); nothing running is interrupted",
    security(("operatorToken" = [])),
    params(("kind" = String, Path, description = "a registered kind")),
    request_body(content = Option<PauseBody>, description = "optional", content_type = "application/json"),
    responses(
        (status = 201, description = "paused", body = PausedJson),
        (status = 200, description = "already paused; nothing written", body = PausedJson),
        (status = 400, description = "an unknown kind, a bad tenant, note or body", body = ErrorBody),
        (status = 401, description = "no or a wrong operator token", body = ErrorBody),
        (status = 503, description = "`unavailable` or `outcome-unknown`, as for enqueue", body = ErrorBody),
    )
)]
async fn pause(
    State(ops): State<Ops>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    ApiPath(kind): ApiPath<String>,
    ApiBody(body): ApiBody,
) -> Result<(StatusCode, Json<PausedJson>), ApiError> {
    ops.token.require(&headers, &correlation)?;
    let body = pause_body(&body, "pause", &correlation)?;
    let operator = operator(body.actor, &correlation);
    let mut tx = begin(&ops, &correlation).await?;
    let paused = outbox::pause(
        &mut tx,
        &ops.registry,
        &operator,
        &kind,
        body.tenant.as_deref(),
        body.note.as_deref().unwrap_or_default(),
    )
    .await
    .map_err(|e| before_commit(e, &correlation))?;
    commit(tx, &correlation).await?;
    let status = if paused.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(PausedJson {
            pause: paused.pause,
            created: paused.created,
            audit_id: paused.audit_id,
        }),
    ))
}

/// Whether a pause ended, which, and its audit row.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Resumed)]
struct ResumedJson {
    /// False when it was not paused (nothing was written).
    resumed: bool,
    /// The pause that ended.
    ended: Option<outbox::Pause>,
    audit_id: Option<i64>,
}

#[utoipa::path(
    post,
    path = "/v1/kinds/{kind}/resume",
    operation_id = "resumeKind",
    tag = "outbox",
    summary = "Resume a kind (the kind-wide pause only) or one tenant of it",
    security(("operatorToken" = [])),
    params(("kind" = String, Path, description = "a registered kind")),
    request_body(content = Option<PauseBody>, description = "optional; a resume takes no note", content_type = "application/json"),
    responses(
        (status = 200, description = "resumed, or was not paused (resumed false, nothing written)", body = ResumedJson),
        (status = 400, description = "an unknown kind, a bad tenant or body", body = ErrorBody),
        (status = 401, description = "no or a wrong operator token", body = ErrorBody),
        (status = 503, description = "`unavailable` or `outcome-unknown`, as for enqueue", body = ErrorBody),
    )
)]
async fn resume(
    State(ops): State<Ops>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    ApiPath(kind): ApiPath<String>,
    ApiBody(body): ApiBody,
) -> Result<Json<ResumedJson>, ApiError> {
    ops.token.require(&headers, &correlation)?;
    let body = pause_body(&body, "resume", &correlation)?;
    if body.note.is_some() {
        return Err(ApiError::invalid(
            "invalid resume request: a resume takes no note",
            &correlation,
        ));
    }
    let operator = operator(body.actor, &correlation);
    let mut tx = begin(&ops, &correlation).await?;
    let resumed = outbox::resume(
        &mut tx,
        &ops.registry,
        &operator,
        &kind,
        body.tenant.as_deref(),
    )
    .await
    .map_err(|e| before_commit(e, &correlation))?;
    commit(tx, &correlation).await?;
    Ok(Json(ResumedJson {
        resumed: resumed.ended.is_some(),
        ended: resumed.ended,
        audit_id: resumed.audit_id,
    }))
}

#[utoipa::path(
    get,
    path = "/v1/pauses",
    operation_id = "listPauses",
    tag = "outbox",
    summary = "Every pause in force (at most 1000)",
    security(("operatorToken" = [])),
    responses(
        (status = 200, description = "the pauses", body = Items<outbox::Pause>),
        (status = 401, description = "no or a wrong operator token", body = ErrorBody),
        (status = 503, description = "`unavailable`: the database failed; nothing changed", body = ErrorBody),
    )
)]
async fn pauses(
    State(ops): State<Ops>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
) -> Result<Json<Items<outbox::Pause>>, ApiError> {
    ops.token.require(&headers, &correlation)?;
    let items = outbox::pauses(&ops.pool)
        .await
        .map_err(|e| before_commit(e, &correlation))?;
    Ok(Json(Items { items }))
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = RedriveRequest)]
struct RedriveBody {
    /// Only this error code.
    #[serde(default)]
    error_code: Option<String>,
    /// Only dead letters that ended after this.
    #[serde(default)]
    ended_after: Option<chrono::DateTime<chrono::Utc>>,
    /// 1..=100; absent: 100.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    limit: Option<u32>,
    /// Absent or true: list what would be redriven and write nothing.
    #[serde(default)]
    dry_run: Option<bool>,
    /// Who, for the audit (default `operator-token`).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 256)]
    actor: Option<String>,
}

/// What was (or would be) redriven.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Redriven)]
struct RedrivenJson {
    dry_run: bool,
    /// At most 100.
    #[schema(max_items = 100)]
    items: Vec<wharf::outbound::Redriven>,
    /// Whether a next call may find more (this one took as many as it could).
    more: bool,
}

#[utoipa::path(
    post,
    path = "/v1/tenants/{tenant}/projects/{project}/dead-letters/redrive",
    operation_id = "redriveDeadLetters",
    tag = "outbound",
    summary = "Deliver envelope dead letters of one scope again, the same bytes and event id, in emission order, as new linked actions; a dry run unless dry_run is false; idempotent",
    security(("operatorToken" = [])),
    params(("tenant" = Identity, Path), ("project" = Identity, Path)),
    request_body(content = Option<RedriveBody>, description = "optional", content_type = "application/json"),
    responses(
        (status = 200, description = "what was (or would be) redriven", body = RedrivenJson),
        (status = 400, description = "a bad filter or body", body = ErrorBody),
        (status = 401, description = "no or a wrong operator token", body = ErrorBody),
        (status = 503, description = "`unavailable` or `outcome-unknown`, as for enqueue", body = ErrorBody),
    )
)]
async fn redrive(
    State(ops): State<Ops>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    ApiPath((tenant, project)): ApiPath<(String, String)>,
    ApiBody(body): ApiBody,
) -> Result<Json<RedrivenJson>, ApiError> {
    ops.token.require(&headers, &correlation)?;
    let body: RedriveBody = if body.is_empty() {
        RedriveBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::invalid(format!("invalid redrive request: {e}"), &correlation))?
    };
    let dry_run = body.dry_run.unwrap_or(true);
    let filter = wharf::outbound::RedriveFilter {
        tenant,
        project,
        error_code: body.error_code,
        ended_after: body.ended_after,
        limit: body.limit.unwrap_or(wharf::outbound::REDRIVE_BATCH_MAX),
    };
    let operator = operator(body.actor, &correlation);
    let mut tx = begin(&ops, &correlation).await?;
    let items = wharf::outbound::redrive(&mut tx, &ops.registry, &operator, &filter, dry_run)
        .await
        .map_err(|e| redrive_error(e, &correlation))?;
    commit(tx, &correlation).await?;
    let more = items.len() as u32 == filter.limit;
    Ok(Json(RedrivenJson {
        dry_run,
        items,
        more,
    }))
}

/// A redrive's failure inside its transaction, before COMMIT was sent: nothing was committed
/// (also the console's name for it).
pub(crate) use crate::error::outbound_not_committed as redrive_error;

fn operator(actor: Option<String>, correlation: &CorrelationId) -> Operator {
    Operator::new(
        actor.unwrap_or_else(|| DEFAULT_ACTOR.to_owned()),
        correlation.0.clone(),
    )
}

/// An error inside a write's transaction before COMMIT was sent, or a read's: nothing was
/// committed (also the console's name for it).
pub(crate) use crate::error::outbox_not_committed as before_commit;

async fn begin(
    ops: &Ops,
    correlation: &CorrelationId,
) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, ApiError> {
    ops.pool
        .begin()
        .await
        .map_err(|e| ApiError::not_committed(&e, correlation))
}

async fn commit(
    tx: sqlx::Transaction<'static, sqlx::Postgres>,
    correlation: &CorrelationId,
) -> Result<(), ApiError> {
    wharf::commit::commit(tx)
        .await
        .map_err(|e| ApiError::commit(&e, correlation))
}
