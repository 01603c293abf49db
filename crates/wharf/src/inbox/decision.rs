//! The inbox decision for one verified envelope on a locked stream (SPEC §3.5), pure.
//!
//! Owns: given the stream's cursor and floor and the retained identities that share the
//! envelope's event id, idempotency key or sequence, which outcome applies. Must not know
//! storage, keys or time.
//!
//! Rules, in order:
//! 1. A retained identity with the same event id or idempotency key: same content digest ⇒
//!    `ignore-duplicate` (answering like the original), different ⇒ `refuse-tampered` with
//!    `event-id-conflict` / `idempotency-key-conflict`. Duplicates are checked before the floor,
//!    so a retry of an old accepted envelope is still acknowledged after the floor passed it.
//! 2. The sequence already belongs to another identity ⇒ `refuse-tampered` / `sequence-conflict`.
//! 3. Below the replay floor ⇒ `refuse-replay` / `below-floor`.
//! 4. At or below the cursor (the cursor passed it by an operator skip) ⇒ `accept-reordered` /
//!    `skipped-sequence`; above it ⇒ `accept-delayed` / `accepted`.

/// The public v1 outcome terms (SPEC §3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// New identity with sequence above the cursor; stored.
    AcceptDelayed,
    /// New identity with floor ≤ sequence ≤ cursor (after an operator skip); stored.
    AcceptReordered,
    /// Same event id or idempotency key with the same content as a retained identity.
    IgnoreDuplicate,
    /// Below the replay floor and not a duplicate.
    RefuseReplay,
    /// Schema version (or an event type this server has no schema for).
    RefuseIncompatible,
    /// Route, signature, payload, or identity conflict.
    RefuseTampered,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 6] = [
        Outcome::AcceptDelayed,
        Outcome::AcceptReordered,
        Outcome::IgnoreDuplicate,
        Outcome::RefuseReplay,
        Outcome::RefuseIncompatible,
        Outcome::RefuseTampered,
    ];

    /// The public v1 term.
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::AcceptDelayed => "accept-delayed",
            Outcome::AcceptReordered => "accept-reordered",
            Outcome::IgnoreDuplicate => "ignore-duplicate",
            Outcome::RefuseReplay => "refuse-replay",
            Outcome::RefuseIncompatible => "refuse-incompatible",
            Outcome::RefuseTampered => "refuse-tampered",
        }
    }

    /// Parses a public v1 term.
    pub fn parse(s: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// The HTTP status SPEC §3.5 gives it.
    pub const fn http_status(self) -> u16 {
        match self {
            Outcome::AcceptDelayed | Outcome::AcceptReordered | Outcome::IgnoreDuplicate => 200,
            Outcome::RefuseReplay => 409,
            Outcome::RefuseIncompatible | Outcome::RefuseTampered => 422,
        }
    }

    /// Whether the envelope becomes a new retained identity.
    pub const fn is_accept(self) -> bool {
        matches!(self, Outcome::AcceptDelayed | Outcome::AcceptReordered)
    }
}

/// A locked stream's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamState {
    /// The contiguous cursor (0: nothing yet).
    pub cursor: u64,
    /// The replay floor (≥ 1).
    pub floor: u64,
}

/// The identity facts the decision compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts<'a> {
    /// Event id.
    pub event_id: &'a str,
    /// Idempotency key.
    pub idempotency_key: &'a str,
    /// Producer sequence.
    pub sequence: u64,
    /// Content digest (the envelope without integrity).
    pub digest: &'a [u8],
}

/// The decision for one envelope. `duplicate_of` is the matched identity for
/// `ignore-duplicate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision<'k> {
    /// The outcome.
    pub outcome: Outcome,
    /// The stable reason.
    pub reason: &'static str,
    /// For a duplicate: which retained identity it repeats.
    pub duplicate_of: Option<Facts<'k>>,
}

/// Decides one envelope. `by_event_id`, `by_key`, `by_sequence` are the retained identities (if
/// any) with the same event id, idempotency key and sequence as `incoming`.
pub fn decide<'k>(
    state: StreamState,
    incoming: Facts<'_>,
    by_event_id: Option<Facts<'k>>,
    by_key: Option<Facts<'k>>,
    by_sequence: Option<Facts<'k>>,
) -> Decision<'k> {
    let refuse = |reason| Decision {
        outcome: Outcome::RefuseTampered,
        reason,
        duplicate_of: None,
    };
    for (matched, conflict) in [
        (by_event_id, "event-id-conflict"),
        (by_key, "idempotency-key-conflict"),
    ] {
        if let Some(known) = matched {
            return if known.digest == incoming.digest {
                Decision {
                    outcome: Outcome::IgnoreDuplicate,
                    reason: "duplicate",
                    duplicate_of: Some(known),
                }
            } else {
                refuse(conflict)
            };
        }
    }
    if by_sequence.is_some() {
        return refuse("sequence-conflict");
    }
    let (outcome, reason) = if incoming.sequence < state.floor {
        (Outcome::RefuseReplay, "below-floor")
    } else if incoming.sequence <= state.cursor {
        (Outcome::AcceptReordered, "skipped-sequence")
    } else {
        (Outcome::AcceptDelayed, "accepted")
    };
    Decision {
        outcome,
        reason,
        duplicate_of: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f<'a>(event_id: &'a str, key: &'a str, sequence: u64, digest: &'a [u8]) -> Facts<'a> {
        Facts {
            event_id,
            idempotency_key: key,
            sequence,
            digest,
        }
    }

    /// (name, incoming, matches by event id / key / sequence, expected outcome, reason).
    type Case<'a> = (&'a str, Facts<'a>, [Option<Facts<'a>>; 3], Outcome, &'a str);

    #[test]
    fn table() {
        let state = StreamState {
            cursor: 5,
            floor: 3,
        };
        let known = f("E1", "K1", 4, b"d1");
        let cases: [Case; 9] = [
            (
                "new ahead",
                f("E9", "K9", 7, b"x"),
                [None, None, None],
                Outcome::AcceptDelayed,
                "accepted",
            ),
            (
                "next",
                f("E9", "K9", 6, b"x"),
                [None, None, None],
                Outcome::AcceptDelayed,
                "accepted",
            ),
            (
                "skipped",
                f("E9", "K9", 5, b"x"),
                [None, None, None],
                Outcome::AcceptReordered,
                "skipped-sequence",
            ),
            (
                "at floor",
                f("E9", "K9", 3, b"x"),
                [None, None, None],
                Outcome::AcceptReordered,
                "skipped-sequence",
            ),
            (
                "below floor",
                f("E9", "K9", 2, b"x"),
                [None, None, None],
                Outcome::RefuseReplay,
                "below-floor",
            ),
            (
                "duplicate by id",
                f("E1", "K1", 4, b"d1"),
                [Some(known), Some(known), Some(known)],
                Outcome::IgnoreDuplicate,
                "duplicate",
            ),
            (
                "duplicate below floor",
                f("E1", "K1", 1, b"d1"),
                [Some(known), None, None],
                Outcome::IgnoreDuplicate,
                "duplicate",
            ),
            (
                "id conflict",
                f("E1", "K2", 4, b"zz"),
                [Some(known), None, Some(known)],
                Outcome::RefuseTampered,
                "event-id-conflict",
            ),
            (
                "key conflict",
                f("E2", "K1", 8, b"zz"),
                [None, Some(known), None],
                Outcome::RefuseTampered,
                "idempotency-key-conflict",
            ),
        ];
        for (name, incoming, [a, b, c], outcome, reason) in cases {
            let d = decide(state, incoming, a, b, c);
            assert_eq!((d.outcome, d.reason), (outcome, reason), "{name}");
            assert_eq!(
                d.duplicate_of.is_some(),
                outcome == Outcome::IgnoreDuplicate,
                "{name}"
            );
        }
        let d = decide(state, f("E2", "K2", 4, b"zz"), None, None, Some(known));
        assert_eq!(
            (d.outcome, d.reason),
            (Outcome::RefuseTampered, "sequence-conflict")
        );
    }

    #[test]
    fn terms_round_trip() {
        for o in Outcome::ALL {
            assert_eq!(Outcome::parse(o.as_str()), Some(o));
        }
        assert_eq!(Outcome::RefuseReplay.http_status(), 409);
    }
}
