//! `wharf bench inbox --jetstream`: verified envelopes per second through the inbox's JetStream
//! consumer, measured in the same run as the HTTP figures so the two can be compared.
//!
//! Setup is not timed: the run's envelopes are built and signed exactly as for the single
//! endpoint (one per message, [`super::inbox`]'s streams and credentials), published to a
//! stream of the run's own on the NATS server at `--nats` and stored there. The clock starts
//! when the consumer ([`wharf_nats::JetStreamIngest`], the one `wharf serve` runs, default
//! bounds) starts, and stops when it has acknowledged every message; afterwards each stream's
//! cursor must equal its last sequence with one audit row per envelope. The stream is deleted
//! after the run.
//!
//! Must not know: any inbox rule; NATS beyond `wharf-nats`'s public API.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use serde_json::{Value, json};
use sqlx::PgPool;
use wharf::inbox::Inbox;
use wharf_nats::{JetStreamConfig, JetStreamIngest, NatsProducer};

use super::Deadline;
use super::inbox::{PROJECT, Prepared};
use crate::TENANT;

/// One JetStream measurement of `prepared` (single-envelope bodies).
pub(super) async fn measure(
    nats: &str,
    service: Arc<Inbox>,
    pool: &PgPool,
    tag: &str,
    prepared: Prepared,
    envelopes: u64,
    deadline: &Deadline,
) -> anyhow::Result<Value> {
    let producer = NatsProducer::connect(nats, None)
        .await
        .with_context(|| format!("--nats {nats}"))?;
    let stream = format!("WHARF_BENCH_{}", tag.to_ascii_uppercase());
    let prefix = format!("wharfbench{}", tag.to_ascii_lowercase());
    producer.delete_stream(&stream).await?;
    producer
        .create_stream(&stream, &format!("{prefix}.*.*"))
        .await?;
    let subject = format!("{prefix}.{TENANT}.{PROJECT}");
    let messages: Vec<_> = prepared
        .requests
        .into_iter()
        .enumerate()
        // The message id only serves the stream's deduplication; a run's envelopes are all
        // distinct, so their index in the run will do.
        .map(|(i, r)| {
            (
                subject.clone(),
                r.token.to_string(),
                format!("bench-{tag}-{i}"),
                r.body,
            )
        })
        .collect();
    let published = Instant::now();
    let stored = producer.publish_many(messages).await?;
    let publish_seconds = published.elapsed().as_secs_f64();
    ensure!(
        stored == envelopes,
        "{stored} of {envelopes} messages stored"
    );

    let mut config = JetStreamConfig::new(nats, &stream, "bench");
    config.subjects = format!("{prefix}.{{tenant}}.{{project}}");
    let consumer = Arc::new(JetStreamIngest::new(service, config)?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let started = Instant::now();
    let task = tokio::spawn({
        let consumer = consumer.clone();
        async move {
            consumer
                .run(async {
                    let _ = stopped.await;
                })
                .await
        }
    });
    let bar = super::report::counter_bar(envelopes, "jetstream");
    let waited = loop {
        let stats = consumer.stats();
        bar.set_position(stats.acked);
        if stats.acked >= envelopes || stats.terminated > 0 {
            break Ok(stats);
        }
        if let Err(e) = deadline.check(|| "consuming from JetStream".to_owned()) {
            break Err(e);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let _ = stop.send(());
    let ran = tokio::time::timeout(Duration::from_secs(30), task).await;
    let _ = producer.delete_stream(&stream).await;
    let stats = waited?;
    ensure!(
        stats.terminated == 0,
        "the consumer terminated {} messages (stats {stats:?})",
        stats.terminated
    );
    if let Ok(Ok(Err(e))) = ran {
        return Err(e).context("the JetStream consumer failed");
    }
    super::inbox::check(pool, &prepared.streams, envelopes).await?;
    Ok(json!({
        "envelopes": envelopes,
        "seconds": seconds,
        "envelopes_per_second": envelopes as f64 / seconds,
        "publish_per_second": envelopes as f64 / publish_seconds,
        "naked": stats.naked,
        "in_flight_max": wharf_nats::IN_FLIGHT_MAX_DEFAULT,
        "fetch_batch_max": wharf_nats::FETCH_BATCH_MAX_DEFAULT,
    }))
}
