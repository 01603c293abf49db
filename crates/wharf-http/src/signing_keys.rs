//! `GET /v1/tenants/{tenant}/signing-keys?project=`: the public keys this server signs a
//! tenant's outbound envelopes with, current and retired (rotation keeps the old ones listed,
//! so envelopes signed before it stay verifiable). What a receiver adds with `wharf key add`;
//! `wharf signing-key list` prints the same.
//!
//! Readable with a credential of that tenant or the operator token, as its dead letters are.

use axum::extract::State;
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde::{Deserialize, Serialize};
use wharf::outbound;

use crate::auth::OperatorToken;
use crate::dead_letters::authorize;
use crate::error::{ApiError, CorrelationId, ErrorBody, outbound_not_committed};
use crate::extract::{ApiPath, ApiQuery};
use crate::openapi::Identity;

#[derive(Clone)]
struct SigningKeys {
    pool: sqlx::PgPool,
    token: OperatorToken,
}

/// The signing-key route.
pub fn routes(pool: sqlx::PgPool, token: OperatorToken) -> Router {
    Router::new()
        .route("/v1/tenants/{tenant}/signing-keys", get(list))
        .with_state(SigningKeys { pool, token })
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct KeysQuery {
    /// Only this project.
    project: Option<String>,
}

/// A public key that signs (or signed) a tenant's outbound envelopes.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = SigningKey)]
struct KeyJson {
    tenant: String,
    project: String,
    key_id: String,
    /// Ed25519, standard base64 of 32 bytes.
    public_key: String,
    /// `active` (signs new envelopes) or `retired`.
    state: &'static str,
    created_at: chrono::DateTime<chrono::Utc>,
    retired_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// The keys, current and retired.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = SigningKeys)]
struct Items {
    items: Vec<KeyJson>,
}

#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/signing-keys",
    operation_id = "listSigningKeys",
    tag = "outbound",
    summary = "The public keys this server signs the tenant's outbound envelopes with, current and retired (rotation keeps old ones listed); a credential of the tenant or the operator token",
    security(("tenantCredential" = []), ("operatorToken" = [])),
    params(("tenant" = Identity, Path, description = "the credential's tenant"), KeysQuery),
    responses(
        (status = 200, description = "the keys", body = Items),
        (status = 400, description = "a bad query parameter", body = ErrorBody),
        (status = 401, description = "no credential of this tenant and not the operator token", body = ErrorBody),
        (status = 403, description = "a credential of another tenant", body = ErrorBody),
        (status = 503, description = "`unavailable`: the database failed; nothing changed", body = ErrorBody),
    )
)]
async fn list(
    State(state): State<SigningKeys>,
    Extension(correlation): Extension<CorrelationId>,
    headers: axum::http::HeaderMap,
    ApiPath(tenant): ApiPath<String>,
    query: Result<ApiQuery<KeysQuery>, ApiError>,
) -> Result<Json<Items>, ApiError> {
    authorize(&state.pool, &state.token, &headers, &tenant, &correlation).await?;
    let ApiQuery(query) = query?;
    let keys = outbound::list_signing_keys(&state.pool, &tenant, query.project.as_deref())
        .await
        .map_err(|e| outbound_not_committed(e, &correlation))?;
    let items = keys
        .into_iter()
        .map(|k| KeyJson {
            public_key: k.public_key_base64(),
            state: k.state.as_str(),
            tenant: k.tenant,
            project: k.project,
            key_id: k.key_id,
            created_at: k.created_at,
            retired_at: k.retired_at,
        })
        .collect();
    Ok(Json(Items { items }))
}
