//! The load of a run: the outbox feeder (every action once, over lanes of three kinds) and the
//! inbox producers (shuffled streams, every envelope retried until decided, some sent again).
//!
//! Owns: the lanes and their requests, the enqueue-time registry, the feeder's backlog bound,
//! the producers' order and retries, and what each records for the checker (`Enqueued`,
//! `SentEnvelope`). Must not know: the faults, or what the checker makes of the records.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::bail;
use rand::Rng as _;
use rand::seq::SliceRandom as _;
use serde_json::json;
use sqlx::PgPool;

use super::{PROJECT, Shared, TENANT};
use crate::check::{Enqueued, SentEnvelope};
use crate::sink::key_for;

/// Actions per enqueue statement.
const ENQUEUE_BATCH: usize = 100;

/// Actions not ended yet, or `None` while the database does not answer.
async fn unended(pool: &PgPool) -> Option<u64> {
    sqlx::query_scalar::<_, i64>("SELECT count(*) FROM wharf.action_live")
        .fetch_one(pool)
        .await
        .ok()
        .map(|n| n as u64)
}

/// The lanes: emails (at-most-once), webhooks to a receiver that does not deduplicate, and
/// webhooks to one that does, 3 : 4 : 3.
fn lanes(count: u32) -> Vec<String> {
    (0..count)
        .map(|i| match i % 10 {
            0..=2 => format!("mail-{i}"),
            3..=6 => format!("hook-{i}"),
            _ => format!("dhook-{i}"),
        })
        .collect()
}

fn request(lane: &str, sequence: u64, http_base: &str) -> wharf::outbox::ActionRequest {
    let key = key_for(lane, sequence);
    if lane.starts_with("mail") {
        let payload = json!({"notice": "message", "event": {
            "to": format!("{key}@chaos.test"), "subject": format!("chaos {key}"), "text": "x"}});
        let mut request = wharf::outbox::ActionRequest::new("email", lane, key, payload);
        request.max_attempts = Some(4);
        request
    } else {
        let path = if lane.starts_with("dhook") {
            "dedupe"
        } else {
            "hook"
        };
        let payload = json!({"url": format!("{http_base}/{path}/{lane}"),
                             "body": {"lane": lane, "sequence": sequence}});
        let mut request = wharf::outbox::ActionRequest::new("webhook", lane, key, payload);
        request.tenant_id = Some(TENANT.to_owned());
        request.max_attempts = Some(5);
        request
    }
}

/// A registry with the same kinds the binary runs, for enqueue-time checks.
fn registry(http_base: &str) -> anyhow::Result<wharf::outbox::Registry> {
    use wharf_adapters::email::{EmailAdapter, EmailConfig, MessageNotice};
    use wharf_adapters::http::{
        HttpSenderConfig, InMemoryWebhookSigner, NetworkSender, WebhookAdapter,
    };
    let mut registry = wharf::outbox::Registry::new();
    let email = EmailConfig {
        relay_host: Some("127.0.0.1".into()),
        relay_port: Some(25),
        ..EmailConfig::default()
    };
    let email = EmailAdapter::builder()
        .config(email)
        .notice(Arc::new(MessageNotice))
        .build()?;
    registry.register(Arc::new(email))?;
    let http = HttpSenderConfig {
        allow_cidrs: vec!["127.0.0.0/8".into()],
        dedupe_endpoints: vec![format!("{http_base}/dedupe")],
        ..HttpSenderConfig::default()
    };
    let signer = InMemoryWebhookSigner::new(ed25519_dalek_key());
    registry.register(Arc::new(WebhookAdapter::new(
        NetworkSender::new(&http)?,
        Arc::new(signer),
    )))?;
    Ok(registry)
}

fn ed25519_dalek_key() -> ed25519_dalek::SigningKey {
    let mut seed = [0u8; 32];
    rand::thread_rng().fill(&mut seed);
    ed25519_dalek::SigningKey::from_bytes(&seed)
}

/// The outbox load: every action once, in batches over random lanes, each batch retried
/// until the database acknowledges it (same keys: a retry after an unknown outcome returns
/// the actions it made). Batches go one at a time, so a lane's ids follow its sequence.
pub(crate) async fn feed(
    shared: Arc<Shared>,
    pool: PgPool,
    http_base: String,
) -> anyhow::Result<Vec<Enqueued>> {
    let registry = registry(&http_base)?;
    let lanes = lanes(shared.settings.lanes);
    let mut next = vec![1u64; lanes.len()];
    let mut out = Vec::with_capacity(shared.settings.actions as usize);
    while (out.len() as u64) < shared.settings.actions {
        // Calls the sinks finished are a cheap lower bound of the work done; but an action can
        // end without a call (a replica that died at its fence, a refusal before the call), so
        // at the limit the database says how many are still unended.
        let in_flight = out.len() as u64 - shared.recorder.finished.load(Ordering::Relaxed);
        if in_flight >= shared.settings.backlog_max
            && unended(&pool)
                .await
                .is_none_or(|n| n >= shared.settings.backlog_max)
        {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        let room = (shared.settings.actions - out.len() as u64) as usize;
        let mut batch = Vec::new();
        let mut records = Vec::new();
        for _ in 0..ENQUEUE_BATCH.min(room) {
            let lane = rand::thread_rng().gen_range(0..lanes.len());
            let name = &lanes[lane];
            batch.push(request(name, next[lane], &http_base));
            records.push(Enqueued {
                key: key_for(name, next[lane]),
                at_most_once: name.starts_with("mail"),
                dedupe: name.starts_with("dhook"),
                enqueued_us: 0,
            });
            next[lane] += 1;
        }
        loop {
            let attempt = async {
                let mut conn = pool.acquire().await?;
                wharf::outbox::enqueue_many(&mut conn, &registry, batch.clone())
                    .await
                    .map_err(anyhow::Error::from)
            };
            match attempt.await {
                Ok(_) => break,
                Err(e)
                    if e.downcast_ref::<wharf::outbox::Error>()
                        .is_some_and(|e| matches!(e, wharf::outbox::Error::Invalid { .. })) =>
                {
                    bail!("the harness built an invalid request: {e:#}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        shared
            .enqueued
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        let now = shared.clock.now_us();
        out.extend(records.into_iter().map(|r| Enqueued {
            enqueued_us: now,
            ..r
        }));
    }
    Ok(out)
}

/// One inbox producer: its whole stream built and signed up front, sent in an order shuffled
/// within windows of 16 (gaps, then fills), every envelope retried until the server decides;
/// now and then an envelope already acknowledged is sent again (a retry after a lost answer).
pub(crate) async fn produce(
    shared: Arc<Shared>,
    base: String,
    device: String,
    token: String,
    seed: [u8; 32],
    deadline: Instant,
) -> Vec<SentEnvelope> {
    let mut config = wharf_client::ProducerConfig::new(base, TENANT, PROJECT, token, "k1", seed);
    config.request_timeout = Duration::from_secs(10);
    let producer = match wharf_client::Producer::new(config, 1) {
        Ok(producer) => producer,
        Err(e) => panic!("producer {device}: {e}"),
    };
    let count = shared.settings.envelopes_per_producer;
    let mut envelopes = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let payload = json!({"producer_id": device, "acknowledged_sequence": 0,
                             "acknowledged_event_id": null, "version": 1});
        match producer.envelope("sync_cursor", payload, None) {
            Ok(envelope) => envelopes.push(envelope),
            Err(e) => panic!("producer {device}: {e}"),
        }
    }
    let mut order: Vec<usize> = (0..envelopes.len()).collect();
    for window in order.chunks_mut(16) {
        window.shuffle(&mut rand::thread_rng());
    }
    let mut sent: Vec<SentEnvelope> = envelopes
        .iter()
        .map(|e| SentEnvelope {
            producer: device.clone(),
            sequence: e.producer_sequence,
            event_id: e.event_id.clone(),
            outcome: None,
        })
        .collect();
    let mut done = Vec::new();
    for i in order {
        sent[i].outcome = send_until_decided(&producer, &envelopes[i], deadline).await;
        done.push(i);
        if rand::thread_rng().gen_range(0..20) == 0 {
            let j = done[rand::thread_rng().gen_range(0..done.len())];
            if let Some(outcome) = send_until_decided(&producer, &envelopes[j], deadline).await {
                sent[j].outcome = Some(outcome);
            }
        }
    }
    sent
}

async fn send_until_decided(
    producer: &wharf_client::Producer,
    envelope: &wharf_core::envelope::Envelope,
    deadline: Instant,
) -> Option<String> {
    while Instant::now() < deadline {
        match producer.send(envelope).await {
            Ok(answer) => return Some(answer.outcome.as_str().to_owned()),
            Err(wharf_client::Error::Refused { status, code, .. }) => {
                return Some(format!("http-{status}-{code}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
    None
}
