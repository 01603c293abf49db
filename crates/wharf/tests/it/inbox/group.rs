//! Group commit and the credential/key caches: concurrent requests of many streams share
//! transactions, yet each is acknowledged only after the commit that holds it; a group that
//! fails commits nothing and is retried request by request, so one bad request fails alone and a
//! retry of any of them is safe; a revocation that committed refuses the very next envelope,
//! cache or no cache.

use std::sync::Arc;
use std::time::Duration;

use wharf::inbox::{self, Inbox, Outcome, Route, Status};

use super::support::*;

/// A second producer (its own device credential, so its own stream) on the fixture's tenant.
async fn producer(fx: &Fx, device: &str) -> String {
    inbox::issue_credential(fx.pool(), TENANT, "alice", Some(device))
        .await
        .unwrap()
        .token
}

async fn send_as(inbox: &Inbox, token: &str, body: &[u8]) -> inbox::Response {
    inbox
        .ingest(peer(), token, Route::new(TENANT, PROJECT), body)
        .await
}

/// An envelope of sequence `seq` whose event id and idempotency key belong to `stream` only.
fn body_of(fx: &Fx, stream: u64, seq: u64) -> Vec<u8> {
    let mut e = fx.envelope(seq);
    e.event_id = event_id(stream * 1_000 + seq);
    e.idempotency_key = format!("s{stream}-{seq}");
    fx.signed(&e)
}

/// Locks the fixture's stream (`laptop-1`) in a transaction of its own and stores there, by
/// hand, a copy of the identity `laptop-2` retains at `seq` (as the pipeline wrote it: digest,
/// type, key), tagged `held-by-another`; committing the transaction publishes it.
async fn hold_with_copy(fx: &Fx, seq: i64) -> (sqlx::Transaction<'static, sqlx::Postgres>, i64) {
    let mut holder = fx.pool().begin().await.unwrap();
    let stream_id: i64 = sqlx::query_scalar(
        "SELECT stream_id FROM wharf.inbox_streams
          WHERE tenant_id = $1 AND producer_id = 'laptop-1' FOR UPDATE",
    )
    .bind(TENANT)
    .fetch_one(&mut *holder)
    .await
    .unwrap();
    let copied = sqlx::query(
        "INSERT INTO wharf.inbox_identities (stream_id, event_id, idempotency_key,
                producer_sequence, content_sha256, event_type, key_id, outcome, correlation_id)
         SELECT $1, event_id, idempotency_key, producer_sequence, content_sha256, event_type,
                key_id, outcome, 'held-by-another'
           FROM wharf.inbox_identities i
           JOIN wharf.inbox_streams s USING (stream_id)
          WHERE s.producer_id = 'laptop-2' AND i.producer_sequence = $2",
    )
    .bind(stream_id)
    .bind(seq)
    .execute(&mut *holder)
    .await
    .unwrap();
    assert_eq!(copied.rows_affected(), 1);
    (holder, stream_id)
}

/// Sends the fixture's envelope 2 while `holder` keeps its stream locked, commits `holder` once
/// the request is blocked on that lock, and returns the answer.
async fn send_2_while_held(
    fx: &Fx,
    holder: sqlx::Transaction<'static, sqlx::Postgres>,
) -> inbox::Response {
    let inbox = fx.inbox.clone();
    let token = fx.token.clone();
    let body = fx.body(2);
    let waiting = tokio::spawn(async move { send_as(&inbox, &token, &body).await });
    wait_for_lock_waits(fx, 1).await;
    holder.commit().await.unwrap();
    waiting.await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_singles_of_many_streams_are_each_acknowledged_after_their_commit() {
    const STREAMS: u64 = 48;
    const PER_STREAM: u64 = 6;
    let fx = Fx::new().await;
    let before = fx.inbox.counters();
    let mut tasks = Vec::new();
    for s in 0..STREAMS {
        let token = producer(&fx, &format!("dev-{s}")).await;
        let bodies: Vec<Vec<u8>> = (1..=PER_STREAM).map(|q| body_of(&fx, s, q)).collect();
        let (inbox, pool) = (Arc::clone(&fx.inbox), fx.pool().clone());
        tasks.push(tokio::spawn(async move {
            for (i, body) in bodies.iter().enumerate() {
                let seq = i as u64 + 1;
                let answer = send_as(&inbox, &token, body).await;
                assert_eq!(
                    answer.status,
                    Status::Outcome(Outcome::AcceptDelayed),
                    "stream {s} seq {seq}: {}",
                    answer.reason
                );
                assert_eq!(answer.acknowledged_sequence, Some(seq));
                // Answered only after its commit: another connection already sees the
                // identity and the cursor.
                let (identities, cursor): (i64, String) = sqlx::query_as(
                    "SELECT (SELECT count(*) FROM wharf.inbox_identities i
                              WHERE i.stream_id = s.stream_id AND i.producer_sequence = $2),
                            s.acknowledged_sequence::text
                       FROM wharf.inbox_streams s WHERE s.producer_id = $1",
                )
                .bind(format!("dev-{s}"))
                .bind(seq as i64)
                .fetch_one(&pool)
                .await
                .unwrap();
                assert_eq!((identities, cursor), (1, seq.to_string()));
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let counts = fx.counts().await;
    let total = (STREAMS * PER_STREAM) as i64;
    assert_eq!(
        (
            counts.streams,
            counts.identities,
            counts.payloads,
            counts.audit
        ),
        (STREAMS as i64, total, total, total)
    );
    let transactions = fx.inbox.counters().stream_transactions - before.stream_transactions;
    assert!(
        transactions < total as u64,
        "concurrent requests shared commits: {transactions} transactions for {total} requests"
    );
}

/// Holds a device's stream locked from another connection until `release` is sent, so a
/// group that needs it waits.
async fn hold_stream(
    fx: &Fx,
    device: &str,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let pool = fx.pool().clone();
    let device = device.to_owned();
    let (locked_tx, locked) = tokio::sync::oneshot::channel();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let mut tx = pool.begin().await.unwrap();
        sqlx::query("SELECT 1 FROM wharf.inbox_streams WHERE producer_id = $1 FOR UPDATE")
            .bind(&device)
            .execute(&mut *tx)
            .await
            .unwrap();
        locked_tx.send(()).unwrap();
        let _ = released.await;
        tx.rollback().await.unwrap();
    });
    locked.await.unwrap();
    (release, task)
}

/// Waits until `n` more requests have passed key resolution (and so are at, or about to reach,
/// the writer), then a little longer for the hand-off itself.
async fn wait_for_lookups(fx: &Fx, n: u64, from: u64) {
    for _ in 0..500 {
        if fx.inbox.counters().key_lookups >= from + n {
            tokio::time::sleep(Duration::from_millis(200)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("requests never reached the writer");
}

/// Returns once at least `n` sessions of the test's database wait for a lock.
async fn wait_for_lock_waits(fx: &Fx, n: i64) {
    for _ in 0..200 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(fx.pool())
        .await
        .unwrap();
        if waiting >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("fewer than {n} sessions ever waited for a lock");
}

/// The writer runs on a thread of its own; when the last handle of its inbox goes while a group
/// it took is still committing, that thread waits for the group before it ends (as a task of
/// the application's runtime would have finished it): a request whose client gave up is
/// committed all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_group_in_flight_commits_though_its_client_left_and_its_inbox_is_dropped() {
    let fx = Fx::new().await;
    let late_token = producer(&fx, "late").await;
    assert!(fx.send(&fx.body(1)).await.is_acknowledged());
    assert!(
        send_as(&fx.inbox, &late_token, &body_of(&fx, 60, 1))
            .await
            .is_acknowledged()
    );
    let inbox = Arc::new(Inbox::new(fx.pool().clone(), unlimited()));
    assert_eq!(
        inbox::GROUPS_IN_FLIGHT,
        2,
        "the writer's permit and one more"
    );

    // The writer holds one of the two permits while it waits for work; the first request takes
    // the other and commits on its own task, waiting for its held stream, so the second
    // request goes to the writer, which waits for that request's stream in turn.
    let (release, holder) = hold_stream(&fx, "laptop-1").await;
    let (release_late, holder_late) = hold_stream(&fx, "late").await;
    let send = |token: String, body: Vec<u8>| {
        let inbox = Arc::clone(&inbox);
        tokio::spawn(async move { send_as(&inbox, &token, &body).await })
    };
    let first = send(fx.token.clone(), fx.body(2));
    wait_for_lock_waits(&fx, 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Beyond a gap, so not a producer's next envelope, which one statement stores and commits
    // on the server whatever becomes of the client: this one needs its transaction finished.
    let late = send(late_token, body_of(&fx, 60, 3));
    wait_for_lock_waits(&fx, 2).await;

    // Both clients leave, and the inbox goes with its last handle while the group waits.
    for task in [first, late] {
        task.abort();
        let _ = task.await;
    }
    assert_eq!(
        Arc::strong_count(&inbox),
        1,
        "the aborted requests let go of the inbox"
    );
    drop(inbox);
    tokio::time::sleep(Duration::from_millis(200)).await;
    release_late.send(()).unwrap();
    holder_late.await.unwrap();

    let mut committed: (i64, String) = (0, String::new());
    for _ in 0..200 {
        committed = sqlx::query_as(
            "SELECT (SELECT count(*) FROM wharf.inbox_identities i
                      WHERE i.stream_id = s.stream_id),
                    s.acknowledged_sequence::text
               FROM wharf.inbox_streams s WHERE s.producer_id = 'late'",
        )
        .fetch_one(fx.pool())
        .await
        .unwrap();
        if committed.0 > 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        committed,
        (2, "1".to_owned()),
        "the group in flight committed (stored beyond the gap, the cursor where it was)"
    );
    release.send(()).unwrap();
    holder.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_group_commits_nothing_and_fails_only_the_request_that_broke_it() {
    let fx = Fx::new().await;
    // Two streams that exist, so they can be held locked: every group the writer may have in
    // flight waits on one of them, and what is sent meanwhile queues up as one group.
    assert!(fx.send(&fx.body(1)).await.is_acknowledged());
    let held_token = producer(&fx, "held").await;
    assert!(
        send_as(&fx.inbox, &held_token, &body_of(&fx, 50, 1))
            .await
            .is_acknowledged()
    );
    assert_eq!(
        inbox::GROUPS_IN_FLIGHT,
        2,
        "one held stream per group in flight"
    );
    // A fault only one envelope meets: its identity insert fails, so the statement that writes
    // the whole group fails, before COMMIT.
    poison_identity_inserts(&fx).await;
    let others: Vec<String> = {
        let mut tokens = Vec::new();
        for s in 0..3 {
            tokens.push(producer(&fx, &format!("other-{s}")).await);
        }
        tokens
    };
    let mut poisoned = fx.envelope(1);
    poisoned.event_id = event_id(9_001);
    poisoned.idempotency_key = "poison".into();
    let poison_body = fx.signed(&poisoned);
    let poison_token = producer(&fx, "poisoned").await;

    let (release, holder) = hold_stream(&fx, "laptop-1").await;
    let (release_held, holder_held) = hold_stream(&fx, "held").await;
    let lookups = fx.inbox.counters().key_lookups;
    // The groups in flight: the fixture's stream and the held one, each waiting on its lock.
    let first = {
        let (inbox, token, body) = (Arc::clone(&fx.inbox), fx.token.clone(), fx.body(2));
        tokio::spawn(async move { send_as(&inbox, &token, &body).await })
    };
    let second = {
        let (inbox, token, body) = (
            Arc::clone(&fx.inbox),
            held_token.clone(),
            body_of(&fx, 50, 2),
        );
        tokio::spawn(async move { send_as(&inbox, &token, &body).await })
    };
    wait_for_lookups(&fx, 2, lookups).await;
    let before = fx.inbox.counters();
    let before_counts = fx.counts().await;
    // The next group: three good requests and the poisoned one.
    let mut next = Vec::new();
    for (s, token) in others.iter().enumerate() {
        let (inbox, token, body) = (
            Arc::clone(&fx.inbox),
            token.clone(),
            body_of(&fx, s as u64, 1),
        );
        next.push(tokio::spawn(
            async move { send_as(&inbox, &token, &body).await },
        ));
    }
    let poison = {
        let (inbox, token, body) = (
            Arc::clone(&fx.inbox),
            poison_token.clone(),
            poison_body.clone(),
        );
        tokio::spawn(async move { send_as(&inbox, &token, &body).await })
    };
    wait_for_lookups(&fx, 4, before.key_lookups).await;
    release.send(()).unwrap();
    release_held.send(()).unwrap();
    holder.await.unwrap();
    holder_held.await.unwrap();

    for task in [first, second] {
        let answer = task.await.unwrap();
        assert_eq!(
            (answer.status, answer.acknowledged_sequence),
            (Status::Outcome(Outcome::AcceptDelayed), Some(2))
        );
    }
    for task in next {
        let answer = task.await.unwrap();
        assert_eq!(
            (answer.status, answer.acknowledged_sequence),
            (Status::Outcome(Outcome::AcceptDelayed), Some(1)),
            "{}",
            answer.reason
        );
    }
    let poison = poison.await.unwrap();
    assert_eq!(poison.status, Status::Unavailable);
    assert_eq!(poison.acknowledged_sequence, None, "nothing acknowledged");
    // The group of four failed as one (one transaction), then each was tried alone (four).
    let transactions = fx.inbox.counters().stream_transactions - before.stream_transactions;
    assert_eq!(
        transactions,
        1 + 4,
        "the failed group, then each request alone"
    );
    // The two held requests and the three good ones accepted, each once, with one audit row
    // each; the poisoned one left nothing.
    let after = fx.counts().await;
    assert_eq!(after.identities, before_counts.identities + 5);
    assert_eq!(after.payloads, before_counts.payloads + 5);
    assert_eq!(after.audit, before_counts.audit + 5);

    // Retries are safe: the fault gone, the poisoned envelope is accepted once, and a retry of
    // a committed one is a duplicate.
    sqlx::query("DROP TRIGGER inbox_test_fault ON wharf.inbox_identities")
        .execute(fx.pool())
        .await
        .unwrap();
    let retried = send_as(&fx.inbox, &poison_token, &poison_body).await;
    assert_eq!(
        (retried.status, retried.acknowledged_sequence),
        (Status::Outcome(Outcome::AcceptDelayed), Some(1))
    );
    let again = send_as(&fx.inbox, &others[0], &body_of(&fx, 0, 1)).await;
    assert_eq!(again.status, Status::Outcome(Outcome::IgnoreDuplicate));
    let end = fx.counts().await;
    assert_eq!(end.identities, before_counts.identities + 6);
    assert_eq!(end.audit, before_counts.audit + 7);
}

#[tokio::test]
async fn a_revoked_credential_is_refused_by_the_next_request_though_cached() {
    let fx = Fx::new().await;
    assert!(fx.send(&fx.body(1)).await.is_acknowledged());
    let credentials = inbox::list_credentials(fx.pool(), TENANT).await.unwrap();
    inbox::revoke_credential(fx.pool(), TENANT, credentials[0].credential_id)
        .await
        .unwrap();
    let before = fx.counts().await;
    // Within the cache's lifetime: an envelope it would have admitted, and one refused before
    // the lock (a bad signature). Both are unauthenticated, nothing written, nothing audited.
    let next = fx.send(&fx.body(2)).await;
    assert_eq!(
        (next.status, next.reason),
        (Status::Unauthenticated, "unauthenticated")
    );
    assert_eq!(next.status.http_status(), 401);
    let tampered = edit(&fx.body(3), |v| v["payload"]["run_id"] = "altered".into());
    let refused = fx.send(&tampered).await;
    assert_eq!(refused.status, Status::Unauthenticated);
    let batch = fx.send_batch(&batch_body(&[fx.body(2), fx.body(3)])).await;
    assert_eq!(batch.head.status, Status::Unauthenticated);
    assert!(batch.items.is_empty());
    assert_eq!(fx.counts().await, before);
    assert_eq!(fx.cursor().await.0, 1);
}

#[tokio::test]
async fn a_revoked_key_refuses_the_next_envelope_though_cached() {
    let fx = Fx::new().await;
    assert!(fx.send(&fx.body(1)).await.is_acknowledged());
    inbox::revoke_key(fx.pool(), TENANT, PROJECT, &fx.key_id)
        .await
        .unwrap();
    let before = fx.counts().await;
    let next = fx.send(&fx.body(2)).await;
    assert_eq!(
        (next.status, next.reason),
        (Status::Outcome(Outcome::RefuseTampered), "signature")
    );
    assert_eq!(
        fx.counts().await,
        before.audited(1),
        "refused and audited, nothing stored"
    );
    let (outcome, reason, _, sequence) = last_audit(fx.pool()).await;
    assert_eq!(
        (outcome.as_str(), reason.as_str(), sequence.as_deref()),
        ("refuse-tampered", "signature-revoked-key", Some("2"))
    );
    assert_eq!(fx.cursor().await.0, 1);
}

#[tokio::test]
async fn a_key_added_after_an_unknown_one_was_asked_for_verifies_at_once() {
    // Unknown key ids are never remembered, so adding the key is enough.
    let fx = Fx::new().await;
    let new_key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let body = sign_with(&fx.envelope(1), &new_key, "late-key");
    let unknown = fx.send(&body).await;
    assert_eq!(unknown.status, Status::Outcome(Outcome::RefuseTampered));
    inbox::add_key(
        fx.pool(),
        TENANT,
        PROJECT,
        "late-key",
        new_key.verifying_key().as_bytes(),
        inbox::KEY_REPLAY_WINDOW_DEFAULT,
    )
    .await
    .unwrap();
    let known = fx.send(&body).await;
    assert_eq!(known.status, Status::Outcome(Outcome::AcceptDelayed));
}

/// The stream row's physical version (its ctid), which every transaction that stores an
/// identity on the stream renews.
async fn stream_version(fx: &Fx) -> String {
    sqlx::query_scalar("SELECT ctid::text FROM wharf.inbox_streams WHERE tenant_id = $1")
        .bind(TENANT)
        .fetch_one(fx.pool())
        .await
        .unwrap()
}

/// A lone envelope locks its stream and reads in one statement, whose snapshot is older than
/// the lock when it had to wait; so every store leaves a new stream row version, the envelope
/// that stores nothing leaves none.
#[tokio::test]
async fn every_store_on_a_stream_renews_its_row_and_nothing_else_does() {
    let fx = Fx::new().await;
    assert_eq!(fx.send(&fx.body(1)).await.acknowledged_sequence, Some(1));
    let after_first = stream_version(&fx).await;
    // Stored beyond a gap: the cursor stays, the row is still written.
    let gap = fx.send(&fx.body(3)).await;
    assert_eq!((gap.acknowledged_sequence, gap.reason), (Some(1), "gap"));
    let after_gap = stream_version(&fx).await;
    assert_ne!(after_gap, after_first, "an identity stored beyond a gap");
    // A duplicate stores nothing and writes no row.
    let dup = fx.send(&fx.body(3)).await;
    assert_eq!(dup.reason, "duplicate");
    assert_eq!(stream_version(&fx).await, after_gap);
    // In order again: the cursor walks over the retained 3.
    assert_eq!(fx.send(&fx.body(2)).await.acknowledged_sequence, Some(3));
    assert_ne!(stream_version(&fx).await, after_gap);
}

/// While another transaction holds the stream and stores the very envelope a lone request
/// carries, the request waits for the lock; its first read began before that commit, so it
/// must read again under the lock and answer a duplicate of what the holder stored, not
/// decide on what it saw before (below the cursor and unknown) nor fail on the unique index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_envelope_that_waited_for_its_stream_sees_what_the_holder_stored() {
    let fx = Fx::new().await;
    assert_eq!(fx.send(&fx.body(1)).await.acknowledged_sequence, Some(1));
    // Envelope 2 stored on another producer's stream gives its identity row as the pipeline
    // writes it (digest, type, key), to be stored on the fixture's stream by hand below.
    let other = producer(&fx, "laptop-2").await;
    let elsewhere = send_as(&fx.inbox, &other, &fx.body(2)).await;
    // (Stored beyond that stream's gap: its cursor is 0.)
    assert_eq!(
        (elsewhere.acknowledged_sequence, elsewhere.reason),
        (Some(0), "gap")
    );
    let before = fx.counts().await;

    let (mut holder, stream_id) = hold_with_copy(&fx, 2).await;
    sqlx::query("UPDATE wharf.inbox_streams SET acknowledged_sequence = 2 WHERE stream_id = $1")
        .bind(stream_id)
        .execute(&mut *holder)
        .await
        .unwrap();

    let answer = send_2_while_held(&fx, holder).await;
    assert_eq!(
        answer.status,
        Status::Outcome(Outcome::IgnoreDuplicate),
        "{}",
        answer.reason
    );
    assert_eq!(answer.reason, "duplicate");
    assert_eq!(answer.acknowledged_sequence, Some(2));
    assert_eq!(
        answer
            .original
            .expect("names the holder's original")
            .correlation_id,
        "held-by-another"
    );
    // Only the holder's identity and the request's audit row were added.
    let after = fx.counts().await;
    assert_eq!(after.identities, before.identities + 1);
    assert_eq!(after.payloads, before.payloads);
    assert_eq!(after.audit, before.audit + 1);
}

/// A lone envelope whose stream got an identity beyond its cursor while the envelope waited
/// for the lock is not stored by the one-statement way (`store_presumed.sql`), whose probes
/// read a snapshot from before the wait: the stream's row version tells, and the ordinary way
/// then walks the cursor through what the holder stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lone_envelope_that_waited_while_a_gap_was_stored_walks_the_cursor_through_it() {
    let fx = Fx::new().await;
    assert_eq!(fx.send(&fx.body(1)).await.acknowledged_sequence, Some(1));
    // Envelope 3 stored on another producer's stream gives an identity row to copy by hand.
    let other = producer(&fx, "laptop-2").await;
    let elsewhere = send_as(&fx.inbox, &other, &fx.body(3)).await;
    assert_eq!(elsewhere.reason, "gap");

    // Sequence 3 stored beyond the cursor, which stays at 1; the stream's row renewed, as
    // every store does.
    let (mut holder, stream_id) = hold_with_copy(&fx, 3).await;
    sqlx::query(
        "UPDATE wharf.inbox_streams SET acknowledged_sequence = acknowledged_sequence
          WHERE stream_id = $1",
    )
    .bind(stream_id)
    .execute(&mut *holder)
    .await
    .unwrap();

    let answer = send_2_while_held(&fx, holder).await;
    assert_eq!(
        (answer.status, answer.reason),
        (Status::Outcome(Outcome::AcceptDelayed), "in-order")
    );
    assert_eq!(
        answer.acknowledged_sequence,
        Some(3),
        "the cursor walked through the sequence stored while the envelope waited"
    );
    let cursor: String = sqlx::query_scalar(
        "SELECT acknowledged_sequence::text FROM wharf.inbox_streams WHERE stream_id = $1",
    )
    .bind(stream_id)
    .fetch_one(fx.pool())
    .await
    .unwrap();
    assert_eq!(cursor, "3");
}

/// The arguments of one call of `store_presumed.sql`, as the pipeline would give them for
/// the fixture's stream.
#[derive(Clone)]
struct Presumed {
    sequence: u64,
    event_id: String,
    idempotency_key: String,
    key_id: String,
    public_key: Vec<u8>,
    credential_id: i64,
}

const STORE_PRESUMED: &str = include_str!("../../../sql/inbox/store_presumed.sql");

async fn store_presumed(conn: &mut sqlx::PgConnection, p: &Presumed) -> bool {
    sqlx::query_scalar(STORE_PRESUMED)
        .bind(TENANT)
        .bind(PROJECT)
        .bind("device")
        .bind("laptop-1")
        .bind(&p.event_id)
        .bind(&p.idempotency_key)
        .bind(p.sequence.to_string())
        .bind(vec![7u8; 32])
        .bind("test.presumed")
        .bind(&p.key_id)
        .bind("accept-delayed")
        .bind("corr-presumed")
        .bind("2026-12-03T10:00:00Z")
        .bind("{\"n\":1}")
        .bind(p.credential_id)
        .bind(&p.public_key)
        .bind(TENANT)
        .bind(PROJECT)
        .bind("alice")
        .bind("laptop-1")
        .bind("ab".repeat(32))
        .bind("accept-delayed")
        .bind("in-order")
        .fetch_one(&mut *conn)
        .await
        .unwrap()
}

/// The one-statement store writes only where every part of its presumption holds (the
/// cursor one below the sequence, none of the envelope's identities retained, nothing at or
/// beyond its sequence, a live credential, the active key with the same public key), and then
/// writes the identity, its payload, the cursor and the audit row together; where any part
/// fails it writes nothing at all. Each refused call differs from an accepted one in one part.
#[tokio::test]
async fn the_presumed_store_writes_only_where_every_presumption_holds() {
    let fx = Fx::new().await;
    assert_eq!(fx.send(&fx.body(1)).await.acknowledged_sequence, Some(1));
    let (key_id, public_key): (String, Vec<u8>) = sqlx::query_as(
        "SELECT key_id, public_key FROM wharf.inbox_keys
          WHERE tenant_id = $1 AND project_id = $2 AND state = 'active'",
    )
    .bind(TENANT)
    .bind(PROJECT)
    .fetch_one(fx.pool())
    .await
    .unwrap();
    let credential_id: i64 = sqlx::query_scalar(
        "SELECT credential_id FROM wharf.inbox_credentials WHERE device_id = 'laptop-1'",
    )
    .fetch_one(fx.pool())
    .await
    .unwrap();
    let (first_event, first_key): (String, String) = sqlx::query_as(
        "SELECT event_id, idempotency_key FROM wharf.inbox_identities
          WHERE producer_sequence = 1",
    )
    .fetch_one(fx.pool())
    .await
    .unwrap();
    let at = |sequence: u64| Presumed {
        sequence,
        event_id: event_id(500 + sequence),
        idempotency_key: format!("presumed-{sequence}"),
        key_id: key_id.clone(),
        public_key: public_key.clone(),
        credential_id,
    };
    let cursor = |fx: &Fx| {
        let pool = fx.pool().clone();
        async move {
            sqlx::query_scalar::<_, String>(
                "SELECT acknowledged_sequence::text FROM wharf.inbox_streams
                  WHERE producer_id = 'laptop-1'",
            )
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    let mut conn = fx.pool().acquire().await.unwrap();

    let refused: Vec<(&str, Presumed)> = vec![
        ("the cursor is not one below", at(3)),
        (
            "its event id is retained",
            Presumed {
                event_id: first_event.clone(),
                ..at(2)
            },
        ),
        (
            "its idempotency key is retained",
            Presumed {
                idempotency_key: first_key.clone(),
                ..at(2)
            },
        ),
        (
            "another public key",
            Presumed {
                public_key: vec![9u8; 32],
                ..at(2)
            },
        ),
        (
            "an unknown key id",
            Presumed {
                key_id: "no-such-key".into(),
                ..at(2)
            },
        ),
        (
            "an unknown credential",
            Presumed {
                credential_id: credential_id + 1_000,
                ..at(2)
            },
        ),
    ];
    let before = fx.counts().await;
    for (why, p) in &refused {
        assert!(!store_presumed(&mut conn, p).await, "stored though {why}");
        let now = fx.counts().await;
        assert_eq!(
            (now.identities, now.payloads, now.audit),
            (before.identities, before.payloads, before.audit),
            "wrote though {why}"
        );
        assert_eq!(cursor(&fx).await, "1", "moved the cursor though {why}");
    }
    // A revoked credential and a retired key, each inside a transaction rolled back after.
    for (why, change) in [
        (
            "the credential is revoked",
            "UPDATE wharf.inbox_credentials SET revoked_at = now() WHERE device_id = 'laptop-1'",
        ),
        (
            "the key is retired",
            "UPDATE wharf.inbox_keys SET state = 'retired', retired_at = now()
              WHERE tenant_id = 'acme' AND project_id = 'web'",
        ),
    ] {
        let mut tx = fx.pool().begin().await.unwrap();
        sqlx::query(change).execute(&mut *tx).await.unwrap();
        assert!(
            !store_presumed(&mut tx, &at(2)).await,
            "stored though {why}"
        );
        let written: i64 =
            sqlx::query_scalar("SELECT count(*) FROM wharf.inbox_identities WHERE event_id = $1")
                .bind(event_id(502))
                .fetch_one(&mut *tx)
                .await
                .unwrap();
        assert_eq!(written, 0, "wrote though {why}");
        tx.rollback().await.unwrap();
    }

    // The same call with every part true stores all four rows and moves the cursor.
    assert!(store_presumed(&mut conn, &at(2)).await);
    let now = fx.counts().await;
    assert_eq!(
        (now.identities, now.payloads, now.audit),
        (before.identities + 1, before.payloads + 1, before.audit + 1)
    );
    assert_eq!(cursor(&fx).await, "2");
    // Stored twice is refused by its own retained identities.
    assert!(!store_presumed(&mut conn, &at(2)).await, "stored twice");

    // An identity retained beyond the next sequence (a gap the pipeline stored): the envelope
    // that fills the gap is not presumed, since its cursor would walk further.
    let gap = fx.send(&fx.body(4)).await;
    assert_eq!((gap.reason, gap.acknowledged_sequence), ("gap", Some(2)));
    let before = fx.counts().await;
    assert!(
        !store_presumed(&mut conn, &at(3)).await,
        "stored though sequence 4 is retained"
    );
    assert_eq!(fx.counts().await.identities, before.identities);
    assert_eq!(cursor(&fx).await, "2");
}

/// A fault only an envelope with the idempotency key `poison` meets: its identity's insert
/// fails, and with it the statement that writes its group (`DROP TRIGGER inbox_test_fault ON
/// wharf.inbox_identities` ends it).
async fn poison_identity_inserts(fx: &Fx) {
    sqlx::raw_sql(
        "CREATE FUNCTION pg_temp_fault() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.idempotency_key = 'poison' THEN RAISE EXCEPTION 'injected fault'; END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER inbox_test_fault BEFORE INSERT ON wharf.inbox_identities
           FOR EACH ROW EXECUTE FUNCTION pg_temp_fault();",
    )
    .execute(fx.pool())
    .await
    .unwrap();
}

/// Ends every other client session of the test's database (as a restart of the server would),
/// and says how many.
async fn end_other_sessions(fx: &Fx) -> i64 {
    sqlx::query_scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid()
            AND backend_type = 'client backend'",
    )
    .fetch_one(fx.pool())
    .await
    .unwrap()
}

/// The writer's connections are held between commits, not pooled (`held.rs`), so nothing
/// pings them at every use; one idle past its check is pinged before it is used, so a session
/// the server ended meanwhile is replaced and the request does not fail.
#[tokio::test]
async fn a_connection_the_server_ended_while_it_was_idle_is_replaced_before_use() {
    let fx = Fx::new().await;
    assert!(fx.send(&fx.body(1)).await.is_acknowledged());
    assert!(end_other_sessions(&fx).await >= 1, "no session to end");
    tokio::time::sleep(Duration::from_millis(
        inbox::CONNECTION_IDLE_CHECK_AFTER_MS + 200,
    ))
    .await;
    let answer = fx.send(&fx.body(2)).await;
    assert_eq!(
        (answer.status, answer.acknowledged_sequence),
        (Status::Outcome(Outcome::AcceptDelayed), Some(2)),
        "{}",
        answer.reason
    );
}

/// A request whose transaction failed leaves no session in a transaction: its connection is
/// closed, not kept for the next commit (sqlx only queues a dropped transaction's ROLLBACK
/// for the connection's next use, and a held connection may wait long for that), so what it
/// had locked is free at once.
#[tokio::test]
async fn a_request_whose_transaction_failed_leaves_no_session_in_a_transaction() {
    let fx = Fx::new().await;
    poison_identity_inserts(&fx).await;
    // A first envelope takes the ordinary way (a transaction that creates and locks its
    // stream), and fails there at the write.
    let mut poisoned = fx.envelope(1);
    poisoned.idempotency_key = "poison".into();
    let answer = fx.send(&fx.signed(&poisoned)).await;
    assert_eq!(answer.status, Status::Unavailable, "{}", answer.reason);
    let started = std::time::Instant::now();
    loop {
        let in_transaction: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
        )
        .fetch_one(fx.pool())
        .await
        .unwrap();
        if in_transaction == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{in_transaction} session(s) still in the failed transaction"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The stream it had begun is free: the producer's first envelope now stores.
    assert!(fx.send(&fx.body(1)).await.is_acknowledged());
}
