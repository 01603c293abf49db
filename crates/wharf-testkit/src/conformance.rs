//! The adapter conformance suite (STYLE §9): one set of scenarios every outbox adapter must pass,
//! run against a real database and the real executor.
//!
//! An adapter's test implements [`ConformanceHarness`] around its adapter and a fake provider it
//! controls (an SMTP sink, an HTTP test server), then calls [`run_conformance`]. Each scenario
//! gets its own database; the suite enqueues one action, scripts the provider, drains the
//! executor and checks the action's end state, stop reason, attempts, error code, the payload
//! being gone, and how many copies the provider received under the action's idempotency key
//! (which also proves the key reached the provider).
//!
//! ```text
//! struct MyHarness { /* adapter + fake provider */ }
//! impl ConformanceHarness for MyHarness { /* ... */ }
//! #[tokio::test]
//! async fn my_adapter_conforms() { run_conformance(&MyHarness::new().await).await }
//! ```
//!
//! Must not know: any particular adapter or provider. It knows the outbox's public API only.

use std::future::Future;
use std::ops::RangeInclusive;
use std::sync::Arc;

use wharf::outbox::{
    ActionRequest, ActionState, Adapter, Executor, ExecutorConfig, Registry, StopReason,
};

use crate::TestDb;

/// What the provider does for one action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// Accepts it at once.
    Success,
    /// Refuses the first attempt in a way that proves nothing was stored (connection refused,
    /// 4xx before DATA, 503 before any body), then accepts the second.
    ProvableRetry,
    /// Refuses it for good (SMTP 5xx, HTTP 4xx other than 408/429).
    PermanentFailure,
    /// Fails after the request reached it (connection reset after the body was sent).
    AmbiguousFailure,
    /// Takes the request and never answers within the adapter's timeout.
    Timeout,
    /// The adapter decides nothing should be written (recipient unsubscribed, target gone).
    Cancellation,
}

impl Scenario {
    /// Every scenario, in the order the suite runs them.
    pub const ALL: [Scenario; 6] = [
        Scenario::Success,
        Scenario::ProvableRetry,
        Scenario::PermanentFailure,
        Scenario::AmbiguousFailure,
        Scenario::Timeout,
        Scenario::Cancellation,
    ];

    /// What SPEC §2.4 requires of an adapter that cannot tell whether an ambiguous failure
    /// wrote (the default). A provider that deduplicates by idempotency key may override
    /// [`ConformanceHarness::expected`] for `AmbiguousFailure` and `Timeout` (Retry ⇒ DONE).
    pub fn expected(self) -> Expected {
        use ActionState as S;
        use StopReason as R;
        let e = |state, stop_reason, attempts, copies| Expected {
            state,
            stop_reason,
            attempts,
            copies,
        };
        match self {
            Scenario::Success => e(S::Done, R::Done, 1, 1..=1),
            Scenario::ProvableRetry => e(S::Done, R::Done, 2, 1..=1),
            Scenario::PermanentFailure => e(S::Failed, R::ProviderRefused, 1, 0..=0),
            Scenario::AmbiguousFailure => e(S::Uncertain, R::UncertainProvider, 1, 0..=1),
            Scenario::Timeout => e(S::Uncertain, R::UncertainProvider, 1, 0..=1),
            Scenario::Cancellation => e(S::Cancelled, R::CancelledByAdapter, 1, 0..=0),
        }
    }
}

/// The end an action must reach in a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// Its final state.
    pub state: ActionState,
    /// Its stop reason.
    pub stop_reason: StopReason,
    /// Attempts counted.
    pub attempts: u32,
    /// Copies the provider holds under the action's idempotency key.
    pub copies: RangeInclusive<usize>,
}

/// What an adapter's test provides to the suite. Methods return futures so implementations may
/// use `async fn`.
pub trait ConformanceHarness {
    /// The adapter under test, wired to the harness's fake provider, with short provider
    /// timeouts (the `Timeout` scenario waits for them). Called once per scenario.
    fn adapter(&self) -> Arc<dyn Adapter>;

    /// Makes the fake provider behave as `scenario` says for the next action.
    fn script(&self, scenario: Scenario) -> impl Future<Output = ()>;

    /// A valid request for the adapter's kind, with this idempotency key (tenant and payload as
    /// the adapter needs; the suite sets `max_attempts` itself).
    fn request(&self, idempotency_key: &str) -> ActionRequest;

    /// How many copies of the effect with this idempotency key the provider received and kept.
    fn copies_received(&self, idempotency_key: &str) -> impl Future<Output = usize>;

    /// The expected end of a scenario; [`Scenario::expected`] unless the provider deduplicates.
    fn expected(&self, scenario: Scenario) -> Expected {
        scenario.expected()
    }
}

/// Attempts allowed in the suite: room for the provable retry, and a bound if an adapter
/// retries what it should not.
const SUITE_ATTEMPTS_MAX: u32 = 3;

/// Runs every [`Scenario`] and panics with the scenario's name on the first deviation.
pub async fn run_conformance(h: &impl ConformanceHarness) {
    for (n, scenario) in Scenario::ALL.into_iter().enumerate() {
        run_scenario(h, scenario, n).await;
    }
}

/// Runs one scenario (useful to debug a single failing one).
pub async fn run_scenario(h: &impl ConformanceHarness, scenario: Scenario, n: usize) {
    let db = TestDb::new().await;
    let adapter = h.adapter();
    let spec = adapter.spec();
    let mut registry = Registry::new();
    registry
        .register(adapter)
        .unwrap_or_else(|e| panic!("{scenario:?}: the adapter's kind does not register: {e}"));
    let registry = Arc::new(registry);
    let mut config = ExecutorConfig::default();
    // Room for the kind's own call timeout inside the margin, and for the margin in the lease.
    config.fence_margin_ms = config.fence_margin_ms.max(spec.call_timeout_ms + 1_000);
    config.lease_ms = config.fence_margin_ms * 5;
    config.notify = false;
    let executor = Executor::new(db.pool.clone(), registry.clone(), config)
        .unwrap_or_else(|e| panic!("{scenario:?}: executor: {e}"));

    let key = format!("conformance-{n}-{scenario:?}").to_lowercase();
    h.script(scenario).await;
    let mut req = h.request(&key);
    req.idempotency_key = key.clone();
    req.max_attempts = Some(SUITE_ATTEMPTS_MAX);
    let id = {
        let mut conn = db.pool.acquire().await.expect("a connection");
        wharf::outbox::enqueue(&mut conn, &registry, req)
            .await
            .unwrap_or_else(|e| panic!("{scenario:?}: enqueue refused the harness's request: {e}"))
            .id
    };
    let report = executor
        .drain()
        .await
        .unwrap_or_else(|e| panic!("{scenario:?}: drain: {e}"));
    assert!(
        report.finished,
        "{scenario:?}: drain did not finish: {report:?}"
    );

    let view = wharf::outbox::get(&db.pool, id)
        .await
        .unwrap_or_else(|e| panic!("{scenario:?}: get: {e}"))
        .unwrap_or_else(|| panic!("{scenario:?}: the action vanished"));
    let want = h.expected(scenario);
    assert_eq!(view.state, want.state, "{scenario:?}: end state");
    assert_eq!(
        view.stop_reason,
        Some(want.stop_reason),
        "{scenario:?}: stop reason"
    );
    assert_eq!(
        view.attempt, want.attempts,
        "{scenario:?}: attempts counted"
    );
    assert!(
        view.payload.is_none(),
        "{scenario:?}: an ended action keeps no payload"
    );
    assert!(view.ended_at.is_some(), "{scenario:?}: ended_at");
    if want.state != ActionState::Done {
        let code = view.error_code.as_deref().unwrap_or("");
        assert!(
            !code.is_empty(),
            "{scenario:?}: a non-DONE end carries a stable error code"
        );
    }
    let copies = h.copies_received(&key).await;
    assert!(
        want.copies.contains(&copies),
        "{scenario:?}: the provider holds {copies} copies under the idempotency key, expected {:?}",
        want.copies
    );
}
