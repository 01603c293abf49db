//! The `envelope` kind through `emit_envelope`, the real executor and a real database, against
//! the scripted server standing in for a receiving wharf: every receiver answer ends as the
//! kind's table says, ambiguous failures are retried (the receiver deduplicates by event id),
//! the body is the stored canonical envelope with a signature that verifies, and the delivery
//! rate limit holds a tenant's rows back before the claim, never leaving one EXECUTING.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use wharf::inbox::LimitPolicy;
use wharf::outbound::EnvelopeDelivery;
use wharf::outbound::{
    self, DeliveryBudget, Destination, EmitRequest, Scope, SealedKeySource, ServerKey,
};
use wharf::outbox::{ActionRequest, Adapter};
use wharf::outbox::{ActionState, ActionView, Executor, ExecutorConfig, Registry, StopReason};
use wharf_adapters::http::{
    EnvelopeAdapter, EnvelopeConfig, EnvelopeDestinationConfig, HttpSenderConfig, NetworkSender,
};
use wharf_testkit::TestDb;
use wharf_testkit::conformance::{ConformanceHarness, Expected, Scenario, run_conformance};

use super::server::{ScriptedServer, Step};

const TOKEN: &str = "tok-receiver-issued";

fn sender() -> NetworkSender {
    NetworkSender::new(&HttpSenderConfig {
        connect_timeout_ms: 500,
        total_timeout_ms: 1_500,
        allow_cidrs: vec!["127.0.0.0/8".into()],
        ..HttpSenderConfig::default()
    })
    .unwrap()
}

fn answer(status: u16, outcome: &str) -> Step {
    Step::Respond {
        status,
        headers: vec![("content-type", "application/json".into())],
        body: json!({"outcome": outcome, "code": outcome, "reason": "x",
                     "correlation_id": "c-1", "acknowledged_sequence": 1})
        .to_string(),
    }
}

struct Fixture {
    db: TestDb,
    registry: Arc<Registry>,
    executor: Executor,
    keys: SealedKeySource,
    public_key: ed25519_dalek::VerifyingKey,
    server: ScriptedServer,
}

async fn fixture(budget: Option<Arc<DeliveryBudget>>) -> Fixture {
    let server = ScriptedServer::start(vec![answer(200, "accept-delayed")], None).await;
    let db = TestDb::new().await;
    let config = EnvelopeConfig {
        destinations: vec![EnvelopeDestinationConfig {
            url: server.url("/v1/tenants/acme"),
            bearer_token: Some(TOKEN.into()),
            bearer_token_env: None,
        }],
    };
    let mut adapter = EnvelopeAdapter::new(sender(), &config).unwrap();
    if let Some(budget) = budget {
        adapter = adapter.with_budget(budget);
    }
    let mut registry = Registry::new();
    registry.register(Arc::new(adapter)).unwrap();
    let registry = Arc::new(registry);
    let mut config = ExecutorConfig::default();
    config.notify = false;
    let executor = Executor::new(db.pool.clone(), registry.clone(), config).unwrap();
    let server_key = ServerKey::generate();
    let info = outbound::generate_signing_key(&db.pool, &server_key, "acme", "web")
        .await
        .unwrap();
    Fixture {
        db,
        registry,
        executor,
        keys: SealedKeySource::new(server_key),
        public_key: ed25519_dalek::VerifyingKey::from_bytes(&info.public_key).unwrap(),
        server,
    }
}

impl Fixture {
    async fn emit_to(&self, idempotency_key: &str, url: String) -> i64 {
        let request = EmitRequest::new(
            Scope::new("acme", "web"),
            "sync_cursor",
            json!({"producer_id": "srv-1", "acknowledged_sequence": 7,
                   "acknowledged_event_id": null, "version": 1}),
            idempotency_key,
            Destination::new(url).max_attempts(3),
        );
        let mut tx = self.db.pool.begin().await.unwrap();
        let emitted = outbound::emit_envelope(&mut tx, &self.registry, &self.keys, &request)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        emitted.action_id
    }

    async fn emit(&self, idempotency_key: &str) -> i64 {
        let url = self.server.url("/v1/tenants/acme/projects/web/envelopes");
        self.emit_to(idempotency_key, url).await
    }

    async fn view(&self, id: i64) -> ActionView {
        wharf::outbox::get(&self.db.pool, id)
            .await
            .unwrap()
            .unwrap()
    }
}

#[tokio::test]
async fn every_receiver_answer_ends_as_the_kind_says() {
    use ActionState as S;
    let f = fixture(None).await;
    // (name, script, state, stop reason, error code, readback, attempts, copies received)
    type Row = (
        &'static str,
        Vec<Step>,
        ActionState,
        StopReason,
        Option<&'static str>,
        Option<&'static str>,
        u32,
        usize,
    );
    let rows: Vec<Row> = vec![
        (
            "accepted",
            vec![answer(200, "accept-delayed")],
            S::Done,
            StopReason::Done,
            None,
            Some("200 accept-delayed"),
            1,
            1,
        ),
        (
            "reset, then the duplicate is acknowledged",
            vec![Step::Reset, answer(200, "ignore-duplicate")],
            S::Done,
            StopReason::Done,
            None,
            Some("200 ignore-duplicate"),
            2,
            2,
        ),
        (
            "timeout, then the duplicate is acknowledged",
            vec![
                Step::Hang(Duration::from_secs(5)),
                answer(200, "ignore-duplicate"),
            ],
            S::Done,
            StopReason::Done,
            None,
            Some("200 ignore-duplicate"),
            2,
            2,
        ),
        (
            "429 then accepted",
            vec![
                Step::with_header(429, "retry-after", "1"),
                answer(200, "accept-delayed"),
            ],
            S::Done,
            StopReason::Done,
            None,
            Some("200 accept-delayed"),
            2,
            2,
        ),
        (
            "503 then accepted",
            vec![Step::status(503), answer(200, "accept-reordered")],
            S::Done,
            StopReason::Done,
            None,
            Some("200 accept-reordered"),
            2,
            2,
        ),
        (
            "refuse-replay",
            vec![answer(409, "refuse-replay")],
            S::Failed,
            StopReason::ProviderRefused,
            Some("refuse-replay"),
            None,
            1,
            1,
        ),
        (
            "refuse-tampered",
            vec![answer(422, "refuse-tampered")],
            S::Failed,
            StopReason::ProviderRefused,
            Some("refuse-tampered"),
            None,
            1,
            1,
        ),
        (
            "unauthenticated",
            vec![Step::status(401)],
            S::Failed,
            StopReason::ProviderRefused,
            Some("http_4xx_401"),
            None,
            1,
            1,
        ),
        (
            "unavailable every time",
            vec![Step::status(503)],
            S::Failed,
            StopReason::AttemptsExhausted,
            Some("http_503"),
            None,
            3,
            3,
        ),
    ];
    for (n, (name, steps, state, stop_reason, code, readback, attempts, copies)) in
        rows.into_iter().enumerate()
    {
        f.server.set_script(steps);
        let before = f.server.received().len();
        let id = f.emit(&format!("env-{n}")).await;
        assert!(f.executor.drain().await.unwrap().finished, "{name}");
        let view = f.view(id).await;
        assert_eq!(view.state, state, "{name}");
        assert_eq!(view.stop_reason, Some(stop_reason), "{name}");
        assert_eq!(view.error_code.as_deref(), code, "{name}");
        if readback.is_some() {
            assert_eq!(view.readback_ref.as_deref(), readback, "{name}");
        }
        assert_eq!(view.attempt, attempts, "{name}");
        let received = f.server.received().split_off(before);
        assert_eq!(received.len(), copies, "{name}");
        let first = &received[0].body;
        for copy in &received {
            assert_eq!(&copy.body, first, "{name}: every copy is the same envelope");
            assert_eq!(
                copy.path, "/v1/tenants/acme/projects/web/envelopes",
                "{name}"
            );
            assert_eq!(
                copy.header("authorization"),
                Some(format!("Bearer {TOKEN}").as_str())
            );
            assert_eq!(copy.header("content-type"), Some("application/json"));
            let envelope = wharf::core::envelope::decode_envelope(&copy.body).unwrap();
            wharf::core::sign::verify(&envelope, &f.public_key).unwrap();
            assert_eq!(envelope.to_canonical_json().unwrap(), copy.body, "{name}");
            assert_eq!(envelope.idempotency_key, format!("env-{n}"));
        }
    }
}

#[tokio::test]
async fn a_destination_without_a_credential_is_never_called() {
    let f = fixture(None).await;
    let other = ScriptedServer::start(vec![answer(200, "accept-delayed")], None).await;
    let id = f
        .emit_to(
            "no-cred",
            other.url("/v1/tenants/acme/projects/web/envelopes"),
        )
        .await;
    f.executor.drain().await.unwrap();
    let view = f.view(id).await;
    assert_eq!(view.state, ActionState::Failed);
    assert_eq!(
        view.error_code.as_deref(),
        Some("destination_credential_missing")
    );
    assert_eq!(other.connections(), 0);
}

#[tokio::test]
async fn the_delivery_limit_holds_rows_back_before_the_claim() {
    // One delivery, then nothing for an hour.
    let budget = Arc::new(DeliveryBudget::new(
        LimitPolicy {
            rate_per_s: 0.0,
            burst: 1,
        },
        16,
    ));
    let f = fixture(Some(budget.clone())).await;
    let first = f.emit("limited-1").await;
    let second = f.emit("limited-2").await;
    // Bounded: each round either runs something or the loop ends.
    for _ in 0..4 {
        if f.executor.run_once().await.unwrap() == 0 {
            break;
        }
    }
    assert_eq!(f.view(first).await.state, ActionState::Done);
    // The claim never took the second: not claimed and given back, not deferred, untouched.
    let held = f.view(second).await;
    assert_eq!(held.state, ActionState::Admitted, "never EXECUTING");
    assert_eq!((held.attempt, held.epoch), (0, 0), "never claimed");
    assert!(held.lease_expires_at.is_none() && held.write_started_at.is_none());
    assert_eq!(f.server.received().len(), 1);
    let executing: i64 =
        sqlx::query_scalar("SELECT count(*) FROM wharf.action WHERE state = 'EXECUTING'")
            .fetch_one(&f.db.pool)
            .await
            .unwrap();
    assert_eq!(executing, 0);
    // The first delivery was charged at its claim and started on that, not charged twice.
    assert_eq!(
        budget.allowance_at(std::time::Instant::now()).tenants,
        vec![("acme".to_owned(), 0)]
    );
}

/// The conformance suite's view of the envelope adapter and the scripted server.
///
/// The envelope kind has no cancellation: an emitted envelope is immutable and nothing makes it
/// unwanted later. The suite's `Cancellation` scenario is used for the closest case instead, a
/// destination without a configured credential, which must end FAILED with no copy sent.
struct Harness {
    server: ScriptedServer,
    signing_key: ed25519_dalek::SigningKey,
    scenario: std::sync::Mutex<Option<Scenario>>,
    next_event: std::sync::atomic::AtomicU32,
}

impl ConformanceHarness for Harness {
    fn adapter(&self) -> Arc<dyn Adapter> {
        let config = EnvelopeConfig {
            destinations: vec![EnvelopeDestinationConfig {
                url: self.server.url("/v1/"),
                bearer_token: Some(TOKEN.into()),
                bearer_token_env: None,
            }],
        };
        Arc::new(EnvelopeAdapter::new(sender(), &config).unwrap())
    }

    async fn script(&self, scenario: Scenario) {
        *self.scenario.lock().unwrap() = Some(scenario);
        let steps = match scenario {
            Scenario::Success | Scenario::Cancellation => vec![answer(200, "accept-delayed")],
            Scenario::ProvableRetry => vec![Step::status(503), answer(200, "accept-delayed")],
            Scenario::PermanentFailure => vec![answer(422, "refuse-tampered")],
            Scenario::AmbiguousFailure => vec![Step::Reset, answer(200, "ignore-duplicate")],
            Scenario::Timeout => vec![
                Step::Hang(Duration::from_secs(5)),
                answer(200, "ignore-duplicate"),
            ],
        };
        self.server.set_script(steps);
    }

    fn request(&self, idempotency_key: &str) -> ActionRequest {
        let n = self
            .next_event
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let unsigned = wharf::core::envelope::Envelope {
            schema_version: 1,
            event_type: "sync_cursor".into(),
            tenant_id: "acme".into(),
            project_id: "web".into(),
            event_id: format!("01J0000000000000000000{n:04}"),
            producer_sequence: u64::from(n) + 1,
            occurred_at: "2024-05-01T12:00:00Z".into(),
            idempotency_key: idempotency_key.into(),
            producer_version: "wharf/test".into(),
            payload: json!({"producer_id": "srv-1", "acknowledged_sequence": 7,
                            "acknowledged_event_id": null, "version": 1}),
            integrity: wharf::core::envelope::Integrity {
                algorithm: "Ed25519".into(),
                key_id: "k1".into(),
                signature: String::new(),
            },
        };
        let envelope = wharf::core::sign::sign(&unsigned, &self.signing_key, "k1").unwrap();
        let path = match *self.scenario.lock().unwrap() {
            // Not under the configured `/v1/` prefix: no credential.
            Some(Scenario::Cancellation) => "/elsewhere/envelopes",
            _ => "/v1/tenants/acme/projects/web/envelopes",
        };
        let delivery = EnvelopeDelivery {
            destination_url: self.server.url(path),
            envelope,
        };
        let mut req = ActionRequest::new(
            wharf::outbound::ENVELOPE_KIND,
            format!("lane-{idempotency_key}"),
            idempotency_key,
            delivery.to_payload(),
        );
        req.tenant_id = Some("acme".into());
        req.project_id = Some("web".into());
        req
    }

    async fn copies_received(&self, idempotency_key: &str) -> usize {
        let kept = self
            .server
            .received()
            .into_iter()
            .filter(|r| r.kept())
            .filter(|r| {
                wharf::core::envelope::decode_envelope(&r.body)
                    .is_ok_and(|e| e.idempotency_key == idempotency_key)
            })
            .count();
        // The receiver deduplicates by event id: however many copies arrive, it keeps one.
        kept.min(1)
    }

    fn expected(&self, scenario: Scenario) -> Expected {
        match scenario {
            Scenario::AmbiguousFailure | Scenario::Timeout => Expected {
                state: ActionState::Done,
                stop_reason: StopReason::Done,
                attempts: 2,
                copies: 1..=1,
            },
            Scenario::Cancellation => Expected {
                state: ActionState::Failed,
                stop_reason: StopReason::ProviderRefused,
                attempts: 1,
                copies: 0..=0,
            },
            _ => scenario.expected(),
        }
    }
}

#[tokio::test]
async fn the_envelope_adapter_conforms() {
    let harness = Harness {
        server: ScriptedServer::start(vec![answer(200, "accept-delayed")], None).await,
        signing_key: ed25519_dalek::SigningKey::from_bytes(&[5; 32]),
        scenario: std::sync::Mutex::new(None),
        next_event: std::sync::atomic::AtomicU32::new(1),
    };
    run_conformance(&harness).await;
}

/// Two databases on one PostgreSQL: A emits 1,000 envelopes across 8 receiver streams (8 lanes)
/// and delivers them through the envelope adapter to B, a real `wharf::inbox` behind HTTP on
/// loopback that loses some acknowledgements after committing (a 503, or no answer in time).
/// B must accept each envelope exactly once, answer A's retries `ignore-duplicate`, and end with
/// every stream's cursor contiguous; A must end with every delivery DONE.
#[tokio::test]
async fn a_thousand_envelopes_reach_a_real_inbox_exactly_once() {
    use super::receiver::{Faults, Receiver};
    const PROJECTS: usize = 8;
    const PER_PROJECT: usize = 125;

    let a = TestDb::new().await;
    let b = TestDb::new().await;
    wharf::inbox::create_tenant(&b.pool, "acme").await.unwrap();
    let credential = wharf::inbox::issue_credential(&b.pool, "acme", "server-a", None)
        .await
        .unwrap();
    // The limiters are tested with the inbox; here they would only add retries.
    let inbox_config = wharf::inbox::InboxConfig {
        peer_limit: LimitPolicy::UNLIMITED,
        identity_limit: LimitPolicy::UNLIMITED,
        ..wharf::inbox::InboxConfig::default()
    };
    let receiver = Receiver::start(
        wharf::inbox::Inbox::new(b.pool.clone(), inbox_config),
        Faults {
            lose_ack_every: 10,
            hang_every: 151,
            hang: Duration::from_secs(2),
        },
    )
    .await;

    let server_key = ServerKey::generate();
    let projects: Vec<String> = (0..PROJECTS).map(|p| format!("p{p}")).collect();
    for project in &projects {
        let key = outbound::generate_signing_key(&a.pool, &server_key, "acme", project)
            .await
            .unwrap();
        wharf::inbox::add_key(
            &b.pool,
            "acme",
            project,
            &key.key_id,
            &key.public_key,
            Duration::from_secs(wharf::inbox::KEY_REPLAY_WINDOW_DEFAULT_S),
        )
        .await
        .unwrap();
    }
    let config = EnvelopeConfig {
        destinations: vec![EnvelopeDestinationConfig {
            url: receiver.origin(),
            bearer_token: Some(credential.token.clone()),
            bearer_token_env: None,
        }],
    };
    let mut registry = Registry::new();
    registry
        .register(Arc::new(EnvelopeAdapter::new(sender(), &config).unwrap()))
        .unwrap();
    let registry = Arc::new(registry);
    let mut executor_config = ExecutorConfig::default();
    executor_config.notify = false;
    let executor = Executor::new(a.pool.clone(), registry.clone(), executor_config).unwrap();
    let keys = SealedKeySource::new(server_key);

    for i in 0..PROJECTS * PER_PROJECT {
        let project = &projects[i % PROJECTS];
        let request = EmitRequest::new(
            Scope::new("acme", project.as_str()),
            "sync_cursor",
            json!({"producer_id": "srv-a", "acknowledged_sequence": i,
                   "acknowledged_event_id": null, "version": 1}),
            format!("e2e-{i}"),
            Destination::new(receiver.ingest_url("acme", project)),
        );
        let mut tx = a.pool.begin().await.unwrap();
        outbound::emit_envelope(&mut tx, &registry, &keys, &request)
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }

    let started = std::time::Instant::now();
    let report = executor.drain().await.unwrap();
    let elapsed = started.elapsed();
    assert!(report.finished, "{report:?}");

    let states: Vec<(String, i64)> =
        sqlx::query_as("SELECT state, count(*) FROM wharf.action GROUP BY state ORDER BY state")
            .fetch_all(&a.pool)
            .await
            .unwrap();
    assert_eq!(
        states,
        [("DONE".to_owned(), 1_000)],
        "every delivery ended DONE"
    );
    let accepted: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.inbox_identities")
        .fetch_one(&b.pool)
        .await
        .unwrap();
    assert_eq!(accepted, 1_000, "B holds each envelope once");
    let cursors: Vec<(String, i64)> = sqlx::query_as(
        "SELECT project_id::text, acknowledged_sequence::bigint FROM wharf.inbox_streams \
         ORDER BY project_id",
    )
    .fetch_all(&b.pool)
    .await
    .unwrap();
    let want: Vec<(String, i64)> = projects
        .iter()
        .map(|p| (p.clone(), PER_PROJECT as i64))
        .collect();
    assert_eq!(
        cursors, want,
        "every stream's cursor is contiguous to its last sequence"
    );
    let outcomes: Vec<(String, i64)> = sqlx::query_as(
        "SELECT outcome, count(*) FROM wharf.inbox_audit GROUP BY outcome ORDER BY outcome",
    )
    .fetch_all(&b.pool)
    .await
    .unwrap();
    let (requests, lost) = receiver.counts();
    let duplicates = outcomes
        .iter()
        .find(|(o, _)| o == "ignore-duplicate")
        .map_or(0, |(_, n)| *n);
    assert!(lost >= 100, "faults were injected: {lost}");
    assert_eq!(
        duplicates as u64, lost,
        "each lost acknowledgement was retried once and answered ignore-duplicate: {outcomes:?}"
    );
    assert_eq!(requests, 1_000 + lost);
    let retried: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.action WHERE attempt > 1")
        .fetch_one(&a.pool)
        .await
        .unwrap();
    assert_eq!(retried as u64, lost);
    eprintln!(
        "delivered 1000 envelopes ({lost} acknowledgements lost and retried) in {:.2} s: {:.0} envelopes/s",
        elapsed.as_secs_f64(),
        1_000.0 / elapsed.as_secs_f64()
    );
}
