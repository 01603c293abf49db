//! The claim window and busy lanes (`demote.sql`, `0011_outbox_busy_lane_hints.sql`): due
//! actions of lanes whose action is still running do not fill a claim's window and starve idle
//! lanes; every way out of EXECUTING gives the lane its hint back; and a demotion racing a
//! completion never leaves a lane's next action without a hint while nothing would restore it.
//!
//! The invariant every test checks ([`stranded`]): a lane's first unstarted action carries the
//! hint, or the lane has an EXECUTING action (whose departure puts the hint back).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use wharf::outbox::{ActionRequest, ActionState, Executor, StopReason};
use wharf::testing::outbox::{self as store, ClaimedRow, CompletionRow, Next};
use wharf_testkit::TestDb;

use super::support::*;

/// A lease that outlasts every test: the "slow" actions are still running when it ends.
const SLOW_LEASE_MS: u64 = 600_000;
/// The window and the batch of the executor under test (the config allows scan ≥ batch).
const SCAN: u32 = 10;
const BATCH: u32 = 5;

fn window_config() -> wharf::outbox::ExecutorConfig {
    let mut c = config();
    c.claim_scan_max = SCAN;
    c.claim_batch_max = BATCH;
    c
}

fn due_at(lane: &str, key: &str, run_at: DateTime<Utc>) -> ActionRequest {
    let mut r = req(lane, key);
    r.run_at = Some(run_at);
    r
}

/// Lanes whose first unstarted action has no hint while no EXECUTING action would give it back.
async fn stranded(pool: &sqlx::PgPool) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT f.lane_key
           FROM (SELECT DISTINCT ON (lane_key) lane_key, head_hint
                   FROM wharf.action
                  WHERE state IN ('PROPOSED', 'ADMITTED')
                  ORDER BY lane_key, id) f
          WHERE NOT f.head_hint
            AND NOT EXISTS (SELECT 1 FROM wharf.action e
                             WHERE e.lane_key = f.lane_key AND e.state = 'EXECUTING')
          ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

async fn hint(pool: &sqlx::PgPool, id: i64) -> bool {
    sqlx::query_scalar("SELECT head_hint FROM wharf.action WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Ends an attempt as done.
const DONE: Next = Next::Ended(StopReason::Done);
/// Makes the action wait again. The attempt is given back (as a deferral does), so no test runs
/// out of them.
const AGAIN: Next = Next::Again {
    delay_ms: 0,
    refund: 1,
};

fn finished(row: &ClaimedRow, next: Next) -> CompletionRow {
    CompletionRow {
        id: row.id,
        epoch: row.epoch,
        next,
        readback_ref: None,
        error_code: None,
        clear_fence: false,
    }
}

/// Enqueues one action in each of `lanes` and claims them all as another worker would before a
/// slow call: they stay EXECUTING under a live lease.
async fn start_slow(
    pool: &sqlx::PgPool,
    registry: &wharf::outbox::Registry,
    lanes: &[String],
) -> Vec<ClaimedRow> {
    for lane in lanes {
        enqueue(pool, registry, req(lane, &format!("{lane}-slow"))).await;
    }
    let mut running = store::claim(pool, 100, SLOW_LEASE_MS, None, &[KIND], 1000, &[])
        .await
        .unwrap();
    assert_eq!(running.len(), lanes.len());
    running.sort_by_key(|r| r.id);
    running
}

/// Runs the executor until a round claims nothing; returns how many it ran.
async fn run_out(ex: &Executor) -> usize {
    let mut ran = 0;
    for _ in 0..100 {
        let n = ex.run_once().await.unwrap();
        if n == 0 {
            return ran;
        }
        ran += n;
    }
    panic!("the executor kept finding work after 100 rounds");
}

#[tokio::test]
async fn busy_lanes_do_not_starve_idle_ones() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let busy: Vec<String> = (0..12).map(|i| format!("busy-{i:02}")).collect();
    let running = start_slow(&db.pool, &registry, &busy).await;
    // Each busy lane's next action is due, and earlier in run_at order than the idle lanes'.
    let base = Utc::now() - Duration::minutes(1);
    let mut next = Vec::new();
    for (i, lane) in busy.iter().enumerate() {
        let r = due_at(
            lane,
            &format!("{lane}-next"),
            base + Duration::milliseconds(i as i64),
        );
        next.push(enqueue(&db.pool, &registry, r).await);
    }
    let mut idle = Vec::new();
    for j in 0..3 {
        let r = due_at(
            &format!("idle-{j}"),
            &format!("idle-{j}"),
            base + Duration::seconds(1 + j),
        );
        idle.push(enqueue(&db.pool, &registry, r).await);
    }
    // The gap: the first SCAN candidates are all busy lanes' next actions, so a claim on its
    // own finds no head at all.
    let alone = store::claim(&db.pool, BATCH, 20_000, None, &[KIND], SCAN, &[])
        .await
        .unwrap();
    assert!(alone.is_empty(), "{alone:?}");

    // The executor's short claim demotes what fills the window and looks again.
    let ex = Executor::new(db.pool.clone(), registry.clone(), window_config()).unwrap();
    assert_eq!(ex.run_once().await.unwrap(), 3);
    for &id in &idle {
        assert_eq!(view(&db.pool, id).await.state, ActionState::Done);
    }
    for r in &running {
        assert_eq!(view(&db.pool, r.id).await.state, ActionState::Executing);
    }
    for &id in &next {
        assert_eq!(view(&db.pool, id).await.state, ActionState::Admitted);
    }
    assert!(stranded(&db.pool).await.is_empty());
    // A later idle lane is found at once: the busy rows no longer take the window.
    let late = enqueue(&db.pool, &registry, req("idle-late", "idle-late")).await;
    assert_eq!(run_out(&ex).await, 1);
    assert_eq!(view(&db.pool, late).await.state, ActionState::Done);

    // The slow actions end: every busy lane's next action has its hint back and runs.
    let done: Vec<CompletionRow> = running.iter().map(|r| finished(r, DONE)).collect();
    assert_eq!(
        store::complete(&db.pool, &done, None).await.unwrap().len(),
        running.len()
    );
    for &id in &next {
        assert!(hint(&db.pool, id).await, "action {id} lost its hint");
    }
    assert!(stranded(&db.pool).await.is_empty());
    assert_eq!(run_out(&ex).await, next.len());
    for &id in &next {
        assert_eq!(view(&db.pool, id).await.state, ActionState::Done);
    }
}

#[tokio::test]
async fn many_windows_of_busy_lanes_are_worked_through_one_short_claim_each() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    // 35 busy lanes: three and a half windows.
    let busy: Vec<String> = (0..35).map(|i| format!("busy-{i:02}")).collect();
    start_slow(&db.pool, &registry, &busy).await;
    let base = Utc::now() - Duration::minutes(1);
    for (i, lane) in busy.iter().enumerate() {
        let r = due_at(
            lane,
            &format!("{lane}-next"),
            base + Duration::milliseconds(i as i64),
        );
        enqueue(&db.pool, &registry, r).await;
    }
    let idle = enqueue(
        &db.pool,
        &registry,
        due_at("idle", "idle", base + Duration::seconds(1)),
    )
    .await;
    let ex = Executor::new(db.pool.clone(), registry.clone(), window_config()).unwrap();
    // Each round's short claim demotes one window of them, and its second look sees past it:
    // after three rounds fewer than a window are left in front of the idle lane.
    let mut rounds = 0;
    while view(&db.pool, idle).await.state != ActionState::Done {
        rounds += 1;
        assert!(
            rounds <= 3,
            "the idle lane still waits after {rounds} rounds"
        );
        ex.run_once().await.unwrap();
    }
    assert!(stranded(&db.pool).await.is_empty());
}

#[tokio::test]
async fn every_way_out_of_executing_gives_the_lane_its_hint_back() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    // One lane per way out; each head runs, each next action waits behind it.
    let lanes = ["done", "retry", "release", "erase", "sweep"];
    for lane in lanes {
        let mut r = req(lane, &format!("{lane}-head"));
        if lane == "erase" {
            r = r.subject("acct-erase");
        }
        if lane == "sweep" {
            // Its only attempt loses its lease: the lease sweep ends it.
            r.max_attempts = Some(1);
        }
        enqueue(&db.pool, &registry, r).await;
    }
    let running = store::claim(&db.pool, 100, 20_000, None, &[KIND], 1000, &[])
        .await
        .unwrap();
    assert_eq!(running.len(), lanes.len());
    let head = |lane: &str| running.iter().find(|r| r.lane_key == lane).unwrap().clone();
    let mut next = std::collections::HashMap::new();
    for lane in lanes {
        next.insert(
            lane,
            enqueue(&db.pool, &registry, req(lane, &format!("{lane}-next"))).await,
        );
    }
    assert_eq!(store::demote(&db.pool, 1000, None).await.unwrap(), 5);
    for lane in lanes {
        assert!(!hint(&db.pool, next[lane]).await);
    }
    assert!(stranded(&db.pool).await.is_empty());

    // Completion to an end.
    store::complete(&db.pool, &[finished(&head("done"), DONE)], None)
        .await
        .unwrap();
    assert!(hint(&db.pool, next["done"]).await);
    // Completion back to ADMITTED (a retry): the head is first again and carries the hint;
    // the next one rightly stays behind it.
    store::complete(&db.pool, &[finished(&head("retry"), AGAIN)], None)
        .await
        .unwrap();
    assert!(hint(&db.pool, head("retry").id).await);
    // Release.
    let r = head("release");
    assert_eq!(
        store::release(&db.pool, &[r.id], &[r.epoch], &[])
            .await
            .unwrap(),
        vec![r.id]
    );
    assert!(hint(&db.pool, r.id).await);
    // Erasure of the running action.
    assert_eq!(
        wharf::outbox::erase_subject(&db.pool, "acct-erase")
            .await
            .unwrap(),
        1
    );
    assert!(hint(&db.pool, next["erase"]).await);
    // The lease sweep.
    let later = Some(Utc::now() + Duration::minutes(5));
    let swept = store::sweep_lease_lost(&db.pool, 100, later).await.unwrap();
    assert_eq!(swept.len(), 1);
    assert_eq!(swept[0].0, head("sweep").id);
    assert!(hint(&db.pool, next["sweep"]).await);
    assert!(stranded(&db.pool).await.is_empty());

    // And each lane's first unstarted action is a head a claim takes.
    let claimed: BTreeSet<i64> = store::claim(&db.pool, 100, 20_000, None, &[KIND], 1000, &[])
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    let expected: BTreeSet<i64> = [
        next["done"],
        head("retry").id,
        head("release").id,
        next["erase"],
        next["sweep"],
    ]
    .into();
    assert_eq!(claimed, expected);
}

#[tokio::test]
async fn a_backlogged_lane_gets_one_promotion_per_action_and_none_at_a_claim() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let ids: Vec<i64> = {
        let mut ids = Vec::new();
        for key in ["a", "b", "c"] {
            ids.push(enqueue(&db.pool, &registry, req("lane", key)).await);
        }
        ids
    };
    let hints = || async {
        let mut h = Vec::new();
        for &id in &ids {
            h.push(hint(&db.pool, id).await);
        }
        h
    };
    let claim_one = || store::claim(&db.pool, 10, SLOW_LEASE_MS, None, &[KIND], 1000, &[]);
    let a = claim_one().await.unwrap().remove(0);
    assert_eq!(a.id, ids[0]);
    // b waits behind the running a, c behind the unstarted b.
    assert_eq!(store::demote(&db.pool, 1000, None).await.unwrap(), 2);
    assert_eq!(hints().await, [true, false, false]);
    store::complete(&db.pool, &[finished(&a, DONE)], None)
        .await
        .unwrap();
    // An ended action has no hint (it left wharf.action_live): the live ones' hints from here.
    assert_eq!(hints().await[1..], [true, false]);
    // Claiming b leaves c as it is: the lane is busy, so c needs no hint until b leaves.
    let b = claim_one().await.unwrap().remove(0);
    assert_eq!(b.id, ids[1]);
    assert_eq!(hints().await[1..], [true, false]);
    assert!(stranded(&db.pool).await.is_empty());
    assert_eq!(store::demote(&db.pool, 1000, None).await.unwrap(), 0);
    store::complete(&db.pool, &[finished(&b, DONE)], None)
        .await
        .unwrap();
    assert_eq!(hints().await[2..], [true]);
    assert_eq!(claim_one().await.unwrap().remove(0).id, ids[2]);
}

/// Waits until a statement on this test's database waits for a lock.
async fn until_someone_waits_for_a_lock(pool: &sqlx::PgPool) {
    for _ in 0..3_000 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(StdDuration::from_millis(10)).await;
    }
    panic!("no statement waited for a lock within 30 s");
}

/// One busy lane: its head EXECUTING (returned), its next action due with the hint on.
async fn one_busy_lane(
    pool: &sqlx::PgPool,
    registry: &wharf::outbox::Registry,
    subject: Option<&str>,
) -> (ClaimedRow, i64) {
    let mut r = req("lane", "head");
    if let Some(s) = subject {
        r = r.subject(s);
    }
    enqueue(pool, registry, r).await;
    let head = store::claim(pool, 10, SLOW_LEASE_MS, None, &[KIND], 1000, &[])
        .await
        .unwrap()
        .remove(0);
    let next = enqueue(pool, registry, req("lane", "next")).await;
    assert!(hint(pool, next).await);
    (head, next)
}

/// A completion of `head` (DONE) that has moved it and not committed: it holds the live row
/// until the caller commits or drops it.
async fn completing(
    pool: &sqlx::PgPool,
    head: &ClaimedRow,
) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut completion = pool.begin().await.unwrap();
    let done = [finished(head, DONE)];
    assert_eq!(
        store::complete(&mut *completion, &done, None)
            .await
            .unwrap()
            .len(),
        1
    );
    completion
}

#[tokio::test]
async fn a_completion_that_comes_after_the_demotion_waits_for_it_and_restores_the_hint() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let (head, next) = one_busy_lane(&db.pool, &registry, None).await;
    // The demotion has taken its locks (the head shared, the next row for update) and has not
    // committed yet.
    let mut demotion = db.pool.begin().await.unwrap();
    assert_eq!(store::demote(&mut *demotion, 1000, None).await.unwrap(), 1);
    // The head's completion must wait: were it to commit now, its trigger would see the hint
    // still on, and the demotion would then strand the lane.
    let pool = db.pool.clone();
    let completion = tokio::spawn(async move {
        store::complete(&pool, &[finished(&head, DONE)], None)
            .await
            .unwrap()
    });
    until_someone_waits_for_a_lock(&db.pool).await;
    assert!(!completion.is_finished());
    demotion.commit().await.unwrap();
    assert_eq!(completion.await.unwrap().len(), 1);
    assert!(
        hint(&db.pool, next).await,
        "the completion's trigger restores the hint"
    );
    assert!(stranded(&db.pool).await.is_empty());
}

#[tokio::test]
async fn a_demotion_passes_over_a_busy_lane_whose_completion_is_in_flight() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let (head, next) = one_busy_lane(&db.pool, &registry, None).await;
    // The completion has updated the head (its trigger found the hint on) and not committed.
    let completion = completing(&db.pool, &head).await;
    // The demotion still sees the head EXECUTING, but must neither wait nor demote.
    let demoted = tokio::time::timeout(
        StdDuration::from_secs(30),
        store::demote(&db.pool, 1000, None),
    )
    .await
    .expect("a demotion never waits for a lock")
    .unwrap();
    assert_eq!(demoted, 0);
    // Rolled back, the head is EXECUTING again, and the demotion goes ahead.
    completion.rollback().await.unwrap();
    assert_eq!(store::demote(&db.pool, 1000, None).await.unwrap(), 1);
    assert!(!hint(&db.pool, next).await);
    assert!(stranded(&db.pool).await.is_empty());
    // Now with the next action demoted: the completion's trigger puts the hint back (not yet
    // committed), and a demotion meanwhile changes nothing.
    let completion = completing(&db.pool, &head).await;
    assert_eq!(store::demote(&db.pool, 1000, None).await.unwrap(), 0);
    completion.commit().await.unwrap();
    assert!(hint(&db.pool, next).await);
    assert!(stranded(&db.pool).await.is_empty());
}

/// Erasure deletes an action in whichever table holds it, even one that a completion moves to
/// wharf.action_ended while the erasure waits for its live row (0060): the live row is gone
/// when the wait ends, and only a later statement's snapshot sees the ended one. With erasure
/// as one statement over both tables (before `erase_subject_ended.sql`) this test fails: the
/// ended action and its key stay.
#[tokio::test]
async fn an_erasure_that_waits_for_a_completion_still_erases_the_ended_action() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let (head, next) = one_busy_lane(&db.pool, &registry, Some("acct")).await;
    let completion = completing(&db.pool, &head).await;
    let erasure = tokio::spawn({
        let pool = db.pool.clone();
        async move { wharf::outbox::erase_subject(&pool, "acct").await }
    });
    until_someone_waits_for_a_lock(&db.pool).await;
    completion.commit().await.unwrap();
    assert_eq!(erasure.await.unwrap().unwrap(), 1);
    let left: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM wharf.action WHERE id = $1)
              + (SELECT count(*) FROM wharf.action_key WHERE action_id = $1)",
    )
    .bind(head.id)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(left, 0, "the ended action or its key survived the erasure");
    assert!(hint(&db.pool, next).await);
    assert!(stranded(&db.pool).await.is_empty());
}

/// The operator's row lock asks twice for the same reason erasure runs two statements: the
/// cancel waits for the live row a completion holds, the completion moves the action, and the
/// cancel must say it ended (DONE), not that it does not exist. With one ask, it answers
/// NotFound.
#[tokio::test]
async fn an_operator_cancel_that_waits_for_a_completion_finds_the_ended_action() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let (head, _next) = one_busy_lane(&db.pool, &registry, None).await;
    let completion = completing(&db.pool, &head).await;
    let cancel = tokio::spawn({
        let pool = db.pool.clone();
        async move {
            let mut conn = pool.acquire().await.unwrap();
            let op = wharf::outbox::Operator::new("alice@example.org", "corr-race");
            wharf::outbox::cancel(&mut conn, &op, head.id).await
        }
    });
    until_someone_waits_for_a_lock(&db.pool).await;
    completion.commit().await.unwrap();
    match cancel.await.unwrap() {
        Err(wharf::outbox::Error::NotCancellable { id, state }) => {
            assert_eq!((id, state), (head.id, ActionState::Done));
        }
        other => panic!("expected NotCancellable for the ended action, got {other:?}"),
    }
    let audited: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.operator_audit")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(audited, 0, "a refused cancel wrote an audit row");
}

#[tokio::test]
async fn an_erasure_in_a_repeatable_read_transaction_fails_rather_than_strand_the_lane() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let (_head, next) = one_busy_lane(&db.pool, &registry, Some("acct")).await;
    let mut erasure = db
        .pool
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .await
        .unwrap();
    // The snapshot is taken here, before the demotion commits.
    sqlx::query("SELECT 1")
        .execute(&mut *erasure)
        .await
        .unwrap();
    assert_eq!(store::demote(&db.pool, 1000, None).await.unwrap(), 1);
    // Its trigger cannot see the demotion; it must not decide from the stale hint.
    let err = store::erase_subject(&mut erasure, "acct")
        .await
        .unwrap_err();
    let code = err
        .as_database_error()
        .and_then(|e| e.code())
        .map(|c| c.into_owned());
    assert_eq!(code.as_deref(), Some("40001"), "{err}");
    erasure.rollback().await.unwrap();
    assert!(stranded(&db.pool).await.is_empty());

    // Retried, it succeeds and the lane's next action is a head again.
    let mut erasure = db
        .pool
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .await
        .unwrap();
    assert_eq!(store::erase_subject(&mut erasure, "acct").await.unwrap(), 1);
    erasure.commit().await.unwrap();
    assert!(hint(&db.pool, next).await);
    assert!(stranded(&db.pool).await.is_empty());
}

/// One worker of [`racing_claims_demotions_and_completions_never_strand_a_lane`]: claims a few
/// heads through a small window, demotes after a short claim, and ends or gives back a random
/// part of what it holds (the rest keeps running, so lanes stay busy across rounds).
async fn worker(pool: sqlx::PgPool, seed: u64, rounds_max: u32) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut held: Vec<ClaimedRow> = Vec::new();
    for _ in 0..rounds_max {
        let claimed = match store::claim(&pool, 3, SLOW_LEASE_MS, None, &[KIND], 6, &[]).await {
            Ok(rows) => rows,
            // Two workers took heads of one lane at once; the unique index let one win.
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Vec::new(),
            Err(e) => panic!("claim: {e}"),
        };
        let short = claimed.len() < 3;
        held.extend(claimed);
        if short {
            store::demote(&pool, 6, None).await.unwrap();
        }
        let mut ends = Vec::new();
        let mut releases = Vec::new();
        let mut keep = Vec::new();
        for row in held.drain(..) {
            match rng.gen_range(0..10) {
                0..=3 => ends.push(finished(&row, DONE)),
                4 => ends.push(finished(&row, AGAIN)),
                5 => releases.push(row),
                _ => keep.push(row),
            }
        }
        held = keep;
        if !ends.is_empty() {
            let recorded = store::complete(&pool, &ends, None).await.unwrap();
            assert_eq!(recorded.len(), ends.len());
        }
        if !releases.is_empty() {
            let ids: Vec<i64> = releases.iter().map(|r| r.id).collect();
            let epochs: Vec<i64> = releases.iter().map(|r| r.epoch).collect();
            assert_eq!(
                store::release(&pool, &ids, &epochs, &[])
                    .await
                    .unwrap()
                    .len(),
                ids.len()
            );
        }
        if held.is_empty() {
            let open: i64 =
                sqlx::query_scalar("SELECT count(*) FROM wharf.action WHERE ended_at IS NULL")
                    .fetch_one(&pool)
                    .await
                    .unwrap();
            if open == 0 {
                return;
            }
        }
    }
    panic!("worker {seed}: actions left after {rounds_max} rounds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_claims_demotions_and_completions_never_strand_a_lane() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    const LANES: usize = 24;
    const PER_LANE: usize = 4;
    for i in 0..PER_LANE {
        for lane in 0..LANES {
            enqueue(
                &db.pool,
                &registry,
                req(&format!("l{lane:02}"), &format!("l{lane:02}-{i}")),
            )
            .await;
        }
    }
    // Every committed state must keep the invariant: a checker looks all the time, and a
    // demoter runs beside the workers' own demotions.
    let stop = Arc::new(AtomicBool::new(false));
    let checker = {
        let (pool, stop) = (db.pool.clone(), stop.clone());
        tokio::spawn(async move {
            let mut looks = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let lanes = stranded(&pool).await;
                assert!(lanes.is_empty(), "stranded after {looks} looks: {lanes:?}");
                looks += 1;
            }
            looks
        })
    };
    let demoter = {
        let (pool, stop) = (db.pool.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                store::demote(&pool, 6, None).await.unwrap();
            }
        })
    };
    let workers: Vec<_> = (0..3)
        .map(|seed| tokio::spawn(worker(db.pool.clone(), seed, 2_000)))
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    demoter.await.unwrap();
    assert!(checker.await.unwrap() > 0);
    let done: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.action WHERE state = 'DONE'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(done, (LANES * PER_LANE) as i64);
}
