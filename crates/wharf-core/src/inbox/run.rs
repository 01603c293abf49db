//! One locked stream's decisions over a batch of envelopes, in request order (SPEC §3.4 step 8
//! for many envelopes at once), as a pure state machine.
//!
//! Owns: what each envelope of a batch is decided against — the stream's running cursor, the
//! identities retained before the batch and those accepted earlier in it — and the cursor's
//! advance through the sequences retained beyond it. Must not know SQL, locks or how the store
//! found the retained identities: the caller locks the stream, feeds [`StreamRun::retained`] and
//! [`StreamRun::retained_ahead`] with what it read, calls [`StreamRun::decide`] for each envelope
//! in order, and writes what was stored with the cursor [`StreamRun::state`] reports.
//!
//! Deciding envelope by envelope here is what makes a batch answer exactly as the same envelopes
//! sent one request at a time would: each decision is [`super::decide`] against the state the
//! earlier ones left.

use std::collections::{BTreeSet, HashMap};

use super::{Decision, Found, Incoming, Outcome, Retained, StreamState, advance_cursor, decide};

/// A retained identity known to the run: read from the store, or accepted earlier in the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known<T> {
    /// Its producer sequence.
    pub sequence: u64,
    /// Its content digest.
    pub digest: [u8; 32],
    /// How it was accepted (`accept-delayed` or `accept-reordered`).
    pub outcome: Outcome,
    /// What the caller keeps with it (wharf: the correlation id of the request that accepted
    /// it), handed back when a duplicate repeats that acceptance.
    pub tag: T,
}

/// An incoming envelope's identities, as the run compares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity<'a> {
    /// Its event id.
    pub event_id: &'a str,
    /// Its idempotency key.
    pub idempotency_key: &'a str,
    /// Its producer sequence (≥ 1, checked by decoding).
    pub producer_sequence: u64,
    /// Its content digest.
    pub content_digest: [u8; 32],
}

/// The decision for one envelope of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDecision<T> {
    /// Outcome, reason, and whether to store it.
    pub decision: Decision,
    /// For `ignore-duplicate`: the acceptance it repeats (outcome and tag), found by event id,
    /// else by idempotency key (same content means the same event), when it is known.
    pub original: Option<(Outcome, T)>,
}

/// One locked stream's running state over a batch.
#[derive(Debug, Clone)]
pub struct StreamRun<T> {
    state: StreamState,
    /// Retained sequences beyond the cursor, for the walk.
    pending: BTreeSet<u64>,
    known: Vec<Known<T>>,
    by_event_id: HashMap<String, usize>,
    by_key: HashMap<String, usize>,
    by_sequence: HashMap<u64, usize>,
    stored: bool,
}

impl<T: Clone> StreamRun<T> {
    /// A run on a stream as locked: nothing known yet.
    pub fn new(state: StreamState) -> StreamRun<T> {
        StreamRun {
            state,
            pending: BTreeSet::new(),
            known: Vec::new(),
            by_event_id: HashMap::new(),
            by_key: HashMap::new(),
            by_sequence: HashMap::new(),
            stored: false,
        }
    }

    /// A retained identity the store found for one of the batch's envelopes. The same identity
    /// given twice is harmless (the later one wins, and they are equal).
    pub fn retained(&mut self, event_id: String, idempotency_key: String, known: Known<T>) {
        let index = self.known.len();
        self.by_event_id.insert(event_id, index);
        self.by_key.insert(idempotency_key, index);
        self.by_sequence.insert(known.sequence, index);
        self.known.push(known);
    }

    /// A sequence the store retains beyond the cursor (the cursor walks through it once the
    /// sequences before it arrive). Values at or below the cursor are ignored.
    pub fn retained_ahead(&mut self, sequence: u64) {
        if sequence > self.state.acknowledged_sequence {
            self.pending.insert(sequence);
        }
    }

    /// Decides `e` against the stream as the envelopes before it left it; an envelope to store
    /// is remembered (so a repeat later in the batch is its duplicate) and moves the cursor
    /// through every sequence now contiguous.
    pub fn decide(&mut self, e: Identity<'_>, tag: T) -> RunDecision<T> {
        let incoming = Incoming {
            producer_sequence: e.producer_sequence,
            content_digest: e.content_digest,
        };
        let decision = decide(&self.state, &incoming, &self.found(&e));
        let original = (decision.outcome == Outcome::IgnoreDuplicate)
            .then(|| self.original(&e))
            .flatten();
        if decision.store {
            self.stored = true;
            self.retained(
                e.event_id.to_owned(),
                e.idempotency_key.to_owned(),
                Known {
                    sequence: e.producer_sequence,
                    digest: e.content_digest,
                    outcome: decision.outcome,
                    tag,
                },
            );
            let cursor = self.state.acknowledged_sequence;
            if e.producer_sequence > cursor {
                self.pending.insert(e.producer_sequence);
                if Some(e.producer_sequence) == cursor.checked_add(1) {
                    let run: Vec<u64> = self.pending.iter().copied().collect();
                    let walked = advance_cursor(cursor, &run);
                    self.state.acknowledged_sequence = walked;
                    // Keep only what is still ahead, so each walk costs what is pending.
                    self.pending = self.pending.split_off(&walked.saturating_add(1));
                }
            }
        }
        RunDecision { decision, original }
    }

    /// The stream's state after the decisions so far: the cursor to write.
    pub fn state(&self) -> StreamState {
        self.state
    }

    /// Whether any decision so far stored an envelope.
    pub fn stored_any(&self) -> bool {
        self.stored
    }

    fn get(&self, index: Option<&usize>) -> Option<&Known<T>> {
        index.map(|&i| &self.known[i])
    }

    fn found(&self, e: &Identity<'_>) -> Found {
        let retained = |k: &Known<T>| Retained {
            content_digest: k.digest,
            producer_sequence: k.sequence,
        };
        Found {
            by_event_id: self.get(self.by_event_id.get(e.event_id)).map(retained),
            by_idempotency_key: self.get(self.by_key.get(e.idempotency_key)).map(retained),
            by_sequence: self
                .get(self.by_sequence.get(&e.producer_sequence))
                .map(|k| k.digest),
        }
    }

    fn original(&self, e: &Identity<'_>) -> Option<(Outcome, T)> {
        self.get(self.by_event_id.get(e.event_id))
            .or_else(|| self.get(self.by_key.get(e.idempotency_key)))
            .map(|k| (k.outcome, k.tag.clone()))
    }
}

#[cfg(test)]
mod tests {
    //! Batches as tables: each row is a stream as locked, what the store retained, the batch's
    //! envelopes in order, and the (outcome, reason) of each with the cursor afterwards.

    use super::super::reason::*;
    use super::*;

    const A: [u8; 32] = [0xa1; 32];
    const B: [u8; 32] = [0xb2; 32];

    /// An envelope of a test batch: event id, idempotency key, sequence, digest.
    type Env = (&'static str, &'static str, u64, [u8; 32]);
    /// An identity retained before the batch: event id, key, sequence, digest, outcome, tag.
    type Kept = (
        &'static str,
        &'static str,
        u64,
        [u8; 32],
        Outcome,
        &'static str,
    );

    struct Case {
        name: &'static str,
        cursor: u64,
        floor: u64,
        /// Retained before the batch.
        retained: &'static [Kept],
        /// Retained beyond the cursor (the store's `ahead` read).
        ahead: &'static [u64],
        batch: &'static [Env],
        /// Per envelope: outcome, reason, the original's tag for a duplicate.
        expected: &'static [(Outcome, &'static str, Option<&'static str>)],
        cursor_after: u64,
        stored: bool,
    }

    fn run(case: &Case) {
        let mut run = StreamRun::new(StreamState {
            acknowledged_sequence: case.cursor,
            replay_floor: case.floor,
        });
        for &(event_id, key, sequence, digest, outcome, tag) in case.retained {
            run.retained(
                event_id.to_owned(),
                key.to_owned(),
                Known {
                    sequence,
                    digest,
                    outcome,
                    tag: tag.to_owned(),
                },
            );
        }
        for &sequence in case.ahead {
            run.retained_ahead(sequence);
        }
        assert_eq!(case.batch.len(), case.expected.len(), "{}", case.name);
        for (i, (&(event_id, key, sequence, digest), expected)) in
            case.batch.iter().zip(case.expected).enumerate()
        {
            let got = run.decide(
                Identity {
                    event_id,
                    idempotency_key: key,
                    producer_sequence: sequence,
                    content_digest: digest,
                },
                format!("req-{i}"),
            );
            assert_eq!(
                (got.decision.outcome, got.decision.reason),
                (expected.0, expected.1),
                "{}: envelope {i}",
                case.name
            );
            assert_eq!(
                got.decision.store,
                matches!(
                    expected.0,
                    Outcome::AcceptDelayed | Outcome::AcceptReordered
                ),
                "{}: envelope {i} stored",
                case.name
            );
            let original_tag = got.original.as_ref().map(|(_, tag)| tag.as_str());
            assert_eq!(
                original_tag, expected.2,
                "{}: envelope {i} original",
                case.name
            );
        }
        assert_eq!(
            run.state().acknowledged_sequence,
            case.cursor_after,
            "{}",
            case.name
        );
        assert_eq!(run.state().replay_floor, case.floor, "{}: floor", case.name);
        assert_eq!(run.stored_any(), case.stored, "{}: stored", case.name);
    }

    #[test]
    fn batches() {
        use Outcome::*;
        let cases = [
            Case {
                name: "in order from an empty stream",
                cursor: 0,
                floor: 0,
                retained: &[],
                ahead: &[],
                batch: &[("e1", "k1", 1, A), ("e2", "k2", 2, A), ("e3", "k3", 3, A)],
                expected: &[
                    (AcceptDelayed, IN_ORDER, None),
                    (AcceptDelayed, IN_ORDER, None),
                    (AcceptDelayed, IN_ORDER, None),
                ],
                cursor_after: 3,
                stored: true,
            },
            Case {
                name: "a gap filled later in the same batch moves the cursor through it",
                cursor: 0,
                floor: 0,
                retained: &[],
                ahead: &[],
                batch: &[("e3", "k3", 3, A), ("e2", "k2", 2, A), ("e1", "k1", 1, A)],
                expected: &[
                    (AcceptDelayed, GAP, None),
                    (AcceptDelayed, GAP, None),
                    (AcceptDelayed, IN_ORDER, None),
                ],
                cursor_after: 3,
                stored: true,
            },
            Case {
                name: "sequences retained beyond the cursor before the batch are walked",
                cursor: 4,
                floor: 0,
                retained: &[],
                ahead: &[6, 7, 9],
                batch: &[("e5", "k5", 5, A)],
                expected: &[(AcceptDelayed, IN_ORDER, None)],
                cursor_after: 7,
                stored: true,
            },
            Case {
                name: "ahead values at or below the cursor are ignored",
                cursor: 4,
                floor: 0,
                retained: &[],
                ahead: &[3, 4],
                batch: &[("e6", "k6", 6, A)],
                expected: &[(AcceptDelayed, GAP, None)],
                cursor_after: 4,
                stored: true,
            },
            Case {
                name: "an envelope repeated in its own batch is its own duplicate",
                cursor: 0,
                floor: 0,
                retained: &[],
                ahead: &[],
                batch: &[("e1", "k1", 1, A), ("e1", "k1", 1, A)],
                expected: &[
                    (AcceptDelayed, IN_ORDER, None),
                    (IgnoreDuplicate, DUPLICATE, Some("req-0")),
                ],
                cursor_after: 1,
                stored: true,
            },
            Case {
                name: "a second meaning for a sequence in the same batch is tampered",
                cursor: 0,
                floor: 0,
                retained: &[],
                ahead: &[],
                batch: &[("e1", "k1", 1, A), ("e9", "k9", 1, B)],
                expected: &[
                    (AcceptDelayed, IN_ORDER, None),
                    (RefuseTampered, IDENTITY_CONFLICT, None),
                ],
                cursor_after: 1,
                stored: true,
            },
            Case {
                name: "a duplicate of a retained identity repeats its acceptance, even below the floor",
                cursor: 10,
                floor: 8,
                retained: &[("e2", "k2", 2, A, AcceptDelayed, "old-request")],
                ahead: &[],
                batch: &[("e2", "k2", 2, A), ("x", "k2", 2, A)],
                expected: &[
                    (IgnoreDuplicate, DUPLICATE, Some("old-request")),
                    (IgnoreDuplicate, DUPLICATE, Some("old-request")),
                ],
                cursor_after: 10,
                stored: false,
            },
            Case {
                name: "below the floor refused, at or below the cursor reordered, above delayed",
                cursor: 10,
                floor: 5,
                retained: &[],
                ahead: &[],
                batch: &[
                    ("e4", "k4", 4, A),
                    ("e7", "k7", 7, A),
                    ("e12", "k12", 12, A),
                ],
                expected: &[
                    (RefuseReplay, REPLAY, None),
                    (AcceptReordered, REORDERED, None),
                    (AcceptDelayed, GAP, None),
                ],
                cursor_after: 10,
                stored: true,
            },
            Case {
                name: "a refusal in the middle does not move or block the cursor",
                cursor: 0,
                floor: 0,
                retained: &[("old", "k2", 7, B, AcceptDelayed, "t")],
                ahead: &[7],
                batch: &[("e1", "k1", 1, A), ("e2", "k2", 2, A), ("e2b", "k2b", 2, A)],
                expected: &[
                    (AcceptDelayed, IN_ORDER, None),
                    (RefuseTampered, IDENTITY_CONFLICT, None),
                    (AcceptDelayed, IN_ORDER, None),
                ],
                cursor_after: 2,
                stored: true,
            },
            Case {
                name: "nothing stored leaves the cursor and says so",
                cursor: 3,
                floor: 3,
                retained: &[],
                ahead: &[],
                batch: &[("e1", "k1", 1, A)],
                expected: &[(RefuseReplay, REPLAY, None)],
                cursor_after: 3,
                stored: false,
            },
            Case {
                name: "the cursor stops at u64::MAX without overflow",
                cursor: u64::MAX - 1,
                floor: 0,
                retained: &[],
                ahead: &[],
                batch: &[("e", "k", u64::MAX, A)],
                expected: &[(AcceptDelayed, IN_ORDER, None)],
                cursor_after: u64::MAX,
                stored: true,
            },
        ];
        for case in &cases {
            run(case);
        }
    }
}
