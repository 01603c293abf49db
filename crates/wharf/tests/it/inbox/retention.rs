//! Payload retention: only payloads go, in batches of at most 1,000, and an expired event can
//! never be accepted again.

use chrono::{Duration, Utc};
use wharf::inbox::{self, Outcome, Status};

use super::support::*;

#[tokio::test]
async fn retention_deletes_only_payloads_in_bounded_batches() {
    let fx = Fx::new().await;
    for seq in 1..=25 {
        assert!(fx.send(&fx.body(seq)).await.is_acknowledged());
    }
    // Age 23 of them (1..=23) past the retention; 24 and 25 stay fresh.
    sqlx::query(
        "UPDATE wharf.inbox_payloads p SET stored_at = now() - interval '100 days'
           FROM wharf.inbox_identities i
          WHERE i.identity_id = p.identity_id AND i.producer_sequence <= 23",
    )
    .execute(fx.pool())
    .await
    .unwrap();
    let before = fx.counts().await;
    let older_than = Utc::now() - Duration::days(90);
    let mut batches = Vec::new();
    loop {
        let deleted = inbox::delete_expired_payloads(fx.pool(), older_than, 10)
            .await
            .unwrap();
        batches.push(deleted);
        if deleted < 10 {
            break;
        }
    }
    assert_eq!(batches, vec![10, 10, 3]);
    let after = fx.counts().await;
    assert_eq!(after.payloads, 2);
    assert_eq!(
        (after.identities, after.audit, after.streams),
        (before.identities, before.audit, before.streams)
    );
    assert_eq!(fx.cursor().await, (25, 1));

    // Bounds: at most 1,000 per statement.
    for bad in [0, 1001] {
        assert!(matches!(
            inbox::delete_expired_payloads(fx.pool(), older_than, bad).await,
            Err(inbox::Error::Invalid { .. })
        ));
    }
    // The pool-level run is bounded too, and finds nothing more to do.
    assert_eq!(
        inbox::run_retention(fx.pool(), inbox::PAYLOAD_RETENTION_DEFAULT, 1000, 10)
            .await
            .unwrap(),
        0
    );

    // An expired event still answers like a duplicate, and a variant of it is still a conflict.
    let answer = fx.send(&fx.body(3)).await;
    assert_eq!(
        (answer.status, answer.reason),
        (Status::Outcome(Outcome::IgnoreDuplicate), "duplicate")
    );
    let mut variant = fx.envelope(3);
    variant.payload = payload("run-3-again");
    let answer = fx.send(&fx.signed(&variant)).await;
    assert_eq!(
        (answer.status, answer.reason),
        (
            Status::Outcome(Outcome::RefuseTampered),
            "identity-conflict"
        )
    );
    let mut reused_key = fx.envelope(40);
    reused_key.idempotency_key = "k-3".into();
    let answer = fx.send(&fx.signed(&reused_key)).await;
    assert_eq!(answer.reason, "identity-conflict");
    assert_eq!(fx.counts().await.identities, 25);
}

#[test]
fn the_retention_statement_names_only_the_payload_table() {
    let sql = include_str!("../../../sql/inbox/payloads_delete_expired.sql");
    let code: String = sql
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    let tables: std::collections::BTreeSet<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .filter(|w| w.starts_with("wharf."))
        .collect();
    assert_eq!(
        tables.into_iter().collect::<Vec<_>>(),
        vec!["wharf.inbox_payloads"]
    );
    assert!(code.contains("LIMIT $2"));
}
