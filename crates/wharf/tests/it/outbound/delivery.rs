//! Delivery through the executor: the per-tenant delivery limit's fallback at execution defers
//! without stranding, and a refused delivery is a dead letter with its stable code. The limit
//! checked before the claim is in `claim_limit.rs`.

use std::sync::Arc;

use wharf::inbox::LimitPolicy;
use wharf::outbound::{self, DeliveryBudget, Destination};
use wharf::outbox::{self, ActionState, StopReason};

use super::support::*;

/// What slips past the claim (here: an adapter that does not answer the claim hooks) is
/// deferred at execution, never left EXECUTING.
#[tokio::test]
async fn a_limited_tenant_is_deferred_and_no_row_is_left_executing() {
    // Two deliveries per tenant and no refill during the test.
    let budget = Arc::new(DeliveryBudget::new(
        LimitPolicy {
            rate_per_s: 0.0,
            burst: 2,
        },
        1_000,
    ));
    let fx = Fx::with_budget(Some(budget.clone())).await;
    fx.stub
        .claim_hooks
        .store(false, std::sync::atomic::Ordering::SeqCst);
    outbound::generate_signing_key(fx.pool(), &fx.server_key, "beta", PROJECT)
        .await
        .unwrap();
    // Five receivers of acme (five lanes, so all are heads at once) and two of beta.
    let mut ids = Vec::new();
    for n in 0..5u64 {
        let mut r = request(&format!("acme-{n}"), n);
        r.destination = Destination::new(format!("https://r{n}.example/in"));
        ids.push(("acme", fx.emit(&r).await.unwrap().action_id));
    }
    for n in 0..2u64 {
        let mut r = request(&format!("beta-{n}"), n);
        r.scope = outbound::Scope::new("beta", PROJECT);
        r.destination = Destination::new(format!("https://r{n}.example/in"));
        ids.push(("beta", fx.emit(&r).await.unwrap().action_id));
    }
    let executor = fx.executor();
    assert_eq!(executor.run_once().await.unwrap(), 7);
    assert_eq!(fx.stub.sent().len(), 4, "two per tenant");

    let mut done = 0;
    let mut deferred = 0;
    for (tenant, id) in &ids {
        let a = outbox::get(fx.pool(), *id).await.unwrap().unwrap();
        match a.state {
            ActionState::Done => done += 1,
            ActionState::Admitted => {
                assert_eq!(*tenant, "acme", "beta had its own tokens");
                assert_eq!(a.attempt, 0, "a deferral is not an attempt");
                assert!(a.lease_expires_at.is_none());
                assert!(
                    a.run_at > chrono::Utc::now(),
                    "not due before the bucket refills"
                );
                deferred += 1;
            }
            other => panic!("{tenant} {id}: {other:?}"),
        }
    }
    assert_eq!((done, deferred), (4, 3));
    assert_eq!(
        count(
            fx.pool(),
            "SELECT count(*) FROM wharf.action WHERE state = 'EXECUTING'"
        )
        .await,
        0
    );
    assert_eq!(
        count(
            fx.pool(),
            "SELECT count(*) FROM wharf.action WHERE state = 'FAILED'"
        )
        .await,
        0,
        "the limit never makes a dead letter"
    );
    // Nothing is due, so nothing is claimed (and nothing is sent) until the refill.
    assert_eq!(executor.run_once().await.unwrap(), 0);
    assert_eq!(fx.stub.sent().len(), 4);
}

#[tokio::test]
async fn a_refused_delivery_is_a_dead_letter_with_its_code() {
    let fx = Fx::new().await;
    *fx.stub.answer.lock().unwrap() = Answer::Refused;
    let emitted = fx.emit(&request("refused", 1)).await.unwrap();
    let report = fx.executor().drain().await.unwrap();
    assert!(report.finished);
    let page = outbound::dead_letters(fx.pool(), TENANT, PROJECT, None, None)
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1);
    let letter = &page.items[0];
    assert_eq!(letter.id, emitted.action_id);
    assert_eq!(letter.kind, outbound::ENVELOPE_KIND);
    assert_eq!(letter.idempotency_key, "refused");
    assert_eq!(
        letter.lane_key,
        outbound::lane_key(&scope(), &Destination::new(URL))
    );
    assert_eq!(letter.stop_reason, StopReason::ProviderRefused);
    assert_eq!(letter.error_code.as_deref(), Some("http_4xx"));
    assert_eq!(letter.attempt, 1);
    // The envelope stays answerable under its key after its delivery failed.
    let again = fx.emit(&request("refused", 1)).await.unwrap();
    assert_eq!(again.envelope, emitted.envelope);
    assert!(!again.created);
}
