//! Claims beyond the plain case: reclaimed attempts (what an earlier attempt's started write
//! means for the next one), releases, and a claim whose later statements fail.

use std::time::Duration;

use chrono::Utc;
use wharf::outbox::{ActionState, ClaimBudget, Outcome, StopReason};
use wharf::testing::outbox as store;
use wharf_testkit::TestDb;

use super::support::*;

/// A reclaimed attempt that answers `outcome` before its own fence must keep the earlier
/// attempt's write mark, so the attempt after it still reads back.
async fn unfenced_answer_keeps_an_earlier_write_mark(outcome: Outcome) {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    // Attempt 1 passes its fence, then its worker dies.
    let first = store::claim(&db.pool, 10, 20_000, None, &[KIND], 1000, &[])
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
    let first = store::claim(&db.pool, 10, 20_000, None, &[KIND], 1000, &[])
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
    let again = store::claim(&db.pool, 10, 20_000, None, &[KIND], 1000, &[])
        .await
        .unwrap()
        .remove(0);
    assert!(again.write_started);
    assert_eq!(
        store::release(&db.pool, &[id], &[again.epoch], &[])
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

async fn state_of(pool: &sqlx::PgPool, id: i64) -> ActionState {
    view(pool, id).await.state
}

#[tokio::test]
async fn a_failed_demotion_still_runs_what_the_claim_took() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let id = enqueue(&db.pool, &registry, req("b", "b")).await;
    fail_updates_matching(
        &db.pool,
        "%SET head_hint = n.head_hint AND NOT c.demote%",
        0,
    )
    .await;
    // The claim is short (one row of many permits), so a demotion follows, and fails.
    let ran = executor(&db.pool, &registry).run_once().await;
    assert_eq!(ran.ok(), Some(1));
    assert_eq!(state_of(&db.pool, id).await, ActionState::Done);
}

/// Defect 9 of issue 11 (and the UNCERTAIN / `LEASE_LOST_AFTER_WRITE` endings after a restart in
/// RELIABILITY.md): a completion that fails for longer than a few quick retries, as it does
/// while PostgreSQL restarts, is still recorded once the database answers again, instead of
/// leaving a delivered effect to wait out its lease.
#[tokio::test]
async fn a_completion_that_fails_for_seconds_is_recorded_when_the_database_answers_again() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let id = enqueue(&db.pool, &registry, req("c", "c")).await;
    // Only complete.sql says this.
    fail_updates_matching(&db.pool, "%readback_ref = coalesce(r.readback_ref%", 0).await;
    let pool = db.pool.clone();
    let heal = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(2_000)).await;
        sqlx::query("DELETE FROM public.fail_ctl")
            .execute(&pool)
            .await
            .unwrap();
    });
    let ran = executor(&db.pool, &registry).run_once().await;
    heal.await.unwrap();
    assert_eq!(ran.ok(), Some(1));
    assert_eq!(state_of(&db.pool, id).await, ActionState::Done);
}

#[tokio::test]
async fn a_failed_second_claim_still_runs_what_the_first_took() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    // Lane l: an unstarted action not due yet, and a due one behind it with the hint on, so the
    // demotion finds something and a second claim follows.
    let first = enqueue(&db.pool, &registry, req("l", "l1")).await;
    let behind = enqueue(&db.pool, &registry, req("l", "l2")).await;
    sqlx::query("UPDATE wharf.action_live SET run_at = now() + interval '1 hour' WHERE id = $1")
        .bind(first)
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query("UPDATE wharf.action_live SET head_hint = true WHERE id = $1")
        .bind(behind)
        .execute(&db.pool)
        .await
        .unwrap();
    let id = enqueue(&db.pool, &registry, req("b", "b")).await;
    fail_updates_matching(&db.pool, "%epoch = a.epoch + 1%", 1).await;
    let ran = executor(&db.pool, &registry).run_once().await;
    assert_eq!(ran.ok(), Some(1));
    assert_eq!(state_of(&db.pool, id).await, ActionState::Done);
    let hint: bool = sqlx::query_scalar("SELECT head_hint FROM wharf.action WHERE id = $1")
        .bind(behind)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(!hint, "the demotion ran, so the second claim was tried");
}

#[tokio::test]
async fn a_failed_release_still_runs_what_the_claim_took_within_allowance() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let a = enqueue(&db.pool, &registry, req("x", "x")).await;
    let b = enqueue(&db.pool, &registry, req("y", "y")).await;
    *fake.budget.lock().unwrap() = ClaimBudget::AtMost(1);
    fail_updates_matching(
        &db.pool,
        "%attempt = a.attempt - 1, lease_expires_at = NULL%",
        0,
    )
    .await;
    let ran = executor(&db.pool, &registry).run_once().await;
    assert_eq!(ran.ok(), Some(1));
    let mut states = vec![state_of(&db.pool, a).await, state_of(&db.pool, b).await];
    states.sort_by_key(|s| s.as_str());
    // One ran; the one that could not be given back waits for its lease.
    assert_eq!(states, vec![ActionState::Done, ActionState::Executing]);
}

/// Claims `id` once per lease, each `now` 25 s (past the 20 s lease) after the last, for every
/// allowed attempt; returns the last claim's epoch and the `now` after its lease.
async fn lose_every_lease(pool: &sqlx::PgPool, id: i64) -> (i64, chrono::DateTime<Utc>) {
    let start = Utc::now();
    let mut epoch = 0;
    for n in 0..3 {
        let at = Some(start + chrono::Duration::seconds(25 * n));
        let c = store::claim(pool, 10, 20_000, at, &[KIND], 1000, &[])
            .await
            .unwrap();
        assert_eq!(
            c.iter().map(|c| (c.id, c.attempt)).collect::<Vec<_>>(),
            vec![(id, n as i32 + 1)]
        );
        epoch = c[0].epoch;
    }
    (epoch, start + chrono::Duration::seconds(75))
}

#[tokio::test]
async fn a_last_attempt_that_lost_its_lease_before_a_write_ends_attempts_exhausted() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    let (_, after) = lose_every_lease(&db.pool, id).await;
    // Attempt 3 of 3 died: no claim may start a fourth...
    assert!(
        store::claim(&db.pool, 10, 20_000, Some(after), &[KIND], 1000, &[])
            .await
            .unwrap()
            .is_empty(),
        "a reclaim past max_attempts"
    );
    // ...and the lease sweep ends it.
    let ex = executor(&db.pool, &registry);
    let swept = ex.sweep_at(Some(after)).await.unwrap();
    assert_eq!((swept.attempts_exhausted, swept.lease_lost), (1, 0));
    let v = view(&db.pool, id).await;
    assert_eq!(
        (v.state, v.stop_reason, v.attempt),
        (ActionState::Failed, Some(StopReason::AttemptsExhausted), 3)
    );
    assert!(v.payload.is_none());
    ex.drain_at(Some(after)).await.unwrap();
    assert!(fake.seen().is_empty());
}

#[tokio::test]
async fn a_last_attempt_that_lost_its_lease_after_a_write_ends_uncertain() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    let (epoch, after) = lose_every_lease(&db.pool, id).await;
    assert!(
        store::begin_write(
            &db.pool,
            id,
            epoch,
            5_000,
            Some(after - chrono::Duration::seconds(20))
        )
        .await
        .unwrap()
    );
    assert!(
        store::claim(&db.pool, 10, 20_000, Some(after), &[KIND], 1000, &[])
            .await
            .unwrap()
            .is_empty()
    );
    let swept = executor(&db.pool, &registry)
        .sweep_at(Some(after))
        .await
        .unwrap();
    assert_eq!((swept.attempts_exhausted, swept.lease_lost), (0, 1));
    let v = view(&db.pool, id).await;
    assert_eq!(
        (v.state, v.stop_reason),
        (
            ActionState::Uncertain,
            Some(StopReason::LeaseLostAfterWrite)
        )
    );
}

#[tokio::test]
async fn an_admitted_action_whose_write_started_does_not_expire() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let mut r = req("lane", "k");
    r.expires_at = Some(Utc::now() + chrono::Duration::hours(1));
    let id = enqueue(&db.pool, &registry, r).await;
    // Attempt 1 passes its fence and dies; attempt 2 defers before its fence, so the action is
    // ADMITTED again with the write mark kept.
    let first = store::claim(&db.pool, 10, 20_000, None, &[KIND], 1000, &[])
        .await
        .unwrap()
        .remove(0);
    assert!(
        store::begin_write(&db.pool, id, first.epoch, 5_000, None)
            .await
            .unwrap()
    );
    expire_leases(&db.pool).await;
    fake.script(
        "k",
        vec![Step::Unfenced(Outcome::Defer {
            until: Duration::from_millis(1),
        })],
    );
    let ex = executor(&db.pool, &registry);
    assert_eq!(ex.run_once().await.unwrap(), 1);
    let v = view(&db.pool, id).await;
    assert_eq!(v.state, ActionState::Admitted);
    assert!(v.write_started_at.is_some());
    // Past expires_at, the provider may hold the effect: the sweep leaves it...
    let later = Some(Utc::now() + chrono::Duration::hours(2));
    assert_eq!(ex.sweep_at(later).await.unwrap().expired, 0);
    assert_eq!(state_of(&db.pool, id).await, ActionState::Admitted);
    // ...and a claim takes it, reads back, and settles it.
    ex.drain_at(later).await.unwrap();
    let v = view(&db.pool, id).await;
    assert_eq!(
        (v.state, v.stop_reason),
        (ActionState::Done, Some(StopReason::Done))
    );
    assert_eq!(
        fake.seen()
            .iter()
            .map(|s| s.write_started)
            .collect::<Vec<_>>(),
        vec![true, true]
    );
}

#[tokio::test]
async fn an_unstarted_action_still_expires() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let mut r = req("lane", "k");
    r.expires_at = Some(Utc::now() + chrono::Duration::hours(1));
    let id = enqueue(&db.pool, &registry, r).await;
    let later = Some(Utc::now() + chrono::Duration::hours(2));
    let ex = executor(&db.pool, &registry);
    assert_eq!(ex.run_once_at(later).await.unwrap(), 0);
    assert_eq!(ex.sweep_at(later).await.unwrap().expired, 1);
    let v = view(&db.pool, id).await;
    assert_eq!(
        (v.state, v.stop_reason),
        (ActionState::Cancelled, Some(StopReason::Expired))
    );
    assert!(fake.seen().is_empty());
}
