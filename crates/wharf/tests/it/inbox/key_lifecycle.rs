//! A verification key's lifecycle to its end: retire (it keeps verifying for its replay window),
//! revoke (it stops at once), remove (only when nothing it signed can be replayed). The stream's
//! cursor and floor never move on their own, and every refused step changes nothing.

use ed25519_dalek::SigningKey;
use wharf::inbox::{self, Outcome, Status};

use super::support::*;

async fn remove(fx: &Fx, key_id: &str) -> Result<(), inbox::Error> {
    let mut conn = fx.pool().acquire().await.unwrap();
    inbox::remove_key(&mut conn, TENANT, PROJECT, key_id, "ops", "rotation done").await
}

async fn key_ids(fx: &Fx) -> Vec<String> {
    inbox::list_keys(fx.pool(), TENANT, Some(PROJECT))
        .await
        .unwrap()
        .into_iter()
        .map(|k| k.key_id)
        .collect()
}

fn conflict(result: Result<(), inbox::Error>, says: &str) {
    match result {
        Err(inbox::Error::Conflict(why)) => assert!(why.contains(says), "{why}"),
        other => panic!("expected a conflict saying {says:?}, got {other:?}"),
    }
}

#[tokio::test]
async fn retire_then_revoke_then_remove_once_nothing_it_signed_can_be_replayed() {
    let fx = Fx::new().await;
    let old = fx.key_id.clone();
    let rotated = inbox::generate_key(
        fx.pool(),
        TENANT,
        PROJECT,
        Some("key-2"),
        inbox::KEY_REPLAY_WINDOW_DEFAULT,
    )
    .await
    .unwrap();
    let new_key = SigningKey::from_bytes(&rotated.private_seed);
    for seq in 1..=3 {
        assert_eq!(
            fx.send(&fx.body(seq)).await.status,
            Status::Outcome(Outcome::AcceptDelayed)
        );
    }

    // Retired: an envelope the old key signed still verifies inside the window.
    inbox::retire_key(fx.pool(), TENANT, PROJECT, &old)
        .await
        .unwrap();
    assert_eq!(
        fx.send(&fx.body(4)).await.status,
        Status::Outcome(Outcome::AcceptDelayed)
    );
    let signed_new = sign_with(&fx.envelope(5), &new_key, "key-2");
    assert_eq!(
        fx.send(&signed_new).await.status,
        Status::Outcome(Outcome::AcceptDelayed)
    );
    assert_eq!(fx.cursor().await, (5, 1));

    // Out of order: removing a retired key, or the active one, is refused and changes nothing.
    let counts = fx.counts().await;
    conflict(remove(&fx, &old).await, "revoke it first");
    conflict(remove(&fx, "key-2").await, "is active");
    assert!(matches!(
        remove(&fx, "no-such-key").await,
        Err(inbox::Error::NotFound { .. })
    ));
    assert_eq!(fx.counts().await, counts);

    // Revoked: the old key stops at once, the stream stays where it is.
    inbox::revoke_key(fx.pool(), TENANT, PROJECT, &old)
        .await
        .unwrap();
    let refused = fx.send(&fx.body(6)).await;
    assert_eq!(refused.status, Status::Outcome(Outcome::RefuseTampered));
    assert_eq!(last_audit(fx.pool()).await.1, "signature-revoked-key");
    assert_eq!(fx.cursor().await, (5, 1));

    // Its four envelopes still hold their payloads: removal says what depends on the key.
    let counts = fx.counts().await;
    conflict(remove(&fx, &old).await, "4 envelope(s) in 1 stream(s)");
    assert_eq!(fx.counts().await, counts);
    assert_eq!(
        inbox::remove_safe_keys(fx.pool(), "wharf-serve")
            .await
            .unwrap(),
        []
    );

    // Payloads expire (retention, as `serve` runs it) but the window is not over yet.
    let expired = inbox::delete_expired_payloads(
        fx.pool(),
        chrono::Utc::now() + chrono::Duration::seconds(1),
        1000,
    )
    .await
    .unwrap();
    assert_eq!(expired, 5);
    conflict(remove(&fx, &old).await, "replay window");

    // The window passes (the key's own setting, moved instead of waiting 90 days).
    sqlx::query("UPDATE wharf.inbox_keys SET replay_window_seconds = 0 WHERE key_id = $1")
        .bind(&old)
        .execute(fx.pool())
        .await
        .unwrap();
    remove(&fx, &old).await.unwrap();
    assert_eq!(key_ids(&fx).await, ["key-2"]);
    let audit: (String, String, Option<String>, String) = sqlx::query_as(
        "SELECT action, actor_account, key_id, reason FROM wharf.inbox_audit
          ORDER BY audit_id DESC LIMIT 1",
    )
    .fetch_one(fx.pool())
    .await
    .unwrap();
    assert_eq!(
        audit,
        (
            "key-remove".into(),
            "ops".into(),
            Some(old.clone()),
            "rotation done".into()
        )
    );

    // What it signed is still refused (now as an unknown key); the new key goes on; the
    // stream's cursor and floor never moved on their own.
    assert_eq!(
        fx.send(&fx.body(2)).await.status,
        Status::Outcome(Outcome::RefuseTampered)
    );
    assert_eq!(fx.cursor().await, (5, 1));
    let next = sign_with(&fx.envelope(6), &new_key, "key-2");
    assert_eq!(
        fx.send(&next).await.status,
        Status::Outcome(Outcome::AcceptDelayed)
    );
    assert_eq!(fx.cursor().await, (6, 1));
}

#[tokio::test]
async fn envelopes_below_the_replay_floor_no_longer_hold_a_key_and_housekeeping_removes_it() {
    let fx = Fx::new().await;
    for seq in 1..=3 {
        fx.send(&fx.body(seq)).await;
    }
    // Another revoked key that signed nothing: removable at once.
    inbox::generate_key(
        fx.pool(),
        TENANT,
        PROJECT,
        Some("unused"),
        inbox::KEY_REPLAY_WINDOW_DEFAULT,
    )
    .await
    .unwrap();
    inbox::revoke_key(fx.pool(), TENANT, PROJECT, "unused")
        .await
        .unwrap();
    inbox::revoke_key(fx.pool(), TENANT, PROJECT, &fx.key_id)
        .await
        .unwrap();
    let removed = inbox::remove_safe_keys(fx.pool(), "wharf-serve")
        .await
        .unwrap();
    assert_eq!(
        removed,
        [(TENANT.to_owned(), PROJECT.to_owned(), "unused".to_owned())]
    );
    assert_eq!(key_ids(&fx).await, std::slice::from_ref(&fx.key_id));

    // The operator raises the floor past everything the key signed.
    let stream = inbox::StreamId {
        tenant: TENANT.into(),
        project: PROJECT.into(),
        producer: inbox::Producer::Device("laptop-1".into()),
    };
    let mut conn = fx.pool().acquire().await.unwrap();
    inbox::streams::advance_floor(&mut conn, &stream, 4, "ops", "old key retired")
        .await
        .unwrap();
    let removed = inbox::remove_safe_keys(fx.pool(), "wharf-serve")
        .await
        .unwrap();
    assert_eq!(removed.len(), 1);
    assert!(key_ids(&fx).await.is_empty());
    assert_eq!(fx.cursor().await, (3, 4));
}
