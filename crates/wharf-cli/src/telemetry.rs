//! What `serve` tells operators beyond the API: one log line per HTTP request (bounded), the
//! `# HELP` text of every metric, and the HTTP, pool and build-info metrics.
//!
//! Owns: the request log, the metric descriptions and the metrics of this process (requests,
//! pool, build). Must not know: what a route does or what an action is — it sees methods,
//! matched route templates, statuses and the correlation id wharf-http echoes back.
//!
//! The request log is rate-limited: at most [`REQUEST_LOG_LINES_PER_S_MAX`] lines a second; past
//! that, requests are counted and one line a second says how many went unlogged, so a flood of
//! requests cannot fill a disk with log lines (the `wharf_http_requests_total` counter still
//! counts every one).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;

/// Request log lines per second before lines are counted instead of written: enough to see
/// every request of a quiet or normal server; a flood costs one line a second.
pub const REQUEST_LOG_LINES_PER_S_MAX: u64 = 50;

/// How often the pool gauges are sampled.
pub const POOL_SAMPLE_MS: u64 = 5_000;

/// HTTP requests, by `method`, `route` (the matched template, never the raw path, so label
/// cardinality is bounded by the routes) and `status`.
pub const HTTP_REQUESTS_TOTAL: &str = "wharf_http_requests_total";
/// Seconds per HTTP request, by `method` and `route`.
pub const HTTP_REQUEST_SECONDS: &str = "wharf_http_request_seconds";
/// Connections of the process's database pool, by `state` (`idle`, `in_use`).
pub const DB_POOL_CONNECTIONS: &str = "wharf_db_pool_connections";
/// The pool's maximum.
pub const DB_POOL_CONNECTIONS_MAX: &str = "wharf_db_pool_connections_max";
/// Always 1, labelled with the `version` of the running binary.
pub const BUILD_INFO: &str = "wharf_build_info";

/// Gives every metric wharf records its `# HELP` line, and sets the build info. The outbox's
/// and inbox's names are written out here rather than imported, so that a renamed metric
/// costs a stale description, never a broken build.
pub fn describe_metrics() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "wharf_action_attempts_total",
        "Attempts, by kind, result (done, retry, defer, uncertain, failed, cancelled, abandoned, \
         panic, timeout) and recorded (false when the claim was lost and nothing was written)."
    );
    describe_counter!(
        "wharf_action_ended_total",
        "Actions that reached an end state, by kind, state and stop reason."
    );
    describe_gauge!("wharf_action_due_depth", "Due ADMITTED actions, by kind.");
    describe_gauge!(
        "wharf_action_oldest_due_age_seconds",
        "Age in seconds of the oldest due ADMITTED action, by kind (0 when none is due)."
    );
    describe_histogram!("wharf_claim_seconds", "Seconds per claim statement.");
    describe_histogram!(
        "wharf_execution_seconds",
        "Seconds per adapter execute call, by kind."
    );
    describe_counter!(
        "wharf_inbox_answers_total",
        "Ingest answers, by HTTP status, v1 outcome and reason."
    );
    describe_counter!(
        HTTP_REQUESTS_TOTAL,
        "HTTP requests, by method, matched route and status."
    );
    describe_histogram!(
        HTTP_REQUEST_SECONDS,
        "Seconds per HTTP request, by method and matched route."
    );
    describe_gauge!(
        DB_POOL_CONNECTIONS,
        "Database pool connections of this process, by state (idle, in_use)."
    );
    describe_gauge!(
        DB_POOL_CONNECTIONS_MAX,
        "The most connections this process's pool opens."
    );
    describe_gauge!(
        BUILD_INFO,
        "Always 1; the version label is the running wharf's."
    );
    metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
}

/// Samples the pool gauges every [`POOL_SAMPLE_MS`] until the pool closes.
pub fn sample_pool(pool: sqlx::PgPool, connections_max: u32) {
    metrics::gauge!(DB_POOL_CONNECTIONS_MAX).set(f64::from(connections_max));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(POOL_SAMPLE_MS));
        while !pool.is_closed() {
            tick.tick().await;
            let size = pool.size();
            let idle = u32::try_from(pool.num_idle()).unwrap_or(u32::MAX).min(size);
            metrics::gauge!(DB_POOL_CONNECTIONS, "state" => "idle").set(f64::from(idle));
            metrics::gauge!(DB_POOL_CONNECTIONS, "state" => "in_use").set(f64::from(size - idle));
        }
    });
}

/// The request log's budget: lines written in the current second, and requests not logged.
#[derive(Debug)]
pub struct RequestLog {
    started: Instant,
    second: AtomicU64,
    lines: AtomicU64,
    suppressed: AtomicU64,
}

impl RequestLog {
    /// A fresh budget.
    pub fn new() -> Arc<RequestLog> {
        Arc::new(RequestLog {
            started: Instant::now(),
            second: AtomicU64::new(0),
            lines: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        })
    }

    /// Whether this request may have its line; when a new second starts, first reports how
    /// many requests the last full seconds left unlogged.
    fn admit(&self) -> bool {
        let now = self.started.elapsed().as_secs();
        let second = self.second.load(Ordering::Relaxed);
        if now != second
            && self
                .second
                .compare_exchange(second, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.lines.store(0, Ordering::Relaxed);
            let suppressed = self.suppressed.swap(0, Ordering::Relaxed);
            if suppressed > 0 {
                tracing::info!(
                    suppressed,
                    limit_per_s = REQUEST_LOG_LINES_PER_S_MAX,
                    "HTTP requests not logged (over the request log's rate limit)"
                );
            }
        }
        if self.lines.fetch_add(1, Ordering::Relaxed) < REQUEST_LOG_LINES_PER_S_MAX {
            true
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            false
        }
    }
}

/// Middleware: counts and times every request, and logs it at info within the budget: method,
/// route, status, duration and the correlation id the client was given.
pub async fn log_request(
    axum::extract::State(log): axum::extract::State<Arc<RequestLog>>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = request.method().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "(unmatched)".to_owned(), |p| p.as_str().to_owned());
    let response = next.run(request).await;
    let took = started.elapsed();
    let status = response.status().as_u16();
    metrics::counter!(HTTP_REQUESTS_TOTAL, "method" => method.clone(), "route" => route.clone(),
        "status" => status.to_string())
    .increment(1);
    metrics::histogram!(HTTP_REQUEST_SECONDS, "method" => method.clone(), "route" => route.clone())
        .record(took.as_secs_f64());
    // Health probes come every few seconds from every load balancer: count them, log only
    // when they fail.
    let probe = matches!(route.as_str(), "/healthz" | "/readyz" | "/metrics");
    if (!probe || status >= 400) && log.admit() {
        let correlation_id = response
            .headers()
            .get(wharf_http::error::CORRELATION_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        tracing::info!(
            method,
            route,
            status,
            duration_ms = took.as_secs_f64() * 1000.0,
            correlation_id,
            "http request"
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_log_admits_its_budget_a_second_and_counts_the_rest() {
        let log = RequestLog::new();
        let admitted = (0..REQUEST_LOG_LINES_PER_S_MAX + 10)
            .filter(|_| log.admit())
            .count() as u64;
        // All within one second on any machine that runs the tests.
        assert_eq!(admitted, REQUEST_LOG_LINES_PER_S_MAX);
        assert_eq!(log.suppressed.load(Ordering::Relaxed), 10);
    }
}
