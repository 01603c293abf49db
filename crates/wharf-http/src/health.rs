//! `/healthz` (the process answers) and `/readyz` (the database answers too), and `/metrics`.

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use sqlx::PgPool;

/// How long `/readyz` waits for the database before it answers 503. A load balancer polls it
/// every few seconds; a slower database is not ready.
pub const READY_CHECK_MS: u64 = 2_000;

#[derive(Clone)]
struct Health {
    pool: PgPool,
    prometheus: Option<PrometheusHandle>,
}

/// `/healthz`, `/readyz` and, when a Prometheus recorder is installed, `/metrics`.
pub fn routes(pool: PgPool, prometheus: Option<PrometheusHandle>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics))
        .with_state(Health { pool, prometheus })
}

async fn ready(State(health): State<Health>) -> (StatusCode, &'static str) {
    let check = wharf::store::ping(&health.pool);
    match tokio::time::timeout(Duration::from_millis(READY_CHECK_MS), check).await {
        Ok(Ok(())) => (StatusCode::OK, "ready\n"),
        _ => (StatusCode::SERVICE_UNAVAILABLE, "database unavailable\n"),
    }
}

async fn metrics(State(health): State<Health>) -> (StatusCode, String) {
    match &health.prometheus {
        Some(handle) => (StatusCode::OK, handle.render()),
        None => (StatusCode::NOT_FOUND, "metrics are not enabled\n".into()),
    }
}
