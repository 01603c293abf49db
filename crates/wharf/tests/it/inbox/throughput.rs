//! Throughput of the library's ingest paths, single and batch, measured in one run. Ignored by
//! default (it is a measurement, not a check); run it with
//! `cargo test --release -p wharf --test it inbox::throughput -- --ignored --nocapture`.

use std::sync::Arc;
use std::time::Instant;

use serde_json::value::RawValue;
use wharf::inbox::{Route, Status};

use super::support::*;

const BATCHES: u64 = 20;
const BATCH: u64 = 1000;
const SINGLES: u64 = 4000;
const SENDERS: u64 = 8;

#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement; run with --ignored --nocapture"]
async fn batch_and_single_envelopes_per_second() {
    let fx = Fx::new().await;
    let bodies: Vec<Vec<u8>> = (0..BATCHES)
        .map(|b| {
            let raws: Vec<Box<RawValue>> = (1..=BATCH)
                .map(|i| {
                    let body = fx.body(b * BATCH + i);
                    RawValue::from_string(String::from_utf8(body).unwrap()).unwrap()
                })
                .collect();
            serde_json::to_vec(&serde_json::json!({ "envelopes": raws })).unwrap()
        })
        .collect();
    // The CPU part alone, on one thread: decode, verify, validate, digest.
    let catalog = wharf::core::schema::Catalog::with_builtin();
    let verifying = fx.key.verifying_key();
    let sample: Vec<Vec<u8>> = (1..=2000).map(|i| fx.body(i)).collect();
    let started = Instant::now();
    for body in &sample {
        let e = wharf::core::envelope::decode_envelope(body).unwrap();
        wharf::core::sign::verify(&e, &verifying).unwrap();
        catalog.validate(&e.event_type, &e.payload).unwrap();
        e.content_digest().unwrap();
        e.payload_canonical().unwrap();
    }
    let cpu_rate = sample.len() as f64 / started.elapsed().as_secs_f64();

    let started = Instant::now();
    for body in &bodies {
        let answer = fx
            .inbox
            .ingest_batch(peer(), &fx.token, Route::new(TENANT, PROJECT), body)
            .await;
        assert_eq!(answer.head.status, Status::Decided);
    }
    let batch_rate = (BATCHES * BATCH) as f64 / started.elapsed().as_secs_f64();

    // Singles: another device, so its own stream; several concurrent senders, each in order.
    let first = BATCHES * BATCH;
    let singles: Vec<Vec<u8>> = (1..=SINGLES).map(|i| fx.body(first + i)).collect();
    let singles = Arc::new(singles);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..SENDERS {
        let (inbox, token, singles) = (
            Arc::clone(&fx.inbox),
            fx.token.clone(),
            Arc::clone(&singles),
        );
        tasks.push(tokio::spawn(async move {
            for body in singles.iter().skip(s as usize).step_by(SENDERS as usize) {
                let answer = inbox
                    .ingest(peer(), &token, Route::new(TENANT, PROJECT), body)
                    .await;
                assert!(answer.is_acknowledged(), "{answer:?}");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let single_rate = SINGLES as f64 / started.elapsed().as_secs_f64();
    assert_eq!(fx.cursor().await.0, first + SINGLES);
    println!(
        "inbox throughput: batch {batch_rate:.0} envelopes/s ({BATCHES} x {BATCH}), \
         single {single_rate:.0} envelopes/s ({SINGLES}, {SENDERS} senders on one stream), \
         checks alone {cpu_rate:.0} envelopes/s on one thread"
    );
}
