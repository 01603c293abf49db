//! The shared adapter conformance suite, run against a fake adapter and provider. Email and
//! webhook adapters run the same suite in their own crates.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use wharf::outbox::{ActionRequest, Adapter, Attempt, Backoff, ErrorCode, KindSpec, Outcome};
use wharf_testkit::conformance::{ConformanceHarness, Scenario, run_conformance};

/// A provider that stores effects by idempotency key and misbehaves on request.
#[derive(Default)]
struct Provider {
    scenario: Mutex<Option<Scenario>>,
    received: Mutex<HashMap<String, usize>>,
    calls: Mutex<HashMap<String, usize>>,
}

struct ProviderAdapter {
    provider: Arc<Provider>,
}

/// The adapter's own provider timeout, well inside its call timeout.
const PROVIDER_TIMEOUT: Duration = Duration::from_millis(100);

#[async_trait]
impl Adapter for ProviderAdapter {
    fn spec(&self) -> KindSpec {
        KindSpec {
            name: "conformance.fake",
            at_most_once: true,
            instance_level: false,
            max_attempts_default: 3,
            backoff: Backoff::default(),
            call_timeout_ms: 2_000,
        }
    }

    async fn execute(&self, attempt: &mut Attempt) -> Outcome {
        let key = attempt.idempotency_key().to_owned();
        let scenario = self.provider.scenario.lock().unwrap().expect("scripted");
        let call = {
            let mut calls = self.provider.calls.lock().unwrap();
            let n = calls.entry(key.clone()).or_default();
            *n += 1;
            *n
        };
        if scenario == Scenario::Cancellation {
            return Outcome::Cancelled {
                code: ErrorCode::from_static("recipient_gone"),
            };
        }
        if attempt.fence().begin_write().await.is_err() {
            return Outcome::Abandoned;
        }
        let store = || {
            *self
                .provider
                .received
                .lock()
                .unwrap()
                .entry(key.clone())
                .or_default() += 1
        };
        match scenario {
            Scenario::Success => {
                store();
                Outcome::Done {
                    readback_ref: Some(format!("msg-{key}")),
                }
            }
            Scenario::ProvableRetry if call == 1 => Outcome::Retry {
                after: None,
                code: ErrorCode::from_static("connection_refused"),
            },
            Scenario::ProvableRetry => {
                store();
                Outcome::Done { readback_ref: None }
            }
            Scenario::PermanentFailure => Outcome::Failed {
                code: ErrorCode::from_static("rejected_5xx"),
            },
            Scenario::AmbiguousFailure => {
                store();
                Outcome::Uncertain {
                    code: ErrorCode::from_static("reset_after_send"),
                }
            }
            Scenario::Timeout => {
                store();
                match tokio::time::timeout(PROVIDER_TIMEOUT, std::future::pending::<()>()).await {
                    Ok(()) => Outcome::Done { readback_ref: None },
                    Err(_) => Outcome::Uncertain {
                        code: ErrorCode::from_static("provider_timeout"),
                    },
                }
            }
            Scenario::Cancellation => unreachable!("handled before the fence"),
        }
    }
}

struct Harness {
    provider: Arc<Provider>,
}

impl ConformanceHarness for Harness {
    fn adapter(&self) -> Arc<dyn Adapter> {
        Arc::new(ProviderAdapter {
            provider: self.provider.clone(),
        })
    }

    async fn script(&self, scenario: Scenario) {
        *self.provider.scenario.lock().unwrap() = Some(scenario);
    }

    fn request(&self, idempotency_key: &str) -> ActionRequest {
        ActionRequest::new(
            "conformance.fake",
            "lane",
            idempotency_key,
            json!({"to": "a@example.test"}),
        )
        .tenant("t")
    }

    async fn copies_received(&self, idempotency_key: &str) -> usize {
        self.provider
            .received
            .lock()
            .unwrap()
            .get(idempotency_key)
            .copied()
            .unwrap_or(0)
    }
}

#[tokio::test]
async fn a_fake_adapter_passes_the_conformance_suite() {
    run_conformance(&Harness {
        provider: Arc::new(Provider::default()),
    })
    .await;
}

/// The suite catches an adapter that breaks a rule: here, one that answers Retry after the
/// provider may have stored the effect (so a second copy arrives).
#[tokio::test]
async fn the_suite_catches_a_retry_after_an_ambiguous_failure() {
    struct Sloppy(Harness);
    struct SloppyAdapter(Arc<Provider>);
    #[async_trait]
    impl Adapter for SloppyAdapter {
        fn spec(&self) -> KindSpec {
            ProviderAdapter {
                provider: self.0.clone(),
            }
            .spec()
        }
        async fn execute(&self, attempt: &mut Attempt) -> Outcome {
            let _ = attempt.fence().begin_write().await;
            *self
                .0
                .received
                .lock()
                .unwrap()
                .entry(attempt.idempotency_key().to_owned())
                .or_default() += 1;
            if attempt.attempt() == 1 {
                Outcome::Retry {
                    after: None,
                    code: ErrorCode::from_static("reset_after_send"),
                }
            } else {
                Outcome::Done { readback_ref: None }
            }
        }
    }
    impl ConformanceHarness for Sloppy {
        fn adapter(&self) -> Arc<dyn Adapter> {
            Arc::new(SloppyAdapter(self.0.provider.clone()))
        }
        async fn script(&self, scenario: Scenario) {
            self.0.script(scenario).await
        }
        fn request(&self, key: &str) -> ActionRequest {
            self.0.request(key)
        }
        async fn copies_received(&self, key: &str) -> usize {
            self.0.copies_received(key).await
        }
    }
    let h = Sloppy(Harness {
        provider: Arc::new(Provider::default()),
    });
    let caught = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(
        wharf_testkit::conformance::run_scenario(&h, Scenario::AmbiguousFailure, 0),
    ))
    .await;
    assert!(
        caught.is_err(),
        "a duplicate after an ambiguous failure must fail the suite"
    );
}
