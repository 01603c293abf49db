//! emit_envelope: one idempotency key, one envelope forever; gap-free sequences per receiver
//! stream; a failed emit leaves the caller's transaction as it was.

use std::sync::Arc;

use wharf::core::envelope::decode_envelope;
use wharf::core::sign::verify;
use wharf::inbox::{self, Inbox, InboxConfig, LimitPolicy, Route};
use wharf::outbound::{self, Destination, EnvelopeDelivery, Error, Scope, lane_key};
use wharf::outbox::{self, ActionRequest, Registry};

use super::support::*;

#[tokio::test]
async fn same_request_answers_the_original_envelope_byte_for_byte() {
    let fx = Fx::new().await;
    let first = fx.emit(&request("cursor-1", 1)).await.unwrap();
    assert!(first.created);
    assert_eq!(first.envelope.producer_sequence, 1);
    assert_eq!(first.envelope.integrity.key_id, fx.key_id);
    assert_eq!(first.envelope.tenant_id, TENANT);
    assert_eq!(first.envelope.project_id, PROJECT);
    assert_eq!(first.envelope.idempotency_key, "cursor-1");
    assert_eq!(first.envelope.producer_version, outbound::PRODUCER_VERSION);

    // Signed with the scope's key, strictly verifiable, and a well-formed envelope on the wire.
    let key = fx.verifying_key(&fx.key_id).await;
    verify(&first.envelope, &key).unwrap();
    let wire = first.envelope.to_canonical_json().unwrap();
    assert_eq!(decode_envelope(&wire).unwrap(), first.envelope);

    let again = fx.emit(&request("cursor-1", 1)).await.unwrap();
    assert!(!again.created);
    assert_eq!(again.action_id, first.action_id);
    assert_eq!(again.envelope.event_id, first.envelope.event_id);
    assert_eq!(
        again.envelope.integrity.signature,
        first.envelope.integrity.signature
    );
    assert_eq!(again.envelope.to_canonical_json().unwrap(), wire);

    // Nothing more was written: one action, one envelope, one sequence.
    assert_eq!(
        count(fx.pool(), "SELECT count(*) FROM wharf.action").await,
        1
    );
    assert_eq!(
        count(fx.pool(), "SELECT count(*) FROM wharf.outbound_envelopes").await,
        1
    );
    assert_eq!(
        last_sequence(fx.pool(), TENANT, PROJECT, URL).await,
        Some(1)
    );

    // The action is an `envelope` delivery of exactly that envelope, in the stream's lane.
    let action = outbox::get(fx.pool(), first.action_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(action.kind, outbound::ENVELOPE_KIND);
    assert_eq!(action.idempotency_key, "cursor-1");
    assert_eq!(action.tenant_id.as_deref(), Some(TENANT));
    assert_eq!(action.project_id.as_deref(), Some(PROJECT));
    assert_eq!(action.lane_key, lane_key(&scope(), &Destination::new(URL)));
    let delivery = EnvelopeDelivery::from_payload(action.payload.as_ref().unwrap()).unwrap();
    assert_eq!(delivery.destination_url, URL);
    assert_eq!(delivery.body().unwrap(), wire);
}

#[tokio::test]
async fn the_original_survives_delivery_and_the_payload_drop() {
    let fx = Fx::new().await;
    let first = fx.emit(&request("cursor-1", 1)).await.unwrap();
    let report = fx.executor().drain().await.unwrap();
    assert!(report.finished);
    // The adapter sent exactly the stored bytes.
    let sent = fx.stub.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, URL);
    assert_eq!(sent[0].1, first.envelope.to_canonical_json().unwrap());
    // The ended action keeps no payload; the envelope still answers under its key.
    let action = outbox::get(fx.pool(), first.action_id)
        .await
        .unwrap()
        .unwrap();
    assert!(action.payload.is_none());
    let again = fx.emit(&request("cursor-1", 1)).await.unwrap();
    assert!(!again.created);
    assert_eq!(again.envelope, first.envelope);
    assert_eq!(again.action_id, first.action_id);
}

#[tokio::test]
async fn a_different_request_under_the_key_is_refused_and_writes_nothing() {
    let fx = Fx::new().await;
    fx.emit(&request("cursor-1", 1)).await.unwrap();
    fx.executor().drain().await.unwrap();
    outbound::generate_signing_key(fx.pool(), &fx.server_key, "beta", PROJECT)
        .await
        .unwrap();
    let base = request("cursor-1", 1);
    let mut changes = Vec::new();
    let mut r = base.clone();
    r.payload = payload(2);
    changes.push(("payload", r));
    let mut r = base.clone();
    r.event_type = "approval".into();
    r.payload = serde_json::json!({
        "approval_id": "a1", "subject_id": "s1", "decided_by": "alice",
        "subject_type": "task_proposal", "decision": "approved", "base_version": 0,
    });
    changes.push(("event type", r));
    let mut r = base.clone();
    r.destination = Destination::new("https://c.example/in");
    changes.push(("destination", r));
    let mut r = base.clone();
    r.scope = Scope::new("beta", PROJECT);
    changes.push(("scope", r));
    for (what, changed) in changes {
        match fx.emit(&changed).await {
            Err(Error::IdempotencyConflict { key }) => assert_eq!(key, "cursor-1", "{what}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    // Attempts are not content: a re-emit with other attempts is the original.
    let mut r = base.clone();
    r.destination = Destination::new(URL).max_attempts(9);
    assert!(!fx.emit(&r).await.unwrap().created);

    assert_eq!(
        count(fx.pool(), "SELECT count(*) FROM wharf.action").await,
        1
    );
    assert_eq!(
        count(fx.pool(), "SELECT count(*) FROM wharf.outbound_envelopes").await,
        1
    );
    assert_eq!(
        count(fx.pool(), "SELECT count(*) FROM wharf.outbound_sequences").await,
        1,
        "no refused request took a sequence"
    );
}

#[tokio::test]
async fn concurrent_identical_emits_make_one_envelope() {
    let fx = Arc::new(Fx::new().await);
    const RACERS: usize = 6;
    let barrier = Arc::new(tokio::sync::Barrier::new(RACERS));
    let mut tasks = Vec::new();
    for _ in 0..RACERS {
        let fx = fx.clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            let mut tx = fx.pool().begin().await.unwrap();
            barrier.wait().await;
            let emitted =
                outbound::emit_envelope(&mut tx, &fx.registry, &fx.keys, &request("race", 1))
                    .await
                    .unwrap();
            tx.commit().await.unwrap();
            emitted
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    assert_eq!(results.iter().filter(|e| e.created).count(), 1);
    for e in &results {
        assert_eq!(e.envelope, results[0].envelope);
        assert_eq!(e.action_id, results[0].action_id);
    }
    assert_eq!(
        count(fx.pool(), "SELECT count(*) FROM wharf.action").await,
        1
    );
    assert_eq!(
        last_sequence(fx.pool(), TENANT, PROJECT, URL).await,
        Some(1)
    );
    // The next new envelope continues the stream without a gap.
    let next = fx.emit(&request("after-race", 2)).await.unwrap();
    assert_eq!(next.envelope.producer_sequence, 2);
}

#[tokio::test]
async fn concurrent_emits_of_one_key_from_two_scopes_conflict_without_taking_a_sequence() {
    let fx = Arc::new(Fx::new().await);
    outbound::generate_signing_key(fx.pool(), &fx.server_key, "beta", PROJECT)
        .await
        .unwrap();
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let mut tasks = Vec::new();
    for tenant in [TENANT, "beta"] {
        let fx = fx.clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            let mut r = request("shared-key", 1);
            r.scope = Scope::new(tenant, PROJECT);
            let mut tx = fx.pool().begin().await.unwrap();
            barrier.wait().await;
            let result = outbound::emit_envelope(&mut tx, &fx.registry, &fx.keys, &r).await;
            // Commit even after an error: the emit must have left nothing behind.
            tx.commit().await.unwrap();
            (tenant, result)
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        let (tenant, result) = t.await.unwrap();
        match result {
            Ok(e) => winners.push((tenant, e)),
            Err(Error::IdempotencyConflict { .. }) => {}
            Err(e) => panic!("{tenant}: {e:?}"),
        }
    }
    assert_eq!(winners.len(), 1);
    let (winner, _) = &winners[0];
    let loser = if *winner == TENANT { "beta" } else { TENANT };
    assert_eq!(
        last_sequence(fx.pool(), winner, PROJECT, URL).await,
        Some(1)
    );
    assert_eq!(last_sequence(fx.pool(), loser, PROJECT, URL).await, None);
    assert_eq!(
        count(fx.pool(), "SELECT count(*) FROM wharf.action").await,
        1
    );
}

#[tokio::test]
async fn sequences_are_gap_free_per_receiver_stream() {
    let fx = Fx::new().await;
    let seq = |e: &outbound::Emitted| e.envelope.producer_sequence;
    assert_eq!(seq(&fx.emit(&request("k1", 1)).await.unwrap()), 1);
    assert_eq!(seq(&fx.emit(&request("k2", 2)).await.unwrap()), 2);

    // A rolled-back emit gives its number back.
    let mut tx = fx.pool().begin().await.unwrap();
    let rolled = outbound::emit_envelope(&mut tx, &fx.registry, &fx.keys, &request("k3", 3))
        .await
        .unwrap();
    assert_eq!(seq(&rolled), 3);
    tx.rollback().await.unwrap();

    // A re-emit consumes nothing.
    assert_eq!(seq(&fx.emit(&request("k1", 1)).await.unwrap()), 1);
    let k4 = fx.emit(&request("k4", 4)).await.unwrap();
    assert_eq!(seq(&k4), 3);
    assert_ne!(k4.envelope.event_id, rolled.envelope.event_id);

    // Another receiver is another stream, from 1; so is another project.
    let mut other = request("k5", 5);
    other.destination = Destination::new("https://c.example/in");
    assert_eq!(seq(&fx.emit(&other).await.unwrap()), 1);
    outbound::generate_signing_key(fx.pool(), &fx.server_key, TENANT, "app")
        .await
        .unwrap();
    let mut app = request("k6", 6);
    app.scope = Scope::new(TENANT, "app");
    assert_eq!(seq(&fx.emit(&app).await.unwrap()), 1);
    assert_eq!(seq(&fx.emit(&request("k7", 7)).await.unwrap()), 4);
}

#[tokio::test]
async fn a_wharf_inbox_accepts_the_stream_in_order() {
    let fx = Fx::new().await;
    // The receiving side (here the same database): a tenant, a credential for this server,
    // and this server's public key filed under the same scope and key id.
    inbox::create_tenant(fx.pool(), TENANT).await.unwrap();
    let credential = inbox::issue_credential(fx.pool(), TENANT, "server-a", None)
        .await
        .unwrap();
    let public = outbound::public_key(fx.pool(), TENANT, PROJECT, &fx.key_id)
        .await
        .unwrap();
    inbox::add_key(
        fx.pool(),
        TENANT,
        PROJECT,
        &public.key_id,
        &public.public_key,
        inbox::KEY_REPLAY_WINDOW_DEFAULT,
    )
    .await
    .unwrap();
    let receiver = Inbox::new(
        fx.pool().clone(),
        InboxConfig {
            peer_limit: LimitPolicy::UNLIMITED,
            identity_limit: LimitPolicy::UNLIMITED,
            ..InboxConfig::default()
        },
    );
    let peer = "192.0.2.1".parse().unwrap();
    for n in 1..=3 {
        let emitted = fx.emit(&request(&format!("k{n}"), n)).await.unwrap();
        let body = emitted.envelope.to_canonical_json().unwrap();
        let answer = receiver
            .ingest(peer, &credential.token, Route::new(TENANT, PROJECT), &body)
            .await;
        assert_eq!(
            answer.status.as_str(),
            "accept-delayed",
            "{n}: {}",
            answer.reason
        );
        assert_eq!(answer.acknowledged_sequence, Some(n));
        // A retried delivery of the same envelope is a duplicate, never a second event.
        let again = fx.emit(&request(&format!("k{n}"), n)).await.unwrap();
        let answer = receiver
            .ingest(
                peer,
                &credential.token,
                Route::new(TENANT, PROJECT),
                &again.envelope.to_canonical_json().unwrap(),
            )
            .await;
        assert_eq!(answer.status.as_str(), "ignore-duplicate");
    }
}

#[tokio::test]
async fn a_key_held_by_another_action_is_a_conflict_and_the_transaction_stays_usable() {
    let fx = Fx::new().await;
    // An `envelope` action enqueued directly under the key, not by emit_envelope.
    let emitted = fx.emit(&request("donor", 1)).await.unwrap();
    let action = outbox::get(fx.pool(), emitted.action_id)
        .await
        .unwrap()
        .unwrap();
    let mut tx = fx.pool().begin().await.unwrap();
    outbox::enqueue(
        &mut tx,
        &fx.registry,
        ActionRequest::new(
            outbound::ENVELOPE_KIND,
            "lane-x",
            "taken",
            action.payload.unwrap(),
        )
        .tenant(TENANT),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();

    let mut tx = fx.pool().begin().await.unwrap();
    match outbound::emit_envelope(&mut tx, &fx.registry, &fx.keys, &request("taken", 2)).await {
        Err(Error::IdempotencyConflict { key }) => assert_eq!(key, "taken"),
        other => panic!("{other:?}"),
    }
    // The savepoint is gone: the caller's transaction goes on and commits what it did.
    let one: i32 = sqlx::query_scalar("SELECT 1")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(one, 1);
    tx.commit().await.unwrap();
    assert_eq!(
        last_sequence(fx.pool(), TENANT, PROJECT, URL).await,
        Some(1),
        "the refused emit gave its sequence back"
    );
    assert_eq!(
        count(
            fx.pool(),
            "SELECT count(*) FROM wharf.outbound_envelopes WHERE idempotency_key = 'taken'"
        )
        .await,
        0
    );
}

#[tokio::test]
async fn an_emit_that_cannot_be_delivered_writes_nothing() {
    let fx = Fx::new().await;
    // No adapter for the kind.
    let empty = Registry::new();
    let mut tx = fx.pool().begin().await.unwrap();
    match outbound::emit_envelope(&mut tx, &empty, &fx.keys, &request("k1", 1)).await {
        Err(Error::Outbox(outbox::Error::UnknownKind(kind))) => assert_eq!(kind, "envelope"),
        other => panic!("{other:?}"),
    }
    tx.commit().await.unwrap();
    // No key in the scope.
    let mut r = request("k2", 2);
    r.scope = Scope::new("nokey", PROJECT);
    match fx.emit(&r).await {
        Err(Error::NoSigningKey { tenant, project }) => {
            assert_eq!((tenant.as_str(), project.as_str()), ("nokey", PROJECT))
        }
        other => panic!("{other:?}"),
    }
    // A payload its schema refuses.
    let mut r = request("k3", 3);
    r.payload = serde_json::json!({"producer_id": "p", "surprise": 1});
    assert!(matches!(fx.emit(&r).await, Err(Error::Payload(_))));
    assert_eq!(
        count(fx.pool(), "SELECT count(*) FROM wharf.outbound_sequences").await,
        0
    );
    assert_eq!(
        count(fx.pool(), "SELECT count(*) FROM wharf.outbound_envelopes").await,
        0
    );
    assert_eq!(
        count(fx.pool(), "SELECT count(*) FROM wharf.action").await,
        0
    );
    // And then it works.
    assert!(fx.emit(&request("k1", 1)).await.unwrap().created);
}
