//! A scope `acme/web` with a current signing key, a stub `envelope` adapter that records what
//! it would send, and small helpers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ed25519_dalek::VerifyingKey;
use serde_json::{Value, json};
use sqlx::PgPool;
use wharf::outbound::{
    self, DeliveryBudget, Destination, ENVELOPE_KIND, EmitRequest, Emitted, EnvelopeDelivery,
    Scope, SealedKeySource, ServerKey,
};
use wharf::outbox::{
    Adapter, Attempt, Backoff, ClaimBudget, ErrorCode, Executor, ExecutorConfig, KindSpec, Outcome,
    Registry,
};
use wharf_testkit::TestDb;

pub const TENANT: &str = "acme";
pub const PROJECT: &str = "web";
pub const URL: &str = "https://b.example/v1/tenants/acme/projects/web/envelopes";

/// What the stub answers after the fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Done,
    Refused,
}

/// A stub `envelope` adapter: reads the delivery like the real one, answers the claim hooks
/// from the delivery budget and starts each delivery on it before the fence, as the real one
/// does, and records the body it would send. The budget's clock is the stub's own, moved by
/// the test instead of sleeping.
pub struct StubEnvelope {
    pub answer: Mutex<Answer>,
    pub budget: Option<Arc<DeliveryBudget>>,
    pub sent: Mutex<Vec<(String, Vec<u8>)>>,
    /// "Now" for the budget.
    pub clock: Mutex<Instant>,
    /// Whether the claim hooks answer from the budget; off, only the check at execution (the
    /// `Defer` fallback) limits deliveries.
    pub claim_hooks: AtomicBool,
}

impl StubEnvelope {
    pub fn new(budget: Option<Arc<DeliveryBudget>>) -> Arc<StubEnvelope> {
        Arc::new(StubEnvelope {
            answer: Mutex::new(Answer::Done),
            budget,
            sent: Mutex::new(Vec::new()),
            clock: Mutex::new(Instant::now()),
            claim_hooks: AtomicBool::new(true),
        })
    }

    pub fn sent(&self) -> Vec<(String, Vec<u8>)> {
        self.sent.lock().unwrap().clone()
    }

    pub fn now(&self) -> Instant {
        *self.clock.lock().unwrap()
    }

    /// Moves the budget's clock on.
    pub fn advance(&self, by: Duration) {
        *self.clock.lock().unwrap() += by;
    }
}

#[async_trait]
impl Adapter for StubEnvelope {
    fn spec(&self) -> KindSpec {
        KindSpec {
            name: ENVELOPE_KIND,
            at_most_once: false,
            instance_level: false,
            max_attempts_default: 3,
            backoff: Backoff::default(),
            call_timeout_ms: 5_000,
        }
    }

    fn validate(&self, payload: &Value) -> Result<(), String> {
        EnvelopeDelivery::from_payload(payload)
            .map(|_| ())
            .map_err(|_| "not an envelope delivery".to_owned())
    }

    fn claim_budget(&self) -> ClaimBudget {
        match &self.budget {
            Some(budget) if self.claim_hooks.load(Ordering::SeqCst) => {
                budget.claim_budget_at(self.now())
            }
            _ => ClaimBudget::Unlimited,
        }
    }

    fn claimed(&self, tenants: &[Option<&str>]) {
        if let Some(budget) = &self.budget
            && self.claim_hooks.load(Ordering::SeqCst)
        {
            budget.charge_claimed_at(tenants, self.now());
        }
    }

    async fn execute(&self, attempt: &mut Attempt) -> Outcome {
        if let (Some(budget), Some(tenant)) = (&self.budget, attempt.tenant_id())
            && let Err(wait) = budget.start_at(tenant, self.now())
        {
            return Outcome::Defer { until: wait };
        }
        let Ok(delivery) = EnvelopeDelivery::from_payload(attempt.payload()) else {
            return Outcome::Failed {
                code: ErrorCode::from_static("envelope_payload"),
            };
        };
        if attempt.fence().begin_write().await.is_err() {
            return Outcome::Abandoned;
        }
        self.sent.lock().unwrap().push((
            delivery.destination_url.clone(),
            delivery.body().expect("canonical body"),
        ));
        match *self.answer.lock().unwrap() {
            Answer::Done => Outcome::Done { readback_ref: None },
            Answer::Refused => Outcome::Failed {
                code: ErrorCode::from_static("http_4xx"),
            },
        }
    }
}

pub struct Fx {
    pub db: TestDb,
    pub registry: Arc<Registry>,
    pub stub: Arc<StubEnvelope>,
    pub server_key: ServerKey,
    pub keys: SealedKeySource,
    pub key_id: String,
}

impl Fx {
    pub async fn new() -> Fx {
        Fx::with_budget(None).await
    }

    pub async fn with_budget(budget: Option<Arc<DeliveryBudget>>) -> Fx {
        let db = TestDb::new().await;
        let stub = StubEnvelope::new(budget);
        let mut registry = Registry::new();
        registry.register(stub.clone()).unwrap();
        let server_key = ServerKey::generate();
        let key = outbound::generate_signing_key(&db.pool, &server_key, TENANT, PROJECT)
            .await
            .unwrap();
        Fx {
            db,
            registry: Arc::new(registry),
            stub,
            keys: SealedKeySource::new(server_key.clone()),
            server_key,
            key_id: key.key_id,
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.db.pool
    }

    /// Emits in a transaction of its own and commits.
    pub async fn emit(&self, request: &EmitRequest) -> Result<Emitted, outbound::Error> {
        let mut tx = self.pool().begin().await.unwrap();
        let emitted = outbound::emit_envelope(&mut tx, &self.registry, &self.keys, request).await?;
        tx.commit().await.unwrap();
        Ok(emitted)
    }

    pub fn executor(&self) -> Executor {
        Executor::new(
            self.pool().clone(),
            self.registry.clone(),
            ExecutorConfig::default(),
        )
        .unwrap()
    }

    pub async fn verifying_key(&self, key_id: &str) -> VerifyingKey {
        let info = outbound::public_key(self.pool(), TENANT, PROJECT, key_id)
            .await
            .unwrap();
        VerifyingKey::from_bytes(&info.public_key).unwrap()
    }
}

/// A valid `sync_cursor` payload; `n` lands in `acknowledged_sequence`.
pub fn payload(n: u64) -> Value {
    json!({
        "producer_id": "srv-1",
        "acknowledged_sequence": n,
        "acknowledged_event_id": null,
        "version": 1,
    })
}

pub fn scope() -> Scope {
    Scope::new(TENANT, PROJECT)
}

/// A `sync_cursor` request in `acme/web` to [`URL`].
pub fn request(key: &str, n: u64) -> EmitRequest {
    EmitRequest::new(
        scope(),
        "sync_cursor",
        payload(n),
        key,
        Destination::new(URL),
    )
}

pub async fn count(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

/// The last sequence of a receiver stream, `None` when it never emitted.
pub async fn last_sequence(pool: &PgPool, tenant: &str, project: &str, url: &str) -> Option<i64> {
    sqlx::query_scalar(
        "SELECT last_sequence FROM wharf.outbound_sequences
          WHERE tenant_id = $1 AND project_id = $2 AND destination_url = $3",
    )
    .bind(tenant)
    .bind(project)
    .bind(url)
    .fetch_optional(pool)
    .await
    .unwrap()
}
