//! The delivery limit checked before the claim (SPEC §3.8): an exhausted tenant has none of its
//! envelope rows claimed (they stay ADMITTED, untouched) while other tenants' rows are, its
//! rows are delivered once its tokens refill, an expired lease of an exhausted tenant is still
//! reclaimed, and no claim takes more than 100 rows. The budget's clock is moved, not slept.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use sqlx::PgPool;
use wharf::inbox::LimitPolicy;
use wharf::outbound::{self, DeliveryBudget, Destination, Scope};
use wharf::outbox::{self, ActionState, CLAIM_BATCH_LIMIT};
use wharf::testing::outbox as store;

use super::support::*;

fn budget(rate_per_s: f64, burst: u32) -> Arc<DeliveryBudget> {
    Arc::new(DeliveryBudget::new(
        LimitPolicy { rate_per_s, burst },
        1_000,
    ))
}

/// Emits one envelope of `tenant` to its own receiver (so its own lane).
async fn emit_lane(fx: &Fx, tenant: &str, n: u64) -> i64 {
    let mut r = request(&format!("{tenant}-{n}"), n);
    r.scope = Scope::new(tenant, PROJECT);
    r.destination = Destination::new(format!("https://r{n}.example/in"));
    fx.emit(&r).await.unwrap().action_id
}

/// Never claimed: ADMITTED, no attempt, no claim epoch, no lease.
async fn untouched(pool: &PgPool, id: i64) -> bool {
    let a = outbox::get(pool, id).await.unwrap().unwrap();
    a.state == ActionState::Admitted
        && a.attempt == 0
        && a.epoch == 0
        && a.lease_expires_at.is_none()
}

async fn done(pool: &PgPool, id: i64) -> bool {
    outbox::get(pool, id).await.unwrap().unwrap().state == ActionState::Done
}

async fn executing(pool: &PgPool) -> i64 {
    count(
        pool,
        "SELECT count(*) FROM wharf.action WHERE state = 'EXECUTING'",
    )
    .await
}

#[tokio::test]
async fn an_exhausted_tenant_has_no_row_claimed_until_its_tokens_refill() {
    // Two deliveries at once per tenant, then one a second.
    let fx = Fx::with_budget(Some(budget(1.0, 2))).await;
    outbound::generate_signing_key(fx.pool(), &fx.server_key, "beta", PROJECT)
        .await
        .unwrap();
    let mut acme = Vec::new();
    for n in 0..5 {
        acme.push(emit_lane(&fx, TENANT, n).await);
    }
    let beta = emit_lane(&fx, "beta", 0).await;
    let executor = fx.executor();

    assert_eq!(
        executor.run_once().await.unwrap(),
        2 + 1,
        "acme's burst, and beta"
    );
    assert_eq!(fx.stub.sent().len(), 3);
    assert!(
        done(fx.pool(), acme[0]).await
            && done(fx.pool(), acme[1]).await
            && done(fx.pool(), beta).await
    );
    for id in &acme[2..] {
        assert!(untouched(fx.pool(), *id).await, "acme {id} was not claimed");
    }

    // acme is out of tokens: its rows are not even claimed, while beta's new row is.
    let beta_again = emit_lane(&fx, "beta", 1).await;
    assert_eq!(executor.run_once().await.unwrap(), 1);
    assert!(done(fx.pool(), beta_again).await);
    for id in &acme[2..] {
        assert!(untouched(fx.pool(), *id).await, "acme {id} was not claimed");
    }
    assert_eq!(executor.run_once().await.unwrap(), 0);
    assert_eq!(executing(fx.pool()).await, 0);

    // A second later acme may start one more; three seconds later the rest.
    fx.stub.advance(Duration::from_secs(1));
    assert_eq!(executor.run_once().await.unwrap(), 1);
    assert_eq!(executor.run_once().await.unwrap(), 0);
    fx.stub.advance(Duration::from_secs(3));
    assert_eq!(executor.run_once().await.unwrap(), 2);
    for id in &acme {
        let a = outbox::get(fx.pool(), *id).await.unwrap().unwrap();
        assert_eq!(a.state, ActionState::Done, "{id}");
        assert_eq!((a.attempt, a.epoch), (1, 1), "claimed once, never deferred");
    }
    assert_eq!(fx.stub.sent().len(), 7);
}

#[tokio::test]
async fn an_expired_lease_of_an_exhausted_tenant_is_still_reclaimed() {
    // One delivery, never refilled.
    let budget = budget(0.0, 1);
    let fx = Fx::with_budget(Some(budget.clone())).await;
    let dead = emit_lane(&fx, TENANT, 0).await;
    let waiting = emit_lane(&fx, TENANT, 1).await;
    // A worker claimed the first and died; the tenant spent its token elsewhere.
    let claimed = store::claim(
        fx.pool(),
        1,
        1_000,
        None,
        &[outbound::ENVELOPE_KIND],
        1_000,
        &[],
    )
    .await
    .unwrap();
    assert_eq!(claimed.iter().map(|c| c.id).collect::<Vec<_>>(), vec![dead]);
    assert!(budget.try_acquire_at(TENANT, fx.stub.now()).is_ok());

    // Past the lease: the reclaim happens and delivers; the tenant's other row is not claimed.
    let later = Some(Utc::now() + chrono::Duration::seconds(5));
    let executor = fx.executor();
    assert_eq!(executor.run_once_at(later).await.unwrap(), 1);
    let a = outbox::get(fx.pool(), dead).await.unwrap().unwrap();
    assert_eq!((a.state, a.attempt, a.epoch), (ActionState::Done, 2, 2));
    assert_eq!(fx.stub.sent().len(), 1);
    assert!(untouched(fx.pool(), waiting).await);
    assert_eq!(executor.run_once_at(later).await.unwrap(), 0);
    assert_eq!(executing(fx.pool()).await, 0);
}

#[tokio::test]
async fn no_claim_takes_more_than_100_envelopes() {
    // A burst bigger than a claim, and beta exhausted (so the caps are sent and the capped
    // claim runs).
    let budget = budget(0.0, 1_000);
    let fx = Fx::with_budget(Some(budget.clone())).await;
    outbound::generate_signing_key(fx.pool(), &fx.server_key, "beta", PROJECT)
        .await
        .unwrap();
    budget.charge_at("beta", 1_000, fx.stub.now());
    for _ in 0..1_000 {
        budget.start_at("beta", fx.stub.now()).unwrap();
    }
    let beta = emit_lane(&fx, "beta", 0).await;
    for n in 0..150 {
        emit_lane(&fx, TENANT, n).await;
    }
    let executor = fx.executor();
    assert_eq!(
        executor.run_once().await.unwrap(),
        CLAIM_BATCH_LIMIT as usize
    );
    assert_eq!(executor.run_once().await.unwrap(), 50);
    assert_eq!(executor.run_once().await.unwrap(), 0);
    assert!(untouched(fx.pool(), beta).await);
    assert_eq!(fx.stub.sent().len(), 150);
}
