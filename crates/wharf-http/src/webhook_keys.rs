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
use crate::error::{ApiError, CorrelationId};

/// The route.
pub const PATH: &str = "/v1/webhook-keys";

/// The algorithm of every webhook key (Standard Webhooks `v1a`).
pub const ALGORITHM: &str = "Ed25519";

#[derive(Clone)]
struct WebhookKeys {
    keys: std::sync::Arc<[String]>,
    token: OperatorToken,
}

#[derive(Serialize)]
struct KeyJson<'a> {
    algorithm: &'static str,
    public_key: &'a str,
}

#[derive(Serialize)]
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
