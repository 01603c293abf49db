//! Per-tenant claim budgets (`ClaimBudget::PerTenant`, `claim_capped.sql`): a tenant capped at
//! 0 has no row taken out of ADMITTED, the others get their caps, reclaims are never capped,
//! the second look after a demotion spends the first look's rows, and no claim takes more
//! than 100.

use chrono::{Duration, Utc};
use wharf::outbox::{ActionRequest, ActionState, CLAIM_BATCH_LIMIT, ClaimBudget};
use wharf::testing::outbox::{self as store, TenantCaps};
use wharf_testkit::TestDb;

use super::support::*;

fn per_tenant(others: u32, tenants: &[(&str, u32)]) -> ClaimBudget {
    ClaimBudget::PerTenant {
        total: u32::MAX,
        others,
        tenants: tenants.iter().map(|(t, n)| ((*t).into(), *n)).collect(),
    }
}

fn tenant_req(tenant: &str, lane: &str, key: &str) -> ActionRequest {
    req(lane, key).tenant(tenant)
}

/// (state, attempt, epoch, lease set) of one action.
async fn untouched(pool: &sqlx::PgPool, id: i64) -> bool {
    let v = view(pool, id).await;
    v.state == ActionState::Admitted
        && v.attempt == 0
        && v.epoch == 0
        && v.lease_expires_at.is_none()
}

async fn executing(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM wharf.action WHERE state = 'EXECUTING'")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_tenant_at_zero_is_never_claimed_and_the_others_get_their_caps() {
    let db = TestDb::new().await;
    let (registry, fake, amo, _) = registry();
    let mut of = std::collections::HashMap::<&str, Vec<i64>>::new();
    // Three lanes (three heads) each for three tenants, and an uncapped kind beside them.
    for tenant in ["t0", "t1", "t2"] {
        for lane in 0..3 {
            let key = format!("{tenant}-{lane}");
            let id = enqueue(&db.pool, &registry, tenant_req(tenant, &key, &key)).await;
            of.entry(tenant).or_default().push(id);
        }
    }
    for lane in 0..3 {
        let key = format!("amo-{lane}");
        let r = ActionRequest::new(AMO_KIND, &key, &key, serde_json::json!({})).tenant("t0");
        enqueue(&db.pool, &registry, r).await;
    }
    *fake.budget.lock().unwrap() = per_tenant(2, &[("t0", 0), ("t1", 1)]);
    let ex = executor(&db.pool, &registry);
    assert_eq!(ex.run_once().await.unwrap(), 1 + 2 + 3);

    // t0's rows were not even claimed and given back: no attempt, no epoch, no lease.
    for id in &of["t0"] {
        assert!(untouched(&db.pool, *id).await, "t0 action {id}");
    }
    // The oldest heads within each cap ran.
    let done = |id: i64| {
        let pool = db.pool.clone();
        async move { view(&pool, id).await.state == ActionState::Done }
    };
    assert!(done(of["t1"][0]).await);
    assert!(untouched(&db.pool, of["t1"][1]).await && untouched(&db.pool, of["t1"][2]).await);
    assert!(done(of["t2"][0]).await && done(of["t2"][1]).await);
    assert!(untouched(&db.pool, of["t2"][2]).await);
    // Another kind's caps are its own: the uncapped kind's t0 rows all ran.
    assert_eq!(amo.seen().len(), 3);
    // The adapter was told what it was about to run, before it ran.
    let mut told = fake.claimed.lock().unwrap().clone();
    assert_eq!(told.len(), 1);
    told[0].sort();
    assert_eq!(
        told[0],
        vec![Some("t1".into()), Some("t2".into()), Some("t2".into())]
    );
    assert_eq!(executing(&db.pool).await, 0);

    // When t0's budget comes back, its rows are claimed like any other.
    *fake.budget.lock().unwrap() = ClaimBudget::Unlimited;
    ex.drain().await.unwrap();
    for id in of.values().flatten() {
        assert!(done(*id).await, "{id}");
    }
}

#[tokio::test]
async fn rows_without_a_tenant_share_the_others_cap() {
    let db = TestDb::new().await;
    let (registry, .., inst) = registry();
    for lane in 0..3 {
        let key = format!("inst-{lane}");
        let r = ActionRequest::new(INSTANCE_KIND, &key, &key, serde_json::json!({}));
        enqueue(&db.pool, &registry, r).await;
    }
    *inst.budget.lock().unwrap() = per_tenant(1, &[("t0", 0)]);
    let ex = executor(&db.pool, &registry);
    assert_eq!(ex.run_once().await.unwrap(), 1);
    assert_eq!(*inst.claimed.lock().unwrap(), vec![vec![None]]);
    // And a kind whose unlisted tenants are at 0 takes only its listed tenants.
    *inst.budget.lock().unwrap() = per_tenant(0, &[("t0", 5)]);
    assert_eq!(ex.run_once().await.unwrap(), 0);
}

#[tokio::test]
async fn the_second_look_after_a_demotion_spends_the_first() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    // Lane a: three rows (two of them wait, but carry the head hint until a claim demotes
    // them); lane b: one row. t1 may start one.
    let a0 = enqueue(&db.pool, &registry, tenant_req("t1", "a", "a0")).await;
    for key in ["a1", "a2"] {
        enqueue(&db.pool, &registry, tenant_req("t1", "a", key)).await;
    }
    let b0 = enqueue(&db.pool, &registry, tenant_req("t1", "b", "b0")).await;
    *fake.budget.lock().unwrap() = per_tenant(1, &[("t9", 0)]);
    let ex = executor(&db.pool, &registry);
    // The first look takes a0 and comes back short, the demotion uncovers nothing new, and the
    // second look finds t1's cap spent: b0 stays.
    assert_eq!(ex.run_once().await.unwrap(), 1);
    assert_eq!(view(&db.pool, a0).await.state, ActionState::Done);
    assert!(untouched(&db.pool, b0).await);
    let hinted: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM wharf.action WHERE lane_key = 'a' AND NOT head_hint",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(hinted > 0, "the second look did happen");
}

#[tokio::test]
async fn an_expired_lease_is_reclaimed_whatever_the_tenants_cap() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let id = enqueue(&db.pool, &registry, tenant_req("t0", "a", "a0")).await;
    let other_lane = enqueue(&db.pool, &registry, tenant_req("t0", "b", "b0")).await;
    // A worker claims a0 and dies before the fence.
    let claimed = store::claim(&db.pool, 10, 20_000, None, &[KIND], 1000, &[])
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    store::release(&db.pool, &[claimed[1].id], &[claimed[1].epoch], &[])
        .await
        .unwrap();
    assert_eq!(claimed[0].id, id);
    *fake.budget.lock().unwrap() = per_tenant(5, &[("t0", 0)]);
    let ex = executor(&db.pool, &registry);
    // Past the lease, the reclaim happens though t0 is at 0; t0's other lane is not claimed.
    let later = Some(Utc::now() + Duration::seconds(25));
    assert_eq!(ex.run_once_at(later).await.unwrap(), 1);
    let v = view(&db.pool, id).await;
    assert_eq!((v.state, v.epoch, v.attempt), (ActionState::Done, 2, 2));
    let w = view(&db.pool, other_lane).await;
    assert_eq!((w.state, w.attempt), (ActionState::Admitted, 0));
    assert_eq!(
        *fake.claimed.lock().unwrap(),
        vec![vec![Some("t0".to_owned())]],
        "the reclaim is charged like any claimed row"
    );
}

#[tokio::test]
async fn a_capped_claim_never_takes_more_than_100() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    // 150 heads in 150 lanes of three tenants, and 60 expired leases of a fourth.
    let mut requests = Vec::new();
    for n in 0..150 {
        let tenant = ["t1", "t2", "t3"][n % 3];
        let key = format!("h{n}");
        requests.push(tenant_req(tenant, &key, &key));
    }
    for n in 0..60 {
        let key = format!("r{n}");
        requests.push(tenant_req("t4", &key, &key));
    }
    let mut conn = db.pool.acquire().await.unwrap();
    wharf::outbox::enqueue_many(&mut conn, &registry, requests)
        .await
        .unwrap();
    drop(conn);
    sqlx::query(
        "UPDATE wharf.action_live SET state = 'EXECUTING', epoch = 1, attempt = 1,
                lease_expires_at = now() - interval '1 second'
          WHERE tenant_id = 't4'",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    // Caps that allow everything, but are sent (t9 is listed), so the capped statement runs.
    let caps = TenantCaps {
        kinds: vec![KIND.into(), KIND.into()],
        tenants: vec![None, Some("t9".into())],
        rows: vec![1_000, 0],
    };
    let claimed = store::claim_capped(
        &db.pool,
        CLAIM_BATCH_LIMIT,
        20_000,
        None,
        &[KIND],
        1_000,
        &caps,
        &[],
    )
    .await
    .unwrap();
    assert_eq!(claimed.len(), CLAIM_BATCH_LIMIT as usize);
    let reclaimed = claimed
        .iter()
        .filter(|c| c.tenant_id.as_deref() == Some("t4"))
        .count();
    assert_eq!(
        reclaimed, 60,
        "reclaims first (their leases ran out before)"
    );
    store::release(
        &db.pool,
        &claimed.iter().map(|c| c.id).collect::<Vec<_>>(),
        &claimed.iter().map(|c| c.epoch).collect::<Vec<_>>(),
        &[],
    )
    .await
    .unwrap();

    // Through the executor, which never asks for more than 100 either.
    *fake.budget.lock().unwrap() = per_tenant(1_000, &[("t9", 0)]);
    let ex = executor(&db.pool, &registry);
    assert_eq!(ex.run_once().await.unwrap(), CLAIM_BATCH_LIMIT as usize);
    let told: usize = fake.claimed.lock().unwrap().iter().map(Vec::len).sum();
    assert_eq!(told, CLAIM_BATCH_LIMIT as usize);
}
