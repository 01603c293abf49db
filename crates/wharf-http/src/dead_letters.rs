//! `GET /v1/tenants/{tenant}/projects/{project}/dead-letters?after=&limit=` (SPEC §3.8, §4).
//!
//! Readable with a credential of that tenant, or with the operator token; never across
//! tenants. Keyset-paginated (at most 100 a page), showing stable error codes only.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde::{Deserialize, Serialize};
use wharf::outbound::{self, Cursor, DeadLetter};

use crate::auth::{OperatorToken, bearer};
use crate::error::{ApiError, CorrelationId, ErrorBody, outbound_not_committed};
use crate::extract::{ApiPath, ApiQuery};
use crate::openapi::Identity;

#[derive(Clone)]
struct DeadLetters {
    pool: sqlx::PgPool,
    token: OperatorToken,
}

/// The dead-letter route.
pub fn routes(pool: sqlx::PgPool, token: OperatorToken) -> Router {
    Router::new()
        .route(
            "/v1/tenants/{tenant}/projects/{project}/dead-letters",
            get(list),
        )
        .with_state(DeadLetters { pool, token })
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct PageQuery {
    /// The `next_cursor` of the previous page.
    after: Option<String>,
    /// Rows on the page; absent: 100.
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u32>,
}

/// One page of dead letters, oldest failure first.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = DeadLetterPage)]
struct PageJson {
    /// At most 100.
    #[schema(max_items = 100)]
    items: Vec<DeadLetter>,
    /// Where the next page starts; null when this one reached the end (for now).
    next_cursor: Option<String>,
}

#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/projects/{project}/dead-letters",
    operation_id = "listDeadLetters",
    tag = "outbox",
    summary = "FAILED actions of one tenant and project, keyset-paginated",
    security(("tenantCredential" = []), ("operatorToken" = [])),
    params(
        ("tenant" = Identity, Path, description = "the credential's tenant"),
        ("project" = Identity, Path),
        PageQuery,
    ),
    responses(
        (status = 200, description = "a page (at most 100)", body = PageJson),
        (status = 400, description = "a bad cursor, limit or query parameter", body = ErrorBody),
        (status = 401, description = "no credential of this tenant and not the operator token", body = ErrorBody),
        (status = 403, description = "a credential of another tenant", body = ErrorBody),
        (status = 503, description = "`unavailable`: the database failed; nothing changed", body = ErrorBody),
    )
)]
async fn list(
    State(state): State<DeadLetters>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
    ApiPath((tenant, project)): ApiPath<(String, String)>,
    query: Result<ApiQuery<PageQuery>, ApiError>,
) -> Result<Json<PageJson>, ApiError> {
    authorize(&state.pool, &state.token, &headers, &tenant, &correlation).await?;
    // The query is judged after the credential: a stranger learns nothing from its errors.
    let ApiQuery(query) = query?;
    let after = query
        .after
        .as_deref()
        .filter(|a| !a.is_empty())
        .map(str::parse::<Cursor>)
        .transpose()
        .map_err(|e| outbound_not_committed(e, &correlation))?;
    let page = outbound::dead_letters(&state.pool, &tenant, &project, after.as_ref(), query.limit)
        .await
        .map_err(|e| outbound_not_committed(e, &correlation))?;
    Ok(Json(PageJson {
        items: page.items,
        next_cursor: page.next.map(|c| c.to_string()),
    }))
}

/// The operator token, or a live credential of the tenant in the path (also the rule of
/// [`crate::signing_keys`]).
pub(crate) async fn authorize(
    pool: &sqlx::PgPool,
    token: &OperatorToken,
    headers: &HeaderMap,
    tenant: &str,
    correlation: &CorrelationId,
) -> Result<(), ApiError> {
    if token.accepts(headers) {
        return Ok(());
    }
    let unauthorized = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a credential of this tenant or the operator token is required",
            correlation,
        )
    };
    let token = bearer(headers).ok_or_else(unauthorized)?;
    match outbound::reader_of(pool, token, tenant)
        .await
        .map_err(|e| outbound_not_committed(e, correlation))?
    {
        outbound::Reader::OfTenant => {}
        outbound::Reader::Unknown => return Err(unauthorized()),
        // Another tenant's credential: say no without saying whether the tenant exists.
        outbound::Reader::OtherTenant => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "this credential belongs to another tenant",
                correlation,
            ));
        }
    }
    Ok(())
}
