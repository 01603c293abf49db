//! The consumer against a real NATS and a real database: every case checks the rows, not only
//! the settlements.

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use wharf_nats::{JetStreamIngest, Settlement};

use crate::support::{Fx, PROJECT, TENANT, bytes, nats_url};

#[tokio::test]
async fn envelopes_in_order_are_accepted_acknowledged_and_answered_on_the_reply_subject() {
    let Some(url) = nats_url("in order") else {
        return;
    };
    let fx = Fx::new(url).await;
    let running = fx.start(fx.config("in-order")).await;
    let client = async_nats::connect(&fx.nats_url).await.unwrap();
    let reply_to = client.new_inbox();
    let mut replies = client.subscribe(reply_to.clone()).await.unwrap();
    client.flush().await.unwrap();

    let envelopes: Vec<_> = (0..5).map(|_| fx.envelope()).collect();
    for envelope in &envelopes[..4] {
        fx.publish(envelope).await;
    }
    running.until("4 acks", |s| s.acked == 4).await;
    // The fifth asks for the answer.
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Authorization", format!("Bearer {}", fx.token).as_str());
    headers.insert("Wharf-Reply-To", reply_to.as_str());
    fx.js
        .publish_with_headers(
            fx.subject(TENANT, PROJECT),
            headers,
            bytes(&envelopes[4]).into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    let reply = tokio::time::timeout(Duration::from_secs(20), replies.next())
        .await
        .expect("an answer on the reply subject")
        .unwrap();
    let answer: Value = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(answer["outcome"], "accept-delayed", "{answer}");
    assert_eq!(answer["reason"], "in-order");
    assert_eq!(answer["acknowledged_sequence"], 5);
    let status = reply.headers.as_ref().unwrap().get("Wharf-Status").unwrap();
    assert_eq!(status.as_str(), "200");
    running.until("5 acks", |s| s.acked == 5).await;

    assert_eq!(fx.identities().await, 5);
    assert_eq!(fx.cursor().await, 5);
    let audit = fx.audit().await;
    assert_eq!(audit.len(), 5);
    // One producer's messages are decided in the order the broker delivered them.
    assert!(
        audit
            .iter()
            .all(|(o, r)| o == "accept-delayed" && r == "in-order"),
        "{audit:?}"
    );
    let stats = running.stop().await;
    assert_eq!((stats.terminated, stats.naked, stats.replied), (0, 0, 1));
    // Nothing is left for the broker to deliver.
    let mut consumer: async_nats::jetstream::consumer::PullConsumer = fx
        .js
        .get_stream(&fx.stream)
        .await
        .unwrap()
        .get_consumer("in-order")
        .await
        .unwrap();
    let info = consumer.info().await.unwrap();
    assert_eq!((info.num_pending, info.num_ack_pending), (0, 0));
    // The bounds the broker enforces for this consumer.
    let config = fx.config("in-order");
    assert_eq!(info.config.max_ack_pending, config.in_flight_max as i64);
    assert_eq!(
        info.config.ack_wait,
        Duration::from_millis(config.ack_wait_ms)
    );
    assert_eq!(info.config.max_deliver, -1);
    fx.cleanup().await;
}

#[tokio::test]
async fn the_peer_limiter_keys_on_the_consumer_and_a_limited_message_is_redelivered() {
    let Some(url) = nats_url("consumer peer limit") else {
        return;
    };
    // One message at once, then one every two seconds, for the whole consumer; addresses
    // (HTTP's peers) stay unlimited.
    let fx = Fx::with_inbox(
        url,
        wharf::inbox::InboxConfig {
            consumer_limit: wharf::inbox::LimitPolicy {
                rate_per_s: 0.5,
                burst: 1,
            },
            ..crate::support::unlimited()
        },
    )
    .await;
    let running = fx.start(fx.config("limited")).await;
    let (one, two) = (fx.envelope(), fx.envelope());
    fx.publish(&one).await;
    fx.publish(&two).await;
    running.until("a nak for the limit", |s| s.naked >= 1).await;
    assert_eq!(fx.identities().await, 1, "the limited message waits");
    running.until("both acks", |s| s.acked == 2).await;
    assert_eq!(fx.identities().await, 2);
    assert_eq!(fx.cursor().await, 2);
    // A 429 is not audited: one row per accepted envelope, nothing for the refusals.
    assert_eq!(fx.audit().await.len(), 2);
    running.stop().await;
    fx.cleanup().await;
}

#[tokio::test]
async fn a_gap_keeps_the_cursor_and_its_fill_moves_it_through() {
    let Some(url) = nats_url("gap then fill") else {
        return;
    };
    let fx = Fx::new(url).await;
    let running = fx.start(fx.config("gap")).await;
    let (one, two, three) = (fx.envelope(), fx.envelope(), fx.envelope());
    fx.publish(&one).await;
    fx.publish(&three).await;
    running.until("2 acks", |s| s.acked == 2).await;
    assert_eq!(fx.cursor().await, 1, "the gap at 2 holds the cursor");
    assert_eq!(
        fx.identities().await,
        2,
        "the envelope past the gap is kept"
    );
    fx.publish(&two).await;
    running.until("3 acks", |s| s.acked == 3).await;
    assert_eq!(fx.cursor().await, 3);
    assert_eq!(fx.identities().await, 3);
    let reasons: Vec<String> = fx.audit().await.into_iter().map(|(_, r)| r).collect();
    assert_eq!(reasons, ["in-order", "gap", "in-order"]);
    running.stop().await;
    fx.cleanup().await;
}

#[tokio::test]
async fn a_redelivery_after_a_lost_ack_is_a_duplicate_and_no_second_identity() {
    let Some(url) = nats_url("duplicate redelivery") else {
        return;
    };
    let fx = Fx::new(url).await;
    let mut config = fx.config("lost-ack");
    config.pipeline_ms_max = 1_000;
    config.ack_wait_ms = 2_000;
    // First delivery: committed, and the ack never reaches the broker.
    let first = JetStreamIngest::new(fx.inbox.clone(), config.clone()).unwrap();
    let (_client, consumer) = first.connect().await.unwrap();
    let envelope = fx.envelope();
    fx.publish(&envelope).await;
    let mut batch = consumer.fetch().max_messages(1).messages().await.unwrap();
    let message = batch.next().await.unwrap().unwrap();
    let processed = first.process(&message.message).await;
    assert_eq!(processed.settlement, Settlement::Ack);
    assert_eq!(processed.answer.reason, "in-order");
    drop(message); // not acked: lost
    assert_eq!(fx.identities().await, 1);

    // The broker redelivers after the ack wait; the running consumer acks the duplicate.
    let running = fx.start(config).await;
    running
        .until("the redelivery's ack", |s| s.acked == 1)
        .await;
    assert_eq!(fx.identities().await, 1, "no second identity");
    assert_eq!(fx.cursor().await, 1);
    let audit = fx.audit().await;
    assert_eq!(
        audit,
        [
            ("accept-delayed".to_owned(), "in-order".to_owned()),
            ("ignore-duplicate".to_owned(), "duplicate".to_owned())
        ]
    );
    running.stop().await;
    fx.cleanup().await;
}

#[tokio::test]
async fn a_tampered_envelope_is_terminated_audited_and_does_not_stall_the_stream() {
    let Some(url) = nats_url("tampered") else {
        return;
    };
    let fx = Fx::new(url).await;
    let running = fx.start(fx.config("tampered")).await;
    let mut tampered = fx.envelope();
    tampered.payload["version"] = 2.into();
    fx.publish(&tampered).await;
    running.until("the term", |s| s.terminated == 1).await;
    assert_eq!(fx.identities().await, 0);
    assert_eq!(fx.cursor().await, 0);
    let audit = fx.audit().await;
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].0, "refuse-tampered");
    assert!(audit[0].1.starts_with("signature"), "{audit:?}");

    // The stream goes on: the next envelope (a new sequence 1 in its own right) is accepted.
    let good = fx
        .producer
        .envelope("sync_cursor", crate::support::cursor(1), None);
    let mut good = good.unwrap();
    good.producer_sequence = 1;
    let good = fx.producer.sign(&good).unwrap();
    fx.publish(&good).await;
    running.until("the ack", |s| s.acked == 1).await;
    assert_eq!(fx.identities().await, 1);
    assert_eq!(fx.cursor().await, 1);
    running.stop().await;
    fx.cleanup().await;
}

#[tokio::test]
async fn a_wrong_or_missing_credential_is_terminated_with_nothing_written() {
    let Some(url) = nats_url("wrong credential") else {
        return;
    };
    let fx = Fx::new(url).await;
    let running = fx.start(fx.config("credential")).await;
    let envelope = fx.envelope();
    let subject = fx.subject(TENANT, PROJECT);
    fx.publish_raw(&subject, Some("whk_not-a-credential"), bytes(&envelope))
        .await;
    fx.publish_raw(&subject, None, bytes(&envelope)).await;
    running.until("2 terms", |s| s.terminated == 2).await;
    assert_eq!(fx.identities().await, 0);
    assert_eq!(
        fx.audit().await.len(),
        0,
        "no verified tenant: nothing audited"
    );
    assert_eq!(fx.cursor().await, 0);
    // The same bytes with the right credential: accepted.
    fx.publish(&envelope).await;
    running.until("the ack", |s| s.acked == 1).await;
    assert_eq!(fx.identities().await, 1);
    running.stop().await;
    fx.cleanup().await;
}

#[tokio::test]
async fn a_message_over_the_limit_is_terminated_unread_and_one_at_the_limit_is_accepted() {
    let Some(url) = nats_url("oversize") else {
        return;
    };
    let fx = Fx::new(url).await;
    let envelope = fx.envelope();
    let limit = bytes(&envelope).len();
    let mut config = fx.config("oversize");
    config.message_bytes_max = Some(limit);
    let running = fx.start(config).await;
    // At the limit: read and accepted.
    fx.publish(&envelope).await;
    running.until("the ack", |s| s.acked == 1).await;
    // One byte over, with a valid credential: had it been read it would have been audited.
    let subject = fx.subject(TENANT, PROJECT);
    fx.publish_raw(&subject, Some(&fx.token), vec![b'{'; limit + 1])
        .await;
    running.until("the term", |s| s.terminated == 1).await;
    let stats = running.stop().await;
    assert_eq!(stats.oversize, 1);
    assert_eq!(fx.identities().await, 1);
    assert_eq!(
        fx.audit().await.len(),
        1,
        "the oversize message is not audited"
    );
    fx.cleanup().await;
}

#[tokio::test]
async fn a_subject_naming_another_tenant_or_project_is_refused_as_route() {
    let Some(url) = nats_url("wrong subject") else {
        return;
    };
    let fx = Fx::new(url).await;
    let running = fx.start(fx.config("route")).await;
    let envelope = fx.envelope();
    fx.publish_raw(
        &fx.subject("other", PROJECT),
        Some(&fx.token),
        bytes(&envelope),
    )
    .await;
    fx.publish_raw(&fx.subject(TENANT, "p2"), Some(&fx.token), bytes(&envelope))
        .await;
    running.until("2 terms", |s| s.terminated == 2).await;
    assert_eq!(fx.identities().await, 0);
    let audit = fx.audit().await;
    assert_eq!(
        audit,
        [
            ("refuse-tampered".to_owned(), "route".to_owned()),
            ("refuse-tampered".to_owned(), "route".to_owned())
        ]
    );
    // Audited into the credential's own tenant, never the subject's.
    assert_eq!(
        fx.count("SELECT count(*) FROM wharf.inbox_audit WHERE tenant_id = 'acme'")
            .await,
        2
    );
    fx.publish(&envelope).await;
    running.until("the ack", |s| s.acked == 1).await;
    assert_eq!(fx.identities().await, 1);
    running.stop().await;
    fx.cleanup().await;
}

/// Connections to this test's database refused and the open ones ended (`on` = false), or
/// allowed again: the database is down for this test alone.
async fn database_up(fx: &Fx, on: bool) {
    let name = fx.db.name();
    let admin_url = fx.db.url().replacen(&format!("/{name}"), "/postgres", 1);
    let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&admin_url)
        .await
        .unwrap();
    let sql = format!("ALTER DATABASE {name} ALLOW_CONNECTIONS {on}");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&mut admin)
        .await
        .unwrap();
    if !on {
        sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1")
            .bind(name)
            .execute(&mut admin)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn with_the_database_down_messages_are_redelivered_and_accepted_once_it_returns() {
    let Some(url) = nats_url("database stopped") else {
        return;
    };
    let fx = Fx::new(url).await;
    let running = fx.start(fx.config("db-down")).await;
    let envelopes: Vec<_> = (0..4).map(|_| fx.envelope()).collect();
    fx.publish(&envelopes[0]).await;
    running.until("the first ack", |s| s.acked == 1).await;

    database_up(&fx, false).await;
    for envelope in &envelopes[1..] {
        fx.publish(envelope).await;
    }
    // Each is nak'ed (503) and redelivered, more than once while the database stays down.
    running.until("naks", |s| s.naked >= 6).await;
    assert_eq!(running.stats().acked, 1, "nothing acknowledged while down");
    assert_eq!(running.stats().terminated, 0, "a 503 is never terminated");

    database_up(&fx, true).await;
    running.until("every ack", |s| s.acked == 4).await;
    assert_eq!(fx.identities().await, 4);
    assert_eq!(fx.cursor().await, 4);
    let audit = fx.audit().await;
    assert_eq!(audit.len(), 4, "each accepted once: {audit:?}");
    assert!(
        audit.iter().all(|(o, _)| o == "accept-delayed"),
        "{audit:?}"
    );
    running.stop().await;
    fx.cleanup().await;
}

#[tokio::test]
async fn a_restarted_consumer_goes_on_where_the_durable_consumer_stopped() {
    let Some(url) = nats_url("consumer restart") else {
        return;
    };
    let fx = Fx::new(url).await;
    let envelopes: Vec<_> = (0..6).map(|_| fx.envelope()).collect();
    let first = fx.start(fx.config("restart")).await;
    for envelope in &envelopes[..3] {
        fx.publish(envelope).await;
    }
    first.until("3 acks", |s| s.acked == 3).await;
    first.stop().await;
    // Published while no consumer runs: the broker keeps them.
    for envelope in &envelopes[3..] {
        fx.publish(envelope).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(fx.identities().await, 3);

    let second = fx.start(fx.config("restart")).await;
    second.until("3 more acks", |s| s.acked == 3).await;
    // A moment for anything redelivered by mistake to show.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stats = second.stop().await;
    assert_eq!((stats.acked, stats.naked, stats.terminated), (3, 0, 0));
    assert_eq!(fx.identities().await, 6);
    assert_eq!(fx.cursor().await, 6);
    assert_eq!(fx.audit().await.len(), 6, "nothing decided twice");
    fx.cleanup().await;
}

/// The stream with the consumer's filter, before any consumer: a backlog can wait in it.
async fn stream_first(fx: &Fx) {
    fx.js
        .create_stream(async_nats::jetstream::stream::Config {
            name: fx.stream.clone(),
            subjects: vec![format!("{}.*.*", fx.prefix)],
            ..Default::default()
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn a_backlog_is_committed_in_batches_in_delivery_order() {
    let Some(url) = nats_url("backlog in batches") else {
        return;
    };
    let fx = Fx::new(url).await;
    stream_first(&fx).await;
    let envelopes: Vec<_> = (0..30).map(|_| fx.envelope()).collect();
    for envelope in &envelopes {
        fx.publish(envelope).await;
    }
    let running = fx.start(fx.config("backlog")).await;
    running.until("30 acks", |s| s.acked == 30).await;
    assert_eq!(fx.identities().await, 30);
    assert_eq!(fx.cursor().await, 30);
    let audit = fx.audit().await;
    assert!(
        audit
            .iter()
            .all(|(o, r)| o == "accept-delayed" && r == "in-order"),
        "{audit:?}"
    );
    // Envelopes decided together share their batch's correlation id.
    let batches = fx
        .count("SELECT count(DISTINCT correlation_id) FROM wharf.inbox_audit")
        .await;
    assert!(
        batches < 30,
        "{batches} commits for 30 envelopes: nothing was batched"
    );
    running.stop().await;
    fx.cleanup().await;
}

#[tokio::test]
async fn a_poison_message_in_a_backlog_is_refused_alone() {
    let Some(url) = nats_url("poison in a backlog") else {
        return;
    };
    let fx = Fx::new(url).await;
    stream_first(&fx).await;
    let envelopes: Vec<_> = (0..10).map(|_| fx.envelope()).collect();
    for envelope in &envelopes[..5] {
        fx.publish(envelope).await;
    }
    let subject = fx.subject(TENANT, PROJECT);
    fx.publish_raw(
        &subject,
        Some(&fx.token),
        b"{\"not\": \"an envelope\"".to_vec(),
    )
    .await;
    for envelope in &envelopes[5..] {
        fx.publish(envelope).await;
    }
    let running = fx.start(fx.config("poison")).await;
    running
        .until("10 acks and a term", |s| s.acked == 10 && s.terminated == 1)
        .await;
    assert_eq!(fx.identities().await, 10);
    assert_eq!(fx.cursor().await, 10);
    let audit = fx.audit().await;
    assert_eq!(audit.len(), 11, "{audit:?}");
    assert_eq!(
        audit.iter().filter(|(o, _)| o == "refuse-tampered").count(),
        1,
        "{audit:?}"
    );
    assert_eq!(
        audit.iter().filter(|(_, r)| r == "in-order").count(),
        10,
        "{audit:?}"
    );
    running.stop().await;
    fx.cleanup().await;
}
