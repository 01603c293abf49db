//! The claim as the fence (SPEC §2.3, "refinement for speed"), reclaims before due heads, claims
//! that run at once, and fences that cannot reach the database.

use std::time::Duration;

use chrono::Utc;
use wharf::outbox::{ActionState, Executor, Outcome};
use wharf::testing::outbox as store;
use wharf_testkit::TestDb;

use super::support::*;

/// The text of the fence statement (`begin_write.sql`), for `fail_updates_matching`.
const FENCE_STATEMENT: &str = "%SET write_started_at = coalesce(a.write_started_at, coalesce($4%";

async fn write_started(pool: &sqlx::PgPool, id: i64) -> bool {
    view(pool, id).await.write_started_at.is_some()
}

#[tokio::test]
async fn the_claim_is_the_fence_of_a_kind_that_is_not_at_most_once() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    // Every fence statement fails: an attempt that needed one would be refused.
    fail_updates_matching(&db.pool, FENCE_STATEMENT, 0).await;
    assert_eq!(executor(&db.pool, &registry).run_once().await.unwrap(), 1);
    assert_eq!(fake.seen()[0].fence.as_deref(), Some("ok"));
    let v = view(&db.pool, id).await;
    assert_eq!((v.state, v.attempt), (ActionState::Done, 1));
    assert!(v.write_started_at.is_some(), "the claim recorded the mark");
}

/// An adapter that declines the claim as its fence (the webhook kind: RELIABILITY.md finding 8)
/// gets a claim without the mark, and its own fence records it just before the call.
#[tokio::test]
async fn an_adapter_that_declines_the_claim_as_fence_fences_on_its_own() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    fake.claim_may_fence
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    // With every fence statement failing, the attempt is refused at its fence (so it asked the
    // database: the claim was not its fence), and the claim left no mark behind.
    fail_updates_matching(&db.pool, FENCE_STATEMENT, 0).await;
    assert_eq!(executor(&db.pool, &registry).run_once().await.unwrap(), 1);
    let fence = fake.seen()[0].fence.clone().unwrap_or_default();
    assert!(fence.starts_with("Database"), "{:?}", fake.seen());
    let v = view(&db.pool, id).await;
    assert_eq!(v.state, ActionState::Admitted);
    assert!(v.write_started_at.is_none());
}

#[tokio::test]
async fn a_fence_that_cannot_reach_the_database_gives_the_action_back_at_once() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    fail_updates_matching(&db.pool, FENCE_STATEMENT, 0).await;
    // The durable fence, as every attempt had before the claim could be the fence: the
    // statement fails (so the pattern above matches it), and the action is not left to wait
    // out its lease.
    let ex = durable_fence_executor(&db.pool, &registry);
    assert_eq!(ex.run_once().await.unwrap(), 1);
    assert!(
        fake.seen()[0]
            .fence
            .as_deref()
            .unwrap()
            .starts_with("Database"),
        "{:?}",
        fake.seen()
    );
    let v = view(&db.pool, id).await;
    assert_eq!((v.state, v.attempt), (ActionState::Admitted, 0));
    assert!(v.lease_expires_at.is_none());
    assert!(v.write_started_at.is_none());
}

#[tokio::test]
async fn an_at_most_once_kind_always_fences_on_its_own() {
    let db = TestDb::new().await;
    let (registry, _, amo, _) = registry();
    let id = enqueue(
        &db.pool,
        &registry,
        wharf::outbox::ActionRequest::new(AMO_KIND, "lane", "k", serde_json::json!({}))
            .tenant("t1"),
    )
    .await;
    fail_updates_matching(&db.pool, FENCE_STATEMENT, 0).await;
    // fence_with_claim is on (the default), yet the at-most-once fence is its own statement:
    // it fails here, the provider is not called, and the action is given back untouched.
    executor(&db.pool, &registry).run_once().await.unwrap();
    assert!(
        amo.seen()[0]
            .fence
            .as_deref()
            .unwrap()
            .starts_with("Database")
    );
    let v = view(&db.pool, id).await;
    assert_eq!((v.state, v.attempt), (ActionState::Admitted, 0));
    assert!(v.write_started_at.is_none());
}

#[tokio::test]
async fn an_attempt_that_never_reached_its_fence_clears_the_claims_mark() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    fake.script(
        "k",
        vec![Step::Unfenced(Outcome::Retry {
            after: Some(Duration::ZERO),
            code: wharf::outbox::ErrorCode::from_static("busy"),
        })],
    );
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    let ex = executor(&db.pool, &registry);
    ex.run_once().await.unwrap();
    let v = view(&db.pool, id).await;
    assert_eq!((v.state, v.attempt), (ActionState::Admitted, 1));
    assert!(
        v.write_started_at.is_none(),
        "nothing was written: no read-back next time"
    );
    ex.run_once().await.unwrap();
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    assert!(!seen[1].write_started);
    assert_eq!(view(&db.pool, id).await.state, ActionState::Done);
}

#[tokio::test]
async fn a_holder_that_died_after_a_fencing_claim_leaves_the_mark_for_the_next_attempt() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    let claimed = store::claim(&db.pool, 10, 20_000, None, &[KIND], 1000, &[KIND])
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(claimed[0].claim_fenced);
    assert!(!claimed[0].write_started, "no earlier attempt");
    assert!(
        write_started(&db.pool, id).await,
        "the claim's commit is the mark"
    );
    // The holder dies; past its lease, the next attempt is told a write may have started.
    expire_leases(&db.pool).await;
    executor(&db.pool, &registry).run_once().await.unwrap();
    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].write_started, "the next attempt reads back");
    assert_eq!(view(&db.pool, id).await.state, ActionState::Done);
}

#[tokio::test]
async fn an_erasure_after_a_fencing_claim_is_like_one_after_a_fence() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    fake.script("k", vec![Step::EraseThenFence(db.pool.clone(), "acct-1")]);
    let id = enqueue(&db.pool, &registry, req("lane", "k").subject("acct-1")).await;
    executor(&db.pool, &registry).run_once().await.unwrap();
    // SPEC §2.3: the call goes ahead as if the erasure had landed just after the fence; its
    // result finds nothing to record.
    assert_eq!(fake.seen()[0].fence.as_deref(), Some("ok"));
    assert!(wharf::outbox::get(&db.pool, id).await.unwrap().is_none());
}

#[tokio::test]
async fn a_fencing_claim_asks_the_database_once_the_margin_may_be_gone() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    // 5.4 s of lease, 5 s of margin: after 600 ms the monotonic clock no longer vouches for
    // the margin, so the fence asks the database, which refuses on its own clock.
    let mut c = config();
    c.lease_ms = 5_400;
    c.fence_margin_ms = 5_000;
    fake.script("k", vec![Step::SleepThenFence(600)]);
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    let ex = Executor::new(db.pool.clone(), registry.clone(), c).unwrap();
    ex.run_once().await.unwrap();
    let seen = fake.seen();
    assert!(
        seen[0]
            .fence
            .as_deref()
            .unwrap()
            .starts_with("LeaseTooShort"),
        "{seen:?}"
    );
    // Nothing was written: given back at once, attempt not counted, the claim's mark cleared.
    let v = view(&db.pool, id).await;
    assert_eq!((v.state, v.attempt), (ActionState::Admitted, 0));
    assert!(v.write_started_at.is_none());
}

#[tokio::test]
async fn an_expired_lease_is_reclaimed_before_due_heads() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let held = enqueue(&db.pool, &registry, req("held", "held")).await;
    let claimed = store::claim(&db.pool, 1, 20_000, None, &[KIND], 1000, &[])
        .await
        .unwrap();
    assert_eq!(claimed[0].id, held);
    // A backlog of due heads, all due before the lease expires.
    for i in 0..5 {
        enqueue(
            &db.pool,
            &registry,
            req(&format!("lane-{i}"), &format!("k{i}")),
        )
        .await;
    }
    // Past the lease, a claim of one takes the reclaim: a dead holder's lane does not wait
    // behind unrelated due work.
    let later = Some(Utc::now() + chrono::Duration::seconds(25));
    let again = store::claim(&db.pool, 1, 20_000, later, &[KIND], 1000, &[])
        .await
        .unwrap();
    assert_eq!(
        again.iter().map(|c| (c.id, c.epoch)).collect::<Vec<_>>(),
        vec![(held, 2)]
    );
    // With room for more, the reclaim comes with the oldest heads.
    let more = store::claim(&db.pool, 3, 20_000, later, &[KIND], 1000, &[])
        .await
        .unwrap();
    assert_eq!(more.len(), 3);
    assert!(more.iter().all(|c| c.id != held));
}

#[tokio::test]
async fn two_claims_at_once_take_different_rows() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(
            enqueue(
                &db.pool,
                &registry,
                req(&format!("lane-{i}"), &format!("k{i}")),
            )
            .await,
        );
    }
    // The first claim holds its locks (its transaction is still open) while the second runs.
    let mut first_tx = db.pool.begin().await.unwrap();
    let first = store::claim(&mut *first_tx, 2, 20_000, None, &[KIND], 1000, &[])
        .await
        .unwrap();
    let second = store::claim(&db.pool, 2, 20_000, None, &[KIND], 1000, &[])
        .await
        .unwrap();
    first_tx.commit().await.unwrap();
    let mut got: Vec<i64> = first.iter().chain(&second).map(|c| c.id).collect();
    got.sort_unstable();
    assert_eq!(first.len(), 2);
    assert_eq!(
        second.len(),
        2,
        "the second claim skips the first one's rows"
    );
    assert_eq!(got, ids);
}
