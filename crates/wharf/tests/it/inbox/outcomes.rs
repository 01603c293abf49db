//! The outcome table of SPEC §3.5, walked on one stream: each row sends one envelope and checks
//! the outcome, the reason, the acknowledged sequence and exactly which rows were written.

use std::time::Duration;

use ed25519_dalek::SigningKey;
use wharf::inbox::{self, Outcome, Producer, Status, StreamId};

use super::support::*;

struct Row {
    name: &'static str,
    body: Vec<u8>,
    outcome: Outcome,
    reason: &'static str,
    acknowledged: u64,
    /// New identities (and payloads) the row must write; audit always grows by exactly one.
    stored: i64,
}

async fn check(fx: &Fx, row: Row) -> wharf::inbox::Response {
    let before = fx.counts().await;
    let answer = fx.send(&row.body).await;
    let name = row.name;
    assert_eq!(
        answer.status,
        Status::Outcome(row.outcome),
        "{name}: {answer:?}"
    );
    assert_eq!(answer.reason, answered(row.reason), "{name}");
    assert_eq!(
        answer.acknowledged_sequence,
        Some(row.acknowledged),
        "{name}"
    );
    // SPEC §3.5's status for each outcome, written out here rather than read from the code.
    let status = match row.outcome {
        Outcome::AcceptDelayed | Outcome::AcceptReordered | Outcome::IgnoreDuplicate => 200,
        Outcome::RefuseReplay => 409,
        Outcome::RefuseIncompatible | Outcome::RefuseTampered => 422,
    };
    assert_eq!(answer.status.http_status(), status, "{name}");
    let after = fx.counts().await;
    assert_eq!(
        after.identities - before.identities,
        row.stored,
        "{name}: identities"
    );
    assert_eq!(
        after.payloads - before.payloads,
        row.stored,
        "{name}: payloads"
    );
    assert_eq!(
        after.audit - before.audit,
        1,
        "{name}: one audit row per decision"
    );
    let (outcome, reason, _, _) = last_audit(fx.pool()).await;
    assert_eq!(
        (outcome.as_str(), reason.as_str()),
        (row.outcome.as_str(), row.reason),
        "{name}: audit"
    );
    assert_eq!(
        fx.cursor().await.0,
        row.acknowledged,
        "{name}: stored cursor"
    );
    answer
}

fn stream() -> StreamId {
    StreamId {
        tenant: TENANT.into(),
        project: PROJECT.into(),
        producer: Producer::Device("laptop-1".into()),
    }
}

#[tokio::test]
async fn outcome_table_from_stream_state() {
    let fx = Fx::new().await;
    use Outcome::*;
    let row = |name, body, outcome, reason, acknowledged, stored| Row {
        name,
        body,
        outcome,
        reason,
        acknowledged,
        stored,
    };

    // Delayed, in order.
    check(
        &fx,
        row("first", fx.body(1), AcceptDelayed, "in-order", 1, 1),
    )
    .await;
    // A gap keeps the cursor still; retained sequences wait beyond it.
    check(&fx, row("gap 3", fx.body(3), AcceptDelayed, "gap", 1, 1)).await;
    check(&fx, row("gap 4", fx.body(4), AcceptDelayed, "gap", 1, 1)).await;
    // Filling the gap walks the cursor through every now-contiguous sequence: 1 -> 4.
    check(
        &fx,
        row("fill 2", fx.body(2), AcceptDelayed, "in-order", 4, 1),
    )
    .await;

    // Duplicate: same event, same content. Answers like the original, writes only audit.
    let dup = check(
        &fx,
        row("duplicate", fx.body(2), IgnoreDuplicate, "duplicate", 4, 0),
    )
    .await;
    let original = dup
        .original
        .clone()
        .expect("a duplicate names its original");
    assert_eq!(original.outcome, AcceptDelayed);
    assert!(dup.is_acknowledged());
    // The same event re-signed with a new key (rotation) is still the same event.
    let rotated = SigningKey::from_bytes(&[9; 32]);
    inbox::add_key(
        fx.pool(),
        TENANT,
        PROJECT,
        "key-2",
        rotated.verifying_key().as_bytes(),
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    check(
        &fx,
        row(
            "duplicate re-signed",
            sign_with(&fx.envelope(2), &rotated, "key-2"),
            IgnoreDuplicate,
            "duplicate",
            4,
            0,
        ),
    )
    .await;

    // Duplicate identity with different content: tampered.
    let mut changed = fx.envelope(2);
    changed.payload = payload("run-2-changed");
    check(
        &fx,
        row(
            "same event id, other content",
            fx.signed(&changed),
            RefuseTampered,
            "identity-conflict",
            4,
            0,
        ),
    )
    .await;
    let mut same_key = fx.envelope(9);
    same_key.idempotency_key = "k-2".into();
    check(
        &fx,
        row(
            "same idempotency key, other event",
            fx.signed(&same_key),
            RefuseTampered,
            "identity-conflict",
            4,
            0,
        ),
    )
    .await;
    let mut same_seq = fx.envelope(10);
    same_seq.producer_sequence = 3;
    check(
        &fx,
        row(
            "same sequence, other event",
            fx.signed(&same_seq),
            RefuseTampered,
            "identity-conflict",
            4,
            0,
        ),
    )
    .await;

    // Reordered after an operator skip: cursor 4 -> 7 over the gap at 5, 6, 7.
    let mut tx = fx.pool().begin().await.unwrap();
    let skip = inbox::streams::skip(&mut tx, &stream(), 7, "ops-1", "producer lost 5-7")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!((skip.before, skip.after), (4, 7));
    check(
        &fx,
        row("reordered", fx.body(6), AcceptReordered, "reordered", 7, 1),
    )
    .await;
    check(
        &fx,
        row("after skip", fx.body(8), AcceptDelayed, "in-order", 8, 1),
    )
    .await;

    // Replay below the floor, unless it is a duplicate.
    let mut tx = fx.pool().begin().await.unwrap();
    inbox::streams::advance_floor(&mut tx, &stream(), 7, "ops-1", "5 and 6 are gone for good")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(fx.cursor().await, (8, 7));
    check(&fx, row("replay", fx.body(5), RefuseReplay, "replay", 8, 0)).await;
    check(
        &fx,
        row(
            "duplicate below floor",
            fx.body(1),
            IgnoreDuplicate,
            "duplicate",
            8,
            0,
        ),
    )
    .await;

    // Incompatible: schema version (verified first), or an event type with no schema.
    let mut v2 = fx.envelope(11);
    v2.schema_version = 2;
    check(
        &fx,
        row(
            "schema version 2",
            fx.signed(&v2),
            RefuseIncompatible,
            "schema",
            8,
            0,
        ),
    )
    .await;
    let mut unknown_type = fx.envelope(11);
    unknown_type.event_type = "from_the_future".into();
    check(
        &fx,
        row(
            "unknown event type",
            fx.signed(&unknown_type),
            RefuseIncompatible,
            "event-type",
            8,
            0,
        ),
    )
    .await;

    // Every tampered reason that is not an identity conflict.
    let mut other_tenant = fx.envelope(11);
    other_tenant.tenant_id = "globex".into();
    check(
        &fx,
        row(
            "envelope tenant",
            fx.signed(&other_tenant),
            RefuseTampered,
            "route",
            8,
            0,
        ),
    )
    .await;
    let mut other_project = fx.envelope(11);
    other_project.project_id = "api".into();
    check(
        &fx,
        row(
            "envelope project",
            fx.signed(&other_project),
            RefuseTampered,
            "route",
            8,
            0,
        ),
    )
    .await;
    let stranger = SigningKey::from_bytes(&[3; 32]);
    check(
        &fx,
        row(
            "unknown key",
            sign_with(&fx.envelope(11), &stranger, "nobody"),
            RefuseTampered,
            "signature-unknown-key",
            8,
            0,
        ),
    )
    .await;
    check(
        &fx,
        row(
            "wrong key for id",
            sign_with(&fx.envelope(11), &stranger, &fx.key_id),
            RefuseTampered,
            "signature-invalid",
            8,
            0,
        ),
    )
    .await;
    let altered = edit(&fx.body(11), |v| {
        v["payload"]["run_id"] = "run-altered".into()
    });
    check(
        &fx,
        row(
            "altered after signing",
            altered,
            RefuseTampered,
            "signature-invalid",
            8,
            0,
        ),
    )
    .await;
    let mut bad_payload = fx.envelope(11);
    bad_payload.payload["checks"][0]["extra"] = "x".into();
    check(
        &fx,
        row(
            "payload at depth",
            fx.signed(&bad_payload),
            RefuseTampered,
            "payload",
            8,
            0,
        ),
    )
    .await;
    inbox::retire_key(fx.pool(), TENANT, PROJECT, "key-2")
        .await
        .unwrap();
    check(
        &fx,
        row(
            "retired in window",
            sign_with(&fx.envelope(11), &rotated, "key-2"),
            AcceptDelayed,
            "gap",
            8,
            1,
        ),
    )
    .await;
    sqlx::query("UPDATE wharf.inbox_keys SET retired_at = now() - interval '61 seconds' WHERE key_id = 'key-2'")
        .execute(fx.pool())
        .await
        .unwrap();
    check(
        &fx,
        row(
            "retired past window",
            sign_with(&fx.envelope(12), &rotated, "key-2"),
            RefuseTampered,
            "signature-retired-key",
            8,
            0,
        ),
    )
    .await;
    inbox::revoke_key(fx.pool(), TENANT, PROJECT, &fx.key_id)
        .await
        .unwrap();
    check(
        &fx,
        row(
            "revoked",
            fx.body(12),
            RefuseTampered,
            "signature-revoked-key",
            8,
            0,
        ),
    )
    .await;

    // The whole walk is one stream, keyed by the device, never by the key id.
    assert_eq!(fx.counts().await.streams, 1);
}
