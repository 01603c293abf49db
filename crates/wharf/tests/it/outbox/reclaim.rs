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
