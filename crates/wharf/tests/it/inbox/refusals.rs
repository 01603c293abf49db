//! Every refusal and every bad input changes nothing but the audit table (one row), and an
//! unauthenticated or oversized request not even that.

use base64::Engine as _;
use ed25519_dalek::SigningKey;
use serde_json::json;
use wharf::inbox::{self, InboxConfig, Outcome, Route, Status};

use super::support::*;

#[tokio::test]
async fn bad_inputs_write_only_their_audit_row() {
    let fx = Fx::with_config(InboxConfig {
        body_bytes_max: 64 * 1024,
        ..unlimited()
    })
    .await;
    // A stream with state, so "nothing changed" is checked against something.
    assert!(fx.send(&fx.body(1)).await.is_acknowledged());

    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    inbox::create_tenant(fx.pool(), "globex").await.unwrap();
    let globex_key = SigningKey::from_bytes(&[5; 32]);
    inbox::add_key(
        fx.pool(),
        "globex",
        PROJECT,
        "globex-key",
        globex_key.verifying_key().as_bytes(),
        inbox::KEY_REPLAY_WINDOW_DEFAULT,
    )
    .await
    .unwrap();
    let revoked = SigningKey::from_bytes(&[6; 32]);
    inbox::add_key(
        fx.pool(),
        TENANT,
        PROJECT,
        "revoked-key",
        revoked.verifying_key().as_bytes(),
        inbox::KEY_REPLAY_WINDOW_DEFAULT,
    )
    .await
    .unwrap();
    inbox::revoke_key(fx.pool(), TENANT, PROJECT, "revoked-key")
        .await
        .unwrap();

    let good = fx.body(2);
    let lower_event_id = event_id(2).to_lowercase().replace('0', "o");
    let mut deep = fx.envelope(2);
    deep.payload["checks"][0]["result"] = "maybe".into();
    let mut too_many = fx.envelope(2);
    too_many.payload["commit_ids"] = json!(vec!["abcdef0"; 65]);

    // (what is wrong, body, the audited reason). Decoding failures use the pipeline's reasons
    // (wharf_core::inbox): identities are the route's, the integrity member the signature's,
    // anything else about the envelope's shape the payload's.
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "malformed JSON",
            b"{\"schema_version\": 1,".to_vec(),
            "payload",
        ),
        ("not an object", b"[1, 2]".to_vec(), "payload"),
        ("empty body", Vec::new(), "payload"),
        (
            "unknown field",
            edit(&good, |v| v["extra"] = 1.into()),
            "payload",
        ),
        (
            "unknown integrity field",
            edit(&good, |v| v["integrity"]["x"] = 1.into()),
            "payload",
        ),
        (
            "payload",
            String::from_utf8(good.clone())
                .unwrap()
                .replacen("\"producer_sequence\":2", "\"producer_sequence\":2.0", 1)
                .into_bytes(),
            "payload",
        ),
        (
            "float in payload",
            edit(&good, |v| v["payload"]["n"] = json!(1.5)),
            "payload",
        ),
        (
            "bad base64",
            edit(&good, |v| {
                v["integrity"]["signature"] = "not base64!".into()
            }),
            "signature-invalid",
        ),
        (
            "63-byte signature",
            edit(&good, |v| {
                v["integrity"]["signature"] = b64(&[1; 63]).into()
            }),
            "signature-invalid",
        ),
        (
            "65-byte signature",
            edit(&good, |v| {
                v["integrity"]["signature"] = b64(&[1; 65]).into()
            }),
            "signature-invalid",
        ),
        (
            "unknown key",
            sign_with(&fx.envelope(2), &SigningKey::from_bytes(&[8; 32]), "ghost"),
            "signature-unknown-key",
        ),
        (
            "revoked key",
            sign_with(&fx.envelope(2), &revoked, "revoked-key"),
            "signature-revoked-key",
        ),
        (
            "other tenant's key",
            sign_with(&fx.envelope(2), &globex_key, "globex-key"),
            "signature-unknown-key",
        ),
        (
            "route: envelope tenant",
            edit(&good, |v| v["tenant_id"] = "globex".into()),
            "route",
        ),
        (
            "route: bad tenant identity",
            edit(&good, |v| v["tenant_id"] = "-bad".into()),
            "route",
        ),
        (
            "bad identity",
            edit(&good, |v| v["event_id"] = lower_event_id.clone().into()),
            "route",
        ),
        (
            "missing field",
            edit(&good, |v| {
                v.as_object_mut().unwrap().remove("occurred_at");
            }),
            "payload",
        ),
        // Step 4 before decoding: a body for another tenant or project is `route` even when it
        // would also fail to decode, as long as its route can be read.
        (
            "route: other tenant and an unknown field",
            edit(&good, |v| {
                v["tenant_id"] = "globex".into();
                v["extra"] = 1.into();
            }),
            "route",
        ),
        (
            "route: other project and a float in the payload",
            edit(&good, |v| {
                v["project_id"] = "api".into();
                v["payload"]["n"] = json!(1.5);
            }),
            "route",
        ),
        (
            "route: other tenant and a missing field",
            edit(&good, |v| {
                v["tenant_id"] = "globex".into();
                v.as_object_mut().unwrap().remove("occurred_at");
            }),
            "route",
        ),
        (
            "route: other tenant and a signature that is not base64",
            edit(&good, |v| {
                v["tenant_id"] = "globex".into();
                v["integrity"]["signature"] = "not base64!".into();
            }),
            "route",
        ),
        // A repeated tenant has no route to read (readers disagree on which one wins): the
        // decoding refusal answers.
        (
            "repeated tenant: no route to read",
            String::from_utf8(good.clone())
                .unwrap()
                .replacen(
                    "\"tenant_id\":\"acme\"",
                    "\"tenant_id\":\"globex\",\"tenant_id\":\"acme\"",
                    1,
                )
                .into_bytes(),
            "payload",
        ),
        ("payload at depth", fx.signed(&deep), "payload"),
        ("payload array bound", fx.signed(&too_many), "payload"),
    ];
    for (name, body, reason) in cases {
        let before = fx.counts().await;
        let cursor = fx.cursor().await;
        let answer = fx.send(&body).await;
        assert_eq!(
            answer.status,
            Status::Outcome(Outcome::RefuseTampered),
            "{name}: {answer:?}"
        );
        assert_eq!(answer.reason, answered(reason), "{name}");
        assert_eq!(answer.acknowledged_sequence, Some(1), "{name}");
        assert!(!answer.is_acknowledged());
        assert_eq!(fx.counts().await, before.audited(1), "{name}");
        assert_eq!(fx.cursor().await, cursor, "{name}");
        let (outcome, audited_reason, _, _) = last_audit(fx.pool()).await;
        assert_eq!(
            (outcome.as_str(), audited_reason.as_str()),
            ("refuse-tampered", reason),
            "{name}"
        );
    }

    // Route mismatches in the URL: into another tenant, or to another project.
    for (name, route) in [
        ("URL tenant", Route::new("globex", PROJECT)),
        ("URL project", Route::new(TENANT, "api")),
        ("URL project identity", Route::new(TENANT, "../etc")),
    ] {
        let before = fx.counts().await;
        let answer = fx.inbox.ingest(peer(), &fx.token, route, &good).await;
        assert_eq!(
            (answer.status, answer.reason),
            (Status::Outcome(Outcome::RefuseTampered), "route"),
            "{name}"
        );
        assert_eq!(fx.counts().await, before.audited(1), "{name}");
    }

    // Nothing audited without a verified tenant, and nothing before the body limit.
    let before = fx.counts().await;
    for (name, token, body, status) in [
        ("no token", "", good.clone(), Status::Unauthenticated),
        (
            "garbage token",
            "Bearer nonsense",
            good.clone(),
            Status::Unauthenticated,
        ),
        (
            "unknown token",
            "wharf_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            good.clone(),
            Status::Unauthenticated,
        ),
        (
            "oversized",
            fx.token.as_str(),
            vec![b' '; 64 * 1024 + 1],
            Status::TooLarge,
        ),
    ] {
        let answer = fx
            .inbox
            .ingest(peer(), token, Route::new(TENANT, PROJECT), &body)
            .await;
        assert_eq!(answer.status, status, "{name}");
        assert_eq!(answer.acknowledged_sequence, None, "{name}");
    }
    assert_eq!(
        fx.counts().await,
        before,
        "unauthenticated requests write nothing"
    );
    assert_eq!(Status::Unauthenticated.http_status(), 401);
    assert_eq!(Status::TooLarge.http_status(), 413);

    // A revoked credential is unauthenticated at once.
    let credentials = inbox::list_credentials(fx.pool(), TENANT).await.unwrap();
    inbox::revoke_credential(fx.pool(), TENANT, credentials[0].credential_id)
        .await
        .unwrap();
    assert_eq!(fx.send(&good).await.status, Status::Unauthenticated);
    assert_eq!(fx.counts().await, before);
}

/// `body` with its `schema_version` set to `version` (JSON integer text), signed over exactly
/// that by `key`, as a producer whose model holds any integer would sign it. Beyond u64 nothing
/// is canonical, so the text itself is signed (nothing can verify it).
fn signed_with_version(fx: &Fx, key: &SigningKey, seq: u64, version: &str) -> Vec<u8> {
    let mut envelope = fx.envelope(seq);
    envelope.integrity.algorithm = "Ed25519".into();
    envelope.integrity.key_id = fx.key_id.clone();
    let text = serde_json::to_string(&envelope.to_value())
        .unwrap()
        .replace(
            "\"schema_version\":1",
            &format!("\"schema_version\":{version}"),
        );
    let signing = wharf::core::canonical::canonicalize(text.as_bytes())
        .unwrap_or_else(|_| text.clone().into_bytes());
    use ed25519_dalek::Signer as _;
    let signature = base64::engine::general_purpose::STANDARD.encode(key.sign(&signing).to_bytes());
    text.replace(
        "\"signature\":\"\"",
        &format!("\"signature\":\"{signature}\""),
    )
    .into_bytes()
}

#[tokio::test]
async fn a_schema_version_above_i64_is_incompatible_once_its_signature_verifies() {
    let fx = Fx::new().await;
    assert!(fx.send(&fx.body(1)).await.is_acknowledged());
    let stranger = SigningKey::from_bytes(&[9; 32]);
    // SPEC §3.4 step 6: any version but 1 is refuse-incompatible, after step 5. The envelope
    // model holds an i64, so i64::MAX + 1 ..= u64::MAX are checked against the bytes as sent.
    // Beyond u64 (and below i64) no integer is canonical anywhere in an envelope, so no
    // signature over one can be checked: refused at decoding as `payload`.
    let rows: [(&str, Vec<u8>, Outcome, &str); 6] = [
        (
            "2",
            signed_with_version(&fx, &fx.key, 2, "2"),
            Outcome::RefuseIncompatible,
            "schema",
        ),
        (
            "i64::MAX + 1",
            signed_with_version(&fx, &fx.key, 2, "9223372036854775808"),
            Outcome::RefuseIncompatible,
            "schema",
        ),
        (
            "u64::MAX",
            signed_with_version(&fx, &fx.key, 2, "18446744073709551615"),
            Outcome::RefuseIncompatible,
            "schema",
        ),
        (
            "u64::MAX, signed by a stranger under our key id",
            signed_with_version(&fx, &stranger, 2, "18446744073709551615"),
            Outcome::RefuseTampered,
            "signature-invalid",
        ),
        (
            "u64::MAX + 1",
            signed_with_version(&fx, &fx.key, 2, "18446744073709551616"),
            Outcome::RefuseTampered,
            "payload",
        ),
        (
            "i64::MIN - 1",
            signed_with_version(&fx, &fx.key, 2, "-9223372036854775809"),
            Outcome::RefuseTampered,
            "payload",
        ),
    ];
    for (name, body, outcome, reason) in rows {
        let before = fx.counts().await;
        let answer = fx.send(&body).await;
        assert_eq!(
            (answer.status, answer.reason),
            (Status::Outcome(outcome), answered(reason)),
            "{name}"
        );
        assert_eq!(answer.status.http_status(), 422, "{name}");
        assert_eq!(answer.acknowledged_sequence, Some(1), "{name}");
        assert_eq!(
            fx.counts().await,
            before.audited(1),
            "{name}: nothing stored"
        );
        let (audited_outcome, audited_reason, event_digest, _) = last_audit(fx.pool()).await;
        assert_eq!(
            (audited_outcome.as_str(), audited_reason.as_str()),
            (outcome.as_str(), reason),
            "{name}"
        );
        // A version the model holds only as a stand-in still decoded: its event id is audited.
        assert_eq!(event_digest.is_some(), reason != "payload", "{name}");
    }
    // The producer can still send sequence 2 as version 1.
    assert!(fx.send(&fx.body(2)).await.is_acknowledged());
}

#[tokio::test]
async fn identities_and_audit_are_append_only() {
    let fx = Fx::new().await;
    assert!(fx.send(&fx.body(1)).await.is_acknowledged());
    for sql in [
        "UPDATE wharf.inbox_identities SET outcome = 'accept-reordered'",
        "DELETE FROM wharf.inbox_identities",
        "TRUNCATE wharf.inbox_identities CASCADE",
        "UPDATE wharf.inbox_audit SET reason = 'x'",
        "DELETE FROM wharf.inbox_audit",
        "TRUNCATE wharf.inbox_audit",
    ] {
        let err = sqlx::query(sql).execute(fx.pool()).await.expect_err(sql);
        assert!(err.to_string().contains("append-only"), "{sql}: {err}");
    }
    assert_eq!(fx.counts().await.identities, 1);
}

/// Identities name their stream without a foreign key (migration 0020), because a stream row
/// can never go: it is updated, never deleted or truncated.
#[tokio::test]
async fn streams_are_never_removed() {
    let fx = Fx::new().await;
    assert!(fx.send(&fx.body(1)).await.is_acknowledged());
    for sql in [
        "DELETE FROM wharf.inbox_streams",
        "TRUNCATE wharf.inbox_streams",
        "TRUNCATE wharf.inbox_streams CASCADE",
    ] {
        let err = sqlx::query(sql).execute(fx.pool()).await.expect_err(sql);
        assert!(err.to_string().contains("never removed"), "{sql}: {err}");
        let code = err.as_database_error().and_then(|d| d.code());
        assert_eq!(code.as_deref(), Some("23001"), "{sql}: restrict_violation");
    }
    let streams: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.inbox_streams")
        .fetch_one(fx.pool())
        .await
        .unwrap();
    assert_eq!(streams, 1);
    assert_eq!(fx.counts().await.identities, 1);
    // The stream still takes its next envelope.
    assert!(fx.send(&fx.body(2)).await.is_acknowledged());
}

/// The audit's event-id digest is checked without a regular expression (migration 0020); what
/// it admits is unchanged: NULL, or exactly 64 characters of 0-9 and a-f.
#[tokio::test]
async fn the_audit_digest_is_checked_at_its_edges() {
    let fx = Fx::new().await;
    let insert = |digest: Option<String>| {
        let pool = fx.pool().clone();
        async move {
            sqlx::query(
                "INSERT INTO wharf.inbox_audit (action, tenant_id, actor_account, outcome, reason,
                                                correlation_id, event_id_sha256)
                 VALUES ('ingest', 't', 'a', 'refuse', 'payload', 'c', $1)",
            )
            .bind(digest)
            .execute(&pool)
            .await
        }
    };
    let hex = "0123456789abcdef".repeat(4);
    insert(None).await.unwrap();
    insert(Some(hex.clone())).await.unwrap();
    insert(Some("f".repeat(64))).await.unwrap();
    for bad in [
        String::new(),
        hex[..63].to_owned(),
        format!("{hex}0"),
        hex.to_uppercase(),
        format!("{}é", &hex[..63]),
        // 61 bytes and a three-byte character: 64 bytes, 62 characters.
        format!("{}\u{ff41}", &hex[..61]),
        format!("{} ", &hex[..63]),
        "g".repeat(64),
    ] {
        let err = insert(Some(bad.clone())).await.expect_err(&bad);
        let db = err.as_database_error().expect("a database error");
        assert_eq!(db.code().as_deref(), Some("23514"), "{bad:?}");
        assert_eq!(
            db.constraint(),
            Some("inbox_audit_event_id_sha256_check"),
            "{bad:?}"
        );
    }
    let rows: i64 =
        sqlx::query_scalar("SELECT count(*) FROM wharf.inbox_audit WHERE tenant_id = 't'")
            .fetch_one(fx.pool())
            .await
            .unwrap();
    assert_eq!(rows, 3);
}

#[tokio::test]
async fn a_failure_anywhere_answers_503_and_commits_nothing() {
    let fx = Fx::new().await;
    assert!(fx.send(&fx.body(1)).await.is_acknowledged());
    // Make the audit write fail inside the one transaction (as a full disk or a lost connection
    // would): identities, payloads and the cursor must roll back with it.
    sqlx::raw_sql(
        "CREATE FUNCTION public.fail_audit() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$;
         CREATE TRIGGER fail_audit BEFORE INSERT ON wharf.inbox_audit
           FOR EACH ROW EXECUTE FUNCTION public.fail_audit();",
    )
    .execute(fx.pool())
    .await
    .unwrap();
    let before = fx.counts().await;
    for body in [fx.body(2), fx.body(1), b"{".to_vec()] {
        let answer = fx.send(&body).await;
        assert_eq!(
            (answer.status, answer.reason),
            (Status::Unavailable, "database")
        );
        assert_eq!(answer.status.http_status(), 503);
        assert_eq!(answer.acknowledged_sequence, None);
        assert!(!answer.is_acknowledged());
    }
    assert_eq!(fx.counts().await, before, "nothing committed");
    assert_eq!(fx.cursor().await, (1, 1));

    // The same envelope again, once the database is healthy: accepted exactly once.
    sqlx::query("DROP TRIGGER fail_audit ON wharf.inbox_audit")
        .execute(fx.pool())
        .await
        .unwrap();
    let answer = fx.send(&fx.body(2)).await;
    assert_eq!(answer.status, Status::Outcome(Outcome::AcceptDelayed));
    assert_eq!(answer.acknowledged_sequence, Some(2));

    // A database that cannot be reached at all: 503 before anything else.
    fx.pool().close().await;
    let answer = fx.send(&fx.body(3)).await;
    assert_eq!(answer.status, Status::Unavailable);
}
