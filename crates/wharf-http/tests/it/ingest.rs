//! The ingest endpoints over real HTTP on loopback, a real database, and the real producer
//! client (`wharf-client`): what a producer sees.

use std::sync::Arc;

use serde_json::{Value, json};
use wharf::inbox::{self, Inbox, InboxConfig, LimitPolicy};
use wharf_client::{Error as ClientError, Producer, ProducerConfig};
use wharf_testkit::TestDb;

use crate::support::{http, serve};

const TENANT: &str = "acme";
const PROJECT: &str = "web";

struct Server {
    db: TestDb,
    base: String,
    token: String,
    seed: [u8; 32],
    key_id: String,
}

async fn start(config: InboxConfig) -> Server {
    let db = TestDb::new().await;
    inbox::create_tenant(&db.pool, TENANT).await.unwrap();
    let credential = inbox::issue_credential(&db.pool, TENANT, "alice", Some("laptop-1"))
        .await
        .unwrap();
    let key = inbox::generate_key(
        &db.pool,
        TENANT,
        PROJECT,
        Some("k1"),
        inbox::KEY_REPLAY_WINDOW_DEFAULT,
    )
    .await
    .unwrap();
    let inbox = Arc::new(Inbox::new(db.pool.clone(), config));
    let base = serve(wharf_http::app([wharf_http::ingest::routes(inbox)])).await;
    Server {
        db,
        base,
        token: credential.token,
        seed: key.private_seed,
        key_id: key.key_id,
    }
}

fn open() -> InboxConfig {
    InboxConfig {
        peer_limit: LimitPolicy::UNLIMITED,
        identity_limit: LimitPolicy::UNLIMITED,
        ..InboxConfig::default()
    }
}

fn producer(server: &Server, next_sequence: u64) -> Producer {
    let mut config = ProducerConfig::new(
        server.base.clone(),
        TENANT,
        PROJECT,
        server.token.clone(),
        server.key_id.clone(),
        server.seed,
    );
    config.backoff.base_ms = 10;
    Producer::new(config, next_sequence).unwrap()
}

fn cursor_payload(n: u64) -> Value {
    json!({"producer_id": "laptop-1", "acknowledged_sequence": n,
           "acknowledged_event_id": null, "version": 1})
}

#[tokio::test]
async fn the_client_sends_retries_and_remembers_the_cursor() {
    let server = start(open()).await;
    let producer = producer(&server, 1);
    let first = producer
        .envelope("sync_cursor", cursor_payload(0), None)
        .unwrap();
    let answer = producer.send(&first).await.unwrap();
    assert!(answer.is_acknowledged(), "{answer:?}");
    assert_eq!(
        (
            answer.outcome.as_str(),
            answer.reason.as_str(),
            answer.http_status
        ),
        ("accept-delayed", "in-order", 200)
    );
    assert_eq!(producer.acknowledged_sequence(), 1);

    // A retry of the same envelope (answer lost) is a duplicate, answered like the original.
    let again = producer.send(&first).await.unwrap();
    assert_eq!(again.outcome.as_str(), "ignore-duplicate");
    assert_eq!(
        again.original.unwrap().correlation_id,
        answer.correlation_id
    );

    // A gap, then the fill: the remembered cursor jumps.
    let second = producer
        .envelope("sync_cursor", cursor_payload(1), None)
        .unwrap();
    let third = producer
        .envelope("sync_cursor", cursor_payload(2), None)
        .unwrap();
    assert_eq!(producer.send(&third).await.unwrap().reason, "gap");
    assert_eq!(producer.acknowledged_sequence(), 1);
    producer.send(&second).await.unwrap();
    assert_eq!(producer.acknowledged_sequence(), 3);

    // A batch.
    let batch: Vec<_> = (3..13)
        .map(|n| {
            producer
                .envelope("sync_cursor", cursor_payload(n), None)
                .unwrap()
        })
        .collect();
    let answer = producer.send_batch(&batch).await.unwrap();
    assert_eq!(answer.items.len(), 10);
    assert!(
        answer
            .items
            .iter()
            .all(|i| i.outcome.as_str() == "accept-delayed")
    );
    assert_eq!(answer.acknowledged_sequence, 13);
    assert_eq!(producer.acknowledged_sequence(), 13);

    let identities: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.inbox_identities")
        .fetch_one(&server.db.pool)
        .await
        .unwrap();
    assert_eq!(identities, 13);
}

#[tokio::test]
async fn refusals_keep_their_status_and_shape() {
    let server = start(InboxConfig {
        body_bytes_max: 4096,
        ..open()
    })
    .await;
    let producer = producer(&server, 1);
    let url = format!(
        "{}/v1/tenants/{TENANT}/projects/{PROJECT}/envelopes",
        server.base
    );

    // A decided refusal: 422 with the outcome body and the cursor.
    let mut envelope = producer
        .envelope("sync_cursor", cursor_payload(0), None)
        .unwrap();
    envelope.payload["acknowledged_sequence"] = json!(5);
    let answer = producer.send(&envelope).await.unwrap();
    assert_eq!(
        (
            answer.http_status,
            answer.outcome.as_str(),
            answer.reason.as_str()
        ),
        (422, "refuse-tampered", "signature")
    );
    assert_eq!(answer.acknowledged_sequence, 0);

    // Not decided: 401 with the error shape and a challenge; nothing audited.
    let response = http()
        .post(&url)
        .bearer_auth("wharf_nope")
        .body(envelope.to_canonical_json().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    let correlation = response.headers()["x-correlation-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], "unauthenticated");
    assert_eq!(body["correlation_id"], correlation.as_str());
    let mut bad = ProducerConfig::new(
        server.base.clone(),
        TENANT,
        PROJECT,
        "wharf_nope",
        "k1",
        [1; 32],
    );
    bad.attempts_max = 1;
    match Producer::new(bad, 1).unwrap().send(&envelope).await {
        Err(ClientError::Refused { status: 401, .. }) => {}
        other => panic!("{other:?}"),
    }

    // 413 before the body is read, from the announced length.
    let response = http()
        .post(&url)
        .bearer_auth(&server.token)
        .body(vec![b' '; 4097])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 413);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], "payload-too-large");

    // Malformed JSON from an authenticated producer: decided (refused), 422.
    let response = http()
        .post(&url)
        .bearer_auth(&server.token)
        .body("{")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 422);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        (body["outcome"].as_str(), body["reason"].as_str()),
        (Some("refuse-tampered"), Some("payload"))
    );

    // The header's correlation id is the one in the body and in the audit.
    let response = http()
        .post(&url)
        .bearer_auth(&server.token)
        .header("x-correlation-id", "trace-123")
        .body("{")
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["correlation_id"], "trace-123");
    let audited: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM wharf.inbox_audit WHERE correlation_id = 'trace-123'",
    )
    .fetch_one(&server.db.pool)
    .await
    .unwrap();
    assert_eq!(audited, 1);
    let unauthenticated_audited: i64 =
        sqlx::query_scalar("SELECT count(*) FROM wharf.inbox_audit WHERE correlation_id = $1")
            .bind(&correlation)
            .fetch_one(&server.db.pool)
            .await
            .unwrap();
    assert_eq!(unauthenticated_audited, 0);
}

#[tokio::test]
async fn a_limited_peer_gets_429_with_retry_after_and_the_client_waits() {
    let server = start(InboxConfig {
        peer_limit: LimitPolicy {
            rate_per_s: 1.0,
            burst: 1,
        },
        identity_limit: LimitPolicy::UNLIMITED,
        ..InboxConfig::default()
    })
    .await;
    let producer = producer(&server, 1);
    let url = format!(
        "{}/v1/tenants/{TENANT}/projects/{PROJECT}/envelopes",
        server.base
    );
    let first = producer
        .envelope("sync_cursor", cursor_payload(0), None)
        .unwrap();
    assert!(producer.send(&first).await.unwrap().is_acknowledged());
    let response = http()
        .post(&url)
        .bearer_auth(&server.token)
        .body(first.to_canonical_json().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 429);
    assert_eq!(response.headers()["retry-after"], "1");
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        (body["code"].as_str(), body["reason"].as_str()),
        (Some("rate-limited"), Some("peer-limited"))
    );
    // The client honours Retry-After and gets its decision on a later attempt.
    let second = producer
        .envelope("sync_cursor", cursor_payload(1), None)
        .unwrap();
    let answer = producer.send(&second).await.unwrap();
    assert!(answer.is_acknowledged());
    assert!(answer.attempts >= 2, "{answer:?}");
}

#[tokio::test]
async fn batch_and_single_envelopes_per_second_over_http() {
    // A measurement printed next to each other in one run (the README reports it); the check is
    // only that both paths complete.
    const BATCHES: u64 = 5;
    const BATCH: u64 = 500;
    const SINGLES: u64 = 500;
    let server = start(open()).await;
    let producer = producer(&server, 1);
    let batches: Vec<Vec<_>> = (0..BATCHES)
        .map(|_| {
            (0..BATCH)
                .map(|n| {
                    producer
                        .envelope("sync_cursor", cursor_payload(n), None)
                        .unwrap()
                })
                .collect()
        })
        .collect();
    let started = std::time::Instant::now();
    for batch in &batches {
        producer.send_batch(batch).await.unwrap();
    }
    let batch_rate = (BATCHES * BATCH) as f64 / started.elapsed().as_secs_f64();
    let singles: Vec<_> = (0..SINGLES)
        .map(|n| {
            producer
                .envelope("sync_cursor", cursor_payload(n), None)
                .unwrap()
        })
        .collect();
    let started = std::time::Instant::now();
    for envelope in &singles {
        assert!(producer.send(envelope).await.unwrap().is_acknowledged());
    }
    let single_rate = SINGLES as f64 / started.elapsed().as_secs_f64();
    assert_eq!(producer.acknowledged_sequence(), BATCHES * BATCH + SINGLES);
    println!(
        "ingest over HTTP: batch {batch_rate:.0} envelopes/s, single {single_rate:.0} envelopes/s (one producer, one stream)"
    );
}

#[tokio::test]
async fn a_batch_pays_per_envelope_and_is_limited_like_a_single_envelope() {
    // Three envelopes, then one an hour.
    let server = start(InboxConfig {
        identity_limit: LimitPolicy {
            rate_per_s: 1.0 / 3600.0,
            burst: 3,
        },
        ..open()
    })
    .await;
    let producer = producer(&server, 1);
    let single_url = format!(
        "{}/v1/tenants/{TENANT}/projects/{PROJECT}/envelopes",
        server.base
    );
    let batch_url = format!("{single_url}:batch");
    let bodies: Vec<String> = (0..4)
        .map(|n| {
            let envelope = producer
                .envelope("sync_cursor", cursor_payload(n), None)
                .unwrap();
            String::from_utf8(envelope.to_canonical_json().unwrap()).unwrap()
        })
        .collect();
    let batch = |bodies: &[String]| format!("{{\"envelopes\":[{}]}}", bodies.join(","));
    let post = |url: &str, body: String| {
        http()
            .post(url)
            .bearer_auth(&server.token)
            .body(body)
            .send()
    };
    let identities = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM wharf.inbox_identities")
            .fetch_one(&server.db.pool)
            .await
            .unwrap()
    };

    // Four envelopes never fit a burst of three: 413, nothing to retry.
    let response = post(&batch_url, batch(&bodies)).await.unwrap();
    assert_eq!(response.status().as_u16(), 413);
    assert!(response.headers().get("retry-after").is_none());
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        (body["code"].as_str(), body["reason"].as_str()),
        (Some("payload-too-large"), Some("batch-over-burst"))
    );

    // One single envelope leaves two tokens; a batch of three is then refused whole, with the
    // single endpoint's status, shape and Retry-After, and nothing is stored.
    let response = post(&single_url, bodies[0].clone()).await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let limited_batch = post(&batch_url, batch(&bodies[1..4])).await.unwrap();
    assert_eq!(identities().await, 1);
    // The batch of exactly two passes and spends both tokens: the next single envelope waits.
    let response = post(&batch_url, batch(&bodies[1..3])).await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["results"].as_array().unwrap().len(), 2);
    assert_eq!(body["acknowledged_sequence"], 3);
    let limited_single = post(&single_url, bodies[3].clone()).await.unwrap();
    for response in [limited_batch, limited_single] {
        assert_eq!(response.status().as_u16(), 429);
        let retry_after: u64 = response.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((3500..=3600).contains(&retry_after), "{retry_after}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(
            (body["code"].as_str(), body["reason"].as_str()),
            (Some("rate-limited"), Some("identity-limited"))
        );
    }
    assert_eq!(identities().await, 3);
}
