//! The batch path: many envelopes of one stream in one request and one transaction, one answer
//! per envelope plus the acknowledged sequence.

use rand::seq::SliceRandom as _;
use wharf::inbox::{Outcome, Status};

use super::support::*;

#[tokio::test]
async fn a_shuffled_batch_is_decided_in_one_transaction() {
    let fx = Fx::new().await;
    let mut seqs: Vec<u64> = (1..=300).collect();
    seqs.shuffle(&mut rand::thread_rng());
    let mut bodies: Vec<Vec<u8>> = seqs.iter().map(|&s| fx.body(s)).collect();
    // In the same batch: a duplicate of an earlier item, a conflict with it, and a tampered one.
    bodies.push(fx.body(seqs[0]));
    let mut conflict = fx.envelope(seqs[1]);
    conflict.payload = payload("changed");
    bodies.push(fx.signed(&conflict));
    bodies.push(edit(&fx.body(999), |v| {
        v["payload"]["run_id"] = "altered".into()
    }));

    let stats_before = fx.inbox.counters();
    let answer = fx.send_batch(&batch_body(&bodies)).await;
    assert_eq!(answer.head.status, Status::Decided, "{:?}", answer.head);
    assert_eq!(answer.http_status(), 200);
    assert_eq!(answer.head.acknowledged_sequence, Some(300));
    assert_eq!(answer.items.len(), 303);
    for (i, item) in answer.items.iter().enumerate().take(300) {
        assert_eq!(item.index, i);
        assert_eq!(item.outcome, Outcome::AcceptDelayed, "{i}");
        // Decided in request order against the running cursor: the next sequence is in order,
        // anything beyond a gap is a gap.
        assert!(
            matches!(item.reason, "in-order" | "gap"),
            "{i}: {}",
            item.reason
        );
        assert_eq!(item.producer_sequence, Some(seqs[i]));
    }
    let dup = &answer.items[300];
    assert_eq!(
        (dup.outcome, dup.reason),
        (Outcome::IgnoreDuplicate, "duplicate")
    );
    assert_eq!(
        dup.original.as_ref().unwrap().correlation_id,
        answer.head.correlation_id
    );
    assert_eq!(answer.items[301].reason, "identity-conflict");
    assert_eq!(answer.items[302].reason, "signature");
    // Ordered: the first item is in order when it is sequence 1, and the cursor ran to 300.
    let in_order = answer.items[..300]
        .iter()
        .filter(|i| i.reason == "in-order")
        .count();
    assert!(in_order >= 1);

    let counts = fx.counts().await;
    assert_eq!(
        (counts.identities, counts.payloads, counts.audit),
        (300, 300, 303)
    );
    let after = fx.inbox.counters();
    assert_eq!(
        after.stream_transactions - stats_before.stream_transactions,
        1
    );
    assert_eq!(
        after.key_lookups - stats_before.key_lookups,
        1,
        "one key query per request"
    );

    // Sending the same batch again: every accepted one is a duplicate now.
    let again = fx.send_batch(&batch_body(&bodies[..300])).await;
    assert!(
        again
            .items
            .iter()
            .all(|i| i.outcome == Outcome::IgnoreDuplicate)
    );
    assert_eq!(fx.counts().await.identities, 300);
}

#[tokio::test]
async fn a_batch_that_is_not_a_list_of_envelopes_is_one_refusal() {
    let fx = Fx::new().await;
    for (body, reason) in [
        (b"[]".to_vec(), "payload"),
        (b"{\"envelopes\": [], \"x\": 1}".to_vec(), "payload"),
        (b"{\"envelopes\": []}".to_vec(), "payload"),
    ] {
        let before = fx.counts().await;
        let answer = fx.send_batch(&body).await;
        assert_eq!(
            (answer.head.status, answer.head.reason),
            (Status::Outcome(Outcome::RefuseTampered), reason)
        );
        assert!(answer.items.is_empty());
        assert_eq!(fx.counts().await, before.audited(1));
    }
    let too_many = batch_body(&vec![fx.body(1); 1001]);
    assert_eq!(fx.send_batch(&too_many).await.head.reason, "payload");
    assert_eq!(fx.counts().await.identities, 0);
}

#[tokio::test]
async fn a_batch_in_order_walks_the_cursor_item_by_item() {
    let fx = Fx::new().await;
    // 3 is retained beyond a gap; the batch fills 2 (in order), then 4 continues the run.
    assert!(fx.send(&fx.body(1)).await.is_acknowledged());
    assert_eq!(fx.send(&fx.body(3)).await.reason, "gap");
    let answer = fx
        .send_batch(&batch_body(&[fx.body(2), fx.body(4), fx.body(6)]))
        .await;
    let reasons: Vec<&str> = answer.items.iter().map(|i| i.reason).collect();
    assert_eq!(reasons, vec!["in-order", "in-order", "gap"]);
    assert_eq!(answer.head.acknowledged_sequence, Some(4));
    assert_eq!(fx.cursor().await.0, 4);
}
