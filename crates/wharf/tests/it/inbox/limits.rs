//! Limiter order (SPEC §3.4 steps 1 and 3): a limited peer never reaches credential
//! verification, and a limited identity never reaches the database after authentication.

use std::net::IpAddr;

use wharf::inbox::{self, InboxConfig, LimitPolicy, Route, Status};

use super::support::*;

/// One request, then nothing for an hour.
const ONE: LimitPolicy = LimitPolicy {
    rate_per_s: 1.0 / 3600.0,
    burst: 1,
};

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
