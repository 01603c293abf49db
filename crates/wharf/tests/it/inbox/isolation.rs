//! Tenant isolation, and the audit's redaction: no credential, signature or payload byte.

use ed25519_dalek::SigningKey;
use wharf::core::envelope::decode_envelope;
use wharf::inbox::{self, Outcome, Route, Status};

use super::support::*;

#[tokio::test]
async fn a_credential_of_one_tenant_cannot_ingest_into_another() {
    let fx = Fx::new().await;
    inbox::create_tenant(fx.pool(), "globex").await.unwrap();
    let globex_key = SigningKey::from_bytes(&[5; 32]);
    inbox::add_key(
        fx.pool(),
        "globex",
        PROJECT,
        "g-1",
        globex_key.verifying_key().as_bytes(),
        inbox::KEY_REPLAY_WINDOW_DEFAULT,
    )
    .await
    .unwrap();

    // acme's credential, an envelope fully made out to globex and signed with globex's key.
    let mut envelope = fx.envelope(1);
    envelope.tenant_id = "globex".into();
    let body = sign_with(&envelope, &globex_key, "g-1");
    for route in [Route::new("globex", PROJECT), Route::new(TENANT, PROJECT)] {
        let answer = fx.inbox.ingest(peer(), &fx.token, route, &body).await;
        assert_eq!(
            (answer.status, answer.reason),
            (Status::Outcome(Outcome::RefuseTampered), "route")
        );
    }
    // An acme envelope naming globex's key id: keys resolve only in the verified scope.
    let body = sign_with(&fx.envelope(1), &globex_key, "g-1");
    let answer = fx.send(&body).await;
    assert_eq!(answer.reason, "signature");
    assert_eq!(last_audit(fx.pool()).await.1, "signature-unknown-key");

    let counts = fx.counts().await;
    assert_eq!(
        (counts.streams, counts.identities, counts.payloads),
        (0, 0, 0)
    );
    // The refusals are audited in the sender's tenant, never in the one it aimed at.
    let tenants: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT tenant_id FROM wharf.inbox_audit")
            .fetch_all(fx.pool())
            .await
            .unwrap();
    assert_eq!(tenants, vec![TENANT.to_owned()]);
    // And globex's streams (through the admin call) show nothing.
    let mut conn = fx.pool().acquire().await.unwrap();
    assert!(
        inbox::streams::show(&mut conn, "globex", PROJECT, None)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn audit_never_holds_credential_signature_or_payload() {
    let fx = Fx::new().await;
    let mut bodies = Vec::new();
    for seq in [1, 2, 2, 5] {
        let mut envelope = fx.envelope(seq);
        envelope.payload = payload(&format!("SECRET-PAYLOAD-MARKER-{seq}"));
        bodies.push(fx.signed(&envelope));
    }
    // A refused one too (its payload must not leak either).
    bodies.push(edit(&bodies[0], |v| {
        v["payload"]["run_id"] = "SECRET-PAYLOAD-MARKER-X".into()
    }));
    for body in &bodies {
        fx.send(body).await;
    }
    let text: String =
        sqlx::query_scalar("SELECT string_agg(a::text, E'\\n') FROM wharf.inbox_audit a")
            .fetch_one(fx.pool())
            .await
            .unwrap();
    assert!(text.lines().count() >= 5, "{text}");
    assert!(
        !text.contains("SECRET-PAYLOAD-MARKER"),
        "payload in audit: {text}"
    );
    assert!(!text.contains(&fx.token), "credential in audit");
    assert!(
        !text.contains(&fx.token["wharf_".len()..]),
        "credential in audit"
    );
    for body in &bodies[..4] {
        let envelope = decode_envelope(body).unwrap();
        assert!(
            !text.contains(&envelope.integrity.signature),
            "signature in audit"
        );
        assert!(
            !text.contains(&envelope.integrity.signature[..20]),
            "signature in audit"
        );
        assert!(!text.contains(&envelope.event_id), "raw event id in audit");
        assert!(
            text.contains(&envelope.event_id_digest_hex()),
            "event id digest missing"
        );
    }
    // The credential hash is not in the audit either, and the token is nowhere in the database.
    let stored: Vec<u8> = sqlx::query_scalar("SELECT token_sha256 FROM wharf.inbox_credentials")
        .fetch_one(fx.pool())
        .await
        .unwrap();
    assert!(!text.contains(&hex::encode(&stored)));
    let everywhere: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM wharf.inbox_credentials c WHERE c::text LIKE '%' || $1 || '%')",
    )
    .bind(&fx.token["wharf_".len()..])
    .fetch_one(fx.pool())
    .await
    .unwrap();
    assert!(!everywhere);
}
