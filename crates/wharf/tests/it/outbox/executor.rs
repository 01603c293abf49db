//! The executor: lanes, results, retries, deferrals, panics, proposals, budgets, and several
//! replicas at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use serde_json::json;
use wharf::outbox::{
    ActionRequest, ActionState, Adapter, Attempt, Backoff, ClaimBudget, Executor, KindSpec,
    Outcome, Registry, StopReason,
};
use wharf_testkit::TestDb;

use super::support::*;

#[tokio::test]
async fn a_lane_runs_in_id_order_and_ends_done() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(enqueue(&db.pool, &registry, req("lane-a", &format!("a{i}"))).await);
        ids.push(enqueue(&db.pool, &registry, req("lane-b", &format!("b{i}"))).await);
    }
    let report = executor(&db.pool, &registry).drain().await.unwrap();
    assert!(report.finished);
    assert_eq!(report.attempts, 10);
    for lane in ["lane-a", "lane-b"] {
        let order: Vec<i64> = fake
            .seen()
            .iter()
            .filter(|s| s.lane_key == lane)
            .map(|s| s.action_id)
            .collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted, "{lane}");
        assert_eq!(order.len(), 5);
    }
    for id in ids {
        let v = view(&db.pool, id).await;
        assert_eq!(v.state, ActionState::Done);
        assert_eq!(v.stop_reason, Some(StopReason::Done));
        assert_eq!(v.readback_ref, Some(format!("ref-{id}")));
        assert_eq!((v.attempt, v.epoch), (1, 1));
        assert!(v.payload.is_none() && v.ended_at.is_some() && v.lease_expires_at.is_none());
        assert!(v.write_started_at.is_some());
    }
}

#[tokio::test]
async fn one_claim_takes_one_head_per_lane() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    for i in 0..3 {
        enqueue(&db.pool, &registry, req("lane", &format!("k{i}"))).await;
    }
    let claimed = wharf::testing::outbox::claim(&db.pool, 100, 20_000, None, &[KIND], 1000, &[])
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    // While it executes, nothing else of the lane is claimable.
    let again = wharf::testing::outbox::claim(&db.pool, 100, 20_000, None, &[KIND], 1000, &[])
        .await
        .unwrap();
    assert!(again.is_empty());
}

#[tokio::test]
async fn an_admitted_action_waits_for_an_earlier_one_that_is_not_due_yet() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let mut later = req("lane", "first");
    later.run_at = Some(Utc::now() + chrono::Duration::hours(1));
    let first = enqueue(&db.pool, &registry, later).await;
    let second = enqueue(&db.pool, &registry, req("lane", "second")).await;
    let other = enqueue(&db.pool, &registry, req("other", "other")).await;
    let ex = executor(&db.pool, &registry);
    assert_eq!(ex.run_once().await.unwrap(), 1);
    assert_eq!(ex.run_once().await.unwrap(), 0);
    assert_eq!(view(&db.pool, other).await.state, ActionState::Done);
    assert_eq!(view(&db.pool, second).await.state, ActionState::Admitted);
    // Once the first is due, the lane runs in order.
    ex.run_once_at(Some(Utc::now() + chrono::Duration::hours(2)))
        .await
        .unwrap();
    ex.run_once_at(Some(Utc::now() + chrono::Duration::hours(2)))
        .await
        .unwrap();
    let order: Vec<i64> = fake.seen().iter().map(|s| s.action_id).collect();
    assert_eq!(order, vec![other, first, second]);
}

#[tokio::test]
async fn retry_backs_off_then_exhausts_the_attempts() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let retry = Outcome::Retry {
        after: None,
        code: code("provider_503"),
    };
    fake.script(
        "k",
        vec![
            Step::Fenced(retry.clone()),
            Step::Fenced(retry.clone()),
            Step::Fenced(retry),
        ],
    );
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    let ex = executor(&db.pool, &registry);
    ex.run_once().await.unwrap();
    let v = view(&db.pool, id).await;
    assert_eq!((v.state, v.attempt, v.epoch), (ActionState::Admitted, 1, 1));
    assert!(
        v.write_started_at.is_none(),
        "a proven retry clears the fence"
    );
    assert_eq!(v.error_code.as_deref(), Some("provider_503"));
    // Backoff: 2 s ± 20 % from the completion.
    let wait = (v.run_at - Utc::now()).num_milliseconds();
    assert!((1_000..=2_400).contains(&wait), "{wait}");
    assert_eq!(
        ex.run_once().await.unwrap(),
        0,
        "not due before the backoff"
    );
    ex.drain().await.unwrap();
    let v = view(&db.pool, id).await;
    assert_eq!(v.state, ActionState::Failed);
    assert_eq!(v.stop_reason, Some(StopReason::AttemptsExhausted));
    assert_eq!(v.attempt, 3);
    assert_eq!(fake.seen().len(), 3);
}

#[tokio::test]
async fn retry_after_is_honoured_and_capped() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    fake.script(
        "k",
        vec![Step::Unfenced(Outcome::Retry {
            after: Some(Duration::from_secs(3600)),
            code: code("rate"),
        })],
    );
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    executor(&db.pool, &registry).run_once().await.unwrap();
    let v = view(&db.pool, id).await;
    let wait = (v.run_at - Utc::now()).num_seconds();
    // Capped at the kind's backoff cap, 15 min.
    assert!((890..=900).contains(&wait), "{wait}");
}

#[tokio::test]
async fn defer_does_not_count_an_attempt() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    fake.script(
        "k",
        vec![
            Step::Unfenced(Outcome::Defer {
                until: Duration::from_secs(60),
            }),
            Step::Unfenced(Outcome::Defer {
                until: Duration::from_secs(60),
            }),
        ],
    );
    let mut r = req("lane", "k");
    r.max_attempts = Some(1);
    let id = enqueue(&db.pool, &registry, r).await;
    let ex = executor(&db.pool, &registry);
    ex.run_once().await.unwrap();
    let v = view(&db.pool, id).await;
    assert_eq!((v.state, v.attempt, v.epoch), (ActionState::Admitted, 0, 1));
    assert!((v.run_at - Utc::now()).num_seconds() >= 55);
    ex.drain().await.unwrap();
    let v = view(&db.pool, id).await;
    // Two deferrals and one real attempt, within max_attempts = 1.
    assert_eq!((v.state, v.attempt, v.epoch), (ActionState::Done, 1, 3));
}

#[tokio::test]
async fn each_result_ends_as_the_seed_says() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let cases = [
        (
            "u",
            Step::Fenced(Outcome::Uncertain {
                code: code("reset"),
            }),
            ActionState::Uncertain,
            StopReason::UncertainProvider,
        ),
        (
            "f",
            Step::Fenced(Outcome::Failed {
                code: code("smtp_550"),
            }),
            ActionState::Failed,
            StopReason::ProviderRefused,
        ),
        (
            "c",
            Step::Unfenced(Outcome::Cancelled {
                code: code("unsubscribed"),
            }),
            ActionState::Cancelled,
            StopReason::CancelledByAdapter,
        ),
    ];
    let mut ids = Vec::new();
    for (key, step, ..) in &cases {
        fake.script(key, vec![step.clone()]);
        ids.push(enqueue(&db.pool, &registry, req(key, key)).await);
    }
    executor(&db.pool, &registry).drain().await.unwrap();
    for ((_, _, state, reason), id) in cases.iter().zip(ids) {
        let v = view(&db.pool, id).await;
        assert_eq!((v.state, v.stop_reason), (*state, Some(*reason)));
        assert!(v.payload.is_none() && v.ended_at.is_some() && v.error_code.is_some());
        assert_eq!(v.attempt, 1);
    }
}

#[tokio::test]
async fn a_panic_is_a_retry_before_the_fence_and_uncertain_after() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    fake.script("before", vec![Step::PanicBefore]);
    fake.script("after", vec![Step::PanicAfter]);
    let before = enqueue(&db.pool, &registry, req("l1", "before")).await;
    let after = enqueue(&db.pool, &registry, req("l2", "after")).await;
    let ex = executor(&db.pool, &registry);
    ex.run_once().await.unwrap();
    let v = view(&db.pool, before).await;
    assert_eq!((v.state, v.attempt), (ActionState::Admitted, 1));
    assert_eq!(v.error_code.as_deref(), Some("adapter_panic"));
    let v = view(&db.pool, after).await;
    assert_eq!(
        (v.state, v.stop_reason),
        (ActionState::Uncertain, Some(StopReason::UncertainProvider))
    );
    assert_eq!(v.error_code.as_deref(), Some("adapter_panic"));
    ex.drain().await.unwrap();
    assert_eq!(view(&db.pool, before).await.state, ActionState::Done);
    assert_eq!(
        fake.seen().iter().filter(|s| s.action_id == after).count(),
        1,
        "never sent again"
    );
}

#[tokio::test]
async fn a_timeout_after_the_fence_is_uncertain() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    fake.script("k", vec![Step::HangAfter]);
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    executor(&db.pool, &registry).drain().await.unwrap();
    let v = view(&db.pool, id).await;
    assert_eq!(
        (v.state, v.stop_reason),
        (ActionState::Uncertain, Some(StopReason::UncertainProvider))
    );
    assert_eq!(v.error_code.as_deref(), Some("adapter_timeout"));
}

#[tokio::test]
async fn proposals_wait_for_admit_or_refuse_and_hold_their_lane() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let mut p1 = req("lane", "p1");
    p1.proposed = true;
    let p1 = enqueue(&db.pool, &registry, p1).await;
    let behind = enqueue(&db.pool, &registry, req("lane", "behind")).await;
    let mut p2 = req("lane2", "p2");
    p2.proposed = true;
    let p2 = enqueue(&db.pool, &registry, p2).await;
    let ex = executor(&db.pool, &registry);
    ex.drain().await.unwrap();
    assert!(fake.seen().is_empty(), "nothing runs behind a proposal");
    assert_eq!(view(&db.pool, p1).await.state, ActionState::Proposed);
    assert_eq!(view(&db.pool, behind).await.state, ActionState::Admitted);

    assert!(wharf::outbox::refuse(&db.pool, p1).await.unwrap());
    assert!(
        !wharf::outbox::refuse(&db.pool, p1).await.unwrap(),
        "a second refusal changes nothing"
    );
    assert!(!wharf::outbox::admit(&db.pool, p1).await.unwrap());
    let v = view(&db.pool, p1).await;
    assert_eq!(
        (v.state, v.stop_reason),
        (ActionState::Cancelled, Some(StopReason::Refused))
    );
    assert!(v.payload.is_none());

    assert!(wharf::outbox::admit(&db.pool, p2).await.unwrap());
    ex.drain().await.unwrap();
    assert_eq!(view(&db.pool, behind).await.state, ActionState::Done);
    assert_eq!(view(&db.pool, p2).await.state, ActionState::Done);
}

#[tokio::test]
async fn an_operator_decision_on_a_proposal_answers_with_the_action_or_why_not() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let mut p = req("lane", "p");
    p.proposed = true;
    let p = enqueue(&db.pool, &registry, p).await;
    let mut conn = db.pool.acquire().await.unwrap();

    let admitted = wharf::outbox::admit_proposal(&mut conn, p).await.unwrap();
    assert_eq!((admitted.id, admitted.state), (p, ActionState::Admitted));
    // Not a proposal any more: refused with the state it is in, and nothing changes.
    for (result, asked) in [
        (
            wharf::outbox::admit_proposal(&mut conn, p).await,
            "admitted",
        ),
        (
            wharf::outbox::refuse_proposal(&mut conn, p).await,
            "refused",
        ),
    ] {
        match result {
            Err(wharf::outbox::Error::NotProposed {
                id,
                state,
                asked: a,
            }) => {
                assert_eq!((id, state, a), (p, ActionState::Admitted, asked));
            }
            other => panic!("{asked}: {other:?}"),
        }
    }
    assert_eq!(view(&db.pool, p).await.state, ActionState::Admitted);
    assert!(matches!(
        wharf::outbox::refuse_proposal(&mut conn, p + 1_000).await,
        Err(wharf::outbox::Error::NotFound(id)) if id == p + 1_000
    ));
}

#[tokio::test]
async fn a_claim_budget_keeps_actions_out_of_executing() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    for i in 0..3 {
        enqueue(
            &db.pool,
            &registry,
            req(&format!("lane{i}"), &format!("k{i}")),
        )
        .await;
    }
    let ex = executor(&db.pool, &registry);
    *fake.budget.lock().unwrap() = ClaimBudget::AtMost(0);
    assert_eq!(ex.run_once().await.unwrap(), 0);
    *fake.budget.lock().unwrap() = ClaimBudget::AtMost(1);
    assert_eq!(ex.run_once().await.unwrap(), 1);
    let states: Vec<(String, i32)> =
        sqlx::query_as("SELECT state, attempt FROM wharf.action ORDER BY id")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(states.iter().filter(|(s, _)| s == "DONE").count(), 1);
    // Whatever the claim returned beyond the budget went back without an attempt.
    assert!(
        states
            .iter()
            .filter(|(s, _)| s != "DONE")
            .all(|(s, a)| s == "ADMITTED" && *a == 0),
        "{states:?}"
    );
    *fake.budget.lock().unwrap() = ClaimBudget::Unlimited;
    ex.drain().await.unwrap();
    assert_eq!(fake.seen().len(), 3);
}

#[tokio::test]
async fn configuration_bounds_are_checked() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    type Change = Box<dyn Fn(&mut wharf::outbox::ExecutorConfig)>;
    let bad: Vec<Change> = vec![
        Box::new(|c| c.claim_batch_max = 0),
        Box::new(|c| c.claim_batch_max = 101),
        Box::new(|c| c.claim_scan_max = 10),
        Box::new(|c| c.concurrency_max = 0),
        Box::new(|c| c.lease_ms = c.fence_margin_ms),
        Box::new(|c| c.fence_margin_ms = 2_000), // the fake's call timeout is 2 s
        Box::new(|c| c.poll_interval_ms_max = 1),
    ];
    for change in bad {
        let mut c = config();
        change(&mut c);
        assert!(
            Executor::new(db.pool.clone(), registry.clone(), c.clone()).is_err(),
            "{c:?}"
        );
    }
    let mut c = config();
    c.claim_batch_max = 100;
    c.fence_margin_ms = 2_001;
    assert!(Executor::new(db.pool.clone(), registry.clone(), c).is_ok());
    // A kind is registered once, with a valid spec.
    let mut r = Registry::new();
    r.register(Fake::new("x", false, false)).unwrap();
    assert!(r.register(Fake::new("x", false, false)).is_err());
    assert!(r.register(Fake::new("Bad Name", false, false)).is_err());
}

/// Records, per lane, what runs when: overlaps and order.
struct Recorder {
    running: Mutex<HashMap<String, i64>>,
    running_ids: Mutex<std::collections::HashSet<i64>>,
    order: Mutex<HashMap<String, Vec<i64>>>,
    violations: Mutex<Vec<String>>,
}

#[async_trait]
impl Adapter for Recorder {
    fn spec(&self) -> KindSpec {
        KindSpec {
            name: KIND,
            at_most_once: false,
            instance_level: false,
            max_attempts_default: 3,
            backoff: Backoff::default(),
            call_timeout_ms: 2_000,
        }
    }

    async fn execute(&self, attempt: &mut Attempt) -> Outcome {
        let lane = attempt.lane_key().to_owned();
        let id = attempt.action_id();
        {
            let mut running = self.running.lock().unwrap();
            if let Some(other) = running.insert(lane.clone(), id) {
                self.violations
                    .lock()
                    .unwrap()
                    .push(format!("{lane}: {id} overlaps {other}"));
            }
            if !self.running_ids.lock().unwrap().insert(id) {
                self.violations
                    .lock()
                    .unwrap()
                    .push(format!("{id} runs twice at once"));
            }
        }
        if attempt.fence().begin_write().await.is_err() {
            self.running.lock().unwrap().remove(&lane);
            self.running_ids.lock().unwrap().remove(&id);
            return Outcome::Abandoned;
        }
        self.order
            .lock()
            .unwrap()
            .entry(lane.clone())
            .or_default()
            .push(id);
        // Give other tasks and replicas a chance to step on this lane.
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        self.running.lock().unwrap().remove(&lane);
        self.running_ids.lock().unwrap().remove(&id);
        Outcome::Done { readback_ref: None }
    }
}

#[tokio::test]
async fn several_replicas_never_overlap_a_lane_and_keep_its_order() {
    replicas_keep_every_lane(40, [1, 1, 1]).await;
}

/// The same with claims that come back full (300 lanes, so 300 heads at once for batches of
/// 25): a second claim goes out while the first runs (`claims_in_flight_max` 2 and 4 on two
/// of the replicas), and still no lane overlaps or runs out of order.
#[tokio::test]
async fn claims_in_flight_beside_each_other_keep_every_lane() {
    replicas_keep_every_lane(300, [1, 2, 4]).await;
}

/// 3,000 actions over `lanes` lanes, drained by three replicas with these
/// `claims_in_flight_max`: every action runs once, no two of a lane at once, each lane in id
/// order.
async fn replicas_keep_every_lane(lanes: usize, in_flight: [u32; 3]) {
    let db = TestDb::new().await;
    let recorder = Arc::new(Recorder {
        running: Mutex::new(HashMap::new()),
        running_ids: Mutex::new(Default::default()),
        order: Mutex::new(HashMap::new()),
        violations: Mutex::new(Vec::new()),
    });
    let mut registry = Registry::new();
    registry.register(recorder.clone()).unwrap();
    registry.set_notify(false);
    let registry = Arc::new(registry);
    const ACTIONS: usize = 3_000;
    let reqs: Vec<ActionRequest> = (0..ACTIONS)
        .map(|i| {
            ActionRequest::new(
                KIND,
                format!("lane-{}", i % lanes),
                format!("k{i}"),
                json!({"i": i}),
            )
            .tenant("t")
        })
        .collect();
    let mut conn = db.pool.acquire().await.unwrap();
    let ids: Vec<i64> = wharf::outbox::enqueue_many(&mut conn, &registry, reqs)
        .await
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    drop(conn);

    let (stop_tx, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut replicas = Vec::new();
    for claims in in_flight {
        let pool = db.another_pool(4).await;
        let mut c = config();
        c.concurrency_max = 16;
        c.claim_batch_max = 25;
        c.claims_in_flight_max = claims;
        let ex = Executor::new(pool, registry.clone(), c).unwrap();
        let mut stop = stop_tx.subscribe();
        replicas.push(tokio::spawn(async move {
            ex.run(async move {
                let _ = stop.recv().await;
            })
            .await
        }));
    }
    // Wait until everything ended (bounded: a hang fails the test instead of running forever).
    let mut done = 0;
    for _ in 0..6_000 {
        done =
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM wharf.action WHERE state = 'DONE'")
                .fetch_one(&db.pool)
                .await
                .unwrap();
        if done == ACTIONS as i64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop_tx.send(()).unwrap();
    for r in replicas {
        r.await.unwrap().unwrap();
    }
    assert_eq!(done, ACTIONS as i64);
    assert_eq!(*recorder.violations.lock().unwrap(), Vec::<String>::new());
    let order = recorder.order.lock().unwrap();
    let mut total = 0;
    for (lane, ran) in order.iter() {
        let expected: Vec<i64> = ids
            .iter()
            .enumerate()
            .filter(|(i, _)| format!("lane-{}", i % lanes) == *lane)
            .map(|(_, id)| *id)
            .collect();
        assert_eq!(ran, &expected, "{lane} ran out of order or twice");
        total += ran.len();
    }
    assert_eq!(total, ACTIONS, "every action ran exactly once");
}

/// An adapter learns when its action was enqueued: the row's own `created_at`, on every
/// attempt (a retry included).
#[tokio::test]
async fn an_attempt_says_when_its_action_was_enqueued() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    fake.script(
        "late",
        vec![
            Step::Fenced(wharf::outbox::Outcome::Retry {
                code: code("provider.busy"),
                after: Some(Duration::ZERO),
            }),
            Step::Fenced(wharf::outbox::Outcome::Done { readback_ref: None }),
        ],
    );
    let id = enqueue(&db.pool, &registry, req("lane-e", "late")).await;
    let created: chrono::DateTime<Utc> =
        sqlx::query_scalar("SELECT created_at FROM wharf.action WHERE id = $1")
            .bind(id)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    executor(&db.pool, &registry).drain().await.unwrap();
    let seen = fake.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen.iter().all(|s| s.enqueued_at == created), "{seen:?}");
}

/// A test clock decides the fences too, through the same batcher as `run` (`fences.rs`): an
/// attempt claimed an hour in the past holds a lease that the database's clock says ended long
/// ago, and on the test clock it still has all of it, so it passes its fence and runs.
#[tokio::test]
async fn fences_under_a_test_clock_are_decided_on_that_clock() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let hour_ago = Utc::now() - chrono::Duration::hours(1);
    let mut past = req("lane", "k");
    past.run_at = Some(hour_ago - chrono::Duration::minutes(1));
    let id = enqueue(&db.pool, &registry, past).await;
    let ex = executor(&db.pool, &registry);
    assert_eq!(ex.run_once_at(Some(hour_ago)).await.unwrap(), 1);
    assert_eq!(fake.seen().len(), 1);
    assert_eq!(view(&db.pool, id).await.state, ActionState::Done);
}

/// The claim's sessions, by their application name.
async fn claim_sessions(pool: &sqlx::PgPool) -> Vec<i32> {
    sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'wharf executor claims'
          ORDER BY pid",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// The claim's connection is held between claims, not pooled (`held.rs`): the same session
/// serves claim after claim, with no ping between them. One that sat idle past its check is
/// pinged before it is used, so a session the server ended meanwhile (a restart, an idle
/// timeout) is replaced and the claim does not fail.
#[tokio::test]
async fn the_claim_keeps_its_session_and_replaces_one_the_server_ended_while_it_was_idle() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let ex = executor(&db.pool, &registry);
    enqueue(&db.pool, &registry, req("lane", "a")).await;
    assert_eq!(ex.drain().await.unwrap().attempts, 1);
    let first = claim_sessions(&db.pool).await;
    assert_eq!(
        first.len(),
        1,
        "one claim in flight, one session kept: {first:?}"
    );
    enqueue(&db.pool, &registry, req("lane", "b")).await;
    assert_eq!(ex.drain().await.unwrap().attempts, 1);
    assert_eq!(
        claim_sessions(&db.pool).await,
        first,
        "the session was not kept"
    );

    let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(first[0])
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(ended);
    tokio::time::sleep(Duration::from_millis(
        wharf::outbox::CONNECTION_IDLE_CHECK_AFTER_MS + 200,
    ))
    .await;
    enqueue(&db.pool, &registry, req("lane", "c")).await;
    let report = ex.drain().await.expect("the claim used the ended session");
    assert_eq!(report.attempts, 1);
    assert_eq!(fake.seen().len(), 3);
    let now = claim_sessions(&db.pool).await;
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now, first);
}
