//! `/healthz` (the process answers) and `/readyz` (the database answers too), `/metrics`, and
//! the start-up gate a server answers through while it waits for its database.
//!
//! [`Startup`] is what a process serves from the moment it listens: `/healthz` answers `ok`
//! at once, `/readyz` and every other route answer 503 `starting` with what the process is
//! waiting for, and once [`Startup::ready`] hands it the full application, every request goes
//! there. A load balancer thus sees a live but unready replica while PostgreSQL restarts
//! under a new one, instead of a connection refused.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use sqlx::PgPool;
use tower::ServiceExt as _;

use crate::error::{ApiError, CorrelationId, ErrorBody};

/// How long `/readyz` waits for the database before it answers 503. A load balancer polls it
/// every few seconds; a slower database is not ready.
pub const READY_CHECK_MS: u64 = 2_000;

/// Bytes of the "waiting for …" text a starting server shows; longer texts are cut.
pub const STARTING_REASON_BYTES_MAX: usize = 512;

#[derive(Clone)]
struct Health {
    pool: PgPool,
    prometheus: Option<PrometheusHandle>,
}

/// `/healthz`, `/readyz` and, when a Prometheus recorder is installed, `/metrics`.
pub fn routes(pool: PgPool, prometheus: Option<PrometheusHandle>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics))
        .with_state(Health { pool, prometheus })
}

#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "healthz",
    tag = "operations",
    summary = "The process answers",
    responses((status = 200, description = "ok", body = String, content_type = "text/plain")),
)]
async fn healthz() -> &'static str {
    "ok\n"
}

#[utoipa::path(
    get,
    path = "/readyz",
    operation_id = "readyz",
    tag = "operations",
    summary = "The process and its database answer",
    responses(
        (status = 200, description = "ready", body = String, content_type = "text/plain"),
        (status = 503, description = "not ready: the database does not answer (`not-ready`), or the server is still starting (`starting`, while it waits for its database)", body = ErrorBody),
    ),
)]
async fn ready(State(health): State<Health>, correlation: CorrelationId) -> Response {
    let check = wharf::ping(&health.pool);
    match tokio::time::timeout(Duration::from_millis(READY_CHECK_MS), check).await {
        Ok(Ok(())) => (StatusCode::OK, "ready\n").into_response(),
        Ok(Err(e)) => not_ready(format!("database unavailable: {e}"), &correlation),
        Err(_) => not_ready(
            format!("database did not answer within {READY_CHECK_MS} ms"),
            &correlation,
        ),
    }
}

fn not_ready(reason: String, correlation: &CorrelationId) -> Response {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "not-ready",
        reason,
        correlation,
    )
    .into_response()
}

#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "metrics",
    tag = "operations",
    summary = "Prometheus metrics",
    responses(
        (status = 200, description = "text exposition format", body = String, content_type = "text/plain"),
        (status = 404, description = "`not-found`: this server exports no metrics", body = ErrorBody),
        (status = 503, description = "`starting`: the server is still waiting for its database", body = ErrorBody),
    ),
)]
async fn metrics(State(health): State<Health>, correlation: CorrelationId) -> Response {
    match &health.prometheus {
        Some(handle) => (StatusCode::OK, handle.render()).into_response(),
        None => ApiError::new(
            StatusCode::NOT_FOUND,
            "not-found",
            "metrics are not enabled",
            &correlation,
        )
        .into_response(),
    }
}

/// The start-up gate; see the module docs. Cheap to clone: every clone is the same gate.
#[derive(Clone)]
pub struct Startup {
    inner: Arc<Gate>,
}

struct Gate {
    app: OnceLock<Router>,
    waiting_for: Mutex<String>,
}

impl Startup {
    /// A gate that is not ready, saying what it waits for (for example "waiting for
    /// PostgreSQL at 127.0.0.1:5432").
    pub fn new(waiting_for: impl Into<String>) -> Startup {
        let startup = Startup {
            inner: Arc::new(Gate {
                app: OnceLock::new(),
                waiting_for: Mutex::new(String::new()),
            }),
        };
        startup.waiting_for(waiting_for);
        startup
    }

    /// Replaces what the gate says it waits for (the latest attempt's error, say).
    pub fn waiting_for(&self, what: impl Into<String>) {
        let mut what = what.into();
        if what.len() > STARTING_REASON_BYTES_MAX {
            let mut cut = STARTING_REASON_BYTES_MAX;
            while !what.is_char_boundary(cut) {
                cut -= 1;
            }
            what.truncate(cut);
        }
        // A poisoned lock only means a writer panicked mid-assignment of a String: the text is
        // still a valid String, so keep using it.
        *self
            .inner
            .waiting_for
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = what;
    }

    /// Hands every later request to `app`. Only the first call counts.
    pub fn ready(&self, app: Router) {
        let _ = self.inner.app.set(app);
    }

    /// Whether [`Startup::ready`] was called.
    pub fn is_ready(&self) -> bool {
        self.inner.app.get().is_some()
    }

    /// The router to serve: the starting answers until ready, the application after.
    pub fn router(&self) -> Router {
        let starting: Router = Router::new()
            .route("/healthz", get(healthz))
            .route("/readyz", get(starting))
            .method_not_allowed_fallback(crate::error::method_not_allowed)
            .fallback(starting)
            .with_state(self.clone())
            .layer(axum::middleware::from_fn(crate::error::correlate));
        let gate = self.inner.clone();
        let service = tower::service_fn(move |request: Request| {
            let app = gate.app.get().cloned().unwrap_or_else(|| starting.clone());
            async move { app.oneshot(request).await }
        });
        Router::new().fallback_service(service)
    }
}

/// Every route but `/healthz` while starting: 503 `starting`, saying what the process waits for.
async fn starting(State(startup): State<Startup>, correlation: CorrelationId) -> ApiError {
    let waiting_for = startup
        .inner
        .waiting_for
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "starting",
        format!("not ready: {waiting_for}"),
        &correlation,
    )
}
