//! The server's signing keys: sealed at rest, bound to their scope, rotated without losing the
//! old public halves, or injected by the deployment.

use std::sync::Arc;

use async_trait::async_trait;
use ed25519_dalek::SigningKey;
use sqlx::PgConnection;
use wharf::core::sign::verify;
use wharf::outbound::{
    self, CurrentKey, Error, KeyState, Scope, SealedKeySource, ServerKey, SigningKeySource,
};

use super::support::*;

#[tokio::test]
async fn rotation_keeps_old_keys_listed_and_their_envelopes_verifiable() {
    let fx = Fx::new().await;
    let old = fx.emit(&request("before", 1)).await.unwrap();
    let new_key = outbound::generate_signing_key(fx.pool(), &fx.server_key, TENANT, PROJECT)
        .await
        .unwrap();
    assert_ne!(new_key.key_id, fx.key_id);
    assert!(new_key.key_id.starts_with("out-"));

    let listed = outbound::list_signing_keys(fx.pool(), TENANT, Some(PROJECT))
        .await
        .unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].key_id, fx.key_id);
    assert_eq!(listed[0].state, KeyState::Retired);
    assert!(listed[0].retired_at.is_some());
    assert_eq!(listed[1].key_id, new_key.key_id);
    assert_eq!(listed[1].state, KeyState::Active);
    assert_eq!(listed[1].public_key, new_key.public_key);

    let new = fx.emit(&request("after", 2)).await.unwrap();
    assert_eq!(new.envelope.integrity.key_id, new_key.key_id);
    assert_eq!(
        new.envelope.producer_sequence, 2,
        "rotation keeps the stream"
    );
    let old_public = fx.verifying_key(&fx.key_id).await;
    let new_public = fx.verifying_key(&new_key.key_id).await;
    verify(&old.envelope, &old_public).unwrap();
    verify(&new.envelope, &new_public).unwrap();
    assert!(verify(&old.envelope, &new_public).is_err());

    // The original stays the original: a re-emit after rotation is not re-signed.
    let again = fx.emit(&request("before", 1)).await.unwrap();
    assert_eq!(again.envelope, old.envelope);

    // Listing by tenant shows every project; the key is found only in its own scope.
    outbound::generate_signing_key(fx.pool(), &fx.server_key, TENANT, "app")
        .await
        .unwrap();
    assert_eq!(
        outbound::list_signing_keys(fx.pool(), TENANT, None)
            .await
            .unwrap()
            .len(),
        3
    );
    assert!(
        outbound::list_signing_keys(fx.pool(), "other", None)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        outbound::public_key(fx.pool(), TENANT, "app", &fx.key_id).await,
        Err(Error::KeyNotFound { .. })
    ));
    assert!(matches!(
        outbound::public_key(fx.pool(), "", PROJECT, &fx.key_id).await,
        Err(Error::Invalid {
            field: "tenant",
            ..
        })
    ));
}

#[tokio::test]
async fn a_sealed_key_does_not_open_under_another_server_key() {
    let fx = Fx::new().await;
    let stranger = SealedKeySource::new(ServerKey::generate());
    let mut conn = fx.pool().acquire().await.unwrap();
    match stranger.current(&mut conn, &scope()).await {
        Err(Error::ServerKeyMismatch { key_id }) => assert_eq!(key_id, fx.key_id),
        other => panic!("{other:?}"),
    }
    // Even with the fingerprint forged to match, the seal itself refuses.
    let forged = ServerKey::generate();
    sqlx::query("UPDATE wharf.outbound_signing_keys SET sealed_by = $1")
        .bind(forged.fingerprint().to_vec())
        .execute(fx.pool())
        .await
        .unwrap();
    match SealedKeySource::new(forged)
        .current(&mut conn, &scope())
        .await
    {
        Err(Error::SealBroken { key_id }) => assert_eq!(key_id, fx.key_id),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_sealed_key_moved_to_another_tenant_or_project_does_not_open() {
    let fx = Fx::new().await;
    for (tenant, project) in [("evil", PROJECT), (TENANT, "other")] {
        sqlx::query(
            "INSERT INTO wharf.outbound_signing_keys
                    (tenant_id, project_id, key_id, public_key, sealed_private_key, sealed_by)
             SELECT $1, $2, key_id, public_key, sealed_private_key, sealed_by
               FROM wharf.outbound_signing_keys
              WHERE tenant_id = 'acme' AND project_id = 'web'",
        )
        .bind(tenant)
        .bind(project)
        .execute(fx.pool())
        .await
        .unwrap();
        let mut r = request(&format!("moved-{tenant}-{project}"), 1);
        r.scope = Scope::new(tenant, project);
        match fx.emit(&r).await {
            Err(Error::SealBroken { key_id }) => assert_eq!(key_id, fx.key_id),
            other => panic!("{tenant}/{project}: {other:?}"),
        }
    }
    assert_eq!(
        count(fx.pool(), "SELECT count(*) FROM wharf.outbound_envelopes").await,
        0
    );
    // The key still works where it belongs.
    assert!(fx.emit(&request("home", 1)).await.unwrap().created);
}

#[tokio::test]
async fn concurrent_rotations_leave_one_current_key() {
    let fx = Fx::new().await;
    let mut first = fx.pool().begin().await.unwrap();
    outbound::generate_signing_key(&mut *first, &fx.server_key, TENANT, PROJECT)
        .await
        .unwrap();
    let pool = fx.pool().clone();
    let server_key = fx.server_key.clone();
    let second = tokio::spawn(async move {
        outbound::generate_signing_key(&pool, &server_key, TENANT, PROJECT).await
    });
    // Let the second rotation reach the row the first one holds, then commit the first.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    first.commit().await.unwrap();
    match second.await.unwrap() {
        Err(Error::ConcurrentRotation { tenant, project }) => {
            assert_eq!((tenant.as_str(), project.as_str()), (TENANT, PROJECT))
        }
        other => panic!("{other:?}"),
    }
    let active = count(
        fx.pool(),
        "SELECT count(*) FROM wharf.outbound_signing_keys WHERE state = 'active'",
    )
    .await;
    assert_eq!(active, 1);
    // Retrying makes a newer key current.
    outbound::generate_signing_key(fx.pool(), &fx.server_key, TENANT, PROJECT)
        .await
        .unwrap();
    assert_eq!(
        outbound::list_signing_keys(fx.pool(), TENANT, Some(PROJECT))
            .await
            .unwrap()
            .len(),
        3
    );
}

/// A deployment's own key source (a KMS, an HSM): here a fixed key for every scope.
struct Injected {
    key: SigningKey,
}

#[async_trait]
impl SigningKeySource for Injected {
    async fn current(&self, _conn: &mut PgConnection, _scope: &Scope) -> Result<CurrentKey, Error> {
        Ok(CurrentKey {
            key_id: "kms-1".into(),
            key: self.key.clone(),
        })
    }
}

#[tokio::test]
async fn an_injected_key_source_signs_instead_of_the_sealed_keys() {
    let fx = Fx::new().await;
    let injected = Arc::new(Injected {
        key: SigningKey::from_bytes(&[9u8; 32]),
    });
    let mut tx = fx.pool().begin().await.unwrap();
    let emitted =
        outbound::emit_envelope(&mut tx, &fx.registry, injected.as_ref(), &request("kms", 1))
            .await
            .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(emitted.envelope.integrity.key_id, "kms-1");
    verify(&emitted.envelope, &injected.key.verifying_key()).unwrap();
}
