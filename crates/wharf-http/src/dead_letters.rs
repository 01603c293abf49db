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
use crate::error::{ApiError, CorrelationId};
use crate::extract::{ApiPath, ApiQuery};

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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PageQuery {
    after: Option<String>,
    limit: Option<u32>,
}

#[derive(Serialize)]
struct PageJson {
    items: Vec<DeadLetter>,
    next_cursor: Option<String>,
}

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
        .map_err(|e| outbound_error(e, &correlation))?;
    let page = outbound::dead_letters(&state.pool, &tenant, &project, after.as_ref(), query.limit)
        .await
        .map_err(|e| outbound_error(e, &correlation))?;
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
        .map_err(|e| outbound_error(e, correlation))?
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

/// A read's outbound error as an answer (also [`crate::signing_keys`]'s): a database error
/// there committed nothing.
pub(crate) fn outbound_error(error: outbound::Error, correlation: &CorrelationId) -> ApiError {
    match error {
        outbound::Error::Invalid { .. } | outbound::Error::InvalidCursor => {
            ApiError::invalid(error.to_string(), correlation)
        }
        // Listing dead letters only reads: nothing was committed.
        outbound::Error::Database(e) => ApiError::not_committed(&e, correlation),
        other => ApiError::internal(&other, correlation),
    }
}
