//! `GET /v1/webhook-keys`: the public keys that sign this server's webhooks, in the
//! Standard Webhooks form receivers load (`whpk_<base64 of the 32-byte Ed25519 key>`).
//!
//! Owns: the route, its operator-token check and its JSON shape, `{"keys": [{"algorithm":
//! "Ed25519", "public_key": "whpk_…"}]}`, one entry per key that signs (two during a rotation).
//! Must not know where the keys come from or how they are encoded: the binary hands it the
//! `whpk_…` strings it computed from its `[webhook]` key.
//!
//! A public key is not a secret, but the list tells which signing keys a deployment holds, so
//! it is an operator endpoint like the rest of the admin API; receivers are given the key by
//! whoever configures them (`wharf webhook-key show` prints the same text).

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde::Serialize;

use crate::auth::OperatorToken;
use crate::error::{ApiError, CorrelationId, ErrorBody};

/// The route.
pub const PATH: &str = "/v1/webhook-keys";

/// The algorithm of every webhook key (Standard Webhooks `v1a`).
pub const ALGORITHM: &str = "Ed25519";

#[derive(Clone)]
struct WebhookKeys {
    keys: std::sync::Arc<[String]>,
    token: OperatorToken,
}

/// A key that signs this server's webhooks.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = WebhookKey)]
struct KeyJson<'a> {
    #[schema(value_type = crate::openapi::Algorithm)]
    algorithm: &'static str,
    /// `whpk_` and the standard base64 of the 32-byte Ed25519 public key.
    #[schema(pattern = "^whpk_[A-Za-z0-9+/]{43}=$")]
    public_key: &'a str,
}

/// One entry per key that signs (two during a rotation).
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = WebhookKeys)]
struct KeysJson<'a> {
    keys: Vec<KeyJson<'a>>,
}

/// The route, answering with `public_keys` (each already in `whpk_…` form) to the operator.
pub fn routes(public_keys: Vec<String>, token: OperatorToken) -> Router {
    Router::new()
        .route(PATH, get(list))
        .with_state(WebhookKeys {
            keys: public_keys.into(),
            token,
        })
}

#[utoipa::path(
    get,
    path = PATH,
    operation_id = "listWebhookKeys",
    tag = "outbox",
    summary = "The public keys that sign this server's webhooks (Standard Webhooks v1a), in the whpk_ form receivers load",
    security(("operatorToken" = [])),
    responses(
        (status = 200, description = "one entry per signing key (two during a rotation)", body = KeysJson),
        (status = 401, description = "no or a wrong operator token", body = ErrorBody),
    )
)]
async fn list(
    State(state): State<WebhookKeys>,
    Extension(correlation): Extension<CorrelationId>,
    headers: HeaderMap,
) -> Result<axum::response::Response, ApiError> {
    state.token.require(&headers, &correlation)?;
    let body = KeysJson {
        keys: state
            .keys
            .iter()
            .map(|k| KeyJson {
                algorithm: ALGORITHM,
                public_key: k,
            })
            .collect(),
    };
    Ok(axum::response::IntoResponse::into_response(Json(body)))
}
