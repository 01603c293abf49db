//! Enqueue: idempotency, batches, and every SPEC §2.1 bound at its edge.

use std::sync::Arc;

use chrono::{Duration, Utc};
use serde_json::json;
use wharf::outbox::{
    ActionRequest, ActionState, Error, IDEMPOTENCY_KEY_BYTES_MAX, LANE_KEY_BYTES_MAX,
    PAYLOAD_BYTES_MAX_DEFAULT, Registry, SCOPE_BYTES_MAX, enqueue, enqueue_many,
};
use wharf_testkit::TestDb;

use super::support::*;

async fn count(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM wharf.action")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_same_key_and_content_returns_the_first_action_unchanged() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let mut conn = db.pool.acquire().await.unwrap();
    let first = enqueue(&mut conn, &registry, req("lane", "k1"))
        .await
        .unwrap();
    assert!(first.created);
    let before = view(&db.pool, first.id).await;
    // Only content counts: attempts, timing and proposal are not compared and not applied.
    let mut again = req("lane", "k1");
    again.max_attempts = Some(7);
    again.run_at = Some(Utc::now() + Duration::hours(1));
    let second = enqueue(&mut conn, &registry, again).await.unwrap();
    assert_eq!(second.id, first.id);
    assert!(!second.created);
    assert_eq!(view(&db.pool, first.id).await, before);
    assert_eq!(count(&db.pool).await, 1);
}

#[tokio::test]
async fn the_same_key_with_other_content_is_a_conflict_and_writes_nothing() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let mut conn = db.pool.acquire().await.unwrap();
    let first = enqueue(&mut conn, &registry, req("lane", "k1"))
        .await
        .unwrap();
    let variants: Vec<ActionRequest> = vec![
        ActionRequest::new(KIND, "lane", "k1", json!({"n": "other"})).tenant("t1"),
        req("other-lane", "k1"),
        req("lane", "k1").tenant("t2"),
        req("lane", "k1").subject("someone"),
        ActionRequest::new(INSTANCE_KIND, "lane", "k1", json!({"n": "k1"})).tenant("t1"),
    ];
    for variant in variants {
        match enqueue(&mut conn, &registry, variant.clone()).await {
            Err(Error::IdempotencyConflict { key, existing_id }) => {
                assert_eq!(key, "k1");
                assert_eq!(existing_id, first.id);
            }
            other => panic!("{variant:?}: {other:?}"),
        }
    }
    assert_eq!(count(&db.pool).await, 1);
}

#[tokio::test]
async fn the_digest_still_decides_after_the_payload_is_gone() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let id = enqueue_one(&db.pool, &registry, req("lane", "k1")).await;
    executor(&db.pool, &registry).drain().await.unwrap();
    assert!(view(&db.pool, id).await.payload.is_none());
    let mut conn = db.pool.acquire().await.unwrap();
    let again = enqueue(&mut conn, &registry, req("lane", "k1"))
        .await
        .unwrap();
    assert_eq!((again.id, again.created), (id, false));
    let other = ActionRequest::new(KIND, "lane", "k1", json!({"n": "x"})).tenant("t1");
    assert!(matches!(
        enqueue(&mut conn, &registry, other).await,
        Err(Error::IdempotencyConflict { .. })
    ));
}

async fn enqueue_one(pool: &sqlx::PgPool, registry: &Registry, r: ActionRequest) -> i64 {
    super::support::enqueue(pool, registry, r).await
}

#[tokio::test]
async fn concurrent_identical_enqueues_get_one_action() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let pool = db.another_pool(16).await;
    for round in 0..5 {
        let key = format!("race-{round}");
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let pool = pool.clone();
                let registry = registry.clone();
                let key = key.clone();
                tokio::spawn(async move {
                    // Each in its own transaction, committed after a yield, so the inserts overlap.
                    let mut tx = pool.begin().await.unwrap();
                    let got = enqueue(&mut tx, &registry, req("lane", &key))
                        .await
                        .unwrap();
                    tokio::task::yield_now().await;
                    tx.commit().await.unwrap();
                    got
                })
            })
            .collect();
        let results: Vec<_> = futures::future::join_all(tasks)
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        let ids: std::collections::HashSet<i64> = results.iter().map(|r| r.id).collect();
        assert_eq!(ids.len(), 1, "{results:?}");
        assert_eq!(
            results.iter().filter(|r| r.created).count(),
            1,
            "{results:?}"
        );
    }
    assert_eq!(count(&db.pool).await, 5);
}

#[tokio::test]
async fn enqueue_many_is_one_batch_in_request_order() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let mut conn = db.pool.acquire().await.unwrap();
    let existing = enqueue(&mut conn, &registry, req("lane-7", "key-7"))
        .await
        .unwrap();
    let mut reqs: Vec<ActionRequest> = (0..500)
        .map(|i| req(&format!("lane-{}", i % 10), &format!("key-{i}")))
        .collect();
    reqs.push(req("lane-1", "key-1")); // a repeat inside the batch
    let out = enqueue_many(&mut conn, &registry, reqs).await.unwrap();
    assert_eq!(out.len(), 501);
    assert_eq!(out[7].id, existing.id);
    assert!(!out[7].created);
    assert_eq!(out[500].id, out[1].id);
    assert!(out[1].created && !out[500].created);
    assert_eq!(out.iter().filter(|e| e.created).count(), 499);
    // Ids rise in request order, so lanes run in the order the batch listed them.
    let created: Vec<i64> = out[..500]
        .iter()
        .filter(|e| e.created)
        .map(|e| e.id)
        .collect();
    assert!(created.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(count(&db.pool).await, 500);
}

#[tokio::test]
async fn enqueue_many_refuses_a_conflict_without_writing() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let mut conn = db.pool.acquire().await.unwrap();
    enqueue(&mut conn, &registry, req("lane", "taken"))
        .await
        .unwrap();
    let reqs = vec![
        req("lane", "fresh-1"),
        ActionRequest::new(KIND, "lane", "taken", json!({"n": "different"})).tenant("t1"),
        req("lane", "fresh-2"),
    ];
    assert!(matches!(
        enqueue_many(&mut conn, &registry, reqs).await,
        Err(Error::IdempotencyConflict { .. })
    ));
    // A repeated key with different content inside one batch.
    let reqs = vec![
        req("lane", "dup"),
        ActionRequest::new(KIND, "lane", "dup", json!({"n": "different"})).tenant("t1"),
    ];
    assert!(matches!(
        enqueue_many(&mut conn, &registry, reqs).await,
        Err(Error::Invalid {
            field: "idempotency_key",
            ..
        })
    ));
    assert_eq!(count(&db.pool).await, 1);
    assert!(
        enqueue_many(&mut conn, &registry, vec![])
            .await
            .unwrap()
            .is_empty()
    );
}

/// Each case: a request at a bound's edge and whether it is accepted.
#[tokio::test]
async fn every_bound_at_its_edge() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let mut small = (*registry).clone();
    small.set_payload_bytes_max(100).unwrap();
    let small = Arc::new(small);
    let mut conn = db.pool.acquire().await.unwrap();
    let s = |n: usize| "a".repeat(n);
    let mut n = 0;
    let mut key = || {
        n += 1;
        format!("bound-{n}")
    };
    // A string payload's canonical text is its length plus two quotes.
    let payload_of = |bytes: usize| json!(s(bytes - 2));
    let base = |key: String| req("lane", &key);
    type Case = (&'static str, ActionRequest, bool);
    let cases: Vec<Case> = vec![
        ("key 1 byte", req("lane", "k"), true),
        ("key max", req("lane", &s(IDEMPOTENCY_KEY_BYTES_MAX)), true),
        (
            "key max+1",
            req("lane", &s(IDEMPOTENCY_KEY_BYTES_MAX + 1)),
            false,
        ),
        ("key empty", req("lane", ""), false),
        (
            "key max in multibyte",
            req("lane", &"é".repeat(IDEMPOTENCY_KEY_BYTES_MAX / 2)),
            true,
        ),
        (
            "key max+1 in multibyte",
            req(
                "lane",
                &format!("a{}", "é".repeat(IDEMPOTENCY_KEY_BYTES_MAX / 2)),
            ),
            false,
        ),
        ("lane 1 byte", req("l", &key()), true),
        ("lane max", req(&s(LANE_KEY_BYTES_MAX), &key()), true),
        ("lane max+1", req(&s(LANE_KEY_BYTES_MAX + 1), &key()), false),
        ("lane empty", req("", &key()), false),
        ("tenant max", base(key()).tenant(s(SCOPE_BYTES_MAX)), true),
        (
            "tenant max+1",
            base(key()).tenant(s(SCOPE_BYTES_MAX + 1)),
            false,
        ),
        ("tenant empty", base(key()).tenant(""), false),
        (
            "tenant missing",
            {
                let mut r = base(key());
                r.tenant_id = None;
                r
            },
            false,
        ),
        (
            "tenant missing, instance-level",
            ActionRequest::new(INSTANCE_KIND, "lane", key(), json!({})),
            true,
        ),
        (
            "project max",
            {
                let mut r = base(key());
                r.project_id = Some(s(SCOPE_BYTES_MAX));
                r
            },
            true,
        ),
        (
            "project max+1",
            {
                let mut r = base(key());
                r.project_id = Some(s(SCOPE_BYTES_MAX + 1));
                r
            },
            false,
        ),
        (
            "project empty",
            {
                let mut r = base(key());
                r.project_id = Some(String::new());
                r
            },
            false,
        ),
        ("subject max", base(key()).subject(s(SCOPE_BYTES_MAX)), true),
        (
            "subject max+1",
            base(key()).subject(s(SCOPE_BYTES_MAX + 1)),
            false,
        ),
        ("subject empty", base(key()).subject(""), false),
        (
            "max_attempts 0",
            {
                let mut r = base(key());
                r.max_attempts = Some(0);
                r
            },
            false,
        ),
        (
            "max_attempts 1",
            {
                let mut r = base(key());
                r.max_attempts = Some(1);
                r
            },
            true,
        ),
        (
            "max_attempts max",
            {
                let mut r = base(key());
                r.max_attempts = Some(wharf::outbox::ATTEMPTS_MAX);
                r
            },
            true,
        ),
        (
            "max_attempts max+1",
            {
                let mut r = base(key());
                r.max_attempts = Some(wharf::outbox::ATTEMPTS_MAX + 1);
                r
            },
            false,
        ),
        (
            "payload at the default bound",
            ActionRequest::new(KIND, "lane", key(), payload_of(PAYLOAD_BYTES_MAX_DEFAULT))
                .tenant("t"),
            true,
        ),
        (
            "payload past the default bound",
            ActionRequest::new(
                KIND,
                "lane",
                key(),
                payload_of(PAYLOAD_BYTES_MAX_DEFAULT + 1),
            )
            .tenant("t"),
            false,
        ),
        (
            "unknown kind",
            ActionRequest::new("nope", "lane", key(), json!({})).tenant("t"),
            false,
        ),
        (
            "adapter refuses",
            ActionRequest::new(KIND, "lane", key(), json!({"refuse": 1})).tenant("t"),
            false,
        ),
        (
            "expires at run_at",
            {
                let mut r = base(key());
                let t = Utc::now();
                r.run_at = Some(t);
                r.expires_at = Some(t);
                r
            },
            false,
        ),
        (
            "expires after run_at",
            {
                let mut r = base(key());
                let t = Utc::now();
                r.run_at = Some(t);
                r.expires_at = Some(t + Duration::microseconds(1));
                r
            },
            true,
        ),
    ];
    for (what, r, ok) in cases {
        let before = count(&db.pool).await;
        let got = enqueue(&mut conn, &registry, r).await;
        assert_eq!(got.is_ok(), ok, "{what}: {got:?}");
        assert_eq!(
            count(&db.pool).await,
            before + i64::from(ok),
            "{what}: rows written"
        );
        if let Err(e) = got {
            assert!(
                matches!(
                    e,
                    Error::Invalid { .. } | Error::UnknownKind(_) | Error::PayloadRefused { .. }
                ),
                "{what}: {e:?}"
            );
        }
    }
    // A registry's own payload bound.
    let at = ActionRequest::new(KIND, "lane", "small-1", payload_of(100)).tenant("t");
    let past = ActionRequest::new(KIND, "lane", "small-2", payload_of(101)).tenant("t");
    assert!(enqueue(&mut conn, &small, at).await.is_ok());
    assert!(matches!(
        enqueue(&mut conn, &small, past).await,
        Err(Error::Invalid {
            field: "payload",
            ..
        })
    ));
    assert!(Registry::new().set_payload_bytes_max(0).is_err());
    assert!(
        Registry::new()
            .set_payload_bytes_max(wharf::outbox::PAYLOAD_BYTES_LIMIT + 1)
            .is_err()
    );
}

#[tokio::test]
async fn enqueue_rolls_back_with_the_callers_transaction() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let mut tx = db.pool.begin().await.unwrap();
    let e = enqueue(&mut tx, &registry, req("lane", "k")).await.unwrap();
    tx.rollback().await.unwrap();
    assert!(wharf::outbox::get(&db.pool, e.id).await.unwrap().is_none());
    let mut tx = db.pool.begin().await.unwrap();
    let e = enqueue(&mut tx, &registry, req("lane", "k")).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(view(&db.pool, e.id).await.state, ActionState::Admitted);
}
