//! Leases, reclaims and the fence: stale workers change nothing.

use chrono::{Duration, Utc};
use wharf::outbox::{ActionState, StopReason};
use wharf::testing::outbox::{self as store, CompletionRow, Next};
use wharf_testkit::TestDb;

use super::support::*;

fn done_row(id: i64, epoch: i64) -> CompletionRow {
    CompletionRow {
        id,
        epoch,
        next: Next::Ended(StopReason::Done),
        readback_ref: Some("stale".into()),
        error_code: None,
        clear_fence: false,
    }
}

#[tokio::test]
async fn an_expired_lease_is_reclaimed_without_waiting_for_the_lane() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    let behind = enqueue(&db.pool, &registry, req("lane", "behind")).await;
    // A worker claims it and dies before the fence.
    let claimed = store::claim(&db.pool, 10, 20_000, None, &[KIND], 1000, &[])
        .await
        .unwrap();
    assert_eq!(claimed.iter().map(|c| c.id).collect::<Vec<_>>(), vec![id]);
    let ex = executor(&db.pool, &registry);
    assert_eq!(
        ex.run_once().await.unwrap(),
        0,
        "a live lease holds the lane"
    );
    // Past the lease (moved by the clock parameter, not by sleeping), the claim takes it again
    // at once, before the action behind it.
    let later = Some(Utc::now() + Duration::seconds(25));
    let again = store::claim(&db.pool, 10, 20_000, later, &[KIND], 1000, &[])
        .await
        .unwrap();
    assert_eq!(
        again
            .iter()
            .map(|c| (c.id, c.epoch, c.attempt))
            .collect::<Vec<_>>(),
        vec![(id, 2, 2)]
    );
    assert!(!again[0].write_started);
    expire_leases(&db.pool).await;
    ex.drain().await.unwrap();
    let v = view(&db.pool, id).await;
    assert_eq!((v.state, v.epoch, v.attempt), (ActionState::Done, 3, 3));
    assert_eq!(view(&db.pool, behind).await.state, ActionState::Done);
    assert_eq!(
        fake.seen().iter().map(|s| s.action_id).collect::<Vec<_>>(),
        vec![id, behind]
    );
}

#[tokio::test]
async fn a_stale_workers_fence_and_completion_change_nothing() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    let stale = store::claim(&db.pool, 10, 20_000, None, &[KIND], 1000, &[])
        .await
        .unwrap()
        .remove(0);
    assert!(
        store::begin_write(&db.pool, id, stale.epoch, 5_000, None)
            .await
            .unwrap()
    );
    expire_leases(&db.pool).await;
    // A reclaim sees that an earlier attempt may have written, and reads back.
    executor(&db.pool, &registry).drain().await.unwrap();
    assert!(fake.seen()[0].write_started);
    let v = view(&db.pool, id).await;
    assert_eq!((v.state, v.epoch), (ActionState::Done, 2));
    // The stale worker wakes up: its fence refuses and its completion finds nothing.
    assert!(
        !store::begin_write(&db.pool, id, stale.epoch, 5_000, None)
            .await
            .unwrap()
    );
    assert!(
        store::complete(&db.pool, &[done_row(id, stale.epoch)], None)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(view(&db.pool, id).await, v);
}

#[tokio::test]
async fn a_completion_for_a_superseded_epoch_is_abandoned_while_the_new_claim_runs() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    let first = store::claim(&db.pool, 10, 20_000, None, &[KIND], 1000, &[])
        .await
        .unwrap()
        .remove(0);
    expire_leases(&db.pool).await;
    let second = store::claim(&db.pool, 10, 20_000, None, &[KIND], 1000, &[])
        .await
        .unwrap()
        .remove(0);
    assert_eq!(second.epoch, first.epoch + 1);
    assert!(
        store::complete(&db.pool, &[done_row(id, first.epoch)], None)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        !store::begin_write(&db.pool, id, first.epoch, 5_000, None)
            .await
            .unwrap()
    );
    assert_eq!(view(&db.pool, id).await.state, ActionState::Executing);
    assert_eq!(
        store::complete(&db.pool, &[done_row(id, second.epoch)], None)
            .await
            .unwrap(),
        vec![id]
    );
}

#[tokio::test]
async fn the_fence_refuses_a_newer_claim_inside_an_attempt() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    // Another claim takes the action between this attempt's claim and its fence.
    fake.script(
        "k",
        vec![Step::SqlThenFence(
            db.pool.clone(),
            "UPDATE wharf.action_live SET epoch = epoch + 1, attempt = attempt + 1 WHERE id = $ID",
        )],
    );
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    durable_fence_executor(&db.pool, &registry)
        .run_once()
        .await
        .unwrap();
    let seen = fake.seen();
    assert!(
        seen[0].fence.as_deref().unwrap().starts_with("Superseded"),
        "{seen:?}"
    );
    // Abandoned: nothing recorded; the newer claim still holds it.
    let v = view(&db.pool, id).await;
    assert_eq!((v.state, v.epoch), (ActionState::Executing, 2));
    assert!(v.write_started_at.is_none());
}

#[tokio::test]
async fn the_fence_refuses_with_less_than_the_margin_left() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    fake.script("k", vec![Step::SqlThenFence(
            db.pool.clone(),
        "UPDATE wharf.action_live SET lease_expires_at = now() + interval '4 seconds' WHERE id = $ID",
    )]);
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    durable_fence_executor(&db.pool, &registry)
        .run_once()
        .await
        .unwrap();
    let seen = fake.seen();
    assert!(
        seen[0]
            .fence
            .as_deref()
            .unwrap()
            .starts_with("LeaseTooShort"),
        "{seen:?}"
    );
    // Nothing was written and this claim still held it: given back at once, no attempt
    // counted, instead of waiting out the lease.
    let v = view(&db.pool, id).await;
    assert_eq!((v.state, v.attempt), (ActionState::Admitted, 0));
    assert!(v.write_started_at.is_none());
}

#[tokio::test]
async fn the_fence_margin_edge() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    let t0 = Utc::now();
    let c = store::claim(&db.pool, 10, 20_000, Some(t0), &[KIND], 1000, &[])
        .await
        .unwrap()
        .remove(0);
    // Lease ends at t0 + 20 s; the margin is 5 s.
    let just_past = t0 + Duration::milliseconds(15_001);
    assert!(
        !store::begin_write(&db.pool, id, c.epoch, 5_000, Some(just_past))
            .await
            .unwrap()
    );
    let exactly = t0 + Duration::milliseconds(15_000);
    assert!(
        store::begin_write(&db.pool, id, c.epoch, 5_000, Some(exactly))
            .await
            .unwrap()
    );
    // A second call keeps the first start time.
    let first: chrono::DateTime<Utc> = view(&db.pool, id).await.write_started_at.unwrap();
    assert!(
        store::begin_write(&db.pool, id, c.epoch, 5_000, Some(t0))
            .await
            .unwrap()
    );
    assert_eq!(view(&db.pool, id).await.write_started_at.unwrap(), first);
}

#[tokio::test]
async fn erasure_between_claim_and_fence_makes_the_fence_refuse() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    fake.script("k", vec![Step::EraseThenFence(db.pool.clone(), "acct-1")]);
    let id = enqueue(&db.pool, &registry, req("lane", "k").subject("acct-1")).await;
    durable_fence_executor(&db.pool, &registry)
        .run_once()
        .await
        .unwrap();
    let seen = fake.seen();
    assert_eq!(seen[0].fence.as_deref(), Some("Gone"));
    assert!(wharf::outbox::get(&db.pool, id).await.unwrap().is_none());
}

#[tokio::test]
async fn an_at_most_once_action_whose_lease_expired_after_its_write_ends_uncertain() {
    let db = TestDb::new().await;
    let (registry, _fake, amo, _) = registry();
    let r = wharf::outbox::ActionRequest::new(AMO_KIND, "lane", "mail-1", serde_json::json!({}))
        .tenant("t");
    let id = enqueue(&db.pool, &registry, r).await;
    let behind = enqueue(
        &db.pool,
        &registry,
        wharf::outbox::ActionRequest::new(AMO_KIND, "lane", "mail-2", serde_json::json!({}))
            .tenant("t"),
    )
    .await;
    let c = store::claim(&db.pool, 10, 20_000, None, &[AMO_KIND], 1000, &[])
        .await
        .unwrap()
        .remove(0);
    assert!(
        store::begin_write(&db.pool, id, c.epoch, 5_000, None)
            .await
            .unwrap()
    );
    // The worker dies mid-call. Past the lease, no claim takes it again...
    expire_leases(&db.pool).await;
    assert!(
        store::claim(&db.pool, 10, 20_000, None, &[AMO_KIND], 1000, &[])
            .await
            .unwrap()
            .is_empty()
    );
    // ...and the sweep ends it; then its lane moves on.
    let ex = executor(&db.pool, &registry);
    let swept = ex.sweep_at(None).await.unwrap();
    assert_eq!(swept.lease_lost, 1);
    let v = view(&db.pool, id).await;
    assert_eq!(
        (v.state, v.stop_reason),
        (
            ActionState::Uncertain,
            Some(StopReason::LeaseLostAfterWrite)
        )
    );
    assert!(v.payload.is_none());
    ex.drain().await.unwrap();
    let seen: Vec<i64> = amo.seen().iter().map(|s| s.action_id).collect();
    assert_eq!(seen, vec![behind], "the lost one is never sent again");
}

#[tokio::test]
async fn an_at_most_once_action_without_a_started_write_is_reclaimed() {
    let db = TestDb::new().await;
    let (registry, _fake, amo, _) = registry();
    let r = wharf::outbox::ActionRequest::new(AMO_KIND, "lane", "mail-1", serde_json::json!({}))
        .tenant("t");
    let id = enqueue(&db.pool, &registry, r).await;
    store::claim(&db.pool, 10, 20_000, None, &[AMO_KIND], 1000, &[])
        .await
        .unwrap();
    expire_leases(&db.pool).await;
    executor(&db.pool, &registry).drain().await.unwrap();
    assert_eq!(view(&db.pool, id).await.state, ActionState::Done);
    assert_eq!(amo.seen().len(), 1);
}

#[tokio::test]
async fn an_adapter_reads_through_its_attempt_but_cannot_write() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    fake.script("k", vec![Step::WriteThroughReadOnly]);
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    let before = view(&db.pool, id).await;
    executor(&db.pool, &registry).run_once().await.unwrap();
    // 25006: read_only_sql_transaction. PostgreSQL, not a convention, keeps the adapter out.
    assert_eq!(
        fake.seen()[0].fence.as_deref(),
        Some("read-only: 25006"),
        "{:?}",
        fake.seen()
    );
    let after = view(&db.pool, id).await;
    assert_eq!(after.state, ActionState::Done);
    assert_eq!(after.lane_key, before.lane_key);
}
