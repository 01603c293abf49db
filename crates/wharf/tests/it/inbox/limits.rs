//! Limiter order (SPEC §3.4 steps 1 and 3): a limited peer never reaches credential
//! verification, and a limited identity never reaches the database after authentication. A
//! batch costs the identity limiter one token per envelope, all or nothing.

use std::net::IpAddr;

use wharf::inbox::{self, InboxConfig, InboxCounters, LimitPolicy, Outcome, Route, Status};

use super::support::*;

/// One request, then nothing for an hour.
const ONE: LimitPolicy = LimitPolicy {
    rate_per_s: 1.0 / 3600.0,
    burst: 1,
};

/// Five envelopes, then one an hour.
const FIVE: LimitPolicy = LimitPolicy {
    rate_per_s: 1.0 / 3600.0,
    burst: 5,
};

/// The pipeline counters past authentication: what a limited request must not move.
fn past_the_limiter(c: InboxCounters) -> (u64, u64, u64) {
    (c.key_lookups, c.stream_transactions, c.audit_writes)
}

#[tokio::test]
async fn a_limited_peer_never_reaches_credential_verification() {
    let fx = Fx::with_config(InboxConfig {
        peer_limit: ONE,
        ..unlimited()
    })
    .await;
    assert!(fx.send(&fx.body(1)).await.is_acknowledged());
    let before = (fx.inbox.counters(), fx.counts().await);
    for token in [fx.token.as_str(), "wharf_garbage"] {
        let answer = fx
            .inbox
            .ingest(peer(), token, Route::new(TENANT, PROJECT), &fx.body(2))
            .await;
        assert_eq!(
            (answer.status, answer.reason),
            (Status::RateLimited, "peer-limited")
        );
        assert_eq!(answer.status.http_status(), 429);
        assert!(answer.retry_after_s.unwrap() >= 3000, "{answer:?}");
        assert_eq!(answer.acknowledged_sequence, None);
    }
    assert_eq!(
        (fx.inbox.counters(), fx.counts().await),
        before,
        "no credential work, nothing written"
    );
    // Another address is its own bucket.
    let other: IpAddr = "198.51.100.7".parse().unwrap();
    let answer = fx
        .inbox
        .ingest(other, &fx.token, Route::new(TENANT, PROJECT), &fx.body(2))
        .await;
    assert!(answer.is_acknowledged(), "{answer:?}");
    assert_eq!(
        fx.inbox.counters().authentications,
        before.0.authentications + 1
    );
}

#[tokio::test]
async fn a_limited_identity_never_reaches_the_database() {
    let fx = Fx::with_config(InboxConfig {
        identity_limit: ONE,
        ..unlimited()
    })
    .await;
    assert!(fx.send(&fx.body(1)).await.is_acknowledged());
    let before = (fx.inbox.counters(), fx.counts().await);
    let answer = fx.send(&fx.body(2)).await;
    assert_eq!(
        (answer.status, answer.reason),
        (Status::RateLimited, "identity-limited")
    );
    let after = fx.inbox.counters();
    assert_eq!(
        after.authentications,
        before.0.authentications + 1,
        "authenticated first"
    );
    assert_eq!(
        (
            after.key_lookups,
            after.stream_transactions,
            after.audit_writes
        ),
        (
            before.0.key_lookups,
            before.0.stream_transactions,
            before.0.audit_writes
        ),
        "no key, stream or audit work after the identity limit"
    );
    assert_eq!(fx.counts().await, before.1, "not audited");

    // The limit is per identity: another device of the same account has its own bucket.
    let other = inbox::issue_credential(fx.pool(), TENANT, "alice", Some("phone-2"))
        .await
        .unwrap();
    let answer = fx
        .inbox
        .ingest(
            peer(),
            &other.token,
            Route::new(TENANT, PROJECT),
            &fx.body(2),
        )
        .await;
    assert!(answer.is_acknowledged(), "{answer:?}");
}

#[tokio::test]
async fn a_batch_costs_one_identity_token_per_envelope() {
    let fx = Fx::with_config(InboxConfig {
        identity_limit: FIVE,
        ..unlimited()
    })
    .await;
    // A single envelope takes one token: four are left.
    assert!(fx.send(&fx.body(1)).await.is_acknowledged());
    let bodies = |seqs: std::ops::RangeInclusive<u64>| -> Vec<Vec<u8>> {
        seqs.map(|s| fx.body(s)).collect()
    };
    let before = (fx.inbox.counters(), fx.counts().await, fx.cursor().await);

    // One envelope more than the bucket holds: refused as a whole, as the single endpoint
    // refuses (429, `identity-limited`, Retry-After until the fifth token), and nothing is
    // decided, written, audited or spent.
    let over = fx.send_batch(&batch_body(&bodies(2..=6))).await;
    assert_eq!(
        (over.head.status, over.head.reason),
        (Status::RateLimited, "identity-limited")
    );
    assert_eq!(over.http_status(), 429);
    let retry_after_s = over.head.retry_after_s.expect("Retry-After");
    assert!(
        (3500..=3600).contains(&retry_after_s),
        "one token at one an hour: {retry_after_s}"
    );
    assert!(over.items.is_empty());
    assert_eq!(over.head.acknowledged_sequence, None);
    let after = fx.inbox.counters();
    assert_eq!(
        after.authentications,
        before.0.authentications + 1,
        "authenticated first"
    );
    assert_eq!(
        past_the_limiter(after),
        past_the_limiter(before.0),
        "no key, stream or audit work after the identity limit"
    );
    assert_eq!(fx.counts().await, before.1, "nothing written, not audited");
    assert_eq!(fx.cursor().await, before.2);

    // Exactly the tokens left: every envelope is decided and accepted.
    let exact = fx.send_batch(&batch_body(&bodies(2..=5))).await;
    assert_eq!(exact.head.status, Status::Decided, "{:?}", exact.head);
    assert_eq!(exact.items.len(), 4);
    assert!(
        exact
            .items
            .iter()
            .all(|i| i.outcome == Outcome::AcceptDelayed),
        "{:?}",
        exact.items
    );
    assert_eq!(exact.head.acknowledged_sequence, Some(5));

    // The batch spent four tokens, not one: the next envelope waits, on either endpoint, and
    // both answer alike.
    let single = fx.send(&fx.body(6)).await;
    let batch = fx.send_batch(&batch_body(&bodies(6..=6))).await;
    for answer in [&single, &batch.head] {
        assert_eq!(
            (answer.status, answer.reason),
            (Status::RateLimited, "identity-limited")
        );
        assert!((3500..=3600).contains(&answer.retry_after_s.unwrap()));
    }
    assert_eq!(fx.cursor().await.0, 5);
}

#[tokio::test]
async fn a_batch_larger_than_the_burst_is_413_and_spends_nothing() {
    let fx = Fx::with_config(InboxConfig {
        identity_limit: FIVE,
        ..unlimited()
    })
    .await;
    let bodies: Vec<Vec<u8>> = (1..=6).map(|s| fx.body(s)).collect();
    let before = (fx.inbox.counters(), fx.counts().await);
    // No wait would ever let six through a bucket of five: not a 429 to retry forever.
    let answer = fx.send_batch(&batch_body(&bodies)).await;
    assert_eq!(
        (answer.head.status, answer.head.reason),
        (Status::TooLarge, "batch-over-burst")
    );
    assert_eq!(answer.http_status(), 413);
    assert_eq!(answer.head.retry_after_s, None);
    assert_eq!(
        past_the_limiter(fx.inbox.counters()),
        past_the_limiter(before.0)
    );
    assert_eq!(fx.counts().await, before.1, "nothing written, not audited");

    // The bucket is still full: the same envelopes in a batch of five pass.
    let answer = fx.send_batch(&batch_body(&bodies[..5])).await;
    assert_eq!(answer.head.status, Status::Decided, "{:?}", answer.head);
    assert_eq!(answer.head.acknowledged_sequence, Some(5));

    // A body that is not a list of envelopes is one decision and costs one token: with none
    // left it is limited before it is audited.
    let audit = fx.counts().await.audit;
    let answer = fx.send_batch(b"[]").await;
    assert_eq!(
        (answer.head.status, answer.head.reason),
        (Status::RateLimited, "identity-limited")
    );
    assert_eq!(fx.counts().await.audit, audit);
}
