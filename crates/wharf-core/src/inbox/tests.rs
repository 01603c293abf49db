//! The inbox decision as a table of `check(input, expected)` rows.

use super::*;
use crate::envelope::decode_envelope;

const D: [u8; 32] = [0xd1; 32];
const OTHER: [u8; 32] = [0x0e; 32];

fn stream(cursor: u64, floor: u64) -> StreamState {
    StreamState {
        acknowledged_sequence: cursor,
        replay_floor: floor,
    }
}

fn retained(digest: [u8; 32], seq: u64) -> Option<Retained> {
    Some(Retained {
        content_digest: digest,
        producer_sequence: seq,
    })
}

const NONE: Found = Found {
    by_event_id: None,
    by_idempotency_key: None,
    by_sequence: None,
};

#[test]
fn decisions() {
    use Outcome::*;
    let check = |s: StreamState, seq: u64, found: Found, expected: (Outcome, &str, bool)| {
        let got = decide(
            &s,
            &Incoming {
                producer_sequence: seq,
                content_digest: D,
            },
            &found,
        );
        assert_eq!(
            (got.outcome, got.reason, got.store),
            expected,
            "cursor {} floor {} seq {seq} found {found:?}",
            s.acknowledged_sequence,
            s.replay_floor
        );
    };
    let by_id = |d, seq| Found {
        by_event_id: retained(d, seq),
        ..NONE
    };
    let by_key = |d, seq| Found {
        by_idempotency_key: retained(d, seq),
        ..NONE
    };
    let by_seq = |d| Found {
        by_sequence: Some(d),
        ..NONE
    };
    let all_same = |seq| Found {
        by_event_id: retained(D, seq),
        by_idempotency_key: retained(D, seq),
        by_sequence: Some(D),
    };

    // New identities: the sequence decides.
    check(stream(0, 0), 1, NONE, (AcceptDelayed, "in-order", true));
    check(stream(0, 0), 2, NONE, (AcceptDelayed, "gap", true));
    check(stream(5, 0), 6, NONE, (AcceptDelayed, "in-order", true));
    check(stream(5, 0), 7, NONE, (AcceptDelayed, "gap", true));
    check(stream(5, 0), u64::MAX, NONE, (AcceptDelayed, "gap", true));
    check(
        stream(u64::MAX - 1, 0),
        u64::MAX,
        NONE,
        (AcceptDelayed, "in-order", true),
    );
    check(stream(5, 0), 5, NONE, (AcceptReordered, "reordered", true));
    check(stream(5, 0), 1, NONE, (AcceptReordered, "reordered", true));
    // The floor, at its edge: floor itself is allowed, one below is a replay.
    check(stream(5, 3), 3, NONE, (AcceptReordered, "reordered", true));
    check(stream(5, 3), 2, NONE, (RefuseReplay, "replay", false));
    check(stream(5, 6), 5, NONE, (RefuseReplay, "replay", false));
    // A floor raised above the cursor: between them is still new and above the cursor.
    check(stream(5, 9), 9, NONE, (AcceptDelayed, "gap", true));
    check(stream(5, 9), 8, NONE, (RefuseReplay, "replay", false));

    // Duplicates: same identity, same content, wherever the sequence is.
    check(
        stream(5, 0),
        5,
        all_same(5),
        (IgnoreDuplicate, "duplicate", false),
    );
    check(
        stream(5, 0),
        9,
        by_id(D, 9),
        (IgnoreDuplicate, "duplicate", false),
    );
    check(
        stream(5, 0),
        9,
        by_key(D, 9),
        (IgnoreDuplicate, "duplicate", false),
    );
    check(
        stream(5, 0),
        9,
        by_seq(D),
        (IgnoreDuplicate, "duplicate", false),
    );
    check(
        stream(5, 6),
        2,
        all_same(2),
        (IgnoreDuplicate, "duplicate", false),
    );

    // Conflicts: same identity, different content, wherever the sequence is.
    check(
        stream(5, 0),
        5,
        by_id(OTHER, 5),
        (RefuseTampered, "identity-conflict", false),
    );
    check(
        stream(5, 0),
        9,
        by_key(OTHER, 4),
        (RefuseTampered, "identity-conflict", false),
    );
    check(
        stream(5, 0),
        3,
        by_seq(OTHER),
        (RefuseTampered, "identity-conflict", false),
    );
    check(
        stream(5, 6),
        2,
        by_seq(OTHER),
        (RefuseTampered, "identity-conflict", false),
    );
    check(
        stream(0, 0),
        1,
        by_seq(OTHER),
        (RefuseTampered, "identity-conflict", false),
    );
    // A duplicate on one identity and a conflict on another is a conflict.
    check(
        stream(5, 0),
        5,
        Found {
            by_event_id: retained(D, 5),
            by_idempotency_key: retained(OTHER, 3),
            by_sequence: Some(D),
        },
        (RefuseTampered, "identity-conflict", false),
    );
    check(
        stream(5, 0),
        5,
        Found {
            by_event_id: retained(D, 5),
            by_idempotency_key: retained(D, 5),
            by_sequence: Some(OTHER),
        },
        (RefuseTampered, "identity-conflict", false),
    );
}

#[test]
fn cursor_walks_through_contiguous_sequences_only() {
    let check = |cursor: u64, retained: &[u64], expected: u64| {
        assert_eq!(
            advance_cursor(cursor, retained),
            expected,
            "{cursor} {retained:?}"
        );
    };
    check(0, &[], 0);
    check(0, &[1], 1);
    check(0, &[2], 0);
    check(0, &[1, 2, 3], 3);
    check(0, &[1, 2, 4, 5], 2);
    check(2, &[4, 5], 2);
    // The missing 3 arrives: the cursor walks through everything now contiguous.
    check(2, &[3, 4, 5, 7], 5);
    check(5, &[1, 3, 5, 6], 6);
    check(5, &[6, 6, 7], 7);
    check(u64::MAX - 1, &[u64::MAX], u64::MAX);
    check(u64::MAX, &[u64::MAX], u64::MAX);
}

#[test]
fn outcomes_have_public_terms() {
    let check = |o: Outcome, term: &str, acknowledged: bool| {
        assert_eq!((o.as_str(), o.is_acknowledged()), (term, acknowledged));
        assert_eq!(term.parse::<Outcome>(), Ok(o));
    };
    check(Outcome::AcceptDelayed, "accept-delayed", true);
    check(Outcome::AcceptReordered, "accept-reordered", true);
    check(Outcome::IgnoreDuplicate, "ignore-duplicate", true);
    check(Outcome::RefuseReplay, "refuse-replay", false);
    check(Outcome::RefuseIncompatible, "refuse-incompatible", false);
    check(Outcome::RefuseTampered, "refuse-tampered", false);
    assert_eq!("accept".parse::<Outcome>(), Err(()));
}

#[test]
fn refusals_map_to_outcomes_and_reasons() {
    use Outcome::*;
    let check = |r: Refusal, outcome: Outcome, reason: &str, response: &str| {
        let d = r.decision();
        assert_eq!(
            (d.outcome, d.reason, d.store, d.response_reason()),
            (outcome, reason, false, response)
        );
    };
    check(Refusal::Route, RefuseTampered, "route", "route");
    check(
        Refusal::SignatureUnknownKey,
        RefuseTampered,
        "signature-unknown-key",
        "signature",
    );
    check(
        Refusal::SignatureRevokedKey,
        RefuseTampered,
        "signature-revoked-key",
        "signature",
    );
    check(
        Refusal::SignatureRetiredKey,
        RefuseTampered,
        "signature-retired-key",
        "signature",
    );
    check(
        Refusal::SignatureInvalid,
        RefuseTampered,
        "signature-invalid",
        "signature",
    );
    check(Refusal::Schema, RefuseIncompatible, "schema", "schema");
    check(
        Refusal::EventType,
        RefuseIncompatible,
        "event-type",
        "event-type",
    );
    check(Refusal::Payload, RefuseTampered, "payload", "payload");
}

#[test]
fn pipeline_checks() {
    assert_eq!(check_schema_version(1), Ok(()));
    assert_eq!(check_schema_version(0), Err(Refusal::Schema));
    assert_eq!(check_schema_version(2), Err(Refusal::Schema));
    assert_eq!(check_route("t", "p", "t", "t", "p"), Ok(()));
    assert_eq!(check_route("t", "p", "u", "t", "p"), Err(Refusal::Route));
    assert_eq!(check_route("t", "p", "t", "u", "p"), Err(Refusal::Route));
    assert_eq!(check_route("t", "p", "t", "t", "q"), Err(Refusal::Route));
    assert_eq!(check_route("t", "p", "t", "T", "p"), Err(Refusal::Route));

    assert_eq!(
        refusal_for_signature_error(&SignatureError::Invalid),
        Refusal::SignatureInvalid
    );
    assert_eq!(
        refusal_for_schema_error(&SchemaError::UnknownEventType),
        Refusal::EventType
    );
    assert_eq!(
        refusal_for_schema_error(&SchemaError::Violation {
            pointer: String::new(),
            rule: crate::schema::Rule::Missing
        }),
        Refusal::Payload
    );
}

#[test]
fn envelope_errors_map_to_pipeline_refusals() {
    let base = serde_json::json!({
        "schema_version": 1, "event_type": "installation", "tenant_id": "t", "project_id": "p",
        "event_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "producer_sequence": 1,
        "occurred_at": "2025-01-02T03:04:05Z", "idempotency_key": "k", "producer_version": "v",
        "payload": {}, "integrity": {"algorithm": "Ed25519", "key_id": "k", "signature": ""}
    });
    let check = |pointer: &str, value: serde_json::Value, expected: Refusal| {
        let mut v = base.clone();
        *v.pointer_mut(pointer).expect("exists") = value;
        let err = decode_envelope(&serde_json::to_vec(&v).expect("json")).expect_err("refused");
        assert_eq!(
            refusal_for_envelope_error(&err),
            expected,
            "{pointer}: {err}"
        );
    };
    check("/tenant_id", "-bad".into(), Refusal::Route);
    check("/project_id", "".into(), Refusal::Route);
    check("/event_id", "x".into(), Refusal::Route);
    check("/idempotency_key", "".into(), Refusal::Route);
    check("/producer_sequence", 0.into(), Refusal::Route);
    check("/integrity/signature", "".into(), Refusal::SignatureInvalid);
    check(
        "/integrity/algorithm",
        "x".into(),
        Refusal::SignatureInvalid,
    );
    check("/payload", serde_json::json!([]), Refusal::Payload);
    check("/occurred_at", "yesterday".into(), Refusal::Payload);
    check("/event_type", "Bad".into(), Refusal::Payload);
    let err = decode_envelope(b"{").expect_err("malformed");
    assert_eq!(refusal_for_envelope_error(&err), Refusal::Payload);
}

/// Property tests of the cursor walk and of what a decision stores.
mod props {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// The cursor, stated independently: the largest c ≥ cursor with every sequence in
    /// cursor+1..=c retained.
    fn contiguous_end(cursor: u64, retained: &BTreeSet<u64>) -> u64 {
        let mut c = cursor;
        while c < u64::MAX && retained.contains(&(c + 1)) {
            c += 1;
        }
        c
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// The walk ends at the first missing sequence, never passes one, and never moves
        /// backwards.
        #[test]
        fn the_cursor_never_passes_a_missing_sequence(
            cursor in 0u64..40,
            retained in prop::collection::btree_set(0u64..80, 0..60),
        ) {
            let sorted: Vec<u64> = retained.iter().copied().collect();
            let walked = advance_cursor(cursor, &sorted);
            prop_assert_eq!(walked, contiguous_end(cursor, &retained));
            prop_assert!(walked >= cursor);
            prop_assert!((cursor + 1..=walked).all(|s| retained.contains(&s)));
            prop_assert!(!retained.contains(&(walked + 1)));
        }

        /// Envelopes arriving in any order, each walking the cursor over what is retained so
        /// far, leave the same cursor as the walk over all of them at once.
        #[test]
        fn arrival_order_does_not_matter(
            arrivals in prop::collection::vec(1u64..40, 0..50).prop_shuffle(),
        ) {
            let mut retained = BTreeSet::new();
            let mut cursor = 0;
            for seq in &arrivals {
                retained.insert(*seq);
                let above: Vec<u64> = retained.range(cursor + 1..).copied().collect();
                cursor = advance_cursor(cursor, &above);
                prop_assert_eq!(cursor, contiguous_end(0, &retained));
            }
        }

        /// Only the two accepts store; a duplicate or a conflict never moves anything; a new
        /// identity above the cursor is accepted whatever the floor.
        #[test]
        fn what_a_decision_stores(
            cursor in 0u64..20,
            floor in 0u64..20,
            seq in 1u64..30,
            match_event in any::<bool>(),
            same_content in any::<bool>(),
        ) {
            let found = if match_event {
                Found {
                    by_event_id: retained(if same_content { D } else { OTHER }, seq),
                    ..NONE
                }
            } else {
                NONE
            };
            let d = decide(
                &stream(cursor, floor),
                &Incoming { producer_sequence: seq, content_digest: D },
                &found,
            );
            prop_assert_eq!(
                d.store,
                matches!(d.outcome, Outcome::AcceptDelayed | Outcome::AcceptReordered)
            );
            if match_event {
                prop_assert!(!d.store);
                prop_assert_eq!(
                    d.outcome,
                    if same_content { Outcome::IgnoreDuplicate } else { Outcome::RefuseTampered }
                );
            } else if seq > cursor && seq >= floor {
                prop_assert_eq!(d.outcome, Outcome::AcceptDelayed);
            } else if seq < floor {
                prop_assert_eq!(d.outcome, Outcome::RefuseReplay);
            }
        }
    }
}
