//! Administration: tenants, credentials, keys and the audited stream actions.

use std::time::Duration;

use wharf::inbox::{self, Producer, StreamId};

use super::support::*;

#[tokio::test]
async fn tenants_credentials_and_keys() {
    let fx = Fx::new().await;
    assert!(
        !inbox::create_tenant(fx.pool(), TENANT).await.unwrap(),
        "idempotent"
    );
    assert!(matches!(
        inbox::create_tenant(fx.pool(), "bad tenant").await,
        Err(inbox::Error::Invalid { .. })
    ));
    assert!(matches!(
        inbox::issue_credential(fx.pool(), "nobody", "a", None).await,
        Err(inbox::Error::NotFound { .. })
    ));
    let issued = inbox::issue_credential(fx.pool(), TENANT, "bob", None)
        .await
        .unwrap();
    assert!(issued.token.starts_with(inbox::TOKEN_PREFIX));
    assert!(
        !format!("{issued:?}").contains(&issued.token),
        "Debug redacts the token"
    );
    let identity = inbox::authenticate(fx.pool(), &issued.token)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (identity.tenant(), identity.account(), identity.device()),
        (TENANT, "bob", None)
    );
    assert_eq!(identity.producer(), ("account", "bob"));
    assert_eq!(
        inbox::list_credentials(fx.pool(), TENANT)
            .await
            .unwrap()
            .len(),
        2
    );

    let generated = inbox::generate_key(fx.pool(), TENANT, PROJECT, None, Duration::from_secs(60))
        .await
        .unwrap();
    assert!(!format!("{generated:?}").contains(&generated.private_seed_base64()));
    assert!(matches!(
        inbox::add_key(
            fx.pool(),
            TENANT,
            PROJECT,
            &generated.key_id,
            &generated.public_key,
            Duration::ZERO
        )
        .await,
        Err(inbox::Error::Conflict(_))
    ));
    assert!(matches!(
        inbox::add_key(
            fx.pool(),
            TENANT,
            PROJECT,
            "short",
            &[1; 31],
            Duration::ZERO
        )
        .await,
        Err(inbox::Error::Invalid { .. })
    ));
    let keys = inbox::list_keys(fx.pool(), TENANT, Some(PROJECT))
        .await
        .unwrap();
    assert_eq!(keys.len(), 2);
    assert!(keys.iter().all(|k| k.state == "active"));
    inbox::retire_key(fx.pool(), TENANT, PROJECT, &generated.key_id)
        .await
        .unwrap();
    assert!(matches!(
        inbox::retire_key(fx.pool(), TENANT, PROJECT, &generated.key_id).await,
        Err(inbox::Error::NotFound { .. })
    ));
    inbox::revoke_key(fx.pool(), TENANT, PROJECT, &generated.key_id)
        .await
        .unwrap();
    let states: Vec<String> = inbox::list_keys(fx.pool(), TENANT, None)
        .await
        .unwrap()
        .into_iter()
        .map(|k| k.state)
        .collect();
    assert_eq!(states, vec!["active", "revoked"]);
}

#[tokio::test]
async fn stream_actions_are_checked_and_audited() {
    let fx = Fx::new().await;
    for seq in [1, 2, 5] {
        assert!(fx.send(&fx.body(seq)).await.is_acknowledged());
    }
    let stream = StreamId {
        tenant: TENANT.into(),
        project: PROJECT.into(),
        producer: Producer::Device("laptop-1".into()),
    };
    let mut conn = fx.pool().acquire().await.unwrap();
    let shown = inbox::streams::show(&mut conn, TENANT, PROJECT, None)
        .await
        .unwrap();
    assert_eq!(shown.len(), 1);
    assert_eq!(
        (
            shown[0].acknowledged_sequence,
            shown[0].replay_floor,
            shown[0].retained_ahead
        ),
        (2, 1, 1)
    );

    let mut tx = fx.pool().begin().await.unwrap();
    assert!(matches!(
        inbox::streams::skip(&mut tx, &stream, 2, "ops", "why").await,
        Err(inbox::Error::Conflict(_))
    ));
    assert!(matches!(
        inbox::streams::advance_floor(&mut tx, &stream, 4, "ops", "why").await,
        Err(inbox::Error::Conflict(_))
    ));
    // Skipping to 3 walks on through the retained 4? No: 4 is missing, 5 is retained. Skip to 4
    // lands on 4 and walks to 5.
    let change = inbox::streams::skip(&mut tx, &stream, 4, "ops", "sequence 3 and 4 lost")
        .await
        .unwrap();
    assert_eq!((change.before, change.after), (2, 5));
    let change = inbox::streams::advance_floor(&mut tx, &stream, 6, "ops", "all old data expired")
        .await
        .unwrap();
    assert_eq!((change.before, change.after), (1, 6));
    tx.commit().await.unwrap();

    let other = StreamId {
        producer: Producer::Account("laptop-1".into()),
        ..stream.clone()
    };
    let mut tx = fx.pool().begin().await.unwrap();
    assert!(matches!(
        inbox::streams::skip(&mut tx, &other, 9, "ops", "x").await,
        Err(inbox::Error::NotFound { .. })
    ));
    drop(tx);

    let rows: Vec<(String, String, String, String, String)> = sqlx::query_as(
        "SELECT action, actor_account, sequence_before::text, sequence_after::text, reason
           FROM wharf.inbox_audit WHERE action <> 'ingest' ORDER BY audit_id",
    )
    .fetch_all(fx.pool())
    .await
    .unwrap();
    assert_eq!(
        rows,
        vec![
            (
                "stream-skip".into(),
                "ops".into(),
                "2".into(),
                "5".into(),
                "sequence 3 and 4 lost".into()
            ),
            (
                "stream-advance-floor".into(),
                "ops".into(),
                "1".into(),
                "6".into(),
                "all old data expired".into()
            ),
        ]
    );
    assert_eq!(fx.cursor().await, (5, 6));
}
