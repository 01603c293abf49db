//! Many parallel senders on one stream — several pools and inboxes, as several replicas would
//! be — with shuffled sequences and retries: the cursor ends exactly at the last sequence, every
//! event has one identity, and every decision one audit row.

use std::sync::Arc;

use rand::seq::SliceRandom as _;
use wharf::inbox::{Inbox, Outcome, Route, Status};

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_senders_with_retries_end_contiguous() {
    const EVENTS: u64 = 120;
    const SENDERS: usize = 12;
    let fx = Fx::new().await;
    let mut replicas = vec![Arc::clone(&fx.inbox)];
    for _ in 0..2 {
        replicas.push(Arc::new(Inbox::new(
            fx.db.another_pool(4).await,
            unlimited(),
        )));
    }

    // Every event is sent once, a third of them twice more (a retry after a lost answer), all
    // shuffled across senders.
    let mut sends: Vec<u64> = (1..=EVENTS).collect();
    sends.extend((1..=EVENTS).filter(|s| s % 3 == 0).flat_map(|s| [s, s]));
    sends.shuffle(&mut rand::thread_rng());
    let bodies: Vec<(u64, Vec<u8>)> = sends.iter().map(|&s| (s, fx.body(s))).collect();
    let total_sends = bodies.len();

    let mut tasks = Vec::new();
    for (i, chunk) in bodies.chunks(total_sends.div_ceil(SENDERS)).enumerate() {
        let inbox = Arc::clone(&replicas[i % replicas.len()]);
        let token = fx.token.clone();
        let chunk = chunk.to_vec();
        tasks.push(tokio::spawn(async move {
            let mut answers = Vec::new();
            for (seq, body) in chunk {
                let answer = inbox
                    .ingest(peer(), &token, Route::new(TENANT, PROJECT), &body)
                    .await;
                answers.push((seq, answer));
            }
            answers
        }));
    }
    let mut accepts = vec![0u32; EVENTS as usize + 1];
    let mut duplicates = 0;
    for task in tasks {
        for (seq, answer) in task.await.unwrap() {
            match answer.status {
                Status::Outcome(Outcome::AcceptDelayed) => accepts[seq as usize] += 1,
                Status::Outcome(Outcome::IgnoreDuplicate) => duplicates += 1,
                other => panic!("sequence {seq}: unexpected {other:?} {}", answer.reason),
            }
        }
    }
    assert!(
        accepts[1..].iter().all(|&n| n == 1),
        "each event accepted exactly once: {accepts:?}"
    );
    assert_eq!(duplicates, total_sends - EVENTS as usize);

    assert_eq!(fx.cursor().await, (EVENTS, 1));
    let counts = fx.counts().await;
    assert_eq!(counts.identities, EVENTS as i64);
    assert_eq!(counts.payloads, EVENTS as i64);
    assert_eq!(counts.streams, 1);
    assert_eq!(
        counts.audit, total_sends as i64,
        "one audit row per decision"
    );
    let distinct: i64 =
        sqlx::query_scalar("SELECT count(DISTINCT producer_sequence) FROM wharf.inbox_identities")
            .fetch_one(fx.pool())
            .await
            .unwrap();
    assert_eq!(distinct, EVENTS as i64);
}
