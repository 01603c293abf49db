//! Pausing a kind, or a kind for one tenant: claims skip it until it is resumed, pausing and
//! resuming are audited, bad requests change nothing, and the bound holds at its edge.

use std::time::Duration;

use sqlx::PgPool;
use wharf::outbox::{
    ActionState, AuditFilter, Error, NOTE_BYTES_MAX, Operator, PAUSES_MAX, SCOPE_BYTES_MAX, audit,
    pause, pauses, resume,
};
use wharf_testkit::TestDb;

use super::support::*;

fn op() -> Operator {
    Operator::new("alice@example.org", "corr-p")
}

/// Every row pausing may write, as text.
async fn census(pool: &PgPool) -> String {
    rows_of(
        pool,
        &[
            ("action", "id"),
            ("operator_audit", "audit_id"),
            ("kind_pause", "kind, tenant_id"),
        ],
    )
    .await
}

async fn operations(pool: &PgPool) -> Vec<(String, serde_json::Value)> {
    audit(pool, &AuditFilter::default())
        .await
        .unwrap()
        .into_iter()
        .map(|e| {
            assert_eq!(e.action_id, None, "a pause names no action");
            (e.operation, e.detail)
        })
        .collect()
}

#[tokio::test]
async fn a_paused_kind_is_not_claimed_until_it_is_resumed() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let a = enqueue(&db.pool, &registry, req("lane-a", "a")).await;
    let other = enqueue(
        &db.pool,
        &registry,
        wharf::outbox::ActionRequest::new(AMO_KIND, "lane-o", "o", serde_json::json!({}))
            .tenant("t1"),
    )
    .await;
    let mut conn = db.pool.acquire().await.unwrap();
    let paused = pause(&mut conn, &registry, &op(), KIND, None, "provider outage")
        .await
        .unwrap();
    assert!(paused.created);
    assert!(paused.audit_id.is_some());
    assert_eq!(paused.pause.kind, KIND);
    assert_eq!(paused.pause.tenant_id, None);
    assert_eq!(paused.pause.note, "provider outage");

    let exec = executor(&db.pool, &registry);
    exec.drain().await.unwrap();
    assert_eq!(view(&db.pool, a).await.state, ActionState::Admitted);
    assert_eq!(view(&db.pool, other).await.state, ActionState::Done);

    // Pausing again is the same pause: nothing written.
    let before = census(&db.pool).await;
    let again = pause(&mut conn, &registry, &op(), KIND, None, "other words")
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.audit_id, None);
    assert_eq!(again.pause.note, "provider outage");
    assert_eq!(census(&db.pool).await, before);

    let listed = pauses(&db.pool).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].actor, "alice@example.org");

    let resumed = resume(&mut conn, &registry, &op(), KIND, None)
        .await
        .unwrap();
    assert_eq!(
        resumed.ended.map(|p| p.note),
        Some("provider outage".into())
    );
    assert!(resumed.audit_id.is_some());
    exec.drain().await.unwrap();
    assert_eq!(view(&db.pool, a).await.state, ActionState::Done);
    assert!(pauses(&db.pool).await.unwrap().is_empty());

    // Resuming what is not paused writes nothing.
    let before = census(&db.pool).await;
    let none = resume(&mut conn, &registry, &op(), KIND, None)
        .await
        .unwrap();
    assert_eq!((none.ended, none.audit_id), (None, None));
    assert_eq!(census(&db.pool).await, before);

    let ops = operations(&db.pool).await;
    let names: Vec<&str> = ops.iter().map(|(o, _)| o.as_str()).collect();
    assert_eq!(names, ["pause", "resume"]);
    assert_eq!(ops[0].1["kind"], KIND);
    assert_eq!(ops[0].1["tenant_id"], serde_json::Value::Null);
}

#[tokio::test]
async fn a_tenant_pause_stops_that_tenant_only_and_outlives_a_kind_wide_resume() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let mut ids = Vec::new();
    for (tenant, n) in [("t1", 3), ("t2", 3)] {
        for i in 0..n {
            let r = req(&format!("{tenant}-{i}"), &format!("{tenant}-{i}")).tenant(tenant);
            ids.push((tenant, enqueue(&db.pool, &registry, r).await));
        }
    }
    let mut conn = db.pool.acquire().await.unwrap();
    pause(&mut conn, &registry, &op(), KIND, Some("t1"), "")
        .await
        .unwrap();
    // A kind-wide pause and its resume leave the tenant's pause in force.
    pause(&mut conn, &registry, &op(), KIND, None, "")
        .await
        .unwrap();
    resume(&mut conn, &registry, &op(), KIND, None)
        .await
        .unwrap();
    let exec = executor(&db.pool, &registry);
    exec.drain().await.unwrap();
    for (tenant, id) in &ids {
        let want = if *tenant == "t1" {
            ActionState::Admitted
        } else {
            ActionState::Done
        };
        assert_eq!(view(&db.pool, *id).await.state, want, "{tenant} {id}");
    }
    let listed = pauses(&db.pool).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].tenant_id.as_deref(), Some("t1"));

    resume(&mut conn, &registry, &op(), KIND, Some("t1"))
        .await
        .unwrap();
    exec.drain().await.unwrap();
    for (_, id) in &ids {
        assert_eq!(view(&db.pool, *id).await.state, ActionState::Done);
    }
}

#[tokio::test]
async fn the_running_loop_claims_nothing_of_a_paused_kind_and_resumes_it() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let mut conn = db.pool.acquire().await.unwrap();
    // Paused before the replica starts: its first claim already knows.
    pause(&mut conn, &registry, &op(), KIND, None, "")
        .await
        .unwrap();
    let paused = enqueue(&db.pool, &registry, req("lane-p", "p")).await;
    let other = enqueue(
        &db.pool,
        &registry,
        wharf::outbox::ActionRequest::new(AMO_KIND, "lane-o", "o", serde_json::json!({}))
            .tenant("t1"),
    )
    .await;
    let exec = executor(&db.pool, &registry);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn({
        let exec = exec.clone();
        async move {
            exec.run(async {
                let _ = stopped.await;
            })
            .await
        }
    });
    until(&db.pool, "the other kind ran", other, ActionState::Done).await;
    // The loop claimed and finished the other kind's action; the paused one is untouched.
    let p = view(&db.pool, paused).await;
    assert_eq!((p.state, p.attempt), (ActionState::Admitted, 0));

    resume(&mut conn, &registry, &op(), KIND, None)
        .await
        .unwrap();
    until(&db.pool, "the resumed kind ran", paused, ActionState::Done).await;
    let _ = stop.send(());
    running.await.unwrap().unwrap();
}

/// Waits (bounded) until action `id` is in `state`.
async fn until(pool: &PgPool, what: &str, id: i64, state: ActionState) {
    for _ in 0..3_000 {
        if view(pool, id).await.state == state {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test]
async fn bad_pauses_are_refused_and_change_nothing() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let mut conn = db.pool.acquire().await.unwrap();
    let before = census(&db.pool).await;
    let long_tenant = "t".repeat(SCOPE_BYTES_MAX + 1);
    let long_note = "n".repeat(NOTE_BYTES_MAX + 1);
    let cases: Vec<(&str, Operator, &str, Option<&str>, &str)> = vec![
        ("unknown kind", op(), "no.such.kind", None, ""),
        ("empty tenant", op(), KIND, Some(""), ""),
        ("long tenant", op(), KIND, Some(&long_tenant), ""),
        ("NUL tenant", op(), KIND, Some("t\0"), ""),
        ("long note", op(), KIND, None, &long_note),
        ("NUL note", op(), KIND, None, "a\0b"),
        ("no actor", Operator::new("", "corr"), KIND, None, ""),
        (
            "bad correlation",
            Operator::new("a", "sp ace"),
            KIND,
            None,
            "",
        ),
    ];
    for (what, who, kind, tenant, note) in cases {
        let err = pause(&mut conn, &registry, &who, kind, tenant, note)
            .await
            .expect_err(what);
        match (what, err) {
            ("unknown kind", Error::UnknownKind(k)) => assert_eq!(k, "no.such.kind"),
            ("unknown kind", e) => panic!("{what}: {e}"),
            (_, Error::Invalid { .. }) => {}
            (_, e) => panic!("{what}: {e}"),
        }
    }
    // The note at its bound is accepted.
    let edge = "n".repeat(NOTE_BYTES_MAX);
    let mut conn2 = db.pool.acquire().await.unwrap();
    let resumed = resume(&mut conn2, &registry, &op(), "no.such.kind", None).await;
    assert!(matches!(resumed, Err(Error::UnknownKind(_))));
    assert_eq!(census(&db.pool).await, before);
    pause(&mut conn, &registry, &op(), KIND, None, &edge)
        .await
        .unwrap();
}

#[tokio::test]
async fn at_most_pauses_max_are_in_force() {
    let db = TestDb::new().await;
    let (registry, ..) = registry();
    let mut conn = db.pool.acquire().await.unwrap();
    // Up to the bound through the library's own statement shape, in one go.
    sqlx::query(
        "INSERT INTO wharf.kind_pause (kind, tenant_id, note, actor, correlation_id)
         SELECT 'fake', 'tenant-' || n, '', 'seed', 'seed' FROM generate_series(1, $1) n",
    )
    .bind(PAUSES_MAX as i64 - 1)
    .execute(&db.pool)
    .await
    .unwrap();
    // The last one that fits.
    let last = pause(&mut conn, &registry, &op(), KIND, Some("last"), "")
        .await
        .unwrap();
    assert!(last.created);
    let before = census(&db.pool).await;
    let err = pause(&mut conn, &registry, &op(), KIND, Some("one-too-many"), "")
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Invalid {
                field: "pauses",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(census(&db.pool).await, before);
    // At the bound, a pause already in force is still answered (nothing new is written).
    let again = pause(&mut conn, &registry, &op(), KIND, Some("last"), "")
        .await
        .unwrap();
    assert!(!again.created);
    // Every one of them holds: no tenant of the thousand is claimed.
    let r = req("lane-x", "x").tenant("tenant-77");
    let id = enqueue(&db.pool, &registry, r).await;
    executor(&db.pool, &registry).drain().await.unwrap();
    assert_eq!(view(&db.pool, id).await.state, ActionState::Admitted);
}
