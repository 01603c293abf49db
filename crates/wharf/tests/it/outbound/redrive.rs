//! Redrive: envelope dead letters delivered again with the same bytes, in emission order, for
//! one explicit scope, dry run first, bounded, idempotent, audited; bad input writes nothing.

use wharf::outbound::{self, RedriveFilter};
use wharf::outbox::{self, ActionState, Operator};

use super::support::*;

fn filter(limit: u32) -> RedriveFilter {
    RedriveFilter {
        tenant: TENANT.into(),
        project: PROJECT.into(),
        error_code: None,
        ended_after: None,
        limit,
    }
}

async fn census(pool: &sqlx::PgPool) -> String {
    sqlx::query_scalar(
        "SELECT concat_ws(E'\\n',
            (SELECT string_agg(a::text, E'\\n' ORDER BY id) FROM wharf.action a),
            (SELECT string_agg(o::text, E'\\n' ORDER BY audit_id) FROM wharf.operator_audit o),
            (SELECT string_agg(r::text, E'\\n' ORDER BY action_id) FROM wharf.action_resend r))",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn dead_envelopes_are_redriven_once_in_order_with_the_same_bytes() {
    let fx = Fx::new().await;
    *fx.stub.answer.lock().unwrap() = Answer::Refused;
    let mut originals = Vec::new();
    for n in 0..3u64 {
        originals.push(
            fx.emit(&request(&format!("k{n}"), n))
                .await
                .unwrap()
                .action_id,
        );
    }
    fx.executor().drain().await.unwrap();
    for id in &originals {
        let a = outbox::get(fx.pool(), *id).await.unwrap().unwrap();
        assert_eq!(a.state, ActionState::Failed);
    }
    let first_bodies: Vec<Vec<u8>> = fx.stub.sent().into_iter().map(|(_, b)| b).collect();
    assert_eq!(first_bodies.len(), 3);
    *fx.stub.answer.lock().unwrap() = Answer::Done;
    let op = Operator::new("alice", "redrive-1");
    let mut conn = fx.pool().acquire().await.unwrap();

    // Dry run: all three, in emission order, nothing written.
    let before = census(fx.pool()).await;
    let dry = outbound::redrive(&mut conn, &fx.registry, &op, &filter(100), true)
        .await
        .unwrap();
    assert_eq!(
        dry.iter().map(|r| r.original_id).collect::<Vec<_>>(),
        originals
    );
    assert!(dry.iter().all(|r| r.action_id.is_none()));
    assert_eq!(dry[0].error_code.as_deref(), Some("http_4xx"));
    assert_eq!(census(fx.pool()).await, before);

    // Bounded batches, then nothing left: running it again duplicates nothing.
    let first = outbound::redrive(&mut conn, &fx.registry, &op, &filter(2), false)
        .await
        .unwrap();
    let second = outbound::redrive(&mut conn, &fx.registry, &op, &filter(2), false)
        .await
        .unwrap();
    let third = outbound::redrive(&mut conn, &fx.registry, &op, &filter(2), false)
        .await
        .unwrap();
    assert_eq!((first.len(), second.len(), third.len()), (2, 1, 0));
    let redriven: Vec<_> = first.iter().chain(&second).collect();
    assert_eq!(
        redriven.iter().map(|r| r.original_id).collect::<Vec<_>>(),
        originals
    );
    for r in &redriven {
        let new = r.action_id.unwrap();
        assert_eq!(
            outbox::resend_of(fx.pool(), new).await.unwrap(),
            Some(r.original_id)
        );
        let a = outbox::get(fx.pool(), new).await.unwrap().unwrap();
        assert_eq!(a.idempotency_key, outbox::resend_key(r.original_id));
        assert_eq!(a.state, ActionState::Admitted);
    }
    let audit = outbox::audit(fx.pool(), &Default::default()).await.unwrap();
    assert_eq!(audit.len(), 3);
    assert!(
        audit
            .iter()
            .all(|e| e.operation == "redrive" && e.actor == "alice")
    );
    assert_eq!(
        audit
            .iter()
            .map(|e| e.action_id.expect("a redrive names its action"))
            .collect::<Vec<_>>(),
        originals
    );

    fx.executor().drain().await.unwrap();
    let sent: Vec<Vec<u8>> = fx.stub.sent().into_iter().map(|(_, b)| b).collect();
    assert_eq!(
        sent[3..],
        first_bodies[..],
        "the same bytes, in the same order"
    );
    for r in &redriven {
        let a = outbox::get(fx.pool(), r.action_id.unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(a.state, ActionState::Done);
    }
}

#[tokio::test]
async fn redrive_takes_only_its_scope_and_filters_and_refuses_bad_input() {
    let fx = Fx::new().await;
    *fx.stub.answer.lock().unwrap() = Answer::Refused;
    fx.emit(&request("k0", 0)).await.unwrap();
    fx.executor().drain().await.unwrap();
    let op = Operator::new("alice", "redrive-2");
    let mut conn = fx.pool().acquire().await.unwrap();
    let before = census(fx.pool()).await;
    let mut other_tenant = filter(10);
    other_tenant.tenant = "other".into();
    let mut other_code = filter(10);
    other_code.error_code = Some("http_5xx".into());
    let mut later = filter(10);
    later.ended_after = Some(chrono::Utc::now() + chrono::Duration::hours(1));
    for f in [other_tenant, other_code, later] {
        let got = outbound::redrive(&mut conn, &fx.registry, &op, &f, false)
            .await
            .unwrap();
        assert!(got.is_empty(), "{f:?}");
    }
    let mut bad_scope = filter(10);
    bad_scope.tenant = "not a tenant".into();
    let mut bad_code = filter(10);
    bad_code.error_code = Some("Not A Code".into());
    for (f, o) in [
        (filter(0), op.clone()),
        (filter(101), op.clone()),
        (bad_scope, op.clone()),
        (bad_code, op.clone()),
        (filter(10), Operator::new("", "c")),
    ] {
        let err = outbound::redrive(&mut conn, &fx.registry, &o, &f, false)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                outbound::Error::Invalid { .. }
                    | outbound::Error::Outbox(outbox::Error::Invalid { .. })
            ),
            "{f:?}: {err:?}"
        );
    }
    assert_eq!(census(fx.pool()).await, before);
    // The matching filter takes it.
    let mut code = filter(100);
    code.error_code = Some("http_4xx".into());
    assert_eq!(
        outbound::redrive(&mut conn, &fx.registry, &op, &code, false)
            .await
            .unwrap()
            .len(),
        1
    );
}
