//! The real `envelope` adapter's delivery limit is checked before the claim (SPEC §3.8): with
//! one tenant out of tokens, the claim takes none of its rows while another tenant's are
//! delivered, and an expired lease of the exhausted tenant is still reclaimed and delivered.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use sqlx::PgPool;
use wharf::inbox::LimitPolicy;
use wharf::outbound::{
    self, DeliveryBudget, Destination, ENVELOPE_KIND, EmitRequest, Scope, SealedKeySource,
    ServerKey,
};
use wharf::outbox::{ActionState, ActionView, Executor, ExecutorConfig, Registry};
use wharf_adapters::http::{
    EnvelopeAdapter, EnvelopeConfig, EnvelopeDestinationConfig, HttpSenderConfig, NetworkSender,
};
use wharf_testkit::TestDb;

use super::server::{ScriptedServer, Step};

struct Fixture {
    db: TestDb,
    registry: Arc<Registry>,
    keys: SealedKeySource,
    server: ScriptedServer,
    budget: Arc<DeliveryBudget>,
}

/// Tenants acme and beta with a signing key each, one receiver for both, and a delivery
/// budget of one delivery per tenant that never refills.
async fn fixture() -> Fixture {
    let server = ScriptedServer::start(
        vec![Step::Respond {
            status: 200,
            headers: vec![("content-type", "application/json".into())],
            body: json!({"outcome": "accept-delayed"}).to_string(),
        }],
        None,
    )
    .await;
    let db = TestDb::new().await;
    let sender = NetworkSender::new(&HttpSenderConfig {
        allow_cidrs: vec!["127.0.0.0/8".into()],
        ..HttpSenderConfig::default()
    })
    .unwrap();
    let config = EnvelopeConfig {
        destinations: vec![EnvelopeDestinationConfig {
            url: server.url("/v1/"),
            bearer_token: Some("tok".into()),
            bearer_token_env: None,
        }],
    };
    let budget = Arc::new(DeliveryBudget::new(
        LimitPolicy {
            rate_per_s: 0.0,
            burst: 1,
        },
        16,
    ));
    let adapter = EnvelopeAdapter::new(sender, &config)
        .unwrap()
        .with_budget(budget.clone());
    let mut registry = Registry::new();
    registry.register(Arc::new(adapter)).unwrap();
    let server_key = ServerKey::generate();
    for tenant in ["acme", "beta"] {
        outbound::generate_signing_key(&db.pool, &server_key, tenant, "web")
            .await
            .unwrap();
    }
    Fixture {
        db,
        registry: Arc::new(registry),
        keys: SealedKeySource::new(server_key),
        server,
        budget,
    }
}

impl Fixture {
    fn executor(&self) -> Executor {
        let mut config = ExecutorConfig::default();
        config.notify = false;
        Executor::new(self.db.pool.clone(), self.registry.clone(), config).unwrap()
    }

    /// One envelope of `tenant` to receiver stream `n` (its own lane).
    async fn emit(&self, tenant: &str, n: u32) -> i64 {
        let request = EmitRequest::new(
            Scope::new(tenant, "web"),
            "sync_cursor",
            json!({"producer_id": "srv-1", "acknowledged_sequence": 7,
                   "acknowledged_event_id": null, "version": 1}),
            format!("{tenant}-{n}"),
            Destination::new(self.server.url(&format!(
                "/v1/tenants/{tenant}/projects/web/envelopes?s={n}"
            ))),
        );
        let mut tx = self.db.pool.begin().await.unwrap();
        let emitted = outbound::emit_envelope(&mut tx, &self.registry, &self.keys, &request)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        emitted.action_id
    }

    async fn view(&self, id: i64) -> ActionView {
        wharf::outbox::get(&self.db.pool, id)
            .await
            .unwrap()
            .unwrap()
    }

    async fn executing(&self) -> i64 {
        count(&self.db.pool, "EXECUTING").await
    }
}

async fn count(pool: &PgPool, state: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM wharf.action WHERE state = $1")
        .bind(state)
        .fetch_one(pool)
        .await
        .unwrap()
}

fn assert_untouched(v: &ActionView) {
    assert_eq!(v.state, ActionState::Admitted, "{}", v.id);
    assert_eq!((v.attempt, v.epoch), (0, 0), "{}: never claimed", v.id);
    assert!(v.lease_expires_at.is_none());
}

#[tokio::test]
async fn an_exhausted_tenant_waits_unclaimed_while_another_is_delivered() {
    let f = fixture().await;
    // acme spent its only token; beta has its own.
    assert!(f.budget.try_acquire_at("acme", Instant::now()).is_ok());
    let acme = [f.emit("acme", 0).await, f.emit("acme", 1).await];
    let beta = f.emit("beta", 0).await;
    let executor = f.executor();
    assert_eq!(executor.run_once().await.unwrap(), 1);
    assert_eq!(f.view(beta).await.state, ActionState::Done);
    for id in acme {
        assert_untouched(&f.view(id).await);
    }
    assert_eq!(executor.run_once().await.unwrap(), 0);
    assert_eq!(f.executing().await, 0);
    assert_eq!(f.server.received().len(), 1);
    assert!(f.server.received()[0].path.starts_with("/v1/tenants/beta/"));
}

#[tokio::test]
async fn an_expired_lease_of_an_exhausted_tenant_is_reclaimed_and_delivered() {
    let f = fixture().await;
    let dead = f.emit("acme", 0).await;
    let waiting = f.emit("acme", 1).await;
    // A worker claimed the first and died before sending; acme's token went elsewhere.
    let claimed =
        wharf::testing::outbox::claim(&f.db.pool, 1, 1_000, None, &[ENVELOPE_KIND], 100, &[])
            .await
            .unwrap();
    assert_eq!(claimed[0].id, dead);
    assert!(f.budget.try_acquire_at("acme", Instant::now()).is_ok());
    let later = Some(chrono::Utc::now() + chrono::Duration::seconds(5));
    let executor = f.executor();
    assert_eq!(executor.run_once_at(later).await.unwrap(), 1);
    let v = f.view(dead).await;
    assert_eq!((v.state, v.attempt, v.epoch), (ActionState::Done, 2, 2));
    assert_untouched(&f.view(waiting).await);
    assert_eq!(f.server.received().len(), 1);
    assert_eq!(f.executing().await, 0);
}
