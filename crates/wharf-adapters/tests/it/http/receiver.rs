//! A receiving wharf for end-to-end envelope tests: `wharf::inbox` on its own database behind
//! `POST /v1/tenants/{tenant}/projects/{project}/envelopes`, answering like SPEC §4 (status from
//! the outcome, `{outcome, code, reason, correlation_id, acknowledged_sequence}`).
//!
//! Owns: the route, and a fault injector that loses acknowledgements: for the envelopes it picks,
//! the first copy is ingested and committed, and then the answer is lost (a 503 instead of the
//! acknowledgement, or no answer before the sender's timeout). Must not know: the sender. The
//! production routes live in `wharf-http`; this is only as much of them as the test needs.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use wharf::inbox::{Inbox, Route};

/// How the receiver loses acknowledgements.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    /// Every n-th distinct envelope (by arrival order) gets a 503 after its first copy committed.
    pub lose_ack_every: u64,
    /// Every n-th distinct envelope gets no answer within `hang` after its first copy committed.
    pub hang_every: u64,
    /// How long a hung answer takes (longer than the sender's total timeout).
    pub hang: Duration,
}

#[derive(Default)]
struct Log {
    /// Bodies seen, so a fault hits only an envelope's first copy.
    seen: HashSet<Vec<u8>>,
    /// Requests received, copies included.
    requests: u64,
    /// Answers lost on purpose.
    lost: u64,
}

#[derive(Clone)]
struct Shared {
    inbox: Arc<Inbox>,
    faults: Faults,
    log: Arc<Mutex<Log>>,
}

/// The receiver; dropping it stops serving.
pub struct Receiver {
    addr: SocketAddr,
    log: Arc<Mutex<Log>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Receiver {
    pub async fn start(inbox: Inbox, faults: Faults) -> Receiver {
        let log = Arc::new(Mutex::new(Log::default()));
        let shared = Shared {
            inbox: Arc::new(inbox),
            faults,
            log: log.clone(),
        };
        let app = Router::new()
            .route(
                "/v1/tenants/{tenant}/projects/{project}/envelopes",
                post(ingest),
            )
            .with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Without TCP_NODELAY a response split over two writes waits for the client's delayed
        // ACK (40 ms on Linux) and the test would measure that instead of wharf.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Receiver { addr, log, task }
    }

    /// `http://127.0.0.1:<port>/v1/tenants/<tenant>/projects/<project>/envelopes`.
    pub fn ingest_url(&self, tenant: &str, project: &str) -> String {
        format!(
            "http://{}/v1/tenants/{tenant}/projects/{project}/envelopes",
            self.addr
        )
    }

    /// `http://127.0.0.1:<port>/`: the prefix a credential is configured under.
    pub fn origin(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// (requests received, answers lost on purpose).
    pub fn counts(&self) -> (u64, u64) {
        let log = self.log.lock().unwrap();
        (log.requests, log.lost)
    }
}

async fn ingest(
    State(shared): State<Shared>,
    Path((tenant, project)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
        .to_owned();
    let answer = shared
        .inbox
        .ingest(
            "127.0.0.1".parse().unwrap(),
            &bearer,
            Route::new(tenant, project),
            &body,
        )
        .await;
    let fault = {
        let mut log = shared.log.lock().unwrap();
        log.requests += 1;
        let first = log.seen.insert(body.to_vec());
        let n = log.seen.len() as u64;
        let f = shared.faults;
        let fault = if !first || !answer.is_acknowledged() {
            None
        } else if f.hang_every > 0 && n.is_multiple_of(f.hang_every) {
            Some(true)
        } else if f.lose_ack_every > 0 && n.is_multiple_of(f.lose_ack_every) {
            Some(false)
        } else {
            None
        };
        if fault.is_some() {
            log.lost += 1;
        }
        fault
    };
    match fault {
        Some(true) => tokio::time::sleep(shared.faults.hang).await,
        Some(false) => return StatusCode::SERVICE_UNAVAILABLE.into_response(),
        None => {}
    }
    let status = StatusCode::from_u16(answer.status.http_status()).unwrap();
    let outcome = answer.status.as_str();
    let body = serde_json::json!({
        "outcome": outcome,
        "code": outcome,
        "reason": answer.reason,
        "correlation_id": answer.correlation_id,
        "acknowledged_sequence": answer.acknowledged_sequence,
    });
    let mut response = (status, axum::Json(body)).into_response();
    if let Some(s) = answer.retry_after_s {
        response
            .headers_mut()
            .insert("retry-after", s.to_string().parse().unwrap());
    }
    response
}
