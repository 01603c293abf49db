//! Reclaimed attempts: what an earlier attempt's started write means for the next one.

use std::time::Duration;

use wharf::outbox::{ActionState, Outcome};
use wharf::store::outbox as store;
use wharf_testkit::TestDb;

use super::support::*;

/// A reclaimed attempt that answers `outcome` before its own fence must keep the earlier
/// attempt's write mark, so the attempt after it still reads back.
async fn unfenced_answer_keeps_an_earlier_write_mark(outcome: Outcome) {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    // Attempt 1 passes its fence, then its worker dies.
    let first = store::claim(&db.pool, 10, 20_000, None, &[KIND], 1000)
        .await
        .unwrap()
        .remove(0);
    assert!(
        store::begin_write(&db.pool, id, first.epoch, 5_000, None)
            .await
            .unwrap()
    );
    expire_leases(&db.pool).await;
    // Attempt 2 answers without fencing; attempt 3 fences and is done.
    fake.script("k", vec![Step::Unfenced(outcome.clone())]);
    executor(&db.pool, &registry).drain().await.unwrap();
    let seen: Vec<bool> = fake.seen().iter().map(|s| s.write_started).collect();
    assert_eq!(
        seen,
        vec![true, true],
        "after {outcome:?} before the fence, the next attempt must still read back"
    );
    assert_eq!(view(&db.pool, id).await.state, ActionState::Done);
}

#[tokio::test]
async fn an_unfenced_retry_of_a_reclaim_keeps_the_earlier_write_mark() {
    unfenced_answer_keeps_an_earlier_write_mark(Outcome::Retry {
        after: Some(Duration::from_millis(1)),
        code: code("busy"),
    })
    .await;
}

#[tokio::test]
async fn an_unfenced_defer_of_a_reclaim_keeps_the_earlier_write_mark() {
    unfenced_answer_keeps_an_earlier_write_mark(Outcome::Defer {
        until: Duration::from_millis(1),
    })
    .await;
}

#[tokio::test]
async fn a_reclaim_with_an_earlier_write_mark_can_be_released() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    let first = store::claim(&db.pool, 10, 20_000, None, &[KIND], 1000)
        .await
        .unwrap()
        .remove(0);
    assert!(
        store::begin_write(&db.pool, id, first.epoch, 5_000, None)
            .await
            .unwrap()
    );
    expire_leases(&db.pool).await;
    // A reclaim beyond its kind's allowance is given back at once...
    let again = store::claim(&db.pool, 10, 20_000, None, &[KIND], 1000)
        .await
        .unwrap()
        .remove(0);
    assert!(again.write_started);
    assert_eq!(
        store::release(&db.pool, &[id], &[again.epoch])
            .await
            .unwrap(),
        vec![id],
        "a reclaim whose earlier attempt started a write must be released, not left EXECUTING"
    );
    // ...without counting an attempt, keeping the mark, and due at once.
    let v = view(&db.pool, id).await;
    assert_eq!((v.state, v.attempt), (ActionState::Admitted, 1));
    assert!(v.write_started_at.is_some());
    executor(&db.pool, &registry).drain().await.unwrap();
    assert_eq!(view(&db.pool, id).await.state, ActionState::Done);
    assert!(fake.seen()[0].write_started, "the next attempt reads back");
}
