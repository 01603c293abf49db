//! The `webhook` kind through the real executor on a real database, against the scripted server:
//! each case ends in the state SPEC §2.5 says, and the server's log shows every copy received —
//! never a second one after an ambiguous failure unless the receiver deduplicates. Then the
//! shared adapter conformance suite, for a plain and for a deduplicating receiver.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ed25519_dalek::SigningKey;
use reqwest::Url;
use serde_json::json;
use wharf::outbox::{
    ActionRequest, ActionState, ActionView, Adapter, Executor, ExecutorConfig, Registry, StopReason,
};
use wharf_adapters::http::{
    EndpointStatus, HttpSenderConfig, InMemoryWebhookSigner, NetworkSender, SignScope,
    WEBHOOK_KIND, WebhookAdapter, WebhookEndpoints, WebhookPayload,
};
use wharf_testkit::TestDb;
use wharf_testkit::conformance::{ConformanceHarness, Expected, Scenario, run_conformance};

use super::server::{ScriptedServer, Step};

/// Attempts per action in these tests: room for one provable retry and a visible bound.
const ATTEMPTS: u32 = 3;

fn key() -> SigningKey {
    SigningKey::from_bytes(&[42; 32])
}

fn config() -> HttpSenderConfig {
    HttpSenderConfig {
        connect_timeout_ms: 500,
        total_timeout_ms: 1_500,
        allow_cidrs: vec!["127.0.0.0/8".into()],
        ..HttpSenderConfig::default()
    }
}

fn adapter(config: &HttpSenderConfig) -> WebhookAdapter {
    WebhookAdapter::new(
        NetworkSender::new(config).unwrap(),
        Arc::new(InMemoryWebhookSigner::new(key())),
    )
}

struct Fixture {
    db: TestDb,
    registry: Arc<Registry>,
    executor: Executor,
}

async fn fixture(adapter: impl Adapter) -> Fixture {
    let db = TestDb::new().await;
    let mut registry = Registry::new();
    registry.register(Arc::new(adapter)).unwrap();
    let registry = Arc::new(registry);
    let mut config = ExecutorConfig::default();
    config.notify = false;
    let executor = Executor::new(db.pool.clone(), registry.clone(), config).unwrap();
    Fixture {
        db,
        registry,
        executor,
    }
}

impl Fixture {
    async fn enqueue(&self, idempotency_key: &str, payload: WebhookPayload) -> i64 {
        let mut req =
            ActionRequest::new(WEBHOOK_KIND, "lane-1", idempotency_key, payload.to_value());
        req.tenant_id = Some("t1".into());
        req.project_id = Some("p1".into());
        req.max_attempts = Some(ATTEMPTS);
        let mut conn = self.db.pool.acquire().await.unwrap();
        wharf::outbox::enqueue(&mut conn, &self.registry, req)
            .await
            .unwrap()
            .id
    }

    async fn view(&self, id: i64) -> ActionView {
        wharf::outbox::get(&self.db.pool, id)
            .await
            .unwrap()
            .unwrap()
    }

    async fn deliver(&self, idempotency_key: &str, payload: WebhookPayload) -> ActionView {
        let id = self.enqueue(idempotency_key, payload).await;
        let report = self.executor.drain().await.unwrap();
        assert!(report.finished, "{report:?}");
        self.view(id).await
    }
}

/// How one scripted case must end.
struct Case {
    name: &'static str,
    steps: Vec<Step>,
    dedupe: bool,
    state: ActionState,
    stop_reason: StopReason,
    code: Option<&'static str>,
    readback: Option<&'static str>,
    attempts: u32,
    /// Copies the server received in all.
    received: usize,
}

#[tokio::test]
async fn every_scripted_case_ends_as_the_spec_says() {
    use ActionState as S;
    use StopReason as R;
    let case = |name, steps, state, stop_reason, code, attempts, received| Case {
        name,
        steps,
        dedupe: false,
        state,
        stop_reason,
        code,
        readback: None,
        attempts,
        received,
    };
    let refused = |status: u16, code: &'static str| {
        case(
            code,
            vec![Step::status(status)],
            S::Failed,
            R::ProviderRefused,
            Some(code),
            1,
            1,
        )
    };
    let slow = Step::SlowBody {
        status: 200,
        chunks: 40,
        interval: Duration::from_millis(100),
    };
    let cases = vec![
        Case {
            readback: Some("200"),
            ..case("200", vec![Step::status(200)], S::Done, R::Done, None, 1, 1)
        },
        Case {
            readback: Some("201 x-request-id=r-1"),
            ..case(
                "201",
                vec![Step::with_header(201, "x-request-id", "r-1")],
                S::Done,
                R::Done,
                None,
                1,
                1,
            )
        },
        refused(400, "http_4xx_400"),
        refused(404, "http_4xx_404"),
        refused(409, "http_4xx_409"),
        refused(410, "http_4xx_410"),
        case(
            "429 then 200",
            vec![
                Step::with_header(429, "retry-after", "7"),
                Step::status(200),
            ],
            S::Done,
            R::Done,
            None,
            2,
            2,
        ),
        case(
            "429 every time",
            vec![Step::with_header(429, "retry-after", "1")],
            S::Failed,
            R::AttemptsExhausted,
            Some("http_429"),
            ATTEMPTS,
            ATTEMPTS as usize,
        ),
        case(
            "500 then 200",
            vec![Step::status(500), Step::status(200)],
            S::Done,
            R::Done,
            None,
            2,
            2,
        ),
        case(
            "503 every time",
            vec![Step::status(503)],
            S::Failed,
            R::AttemptsExhausted,
            Some("http_503"),
            ATTEMPTS,
            ATTEMPTS as usize,
        ),
        case(
            "reset before response",
            vec![Step::Reset, Step::status(200)],
            S::Uncertain,
            R::UncertainProvider,
            Some("connection_lost_after_send"),
            1,
            1,
        ),
        case(
            "timeout after send",
            vec![Step::Hang(Duration::from_secs(5)), Step::status(200)],
            S::Uncertain,
            R::UncertainProvider,
            Some("timeout_after_send"),
            1,
            1,
        ),
        Case {
            dedupe: true,
            ..case(
                "reset before response, deduplicating receiver",
                vec![Step::Reset, Step::status(200)],
                S::Done,
                R::Done,
                None,
                2,
                2,
            )
        },
        Case {
            dedupe: true,
            ..case(
                "timeout after send, deduplicating receiver",
                vec![Step::Hang(Duration::from_secs(5)), Step::status(200)],
                S::Done,
                R::Done,
                None,
                2,
                2,
            )
        },
        case("slow body", vec![slow], S::Done, R::Done, None, 1, 1),
        case(
            "redirect",
            vec![Step::with_header(302, "location", "http://127.0.0.1:9/")],
            S::Failed,
            R::ProviderRefused,
            Some("redirect"),
            1,
            1,
        ),
    ];
    let f = fixture(adapter(&config())).await;
    let server = ScriptedServer::start(vec![Step::status(200)], Some(key().verifying_key())).await;
    for (n, c) in cases.into_iter().enumerate() {
        server.set_script(c.steps.clone());
        let before = server.received().len();
        let idempotency_key = format!("case-{n}");
        let mut payload = WebhookPayload::new(server.url("/hooks"), json!({"case": c.name}));
        payload.dedupe = c.dedupe;
        let view = f.deliver(&idempotency_key, payload).await;
        let name = c.name;
        assert_eq!(view.state, c.state, "{name}: state");
        assert_eq!(view.stop_reason, Some(c.stop_reason), "{name}: stop reason");
        assert_eq!(view.error_code.as_deref(), c.code, "{name}: error code");
        assert_eq!(view.attempt, c.attempts, "{name}: attempts");
        if let Some(readback) = c.readback {
            assert_eq!(view.readback_ref.as_deref(), Some(readback), "{name}");
        }
        assert!(
            view.payload.is_none(),
            "{name}: an ended action keeps no payload"
        );
        let copies: Vec<_> = server.received().split_off(before);
        assert_eq!(copies.len(), c.received, "{name}: copies received");
        for copy in &copies {
            assert_eq!(copy.path, "/hooks", "{name}");
            assert_eq!(copy.header("webhook-id"), Some(idempotency_key.as_str()));
            assert_eq!(copy.header("content-type"), Some("application/json"));
            assert_eq!(copy.signature_ok, Some(true), "{name}: signature verifies");
            let body: serde_json::Value = serde_json::from_slice(&copy.body).unwrap();
            assert_eq!(body, json!({"case": name}));
        }
        if c.state == ActionState::Uncertain {
            assert_eq!(
                copies.len(),
                1,
                "{name}: never retried after an ambiguous failure"
            );
        }
    }
}

#[tokio::test]
async fn retry_after_sets_when_the_next_attempt_is_due() {
    let f = fixture(adapter(&config())).await;
    let server = ScriptedServer::start(
        vec![
            Step::with_header(429, "retry-after", "120"),
            Step::status(200),
        ],
        None,
    )
    .await;
    let id = f
        .enqueue("ra-1", WebhookPayload::new(server.url("/"), json!({})))
        .await;
    assert_eq!(f.executor.run_once().await.unwrap(), 1);
    let view = f.view(id).await;
    assert_eq!(view.state, ActionState::Admitted);
    assert_eq!(view.error_code.as_deref(), Some("http_429"));
    let wait = (view.run_at - chrono::Utc::now()).num_seconds();
    assert!(
        (100..=121).contains(&wait),
        "due in {wait} s, asked for 120"
    );
    assert_eq!(f.executor.run_once().await.unwrap(), 0, "not due yet");
}

#[tokio::test]
async fn a_dedupe_endpoint_in_the_configuration_makes_ambiguity_retryable() {
    let server = ScriptedServer::start(vec![Step::Reset, Step::status(200)], None).await;
    let config = HttpSenderConfig {
        dedupe_endpoints: vec![server.url("/in")],
        ..config()
    };
    let f = fixture(adapter(&config)).await;
    let view = f
        .deliver(
            "cfg-dedupe",
            WebhookPayload::new(server.url("/in/tenant-1"), json!({})),
        )
        .await;
    assert_eq!(view.state, ActionState::Done);
    assert_eq!(view.attempt, 2);
    let ids: Vec<_> = server
        .received()
        .iter()
        .map(|r| r.header("webhook-id").unwrap().to_owned())
        .collect();
    assert_eq!(
        ids,
        ["cfg-dedupe", "cfg-dedupe"],
        "same webhook-id on the retry"
    );
}

#[tokio::test]
async fn a_forbidden_destination_fails_before_the_fence_without_a_connection() {
    let server = ScriptedServer::start(vec![Step::status(200)], None).await;
    let strict = HttpSenderConfig {
        allow_cidrs: Vec::new(),
        ..config()
    };
    let f = fixture(adapter(&strict)).await;
    // A name passes enqueue (it is judged when resolved); `localhost` is loopback.
    let url = format!("http://localhost:{}/", server.addr().port());
    let view = f
        .deliver("forbidden", WebhookPayload::new(url, json!({})))
        .await;
    assert_eq!(view.state, ActionState::Failed);
    assert_eq!(view.stop_reason, Some(StopReason::ProviderRefused));
    assert_eq!(view.error_code.as_deref(), Some("destination_forbidden"));
    assert!(view.write_started_at.is_none(), "refused before the fence");
    assert_eq!(server.connections(), 0);

    // An IP literal is refused already at enqueue.
    let mut req = ActionRequest::new(
        WEBHOOK_KIND,
        "lane-1",
        "forbidden-literal",
        WebhookPayload::new("http://10.1.2.3/", json!({})).to_value(),
    );
    req.tenant_id = Some("t1".into());
    let mut conn = f.db.pool.acquire().await.unwrap();
    let refused = wharf::outbox::enqueue(&mut conn, &f.registry, req).await;
    assert!(
        matches!(refused, Err(wharf::outbox::Error::PayloadRefused { .. })),
        "{refused:?}"
    );
}

#[tokio::test]
async fn an_earlier_unfinished_write_is_not_repeated_to_a_plain_receiver() {
    let server = ScriptedServer::start(vec![Step::status(200)], None).await;
    let f = fixture(adapter(&config())).await;
    for (key, dedupe, state, copies) in [
        ("crashed-plain", false, ActionState::Uncertain, 0),
        ("crashed-dedupe", true, ActionState::Done, 1),
    ] {
        let before = server.received().len();
        let mut payload = WebhookPayload::new(server.url("/"), json!({}));
        payload.dedupe = dedupe;
        let id = f.enqueue(key, payload).await;
        // As if a worker passed the fence and died before recording a result.
        sqlx::query("UPDATE wharf.action_live SET write_started_at = now() WHERE id = $1")
            .bind(id)
            .execute(&f.db.pool)
            .await
            .unwrap();
        f.executor.drain().await.unwrap();
        let view = f.view(id).await;
        assert_eq!(view.state, state, "{key}");
        if state == ActionState::Uncertain {
            assert_eq!(
                view.error_code.as_deref(),
                Some("earlier_attempt_ambiguous")
            );
        }
        assert_eq!(server.received().len() - before, copies, "{key}");
    }
}

/// Switches every endpoint off while `disabled` is set.
struct Toggle(Arc<AtomicBool>);

#[async_trait]
impl WebhookEndpoints for Toggle {
    async fn status(&self, _: SignScope<'_>, _: &Url) -> Result<EndpointStatus, String> {
        Ok(if self.0.load(Ordering::SeqCst) {
            EndpointStatus::Disabled
        } else {
            EndpointStatus::Enabled
        })
    }
}

/// The conformance suite's view of the webhook adapter and the scripted server.
struct Harness {
    server: ScriptedServer,
    disabled: Arc<AtomicBool>,
    /// The receiver deduplicates by `webhook-id` (payload `dedupe: true`).
    dedupe: bool,
}

impl Harness {
    async fn new(dedupe: bool) -> Harness {
        Harness {
            server: ScriptedServer::start(vec![Step::status(200)], Some(key().verifying_key()))
                .await,
            disabled: Arc::new(AtomicBool::new(false)),
            dedupe,
        }
    }
}

impl ConformanceHarness for Harness {
    fn adapter(&self) -> Arc<dyn Adapter> {
        Arc::new(adapter(&config()).with_endpoints(Arc::new(Toggle(self.disabled.clone()))))
    }

    async fn script(&self, scenario: Scenario) {
        self.disabled
            .store(scenario == Scenario::Cancellation, Ordering::SeqCst);
        let steps = match scenario {
            Scenario::Success | Scenario::Cancellation => vec![Step::status(200)],
            Scenario::ProvableRetry => vec![Step::status(503), Step::status(200)],
            Scenario::PermanentFailure => vec![Step::status(400)],
            Scenario::AmbiguousFailure => vec![Step::Reset, Step::status(200)],
            Scenario::Timeout => vec![Step::Hang(Duration::from_secs(5)), Step::status(200)],
        };
        self.server.set_script(steps);
    }

    fn request(&self, idempotency_key: &str) -> ActionRequest {
        let mut payload = WebhookPayload::new(self.server.url("/hooks"), json!({"n": 1}));
        payload.dedupe = self.dedupe;
        let mut req = ActionRequest::new(
            WEBHOOK_KIND,
            format!("lane-{idempotency_key}"),
            idempotency_key,
            payload.to_value(),
        );
        req.tenant_id = Some("t1".into());
        req
    }

    async fn copies_received(&self, idempotency_key: &str) -> usize {
        let kept = self
            .server
            .received()
            .into_iter()
            .filter(|r| r.header("webhook-id") == Some(idempotency_key) && r.kept())
            .inspect(|r| assert_eq!(r.signature_ok, Some(true)))
            .count();
        // A deduplicating receiver keeps one copy per webhook-id, however many arrive.
        if self.dedupe { kept.min(1) } else { kept }
    }

    fn expected(&self, scenario: Scenario) -> Expected {
        match scenario {
            Scenario::AmbiguousFailure | Scenario::Timeout if self.dedupe => Expected {
                state: ActionState::Done,
                stop_reason: StopReason::Done,
                attempts: 2,
                copies: 1..=1,
            },
            _ => scenario.expected(),
        }
    }
}

#[tokio::test]
async fn the_webhook_adapter_conforms() {
    run_conformance(&Harness::new(false).await).await;
}

#[tokio::test]
async fn the_webhook_adapter_conforms_with_a_deduplicating_receiver() {
    run_conformance(&Harness::new(true).await).await;
}
