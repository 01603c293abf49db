//! Expiry, retention, erasure and the NOTIFY wake-up hint.

use std::time::Duration;

use chrono::Utc;
use sqlx::postgres::PgListener;
use wharf::outbox::{ActionState, Executor, StopReason, delete_ended_before, erase_subject};
use wharf_testkit::TestDb;

use super::support::*;

#[tokio::test]
async fn unstarted_actions_past_their_expiry_end_expired() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let t = Utc::now();
    let mut r = req("lane", "expiring");
    r.expires_at = Some(t + chrono::Duration::hours(1));
    let expiring = enqueue(&db.pool, &registry, r).await;
    let mut p = req("lane2", "proposal");
    p.proposed = true;
    p.expires_at = Some(t + chrono::Duration::hours(1));
    let proposal = enqueue(&db.pool, &registry, p).await;
    let mut keeps = req("lane3", "keeps");
    keeps.expires_at = Some(t + chrono::Duration::hours(3));
    let keeps = enqueue(&db.pool, &registry, keeps).await;
    let ex = executor(&db.pool, &registry);
    let report = ex
        .drain_at(Some(t + chrono::Duration::hours(2)))
        .await
        .unwrap();
    assert!(report.finished);
    for id in [expiring, proposal] {
        let v = view(&db.pool, id).await;
        assert_eq!(
            (v.state, v.stop_reason),
            (ActionState::Cancelled, Some(StopReason::Expired))
        );
        assert!(v.payload.is_none());
    }
    assert_eq!(view(&db.pool, keeps).await.state, ActionState::Done);
    assert_eq!(
        fake.seen().iter().map(|s| s.action_id).collect::<Vec<_>>(),
        vec![keeps]
    );
}

#[tokio::test]
async fn retention_deletes_only_ended_actions_before_the_cutoff_in_batches() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let mut ended = Vec::new();
    for i in 0..5 {
        ended.push(enqueue(&db.pool, &registry, req(&format!("l{i}"), &format!("k{i}"))).await);
    }
    executor(&db.pool, &registry).drain().await.unwrap();
    let live = enqueue(&db.pool, &registry, req("live", "live")).await;
    let mut oldest = None;
    for id in &ended {
        let at = view(&db.pool, *id).await.ended_at.unwrap();
        oldest = Some(oldest.map_or(at, |o: chrono::DateTime<Utc>| o.min(at)));
    }
    let oldest = oldest.unwrap();
    // Strictly before the cutoff: the oldest survives a cutoff equal to its end.
    assert_eq!(delete_ended_before(&db.pool, oldest, 100).await.unwrap(), 0);
    let later = Utc::now() + chrono::Duration::seconds(1);
    assert_eq!(delete_ended_before(&db.pool, later, 2).await.unwrap(), 2);
    assert_eq!(delete_ended_before(&db.pool, later, 100).await.unwrap(), 3);
    assert_eq!(delete_ended_before(&db.pool, later, 100).await.unwrap(), 0);
    assert_eq!(view(&db.pool, live).await.state, ActionState::Admitted);
    // The executor's retention uses its configured age.
    executor(&db.pool, &registry).drain().await.unwrap();
    let mut c = config();
    c.retention_ms = 0;
    let ex = Executor::new(db.pool.clone(), registry.clone(), c).unwrap();
    assert_eq!(ex.retain().await.unwrap(), 1);
    assert!(wharf::outbox::get(&db.pool, live).await.unwrap().is_none());
    let c = config();
    assert_eq!(c.retention_ms, 30 * 24 * 3600 * 1000, "30 days by default");
}

#[tokio::test]
async fn erasure_deletes_every_action_of_the_subject_and_nothing_else() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let done = enqueue(&db.pool, &registry, req("a", "done").subject("acct")).await;
    executor(&db.pool, &registry).drain().await.unwrap();
    let pending = enqueue(&db.pool, &registry, req("b", "pending").subject("acct")).await;
    let mut p = req("c", "proposed").subject("acct");
    p.proposed = true;
    let proposed = enqueue(&db.pool, &registry, p).await;
    let executing = enqueue(&db.pool, &registry, req("d", "executing").subject("acct")).await;
    wharf::testing::outbox::claim(&db.pool, 10, 20_000, None, &[KIND], 1000, &[])
        .await
        .unwrap();
    let other = enqueue(
        &db.pool,
        &registry,
        req("b", "other").subject("someone-else"),
    )
    .await;
    let none = enqueue(&db.pool, &registry, req("e", "none")).await;
    // "pending" and "executing" were both claimed above (two lane heads); all four are the
    // subject's, in every state.
    assert_eq!(erase_subject(&db.pool, "acct").await.unwrap(), 4);
    assert_eq!(erase_subject(&db.pool, "acct").await.unwrap(), 0);
    for id in [done, pending, proposed, executing] {
        assert!(wharf::outbox::get(&db.pool, id).await.unwrap().is_none());
    }
    // The lane of an erased pending action moves on; the erased ones never run.
    fake.seen.lock().unwrap().clear();
    executor(&db.pool, &registry).drain().await.unwrap();
    // (Two lanes, one batch: they run side by side, in either order.)
    let mut ran: Vec<i64> = fake.seen().iter().map(|s| s.action_id).collect();
    ran.sort();
    assert_eq!(ran, vec![other, none]);
}

#[tokio::test]
async fn erasing_a_lane_head_lets_the_lane_go_on() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let mut p = req("lane", "head").subject("acct");
    p.proposed = true;
    enqueue(&db.pool, &registry, p).await;
    enqueue(&db.pool, &registry, req("lane", "second").subject("acct")).await;
    let third = enqueue(&db.pool, &registry, req("lane", "third")).await;
    let ex = executor(&db.pool, &registry);
    ex.drain().await.unwrap(); // demotes "third" behind the proposal
    assert!(fake.seen().is_empty());
    assert_eq!(erase_subject(&db.pool, "acct").await.unwrap(), 2);
    ex.drain().await.unwrap();
    assert_eq!(
        fake.seen().iter().map(|s| s.action_id).collect::<Vec<_>>(),
        vec![third]
    );
}

/// Receives the next notification on the outbox channel.
async fn next_payload(listener: &mut PgListener) -> String {
    tokio::time::timeout(Duration::from_secs(30), listener.recv())
        .await
        .expect("a notification")
        .unwrap()
        .payload()
        .to_owned()
}

async fn marker(pool: &sqlx::PgPool) {
    sqlx::query("SELECT pg_notify('wharf_action', 'marker')")
        .execute(pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn enqueue_sends_one_hint_per_transaction_and_none_when_off() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let mut listener = PgListener::connect_with(&db.pool).await.unwrap();
    listener
        .listen(wharf::outbox::NOTIFY_CHANNEL)
        .await
        .unwrap();

    // On: a batch of due actions in one transaction wakes once.
    let mut tx = db.pool.begin().await.unwrap();
    let reqs = (0..50)
        .map(|i| req(&format!("l{i}"), &format!("k{i}")))
        .collect();
    wharf::outbox::enqueue_many(&mut tx, &registry, reqs)
        .await
        .unwrap();
    wharf::outbox::enqueue(&mut tx, &registry, req("x", "x"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    marker(&db.pool).await;
    assert_eq!(next_payload(&mut listener).await, "");
    assert_eq!(next_payload(&mut listener).await, "marker");

    // A future action needs no wake-up.
    let mut later = req("later", "later");
    later.run_at = Some(Utc::now() + chrono::Duration::hours(1));
    enqueue(&db.pool, &registry, later).await;
    marker(&db.pool).await;
    assert_eq!(next_payload(&mut listener).await, "marker");

    // Off: nothing.
    let mut quiet = (*registry).clone();
    quiet.set_notify(false);
    enqueue(&db.pool, &quiet, req("q", "q")).await;
    marker(&db.pool).await;
    assert_eq!(next_payload(&mut listener).await, "marker");
}

/// The running executor finds work with NOTIFY on (woken) and off (polling).
#[tokio::test]
async fn the_running_executor_picks_up_work_with_notify_on_and_off() {
    for notify in [true, false] {
        let db = TestDb::new().await;
        let (registry, ..) = registry();
        let mut c = config();
        c.notify = notify;
        let ex = Executor::new(db.pool.clone(), registry.clone(), c).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(async move {
            ex.run(async {
                let _ = stopped.await;
            })
            .await
        });
        let mut ids = Vec::new();
        for i in 0..20 {
            ids.push(
                enqueue(
                    &db.pool,
                    &registry,
                    req(&format!("l{}", i % 3), &format!("k{i}")),
                )
                .await,
            );
        }
        let mut all_done = false;
        for _ in 0..3_000 {
            let n: i64 =
                sqlx::query_scalar("SELECT count(*) FROM wharf.action WHERE state = 'DONE'")
                    .fetch_one(&db.pool)
                    .await
                    .unwrap();
            if n == 20 {
                all_done = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.send(()).unwrap();
        running.await.unwrap().unwrap();
        assert!(all_done, "notify {notify}");
    }
}

#[tokio::test]
async fn shutdown_leaves_an_unfinished_action_to_be_reclaimed() {
    let db = TestDb::new().await;
    // A call timeout well past the shutdown grace, so shutdown (not the timeout) cuts it off.
    let fake = Fake::with_call_timeout(KIND, 4_000);
    let mut registry = wharf::outbox::Registry::new();
    registry.register(fake.clone()).unwrap();
    let registry = std::sync::Arc::new(registry);
    fake.script("k", vec![Step::HangAfter]);
    let id = enqueue(&db.pool, &registry, req("lane", "k")).await;
    let mut c = config();
    c.shutdown_grace_ms = 1;
    let ex = Executor::new(db.pool.clone(), registry.clone(), c).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn({
        let ex = ex.clone();
        async move {
            ex.run(async {
                let _ = stopped.await;
            })
            .await
        }
    });
    for _ in 0..3_000 {
        if !fake.seen().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    // Cut off mid-call: still EXECUTING under its lease, nothing lost; later reclaimed (and,
    // as a non-at-most-once kind whose write started, told to read back).
    let v = view(&db.pool, id).await;
    assert_eq!(v.state, ActionState::Executing);
    expire_leases(&db.pool).await;
    ex.drain().await.unwrap();
    let v = view(&db.pool, id).await;
    assert_eq!((v.state, v.attempt), (ActionState::Done, 2));
    assert!(fake.seen()[1].write_started);
}

/// Every action's id, read through `list` two at a time, cursor after cursor.
async fn every_page_of_two(pool: &sqlx::PgPool) -> Vec<i64> {
    use wharf::outbox::{ListFilter, list};
    let mut filter = ListFilter {
        limit: 2,
        ..ListFilter::default()
    };
    let mut seen = Vec::new();
    for _ in 0..10 {
        let page = list(pool, &filter).await.unwrap();
        seen.extend(page.iter().map(|v| v.id));
        if page.len() < 2 {
            break;
        }
        filter.after_id = page.last().map(|v| v.id);
    }
    seen
}

#[tokio::test]
async fn list_pages_in_id_order_with_filters() {
    use wharf::outbox::{ListFilter, list};
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let mut ids = Vec::new();
    for i in 0..5 {
        let tenant = if i % 2 == 0 { "t1" } else { "t2" };
        ids.push(
            enqueue(
                &db.pool,
                &registry,
                req(&format!("l{i}"), &format!("k{i}")).tenant(tenant),
            )
            .await,
        );
    }
    let mut p = req("p", "proposal");
    p.proposed = true;
    let proposal = enqueue(&db.pool, &registry, p).await;

    let seen = every_page_of_two(&db.pool).await;
    let mut all = ids.clone();
    all.push(proposal);
    assert_eq!(seen, all);

    let t1 = ListFilter {
        tenant_id: Some("t1".into()),
        ..ListFilter::default()
    };
    let got: Vec<i64> = list(&db.pool, &t1)
        .await
        .unwrap()
        .iter()
        .map(|v| v.id)
        .collect();
    assert_eq!(got, vec![ids[0], ids[2], ids[4], proposal]);
    let proposed = ListFilter {
        state: Some(ActionState::Proposed),
        kind: Some(KIND.into()),
        ..ListFilter::default()
    };
    let got: Vec<i64> = list(&db.pool, &proposed)
        .await
        .unwrap()
        .iter()
        .map(|v| v.id)
        .collect();
    assert_eq!(got, vec![proposal]);

    // Ended actions (in wharf.action_ended) page in id order among the live ones, and a state
    // filter finds each in its own table.
    let mut conn = db.pool.acquire().await.unwrap();
    let operator = wharf::outbox::Operator::new("alice@example.org", "corr-1");
    wharf::outbox::cancel(&mut conn, &operator, ids[1])
        .await
        .unwrap();
    drop(conn);
    let by_state = |state: ActionState| ListFilter {
        state: Some(state),
        ..ListFilter::default()
    };
    let ids_of =
        |page: Vec<wharf::outbox::ActionView>| page.iter().map(|v| v.id).collect::<Vec<_>>();
    let seen = every_page_of_two(&db.pool).await;
    assert_eq!(seen, all);
    let cancelled = ids_of(
        list(&db.pool, &by_state(ActionState::Cancelled))
            .await
            .unwrap(),
    );
    assert_eq!(cancelled, vec![ids[1]]);
    let admitted = ids_of(
        list(&db.pool, &by_state(ActionState::Admitted))
            .await
            .unwrap(),
    );
    assert_eq!(admitted, vec![ids[0], ids[2], ids[3], ids[4]]);
    let too_many = ListFilter {
        limit: wharf::outbox::LIST_LIMIT_MAX + 1,
        ..ListFilter::default()
    };
    assert!(list(&db.pool, &too_many).await.is_err());
}

/// The due depth per kind as a library call: due rows only (lane heads or not), the not yet due
/// and the ended left out, the oldest one's age.
#[tokio::test]
async fn due_stats_count_what_is_due_per_kind() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    assert!(wharf::outbox::due(&db.pool).await.unwrap().is_empty());
    // Two due in one lane (the second behind the first still counts as due), one not yet due.
    enqueue(&db.pool, &registry, req("lane-1", "a")).await;
    enqueue(&db.pool, &registry, req("lane-1", "b")).await;
    let mut later = req("lane-2", "later");
    later.run_at = Some(Utc::now() + chrono::Duration::hours(1));
    enqueue(&db.pool, &registry, later).await;
    let amo = wharf::outbox::ActionRequest::new(AMO_KIND, "lane-3", "c", serde_json::json!({}))
        .tenant("t1");
    enqueue(&db.pool, &registry, amo).await;
    let stats = wharf::outbox::due(&db.pool).await.unwrap();
    let mut got: Vec<(&str, i64)> = stats.iter().map(|s| (s.kind.as_str(), s.due)).collect();
    got.sort_unstable();
    assert_eq!(got, [(KIND, 2), (AMO_KIND, 1)]);
    assert!(
        stats
            .iter()
            .all(|s| s.oldest_due_s >= 0.0 && s.oldest_due_s < 3600.0)
    );
    // Run: nothing is due any more but the one an hour away, which is not due yet.
    executor(&db.pool, &registry).run_once().await.unwrap();
    executor(&db.pool, &registry).run_once().await.unwrap();
    assert!(wharf::outbox::due(&db.pool).await.unwrap().is_empty());
}
