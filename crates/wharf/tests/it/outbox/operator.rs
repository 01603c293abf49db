//! Operator actions: cancel, resolve in-doubt (with resend), the audit. Every test checks the
//! state change, the audit row, and that a refused request leaves every table as it was.

use serde_json::json;
use sqlx::PgPool;
use wharf::outbox::{
    ActionState, AuditFilter, Error, Finding, NOTE_BYTES_MAX, Operator, Outcome, Resolve,
    StopReason, audit, cancel, resend, resend_key, resend_of, resolutions, resolve,
};
use wharf_testkit::TestDb;

use super::support::*;

fn op() -> Operator {
    Operator::new("alice@example.org", "corr-1")
}

/// Every row of every table an operator action may write, as text: equal before and after
/// means nothing changed.
async fn census(pool: &PgPool) -> String {
    rows_of(
        pool,
        &[
            ("action", "id"),
            ("operator_audit", "audit_id"),
            ("action_resolution", "resolution_id"),
            ("action_resend", "action_id"),
        ],
    )
    .await
}

async fn force_executing(pool: &PgPool, id: i64) {
    sqlx::query(
        "UPDATE wharf.action_live SET state = 'EXECUTING', epoch = epoch + 1,
                lease_expires_at = now() + interval '1 minute' WHERE id = $1",
    )
    .bind(id)
    .execute(pool)
    .await
    .unwrap();
}

/// An UNCERTAIN action (the fake answers Uncertain after its fence).
async fn uncertain(pool: &PgPool) -> (std::sync::Arc<wharf::outbox::Registry>, i64) {
    let (registry, fake, ..) = registry();
    fake.script(
        "doubt",
        vec![Step::Fenced(Outcome::Uncertain {
            code: code("provider.timeout"),
        })],
    );
    let mut r = req("lane-d", "doubt").subject("acct-7");
    r.project_id = Some("p1".into());
    let id = enqueue(pool, &registry, r).await;
    executor(pool, &registry).drain().await.unwrap();
    assert_eq!(view(pool, id).await.state, ActionState::Uncertain);
    (registry, id)
}

#[tokio::test]
async fn cancel_ends_proposed_and_admitted_actions_with_an_audit_row() {
    let db = TestDb::new().await;
    let (registry, fake, ..) = registry();
    let admitted = enqueue(&db.pool, &registry, req("lane", "a")).await;
    let mut p = req("lane2", "p");
    p.proposed = true;
    let proposed = enqueue(&db.pool, &registry, p).await;
    // Behind the cancelled head of its lane: must run once the head is gone.
    let behind = enqueue(&db.pool, &registry, req("lane", "b")).await;

    let mut conn = db.pool.acquire().await.unwrap();
    let c1 = cancel(&mut conn, &op(), admitted).await.unwrap();
    let c2 = cancel(&mut conn, &Operator::new("bob", "corr-2"), proposed)
        .await
        .unwrap();
    assert_eq!(c1.from, ActionState::Admitted);
    assert_eq!(c2.from, ActionState::Proposed);
    for id in [admitted, proposed] {
        let v = view(&db.pool, id).await;
        assert_eq!(
            (v.state, v.stop_reason),
            (ActionState::Cancelled, Some(StopReason::Operator))
        );
        assert!(v.payload.is_none() && v.ended_at.is_some());
    }
    let entries = audit(&db.pool, &AuditFilter::default()).await.unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].audit_id, c1.audit_id);
    assert_eq!(
        (
            entries[0].operation.as_str(),
            entries[0].action_id,
            entries[0].actor.as_str(),
            entries[0].correlation_id.as_str()
        ),
        ("cancel", Some(admitted), "alice@example.org", "corr-1")
    );
    assert_eq!(entries[0].detail, json!({"from": "ADMITTED", "kind": KIND}));
    assert_eq!(
        (
            entries[1].actor.as_str(),
            entries[1].detail["from"].as_str()
        ),
        ("bob", Some("PROPOSED"))
    );

    executor(&db.pool, &registry).drain().await.unwrap();
    assert_eq!(view(&db.pool, behind).await.state, ActionState::Done);
    assert_eq!(
        fake.seen().iter().map(|s| s.action_id).collect::<Vec<_>>(),
        vec![behind],
        "a cancelled action never runs"
    );
}

#[tokio::test]
async fn cancel_refuses_executing_ended_unknown_and_bad_operators_changing_nothing() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let running = enqueue(&db.pool, &registry, req("l1", "running")).await;
    force_executing(&db.pool, running).await;
    let done = enqueue(&db.pool, &registry, req("l2", "done")).await;
    executor(&db.pool, &registry).drain().await.unwrap();
    assert_eq!(view(&db.pool, done).await.state, ActionState::Done);
    let live = enqueue(&db.pool, &registry, req("l3", "live")).await;

    let before = census(&db.pool).await;
    let mut conn = db.pool.acquire().await.unwrap();
    let err = cancel(&mut conn, &op(), running).await.unwrap_err();
    assert!(
        matches!(err, Error::NotCancellable { id, state: ActionState::Executing } if id == running),
        "{err:?}"
    );
    assert!(err.to_string().contains("only a PROPOSED or ADMITTED"));
    let err = cancel(&mut conn, &op(), done).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotCancellable {
                state: ActionState::Done,
                ..
            }
        ),
        "{err:?}"
    );
    let err = cancel(&mut conn, &op(), 999_999).await.unwrap_err();
    assert!(matches!(err, Error::NotFound(999_999)), "{err:?}");
    for bad in [
        Operator::new("", "c"),
        Operator::new("a".repeat(257), "c"),
        Operator::new("new\nline", "c"),
        Operator::new("a", ""),
        Operator::new("a", "x".repeat(65)),
        Operator::new("a", "has space"),
    ] {
        let err = cancel(&mut conn, &bad, live).await.unwrap_err();
        assert!(matches!(err, Error::Invalid { .. }), "{bad:?}: {err:?}");
    }
    assert_eq!(census(&db.pool).await, before);
    // The edges themselves are accepted.
    cancel(
        &mut conn,
        &Operator::new("a".repeat(256), "x".repeat(64)),
        live,
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn cancel_inside_a_rolled_back_transaction_leaves_nothing() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let id = enqueue(&db.pool, &registry, req("l", "k")).await;
    let before = census(&db.pool).await;
    let mut tx = db.pool.begin().await.unwrap();
    cancel(&mut tx, &op(), id).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(census(&db.pool).await, before);
    assert_eq!(view(&db.pool, id).await.state, ActionState::Admitted);
}

#[tokio::test]
async fn resolve_records_the_finding_beside_an_unchanged_in_doubt_action() {
    let db = TestDb::new().await;
    let (registry, id) = uncertain(&db.pool).await;
    let original = view(&db.pool, id).await;
    let mut conn = db.pool.acquire().await.unwrap();
    let first = resolve(
        &mut conn,
        &registry,
        &op(),
        id,
        Resolve {
            finding: Finding::Delivered,
            note: "provider console shows msg-123".into(),
            resend: None,
        },
    )
    .await
    .unwrap();
    assert!(first.resent.is_none());
    // A later finding corrects the first; both stay.
    let second = resolve(
        &mut conn,
        &registry,
        &Operator::new("bob", "corr-9"),
        id,
        Resolve {
            finding: Finding::NotDelivered,
            note: "x".repeat(NOTE_BYTES_MAX),
            resend: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(
        view(&db.pool, id).await,
        original,
        "the action never changes"
    );
    let all = resolutions(&db.pool, id).await.unwrap();
    assert_eq!(
        all,
        vec![first.resolution.clone(), second.resolution.clone()]
    );
    assert_eq!(
        (all[0].finding, all[0].actor.as_str(), all[0].note.as_str()),
        (
            Finding::Delivered,
            "alice@example.org",
            "provider console shows msg-123"
        )
    );
    let entries = audit(&db.pool, &AuditFilter::default()).await.unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1].audit_id, second.audit_id);
    assert_eq!(
        entries[0].detail,
        json!({"finding": "delivered", "resolution_id": first.resolution.resolution_id,
               "resent_action_id": null, "kind": KIND})
    );
    assert!(
        !entries[0].detail.to_string().contains("msg-123"),
        "the note stays out of the audit"
    );
    // Append-only, in the database too.
    for sql in [
        "UPDATE wharf.action_resolution SET note = 'x'",
        "DELETE FROM wharf.action_resolution",
        "TRUNCATE wharf.action_resolution",
        "UPDATE wharf.operator_audit SET actor = 'x'",
        "DELETE FROM wharf.operator_audit",
        "TRUNCATE wharf.operator_audit",
    ] {
        let err = sqlx::query(sql).execute(&db.pool).await.unwrap_err();
        assert!(err.to_string().contains("append-only"), "{sql}: {err}");
    }
}

#[tokio::test]
async fn resolve_with_resend_enqueues_one_linked_action_that_runs() {
    let db = TestDb::new().await;
    let (registry, id) = uncertain(&db.pool).await;
    let original = view(&db.pool, id).await;
    let mut conn = db.pool.acquire().await.unwrap();
    let ask = || Resolve {
        finding: Finding::NotDelivered,
        note: "provider has no record".into(),
        resend: Some(json!({"n": "again"})),
    };
    let resolved = resolve(&mut conn, &registry, &op(), id, ask())
        .await
        .unwrap();
    let resent = resolved.resent.unwrap();
    assert!(resent.created);
    assert_eq!(resolved.resolution.resent_action_id, Some(resent.id));
    let new = view(&db.pool, resent.id).await;
    assert_eq!(
        (
            new.kind.as_str(),
            new.tenant_id.as_deref(),
            new.project_id.as_deref(),
            new.lane_key.as_str(),
            new.subject_account_id.as_deref(),
            new.idempotency_key.clone(),
            new.state,
        ),
        (
            KIND,
            original.tenant_id.as_deref(),
            Some("p1"),
            "lane-d",
            Some("acct-7"),
            resend_key(id),
            ActionState::Admitted
        )
    );
    assert_eq!(new.payload, Some(json!({"n": "again"})));
    assert_eq!(resend_of(&db.pool, resent.id).await.unwrap(), Some(id));
    assert_eq!(resend_of(&db.pool, id).await.unwrap(), None);

    // Asking again: a second resolution, the same resend.
    let again = resolve(&mut conn, &registry, &op(), id, ask())
        .await
        .unwrap();
    assert_eq!(
        again.resent.map(|r| (r.id, r.created)),
        Some((resent.id, false))
    );
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.action")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(count, 2);
    let entries = audit(
        &db.pool,
        &AuditFilter {
            action_id: Some(id),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].detail["resent_action_id"], json!(resent.id));

    executor(&db.pool, &registry).drain().await.unwrap();
    assert_eq!(view(&db.pool, resent.id).await.state, ActionState::Done);
    assert_eq!(view(&db.pool, id).await, original);
}

#[tokio::test]
async fn resolve_refuses_bad_requests_changing_nothing() {
    let db = TestDb::new().await;
    let (registry, id) = uncertain(&db.pool).await;
    let live = enqueue(&db.pool, &registry, req("l-live", "live")).await;
    // A first resend, so a different payload later conflicts.
    let mut conn = db.pool.acquire().await.unwrap();
    resend(&mut conn, &registry, id, json!({"n": "first"}))
        .await
        .unwrap();
    let before = census(&db.pool).await;
    let ok = |finding, note: &str, resend| Resolve {
        finding,
        note: note.into(),
        resend,
    };
    let cases: Vec<(i64, Operator, Resolve, &str)> = vec![
        (999_999, op(), ok(Finding::Delivered, "", None), "NotFound"),
        (live, op(), ok(Finding::Delivered, "", None), "NotInDoubt"),
        (
            id,
            op(),
            ok(Finding::Delivered, &"x".repeat(NOTE_BYTES_MAX + 1), None),
            "Invalid",
        ),
        (id, op(), ok(Finding::Delivered, "nul\0", None), "Invalid"),
        (
            id,
            op(),
            ok(Finding::Delivered, "", Some(json!({"n": 1}))),
            "Invalid",
        ),
        (
            id,
            Operator::new("", "c"),
            ok(Finding::Delivered, "", None),
            "Invalid",
        ),
        (
            id,
            op(),
            ok(Finding::NotDelivered, "", Some(json!({"refuse": true}))),
            "PayloadRefused",
        ),
        (
            id,
            op(),
            ok(Finding::NotDelivered, "", Some(json!({"n": "other"}))),
            "IdempotencyConflict",
        ),
    ];
    for (target, operator, ask, expected) in cases {
        let mut tx = db.pool.begin().await.unwrap();
        let err = resolve(&mut tx, &registry, &operator, target, ask)
            .await
            .unwrap_err();
        assert!(
            format!("{err:?}").starts_with(expected),
            "{expected}: {err:?}"
        );
        // The caller's transaction survives a refusal (its savepoint was rolled back).
        tx.commit().await.unwrap();
    }
    assert_eq!(census(&db.pool).await, before);
}

#[tokio::test]
async fn the_audit_pages_in_order_and_refuses_a_limit_over_its_bound() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let mut conn = db.pool.acquire().await.unwrap();
    let mut ids = Vec::new();
    for i in 0..5 {
        let id = enqueue(&db.pool, &registry, req(&format!("l{i}"), &format!("k{i}"))).await;
        ids.push(cancel(&mut conn, &op(), id).await.unwrap().audit_id);
    }
    let page = |after, limit| AuditFilter {
        action_id: None,
        after_id: after,
        limit,
    };
    let first = audit(&db.pool, &page(None, 2)).await.unwrap();
    let second = audit(&db.pool, &page(Some(first[1].audit_id), 2))
        .await
        .unwrap();
    let third = audit(&db.pool, &page(Some(second[1].audit_id), 2))
        .await
        .unwrap();
    let walked: Vec<i64> = [first, second, third]
        .iter()
        .flatten()
        .map(|e| e.audit_id)
        .collect();
    assert_eq!(walked, ids);
    assert_eq!(audit(&db.pool, &page(None, 100)).await.unwrap().len(), 5);
    let err = audit(&db.pool, &page(None, 101)).await.unwrap_err();
    assert!(
        matches!(err, Error::Invalid { field: "limit", .. }),
        "{err:?}"
    );
}
